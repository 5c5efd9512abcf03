/* Shared helpers of the clock unit tests: a seeded RNG, a probe simulator with a known
 * truth, and a database with meridian's schema. Header-only (static functions). */
#ifndef MRD_CLOCK_TESTUTIL_H
#define MRD_CLOCK_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "check.h"
#include "check_sql.h"
#include "clock.h"

static uint64_t tu_rng_state = 0x9e3779b97f4a7c15ULL;

static inline void tu_seed(uint64_t s)
{
    tu_rng_state = s ? s : 1;
}

/* xorshift64*: uniform 64-bit. */
static inline uint64_t tu_next(void)
{
    uint64_t x = tu_rng_state;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    tu_rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, 1). */
static inline double tu_unif(void)
{
    return (double)(tu_next() >> 11) / 9007199254740992.0;
}

/* Exponential with the given mean. */
static inline double tu_exp(double mean)
{
    return mean > 0 ? -mean * log(1.0 - tu_unif()) : 0;
}

/* A rank's true clock: global = local + off + ppm_k (local - l0) / 1e6, where the drift
 * changes from ppm0 to ppm1 at local l0 + knee (continuous), so a two-piece truth. */
struct tu_clock {
    int64_t l0, off, knee;
    double ppm0, ppm1;
};

static inline int64_t tu_true_global(const struct tu_clock *c, int64_t local)
{
    long double d = (long double)(local - c->l0);
    long double k = (long double)c->knee;
    long double g = d <= k ? d * c->ppm0 / 1e6L : k * c->ppm0 / 1e6L + (d - k) * c->ppm1 / 1e6L;
    return local + c->off + (int64_t)llroundl(g);
}

/* Inverse of tu_true_global (to well under 1 ns). */
static inline int64_t tu_true_local(const struct tu_clock *c, int64_t global)
{
    int64_t l = global - c->off;
    for (int i = 0; i < 4; i++)
        l -= tu_true_global(c, l) - global;
    return l;
}

/* Path model of one probe: each direction takes floor + exponential(mean) (+ asym on the
 * way out), the aggregator answers after `proc` ns. */
struct tu_path {
    double floor_ns, mean_ns, asym_ns, proc_ns;
    double unif_ns; /* plus uniform [0, unif_ns) per direction */
};

/* One probe sent at local t0. */
static inline struct mrd_clock_sample tu_probe(const struct tu_clock *c, const struct tu_path *p,
                                               int64_t t0)
{
    struct mrd_clock_sample s;
    double fwd = p->floor_ns + p->asym_ns + tu_exp(p->mean_ns) + p->unif_ns * tu_unif();
    double back = p->floor_ns + tu_exp(p->mean_ns) + p->unif_ns * tu_unif();
    s.t0 = t0;
    s.t1 = tu_true_global(c, t0) + (int64_t)llround(fwd);
    s.t2 = s.t1 + (int64_t)llround(p->proc_ns);
    s.t3 = tu_true_local(c, s.t2 + (int64_t)llround(back));
    return s;
}

/* Reads meridian's schema (path compiled in) and applies it to db. */
static inline void tu_apply_schema(sqlite3 *db)
{
    FILE *f = fopen(MRD_SCHEMA_SQL, "r");
    CHECK(f != NULL);
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *err = NULL;
    if (sqlite3_exec(db, buf, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "schema: %s\n", err);
        exit(1);
    }
}

static inline sqlite3 *tu_open_db(void)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    tu_apply_schema(db);
    return db;
}

static inline void tu_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sql: %s: %s\n", sql, err);
        exit(1);
    }
}


#endif
