/* One simulated rank's DATA connection to meridiand: Hello, a bounded window of unacked
 * Batch frames, Acks, reconnect with backoff and resend (at-least-once), Goodbye.
 *
 * Where it sits: launcher/replay's per-rank loop builds frames (synthetic or from a
 * capture) and submits them here; this module owns the socket. It never parses batches.
 *
 * Delivery: submitted frames stay queued until an Ack covers them (an Ack acknowledges its
 * seq and every earlier batch sent on the same connection) or a HelloReply after a
 * reconnect reports them committed (committed_seq). On any socket error or EOF the
 * connection is closed, re-opened with exponential backoff (20 ms doubling to 1 s, with
 * jitter) and every queued frame is sent again in order, until retry_ms passes without a
 * successful Hello; then the client gives up (-ETIMEDOUT). The handshake is protocol
 * version 2's: Hello (no secret), the aggregator's Challenge, our Proof (proto/auth.h),
 * HelloReply. A refused Hello is final (-MRD_ERR_AUTH, -MRD_ERR_VERSION), except a rank
 * held by another live agent process or a connection cap: retried until retry_ms, then
 * reported as that (-MRD_ERR_RANK_HELD, -MRD_ERR_CONN_LIMIT), never as a wrong secret.
 *
 * Caps: at most `window` frames queued (mrd_client_submit returns -EAGAIN when full: the
 * caller waits with mrd_client_pump; a load generator may wait, unlike an agent); the
 * read buffer holds one control frame (64 KiB; a larger frame is a protocol error and
 * causes a reconnect). Single-threaded: one client per rank process (or thread).
 */
#ifndef MRD_CLIENT_H
#define MRD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "meridian.pb-c.h"

struct mrd_client_config {
    const char *host; /* numeric IPv4/IPv6 address or name */
    const char *port;
    const char *run_id;
    const uint8_t *secret;
    size_t secret_len;
    uint32_t rank, local_rank, world_size;
    uint64_t agent_instance;
    uint32_t shard_id;    /* Hello.shard_id: the meridiand shard this rank sends to */
    const char *hostname; /* Hello.host (NULL: gethostname) */
    uint32_t pid;         /* Hello.pid (0: getpid) */
    size_t n_gpus;        /* Hello.gpus, copied by the caller's lifetime */
    Meridian__V1__GpuInfo **gpus;
    uint32_t window;    /* max unacked frames, >= 1 */
    uint32_t max_frame; /* our cap on frames we read */
    uint32_t retry_ms;  /* give up after this long without a successful Hello */
    int quiet;          /* 1: log only fatal errors */
    /* optional: every frame written (Hello, Batches incl. resends, Goodbye) is also passed
     * here, e.g. to record a .mrdcap */
    void (*tap)(void *ctx, const uint8_t *frame, size_t len);
    void *tap_ctx;
};

struct mrd_client_stats {
    uint64_t bytes_sent;         /* every byte written, framing included, resends included */
    uint64_t batches_sent;       /* distinct batches submitted */
    uint64_t batches_resent;     /* frames written again after a reconnect */
    uint64_t batches_acked;      /* by Ack or by HelloReply.committed_seq */
    uint64_t acked_events;       /* sum of events of acked batches */
    uint64_t acked_checksum;     /* sum of checksums of acked batches */
    uint64_t dup_acks;           /* Acks with duplicate = true */
    uint64_t committed_on_hello; /* batches dropped from the queue by committed_seq */
    uint64_t reconnects;
    uint64_t last_committed_seq; /* committed_seq of the latest HelloReply */
    uint64_t goodbyes_sent;      /* Goodbye frames written (more than 1: resent after the
                                    connection broke before its Ack) */
    int goodbye_acked;           /* 1: the aggregator acknowledged the Goodbye (committed) */
    uint32_t peer_max_frame;     /* the frame limit of the latest HelloReply (max_frame_bytes;
                                    MRD_FRAME_DEFAULT_MAX when it announced none); 0 before */
};

struct mrd_client;

/* Creates a client (copies cfg; the strings and gpus must outlive it). Does not connect.
 * Returns 0 and *out; -EINVAL; -ENOMEM. */
int mrd_client_new(const struct mrd_client_config *cfg, struct mrd_client **out);
/* Closes the socket, frees queued frames. Accepts NULL. */
void mrd_client_free(struct mrd_client *c);

/* Connects and does the handshake, retrying with backoff for up to retry_ms.
 * Returns 0; -MRD_ERR_AUTH (wrong secret, wrong run) or -MRD_ERR_VERSION when the aggregator
 * refused the Hello; -MRD_ERR_RANK_HELD / -MRD_ERR_CONN_LIMIT when it still refused at
 * retry_ms for those reasons; -MRD_ERR_TOO_LARGE when
 * it announced a frame limit below a queued frame's payload (it would refuse that frame on
 * every connection; final, rather than resending it until retry_ms); -ETIMEDOUT. */
int mrd_client_connect(struct mrd_client *c);

/* Queues frame (ownership passes to the client, freed with free()) as batch `seq` holding
 * `events` events whose checksum is `checksum`, and starts sending it. Seqs must increase.
 * Returns 0 (the frame is queued; a send error shows at the next pump); -EAGAIN when the
 * window is full (nothing taken: pump, then retry); -EINVAL for a seq not above the last;
 * -MRD_ERR_TOO_LARGE (nothing taken) when its payload is over stats.peer_max_frame (the
 * caller sizes frames for that limit: see split.h). */
int mrd_client_submit(struct mrd_client *c, uint64_t seq, uint8_t *frame, size_t len,
                      uint64_t events, uint64_t checksum);

/* Sends what it can and reads Acks for up to timeout_ms (returns earlier once anything
 * was acknowledged or all is sent and nothing is pending). Reconnects on errors.
 * Returns 0; -MRD_ERR_AUTH / -ETIMEDOUT as mrd_client_connect. */
int mrd_client_pump(struct mrd_client *c, int timeout_ms);

/* Number of frames queued and not yet acknowledged. */
size_t mrd_client_unacked(const struct mrd_client *c);

/* Pumps until every queued frame is acknowledged or timeout_ms passes.
 * Returns 0; -ETIMEDOUT; errors of mrd_client_pump. */
int mrd_client_drain(struct mrd_client *c, int timeout_ms);

/* Drops the connection without a Goodbye (the next pump reconnects and resends). For tests
 * that force a resend. */
void mrd_client_disconnect(struct mrd_client *c);

/* Sends an already-encoded frame outside the batch window (ownership stays with the
 * caller), e.g. a batch resent on purpose. Returns 0 or a negative errno. */
int mrd_client_send_raw(struct mrd_client *c, const uint8_t *frame, size_t len);

/* Sends Goodbye (counters filled by the caller; bytes/batch fields are filled here), then
 * half-closes and waits for Ack{goodbye} (the Goodbye is committed); if the connection
 * ends first, reconnects with backoff and sends it again, all within timeout_ms. Returns
 * 0 when acknowledged, -ETIMEDOUT, -MRD_ERR_AUTH, or another negative errno (batches are
 * unaffected: only acked batches count). An aggregator that does not acknowledge
 * goodbyes (no HelloReply.goodbye_acks): 0 once it closed or after at most 1 s, and
 * stats.goodbye_acked stays 0. The connection is closed afterwards. */
int mrd_client_goodbye(struct mrd_client *c, Meridian__V1__Goodbye *bye, int timeout_ms);

/* Current counters. */
void mrd_client_get_stats(const struct mrd_client *c, struct mrd_client_stats *out);

/* Sets the callback invoked for every batch seq acknowledged (dup = duplicate ack), e.g.
 * to tell the batch builder (mrd_batch_builder_acked). */
void mrd_client_on_ack(struct mrd_client *c, void (*fn)(void *ctx, uint64_t seq, int dup),
                       void *ctx);

#endif
