/* The agent's transport: the single background flusher thread (internal to the agent).
 *
 * agent/core starts it once the agent is active and stops it on the exit path. The thread
 * drains the per-thread rings, builds batches, keeps unacknowledged batch frames in a
 * bounded queue, talks to meridiand (data connection + clock-probe connection) and, on
 * request, flushes everything within a deadline and says goodbye. See flusher.c.
 */
#ifndef MRD_AGENT_TRANSPORT_H
#define MRD_AGENT_TRANSPORT_H

#include <stdint.h>

#include "config.h"

/* What became of the Goodbye (mrd_transport_stats.goodbye). */
enum {
    MRD_TX_GOODBYE_NONE = 0,  /* not sent (record-only, never connected, or not yet) */
    MRD_TX_GOODBYE_UNACKED,   /* sent to an aggregator that acknowledges goodbyes, but its
                                 Ack{goodbye} did not come before the deadline */
    MRD_TX_GOODBYE_ACKED,     /* committed by the aggregator (Ack{goodbye} received) */
    MRD_TX_GOODBYE_SENT_ONLY, /* sent to an older aggregator that never acknowledges one */
};

/* Totals for the exit line and for tests. */
struct mrd_transport_stats {
    uint64_t events_acked; /* events in batches the aggregator acknowledged (or recorded,
                              in record-only mode) */
    uint64_t batches_acked;
    uint64_t batches_sent;   /* distinct batches written to a socket at least once */
    uint64_t batches_resent; /* batches written again after a reconnect */
    uint64_t bytes_sent;     /* every byte written to the data connection */
    uint64_t events_queued;  /* events in batches still waiting for an ack */
    uint64_t clock_samples;  /* completed clock probes */
    uint64_t connects;       /* accepted data-connection hellos */
    int finished;            /* the flusher completed its exit flush */
    int goodbye;             /* MRD_TX_GOODBYE_*: what became of the Goodbye */
    int record_only;         /* no aggregator: frames only go to the record file */
    char last_error[128];    /* why the aggregator was not reachable, "" if it was */
};

/* Starts the flusher thread (all signals blocked, named "meridian") for the configuration
 * *cfg, which must stay valid for the life of the process. Called once by the agent core.
 * Returns 0, or a negative errno (the agent then stays inert). */
int mrd__transport_start(const struct mrd_agent_config *cfg);

/* Asks the flusher to drain, send, wait for acks until deadline_ns (CLOCK_MONOTONIC ns),
 * say goodbye and stop; waits for it until deadline_ns plus a small margin. Returns 0 when
 * the flusher finished, -ETIMEDOUT if it did not (its last totals are still reported).
 * Any thread, once. */
int mrd__transport_stop(int64_t deadline_ns);

/* Copies the current totals (any thread, any time). */
void mrd__transport_stats(struct mrd_transport_stats *s);

/* Fork child: forget the parent's flusher and close its descriptors. Async-signal-safe. */
void mrd__transport_atfork_child(void);

#endif
