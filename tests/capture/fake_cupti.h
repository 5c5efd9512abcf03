/* A fake CUPTI for the window tests (fake_cupti.c has what it does). */
#ifndef MRD_TEST_FAKE_CUPTI_H
#define MRD_TEST_FAKE_CUPTI_H

#include <stdatomic.h>
#include <stdint.h>

#include <cupti.h>

/* Calls of the CUPTI entry points so far (kernel_on: CONCURRENT_KERNEL enabled now;
 * domains_on: how many of the runtime and driver callback domains are enabled now;
 * flush_plain: cuptiActivityFlushAll(0) calls, flush_forced the forced ones). */
extern atomic_int subscribed, unsubscribed, finalized, domains_on, flush_forced, pushes, pops;
extern atomic_int kernel_on, flush_plain;

/* How long each cuptiEnableDomain(1, ...) and cuptiEnableCallback(1, ...) takes, ns (0 by
 * default): lets a test check that the window's close is timed (counters window/closes,
 * window/close_ns). */
extern atomic_long enable_delay_ns;

/* When it equals `subscribed` + 1, the next cuptiSubscribe is refused (then it is 0 again):
 * a test of what the agent does with a refusal. */
extern atomic_int subscribe_refuse_at;

/* 1 while activity kind `kind` is enabled (since the last cuptiFinalize), else 0. */
int kind_on(CUpti_ActivityKind kind);

/* One cudaLaunchKernel: its callback, as CUPTI makes it, only while the runtime domain
 * (cuptiEnableDomain) or that callback (cuptiEnableCallback) is enabled. Returns 1 when the
 * callback was made, 0 when it was off. */
int api_call(CUpti_ApiCallbackSite site, uint32_t correlation);

/* One cudaGetDevice (not a launch), the same way. */
int api_call_other(CUpti_ApiCallbackSite site, uint32_t correlation);

/* The fake names five callbacks (cudaLaunchKernel_v7000, cudaGetDevice_v3020,
 * cudaMemcpyAsync_v3020, cuLaunchKernel, cuCtxGetDevice) and calls every other id in range
 * "cuFakeOther". cbids_on: how many of the five are enabled one by one now (reset by
 * cuptiFinalize); names_asked: cuptiGetCallbackName calls so far; names_unknown = 1 makes
 * every name "cuFakeOther" (a CUPTI whose launches the agent cannot find). */
extern atomic_int cbids_on, names_asked, names_unknown;

/* 1 while the callback of that name (one of the five) is enabled one by one. */
int cbid_on(const char *name);

/* 1 while a launch's callback would be made: both domains on, or cudaLaunchKernel's. */
int close_callbacks_on(void);

/* Waits (up to 2 s, by observed state) until *v is value; checks it is. */
void wait_for(atomic_int *v, int value);

/* The detach after a window: the helper thread's forced flush (the n-th), then API exits
 * until one finalizes (the n-th cuptiFinalize). */
void detach(int n);

/* The window events in the ring, in order, written into out as "FIRST-LAST REASON a=US
 * d=US f=US"; returns how many. Takes every record out of the ring and checks each window
 * event's times (fake_cupti.c). */
int window_records(char out[][64], int max);

#endif
