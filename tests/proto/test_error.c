/* proto_error: mrd_strerror and the stable kind / drop-reason names. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "events.h"

int main(void)
{
    /* Every code maps to its own text, never NULL, both signs accepted. */
    CHECK_STREQ(mrd_strerror(0), "success");
    CHECK_STREQ(mrd_strerror(-ENOMEM), "out of memory");
    CHECK_STREQ(mrd_strerror(ENOMEM), mrd_strerror(-ENOMEM));
    CHECK_STREQ(mrd_strerror(-MRD_ERR_VERSION), "peer speaks another protocol version");
    CHECK_STREQ(mrd_strerror(-MRD_ERR_CONFIG), "invalid configuration value");
    CHECK_STREQ(mrd_strerror(-MRD_ERR_RANK_HELD), "rank held by another live agent process");
    for (int e = MRD_ERR_VERSION; e <= MRD_ERR_CONN_LIMIT; e++) {
        CHECK(strcmp(mrd_strerror(-e), "unknown error") != 0);
        for (int f = MRD_ERR_VERSION; f < e; f++)
            CHECK(strcmp(mrd_strerror(-e), mrd_strerror(-f)) != 0);
    }
    CHECK_STREQ(mrd_strerror(-(MRD_ERR_CONN_LIMIT + 1)), "unknown error");
    CHECK_STREQ(mrd_strerror(-MRD__ERR_BASE), "unknown error");
    CHECK_STREQ(mrd_strerror(-9999), "unknown error");
    CHECK_STREQ(mrd_strerror(-2147483647 - 1), "unknown error");
    CHECK(strstr(mrd_strerror(-EAGAIN), "try again") != NULL);
    CHECK(strstr(mrd_strerror(-ECONNRESET), "reset") != NULL);

    /* Names: stable, distinct, "unknown" out of range. */
    CHECK_STREQ(mrd_event_kind_name(MRD_EV_KERNEL), "kernel");
    CHECK_STREQ(mrd_event_kind_name(MRD_EV_NCCL_CHANNEL), "nccl_channel");
    CHECK_STREQ(mrd_event_kind_name(MRD_EV_GPU_CLOCK), "gpu_clock");
    CHECK_STREQ(mrd_event_kind_name(0), "unknown");
    CHECK_STREQ(mrd_event_kind_name(MRD_EV__COUNT), "unknown");
    CHECK_STREQ(mrd_event_kind_name(-1), "unknown");
    CHECK_STREQ(mrd_drop_reason_name(MRD_DROP_RING_FULL), "ring_full");
    CHECK_STREQ(mrd_drop_reason_name(MRD_DROP_NO_THREAD_SLOT), "no_thread_slot");
    CHECK_STREQ(mrd_drop_reason_name(0), "unknown");
    CHECK_STREQ(mrd_drop_reason_name(MRD_DROP__COUNT), "unknown");
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        CHECK(strcmp(mrd_event_kind_name(k), "unknown") != 0);
        for (int j = 1; j < k; j++)
            CHECK(strcmp(mrd_event_kind_name(k), mrd_event_kind_name(j)) != 0);
    }
    for (int r = 1; r < MRD_DROP__COUNT; r++) {
        CHECK(strcmp(mrd_drop_reason_name(r), "unknown") != 0);
        for (int j = 1; j < r; j++)
            CHECK(strcmp(mrd_drop_reason_name(r), mrd_drop_reason_name(j)) != 0);
    }
    return 0;
}
