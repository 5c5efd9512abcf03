/* The HTML report: one self-contained file (inline CSS and SVG, no scripts, no external
 * assets) that a browser opens offline.
 *
 * Where it sits: export stage; renders struct mrd_analysis and, for the timeline, reads
 * kernels of a small window again from the database (indexed range scans on
 * kernels_rank_start, at most MRD_EXPORT_HTML_MAX_KERNELS rows per rank, at most
 * MRD_EXPORT_HTML_MAX_RANKS ranks). Plots: per-rank kernel timeline of a few steps (or of
 * the collective with the worst skew), communication overlap bars, arrival-skew histogram,
 * per-rank wait caused and suffered. Tables repeat the text report's numbers.
 */
#include "export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "report_int.h"

#define W 960 /* plot width in px */

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static const char *ns(char *b, int64_t v)
{
    return mrd_export_fmt_ns(b, 32, v);
}

static void head(FILE *f, const struct mrd_analysis *a)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>meridian "
          "report ",
          f);
    esc(f, a->run_id);
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}\n"
          "h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}\n"
          "table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;text-align:"
          "right;border-bottom:1px solid #eee}th{background:#f4f4f4}td.l,th.l{text-align:left}"
          "\n.warn{color:#a40}.note{color:#555;font-size:12px}svg{background:#fcfcfc;border:"
          "1px solid #ddd}\nsvg text{font:11px sans-serif;fill:#333}\n"
          "</style></head><body>\n",
          f);
}

static void run_section(FILE *f, const struct mrd_analysis *a)
{
    char t[64];
    mrd__report_time(t, sizeof(t), a->created_ns);
    fputs("<h1>meridian report: run ", f);
    esc(f, a->run_id[0] ? a->run_id : "(no runs row)");
    fprintf(f, "</h1>\n<p>created %s &middot; world size %" PRId64 " &middot; %d rank(s)", t,
            a->world_size, a->nranks);
    fprintf(f, " &middot; timebase: <b>%s</b></p>\n",
            a->global_timebase ? "global (aligned per rank)" : "local clocks (not aligned)");
    if (a->command[0]) {
        fputs("<p class=\"note\">command: <code>", f);
        esc(f, a->command);
        fputs("</code></p>\n", f);
    }
    if (a->nwarnings) {
        fputs("<ul class=\"warn\">", f);
        for (int i = 0; i < a->nwarnings; i++) {
            fputs("<li>", f);
            esc(f, a->warnings[i]);
            fputs("</li>", f);
        }
        fputs("</ul>\n", f);
    }
}

static void ranks_table(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32];
    fputs("<h2>Ranks, drops and clocks</h2>\n<table><tr><th>rank</th><th class=\"l\">host</th>"
          "<th>pid</th><th class=\"l\">GPUs</th><th>kernels</th><th>NCCL ops</th>"
          "<th>dropped</th><th class=\"l\">drop reasons</th><th>clock offset</th>"
          "<th>drift ppm</th><th>error bound</th></tr>\n",
          f);
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        fprintf(f, "<tr><td>%d</td><td class=\"l\">", r->rank);
        esc(f, r->host);
        fprintf(f, "</td><td>%d</td><td class=\"l\">", r->pid);
        for (int g = 0; g < r->ngpus; g++) {
            fprintf(f, "%s%d: ", g ? "; " : "", r->gpus[g].device);
            esc(f, r->gpus[g].name);
        }
        fprintf(f,
                "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td class=\"l\">",
                r->events[0], r->events[8], r->dropped_total);
        for (int d = 0; d < r->ndrops; d++) {
            fprintf(f, "%s", d ? ", " : "");
            esc(f, r->drops[d].reason);
            fprintf(f, " %" PRIu64, r->drops[d].n);
        }
        if (r->clock_fitted)
            fprintf(f, "</td><td>%s</td><td>%+.3f</td><td>%s</td></tr>\n",
                    ns(b1, r->clock_offset_ns), r->clock_drift_ppm,
                    ns(b2, r->clock_error_bound_ns));
        else
            fputs("</td><td colspan=\"3\">not fitted</td></tr>\n", f);
    }
    fprintf(f,
            "</table>\n<p class=\"note\">aggregator: %" PRIu64 " duplicate batches dropped, "
            "%" PRIu64 " connections rejected</p>\n",
            a->duplicates, a->rejected);
}

/* The window the timeline shows, global ns; 0 when there is nothing to show. */
static int pick_window(sqlite3 *db, const struct mrd_analysis *a, const struct mrd_timebase *tb,
                       int64_t *ws, int64_t *we, char *what, size_t n)
{
    if (a->nsteps > 0) {
        int s0 = a->nsteps >= 4 ? 1 : 0; /* skip the warm-up step when there are enough */
        int s1 = s0 + 2 < a->nsteps ? s0 + 2 : a->nsteps - 1;
        *ws = a->steps[s0].start_ns;
        *we = a->steps[s1].end_ns;
        snprintf(what, n, "steps %d to %d", s0, s1);
        return *we > *ws;
    }
    if (a->worst_last_rank >= 0 && a->worst_end_ns > a->worst_start_ns) {
        int64_t pad = a->worst_end_ns - a->worst_start_ns;
        if (pad < 100000)
            pad = 100000;
        *ws = a->worst_start_ns - pad;
        *we = a->worst_end_ns + pad;
        snprintf(what, n, "around %s seq %" PRIu64 " (largest arrival skew)", a->worst_func,
                 a->worst_seq);
        return 1;
    }
    if (a->nranks == 0 || mrd_db_has_table(db, "kernels") != 1)
        return 0;
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_first_kernel_of_rank, -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int(st, 1, a->ranks[0].rank);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *ws = mrd_timebase_map(tb, a->ranks[0].rank, sqlite3_column_int64(st, 0));
        *we = *ws + 10000000;
        snprintf(what, n, "the first 10 ms of rank %d", a->ranks[0].rank);
        ok = 1;
    }
    sqlite3_finalize(st);
    return ok;
}

static int timeline(FILE *f, sqlite3 *db, const struct mrd_analysis *a)
{
    struct mrd_timebase *tb = NULL;
    sqlite3_stmt *q = NULL;
    int64_t ws = 0, we = 0;
    char what[160];
    int rc, shown = a->nranks < MRD_EXPORT_HTML_MAX_RANKS ? a->nranks : MRD_EXPORT_HTML_MAX_RANKS;
    const int left = 70, row = 22;

    fputs("<h2>Timeline</h2>\n", f);
    if ((rc = mrd_timebase_load(db, !a->global_timebase, &tb)) < 0)
        return rc;
    if (!pick_window(db, a, tb, &ws, &we, what, sizeof(what)) ||
        mrd_db_has_table(db, "kernels") != 1) {
        fputs("<p>no kernels to draw</p>\n", f);
        mrd_timebase_destroy(tb);
        return 0;
    }
    if (sqlite3_prepare_v2(db, mrd_db_sql_html_kernels, -1, &q, NULL) != SQLITE_OK) {
        mrd_timebase_destroy(tb);
        return -MRD_ERR_SQLITE;
    }
    double scale = (double)(W - left - 10) / (double)(we - ws);
    char b1[32], b2[32];
    fprintf(f,
            "<p class=\"note\">%s, %s wide, from %s after the time origin. Upper lane: "
            "compute kernels (blue); lower lane: communication kernels (orange). Hover for "
            "names.</p>\n",
            what, ns(b1, we - ws), ns(b2, ws - a->time_origin_ns));
    fprintf(f, "<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W,
            shown * row + 48);
    /* time axis under the lanes: 5 ticks, labelled from the window's start */
    for (int k = 0; k <= 4; k++) {
        double x = left + (double)(W - left - 10) * k / 4.0;
        fprintf(f,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#666\"/>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">+%s</text>\n",
                x, x, shown * row + 22, shown * row + 27, x, shown * row + 40,
                k == 0   ? "start"
                : k == 4 ? "end"
                         : "middle",
                ns(b1, (we - ws) * k / 4));
    }
    for (int s = 0; s < a->nsteps; s++) {
        int64_t t = a->steps[s].start_ns;
        if (t >= ws && t <= we)
            fprintf(f,
                    "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"%d\" stroke=\"#999\" "
                    "stroke-dasharray=\"3,3\"/><text x=\"%.1f\" y=\"%d\">step %" PRId64 "</text>\n",
                    left + (double)(t - ws) * scale, left + (double)(t - ws) * scale,
                    shown * row + 5, left + (double)(t - ws) * scale + 2, shown * row + 18,
                    a->steps[s].index);
    }
    for (int i = 0; i < shown; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        int y = i * row + 4, n = 0;
        int64_t lws = mrd_timebase_unmap(tb, r->rank, ws),
                lwe = mrd_timebase_unmap(tb, r->rank, we);
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d</text>\n", y + 13, r->rank);
        sqlite3_reset(q);
        sqlite3_bind_int(q, 1, r->rank);
        sqlite3_bind_int64(q, 2, lws - (lwe - lws)); /* kernels begun up to a window earlier */
        sqlite3_bind_int64(q, 3, lwe);
        sqlite3_bind_int64(q, 4, lws);
        sqlite3_bind_int(q, 5, MRD_EXPORT_HTML_MAX_KERNELS);
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            int64_t s = mrd_timebase_map(tb, r->rank, sqlite3_column_int64(q, 0));
            int64_t e = mrd_timebase_map(tb, r->rank, sqlite3_column_int64(q, 1));
            const char *name = (const char *)sqlite3_column_text(q, 3);
            int comm = sqlite3_column_int(q, 2) || mrd_analyze_is_nccl_name(name);
            double x0 = (double)((s < ws ? ws : s) - ws) * scale;
            double x1 = (double)((e > we ? we : e) - ws) * scale;
            n++;
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"8\" fill=\"%s\">"
                    "<title>",
                    left + x0, y + (comm ? 9 : 0), x1 - x0 < 0.5 ? 0.5 : x1 - x0,
                    comm ? "#e8892b" : "#3a78c2");
            esc(f, name ? name : "kernel");
            fprintf(f, " (%s)</title></rect>\n", ns(b1, e - s));
        }
        if (n >= MRD_EXPORT_HTML_MAX_KERNELS)
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#a40\">(first %d kernels only)</text>\n",
                    W - 180, y + 13, MRD_EXPORT_HTML_MAX_KERNELS);
    }
    fputs("</svg>\n", f);
    if (a->nranks > shown)
        fprintf(f, "<p class=\"note\">%d more ranks not drawn.</p>\n", a->nranks - shown);
    sqlite3_finalize(q);
    mrd_timebase_destroy(tb);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -MRD_ERR_SQLITE;
}

static void overlap_plot(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32], b3[32];
    int64_t max = 1;
    const int left = 70, row = 20;
    fputs("<h2>Communication / compute overlap</h2>\n<p class=\"note\">Per rank, the "
          "communication kernels' time: hidden under compute on the same GPU (green) and "
          "exposed (red). Overlap ratio = hidden / communication.</p>\n",
          f);
    for (int i = 0; i < a->nranks; i++)
        if (a->ranks[i].ov.comm_ns > max)
            max = a->ranks[i].ov.comm_ns;
    double scale = (double)(W - left - 260) / (double)max;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W,
            a->nranks * row + 8);
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_overlap *o = &a->ranks[i].ov;
        int y = i * row + 4;
        double wh = (double)o->hidden_ns * scale, wx = (double)o->exposed_ns * scale;
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d</text>", y + 12, a->ranks[i].rank);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#4caf50\">"
                "<title>hidden %s</title></rect>",
                left, y, wh, ns(b1, o->hidden_ns));
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#d9534f\">"
                "<title>exposed %s</title></rect>",
                left + wh, y, wx, ns(b2, o->exposed_ns));
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.1f%% of %s hidden (%s)</text>\n",
                left + wh + wx + 6, y + 12, 100.0 * o->ratio, ns(b3, o->comm_ns),
                mrd_analyze_method_name(o->method));
    }
    fputs("</svg>\n<table><tr><th>rank</th><th class=\"l\">method</th><th>comm</th>"
          "<th>hidden</th><th>exposed</th><th>compute</th><th>overlap</th></tr>\n",
          f);
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_overlap *o = &a->ranks[i].ov;
        char b4[32];
        fprintf(f,
                "<tr><td>%d</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td>"
                "<td>%s</td><td>%.1f%%</td></tr>\n",
                a->ranks[i].rank, mrd_analyze_method_name(o->method), ns(b1, o->comm_ns),
                ns(b2, o->hidden_ns), ns(b3, o->exposed_ns), ns(b4, o->compute_ns),
                100.0 * o->ratio);
    }
    fputs("</table>\n", f);
}

static void skew_plot(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32];
    int lo = MRD_AN_HIST_BINS, hi = -1;
    uint64_t max = 1;
    fputs("<h2>Collectives: arrival skew</h2>\n", f);
    fprintf(f,
            "<p>%" PRIu64 " instances matched (%" PRIu64 " complete, %" PRIu64
            " missing ranks, %" PRIu64 " untimed); causality violations: %" PRIu64
            "; max skew %s; total wait %s.</p>\n",
            a->instances, a->complete, a->partial, a->untimed, a->causality_violations,
            ns(b1, a->skew_max_ns), ns(b2, a->cost_ns));
    for (int i = 0; i < MRD_AN_HIST_BINS; i++) {
        if (a->skew_hist[i]) {
            lo = i < lo ? i : lo;
            hi = i;
            max = a->skew_hist[i] > max ? a->skew_hist[i] : max;
        }
    }
    if (hi < 0) {
        fputs("<p>no timed instance</p>\n", f);
        return;
    }
    int nb = hi - lo + 1, bw = (W - 80) / (nb < 8 ? 8 : nb);
    fprintf(f, "<svg width=\"%d\" height=\"200\" xmlns=\"http://www.w3.org/2000/svg\">\n", W);
    for (int i = lo; i <= hi; i++) {
        double h = 150.0 * (double)a->skew_hist[i] / (double)max;
        int x = 40 + (i - lo) * bw;
        fprintf(f,
                "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#6a5acd\">"
                "<title>%" PRIu64 " instances</title></rect>",
                x, 165 - h, bw - 2, h, a->skew_hist[i]);
        fprintf(f,
                "<text x=\"%d\" y=\"180\">&lt;%s</text><text x=\"%d\" y=\"%.1f\">%" PRIu64
                "</text>\n",
                x, ns(b1, (int64_t)1000 << i), x, 162 - h, a->skew_hist[i]);
    }
    fputs("<text x=\"40\" y=\"196\">arrival skew (max start - min start), log2 bins</text>"
          "</svg>\n",
          f);
    fputs("<table><tr><th class=\"l\">communicator</th><th class=\"l\">function</th>"
          "<th>instances</th><th>complete</th><th>max skew</th><th>wait cost</th></tr>\n",
          f);
    for (int i = 0; i < a->ncolls; i++) {
        const struct mrd_an_coll *c = &a->colls[i];
        fprintf(f, "<tr><td class=\"l\">%016" PRIx64 "</td><td class=\"l\">", c->comm_hash);
        esc(f, c->func);
        fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%s</td><td>%s</td></tr>\n",
                c->instances, c->complete, ns(b1, c->skew_max_ns), ns(b2, c->cost_ns));
    }
    fputs("</table>\n", f);
}

static int wait_plot(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32];
    int64_t max = 1;
    const int left = 70, row = 20;
    const struct mrd_an_rank **v = mrd_analyze_ranking(a);
    if (!v)
        return -ENOMEM;
    char left_out[512];
    mrd__report_outside_steps(a, left_out, sizeof(left_out));
    if (left_out[0])
        left_out[0] = 'N'; /* a sentence of its own here */
    fprintf(f,
            "<h2>Stragglers: wait per rank</h2>\n<p class=\"note\">Red: wait the rank caused "
            "others by arriving last; grey: wait it spent for others. Ranked by wait caused%s."
            "%s%s</p>\n",
            a->ranked_in_steps ? ", counting the collectives within the NVTX steps only" : "",
            left_out[0] ? " " : "", left_out);
    for (int i = 0; i < a->nranks; i++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, v[i]);
        if (w.caused_ns > max)
            max = w.caused_ns;
        if (w.suffered_ns > max)
            max = w.suffered_ns;
    }
    double scale = (double)(W - left - 300) / (double)max;
    fprintf(f, "<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W,
            a->nranks * row + 8);
    for (int i = 0; i < a->nranks; i++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, v[i]);
        int y = i * row + 4;
        int64_t longer = w.caused_ns > w.suffered_ns ? w.caused_ns : w.suffered_ns;
        fprintf(f, "<text x=\"4\" y=\"%d\">rank %d</text>", y + 12, v[i]->rank);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"7\" fill=\"#d9534f\"/>", left,
                y, (double)w.caused_ns * scale);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"7\" fill=\"#999\"/>", left,
                y + 7, (double)w.suffered_ns * scale);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">caused %s, suffered %s, last %" PRIu64 "x</text>\n",
                left + (double)longer * scale + 6, y + 12, ns(b1, w.caused_ns),
                ns(b2, w.suffered_ns), w.times_last);
    }
    fputs("</svg>\n", f);
    free(v);
    return 0;
}

static void steps_table(FILE *f, const struct mrd_analysis *a)
{
    char b1[32], b2[32], b3[32];
    if (a->nsteps == 0)
        return;
    fputs("<h2>Per step</h2>\n<table><tr><th>step</th><th>duration</th><th>instances</th>"
          "<th>max skew</th><th>wait cost</th><th>worst rank</th></tr>\n",
          f);
    for (int s = 0; s < a->nsteps && s < 200; s++) {
        const struct mrd_an_step *st = &a->steps[s];
        fprintf(f,
                "<tr><td>%" PRId64 "</td><td>%s</td><td>%" PRIu64 "</td><td>%s</td>"
                "<td>%s</td><td>%d</td></tr>\n",
                st->index, ns(b1, st->end_ns - st->start_ns), st->instances,
                ns(b2, st->max_skew_ns), ns(b3, st->cost_ns), st->worst_rank);
    }
    fputs("</table>\n", f);
}

int mrd_export_html(FILE *f, sqlite3 *db, const struct mrd_analysis *a)
{
    int rc;
    head(f, a);
    run_section(f, a);
    if ((rc = timeline(f, db, a)) < 0)
        return rc;
    overlap_plot(f, a);
    skew_plot(f, a);
    if ((rc = wait_plot(f, a)) < 0)
        return rc;
    steps_table(f, a);
    ranks_table(f, a);
    fputs("<p class=\"note\">Generated by meridian. Definitions: aggregator/analyze/analyze.h."
          "</p>\n</body></html>\n",
          f);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
