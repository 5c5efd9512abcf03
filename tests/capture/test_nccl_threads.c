/* capture_nccl_threads: the NCCL plugin's lock-free pools under concurrent use.
 *
 * Like a multi-communicator job: WORKERS application threads each start and stop OPS ops
 * (Coll start, hand the handle to a proxy thread, Coll stop at once, as NCCL does before
 * the kernel even ran), while PROXIES proxy threads run CHANNELS KernelCh events (start,
 * state 22, stop) for every op they receive, usually after the op was stopped. Checked
 * against the obvious model: every op either produced one op record or was dropped and
 * counted; op ids are unique; every recorded op got exactly CHANNELS channel records
 * carrying its op id and the GPU timers given to it; nothing else was written. Built
 * with TSan in the sanitizer configuration.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_agent.h"
#include "nccl_abi.h"

#define WORKERS  4
#define PROXIES  2
#define OPS      3000
#define CHANNELS 4
#define QCAP     64

extern struct mrd_nccl_profiler_v5 ncclProfiler_v5;

/* A bounded blocking queue of op handles (test scaffolding, not code under test). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *items[QCAP];
    size_t head, count;
    int closed;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0};

static void q_put(void *h)
{
    pthread_mutex_lock(&q.mu);
    while (q.count == QCAP)
        pthread_cond_wait(&q.cv, &q.mu);
    q.items[(q.head + q.count++) % QCAP] = h;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
}

static void *q_get(void)
{
    pthread_mutex_lock(&q.mu);
    while (q.count == 0 && !q.closed)
        pthread_cond_wait(&q.cv, &q.mu);
    void *h = NULL;
    if (q.count > 0) {
        h = q.items[q.head];
        q.head = (q.head + 1) % QCAP;
        q.count--;
        pthread_cond_broadcast(&q.cv);
    }
    pthread_mutex_unlock(&q.mu);
    return h;
}

static void *ctx;

static void *worker(void *arg)
{
    uintptr_t w = (uintptr_t)arg;
    struct mrd_nccl_descr_v5 d;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.u.coll.func = "AllReduce";
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.count = 1000 + w;
    for (int i = 0; i < OPS; i++) {
        void *h = NULL;
        d.u.coll.seq = (uint64_t)i;
        ncclProfiler_v5.start_event(ctx, &h, &d);
        if (!h)
            continue;
        q_put(h);
        ncclProfiler_v5.stop_event(h);
    }
    return NULL;
}

static void *proxy(void *arg)
{
    (void)arg;
    void *op;
    while ((op = q_get()) != NULL) {
        for (int c = 0; c < CHANNELS; c++) {
            struct mrd_nccl_descr_v5 k;
            memset(&k, 0, sizeof(k));
            k.type = MRD_NCCL_EV_KERNEL_CH;
            k.parent = op;
            k.u.kernel_ch.channel = (uint8_t)c;
            k.u.kernel_ch.ptimer = 1000 * (uint64_t)c;
            void *h = NULL;
            ncclProfiler_v5.start_event(ctx, &h, &k);
            CHECK(h != NULL);
            union mrd_nccl_state_args a = {.kernel_ch = {1000 * (uint64_t)c + 77}};
            ncclProfiler_v5.record_event_state(h, MRD_NCCL_STATE_KERNEL_CH_STOP, &a);
            ncclProfiler_v5.stop_event(h);
        }
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    fake_reset();
    fake_ring_set_capacity(1 << 18);
    int mask = 0;
    CHECK_EQ(ncclProfiler_v5.init(&ctx, 99, &mask, "t", 1, 8, 0, NULL), 0);
    pthread_t w[WORKERS], p[PROXIES];
    for (uintptr_t i = 0; i < PROXIES; i++)
        CHECK_OK(pthread_create(&p[i], NULL, proxy, NULL));
    for (uintptr_t i = 0; i < WORKERS; i++)
        CHECK_OK(pthread_create(&w[i], NULL, worker, (void *)i));
    for (int i = 0; i < WORKERS; i++)
        CHECK_OK(pthread_join(w[i], NULL));
    pthread_mutex_lock(&q.mu);
    q.closed = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    for (int i = 0; i < PROXIES; i++)
        CHECK_OK(pthread_join(p[i], NULL));

    size_t n = fake_ring_count();
    struct mrd_record *r = calloc(n, sizeof(*r));
    CHECK(r != NULL);
    CHECK_EQ(fake_ring_take(r, n), n);
    uint64_t *ops = calloc(n, sizeof(*ops)), *chs = calloc(n, sizeof(*chs));
    size_t nops = 0, nchs = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].kind == MRD_EV_NCCL_OP) {
            ops[nops++] = r[i].ev.nccl_op.op_id;
            CHECK_EQ(r[i].ev.nccl_op.count >= 1000 && r[i].ev.nccl_op.count < 1000 + WORKERS, 1);
        } else {
            CHECK_EQ(r[i].kind, MRD_EV_NCCL_CHANNEL);
            CHECK_EQ(r[i].ev.nccl_channel.gpu_end - r[i].ev.nccl_channel.gpu_start, 77);
            CHECK_EQ(r[i].ev.nccl_channel.gpu_start, 1000 * r[i].ev.nccl_channel.channel);
            chs[nchs++] = r[i].ev.nccl_channel.op_id;
        }
    }
    uint64_t dropped = fake_dropped(MRD_DROP_NCCL_POOL);
    CHECK_UEQ(nops + dropped, (uint64_t)WORKERS * OPS);
    CHECK_EQ(nchs, nops * CHANNELS);
    qsort(ops, nops, sizeof(*ops), cmp_u64);
    qsort(chs, nchs, sizeof(*chs), cmp_u64);
    for (size_t i = 0; i < nops; i++) {
        CHECK(i == 0 || ops[i] != ops[i - 1]);
        for (int c = 0; c < CHANNELS; c++)
            CHECK_UEQ(chs[i * CHANNELS + c], ops[i]);
    }
    CHECK_EQ(ncclProfiler_v5.finalize(ctx), 0);
    printf("capture_nccl_threads: ok (%zu ops, %zu channels, %llu dropped)\n", nops, nchs,
           (unsigned long long)dropped);
    free(r);
    free(ops);
    free(chs);
    return 0;
}
