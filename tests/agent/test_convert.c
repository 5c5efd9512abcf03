/* agent_convert: why the flusher drops a record it cannot add to a batch.
 *
 * Real records go through mrd__convert_record into a real batch builder: a kernel whose
 * name (4,096 bytes, the longest string the builder keeps) cannot fit even an empty batch
 * of the smallest frame a peer may announce (4,096 bytes) fails with -MRD_ERR_TOO_LARGE;
 * a record of a kind the agent does not know fails with -EINVAL; a record arriving when
 * the batch holds target_events gets -EAGAIN (not a drop: the caller finishes the batch).
 * Each failure must map to the drop reason the flusher counts (mrd__convert_drop_reason):
 * too_large for the first (it was counted as "unknown" before), "unencodable" for a record
 * it cannot encode (it was reason 0, "unknown", which never travels with batches), and
 * the batch is unharmed: an ordinary record still goes in and the batch still finishes.
 * mrd__convert_add (what the flusher calls): a full batch is finished and the record
 * added; when finishing fails for lack of memory the record is lost as "unencodable", not
 * "too_large" (it was counted as too_large before: its size had nothing to do with it).
 * mrd_batch_builder_set_max_frame: refused below the protocol's minimum and while the
 * pending batch is bigger than the new limit; afterwards every batch fits it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "error.h"
#include "frame.h"

/* The flusher's finish: encode the pending batch (seq counts up), or fail with `fail`. */
struct fin {
    struct mrd_batch_builder *b;
    int fail, calls;
    uint64_t seq;
};

static int fin_call(void *arg)
{
    struct fin *f = arg;
    f->calls++;
    if (f->fail)
        return f->fail;
    uint8_t *frame;
    size_t len;
    int e = mrd_batch_builder_finish(f->b, 100 + ++f->seq, &frame, &len);
    if (e == 0)
        free(frame);
    return e;
}

int main(void)
{
    struct mrd_batch_builder_config bc = {
        .run_id = "convert-test", .rank = 1, .max_frame = MRD_FRAME_MIN_MAX, .target_events = 4};
    struct mrd_batch_builder *b;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    struct mrd_convert cv = {.b = b, .target_events = 4};

    /* a kernel named by 4,096 bytes of incompressible-looking text: never fits */
    static char huge[4097];
    for (size_t i = 0; i < 4096; i++)
        huge[i] = (char)('!' + (i * 7919) % 90);
    struct mrd_record big = {.kind = MRD_EV_KERNEL};
    big.str[0] = huge;
    big.ev.kernel.start = 1000;
    big.ev.kernel.end = 2000;
    int e = mrd__convert_record(&cv, &big);
    CHECK_EQ(e, -MRD_ERR_TOO_LARGE);
    CHECK_EQ(mrd__convert_drop_reason(e), MRD_DROP_TOO_LARGE);
    CHECK_EQ(mrd_batch_builder_pending(b), 0);

    /* a kind this agent cannot encode (a newer capture module, a corrupted slot) */
    struct mrd_record odd = {.kind = 99};
    e = mrd__convert_record(&cv, &odd);
    CHECK_EQ(e, -EINVAL);
    CHECK_EQ(mrd__convert_drop_reason(e), MRD_DROP_UNENCODABLE);
    CHECK_STREQ(mrd_drop_reason_name(mrd__convert_drop_reason(e)), "unencodable");
    struct mrd_record clock = {.kind = MRD_EV_CLOCK}; /* never travels in rings */
    CHECK_EQ(mrd__convert_record(&cv, &clock), -EINVAL);

    /* ordinary records still go in; the fifth finds the batch full (-EAGAIN, no drop) */
    for (int i = 0; i < 4; i++) {
        struct mrd_record k = {.kind = MRD_EV_KERNEL};
        k.str[0] = "gemm";
        k.ev.kernel.start = 10 * i;
        k.ev.kernel.end = 10 * i + 5;
        CHECK_OK(mrd__convert_record(&cv, &k));
    }
    struct mrd_record k5 = {.kind = MRD_EV_MEMSET};
    CHECK_EQ(mrd__convert_record(&cv, &k5), -EAGAIN);
    CHECK_EQ(mrd_batch_builder_pending(b), 4);
    uint8_t *frame;
    size_t len;
    CHECK_OK(mrd_batch_builder_finish(b, 1, &frame, &len));
    CHECK_LE(len, MRD_FRAME_MIN_MAX);
    free(frame);

    /* the other mappings: -EAGAIN for good (even an empty batch had no room) is
     * too_large; no memory is "unencodable"; no reason is ever 0 (it never travels) */
    CHECK_EQ(mrd__convert_drop_reason(-EAGAIN), MRD_DROP_TOO_LARGE);
    CHECK_EQ(mrd__convert_drop_reason(-ENOMEM), MRD_DROP_UNENCODABLE);
    for (int err = -200; err < 0; err++)
        CHECK(mrd__convert_drop_reason(err) > 0);

    /* mrd__convert_add: a full batch is finished through the callback, then the record
     * goes in; a finish that fails (-ENOMEM) is the record's loss, as "unencodable" */
    struct fin real = {.b = b};
    for (int i = 0; i < 4; i++) {
        struct mrd_record k = {.kind = MRD_EV_KERNEL};
        k.ev.kernel.start = 100 + i;
        CHECK_OK(mrd__convert_add(&cv, &k, fin_call, &real));
    }
    CHECK_EQ(real.calls, 0);
    struct mrd_record k6 = {.kind = MRD_EV_SYNC};
    CHECK_OK(mrd__convert_add(&cv, &k6, fin_call, &real));
    CHECK_EQ(real.calls, 1);
    CHECK_EQ(mrd_batch_builder_pending(b), 1);
    for (int i = 0; i < 3; i++)
        CHECK_OK(mrd__convert_record(&cv, &k6));
    struct fin broken = {.b = b, .fail = -ENOMEM};
    e = mrd__convert_add(&cv, &k6, fin_call, &broken);
    CHECK_EQ(broken.calls, 1);
    CHECK_EQ(e, -ENOMEM);
    CHECK_EQ(mrd__convert_drop_reason(e), MRD_DROP_UNENCODABLE);
    CHECK_STREQ(mrd_drop_reason_name(mrd__convert_drop_reason(e)), "unencodable");
    CHECK_EQ(mrd_batch_builder_pending(b), 4); /* the batch kept its events */

    mrd_batch_builder_free(b);

    /* mrd_batch_builder_set_max_frame (the aggregator's HelloReply.max_frame_bytes): not
     * below the smallest frame a peer may announce; refused while the pending batch is
     * bigger than the new limit; once set, every batch fits it */
    bc.max_frame = 0;
    bc.target_events = 100000;
    CHECK_OK(mrd_batch_builder_new(&bc, &b));
    cv = (struct mrd_convert){.b = b, .target_events = 100000};
    CHECK_EQ(mrd_batch_builder_set_max_frame(b, MRD_FRAME_MIN_MAX - 1), -EINVAL);
    for (int i = 0; i < 2000; i++) {
        struct mrd_record k = {.kind = MRD_EV_KERNEL};
        k.ev.kernel.start = (int64_t)i * 7919 * 7919;
        k.ev.kernel.correlation = (uint64_t)i * 104729;
        CHECK_OK(mrd__convert_record(&cv, &k));
    }
    CHECK_EQ(mrd_batch_builder_set_max_frame(b, 8192), -EBUSY);
    CHECK_EQ(mrd_batch_builder_pending(b), 2000);
    CHECK_OK(mrd_batch_builder_finish(b, 50, &frame, &len));
    CHECK(len > 8192 + MRD_FRAME_HEADER_BYTES); /* built for the 4 MiB default */
    free(frame);
    CHECK_OK(mrd_batch_builder_set_max_frame(b, 8192));
    int batches = 0, added = 0;
    for (int i = 0; i < 2000; i++) {
        struct mrd_record k = {.kind = MRD_EV_KERNEL};
        k.ev.kernel.start = (int64_t)i * 7919 * 7919;
        k.ev.kernel.correlation = (uint64_t)i * 104729;
        e = mrd__convert_record(&cv, &k);
        if (e == -EAGAIN) {
            CHECK_OK(mrd_batch_builder_finish(b, 51 + (uint64_t)batches++, &frame, &len));
            CHECK_LE(len - MRD_FRAME_HEADER_BYTES, 8192);
            free(frame);
            e = mrd__convert_record(&cv, &k);
        }
        CHECK_OK(e);
        added++;
    }
    CHECK(batches >= 2);
    CHECK_EQ(added, 2000);
    mrd_batch_builder_free(b);
    printf("agent_convert: ok\n");
    return 0;
}
