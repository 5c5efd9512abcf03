/* capture_cupti_buffers: the CUPTI buffer pool and the completion path, without a GPU.
 *
 * CUPTI's buffer callbacks are called directly with buffers laid out as CUPTI lays them
 * out (records back to back; cuptiActivityGetNextRecord walks them, which works without a
 * driver). Checked: the pool hands out distinct pre-zeroed buffers and none when empty
 * (counted); a completed buffer's records all reach the ring even when the ring is much
 * smaller than the buffer, because the completion thread waits for the consumer instead of
 * dropping; the buffer comes back zeroed and reusable; with no consumer at all, the wait
 * is bounded (about 200 ms once), the overflow is counted as ring drops, and later buffers
 * do not wait again; at exit past its time nothing waits. Waits are counted
 * (pace_waits, pace_wait_ns) only where one happened.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cupti_convert.h"
#include "fake_agent.h"

#define BUF  65536
#define NREC 1000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes n SYNCHRONIZATION records with start = first + i; returns the valid size. */
static size_t fill(uint8_t *buf, size_t n, uint64_t first)
{
    CUpti_ActivitySynchronization2 s;
    CHECK(n * sizeof(s) <= BUF);
    for (size_t i = 0; i < n; i++) {
        memset(&s, 0, sizeof(s));
        s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
        s.start = first + i;
        s.end = first + i + 1;
        memcpy(buf + i * sizeof(s), &s, sizeof(s));
    }
    return n * sizeof(s);
}

static atomic_int stop_drain;
static atomic_ulong drained, in_order;

static void *drainer(void *arg)
{
    uint64_t expect = (uint64_t)(uintptr_t)arg;
    struct mrd_record r[64];
    while (!atomic_load(&stop_drain) || fake_ring_count() > 0) {
        size_t n = fake_ring_take(r, 64);
        for (size_t i = 0; i < n; i++)
            if (r[i].kind == MRD_EV_SYNC && (uint64_t)r[i].ev.sync.start == expect++)
                atomic_fetch_add(&in_order, 1);
        atomic_fetch_add(&drained, n);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

int main(void)
{
    fake_reset();
    CHECK_OK(mrd__cupti_pool_create(BUF, 3));
    CHECK_EQ(mrd__cupti_pool_create(BUF, 3), -22);

    uint8_t *b[4];
    size_t size, maxrec = 7;
    for (int i = 0; i < 3; i++) {
        mrd__cupti_buffer_requested(&b[i], &size, &maxrec);
        CHECK(b[i] != NULL);
        CHECK_EQ(size, BUF);
        CHECK_EQ(maxrec, 0);
        CHECK(all_zero(b[i], BUF));
        for (int j = 0; j < i; j++)
            CHECK(b[i] != b[j]);
    }
    uint64_t misses = mrd__cupti_pool_misses();
    mrd__cupti_buffer_requested(&b[3], &size, &maxrec);
    CHECK(b[3] == NULL);
    CHECK_EQ(size, 0);
    CHECK_UEQ(mrd__cupti_pool_misses(), misses + 1);

    /* A ring of 300 records, a buffer of 1000: paced, nothing lost, order kept; the waits
     * are counted (pace_waits, pace_wait_ns), and no more time than the buffer took. */
    uint64_t waits0, wait_ns0, waits, wait_ns;
    mrd__cupti_pace_stats(&waits0, &wait_ns0);
    CHECK_UEQ(waits0, 0);
    CHECK_UEQ(wait_ns0, 0);
    fake_ring_set_capacity(300);
    size_t valid = fill(b[0], NREC, 5000);
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, drainer, (void *)(uintptr_t)5000));
    int64_t paced0 = now_ms();
    mrd__cupti_buffer_completed(NULL, 0, b[0], BUF, valid);
    int64_t paced_ms = now_ms() - paced0;
    atomic_store(&stop_drain, 1);
    CHECK_OK(pthread_join(t, NULL));
    mrd__cupti_pace_stats(&waits, &wait_ns);
    CHECK_GE(waits, 1);
    CHECK_LE(waits, NREC / 256); /* at most one per chunk but the first (300 free): 3 */
    CHECK_GE(wait_ns, 1000);
    CHECK_LE(wait_ns, (uint64_t)(paced_ms + 1) * 1000000);
    CHECK_EQ(atomic_load(&drained), NREC);
    CHECK_EQ(atomic_load(&in_order), NREC);
    CHECK_EQ(fake_dropped(MRD_DROP_RING_FULL), 0);
    CHECK(all_zero(b[0], BUF));
    uint8_t *again = NULL;
    mrd__cupti_buffer_requested(&again, &size, &maxrec);
    CHECK(again == b[0]); /* the only free buffer is the one just returned */

    /* No consumer: one bounded wait, then drops are counted; the next buffer does not
     * wait again. */
    fake_ring_set_capacity(100);
    valid = fill(b[1], NREC, 0);
    int64_t t0 = now_ms();
    mrd__cupti_buffer_completed(NULL, 0, b[1], BUF, valid);
    int64_t first = now_ms() - t0;
    CHECK_GE(first, 150);
    uint64_t waits1, wait_ns1;
    mrd__cupti_pace_stats(&waits1, &wait_ns1);
    CHECK_UEQ(waits1, waits + 1);                          /* one wait, the stalled one */
    CHECK_GE(wait_ns1 - wait_ns, (uint64_t)150 * 1000000); /* PACE_STALL_MS, about */
    CHECK_EQ(fake_ring_count(), 100);
    CHECK_UEQ(fake_dropped(MRD_DROP_RING_FULL), NREC - 100);
    valid = fill(b[2], NREC, 0);
    t0 = now_ms();
    mrd__cupti_buffer_completed(NULL, 0, b[2], BUF, valid);
    CHECK_LT(now_ms() - t0, 150);
    CHECK_UEQ(fake_dropped(MRD_DROP_RING_FULL), 2 * NREC - 100);
    mrd__cupti_pace_stats(&waits, &wait_ns);
    CHECK_UEQ(waits, waits1); /* the stalled thread does not wait (nor count) again */
    CHECK(all_zero(b[1], BUF) && all_zero(b[2], BUF));

    /* At exit, past the exit's time (the fake's flush deadline is 0): a full ring is not
     * waited for, and no wait is counted (the chunks that find it full are dropped) */
    struct mrd_record sink[64];
    while (fake_ring_take(sink, 64) > 0)
        ;
    fake_ring_set_capacity(300);
    mrd__cupti_exit_begin();
    uint64_t dropped0 = fake_dropped(MRD_DROP_RING_FULL);
    valid = fill(b[1], NREC, 0);
    t0 = now_ms();
    mrd__cupti_buffer_completed(NULL, 0, b[1], BUF, valid);
    CHECK_LT(now_ms() - t0, 150);
    CHECK_UEQ(fake_dropped(MRD_DROP_RING_FULL), dropped0 + NREC - 300);
    uint64_t waits2, wait_ns2;
    mrd__cupti_pace_stats(&waits2, &wait_ns2);
    CHECK_UEQ(waits2, waits1);
    CHECK_UEQ(wait_ns2, wait_ns1);
    printf("capture_cupti_buffers: ok (stalled wait %lld ms)\n", (long long)first);
    return 0;
}
