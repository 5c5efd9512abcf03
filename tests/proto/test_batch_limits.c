/* proto_batch_limits: every cap of the batch reader and builder, at and one past the
 * limit: mrd_batch_check's rejections, the builder's -EAGAIN / -MRD_ERR_TOO_LARGE /
 * -EINVAL, string truncation and UTF-8 repair, wrap-around deltas, and that the column
 * layout table agrees with the protobuf-c descriptors it stands for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_internal.h"
#include "proto_testutil.h"

static void expect_bad(const Meridian__V1__Batch *m, const char *fragment)
{
    const char *why = NULL;

    CHECK_EQ(mrd_batch_check(m, &why), -MRD_ERR_MALFORMED);
    CHECK(why != NULL);
    if (!strstr(why, fragment))
        CHECK_FAIL_("reason \"%s\" lacks \"%s\"", why, fragment);
}

static void test_layout(void)
{
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        const struct mrd__groupspec *s = &mrd__batch_groups[k];

        CHECK(s->desc != NULL);
        CHECK_EQ(s->ncols, s->desc->n_fields);
        for (int c = 0; c < s->ncols; c++) {
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(s->desc, (unsigned)c + 1);

            CHECK(f != NULL);
            CHECK_EQ(f->label, PROTOBUF_C_LABEL_REPEATED);
            CHECK_EQ(s->col[c].p_off, f->offset);
            CHECK_EQ(s->col[c].n_off, f->quantifier_offset);
        }
        /* the string-id columns are the uint32 fields named like one */
        for (int j = 0; j < s->nstr; j++) {
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(s->desc, s->strcol[j] + 1u);
            const char *nm = f->name;

            CHECK_EQ(f->type, PROTOBUF_C_TYPE_UINT32);
            CHECK(!strcmp(nm, "name") || !strcmp(nm, "domain") || !strcmp(nm, "func") ||
                  !strcmp(nm, "datatype") || !strcmp(nm, "algo") || !strcmp(nm, "proto") ||
                  !strcmp(nm, "call") || !strcmp(nm, "reason") || !strcmp(nm, "key") ||
                  !strcmp(nm, "value"));
        }
    }
    CHECK(mrd__batch_groups[MRD_EV_NCCL_OP].desc == &meridian__v1__nccl_op_columns__descriptor);
}

static void test_check(void)
{
    static uint64_t zeros[1000001];
    uint32_t *ids32 = (uint32_t *)zeros;
    Meridian__V1__Batch m = MERIDIAN__V1__BATCH__INIT;
    Meridian__V1__KernelColumns kc = MERIDIAN__V1__KERNEL_COLUMNS__INIT;
    Meridian__V1__StringDef d[3], *dp[3] = {&d[0], &d[1], &d[2]};
    Meridian__V1__Counter cnt = MERIDIAN__V1__COUNTER__INIT, *cp[257];
    char *longs = malloc(5000);
    const char *why;

    CHECK(longs != NULL);
    m.run_id = "r";
    m.seq = 1;
    CHECK_OK(mrd_batch_check(&m, &why));
    m.seq = 0;
    expect_bad(&m, "seq 0");
    m.seq = 1;
    memset(longs, 'r', 257);
    longs[257] = '\0';
    m.run_id = longs;
    expect_bad(&m, "run_id");
    longs[256] = '\0';
    CHECK_OK(mrd_batch_check(&m, NULL));
    m.run_id = "r";

    /* String definitions. */
    for (int i = 0; i < 3; i++) {
        meridian__v1__string_def__init(&d[i]);
        d[i].id = (uint32_t)i + 1;
        d[i].value = "x";
    }
    m.strings = dp;
    m.n_strings = 3;
    CHECK_OK(mrd_batch_check(&m, NULL));
    d[0].id = 0;
    expect_bad(&m, "id 0");
    d[0].id = 2;
    expect_bad(&m, "increasing"); /* duplicate */
    d[0].id = 3;
    expect_bad(&m, "increasing"); /* unsorted */
    d[0].id = 1;
    d[2].id = 0x80000000u;
    expect_bad(&m, "2^31");
    d[2].id = 0x7fffffffu;
    CHECK_OK(mrd_batch_check(&m, NULL));
    memset(longs, 'v', 4097);
    longs[4097] = '\0';
    d[1].value = longs;
    expect_bad(&m, "4096");
    longs[4096] = '\0';
    CHECK_OK(mrd_batch_check(&m, NULL));
    d[1].value = NULL;
    expect_bad(&m, "without value");
    d[1].value = "y";
    m.n_strings = 65537;
    expect_bad(&m, "65536");
    m.n_strings = 3;

    /* Column groups: equal lengths, the event cap, string ids. */
    m.kernels = &kc;
#define SETCOLS(n)                                                                             \
    do {                                                                                       \
        for (int c_ = 0; c_ < mrd__batch_groups[MRD_EV_KERNEL].ncols; c_++) {                  \
            const struct mrd__colspec *cs_ = &mrd__batch_groups[MRD_EV_KERNEL].col[c_];         \
            *(size_t *)((char *)&kc + cs_->n_off) = (n);                                       \
            *(void **)((char *)&kc + cs_->p_off) = zeros;                                      \
        }                                                                                      \
    } while (0)
    SETCOLS(1000000);
    CHECK_OK(mrd_batch_check(&m, NULL));
    CHECK_UEQ(mrd_batch_count(&m, MRD_EV_KERNEL), 1000000);
    SETCOLS(1000001);
    expect_bad(&m, "1000000");
    SETCOLS(5);
    kc.n_grid_z = 4;
    expect_bad(&m, "different lengths");
    kc.n_grid_z = 6;
    expect_bad(&m, "different lengths");
    kc.n_grid_z = 5;
    kc.n_context = 0; /* an empty column is not "all zeros" in v1 */
    expect_bad(&m, "different lengths");
    kc.n_context = 5;
    CHECK_OK(mrd_batch_check(&m, NULL));
    ids32[3] = 0x80000000u; /* name[3] */
    expect_bad(&m, "string id");
    ids32[3] = 0x7fffffffu;
    CHECK_OK(mrd_batch_check(&m, NULL));
    ids32[3] = 0;
    m.kernels = (Meridian__V1__KernelColumns *)&cnt; /* wrong message type in the slot */
    expect_bad(&m, "wrong message type");
    m.kernels = &kc;

    /* Counters. */
    meridian__v1__counter__init(&cnt);
    for (int i = 0; i < 257; i++)
        cp[i] = &cnt;
    m.dropped = cp;
    m.n_dropped = 256;
    CHECK_OK(mrd_batch_check(&m, NULL));
    m.n_dropped = 257;
    expect_bad(&m, "256 counters");
    m.n_dropped = 2;
    cp[1] = NULL;
    expect_bad(&m, "empty counter");
    CHECK_EQ(mrd_batch_check(NULL, &why), -MRD_ERR_MALFORMED);
    CHECK_UEQ(mrd_batch_count(&m, 0), 0);
    CHECK_UEQ(mrd_batch_count(&m, MRD_EV__COUNT), 0);
    free(longs);
}

static struct mrd_batch_builder *builder(uint32_t max_frame, uint32_t target, int level)
{
    struct mrd_batch_builder_config cfg = {"limits", 1, 2, max_frame, target, level};
    struct mrd_batch_builder *b = NULL;

    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    return b;
}

static void test_builder_config(void)
{
    struct mrd_batch_builder_config cfg = {"x", 0, 0, MRD_FRAME_MIN_MAX - 1, 10, 1};
    struct mrd_batch_builder *b = NULL;
    char run[300];
    uint8_t *f;
    size_t len;

    CHECK_EQ(mrd_batch_builder_new(&cfg, &b), -EINVAL);
    cfg.max_frame = 0;
    cfg.target_events = 1000001;
    CHECK_EQ(mrd_batch_builder_new(&cfg, &b), -EINVAL);
    cfg.target_events = 0;
    memset(run, 'a', 257);
    run[257] = '\0';
    cfg.run_id = run;
    CHECK_EQ(mrd_batch_builder_new(&cfg, &b), -EINVAL);
    run[256] = '\0';
    CHECK_OK(mrd_batch_builder_new(&cfg, &b));
    CHECK_EQ(mrd_batch_builder_finish(b, 0, &f, &len), -EINVAL);
    /* An empty batch is a valid frame. */
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    {
        Meridian__V1__Batch *m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);

        CHECK_STREQ(m->run_id, run);
        for (int k = 1; k < MRD_EV__COUNT; k++)
            CHECK_UEQ(mrd_batch_count(m, k), 0);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    free(f);
    mrd_batch_builder_free(b);
    mrd_batch_builder_free(NULL);
}

static void test_target_and_size(void)
{
    struct mrd_batch_builder *b = builder(0, 100, 1);
    struct mrd_kernel k = {.start = 1, .end = 2};
    uint64_t seed = 5;
    int64_t t = 0;
    uint8_t *f;
    size_t len;
    uint32_t id;

    for (int i = 0; i < 100; i++)
        CHECK_OK(mrd_batch_add_kernel(b, &k));
    CHECK_EQ(mrd_batch_add_kernel(b, &k), -EAGAIN);
    CHECK_UEQ(mrd_batch_builder_pending(b), 100);
    k.name = 1; /* never handed out */
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    free(f);
    CHECK_EQ(mrd_batch_add_kernel(b, &k), -EINVAL);
    CHECK_UEQ(mrd_batch_builder_pending(b), 0);
    mrd_batch_builder_free(b);

    /* Size: fill a 4 KiB frame with random events of every kind, raw; the builder must
     * stop before the limit and use most of it (its size accounting is exact). */
    size_t minlen = SIZE_MAX;

    for (int round = 0; round < 50; round++) {
        size_t n = 0;
        int rc;

        b = builder(MRD_FRAME_MIN_MAX, 1000000, 0);
        id = mrd_batch_builder_intern(b, "a string of some length used by events");
        for (;;) {
            union mrd_any_event ev;
            int kind = 1 + (int)tu_below(&seed, MRD_EV__COUNT - 1);

            tu_event(&seed, kind, &t, &id, 1, &ev);
            rc = tu_add(b, kind, &ev);
            if (rc)
                break;
            n++;
        }
        CHECK_EQ(rc, -EAGAIN);
        CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
        CHECK_ULE(len, 8 + MRD_FRAME_MIN_MAX);
        CHECK_GE(len, 8 + MRD_FRAME_MIN_MAX * 3 / 4);
        minlen = len < minlen ? len : minlen;
        protobuf_c_message_free_unpacked(&tu_decode_batch(f, len, MRD_FRAME_MIN_MAX)->base, NULL);
        free(f);
        mrd_batch_builder_free(b);
    }
    printf("4 KiB frames filled to at least %zu bytes\n", minlen);
}

static void test_big_strings(void)
{
    struct mrd_batch_builder *b = builder(MRD_FRAME_MIN_MAX, 1000, 1);
    char s[4200];
    struct mrd_nccl_op op = {.op_id = 1};
    struct mrd_api a = {.start = 1};
    uint8_t *f;
    size_t len;

    memset(s, 'f', sizeof(s) - 1);
    s[sizeof(s) - 1] = '\0';
    op.func = mrd_batch_builder_intern(b, s);
    s[0] = 'd';
    op.datatype = mrd_batch_builder_intern(b, s);
    /* Two 4 KiB definitions cannot fit a 4 KiB frame, even alone. */
    CHECK_EQ(mrd_batch_add_nccl_op(b, &op), -MRD_ERR_TOO_LARGE);
    op.datatype = 0;
    /* One 4096-byte definition alone does not fit either (frame overhead). */
    CHECK_EQ(mrd_batch_add_nccl_op(b, &op), -MRD_ERR_TOO_LARGE);
    /* With something already pending, the answer is "finish first". */
    CHECK_OK(mrd_batch_add_api(b, &a));
    CHECK_EQ(mrd_batch_add_nccl_op(b, &op), -EAGAIN);
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    free(f);
    mrd_batch_builder_free(b);

    /* 65536 definitions per batch at most: the 65537th new string means -EAGAIN. */
    b = builder(0, 1000000, 1);
    for (uint32_t i = 0; i <= 65536; i++) {
        char n[16];

        snprintf(n, sizeof(n), "s%u", i);
        a.name = mrd_batch_builder_intern(b, n);
        CHECK_EQ(mrd_batch_add_api(b, &a), i < 65536 ? 0 : -EAGAIN);
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    {
        Meridian__V1__Batch *m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);

        CHECK_UEQ(m->n_strings, 65536);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    free(f);
    CHECK_OK(mrd_batch_add_api(b, &a)); /* fits the next batch */
    mrd_batch_builder_free(b);
}

static void test_intern(void)
{
    struct mrd_batch_builder *b = builder(0, 100, 1);
    char s[5000];
    uint32_t id1, id2, id3;
    struct mrd_api a = {.start = 1};
    uint8_t *f;
    size_t len;
    Meridian__V1__Batch *m;

    CHECK_EQ(mrd_batch_builder_intern(b, NULL), 0);
    CHECK_EQ(mrd_batch_builder_intern(NULL, "x"), 0);
    id1 = mrd_batch_builder_intern(b, "x");
    CHECK_EQ(id1, 1);
    CHECK_EQ(mrd_batch_builder_intern(b, "x"), 1);
    CHECK_EQ(mrd_batch_builder_intern(b, ""), 2); /* the empty string is a string */
    /* Longer than 4096: cut to 4096; two strings equal in their first 4096 bytes are
     * one string. */
    memset(s, 'k', 4999);
    s[4999] = '\0';
    id2 = mrd_batch_builder_intern(b, s);
    s[4500] = 'z';
    CHECK_EQ(mrd_batch_builder_intern(b, s), id2);
    /* A 2-byte character across the cut is dropped whole. */
    memset(s, 'u', 4095);
    s[4095] = (char)0xc3, s[4096] = (char)0xa9, s[4097] = '\0';
    id3 = mrd_batch_builder_intern(b, s);
    /* Invalid UTF-8 becomes '?': stray byte, overlong NUL, surrogate, > U+10FFFF. */
    CHECK_EQ(mrd_batch_builder_intern(b, "a\xff" "b"), mrd_batch_builder_intern(b, "a?b"));
    CHECK_EQ(mrd_batch_builder_intern(b, "\xc0\x80"), mrd_batch_builder_intern(b, "??"));
    CHECK_EQ(mrd_batch_builder_intern(b, "\xed\xa0\x80"), mrd_batch_builder_intern(b, "???"));
    CHECK_EQ(mrd_batch_builder_intern(b, "\xf4\x90\x80\x80"),
             mrd_batch_builder_intern(b, "????"));
    /* Valid multi-byte text is kept as is. */
    CHECK(mrd_batch_builder_intern(b, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80") !=
          mrd_batch_builder_intern(b, "caf? ? ?"));
    a.name = id2;
    CHECK_OK(mrd_batch_add_api(b, &a));
    a.name = id3;
    CHECK_OK(mrd_batch_add_api(b, &a));
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    CHECK_UEQ(m->n_strings, 2);
    CHECK_EQ(strlen(m->strings[0]->value), 4096);
    CHECK_EQ(strlen(m->strings[1]->value), 4095);
    CHECK_EQ(m->strings[1]->value[4094], 'u');
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(f);
    mrd_batch_builder_free(b);
}

/* Events whose string ids are all 0 ("none") from a builder that never interned a string
 * (its table has no array yet) round-trip, with no definitions in the batch. Built with
 * CC=clang -DMRD_ASAN=ON this caught &NULL[0] in the builder's commit (gcc's UBSan does
 * not flag it; found by fuzz_frame_batch, corpus/crash_builder_no_strings_null_offset). */
static void test_no_strings(void)
{
    struct mrd_batch_builder *b = builder(0, 100, 0);
    union mrd_any_event sent[MRD_EV__COUNT], got;
    uint64_t seed = 11;
    int64_t t = 1000;
    uint8_t *f;
    size_t len;
    Meridian__V1__Batch *m;

    for (int k = 1; k < MRD_EV__COUNT; k++) {
        tu_event(&seed, k, &t, NULL, 0, &sent[k]);
        CHECK_OK(tu_add(b, k, &sent[k]));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    CHECK_UEQ(m->n_strings, 0);
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;

        CHECK_UEQ(mrd_batch_count(m, k), 1);
        mrd_batch_cursor_init(&c, m);
        CHECK_EQ(tu_next(&c, k, &got), 1);
        CHECK_EQ(memcmp(&got, &sent[k], tu_event_size(k)), 0);
    }
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(f);
    mrd_batch_builder_free(b);
}

/* mrd_batch_add_any / mrd_batch_next_any: the same as each kind's own function (the test
 * utilities' per-kind dispatch on the other side), and unknown kinds refused. */
static void test_any_kind(void)
{
    struct mrd_batch_builder *b = builder(0, 100, 0);
    union mrd_any_event sent[MRD_EV__COUNT], got;
    uint64_t seed = 23;
    int64_t t = 5000;
    uint8_t *f;
    size_t len;
    Meridian__V1__Batch *m;

    for (int k = 1; k < MRD_EV__COUNT; k++) {
        tu_event(&seed, k, &t, NULL, 0, &sent[k]);
        CHECK_OK(mrd_batch_add_any(b, k, &sent[k])); /* in by kind number ... */
    }
    CHECK_EQ(mrd_batch_add_any(b, 0, &sent[1]), -EINVAL);
    CHECK_EQ(mrd_batch_add_any(b, MRD_EV__COUNT, &sent[1]), -EINVAL);
    CHECK_UEQ(mrd_batch_builder_pending(b), MRD_EV__COUNT - 1);
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;

        mrd_batch_cursor_init(&c, m); /* ... out by each kind's own reader, and back */
        CHECK_EQ(tu_next(&c, k, &got), 1);
        CHECK_EQ(memcmp(&got, &sent[k], tu_event_size(k)), 0);
        mrd_batch_cursor_init(&c, m);
        memset(&got, 0, sizeof got); /* padding compares equal only when zeroed */
        CHECK_EQ(mrd_batch_next_any(&c, k, &got), 1);
        CHECK_EQ(memcmp(&got, &sent[k], tu_event_size(k)), 0);
        CHECK_EQ(mrd_batch_next_any(&c, k, &got), 0);
    }
    struct mrd_batch_cursor c;
    mrd_batch_cursor_init(&c, m);
    CHECK_EQ(mrd_batch_next_any(&c, 0, &got), 0);
    CHECK_EQ(mrd_batch_next_any(&c, MRD_EV__COUNT, &got), 0);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(f);
    mrd_batch_builder_free(b);
}

static void test_wrap(void)
{
    struct mrd_batch_builder *b = builder(0, 100, 0);
    const int64_t starts[] = {INT64_MIN, INT64_MAX, 0, -1, INT64_MIN, 1, INT64_MAX};
    const int64_t ends[] = {INT64_MAX, INT64_MIN, -5, INT64_MAX, INT64_MIN, 0, INT64_MAX};
    const uint64_t corr[] = {UINT64_MAX, 0, UINT64_MAX, 1, 0x8000000000000000ull, 0, 7};
    const int n = (int)(sizeof(starts) / sizeof(starts[0]));
    uint8_t *f;
    size_t len;
    Meridian__V1__Batch *m;
    struct mrd_batch_cursor c;
    struct mrd_kernel k;
    struct mrd_nccl_channel ch;

    for (int i = 0; i < n; i++) {
        struct mrd_kernel e = {.start = starts[i], .end = ends[i], .correlation = corr[i]};
        struct mrd_nccl_channel x = {.gpu_start = ends[i], .gpu_end = starts[i],
                                     .host_start = starts[n - 1 - i]};

        CHECK_OK(mrd_batch_add_kernel(b, &e));
        CHECK_OK(mrd_batch_add_nccl_channel(b, &x));
    }
    CHECK_OK(mrd_batch_builder_finish(b, 1, &f, &len));
    m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    mrd_batch_cursor_init(&c, m);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(mrd_batch_next_kernel(&c, &k), 1);
        CHECK_EQ(k.start, starts[i]);
        CHECK_EQ(k.end, ends[i]);
        CHECK_UEQ(k.correlation, corr[i]);
    }
    CHECK_EQ(mrd_batch_next_kernel(&c, &k), 0);
    mrd_batch_cursor_init(&c, m);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(mrd_batch_next_nccl_channel(&c, &ch), 1);
        CHECK_EQ(ch.gpu_start, ends[i]);
        CHECK_EQ(ch.gpu_end, starts[i]);
        CHECK_EQ(ch.host_start, starts[n - 1 - i]);
    }
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(f);
    mrd_batch_builder_free(b);
}

/* The definition log (which ids each unacknowledged batch defined) holds 131,072
 * entries. Three unacknowledged batches of 65,536 definitions overflow it: the oldest
 * batch's entries are forgotten, so its ack no longer commits anything (its strings are
 * simply defined again), while a later batch's ack still does. */
static size_t defs_in(struct mrd_batch_builder *b, uint64_t seq, uint32_t n)
{
    struct mrd_api a = {.start = 1};
    uint8_t *f;
    size_t len, nd;
    Meridian__V1__Batch *m;

    for (uint32_t id = 1; id <= n; id++) {
        a.name = id;
        CHECK_OK(mrd_batch_add_api(b, &a));
    }
    CHECK_OK(mrd_batch_builder_finish(b, seq, &f, &len));
    m = tu_decode_batch(f, len, MRD_FRAME_DEFAULT_MAX);
    nd = m->n_strings;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    free(f);
    return nd;
}

static void test_def_log_cap(void)
{
    struct mrd_batch_builder *b = builder(0, 1000000, 1);
    const uint32_t n = 65536;

    for (uint32_t i = 1; i <= n; i++) {
        char s[16];

        snprintf(s, sizeof(s), "%u", i);
        CHECK_EQ(mrd_batch_builder_intern(b, s), i);
    }
    CHECK_UEQ(defs_in(b, 1, n), n);
    CHECK_UEQ(defs_in(b, 2, n), n);
    CHECK_UEQ(defs_in(b, 3, n), n); /* the log is over its cap: batch 1 forgotten */
    mrd_batch_builder_acked(b, 1);
    CHECK_UEQ(defs_in(b, 4, n), n); /* still defined: 1's ack could not be applied */
    mrd_batch_builder_acked(b, 3);
    CHECK_UEQ(defs_in(b, 5, 10), 0); /* 3's entries were kept: all committed */
    mrd_batch_builder_acked(b, 2);
    mrd_batch_builder_acked(b, 4);
    mrd_batch_builder_acked(b, 5);
    CHECK_UEQ(defs_in(b, 6, n), 0);
    mrd_batch_builder_free(b);
}

int main(void)
{
    test_def_log_cap();
    test_layout();
    test_check();
    test_builder_config();
    test_target_and_size();
    test_big_strings();
    test_intern();
    test_no_strings();
    test_any_kind();
    test_wrap();
    printf("limits passed\n");
    return 0;
}
