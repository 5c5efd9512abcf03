/* capture_thread_state, capture_thread_state_agent: capture's per-thread state on many
 * threads, and no allocation on an application thread's first NVTX or NCCL call.
 *
 * The agent is always a dlopen'ed library (CUDA, NCCL and NVTX all dlopen it), and glibc
 * gives a dlopen'ed library's __thread variables their memory with malloc on each thread's
 * first touch, on the application's thread, inside its first NVTX or NCCL call (the NVTX
 * push/pop stack alone was ~3 KB). Capture code now keeps that state in the state area of
 * the thread's ring. This program is loaded the way a job loads the agent: it does not link
 * it; NVTX (a real NVTX v3 client, nvtx_client.c) dlopens NVTX_INJECTION64_PATH, and the
 * program dlopens the same path for NCCL's profiler table. It counts every malloc, calloc,
 * realloc and memalign made on each thread (its own definitions forward to glibc's; the
 * dynamic loader's TLS allocation goes through them too), then:
 *   - THREADS threads start together; each makes its first NVTX calls (push, nested push,
 *     mark, pops) and NCCL calls (GroupApi, KernelLaunch start/stop, Coll start/stop,
 *     without a parent, so the op can find its launch only through the thread's state),
 *     and must have allocated nothing meanwhile (failed before: 1 allocation per thread);
 *   - each then runs ROUNDS of nested push/pop (3 deep) and launch + op; every push and pop
 *     returns the right level.
 * With the capture test library (argv[1] = "fake") the records are read back: per thread,
 * every push/pop range with the writer's thread id and its depth, every mark, and every op
 * carrying the launch id of the launch its thread made just before it (all distinct).
 * With the real libmeridian.so ("agent", record-only mode, see CMakeLists.txt) the levels
 * and the allocation counts are checked. Not built in sanitizer configurations (the
 * sanitizers own malloc).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "nccl_abi.h"
#include "record.h"

#define THREADS 64
#define ROUNDS  100 /* THREADS * (ROUNDS + 1) ops stay below the plugin's 8192 op slots */

int nvtx_client_a_push(const char *msg);
int nvtx_client_a_pop(void);
void nvtx_client_a_mark(const char *msg);

/* ---- allocation counter (this thread's calls into malloc and friends) ----------------- */

void *memalign(size_t align, size_t n); /* <malloc.h>, not included */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

static __thread unsigned long allocs; /* the program's own TLS: static, never malloc'd */

void *malloc(size_t n)
{
    allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    allocs++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    allocs++;
    return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
    allocs++;
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    allocs++;
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    allocs++;
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void free(void *p)
{
    __libc_free(p);
}

/* ---- the workload ----------------------------------------------------------------------- */

static struct mrd_nccl_profiler_v5 *nccl;
static void *comm;
static pthread_barrier_t start_line;
static unsigned long first_allocs[THREADS];
static uint32_t tids[THREADS];

/* One kernel launch of a group and the collective it carries (no parent: the op finds its
 * launch through this thread's state only). */
static void nccl_round(uint64_t seq)
{
    struct mrd_nccl_descr_v5 d;
    void *group = NULL, *launch = NULL, *op = NULL;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_GROUP_API;
    nccl->start_event(comm, &group, &d);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_KERNEL_LAUNCH;
    nccl->start_event(comm, &launch, &d);
    nccl->stop_event(launch);
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.u.coll.seq = seq;
    d.u.coll.func = "AllReduce";
    d.u.coll.datatype = "ncclFloat32";
    d.u.coll.count = 1024;
    nccl->start_event(comm, &op, &d);
    CHECK(op != NULL);
    nccl->stop_event(op);
    if (group)
        nccl->stop_event(group);
}

static void *worker(void *arg)
{
    size_t w = (size_t)(uintptr_t)arg;
    tids[w] = (uint32_t)syscall(SYS_gettid);
    pthread_barrier_wait(&start_line);

    /* this thread's first capture calls: nothing may be allocated */
    unsigned long before = allocs;
    int l0 = nvtx_client_a_push("outer");
    int l1 = nvtx_client_a_push("inner");
    nvtx_client_a_mark("here");
    nccl_round(0);
    int p1 = nvtx_client_a_pop();
    int p0 = nvtx_client_a_pop();
    first_allocs[w] = allocs - before;
    CHECK_EQ(l0, 0);
    CHECK_EQ(l1, 1);
    CHECK_EQ(p1, 1);
    CHECK_EQ(p0, 0);

    for (int i = 0; i < ROUNDS; i++) {
        CHECK_EQ(nvtx_client_a_push("a"), 0);
        CHECK_EQ(nvtx_client_a_push("b"), 1);
        CHECK_EQ(nvtx_client_a_push("c"), 2);
        nccl_round((uint64_t)i + 1);
        CHECK_EQ(nvtx_client_a_pop(), 2);
        CHECK_EQ(nvtx_client_a_pop(), 1);
        CHECK_EQ(nvtx_client_a_pop(), 0);
    }
    CHECK(nvtx_client_a_pop() < 0); /* nothing open */
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The capture test library's records: everything the workers wrote, checked per thread. */
static void check_records(void *lib)
{
    size_t (*count)(void) = (size_t(*)(void))dlsym(lib, "fake_ring_count");
    size_t (*take)(struct mrd_record *, size_t) =
        (size_t(*)(struct mrd_record *, size_t))dlsym(lib, "fake_ring_take");
    CHECK(count != NULL && take != NULL);
    size_t n = count();
    struct mrd_record *r = calloc(n, sizeof(*r));
    uint64_t *launches = calloc(n, sizeof(*launches));
    CHECK(r != NULL && launches != NULL);
    CHECK_EQ(take(r, n), n);
    size_t ranges[THREADS] = {0}, marks[THREADS] = {0}, ops = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].kind == MRD_EV_NCCL_OP) {
            CHECK(r[i].ev.nccl_op.launch_id != 0);
            launches[ops++] = r[i].ev.nccl_op.launch_id;
            continue;
        }
        CHECK_EQ(r[i].kind, MRD_EV_NVTX);
        size_t w = 0;
        while (w < THREADS && tids[w] != r[i].ev.nvtx.thread)
            w++;
        CHECK(w < THREADS); /* the writer's own thread id */
        if (r[i].ev.nvtx.kind == MRD_NVTX_MARK) {
            marks[w]++;
            continue;
        }
        CHECK_EQ(r[i].ev.nvtx.kind, MRD_NVTX_PUSHPOP);
        const char *name = r[i].inline_str;
        uint32_t depth = r[i].ev.nvtx.depth;
        CHECK(depth == (uint32_t)(name[0] == 'a' || name[0] == 'o'   ? 0
                                  : name[0] == 'b' || name[0] == 'i' ? 1
                                                                     : 2));
        CHECK(r[i].ev.nvtx.end >= r[i].ev.nvtx.start);
        ranges[w]++;
    }
    for (size_t w = 0; w < THREADS; w++) {
        CHECK_EQ(ranges[w], 2 + 3 * ROUNDS);
        CHECK_EQ(marks[w], 1);
    }
    /* every op found the launch its own thread made just before it */
    CHECK_EQ(ops, (size_t)THREADS * (ROUNDS + 1));
    qsort(launches, ops, sizeof(*launches), cmp_u64);
    for (size_t i = 1; i < ops; i++)
        CHECK(launches[i] != launches[i - 1]);
    free(r);
    free(launches);
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "fake") != 0 && strcmp(argv[1], "agent") != 0)) {
        fprintf(stderr, "usage: test_thread_state fake|agent (NVTX_INJECTION64_PATH set)\n");
        return 2;
    }
    const char *path = getenv("NVTX_INJECTION64_PATH");
    CHECK(path != NULL);
    /* the main thread initialises NVTX (which dlopens the agent) and a communicator */
    CHECK_EQ(nvtx_client_a_push("main"), 0);
    CHECK_EQ(nvtx_client_a_pop(), 0);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    nccl = dlsym(lib, "ncclProfiler_v5");
    CHECK(nccl != NULL);
    int is_fake = strcmp(argv[1], "fake") == 0;
    if (is_fake) {
        void (*set_cap)(size_t) = (void (*)(size_t))dlsym(lib, "fake_ring_set_capacity");
        size_t (*take)(struct mrd_record *, size_t) =
            (size_t(*)(struct mrd_record *, size_t))dlsym(lib, "fake_ring_take");
        CHECK(set_cap != NULL && take != NULL);
        set_cap(1 << 18);
        struct mrd_record drop[4];
        while (take(drop, 4) > 0) /* the main thread's range */
            ;
    }
    int mask = 0;
    CHECK_EQ(nccl->init(&comm, 77, &mask, "tls", 1, 2, 0, NULL), 0);
    CHECK(comm != NULL && (mask & MRD_NCCL_EV_KERNEL_LAUNCH));

    pthread_t t[THREADS];
    CHECK_OK(pthread_barrier_init(&start_line, NULL, THREADS));
    for (size_t i = 0; i < THREADS; i++)
        CHECK_OK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i));
    for (size_t i = 0; i < THREADS; i++)
        CHECK_OK(pthread_join(t[i], NULL));
    unsigned long total = 0;
    for (size_t i = 0; i < THREADS; i++)
        total += first_allocs[i];
    if (total != 0) {
        for (size_t i = 0; i < THREADS; i++)
            if (first_allocs[i])
                fprintf(stderr, "thread %zu: %lu allocations in its first NVTX/NCCL calls\n", i,
                        first_allocs[i]);
    }
    CHECK_EQ(total, 0ul);
    if (is_fake)
        check_records(lib);
    CHECK_EQ(nccl->finalize(comm), 0);
    printf("capture_thread_state (%s): ok (%d threads, %d rounds each, 0 allocations on "
           "first use)\n",
           argv[1], THREADS, ROUNDS);
    return 0;
}
