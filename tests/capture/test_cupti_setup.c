/* capture_cupti_setup: a CUPTI set-up that fails part way leaves nothing behind.
 *
 * This program defines the CUPTI entry points cupti.c calls during set-up (subscribe,
 * unsubscribe, version, timestamp callback, attribute, buffer callbacks, enable/disable of
 * kinds and API records); being the executable, its definitions take precedence over
 * libcupti's for the capture library. It fails one step at a time and runs
 * mrd__cupti_setup (InitializeInjection's set-up) against each:
 *   - Nsight's variable, or another subscriber: nothing claimed, nothing undone;
 *   - the pool cannot be mapped (RLIMIT_AS), the timestamp callback, the buffer callbacks,
 *     the kernel kind fail: the subscriber it got is released (cuptiUnsubscribe with that
 *     very handle), no kind is on (every failure comes before the first kind is enabled;
 *     the check guards that order), and the pool it mapped is gone
 *     (unmapped: mincore says so; the request callback hands out nothing).
 * Before the fix the subscriber was never released (CUPTI stayed ours, no other tool could
 * take it) and the pre-faulted pool stayed mapped; a second set-up then failed at once.
 * Last, a set-up with nothing failing succeeds and keeps subscriber, kinds and pool.
 * With the argument `self-off` (test capture_cupti_setup_selfoff): the diagnostic
 * MERIDIAN_CUPTI_SELF_RECORDS=0 instead (see self_records_off).
 * With `choices` (test capture_cupti_setup_choices): the three options that name one of a
 * list (mrd__capture_env_choice): each bad value is refused before anything is claimed,
 * with its exact line on stderr; unset, empty and valid values are taken.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "cupti_convert.h"
#include "fake_agent.h"

enum step { NONE, SUBSCRIBE, POOL, TIMESTAMP, CALLBACKS, KERNEL_KIND, NSIGHT };

static enum step fail_at;
static int subscribed, unsubscribed, pool_seen;
static unsigned char kind_on[CUPTI_ACTIVITY_KIND_COUNT + 1]; /* what is on now */
static CUpti_SubscriberHandle handed_out, released;
static uint8_t *pool_buf; /* a buffer of the pool, seen while set-up ran */
static struct mrd__cupti_fake_sub {
    int x;
} the_sub;

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                       void *user, CUpti_SubscriberParams *p)
{
    (void)cb, (void)user;
    if (fail_at == SUBSCRIBE) {
        if (p && p->oldSubscriberName && p->oldSubscriberSize > 4)
            strcpy(p->oldSubscriberName, "nsys");
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    subscribed++;
    handed_out = (CUpti_SubscriberHandle)(void *)&the_sub;
    *sub = handed_out;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                    void *user)
{
    return cuptiSubscribe_v2(sub, cb, user, NULL);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    unsubscribed++;
    released = sub;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
    (void)fn;
    /* the pool is mapped by now: remember where one of its buffers is */
    size_t size = 0, max = 0;
    mrd__cupti_buffer_requested(&pool_buf, &size, &max);
    pool_seen = pool_buf != NULL && size > 0;
    return fail_at == TIMESTAMP ? CUPTI_ERROR_NOT_INITIALIZED : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size,
                                               void *value)
{
    (void)a, (void)size, (void)value;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done)
{
    (void)req, (void)done;
    return fail_at == CALLBACKS ? CUPTI_ERROR_INVALID_PARAMETER : CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (fail_at == KERNEL_KIND && kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        return CUPTI_ERROR_NOT_COMPATIBLE;
    if ((unsigned)kind <= CUPTI_ACTIVITY_KIND_COUNT)
        kind_on[kind] = 1;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    if ((unsigned)kind <= CUPTI_ACTIVITY_KIND_COUNT)
        kind_on[kind] = 0;
    return CUPTI_SUCCESS;
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

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **s)
{
    (void)r;
    *s = "injected failure";
    return CUPTI_SUCCESS;
}

static int kinds_on(void)
{
    int n = 0;
    for (size_t i = 0; i < sizeof(kind_on); i++)
        n += kind_on[i];
    return n;
}

/* Is the page at p mapped? */
static int mapped(const void *p)
{
    unsigned char vec;
    long page = sysconf(_SC_PAGESIZE);
    void *base = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    return mincore(base, (size_t)page, &vec) == 0;
}

static void run_failing(enum step step, const char *name)
{
    fail_at = step;
    subscribed = unsubscribed = pool_seen = 0;
    memset(kind_on, 0, sizeof(kind_on));
    handed_out = released = NULL;
    pool_buf = NULL;
    int e = mrd__cupti_setup();
    CHECK(e < 0);
    if (step == SUBSCRIBE || step == NSIGHT) {
        CHECK_EQ(e, -EBUSY);
        CHECK_EQ(subscribed, 0);
        CHECK_EQ(unsubscribed, 0);
    } else {
        CHECK_EQ(subscribed, 1);
        CHECK_EQ(unsubscribed, 1); /* CUPTI is free again ... */
        CHECK(released == handed_out); /* ... our own subscriber, not some other */
    }
    CHECK_EQ(kinds_on(), 0);
    if (pool_seen)
        CHECK(!mapped(pool_buf)); /* the pre-faulted pool is gone */
    uint8_t *buf = (uint8_t *)1;
    size_t size = 1, max = 1;
    mrd__cupti_buffer_requested(&buf, &size, &max);
    CHECK(buf == NULL && size == 0);
    printf("capture_cupti_setup: failure at %s: %d, subscriber %s, pool %s\n", name, e,
           subscribed ? "released" : "never taken", pool_seen ? "unmapped" : "never mapped");
}

/* `self-off`: MERIDIAN_CUPTI_SELF_RECORDS=0 enables exactly the bare consumer's kinds when
 * MERIDIAN_TRACE_KINDS=kernel (CONCURRENT_KERNEL alone), and the named counters then carry
 * no CUPTI overhead figure (none recorded, rather than a zero); a value other than 0 or 1
 * is refused before anything is claimed. */
static int self_records_off(void)
{
    setenv("MERIDIAN_CUPTI_SELF_RECORDS", "2", 1);
    CHECK_EQ(mrd__cupti_setup(), -EINVAL);
    CHECK_EQ(subscribed, 0);
    setenv("MERIDIAN_CUPTI_SELF_RECORDS", "0", 1);
    setenv("MERIDIAN_TRACE_KINDS", "kernel", 1);
    fail_at = NONE;
    CHECK_OK(mrd__cupti_setup());
    CHECK(kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
    CHECK(!kind_on[CUPTI_ACTIVITY_KIND_OVERHEAD] && !kind_on[CUPTI_ACTIVITY_KIND_DEVICE]);
    CHECK_EQ(kinds_on(), 1);
    mrd__cupti_register_counters();
    struct mrd_named_counter c[MRD_AGENT_NAMED_MAX];
    size_t n = mrd_agent_named_counters(c, MRD_AGENT_NAMED_MAX);
    CHECK_EQ(n, 4);
    for (size_t i = 0; i < n; i++)
        CHECK(strncmp(c[i].name, "overhead", 8) != 0);
    CHECK_STREQ(c[0].name, "unknown_records");
    printf("capture_cupti_setup: self-off ok\n");
    return 0;
}

/* mrd__cupti_setup with one variable set; its stderr in err (cut at cap) */
static int setup_with(const char *name, const char *value, char *err, size_t cap)
{
    setenv(name, value, 1);
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = tmp ? dup(2) : -1;
    if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
        if (saved >= 0)
            close(saved);
        if (tmp)
            fclose(tmp);
        return -1000; /* no capture: the caller's CHECK_EQ fails */
    }
    int e = mrd__cupti_setup();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(err, 1, cap - 1, tmp);
    err[n] = 0;
    fclose(tmp);
    unsetenv(name);
    return e;
}

static int choices(void)
{
    static const struct {
        const char *name, *bad, *line;
    } bad[] = {
        {"MERIDIAN_CUPTI_API", "some",
         "meridian: MERIDIAN_CUPTI_API=some is not all or nccl; CUDA capture stays off\n"},
        {"MERIDIAN_CUPTI_CLOSE", "launch",
         "meridian: MERIDIAN_CUPTI_CLOSE=launch is not launches or domains; CUDA capture "
         "stays off\n"},
        {"MERIDIAN_CUPTI_ALTERNATE", "Kinds",
         "meridian: MERIDIAN_CUPTI_ALTERNATE=Kinds is not kinds, subscribe or flush; CUDA "
         "capture stays off\n"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(setup_with(bad[i].name, bad[i].bad, err, sizeof err), -EINVAL);
        CHECK_STREQ(err, bad[i].line);
        CHECK_EQ(subscribed, 0);
    }
    /* taken, silently: `nccl` (no API records), `domains`, an empty value (unset) */
    fail_at = NONE;
    setenv("MERIDIAN_CUPTI_CLOSE", "domains", 1);
    setenv("MERIDIAN_CUPTI_ALTERNATE", "", 1);
    CHECK_OK(setup_with("MERIDIAN_CUPTI_API", "nccl", err, sizeof err));
    CHECK_STREQ(err, "");
    CHECK_EQ(subscribed, 1);
    CHECK(kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
    CHECK(!kind_on[CUPTI_ACTIVITY_KIND_RUNTIME] && !kind_on[CUPTI_ACTIVITY_KIND_DRIVER]);
    printf("capture_cupti_setup: choices ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    fake_reset();
    fake_small_cupti_env();
    if (argc > 1 && strcmp(argv[1], "self-off") == 0)
        return self_records_off();
    if (argc > 1 && strcmp(argv[1], "choices") == 0)
        return choices();

    setenv("NSYS_PROFILING_SESSION_ID", "7", 1);
    run_failing(NSIGHT, "Nsight's variable");
    unsetenv("NSYS_PROFILING_SESSION_ID");
    run_failing(SUBSCRIBE, "another subscriber");
    run_failing(TIMESTAMP, "the timestamp callback");
    run_failing(CALLBACKS, "the buffer callbacks");
    run_failing(KERNEL_KIND, "the kernel kind");

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* RLIMIT_AS vs shadow */
    /* a pool that cannot be mapped: 64 x 64 MiB under a 1 GiB address-space limit */
    struct rlimit old, lim;
    CHECK_OK(getrlimit(RLIMIT_AS, &old));
    setenv("MERIDIAN_CUPTI_BUFFER_MB", "64", 1);
    setenv("MERIDIAN_CUPTI_BUFFERS", "64", 1);
    lim = old;
    lim.rlim_cur = 1ul << 30;
    if (old.rlim_max == RLIM_INFINITY || old.rlim_max > lim.rlim_cur) {
        CHECK_OK(setrlimit(RLIMIT_AS, &lim));
        run_failing(POOL, "the pool");
        CHECK_OK(setrlimit(RLIMIT_AS, &old));
    }
    setenv("MERIDIAN_CUPTI_BUFFER_MB", "1", 1);
    setenv("MERIDIAN_CUPTI_BUFFERS", "2", 1);
#endif

    /* nothing fails: everything stays */
    fail_at = NONE;
    subscribed = unsubscribed = 0;
    CHECK_OK(mrd__cupti_setup());
    CHECK_EQ(subscribed, 1);
    CHECK_EQ(unsubscribed, 0);
    /* the lean default (MERIDIAN_TRACE_KINDS unset): kernels, graphs, CUPTI's own overhead
     * and devices; copies, memsets, syncs and API records only when asked for */
    CHECK(kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && kind_on[CUPTI_ACTIVITY_KIND_GRAPH_TRACE]);
    CHECK(kind_on[CUPTI_ACTIVITY_KIND_OVERHEAD] && kind_on[CUPTI_ACTIVITY_KIND_DEVICE]);
    CHECK(!kind_on[CUPTI_ACTIVITY_KIND_MEMCPY] && !kind_on[CUPTI_ACTIVITY_KIND_MEMSET] &&
          !kind_on[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION]);
    CHECK_EQ(kinds_on(), 4);
    CHECK(pool_seen && mapped(pool_buf));
    printf("capture_cupti_setup: ok\n");
    return 0;
}
