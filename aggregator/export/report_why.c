/* The report's answers to "what did the straggler cost, why was it late, which collectives
 * and kernels take the time": straggler cost per step and per run, late events with their
 * cause and evidence, collective statistics, top kernels per rank. Text (one section per
 * function, each called once from report_text.c) and the JSON report's "why" member.
 *
 * Where it sits: export stage; renders a->why, which the analysis filled
 * (aggregator/analyze/why.c, definitions in analyze.h). Size O(steps + events kept +
 * groups + ranks x MRD_WHY_TOP_KERNELS); the text caps the longest tables (the JSON has
 * everything the analysis kept).
 */
#include "report_why.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmp.h"
#include "export.h"
#include "jsonw.h"

#define MAX_COST_LINES  64 /* steps listed in the text; more: the costliest */
#define MAX_EVENT_LINES 20 /* late events listed in the text (the largest) */

static const char *fmt_signed(char *buf, size_t n, int64_t ns)
{
    if (n < 2)
        return "";
    buf[0] = ns < 0 ? '-' : '+';
    mrd_export_fmt_ns(buf + 1, n - 1, ns < 0 ? -ns : ns);
    return buf;
}

/* Starts a section; 1 when the analysis has the why results it shows, otherwise it says
 * so and returns 0. */
static int why_section(FILE *f, const struct mrd_analysis *a, const char *title)
{
    fprintf(f, "\n== %s\n", title);
    if (a->why)
        return 1;
    fprintf(f, "  no collectives: nothing to evaluate\n");
    return 0;
}

static int cmp_i64_desc(const void *x, const void *y)
{
    return mrd_cmp_int64(y, x);
}

void mrd__report_why_cost(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_why *w = a->why;
    char b1[32], b2[32], b3[32], b4[32];
    if (!why_section(f, a, "Straggler cost"))
        return;
    fprintf(f, "  method: measured step = the longest NVTX step range over the ranks; without "
               "stragglers = the same had each\n  late rank arrived when the next latest rank "
               "did, propagated through the step's collectives in the order\n  of their last "
               "arrivals (every member leaves a collective earlier by what it saved; a rank's "
               "step ends\n  earlier by what its last collective in the step saved); cost = "
               "measured - without\n");
    if (w->nsteps == 0 || w->measured_ns <= 0) {
        fprintf(f, "  not evaluated: no NVTX step ranges\n");
        return;
    }
    fprintf(f, "  run: measured %s over %d steps, without stragglers %s, cost %s (%.1f%%)\n",
            mrd_export_fmt_ns(b1, sizeof(b1), w->measured_ns), w->nsteps,
            mrd_export_fmt_ns(b2, sizeof(b2), w->counterfactual_ns),
            mrd_export_fmt_ns(b3, sizeof(b3), w->cost_ns),
            100.0 * (double)w->cost_ns / (double)w->measured_ns);
    /* more steps than lines: the costliest (at or above the MAX_COST_LINES-th cost), in
     * step order */
    int64_t floor_ns = INT64_MIN;
    int shown = 0;
    if (w->nsteps > MAX_COST_LINES) {
        int64_t *costs = malloc((size_t)w->nsteps * sizeof(int64_t));
        if (!costs)
            return;
        for (int s = 0; s < w->nsteps; s++)
            costs[s] = w->steps[s].cost_ns;
        qsort(costs, (size_t)w->nsteps, sizeof(int64_t), cmp_i64_desc);
        floor_ns = costs[MAX_COST_LINES - 1];
        free(costs);
        fprintf(f, "  the %d costliest of %d steps (all in --json):\n", MAX_COST_LINES, w->nsteps);
    }
    fprintf(f, "  exposed comm, GPU idle: shares of the step ranges of the ranks that ran kernels "
               "in the step (n/e: none traced)\n");
    fprintf(f, "  %-6s %12s %12s %12s %8s %8s %9s  %s\n", "step", "measured", "without", "cost",
            "exposed", "GPU idle", "straggler", "cause (its largest late event)");
    for (int i = 0; i < w->nsteps && shown < MAX_COST_LINES; i++) {
        const struct mrd_an_step_cost *s = &w->steps[i];
        if (s->cost_ns < floor_ns)
            continue;
        shown++;
        if (s->measured_ns < 0) {
            fprintf(f, "  %-6d %12s\n", i, "no range");
            continue;
        }
        char ex[16] = "n/e", idle[16] = "n/e";
        if (s->kernel_span_ns > 0) {
            snprintf(ex, sizeof(ex), "%.1f%%", 100.0 * (double)s->exposed_ns / s->kernel_span_ns);
            snprintf(idle, sizeof(idle), "%.1f%%", 100.0 * (double)s->idle_ns / s->kernel_span_ns);
        }
        fprintf(f, "  %-6d %12s %12s %12s %8s %8s ", i,
                mrd_export_fmt_ns(b1, sizeof(b1), s->measured_ns),
                mrd_export_fmt_ns(b2, sizeof(b2), s->counterfactual_ns),
                mrd_export_fmt_ns(b3, sizeof(b3), s->cost_ns), ex, idle);
        if (s->straggler >= 0)
            fprintf(f, "%9d  %s (late %s)\n", s->straggler,
                    s->cause >= 0 ? mrd_analyze_cause_name(s->cause) : "-",
                    mrd_export_fmt_ns(b4, sizeof(b4), s->straggler_late_ns));
        else
            fprintf(f, "%9s  -\n", "-");
    }
}

static void fmt_gpu(char *buf, size_t n, const struct mrd_an_gpu_reading *g)
{
    char age[32];
    if (!g->have) {
        snprintf(buf, n, "no sample");
        return;
    }
    snprintf(buf, n, "SM %" PRId64 " MHz, %.1f W, %" PRId64 " C, throttle 0x%" PRIx64 ", %s before",
             g->sm_clock_mhz, (double)g->power_mw / 1000.0, g->temperature_c,
             (uint64_t)g->throttle_reasons, mrd_export_fmt_ns(age, sizeof(age), g->age_ns));
}

void mrd__report_why_causes(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_why *w = a->why;
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], g0[128], g1[128];
    if (!why_section(f, a, "Why ranks were late"))
        return;
    fprintf(f,
            "  a late event: a collective in a step whose latest arrival (after earlier "
            "savings) came >= %s after the next\n  latest; its lateness is split into "
            "parts measured on both ranks since each one's previous collective in the\n  "
            "step (else its step start): compute = compute kernel time, host = first "
            "launch later, comm = the previous\n  collective ended later; the cause is "
            "the part that explains at least half, else \"unexplained\";\n  \"not "
            "evaluated\" where no kernels were traced there (steady tier outside capture "
            "windows)\n",
            mrd_export_fmt_ns(b1, sizeof(b1), MRD_WHY_LATE_NS));
    if (w->late_total == 0) {
        fprintf(f, "  no late events\n");
        return;
    }
    for (int i = 0; i < w->nranks; i++) {
        uint64_t total = 0, best = 0;
        int cause = 0;
        for (int c = 0; c < MRD_AN_NCAUSES; c++) {
            total += w->rank_causes[i][c];
            if (w->rank_causes[i][c] > best)
                best = w->rank_causes[i][c], cause = c;
        }
        if (total == 0)
            continue;
        if (best >= MRD_WHY_REPEAT_MIN && 2 * best > total)
            fprintf(f,
                    "  rank %d is repeatedly late because %s: %" PRIu64 " of its %" PRIu64
                    " late events\n",
                    a->ranks[i].rank, mrd_analyze_cause_name(cause), best, total);
        else
            fprintf(f, "  rank %d: %" PRIu64 " late event(s), most often: %s (%" PRIu64 ")\n",
                    a->ranks[i].rank, total, mrd_analyze_cause_name(cause), best);
    }
    if (w->steps_not_evaluated)
        fprintf(f,
                "  %" PRIu64 " late event(s) not evaluated: no kernels traced between the "
                "previous collective and the arrival\n",
                w->steps_not_evaluated);
    fprintf(f, "  %-6s %-22s %5s %5s %10s %11s %11s %11s  %s\n", "step", "collective", "late",
            "ref", "late by", "compute", "host", "comm", "cause");
    for (int i = 0; i < w->nlate && i < MAX_EVENT_LINES; i++) {
        const struct mrd_an_late *e = &w->late[i];
        char coll[48];
        snprintf(coll, sizeof(coll), "%s #%" PRIu64, e->func, e->seq);
        int ev = e->cause != MRD_AN_CAUSE_NOT_EVALUATED;
        fprintf(f, "  %-6" PRId64 " %-22s %5d %5d %10s %11s %11s %11s  %s\n", e->step, coll,
                e->rank, e->ref_rank, mrd_export_fmt_ns(b1, sizeof(b1), e->late_ns),
                ev ? fmt_signed(b2, sizeof(b2), e->compute_ns) : "n/e",
                ev ? fmt_signed(b3, sizeof(b3), e->host_ns) : "n/e",
                fmt_signed(b4, sizeof(b4), e->comm_ns), mrd_analyze_cause_name(e->cause));
        if (ev)
            fprintf(f,
                    "         compute %s in %" PRId64 " kernel(s) on rank %d vs %s in %" PRId64
                    " on rank %d\n",
                    mrd_export_fmt_ns(b5, sizeof(b5), e->busy_ns[0]), e->kernels[0], e->rank,
                    mrd_export_fmt_ns(b6, sizeof(b6), e->busy_ns[1]), e->kernels[1], e->ref_rank);
        if (ev && e->kernel[0])
            fprintf(f, "         grew the most: %s (+%s)\n", e->kernel,
                    mrd_export_fmt_ns(b5, sizeof(b5), e->kernel_diff_ns));
        if (e->gpu[0].have || e->gpu[1].have) {
            fmt_gpu(g0, sizeof(g0), &e->gpu[0]);
            fmt_gpu(g1, sizeof(g1), &e->gpu[1]);
            fprintf(f, "         GPU (gpu_samples): rank %d %s | rank %d %s\n", e->rank, g0,
                    e->ref_rank, g1);
        }
    }
    if ((uint64_t)w->nlate < w->late_total || w->nlate > MAX_EVENT_LINES)
        fprintf(f, "  the %d largest of %" PRIu64 " late events shown (%d in --json)\n",
                w->nlate < MAX_EVENT_LINES ? w->nlate : MAX_EVENT_LINES, w->late_total, w->nlate);
}

void mrd__report_why_collectives(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_why *w = a->why;
    char b1[32], b2[32], b3[32];
    if (!why_section(f, a, "Collective statistics (per communicator, function, message size)"))
        return;
    fprintf(f, "  duration = transfer time after the last arrival (latest end - latest start "
               "over the ranks), percentiles by the\n  nearest-rank method; bandwidths from "
               "p50 with nccl-tests' size (bytes = NCCL's count x type size; AllGather,\n  "
               "ReduceScatter, AlltoAll: x ranks) and bus factors (AllReduce 2(n-1)/n; "
               "AllGather, ReduceScatter,\n  AlltoAll (n-1)/n; others 1); algo/proto: the "
               "lowest rank's choice, then each rank that differs\n");
    if (w->nstats == 0) {
        fprintf(f, "  no timed collectives\n");
        return;
    }
    fprintf(f, "  %-16s %-14s %12s %5s %7s %10s %10s %10s %9s %9s  %s\n", "communicator",
            "function", "bytes", "ranks", "count", "p50", "p90", "p99", "algbw", "busbw",
            "algo/proto");
    for (int i = 0; i < w->nstats; i++) {
        const struct mrd_an_coll_stat *s = &w->stats[i];
        fprintf(f,
                "  %016" PRIx64 " %-14s %12" PRId64 " %5d %7" PRIu64
                " %10s %10s %10s %6.2f GB/s %6.2f GB/s  %s%s\n",
                s->comm_hash, s->func, s->bytes, s->nranks, s->count,
                mrd_export_fmt_ns(b1, sizeof(b1), s->p50_ns),
                mrd_export_fmt_ns(b2, sizeof(b2), s->p90_ns),
                mrd_export_fmt_ns(b3, sizeof(b3), s->p99_ns), s->algbw_gbs, s->busbw_gbs,
                s->differ ? "[ranks differ] " : "", s->algo_proto);
    }
    if (w->stats_other)
        fprintf(f, "  %" PRIu64 " instances of further groups (beyond %d) not listed\n",
                w->stats_other, MRD_WHY_MAX_STATS);
}

void mrd__report_why_kernels(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_why *w = a->why;
    char b1[32], b2[32];
    if (!why_section(f, a, "Top kernels per rank (by total time)"))
        return;
    if (w->nkernels == 0) {
        fprintf(f, "  no kernels traced\n");
        return;
    }
    fprintf(f, "  %-5s %8s %12s %12s %7s  %s\n", "rank", "count", "total", "mean", "share",
            w->demangled ? "kernel (demangled)" : "kernel");
    for (int i = 0; i < w->nkernels; i++) {
        const struct mrd_an_kernel_top *k = &w->kernels[i];
        fprintf(f, "  %-5d %8" PRIu64 " %12s %12s %6.1f%%  %s\n", k->rank, k->count,
                mrd_export_fmt_ns(b1, sizeof(b1), k->total_ns),
                mrd_export_fmt_ns(b2, sizeof(b2), k->count ? k->total_ns / (int64_t)k->count : 0),
                100.0 * k->share, k->name);
    }
}

/* ---- JSON ---- */

static void json_gpu(FILE *f, const struct mrd_an_gpu_reading *g)
{
    if (!g->have) {
        fputs("null", f);
        return;
    }
    fprintf(f,
            "{\"sm_clock_mhz\":%" PRId64 ",\"power_mw\":%" PRId64 ",\"temperature_c\":%" PRId64
            ",\"throttle_reasons\":%" PRId64 ",\"age_ns\":%" PRId64 "}",
            g->sm_clock_mhz, g->power_mw, g->temperature_c, g->throttle_reasons, g->age_ns);
}

void mrd__json_why(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_why *w = a->why;
    fputs("\"why\":", f);
    if (!w) {
        fputs("null,\n", f);
        return;
    }
    fprintf(f,
            "{\"late_threshold_ns\":%d,\"measured_ns\":%" PRId64 ",\"counterfactual_ns\":%" PRId64
            ",\"cost_ns\":%" PRId64 ",\n\"step_costs\":[",
            MRD_WHY_LATE_NS, w->measured_ns, w->counterfactual_ns, w->cost_ns);
    for (int s = 0; s < w->nsteps; s++) {
        const struct mrd_an_step_cost *c = &w->steps[s];
        fprintf(f,
                "%s{\"index\":%d,\"measured_ns\":%" PRId64 ",\"counterfactual_ns\":%" PRId64
                ",\"cost_ns\":%" PRId64 ",\"straggler\":%d,\"straggler_late_ns\":%" PRId64
                ",\"exposed_ns\":%" PRId64 ",\"idle_ns\":%" PRId64 ",\"kernel_span_ns\":%" PRId64
                ",\"kernel_ranks\":%d,\"cause\":",
                s ? ",\n" : "\n", s, c->measured_ns, c->counterfactual_ns, c->cost_ns, c->straggler,
                c->straggler_late_ns, c->exposed_ns, c->idle_ns, c->kernel_span_ns,
                c->kernel_ranks);
        if (c->cause >= 0)
            mrd__json_str(f, mrd_analyze_cause_name(c->cause));
        else
            fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "],\n\"late_events_total\":%" PRIu64 ",\"late_events\":[", w->late_total);
    for (int i = 0; i < w->nlate; i++) {
        const struct mrd_an_late *e = &w->late[i];
        fprintf(f,
                "%s{\"step\":%" PRId64 ",\"comm_hash\":\"%016" PRIx64 "\",\"seq\":%" PRIu64
                ",\"func\":",
                i ? ",\n" : "\n", e->step, e->comm_hash, e->seq);
        mrd__json_str(f, e->func);
        fprintf(f,
                ",\"rank\":%d,\"ref_rank\":%d,\"late_ns\":%" PRId64 ",\"comm_ns\":%" PRId64
                ",\"host_ns\":%" PRId64 ",\"compute_ns\":%" PRId64 ",\"busy_ns\":[%" PRId64
                ",%" PRId64 "],\"compute_kernels\":[%" PRId64 ",%" PRId64 "],\"cause\":",
                e->rank, e->ref_rank, e->late_ns, e->comm_ns, e->host_ns, e->compute_ns,
                e->busy_ns[0], e->busy_ns[1], e->kernels[0], e->kernels[1]);
        mrd__json_str(f, mrd_analyze_cause_name(e->cause));
        fputs(",\"kernel\":", f);
        mrd__json_str(f, e->kernel);
        fprintf(f, ",\"kernel_diff_ns\":%" PRId64, e->kernel_diff_ns);
        fputs(",\"gpu\":[", f);
        json_gpu(f, &e->gpu[0]);
        fputc(',', f);
        json_gpu(f, &e->gpu[1]);
        fputs("]}", f);
    }
    fputs("],\n\"rank_causes\":[", f);
    for (int i = 0; i < w->nranks; i++) {
        fprintf(f, "%s{\"rank\":%d", i ? "," : "", a->ranks[i].rank);
        for (int c = 0; c < MRD_AN_NCAUSES; c++) {
            fputc(',', f);
            mrd__json_str(f, mrd_analyze_cause_name(c));
            fprintf(f, ":%" PRIu64, w->rank_causes[i][c]);
        }
        fputc('}', f);
    }
    fputs("],\n\"collective_stats\":[", f);
    for (int i = 0; i < w->nstats; i++) {
        const struct mrd_an_coll_stat *s = &w->stats[i];
        fprintf(f, "%s{\"comm_hash\":\"%016" PRIx64 "\",\"func\":", i ? ",\n" : "\n", s->comm_hash);
        mrd__json_str(f, s->func);
        fprintf(f,
                ",\"bytes\":%" PRId64 ",\"nranks\":%d,\"count\":%" PRIu64 ",\"p50_ns\":%" PRId64
                ",\"p90_ns\":%" PRId64 ",\"p99_ns\":%" PRId64
                ",\"algbw_gbs\":%.9f,\"busbw_gbs\":%.9f,\"algo_proto\":",
                s->bytes, s->nranks, s->count, s->p50_ns, s->p90_ns, s->p99_ns, s->algbw_gbs,
                s->busbw_gbs);
        mrd__json_str(f, s->algo_proto);
        fprintf(f, ",\"ranks_differ\":%s}", s->differ ? "true" : "false");
    }
    fprintf(f, "],\"collective_stats_other\":%" PRIu64 ",\n\"top_kernels\":[", w->stats_other);
    for (int i = 0; i < w->nkernels; i++) {
        const struct mrd_an_kernel_top *k = &w->kernels[i];
        fprintf(f, "%s{\"rank\":%d,\"name\":", i ? ",\n" : "\n", k->rank);
        mrd__json_str(f, k->name);
        fprintf(f, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRId64 ",\"share\":%.9f}", k->count,
                k->total_ns, k->share);
    }
    fprintf(f, "],\"demangled\":%s},\n", w->demangled ? "true" : "false");
}
