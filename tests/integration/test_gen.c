/* integration_gen: the load generator's synthetic stream has the properties the integration
 * tests and the analysis rely on.
 *
 *  - deterministic: the same (seed, rank) gives the same canonical events (so a rerun sends
 *    the same checksum), another seed does not;
 *  - the training mix produces every one of the 13 event kinds, with ~30 kernel names;
 *  - collectives match across ranks: every rank of the world communicator issues the same
 *    (comm_hash, func, seq) AllReduce sequence, with seq 1, 2, 3, ... and no gaps;
 *  - the pair communicator's AllGathers match between the two ranks of a pair only;
 *  - every NCCL op's launch_id has an external correlation record whose CUPTI correlation is a
 *    kernel's, and every channel record names an op of the same rank;
 *  - event times are sane: end >= start everywhere.
 */
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "canon.h"
#include "check.h"
#include "frame.h"
#include "gen.h"

#define N_EVENTS 60000
#define MAX_OPS  4096

struct run {
    struct mrd_batch_builder *b;
    struct mrd_gen *g;
    uint64_t kinds[MRD_EV__COUNT];
    uint64_t sum;
    /* world AllReduces and pair AllGathers in issue order */
    uint64_t ar_comm[MAX_OPS], ar_seq[MAX_OPS], ag_comm[MAX_OPS], ag_seq[MAX_OPS];
    int n_ar, n_ag;
    uint64_t launch[MAX_OPS], ext[MAX_OPS * 2], ext_corr[MAX_OPS * 2], ops[MAX_OPS];
    int n_launch, n_ext, n_ops;
    uint64_t kernel_corr_max;
    uint32_t names[64];
    int n_names;
};

static void run_gen(struct run *r, uint32_t rank, uint32_t world, uint64_t seed)
{
    struct mrd_batch_builder_config bc = {
        .run_id = "t", .rank = rank, .max_frame = MRD_FRAME_DEFAULT_MAX, .target_events = 1024};
    struct mrd_gen_config gc = {
        .rank = rank, .world_size = world, .seed = seed, .mix = MRD_GEN_MIX_TRAINING};
    memset(r, 0, sizeof *r);
    CHECK_OK(mrd_batch_builder_new(&bc, &r->b));
    CHECK_OK(mrd_gen_new(&gc, r->b, &r->g));
    for (int i = 0; i < N_EVENTS; i++) {
        struct mrd_canon_event e;
        mrd_gen_next(r->g, &e);
        r->kinds[e.kind]++;
        r->sum += mrd_canon_hash(&e, mrd_gen_string_hash, r->g);
        switch (e.kind) {
        case MRD_EV_KERNEL: {
            CHECK_GE(e.u.kernel.end, e.u.kernel.start);
            if (e.u.kernel.correlation > r->kernel_corr_max)
                r->kernel_corr_max = e.u.kernel.correlation;
            int seen = 0;
            for (int k = 0; k < r->n_names; k++)
                seen |= r->names[k] == e.u.kernel.name;
            if (!seen && r->n_names < 64)
                r->names[r->n_names++] = e.u.kernel.name;
            break;
        }
        case MRD_EV_NCCL_OP: {
            const struct mrd_nccl_op *o = &e.u.nccl_op;
            const char *f = mrd_gen_string(r->g, o->func);
            CHECK(f != NULL);
            CHECK_GE(o->end, o->start);
            CHECK_LT(r->n_ops, MAX_OPS);
            r->ops[r->n_ops++] = o->op_id;
            r->launch[r->n_launch++] = o->launch_id;
            if (strcmp(f, "AllReduce") == 0) {
                r->ar_comm[r->n_ar] = o->comm_hash;
                r->ar_seq[r->n_ar++] = o->seq;
            } else if (strcmp(f, "AllGather") == 0) {
                r->ag_comm[r->n_ag] = o->comm_hash;
                r->ag_seq[r->n_ag++] = o->seq;
            } else {
                CHECK_EQ(o->is_p2p, 1);
                CHECK_GE(o->peer, 0);
            }
            break;
        }
        case MRD_EV_EXTCORR:
            r->ext[r->n_ext] = e.u.extcorr.external_id;
            r->ext_corr[r->n_ext++] = e.u.extcorr.correlation;
            break;
        case MRD_EV_NCCL_CHANNEL: {
            int found = 0;
            for (int k = r->n_ops - 1; k >= 0 && !found; k--)
                found = r->ops[k] == e.u.nccl_channel.op_id;
            CHECK(found);
            CHECK_GE(e.u.nccl_channel.gpu_end, e.u.nccl_channel.gpu_start);
            break;
        }
        case MRD_EV_NVTX:
            CHECK_GE(e.u.nvtx.end, e.u.nvtx.start);
            break;
        default:
            break;
        }
    }
    /* The last step may be cut before the external correlations and kernels of its
     * launches: draw on until the step is over (a step is a few hundred events), keeping
     * only what the launch check needs. */
    for (int i = 0; i < 5000; i++) {
        struct mrd_canon_event e;
        mrd_gen_next(r->g, &e);
        if (e.kind == MRD_EV_KERNEL && e.u.kernel.correlation > r->kernel_corr_max)
            r->kernel_corr_max = e.u.kernel.correlation;
        if (e.kind == MRD_EV_EXTCORR && r->n_ext < (int)(sizeof r->ext / sizeof r->ext[0])) {
            r->ext[r->n_ext] = e.u.extcorr.external_id;
            r->ext_corr[r->n_ext++] = e.u.extcorr.correlation;
        }
    }
}

static void free_run(struct run *r)
{
    mrd_gen_free(r->g);
    mrd_batch_builder_free(r->b);
}

int main(void)
{
    static struct run a, b, c, d;

    /* deterministic per (seed, rank) */
    run_gen(&a, 0, 4, 42);
    run_gen(&b, 0, 4, 42);
    CHECK_UEQ(a.sum, b.sum);
    free_run(&b);
    run_gen(&b, 0, 4, 43);
    CHECK(a.sum != b.sum);
    free_run(&b);

    /* every kind, ~30 kernel names */
    for (int k = 1; k < MRD_EV__COUNT; k++)
        CHECK_GT(a.kinds[k], 0);
    CHECK_GE(a.n_names, 30);
    CHECK_GT(a.kinds[MRD_EV_KERNEL] * 2, N_EVENTS); /* kernels dominate, as in real traces */

    /* world AllReduce: same comm and seq 1..n on another rank */
    run_gen(&b, 1, 4, 42);
    run_gen(&c, 2, 4, 42);
    int n = a.n_ar < b.n_ar ? a.n_ar : b.n_ar;
    n = n < c.n_ar ? n : c.n_ar;
    CHECK_GT(n, 20);
    for (int i = 0; i < n; i++) {
        CHECK_UEQ(a.ar_seq[i], (uint64_t)i + 1);
        CHECK_UEQ(a.ar_comm[i], b.ar_comm[i]);
        CHECK_UEQ(a.ar_seq[i], b.ar_seq[i]);
        CHECK_UEQ(a.ar_comm[i], c.ar_comm[i]);
    }
    /* pair communicator: ranks 0 and 1 share it, rank 2 is in another pair */
    CHECK_GT(a.n_ag, 10);
    CHECK_UEQ(a.ag_comm[0], b.ag_comm[0]);
    CHECK(a.ag_comm[0] != c.ag_comm[0]);
    CHECK(a.ag_comm[0] != a.ar_comm[0]);
    for (int i = 0; i < a.n_ag && i < b.n_ag; i++)
        CHECK_UEQ(a.ag_seq[i], b.ag_seq[i]);

    /* every launch id has an external correlation to a kernel's correlation id */
    for (int i = 0; i < a.n_launch; i++) {
        int found = 0;
        for (int k = 0; k < a.n_ext && !found; k++)
            found = a.ext[k] == a.launch[i] && a.ext_corr[k] <= a.kernel_corr_max;
        CHECK(found);
    }

    /* a single-rank world still works (no peers, no pair) */
    run_gen(&d, 0, 1, 42);
    CHECK_EQ(d.n_ag, 0);
    CHECK_GT(d.n_ar, 0);
    free_run(&a);
    free_run(&b);
    free_run(&c);
    free_run(&d);
    return 0;
}
