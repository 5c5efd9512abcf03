/* Shared-internal declarations of the findings (findings.c: the rule table, helpers, the
 * rules on the analysis' results and the clock bound; findings_tables.c: the rules that read
 * event tables). Not for other modules: findings.h has the results. Single thread. */
#ifndef MRD_FINDINGS_INT_H
#define MRD_FINDINGS_INT_H

#include <stdint.h>

#include "analyze_int.h"
#include "findings.h"

#define KIND_KERNELS 0 /* indexes of a->ranks[].events (mrd_analyze_kind_name) */
#define KIND_MEMCPYS 1
#define KIND_SYNCS   3

struct mrd__find_ctx {
    sqlite3 *db;
    const struct mrd_analyze_options *o;
    struct mrd_analysis *a;
    struct mrd_findings *out;
    char err[128]; /* SQLite's message of the last failed query (mrd__find_sqlerr) */
};

/* Sets rule's status and its note (printf format). */
void mrd__find_status(struct mrd__find_ctx *c, int rule, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Marks rule fired and returns a new zeroed finding of it, or NULL when MRD_FIND_MAX are
 * kept (then counted in dropped). */
struct mrd_finding *mrd__find_add(struct mrd__find_ctx *c, int rule, int severity);

/* Evidence: a rank (listed up to MRD_FIND_MAX_RANKS, all counted); the finding's named
 * numbers, in the order given (names static, at most MRD_FIND_MAX_NUMBERS kept), through
 * MRD__FIND_NUMBERS(f, {"copies", copies}, {"bytes", bytes}). */
void mrd__find_rank(struct mrd_finding *f, int rank);
void mrd__find_numbers(struct mrd_finding *f, const struct mrd_find_number *v, size_t n);
#define MRD__FIND_NUMBERS(f, ...)                                                                  \
    mrd__find_numbers((f), (const struct mrd_find_number[]){__VA_ARGS__},                          \
                      sizeof((const struct mrd_find_number[]){__VA_ARGS__}) /                      \
                          sizeof(struct mrd_find_number))

/* Keeps SQLite's current message in c->err, finalizes st (NULL allowed); returns
 * -MRD_ERR_SQLITE. */
int mrd__find_sqlerr(struct mrd__find_ctx *c, sqlite3_stmt *st);

/* Rows of event table `kind` (KIND_*) over all ranks, from the analysis' counts. */
uint64_t mrd__find_events(const struct mrd_analysis *a, int kind);

/* Steps in which kernels of rank r were traced: its steps inside windows in a run with
 * windows (the steady tier), else all its NVTX step ranges. */
uint64_t mrd__find_traced_steps(const struct mrd_analysis *a, const struct mrd_an_rank *r);

/* findings_tables.c: rules 2 (pageable copies), 3 (tiny kernels), 4 (host syncs inside
 * steps), 8 (environment mismatches). Each sets its status. Return 0, -ENOMEM or
 * -MRD_ERR_SQLITE. */
int mrd__find_pageable(struct mrd__find_ctx *c);
int mrd__find_tiny(struct mrd__find_ctx *c);
int mrd__find_sync(struct mrd__find_ctx *c);
int mrd__find_env(struct mrd__find_ctx *c);

#endif
