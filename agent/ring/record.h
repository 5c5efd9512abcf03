/* The agent's fixed-size capture record: what capture code (CUPTI, NCCL plugin, NVTX,
 * MPI wrappers) writes into a per-thread ring, and what the flusher thread reads.
 *
 * Strings: capture code never interns (interning locks and allocates). It stores
 *   - str[i]: pointers to strings that live as long as the process (NCCL's static
 *     "AllReduce"/"ncclFloat32"/"RING", CUPTI-owned kernel names, NVTX registered
 *     strings), and/or
 *   - inline_str: a NUL-terminated copy (truncated) of a transient string (an NVTX
 *     message passed by value).
 * The flusher interns them with the batch builder and fills the event's *_id fields.
 * Per kind, which string goes where (0 = unused):
 *   kernel:  str[0] name                        api: str[0] name
 *   nvtx:    str[0] domain, name = inline_str (or str[1] if inline_str is empty)
 *   nccl_op: str[0] func, str[1] datatype, str[2] algo, str[3] proto
 *   mpi:     str[0] call                        window: str[0] reason
 *   env:     str[0] key, str[1] value
 */
#ifndef MRD_AGENT_RECORD_H
#define MRD_AGENT_RECORD_H

#include <stdint.h>

#include "events.h"

#define MRD_RECORD_INLINE_STR 64

struct mrd_record {
    uint32_t kind; /* enum mrd_event_kind */
    uint32_t reserved;
    const char *str[4];
    char inline_str[MRD_RECORD_INLINE_STR];
    union mrd_any_event ev; /* events.h; never a clock sample (those skip the rings) */
};

#endif
