/* aggregator/uplink: a node aggregator's global timebase, aligned to a reference aggregator.
 *
 * Where it sits: between meridiand's start and its store. In a job over several nodes one
 * meridiand runs per node (`--clock-reference HOST:PORT`) and one of them, the reference,
 * runs without that option. A node's uplink probes the reference over a clock connection,
 * exactly as an agent probes its aggregator (Hello, Challenge, Proof; ClockProbe /
 * ClockReply, four timestamps), steers a live model of the reference's global time on the
 * node's own clock, and hands it to the store (mrd_store_config.global_now): every time the
 * node stamps (clock replies to its agents, receive times) is then on the reference's
 * timebase. At stop, the probes are fitted by aggregator/clock (mrd_clock_fit_samples) to
 * bound what the live model missed, and that record goes into the node's database.
 * Design, bound and file layout: uplink.c (top) and aggregator/SCHEMA.md ("Node clocks").
 *
 * Workload: one thread, 20 probes a second (4 every 200 ms; 64 in the first 2 s, before
 * meridiand listens), samples kept in memory (capped, see uplink.c). mrd_uplink_now is
 * called by the ingest loop and the store's writer on every frame: lock-free (a sequence
 * lock), one clock_gettime.
 */
#ifndef MRD_UPLINK_H
#define MRD_UPLINK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct mrd_uplink;

struct mrd_uplink_config {
    const char *host; /* the reference meridiand: numeric address or name */
    uint16_t port;
    const char *run_id; /* the run (the reference must hold the same one) */
    const uint8_t *secret;
    size_t secret_len;
    uint32_t shard_id;         /* this node aggregator's shard (Hello.shard_id, record names) */
    uint32_t interval_ms;      /* between probe rounds (default 200) */
    uint32_t start_timeout_ms; /* mrd_uplink_start gives up after this (default 30000) */
    uint32_t grace_ms;         /* reference unreachable this long: on_lost (default 30000) */
    int64_t test_realtime_offset_ns; /* TESTS ONLY: added to this node's own realtime anchor */
    double test_clock_ppm;           /* TESTS ONLY: this node's own clock runs off by this rate */
    void (*on_lost)(void *arg);      /* called once, from the uplink thread; may be NULL */
    void *on_lost_arg;
    int verbose; /* -1 errors only, 0 notices, 1 every reconnect */
    FILE *log;   /* NULL: stderr; lines start with "meridiand: uplink: " */
};

/* What the run's probes say about the live timebase, filled by mrd_uplink_stop. */
struct mrd_uplink_result {
    int aligned;          /* 1 when the fit below succeeded (>= 2 usable probes) */
    uint64_t probes;      /* answered probes kept (after decimation) */
    uint64_t decimations; /* times the sample buffer was halved at its cap */
    uint64_t reconnects;
    int64_t rtt_min_ns;       /* fastest round trip seen */
    int64_t offset_ns;        /* reference - own timebase at stop (the live model) ... */
    int64_t offset_at_own_ns; /* ... at this own time */
    int64_t residual_ns;      /* largest |fitted reference - live timebase| over the run */
    int64_t fit_bound_ns;     /* the fit's own bound (aggregator/clock/README.md) */
    int64_t bound_ns;         /* residual_ns + fit_bound_ns: |live - reference| stays within */
    int64_t max_slew_ppb;     /* largest |rate correction| the live model applied */
    int64_t own_anchor_realtime_ns, own_anchor_monotonic_ns; /* the node's own timebase */
};

/* Copies cfg (strings and secret included), connects to the reference and runs a first
 * burst of probes (~2 s), so that mrd_uplink_now is aligned before anything is stamped; then
 * starts the probing thread. Blocks for up to cfg->start_timeout_ms. Returns 0 and *out;
 * -ETIMEDOUT (reference unreachable), -MRD_ERR_AUTH / -MRD_ERR_VERSION (refused: the reason
 * is logged), -EINVAL, -ENOMEM. Main thread. */
int mrd_uplink_start(const struct mrd_uplink_config *cfg, struct mrd_uplink **out);

/* The reference's global time now, as this node's live model has it. arg is the
 * struct mrd_uplink (the store's global_now callback). Lock-free; any thread. */
int64_t mrd_uplink_now(void *arg);

/* Stops the thread, closes the connection, fits the run's probes and fills *res. The
 * uplink stays valid (for mrd_uplink_record). Returns 0, -ENOMEM. Main thread, once. */
int mrd_uplink_stop(struct mrd_uplink *u, struct mrd_uplink_result *res);

/* Writes res as aggregator_counters rows `node_clock.<shard>.<field>` (SCHEMA.md) into the
 * (closed) database at db_path, in one transaction. Returns 0, -MRD_ERR_SQLITE (logged). */
int mrd_uplink_record(const struct mrd_uplink *u, const struct mrd_uplink_result *res,
                      const char *db_path);

/* Frees the uplink (stops it first if still running). Accepts NULL. */
void mrd_uplink_free(struct mrd_uplink *u);

/* After the job, on the host where the shards are merged: puts the node shard at
 * shard_path on the reference's timebase record: its runs row takes the anchors and
 * boot_id of the reference database at ref_path, so that `meridian merge` (which requires
 * one boot and shifts by the anchors) takes its global times as they are. Refuses (nothing
 * written) a shard of another run, and one without a `node_clock.<shard>.aligned` record
 * (a node that was not aligned, or was killed before it wrote the record). A shard already
 * on the reference's record is left alone. Returns 0, 1 (already adopted), -MRD_ERR_CONFIG
 * (refused, reason written to log), -MRD_ERR_SQLITE. */
int mrd_uplink_adopt(const char *ref_path, const char *shard_path, FILE *log);

#endif
