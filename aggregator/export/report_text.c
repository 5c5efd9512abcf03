/* The text report: what `meridian report DB` and `meridian profile` print.
 *
 * Where it sits: export stage; renders a struct mrd_analysis, touching no database.
 * Sections, always in this order and always present (an empty section says why):
 * run, ranks, events per kind, dropped events, clock models, collectives, overlap,
 * stragglers, steps, the why sections (report_why.c), findings (report_findings.c),
 * warnings; and before the clock models, only when the run had capture windows (the
 * steady tier), the windows. After the ranks, only when the database holds environment
 * fingerprints: the environment (report_env.c). Output size is O(ranks + min(steps, 50)).
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report_env.h"
#include "report_int.h"
#include "report_findings.h"
#include "report_why.h"

#define MAX_STEP_LINES 50

static const char *const kind_short[MRD_AN_NKINDS] = {
    "kernel", "memcpy",  "memset",  "sync", "api",   "graph",  "extcorr",
    "nvtx",   "nccl_op", "nccl_ch", "mpi",  "clock", "gpuclk",
};

const char *mrd_export_fmt_ns(char *buf, size_t n, int64_t ns)
{
    double v = (double)ns;
    double av = v < 0 ? -v : v;
    if (av < 1e3)
        snprintf(buf, n, "%" PRId64 " ns", ns);
    else if (av < 1e6)
        snprintf(buf, n, "%.1f us", v / 1e3);
    else if (av < 1e9)
        snprintf(buf, n, "%.2f ms", v / 1e6);
    else
        snprintf(buf, n, "%.3f s", v / 1e9);
    return buf;
}

void mrd__report_time(char *buf, size_t n, int64_t realtime_ns)
{
    time_t t = (time_t)(realtime_ns / 1000000000);
    struct tm tm;
    if (realtime_ns <= 0 || !gmtime_r(&t, &tm)) {
        snprintf(buf, n, "unknown");
        return;
    }
    strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* The upper edge of the histogram bin holding quantile q (at most the largest skew), in
 * ns; -1 without data. */
int64_t mrd__report_quantile(const struct mrd_analysis *a, double q)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < MRD_AN_HIST_BINS; i++)
        total += a->skew_hist[i];
    if (total == 0)
        return -1;
    uint64_t target = (uint64_t)(q * (double)total + 0.5);
    if (target < 1)
        target = 1;
    for (int i = 0; i < MRD_AN_HIST_BINS; i++) {
        seen += a->skew_hist[i];
        if (seen >= target) { /* bin i holds [2^(i-1), 2^i) us; never above the max */
            int64_t edge = (int64_t)1000 << i;
            return edge < a->skew_max_ns ? edge : a->skew_max_ns;
        }
    }
    return a->skew_max_ns;
}

/* The capture steps' part of the "not ranked" sentence, appended at buf + k. */
static void capture_steps_note(const struct mrd_analysis *a, char *buf, size_t n, int k)
{
    char b1[32];
    if (!a->capture_steps || k < 0 || (size_t)k >= n)
        return;
    snprintf(buf + k, n - (size_t)k,
             "%s%" PRIu64 " instance(s) in capture steps (a rank attached or detached CUPTI "
             "for a window there) cost %s",
             k ? "; " : "not ranked: ", a->capture_steps,
             mrd_export_fmt_ns(b1, sizeof(b1), a->capture_steps_cost_ns));
}

void mrd__report_outside_steps(const struct mrd_analysis *a, char *buf, size_t n)
{
    char b1[32];
    buf[0] = '\0';
    if (!a->ranked_in_steps || !a->outside_steps) {
        capture_steps_note(a, buf, n, 0);
        return;
    }
    /* who caused the wait outside the steps: the rank with the most, by difference */
    const struct mrd_an_rank *top = NULL;
    int64_t top_ns = 0;
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        if (r->wait_caused_ns - r->in_steps.caused_ns > top_ns) {
            top = r;
            top_ns = r->wait_caused_ns - r->in_steps.caused_ns;
        }
    }
    int k = snprintf(buf, n,
                     "not ranked: %" PRIu64 " instance(s) outside the steps (warm-up, start-up, "
                     "teardown) cost %s",
                     a->outside_steps, mrd_export_fmt_ns(b1, sizeof(b1), a->outside_steps_cost_ns));
    if (top && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", the most of it caused by rank %d", top->rank);
    capture_steps_note(a, buf, n, k);
}

/* What the cross-rank sections say for a run of fewer than two ranks (instead of empty
 * tables or a "top straggler" that arrived last 0 times). */
static const char ONE_RANK[] =
    "cross-rank analysis (matching, arrival skew, stragglers) needs two or more ranks; this "
    "run has fewer";

static void section(FILE *f, const char *title)
{
    fprintf(f, "\n== %s\n", title);
}

/* A time of the analysis as the outputs show it: milliseconds after the time origin. */
static const char *fmt_at(char *buf, size_t n, const struct mrd_analysis *a, int64_t t)
{
    snprintf(buf, n, "%.3f ms", (double)(t - a->time_origin_ns) / 1e6);
    return buf;
}

static void print_run(FILE *f, const struct mrd_analysis *a)
{
    char t[64];
    int fitted = 0;
    for (int i = 0; i < a->nranks; i++)
        fitted += a->ranks[i].clock_fitted;
    mrd__report_time(t, sizeof(t), a->created_ns);
    fprintf(f, "meridian report: run %s\n", a->run_id[0] ? a->run_id : "(no runs row)");
    fprintf(f, "  created %s, world size %" PRId64 ", %d rank(s) in the database\n", t,
            a->world_size, a->nranks);
    if (a->command[0])
        fprintf(f, "  command: %s\n", a->command);
    fprintf(f, "  timebase: %s (clock models for %d of %d ranks)\n",
            a->global_timebase ? "global (aggregator clock, aligned per rank)"
                               : "LOCAL clocks of each rank (not aligned)",
            fitted, a->nranks);
    /* every "at" below, and the Perfetto export's times, count from this origin */
    if (a->global_timebase)
        mrd__report_time(t, sizeof(t), a->time_origin_ns);
    fprintf(f, "  time origin: %s%s (%" PRId64 " ns); times \"at\" are after it\n",
            a->global_timebase ? "" : "earliest event, local clock", a->global_timebase ? t : "",
            a->time_origin_ns);
}

static void print_ranks(FILE *f, const struct mrd_analysis *a)
{
    section(f, "Ranks");
    if (a->nranks == 0) {
        fprintf(f, "  no rank has sent anything\n");
        return;
    }
    fprintf(f, "  %-5s %-24s %-8s %-5s %-7s GPUs\n", "rank", "host", "pid", "local", "goodbye");
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        fprintf(f, "  %-5d %-24.24s %-8d %-5d %-7s", r->rank, r->host[0] ? r->host : "?", r->pid,
                r->local_rank, r->goodbye ? "yes" : "NO");
        if (r->ngpus == 0)
            fprintf(f, " none reported");
        for (int g = 0; g < r->ngpus; g++)
            fprintf(f, "%s%d: %s%s%s", g ? "; " : " ", r->gpus[g].device,
                    r->gpus[g].name[0] ? r->gpus[g].name : "GPU", r->gpus[g].pci[0] ? " @" : "",
                    r->gpus[g].pci);
        if (r->ngpus_total > r->ngpus)
            fprintf(f, " (+%d more)", r->ngpus_total - r->ngpus);
        fputc('\n', f);
    }
}

static void print_events(FILE *f, const struct mrd_analysis *a)
{
    int used[MRD_AN_NKINDS] = {0}, any = 0;
    section(f, "Events stored per kind");
    fprintf(f, "  rows in the database per table; last column: events the agent says it "
               "captured (all kinds)\n");
    for (int i = 0; i < a->nranks; i++)
        for (int k = 0; k < MRD_AN_NKINDS; k++)
            if (a->ranks[i].events[k])
                used[k] = any = 1;
    if (!any) {
        fprintf(f, "  no events stored\n");
        return;
    }
    fprintf(f, "  %-5s", "rank");
    for (int k = 0; k < MRD_AN_NKINDS; k++)
        if (used[k])
            fprintf(f, " %10s", kind_short[k]);
    fprintf(f, " %18s\n", "agent's own count");
    for (int i = 0; i < a->nranks; i++) {
        fprintf(f, "  %-5d", a->ranks[i].rank);
        for (int k = 0; k < MRD_AN_NKINDS; k++)
            if (used[k])
                fprintf(f, " %10" PRIu64, a->ranks[i].events[k]);
        fprintf(f, " %18" PRIu64 "\n", a->ranks[i].captured_total);
    }
}

static void print_drops(FILE *f, const struct mrd_analysis *a)
{
    uint64_t total = 0;
    section(f, "Dropped events per rank (as counted by the agents)");
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        total += r->dropped_total;
        fprintf(f, "  rank %-5d ", r->rank);
        if (r->dropped_total == 0)
            fprintf(f, "0 dropped");
        for (int d = 0; d < r->ndrops; d++)
            fprintf(f, "%s%s %" PRIu64, d ? ", " : "", r->drops[d].reason, r->drops[d].n);
        if (r->ndrops)
            fprintf(f, " (total %" PRIu64 ")", r->dropped_total);
        if (!r->goodbye)
            fprintf(f, "  [no goodbye: the agent's final counts may be missing]");
        fputc('\n', f);
    }
    fprintf(f,
            "  all ranks: %" PRIu64 " dropped; aggregator: %" PRIu64
            " duplicate batches dropped, %" PRIu64 " connections rejected\n",
            total, a->duplicates, a->rejected);
}

/* The agent's own cost, when the agents reported it: their sampled callback time scaled
 * up (one callback in 64 is timed), and CUPTI's own overhead records. */
static void print_cost(FILE *f, const struct mrd_analysis *a)
{
    int any = 0;
    for (int i = 0; i < a->nranks; i++)
        any |= a->ranks[i].has_cost;
    if (!any)
        return;
    section(f, "The agent's own cost per rank (NVTX and NCCL callbacks sampled 1 in 64)");
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        if (!r->has_cost)
            continue;
        fprintf(f, "  rank %-5d ~%" PRIu64 " callbacks, ~%.3f ms in them", r->rank,
                r->cost_calls_est, (double)r->cost_sampled_ns * 64 / 1e6);
        if (r->cost_samples)
            fprintf(f, " (%" PRIu64 " timed, mean %.0f ns)", r->cost_samples,
                    (double)r->cost_sampled_ns / (double)r->cost_samples);
        if (r->has_cupti_overhead)
            fprintf(f, "; CUPTI's own overhead %.3f ms", (double)r->cupti_overhead_ns / 1e6);
        else
            fprintf(f, "; CUPTI's own overhead not recorded");
        if (r->cupti_pace_waits) /* CUPTI's thread held its buffer: the ring was full */
            fprintf(f, "; waited for ring space %" PRIu64 " times, %.3f ms", r->cupti_pace_waits,
                    (double)r->cupti_pace_wait_ns / 1e6);
        fputc('\n', f);
    }
    fprintf(f, "  CUPTI attach and detach costs are in the capture windows section.\n");
}

/* "10-19, 40-49" (the listed windows), "+N more" for the rest. */
static void window_ranges(char *buf, size_t n, const struct mrd_an_windows *w)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < w->nranges && k < n; i++) {
        int m = w->ranges[i][0] == w->ranges[i][1]
                    ? snprintf(buf + k, n - k, "%s%" PRId64, i ? ", " : "", w->ranges[i][0])
                    : snprintf(buf + k, n - k, "%s%" PRId64 "-%" PRId64, i ? ", " : "",
                               w->ranges[i][0], w->ranges[i][1]);
        k += m > 0 ? (size_t)m : 0;
    }
    if (w->windows > (uint64_t)w->nranges && k < n)
        snprintf(buf + k, n - k, ", +%" PRIu64 " more", w->windows - (uint64_t)w->nranges);
}

/* ns as ms with `decimals` places, "-" when negative (not recorded). */
static void fmt_ms(char *buf, size_t n, int64_t ns, int decimals)
{
    if (ns < 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.*f ms", decimals, (double)ns / 1e6);
}

/* Only for runs with windows: the steady tier's attach/detach cost and what the
 * overlap and straggler figures are computed from. */
static void print_windows(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32], b3[32], steps[160];
    if (a->nwindow_ranks == 0)
        return;
    section(f, "Capture windows (CUPTI attached only for these steps)");
    fprintf(f, "  %-5s %8s %8s %10s %11s %11s %11s  %s\n", "rank", "windows", "steps", "kernels",
            "attach p50", "close mean", "detach p50", "steps covered");
    for (int i = 0; i < a->nwindow_ranks; i++) {
        const struct mrd_an_windows *w = &a->windows[i];
        fmt_ms(b1, sizeof(b1), w->attach_median_ns, 2);
        fmt_ms(b2, sizeof(b2), w->close_mean_ns, 3); /* may be well under 1 ms */
        fmt_ms(b3, sizeof(b3), w->detach_median_ns, 2);
        window_ranges(steps, sizeof(steps), w);
        fprintf(f, "  %-5d %8" PRIu64 " %8" PRIu64 " %10" PRIu64 " %11s %11s %11s  %s", w->rank,
                w->windows, w->steps, w->kernels, b1, b2, b3, steps);
        if (w->open_at_exit)
            fprintf(f, " (%" PRIu64 " open at exit)", w->open_at_exit);
        fputc('\n', f);
    }
    fprintf(f, "  overlap figures come from the window steps only (kernels exist only there); "
               "stragglers from all steps (the NCCL plugin is on all the time)\n");
}

/* The reference of the offsets shown: the lowest rank with a model. Each offset maps a
 * rank's monotonic clock to the aggregator's wall clock, so it is epoch-sized (about the
 * time since the host booted, to 1970); what tells ranks apart is the difference. */
static const struct mrd_an_rank *clock_reference(const struct mrd_analysis *a)
{
    for (int i = 0; i < a->nranks; i++)
        if (a->ranks[i].clock_fitted)
            return &a->ranks[i];
    return NULL;
}

static void print_clock(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32];
    const struct mrd_an_rank *ref = clock_reference(a);
    section(f, "Clock models (local -> global timebase)");
    if (ref)
        fprintf(f,
                "  offsets relative to rank %d's (the reference: the lowest rank with a model), "
                "whose own offset is %+.6f s (its clock to the aggregator's wall clock)\n",
                ref->rank, (double)ref->clock_offset_ns / 1e9);
    fprintf(f, "  %-5s %-16s %-12s %-12s %-8s %-8s %-12s %s\n", "rank", "offset vs ref",
            "drift(ppm)", "error bound", "segments", "samples", "causal shift", "method");
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        if (!r->clock_fitted) {
            fprintf(f, "  %-5d not fitted\n", r->rank);
            continue;
        }
        char b3[32] = "-";
        if (r->clock_adjusted)
            mrd_export_fmt_ns(b3, sizeof(b3), r->clock_shift_ns);
        int64_t rel = r->clock_offset_ns - ref->clock_offset_ns;
        mrd_export_fmt_ns(b1, sizeof(b1), rel);
        if (rel > 0) { /* a sign on every non-zero difference */
            memmove(b1 + 1, b1, strlen(b1) + 1);
            b1[0] = '+';
        }
        fprintf(f, "  %-5d %-16s %-+12.3f %-12s %-8d %-8" PRId64 " %-12s %s\n", r->rank, b1,
                r->clock_drift_ppm, mrd_export_fmt_ns(b2, sizeof(b2), r->clock_error_bound_ns),
                r->clock_segments, r->clock_samples, b3,
                r->clock_method[0] ? r->clock_method : "-");
    }
    if (!a->clock_checked) {
        fprintf(f, "  causality check of the clock fit: not run\n");
        return;
    }
    fprintf(f,
            "  causality check of the clock fit: %" PRIu64 " violations (instance x rank "
            "pair) before tightening, %" PRIu64 " after\n",
            a->clock_violations_before, a->clock_violations_after);
    for (int i = 0; i < a->npairs; i++) {
        const struct mrd_an_pair *p = &a->pairs[i];
        fprintf(f,
                "    ranks %d-%d: %" PRIu64 " of %" PRIu64 " instances violated (max %s), %" PRIu64
                " after (max %s)\n",
                p->rank_a, p->rank_b, p->violations_before, p->instances,
                mrd_export_fmt_ns(b1, sizeof(b1), p->max_violation_before_ns), p->violations_after,
                mrd_export_fmt_ns(b2, sizeof(b2), p->max_violation_after_ns));
    }
}

static void print_collectives(FILE *f, const struct mrd_analysis *a, struct mrd_export_skews *sk)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    uint64_t timed = a->instances - a->untimed;
    section(f, "Collectives matched across ranks (communicator, sequence number, function)");
    if (a->nranks < 2) {
        fprintf(f, "  %s\n", ONE_RANK);
        return;
    }
    if (a->instances == 0) {
        fprintf(f, "  no NCCL collectives with sequence numbers in the database\n");
        return;
    }
    fprintf(f,
            "  %" PRIu64 " instances: %" PRIu64 " complete, %" PRIu64 " missing ranks, %" PRIu64
            " untimed\n",
            a->instances, a->complete, a->partial, a->untimed);
    fprintf(f,
            "  causality violations after alignment: %" PRIu64
            " instance(s) where a rank's kernel ended before another's began\n",
            a->causality_violations);
    if (timed == 0)
        return;
    if (mrd_export_skews_count(sk) > 0)
        fprintf(f,
                "  arrival skew over %zu timed instances: mean %s, p50 %s, p90 %s, p99 %s "
                "(nearest-rank percentiles), max %s\n",
                mrd_export_skews_count(sk),
                mrd_export_fmt_ns(b1, sizeof(b1), a->skew_sum_ns / (int64_t)timed),
                mrd_export_fmt_ns(b2, sizeof(b2), mrd_export_skews_percentile(sk, 50)),
                mrd_export_fmt_ns(b3, sizeof(b3), mrd_export_skews_percentile(sk, 90)),
                mrd_export_fmt_ns(b4, sizeof(b4), mrd_export_skews_percentile(sk, 99)),
                mrd_export_fmt_ns(b5, sizeof(b5), a->skew_max_ns));
    else
        fprintf(f,
                "  arrival skew: mean %s, p50 <= %s, p90 <= %s, p99 <= %s (upper edges of "
                "log2 bins), max %s\n",
                mrd_export_fmt_ns(b1, sizeof(b1), a->skew_sum_ns / (int64_t)timed),
                mrd_export_fmt_ns(b2, sizeof(b2), mrd__report_quantile(a, 0.5)),
                mrd_export_fmt_ns(b3, sizeof(b3), mrd__report_quantile(a, 0.9)),
                mrd_export_fmt_ns(b4, sizeof(b4), mrd__report_quantile(a, 0.99)),
                mrd_export_fmt_ns(b5, sizeof(b5), a->skew_max_ns));
    fprintf(f, "  worst: %s seq %" PRIu64 " on comm %016" PRIx64 ", last arriver rank %d, at %s\n",
            a->worst_func, a->worst_seq, a->worst_comm, a->worst_last_rank,
            fmt_at(b1, sizeof(b1), a, a->worst_start_ns));
    fprintf(f, "  total wait (sum over instances of every rank's wait for the last): %s\n",
            mrd_export_fmt_ns(b1, sizeof(b1), a->cost_ns));
    fprintf(f, "  %-16s %-16s %10s %10s %12s %12s %12s\n", "communicator", "function", "instances",
            "complete", "mean skew", "max skew", "wait cost");
    for (int i = 0; i < a->ncolls; i++) {
        const struct mrd_an_coll *c = &a->colls[i];
        uint64_t ct = c->timed ? c->timed : 1;
        fprintf(f, "  %016" PRIx64 " %-16.16s %10" PRIu64 " %10" PRIu64 " %12s %12s %12s\n",
                c->comm_hash, c->func, c->instances, c->complete,
                mrd_export_fmt_ns(b1, sizeof(b1), c->skew_sum_ns / (int64_t)ct),
                mrd_export_fmt_ns(b2, sizeof(b2), c->skew_max_ns),
                mrd_export_fmt_ns(b3, sizeof(b3), c->cost_ns));
    }
}

static void print_overlap(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32], b3[32], b4[32];
    section(f, "Communication / compute overlap per rank (same GPU)");
    fprintf(f, "  comm = NCCL kernels (method: correlation = linked to NCCL ops, kernel-name "
               "= \"nccl*\" names); hidden = comm under compute\n");
    fprintf(f, "  hidden %% = hidden / comm; times are unions (overlapping kernels count once)\n");
    fprintf(f, "  %-5s %-16s %12s %12s %12s %9s %12s %12s %15s\n", "rank", "method", "comm",
            "hidden", "exposed", "hidden %", "compute", "comm kernels", "compute kernels");
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_overlap *o = &a->ranks[i].ov;
        fprintf(f, "  %-5d %-16s %12s %12s %12s %8.1f%% %12s %12" PRIu64 " %15" PRIu64 "\n",
                a->ranks[i].rank, mrd_analyze_method_name(o->method),
                mrd_export_fmt_ns(b1, sizeof(b1), o->comm_ns),
                mrd_export_fmt_ns(b2, sizeof(b2), o->hidden_ns),
                mrd_export_fmt_ns(b3, sizeof(b3), o->exposed_ns), 100.0 * o->ratio,
                mrd_export_fmt_ns(b4, sizeof(b4), o->compute_ns), o->comm_kernels,
                o->compute_kernels);
    }
}

static void print_stragglers(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32];
    section(f, a->ranked_in_steps ? "Stragglers (ranked by the wait they caused others, "
                                    "within the NVTX steps)"
                                  : "Stragglers (ranked by the wait they caused others)");
    if (a->nranks < 2) {
        fprintf(f, "  %s\n", ONE_RANK);
        return;
    }
    if (a->instances == a->untimed) {
        fprintf(f, "  no timed collective instance: nothing to rank\n");
        return;
    }
    const struct mrd_an_rank **v = mrd_analyze_ranking(a);
    if (!v)
        return;
    fprintf(f, "  last %% = the share of the rank's own collectives in which it arrived last; "
               "wait caused %% = the share of all ranks' wait\n");
    fprintf(f, "  %-3s %-5s %10s %12s %7s %14s %14s %14s\n", "#", "rank", "last", "collectives",
            "last %", "wait caused", "caused %", "wait suffered");
    int64_t all = 0;
    for (int i = 0; i < a->nranks; i++)
        all += mrd_analyze_ranked_wait(a, v[i]).caused_ns;
    for (int i = 0; i < a->nranks; i++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, v[i]);
        double share = w.instances ? 100.0 * (double)w.times_last / (double)w.instances : 0;
        double cshare = all ? 100.0 * (double)w.caused_ns / (double)all : 0;
        fprintf(f, "  %-3d %-5d %10" PRIu64 " %12" PRIu64 " %6.1f%% %14s %13.1f%% %14s\n", i + 1,
                v[i]->rank, w.times_last, w.instances, share,
                mrd_export_fmt_ns(b1, sizeof(b1), w.caused_ns), cshare,
                mrd_export_fmt_ns(b2, sizeof(b2), w.suffered_ns));
    }
    char line[512];
    mrd__report_outside_steps(a, line, sizeof(line));
    if (line[0])
        fprintf(f, "  %s\n", line);
    free(v);
}

static void print_steps(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32], b3[32], b4[32];
    section(f, "Per step (NVTX \"step\" ranges)");
    if (a->nsteps == 0) {
        fprintf(f, "  no NVTX step ranges found\n");
        return;
    }
    char b5[32];
    fprintf(f, "  %-6s %12s %12s %10s %12s %12s %s\n", "step", "at", "duration", "instances",
            "max skew", "wait cost", "worst rank (wait caused)");
    for (int s = 0; s < a->nsteps && s < MAX_STEP_LINES; s++) {
        const struct mrd_an_step *st = &a->steps[s];
        fprintf(f, "  %-6" PRId64 " %12s %12s %10" PRIu64 " %12s %12s ", st->index,
                fmt_at(b5, sizeof(b5), a, st->start_ns),
                mrd_export_fmt_ns(b1, sizeof(b1), st->end_ns - st->start_ns), st->instances,
                mrd_export_fmt_ns(b2, sizeof(b2), st->max_skew_ns),
                mrd_export_fmt_ns(b3, sizeof(b3), st->cost_ns));
        if (st->worst_rank >= 0)
            fprintf(f, "%d (%s)", st->worst_rank,
                    mrd_export_fmt_ns(b4, sizeof(b4), st->worst_caused_ns));
        else
            fprintf(f, "-");
        fprintf(f, "%s%s\n", st->capture & MRD_AN_ATTACH ? " [CUPTI attach]" : "",
                st->capture & MRD_AN_DETACH ? " [CUPTI detach]" : "");
    }
    if (a->nsteps > MAX_STEP_LINES)
        fprintf(f, "  ... %d more steps (see --json)\n", a->nsteps - MAX_STEP_LINES);
    if (a->steps_beyond_cap)
        fprintf(f, "  %" PRIu64 " step ranges beyond %d per rank were not broken down\n",
                a->steps_beyond_cap, MRD_AN_MAX_STEPS);
    if (a->capture_steps)
        fprintf(f, "  [CUPTI attach/detach]: a rank attached CUPTI for a window or detached it "
                   "there; those steps' waits are the profiler's and are not ranked\n");
}

int mrd_export_text(FILE *f, const struct mrd_analysis *a)
{
    return mrd_export_text_skews(f, a, NULL);
}

int mrd_export_text_skews(FILE *f, const struct mrd_analysis *a, struct mrd_export_skews *sk)
{
    print_run(f, a);
    print_ranks(f, a);
    mrd__report_env(f, a);
    print_events(f, a);
    print_drops(f, a);
    print_cost(f, a);
    print_windows(f, a);
    print_clock(f, a);
    print_collectives(f, a, sk);
    print_overlap(f, a);
    print_stragglers(f, a);
    print_steps(f, a);
    mrd__report_why_cost(f, a);
    mrd__report_why_causes(f, a);
    mrd__report_why_collectives(f, a);
    mrd__report_why_kernels(f, a);
    mrd__report_findings(f, a);
    section(f, "Warnings");
    if (a->nwarnings == 0)
        fprintf(f, "  none\n");
    for (int i = 0; i < a->nwarnings; i++)
        fprintf(f, "  - %s\n", a->warnings[i]);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
