/* A fake CUPTI for the steady tier's window tests (test_window.c, test_collsteps.c).
 *
 * The CUPTI entry points cupti.c calls, defined in the test executable (its definitions
 * take precedence over libcupti's), with observable counters; the subscriber callback
 * cupti.c registers is kept so a test can play CUDA API entries and exits. Helpers wait for
 * the helper thread's forced flush and finalize a detach, and read the window records back.
 */
#include "fake_cupti.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_agent.h"

atomic_int subscribed, unsubscribed, finalized, domains_on, flush_forced, pushes, pops;
atomic_int kernel_on, flush_plain;
atomic_long enable_delay_ns;
atomic_int subscribe_refuse_at;
static _Atomic unsigned long long kinds_bits; /* bit k: activity kind k enabled now */
static CUpti_CallbackFunc api_cb;
static struct {
    int x;
} the_sub;

/* Which of the two API domains are enabled (bit 0 runtime, bit 1 driver); domains_on counts
 * them. The real CUPTI wants these calls serialized: two at once is a test failure. */
static atomic_int domain_bits, enabling;
/* The callbacks enabled one by one: bit i for fake_names[i] (cbids_on counts them). */
static atomic_int cbid_bits;
atomic_int cbids_on, names_asked, names_unknown;

/* An enable takes enable_delay_ns (a close's time, for the tests that check it is timed). */
static void enable_delay(void)
{
    long delay = atomic_load(&enable_delay_ns);
    if (delay > 0) {
        struct timespec ts = {delay / 1000000000L, delay % 1000000000L};
        nanosleep(&ts, NULL);
    }
}

static void count_domains(void)
{
    int bits = atomic_load(&domain_bits);
    atomic_store(&domains_on, (bits & 1) + ((bits >> 1) & 1));
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                       void *user, CUpti_SubscriberParams *p)
{
    (void)user, (void)p;
    if (atomic_load(&subscribe_refuse_at) == atomic_load(&subscribed) + 1) {
        atomic_store(&subscribe_refuse_at, 0); /* refused once, as asked */
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    api_cb = cb;
    *sub = (CUpti_SubscriberHandle)(void *)&the_sub;
    atomic_fetch_add(&subscribed, 1);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *user)
{
    return cuptiSubscribe_v2(sub, cb, user, NULL);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    (void)sub;
    atomic_fetch_add(&unsubscribed, 1);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
    atomic_fetch_add(&finalized, 1);
    atomic_store(&kernel_on, 0);
    atomic_store(&kinds_bits, 0);
    atomic_store(&domain_bits, 0);
    count_domains();
    atomic_store(&cbid_bits, 0);
    atomic_store(&cbids_on, 0);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain domain)
{
    (void)sub;
    CHECK_EQ(atomic_fetch_add(&enabling, 1), 0);
    int bit = domain == CUPTI_CB_DOMAIN_RUNTIME_API  ? 1
              : domain == CUPTI_CB_DOMAIN_DRIVER_API ? 2
                                                     : 0;
    CHECK(bit != 0);
    if (enable)
        enable_delay();
    if (enable)
        atomic_fetch_or(&domain_bits, bit);
    else
        atomic_fetch_and(&domain_bits, ~bit);
    count_domains();
    atomic_fetch_sub(&enabling, 1);
    return CUPTI_SUCCESS;
}

/* The callbacks the fake names (fake_cupti.h); every other id in range is "cuFakeOther". */
static const struct {
    CUpti_CallbackDomain domain;
    uint32_t cbid;
    const char *name;
} fake_names[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
     "cudaLaunchKernel_v7000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
     "cudaGetDevice_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
     "cudaMemcpyAsync_v3020"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, "cuCtxGetDevice"},
};
#define FAKE_NAMES ((int)(sizeof(fake_names) / sizeof(fake_names[0])))

static int fake_name_index(CUpti_CallbackDomain domain, uint32_t cbid)
{
    for (int i = 0; i < FAKE_NAMES; i++)
        if (fake_names[i].domain == domain && fake_names[i].cbid == cbid)
            return i;
    return -1;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                          const char **name)
{
    atomic_fetch_add(&names_asked, 1);
    int size = domain == CUPTI_CB_DOMAIN_RUNTIME_API  ? CUPTI_RUNTIME_TRACE_CBID_SIZE
               : domain == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_DRIVER_TRACE_CBID_SIZE
                                                      : 0;
    if (!name || cbid == 0 || (int)cbid >= size)
        return CUPTI_ERROR_INVALID_PARAMETER; /* as CUPTI: no such callback */
    int i = fake_name_index(domain, cbid);
    *name = i >= 0 && !atomic_load(&names_unknown) ? fake_names[i].name : "cuFakeOther";
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    (void)sub;
    CHECK_EQ(atomic_fetch_add(&enabling, 1), 0);
    int i = fake_name_index(domain, cbid);
    CHECK(i >= 0); /* the agent enables only callbacks it found by name */
    if (enable)
        enable_delay();
    if (enable)
        atomic_fetch_or(&cbid_bits, 1 << i);
    else
        atomic_fetch_and(&cbid_bits, ~(1 << i));
    atomic_store(&cbids_on, __builtin_popcount((unsigned)atomic_load(&cbid_bits)));
    atomic_fetch_sub(&enabling, 1);
    return CUPTI_SUCCESS;
}

int cbid_on(const char *name)
{
    for (int i = 0; i < FAKE_NAMES; i++)
        if (strcmp(fake_names[i].name, name) == 0)
            return (atomic_load(&cbid_bits) >> i) & 1;
    CHECK(0);
    return 0;
}

int close_callbacks_on(void)
{
    return atomic_load(&domains_on) == 2 || cbid_on("cudaLaunchKernel_v7000");
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
    (void)fn;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value)
{
    (void)a, (void)size, (void)value;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done)
{
    (void)req, (void)done;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        atomic_store(&kernel_on, 1);
    CHECK((unsigned)kind < 64);
    atomic_fetch_or(&kinds_bits, 1ull << kind);
    return CUPTI_SUCCESS;
}

int kind_on(CUpti_ActivityKind kind)
{
    return (int)((atomic_load(&kinds_bits) >> kind) & 1);
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
    (void)cbid, (void)enable;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
    (void)cbid, (void)enable;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
        atomic_fetch_add(&flush_forced, 1);
    else
        atomic_fetch_add(&flush_plain, 1);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
    (void)ctx, (void)stream;
    *n = 0;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                            uint64_t id)
{
    (void)k, (void)id;
    atomic_fetch_add(&pushes, 1);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind k,
                                                           uint64_t *id)
{
    (void)k;
    *id = 0;
    atomic_fetch_add(&pops, 1);
    return CUPTI_SUCCESS;
}

static int runtime_call(CUpti_ApiCallbackSite site, uint32_t correlation, uint32_t cbid)
{
    CUpti_CallbackData d;
    memset(&d, 0, sizeof(d));
    d.callbackSite = site;
    d.correlationId = correlation;
    CHECK(api_cb != NULL);
    int i = fake_name_index(CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
    CHECK(i >= 0);
    d.functionName = fake_names[i].name;
    if (!(atomic_load(&domain_bits) & 1) && !((atomic_load(&cbid_bits) >> i) & 1))
        return 0;
    api_cb(NULL, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
    return 1;
}

/* One cudaLaunchKernel: its callback, as CUPTI makes it, only while the runtime domain or
 * that callback is enabled. Returns 1 when the callback was made, 0 when it was off. */
int api_call(CUpti_ApiCallbackSite site, uint32_t correlation)
{
    return runtime_call(site, correlation, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
}

/* One cudaGetDevice (not a launch), the same way. */
int api_call_other(CUpti_ApiCallbackSite site, uint32_t correlation)
{
    return runtime_call(site, correlation, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020);
}

void wait_for(atomic_int *v, int value)
{
    for (int i = 0; i < 2000 && atomic_load(v) != value; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(atomic_load(v), value);
}

/* The detach after a window: the helper thread's forced flush (the n-th), then the next API
 * exits until one finalizes (the n-th cuptiFinalize). */
void detach(int n)
{
    wait_for(&flush_forced, n);
    for (int i = 0; i < 2000 && atomic_load(&finalized) < n; i++) {
        api_call(CUPTI_API_EXIT, 600);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(atomic_load(&finalized), n);
}

/* The window events in the ring, in order, written into out as "FIRST-LAST REASON a=US
 * d=US f=US" (the form older agents sent as an NVTX message); returns how many. Each
 * event's times are checked: it ends after it starts, its costs are not negative (the
 * detach's -1 only for a window open at exit). */
int window_records(char out[][64], int max)
{
    struct mrd_record r[256];
    int k = 0;
    size_t n = fake_ring_take(r, 256);
    for (size_t i = 0; i < n; i++) {
        const struct mrd_window_record *w = &r[i].ev.window;
        CHECK(r[i].kind != MRD_EV_NVTX || r[i].str[0] == NULL ||
              strcmp(r[i].str[0], "meridian.window") != 0); /* no NVTX window record */
        if (r[i].kind != MRD_EV_WINDOW || k >= max)
            continue;
        CHECK(r[i].str[0] != NULL);
        CHECK(w->end >= w->start);
        CHECK(w->attach_ns >= 0 && w->flush_ns >= 0 && w->detach_ns >= -1);
        int len =
            snprintf(out[k++], 64, "%lld-%lld %s a=%lld d=%lld f=%lld", (long long)w->first_step,
                     (long long)w->last_step, r[i].str[0], (long long)(w->attach_ns / 1000),
                     (long long)(w->detach_ns < 0 ? -1 : w->detach_ns / 1000),
                     (long long)(w->flush_ns / 1000));
        CHECK(len > 0 && len < 64);
    }
    return k;
}
