/* meridian ingest, collective skew (skew.h has the rules and the workload).
 *
 * Layout: pending instances live in an open-addressing table (linear probing, deletion by
 * backward shift, at most half full) and their keys, in creation order, in a ring of
 * max_pending that picks the one to evict; a key popped from the ring whose instance
 * already completed is simply dropped. Ranks are a lazily allocated array indexed by the
 * job rank; (communicator, function) groups a small array searched linearly.
 */
#include "skew.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "batch.h"
#include "cmp.h"

#define FUNCS_PER_RANK 16

static const char *const func_names[] = {NULL,       "AllReduce", "Broadcast",
                                         "Reduce",   "AllGather", "ReduceScatter",
                                         "AllToAll", "Gather",    "Scatter"};
#define NFUNCS (sizeof(func_names) / sizeof(func_names[0]))

struct rank_state {
    uint32_t nclock, clock_pos;
    int64_t off[MRD_SKEW_CLOCK_KEEP], rtt[MRD_SKEW_CLOCK_KEEP];
    int64_t best_off, best_rtt; /* best_rtt < 0: no sample yet */
    uint32_t nfunc;
    struct {
        uint32_t id;
        uint8_t code;
    } funcs[FUNCS_PER_RANK];
};

struct inst {
    uint64_t comm, seq;
    uint8_t used, func, unaligned;
    uint32_t nranks, seen;
    int64_t early, late, err_early, err_late;
    uint32_t early_rank, late_rank;
    uint64_t bits[MRD_SKEW_RANKS_MAX / 64];
};

struct key {
    uint64_t comm, seq;
    uint8_t func;
};

struct group {
    uint64_t comm;
    uint8_t func;
    uint32_t n, pos;
    int64_t hist[MRD_SKEW_HISTORY];
};

struct mrd_skew {
    struct mrd_skew_config cfg;
    struct rank_state **ranks; /* cfg.max_ranks */
    struct inst *tab;
    size_t mask; /* table size - 1 */
    struct key *fifo;
    size_t fifo_head, fifo_n;
    struct group groups[MRD_SKEW_GROUPS];
    size_t ngroups;
    int64_t scratch[MRD_SKEW_HISTORY];
    struct mrd_skew_counters cnt;
};

void mrd_skew_free(struct mrd_skew *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; s->ranks && i < s->cfg.max_ranks; i++)
        free(s->ranks[i]);
    MRD_ARRAY_FREE_ALL(s->ranks, s->tab, s->fifo, s);
}

int mrd_skew_new(const struct mrd_skew_config *cfg, struct mrd_skew **out)
{
    *out = NULL;
    struct mrd_skew_config c = cfg ? *cfg : (struct mrd_skew_config){0};
    if (!(c.factor > 1.0))
        return -EINVAL;
    if (!c.min_count)
        c.min_count = MRD_SKEW_MIN_COUNT;
    if (!c.max_pending)
        c.max_pending = MRD_SKEW_PENDING_MAX;
    if (!c.max_ranks)
        c.max_ranks = 1024;
    if (c.max_pending > (1u << 24) || c.max_ranks > (1u << 24))
        return -EINVAL;
    struct mrd_skew *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = c;
    size_t size = 16;
    while (size < 2 * (size_t)c.max_pending)
        size *= 2;
    s->mask = size - 1;
    s->tab = calloc(size, sizeof(*s->tab));
    s->fifo = calloc(c.max_pending, sizeof(*s->fifo));
    s->ranks = calloc(c.max_ranks, sizeof(*s->ranks));
    if (!s->tab || !s->fifo || !s->ranks) {
        mrd_skew_free(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void mrd_skew_get_counters(const struct mrd_skew *s, struct mrd_skew_counters *out)
{
    *out = s->cnt;
}

/* ---- ranks: clock offsets and function names ---- */

static struct rank_state *rank_get(struct mrd_skew *s, uint32_t rank)
{
    if (rank >= s->cfg.max_ranks)
        return NULL;
    if (!s->ranks[rank]) {
        s->ranks[rank] = calloc(1, sizeof(struct rank_state));
        if (s->ranks[rank])
            s->ranks[rank]->best_rtt = -1;
    }
    return s->ranks[rank];
}

void mrd_skew_clock(struct mrd_skew *s, uint32_t rank, const struct mrd_clock_sample *c)
{
    struct rank_state *r = rank_get(s, rank);
    int64_t rtt = (c->t3 - c->t0) - (c->t2 - c->t1);
    if (!r || rtt < 0 || c->t3 < c->t0)
        return; /* not a sample (a broken one cannot bound anything) */
    r->off[r->clock_pos] = ((c->t1 - c->t0) + (c->t2 - c->t3)) / 2;
    r->rtt[r->clock_pos] = rtt;
    r->clock_pos = (r->clock_pos + 1) % MRD_SKEW_CLOCK_KEEP;
    if (r->nclock < MRD_SKEW_CLOCK_KEEP)
        r->nclock++;
    r->best_rtt = -1; /* oldest to newest: of equal round trips the oldest is kept */
    uint32_t oldest = r->nclock < MRD_SKEW_CLOCK_KEEP ? 0 : r->clock_pos;
    for (uint32_t k = 0; k < r->nclock; k++) {
        uint32_t i = (oldest + k) % MRD_SKEW_CLOCK_KEEP;
        if (r->best_rtt < 0 || r->rtt[i] < r->best_rtt) {
            r->best_rtt = r->rtt[i];
            r->best_off = r->off[i];
        }
    }
}

static uint8_t func_code_of_name(const char *value)
{
    for (uint8_t i = 1; i < NFUNCS; i++)
        if (value && strcasecmp(value, func_names[i]) == 0)
            return i;
    return 0;
}

void mrd_skew_string(struct mrd_skew *s, uint32_t rank, uint32_t id, const char *value)
{
    uint8_t code = func_code_of_name(value);
    struct rank_state *r = code ? rank_get(s, rank) : NULL;
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nfunc && i < FUNCS_PER_RANK; i++)
        if (r->funcs[i].id == id) {
            r->funcs[i].code = code;
            return;
        }
    /* a new id (an agent restarted under the same rank): the oldest entry makes room */
    uint32_t slot = r->nfunc++ % FUNCS_PER_RANK;
    r->funcs[slot].id = id;
    r->funcs[slot].code = code;
}

static uint8_t func_code(const struct rank_state *r, uint32_t id)
{
    for (uint32_t i = 0; i < r->nfunc && i < FUNCS_PER_RANK; i++)
        if (r->funcs[i].id == id)
            return r->funcs[i].code;
    return 0;
}

/* ---- pending instances ---- */

static size_t home(const struct mrd_skew *s, uint64_t comm, uint64_t seq, uint8_t func)
{
    uint64_t h = comm * 0x9e3779b97f4a7c15ull ^ (seq + func * 0x632be59bd9b4e019ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (size_t)h & s->mask;
}

static struct inst *find(struct mrd_skew *s, uint64_t comm, uint64_t seq, uint8_t func)
{
    for (size_t i = home(s, comm, seq, func);; i = (i + 1) & s->mask) {
        struct inst *e = &s->tab[i];
        if (!e->used)
            return NULL;
        if (e->comm == comm && e->seq == seq && e->func == func)
            return e;
    }
}

/* Removes the entry at e, shifting later entries of its cluster back. */
static void remove_at(struct mrd_skew *s, struct inst *e)
{
    size_t i = (size_t)(e - s->tab), j = i;
    for (;;) {
        j = (j + 1) & s->mask;
        struct inst *n = &s->tab[j];
        if (!n->used)
            break;
        size_t k = home(s, n->comm, n->seq, n->func);
        /* n stays when its home lies cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        s->tab[i] = *n;
        i = j;
    }
    s->tab[i].used = 0;
}

static struct inst *create(struct mrd_skew *s, uint64_t comm, uint64_t seq, uint8_t func,
                           uint32_t nranks)
{
    if (s->fifo_n == s->cfg.max_pending) { /* the oldest created goes, if still pending */
        struct key *k = &s->fifo[s->fifo_head];
        struct inst *old = find(s, k->comm, k->seq, k->func);
        if (old) {
            remove_at(s, old);
            s->cnt.evicted++;
        }
        s->fifo_head = (s->fifo_head + 1) % s->cfg.max_pending;
        s->fifo_n--;
    }
    size_t i = home(s, comm, seq, func);
    while (s->tab[i].used)
        i = (i + 1) & s->mask;
    struct inst *e = &s->tab[i];
    memset(e, 0, sizeof(*e));
    e->used = 1;
    e->comm = comm;
    e->seq = seq;
    e->func = func;
    e->nranks = nranks;
    s->fifo[(s->fifo_head + s->fifo_n++) % s->cfg.max_pending] =
        (struct key){.comm = comm, .seq = seq, .func = func};
    return e;
}

/* ---- medians ---- */

static struct group *group_get(struct mrd_skew *s, uint64_t comm, uint8_t func)
{
    for (size_t i = 0; i < s->ngroups; i++)
        if (s->groups[i].comm == comm && s->groups[i].func == func)
            return &s->groups[i];
    if (s->ngroups == MRD_SKEW_GROUPS)
        return NULL;
    struct group *g = &s->groups[s->ngroups++];
    memset(g, 0, sizeof(*g));
    g->comm = comm;
    g->func = func;
    return g;
}

/* Element n/2 of the group's skews sorted (0 when none). */
static int64_t group_median(struct mrd_skew *s, const struct group *g)
{
    if (!g->n)
        return 0;
    memcpy(s->scratch, g->hist, g->n * sizeof(int64_t));
    qsort(s->scratch, g->n, sizeof(int64_t), mrd_cmp_int64);
    return s->scratch[g->n / 2];
}

int64_t mrd_skew_median(struct mrd_skew *s, uint64_t comm_hash, const char *func, size_t *held)
{
    uint8_t code = func_code_of_name(func);
    for (size_t i = 0; i < s->ngroups; i++)
        if (s->groups[i].comm == comm_hash && s->groups[i].func == code) {
            if (held)
                *held = s->groups[i].n;
            return group_median(s, &s->groups[i]);
        }
    if (held)
        *held = 0;
    return 0;
}

/* An instance seen from every rank: 1 with *hit when over the threshold. */
static int complete(struct mrd_skew *s, const struct inst *e, struct mrd_skew_hit *hit)
{
    s->cnt.completed++;
    if (e->unaligned) {
        s->cnt.unaligned++;
        return 0;
    }
    struct group *g = group_get(s, e->comm, e->func);
    if (!g) {
        s->cnt.ignored++;
        return 0;
    }
    int64_t skew = e->late - e->early, err = (e->err_early + e->err_late) / 2, median = 0;
    int fire = 0;
    if (g->n >= s->cfg.min_count) {
        median = group_median(s, g);
        fire = (double)skew > s->cfg.factor * (double)median && skew > err;
    }
    if (fire) {
        s->cnt.hits++;
        *hit = (struct mrd_skew_hit){.comm_hash = e->comm,
                                     .seq = e->seq,
                                     .func = func_names[e->func],
                                     .skew_ns = skew,
                                     .median_ns = median,
                                     .error_ns = err,
                                     .latest_rank = e->late_rank,
                                     .earliest_rank = e->early_rank,
                                     .nranks = e->nranks,
                                     .held = g->n};
    }
    g->hist[g->pos] = skew;
    g->pos = (g->pos + 1) % MRD_SKEW_HISTORY;
    if (g->n < MRD_SKEW_HISTORY)
        g->n++;
    return fire;
}

int mrd_skew_op(struct mrd_skew *s, uint32_t rank, const struct mrd_nccl_op *op,
                struct mrd_skew_hit *hit)
{
    if (op->is_p2p)
        return 0; /* no sequence number: nothing to match */
    struct rank_state *r = rank_get(s, rank);
    uint8_t code = r ? func_code(r, op->func) : 0;
    if (!code || op->comm_nranks < 2 || op->comm_nranks > MRD_SKEW_RANKS_MAX ||
        op->comm_rank >= op->comm_nranks) {
        s->cnt.ignored++;
        return 0;
    }
    struct inst *e = find(s, op->comm_hash, op->seq, code);
    if (!e)
        e = create(s, op->comm_hash, op->seq, code, op->comm_nranks);
    uint64_t bit = 1ull << (op->comm_rank % 64);
    if (e->nranks != op->comm_nranks || (e->bits[op->comm_rank / 64] & bit))
        return 0; /* a resent op, or one that disagrees on the size: not counted */
    e->bits[op->comm_rank / 64] |= bit;
    if (r->best_rtt < 0) {
        e->unaligned = 1;
    } else {
        int64_t t = op->start + r->best_off, err = r->best_rtt;
        if (e->seen == 0 || t < e->early) {
            e->early = t;
            e->early_rank = rank;
            e->err_early = err;
        }
        if (e->seen == 0 || t > e->late) {
            e->late = t;
            e->late_rank = rank;
            e->err_late = err;
        }
    }
    if (++e->seen < e->nranks)
        return 0;
    struct inst done = *e;
    remove_at(s, e);
    return complete(s, &done, hit);
}

void mrd_skew_batch(struct mrd_skew *s, uint32_t rank, const Meridian__V1__Batch *b,
                    void (*on_hit)(void *ctx, const struct mrd_skew_hit *hit), void *ctx)
{
    struct mrd_batch_cursor cur;
    struct mrd_clock_sample c;
    struct mrd_nccl_op op;
    struct mrd_skew_hit hit;
    if (!mrd_batch_count(b, MRD_EV_NCCL_OP) && !mrd_batch_count(b, MRD_EV_CLOCK))
        return;
    for (size_t i = 0; i < b->n_strings; i++)
        if (b->strings[i])
            mrd_skew_string(s, rank, b->strings[i]->id, b->strings[i]->value);
    mrd_batch_cursor_init(&cur, b);
    while (mrd_batch_next_clock_sample(&cur, &c))
        mrd_skew_clock(s, rank, &c);
    mrd_batch_cursor_init(&cur, b);
    while (mrd_batch_next_nccl_op(&cur, &op))
        if (mrd_skew_op(s, rank, &op, &hit) && on_hit)
            on_hit(ctx, &hit);
}
