/* CUPTI internals shared by cupti.c, cupti_convert.c and the capture tests.
 *
 * Conversion (cupti_convert.c) is pure translation plus the counters it implies, kept
 * apart from cupti.c (which talks to CUPTI) so that tests can feed records built in
 * memory. The buffer pool and the buffer callbacks (cupti.c) are exposed under mrd__
 * names for the same reason. Conversion runs on CUPTI's buffer-completion thread (or the
 * thread calling cuptiActivityFlushAll).
 */
#ifndef MRD_CUPTI_CONVERT_H
#define MRD_CUPTI_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "record.h"

/* One runtime/driver API call recorded as an activity record (the whitelist). */
struct mrd_cupti_api {
    uint32_t domain; /* MRD_API_RUNTIME or MRD_API_DRIVER */
    uint32_t cbid;   /* CUPTI_RUNTIME_TRACE_CBID_* / CUPTI_DRIVER_TRACE_CBID_* */
    const char *name;
};

/* The whitelist (launches, synchronizations, allocations, copies), static. */
extern const struct mrd_cupti_api mrd__cupti_api_list[];
extern const size_t mrd__cupti_api_count;

/* Static name of a whitelisted call, or NULL when (domain, cbid) is not on the list. */
const char *mrd__cupti_api_name(uint32_t domain, uint32_t cbid);

/* Converts one activity record. Returns 1 with *out filled (kind, ev.*, str[]) when the
 * record maps to a meridian event (a kernel record leaves inline_str past its first byte
 * and the union's bytes past ev.kernel as they were: no reader of a kernel looks at them,
 * and the completion path converts into ring slots, where clearing them cost more than
 * the rest of the conversion); 0 when it was consumed without one: DEVICE records
 * (registered with mrd_agent_add_gpu), OVERHEAD records (counted), kernel/memcpy/memset
 * records with start == end == 0 (CUPTI's device buffer overflowed: counted as
 * MRD_DROP_CUPTI_DEVICE), and kinds meridian does not use. Any thread. */
int mrd__cupti_convert(const CUpti_Activity *rec, struct mrd_record *out);

/* Converts one record and, when it maps to an event, writes it to the calling thread's
 * ring. Returns 1 when a record was written (or dropped by a full ring, counted there),
 * 0 otherwise. */
int mrd__cupti_emit(const CUpti_Activity *rec);

/* OVERHEAD records seen and the CUPTI overhead they report (sum of end - start), and the
 * number of records of kinds this agent does not convert. Any thread. */
void mrd__cupti_convert_stats(uint64_t *overhead_records, uint64_t *overhead_ns,
                              uint64_t *unknown_records);

/* Registers CUPTI's counters (overhead_records, overhead_ns, unknown_records, pool_misses,
 * pace_waits, pace_wait_ns; category "cupti") with the agent, once, so they travel in the
 * Goodbye and land in agent_counters. InitializeInjection calls it; so do test drivers. */
void mrd__cupti_register_counters(void);

/* Maps the pool of nbufs CUPTI buffers of buf_bytes each (a multiple of 8), pre-faulted
 * and zeroed. Once per process, before the buffer callbacks are registered. Returns 0,
 * -EINVAL (bad size, or called twice) or -errno from mmap. */
int mrd__cupti_pool_create(size_t buf_bytes, unsigned nbufs);

/* Unmaps the pool (none: nothing). The request callback then hands out no buffer. Only
 * while CUPTI holds none of them (a failed set-up; tests). */
void mrd__cupti_pool_destroy(void);

/* InitializeInjection's set-up (cupti.c): options, claim CUPTI (subscriber), pool,
 * timestamp callback, buffer callbacks, kinds. Returns 0 with all of it in place, or a
 * negative code with none of it: kinds turned off, subscriber released, pool unmapped
 * (said once on stderr). Exposed for tests, which fail each step in turn. */
int mrd__cupti_setup(void);

/* CUPTI's buffer-request callback: hands out a free pool buffer, or none (NULL, size 0:
 * CUPTI then drops and counts) when all are out. Any thread; lock-free. */
void CUPTIAPI mrd__cupti_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);

/* CUPTI's buffer-completion callback: converts every record (mrd__cupti_process_buffer),
 * adds CUPTI's dropped-record count, re-zeroes what was written and returns the buffer to
 * the pool. */
void CUPTIAPI mrd__cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                          size_t size, size_t valid);

/* Converts and writes every record of a completed buffer, pacing itself against the
 * calling thread's ring (waits for the flusher to make room while it makes progress, up
 * to 1 s per buffer, and at exit only within half the flush deadline; see cupti.c).
 * Returns the number of records written. */
size_t mrd__cupti_process_buffer(uint8_t *buffer, size_t valid);

/* Marks the exit flush (cupti.c's flush hook calls it before its final
 * cuptiActivityFlushAll; tests that deliver buffers themselves call it the same way):
 * buffers completed from now on are paced only until half of MERIDIAN_FLUSH_DEADLINE_MS
 * from now has passed (see cupti.c). Any thread. */
void mrd__cupti_exit_begin(void);

/* Times the request callback found no free buffer. */
uint64_t mrd__cupti_pool_misses(void);

/* Chunks of records whose conversion waited for ring space (pacing), and the time those
 * waits took in all (ns). Only waits that happened count: not a chunk skipped because the
 * last wait stalled, nor one whose buffer (or the exit) was already past its time. */
void mrd__cupti_pace_stats(uint64_t *waits, uint64_t *wait_ns);

#endif
