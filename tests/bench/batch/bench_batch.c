/* bench_batch: the agent's batch builder and the aggregator's batch cursors, alone.
 *
 * What it measures: events per second through mrd_batch_add_* (the agent's flusher thread:
 * one call per event drained from the rings) including mrd_batch_builder_finish with
 * compression off (protobuf packing and framing, no zstd: the builder's own cost), and
 * events per second through mrd_batch_next_* over the same batches once decoded (the
 * store's writer thread walks every kind with a cursor). The events are the load
 * generator's training mix (launcher/replay/gen.c: every kind, realistic strings),
 * generated before the clock starts. Batches of 16,384 events, as the agent sends them.
 *
 * Usage: bench_batch [EVENTS] [REPS]   (default 1,000,000 events, 5 repetitions)
 * The events are the same on both sides of an old/new comparison: kinds an older tree does
 * not have (gpu_sample: the generator makes them without random draws, so the other kinds'
 * stream is unchanged) are left out, and EVENTS counts the others.
 * build() and read_all() are not inlined, so that `valgrind --tool=callgrind` can count
 * the instructions each executes (ab.sh with MODE=instructions).
 * Times are the thread's CPU time. Prints one line per repetition and, last, the medians:
 *   build_events_per_s=N read_events_per_s=M
 * It uses only the public API of proto/batch.h, so the same file builds against an older
 * tree for old/new comparisons (tests/bench/batch/ab.sh). Single thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "canon.h"
#include "frame.h"
#include "gen.h"

#define TARGET 16384u

/* This thread's CPU time: the development machine is shared (other builds run beside the
 * benchmark), and what is measured here is single-threaded computation, so CPU time of the
 * thread is what changes with the code; wall time would mostly measure the neighbours. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct frames {
    uint8_t **f;
    size_t *len, n, cap;
};

static int keep(struct frames *fr, uint8_t *f, size_t len)
{
    if (fr->n == fr->cap) {
        size_t nc = fr->cap ? fr->cap * 2 : 64;
        uint8_t **nf = realloc(fr->f, nc * sizeof *nf);
        size_t *nl = nf ? realloc(fr->len, nc * sizeof *nl) : NULL;
        if (nf)
            fr->f = nf;
        if (!nl)
            return -1;
        fr->len = nl;
        fr->cap = nc;
    }
    fr->f[fr->n] = f;
    fr->len[fr->n++] = len;
    return 0;
}

/* Appends every event, finishing a batch whenever the builder says it is full. */
__attribute__((noinline)) static int build(struct mrd_batch_builder *b, const struct mrd_canon_event *ev, size_t n,
                 struct frames *fr, uint64_t *seq)
{
    for (size_t i = 0; i < n; i++) {
        int rc = mrd_batch_add_any(b, ev[i].kind, &ev[i].u);
        if (rc == -EAGAIN) {
            uint8_t *f;
            size_t len;
            if (mrd_batch_builder_finish(b, (*seq)++, &f, &len) != 0 || keep(fr, f, len) < 0)
                return -1;
            rc = mrd_batch_add_any(b, ev[i].kind, &ev[i].u);
        }
        if (rc != 0)
            return -1;
    }
    uint8_t *f;
    size_t len;
    if (mrd_batch_builder_finish(b, (*seq)++, &f, &len) != 0 || keep(fr, f, len) < 0)
        return -1;
    return 0;
}

/* Walks every kind of every decoded batch with a cursor. */
__attribute__((noinline)) static void read_all(Meridian__V1__Batch **m, size_t n, uint64_t *got,
                                               uint64_t *sink)
{
    for (size_t i = 0; i < n; i++) {
        for (int k = 1; k < MRD_EV__COUNT; k++) {
            struct mrd_batch_cursor c;
            union mrd_any_event e;
            mrd_batch_cursor_init(&c, m[i]);
            while (mrd_batch_next_any(&c, k, &e)) {
                (*got)++;
                *sink += (uint64_t)e.kernel.start;
            }
        }
    }
}

/* 1 for the kinds every compared tree has (before gpu_sample, kind 14). */
static int common_kind(int kind)
{
    return kind < 14;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    struct mrd_batch_builder_config bc = {"bench", 0, 1, 8u * MRD_FRAME_DEFAULT_MAX, TARGET, 0};
    struct mrd_batch_builder *b = NULL;
    struct mrd_gen *g = NULL;
    struct mrd_gen_config gc = {0, 1, 1, MRD_GEN_MIX_TRAINING};
    struct mrd_canon_event *ev = calloc(n, sizeof *ev);
    double *bt = calloc((size_t)reps, sizeof *bt), *rt = calloc((size_t)reps, sizeof *rt);
    if (reps < 1 || !ev || !bt || !rt || mrd_batch_builder_new(&bc, &b) != 0 ||
        mrd_gen_new(&gc, b, &g) != 0) {
        fprintf(stderr, "bench_batch: setup failed\n");
        return 2;
    }
    for (size_t i = 0; i < n;) {
        mrd_gen_next(g, &ev[i]);
        i += common_kind(ev[i].kind);
    }
    uint64_t seq = 1;
    for (int r = 0; r < reps; r++) {
        struct frames fr = {0};
        double t0 = now();
        if (build(b, ev, n, &fr, &seq) < 0) {
            fprintf(stderr, "bench_batch: build failed\n");
            return 2;
        }
        double t1 = now();
        for (size_t i = 0; i < fr.n; i++)
            mrd_batch_builder_acked(b, seq - fr.n + i);
        /* decode (not timed), then walk every kind with a cursor (timed) */
        Meridian__V1__Batch **m = calloc(fr.n, sizeof *m);
        for (size_t i = 0; m && i < fr.n; i++) {
            struct mrd_frame_header h;
            ProtobufCMessage *msg = NULL;
            if (mrd_frame_header_parse(fr.f[i], fr.len[i], 8u * MRD_FRAME_DEFAULT_MAX, &h) != 0 ||
                mrd_frame_decode(&h, fr.f[i] + 8, 8u * MRD_FRAME_DEFAULT_MAX, &msg) != 0 ||
                mrd_batch_check((Meridian__V1__Batch *)msg, NULL) != 0) {
                fprintf(stderr, "bench_batch: a built batch does not decode\n");
                return 2;
            }
            m[i] = (Meridian__V1__Batch *)msg;
        }
        uint64_t got = 0, sink = 0;
        double t2 = now();
        read_all(m, fr.n, &got, &sink);
        double t3 = now();
        if (got != n) {
            fprintf(stderr, "bench_batch: read %llu events of %zu\n", (unsigned long long)got, n);
            return 2;
        }
        bt[r] = (double)n / (t1 - t0);
        rt[r] = (double)n / (t3 - t2);
        printf("rep %d: build_events_per_s=%.0f read_events_per_s=%.0f batches=%zu (sink %llu)\n",
               r + 1, bt[r], rt[r], fr.n, (unsigned long long)(sink & 1));
        for (size_t i = 0; i < fr.n; i++) {
            protobuf_c_message_free_unpacked(&m[i]->base, NULL);
            free(fr.f[i]);
        }
        free(m);
        free(fr.f);
        free(fr.len);
    }
    qsort(bt, (size_t)reps, sizeof *bt, cmp_d);
    qsort(rt, (size_t)reps, sizeof *rt, cmp_d);
    printf("build_events_per_s=%.0f read_events_per_s=%.0f\n", bt[reps / 2], rt[reps / 2]);
    mrd_gen_free(g);
    mrd_batch_builder_free(b);
    free(ev);
    free(bt);
    free(rt);
    return 0;
}
