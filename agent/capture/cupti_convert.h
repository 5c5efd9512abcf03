/* CUPTI activity record -> meridian capture record conversion (cupti_convert.c).
 *
 * Pure translation plus the counters it implies, kept apart from cupti.c (which talks to
 * CUPTI) so that tests can feed records built in memory. Runs on CUPTI's buffer-completion
 * thread (or the thread calling cuptiActivityFlushAll), one record at a time.
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
 * record maps to a meridian event; 0 when it was consumed without one: DEVICE records
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

#endif
