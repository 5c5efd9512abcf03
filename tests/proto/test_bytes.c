/* proto_bytes: wire bytes per kernel event on a realistic synthetic stream, everything
 * on the wire counted (8-byte frame headers, string definitions, counters), plus encode
 * and decode cost per event. Goal (issue 2): <= 16 bytes per kernel event; the test fails
 * above it.
 *
 * The stream: a training step replays a fixed sequence of 30 distinct kernels (mangled
 * C++ names of 60-140 bytes) on 4 streams, each kernel with its own launch configuration
 * and a base duration of 2-50 us with +-10% noise, 1-8 us gaps, correlation ids that
 * advance by 1-3 (API records in between), occasionally a kernel out of sequence.
 * 20 batches of 16,384 events at zstd level 1 (the agent's default), acks after each.
 * Run: build/tests/proto/test_proto_bytes [events_per_batch] [batches] [zstd_level] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto_testutil.h"

#define NK 30

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct kinfo {
    char name[160];
    uint32_t id, grid[3], block[3], shared, regs;
    int64_t base_ns;
};

static void make_kernels(uint64_t *s, struct kinfo *k)
{
    static const char *const stem[] = {"gemm", "layer_norm", "softmax", "gelu", "dropout",
                                       "attention", "reduce", "elementwise_add", "adam",
                                       "embedding"};

    for (int i = 0; i < NK; i++) {
        int n = snprintf(k[i].name, sizeof(k[i].name),
                         "_ZN2at6native%zu%s_kernel_%dILi%dEEEvPKfPfii", strlen(stem[i % 10]),
                         stem[i % 10], i, 128 << (i % 3));

        /* pad some names to template-heavy lengths */
        for (int j = n; j < 60 + (int)tu_below(s, 80) && j < (int)sizeof(k[i].name) - 1; j++)
            k[i].name[j] = "EEvNS_5ArrayIcLi4EEE"[j % 20], k[i].name[j + 1] = '\0';
        k[i].grid[0] = 1u << (4 + tu_below(s, 10));
        k[i].grid[1] = tu_below(s, 4) ? 1 : 1 + (uint32_t)tu_below(s, 64);
        k[i].grid[2] = 1;
        k[i].block[0] = 32u << tu_below(s, 5);
        k[i].block[1] = 1, k[i].block[2] = 1;
        k[i].shared = tu_below(s, 2) ? 0 : 1024u * (uint32_t)tu_below(s, 96);
        k[i].regs = 16 + 8 * (uint32_t)tu_below(s, 28);
        k[i].base_ns = 2000 + (int64_t)tu_below(s, 48000);
    }
}

int main(int argc, char **argv)
{
    uint32_t per_batch = argc > 1 ? (uint32_t)atoi(argv[1]) : 16384;
    int batches = argc > 2 ? atoi(argv[2]) : 20;
    int level = argc > 3 ? atoi(argv[3]) : 1;
    uint64_t seed = 2026;
    struct kinfo k[NK];
    struct mrd_batch_builder_config cfg = {"bench-run", 17, 99, 0, per_batch, level};
    struct mrd_batch_builder *b;
    uint64_t wire = 0, raw_wire = 0, events = 0, corr = 5000000, dropped[MRD_DROP__COUNT] = {0};
    int64_t t = 1700000000000000000ll;
    double enc = 0, dec = 0;
    int pos = 0;

    make_kernels(&seed, k);
    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    for (int i = 0; i < NK; i++)
        k[i].id = mrd_batch_builder_intern(b, k[i].name);
    dropped[MRD_DROP_RING_FULL] = 12;
    mrd_batch_builder_set_dropped(b, dropped);
    for (int bi = 1; bi <= batches; bi++) {
        double t0 = now_s(), t1;
        uint8_t *f;
        size_t len;
        Meridian__V1__Batch *m;
        struct mrd_batch_cursor c;
        struct mrd_kernel e;
        uint64_t n = 0;

        for (uint32_t i = 0; i < per_batch; i++) {
            struct kinfo *ki;
            struct mrd_kernel ev = {0};
            int64_t d;

            pos = tu_below(&seed, 50) == 0 ? (int)tu_below(&seed, NK) : (pos + 1) % NK;
            ki = &k[pos];
            d = ki->base_ns + (int64_t)tu_below(&seed, (uint64_t)ki->base_ns / 5) -
                ki->base_ns / 10;
            t += 1000 + (int64_t)tu_below(&seed, 7000);
            ev.start = t;
            ev.end = t + d;
            t += d;
            corr += 1 + tu_below(&seed, 3);
            ev.correlation = corr;
            ev.device = 0, ev.context = 1, ev.stream = 7 + (uint32_t)tu_below(&seed, 4);
            ev.name = ki->id;
            memcpy(ev.grid, ki->grid, sizeof(ev.grid));
            memcpy(ev.block, ki->block, sizeof(ev.block));
            ev.shared_bytes = ki->shared, ev.registers = ki->regs;
            CHECK_OK(mrd_batch_add_kernel(b, &ev));
        }
        CHECK_OK(mrd_batch_builder_finish(b, (uint64_t)bi, &f, &len));
        t1 = now_s();
        enc += t1 - t0;
        m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
        mrd_batch_cursor_init(&c, m);
        while (mrd_batch_next_kernel(&c, &e))
            n++;
        dec += now_s() - t1;
        CHECK_UEQ(n, per_batch);
        raw_wire += 8 + protobuf_c_message_get_packed_size(&m->base);
        protobuf_c_message_free_unpacked(&m->base, NULL);
        wire += len;
        events += per_batch;
        free(f);
        mrd_batch_builder_acked(b, (uint64_t)bi);
    }
    mrd_batch_builder_free(b);
    printf("zstd_level=%d kernel events=%llu batches=%d wire_bytes=%llu bytes_per_kernel_event=%.2f "
           "(uncompressed %.2f) encode_ns_per_event=%.0f decode_ns_per_event=%.0f\n",
           level, (unsigned long long)events, batches, (unsigned long long)wire,
           (double)wire / (double)events, (double)raw_wire / (double)events,
           enc * 1e9 / (double)events, dec * 1e9 / (double)events);
    if (level > 0)
        CHECK_LE(wire, 16 * events); /* the goal is for the default, compressed, form */
    return 0;
}
