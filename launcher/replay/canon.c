/* Canonical event form and checksums (see canon.h for the contract and the format).
 *
 * Used on both sides of the end-to-end check: the load generator as it builds batches, the
 * verifier as it reads the database. The hash works on 64-bit words (no formatting: the
 * generator must stay cheap next to the aggregator it loads); strings enter as the hash of
 * their value so that agent-local ids and database ids hash the same. The text form is for
 * humans diffing a mismatch and lists the same fields in the same order.
 */
#include "canon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

uint64_t mrd_canon_fnv1a(uint64_t h, const void *p, uint64_t n)
{
    const unsigned char *s = p;
    for (uint64_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static const char *str(mrd_canon_resolve_fn resolve, void *ctx, uint32_t id)
{
    const char *s = (id && resolve) ? resolve(ctx, id) : NULL;
    return s ? s : "";
}

#define S(id) str(resolve, ctx, (id))
#define I64   "%" PRId64
#define U64   "%" PRIu64

int mrd_canon_text(const struct mrd_canon_event *e, mrd_canon_resolve_fn resolve, void *ctx,
                   char *buf, int cap)
{
    int n;
    switch (e->kind) {
    case MRD_EV_KERNEL: {
        const struct mrd_kernel *k = &e->u.kernel;
        n = snprintf(buf, cap, "K|" I64 "|" I64 "|" U64 "|%u|%u|%u|%s|%u,%u,%u|%u,%u,%u|%u|%u|%u",
                     k->start, k->end, k->correlation, k->device, k->stream, k->context, S(k->name),
                     k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                     k->shared_bytes, k->registers, k->graph_id);
        break;
    }
    case MRD_EV_MEMCPY: {
        const struct mrd_memcpy *m = &e->u.memcpy;
        n = snprintf(buf, cap, "C|" I64 "|" I64 "|" U64 "|" U64 "|%u|%u|%u|%u|%u|%u", m->start,
                     m->end, m->correlation, m->bytes, m->device, m->stream, m->copy_kind,
                     m->src_kind, m->dst_kind, m->peer_device);
        break;
    }
    case MRD_EV_MEMSET: {
        const struct mrd_memset *m = &e->u.memset;
        n = snprintf(buf, cap, "S|" I64 "|" I64 "|" U64 "|" U64 "|%u|%u|%u|%u", m->start, m->end,
                     m->correlation, m->bytes, m->device, m->stream, m->value, m->memory_kind);
        break;
    }
    case MRD_EV_SYNC: {
        const struct mrd_sync *s = &e->u.sync;
        n = snprintf(buf, cap, "Y|" I64 "|" I64 "|" U64 "|%u|%u|%u", s->start, s->end,
                     s->correlation, s->type, s->context, s->stream);
        break;
    }
    case MRD_EV_API: {
        const struct mrd_api *a = &e->u.api;
        n = snprintf(buf, cap, "A|" I64 "|" I64 "|" U64 "|%u|%u|%u|%s", a->start, a->end,
                     a->correlation, a->domain, a->cbid, a->thread, S(a->name));
        break;
    }
    case MRD_EV_GRAPH: {
        const struct mrd_graph *g = &e->u.graph;
        n = snprintf(buf, cap, "G|" I64 "|" I64 "|" U64 "|%u|%u|%u", g->start, g->end,
                     g->correlation, g->device, g->stream, g->graph_id);
        break;
    }
    case MRD_EV_EXTCORR: {
        const struct mrd_extcorr *x = &e->u.extcorr;
        n = snprintf(buf, cap, "X|" U64 "|" U64 "|%u", x->correlation, x->external_id, x->kind);
        break;
    }
    case MRD_EV_NVTX: {
        const struct mrd_nvtx *v = &e->u.nvtx;
        n = snprintf(buf, cap, "N|" I64 "|" I64 "|%u|%s|%s|%u|%u|%u", v->start, v->end, v->kind,
                     S(v->domain), S(v->name), v->thread, v->depth, v->color);
        break;
    }
    case MRD_EV_NCCL_OP: {
        const struct mrd_nccl_op *o = &e->u.nccl_op;
        /* p2p operations have no sequence number: the schema stores NULL, the wire 0 */
        uint64_t seq = o->is_p2p ? 0 : o->seq;
        n = snprintf(buf, cap,
                     "O|" U64 "|" I64 "|" I64 "|" U64 "|%u|%u|" U64 "|%s|" U64 "|%s|" U64
                     "|%d|%d|%s|%s|%u|%u|" U64 "|%u|%u",
                     o->op_id, o->start, o->end, o->comm_hash, o->comm_rank, o->comm_nranks, seq,
                     S(o->func), o->count, S(o->datatype), o->bytes, o->root, o->peer, S(o->algo),
                     S(o->proto), o->channels, o->warps, o->launch_id, o->is_p2p, o->device);
        break;
    }
    case MRD_EV_NCCL_CHANNEL: {
        const struct mrd_nccl_channel *c = &e->u.nccl_channel;
        n = snprintf(buf, cap, "H|" U64 "|%u|" I64 "|" I64 "|" I64, c->op_id, c->channel,
                     c->gpu_start, c->gpu_end, c->host_start);
        break;
    }
    case MRD_EV_MPI: {
        const struct mrd_mpi *m = &e->u.mpi;
        n = snprintf(buf, cap, "M|" I64 "|" I64 "|" U64 "|%s|%u|%u|%d|%d", m->start, m->end,
                     m->bytes, S(m->call), m->comm_size, m->thread, m->peer, m->tag);
        break;
    }
    case MRD_EV_CLOCK: {
        const struct mrd_clock_sample *c = &e->u.clock;
        n = snprintf(buf, cap, "T|" I64 "|" I64 "|" I64 "|" I64, c->t0, c->t1, c->t2, c->t3);
        break;
    }
    case MRD_EV_GPU_CLOCK: {
        const struct mrd_gpu_clock_sample *g = &e->u.gpu_clock;
        n = snprintf(buf, cap, "U|%u|" I64 "|" I64 "|" U64, g->device, g->host_ns, g->gpu_ns,
                     g->uncertainty_ns);
        break;
    }
    default:
        if (cap > 0)
            buf[0] = '\0';
        return -EINVAL;
    }
    if (n < 0)
        return -EINVAL;
    return n < cap ? n : cap - 1;
}

uint64_t mrd_canon_str_hash(const char *s)
{
    if (!s || !*s)
        return 0;
    uint64_t h = mrd_canon_fnv1a(MRD_CANON_FNV_INIT, s, strlen(s));
    return h ? h : 1; /* 0 means "none" */
}

#define K1 0x9e3779b97f4a7c15ull
#define K2 0xc2b2ae3d27d4eb4full

static inline uint64_t round64(uint64_t h, uint64_t w)
{
    h ^= w * K1;
    h = (h << 31) | (h >> 33);
    return h * K2;
}

static inline uint64_t avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

#define W(v)   h = round64(h, (uint64_t)(v))
#define SH(id) W((id) && strhash ? strhash(ctx, (id)) : 0)

uint64_t mrd_canon_hash(const struct mrd_canon_event *e, mrd_canon_strhash_fn strhash, void *ctx)
{
    uint64_t h = 0x6d72642d63616e6full; /* "mrd-cano" */
    W(e->kind);
    switch (e->kind) {
    case MRD_EV_KERNEL: {
        const struct mrd_kernel *k = &e->u.kernel;
        W(k->start), W(k->end), W(k->correlation), W(k->device), W(k->stream), W(k->context);
        SH(k->name);
        W(k->grid[0]), W(k->grid[1]), W(k->grid[2]), W(k->block[0]), W(k->block[1]);
        W(k->block[2]), W(k->shared_bytes), W(k->registers), W(k->graph_id);
        break;
    }
    case MRD_EV_MEMCPY: {
        const struct mrd_memcpy *m = &e->u.memcpy;
        W(m->start), W(m->end), W(m->correlation), W(m->bytes), W(m->device), W(m->stream);
        W(m->copy_kind), W(m->src_kind), W(m->dst_kind), W(m->peer_device);
        break;
    }
    case MRD_EV_MEMSET: {
        const struct mrd_memset *m = &e->u.memset;
        W(m->start), W(m->end), W(m->correlation), W(m->bytes), W(m->device), W(m->stream);
        W(m->value), W(m->memory_kind);
        break;
    }
    case MRD_EV_SYNC: {
        const struct mrd_sync *s = &e->u.sync;
        W(s->start), W(s->end), W(s->correlation), W(s->type), W(s->context), W(s->stream);
        break;
    }
    case MRD_EV_API: {
        const struct mrd_api *a = &e->u.api;
        W(a->start), W(a->end), W(a->correlation), W(a->domain), W(a->cbid), W(a->thread);
        SH(a->name);
        break;
    }
    case MRD_EV_GRAPH: {
        const struct mrd_graph *g = &e->u.graph;
        W(g->start), W(g->end), W(g->correlation), W(g->device), W(g->stream), W(g->graph_id);
        break;
    }
    case MRD_EV_EXTCORR: {
        const struct mrd_extcorr *x = &e->u.extcorr;
        W(x->correlation), W(x->external_id), W(x->kind);
        break;
    }
    case MRD_EV_NVTX: {
        const struct mrd_nvtx *v = &e->u.nvtx;
        W(v->start), W(v->end), W(v->kind);
        SH(v->domain);
        SH(v->name);
        W(v->thread), W(v->depth), W(v->color);
        break;
    }
    case MRD_EV_NCCL_OP: {
        const struct mrd_nccl_op *o = &e->u.nccl_op;
        W(o->op_id), W(o->start), W(o->end), W(o->comm_hash), W(o->comm_rank);
        W(o->comm_nranks), W(o->is_p2p ? 0 : o->seq);
        SH(o->func);
        W(o->count);
        SH(o->datatype);
        W(o->bytes), W((int64_t)o->root), W((int64_t)o->peer);
        SH(o->algo);
        SH(o->proto);
        W(o->channels), W(o->warps), W(o->launch_id), W(o->is_p2p), W(o->device);
        break;
    }
    case MRD_EV_NCCL_CHANNEL: {
        const struct mrd_nccl_channel *c = &e->u.nccl_channel;
        W(c->op_id), W(c->channel), W(c->gpu_start), W(c->gpu_end), W(c->host_start);
        break;
    }
    case MRD_EV_MPI: {
        const struct mrd_mpi *m = &e->u.mpi;
        W(m->start), W(m->end), W(m->bytes);
        SH(m->call);
        W(m->comm_size), W(m->thread), W((int64_t)m->peer), W((int64_t)m->tag);
        break;
    }
    case MRD_EV_CLOCK: {
        const struct mrd_clock_sample *c = &e->u.clock;
        W(c->t0), W(c->t1), W(c->t2), W(c->t3);
        break;
    }
    case MRD_EV_GPU_CLOCK: {
        const struct mrd_gpu_clock_sample *g = &e->u.gpu_clock;
        W(g->device), W(g->host_ns), W(g->gpu_ns), W(g->uncertainty_ns);
        break;
    }
    default:
        return 0;
    }
    return avalanche(h);
}
