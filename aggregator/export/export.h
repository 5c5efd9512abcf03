/* Outputs of the analysis: the text report, the JSON document for scripts, the
 * self-contained interactive HTML report, and the Perfetto / Chrome trace.
 *
 * Where it sits: the last stage; consumes struct mrd_analysis (aggregator/analyze) and, for
 * the HTML timeline and the trace, streams rows from the database again (the TEMP helper
 * tables of mrd_db_op_intervals are reused on the same connection).
 *
 * Workload: the text/JSON outputs are proportional to ranks and steps. The HTML report's
 * embedded detail is bounded (html_int.h: ranks drawn lane by lane, items per lane, heat
 * map rows and steps), whatever the database's size. The trace streams every exported row once (one
 * full scan per table), holding only the track table (MRD_EXPORT_MAX_TRACKS; rows of further tracks
 * go to one "other" track per process and are counted). All functions run on the caller's thread
 * and write to a caller-owned FILE.
 */
#ifndef MRD_EXPORT_H
#define MRD_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "analyze.h"

#define MRD_EXPORT_MAX_TRACKS 65536

/* Writes the human-readable report. Returns 0 or -EIO when writing failed. The arrival
 * skew percentiles are the histogram's bin bounds (labelled so); mrd_export_text_skews
 * prints real ones. */
int mrd_export_text(FILE *f, const struct mrd_analysis *a);

/* Every timed instance's arrival skew, for nearest-rank percentiles (skews.c): create one,
 * pass mrd_export_skews_on_instance and it as mrd_analyze_options.on_instance / ctx.
 * At most MRD_EXPORT_SKEWS_MAX values (8 bytes each); past that, no percentile. */
#define MRD_EXPORT_SKEWS_MAX ((size_t)16 << 20)
struct mrd_export_skews;

/* Returns 0 and *out (free with mrd_export_skews_free, which accepts NULL), or -ENOMEM. */
int mrd_export_skews_new(struct mrd_export_skews **out);
void mrd_export_skews_free(struct mrd_export_skews *s);

/* The on_instance callback (ctx: struct mrd_export_skews). Caller's thread. */
void mrd_export_skews_on_instance(const struct mrd_an_instance *in, void *ctx);

/* The nearest-rank p-th percentile (0 < p <= 100: the value at rank ceil(p/100 * n) of the
 * n sorted skews), or -1 when there is none (no value, or past the cap). Sorts s once. */
int64_t mrd_export_skews_percentile(struct mrd_export_skews *s, double p);

/* Values held (0 past the cap). */
size_t mrd_export_skews_count(const struct mrd_export_skews *s);

/* mrd_export_text with the arrival skew percentiles taken from sk (NULL: the bin bounds). */
int mrd_export_text_skews(FILE *f, const struct mrd_analysis *a, struct mrd_export_skews *sk);

/* Writes the analysis as one JSON object (schema "meridian-report/1", described in
 * aggregator/export/README.md). Returns 0 or -EIO. */
int mrd_export_json(FILE *f, const struct mrd_analysis *a);

/* What the HTML report gathers from every matched collective instance while the analysis
 * runs (per rank and step arrival delays, per function duration histograms): create one,
 * pass mrd_export_html_on_instance and it as mrd_analyze_options.on_instance / ctx, then
 * hand it to mrd_export_html. Memory: 2 KiB per rank (the heat map's steps). */
struct mrd_html_acc;

/* Returns 0 and *out (free with mrd_export_html_acc_free), or -ENOMEM. */
int mrd_export_html_acc_new(struct mrd_html_acc **out);

/* Accepts NULL. */
void mrd_export_html_acc_free(struct mrd_html_acc *acc);

/* The on_instance callback; ctx is a struct mrd_html_acc. An allocation failure is
 * remembered and reported by mrd_export_html. Caller's thread (the analysis'). */
void mrd_export_html_on_instance(const struct mrd_an_instance *in, void *ctx);

/* Writes the self-contained HTML report (inline data, script and style, nothing fetched):
 * straggler ranking, rank x step heat map of arrival delay, per-step stacked bars, zoomable
 * timelines of the worst step and a few others, collective duration distributions, top
 * kernels, capture windows, the ranks' table (aggregator/export/README.md, "HTML report",
 * states the definitions and the bounds of the embedded detail). db must be the connection
 * `a` was computed on; acc the accumulator filled during that analysis (NULL: no heat map
 * and no duration histograms). Returns 0, -EIO, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd_export_html(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                    const struct mrd_html_acc *acc);

/* Progress of an export, for a caller that shows it (the library prints nothing). The unit
 * is rows read by the export's queries; the total is the COUNT(*) of each query's table,
 * counted once before the first query (a table that two queries read counts twice). on_rows
 * is called from the exporting thread every few thousand rows and after each query, with
 * done rising to total; never twice with the same done. */
struct mrd_export_progress {
    void (*on_rows)(void *ctx, uint64_t done, uint64_t total);
    void *ctx;
};

struct mrd_perfetto_options {
    int ignore_clock_models; /* keep each rank's local clock */
    int include_api;         /* also export api_calls (off by default: large) */
    /* only events meeting [window_from_ns, window_to_ns], in ns after the time origin
     * (as the trace shows them); window_to_ns = 0: everything */
    int64_t window_from_ns, window_to_ns;
    /* by_steps = 1: instead of the window, the steps step_first..step_last (NVTX step
     * ranges numbered as the analysis does, with step_name as in mrd_analyze_options):
     * from the earliest start of the first to the latest end of the last over ranks */
    int by_steps;
    int64_t step_first, step_last;
    const char *step_name;
    const struct mrd_export_progress *progress; /* NULL: nothing counted nor reported */
};

/* Shared-internal (perfetto.c, pftrace.c): the progress count of one export. begin counts
 * the rows of tables[0..n-1] (one entry per query, in the order the queries run: the
 * names of the tables it reads, separated by spaces; absent tables count 0) when pr is set; pass
 * starts the next query, tick reports `rows` read in it (the caller calls it every
 * MRD__EXPORT_ROWS_EVERY rows), pass_end reports the query done. All do nothing without pr. */
#define MRD__EXPORT_ROWS_EVERY      4096
#define MRD__EXPORT_ROWS_MAX_PASSES 16
struct mrd__export_rows {
    const struct mrd_export_progress *pr;
    uint64_t count[MRD__EXPORT_ROWS_MAX_PASSES];
    uint64_t total, base, reported;
    int npass, pass;
};
int mrd__export_rows_begin(struct mrd__export_rows *r, sqlite3 *db,
                           const struct mrd_export_progress *pr, const char *const *tables, int n);
void mrd__export_rows_pass(struct mrd__export_rows *r);
void mrd__export_rows_tick(struct mrd__export_rows *r, uint64_t rows);
void mrd__export_rows_pass_end(struct mrd__export_rows *r);

struct mrd_perfetto_stats {
    uint64_t events; /* trace events written (slices, flows, metadata) */
    uint64_t flows;  /* NCCL op -> kernel links */
    uint64_t tracks;
    uint64_t folded;     /* rows written to an "other" track (track cap reached) */
    uint64_t overlapped; /* slices that overlap another on their track (lanes full) */
    /* slices, instants and flow ends of the run (rows) and those the window or step range
     * selected (selected; == rows without either). selected == 0 with rows > 0: the
     * window missed the run, whose rows lie in [first_ns, last_ns] after the origin */
    uint64_t rows, selected;
    int64_t first_ns, last_ns;
    uint64_t steps; /* with by_steps: the steps the run has (broken down by the analysis) */
};

/* The step range of o (step_first..step_last, numbered as the analysis numbers steps, with
 * o->step_name) as a time window in ns after `origin`: from the earliest start of the
 * first step to the latest end of the last over ranks. Returns 0 with *from_ns, *to_ns;
 * 1 when no step lies in the range (the window then meets no event); a negative code
 * when the analysis failed. *nsteps: the steps the run has. Caller's thread. */
int mrd_export_steps_window(sqlite3 *db, const struct mrd_perfetto_options *o, int64_t origin,
                            int64_t *from_ns, int64_t *to_ns, uint64_t *nsteps);

/* Writes Chrome trace event JSON (Perfetto and chrome://tracing open it): one process per
 * rank, one thread (track) per GPU stream for kernels, memcpy and memset, tracks for the
 * rank's NCCL operations (host enqueue intervals), per host thread for NVTX ranges and MPI
 * calls, for CUDA graph launches and host synchronizations (slices of a track always
 * nest: overlapping ones go to extra lanes); flow arrows (and args) link each NCCL op to
 * its kernel. Times are
 * microseconds with nanosecond precision after the run's time origin (mrd_timebase_origin:
 * aggregator/SCHEMA.md, "The time origin"), which otherData.origin_ns holds. A window or
 * step range that selects nothing still writes a valid trace (metadata only) and returns
 * 0: the caller tells from st->selected. Returns 0 and fills *st (may be NULL), -EIO,
 * -ENOMEM, or -MRD_ERR_SQLITE. */
int mrd_export_perfetto(FILE *f, sqlite3 *db, const struct mrd_perfetto_options *o,
                        struct mrd_perfetto_stats *st);

/* Formats a duration for people ("812 ns", "12.3 us", "4.56 ms", "1.234 s") into buf.
 * Returns buf. */
const char *mrd_export_fmt_ns(char *buf, size_t n, int64_t ns);

#endif
