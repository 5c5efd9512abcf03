/* capture_collsteps_auto, capture_collsteps_named: steps counted from a collective
 * (MERIDIAN_STEP_COLLECTIVE) on two simulated ranks, driven through the real NCCL profiler
 * ABI (the exported ncclProfiler_v5 table) without NCCL, with CUPTI faked (fake_cupti.c).
 *
 * Each rank is a child process (the agent's state is per process). Both create the same
 * communicators in the same order, as a job does: "local" (1 rank, a different hash on each
 * rank), "ddp" (2 ranks) and "other" (2 ranks). Per iteration: on ddp a Broadcast, then
 * DDP's bucket AllReduces (3 buckets in the first iteration, 4 of other sizes after DDP
 * rebuilt its buckets); an AllReduce on local; 4 equal AllReduces on other. Every rank runs
 * with MERIDIAN_TRACE=steady and MERIDIAN_WINDOWS=3-4, and writes where each step began,
 * where CUPTI attached and the window record to a pipe; the parent checks that both ranks
 * wrote the same lines, and the lines this test expects:
 *  - auto (the DDP rule over the world communicator, ddp: the first of the job's size): the
 *    4 distinct sizes repeat from iteration 1; three repetitions (12 AllReduces, iterations
 *    1-3) lock the period 4 with the phase at iteration 1's first bucket, so step j begins at
 *    iteration 4 + j's first bucket: NIT - 4 steps;
 *  - named ("AllReduce/4@other"): other's AllReduce s begins a step when s % 4 == 0, the
 *    first of each iteration: step j begins at iteration j: NIT steps.
 * In both, CUPTI attaches at the beginning of step 3 and nowhere else, and the window
 * record says "3-4 range" once the detach (requested when step 6 begins, i.e. at step 5's
 * end) finished; every step but the last (still running) has its record "step N" in domain
 * meridian.step.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "fake_agent.h"
#include "fake_cupti.h"
#include "nccl_abi.h"
#include "stepctl.h"

int InitializeInjection(void);
extern struct mrd_nccl_profiler_v5 ncclProfiler_v5;

#define NIT 12

static void coll(void *ctx, const char *func, uint64_t seq, size_t count, const char *dtype)
{
    struct mrd_nccl_descr_v5 d;
    void *h = NULL;
    memset(&d, 0, sizeof(d));
    d.type = MRD_NCCL_EV_COLL;
    d.u.coll.seq = seq;
    d.u.coll.func = func;
    d.u.coll.count = count;
    d.u.coll.datatype = dtype;
    d.u.coll.algo = "RING";
    d.u.coll.proto = "SIMPLE";
    CHECK_EQ(ncclProfiler_v5.start_event(ctx, &h, &d), MRD_NCCL_SUCCESS);
    CHECK(h != NULL);
    CHECK_EQ(ncclProfiler_v5.stop_event(h), MRD_NCCL_SUCCESS);
}

/* After one collective: a line for a step it began and for an attach it caused; the
 * detach once it is due (the step after the window's last ended: step 6 began). */
static void observe(FILE *out, const char *comm, int it, int bucket, uint64_t *begun, int *subs)
{
    uint64_t now_begun;
    int64_t last_ns;
    mrd_stepctl_snapshot(&now_begun, &last_ns);
    CHECK(now_begun <= *begun + 1);
    if (now_begun > *begun)
        fprintf(out, "step %llu begins at %s iteration %d bucket %d\n",
                (unsigned long long)now_begun - 1, comm, it, bucket);
    if (atomic_load(&subscribed) != *subs)
        fprintf(out, "cupti attached in step %llu\n", (unsigned long long)now_begun - 1);
    *subs = atomic_load(&subscribed);
    if (now_begun == 6 && *begun == 5)
        api_call(CUPTI_API_ENTER, 700); /* the correlation boundary after the close */
    if (now_begun == 7 && *begun == 6)
        detach(1);
    *begun = now_begun;
}

static int rank_main(const char *mode, int rank, FILE *out)
{
    static const size_t first_layout[3] = {9000, 6000, 2000};
    static const size_t layout[4] = {4096, 8192, 2048, 1024};
    void *local = NULL, *ddp = NULL, *other = NULL;
    int mask = 0, subs = 0;
    uint64_t begun = 0, ar_ddp = 0, bc_ddp = 0, ar_local = 0, ar_other = 0;

    fake_reset();
    fake_set_world_size(2);
    setenv("MERIDIAN_TRACE", "steady", 1);
    setenv("MERIDIAN_WINDOWS", "3-4", 1);
    setenv("MERIDIAN_STEP_COLLECTIVE", strcmp(mode, "auto") == 0 ? "auto" : "AllReduce/4@other", 1);
    fake_small_cupti_env();
    CHECK_EQ(InitializeInjection(), 1);
    CHECK_EQ(ncclProfiler_v5.init(&local, 0x1000 + (uint64_t)rank, &mask, "local", 1, 1, 0, NULL),
             MRD_NCCL_SUCCESS);
    CHECK_EQ(ncclProfiler_v5.init(&ddp, 0xdd9, &mask, "ddp", 1, 2, rank, NULL), MRD_NCCL_SUCCESS);
    CHECK_EQ(ncclProfiler_v5.init(&other, 0x07e, &mask, "other", 1, 2, rank, NULL),
             MRD_NCCL_SUCCESS);
    CHECK(local && ddp && other);

    for (int it = 0; it < NIT; it++) {
        coll(ddp, "Broadcast", bc_ddp++, 1000, "ncclFloat32");
        observe(out, "ddp", it, -1, &begun, &subs);
        int nb = it == 0 ? 3 : 4;
        for (int b = 0; b < nb; b++) {
            coll(ddp, "AllReduce", ar_ddp++, it == 0 ? first_layout[b] : layout[b], "ncclFloat32");
            observe(out, "ddp", it, b, &begun, &subs);
        }
        coll(local, "AllReduce", ar_local++, 17, "ncclFloat32");
        observe(out, "local", it, 0, &begun, &subs);
        for (int b = 0; b < 4; b++) {
            coll(other, "AllReduce", ar_other++, 64, "ncclInt32");
            observe(out, "other", it, b, &begun, &subs);
        }
    }
    /* the ring: the step records (NVTX, domain meridian.step) in order, then the window's
     * (a window event) */
    static struct mrd_record recs[1024];
    size_t nrec = fake_ring_take(recs, 1024);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < nrec; i++) {
            const struct mrd_record *r = &recs[i];
            if (pass == 0 && r->kind == MRD_EV_NVTX && r->str[0] &&
                strcmp(r->str[0], "meridian.step") == 0) {
                CHECK(r->ev.nvtx.end >= r->ev.nvtx.start);
                fprintf(out, "step record \"%s\"\n", r->inline_str);
            }
            if (pass == 1 && r->kind == MRD_EV_WINDOW) {
                CHECK(r->ev.window.end >= r->ev.window.start);
                fprintf(out, "window record \"%lld-%lld %s\"\n",
                        (long long)r->ev.window.first_step, (long long)r->ev.window.last_step,
                        r->str[0]);
            }
        }
    struct mrd_named_counter nc[64];
    size_t k = mrd_agent_named_counters(nc, 64);
    for (size_t i = 0; i < k; i++)
        if (strcmp(nc[i].category, "collstep") == 0)
            fprintf(out, "collstep %s %llu\n", nc[i].name, (unsigned long long)nc[i].value);
    ncclProfiler_v5.finalize(local);
    ncclProfiler_v5.finalize(ddp);
    ncclProfiler_v5.finalize(other);
    fflush(out);
    return 0;
}

/* What every rank must write (see the top). */
static void expected(const char *mode, char *buf, size_t cap)
{
    size_t used = 0;
    int autom = strcmp(mode, "auto") == 0;
    int first_it = autom ? 4 : 0;
    for (int j = 0; first_it + j < NIT; j++) {
        used += (size_t)snprintf(buf + used, cap - used,
                                 "step %d begins at %s iteration %d "
                                 "bucket 0\n",
                                 j, autom ? "ddp" : "other", first_it + j);
        if (j == 3)
            used += (size_t)snprintf(buf + used, cap - used, "cupti attached in step 3\n");
    }
    for (int j = 0; first_it + j + 1 < NIT; j++) /* every step but the last ended */
        used += (size_t)snprintf(buf + used, cap - used, "step record \"step %d\"\n", j);
    used += (size_t)snprintf(buf + used, cap - used, "window record \"3-4 range\"\n");
    used += (size_t)snprintf(buf + used, cap - used,
                             "collstep period %d\ncollstep boundaries %d\ncollstep concurrent 0\n",
                             autom ? 4 : 0, NIT - first_it);
}

static void read_all(int fd, char *buf, size_t cap)
{
    size_t used = 0;
    ssize_t n;
    while (used + 1 < cap && (n = read(fd, buf + used, cap - used - 1)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n > 0);
        used += (size_t)n;
    }
    buf[used] = '\0';
}

int main(int argc, char **argv)
{
    static char got[2][8192], want[8192];
    pid_t pid[2];
    int fd[2];
    CHECK(argc == 2 && (strcmp(argv[1], "auto") == 0 || strcmp(argv[1], "named") == 0));
    for (int r = 0; r < 2; r++) {
        int p[2];
        CHECK_EQ(pipe(p), 0);
        pid[r] = fork();
        CHECK(pid[r] >= 0);
        if (pid[r] == 0) {
            close(p[0]);
            FILE *out = fdopen(p[1], "w");
            CHECK(out != NULL);
            int rc = rank_main(argv[1], r, out);
            fclose(out);
            _exit(rc);
        }
        close(p[1]);
        fd[r] = p[0];
    }
    for (int r = 0; r < 2; r++) {
        int status = 0;
        read_all(fd[r], got[r], sizeof(got[r]));
        close(fd[r]);
        CHECK_EQ(waitpid(pid[r], &status, 0), pid[r]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    expected(argv[1], want, sizeof(want));
    printf("capture_collsteps %s, rank 0:\n%s", argv[1], got[0]);
    CHECK_STREQ(got[0], got[1]);
    CHECK_STREQ(got[0], want);
    printf("capture_collsteps %s: ok (both ranks identical)\n", argv[1]);
    return 0;
}
