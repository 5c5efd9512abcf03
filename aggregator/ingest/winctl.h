/* meridian ingest, window control: the windows of steps the aggregator asks every rank to
 * capture in full detail (on demand, a trigger, a delay), chosen from the step counters the
 * agents report in their clock probes.
 *
 * Where it sits: owned by the ingest loop. conn.c hands every ClockProbe's step info in
 * (mrd_winctl_report, mrd_winctl_report_profiler) and copies the active requests into
 * every ClockReply (mrd_winctl_active); control.c opens on-demand windows (mrd_winctl_open); the
 * loop's tick expires requests and fires the delayed window (mrd_winctl_tick). No sockets, no
 * protobuf, no clock of its own: every call gets the loop's monotonic time in ms.
 *
 * The rules (aggregator/daemon --help says them to users):
 *  - per rank: the highest steps_begun reported and its last MRD_WINCTL_HISTORY step times;
 *    at most max_ranks ranks (reports of others are ignored and counted). A probe's
 *    last_step_ns (its last completed step) is a sample when non-zero (about one per
 *    probe round per rank): the step in progress at a probe decides which step is
 *    sampled, not the sampled step's own length, so the median is not pulled up by slow
 *    steps; longest_step_ns (the longest since the previous probe) is what the trigger
 *    tests, so a slow step is not missed between probes;
 *  - the median step time is over every sample held (all ranks' recent steps); for the
 *    trigger it is recomputed after every max(1, n / 64) new samples (n = samples held), so
 *    a sample costs ~64 element moves; a window's choice always recomputes it;
 *  - a window of L steps starts at first = (highest steps_begun of any rank) + margin,
 *    margin = max(cfg.margin, ceil(2 x probe_interval / median step time)): every rank,
 *    even one that reported a probe interval ago and sees the reply a probe interval
 *    later, has not begun that step yet. last = first + L - 1;
 *  - at most MRD_WINDOW_REQUESTS_MAX requests are active; a new one is refused while the
 *    list is full. A request is active (sent in every ClockReply) until every live rank
 *    that reported steps has reported steps_begun > last + 1 (its window detached), or
 *    for cfg.ttl_ms. A rank not heard from for max(30 s, 20 probe intervals) is not
 *    waited for;
 *  - trigger (cfg.trigger_factor > 0): a new sample over factor x the median of at least
 *    MRD_WINCTL_TRIGGER_MIN samples opens a TRIGGER window of trigger_length steps,
 *    unless a trigger window opened less than trigger_cooldown steps (of the highest step
 *    counter) ago;
 *  - delay (cfg.delay_ms > 0): delay_ms after the first report of a step, once a step time
 *    is known, one DELAY window of ceil(duration / median step time) steps (at least 1).
 *  - profiler API (ClockProbe.profiler_*: the application's cudaProfilerStart/Stop, counted
 *    by each agent; starts and stops alternate): a rank reporting more starts than the
 *    most any rank had reported when the previous profiler_api window opened, while none
 *    is open, opens a PROFILER_API window with first by the rule above (once a step is
 *    known and a request slot is free; until then the start waits) and last = first +
 *    MRD_WINCTL_LENGTH_MAX - 1: open-ended, at most that many steps (the run's end comes
 *    first in practice). Not dropped for its ttl while open. A rank reporting as many stops
 *    as those starts closes it: last becomes max(first, highest steps_begun + margin) and
 *    the request is sent again, narrowed, under its id (the ttl counts from then). A start
 *    and its stop in one report give a window of one step at least. Repeated pairs give
 *    successive windows; ranks that call the API alike open one window per pair (a rank
 *    reporting its start after the window closed has no more starts than it).
 * Every request, its narrowing, and every refusal of a trigger or delay window, is one log
 * line.
 *
 * Workload: a probe round (8 probes) every 500 ms per rank, up to ~1024 ranks: a report is
 * O(1) plus O(n/64) amortized for the median (with a trigger); a scan over the ranks runs
 * when a window is opened, when a rank's report passes a request's end (once per rank
 * and request) and once a second (mrd_winctl_tick). Memory: ~560 bytes per rank seen,
 * plus 8 bytes per sample held for the median's scratch. Loop thread only.
 */
#ifndef MRD_WINCTL_H
#define MRD_WINCTL_H

#include <stddef.h>
#include <stdint.h>

#define MRD_WINCTL_HISTORY     64           /* step times kept per rank */
#define MRD_WINCTL_TRIGGER_MIN 20           /* samples held before a trigger can fire */
#define MRD_WINCTL_TTL_MS      (600 * 1000) /* default life of a request: 10 minutes */
#define MRD_WINCTL_LENGTH_MAX  100000       /* steps in one window, at most */
#define MRD_WINCTL_MARGIN_MAX  1000000      /* steps between the highest step and a window */

struct mrd_winctl;

struct mrd_winctl_config {
    uint32_t max_ranks;         /* ranks tracked (default 1024) */
    uint32_t margin;            /* least margin in steps (default 2; at least 1) */
    uint32_t probe_interval_ms; /* the agents' probe interval (default 500) */
    double trigger_factor;      /* 0: no trigger; else > 1 */
    uint32_t trigger_length;    /* steps (default 10) */
    uint64_t trigger_cooldown;  /* steps, taken as given (0: no cooldown; meridiand's
                                   default is 200) */
    int64_t delay_ms;           /* 0: no delayed window */
    int64_t duration_ms;        /* the delayed window's length in time (default 1000) */
    int64_t ttl_ms;             /* default MRD_WINCTL_TTL_MS */
    /* one finished line per request or refusal (no prefix, no newline); NULL: silent */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
};

struct mrd_winctl_request {
    uint64_t id;          /* 1, 2, ... */
    uint64_t first, last; /* steps, inclusive */
    int reason;           /* enum mrd_window_reason (proto/steps.h) */
    int64_t opened_ms;    /* when opened, or narrowed (the ttl counts from here) */
};

/* What mrd_winctl_open chose. */
struct mrd_winctl_choice {
    struct mrd_winctl_request req;
    uint64_t margin;   /* steps */
    uint64_t highest;  /* the highest steps_begun the choice started from */
    uint32_t ranks;    /* live ranks that reported steps */
    int64_t median_ns; /* 0: no step time reported yet */
};

/* Creates the state (zero fields of cfg take their defaults; cfg is copied). Returns 0 and
 * *out (free with mrd_winctl_free), -EINVAL (trigger_factor in (0, 1], margin over
 * MRD_WINCTL_MARGIN_MAX, a length over MRD_WINCTL_LENGTH_MAX) or -ENOMEM. */
int mrd_winctl_new(const struct mrd_winctl_config *cfg, struct mrd_winctl **out);

/* Frees everything; accepts NULL. */
void mrd_winctl_free(struct mrd_winctl *w);

/* A ClockProbe of `rank` said steps_begun, last_step_ns (its last completed step: the
 * step-time samples, the median and the margin come from these) and longest_step_ns (the
 * longest step since its previous probe, 0 = none or an agent that does not send it: the
 * trigger tests it, else last_step_ns), all 0: nothing known, which still counts as hearing
 * from the rank. Records them, may open a TRIGGER or DELAY window (logged), and drops
 * requests this report completes. Never fails: a rank over max_ranks, or a history sample
 * that finds no memory, is counted and ignored. */
void mrd_winctl_report(struct mrd_winctl *w, uint32_t rank, uint64_t steps_begun,
                       int64_t last_step_ns, int64_t longest_step_ns, int64_t now_ms);

/* A ClockProbe of `rank` said its application's profiler API calls: effective starts and
 * stops so far and its step counter at the latest of each (all 0: none; conn.c calls this
 * only when starts is non-zero). Opens or narrows a PROFILER_API window by the rule above
 * (logged). Counts with more stops than starts are ignored. Call after mrd_winctl_report of
 * the same probe. Never fails. */
void mrd_winctl_report_profiler(struct mrd_winctl *w, uint32_t rank, uint64_t starts,
                                uint64_t start_step, uint64_t stops, uint64_t stop_step,
                                int64_t now_ms);

/* Opens a window of `length` steps (1..MRD_WINCTL_LENGTH_MAX) for `reason`, chosen by the
 * rule above; `cause` (may be NULL) ends the log line ("asked by meridian window").
 * Returns 0 with *out filled (may be NULL) and one log line; or, with why[] saying so for
 * a user: -EAGAIN (MRD_WINDOW_REQUESTS_MAX requests active), -ENODATA (no rank has
 * reported a step yet), -EINVAL (length out of range, or the window would pass
 * MRD_WINDOW_STEP_MAX). A refusal is not logged here (the caller decides). */
int mrd_winctl_open(struct mrd_winctl *w, int reason, uint64_t length, const char *cause,
                    int64_t now_ms, struct mrd_winctl_choice *out, char *why, size_t why_len);

/* A trigger from outside the step times (the collective-skew tracker, skew.h): opens a
 * TRIGGER window of trigger_length steps by the rule above (first = highest steps_begun +
 * margin), under the step trigger's cooldown, which both share: no trigger window of
 * either kind within trigger_cooldown steps (of the highest step counter) of the last.
 * `cause` ends the log line. Returns 0 (opened, one log line, *out filled when not NULL),
 * -EALREADY (cooling down: silent), or mrd_winctl_open's refusal (one log line; a
 * repeated refusal for a full list said once until a slot frees, for want of any step
 * reported said once in all). Loop thread. */
int mrd_winctl_trigger(struct mrd_winctl *w, const char *cause, int64_t now_ms,
                       struct mrd_winctl_choice *out);

/* Once a second or so: drops requests past their ttl or completed by ranks that went
 * silent, and opens the delayed window when it is due. */
void mrd_winctl_tick(struct mrd_winctl *w, int64_t now_ms);

/* The active requests, oldest first: returns their number (<= MRD_WINDOW_REQUESTS_MAX)
 * and *reqs pointing at w's array (valid until the next call that changes w). */
size_t mrd_winctl_active(const struct mrd_winctl *w, const struct mrd_winctl_request **reqs);

/* The median of every step time held (exact, recomputed now; 0 when none) and the number
 * of samples held (may be NULL). For logs and tests. */
int64_t mrd_winctl_median(struct mrd_winctl *w, size_t *samples);

/* Reports ignored since the start: ranks over max_ranks, samples lost to allocation. */
uint64_t mrd_winctl_ignored(const struct mrd_winctl *w);

#endif
