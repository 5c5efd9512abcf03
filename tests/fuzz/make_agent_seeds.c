/* make_agent_seeds: writes the seed corpus of fuzz_agent_input (tests/fuzz/corpus_agent):
 * byte streams as meridiand sends them to an agent. Each file is what one connection
 * delivered; fuzz_agent_input runs every file through the data connection (from Hello,
 * and READY with a Goodbye sent) and the clock connection (from Hello, and in a probe
 * round), so a stream is written for the state it is meant for and still exercises the
 * others. The numbers match the target's setup: queued batches SEQ0 .. SEQ0+5, probe k
 * with t0 = k * PROBE_T0_NS, STEPS0 steps begun before the round. Frames carry
 * MRD_PROTOCOL_VERSION: regenerate after a version change. An accepting HelloReply comes
 * after a Challenge (the handshake since version 2: the agent answers it with its Proof).
 *   challenge_*     alone, twice, nonces of 0, 31 and 33 bytes
 *   hello_reply_*   accepted (committed_seq none / inside the queue / past it / at 2^63-1
 *                   and 2^64-1, where the numbering cannot move past it; goodbye_acks),
 *                   accepted without a Challenge first, refused before and after it (codes),
 *                   refused with and without a reason, max_frame_bytes tiny (1), the
 *                   minimum, 0 (the default) and huge (2^32-1), zstd-compressed
 *   ack_*           after an accepted HelloReply: in order, out of order, duplicate
 *                   (twice, and Ack.duplicate), beyond the queue, the Goodbye's Ack
 *   clock_*         ClockReplies with 0, 1, 16 and 40 window requests (first > last, id 0,
 *                   huge and out-of-range steps, late first steps, repeated ids, unknown
 *                   reasons), a reply for another probe, one after the HelloReply
 *   error_*         an Error (code, message), one of the next protocol version, one of
 *                   version 1 (an older aggregator answering in its own framing)
 *   bad_*           truncated header, truncated payload, length over the agent's input
 *                   cap (64 KiB) and 2^32-1, unknown type and flag, a Batch and a Proof
 *                   (never sent to an agent), a zstd payload without its content size
 *   stream_*        two or more frames back to back
 * Deterministic. Usage: make_agent_seeds DIR   (then commit DIR; tests/fuzz/COVERAGE.md) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "auth.h"
#include "error.h"
#include "frame.h"
#include "meridian.pb-c.h"
#include "steps.h"

#define SEQ0        1000u /* fuzz_agent_input.c */
#define PROBE_T0_NS 1000
#define STEPS0      4

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "make_agent_seeds: " __VA_ARGS__);                                         \
        exit(1);                                                                                   \
    } while (0)

static const char *dir;

/* One output stream being assembled. */
struct buf {
    uint8_t b[1 << 17];
    size_t n;
};

static void put(const char *name, const struct buf *s)
{
    char path[4096];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/seed_%s", dir, name);
    fp = fopen(path, "wb");
    if (!fp || fwrite(s->b, 1, s->n, fp) != s->n || fclose(fp) != 0)
        DIE("cannot write %s\n", path);
}

static void raw(struct buf *s, const void *p, size_t n)
{
    if (n > sizeof s->b - s->n)
        DIE("stream too long\n");
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

/* Appends one frame as meridiand encodes it (raw; zstd at level 3 where it pays). */
static void frame(struct buf *s, enum mrd_frame_type type, const ProtobufCMessage *m, int level)
{
    uint8_t *f;
    size_t n;

    if (mrd_frame_encode(type, m, level, MRD_FRAME_DEFAULT_MAX, &f, &n) != 0)
        DIE("cannot encode a frame of type %d\n", (int)type);
    raw(s, f, n);
    free(f);
}

/* Appends one frame with a zstd payload even where compression does not pay; with
 * content_size 0 the zstd frame does not declare its size (refused by the decoder). */
static void frame_zstd(struct buf *s, enum mrd_frame_type type, const ProtobufCMessage *m,
                       int content_size)
{
    size_t rn = protobuf_c_message_get_packed_size(m), cap = ZSTD_compressBound(rn), zn;
    uint8_t *p = malloc(rn + 1), *z = malloc(cap + 1), hdr[MRD_FRAME_HEADER_BYTES];
    struct mrd_frame_header h = {MRD_PROTOCOL_VERSION, (uint8_t)type, MRD_FRAME_FLAG_ZSTD, 0};
    ZSTD_CCtx *cc = ZSTD_createCCtx();

    if (!p || !z || !cc)
        DIE("out of memory\n");
    protobuf_c_message_pack(m, p);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 19);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, content_size);
    if (content_size) {
        zn = ZSTD_compress2(cc, z, cap, p, rn);
    } else { /* streaming with no pledged size: the frame header omits the content size */
        ZSTD_outBuffer out = {z, cap, 0};
        ZSTD_inBuffer in = {p, rn, 0};
        zn = ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end);
        if (!ZSTD_isError(zn))
            zn = zn == 0 ? out.pos : (size_t)-1;
    }
    if (ZSTD_isError(zn) || zn == (size_t)-1)
        DIE("zstd failed\n");
    h.length = (uint32_t)zn;
    mrd_frame_header_write(hdr, &h);
    raw(s, hdr, sizeof hdr);
    raw(s, z, zn);
    ZSTD_freeCCtx(cc);
    free(p);
    free(z);
}

/* A bare header (no payload follows unless the caller appends one). */
static void header(struct buf *s, uint8_t version, uint8_t type, uint16_t flags, uint32_t length)
{
    uint8_t hdr[MRD_FRAME_HEADER_BYTES];
    struct mrd_frame_header h = {version, type, flags, length};

    mrd_frame_header_write(hdr, &h);
    raw(s, hdr, sizeof hdr);
}

/* meridiand's Challenge: a nonce of n bytes (MRD_AUTH_NONCE_BYTES when valid). */
static void challenge(struct buf *s, size_t n)
{
    Meridian__V1__Challenge c = MERIDIAN__V1__CHALLENGE__INIT;
    uint8_t nonce[64];

    if (n > sizeof nonce)
        DIE("nonce too long\n");
    for (size_t i = 0; i < n; i++)
        nonce[i] = (uint8_t)(0x5a ^ (i * 37));
    c.nonce.data = nonce;
    c.nonce.len = n;
    frame(s, MRD_FRAME_CHALLENGE, &c.base, 0);
}

/* A HelloReply; an accepting one comes after a Challenge (written first). */
static void hello_reply_code(struct buf *s, int accepted, const char *reason, uint32_t max_frame,
                             uint64_t committed, int goodbye_acks, int zstd, uint32_t code)
{
    Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;

    if (accepted)
        challenge(s, MRD_AUTH_NONCE_BYTES);
    r.code = code;
    r.accepted = accepted;
    r.reason = (char *)reason;
    r.max_frame_bytes = max_frame;
    r.committed_seq = committed;
    r.goodbye_acks = goodbye_acks;
    if (zstd)
        frame_zstd(s, MRD_FRAME_HELLO_REPLY, &r.base, 1);
    else
        frame(s, MRD_FRAME_HELLO_REPLY, &r.base, 0);
}

static void hello_reply(struct buf *s, int accepted, const char *reason, uint32_t max_frame,
                        uint64_t committed, int goodbye_acks, int zstd)
{
    hello_reply_code(s, accepted, reason, max_frame, committed, goodbye_acks, zstd,
                     accepted ? 0 : MRD_ERR_AUTH);
}

static void accepted(struct buf *s)
{
    hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 0, 1, 0);
}

static void ack(struct buf *s, uint64_t seq, int duplicate, int goodbye)
{
    Meridian__V1__Ack a = MERIDIAN__V1__ACK__INIT;

    a.seq = seq;
    a.duplicate = duplicate;
    a.goodbye = goodbye;
    frame(s, MRD_FRAME_ACK, &a.base, 0);
}

static void error(struct buf *s, uint32_t code, const char *msg)
{
    Meridian__V1__Error e = MERIDIAN__V1__ERROR__INIT;

    e.code = code;
    e.message = (char *)msg;
    frame(s, MRD_FRAME_ERROR, &e.base, 0);
}

struct win {
    uint64_t id, first, last;
    int reason;
};

/* A ClockReply for probe `probe` (t0 as the target's probe carries it) with n windows
 * from w[] (cycled; each pass after the first through w[] adds 100 to the ids but 0). */
static void clock_reply(struct buf *s, uint64_t probe, const struct win *w, size_t nw, size_t n,
                        int zstd)
{
    Meridian__V1__ClockReply cr = MERIDIAN__V1__CLOCK_REPLY__INIT;
    Meridian__V1__WindowRequest wr[64], *wp[64];

    if (n > 64)
        DIE("too many windows\n");
    cr.probe_id = probe;
    cr.t0 = (int64_t)probe * PROBE_T0_NS;
    cr.t1 = 1793692800000000000ll + (int64_t)probe * 1000003;
    cr.t2 = cr.t1 + 12345;
    for (size_t i = 0; i < n; i++) {
        const struct win *x = &w[i % nw];

        meridian__v1__window_request__init(&wr[i]);
        wr[i].id = x->id + (x->id ? (i / nw) * 100 : 0);
        wr[i].first_step = x->first;
        wr[i].last_step = x->last;
        wr[i].reason = (Meridian__V1__WindowReason)x->reason;
        wp[i] = &wr[i];
    }
    cr.n_windows = n;
    cr.windows = n ? wp : NULL;
    if (zstd)
        frame_zstd(s, MRD_FRAME_CLOCK_REPLY, &cr.base, 1);
    else
        frame(s, MRD_FRAME_CLOCK_REPLY, &cr.base, 3);
}

int main(int argc, char **argv)
{
    /* windows: good ones, and every kind of bad one stepctl must refuse */
    static const struct win ok[] = {
        {1, 10, 12, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_ON_DEMAND},
        {2, 20, 20, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_TRIGGER},
        {3, STEPS0 + 2, STEPS0 + 40, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_DELAY},
        {4, 100, 199, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_ON_DEMAND},
    };
    static const struct win odd[] = {
        {5, 30, 29, 3},                      /* first > last */
        {0, 40, 41, 3},                      /* id 0 */
        {6, 1, 2, 4},                        /* late: first step begun */
        {7, 50, 18446744073709551615ull, 3}, /* last 2^64-1 */
        {8, 18446744073709551615ull, 18446744073709551615ull, 3},
        {9, MRD_WINDOW_STEP_MAX, MRD_WINDOW_STEP_MAX, 5}, /* the largest valid step */
        {10, MRD_WINDOW_STEP_MAX, MRD_WINDOW_STEP_MAX + 1, 5},
        {11, 9223372036854775807ull, 9223372036854775808ull, 3}, /* around INT64_MAX */
        {1, 10, 12, 3},                                          /* an id again */
        {12, 60, 61, 0},                                         /* reason unknown (0) */
        {13, 70, 71, 99},                                        /* reason not in the enum */
        {14, 18446744073709551615ull, 3, 3},                     /* first 2^64-1 > last */
    };
    struct buf *s = malloc(sizeof *s);
    char big[300];

    if (argc != 2) {
        fprintf(stderr, "usage: make_agent_seeds DIR\n");
        return 2;
    }
    if (!s)
        DIE("out of memory\n");
    dir = argv[1];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = '\0';
#define SEED(name, ...)                                                                            \
    do {                                                                                           \
        s->n = 0;                                                                                  \
        __VA_ARGS__;                                                                               \
        put(name, s);                                                                              \
    } while (0)

    /* Challenge (the handshake since version 2) */
    SEED("challenge", challenge(s, MRD_AUTH_NONCE_BYTES));
    SEED("challenge_twice", challenge(s, MRD_AUTH_NONCE_BYTES); challenge(s, MRD_AUTH_NONCE_BYTES));
    SEED("challenge_nonce_empty", challenge(s, 0); accepted(s));
    SEED("challenge_nonce_short", challenge(s, MRD_AUTH_NONCE_BYTES - 1));
    SEED("challenge_nonce_long", challenge(s, MRD_AUTH_NONCE_BYTES + 1));
    SEED("challenge_then_refused", challenge(s, MRD_AUTH_NONCE_BYTES);
         hello_reply_code(s, 0, "wrong secret", 0, 0, 0, 0, MRD_ERR_AUTH));
    SEED("challenge_after_ready", accepted(s); challenge(s, MRD_AUTH_NONCE_BYTES));

    /* HelloReply */
    SEED("hello_reply_accepted_no_challenge", {
        Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;
        r.accepted = 1;
        r.max_frame_bytes = MRD_FRAME_DEFAULT_MAX;
        frame(s, MRD_FRAME_HELLO_REPLY, &r.base, 0);
    });
    SEED("hello_reply_refused_rank_held",
         hello_reply_code(s, 0, "rank 3 is held by another agent process", 0, 0, 0, 0,
                          MRD_ERR_RANK_HELD));
    SEED("hello_reply_refused_conn_limit",
         hello_reply_code(s, 0, "connection limit", 0, 0, 0, 0, MRD_ERR_CONN_LIMIT));
    SEED("hello_reply_refused_code_unknown", hello_reply_code(s, 0, "?", 0, 0, 0, 0, 4294967295u));
    SEED("hello_reply_accepted", accepted(s));
    SEED("hello_reply_accepted_old_peer", hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 0, 0, 0));
    SEED("hello_reply_committed_in_queue",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, SEQ0 + 2, 1, 0));
    SEED("hello_reply_committed_all",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, SEQ0 + 5, 1, 0));
    SEED("hello_reply_committed_ahead",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, SEQ0 + 1000000, 1, 0));
    /* committed_seq past any seq (the agent's numbering wrapped to 0 before the fix,
     * COVERAGE.md), and the largest one it moves past */
    SEED("hello_reply_committed_max",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 18446744073709551615ull, 1, 0));
    SEED("hello_reply_committed_max_minus_1",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 18446744073709551614ull, 1, 0));
    SEED("hello_reply_committed_int64_max",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 9223372036854775807ull, 1, 0));
    SEED("hello_reply_committed_below_int64_max",
         hello_reply(s, 1, NULL, MRD_FRAME_DEFAULT_MAX, 9223372036854775806ull, 1, 0));
    SEED("hello_reply_refused", hello_reply(s, 0, "wrong secret", 0, 0, 0, 0));
    SEED("hello_reply_refused_no_reason", hello_reply(s, 0, NULL, 0, 0, 0, 0));
    SEED("hello_reply_refused_long_reason_zstd", hello_reply(s, 0, big, 0, 0, 0, 1));
    SEED("hello_reply_max_tiny", hello_reply(s, 1, NULL, 1, 0, 1, 0));
    SEED("hello_reply_max_min", hello_reply(s, 1, NULL, MRD_FRAME_MIN_MAX, SEQ0, 1, 0));
    SEED("hello_reply_max_default_0", hello_reply(s, 1, NULL, 0, 0, 1, 0));
    SEED("hello_reply_max_huge", hello_reply(s, 1, NULL, 0xffffffffu, 0, 1, 0));
    SEED("hello_reply_zstd", hello_reply(s, 1, NULL, 65536, SEQ0 + 1, 1, 1));
    SEED("hello_reply_empty", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME_HELLO_REPLY, 0, 0));

    /* Acks, after the HelloReply that makes the connection READY */
    SEED("ack_in_order", accepted(s); for (uint64_t q = SEQ0; q < SEQ0 + 6; q++) ack(s, q, 0, 0));
    SEED("ack_cumulative", accepted(s); ack(s, SEQ0 + 4, 0, 0));
    SEED("ack_out_of_order", accepted(s); ack(s, SEQ0 + 3, 0, 0); ack(s, SEQ0 + 1, 0, 0);
         ack(s, SEQ0 + 5, 0, 0));
    SEED("ack_duplicate", accepted(s); ack(s, SEQ0, 0, 0); ack(s, SEQ0, 0, 0);
         ack(s, SEQ0 + 1, 1, 0));
    SEED("ack_beyond_queue", accepted(s); ack(s, SEQ0 + 999, 0, 0);
         ack(s, 18446744073709551615ull, 0, 0));
    SEED("ack_seq0", accepted(s); ack(s, 0, 0, 0));
    SEED("ack_goodbye", ack(s, 0, 0, 1));
    SEED("ack_goodbye_after_acks", ack(s, SEQ0 + 5, 0, 0); ack(s, 0, 0, 1));
    SEED("ack_goodbye_twice", accepted(s); ack(s, 0, 0, 1); ack(s, 0, 0, 1));
    SEED("ack_before_hello_reply", ack(s, SEQ0, 0, 0); accepted(s));

    /* ClockReplies: one per probe of the round (probes 1, 2, ...) */
    SEED("clock_reply_0_windows", clock_reply(s, 1, ok, 1, 0, 0));
    SEED("clock_reply_1_window", clock_reply(s, 1, ok, 1, 1, 0));
    SEED("clock_reply_16_windows", clock_reply(s, 1, ok, 4, 4, 0);
         clock_reply(s, 2, odd, 12, 12, 0); clock_reply(s, 3, ok, 4, 16, 0));
    SEED("clock_reply_40_windows", clock_reply(s, 1, odd, 12, 40, 0);
         clock_reply(s, 2, ok, 4, 40, 0));
    SEED("clock_reply_odd_windows",
         for (uint64_t p = 1; p <= 12; p++) clock_reply(s, p, &odd[p - 1], 1, 1, 0));
    SEED("clock_reply_zstd", clock_reply(s, 1, ok, 4, 16, 1));
    SEED("clock_reply_full_round",
         for (uint64_t p = 1; p <= 17; p++) clock_reply(s, p, ok, 4, p % 5, 0));
    SEED("clock_reply_other_probe", clock_reply(s, 7, ok, 4, 2, 0); clock_reply(s, 1, ok, 1, 1, 0));
    SEED("clock_hello_then_replies", accepted(s); clock_reply(s, 1, ok, 4, 4, 0);
         clock_reply(s, 2, odd, 12, 3, 0));
    SEED("clock_hello_refused", hello_reply(s, 0, "unknown run", 0, 0, 0, 0));

    /* Error */
    SEED("error", error(s, MRD_ERR_AUTH, "wrong secret for run fuzz-agent"));
    SEED("error_after_hello_reply", accepted(s); ack(s, SEQ0, 0, 0); error(s, 5, "store failed"));
    SEED("error_version_1", {
        Meridian__V1__Error e = MERIDIAN__V1__ERROR__INIT;
        size_t at = s->n;
        e.code = MRD_ERR_VERSION;
        e.message = "protocol version 2 is not supported: upgrade meridian";
        frame(s, MRD_FRAME_ERROR, &e.base, 0);
        s->b[at] = 1;
    });
    SEED("error_other_version", {
        Meridian__V1__Error e = MERIDIAN__V1__ERROR__INIT;
        size_t at = s->n;
        e.code = 1;
        e.message = "version 2 spoken here";
        frame(s, MRD_FRAME_ERROR, &e.base, 0);
        s->b[at] = MRD_PROTOCOL_VERSION + 1;
    });

    /* bad framing */
    SEED("bad_truncated_header", accepted(s); s->n = 5);
    SEED("bad_truncated_payload", hello_reply(s, 1, "cut", MRD_FRAME_DEFAULT_MAX, SEQ0, 1, 0);
         s->n -= 3);
    SEED("bad_truncated_second", accepted(s); ack(s, SEQ0, 0, 0); s->n -= 1);
    SEED("bad_length_over_cap", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME_ACK, 0, (64u << 10) + 1);
         raw(s, "\x08\x01", 2));
    SEED("bad_length_huge", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME_HELLO_REPLY, 0, 0xffffffffu));
    SEED("bad_unknown_type", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME__MAX + 1, 0, 0));
    SEED("bad_unknown_flag", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME_ACK, 2, 2);
         raw(s, "\x08\x01", 2));
    SEED("bad_batch_to_agent", {
        Meridian__V1__Batch b = MERIDIAN__V1__BATCH__INIT;
        b.run_id = "fuzz-agent";
        b.seq = 1;
        accepted(s);
        frame(s, MRD_FRAME_BATCH, &b.base, 0);
    });
    SEED("bad_proof_to_agent", {
        Meridian__V1__Proof pr = MERIDIAN__V1__PROOF__INIT;
        uint8_t mac[MRD_AUTH_MAC_BYTES] = {1, 2, 3};
        pr.mac.data = mac;
        pr.mac.len = sizeof mac;
        challenge(s, MRD_AUTH_NONCE_BYTES);
        frame(s, MRD_FRAME_PROOF, &pr.base, 0);
    });
    SEED("bad_zstd_no_size", {
        Meridian__V1__HelloReply r = MERIDIAN__V1__HELLO_REPLY__INIT;
        r.accepted = 1;
        r.max_frame_bytes = MRD_FRAME_DEFAULT_MAX;
        challenge(s, MRD_AUTH_NONCE_BYTES);
        frame_zstd(s, MRD_FRAME_HELLO_REPLY, &r.base, 0);
    });
    SEED("bad_field_zero", header(s, MRD_PROTOCOL_VERSION, MRD_FRAME_ACK, 0, 3);
         raw(s, "\x80\x00\x01", 3));

    /* streams: frames back to back */
    SEED("stream_hello_reply_ack", accepted(s); ack(s, SEQ0 + 2, 0, 0));
    SEED("stream_refused_then_accepted", hello_reply(s, 0, "busy", 0, 0, 0, 0); accepted(s);
         ack(s, SEQ0, 0, 0));
    SEED("stream_data_session", hello_reply(s, 1, NULL, 65536, SEQ0 + 1, 1, 1);
         for (uint64_t q = SEQ0 + 2; q < SEQ0 + 6; q++) ack(s, q, q == SEQ0 + 3, 0);
         ack(s, 0, 0, 1));
    SEED("stream_clock_session", accepted(s); clock_reply(s, 1, ok, 4, 2, 0);
         for (uint64_t p = 2; p <= 16; p++) clock_reply(s, p, ok, 4, 4, p & 1));
    free(s);
    return 0;
}
