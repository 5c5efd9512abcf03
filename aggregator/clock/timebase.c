/* Per-rank clock models in memory and the local <-> global maps (see timebase.h).
 *
 * Segments are kept in one array sorted by (rank, local_begin); a rank's segments are
 * found by binary search on rank, then on local time. GPU timer models are a second small
 * sorted array keyed by (rank, device). Both are loaded once from the database and never
 * change afterwards.
 */
#include "timebase.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "db.h"
#include "error.h"

struct tb_segment {
    int rank;
    int64_t begin, end, offset;
    double drift_ppm;
};

struct tb_gpu {
    int rank, device;
    double slope;
    int64_t intercept;
};

struct mrd_timebase {
    struct tb_segment *seg;
    size_t nseg, capseg;
    struct tb_gpu *gpu;
    size_t ngpu, capgpu;
};

static int segment_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_timebase *tb = ctx;
    int rc = mrd_array_reserve(&tb->seg, &tb->capseg, tb->nseg, sizeof(*tb->seg), 64,
                               MRD_TIMEBASE_MAX_SEGMENTS);
    if (rc < 0)
        return rc;
    struct tb_segment *s = &tb->seg[tb->nseg++];
    s->rank = sqlite3_column_int(st, 0);
    s->begin = sqlite3_column_int64(st, 1);
    s->end = sqlite3_column_int64(st, 2);
    s->offset = sqlite3_column_int64(st, 3);
    s->drift_ppm = sqlite3_column_double(st, 4);
    return 0;
}

static int gpu_model_row(sqlite3_stmt *st, void *ctx)
{
    struct mrd_timebase *tb = ctx;
    int rc = mrd_array_reserve(&tb->gpu, &tb->capgpu, tb->ngpu, sizeof(*tb->gpu), 16,
                               MRD_TIMEBASE_MAX_SEGMENTS);
    if (rc < 0)
        return rc;
    struct tb_gpu *g = &tb->gpu[tb->ngpu++];
    g->rank = sqlite3_column_int(st, 0);
    g->device = sqlite3_column_int(st, 1);
    g->slope = sqlite3_column_double(st, 2);
    g->intercept = sqlite3_column_int64(st, 3);
    return 0;
}

int mrd_timebase_load(sqlite3 *db, int ignore_models, struct mrd_timebase **out)
{
    struct mrd_timebase *tb = calloc(1, sizeof(*tb));
    int rc = -ENOMEM;
    if (!tb)
        goto fail;
    if (!ignore_models) {
        rc = mrd_db_each_row(db, "clock_models", mrd_db_sql_clock_segments, segment_row, tb);
        if (rc < 0)
            goto fail;
    }
    rc = mrd_db_each_row(db, "gpu_timer_models", mrd_db_sql_gpu_models, gpu_model_row, tb);
    if (rc < 0)
        goto fail;
    *out = tb;
    return 0;
fail:
    mrd_timebase_destroy(tb);
    return rc;
}

void mrd_timebase_destroy(struct mrd_timebase *tb)
{
    if (!tb)
        return;
    free(tb->seg);
    free(tb->gpu);
    free(tb);
}

int mrd_timebase_is_global(const struct mrd_timebase *tb)
{
    return tb->nseg > 0;
}

/* First segment of `rank` and the count, by binary search; count 0 when none. */
static const struct tb_segment *rank_segments(const struct mrd_timebase *tb, int rank,
                                              size_t *count)
{
    size_t lo = mrd_array_lower_bound_int(tb->seg, tb->nseg, sizeof(*tb->seg),
                                          offsetof(struct tb_segment, rank), rank);
    size_t n = 0;
    while (lo + n < tb->nseg && tb->seg[lo + n].rank == rank)
        n++;
    *count = n;
    return n ? &tb->seg[lo] : NULL;
}

int mrd_timebase_rank_fitted(const struct mrd_timebase *tb, int rank)
{
    size_t n;
    return rank_segments(tb, rank, &n) != NULL;
}

/* The segment whose range holds t: the last one beginning at or before t (the first one
 * for t before every segment). */
static const struct tb_segment *pick(const struct tb_segment *s, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].begin <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &s[lo - 1] : &s[0];
}

static int64_t apply(const struct tb_segment *s, int64_t local)
{
    double d = s->drift_ppm * (double)(local - s->begin) / 1e6;
    return local + s->offset + (int64_t)llround(d);
}

int64_t mrd_timebase_map(const struct mrd_timebase *tb, int rank, int64_t local)
{
    size_t n;
    const struct tb_segment *s = rank_segments(tb, rank, &n);
    if (!s)
        return local;
    return apply(pick(s, n, local), local);
}

int64_t mrd_timebase_unmap(const struct mrd_timebase *tb, int rank, int64_t global)
{
    size_t n;
    const struct tb_segment *s = rank_segments(tb, rank, &n);
    if (!s)
        return global;
    /* Fixed-point iteration: the map is increasing with slope ~1, so a few rounds of
     * local += global - map(local) converge to the nearest nanosecond. */
    int64_t local = global - s[0].offset;
    for (int i = 0; i < 6; i++) {
        int64_t err = global - apply(pick(s, n, local), local);
        if (err == 0)
            break;
        local += err;
    }
    return local;
}

int mrd_timebase_gpu_to_local(const struct mrd_timebase *tb, int rank, int device, int64_t gpu_ns,
                              int64_t *local)
{
    size_t lo = 0, hi = tb->ngpu;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct tb_gpu *g = &tb->gpu[mid];
        if (g->rank < rank || (g->rank == rank && g->device < device))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == tb->ngpu || tb->gpu[lo].rank != rank || tb->gpu[lo].device != device)
        return -ENOENT;
    /* gpu * slope + intercept, written so that the large product never passes through a
     * double (raw timers near 2^60 would lose hundreds of ns). */
    double frac = (tb->gpu[lo].slope - 1.0) * (double)gpu_ns;
    *local = gpu_ns + tb->gpu[lo].intercept + (int64_t)llround(frac);
    return 0;
}

/* mrd_db_time_origin's map: 1 and *global for a rank with a model, else 0. */
static int origin_map(void *ctx, int rank, int64_t local, int64_t *global)
{
    const struct mrd_timebase *tb = ctx;
    if (!mrd_timebase_rank_fitted(tb, rank))
        return 0;
    *global = mrd_timebase_map(tb, rank, local);
    return 1;
}

int mrd_timebase_origin(const struct mrd_timebase *tb, sqlite3 *db, int64_t *origin)
{
    return mrd_db_time_origin(db, mrd_timebase_is_global(tb), origin_map, (void *)tb, origin);
}
