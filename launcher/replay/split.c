/* Re-splitting a recorded batch into batches within the aggregator's frame limit (contract
 * and string-id policy in split.h).
 *
 * One pass over the kinds in enum order; per event: read it with the batch cursor, point
 * string ids the capture never defined at "none", make the builder's ids reach the event's
 * largest id (interning the capture's values in id order), hash it canonically, append it;
 * when the builder says the batch is full (-EAGAIN), finish that batch, emit it and append
 * the event again.
 */
#include "split.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "batch.h"
#include "error.h"
#include "events.h"

struct split_run {
    const struct mrd_split_config *cfg;
    struct mrd_batch_builder *b;
    uint32_t interned; /* the builder has handed out ids 1..interned */
    uint64_t seq;      /* seq of the next batch */
    uint64_t part_events, part_sum;
    struct mrd_split_result *res;
};

/* Points ids[] at the string-id fields of *e (the fields batch.c's builder checks and the
 * canonical form hashes as strings); returns how many. */
static int string_fields(struct mrd_canon_event *e, uint32_t *ids[4])
{
    switch (e->kind) {
    case MRD_EV_KERNEL:
        ids[0] = &e->u.kernel.name;
        return 1;
    case MRD_EV_API:
        ids[0] = &e->u.api.name;
        return 1;
    case MRD_EV_NVTX:
        ids[0] = &e->u.nvtx.domain;
        ids[1] = &e->u.nvtx.name;
        return 2;
    case MRD_EV_NCCL_OP:
        ids[0] = &e->u.nccl_op.func;
        ids[1] = &e->u.nccl_op.datatype;
        ids[2] = &e->u.nccl_op.algo;
        ids[3] = &e->u.nccl_op.proto;
        return 4;
    case MRD_EV_MPI:
        ids[0] = &e->u.mpi.call;
        return 1;
    default:
        return 0;
    }
}

/* Makes the builder hand out ids 1..id with the capture's values, in id order. */
static int intern_upto(struct split_run *s, uint32_t id)
{
    const struct mrd_split_config *cfg = s->cfg;
    while (s->interned < id) {
        uint32_t want = s->interned + 1;
        char placeholder[64];
        const char *v = cfg->string(cfg->string_ctx, want);
        if (!v) { /* never defined so far: no event of ours references it (see fix_strings) */
            snprintf(placeholder, sizeof placeholder,
                     "\x01meridian-replay: string id %u not defined", want);
            v = placeholder;
        }
        uint32_t got = mrd_batch_builder_intern(s->b, v);
        if (got == 0)
            return -ENOSPC;
        if (got != want) {
            fprintf(stderr,
                    "meridian-replay: capture string ids %u and %u have one value: "
                    "cannot re-split\n",
                    got, want);
            return -EPROTO;
        }
        s->interned = want;
    }
    return 0;
}

/* Drops references to ids the capture never defined (as stored: NULL) and interns up to
 * the largest id the event uses. */
static int fix_strings(struct split_run *s, struct mrd_canon_event *e)
{
    uint32_t *ids[4], top = 0;
    int n = string_fields(e, ids);
    for (int i = 0; i < n; i++) {
        if (*ids[i] && !s->cfg->string(s->cfg->string_ctx, *ids[i]))
            *ids[i] = 0;
        if (*ids[i] > top)
            top = *ids[i];
    }
    return intern_upto(s, top);
}

/* Finishes the pending events as batch s->seq and emits it. */
static int finish_part(struct split_run *s)
{
    uint8_t *frame = NULL;
    size_t len = 0;
    int rc = mrd_batch_builder_finish(s->b, s->seq, &frame, &len);
    if (rc < 0)
        return rc;
    rc = s->cfg->emit(s->cfg->emit_ctx, s->seq, frame, len, s->part_events, s->part_sum);
    if (rc < 0)
        return rc;
    s->res->batches++;
    s->res->events += s->part_events;
    s->res->checksum += s->part_sum;
    s->seq++;
    s->part_events = s->part_sum = 0;
    return 0;
}

int mrd_split_batch(const struct mrd_split_config *cfg, const Meridian__V1__Batch *m,
                    uint64_t first_seq, struct mrd_split_result *res)
{
    struct mrd_batch_builder_config bc = {
        .run_id = cfg->run_id,
        .rank = cfg->rank,
        .agent_instance = cfg->agent_instance,
        .max_frame = cfg->max_frame,
        .target_events = 0, /* the builder's default; the frame limit is what binds */
        .compress_level = cfg->compress_level,
    };
    struct split_run s = {.cfg = cfg, .seq = first_seq, .res = res};
    uint64_t dropped[MRD_DROP__COUNT] = {0};
    int rc;

    memset(res, 0, sizeof *res);
    if (first_seq == 0)
        return -EINVAL;
    rc = mrd_batch_builder_new(&bc, &s.b);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < m->n_dropped; i++) /* cumulative: every new batch carries them */
        if (m->dropped[i]->key < MRD_DROP__COUNT)
            dropped[m->dropped[i]->key] = m->dropped[i]->value;
    mrd_batch_builder_set_dropped(s.b, dropped);
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;
        struct mrd_canon_event e;
        memset(&e, 0, sizeof e);
        e.kind = k;
        mrd_batch_cursor_init(&c, m);
        while (mrd_batch_next_any(&c, e.kind, &e.u)) {
            if ((rc = fix_strings(&s, &e)) < 0)
                goto fail;
            uint64_t h = mrd_canon_hash(&e, cfg->string_hash, cfg->string_ctx);
            rc = mrd_batch_add_any(s.b, e.kind, &e.u);
            if (rc == -EAGAIN && mrd_batch_builder_pending(s.b) > 0) {
                if ((rc = finish_part(&s)) < 0)
                    goto fail;
                rc = mrd_batch_add_any(s.b, e.kind, &e.u);
            }
            if (rc < 0) /* -MRD_ERR_TOO_LARGE: the event alone exceeds the limit */
                goto fail;
            s.part_events++;
            s.part_sum += h;
        }
    }
    rc = mrd_batch_builder_pending(s.b) > 0 ? finish_part(&s) : 0;
fail:
    mrd_batch_builder_free(s.b);
    return rc;
}
