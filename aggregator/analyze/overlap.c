/* Communication / compute overlap per rank and GPU, by one sweep over the kernels in start
 * order.
 *
 * Where it sits: part of mrd_analyze, after the matching and mrd__why_prepare; reads
 * kernels (rank-local clock: overlap is a same-GPU question, no clock model needed) and,
 * once per rank, the rank's correlation ids in the TEMP mrd_link table built by
 * mrd_db_op_intervals (a hash set: no probe per kernel row).
 *
 * The sweep keeps, per device and per class (comm, compute), only the largest end time
 * seen so far. Because rows arrive in start order, a class covers [pos, next_start)
 * exactly up to min(max_end, next_start): no interval list, no heap, O(1) memory per
 * device whatever the concurrency. Between two kernel starts the sweep adds the covered
 * lengths of comm, compute, both (hidden comm) and either (busy). The same reading serves
 * the why pass (why_int.h): the kernel time per name for the top kernels, and the late
 * events' gaps and the per-step shares (why_kernels.c), so that no other pass reads the
 * kernels. Workload: one indexed range scan per rank (kernels_rank_start), hundreds of
 * millions of rows in total; the link set holds a rank's NCCL launches (16 bytes each).
 */
#include "why_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "findings.h"

struct sweep {
    int used, started, device;
    int64_t pos, comm_end, comp_end, first, last;
    int64_t comm, comp, both, busy;
};

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t covered(int64_t pos, int64_t end, int64_t to)
{
    int64_t e = min64(end, to);
    return e > pos ? e - pos : 0;
}

/* Accounts [s->pos, to) and moves the sweep position there. */
static void advance(struct sweep *s, int64_t to)
{
    if (to <= s->pos)
        return;
    s->comm += covered(s->pos, s->comm_end, to);
    s->comp += covered(s->pos, s->comp_end, to);
    s->both += covered(s->pos, min64(s->comm_end, s->comp_end), to);
    s->busy += covered(s->pos, max64(s->comm_end, s->comp_end), to);
    s->pos = to;
}

int mrd_analyze_is_nccl_name(const char *name)
{
    if (!name)
        return 0;
    /* Itanium mangling: _Z, optional N (nested), then <length><identifier>. */
    if (name[0] == '_' && name[1] == 'Z') {
        name += 2;
        if (*name == 'N')
            name++;
        while (*name >= '0' && *name <= '9')
            name++;
    }
    return strncmp(name, "nccl", 4) == 0;
}

static struct sweep *device_slot(struct sweep *sw, int device)
{
    for (int i = 0; i < MRD_AN_MAX_DEVICES; i++) {
        if (sw[i].used && sw[i].device == device)
            return &sw[i];
        if (!sw[i].used) {
            sw[i].used = 1;
            sw[i].device = device;
            return &sw[i];
        }
    }
    return &sw[MRD_AN_MAX_DEVICES - 1]; /* folded: documented in analyze.h */
}

/* The correlation ids of one rank's kernels linked to an NCCL op (temp.mrd_link), read
 * once per rank so that the sweep's rows need no probe of that table: open addressing,
 * at most half full (INT64_MIN marks an empty slot; that id itself is kept aside). */
struct link_set {
    int64_t *v;
    size_t cap, n;
    int has_min;
};

static size_t link_slot(const struct link_set *s, int64_t id)
{
    size_t i = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 17) & (s->cap - 1);
    while (s->v[i] != INT64_MIN && s->v[i] != id)
        i = (i + 1) & (s->cap - 1);
    return i;
}

static int link_add(struct link_set *s, int64_t id)
{
    if (id == INT64_MIN) {
        s->has_min = 1;
        return 0;
    }
    if (2 * (s->n + 1) > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 1024;
        int64_t *v = malloc(nc * sizeof(*v));
        if (!v)
            return -ENOMEM;
        for (size_t i = 0; i < nc; i++)
            v[i] = INT64_MIN;
        struct link_set g = {v, nc, 0, s->has_min};
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i] != INT64_MIN)
                v[link_slot(&g, s->v[i])] = s->v[i];
        g.n = s->n;
        free(s->v);
        *s = g;
    }
    size_t i = link_slot(s, id);
    if (s->v[i] == INT64_MIN) {
        s->v[i] = id;
        s->n++;
    }
    return 0;
}

static int link_has(const struct link_set *s, int64_t id)
{
    if (id == INT64_MIN)
        return s->has_min;
    return s->n > 0 && s->v[link_slot(s, id)] == id;
}

/* Fills s with rank's linked correlation ids. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
static int links_of_rank(sqlite3 *db, sqlite3_stmt *lq, int rank, struct link_set *s)
{
    int rc;
    s->n = 0;
    s->has_min = 0;
    for (size_t i = 0; i < s->cap; i++)
        s->v[i] = INT64_MIN;
    sqlite3_reset(lq);
    sqlite3_bind_int(lq, 1, rank);
    while ((rc = sqlite3_step(lq)) == SQLITE_ROW)
        if (link_add(s, sqlite3_column_int64(lq, 0)) < 0)
            return -ENOMEM;
    return rc == SQLITE_DONE ? 0 : mrd__analyze_sqlerr(db);
}

static int sweep_rank(sqlite3 *db, sqlite3_stmt *q, const struct link_set *links,
                      struct mrd__why *w, int rank_index, struct mrd_an_rank *r)
{
    struct sweep sw[MRD_AN_MAX_DEVICES];
    struct mrd_an_overlap *ov = &r->ov;
    uint64_t linked = 0;
    int rc;

    memset(sw, 0, sizeof(sw));
    memset(ov, 0, sizeof(*ov));
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, r->rank);
    mrd__why_rank_begin(w, rank_index, r->rank);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int device = sqlite3_column_int(q, 0);
        int64_t start = sqlite3_column_int64(q, 1), end = sqlite3_column_int64(q, 2);
        /* a NULL reads as 0 (without a conversion): the type is asked only then, so a
         * usual row costs two calls less */
        int64_t corr = sqlite3_column_int64(q, 3), name_id = sqlite3_column_int64(q, 4);
        int is_linked =
            (corr != 0 || sqlite3_column_type(q, 3) != SQLITE_NULL) && link_has(links, corr);
        int has_name = name_id != 0 || sqlite3_column_type(q, 4) != SQLITE_NULL;
        if (!has_name)
            name_id = INT64_MIN;
        int name = has_name ? mrd__why_name_index(db, &w->names, name_id) : -1;
        if (name < -1)
            return name;
        int by_name = name >= 0 && w->names.v[name].nccl;
        int comm = is_linked || by_name;
        if (!mrd_db_kernel_valid(start, end))
            continue; /* lost by CUPTI's device buffer (a drop) or corrupt: not timed */
        ov->short_kernels += end - start < MRD_FIND_TINY_NS; /* the tiny-kernel finding's */
        mrd__why_kernel_add(w, name_id, end - start);
        if ((rc = mrd__why_kernel(w, start, end, comm, name)) < 0)
            return rc;
        struct sweep *s = device_slot(sw, device);
        if (!s->started) {
            s->started = 1;
            s->first = s->pos = s->last = start;
            s->comm_end = s->comp_end = start;
        }
        advance(s, start);
        if (comm) {
            s->comm_end = max64(s->comm_end, end);
            ov->comm_kernels++;
        } else {
            s->comp_end = max64(s->comp_end, end);
            ov->compute_kernels++;
        }
        linked += is_linked;
        if (by_name && !is_linked)
            ov->name_only_kernels++;
        s->last = max64(s->last, end);
    }
    if (rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    if ((rc = mrd__why_rank_end(w)) < 0 ||
        (rc = mrd__why_kernel_rank_end(w, w->names.lookup, r->rank)) < 0)
        return rc;
    for (int i = 0; i < MRD_AN_MAX_DEVICES && sw[i].used; i++) {
        advance(&sw[i], max64(sw[i].comm_end, sw[i].comp_end));
        ov->comm_ns += sw[i].comm;
        ov->compute_ns += sw[i].comp;
        ov->hidden_ns += sw[i].both;
        ov->busy_ns += sw[i].busy;
        ov->span_ns += sw[i].last - sw[i].first;
    }
    ov->exposed_ns = ov->comm_ns - ov->hidden_ns;
    ov->ratio = ov->comm_ns > 0 ? (double)ov->hidden_ns / (double)ov->comm_ns : 0.0;
    if (ov->comm_kernels == 0)
        ov->method = MRD_AN_METHOD_NONE;
    else if (linked == 0)
        ov->method = MRD_AN_METHOD_NAME;
    else
        ov->method = ov->name_only_kernels ? MRD_AN_METHOD_MIXED : MRD_AN_METHOD_CORRELATION;
    return 0;
}

int mrd__analyze_overlap(sqlite3 *db, struct mrd_analysis *a, struct mrd__why *w, int warn_at)
{
    sqlite3_stmt *q = NULL, *lq = NULL;
    struct link_set links = {0};
    int rc = 0;
    if (mrd_db_has_table(db, "kernels") != 1)
        return 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_rank_kernels, -1, &q, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, mrd_db_sql_rank_links, -1, &lq, NULL) != SQLITE_OK) {
        rc = mrd__analyze_sqlerr(db);
        goto done;
    }
    for (int i = 0; i < a->nranks; i++) {
        if (a->ranks[i].events[0] == 0)
            continue;
        if ((rc = links_of_rank(db, lq, a->ranks[i].rank, &links)) < 0 ||
            (rc = sweep_rank(db, q, &links, w, i, &a->ranks[i])) < 0)
            break;
        if (a->ranks[i].ov.method == MRD_AN_METHOD_NAME ||
            a->ranks[i].ov.method == MRD_AN_METHOD_MIXED)
            mrd__analyze_warn_at(a, warn_at++,
                                 "rank %d: %llu communication kernel(s) recognised by name "
                                 "(\"nccl*\") only, without an NCCL op correlation",
                                 a->ranks[i].rank,
                                 (unsigned long long)a->ranks[i].ov.name_only_kernels);
    }
done:
    sqlite3_finalize(q);
    sqlite3_finalize(lq);
    free(links.v);
    return rc;
}
