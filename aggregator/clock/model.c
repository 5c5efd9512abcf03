/* Clock models at rest: mapping a rank's local timestamp into the global timebase, the
 * bound that applies to it, and loading every rank's model from clock_models.
 *
 * Where it sits: read side of the clock module. The analysis, the exports and the
 * causality check map every host timestamp through mrd_clock_map(), so it is the hot
 * function here: a binary search over a rank's segments (usually one or two) and one
 * multiply. Models are immutable once loaded and may be shared by threads.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "clock_internal.h"
#include "error.h"

/* Highest rank number accepted from clock_models (the by-rank table is dense). */
#define MRD_CLOCK_MAX_RANK 65535

static const struct mrd_clock_segment *find_segment(const struct mrd_clock_model *m, int64_t local)
{
    uint32_t lo = 0, hi = m->nseg - 1;
    while (lo < hi) { /* last segment whose begin <= local (or the first one) */
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (m->seg[mid].local_begin <= local)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &m->seg[lo];
}

int64_t mrd_clock_map(const struct mrd_clock_model *m, int64_t local)
{
    if (!m || m->nseg == 0)
        return local;
    const struct mrd_clock_segment *s = find_segment(m, local);
    double d = s->drift_ppm * (double)(local - s->local_begin) / 1e6;
    return local + s->offset_ns + (int64_t)llround(d);
}

int64_t mrd_clock_bound(const struct mrd_clock_model *m, int64_t local)
{
    if (!m || m->nseg == 0)
        return 0;
    return find_segment(m, local)->error_bound_ns;
}

void mrd_clock_model_destroy(struct mrd_clock_model *m)
{
    if (!m)
        return;
    free(m->seg);
    free(m);
}

void mrd_clock_models_destroy(struct mrd_clock_models *ms)
{
    if (!ms)
        return;
    if (ms->by_rank)
        for (int r = 0; r <= ms->max_rank; r++)
            mrd_clock_model_destroy(ms->by_rank[r]);
    free(ms->by_rank);
    free(ms);
}

const struct mrd_clock_model *mrd_clock_models_get(const struct mrd_clock_models *ms, int rank)
{
    if (!ms || rank < 0 || rank > ms->max_rank)
        return NULL;
    return ms->by_rank[rank];
}

/* Appends one segment row to the rank's model, creating the model on first use. */
static int add_row(struct mrd_clock_models *ms, int rank, const struct mrd_clock_segment *s,
                   const char *method)
{
    struct mrd_clock_model *m = ms->by_rank[rank];
    if (!m) {
        m = calloc(1, sizeof(*m));
        if (!m)
            return -ENOMEM;
        m->rank = rank;
        if (method)
            snprintf(m->method, sizeof(m->method), "%s", method);
        ms->by_rank[rank] = m;
    }
    struct mrd_clock_segment *seg = realloc(m->seg, sizeof(*seg) * (m->nseg + 1));
    if (!seg)
        return -ENOMEM;
    m->seg = seg;
    m->seg[m->nseg++] = *s;
    return 0;
}

int mrd_clock_models_load(sqlite3 *db, struct mrd_clock_models **out)
{
    sqlite3_stmt *st = NULL;
    struct mrd_clock_models *ms = calloc(1, sizeof(*ms));
    int rc = -ENOMEM, step;
    if (!ms)
        return -ENOMEM;
    ms->max_rank = -1;
    rc = mrd_db_has_table(db, "clock_models");
    if (rc <= 0) /* no table: an empty set */
        goto done;
    if (sqlite3_prepare_v2(db, mrd_db_sql_clock_models_max_rank, -1, &st, NULL) != SQLITE_OK)
        goto sqlfail;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        int64_t mr = sqlite3_column_int64(st, 0);
        if (mr < 0 || mr > MRD_CLOCK_MAX_RANK) {
            rc = -ERANGE;
            goto fail;
        }
        ms->max_rank = (int)mr;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (ms->max_rank < 0)
        goto done;
    ms->by_rank = calloc((size_t)ms->max_rank + 1, sizeof(*ms->by_rank));
    if (!ms->by_rank) {
        rc = -ENOMEM;
        goto fail;
    }
    if (sqlite3_prepare_v2(db, mrd_db_sql_clock_models_all, -1, &st, NULL) != SQLITE_OK)
        goto sqlfail;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_clock_segment s = {
            .local_begin = sqlite3_column_int64(st, 1),
            .local_end = sqlite3_column_int64(st, 2),
            .offset_ns = sqlite3_column_int64(st, 3),
            .drift_ppm = sqlite3_column_double(st, 4),
            .error_bound_ns = sqlite3_column_int64(st, 5),
            .samples = (uint32_t)sqlite3_column_int64(st, 6),
        };
        rc = add_row(ms, sqlite3_column_int(st, 0), &s, (const char *)sqlite3_column_text(st, 7));
        if (rc)
            goto fail;
    }
    if (step != SQLITE_DONE)
        goto sqlfail;
    sqlite3_finalize(st);
    st = NULL;
done:
    *out = ms;
    return 0;
sqlfail:
    rc = -MRD_ERR_SQLITE;
fail:
    sqlite3_finalize(st);
    mrd_clock_models_destroy(ms);
    return rc;
}
