/* Agent configuration from the environment (agent/base: read by core and transport).
 *
 * Parsing is a pure function over a lookup callback so tests can feed it any environment;
 * agent/core/agent.c calls it once, with getenv, at the first mrd_agent_start(), and hands
 * the result to the transport. The variables: agent/ENVIRONMENT.md.
 */
#ifndef MRD_AGENT_CONFIG_H
#define MRD_AGENT_CONFIG_H

#include <stddef.h>

#include <stdint.h>

#include "runcfg.h" /* MRD_AGGREGATORS_MAX, the aggregator list rule */

struct mrd_agent_config {
    char aggregator[256]; /* "host:port" */
    char run_id[128];
    char secret[256];
    uint64_t queue_bytes;
    uint32_t flush_deadline_ms;
    uint32_t ring_records, ring_threads;
    int graph_nodes;
    int rank, local_rank, world_size; /* -1 when unknown */
    double test_clock_ppm;
    int force;                  /* MERIDIAN_FORCE=1 */
    char record_file[512];      /* "" = none; %r and %p already substituted */
    uint32_t batch_events;      /* finish a batch at this many events (default 16384) */
    uint32_t batch_ms;          /* ... or this long after its first event (default 150) */
    uint32_t probe_interval_ms; /* periodic clock probe rounds (default 500) */
    uint32_t shard_id;
    /* Sharded aggregation. With a list in MERIDIAN_AGGREGATOR, aggregator[] above holds the
     * one entry this rank uses (entry rank % shard_count, blanks around it removed) and
     * shard_id == shard_index. A single address: count 1, index 0 (shard_id stays
     * MERIDIAN_SHARD_ID or 0). Record-only mode: both 0. */
    uint32_t shard_index; /* the entry of MERIDIAN_AGGREGATOR this rank connects to */
    uint32_t shard_count; /* entries in MERIDIAN_AGGREGATOR */
};

#define MRD_DEFAULT_QUEUE_BYTES       (64ull << 20)
#define MRD_DEFAULT_FLUSH_DEADLINE_MS 5000u
#define MRD_DEFAULT_RING_RECORDS      16384u
#define MRD_DEFAULT_RING_THREADS      64u
#define MRD_DEFAULT_BATCH_EVENTS      16384u
#define MRD_DEFAULT_BATCH_MS          150u
#define MRD_DEFAULT_PROBE_INTERVAL_MS 500u

/* Returns the value of an environment variable, or NULL when unset. */
typedef const char *(*mrd_env_fn)(const char *name, void *arg);

/* Fills *c from the environment seen through get(). Returns
 *   1  active (a rank, or MERIDIAN_FORCE=1, with an aggregator or a record file);
 *   0  inert, silently (MERIDIAN_DISABLE=1, or not a rank);
 *  -MRD_ERR_CONFIG  inert, and why[] holds one line for stderr (missing run id, a bad
 *     number, an unreadable secret file, ...).
 * Record-only mode: MERIDIAN_RECORD_FILE without MERIDIAN_AGGREGATOR is active (c->aggregator
 * is then ""). Any thread; reads files (MERIDIAN_SECRET_FILE), so not for hot paths. */
int mrd__config_parse(struct mrd_agent_config *c, mrd_env_fn get, void *arg, char *why,
                      size_t why_len);

#endif
