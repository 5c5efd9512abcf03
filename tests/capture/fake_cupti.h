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

/* How long each cuptiEnableDomain(1, ...) takes, ns (0 by default): lets a test check
 * that the window's close is timed (counters window/closes, window/close_ns). */
extern atomic_long enable_delay_ns;

/* When it equals `subscribed` + 1, the next cuptiSubscribe is refused (then it is 0 again):
 * a test of what the agent does with a refusal. */
extern atomic_int subscribe_refuse_at;

/* 1 while activity kind `kind` is enabled (since the last cuptiFinalize), else 0. */
int kind_on(CUpti_ActivityKind kind);

/* One CUDA runtime API call: its callback, as CUPTI makes it, only while the runtime domain
 * is enabled (cuptiEnableDomain). Returns 1 when the callback was made, 0 when it was off. */
int api_call(CUpti_ApiCallbackSite site, uint32_t correlation);

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
