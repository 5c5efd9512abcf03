/* agent_convert: why the flusher drops a record it cannot add to a batch.
 *
 * Real records go through mrd__convert_record into a real batch builder: a kernel whose
 * name (4,096 bytes, the longest string the builder keeps) cannot fit even an empty batch
 * of the smallest frame a peer may announce (4,096 bytes) fails with -MRD_ERR_TOO_LARGE;
 * a record of a kind the agent does not know fails with -EINVAL; a record arriving when
 * the batch holds target_events gets -EAGAIN (not a drop: the caller finishes the batch).
 * Each failure must map to the drop reason the flusher counts (mrd__convert_drop_reason):
 * too_large for the first (it was counted as "unknown" before), "unknown" (0) for a record
 * it cannot encode, and the batch is unharmed: an ordinary record still goes in and the
 * batch still finishes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "error.h"
#include "frame.h"

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
    CHECK_EQ(mrd__convert_drop_reason(e), 0);
    CHECK_STREQ(mrd_drop_reason_name(mrd__convert_drop_reason(e)), "unknown");
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

    /* the other mappings: -EAGAIN for good (the full batch could not be encoded, so the
     * record never got one) is too_large; no memory is not any specific cause */
    CHECK_EQ(mrd__convert_drop_reason(-EAGAIN), MRD_DROP_TOO_LARGE);
    CHECK_EQ(mrd__convert_drop_reason(-ENOMEM), 0);

    mrd_batch_builder_free(b);
    printf("agent_convert: ok\n");
    return 0;
}
