/* Internal to the HTML report (html.c, html_data.c; report_findings.c writes its strings
 * with mrd__html_jstr): the bounds of the embedded detail and
 * the data writer. The public side (the accumulator, mrd_export_html) is in export.h. */
#ifndef MRD_HTML_INT_H
#define MRD_HTML_INT_H

#include <stdio.h>

#include <sqlite3.h>

#include "export.h"

#define MRD_HTML_HEAT_STEPS  256   /* heat map columns: the first steps */
#define MRD_HTML_HEAT_ROWS   64    /* heat map rows drawn one per rank, the worst first */
#define MRD_HTML_TL_STEPS    4     /* timelines: worst, longest, median, shortest step */
#define MRD_HTML_TL_RANKS    16    /* ranks drawn lane by lane per timeline, the worst first */
#define MRD_HTML_TL_ITEMS    2000  /* items per lane and timeline; more are counted */
#define MRD_HTML_TL_BINS     200   /* bins of the aggregated lane of the other ranks */
#define MRD_HTML_TOP_KERNELS 50    /* kernel names by total time */
#define MRD_HTML_MAX_FUNCS   16    /* collective functions with a histogram; more: "other" */
#define MRD_HTML_MAX_NAMES   4096  /* distinct names in the timelines; more show "?" */
#define MRD_HTML_MAX_RANK    65536 /* ranks above are left out of the heat map */

/* Writes the page's data object (one JSON value, safe inside <script>): ranking, steps,
 * heat map, collective durations, windows, per-step bars, timelines, top kernels. acc may
 * be NULL (no heat map). Returns 0, -ENOMEM, or -MRD_ERR_SQLITE. Caller's thread. */
int mrd__html_data(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                   const struct mrd_html_acc *acc);

/* Writes s (NULL: "") as a JSON string safe inside <script>: '<', '>', '&', control bytes
 * and bytes outside ASCII as \u escapes (non-ASCII becomes U+FFFD). */
void mrd__html_jstr(FILE *f, const char *s);

/* The page's script and style sheet (html/report.js, html/report.css, embedded by the
 * build), NUL-terminated. */
extern const char mrd__html_js[];
extern const char mrd__html_css[];

#endif
