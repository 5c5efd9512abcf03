/* meridian-agent-synth: a stand-in "rank" that drives the real agent (core + rings +
 * transport, linked statically from mrd_agent_core) with synthetic capture records.
 *
 * It reads the same environment as libmeridian.so (MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID,
 * a rank variable, ...), calls mrd_agent_start() like a capture entry point would, then
 * writes kernel records from T threads at a steady rate with mrd_ring_write, exactly as
 * capture code does. Kernel i (1-based, over all threads) carries correlation id i, so a
 * test can check the database holds each written record exactly once. At the end it
 * prints one line on stdout:
 *   synth: active=A written=W refused=F idsum=S elapsed_ms=E mixed_written=M mixed_refused=R
 *          dns_lookups=D
 * (W kernel records accepted by the rings, F refused, S the sum of the accepted correlation
 * ids; M and R the same counts for the NVTX/NCCL records of --mixed; D the lookups of
 * *.meridian-test names, which slow_dns.c answers after MRD_TEST_DNS_DELAY_MS)
 * and leaves through exit() (the agent's atexit flush) or, with --shutdown, through an
 * explicit mrd_agent_shutdown() first (what the MPI_Finalize wrapper does).
 *
 * Profiler API (--profiler A-B): the synth calls cudaProfilerStart in step A and
 * cudaProfilerStop in step B (cuProfilerStart/Stop with --profiler-driver). It links
 * libmeridian_profapi.so ahead of a stub CUDA library (cudart_stub.c), so the calls bind to
 * the real interposers, which forward to the stub and report to the agent core linked
 * here (its bridge is exported from this executable). It prints
 *   synth-profiler: calls=N forwarded=F bad_rc=B
 * (N calls made, F calls the stub received, B return values that were not the stub's).
 *
 * Steps (--steps): counted through agent/base/stepctl on the main thread, as capture
 * counts an application's step ranges. For a test that must not depend on the machine's
 * load, --nominal-step-times makes the step times stepctl reports the nominal ones, and
 * --hold STEP:N stops the steps at STEP until the agent has accepted N window requests
 * (announced through --hold-file PREFIX.STEP), so that the test, not the wall clock,
 * decides what the aggregator knows when it chooses a window's steps.
 *
 * Used by tests/agent (transport integration) and available to other test beds (clock,
 * end-to-end `meridian profile` without a GPU). Options: see usage().
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cudart_stub.h"
#include "ring.h"
#include "slow_dns.h"
#include "stepctl.h"
#include "steps.h"

static uint64_t o_events = 10000, o_rate = 0;
static unsigned o_threads = 1;
static int o_shutdown, o_fork, o_gpu_ms = -1, o_mixed, o_incompressible;
static long o_steps, o_step_ms = 10, o_slow_step = -1, o_slow_ms;
static int o_nominal_times; /* --nominal-step-times */
#define HOLDS_MAX 8
static long o_hold[HOLDS_MAX]; /* --hold STEP:N */
static uint64_t o_hold_want[HOLDS_MAX];
static int o_holds;
static const char *o_hold_file; /* --hold-file PREFIX */
static int g_hold_timeouts;
#define HOLD_TIMEOUT_S 30
static const char *o_until_file; /* --until-file */
#define PROFILER_PAIRS_MAX 8
static long o_prof_start[PROFILER_PAIRS_MAX], o_prof_stop[PROFILER_PAIRS_MAX];
static int o_prof_pairs, o_prof_driver, o_window_records;
static int g_prof_calls, g_prof_bad_rc;
static char g_prof_line[128];

static _Atomic uint64_t g_next_id = 1, g_written, g_refused, g_idsum;
static _Atomic uint64_t g_mixed_written, g_mixed_refused; /* --mixed NVTX/NCCL records */

static const char *const k_names[] = {
    "ampere_sgemm_128x64_nn",
    "volta_fp16_s884gemm",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "elementwise_kernel<128, 4>",
    "vectorized_elementwise_kernel",
    "reduce_kernel<512, 1>",
    "softmax_warp_forward",
    "layer_norm_kernel",
    "cunn_SoftMaxForward",
    "fused_dropout_kernel",
};
#define NNAMES (sizeof k_names / sizeof k_names[0])

static void usage(void)
{
    fprintf(stderr,
            "usage: meridian-agent-synth [--events N] [--rate EV_PER_S] [--threads T]\n"
            "       [--shutdown] [--fork] [--gpu-after-ms MS] [--mixed]\n"
            "  --events N        kernel records to write in all (default 10000)\n"
            "  --rate R          records per second over all threads (0 = flat out)\n"
            "  --threads T       writer threads (default 1)\n"
            "  --shutdown        call mrd_agent_shutdown() before exit (MPI_Finalize path)\n"
            "  --fork            also fork a child that writes records (it must be inert)\n"
            "  --gpu-after-ms MS register a fake GPU MS ms after start\n"
            "  --mixed           also write NVTX and NCCL records (strings of every kind)\n"
            "  --incompressible  kernel fields from a hash of the id: at least ~8 bytes per\n"
            "                    record survive compression, whatever the timing jitter\n"
            "  --steps N         also run N steps (agent/base/stepctl.h) of --step-ms MS each\n"
            "                    on the main thread, as a step range would; then prints\n"
            "                    `synth-steps: steps=N window_steps=A-B,...` (the steps that\n"
            "                    belonged to a window the aggregator asked for) before the\n"
            "                    synth line\n"
            "  --slow-step K --slow-ms MS   step K takes MS instead (a straggler)\n"
            "  --until-file PATH stop writing once PATH exists (--events stays the upper\n"
            "                    bound): a test paces the workload by what it has seen\n"
            "  --profiler A-B    with --steps: cudaProfilerStart in step A, cudaProfilerStop\n"
            "                    in step B (up to 8 pairs); prints `synth-profiler: calls=N\n"
            "                    forwarded=F bad_rc=B` before the synth line\n"
            "  --profiler-driver cuProfilerStart/cuProfilerStop instead\n"
            "  --window-records  with --steps: one `meridian.window` NVTX record per run of\n"
            "                    window steps, as the capture's window.c writes it (reason\n"
            "                    from the request), for the finalize's windows table\n"
            "  --nominal-step-times  with --steps: each step's time as stepctl sees it is its\n"
            "                    nominal length (--step-ms, --slow-ms), not the measured one,\n"
            "                    so a loaded machine cannot stretch a step past a trigger\n"
            "  --hold STEP:N     with --steps (up to 8): once step STEP has begun, wait until\n"
            "                    the agent has accepted N window requests in all (at most\n"
            "                    %d s; then go on and count a hold timeout, printed as\n"
            "                    hold_timeouts=N on the synth-steps line)\n"
            "  --hold-file PREFIX  on reaching each hold, write PREFIX.STEP (atomically, by\n"
            "                    rename) holding the agent clock's time (mrd_clock_now, the\n"
            "                    clock of clock_samples.t0) when the hold began\n",
            HOLD_TIMEOUT_S);
    exit(2);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* splitmix64: a fixed, well-mixed function of id (the same on every run). */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void write_kernel(uint64_t id)
{
    struct mrd_record r;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_KERNEL;
    r.str[0] = k_names[id % NNAMES];
    int64_t now = mrd_clock_now();
    r.ev.kernel = (struct mrd_kernel){.start = now,
                                      .end = now + 1000 + (int64_t)(id % 977),
                                      .correlation = id,
                                      .device = 0,
                                      .stream = 7 + id % 3,
                                      .grid = {128, 1, 1},
                                      .block = {256, 1, 1}};
    if (o_incompressible) { /* 24 + 32 random bits: no compressor can shrink them */
        uint64_t h = mix64(id);
        r.ev.kernel.end = now + 1000 + (int64_t)(h & 0xffffff);
        r.ev.kernel.stream = (uint32_t)(h >> 32);
    }
    if (mrd_ring_write(&r) == 0) {
        atomic_fetch_add(&g_written, 1);
        atomic_fetch_add(&g_idsum, id);
    } else {
        atomic_fetch_add(&g_refused, 1);
    }
}

/* NVTX range with a transient message and an NCCL op: exercises every string path. */
static void write_mixed(uint64_t id)
{
    struct mrd_record r;
    int64_t now = mrd_clock_now();
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_NVTX;
    snprintf(r.inline_str, sizeof r.inline_str, "step %" PRIu64, id / 100);
    r.ev.nvtx =
        (struct mrd_nvtx){.start = now - 5000, .end = now, .kind = MRD_NVTX_PUSHPOP, .thread = 1};
    atomic_fetch_add(mrd_ring_write(&r) == 0 ? &g_mixed_written : &g_mixed_refused, 1);
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_NCCL_OP;
    r.str[0] = "AllReduce";
    r.str[1] = "ncclFloat32";
    r.str[2] = "RING";
    r.str[3] = "SIMPLE";
    r.ev.nccl_op = (struct mrd_nccl_op){.op_id = id,
                                        .start = now - 3000,
                                        .end = now,
                                        .comm_hash = 0x1234abcdULL,
                                        .seq = id,
                                        .count = 1024,
                                        .bytes = 4096,
                                        .comm_nranks = 2,
                                        .root = -1,
                                        .peer = -1};
    atomic_fetch_add(mrd_ring_write(&r) == 0 ? &g_mixed_written : &g_mixed_refused, 1);
}

static void *writer(void *arg)
{
    (void)arg;
    int64_t start = mono_ns();
    uint64_t mine = 0;
    for (;;) {
        uint64_t id = atomic_fetch_add(&g_next_id, 1);
        if (id > o_events)
            break;
        write_kernel(id);
        if (o_mixed && id % 50 == 0)
            write_mixed(id);
        mine++;
        if (o_until_file && mine % 64 == 0 && access(o_until_file, F_OK) == 0)
            break;
        if (o_rate > 0 && mine % 64 == 0) /* pace in small bursts */
            sleep_until(start + (int64_t)(mine * o_threads * 1000000000.0 / (double)o_rate));
    }
    return NULL;
}

/* The child of a fork must be inert: its writes are refused and it reports nothing.
 * The child runs the agent's exit path itself (what its atexit handler runs) and leaves
 * with _exit, the way Python's fork workers do: it must not malloc or exit(). GCC 12's
 * ASan does not lock its allocator across fork, so when the parent's flusher held an
 * allocator lock at that moment, any allocation in the child (stdio's buffer, LSan's
 * leak check at exit) waits forever: the test hung in CI that way, 18 times in 30 runs
 * at three in parallel. */
static int run_fork_child(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int active = mrd_agent_start();
        struct mrd_record r = {.kind = MRD_EV_KERNEL};
        int refused = 0;
        for (int i = 0; i < 100; i++)
            refused += mrd_ring_write(&r) != 0;
        mrd_agent_shutdown(); /* must say nothing here: no exit line of the child's own */
        char line[64];
        int n = snprintf(line, sizeof line, "synth-child: active=%d refused=%d\n", active,
                         refused);
        if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) != n)
            _exit(2);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* --profiler: the calls due in `step` (its number), through the interposers; each return
 * value must be the stub's (1000 + its count of calls after this one). */
static void profiler_calls(long step)
{
    for (int i = 0; i < o_prof_pairs; i++) {
        int start = o_prof_start[i] == step, stop = o_prof_stop[i] == step;
        if (!start && !stop)
            continue;
        int which = o_prof_driver ? (start ? MRD_STUB_DRV_START : MRD_STUB_DRV_STOP)
                                  : (start ? MRD_STUB_RT_START : MRD_STUB_RT_STOP);
        int rc = o_prof_driver ? (start ? cuProfilerStart() : cuProfilerStop())
                               : (start ? cudaProfilerStart() : cudaProfilerStop());
        g_prof_calls++;
        g_prof_bad_rc += rc != 1000 + mrd_stub_calls(which);
    }
}

/* --window-records: the record capture/window.c writes for a window (steps first..last,
 * from t_start to now), with zero attach, detach and flush costs. */
static void window_record(long first, long last, int reason, int64_t t_start)
{
    struct mrd_record r;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_NVTX;
    r.str[0] = "meridian.window";
    snprintf(r.inline_str, sizeof r.inline_str, "%ld-%ld %s a=0 d=0 f=0", first, last,
             mrd_window_reason_name(reason));
    r.ev.nvtx = (struct mrd_nvtx){
        .start = t_start, .end = mrd_clock_now(), .kind = MRD_NVTX_PUSHPOP, .thread = 1};
    atomic_fetch_add(mrd_ring_write(&r) == 0 ? &g_mixed_written : &g_mixed_refused, 1);
}

/* --hold-file: PREFIX.STEP with the agent clock's time t, written whole (by rename) so that
 * a test polling for it never reads part of it. */
static void hold_announce(long step, int64_t t)
{
    char path[4096], tmp[4112];
    snprintf(path, sizeof path, "%s.%ld", o_hold_file, step);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%" PRId64 "\n", t) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "synth: cannot write %s\n", path);
        exit(1);
    }
}

/* The window requests this process's agent has accepted so far (stepctl's counter). */
static uint64_t requests_accepted(void)
{
    struct mrd_named_counter c[MRD_AGENT_NAMED_MAX];
    size_t n = mrd_agent_named_counters(c, MRD_AGENT_NAMED_MAX);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].category, "window") && !strcmp(c[i].name, "requests_accepted"))
            return c[i].value;
    return 0;
}

/* --hold STEP:N: step `step` has begun; waits until the agent has accepted `want` window
 * requests in all (the test decides when the aggregator opens one, or a trigger does).
 * A request accepted now starts after `step` (stepctl refuses one whose first step has
 * begun), so every rank has it before its first step whatever the machine's load. */
static void hold(long step, uint64_t want)
{
    if (o_hold_file)
        hold_announce(step, mrd_clock_now());
    int64_t until = mono_ns() + (int64_t)HOLD_TIMEOUT_S * 1000000000;
    while (requests_accepted() < want) {
        if (mono_ns() >= until) {
            fprintf(stderr,
                    "synth: hold at step %ld: %" PRIu64 " window requests accepted "
                    "after %d s, not %" PRIu64 "\n",
                    step, requests_accepted(), HOLD_TIMEOUT_S, want);
            g_hold_timeouts++;
            return;
        }
        sleep_until(mono_ns() + 5000000);
    }
}

/* --steps: steps on this thread; fills g_steps_line with `synth-steps: steps=N
 * window_steps=a-b,c-d` (the steps that belonged to an aggregator's window request when
 * they began, as ranges; "none"), printed before the synth line. */
static char g_steps_line[4200];

static void run_steps(void)
{
    char out[4096] = "";
    size_t used = 0;
    long run_start = -1;
    int run_reason = 0, reason = 0;
    int64_t run_t = 0;
    mrd_stepctl_register_counters();
    for (long i = 0; i <= o_steps; i++) {
        int in = 0;
        if (i < o_steps) {
            int64_t t = mono_ns();
            int64_t step = mrd_stepctl_begin();
            for (int h = 0; h < o_holds; h++)
                if (o_hold[h] == step)
                    hold(step, o_hold_want[h]);
            in = mrd_stepctl_requested(step, &reason);
            profiler_calls(step);
            long ms = step == o_slow_step ? o_slow_ms : o_step_ms;
            sleep_until(t + ms * 1000000);
            mrd_stepctl_end(step, o_nominal_times ? ms * 1000000 : mono_ns() - t);
        }
        if (in && run_start < 0) {
            run_start = i;
            run_reason = reason;
            run_t = mrd_clock_now();
        }
        if (!in && run_start >= 0 && o_window_records)
            window_record(run_start, i - 1, run_reason, run_t);
        if (!in && run_start >= 0 && used < sizeof(out) - 48) {
            used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%ld-%ld", used ? "," : "",
                                     run_start, i - 1);
            run_start = -1;
        }
    }
    char holds[48] = "";
    if (o_holds)
        snprintf(holds, sizeof holds, " hold_timeouts=%d", g_hold_timeouts);
    snprintf(g_steps_line, sizeof(g_steps_line), "synth-steps: steps=%ld window_steps=%s%s\n",
             o_steps, used ? out : "none", holds);
    if (o_prof_pairs) {
        int forwarded = 0;
        for (int k = 0; k < 4; k++)
            forwarded += mrd_stub_calls(k);
        snprintf(g_prof_line, sizeof(g_prof_line),
                 "synth-profiler: calls=%d forwarded=%d bad_rc=%d\n", g_prof_calls, forwarded,
                 g_prof_bad_rc);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--events") && v)
            o_events = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--rate") && v)
            o_rate = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--threads") && v)
            o_threads = (unsigned)strtoul(v, NULL, 10), i++;
        else if (!strcmp(a, "--gpu-after-ms") && v)
            o_gpu_ms = atoi(v), i++;
        else if (!strcmp(a, "--shutdown"))
            o_shutdown = 1;
        else if (!strcmp(a, "--fork"))
            o_fork = 1;
        else if (!strcmp(a, "--mixed"))
            o_mixed = 1;
        else if (!strcmp(a, "--incompressible"))
            o_incompressible = 1;
        else if (!strcmp(a, "--steps") && v)
            o_steps = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--step-ms") && v)
            o_step_ms = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--until-file") && v)
            o_until_file = argv[++i];
        else if (!strcmp(a, "--slow-step") && v)
            o_slow_step = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--slow-ms") && v)
            o_slow_ms = strtol(v, NULL, 10), i++;
        else if (!strcmp(a, "--profiler") && v && o_prof_pairs < PROFILER_PAIRS_MAX &&
                 sscanf(v, "%ld-%ld", &o_prof_start[o_prof_pairs],
                        &o_prof_stop[o_prof_pairs]) == 2 &&
                 o_prof_start[o_prof_pairs] <= o_prof_stop[o_prof_pairs])
            o_prof_pairs++, i++;
        else if (!strcmp(a, "--profiler-driver"))
            o_prof_driver = 1;
        else if (!strcmp(a, "--window-records"))
            o_window_records = 1;
        else if (!strcmp(a, "--nominal-step-times"))
            o_nominal_times = 1;
        else if (!strcmp(a, "--hold") && v && o_holds < HOLDS_MAX &&
                 sscanf(v, "%ld:%" SCNu64, &o_hold[o_holds], &o_hold_want[o_holds]) == 2)
            o_holds++, i++;
        else if (!strcmp(a, "--hold-file") && v)
            o_hold_file = argv[++i];
        else
            usage();
    }
    if (o_threads == 0 || o_threads > 256)
        usage();

    int64_t t0 = mono_ns();
    int active = mrd_agent_start();
    if (o_fork && run_fork_child() != 0)
        fprintf(stderr, "synth: fork child failed\n");

    pthread_t th[256];
    for (unsigned i = 0; i < o_threads; i++)
        if (pthread_create(&th[i], NULL, writer, NULL) != 0)
            return 1;
    if (o_gpu_ms >= 0) {
        sleep_until(t0 + (int64_t)o_gpu_ms * 1000000);
        mrd_agent_add_gpu(0, "GPU-00000000-1111-2222-3333-444444444444", "0000:19:00.0",
                          "Synthetic GPU");
    }
    if (o_steps > 0)
        run_steps();
    for (unsigned i = 0; i < o_threads; i++)
        pthread_join(th[i], NULL);

    fputs(g_steps_line, stdout); /* before the synth line, which ends what tests read */
    fputs(g_prof_line, stdout);
    printf("synth: active=%d written=%" PRIu64 " refused=%" PRIu64 " idsum=%" PRIu64
           " elapsed_ms=%" PRId64 " mixed_written=%" PRIu64 " mixed_refused=%" PRIu64
           " dns_lookups=%lu\n",
           active, atomic_load(&g_written), atomic_load(&g_refused), atomic_load(&g_idsum),
           (mono_ns() - t0) / 1000000, atomic_load(&g_mixed_written),
           atomic_load(&g_mixed_refused), mrd_test_dns_lookups());
    fflush(stdout);
    if (o_shutdown)
        mrd_agent_shutdown();
    return 0;
}
