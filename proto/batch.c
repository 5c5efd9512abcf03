/* meridian batch builder: event records -> one compact, compressed BATCH frame.
 *
 * Runs on the agent's single flusher thread (and in the load generator): records drained
 * from the per-thread rings are appended here, one call per event, and finish() packs
 * the pending columns with protobuf-c and frames them with mrd_frame_encode(). Workload:
 * 50,000 events/s per rank sustained, 200,000 in bursts, typically 16,384 events per
 * batch; appending is a bounds check and a store per column, no allocation once the
 * column arrays have grown to their working size.
 *
 * Columns. Each kind's values are stored straight into arrays of the wire type (via the
 * layout table in batch_read.c), delta columns as the wrapping difference to the previous
 * event of the same kind in this batch, durations as end - start (modulo 2^64).
 *
 * Size. The builder keeps the encoded (uncompressed) size of the Batch as it grows: the
 * exact varint size of every value and string definition, plus a bound for each column's
 * tag and length (7 bytes) and the fixed fields (run_id; counters at their longest). An
 * append that would push it over max_frame returns -EAGAIN (finish first), so a
 * finished frame always fits the peer's limit and finish() cannot fail for size; an
 * event that cannot fit even an empty batch returns -MRD_ERR_TOO_LARGE (the caller drops
 * and counts it as DROP_TOO_LARGE).
 *
 * Strings. intern() maps each distinct string to an id 1..N for the builder's life (the
 * table in batch_strings.c, capped; at the cap intern returns 0 = "none"). A batch
 * carries a StringDef for every id it uses unless a batch that defined it has been
 * acknowledged: acknowledged means committed, so the aggregator can resolve the id on any
 * later batch, also one resent on a new connection. The
 * builder remembers which ids each unacknowledged batch defined (the definition log)
 * and, on mrd_batch_builder_acked(seq), marks exactly the ids that batch `seq` defined;
 * acks may come in any order, for batches that are still current or long gone. The log
 * holds at most DEF_LOG_CAP entries; at the cap the oldest are forgotten, which only
 * means those strings are defined again later (bytes, never correctness).
 *
 * Not thread-safe: one builder per sender thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "batch_internal.h"
#include "error.h"
#include "frame.h"

#define DEF_LOG_CAP (2u * MRD__BATCH_MAX_DEFS)
#define DEFAULT_TARGET 16384u
/* rank, seq, agent_instance at their longest, and every drop counter at its longest
 * (2-byte tag, length, key, 10-byte value); run_id is added per builder. */
#define FIXED_OVERHEAD (6u + 11u + 11u + (MRD_DROP__COUNT - 1u) * (2u + 1u + 6u + 11u))

struct def_log_entry {
    uint64_t seq;
    uint32_t id; /* 0 = consumed */
};

struct group {
    void *col[MRD__BATCH_MAX_COLS];
    size_t n, cap;
    uint64_t prev[2];      /* running values of the delta columns */
    ProtobufCMessage *msg; /* wire struct, filled at finish */
    uint8_t wire[MRD__BATCH_MAX_COLS]; /* WIRE_* of each column, from the descriptor */
};

struct mrd_batch_builder {
    char *run_id;
    uint32_t rank;
    uint64_t agent_instance;
    uint32_t max_frame, target;
    int level;

    struct group g[MRD_EV__COUNT];
    size_t pending;
    size_t bytes; /* upper bound of the encoded Batch so far */
    size_t fixed; /* its part independent of the events */

    struct mrd__strtab st;
    uint32_t gen; /* number of the pending batch, for mrd__string.mark */

    uint32_t *defs; /* ids the pending batch defines */
    uint32_t ndefs, defs_cap;

    struct def_log_entry *log;
    size_t log_start, log_len, log_cap;

    uint64_t dropped[MRD_DROP__COUNT];
};

/* How a column's elements are encoded (packed): varint, zigzag varint (sint32/sint64),
 * 8 fixed bytes (fixed64), or varint of the 64-bit two's complement (int64/int32). */
enum { WIRE_VARINT, WIRE_ZIGZAG32, WIRE_ZIGZAG64, WIRE_FIXED64, WIRE_INT32 };

/* Bound of a column's (or group's) tag (<= 2 bytes, field numbers < 2048) + length. */
#define COL_HEADER_BOUND 7u

static size_t varint_len(uint64_t v)
{
    return 1 + (size_t)(63 - __builtin_clzll(v | 1)) / 7; /* 7 payload bits per byte */
}

static size_t value_len(uint8_t wire, uint64_t v)
{
    switch (wire) {
    case WIRE_ZIGZAG32: {
        uint32_t x = (uint32_t)v;

        return varint_len((x << 1) ^ (0u - (x >> 31)));
    }
    case WIRE_ZIGZAG64:
        return varint_len((v << 1) ^ (0u - (v >> 63)));
    case WIRE_FIXED64:
        return 8;
    case WIRE_INT32: /* a negative int32 travels sign-extended to 64 bits */
        return varint_len((uint64_t)(int64_t)mrd__u2s32((uint32_t)v));
    default:
        return varint_len(v);
    }
}

/* Encoded size of StringDef{id, value of len bytes} inside Batch.strings. */
static size_t def_len(uint32_t id, size_t len)
{
    size_t inner = 1 + varint_len(id) + 1 + varint_len(len) + len;

    return 1 + varint_len(inner) + inner;
}

static uint8_t wire_of(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_SINT32:
        return WIRE_ZIGZAG32;
    case PROTOBUF_C_TYPE_SINT64:
        return WIRE_ZIGZAG64;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return WIRE_FIXED64;
    case PROTOBUF_C_TYPE_INT32:
        return WIRE_INT32;
    default:
        return WIRE_VARINT;
    }
}

/* Creates a builder for cfg (run_id copied). max_frame 0 means MRD_FRAME_DEFAULT_MAX and
 * target_events 0 means 16384. Returns 0 and *out; -EINVAL for a max_frame below
 * MRD_FRAME_MIN_MAX, target_events above 1,000,000 or a run_id over 256 bytes; -ENOMEM.
 * Any thread; the builder then belongs to one thread. */
int mrd_batch_builder_new(const struct mrd_batch_builder_config *cfg,
                          struct mrd_batch_builder **out)
{
    struct mrd_batch_builder *b;
    const char *run = cfg && cfg->run_id ? cfg->run_id : "";

    if (!cfg || !out)
        return -EINVAL;
    if ((cfg->max_frame && cfg->max_frame < MRD_FRAME_MIN_MAX) ||
        cfg->target_events > MRD__BATCH_MAX_EVENTS || strlen(run) > MRD__BATCH_MAX_RUN_ID)
        return -EINVAL;
    b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->run_id = strdup(run);
    if (!b->run_id)
        goto fail;
    b->rank = cfg->rank;
    b->agent_instance = cfg->agent_instance;
    b->max_frame = cfg->max_frame ? cfg->max_frame : MRD_FRAME_DEFAULT_MAX;
    b->target = cfg->target_events ? cfg->target_events : DEFAULT_TARGET;
    b->level = cfg->compress_level;
    b->gen = 1;
    b->fixed = FIXED_OVERHEAD + 1 + varint_len(strlen(run)) + strlen(run);
    b->bytes = b->fixed;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        const struct mrd__groupspec *s = &mrd__batch_groups[k];

        b->g[k].msg = malloc(s->desc->sizeof_message);
        if (!b->g[k].msg)
            goto fail;
        for (int c = 0; c < s->ncols; c++)
            b->g[k].wire[c] = wire_of(protobuf_c_message_descriptor_get_field(s->desc, c + 1));
    }
    *out = b;
    return 0;

fail:
    mrd_batch_builder_free(b);
    return -ENOMEM;
}

/* Frees the builder, its strings and columns. Accepts NULL. */
void mrd_batch_builder_free(struct mrd_batch_builder *b)
{
    if (!b)
        return;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        for (int c = 0; c < MRD__BATCH_MAX_COLS; c++)
            free(b->g[k].col[c]);
        free(b->g[k].msg);
    }
    mrd__strtab_clear(&b->st);
    free(b->defs);
    free(b->log);
    free(b->run_id);
    free(b);
}

/* Returns the id of s (see batch.h and batch_strings.c). Builder thread only. */
uint32_t mrd_batch_builder_intern(struct mrd_batch_builder *b, const char *s)
{
    return b ? mrd__strtab_intern(&b->st, s) : 0;
}

/* ---- appending ---- */

static int grow_group(struct mrd_batch_builder *b, int kind)
{
    const struct mrd__groupspec *s = &mrd__batch_groups[kind];
    struct group *g = &b->g[kind];
    size_t ncap = g->cap ? g->cap * 2 : 64;

    if (ncap > b->target)
        ncap = b->target;
    for (int c = 0; c < s->ncols; c++) {
        void *p = realloc(g->col[c], ncap * s->col[c].width);

        if (!p)
            return -ENOMEM; /* columns already grown stay valid; cap stays the old one */
        g->col[c] = p;
    }
    g->cap = ncap;
    return 0;
}

/* Checks that one event of `kind` with values v[] and string ids ids[0..n) can be
 * appended and makes room for it; changes nothing visible on failure. *need gets the
 * bytes it adds to the encoded batch. */
static int reserve(struct mrd_batch_builder *b, int kind, const uint64_t *v, const uint32_t *ids,
                   int n, size_t *need)
{
    const struct mrd__groupspec *s = &mrd__batch_groups[kind];
    struct group *g = &b->g[kind];
    size_t bytes = 0;
    uint32_t newdefs = 0;

    if (b->pending >= b->target)
        return -EAGAIN;
    for (int c = 0; c < s->ncols; c++)
        bytes += value_len(g->wire[c], v[c]);
    if (g->n == 0)
        bytes += COL_HEADER_BOUND * (s->ncols + 1u);
    for (int i = 0; i < n; i++) {
        const struct mrd__string *e;
        int dup = 0;

        if (ids[i] == 0)
            continue;
        if (ids[i] > b->st.n)
            return -EINVAL;
        for (int j = 0; j < i; j++)
            dup |= ids[j] == ids[i];
        e = &b->st.str[ids[i]];
        if (dup || e->acked || e->mark == b->gen)
            continue;
        newdefs++;
        bytes += def_len(ids[i], e->len);
    }
    if (b->bytes + bytes > b->max_frame || b->ndefs + newdefs > MRD__BATCH_MAX_DEFS)
        return b->pending == 0 && b->ndefs == 0 ? -MRD_ERR_TOO_LARGE : -EAGAIN;
    if (g->n == g->cap && grow_group(b, kind) < 0)
        return -ENOMEM;
    if (b->ndefs + newdefs > b->defs_cap) {
        uint32_t ncap = b->defs_cap ? b->defs_cap : 64;
        uint32_t *nd;

        while (ncap < b->ndefs + newdefs)
            ncap *= 2;
        nd = realloc(b->defs, ncap * sizeof(*nd));
        if (!nd)
            return -ENOMEM;
        b->defs = nd;
        b->defs_cap = ncap;
    }
    *need = bytes;
    return 0;
}

/* Appends the values v[0..ncols) (already delta-encoded) after a successful reserve. */
static void commit(struct mrd_batch_builder *b, int kind, const uint64_t *v, const uint32_t *ids,
                   int n, size_t need)
{
    const struct mrd__groupspec *s = &mrd__batch_groups[kind];
    struct group *g = &b->g[kind];

    for (int c = 0; c < s->ncols; c++) {
        if (s->col[c].width == 8)
            ((uint64_t *)g->col[c])[g->n] = v[c];
        else
            ((uint32_t *)g->col[c])[g->n] = (uint32_t)v[c];
    }
    g->n++;
    b->pending++;
    b->bytes += need;
    for (int i = 0; i < n; i++) {
        struct mrd__string *e = ids[i] ? &b->st.str[ids[i]] : NULL; /* str: NULL if none */

        if (!e || e->acked || e->mark == b->gen)
            continue;
        e->mark = b->gen;
        b->defs[b->ndefs++] = ids[i];
    }
}

/* Wrapping difference to the running value, which then becomes x. */
static uint64_t delta(uint64_t *prev, uint64_t x)
{
    uint64_t d = x - *prev;

    *prev = x;
    return d;
}

static uint64_t dur(int64_t start, int64_t end)
{
    return (uint64_t)end - (uint64_t)start;
}

/* Every mrd_batch_add_<fn> (generated from kinds.h: one straight-line statement per field)
 * encodes the event into v[] at each field's column (field number - 1), lists its string
 * ids (0 for none), then reserves and commits; on failure the delta state is restored.
 * Returns 0, -EAGAIN (batch full: finish, then append again), -EINVAL (a string id this
 * builder never handed out), -MRD_ERR_TOO_LARGE (cannot fit even an empty batch) or
 * -ENOMEM. Builder thread only. */
#define ADD_DELTA(m, arg) delta(&g->prev[arg], (uint64_t)e->m)
#define ADD_DUR(m, start) dur(e->start, e->m)
#define ADD_PLAIN(m, arg) (uint64_t)e->m
#define ADD_STR(m, arg) (uint64_t)e->m
#define ADD_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep) v[(num)-1] = ADD_##codec(m, arg);
#define ADD_ID_1(m) e->m,
#define ADD_ID_0(m)
#define ADD_ID_(is, m) ADD_ID_##is(m)
#define ADD_ID_X(is, m) ADD_ID_(is, m)
#define ADD_ID(K, m, sql, cls, num, wire, codec, arg, pos, sep) ADD_ID_X(MRD__CODEC_IS_STR(codec), m)
#define ADD_KIND(E, v_, fn, T, u, bm, C, d, t, tag)                                                \
    int mrd_batch_add_##fn(struct mrd_batch_builder *b, const T *e)                                \
    {                                                                                              \
        const uint32_t ids[] = {MRD__FIELDS(fn, ADD_ID) 0};                                        \
        const int nids = (int)(sizeof(ids) / sizeof(ids[0])) - 1;                                  \
        uint64_t v[MRD__BATCH_MAX_COLS];                                                           \
        size_t need;                                                                               \
        struct group *g = &b->g[E];                                                                \
        const uint64_t saved[2] = {g->prev[0], g->prev[1]};                                        \
        int rc;                                                                                    \
        MRD__FIELDS(fn, ADD_FIELD)                                                                 \
        rc = reserve(b, E, v, ids, nids, &need);                                                   \
        if (rc) {                                                                                  \
            g->prev[0] = saved[0];                                                                 \
            g->prev[1] = saved[1];                                                                 \
            return rc;                                                                             \
        }                                                                                          \
        commit(b, E, v, ids, nids, need);                                                          \
        return 0;                                                                                  \
    }
MRD_KINDS(ADD_KIND)

/* Copies the cumulative drop counters; every later batch carries the non-zero ones (a
 * cumulative total is idempotent, so a lost batch loses nothing). Builder thread only. */
void mrd_batch_builder_set_dropped(struct mrd_batch_builder *b,
                                   const uint64_t dropped[MRD_DROP__COUNT])
{
    memcpy(b->dropped, dropped, sizeof(b->dropped));
}

/* Events appended since the last finish. Builder thread only. */
size_t mrd_batch_builder_pending(const struct mrd_batch_builder *b)
{
    return b->pending;
}

/* ---- finishing and acknowledgements ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Appends (seq, id) for every id the batch just finished defined. At the cap the oldest
 * entries are forgotten (their strings are simply defined again later). */
static void log_defs(struct mrd_batch_builder *b, uint64_t seq)
{
    size_t need = b->ndefs;

    if (need == 0)
        return;
    if (b->log_len + need > b->log_cap) {
        /* Compact: drop consumed entries and those whose string is acknowledged anyway. */
        size_t o = 0;

        for (size_t i = b->log_start; i < b->log_len; i++)
            if (b->log[i].id && !b->st.str[b->log[i].id].acked)
                b->log[o++] = b->log[i];
        b->log_start = 0;
        b->log_len = o;
    }
    if (b->log_len + need > b->log_cap && b->log_cap < DEF_LOG_CAP) {
        size_t ncap = b->log_cap ? b->log_cap : 256;
        struct def_log_entry *nl;

        while (ncap < b->log_len + need && ncap < DEF_LOG_CAP)
            ncap *= 2;
        if (ncap > DEF_LOG_CAP)
            ncap = DEF_LOG_CAP;
        nl = realloc(b->log, ncap * sizeof(*nl));
        if (nl) {
            b->log = nl;
            b->log_cap = ncap;
        }
    }
    if (b->log_len + need > b->log_cap) {
        /* Still full (at the cap, or no memory): forget the oldest entries. */
        size_t drop = b->log_len + need - b->log_cap;

        if (drop > b->log_len)
            drop = b->log_len;
        memmove(b->log, b->log + drop, (b->log_len - drop) * sizeof(*b->log));
        b->log_len -= drop;
        if (need > b->log_cap)
            need = b->log_cap;
    }
    for (size_t i = 0; i < need; i++)
        b->log[b->log_len++] = (struct def_log_entry){seq, b->defs[i]};
}

static void reset_pending(struct mrd_batch_builder *b)
{
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        b->g[k].n = 0;
        b->g[k].prev[0] = b->g[k].prev[1] = 0;
    }
    b->pending = 0;
    b->ndefs = 0;
    b->bytes = b->fixed;
    if (++b->gen == 0) { /* wrapped after 2^32 batches: clear stale marks */
        for (uint32_t i = 1; i <= b->st.n; i++)
            b->st.str[i].mark = 0;
        b->gen = 1;
    }
}

/* Encodes the pending events as batch seq (>= 1) into a BATCH frame (see batch.h): string
 * definitions sorted by id, the non-empty column groups, the non-zero drop counters.
 * Returns 0 with *frame (malloc'd, caller frees) and *frame_len, then starts an empty
 * batch; -EINVAL for seq 0; -ENOMEM or -MRD_ERR_TOO_LARGE with the events kept. Builder
 * thread only. */
int mrd_batch_builder_finish(struct mrd_batch_builder *b, uint64_t seq, uint8_t **frame,
                             size_t *frame_len)
{
    Meridian__V1__Batch m = MERIDIAN__V1__BATCH__INIT;
    Meridian__V1__StringDef *defs = NULL, **defp = NULL;
    Meridian__V1__Counter cnt[MRD_DROP__COUNT], *cntp[MRD_DROP__COUNT];
    int rc;

    if (!b || seq == 0 || !frame || !frame_len)
        return -EINVAL;
    m.run_id = b->run_id;
    m.rank = b->rank;
    m.seq = seq;
    m.agent_instance = b->agent_instance;
    if (b->ndefs) {
        defs = malloc(b->ndefs * sizeof(*defs));
        defp = malloc(b->ndefs * sizeof(*defp));
        if (!defs || !defp) {
            rc = -ENOMEM;
            goto fail;
        }
        qsort(b->defs, b->ndefs, sizeof(*b->defs), cmp_u32);
        for (uint32_t i = 0; i < b->ndefs; i++) {
            meridian__v1__string_def__init(&defs[i]);
            defs[i].id = b->defs[i];
            defs[i].value = b->st.str[b->defs[i]].s;
            defp[i] = &defs[i];
        }
        m.strings = defp;
        m.n_strings = b->ndefs;
    }
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        const struct mrd__groupspec *s = &mrd__batch_groups[k];
        struct group *g = &b->g[k];

        if (g->n == 0)
            continue;
        s->desc->message_init(g->msg);
        for (int c = 0; c < s->ncols; c++) {
            *(size_t *)((char *)g->msg + s->col[c].n_off) = g->n;
            *(void **)((char *)g->msg + s->col[c].p_off) = g->col[c];
        }
        *(ProtobufCMessage **)((char *)&m + s->batch_off) = g->msg;
    }
    for (int r = 1; r < MRD_DROP__COUNT; r++) {
        if (!b->dropped[r])
            continue;
        meridian__v1__counter__init(&cnt[m.n_dropped]);
        cnt[m.n_dropped].key = (uint32_t)r;
        cnt[m.n_dropped].value = b->dropped[r];
        cntp[m.n_dropped] = &cnt[m.n_dropped];
        m.n_dropped++;
    }
    m.dropped = m.n_dropped ? cntp : NULL;
    rc = mrd_frame_encode(MRD_FRAME_BATCH, &m.base, b->level, b->max_frame, frame, frame_len);
    if (rc)
        goto fail;
    log_defs(b, seq);
    reset_pending(b);
    free(defs);
    free(defp);
    return 0;

fail:
    free(defs);
    free(defp);
    return rc;
}

/* A new frame limit for later appends; refused while the pending events exceed it (their
 * batch was sized for the old one). Builder thread. */
int mrd_batch_builder_set_max_frame(struct mrd_batch_builder *b, uint32_t max_frame)
{
    uint32_t m = max_frame ? max_frame : MRD_FRAME_DEFAULT_MAX;

    if (!b || m < MRD_FRAME_MIN_MAX)
        return -EINVAL;
    if (b->bytes > m)
        return -EBUSY;
    b->max_frame = m;
    return 0;
}

/* Marks every string that batch seq defined as acknowledged (committed by the
 * aggregator): no later batch defines it again. Exactly the ids batch seq carried, in
 * whatever order acks arrive; unknown or repeated seqs change nothing. Builder thread. */
void mrd_batch_builder_acked(struct mrd_batch_builder *b, uint64_t seq)
{
    if (!b)
        return;
    for (size_t i = b->log_start; i < b->log_len; i++) {
        if (b->log[i].seq != seq || b->log[i].id == 0)
            continue;
        b->st.str[b->log[i].id].acked = 1;
        b->log[i].id = 0;
    }
    while (b->log_start < b->log_len && b->log[b->log_start].id == 0)
        b->log_start++;
    if (b->log_start == b->log_len)
        b->log_start = b->log_len = 0;
}

/* Records a reconnect. Nothing to undo: a batch never relies on a definition that is not
 * acknowledged (committed), so every finished frame, resent as is, and every later batch
 * already carries the definitions it needs; acks that arrive later for batches sent
 * before the reconnect still count. Kept so that callers state the event and the policy
 * can change here alone. Builder thread only. */
void mrd_batch_builder_reset_unacked(struct mrd_batch_builder *b)
{
    (void)b;
}

/* One appender per kind, indexed by enum mrd_event_kind (batch.h: mrd_batch_add_any). */
#define ADD_ANY(E, v, fn, T, u, bm, C, d, t, tag)                                                  \
    static int any_##fn(struct mrd_batch_builder *b, const void *e)                                \
    {                                                                                              \
        return mrd_batch_add_##fn(b, (const T *)e);                                                \
    }
MRD_KINDS(ADD_ANY)
#define ADD_ENTRY(E, v, fn, T, u, bm, C, d, t, tag) [E] = any_##fn,
static int (*const add_any[MRD_EV__COUNT])(struct mrd_batch_builder *, const void *) = {
    MRD_KINDS(ADD_ENTRY)};

int mrd_batch_add_any(struct mrd_batch_builder *b, int kind, const void *e)
{
    if (kind <= 0 || kind >= MRD_EV__COUNT || !add_any[kind])
        return -EINVAL;
    return add_any[kind](b, e);
}
