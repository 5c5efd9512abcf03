/* clock_agent: a stand-in rank for the clock test bed, driving the real agent.
 *
 * Where it sits: tests/clock/testbed.py runs several of these, each in its own network
 * namespace and time namespace (its CLOCK_MONOTONIC_RAW shifted by a known amount) and
 * with MERIDIAN_TEST_CLOCK_PPM set, against a real meridiand. It links mrd_agent_core
 * (core + rings + transport), so the probes, batches and the agent's clock are the real
 * ones; it only replaces the capture code. It never learns its clock's shift.
 *
 * What it writes, all stamped with mrd_clock_now() (the agent's local clock):
 *  - kernel records at --rate per second, evenly spread over --seconds (correlation ids
 *    1, 2, ...): the events whose alignment error the test bed measures;
 *  - every --coll-ms, at instants of a CLOCK_REALTIME grid shared by all agents (time
 *    namespaces do not shift CLOCK_REALTIME), one "collective": an NCCL op (comm_hash
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
static int64_t o_t0_realtime;
static uint64_t g_refused;

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until_realtime(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
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

/* The local clock's reading at the CLOCK_REALTIME instant t (a moment ago): the process
 * may wake late, but the collective's kernel belongs to the shared instant. The lateness
 * is measured, not the clock's offset: (realtime, local) read back to back, retried when
 * the pair was interrupted; the rate difference over the lateness is below 1 ns. */
static int64_t local_at_realtime(int64_t t)
{
    for (int i = 0;; i++) {
        int64_t a = realtime_ns(), l = mrd_clock_now(), b = realtime_ns();
        if (b - a < 20000 || i == 20)
            return l - ((a + b) / 2 - t);
    }
}

static void write_collective(uint64_t k, int64_t t, int rank, int world)
{
    struct mrd_record r;
    int64_t now = local_at_realtime(t), half = (int64_t)(o_coll_half_us * 1000);
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
            "       [--t0-realtime-ns T] [--comm HASH] [--gpu-offset-us X] [--gpu-ppm Y]\n"
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
        else if (!strcmp(a, "--t0-realtime-ns"))
            o_t0_realtime = strtoll(v, NULL, 10);
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
    int64_t t0 = o_t0_realtime ? o_t0_realtime : realtime_ns();
    int64_t end = t0 + (int64_t)(o_seconds * 1e9);
    double kper = 1e9 / o_rate, cper = o_coll_ms * 1e6;
    uint64_t nk = 0, nc = 0;
    /* collectives on the shared grid t0 + k * period; kernels evenly in between */
    for (;;) {
        int64_t tk = t0 + (int64_t)((double)nk * kper), tc = t0 + (int64_t)((double)nc * cper);
        int64_t t = tk < tc ? tk : tc;
        if (t >= end)
            break;
        if (t > realtime_ns())
            sleep_until_realtime(t);
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
