/* The why pass's reading of the kernels: the evidence of every late event (the kernels
 * between a rank's previous collective and its arrival) and the exposed communication and
 * GPU idle per (rank, step), computed on the kernels the overlap sweep reads anyway.
 *
 * Where it sits: part of mrd_analyze. why.c plans the work after the matching
 * (mrd__why_prepare: one task per late event's rank and per (rank, step) range); the
 * overlap sweep (overlap.c) hands every valid kernel of a rank to mrd__why_kernel in start
 * order, and the tasks are done as the sweep passes their ends; why.c then turns the gaps
 * into causes (mrd__why_finish). One reading of each kernel serves the overlap, the top
 * kernels, the late events and the shares.
 *
 * A task covers the rank's kernels starting in [from, to): exactly the rows a range query
 * on the (rank, start) index would return, in that order. The tasks of a rank are sorted by
 * `from`, so the buffer keeps the kernels from the earliest open task's `from` on (about
 * two steps of one rank) and the head task is done once a kernel starts at or after its
 * `to`.
 *
 * Workload: 24 bytes a buffered kernel, one rank at a time; a task costs its kernels.
 * Kernel names: one strings read per distinct name_id, kept by dense index.
 * Single thread, the analysis' connection.
 */
#include "why_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "cmp.h"
#include "error.h"

/* ---- kernel names by name_id ---- */

void mrd__why_names_free(struct mrd__why_names *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    free(t->slot);
    sqlite3_finalize(t->lookup);
    memset(t, 0, sizeof(*t));
}

static size_t name_slot(const struct mrd__why_names *t, int64_t id)
{
    size_t i = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & (t->nslots - 1);
    while (t->slot[i] && t->v[t->slot[i] - 1].id != id)
        i = (i + 1) & (t->nslots - 1);
    return i;
}

static int names_grow(struct mrd__why_names *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 256;
    int32_t *slot = calloc(ns, sizeof(*slot));
    if (!slot)
        return -ENOMEM;
    free(t->slot);
    t->slot = slot;
    t->nslots = ns;
    for (size_t k = 0; k < t->n; k++)
        t->slot[name_slot(t, t->v[k].id)] = (int32_t)(k + 1);
    return 0;
}

int mrd__why_name_index(sqlite3 *db, struct mrd__why_names *t, int64_t id)
{
    if (t->nslots) {
        int32_t s = t->slot[name_slot(t, id)];
        if (s)
            return s - 1;
    }
    if (2 * (t->n + 1) > t->nslots && names_grow(t) < 0)
        return -ENOMEM;
    if (mrd_array_reserve(&t->v, &t->cap, t->n, sizeof(*t->v), 64, 0) < 0)
        return -ENOMEM;
    if (!t->lookup &&
        sqlite3_prepare_v2(db, mrd_db_sql_why_string, -1, &t->lookup, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    sqlite3_reset(t->lookup);
    sqlite3_bind_int64(t->lookup, 1, id);
    int rc = sqlite3_step(t->lookup);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    const char *text = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(t->lookup, 0) : NULL;
    struct mrd__why_name *e = &t->v[t->n];
    e->id = id;
    e->name = NULL;
    if (text && !(e->name = strdup(text)))
        return -ENOMEM;
    e->nccl = mrd_analyze_is_nccl_name(e->name);
    t->slot[name_slot(t, id)] = (int32_t)(t->n + 1);
    return (int)t->n++;
}

/* ---- the tasks ---- */

int mrd__why_task_add(struct mrd__why *w, const struct mrd__why_task *t)
{
    int rc = mrd_array_reserve(&w->tasks, &w->cap_tasks, w->ntasks, sizeof(*w->tasks), 1024, 0);
    if (rc == 0)
        w->tasks[w->ntasks++] = *t;
    return rc;
}

static int cmp_task(const void *x, const void *y)
{
    const struct mrd__why_task *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(a->rank_index, b->rank_index), MRD_CMP(a->from, b->from),
                        MRD_CMP(a->is_gap, b->is_gap), MRD_CMP(a->target, b->target));
}

void mrd__why_tasks_sorted(struct mrd__why *w)
{
    if (w->ntasks > 1)
        qsort(w->tasks, w->ntasks, sizeof(*w->tasks), cmp_task);
    w->cur_task = w->end_task = 0;
}

void mrd__why_kernels_free(struct mrd__why *w)
{
    mrd__why_names_free(&w->names);
    MRD_ARRAY_FREE_ALL(w->tasks, w->gaps, w->gap_names, w->kbuf, w->ivl[0], w->ivl[1]);
}

/* ---- one late event's gap ---- */

static int gap_name_add(struct mrd__why *w, struct mrd__why_gap *g, int32_t k, int64_t ns)
{
    /* one dense index per distinct text (strings.value is unique): equal index, equal name */
    struct mrd__why_gap_name *v = g->nnames ? &w->gap_names[g->names_off] : NULL;
    for (int i = 0; i < g->nnames; i++)
        if (v[i].name == k) {
            v[i].ns += ns;
            return 0;
        }
    if (g->nnames == MRD_WHY_GAP_NAMES)
        return 0;
    /* the open gap's names are the last ones */
    if (mrd_array_reserve(&w->gap_names, &w->cap_gap_names, w->ngap_names,
                          sizeof(*w->gap_names), 1024, 0) < 0)
        return -ENOMEM;
    w->gap_names[w->ngap_names].name = k;
    w->gap_names[w->ngap_names++].ns = ns;
    g->nnames++;
    return 0;
}

/* Kernels overlapping [lo, hi] (the collective's own kernel, starting at hi, counts as
 * traced): the first moment the GPU was busy after lo (lo itself when a kernel runs across
 * it), and the union of the compute kernels clipped to [lo, hi). */
static int do_gap(struct mrd__why *w, const struct mrd__why_task *t, size_t first)
{
    struct mrd__why_gap *g = &w->gaps[t->target];
    int64_t llo = t->lo, lhi = t->hi, cur_s = 0, cur_e = INT64_MIN, lowest = INT64_MAX;
    g->names_off = w->ngap_names;
    for (size_t i = first; i < w->kn && w->kbuf[i].start < t->to; i++) {
        int64_t s = w->kbuf[i].start, e = w->kbuf[i].end;
        if (e < llo || (e == llo && s < llo))
            continue; /* ended at or before the boundary (the previous collective) */
        g->kernels++;
        if (s < llo)
            s = llo;
        if (s < lowest)
            lowest = s;
        if (w->kbuf[i].comm)
            continue;
        if (e > lhi)
            e = lhi;
        if (e <= s)
            continue;
        g->compute_kernels++;
        if (gap_name_add(w, g, w->kbuf[i].name, e - s) < 0)
            return -ENOMEM;
        if (s > cur_e) {
            if (cur_e > cur_s)
                g->busy += cur_e - cur_s;
            cur_s = s;
            cur_e = e;
        } else if (e > cur_e) {
            cur_e = e;
        }
    }
    if (cur_e > cur_s)
        g->busy += cur_e - cur_s;
    if (lowest != INT64_MAX)
        g->first_kernel = mrd_timebase_map(w->tb, w->sweep_rank, lowest);
    return 0;
}

/* ---- one (rank, step)'s exposed communication and idle time ---- */

/* Appends [s, e) to list k, kept merged (starts arrive in ascending order). */
static int ivl_add(struct mrd__why *w, int k, int64_t s, int64_t e)
{
    size_t n = w->ivl_n[k];
    if (n > 0 && s <= w->ivl[k][n - 1][1]) {
        if (e > w->ivl[k][n - 1][1])
            w->ivl[k][n - 1][1] = e;
        return 0;
    }
    if (mrd_array_reserve(&w->ivl[k], &w->ivl_cap[k], n, sizeof(*w->ivl[k]), 64, 0) < 0)
        return -ENOMEM;
    w->ivl[k][n][0] = s;
    w->ivl[k][n][1] = e;
    w->ivl_n[k] = n + 1;
    return 0;
}

static int64_t ivl_len(const struct mrd__why *w, int k)
{
    int64_t t = 0;
    for (size_t i = 0; i < w->ivl_n[k]; i++)
        t += w->ivl[k][i][1] - w->ivl[k][i][0];
    return t;
}

static int64_t ivl_common(const struct mrd__why *w)
{
    int64_t t = 0;
    const int64_t(*a)[2] = (const int64_t(*)[2])w->ivl[0], (*b)[2] = (const int64_t(*)[2])w->ivl[1];
    for (size_t i = 0, j = 0; i < w->ivl_n[0] && j < w->ivl_n[1];) {
        int64_t s = a[i][0] > b[j][0] ? a[i][0] : b[j][0];
        int64_t e = a[i][1] < b[j][1] ? a[i][1] : b[j][1];
        if (e > s)
            t += e - s;
        if (a[i][1] < b[j][1])
            i++;
        else
            j++;
    }
    return t;
}

/* The kernels clipped to [lo, hi] into the step's exposed and idle sums (when any kernel
 * ran in it). */
static int do_share(struct mrd__why *w, const struct mrd__why_task *t, size_t first)
{
    struct mrd_an_step_cost *sc = &w->y->steps[t->target];
    int64_t lo = t->lo, hi = t->hi;
    int any = 0, rc = 0;
    w->ivl_n[0] = w->ivl_n[1] = 0;
    for (size_t i = first; i < w->kn && w->kbuf[i].start < t->to && rc == 0; i++) {
        int64_t ks = w->kbuf[i].start < lo ? lo : w->kbuf[i].start;
        int64_t ke = w->kbuf[i].end > hi ? hi : w->kbuf[i].end;
        if (ke <= ks)
            continue;
        any = 1;
        rc = ivl_add(w, w->kbuf[i].comm ? 0 : 1, ks, ke);
    }
    if (rc < 0 || !any)
        return rc;
    int64_t common = ivl_common(w), lc = ivl_len(w, 0);
    sc->exposed_ns += lc - common;
    sc->idle_ns += (hi - lo) - (lc + ivl_len(w, 1) - common);
    sc->kernel_span_ns += hi - lo;
    sc->kernel_ranks++;
    return 0;
}

/* ---- the sweep's hooks ---- */

/* Does the head task with the kernels buffered (its range is complete). */
static int do_head(struct mrd__why *w)
{
    const struct mrd__why_task *t = &w->tasks[w->cur_task++];
    while (w->kfirst < w->kn && w->kbuf[w->kfirst].start < t->from)
        w->kfirst++;
    return t->is_gap ? do_gap(w, t, w->kfirst) : do_share(w, t, w->kfirst);
}

void mrd__why_rank_begin(struct mrd__why *w, int rank_index, int rank)
{
    size_t i = w->end_task > w->cur_task ? w->end_task : w->cur_task;
    while (i < w->ntasks && w->tasks[i].rank_index < rank_index)
        i++; /* ranks without kernels: their tasks keep their empty results */
    w->cur_task = w->end_task = i;
    while (w->end_task < w->ntasks && w->tasks[w->end_task].rank_index == rank_index)
        w->end_task++;
    w->sweep_rank = rank;
    w->kfirst = w->kn = 0;
}

int mrd__why_kernel(struct mrd__why *w, int64_t start, int64_t end, int comm, int32_t name)
{
    int rc;
    while (w->cur_task < w->end_task && start >= w->tasks[w->cur_task].to)
        if ((rc = do_head(w)) < 0)
            return rc;
    if (w->cur_task == w->end_task || start < w->tasks[w->cur_task].from)
        return 0; /* no open task needs it */
    /* when full, drop what the tasks have passed */
    if (w->kn == w->kcap)
        while (w->kfirst < w->kn && w->kbuf[w->kfirst].start < w->tasks[w->cur_task].from)
            w->kfirst++;
    if (w->kfirst > 0 && w->kn == w->kcap) {
        memmove(w->kbuf, w->kbuf + w->kfirst, (w->kn - w->kfirst) * sizeof(*w->kbuf));
        w->kn -= w->kfirst;
        w->kfirst = 0;
    }
    if (mrd_array_reserve(&w->kbuf, &w->kcap, w->kn, sizeof(*w->kbuf), 1024, 0) < 0)
        return -ENOMEM;
    struct mrd__why_kernel *k = &w->kbuf[w->kn++];
    k->start = start;
    k->end = end;
    k->name = name;
    k->comm = comm;
    return 0;
}

int mrd__why_rank_end(struct mrd__why *w)
{
    int rc;
    while (w->cur_task < w->end_task)
        if ((rc = do_head(w)) < 0)
            return rc;
    w->kfirst = w->kn = 0;
    return 0;
}
