/* The analysis as one JSON document for scripts (`meridian report DB --json`).
 *
 * Where it sits: export stage; renders struct mrd_analysis only. Schema
 * "meridian-report/1" (aggregator/export/README.md): integers are nanoseconds or counts,
 * communicator hashes are 16-digit hex strings (64-bit values do not survive a double).
 * Size O(ranks + steps + collectives); "windows" (capture windows, per rank) only when
 * the run had any; "environment" (report_env.c) only when the database holds fingerprints.
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "jsonw.h"
#include "report_env.h"
#include "report_int.h"
#include "report_findings.h"
#include "report_why.h"

static void key(FILE *f, int *first, const char *k)
{
    fprintf(f, "%s\"%s\":", *first ? "" : ",", k);
    *first = 0;
}

static void rank_obj(FILE *f, const struct mrd_an_rank *r)
{
    int first = 1;
    fputc('{', f);
    key(f, &first, "rank");
    fprintf(f, "%d", r->rank);
    key(f, &first, "host");
    mrd__json_str(f, r->host);
    key(f, &first, "pid");
    fprintf(f, "%d", r->pid);
    key(f, &first, "local_rank");
    fprintf(f, "%d", r->local_rank);
    key(f, &first, "goodbye");
    fprintf(f, "%s", r->goodbye ? "true" : "false");
    key(f, &first, "gpus");
    fputc('[', f);
    for (int g = 0; g < r->ngpus; g++) {
        fprintf(f, "%s{\"device\":%d,\"name\":", g ? "," : "", r->gpus[g].device);
        mrd__json_str(f, r->gpus[g].name);
        fputs(",\"uuid\":", f);
        mrd__json_str(f, r->gpus[g].uuid);
        fputs(",\"pci_bus_id\":", f);
        mrd__json_str(f, r->gpus[g].pci);
        fputc('}', f);
    }
    fputc(']', f);
    key(f, &first, "events");
    fputc('{', f);
    for (int k = 0; k < MRD_AN_NKINDS; k++)
        fprintf(f, "%s\"%s\":%" PRIu64, k ? "," : "", mrd_analyze_kind_name(k), r->events[k]);
    fputc('}', f);
    key(f, &first, "captured_total");
    fprintf(f, "%" PRIu64, r->captured_total);
    key(f, &first, "dropped");
    fputc('{', f);
    for (int d = 0; d < r->ndrops; d++) {
        fputs(d ? "," : "", f);
        mrd__json_str(f, r->drops[d].reason);
        fprintf(f, ":%" PRIu64, r->drops[d].n);
    }
    fputc('}', f);
    key(f, &first, "dropped_total");
    fprintf(f, "%" PRIu64, r->dropped_total);
    if (r->has_cost) { /* additive within meridian-report/1 */
        key(f, &first, "agent_cost");
        fprintf(f,
                "{\"callbacks_est\":%" PRIu64 ",\"callbacks_timed\":%" PRIu64
                ",\"callback_ns_est\":%" PRIu64 ",\"cupti_overhead_ns\":%" PRIu64
                ",\"cupti_overhead_recorded\":%s,\"cupti_pace_waits\":%" PRIu64
                ",\"cupti_pace_wait_ns\":%" PRIu64 "}",
                r->cost_calls_est, r->cost_samples, r->cost_sampled_ns * 64, r->cupti_overhead_ns,
                r->has_cupti_overhead ? "true" : "false", r->cupti_pace_waits,
                r->cupti_pace_wait_ns);
    }
    key(f, &first, "clock");
    if (!r->clock_fitted) {
        fputs("null", f);
    } else {
        fprintf(f,
                "{\"offset_ns\":%" PRId64 ",\"drift_ppm\":%.6f,\"error_bound_ns\":%" PRId64
                ",\"segments\":%d,\"samples\":%" PRId64 ",\"method\":",
                r->clock_offset_ns, r->clock_drift_ppm, r->clock_error_bound_ns, r->clock_segments,
                r->clock_samples);
        mrd__json_str(f, r->clock_method);
        if (r->clock_adjusted)
            fprintf(f, ",\"causal_shift_ns\":%" PRId64, r->clock_shift_ns);
        fputc('}', f);
    }
    const struct mrd_an_overlap *o = &r->ov;
    key(f, &first, "overlap");
    fprintf(f,
            "{\"method\":\"%s\",\"comm_ns\":%" PRId64 ",\"hidden_ns\":%" PRId64
            ",\"exposed_ns\":%" PRId64 ",\"compute_ns\":%" PRId64 ",\"busy_ns\":%" PRId64
            ",\"span_ns\":%" PRId64 ",\"ratio\":%.6f,\"comm_kernels\":%" PRIu64
            ",\"compute_kernels\":%" PRIu64 ",\"name_only_kernels\":%" PRIu64 "}",
            mrd_analyze_method_name(o->method), o->comm_ns, o->hidden_ns, o->exposed_ns,
            o->compute_ns, o->busy_ns, o->span_ns, o->ratio, o->comm_kernels, o->compute_kernels,
            o->name_only_kernels);
    key(f, &first, "straggler");
    fprintf(f,
            "{\"instances\":%" PRIu64 ",\"times_last\":%" PRIu64 ",\"wait_caused_ns\":%" PRId64
            ",\"wait_suffered_ns\":%" PRId64 "}",
            r->instances, r->times_last, r->wait_caused_ns, r->wait_suffered_ns);
    key(f, &first, "straggler_in_steps");
    fprintf(f,
            "{\"instances\":%" PRIu64 ",\"times_last\":%" PRIu64 ",\"wait_caused_ns\":%" PRId64
            ",\"wait_suffered_ns\":%" PRId64 "}",
            r->in_steps.instances, r->in_steps.times_last, r->in_steps.caused_ns,
            r->in_steps.suffered_ns);
    key(f, &first, "steps");
    fprintf(f, "%" PRIu64 "}", r->steps);
}

static void collectives_obj(FILE *f, const struct mrd_analysis *a)
{
    fprintf(f,
            "{\"instances\":%" PRIu64 ",\"complete\":%" PRIu64 ",\"partial\":%" PRIu64
            ",\"untimed\":%" PRIu64 ",\"causality_violations\":%" PRIu64 ",\"skew_sum_ns\":%" PRId64
            ",\"skew_max_ns\":%" PRId64 ",\"wait_cost_ns\":%" PRId64
            ",\"skew_p50_upper_ns\":%" PRId64 ",\"skew_p99_upper_ns\":%" PRId64,
            a->instances, a->complete, a->partial, a->untimed, a->causality_violations,
            a->skew_sum_ns, a->skew_max_ns, a->cost_ns, mrd__report_quantile(a, 0.5),
            mrd__report_quantile(a, 0.99));
    fprintf(f,
            ",\"worst\":{\"comm\":\"%016" PRIx64 "\",\"seq\":%" PRIu64 ",\"func\":", a->worst_comm,
            a->worst_seq);
    mrd__json_str(f, a->worst_func);
    fprintf(f,
            ",\"last_rank\":%d,\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64 ",\"at_ns\":%" PRId64
            "}",
            a->worst_last_rank, a->worst_start_ns, a->worst_end_ns,
            a->worst_start_ns - a->time_origin_ns);
    fputs(",\"skew_histogram_us_log2\":[", f);
    for (int i = 0; i < MRD_AN_HIST_BINS; i++)
        fprintf(f, "%s%" PRIu64, i ? "," : "", a->skew_hist[i]);
    fputs("],\"by_function\":[", f);
    for (int i = 0; i < a->ncolls; i++) {
        const struct mrd_an_coll *c = &a->colls[i];
        fprintf(f, "%s{\"comm\":\"%016" PRIx64 "\",\"func\":", i ? "," : "", c->comm_hash);
        mrd__json_str(f, c->func);
        fprintf(f,
                ",\"instances\":%" PRIu64 ",\"complete\":%" PRIu64 ",\"timed\":%" PRIu64
                ",\"skew_sum_ns\":%" PRId64 ",\"skew_max_ns\":%" PRId64 ",\"wait_cost_ns\":%" PRId64
                "}",
                c->instances, c->complete, c->timed, c->skew_sum_ns, c->skew_max_ns, c->cost_ns);
    }
    fputs("]}", f);
}

/* "windows": one object per rank with capture windows; the key is left out when there
 * are none (meridian-report/1 stays as it was for full-tier runs). */
static void windows_arr(FILE *f, const struct mrd_analysis *a)
{
    if (a->nwindow_ranks == 0)
        return;
    fputs("\"windows\":[", f);
    for (int i = 0; i < a->nwindow_ranks; i++) {
        const struct mrd_an_windows *w = &a->windows[i];
        fprintf(f,
                "%s{\"rank\":%d,\"windows\":%" PRIu64 ",\"open_at_exit\":%" PRIu64
                ",\"steps\":%" PRIu64 ",\"first_step\":%" PRId64 ",\"last_step\":%" PRId64
                ",\"ranges\":[",
                i ? ",\n" : "\n", w->rank, w->windows, w->open_at_exit, w->steps, w->first_step,
                w->last_step);
        for (int r = 0; r < w->nranges; r++)
            fprintf(f, "%s[%" PRId64 ",%" PRId64 "]", r ? "," : "", w->ranges[r][0],
                    w->ranges[r][1]);
        fprintf(f,
                "],\"kernels\":%" PRIu64 ",\"attach_median_ns\":%" PRId64 ",\"detach_median_ns\":",
                w->kernels, w->attach_median_ns);
        if (w->detach_median_ns < 0)
            fputs("null", f);
        else
            fprintf(f, "%" PRId64, w->detach_median_ns);
        if (w->close_mean_ns < 0)
            fputs(",\"close_mean_ns\":null}", f);
        else
            fprintf(f, ",\"close_mean_ns\":%" PRId64 "}", w->close_mean_ns);
    }
    fputs("],\n", f);
}

int mrd_export_json(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_an_rank **rankv = mrd_analyze_ranking(a);
    if (!rankv)
        return -ENOMEM;
    fputs("{\"schema\":\"meridian-report/1\",\"run\":{\"run_id\":", f);
    mrd__json_str(f, a->run_id);
    fputs(",\"command\":", f);
    mrd__json_str(f, a->command);
    fprintf(f,
            ",\"world_size\":%" PRId64 ",\"anchor_realtime_ns\":%" PRId64 ",\"created_ns\":%" PRId64
            ",\"timebase\":\"%s\",\"time_origin_ns\":%" PRId64 "},",
            a->world_size, a->anchor_realtime_ns, a->created_ns,
            a->global_timebase ? "global" : "local", a->time_origin_ns);
    fprintf(f, "\"aggregator\":{\"duplicates\":%" PRIu64 ",\"rejected\":%" PRIu64 "},",
            a->duplicates, a->rejected);
    fputs("\"ranks\":[", f);
    for (int i = 0; i < a->nranks; i++) {
        fputs(i ? ",\n" : "\n", f);
        rank_obj(f, &a->ranks[i]);
    }
    fputs("],\n\"collectives\":", f);
    collectives_obj(f, a);
    fputs(",\n\"clock_causality\":", f);
    if (!a->clock_checked) {
        fputs("null", f);
    } else {
        fprintf(f,
                "{\"violations_before\":%" PRIu64 ",\"violations_after\":%" PRIu64 ",\"pairs\":[",
                a->clock_violations_before, a->clock_violations_after);
        for (int i = 0; i < a->npairs; i++) {
            const struct mrd_an_pair *p = &a->pairs[i];
            fprintf(f,
                    "%s{\"rank_a\":%d,\"rank_b\":%d,\"instances\":%" PRIu64
                    ",\"violations_before\":%" PRIu64 ",\"violations_after\":%" PRIu64
                    ",\"max_violation_before_ns\":%" PRId64 ",\"max_violation_after_ns\":%" PRId64
                    "}",
                    i ? "," : "", p->rank_a, p->rank_b, p->instances, p->violations_before,
                    p->violations_after, p->max_violation_before_ns, p->max_violation_after_ns);
        }
        fputs("]}", f);
    }
    fputs(",\n\"straggler_ranking\":[", f);
    for (int i = 0; i < a->nranks; i++)
        fprintf(f, "%s%d", i ? "," : "", rankv[i]->rank);
    fprintf(f,
            "],\n\"straggler_scope\":\"%s\",\n\"outside_steps\":{\"instances\":%" PRIu64
            ",\"wait_cost_ns\":%" PRId64 "},\n",
            a->ranked_in_steps ? "steps" : "all", a->outside_steps, a->outside_steps_cost_ns);
    if (a->capture_steps) /* additive: only in runs with windows */
        fprintf(f, "\"capture_steps\":{\"instances\":%" PRIu64 ",\"wait_cost_ns\":%" PRId64 "},\n",
                a->capture_steps, a->capture_steps_cost_ns);
    fputs("\"steps\":[", f);
    for (int s = 0; s < a->nsteps; s++) {
        const struct mrd_an_step *st = &a->steps[s];
        fprintf(
            f,
            "%s{\"index\":%" PRId64 ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
            ",\"at_ns\":%" PRId64 ",\"instances\":%" PRIu64 ",\"wait_cost_ns\":%" PRId64
            ",\"max_skew_ns\":%" PRId64 ",\"worst_rank\":%d,\"worst_caused_ns\":%" PRId64 "%s%s}",
            s ? ",\n" : "\n", st->index, st->start_ns, st->end_ns, st->start_ns - a->time_origin_ns,
            st->instances, st->cost_ns, st->max_skew_ns, st->worst_rank, st->worst_caused_ns,
            st->capture & MRD_AN_ATTACH ? ",\"cupti_attach\":true" : "",
            st->capture & MRD_AN_DETACH ? ",\"cupti_detach\":true" : "");
    }
    fprintf(f, "],\n\"steps_beyond_cap\":%" PRIu64 ",\n", a->steps_beyond_cap);
    mrd__json_env(f, a);
    windows_arr(f, a);
    mrd__json_why(f, a);
    mrd__json_findings(f, a);
    fputs("\"warnings\":[", f);
    for (int i = 0; i < a->nwarnings; i++) {
        fputs(i ? "," : "", f);
        mrd__json_str(f, a->warnings[i]);
    }
    fputs("]}\n", f);
    free(rankv);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
