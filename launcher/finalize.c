/* Completing a database after its run, and the report rendering shared by `profile` and
 * `report`.
 *
 * Where it sits: after meridiand has stopped (nothing else writes the database). The
 * finalize runs aggregator/clock's three passes in their documented order: clock fit
 * (clock_samples -> clock_models), GPU timer calibration (-> gpu_timer_models), causality
 * check with offset tightening; then it stores the op intervals those passes built
 * (nccl_op_links, nccl_op_intervals: aggregator/db, mrd_db_op_intervals_save) and derives
 * the `windows` table (the steady tier's capture windows, aggregator/analyze/
 * window_table.h) on the timebase the passes left; then analysis and export read the
 * completed tables.
 * Main thread; one SQLite connection.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analyze.h"
#include "cli.h"
#include "error.h"
#include "export.h"
#include "progress.h"
#include "store.h"
#include "window_table.h"
#include "clock.h"

/* Every check on the read-only connection first (mrd_store_open_readonly: a directory, an
 * empty, foreign or unreadable file, a newer schema version), so a refused file keeps
 * every byte and gains no -wal/-shm; only then, for the finalize, a read-write connection.
 * That one is the last to close after its writes, so SQLite checkpoints and deletes the
 * -wal and -shm it created (meridiand has stopped: nothing else has the file open). */
sqlite3 *mrd_cli_open_db(const char *path, int readonly, const char *who)
{
    char why[2 * PATH_MAX];
    sqlite3 *db = NULL;
    if (mrd_store_open_readonly(path, &db, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s: %s\n", who, why);
        return NULL;
    }
    if (readonly)
        return db;
    sqlite3_close(db);
    db = NULL;
    /* SQLite would open a write-protected file read-only without a word, and the
     * finalize would fail at its first write */
    if (access(path, W_OK) != 0) {
        fprintf(stderr, "%s: cannot update %s: %s\n", who, path, mrd_strerror(-errno));
        return NULL;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: cannot open %s: %s\n", who, path,
                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static int set_command(sqlite3 *db, const char *command)
{
    return mrd_db_step_text(db, mrd_db_sql_run_command_set, command) == SQLITE_DONE
               ? 0
               : -MRD_ERR_SQLITE;
}

/* The windows table, after the clock passes (its times are global). One line when the run
 * had window records; a failure makes the finalize fail (the table is left as it was). */
static int derive_windows(sqlite3 *db, FILE *log)
{
    struct mrd_window_table_stats st;
    memset(&st, 0, sizeof(st));
    int w = mrd_window_table_derive(db, &st, log);
    if (w < 0) {
        fprintf(log, "meridian: capture windows not derived: %s\n", mrd_strerror(w));
        return w;
    }
    if (st.windows || st.malformed)
        fprintf(log,
                "meridian: capture windows: %" PRIu64 " on %d rank(s) (%" PRIu64
                " open at exit), %" PRIu64 " malformed record(s) skipped\n",
                st.windows, st.ranks, st.open, st.malformed);
    return 0;
}

int mrd_cli_finalize(sqlite3 *db, const char *command, FILE *log)
{
    return mrd_cli_finalize_progress(db, command, log, "meridian finalize", MRD_PROGRESS_OFF);
}

/* The finalize's progress: rows of the tables its four passes read, counted before they
 * run (only when progress is shown), each pass its share:
 *   clock fit            clock_samples;
 *   GPU timers           nccl_channels + gpu_clock_samples (the calibration's brackets);
 *   causality            2 x the collective rows (nccl_ops, not p2p, with a seq): its two
 *                        passes over the instances;
 *   capture windows      window_records + the NVTX ranges of domain MRD_WINDOW_DOMAIN.
 * Inside a pass, done advances with the rows its SQL statements return (sqlite3_trace_v2,
 * SQLITE_TRACE_ROW: the pass's own code is untouched), at most to its share less one; when
 * the pass ends, done is the end of its share. So done rises strictly, a long pass shows
 * lines while it runs, and the total is reached when the finalize ends. The trace callback
 * is installed only while progress is shown: with --quiet or without a terminal the
 * finalize runs exactly as without progress. */
#define FINALIZE_TICK_ROWS 4096 /* rows returned between two updates inside a pass */

enum { PASS_CLOCK, PASS_GPU, PASS_CAUSALITY, PASS_WINDOWS, FINALIZE_PASSES };

struct finalize_progress {
    struct mrd_progress p;
    uint64_t share[FINALIZE_PASSES];
    int pass;
    uint64_t base;  /* the shares of the passes that ended */
    uint64_t seen;  /* rows returned in this pass so far */
    uint64_t shown; /* the last done given to p */
};

static uint64_t count_of(sqlite3 *db, const char *table, const char *sql)
{
    sqlite3_stmt *st = NULL;
    uint64_t n = 0;
    if (mrd_db_has_table(db, table) == 1 &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void finalize_shares(sqlite3 *db, struct finalize_progress *fp)
{
    fp->share[PASS_CLOCK] =
        count_of(db, "clock_samples", "SELECT COUNT(*) FROM main.clock_samples");
    fp->share[PASS_GPU] =
        count_of(db, "nccl_channels", "SELECT COUNT(*) FROM main.nccl_channels") +
        count_of(db, "gpu_clock_samples", "SELECT COUNT(*) FROM main.gpu_clock_samples");
    fp->share[PASS_CAUSALITY] =
        2 * count_of(db, "nccl_ops",
                     "SELECT COUNT(*) FROM main.nccl_ops WHERE is_p2p = 0 AND seq IS NOT NULL");
    fp->share[PASS_WINDOWS] =
        count_of(db, "window_records", "SELECT COUNT(*) FROM main.window_records") +
        count_of(db, "nvtx",
                 "SELECT COUNT(*) FROM main.nvtx n JOIN main.strings s ON s.id = n.domain_id "
                 "WHERE s.value = '" MRD_WINDOW_DOMAIN "'");
    uint64_t total = 0;
    for (int i = 0; i < FINALIZE_PASSES; i++)
        total += fp->share[i];
    mrd_progress_set_total(&fp->p, total);
}

static void finalize_show(struct finalize_progress *fp, uint64_t done)
{
    if (done > fp->shown) {
        fp->shown = done;
        mrd_progress_set(&fp->p, done);
    }
}

static int finalize_on_row(unsigned type, void *ctx, void *stmt, void *unused)
{
    struct finalize_progress *fp = ctx;
    (void)type, (void)stmt, (void)unused;
    uint64_t share = fp->share[fp->pass];
    if (++fp->seen % FINALIZE_TICK_ROWS == 0 && share > 1)
        finalize_show(fp, fp->base + (fp->seen < share - 1 ? fp->seen : share - 1));
    return 0;
}

/* The pass fp->pass ended: done moves to the end of its share; the next one starts. */
static void finalize_pass_end(struct finalize_progress *fp)
{
    fp->base += fp->share[fp->pass];
    finalize_show(fp, fp->base);
    fp->seen = 0;
    if (fp->pass + 1 < FINALIZE_PASSES)
        fp->pass++;
}

/* The four passes in their order, fp counting them. */
static int finalize_passes(sqlite3 *db, const char *command, FILE *log,
                           struct finalize_progress *fp)
{
    int rc = 0;
    if (command && set_command(db, command) < 0) {
        fprintf(log, "meridian: cannot record the command in runs: %s\n", sqlite3_errmsg(db));
        rc = -MRD_ERR_SQLITE;
    }
    int n = mrd_clock_fit_db(db, NULL, log);
    if (n < 0) {
        fprintf(log, "meridian: clock fit failed: %s (%s)\n", mrd_strerror(n), sqlite3_errmsg(db));
        return n;
    }
    fprintf(log, "meridian: clock models fitted for %d rank(s)\n", n);
    finalize_pass_end(fp);
    int g = mrd_clock_gpu_fit_db(db, log);
    if (g < 0)
        fprintf(log, "meridian: GPU timer calibration failed: %s\n", mrd_strerror(g));
    else
        fprintf(log, "meridian: GPU timers calibrated: %d GPU(s)\n", g);
    finalize_pass_end(fp);
    if (n > 0) {
        struct mrd_clock_causality_summary sum;
        memset(&sum, 0, sizeof(sum));
        /* the GPU calibration just built the op intervals on this connection */
        int c = mrd_clock_causality_db(
            db, MRD_CLOCK_CAUSALITY_APPLY | MRD_CLOCK_CAUSALITY_REUSE_OPS, &sum, log);
        if (c < 0)
            fprintf(log, "meridian: causality check failed: %s\n", mrd_strerror(c));
        else
            fprintf(log,
                    "meridian: causality: %" PRIu64 " instances, violations %" PRIu64
                    " before / %" PRIu64 " after tightening, largest shift %" PRId64 " ns\n",
                    sum.instances, sum.violations_before, sum.violations_after, sum.max_shift_ns);
    }
    /* what the analysis and the exports would build again from the same rows */
    int o = mrd_db_op_intervals_save(db);
    if (o < 0)
        fprintf(log, "meridian: op intervals not stored (each report builds them): %s (%s)\n",
                mrd_strerror(o), sqlite3_errmsg(db));
    finalize_pass_end(fp);
    int w = derive_windows(db, log);
    finalize_pass_end(fp);
    return rc < 0 ? rc : w;
}

int mrd_cli_finalize_progress(sqlite3 *db, const char *command, FILE *log, const char *who,
                              int progress)
{
    struct finalize_progress fp;
    struct mrd_progress *pg = &fp.p;
    int rc = 0;
    memset(&fp, 0, sizeof(fp));
    mrd_progress_begin(pg, progress, who, "finalizing (clock fit, GPU timers, causality, windows)",
                       "rows", 0);
    if (pg->on) {
        finalize_shares(db, &fp);
        sqlite3_trace_v2(db, SQLITE_TRACE_ROW, finalize_on_row, &fp);
    }
    rc = finalize_passes(db, command, log, &fp);
    if (pg->on)
        sqlite3_trace_v2(db, 0, NULL, NULL);
    mrd_progress_end(pg);
    return rc;
}

static FILE *open_out(const char *path, const char *who)
{
    if (strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot write %s: %s\n", who, path, mrd_strerror(-errno));
    return f;
}

static int close_out(FILE *f, const char *path, const char *who)
{
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad)
        fprintf(stderr, "%s: error writing %s\n", who, path);
    return bad ? -EIO : 0;
}

/* What the outputs gather from every matched instance while the analysis runs. */
struct render_collect {
    struct mrd_html_acc *html;
    struct mrd_export_skews *skews;
    struct mrd_progress progress;
    uint64_t instances;
};

static void on_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct render_collect *c = ctx;
    if (c->html)
        mrd_export_html_on_instance(in, c->html);
    if (c->skews)
        mrd_export_skews_on_instance(in, c->skews);
    mrd_progress_set(&c->progress, ++c->instances);
}

uint64_t mrd_cli_instance_count(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    uint64_t n = 0;
    if (mrd_db_has_table(db, "nccl_ops") == 1 &&
        sqlite3_prepare_v2(db, mrd_db_sql_instance_count, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

int mrd_cli_render(sqlite3 *db, FILE *text, const char *html_path, const char *json_path,
                   int ignore_clock, const char *step_name, const char *who)
{
    return mrd_cli_render_progress(db, text, html_path, json_path, ignore_clock, step_name, who,
                                   MRD_PROGRESS_AUTO);
}

int mrd_cli_render_progress(sqlite3 *db, FILE *text, const char *html_path, const char *json_path,
                            int ignore_clock, const char *step_name, const char *who, int progress)
{
    struct mrd_analyze_options ao;
    struct mrd_analysis *a = NULL;
    struct render_collect col;
    const char *msg = NULL;
    int rc, failed = 0;
    FILE *f;

    memset(&ao, 0, sizeof(ao));
    memset(&col, 0, sizeof(col));
    ao.ignore_clock_models = ignore_clock;
    ao.step_name = step_name;
    mrd_progress_begin(&col.progress, progress, who, "analysing collectives", "instances",
                       progress == MRD_PROGRESS_OFF ? 0 : mrd_cli_instance_count(db));
    /* the HTML report's heat map and the text report's percentiles need every instance */
    if ((html_path && mrd_export_html_acc_new(&col.html) < 0) ||
        (text && mrd_export_skews_new(&col.skews) < 0)) {
        fprintf(stderr, "%s: out of memory\n", who);
        failed = 1;
        goto out;
    }
    ao.on_instance = on_instance;
    ao.ctx = &col;
    if ((rc = mrd_analyze(db, &ao, &a, &msg)) < 0) {
        fprintf(stderr, "%s: analysis failed: %s\n", who, msg ? msg : mrd_strerror(rc));
        failed = 1;
        goto out;
    }
    mrd_progress_end(&col.progress);
    if (text && mrd_export_text_skews(text, a, col.skews) < 0) {
        fprintf(stderr, "%s: error writing the report\n", who);
        failed = 1;
    }
    if (html_path && (f = open_out(html_path, who)) != NULL) {
        rc = mrd_export_html(f, db, a, col.html);
        if (rc < 0)
            fprintf(stderr, "%s: HTML report: %s\n", who,
                    rc == -MRD_ERR_SQLITE ? sqlite3_errmsg(db) : mrd_strerror(rc));
        failed |= close_out(f, html_path, who) < 0 || rc < 0;
    } else if (html_path) {
        failed = 1;
    }
    if (json_path && (f = open_out(json_path, who)) != NULL) {
        rc = mrd_export_json(f, a);
        failed |= close_out(f, json_path, who) < 0 || rc < 0;
    } else if (json_path) {
        failed = 1;
    }
out:
    mrd_analysis_free(a);
    mrd_export_html_acc_free(col.html);
    mrd_export_skews_free(col.skews);
    return failed;
}
