/* Synthetic training-job events for the load generator.
 *
 * Where it sits: launcher/replay's per-rank sender pulls events from here, hashes them
 * (canon.h) and appends them to the real batch builder (proto/batch.h). Nothing here
 * touches sockets.
 *
 * What it produces: an endless, deterministic (seed, rank) stream shaped like a data-parallel
 * training step on one GPU: NVTX ranges per step and phase, a data-loader copy, forward and
 * backward kernels drawn from ~30 realistic names with launch API records, bucketed
 * AllReduce collectives on the world communicator, AllGather on a tensor-parallel pair
 * communicator and pipeline Send/Recv, each with its NCCL kernel, external correlation and
 * per-channel GPU timer records, optimizer kernels, a stream sync, periodic MPI calls,
 * clock samples and graph launches. Collective structure (how many, which communicator,
 * sequence numbers) depends only on (seed, step), never on the rank, so the same (comm, seq)
 * appears on every rank of the communicator. The "kernels" mix gives kernels only (for the
 * wire-size measurement).
 *
 * Workload: ~300 events per step; one generator per rank process, not thread-safe. Memory:
 * one step of events (capped at MRD_GEN_STEP_CAP; a step never exceeds it by construction).
 */
#ifndef MRD_GEN_H
#define MRD_GEN_H

#include <stdint.h>

#include "batch.h"
#include "canon.h"

enum mrd_gen_mix {
    MRD_GEN_MIX_TRAINING = 0, /* all event kinds, shaped like a DDP step */
    MRD_GEN_MIX_KERNELS = 1,  /* kernels only, 30 names, 4 streams */
};

#define MRD_GEN_STEP_CAP 2048

struct mrd_gen_config {
    uint32_t rank, world_size;
    uint64_t seed;
    int mix; /* enum mrd_gen_mix */
};

struct mrd_gen;

/* Creates a generator whose strings are interned in builder b (which must outlive it).
 * Returns 0 and *out; -EINVAL (world_size 0, rank >= world_size, unknown mix); -ENOMEM. */
int mrd_gen_new(const struct mrd_gen_config *cfg, struct mrd_batch_builder *b,
                struct mrd_gen **out);
/* Accepts NULL. */
void mrd_gen_free(struct mrd_gen *g);

/* Writes the next event into *e. Never runs dry. */
void mrd_gen_next(struct mrd_gen *g, struct mrd_canon_event *e);

/* Resolver for canon.h: the string of a builder id this generator interned (ctx = gen). */
const char *mrd_gen_string(void *gen, uint32_t id);

/* String hash for mrd_canon_hash (ctx = gen): cached mrd_canon_str_hash of the id's string. */
uint64_t mrd_gen_string_hash(void *gen, uint32_t id);


#endif
