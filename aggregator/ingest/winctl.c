/* meridian ingest, window control (winctl.h has the rules and the workload).
 *
 * Layout: ranks are kept in a dense array (scans) and found through an open-addressing
 * table of indexes (reports); neither shrinks, both are capped by cfg.max_ranks, so memory
 * is bounded by the ranks of the run. Each rank keeps a ring of MRD_WINCTL_HISTORY step
 * times; the median is a quickselect over a scratch copy of every ring (grown as samples
 * arrive, at most max_ranks x MRD_WINCTL_HISTORY values). Requests are a fixed array of
 * MRD_WINDOW_REQUESTS_MAX, oldest first.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "steps.h"
#include "winctl.h"

#define STALE_MIN_MS 30000 /* a rank silent this long (or 20 probe intervals) is not waited for */

struct rank_state {
    uint32_t rank;
    uint64_t begun;  /* highest steps_begun reported */
    int64_t seen_ms; /* last report */
    uint32_t n, pos; /* samples held; next slot of hist */
    int64_t hist[MRD_WINCTL_HISTORY];
};

struct mrd_winctl {
    struct mrd_winctl_config cfg;
    struct rank_state *ranks; /* nranks of cfg.max_ranks */
    uint32_t nranks;
    uint32_t *index; /* icap slots: rank index + 1, 0 = free */
    uint32_t icap;   /* a power of two >= 2 x max_ranks */
    int64_t stale_ms;
    uint64_t highest;      /* highest steps_begun of any rank */
    int64_t first_step_ms; /* first report of a step (-1: none yet) */
    size_t nsamples;       /* samples held, all ranks */
    size_t since_median;   /* samples added since the median was computed */
    int64_t median;        /* last computed (0: none) */
    int64_t *scratch;
    size_t scratch_cap;
    struct mrd_winctl_request req[MRD_WINDOW_REQUESTS_MAX];
    size_t nreq;
    uint64_t next_id;
    int trigger_opened; /* a trigger window was opened at highest == trigger_at */
    uint64_t trigger_at;
    int trigger_full_logged; /* a trigger refused for a full list was said (until a slot frees) */
    int trigger_nodata_logged; /* mrd_winctl_trigger refused for want of steps was said */
    int delay_done, delay_waiting;
    uint64_t ignored;
    int overflow_logged;
    /* profiler API windows (the application's cudaProfilerStart/Stop; "profiler API" below) */
    uint64_t api_starts; /* the most starts a rank had reported when the latest window opened */
    uint64_t api_id;     /* the open-ended profiler_api request, 0: none */
    int api_pending;     /* a start waits for a step counter or a free request slot */
    int api_wait_logged; /* the wait was said */
    uint32_t api_rank;   /* the rank whose start opened (or waits to open) the window */
    uint64_t api_step;   /* its step counter at that start */
};

static void say(struct mrd_winctl *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct mrd_winctl *w, const char *fmt, ...)
{
    if (!w->cfg.log)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    w->cfg.log(w->cfg.log_ctx, line);
}

int mrd_winctl_new(const struct mrd_winctl_config *cfg, struct mrd_winctl **out)
{
    *out = NULL;
    struct mrd_winctl_config c = cfg ? *cfg : (struct mrd_winctl_config){0};
    if (!c.max_ranks)
        c.max_ranks = 1024;
    if (!c.margin)
        c.margin = 2;
    if (!c.probe_interval_ms)
        c.probe_interval_ms = 500;
    if (!c.trigger_length)
        c.trigger_length = 10;
    if (!c.duration_ms)
        c.duration_ms = 1000;
    if (!c.ttl_ms)
        c.ttl_ms = MRD_WINCTL_TTL_MS;
    if ((c.trigger_factor != 0 && !(c.trigger_factor > 1.0)) || c.margin > MRD_WINCTL_MARGIN_MAX ||
        c.trigger_length > MRD_WINCTL_LENGTH_MAX || c.max_ranks > (1u << 24) || c.delay_ms < 0 ||
        c.duration_ms < 0)
        return -EINVAL;
    struct mrd_winctl *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->cfg = c;
    w->icap = 16;
    while (w->icap < 2 * c.max_ranks)
        w->icap *= 2;
    w->index = calloc(w->icap, sizeof(*w->index));
    if (!w->index) {
        free(w);
        return -ENOMEM;
    }
    w->stale_ms = 20 * (int64_t)c.probe_interval_ms;
    if (w->stale_ms < STALE_MIN_MS)
        w->stale_ms = STALE_MIN_MS;
    w->first_step_ms = -1;
    w->next_id = 1;
    *out = w;
    return 0;
}

void mrd_winctl_free(struct mrd_winctl *w)
{
    if (w)
        MRD_ARRAY_FREE_ALL(w->ranks, w->index, w->scratch, w);
}

/* ---- ranks ---- */

static uint32_t slot_of(const struct mrd_winctl *w, uint32_t rank)
{
    return (uint32_t)((rank * 2654435761u) & (w->icap - 1));
}

/* The rank's state, created on first sight; NULL when max_ranks are tracked already or
 * memory is short. */
static struct rank_state *rank_get(struct mrd_winctl *w, uint32_t rank)
{
    uint32_t s = slot_of(w, rank);
    while (w->index[s]) {
        struct rank_state *r = &w->ranks[w->index[s] - 1];
        if (r->rank == rank)
            return r;
        s = (s + 1) & (w->icap - 1);
    }
    if (w->nranks >= w->cfg.max_ranks)
        return NULL;
    if (!w->ranks) { /* all at once on the first report: max_ranks x ~560 bytes */
        w->ranks = calloc(w->cfg.max_ranks, sizeof(*w->ranks));
        if (!w->ranks)
            return NULL;
    }
    struct rank_state *r = &w->ranks[w->nranks];
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    w->index[s] = ++w->nranks;
    return r;
}

static int rank_live(const struct mrd_winctl *w, const struct rank_state *r, int64_t now)
{
    return r->begun > 0 && now - r->seen_ms <= w->stale_ms;
}

/* ---- the median ---- */

static void swap64(int64_t *a, int64_t *b)
{
    int64_t t = *a;
    *a = *b;
    *b = t;
}

/* The k-th smallest of v[0..n) (k < n); reorders v. Quickselect with a three-way
 * partition around a median-of-three pivot (equal values, common here, end it at once). */
static int64_t select_kth(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* k is in [lo, hi) */
    while (hi - lo > 1) {
        int64_t a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi - 1];
        int64_t pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t lt = lo, i = lo, gt = hi; /* [lo,lt) < pivot, [lt,i) == pivot, [gt,hi) > */
        while (i < gt) {
            if (v[i] < pivot)
                swap64(&v[lt++], &v[i++]);
            else if (v[i] > pivot)
                swap64(&v[i], &v[--gt]);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return v[k];
}

/* Recomputes the median of every sample held (element n/2 of the sorted samples). Keeps
 * the previous value when the scratch cannot grow. */
static void median_update(struct mrd_winctl *w)
{
    if (w->nsamples == 0) {
        w->median = 0;
        w->since_median = 0;
        return;
    }
    if (w->scratch_cap < w->nsamples) {
        size_t cap = w->scratch_cap ? w->scratch_cap : 256;
        while (cap < w->nsamples)
            cap *= 2;
        int64_t *nb = realloc(w->scratch, cap * sizeof(*nb));
        if (!nb)
            return;
        w->scratch = nb;
        w->scratch_cap = cap;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < w->nranks; i++) {
        memcpy(w->scratch + n, w->ranks[i].hist, w->ranks[i].n * sizeof(int64_t));
        n += w->ranks[i].n;
    }
    w->median = select_kth(w->scratch, n, n / 2);
    w->since_median = 0;
}

int64_t mrd_winctl_median(struct mrd_winctl *w, size_t *samples)
{
    median_update(w);
    if (samples)
        *samples = w->nsamples;
    return w->median;
}

uint64_t mrd_winctl_ignored(const struct mrd_winctl *w)
{
    return w->ignored;
}

/* ---- requests ---- */

size_t mrd_winctl_active(const struct mrd_winctl *w, const struct mrd_winctl_request **reqs)
{
    *reqs = w->req;
    return w->nreq;
}

static void drop_request(struct mrd_winctl *w, size_t i)
{
    memmove(&w->req[i], &w->req[i + 1], (w->nreq - i - 1) * sizeof(w->req[0]));
    w->nreq--;
    w->trigger_full_logged = 0;
}

/* 1 when every live rank that reported steps began a step after q's detach step, i.e.
 * reported steps_begun > last + 1 (vacuously so when none is live). *late: a rank that is
 * not past it (NULL when none). */
static int request_done(const struct mrd_winctl *w, const struct mrd_winctl_request *q, int64_t now,
                        const struct rank_state **late)
{
    *late = NULL;
    for (uint32_t i = 0; i < w->nranks; i++) {
        const struct rank_state *r = &w->ranks[i];
        if (rank_live(w, r, now) && r->begun <= q->last + 1) {
            *late = r;
            return 0;
        }
    }
    return 1;
}

/* Drops the requests done (all; or, with r, only those r's report from `old` crossed). */
static void prune(struct mrd_winctl *w, const struct rank_state *r, uint64_t old, int64_t now)
{
    const struct rank_state *late;
    for (size_t i = 0; i < w->nreq;) {
        const struct mrd_winctl_request *q = &w->req[i];
        int crossed = !r || (old <= q->last + 1 && r->begun > q->last + 1);
        if (crossed && request_done(w, q, now, &late))
            drop_request(w, i);
        else
            i++;
    }
}

static uint32_t live_ranks(const struct mrd_winctl *w, int64_t now)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->nranks; i++)
        n += rank_live(w, &w->ranks[i], now);
    return n;
}

/* The margin of the rule in winctl.h, with mwhy[] saying how it was chosen. Recomputes
 * the median. */
static uint64_t choose_margin(struct mrd_winctl *w, char *mwhy, size_t mwhy_len)
{
    median_update(w);
    uint64_t margin = w->cfg.margin;
    if (w->median > 0) {
        /* ceil(2 x interval / median), in integers: interval ms -> ns */
        uint64_t num = 2ull * w->cfg.probe_interval_ms * 1000000ull, den = (uint64_t)w->median;
        uint64_t m = num / den + (num % den != 0);
        if (m > margin)
            margin = m > MRD_WINCTL_MARGIN_MAX ? MRD_WINCTL_MARGIN_MAX : m;
        snprintf(mwhy, mwhy_len,
                 "the larger of the least margin %u and 2 x %u ms probe interval / median step "
                 "%.3f ms = %llu",
                 w->cfg.margin, w->cfg.probe_interval_ms, (double)w->median / 1e6,
                 (unsigned long long)m);
    } else {
        snprintf(mwhy, mwhy_len, "the least margin %u: no step time reported yet", w->cfg.margin);
    }
    return margin;
}

int mrd_winctl_open(struct mrd_winctl *w, int reason, uint64_t length, const char *cause,
                    int64_t now_ms, struct mrd_winctl_choice *out, char *why, size_t why_len)
{
    char mwhy[160];
    if (length < 1 || length > MRD_WINCTL_LENGTH_MAX) {
        snprintf(why, why_len, "a window of %llu steps: the length must be 1 to %d steps",
                 (unsigned long long)length, MRD_WINCTL_LENGTH_MAX);
        return -EINVAL;
    }
    if (w->highest == 0) {
        snprintf(why, why_len,
                 "no rank has reported a step yet: is the job in the steady tier, with "
                 "NVTX step ranges or steps counted from a collective "
                 "(MERIDIAN_STEP_COLLECTIVE)?");
        return -ENODATA;
    }
    if (w->nreq >= MRD_WINDOW_REQUESTS_MAX) {
        snprintf(why, why_len,
                 "%d window requests are active, the most the agents keep (the oldest, id "
                 "%llu, steps %llu-%llu): try again once a rank-wide window has passed",
                 MRD_WINDOW_REQUESTS_MAX, (unsigned long long)w->req[0].id,
                 (unsigned long long)w->req[0].first, (unsigned long long)w->req[0].last);
        return -EAGAIN;
    }
    uint64_t margin = choose_margin(w, mwhy, sizeof(mwhy));
    uint64_t first = w->highest + margin, last = first + length - 1;
    if (last > (uint64_t)MRD_WINDOW_STEP_MAX) {
        snprintf(why, why_len, "steps %llu-%llu pass the last step meridian numbers (%lld)",
                 (unsigned long long)first, (unsigned long long)last, MRD_WINDOW_STEP_MAX);
        return -EINVAL;
    }
    struct mrd_winctl_request *q = &w->req[w->nreq++];
    *q = (struct mrd_winctl_request){
        .id = w->next_id++, .first = first, .last = last, .reason = reason, .opened_ms = now_ms};
    uint32_t ranks = live_ranks(w, now_ms);
    say(w,
        "window %llu (%s): steps %llu-%llu (%llu steps) = highest step counter %llu (of %u "
        "rank%s) + margin %llu (%s)%s%s",
        (unsigned long long)q->id, mrd_window_reason_name(reason), (unsigned long long)first,
        (unsigned long long)last, (unsigned long long)length, (unsigned long long)w->highest, ranks,
        ranks == 1 ? "" : "s", (unsigned long long)margin, mwhy, cause ? "; " : "",
        cause ? cause : "");
    if (out)
        *out = (struct mrd_winctl_choice){.req = *q,
                                          .margin = margin,
                                          .highest = w->highest,
                                          .ranks = ranks,
                                          .median_ns = w->median};
    return 0;
}

/* ---- trigger and delay ---- */

static void trigger(struct mrd_winctl *w, const struct rank_state *r, int64_t step_ns,
                    int64_t median, int64_t now)
{
    char cause[256], why[256];
    if (w->trigger_opened && w->highest < w->trigger_at + w->cfg.trigger_cooldown)
        return; /* cooling down: a trigger window opened less than trigger_cooldown steps ago */
    snprintf(cause, sizeof(cause),
             "rank %u's step took %.3f ms, over %.2f x the median %.3f ms of the recent steps "
             "(%zu held)",
             r->rank, (double)step_ns / 1e6, w->cfg.trigger_factor, (double)median / 1e6,
             w->nsamples);
    int rc = mrd_winctl_open(w, MRD_WINDOW_TRIGGER, w->cfg.trigger_length, cause, now, NULL, why,
                             sizeof(why));
    if (rc == 0) {
        w->trigger_opened = 1;
        w->trigger_at = w->highest;
    } else if (rc != -EAGAIN || !w->trigger_full_logged) {
        w->trigger_full_logged = rc == -EAGAIN;
        say(w, "no trigger window (%s): %s", cause, why);
    }
}

int mrd_winctl_trigger(struct mrd_winctl *w, const char *cause, int64_t now_ms,
                       struct mrd_winctl_choice *out)
{
    char why[256];
    if (w->trigger_opened && w->highest < w->trigger_at + w->cfg.trigger_cooldown)
        return -EALREADY;
    int rc = mrd_winctl_open(w, MRD_WINDOW_TRIGGER, w->cfg.trigger_length, cause, now_ms, out,
                             why, sizeof(why));
    if (rc == 0) {
        w->trigger_opened = 1;
        w->trigger_at = w->highest;
    } else if (rc == -ENODATA) { /* a job without steps: said once, not at every skew */
        if (!w->trigger_nodata_logged)
            say(w, "no trigger window (%s): %s", cause, why);
        w->trigger_nodata_logged = 1;
    } else if (rc != -EAGAIN || !w->trigger_full_logged) {
        w->trigger_full_logged = rc == -EAGAIN;
        say(w, "no trigger window (%s): %s", cause, why);
    }
    return rc;
}

static void delay_check(struct mrd_winctl *w, int64_t now)
{
    char cause[256], why[256];
    if (!w->cfg.delay_ms || w->delay_done || w->first_step_ms < 0 ||
        now < w->first_step_ms + w->cfg.delay_ms)
        return;
    int64_t median = mrd_winctl_median(w, NULL);
    if (median <= 0)
        return; /* no step finished yet: its length in steps is not known */
    double steps = ceil((double)w->cfg.duration_ms * 1e6 / (double)median);
    uint64_t length = steps < 1                       ? 1
                      : steps > MRD_WINCTL_LENGTH_MAX ? MRD_WINCTL_LENGTH_MAX
                                                      : (uint64_t)steps;
    snprintf(cause, sizeof(cause),
             "%.3f s after the first step reported; %.3f s / median step %.3f ms",
             (double)(now - w->first_step_ms) / 1e3, (double)w->cfg.duration_ms / 1e3,
             (double)median / 1e6);
    int rc = mrd_winctl_open(w, MRD_WINDOW_DELAY, length, cause, now, NULL, why, sizeof(why));
    if (rc == -EAGAIN) {
        if (!w->delay_waiting)
            say(w, "the delayed window waits for a free request slot: %s", why);
        w->delay_waiting = 1; /* retried by the tick only */
        return;
    }
    if (rc < 0)
        say(w, "no delayed window: %s", why);
    w->delay_done = 1;
}

/* ---- profiler API windows (the rules in winctl.h) ---- */

/* Opens the window a start asked for, when a step is known and a slot is free; else it
 * keeps waiting (said once). */
static void api_open_pending(struct mrd_winctl *w, int64_t now)
{
    char cause[256], why[256];
    struct mrd_winctl_choice c;
    if (!w->api_pending)
        return;
    snprintf(cause, sizeof(cause),
             "rank %u called cudaProfilerStart/cuProfilerStart with %llu steps begun; open "
             "until a stop is reported, at most %d steps",
             w->api_rank, (unsigned long long)w->api_step, MRD_WINCTL_LENGTH_MAX);
    int rc = mrd_winctl_open(w, MRD_WINDOW_PROFILER_API, MRD_WINCTL_LENGTH_MAX, cause, now, &c, why,
                             sizeof(why));
    if (rc == 0) {
        w->api_id = c.req.id;
        w->api_pending = 0;
    } else if (rc == -EAGAIN || rc == -ENODATA) {
        if (!w->api_wait_logged)
            say(w, "the profiler_api window waits (%s): %s", cause, why);
        w->api_wait_logged = 1;
    } else {
        say(w, "no profiler_api window (%s): %s", cause, why);
        w->api_pending = 0;
    }
}

/* A stop of the window's start (or a later one) was reported by `rank` at its step
 * `step`: the open window's last step becomes max(first, highest + margin), sent again
 * under its id; a start still waiting is dropped. */
static void api_close(struct mrd_winctl *w, uint32_t rank, uint64_t step, int64_t now)
{
    char mwhy[160];
    if (w->api_pending) {
        say(w,
            "no profiler_api window: rank %u called cudaProfilerStop/cuProfilerStop with "
            "%llu steps begun, before the window of rank %u's start could open",
            rank, (unsigned long long)step, w->api_rank);
        w->api_pending = 0;
        return;
    }
    struct mrd_winctl_request *q = NULL;
    for (size_t i = 0; i < w->nreq; i++)
        if (w->req[i].id == w->api_id)
            q = &w->req[i];
    uint64_t id = w->api_id;
    w->api_id = 0;
    if (!q) {
        say(w,
            "window %llu (profiler_api) had ended already when rank %u called "
            "cudaProfilerStop/cuProfilerStop with %llu steps begun",
            (unsigned long long)id, rank, (unsigned long long)step);
        return;
    }
    uint64_t margin = choose_margin(w, mwhy, sizeof(mwhy));
    uint64_t last = w->highest + margin > q->first ? w->highest + margin : q->first;
    if (last < q->last) {
        q->last = last;
        q->opened_ms = now; /* sent again from now on: the ttl counts from here */
    }
    say(w,
        "window %llu (profiler_api) narrowed: steps %llu-%llu (%llu steps); last = the larger "
        "of its first step %llu and highest step counter %llu + margin %llu (%s); rank %u "
        "called cudaProfilerStop/cuProfilerStop with %llu steps begun",
        (unsigned long long)q->id, (unsigned long long)q->first, (unsigned long long)q->last,
        (unsigned long long)(q->last - q->first + 1), (unsigned long long)q->first,
        (unsigned long long)w->highest, (unsigned long long)margin, mwhy, rank,
        (unsigned long long)step);
}

void mrd_winctl_report_profiler(struct mrd_winctl *w, uint32_t rank, uint64_t starts,
                                uint64_t start_step, uint64_t stops, uint64_t stop_step,
                                int64_t now_ms)
{
    if (stops > starts)
        return; /* alternating counts never say this: not an agent's report */
    int active = w->api_id || w->api_pending;
    if (active && stops >= w->api_starts)
        api_close(w, rank, stop_step, now_ms);
    if (starts > w->api_starts && !w->api_id && !w->api_pending) {
        w->api_starts = starts;
        w->api_pending = 1;
        w->api_wait_logged = 0;
        w->api_rank = rank;
        w->api_step = start_step;
        api_open_pending(w, now_ms);
        if (stops >= starts) /* its stop came in the same report: a window of its own */
            api_close(w, rank, stop_step, now_ms);
    }
    api_open_pending(w, now_ms);
}

/* ---- reports ---- */

void mrd_winctl_report(struct mrd_winctl *w, uint32_t rank, uint64_t steps_begun,
                       int64_t last_step_ns, int64_t longest_step_ns, int64_t now_ms)
{
    struct rank_state *r = rank_get(w, rank);
    if (!r) {
        w->ignored++;
        if (!w->overflow_logged)
            say(w, "rank %u's steps ignored: %u ranks are tracked already (the most)", rank,
                w->cfg.max_ranks);
        w->overflow_logged = 1;
        return;
    }
    r->seen_ms = now_ms;
    uint64_t old = r->begun;
    if (steps_begun > r->begun) {
        r->begun = steps_begun;
        if (steps_begun > w->highest)
            w->highest = steps_begun;
        if (w->first_step_ms < 0)
            w->first_step_ms = now_ms;
    }
    /* a step time: each probe's last completed step (unbiased: the median and the margin
     * rest on it); the trigger tests the longest step since the previous probe, so that a
     * slow step followed by fast ones before the probe is still seen */
    int is_new = last_step_ns > 0;
    int64_t tested = longest_step_ns > 0 ? longest_step_ns : last_step_ns;
    int fire = 0;
    int64_t median = 0;
    if (is_new) {
        if (w->cfg.trigger_factor > 0 && w->nsamples >= MRD_WINCTL_TRIGGER_MIN) {
            size_t every = w->nsamples / 64 ? w->nsamples / 64 : 1;
            if (w->since_median >= every || w->median == 0)
                median_update(w);
            median = w->median;
            fire = median > 0 && (double)tested > w->cfg.trigger_factor * (double)median;
        }
        if (r->n < MRD_WINCTL_HISTORY) {
            r->n++;
            w->nsamples++;
        }
        r->hist[r->pos] = last_step_ns;
        r->pos = (r->pos + 1) % MRD_WINCTL_HISTORY;
        w->since_median++;
    }
    if (r->begun > old && w->nreq)
        prune(w, r, old, now_ms);
    if (fire)
        trigger(w, r, tested, median, now_ms);
    if (!w->delay_waiting)
        delay_check(w, now_ms);
}

void mrd_winctl_tick(struct mrd_winctl *w, int64_t now_ms)
{
    const struct rank_state *late;
    for (size_t i = 0; i < w->nreq;) {
        const struct mrd_winctl_request *q = &w->req[i];
        if (request_done(w, q, now_ms, &late)) {
            drop_request(w, i);
            continue;
        }
        if (q->id != w->api_id && now_ms - q->opened_ms >= w->cfg.ttl_ms) {
            say(w,
                "window %llu (%s, steps %llu-%llu) no longer sent after %lld s: rank %u "
                "has reported only %llu steps begun",
                (unsigned long long)q->id, mrd_window_reason_name(q->reason),
                (unsigned long long)q->first, (unsigned long long)q->last,
                (long long)(now_ms - q->opened_ms) / 1000, late->rank,
                (unsigned long long)late->begun);
            drop_request(w, i);
            continue;
        }
        i++;
    }
    delay_check(w, now_ms);
    api_open_pending(w, now_ms);
}
