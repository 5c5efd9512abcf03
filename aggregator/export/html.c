/* The HTML report: one self-contained file (inline data, script and style; nothing is
 * fetched) that a browser opens offline.
 *
 * Where it sits: export stage. The page carries one JSON object (html_data.c computes it:
 * ranking, heat map, per-step bars, timelines, durations, kernels, windows; every part
 * bounded, html_int.h) in a <script type="application/json"> element, and the script
 * (html/report.js, embedded by the build) draws it: the heat map and tables as DOM
 * elements whose data- attributes hold the exact numbers (ns), the bars as SVG, the
 * timelines on a canvas with zoom and pan. The run summary, warnings and the ranks' table
 * are written here as plain HTML, so they read even with scripts off.
 */
#include "html_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "report_int.h"

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        const char *entity = *s == '&'   ? "&amp;"
                             : *s == '<' ? "&lt;"
                             : *s == '>' ? "&gt;"
                             : *s == '"' ? "&quot;"
                                         : NULL;
        if (entity)
            fputs(entity, f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const struct mrd_analysis *a)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>meridian "
          "report ",
          f);
    esc(f, a->run_id);
    fputs("</title>\n<style>\n", f);
    fputs(mrd__html_css, f);
    fputs("</style></head><body>\n", f);
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

/* The ranks' table is drawn by the script from the data (a static table of 512 rows costs
 * the browser more than all the rest of the page together). */
static void ranks_table(FILE *f, const struct mrd_analysis *a)
{
    fputs("<h2 id=\"h-ranks\">Ranks, drops and clocks</h2>\n<div id=\"ranks\"></div>\n", f);
    fprintf(f,
            "<p class=\"note\">aggregator: %" PRIu64 " duplicate batches dropped, "
            "%" PRIu64 " connections rejected</p>\n",
            a->duplicates, a->rejected);
}

/* The containers the script fills, in reading order. */
static void sections(FILE *f, const struct mrd_analysis *a)
{
    char left_out[512];
    mrd__report_outside_steps(a, left_out, sizeof(left_out));
    fputs("<nav id=\"toc\"></nav>\n"
          "<h2 id=\"h-findings\">Findings</h2>\n<p class=\"note\">Rules that turn the data "
          "into advice, each with its evidence and what to try; thresholds in "
          "aggregator/SCHEMA.md (Findings).</p>\n<div id=\"findings\"></div>\n"
          "<h2 id=\"h-stragglers\">Stragglers</h2>\n<p class=\"note\">A rank's wait caused "
          "= the sum, over the collectives it arrived last in, of every other rank's wait "
          "(last start - its start). Ranked by wait caused, then by times last, then by rank",
          f);
    fputs(a->ranked_in_steps ? ", counting the collectives within the NVTX steps only." : ".", f);
    if (left_out[0]) {
        fputs(" ", f);
        esc(f, left_out);
    }
    fputs("</p>\n<div id=\"stragglers\"></div>\n"
          "<h2 id=\"h-heat\">Arrival delay per rank and step</h2>\n<p class=\"note\">Cell = "
          "the sum, over the step's collectives, of the rank's start minus the earliest "
          "start of that collective (0: never late). Rows: the worst ranks first.</p>\n"
          "<div id=\"heat\"></div>\n"
          "<h2 id=\"h-bars\">Where the time of each step went</h2>\n<p class=\"note\">Per "
          "step (earliest start to latest end over ranks), the mean over ranks of: compute "
          "only, communication hidden under compute, exposed communication, and idle (no "
          "kernel). Hover for the numbers.</p>\n<div id=\"bars\"></div>\n"
          "<h2 id=\"h-timeline\">Timelines</h2>\n<p class=\"note\">Lanes per rank: NVTX, "
          "compute kernels, NCCL kernels; the worst ranks first, the others aggregated into "
          "one lane of busy fraction. Wheel: zoom; drag: pan; double-click: reset.</p>\n"
          "<div id=\"timelines\"></div>\n"
          "<h2 id=\"h-steps\">Per step</h2>\n<div id=\"steps\"></div>\n"
          "<h2 id=\"h-colls\">Collective durations</h2>\n<p class=\"note\">Per function, "
          "instances by duration (latest end - earliest start over ranks), log2 bins.</p>\n"
          "<div id=\"colls\"></div>\n"
          "<h2 id=\"h-kernels\">Top kernels by total time</h2>\n<div id=\"kernels\"></div>\n"
          "<h2 id=\"h-windows\">Capture windows</h2>\n<div id=\"windows\"></div>\n",
          f);
}

int mrd_export_html(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                    const struct mrd_html_acc *acc)
{
    int rc;
    head(f, a);
    run_section(f, a);
    sections(f, a);
    ranks_table(f, a);
    fputs("<script type=\"application/json\" id=\"mrd-data\">", f);
    rc = mrd__html_data(f, db, a, acc);
    fputs("</script>\n<script>\n", f);
    fputs(mrd__html_js, f);
    fputs("</script>\n<p class=\"note\">Generated by meridian. Definitions: "
          "aggregator/export/README.md.</p>\n</body></html>\n",
          f);
    fflush(f);
    if (rc < 0)
        return rc;
    return ferror(f) ? -EIO : 0;
}
