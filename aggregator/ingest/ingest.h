/* meridian ingest: the aggregator's event loop (epoll, one thread) serving every agent.
 *
 * Where it sits: agents connect over TCP; this loop authenticates them (protocol version
 * 2: Hello, a Challenge with a nonce fresh for the connection, the agent's Proof, an HMAC
 * of the run secret over it, compared in constant time: proto/auth.h; the secret never
 * travels), answers clock probes at once, decodes Batch frames (mrd_frame_decode +
 * mrd_batch_check) and submits them to the store's writer thread; when the writer
 * reports a commit it sends the Acks (one per Batch, and Ack{goodbye} per Goodbye).
 * Connection code never parses protobuf itself: it only uses proto/frame.h and
 * proto/batch.h.
 *
 * Workload: hundreds of agents (two connections each: data and clock), up to 512 ranks x
 * 50,000 events/s. Memory is bounded by the caps below and nothing else:
 *   - read buffer per connection: 64 KiB, grown for a larger frame up to max_frame + 8
 *     bytes, the growth drawn from a global budget (rbuf_budget; a connection waiting for
 *     budget is not read); before a valid Hello a frame may not exceed 64 KiB;
 *   - bytes submitted to the writer and not yet committed (an estimate of the decoded
 *     size): globally queue_cap, per connection conn_queue_cap. At a cap the loop stops
 *     reading (TCP pushes back on the agents) and resumes after the next commit;
 *   - write buffer per connection: wbuf_cap; above half of it the connection is not read
 *     (its acks are not being read), at the cap it is closed;
 *   - connections: max_connections; more are accepted and closed at once;
 *   - connections that have not yet proven a valid Hello (unauthenticated: before the
 *     Proof matched), each holding at most its Hello's bytes (64 KiB) besides its buffers:
 *     max_prehello, and max_prehello_per_addr of them from one source address (more from
 *     it are closed at once, a rate-limited log line, counter
 *     connections_over_address_limit), so that one address cannot push the handshakes of
 *     the others out.
 *     At the cap a new connection first makes the loop read the oldest such connection
 *     (its Hello may be waiting in the kernel); if that one still has no Hello it is
 *     closed without a word (a rate-limited log line, counter
 *     connections_prehello_evicted). Peers without the secret can so hold at most
 *     max_prehello slots, each only until newer connections push it out, and never
 *     starve the agents of the other slots;
 *   - authenticated connections (all hold the one run secret): max_per_secret (default 2 x
 *     the largest world size announced + 8); beyond it a proven Hello is refused (code
 *     MRD_ERR_CONN_LIMIT, a log line, counter rejected_secret_limit), so a holder of the
 *     secret cannot take every slot and lock the ranks out;
 *   - kernel receive buffer per connection: sock_rcvbuf, so that a connection the loop
 *     does not read holds little kernel memory and its sender feels the pushback early.
 *
 * Windows: every ClockProbe's step counter goes to window control (winctl.h), and every
 * ClockReply carries the window requests active then; with cfg.trigger_skew, every Batch's
 * NCCL ops and clock samples go to the collective-skew tracker (skew.h) first, which may
 * open a trigger window; `meridian window` asks for one over
 * the control socket (control.h, cfg.control_path), served by this loop too.
 *
 * One agent process per rank: a data Hello for a rank whose data connection from another
 * agent process (Hello.agent_instance) is still live is refused (HelloReply accepted =
 * false, code MRD_ERR_RANK_HELD, one log line naming both processes, counter
 * rejected_rank_held), even though its Proof holds; the agent
 * retries and gets the rank once the holder closed. TCP keepalive (about a minute) ends
 * the connection of a host that vanished, so a dead holder does not keep its rank.
 *
 * Refusals: every refused or cut connection is one log line with the peer and the reason,
 * at most 10 a second, then one "N more refusals suppressed" line a second; among them a
 * Batch after the Goodbye on the same connection (not stored, not acknowledged) and a
 * connection that ends inside a frame.
 *
 * Threads: everything runs on the thread calling mrd_ingest_run, except mrd_ingest_stop
 * (any thread, async-signal-safe).
 */
#ifndef MRD_INGEST_H
#define MRD_INGEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "skew.h"
#include "winctl.h"

struct mrd_store;
struct mrd_ingest;

struct mrd_ingest_config {
    const char *host;          /* numeric address to listen on ("127.0.0.1", "::1") */
    uint16_t port;             /* 0 = ephemeral (see mrd_ingest_port) */
    uint32_t max_frame;        /* largest frame accepted (default MRD_FRAME_DEFAULT_MAX) */
    uint32_t max_connections;  /* default 1024 */
    uint32_t max_prehello;     /* connections without a valid Hello yet (default 128, at
                                  most max_connections) */
    uint32_t max_prehello_per_addr; /* of those, from one source address (default 64: 16
                                  ranks of a node behind one address open 32) */
    uint32_t max_per_secret;        /* authenticated connections (data and clock) at once; all
                                       hold the one run secret. 0: 2 x the largest world size an
                                       authenticated Hello announced + 8 (no world size yet: only
                                       max_connections) */
    size_t queue_cap;          /* default 256 MiB */
    size_t conn_queue_cap;     /* default 4 * max_frame, at least 16 MiB */
    size_t rbuf_budget;        /* default 256 MiB */
    size_t wbuf_cap;           /* default 1 MiB */
    int sock_rcvbuf;           /* SO_RCVBUF of every connection (default 1 MiB; -1 = the
                                  kernel's autotuning, which may buffer tens of MiB per
                                  connection that the loop is not reading) */
    uint32_t hello_timeout_ms; /* default 10000: no valid Hello by then -> closed */
    const uint8_t *secret;     /* required; copied */
    size_t secret_len;
    int verbose;                      /* -1 errors only, 0 default, 1 one line per connection */
    FILE *log;                        /* NULL: stderr */
    const char *control_path;         /* Unix socket for `meridian window` (control.h); NULL:
                                         none. Copied */
    struct mrd_winctl_config windows; /* window requests (winctl.h): max_ranks and log are
                                         set by the ingest (max_connections, its log) */
    double trigger_skew;              /* 0: no skew trigger; else the factor (> 1) of the
                                         collective-skew trigger (skew.h) */
};

/* Binds and listens (SO_REUSEADDR) on cfg->host:cfg->port, and on cfg->control_path when
 * given (control.h: a stale socket there is replaced; a live one or another file is
 * refused). The store must outlive the ingest. Returns 0 and *out; -EINVAL (bad address,
 * no secret, bad window settings), -ENOMEM, or the negative errno of socket/bind/listen
 * (logged). */
int mrd_ingest_new(const struct mrd_ingest_config *cfg, struct mrd_store *store,
                   struct mrd_ingest **out);

/* The port actually bound (useful with port 0). */
uint16_t mrd_ingest_port(const struct mrd_ingest *g);

/* Runs the loop until mrd_ingest_stop. Then: stops accepting and reading, waits until the
 * writer committed everything submitted, sends the remaining acks (for at most 2 s), and
 * closes every connection. Returns 0, or a negative errno if epoll failed. */
int mrd_ingest_run(struct mrd_ingest *g);

/* Asks the loop to stop. Async-signal-safe (one write to an eventfd). */
void mrd_ingest_stop(struct mrd_ingest *g);

/* Closes the listener and any connection left; accepts NULL. */
void mrd_ingest_free(struct mrd_ingest *g);

#endif
