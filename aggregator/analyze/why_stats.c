/* The why pass' tables: message sizes of the matched instances, collective statistics per
 * (communicator, function, message size), the top kernels per rank, and the demangler every
 * output names kernels with (definitions in analyze.h and aggregator/SCHEMA.md).
 *
 * Where it sits: part of mrd_analyze, called by why.c's mrd__why_finish after the matching
 * handed it the instances; the report, JSON and Perfetto exports read the results (and
 * mrd_analyze_demangle_cached).
 *
 * Workload: one ordered pass over nccl_ops' instance keys (sizes), two grouped queries over
 * nccl_ops (algorithm and protocol), one grouped pass over kernels (totals); the statistics
 * sort each group's durations once (8 bytes per instance). Demangling: __cxa_demangle from
 * libstdc++.so.6, loaded with dlopen on first use (no build or run dependency: without it
 * names stay mangled), each distinct name about once per thread through a small cache.
 */
#include "why_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cmp.h"
#include "error.h"

/* ---- demangling: the C++ runtime's __cxa_demangle, loaded once ---- */

typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);
static cxa_demangle_fn demangle_fn;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void demangle_load(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
    if (h)
        demangle_fn = (cxa_demangle_fn)(uintptr_t)dlsym(h, "__cxa_demangle");
}

int mrd_analyze_demangle(const char *name, char *buf, size_t n)
{
    int status = -1;
    char *d = NULL;
    if (!name)
        name = "?";
    if (strncmp(name, "_Z", 2) == 0) {
        pthread_once(&demangle_once, demangle_load);
        if (demangle_fn)
            d = demangle_fn(name, NULL, NULL, &status);
    }
    snprintf(buf, n, "%s", d && status == 0 ? d : name);
    int ok = d && status == 0;
    free(d);
    return ok;
}

#define MRD_DEMANGLE_SLOTS 256 /* names remembered per thread (direct-mapped by hash) */

struct demangle_slot {
    char *mangled, *plain;
};
static _Thread_local struct demangle_slot demangle_cache[MRD_DEMANGLE_SLOTS];

const char *mrd_analyze_demangle_cached(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    int status = -1;
    if (!name || strncmp(name, "_Z", 2) != 0)
        return name;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    struct demangle_slot *slot = &demangle_cache[h % MRD_DEMANGLE_SLOTS];
    if (slot->mangled && strcmp(slot->mangled, name) == 0)
        return slot->plain;
    pthread_once(&demangle_once, demangle_load);
    if (!demangle_fn)
        return name;
    char *d = demangle_fn(name, NULL, NULL, &status);
    char *m = d && status == 0 ? strdup(name) : NULL;
    if (!m) {
        free(d);
        return name;
    }
    free(slot->mangled);
    free(slot->plain);
    slot->mangled = m;
    slot->plain = d;
    return d;
}

/* ---- message sizes of the instances, by walking the matching's key order again ---- */

static int load_bytes(sqlite3 *db, struct mrd__why *w)
{
    sqlite3_stmt *st = NULL;
    uint64_t ordinal = 0;
    size_t i = 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_why_instance_bytes, -1, &st, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    while (i < w->ninst && sqlite3_step(st) == SQLITE_ROW) {
        if (w->inst[i].ordinal == ordinal &&
            w->inst[i].comm_hash == (uint64_t)sqlite3_column_int64(st, 0) &&
            w->inst[i].seq == (uint64_t)sqlite3_column_int64(st, 1)) {
            w->inst[i].bytes = sqlite3_column_int64(st, 2);
            i++;
        }
        ordinal++;
    }
    sqlite3_finalize(st);
    return i == w->ninst ? 0 : mrd__analyze_sqlerr(db);
}

/* ---- collective statistics ---- */

/* nearest rank: the smallest value with at least p percent of the values at or below */
static int64_t nearest_rank(const int64_t *v, size_t n, int p)
{
    size_t k = ((size_t)p * n + 99) / 100;
    return v[k ? k - 1 : 0];
}

/* nccl-tests' size (bytes the test's "size" column shows) and bus bandwidth factor. NCCL
 * counts per call: AllGather its send count, ReduceScatter its receive count, so their
 * nccl-tests size is bytes x nranks. */
static void size_factor(const char *func, int64_t bytes, int n, double *size, double *factor)
{
    *size = (double)bytes;
    *factor = 1.0;
    if (n < 1)
        n = 1;
    if (strcmp(func, "AllReduce") == 0) {
        *factor = 2.0 * (n - 1) / n;
    } else if (strcmp(func, "AllGather") == 0 || strcmp(func, "ReduceScatter") == 0 ||
               strcmp(func, "AlltoAll") == 0 || strcmp(func, "AllToAll") == 0) {
        *size = (double)bytes * n;
        *factor = (double)(n - 1) / n;
    }
}

static int coll_stats(sqlite3 *db, struct mrd__why *w, struct mrd_an_why *y)
{
    int64_t *dur = NULL;
    sqlite3_stmt *st = NULL;
    int rc;
    for (size_t i = 0; i < w->ninst; i++) {
        const struct mrd__why_inst *x = &w->inst[i];
        const char *f = w->funcs[x->func];
        int g;
        for (g = 0; g < y->nstats; g++)
            if (y->stats[g].comm_hash == x->comm_hash && y->stats[g].bytes == x->bytes &&
                strcmp(y->stats[g].func, f) == 0)
                break;
        if (g == y->nstats) {
            if (y->nstats == MRD_WHY_MAX_STATS) {
                y->stats_other++;
                continue;
            }
            y->nstats++;
            y->stats[g].comm_hash = x->comm_hash;
            y->stats[g].bytes = x->bytes;
            snprintf(y->stats[g].func, sizeof(y->stats[g].func), "%s", f);
        }
        y->stats[g].count++;
        if (x->nranks > y->stats[g].nranks)
            y->stats[g].nranks = x->nranks;
    }
    dur = malloc((w->ninst ? w->ninst : 1) * sizeof(int64_t));
    if (!dur)
        return -ENOMEM;
    for (int g = 0; g < y->nstats; g++) {
        struct mrd_an_coll_stat *s = &y->stats[g];
        size_t n = 0;
        for (size_t i = 0; i < w->ninst; i++) {
            const struct mrd__why_inst *x = &w->inst[i];
            if (x->comm_hash == s->comm_hash && x->bytes == s->bytes &&
                strcmp(w->funcs[x->func], s->func) == 0)
                dur[n++] = x->max_end - x->last_start;
        }
        qsort(dur, n, sizeof(int64_t), mrd_cmp_int64);
        s->p50_ns = nearest_rank(dur, n, 50);
        s->p90_ns = nearest_rank(dur, n, 90);
        s->p99_ns = nearest_rank(dur, n, 99);
        double size, factor;
        size_factor(s->func, s->bytes, s->nranks, &size, &factor);
        s->algbw_gbs = s->p50_ns > 0 ? size / (double)s->p50_ns : 0; /* bytes/ns = GB/s */
        s->busbw_gbs = s->algbw_gbs * factor;
    }
    free(dur);
    /* the algorithm and protocol each rank chose most often, per group */
    if (sqlite3_prepare_v2(db, mrd_db_sql_why_algo_proto, -1, &st, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    int last_rank = -1;
    struct mrd_an_coll_stat *prev = NULL;
    char first[48];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint64_t comm = (uint64_t)sqlite3_column_int64(st, 0);
        const char *f = (const char *)sqlite3_column_text(st, 1);
        int64_t bytes = sqlite3_column_int64(st, 2);
        int rank = sqlite3_column_int(st, 3);
        const char *al = (const char *)sqlite3_column_text(st, 4);
        const char *pr = (const char *)sqlite3_column_text(st, 5);
        struct mrd_an_coll_stat *s = NULL;
        for (int g = 0; g < y->nstats && f; g++)
            if (y->stats[g].comm_hash == comm && y->stats[g].bytes == bytes &&
                strcmp(y->stats[g].func, f) == 0)
                s = &y->stats[g];
        if (!s)
            continue;
        if (s != prev)
            last_rank = -1, prev = s;
        if (rank == last_rank)
            continue; /* rows of a rank come most frequent first */
        last_rank = rank;
        char ap[48];
        snprintf(ap, sizeof(ap), "%s/%s", al ? al : "?", pr ? pr : "?");
        size_t len = strlen(s->algo_proto);
        if (len == 0) { /* the lowest rank's choice, then each rank that differs from it */
            snprintf(first, sizeof(first), "%s", ap);
            snprintf(s->algo_proto, sizeof(s->algo_proto), "%s", ap);
        } else if (strcmp(first, ap) != 0) {
            if (len + 1 < sizeof(s->algo_proto))
                snprintf(s->algo_proto + len, sizeof(s->algo_proto) - len, "; rank %d: %s", rank,
                         ap);
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    /* the flag: some instance of the group ran with different choices on its ranks */
    if (sqlite3_prepare_v2(db, mrd_db_sql_why_mixed, -1, &st, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint64_t comm = (uint64_t)sqlite3_column_int64(st, 0);
        const char *f = (const char *)sqlite3_column_text(st, 1);
        int64_t bytes = sqlite3_column_int64(st, 2);
        for (int g = 0; g < y->nstats && f; g++)
            if (y->stats[g].comm_hash == comm && y->stats[g].bytes == bytes &&
                strcmp(y->stats[g].func, f) == 0)
                y->stats[g].differ = 1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : mrd__analyze_sqlerr(db);
}

/* ---- top kernels per rank ---- */

static size_t tally_slot(const struct mrd__why *w, int64_t name_id)
{
    size_t mask = w->tally_cap - 1;
    size_t i = (size_t)((uint64_t)name_id * 0x9e3779b97f4a7c15ull >> 17) & mask;
    while (w->tally[i].used && w->tally[i].name_id != name_id)
        i = (i + 1) & mask;
    return i;
}

static int tally_grow(struct mrd__why *w)
{
    size_t ncap = w->tally_cap ? w->tally_cap * 2 : 64;
    struct mrd__why_ktally *old = w->tally, *nt = calloc(ncap, sizeof(*nt));
    size_t ocap = w->tally_cap;
    if (!nt)
        return -ENOMEM;
    w->tally = nt;
    w->tally_cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].used)
            w->tally[tally_slot(w, old[i].name_id)] = old[i];
    free(old);
    return 0;
}

void mrd__why_kernel_add(struct mrd__why *w, int64_t name_id, int64_t ns)
{
    if (w->enomem)
        return;
    if (2 * (w->tally_n + 1) > w->tally_cap && tally_grow(w) < 0) {
        w->enomem = 1;
        return;
    }
    struct mrd__why_ktally *t = &w->tally[tally_slot(w, name_id)];
    if (!t->used) {
        t->used = 1;
        t->name_id = name_id;
        w->tally_n++;
    }
    t->count++;
    t->total_ns += ns;
    w->tally_total_ns += ns;
}

struct named_tally {
    const struct mrd__why_ktally *t;
    char *name; /* NULL: no string (a NULL name_id, or an id strings lacks) */
};

static int cmp_named_tally(const void *x, const void *y)
{
    const struct named_tally *a = x, *b = y;
    if (a->t->total_ns != b->t->total_ns)
        return a->t->total_ns > b->t->total_ns ? -1 : 1;
    if (!a->name || !b->name)
        return !b->name - !a->name; /* NULL first */
    return strcmp(a->name, b->name);
}

static void tally_clear(struct mrd__why *w)
{
    if (w->tally)
        memset(w->tally, 0, w->tally_cap * sizeof(*w->tally));
    w->tally_n = 0;
    w->tally_total_ns = 0;
}

int mrd__why_kernel_rank_end(struct mrd__why *w, sqlite3_stmt *name_st, int rank)
{
    struct named_tally *v = NULL;
    size_t n = 0;
    int rc = -ENOMEM;
    if (w->enomem)
        goto done;
    if (w->tally_n == 0) {
        rc = 0;
        goto done;
    }
    v = calloc(w->tally_n, sizeof(*v));
    if (!v)
        goto done;
    for (size_t i = 0; i < w->tally_cap; i++) {
        if (!w->tally[i].used)
            continue;
        struct named_tally *e = &v[n++];
        e->t = &w->tally[i];
        if (e->t->name_id == INT64_MIN)
            continue;
        sqlite3_reset(name_st);
        sqlite3_bind_int64(name_st, 1, e->t->name_id);
        const unsigned char *txt =
            sqlite3_step(name_st) == SQLITE_ROW ? sqlite3_column_text(name_st, 0) : NULL;
        if (txt && !(e->name = strdup((const char *)txt)))
            goto done;
    }
    qsort(v, n, sizeof(*v), cmp_named_tally);
    size_t keep = n < MRD_WHY_TOP_KERNELS ? n : MRD_WHY_TOP_KERNELS;
    if (keep && mrd_array_reserve(&w->top, &w->cap_top, w->ntop + keep - 1, sizeof(*w->top),
                                  64 * MRD_WHY_TOP_KERNELS, 0) < 0)
        goto done;
    for (size_t i = 0; i < keep; i++) {
        struct mrd_an_kernel_top *k = &w->top[w->ntop++];
        memset(k, 0, sizeof(*k));
        k->rank = rank;
        w->top_demangled |= mrd_analyze_demangle(v[i].name, k->name, sizeof(k->name));
        k->count = v[i].t->count;
        k->total_ns = v[i].t->total_ns;
        k->share = w->tally_total_ns > 0 ? (double)k->total_ns / w->tally_total_ns : 0;
    }
    rc = 0;
done:
    if (rc < 0)
        w->enomem = 1;
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    sqlite3_reset(name_st);
    tally_clear(w);
    return rc;
}

int mrd__why_top_kernels(sqlite3 *db, struct mrd__why *w, struct mrd_analysis *a,
                         struct mrd_an_why *y)
{
    size_t cap = (size_t)a->nranks * MRD_WHY_TOP_KERNELS;
    if (mrd_db_has_table(db, "kernels") != 1 || cap == 0)
        return 0;
    y->kernels = calloc(cap, sizeof(*y->kernels));
    if (!y->kernels)
        return -ENOMEM;
    size_t n = w->ntop < cap ? w->ntop : cap; /* the sweep went in rank order */
    if (n) /* no kernel tallied: w->top is NULL, and memcpy's arguments must not be */
        memcpy(y->kernels, w->top, n * sizeof(*y->kernels));
    y->nkernels = (int)n;
    y->demangled |= w->top_demangled;
    return 0;
}

int mrd__why_stats(sqlite3 *db, struct mrd__why *w, struct mrd_an_why *y)
{
    int rc;
    if (w->ninst == 0)
        return 0;
    if ((rc = load_bytes(db, w)) < 0)
        return rc;
    return coll_stats(db, w, y);
}
