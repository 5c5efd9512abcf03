/* GPUs seen by capture, for the Hello (internal to the agent).
 *
 * Capture registers each device once (CUPTI DEVICE records, on CUPTI's worker thread); the
 * flusher snapshots the list when it builds a Hello and notices later additions through
 * the generation number (it then says hello again so the aggregator learns them).
 * Cap: MRD_MAX_GPUS devices; further ones are ignored (a rank drives one to a few GPUs).
 */
#ifndef MRD_AGENT_GPUS_H
#define MRD_AGENT_GPUS_H

#include <stdint.h>

#define MRD_MAX_GPUS 16

struct mrd_gpu {
    uint32_t device;
    char uuid[48];
    char pci_bus_id[24];
    char name[96];
};

/* Adds or updates device `device` (strings copied, truncated; NULL = ""). Any thread;
 * takes a mutex (not for hot paths). */
void mrd__gpus_add(uint32_t device, const char *uuid, const char *pci_bus_id, const char *name);

/* Copies up to MRD_MAX_GPUS entries into out[]; returns how many, *gen = generation (bumped
 * by every change). Any thread. */
unsigned mrd__gpus_snapshot(struct mrd_gpu out[MRD_MAX_GPUS], uint64_t *gen);

/* Current generation without copying (one atomic load). */
uint64_t mrd__gpus_generation(void);

#endif
