/* One simulated rank of the load generator: produce batches (synthetic, or decoded from a
 * capture and rewritten), send them through the real protocol, account for what was sent.
 *
 * Where it sits: replay.c starts one of these per rank process; rank.c drives gen.c (or
 * capfile.c), the real batch builder / frame encoder (proto/), and client.c (the socket).
 *
 * Accounting, independent of the aggregator: every event handed to the builder (or found in
 * a replayed batch) is hashed with canon.h; the result holds the count per kind and the
 * checksum of everything sent, and of everything acknowledged.
 *
 * Frame limit: frames fit the smaller of --max-frame and the limit the aggregator announced
 * (HelloReply.max_frame_bytes): the synthetic builder takes it; a capture batch over it is
 * re-split (split.h) under the next seqs, later capture batches keeping their recorded seq
 * unless the re-split batches took it (then the next free one).
 *
 * Workload: up to a few hundred thousand events/s per rank (rate 0 = as fast as acks allow),
 * bounded by the client's window of unacked batches. Single-threaded.
 */
#ifndef MRD_RANK_H
#define MRD_RANK_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "events.h"

struct mrd_rank_opts {
    /* the connection every rank makes (host, port, run_id, secret, window, max_frame,
     * retry_ms, quiet); each rank adds its own Hello fields and the tap */
    struct mrd_client_config conn;
    uint32_t rank, world_size, local_rank;
    uint32_t shard_id;       /* Hello.shard_id (a list of aggregators: the entry's index) */
    double rate, burst_rate; /* events/s per rank; 0 = unlimited */
    uint32_t burst_ms, burst_period_ms;
    double seconds;  /* stop generating after this long (0 = no limit) */
    uint64_t events; /* stop after this many events (0 = no limit) */
    uint32_t batch_events, flush_ms;
    int mix, compress;
    uint64_t seed;
    const char *record_path;  /* write a .mrdcap of every frame sent */
    const char *dump_path;    /* write the canonical text of every event sent */
    const char *capture_path; /* replay this capture instead of generating */
    uint32_t rank_offset, copy, copies;
    /* capture replay as one rank of a launched job (--from-env): send as `rank`, with
     * `world_size` and `local_rank` unless 0 / UINT32_MAX (then the capture's) */
    int as_rank;
    uint32_t kinds;        /* capture replay: keep only these kinds (bit per kind) */
    uint32_t resend_acked; /* test hook: at the end, resend the first N batches */
};

struct mrd_rank_result {
    uint32_t rank;
    uint64_t events, checksum, batches;
    uint64_t first_seq, last_seq; /* seqs of the first and last batch sent */
    uint64_t by_kind[MRD_EV__COUNT];
    uint64_t skipped_frames; /* capture frames not replayed (resends, clock, unknown) */
    /* capture batches over the aggregator's frame limit, re-split (split.h), and the
     * batches they became */
    uint64_t resplit_frames, resplit_batches;
    struct mrd_client_stats net;
    double seconds;
    int rc;        /* 0 = everything acknowledged */
    char why[160]; /* set when rc != 0 */
};

/* Runs one rank to the end: connect, send, drain, goodbye. Returns res->rc. */
int mrd_rank_run(const struct mrd_rank_opts *o, struct mrd_rank_result *res);

/* Formats one report line (no newline): "rank=R events=N checksum=HEX ... status=ok". */
void mrd_rank_format(const struct mrd_rank_result *r, char *buf, size_t cap);

#endif
