/* clock_agent: a stand-in rank for the clock test bed, driving the real agent.
 *
 * Where it sits: tests/clock/testbed.py runs several of these, each in its own network
 * namespace and time namespace (its CLOCK_MONOTONIC_RAW shifted by a known amount) and
 * with MERIDIAN_TEST_CLOCK_PPM set, against a real meridiand. It links mrd_agent_core
 * (core + rings + transport), so the probes, batches and the agent's clock are the real
 * ones; it only replaces the capture code. Its events carry only the agent's clock: the
 * namespace's shift (read from /proc/self/timens_offsets) serves only to place the
 * simulated collectives on the host's time, the physics the agent must recover.
 *
 * What it writes, all stamped with mrd_clock_now() (the agent's local clock):
 *  - kernel records at --rate per second, evenly spread over --seconds (correlation ids
 *    1, 2, ...): the events whose alignment error the test bed measures;
 *  - every --coll-ms, at instants of a grid on the host's CLOCK_MONOTONIC_RAW shared by
 *    all agents (this namespace's CLOCK_MONOTONIC_RAW less its monotonic offset), one
 *    "collective": an NCCL op (comm_hash
 *    --comm, seq k, AllReduce), its kernel spanning +- --coll-half-us around the instant
 *    (so the instances of all ranks overlap in true time by construction),
 *    the external correlation linking them, and two NCCL channels whose times are a
 *    synthetic GPU timer: gpu = local + --gpu-offset-us + local * --gpu-ppm / 1e6.
 *    The causality check and the GPU timer calibration run on these.
 * At the end it calls mrd_agent_shutdown() (goodbye burst of probes) and prints
 *   clock_agent: rank R kernels=K collectives=C refused=F
 *
 * Workload: a few hundred records per second from one thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "ring.h"

static double o_seconds = 10, o_rate = 200, o_coll_ms = 100, o_coll_half_us = 300;
static double o_gpu_offset_us = -150, o_gpu_ppm = 1.5;
static uint64_t o_comm = 0x5eedc10c;
static int64_t o_t0_host_raw;
static uint64_t g_refused;
static int64_t g_ns_offset; /* this time namespace's monotonic offset, ns */

/* The time namespace's monotonic offset (it applies to CLOCK_MONOTONIC_RAW too); 0 in the
 * initial namespace or where the file does not exist. */
static int64_t timens_monotonic_offset(void)
{
    FILE *f = fopen("/proc/self/timens_offsets", "r");
    if (!f)
        return 0;
    char name[32];
    long long sec, nsec;
    int64_t off = 0;
    while (fscanf(f, "%31s %lld %lld", name, &sec, &nsec) == 3)
        if (!strcmp(name, "monotonic"))
            off = (int64_t)sec * 1000000000 + nsec;
    fclose(f);
    return off;
}

/* The host's CLOCK_MONOTONIC_RAW, the same for every agent whatever its namespace. It was
 * CLOCK_REALTIME until a CI run in which the VM's realtime moved against the monotonic
 * clocks while the agents placed one instant (one agent's collective 460 us off the
 * others': rank 1's evidence contradictory, the tightening goal missed). */
static int64_t host_raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - g_ns_offset;
}

static void sleep_until_host_raw(int64_t t)
{
    for (int64_t left; (left = t - host_raw_ns()) > 0;) {
        struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
        nanosleep(&ts, NULL); /* relative: clock_nanosleep has no MONOTONIC_RAW */
    }
}

static void put(const struct mrd_record *r)
{
    if (mrd_ring_write(r) != 0)
        g_refused++;
}

static int64_t gpu_timer(int64_t local)
{
    return local + (int64_t)(o_gpu_offset_us * 1000) + (int64_t)((double)local * o_gpu_ppm * 1e-6);
}

static void write_kernel(uint64_t id)
{
    struct mrd_record r;
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_KERNEL;
    r.str[0] = "clock_bed_kernel";
    int64_t now = mrd_clock_now();
    r.ev.kernel = (struct mrd_kernel){.start = now,
                                      .end = now + 2000,
                                      .correlation = id,
                                      .device = 0,
                                      .stream = 7,
                                      .grid = {1, 1, 1},
                                      .block = {32, 1, 1}};
    put(&r);
}

/* The local clock's reading at the host instant t (a moment ago): the process may wake
 * late, but the collective's kernel belongs to the shared instant. The lateness is
 * measured, not the clock's offset: (host, local) read back to back, retried when the pair
 * was interrupted; the rate difference over the lateness is below 1 ns. */
static int64_t local_at_host_raw(int64_t t)
{
    for (int i = 0;; i++) {
        int64_t a = host_raw_ns(), l = mrd_clock_now(), b = host_raw_ns();
        if (b - a < 20000 || i == 20)
            return l - ((a + b) / 2 - t);
    }
}

static void write_collective(uint64_t k, int64_t t, int rank, int world)
{
    struct mrd_record r;
    int64_t now = local_at_host_raw(t), half = (int64_t)(o_coll_half_us * 1000);
    uint64_t corr = (1ULL << 40) | k, launch = (1ULL << 41) | k;

    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_NCCL_OP;
    r.str[0] = "AllReduce", r.str[1] = "ncclFloat32", r.str[2] = "RING", r.str[3] = "SIMPLE";
    r.ev.nccl_op = (struct mrd_nccl_op){.op_id = k + 1,
                                        .start = now - half - 5000,
                                        .end = now - half,
                                        .comm_hash = o_comm,
                                        .seq = k,
                                        .count = 1 << 20,
                                        .bytes = 4 << 20,
                                        .launch_id = launch,
                                        .comm_rank = (uint32_t)rank,
                                        .comm_nranks = (uint32_t)world,
                                        .channels = 2,
                                        .warps = 8,
                                        .root = -1,
                                        .peer = -1};
    put(&r);
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_EXTCORR;
    r.ev.extcorr = (struct mrd_extcorr){.correlation = corr, .external_id = launch, .kind = 2};
    put(&r);
    memset(&r, 0, sizeof r);
    r.kind = MRD_EV_KERNEL;
    r.str[0] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    r.ev.kernel = (struct mrd_kernel){.start = now - half,
                                      .end = now + half,
                                      .correlation = corr,
                                      .device = 0,
                                      .stream = 9,
                                      .grid = {2, 1, 1},
                                      .block = {256, 1, 1}};
    put(&r);
    for (uint32_t ch = 0; ch < 2; ch++) {
        memset(&r, 0, sizeof r);
        r.kind = MRD_EV_NCCL_CHANNEL;
        r.ev.nccl_channel =
            (struct mrd_nccl_channel){.op_id = k + 1,
                                      .channel = ch,
                                      .gpu_start = gpu_timer(now - half + 2000 + 700 * (int64_t)ch),
                                      .gpu_end = gpu_timer(now + half - 2000 - 900 * (int64_t)ch),
                                      .host_start = now + half + 50000};
        put(&r);
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: clock_agent [--seconds S] [--rate R] [--coll-ms P] [--coll-half-us W]\n"
            "       [--t0-host-raw-ns T] [--comm HASH] [--gpu-offset-us X] [--gpu-ppm Y]\n"
            "  T: the grid's start on the host's CLOCK_MONOTONIC_RAW (outside any time\n"
            "  namespace), shared by all agents\n"
            "  environment: MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET_FILE, RANK,\n"
            "  WORLD_SIZE (and MERIDIAN_TEST_CLOCK_PPM) as for libmeridian.so\n");
    exit(2);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--seconds"))
            o_seconds = atof(v);
        else if (!strcmp(a, "--rate"))
            o_rate = atof(v);
        else if (!strcmp(a, "--coll-ms"))
            o_coll_ms = atof(v);
        else if (!strcmp(a, "--coll-half-us"))
            o_coll_half_us = atof(v);
        else if (!strcmp(a, "--t0-host-raw-ns"))
            o_t0_host_raw = strtoll(v, NULL, 10);
        else if (!strcmp(a, "--comm"))
            o_comm = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--gpu-offset-us"))
            o_gpu_offset_us = atof(v);
        else if (!strcmp(a, "--gpu-ppm"))
            o_gpu_ppm = atof(v);
        else
            usage();
    }
    if (o_seconds <= 0 || o_rate <= 0 || o_coll_ms <= 0)
        usage();
    if (mrd_agent_start() != 1) {
        fprintf(stderr, "clock_agent: the agent is not active (see the line above)\n");
        return 1;
    }
    const struct mrd_agent_config *cfg = mrd_agent_config();
    int rank = cfg->rank, world = cfg->world_size > 0 ? cfg->world_size : 1;
    g_ns_offset = timens_monotonic_offset();
    int64_t t0 = o_t0_host_raw ? o_t0_host_raw : host_raw_ns();
    int64_t end = t0 + (int64_t)(o_seconds * 1e9);
    double kper = 1e9 / o_rate, cper = o_coll_ms * 1e6;
    uint64_t nk = 0, nc = 0;
    /* collectives on the shared grid t0 + k * period; kernels evenly in between */
    for (;;) {
        int64_t tk = t0 + (int64_t)((double)nk * kper), tc = t0 + (int64_t)((double)nc * cper);
        int64_t t = tk < tc ? tk : tc;
        if (t >= end)
            break;
        sleep_until_host_raw(t);
        if (tc <= tk)
            write_collective(nc++, tc, rank, world);
        else
            write_kernel(++nk);
    }
    mrd_agent_shutdown();
    printf("clock_agent: rank %d kernels=%" PRIu64 " collectives=%" PRIu64 " refused=%" PRIu64 "\n",
           rank, nk, nc, g_refused);
    return 0;
}
