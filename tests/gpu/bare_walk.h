/* bare_walk.h: the bare CUPTI consumer's walk over one completed activity buffer.
 *
 * Where it sits: shared by tests/gpu/bare_consumer.c (its buffer-completed callback) and the
 * hot-path benchmark's bare phase (tests/bench/hotpath/bench_hotpath.c), so that the
 * benchmark times exactly the consumer's code. Counts the records by kind into by_kind
 * (CUPTI_ACTIVITY_KIND_COUNT entries, added to) and the kernel records without timing
 * (start and end 0: CUPTI's device buffer was exhausted) into *zero_ts; returns the number
 * of records. Reads the buffer only; any thread.
 */
#ifndef BARE_WALK_H
#define BARE_WALK_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

static inline uint64_t bare_walk(uint8_t *buffer, size_t valid, uint64_t *by_kind,
                                 uint64_t *zero_ts)
{
    CUpti_Activity *rec = NULL;
    uint64_t n = 0;

    while (buffer && valid > 0 &&
           cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        n++;
        if ((unsigned)rec->kind < CUPTI_ACTIVITY_KIND_COUNT)
            by_kind[rec->kind]++;
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            if (k->start == 0 && k->end == 0)
                (*zero_ts)++;
        }
    }
    return n;
}

#endif
