/* bench_hotpath: the agent's own per-record and per-callback work, on the CPU, no GPU.
 *
 * Where it sits: a benchmark run by hand (tests/bench/hotpath/run.sh), not a CTest test. It
 * links the agent's real sources (capture, ring, base, core, transport) and drives the code
 * that runs for every CUPTI record and every CUPTI callback of a full trace with synthetic
 * CUPTI inputs: activity buffers filled with CUpti_ActivityKernel10 records back to back (as
 * CUPTI 13 lays out CONCURRENT_KERNEL records; cuptiActivityGetNextRecord walks them without
 * a driver), handed to the agent's buffer-completion callback; the buffer-request callback;
 * the timestamp callback's clock.
 *
 * Phases (each a noinline function, so that callgrind attributes instructions to it):
 *   bare      what the bare consumer (tests/gpu/bare_consumer.c) does per record on CUPTI's
 *             worker thread: walk the buffer, count kinds, re-zero the valid bytes
 *   convert   mrd__cupti_convert of every record into one stack record (no ring)
 *   complete  mrd__cupti_buffer_completed: convert, write into this thread's ring (paced),
 *             re-zero the buffer, give it back to the pool: the worker thread's whole work
 *   drain     mrd_ring_drain of what complete wrote (the flusher's side of the ring; the
 *             batch encoding after it is not measured here)
 *   request   mrd__cupti_buffer_requested + give-back (on the application's thread, once
 *             per buffer)
 *   clock     mrd_clock_now (the timestamp callback CUPTI calls; the bare consumer's reads
 *             the same clock)
 * Only functions that exist in every version compared are called, so that the same file
 * builds against an older tree (run.sh's old/new pairs).
 *
 *   bench_hotpath [RECORDS_PER_BUFFER [BUFFERS [REPS [CALLS]]]]   (defaults 8192 200 5 100000)
 *
 * CALLS: calls of the request and clock phases per repetition.
 *
 * Prints one line per phase: ns of this thread's CPU time per record (per call for request and
 * clock), the median of REPS repetitions, each over BUFFERS buffers; then one summary line of
 * key=value pairs for run.sh. Exits 1 if what the ring received differs from what the buffers held
 * (count, correlation ids in order, kernel names, start/end), so a faster path that loses or
 * changes records fails here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "clock.h"
#include "cupti_convert.h"
#include "ring.h"

#include "../../gpu/bare_walk.h" /* the bare consumer's own walk: what the bare phase times */

#define BUF_BYTES    (8u << 20) /* the agent's default MERIDIAN_CUPTI_BUFFER_MB */
#define RING_RECORDS 16384      /* the agent's default ring size */
#define MAX_REPS     64

static const char kernel_name[] = "_Z12empty_kernelv";

static uint8_t *bare_buf; /* the bare consumer's own buffer (not the agent's pool) */

/* CPU time of this thread: time the machine's neighbours take from it is not counted. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Fills buf with n kernel records as CUPTI writes them; correlation ids first.. */
static size_t fill_kernels(uint8_t *buf, size_t n, uint32_t first)
{
    CUpti_ActivityKernel10 k;
    for (size_t i = 0; i < n; i++) {
        memset(&k, 0, sizeof(k));
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1000000000ull + (uint64_t)(first + i) * 4000;
        k.end = k.start + 1500;
        k.correlationId = first + (uint32_t)i;
        k.deviceId = 0;
        k.contextId = 1;
        k.streamId = 7;
        k.gridX = k.gridY = k.gridZ = 1;
        k.blockX = 32;
        k.blockY = k.blockZ = 1;
        k.registersPerThread = 16;
        k.name = kernel_name;
        memcpy(buf + i * sizeof(k), &k, sizeof(k));
    }
    return n * sizeof(k);
}

/* The drain's check: every kernel in order, unchanged. */
static struct {
    uint64_t seen, bad;
    uint32_t next_corr;
} chk;

static void check_record(const struct mrd_record *r, void *arg)
{
    (void)arg;
    const struct mrd_kernel *k = &r->ev.kernel;
    uint64_t start = 1000000000ull + (uint64_t)chk.next_corr * 4000;
    if (r->kind != MRD_EV_KERNEL || k->correlation != chk.next_corr || r->str[0] != kernel_name ||
        (uint64_t)k->start != start || (uint64_t)k->end != start + 1500 || k->stream != 7 ||
        k->block[0] != 32 || k->registers != 16 || r->str[1] || r->inline_str[0])
        chk.bad++;
    chk.next_corr++;
    chk.seen++;
}

__attribute__((noinline)) static uint64_t phase_bare(uint8_t *buf, size_t valid)
{
    uint64_t by_kind[CUPTI_ACTIVITY_KIND_COUNT] = {0}, zero_ts = 0;
    uint64_t n = bare_walk(buf, valid, by_kind, &zero_ts);
    memset(buf, 0, valid);
    return n + zero_ts;
}

__attribute__((noinline)) static uint64_t phase_convert(uint8_t *buf, size_t valid)
{
    CUpti_Activity *rec = NULL;
    struct mrd_record r;
    uint64_t n = 0;
    while (valid > 0 && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        n += (uint64_t)mrd__cupti_convert(rec, &r);
    return n + (r.ev.kernel.correlation & 0);
}

__attribute__((noinline)) static void phase_complete(uint8_t *buf, size_t valid)
{
    mrd__cupti_buffer_completed(NULL, 0, buf, BUF_BYTES, valid);
}

__attribute__((noinline)) static size_t phase_drain(void)
{
    return mrd_ring_drain(check_record, NULL, SIZE_MAX);
}

__attribute__((noinline)) static int phase_request(void)
{
    uint8_t *b = NULL;
    size_t size = 0, maxrec = 0;
    mrd__cupti_buffer_requested(&b, &size, &maxrec);
    if (!b)
        return 0;
    mrd__cupti_buffer_completed(NULL, 0, b, size, 0); /* nothing written: only the give-back */
    return 1;
}

__attribute__((noinline)) static int64_t phase_clock(unsigned n)
{
    int64_t s = 0;
    for (unsigned i = 0; i < n; i++)
        s += mrd_clock_now();
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t nrec = argc > 1 ? strtoul(argv[1], NULL, 10) : 8192;
    unsigned nbuf = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 200;
    unsigned reps = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 5;
    unsigned ncalls = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 100000;
    if (nrec == 0 || nrec * sizeof(CUpti_ActivityKernel10) > BUF_BYTES || nrec > RING_RECORDS ||
        nbuf == 0 || reps == 0 || reps > MAX_REPS || ncalls == 0) {
        fprintf(stderr,
                "usage: bench_hotpath [RECORDS_PER_BUFFER (1..%u) [BUFFERS [REPS "
                "(1..%d) [CALLS]]]]\n",
                RING_RECORDS, MAX_REPS);
        return 2;
    }
    if (mrd_ring_init(4, RING_RECORDS) != 0 || mrd__cupti_pool_create(BUF_BYTES, 2) != 0) {
        fprintf(stderr, "bench_hotpath: cannot map the ring or the buffer pool\n");
        return 1;
    }
    bare_buf = calloc(1, BUF_BYTES);
    if (!bare_buf)
        return 1;

    double bare[MAX_REPS], conv[MAX_REPS], comp[MAX_REPS], drain[MAX_REPS], req[MAX_REPS],
        clk[MAX_REPS];
    uint64_t sink = 0;
    uint32_t corr = 0;
    for (unsigned r = 0; r < reps; r++) {
        int64_t t_bare = 0, t_conv = 0, t_comp = 0, t_drain = 0, t0;
        for (unsigned b = 0; b < nbuf; b++) {
            size_t valid = fill_kernels(bare_buf, nrec, corr);
            t0 = now_ns();
            sink += phase_bare(bare_buf, valid);
            t_bare += now_ns() - t0;

            uint8_t *buf = NULL;
            size_t size = 0, maxrec = 0;
            mrd__cupti_buffer_requested(&buf, &size, &maxrec);
            if (!buf) {
                fprintf(stderr, "bench_hotpath: the pool handed out no buffer\n");
                return 1;
            }
            valid = fill_kernels(buf, nrec, corr);
            t0 = now_ns();
            sink += phase_convert(buf, valid);
            t_conv += now_ns() - t0;

            t0 = now_ns();
            phase_complete(buf, valid);
            t_comp += now_ns() - t0;

            t0 = now_ns();
            sink += phase_drain();
            t_drain += now_ns() - t0;
            corr += (uint32_t)nrec;
        }
        t0 = now_ns();
        for (unsigned i = 0; i < ncalls; i++)
            sink += (uint64_t)phase_request();
        req[r] = (double)(now_ns() - t0) / ncalls;
        t0 = now_ns();
        sink += (uint64_t)phase_clock(ncalls);
        clk[r] = (double)(now_ns() - t0) / ncalls;
        double total = (double)nrec * nbuf;
        bare[r] = (double)t_bare / total;
        conv[r] = (double)t_conv / total;
        comp[r] = (double)t_comp / total;
        drain[r] = (double)t_drain / total;
    }
    uint64_t expect = (uint64_t)nrec * nbuf * reps;
    if (chk.seen != expect || chk.bad != 0) {
        fprintf(
            stderr, "bench_hotpath: the ring received %llu records (%llu wrong), expected %llu\n",
            (unsigned long long)chk.seen, (unsigned long long)chk.bad, (unsigned long long)expect);
        return 1;
    }
    double m_bare = median(bare, reps), m_conv = median(conv, reps), m_comp = median(comp, reps),
           m_drain = median(drain, reps), m_req = median(req, reps), m_clk = median(clk, reps);
    printf("records per buffer %zu, buffers %u, repetitions %u (medians; ns)\n", nrec, nbuf, reps);
    printf("  bare consumer, per record (walk, count, re-zero)     %8.1f\n", m_bare);
    printf("  convert only, per record                             %8.1f\n", m_conv);
    printf("  buffer completed, per record (convert, ring, re-zero) %7.1f\n", m_comp);
    printf("  ring drain, per record (flusher side)                %8.1f\n", m_drain);
    printf("  buffer request + give-back, per call                 %8.1f\n", m_req);
    printf("  timestamp clock, per call                            %8.1f\n", m_clk);
    printf("bare=%.2f convert=%.2f complete=%.2f drain=%.2f request=%.2f clock=%.2f sink=%llu\n",
           m_bare, m_conv, m_comp, m_drain, m_req, m_clk, (unsigned long long)(sink & 1));
    return 0;
}
