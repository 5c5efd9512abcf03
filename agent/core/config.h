/* Agent configuration from the environment (internal to the agent core).
 *
 * Parsing is a pure function over a lookup callback so tests can feed it any environment;
 * agent.c calls it once, with getenv, at the first mrd_agent_start().
 */
#ifndef MRD_AGENT_CONFIG_H
#define MRD_AGENT_CONFIG_H

#include <stddef.h>

#include "agent.h"

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
