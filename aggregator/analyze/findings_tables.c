/* The findings' rules that read event tables (copies, tiny kernels, host syncs inside steps,
 * the environment): one aggregate pass each (contract in findings_int.h; definitions and
 * thresholds in aggregator/SCHEMA.md, "Findings"). The environment rule reads the
 * fingerprint comparison the analysis already made (fingerprint.h), no table.
 *
 * Workload: GROUP BY rank over memcpys, one ordered pass over host syncs with each rank's
 * step ranges in memory (MRD_AN_MAX_STEPS per rank); the tiny kernels are counted by the
 * overlap sweep's reading of every kernel (mrd_an_overlap.short_kernels), no pass here.
 */
#include "findings_int.h"
#include "fingerprint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmp.h"
#include "db_sql.h"
#include "steps.h"

/* The statements are in aggregator/db (mrd_db_sql_find_*). A copy's host side is pageable
 * when its src_kind or dst_kind is 1 (CUpti_ActivityMemoryKind); host-blocking syncs are
 * event (1), stream (3) and context (4) synchronizations, not a stream wait event (2),
 * which blocks a stream, not the host. */

/* 1 when events of `kind` were recorded; otherwise rule is "not evaluated" with why_not,
 * and 0. */
static int kind_traced(struct mrd__find_ctx *c, int rule, int kind, const char *why_not)
{
    if (mrd__find_events(c->a, kind) > 0)
        return 1;
    mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "%s", why_not);
    return 0;
}

/* ---- rule 2: copies from pageable memory ------------------------------------------------ */

int mrd__find_pageable(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_PAGEABLE;
    if (!kind_traced(c, rule, KIND_MEMCPYS,
                     "memcpy was not traced: no copy records (profile with --trace memcpy)"))
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->db, mrd_db_sql_find_pageable, -1, &st, NULL) != SQLITE_OK)
        return mrd__find_sqlerr(c, st);
    struct mrd_finding *f = NULL;
    int64_t copies = 0, bytes = 0, ns = 0, any = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t n = sqlite3_column_int64(st, 1), b = sqlite3_column_int64(st, 2);
        any += n;
        if (b < MRD_FIND_PAGEABLE_BYTES && n < MRD_FIND_PAGEABLE_COPIES)
            continue;
        if (!f && !(f = mrd__find_add(c, rule, MRD_FIND_MEDIUM)))
            break;
        mrd__find_rank(f, sqlite3_column_int(st, 0));
        copies += n;
        bytes += b;
        ns += sqlite3_column_int64(st, 3);
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return mrd__find_sqlerr(c, st);
    sqlite3_finalize(st);
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            mrd__find_status(c, rule, MRD_FIND_NOT_FIRED,
                             "%" PRId64 " pageable copies, no rank at %d copies or %d bytes", any,
                             MRD_FIND_PAGEABLE_COPIES, MRD_FIND_PAGEABLE_BYTES);
        return 0;
    }
    if (bytes >= 64 * (int64_t)MRD_FIND_PAGEABLE_BYTES)
        f->severity = MRD_FIND_HIGH;
    snprintf(f->title, sizeof(f->title),
             "%" PRId64 " copies (%" PRId64 " bytes) from or to "
             "pageable host memory on %d rank(s)",
             copies, bytes, f->ranks_total);
    MRD__FIND_NUMBERS(f, {"copies", copies}, {"bytes", bytes}, {"time_ns", ns});
    snprintf(f->detail, sizeof(f->detail),
             "memcpy rows whose host side is pageable (src_kind or dst_kind 1) on ranks with "
             ">= %d copies or >= %d bytes; each blocks the calling thread",
             MRD_FIND_PAGEABLE_COPIES, MRD_FIND_PAGEABLE_BYTES);
    mrd__find_status(c, rule, MRD_FIND_FIRED, "pageable copies on %d rank(s)", f->ranks_total);
    return 0;
}

/* ---- rule 3: storms of tiny kernels ---------------------------------------------------- */

int mrd__find_tiny(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_TINY_KERNELS;
    if (!kind_traced(c, rule, KIND_KERNELS, "kernel was not traced: no kernel records"))
        return 0;
    /* each rank's valid and short kernels, counted by the overlap sweep (overlap.c) */
    struct mrd_finding *f = NULL;
    int64_t tiny_sum = 0, all_sum = 0;
    double worst_rate = 0;
    int evaluated = 0;
    for (int i = 0; i < c->a->nranks; i++) {
        const struct mrd_an_rank *r = &c->a->ranks[i];
        int64_t n = (int64_t)(r->ov.comm_kernels + r->ov.compute_kernels);
        int64_t tiny = (int64_t)r->ov.short_kernels;
        if (n == 0)
            continue; /* no valid kernel */
        uint64_t steps = mrd__find_traced_steps(c->a, r);
        if (steps == 0)
            continue;
        evaluated++;
        double rate = (double)tiny / (double)steps;
        /* median below the threshold: more than half the kernels are tiny */
        if (2 * tiny <= n || rate <= MRD_FIND_TINY_PER_STEP)
            continue;
        if (!f && !(f = mrd__find_add(c, rule, MRD_FIND_MEDIUM)))
            break;
        mrd__find_rank(f, r->rank);
        tiny_sum += tiny;
        all_sum += n;
        if (rate > worst_rate)
            worst_rate = rate;
    }
    if (evaluated == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED,
                         c->a->nsteps == 0 ? "no NVTX step ranges"
                                           : "kernel was not traced in any rank's steps");
        return 0;
    }
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            mrd__find_status(c, rule, MRD_FIND_NOT_FIRED, "%d rank(s) evaluated", evaluated);
        return 0;
    }
    if (worst_rate > 4 * MRD_FIND_TINY_PER_STEP)
        f->severity = MRD_FIND_HIGH;
    snprintf(f->title, sizeof(f->title),
             "up to %.0f kernels shorter than %d us per step on %d "
             "rank(s)",
             worst_rate, MRD_FIND_TINY_NS / 1000, f->ranks_total);
    MRD__FIND_NUMBERS(f, {"tiny_kernels", tiny_sum}, {"kernels", all_sum},
                      {"tiny_per_step", worst_rate});
    snprintf(f->detail, sizeof(f->detail),
             "ranks whose median kernel runs < %d us and that launch > %d such kernels per "
             "traced step; launch overhead (a few us each) dominates their work",
             MRD_FIND_TINY_NS / 1000, MRD_FIND_TINY_PER_STEP);
    mrd__find_status(c, rule, MRD_FIND_FIRED, "%d of %d rank(s)", f->ranks_total, evaluated);
    return 0;
}

/* ---- rule 4: host synchronisation inside steps ----------------------------------------- */

struct local_steps {
    int n, cap;
    int64_t (*v)[2];
    int64_t last_end;
};

/* Each rank's step ranges in its local clock, by the analysis's rule (match.c: the step-name
 * rule, a range nested in the previous one is not a new step). */
static int load_local_steps(struct mrd__find_ctx *c, struct local_steps *ls)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (mrd_db_has_table(c->db, "nvtx") != 1)
        return 0;
    if (sqlite3_prepare_v2(c->db, mrd_db_sql_step_ranges, -1, &st, NULL) != SQLITE_OK)
        return mrd__find_sqlerr(c, st);
    sqlite3_bind_text(st, 1, c->o->step_name ? c->o->step_name : "step", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, c->o->step_name == NULL);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_an_rank *r = mrd__analyze_rank(c->a, sqlite3_column_int(st, 0));
        int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        if (!r || !mrd_step_name_match((const char *)sqlite3_column_text(st, 3), c->o->step_name))
            continue;
        struct local_steps *l = &ls[r - c->a->ranks];
        if ((l->n > 0 && s < l->last_end) || l->n >= MRD_AN_MAX_STEPS)
            continue;
        if (l->n == l->cap) {
            int nc = l->cap ? 2 * l->cap : 64;
            void *p = realloc(l->v, (size_t)nc * sizeof(*l->v));
            if (!p) {
                sqlite3_finalize(st);
                return -ENOMEM;
            }
            l->v = p;
            l->cap = nc;
        }
        l->v[l->n][0] = s;
        l->v[l->n][1] = e;
        l->last_end = e;
        l->n++;
    }
    if (rc != SQLITE_DONE)
        return mrd__find_sqlerr(c, st);
    sqlite3_finalize(st);
    return 0;
}

/* Index of the step range holding t (start <= t < end), -1 if none. */
static int step_holding(const struct local_steps *l, int64_t t)
{
    int lo = 0, hi = l->n - 1, found = -1;
    while (lo <= hi) { /* the last step starting at or before t */
        int mid = lo + (hi - lo) / 2;
        if (l->v[mid][0] <= t) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found >= 0 && t < l->v[found][1] ? found : -1;
}

struct sync_rank {
    uint64_t syncs, steps_with;
    int64_t blocked_ns;
    int last_step;
};

static int cmp_i64_pair_desc(const void *x, const void *y)
{
    const int64_t *p = x, *q = y;
    return MRD_CMP_KEYS(MRD_CMP(q[1], p[1]), MRD_CMP(p[0], q[0]));
}

int mrd__find_sync(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_SYNC_IN_STEPS;
    struct mrd_analysis *a = c->a;
    if (!kind_traced(c, rule, KIND_SYNCS,
                     "sync was not traced: no synchronization records (profile with --trace "
                     "sync)"))
        return 0;
    struct local_steps *ls = calloc((size_t)a->nranks + 1, sizeof(*ls));
    struct sync_rank *sr = calloc((size_t)a->nranks + 1, sizeof(*sr));
    int64_t(*step_blocked)[2] = calloc(MRD_AN_MAX_STEPS, sizeof(*step_blocked));
    sqlite3_stmt *st = NULL;
    int rc = -ENOMEM, nsteps_any = 0;
    if (!ls || !sr || !step_blocked)
        goto done;
    if ((rc = load_local_steps(c, ls)) < 0)
        goto done;
    for (int i = 0; i < a->nranks; i++) {
        nsteps_any += ls[i].n;
        sr[i].last_step = -1;
    }
    if (nsteps_any == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "no NVTX step ranges");
        goto done;
    }
    for (int s = 0; s < MRD_AN_MAX_STEPS; s++)
        step_blocked[s][0] = s;
    if (sqlite3_prepare_v2(c->db, mrd_db_sql_find_syncs, -1, &st, NULL) != SQLITE_OK) {
        rc = mrd__find_sqlerr(c, st);
        st = NULL;
        goto done;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_an_rank *r = mrd__analyze_rank(a, sqlite3_column_int(st, 0));
        if (!r)
            continue;
        int i = (int)(r - a->ranks);
        int64_t s = sqlite3_column_int64(st, 1), e = sqlite3_column_int64(st, 2);
        int k = step_holding(&ls[i], s);
        if (k < 0)
            continue;
        sr[i].syncs++;
        sr[i].blocked_ns += e - s;
        step_blocked[k][1] += e - s;
        if (k != sr[i].last_step) {
            sr[i].steps_with++;
            sr[i].last_step = k;
        }
    }
    if (rc != SQLITE_DONE) {
        rc = mrd__find_sqlerr(c, st);
        st = NULL;
        goto done;
    }
    rc = 0;
    struct mrd_finding *f = NULL;
    uint64_t syncs = 0, with = 0, evaluated_steps = 0;
    int64_t blocked = 0;
    int evaluated = 0;
    for (int i = 0; i < a->nranks; i++) {
        uint64_t steps = mrd__find_traced_steps(a, &a->ranks[i]);
        if (steps == 0)
            continue;
        evaluated++;
        if ((double)sr[i].steps_with <= MRD_FIND_SYNC_STEP_SHARE * (double)steps)
            continue;
        if (!f && !(f = mrd__find_add(c, rule, MRD_FIND_MEDIUM)))
            break;
        mrd__find_rank(f, a->ranks[i].rank);
        syncs += sr[i].syncs;
        with += sr[i].steps_with;
        evaluated_steps += steps;
        blocked += sr[i].blocked_ns;
    }
    if (evaluated == 0) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "sync was not traced in any step");
        goto done;
    }
    if (!f) {
        if (c->out->status[rule] != MRD_FIND_FIRED)
            mrd__find_status(c, rule, MRD_FIND_NOT_FIRED, "%d rank(s) evaluated", evaluated);
        goto done;
    }
    qsort(step_blocked, MRD_AN_MAX_STEPS, sizeof(*step_blocked), cmp_i64_pair_desc);
    for (int k = 0; k < MRD_AN_MAX_STEPS && f->nsteps < MRD_FIND_MAX_STEPS; k++)
        if (step_blocked[k][1] > 0)
            f->steps[f->nsteps++] = step_blocked[k][0];
    snprintf(f->title, sizeof(f->title),
             "host synchronisation in %" PRIu64 " of %" PRIu64 " traced steps on %d rank(s)", with,
             evaluated_steps, f->ranks_total);
    MRD__FIND_NUMBERS(f, {"syncs", syncs}, {"blocked_ns", blocked}, {"steps_with_sync", with},
                      {"steps_evaluated", evaluated_steps});
    snprintf(f->detail, sizeof(f->detail),
             "event, stream and context synchronizations starting inside the rank's step "
             "ranges, in more than %.0f%% of its traced steps; steps listed by time blocked",
             100.0 * MRD_FIND_SYNC_STEP_SHARE);
    mrd__find_status(c, rule, MRD_FIND_FIRED, "%d of %d rank(s)", f->ranks_total, evaluated);
done:
    sqlite3_finalize(st);
    if (ls)
        for (int i = 0; i < a->nranks; i++)
            free(ls[i].v);
    free(ls);
    free(sr);
    free(step_blocked);
    return rc;
}

/* ---- rule 8: environment mismatches (the fingerprint comparison, fingerprint.h) -------- */

/* One finding per key on which some rank differs from the majority, with fingerprint.h's
 * rules (which keys are compared, absence as a value, ties): the report's Environment
 * section and this finding cannot disagree. */
int mrd__find_env(struct mrd__find_ctx *c)
{
    const int rule = MRD_FIND_ENV_MISMATCH;
    const struct mrd_env_report *e = c->a->env;
    if (c->a->env_error[0]) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED, "query failed: %s", c->a->env_error);
        return 0;
    }
    if (!e) {
        mrd__find_status(c, rule, MRD_FIND_NOT_EVALUATED,
                         "env was not traced: no env_records rows (an older capture)");
        return 0;
    }
    for (int k = 0; k < e->nkeys_differ; k++) {
        const struct mrd_env_key *key = &e->keys[k];
        struct mrd_finding *f = mrd__find_add(c, rule, MRD_FIND_MEDIUM);
        if (!f)
            break;
        for (int i = 0; i < key->ndiffs; i++)
            mrd__find_rank(f, key->diffs[i].rank);
        snprintf(f->title, sizeof(f->title), "%s differs on %d of %d rank(s)", key->key,
                 key->ndiffs, e->nranks);
        MRD__FIND_NUMBERS(f, {"ranks_majority", key->majority_ranks},
                          {"ranks_differ", key->ndiffs});
        int off = snprintf(f->detail, sizeof(f->detail), "majority %s%s%s on %d rank(s)",
                           key->majority ? "'" : "", key->majority ? key->majority : "absent",
                           key->majority ? "'" : "", key->majority_ranks);
        for (int i = 0; i < key->ndiffs && off > 0 && (size_t)off < sizeof(f->detail); i++) {
            const char *v = key->diffs[i].value;
            off += snprintf(f->detail + off, sizeof(f->detail) - (size_t)off, "; rank %d: %s%s%s",
                            key->diffs[i].rank, v ? "'" : "", v ? v : "absent", v ? "'" : "");
        }
    }
    if (e->nkeys_differ)
        mrd__find_status(c, rule, MRD_FIND_FIRED, "%d of %d key(s) differ", e->nkeys_differ,
                         e->nkeys);
    else
        mrd__find_status(c, rule, MRD_FIND_NOT_FIRED, "%d key(s) agree on every rank",
                         e->nkeys);
    return 0;
}
