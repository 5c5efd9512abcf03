/* meridian batch reader: validation of a decoded Batch and cursors that undo the deltas.
 *
 * Runs in meridiand after mrd_frame_decode() has produced a Meridian__V1__Batch: the
 * ingest stage calls mrd_batch_check() once per batch (anything it accepts is safe to
 * index), then the store walks each kind with a cursor and writes rows. Workload: up to
 * 512 ranks x 50,000 events/s (bursts of 200,000) on the aggregator, so the cursors are
 * plain typed code with no allocation, and a batch is never copied.
 *
 * This file also holds the column layout table (batch_internal.h) that the builder
 * (batch.c) fills batches through, so writer and reader cannot disagree.
 * Thread-safe: no shared mutable state; a cursor belongs to one thread.
 */
#include <string.h>

#include "batch.h"
#include "batch_internal.h"
#include "error.h"

#define COL(T, f) {offsetof(T, n_##f), offsetof(T, f), (uint8_t)sizeof(*((T *)NULL)->f)}

/* The layout of kind fn's Columns message, generated from its field list (kinds.h): each
 * field's column at index (field number - 1), the string-id columns, their counts. */
#define LAYOUT_COL(K, m, sql, cls, num, wire, codec, arg, pos, sep) [(num)-1] = COL(mrd__cols_##K, wire),
#define LAYOUT_ONE(K, m, sql, cls, num, wire, codec, arg, pos, sep) +1
#define LAYOUT_NSTR(K, m, sql, cls, num, wire, codec, arg, pos, sep) +MRD__CODEC_IS_STR(codec)
#define LAYOUT_STRCOL_1(num) (num) - 1,
#define LAYOUT_STRCOL_0(num)
#define LAYOUT_STRCOL_(is, num) LAYOUT_STRCOL_##is(num)
#define LAYOUT_STRCOL_X(is, num) LAYOUT_STRCOL_(is, num)
#define LAYOUT_STRCOL(K, m, sql, cls, num, wire, codec, arg, pos, sep)                             \
    LAYOUT_STRCOL_X(MRD__CODEC_IS_STR(codec), num)
#define LAYOUT_KIND(E, v, fn, T, u, bm, C, d, t, tag)                                              \
    [E] = {.desc = &d,                                                                             \
           .batch_off = offsetof(Meridian__V1__Batch, bm),                                         \
           .ncols = 0 MRD__FIELDS(fn, LAYOUT_ONE),                                                 \
           .nstr = 0 MRD__FIELDS(fn, LAYOUT_NSTR),                                                 \
           .strcol = {MRD__FIELDS(fn, LAYOUT_STRCOL)},                                             \
           .col = {MRD__FIELDS(fn, LAYOUT_COL)}},

const struct mrd__groupspec mrd__batch_groups[MRD_EV__COUNT] = {MRD_KINDS(LAYOUT_KIND)};

#define LAYOUT_CHECK(E, v, fn, T, u, bm, C, d, t, tag)                                             \
    _Static_assert(0 MRD__FIELDS(fn, LAYOUT_ONE) <= MRD__BATCH_MAX_COLS, #fn ": too many columns"); \
    _Static_assert(0 MRD__FIELDS(fn, LAYOUT_NSTR) <= MRD__BATCH_MAX_STRCOLS,                       \
                   #fn ": too many string columns");
MRD_KINDS(LAYOUT_CHECK)

static int bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return -MRD_ERR_MALFORMED;
}

static int check_strings(const Meridian__V1__Batch *m, const char **why)
{
    uint32_t last = 0;

    if (m->n_strings > MRD__BATCH_MAX_DEFS)
        return bad(why, "more than 65536 string definitions");
    for (size_t i = 0; i < m->n_strings; i++) {
        const Meridian__V1__StringDef *d = m->strings[i];

        if (!d || !d->value)
            return bad(why, "string definition without value");
        if (d->id == 0 || d->id > MRD__BATCH_MAX_STRING_ID)
            return bad(why, "string definition id 0 or >= 2^31");
        if (d->id <= last)
            return bad(why, "string definitions not in strictly increasing id order");
        if (strnlen(d->value, MRD__BATCH_MAX_STRLEN + 1) > MRD__BATCH_MAX_STRLEN)
            return bad(why, "string value longer than 4096 bytes");
        last = d->id;
    }
    return 0;
}

static int check_group(const Meridian__V1__Batch *m, int kind, const char **why)
{
    const struct mrd__groupspec *s = &mrd__batch_groups[kind];
    const ProtobufCMessage *g = mrd__batch_group(m, kind);
    size_t n;

    if (!g)
        return 0;
    if (g->descriptor != s->desc)
        return bad(why, "column group of the wrong message type");
    n = mrd__batch_col_len(g, &s->col[0]);
    if (n > MRD__BATCH_MAX_EVENTS)
        return bad(why, "more than 1000000 events of one kind");
    for (int c = 1; c < s->ncols; c++)
        if (mrd__batch_col_len(g, &s->col[c]) != n)
            return bad(why, "columns of one group have different lengths");
    for (int k = 0; k < s->nstr; k++) {
        const uint32_t *ids = *(uint32_t *const *)((const char *)g + s->col[s->strcol[k]].p_off);

        for (size_t i = 0; i < n; i++)
            if (ids[i] > MRD__BATCH_MAX_STRING_ID)
                return bad(why, "string id >= 2^31");
    }
    return 0;
}

/* Validates a decoded batch (see batch.h): seq >= 1, run_id <= 256 bytes, string
 * definitions (<= 65536, ids in 1..2^31-1 strictly increasing, values <= 4096 bytes),
 * every column group (equal column lengths, <= 1,000,000 events, string ids < 2^31) and
 * <= 256 counters. Returns 0 or -MRD_ERR_MALFORMED with a static reason in *why.
 * Thread-safe. */
int mrd_batch_check(const Meridian__V1__Batch *m, const char **why)
{
    int rc;

    if (!m || m->base.descriptor != &meridian__v1__batch__descriptor)
        return bad(why, "not a Batch message");
    if (m->seq == 0)
        return bad(why, "batch seq 0 (sequences start at 1)");
    if (!m->run_id || strnlen(m->run_id, MRD__BATCH_MAX_RUN_ID + 1) > MRD__BATCH_MAX_RUN_ID)
        return bad(why, "run_id missing or longer than 256 bytes");
    rc = check_strings(m, why);
    if (rc)
        return rc;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        rc = check_group(m, k, why);
        if (rc)
            return rc;
    }
    if (m->n_dropped > MRD__BATCH_MAX_COUNTERS)
        return bad(why, "more than 256 counters");
    for (size_t i = 0; i < m->n_dropped; i++)
        if (!m->dropped[i])
            return bad(why, "empty counter");
    if (why)
        *why = NULL;
    return 0;
}

/* Number of events of `kind` in a checked batch; 0 for an absent group or unknown kind.
 * Thread-safe. */
size_t mrd_batch_count(const Meridian__V1__Batch *m, int kind)
{
    const ProtobufCMessage *g;

    if (!m || kind <= 0 || kind >= MRD_EV__COUNT)
        return 0;
    g = mrd__batch_group(m, kind);
    return g ? mrd__batch_col_len(g, &mrd__batch_groups[kind].col[0]) : 0;
}

/* Points c at the start of m. One cursor walks one kind; init again before walking
 * another. m must have passed mrd_batch_check and outlive the cursor. */
void mrd_batch_cursor_init(struct mrd_batch_cursor *c, const Meridian__V1__Batch *m)
{
    memset(c, 0, sizeof(*c));
    c->m = m;
}

/* Adds a delta to a running value with wrapping (modulo 2^64) arithmetic. */
static int64_t undelta(int64_t *prev, int64_t delta)
{
    *prev = mrd__u2s((uint64_t)*prev + (uint64_t)delta);
    return *prev;
}

static int64_t add_dur(int64_t start, uint64_t duration)
{
    return mrd__u2s((uint64_t)start + duration);
}

/* Each mrd_batch_next_<fn> (generated from kinds.h: one typed, straight-line statement per
 * field) returns 1 and fills *e with the next event of that kind (deltas undone, durations
 * turned back into end times), or 0 at the end. Cursor thread. */
#define NEXT_DELTA(m, wire, slot) e->m = undelta(&c->prev[slot], g->wire[i])
#define NEXT_DUR(m, wire, start) e->m = add_dur(e->start, g->wire[i])
#define NEXT_PLAIN(m, wire, arg) e->m = g->wire[i]
#define NEXT_STR(m, wire, arg) e->m = g->wire[i]
#define NEXT_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep) NEXT_##codec(m, wire, arg);
#define NEXT_KIND(E, v, fn, T, u, bm, C, d, t, tag)                                                \
    int mrd_batch_next_##fn(struct mrd_batch_cursor *c, T *e)                                      \
    {                                                                                              \
        const C *g = c->m->bm;                                                                     \
        size_t i;                                                                                  \
        if (!g || c->i >= mrd__batch_col_len(&g->base, &mrd__batch_groups[E].col[0]))              \
            return 0;                                                                              \
        i = c->i++;                                                                                \
        MRD__FIELDS(fn, NEXT_FIELD)                                                                \
        return 1;                                                                                  \
    }
MRD_KINDS(NEXT_KIND)

/* One reader per kind, indexed by enum mrd_event_kind (batch.h: mrd_batch_next_any). */
#define NEXT_ANY(E, v, fn, T, u, bm, C, d, t, tag)                                                 \
    static int any_##fn(struct mrd_batch_cursor *c, void *e)                                       \
    {                                                                                              \
        return mrd_batch_next_##fn(c, (T *)e);                                                     \
    }
MRD_KINDS(NEXT_ANY)
#define NEXT_ENTRY(E, v, fn, T, u, bm, C, d, t, tag) [E] = any_##fn,
static int (*const next_any[MRD_EV__COUNT])(struct mrd_batch_cursor *, void *) = {
    MRD_KINDS(NEXT_ENTRY)};

int mrd_batch_next_any(struct mrd_batch_cursor *c, int kind, void *e)
{
    if (kind <= 0 || kind >= MRD_EV__COUNT || !next_any[kind])
        return 0;
    return next_any[kind](c, e);
}
