/* analysis_windows: the `windows` table the finalize derives from the steady tier's window
 * records (aggregator/analyze/window_table.h), and the reports' "Capture windows" section.
 *
 * usage: test_analysis_windows DIR [MERIDIAN]
 * Builds its databases in DIR with the fixture (fixture.c). With MERIDIAN (the `meridian`
 * binary) it also runs `meridian finalize` and `meridian report` (text and --json) on them,
 * so the path the user takes is the one checked.
 *
 * The fixture (local ns; clock models: rank 0 offset +1,000,000, rank 1 offset -2,000, no
 * drift, so global = local + offset). Window records, domain "meridian.window":
 *
 *   rank  local          message                                  -> global          kernels
 *   0     10000..20000   "10-19 periodic a=11873 d=3201 f=1540"     1010000..1020000  3
 *   0     50000..60000   "40-49 periodic a=12001 d=2999 f=1200"     1050000..1060000  1
 *   1     10000..30000   "10-19 range a=11500 d=4000 f=900"         8000..28000       2
 *   1     40000..45000   "20-29 range a=1 d=2"  (truncated: skipped)
 *   1     46000..47000   "29-20 range a=1 d=2 f=3" (last < first: skipped)
 *   1     48000..49000   no message (name_id NULL: skipped)
 *   1     60000..50000   "50-59 range a=1 d=1 f=1" (ends before it starts: skipped)
 *   1     70000..90000   "30-39 range a=12500 d=-1 f=0" (open at exit) 68000..88000  1
 *
 * plus a window-like message in another domain and a "step 3" range (both ignored).
 * Kernels: rank 0 at 9999 (before W1), 10000 and 20000 (W1's bounds: inside), 15000,
 * 20001 (after), 55000 (W2), 70000 and 75000 (rank 0, inside rank 1's W4 only locally:
 * another rank); rank 1 at 12000, 29999 (W3), 42000 (in the skipped record), 80000 (W4),
 * 100000 (after everything).
 *
 * no_window_opened: a steady-tier run without a window; the report's warning says why
 * (no step, a job shorter than the first window, CUDA capture never started, attaches
 * that failed), and nothing in the full tier, with `none` or without fingerprints.
 *
 * with_window_events: the same windows as `window` events (window_records), except rank 1's
 * first as an NVTX record, plus two impossible events: the same table.
 *
 * Medians: rank 0 attach (11873 + 12001) / 2 us = 11.937 ms, detach (3201 + 2999) / 2 =
 * 3.100 ms; rank 1 attach (11500 + 12500) / 2 = 12.000 ms, detach 4.000 ms (the open
 * window has none).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "analyze.h"
#include "check.h"
#include "check_sql.h"
#include "error.h"
#include "export.h"
#include "fixture.h"
#include "window_table.h"

#define DUMP_SQL                                                                                   \
    "SELECT rank, first_step, last_step, detach_step, reason, start_ns, end_ns, attach_ns, "       \
    "detach_ns, flush_ns, kernels FROM windows ORDER BY rank, start_ns"

static void parse_cases(void)
{
    struct mrd_window_msg m;
    CHECK_OK(mrd_window_table_parse("10-19 periodic a=11873 d=3201 f=1540", &m));
    CHECK_EQ(m.first_step, 10);
    CHECK_EQ(m.last_step, 19);
    CHECK_STREQ(m.reason, "periodic");
    CHECK_EQ(m.attach_ns, 11873000);
    CHECK_EQ(m.detach_ns, 3201000);
    CHECK_EQ(m.flush_ns, 1540000);
    CHECK_OK(mrd_window_table_parse("0-0 range a=0 d=-1 f=0", &m));
    CHECK_EQ(m.detach_ns, -1);
    CHECK_STREQ(m.reason, "range");
    /* the largest microsecond value that fits in int64 nanoseconds, and one more */
    CHECK_OK(mrd_window_table_parse("1-2 range a=9223372036854775 d=0 f=0", &m));
    CHECK_EQ(m.attach_ns, 9223372036854775000LL);
    static const char *const bad[] = {
        "",
        "step 3",
        "10-19 periodic a=11873 d=3201",         /* truncated */
        "10-19 periodic a=11873 d=3201 f=1540 ", /* trailing */
        "10-19 periodic a=11873 d=3201 f=1540x",
        "19-10 range a=1 d=1 f=1", /* last < first */
        "10-19  range a=1 d=1 f=1",
        "10-19 Range a=1 d=1 f=1",
        "10 range a=1 d=1 f=1",
        "-1-19 range a=1 d=1 f=1",
        "10-19 range a=-1 d=1 f=1", /* only d may be -1 */
        "10-19 range a=1 d=-2 f=1",
        "10-19 range a=1 d=-10 f=1",
        "10-19 range a=1 d=1 f=-1",
        "10-19 range a=9223372036854776 d=1 f=1", /* overflows as ns */
        "10-19 range a=1234567890123456789 d=1 f=1",
        "10-19 averyveryverylongreason a=1 d=1 f=1",
        "10-19 range a= d=1 f=1",
        "10-19 range d=1 a=1 f=1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (mrd_window_table_parse(bad[i], &m) != -EINVAL)
            CHECK_FAIL_("accepted malformed message \"%s\"", bad[i]);
    CHECK_EQ(mrd_window_table_parse(NULL, &m), -EINVAL);
}

static void nvtx_in(sqlite3 *db, int rank, int64_t start, int64_t end, const char *domain,
                    const char *msg)
{
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "INSERT INTO nvtx (rank, thread, start_ns, end_ns, kind, "
                                "domain_id, name_id, depth, color) VALUES (?1, 77, ?2, ?3, 1, "
                                "?4, ?5, 0, 0)",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int64(st, 3, end);
    sqlite3_bind_int64(st, 4, fx_str(db, domain));
    sqlite3_bind_int64(st, 5, fx_str(db, msg));
    CHECK_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
}

/* The window closes' counters: rank 0 closed two windows in 70 us (a mean of 0.035 ms),
 * rank 1 recorded no close (its division by zero must read as not recorded). */
static void close_counters(sqlite3 *db)
{
    fx_exec(db, "INSERT INTO agent_counters (rank, category, name, value) VALUES "
                "(0, 'window', 'closes', 2), (0, 'window', 'close_ns', 70000), "
                "(1, 'window', 'closes', 0), (1, 'window', 'close_ns', 0)");
}

static void build_windows_db(sqlite3 *db)
{
    fx_exec(db, "BEGIN");
    fx_run(db, "windows-run", 2, 1000);
    fx_rank(db, 0, "nodeA", 100);
    fx_rank(db, 1, "nodeB", 200);
    fx_clock(db, 0, 0, 0, 1000000, 1000000, 0.0, 50);
    fx_clock(db, 1, 0, 0, 1000000, -2000, 0.0, 50);
    nvtx_in(db, 0, 10000, 20000, MRD_WINDOW_DOMAIN, "10-19 periodic a=11873 d=3201 f=1540");
    nvtx_in(db, 0, 50000, 60000, MRD_WINDOW_DOMAIN, "40-49 periodic a=12001 d=2999 f=1200");
    nvtx_in(db, 1, 10000, 30000, MRD_WINDOW_DOMAIN, "10-19 range a=11500 d=4000 f=900");
    nvtx_in(db, 1, 40000, 45000, MRD_WINDOW_DOMAIN, "20-29 range a=1 d=2");
    nvtx_in(db, 1, 46000, 47000, MRD_WINDOW_DOMAIN, "29-20 range a=1 d=2 f=3");
    nvtx_in(db, 1, 70000, 90000, MRD_WINDOW_DOMAIN, "30-39 range a=12500 d=-1 f=0");
    nvtx_in(db, 1, 48000, 49000, MRD_WINDOW_DOMAIN, "placeholder");
    fx_exec(db, "UPDATE nvtx SET name_id = NULL WHERE start_ns = 48000");
    nvtx_in(db, 1, 60000, 50000, MRD_WINDOW_DOMAIN, "50-59 range a=1 d=1 f=1");
    nvtx_in(db, 0, 10000, 20000, "other.domain", "1-2 range a=1 d=1 f=1");
    fx_nvtx(db, 0, 12000, 13000, 1, "step 3");
    static const int64_t k0[] = {9999, 10000, 15000, 20000, 20001, 55000, 70000, 75000};
    static const int64_t k1[] = {12000, 29999, 42000, 80000, 100000};
    for (size_t i = 0; i < sizeof(k0) / sizeof(k0[0]); i++)
        fx_kernel(db, 0, 0, 7, k0[i], k0[i] + 500, 1 + (int64_t)i, "gemm_kernel");
    for (size_t i = 0; i < sizeof(k1) / sizeof(k1[0]); i++)
        fx_kernel(db, 1, 0, 7, k1[i], k1[i] + 500, 1 + (int64_t)i, "gemm_kernel");
    close_counters(db);
    fx_exec(db, "COMMIT");
}

/* The table as text, one row per line ("NULL" for NULL). */
static void dump(sqlite3 *db, char *out, size_t n)
{
    sqlite3_stmt *st = NULL;
    size_t k = 0;
    out[0] = '\0';
    CHECK_EQ(sqlite3_prepare_v2(db, DUMP_SQL, -1, &st, NULL), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            int m = snprintf(out + k, n - k, "%s%s", c ? " " : "", t ? (const char *)t : "NULL");
            CHECK(m > 0 && (size_t)m < n - k);
            k += (size_t)m;
        }
        CHECK_LT(k + 1, n);
        out[k++] = '\n';
        out[k] = '\0';
    }
    sqlite3_finalize(st);
}

static const char want_rows[] = "0 10 19 20 periodic 1010000 1020000 11873000 3201000 1540000 3\n"
                                "0 40 49 50 periodic 1050000 1060000 12001000 2999000 1200000 1\n"
                                "1 10 19 20 range 8000 28000 11500000 4000000 900000 2\n"
                                "1 30 39 40 range 68000 88000 12500000 NULL 0 1\n";

static void check_table(sqlite3 *db)
{
    char got[4096];
    dump(db, got, sizeof(got));
    if (strcmp(got, want_rows) != 0)
        CHECK_FAIL_("windows table:\n%s\nexpected:\n%s", got, want_rows);
}

static char *render(sqlite3 *db, int json)
{
    struct mrd_analysis *a = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    CHECK_OK(mrd_analyze(db, NULL, &a, NULL));
    CHECK_OK(json ? mrd_export_json(f, a) : mrd_export_text(f, a));
    mrd_analysis_free(a);
    fclose(f);
    return buf;
}

/* The exact section lines (the columns of report_text.c's print_windows). */
static void check_text(const char *out)
{
    char line[256];
    const char *sec = strstr(out, "\n== Capture windows (CUPTI attached only for these steps)\n");
    if (!sec)
        CHECK_FAIL_("no windows section in:\n%s", out);
    snprintf(line, sizeof(line), "\n  %-5d %8d %8d %10d %11s %11s %11s  %s\n", 0, 2, 20, 4,
             "11.94 ms", "0.035 ms", "3.10 ms", "10-19, 40-49");
    if (!strstr(sec, line))
        CHECK_FAIL_("rank 0 line%s missing in:\n%s", line, sec);
    snprintf(line, sizeof(line), "\n  %-5d %8d %8d %10d %11s %11s %11s  %s\n", 1, 2, 20, 3,
             "12.00 ms", "-", "4.00 ms", "10-19, 30-39 (1 open at exit)");
    if (!strstr(sec, line))
        CHECK_FAIL_("rank 1 line%s missing in:\n%s", line, sec);
    CHECK(strstr(sec, "  overlap figures come from the window steps only (kernels exist only "
                      "there); stragglers from all steps (the NCCL plugin is on all the "
                      "time)\n") != NULL);
    /* placed after the drops, before the clock models */
    CHECK(strstr(out, "== Dropped events") < sec);
    CHECK(strstr(out, "== Clock models") > sec);
}

static void check_json(const char *out)
{
    static const char *const want[] = {
        "\"windows\":[\n{\"rank\":0,\"windows\":2,\"open_at_exit\":0,\"steps\":20,"
        "\"first_step\":10,\"last_step\":49,\"ranges\":[[10,19],[40,49]],\"kernels\":4,"
        "\"attach_median_ns\":11937000,\"detach_median_ns\":3100000,\"close_mean_ns\":35000},\n",
        "{\"rank\":1,\"windows\":2,\"open_at_exit\":1,\"steps\":20,\"first_step\":10,"
        "\"last_step\":39,\"ranges\":[[10,19],[30,39]],\"kernels\":3,"
        "\"attach_median_ns\":12000000,\"detach_median_ns\":4000000,\"close_mean_ns\":null}],\n",
    };
    for (size_t i = 0; i < 2; i++)
        if (!strstr(out, want[i]))
            CHECK_FAIL_("JSON lacks %s in:\n%s", want[i], out);
}

/* Runs cmd, returns its stdout+stderr (malloc'd); the exit status must be 0. */
static char *run(const char *cmd)
{
    char *buf = NULL;
    size_t len = 0;
    char chunk[4096];
    size_t n;
    FILE *out = open_memstream(&buf, &len);
    FILE *p = popen(cmd, "r");
    CHECK(out != NULL && p != NULL);
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        fwrite(chunk, 1, n, out);
    int st = pclose(p);
    fclose(out);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        CHECK_FAIL_("`%s` failed (status %d):\n%s", cmd, st, buf);
    return buf;
}

static sqlite3 *reopen(const char *path)
{
    sqlite3 *db = NULL;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    return db;
}

/* A run with windows: the library directly, twice, then the CLI. */
static void with_windows(const char *dir, const char *meridian)
{
    char path[1024], cmd[4096];
    struct mrd_window_table_stats st;
    snprintf(path, sizeof(path), "%s/analysis_windows.db", dir);
    sqlite3 *db = fx_create(path);
    build_windows_db(db);

    /* not finalized yet: no section, and the analysis says how to get it */
    char *out = render(db, 0);
    CHECK(strstr(out, "Capture windows") == NULL);
    CHECK(strstr(out, "capture-window records but no windows table") != NULL);
    free(out);

    for (int pass = 0; pass < 2; pass++) { /* the second pass replaces the first's rows */
        memset(&st, 0, sizeof(st));
        CHECK_OK(mrd_window_table_derive(db, &st, stderr));
        CHECK_EQ(st.windows, 4);
        CHECK_EQ(st.open, 1);
        CHECK_EQ(st.malformed, 4);
        CHECK_EQ(st.ranks, 2);
        check_table(db);
    }
    out = render(db, 0);
    check_text(out);
    CHECK(strstr(out, "no windows table") == NULL);
    free(out);
    out = render(db, 1);
    check_json(out);
    free(out);
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);
    if (!meridian)
        return;

    snprintf(cmd, sizeof(cmd), "'%s' finalize '%s' 2>&1", meridian, path);
    for (int pass = 0; pass < 2; pass++) {
        out = run(cmd);
        if (!strstr(out, "meridian: capture windows: 4 on 2 rank(s) (1 open at exit), 4 "
                         "malformed record(s) skipped\n"))
            CHECK_FAIL_("finalize's summary line missing:\n%s", out);
        CHECK(strstr(out, "windows: rank 1: record at local 40000 ns skipped (malformed "
                          "message): \"20-29 range a=1 d=2\"") != NULL);
        CHECK(strstr(out, "record at local 48000 ns skipped (malformed message): \"(no "
                          "message)\"") != NULL);
        CHECK(strstr(out, "record at local 60000 ns skipped (ends before it starts)") != NULL);
        free(out);
        db = reopen(path);
        check_table(db);
        CHECK_EQ(sqlite3_close(db), SQLITE_OK);
    }
    snprintf(cmd, sizeof(cmd), "'%s' report '%s'", meridian, path);
    out = run(cmd);
    check_text(out);
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' report '%s' --json", meridian, path);
    out = run(cmd);
    check_json(out);
    free(out);
}

static void window_event(sqlite3 *db, int rank, int64_t start, int64_t end, int64_t first,
                         int64_t last, const char *reason, int64_t a, int64_t d, int64_t f)
{
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "INSERT INTO window_records (rank, start_ns, end_ns, first_step, "
                                "last_step, reason_id, attach_ns, detach_ns, flush_ns) VALUES "
                                "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                -1, &st, NULL),
             SQLITE_OK);
    sqlite3_bind_int(st, 1, rank);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int64(st, 3, end);
    sqlite3_bind_int64(st, 4, first);
    sqlite3_bind_int64(st, 5, last);
    sqlite3_bind_int64(st, 6, fx_str(db, reason));
    sqlite3_bind_int64(st, 7, a);
    sqlite3_bind_int64(st, 8, d);
    sqlite3_bind_int64(st, 9, f);
    CHECK_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
}

/* The same windows as `window` events (today's agents), rank 1's first one still an NVTX
 * record (an older agent in the same job), plus two impossible events: the same table. */
static void with_window_events(const char *dir, const char *meridian)
{
    char path[1024], cmd[4096];
    struct mrd_window_table_stats st;
    snprintf(path, sizeof(path), "%s/analysis_window_events.db", dir);
    sqlite3 *db = fx_create(path);
    fx_exec(db, "BEGIN");
    fx_run(db, "windows-run", 2, 1000);
    fx_rank(db, 0, "nodeA", 100);
    fx_rank(db, 1, "nodeB", 200);
    fx_clock(db, 0, 0, 0, 1000000, 1000000, 0.0, 50);
    fx_clock(db, 1, 0, 0, 1000000, -2000, 0.0, 50);
    window_event(db, 0, 10000, 20000, 10, 19, "periodic", 11873000, 3201000, 1540000);
    window_event(db, 0, 50000, 60000, 40, 49, "periodic", 12001000, 2999000, 1200000);
    nvtx_in(db, 1, 10000, 30000, MRD_WINDOW_DOMAIN, "10-19 range a=11500 d=4000 f=900");
    window_event(db, 1, 70000, 90000, 30, 39, "range", 12500000, -1, 0);
    window_event(db, 1, 46000, 47000, 29, 20, "range", 1000, 2000, 3000); /* last < first */
    window_event(db, 1, 60000, 50000, 50, 59, "range", 1000, 1000, 1000); /* ends first */
    static const int64_t k0[] = {9999, 10000, 15000, 20000, 20001, 55000, 70000, 75000};
    static const int64_t k1[] = {12000, 29999, 42000, 80000, 100000};
    for (size_t i = 0; i < sizeof(k0) / sizeof(k0[0]); i++)
        fx_kernel(db, 0, 0, 7, k0[i], k0[i] + 500, 1 + (int64_t)i, "gemm_kernel");
    for (size_t i = 0; i < sizeof(k1) / sizeof(k1[0]); i++)
        fx_kernel(db, 1, 0, 7, k1[i], k1[i] + 500, 1 + (int64_t)i, "gemm_kernel");
    close_counters(db);
    fx_exec(db, "COMMIT");
    char *out = render(db, 0);
    CHECK(strstr(out, "capture-window records but no windows table") != NULL);
    free(out);
    memset(&st, 0, sizeof(st));
    CHECK_OK(mrd_window_table_derive(db, &st, stderr));
    CHECK_EQ(st.windows, 4);
    CHECK_EQ(st.open, 1);
    CHECK_EQ(st.malformed, 2);
    CHECK_EQ(st.ranks, 2);
    check_table(db);
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);
    if (!meridian)
        return;
    snprintf(cmd, sizeof(cmd), "'%s' finalize '%s' 2>&1", meridian, path);
    out = run(cmd);
    if (!strstr(out, "meridian: capture windows: 4 on 2 rank(s) (1 open at exit), 2 "
                     "malformed record(s) skipped\n"))
        CHECK_FAIL_("finalize's summary line missing:\n%s", out);
    free(out);
    db = reopen(path);
    check_table(db);
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);
    snprintf(cmd, sizeof(cmd), "'%s' report '%s'", meridian, path);
    out = run(cmd);
    check_text(out);
    free(out);
}

/* The matching fixture (no window records): an empty table, nothing new in the reports. */
static void without_windows(const char *dir, const char *meridian)
{
    char path[1024], cmd[4096];
    struct mrd_window_table_stats st;
    snprintf(path, sizeof(path), "%s/analysis_windows_none.db", dir);
    sqlite3 *db = fx_create(path);
    fx_build_match(db);
    memset(&st, 0, sizeof(st));
    CHECK_OK(mrd_window_table_derive(db, &st, stderr));
    CHECK_EQ(st.windows + st.malformed, 0);
    CHECK_EQ(check_sql_int(db, "SELECT count(*) FROM windows"), 0);
    char *out = render(db, 0);
    CHECK(strstr(out, "Capture windows") == NULL && strstr(out, "windows table") == NULL);
    free(out);
    out = render(db, 1);
    CHECK(strstr(out, "\"windows\"") == NULL);
    free(out);
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);
    if (!meridian)
        return;
    snprintf(cmd, sizeof(cmd), "'%s' finalize '%s' 2>&1", meridian, path);
    out = run(cmd);
    CHECK(strstr(out, "capture windows") == NULL);
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' report '%s'", meridian, path);
    out = run(cmd);
    CHECK(strstr(out, "Capture windows") == NULL && strstr(out, "== Stragglers") != NULL);
    free(out);
    snprintf(cmd, sizeof(cmd), "'%s' report '%s' --json", meridian, path);
    out = run(cmd);
    CHECK(strstr(out, "\"windows\"") == NULL && strstr(out, "\"warnings\":[") != NULL);
    free(out);
}

/* One case of no_window_opened: the fingerprints (tier, windows; NULL: key absent) and
 * counters window/steps and window/failed of ranks 0 and 1 (-1: not recorded), then the
 * report's warning: `want` found, or (NULL) no "no capture window opened" at all. */
static void no_window_case(sqlite3 *db, const char *tier, const char *spec, const int64_t steps[2],
                           const int64_t failed[2], const char *want)
{
    fx_exec(db, "DELETE FROM env_records; DELETE FROM agent_counters");
    char sql[512];
    for (int r = 0; r < 2; r++) {
        const char *kv[2][2] = {{"env:MERIDIAN_TRACE", tier}, {"env:MERIDIAN_WINDOWS", spec}};
        for (int i = 0; i < 2; i++)
            if (kv[i][1]) {
                snprintf(sql, sizeof(sql),
                         "INSERT INTO env_records (rank, key_id, value_id) VALUES "
                         "(%d, %lld, %lld)",
                         r, (long long)fx_str(db, kv[i][0]), (long long)fx_str(db, kv[i][1]));
                fx_exec(db, sql);
            }
        const char *name[2] = {"steps", "failed"};
        const int64_t *v[2] = {steps, failed};
        for (int i = 0; i < 2; i++)
            if (v[i][r] >= 0) {
                snprintf(sql, sizeof(sql),
                         "INSERT INTO agent_counters (rank, category, name, value) VALUES "
                         "(%d, 'window', '%s', %lld)",
                         r, name[i], (long long)v[i][r]);
                fx_exec(db, sql);
            }
    }
    char *out = render(db, 0);
    if (want ? !strstr(out, want) : strstr(out, "no capture window opened") != NULL)
        CHECK_FAIL_("tier %s, windows %s: want %s in:\n%s", tier ? tier : "(none)",
                    spec ? spec : "(none)", want ? want : "no warning", out);
    free(out);
}

/* A steady-tier run in which no window opened (no kernel traced): the warning says why,
 * from the ranks' fingerprints and window counters, and says nothing in the full tier,
 * with the windows `none`, or without fingerprints. */
static void no_window_opened(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/analysis_windows_unopened.db", dir);
    sqlite3 *db = fx_create(path);
    fx_build_match(db);
    struct mrd_window_table_stats st;
    memset(&st, 0, sizeof(st));
    CHECK_OK(mrd_window_table_derive(db, &st, stderr));
    const int64_t none[2] = {-1, -1}, zero[2] = {0, 0}, five[2] = {5, 3}, many[2] = {50, 40},
                  fails[2] = {1, 1};
#define LEAD "  - no capture window opened, no kernel traced: "
    no_window_case(db, NULL, NULL, five, zero, NULL);          /* no fingerprint */
    no_window_case(db, "full", "10/200@10", five, zero, NULL); /* the full tier */
    no_window_case(db, "steady", "none", five, zero, NULL);    /* no windows asked */
    no_window_case(db, "steady", NULL, five, zero, NULL);      /* the agent's default */
    no_window_case(db, "steady", "10/200@10", zero, zero,
                   LEAD "no rank began a step; mark the steps (--step-name), count them from a "
                        "collective (--step-collective) or use --full (steady tier, windows "
                        "10/200@10)\n");
    no_window_case(db, "steady", "10/200@10", five, zero,
                   LEAD "the ranks began at most 5 step(s) (0-4), the first window begins at "
                        "step 10; give --windows 0-4 or --full (steady tier, windows "
                        "10/200@10)\n");
    no_window_case(db, "steady", "10/200@10", (int64_t[2]){10, 9}, zero,
                   "the ranks began at most 10 step(s) (0-9), the first window begins at "
                   "step 10; give --windows 0-9 or --full");
    no_window_case(db, "steady", "7-9, 2/100@6", (int64_t[2]){6, 1}, zero,
                   "the ranks began at most 6 step(s) (0-5), the first window begins at step "
                   "6; give --windows 0-5 or --full (steady tier, windows 7-9, 2/100@6)\n");
    no_window_case(db, "steady", "10/200@10", five, none,
                   LEAD "CUDA capture never started (no window counters: no CUDA in the job, or "
                        "CUPTI setup failed; each rank's stderr says why) (steady tier, windows "
                        "10/200@10)\n");
#undef LEAD
    no_window_case(db, "steady", "10/200@10", many, fails,
                   "  - no capture window opened, no kernel traced, though the ranks reached "
                   "the first window's step: 2 CUPTI attach(es) failed (counter window/failed; "
                   "each rank's stderr says why) (steady tier, windows 10/200@10)\n");
    /* one step into the first window: it would have opened, so not a short job */
    no_window_case(db, "steady", "10/200@10", (int64_t[2]){11, 2}, zero,
                   "though the ranks reached the first window's step and no CUPTI attach "
                   "failed: the window records were lost (see the dropped events) (steady "
                   "tier, windows 10/200@10)\n");
    CHECK_EQ(sqlite3_close(db), SQLITE_OK);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: test_analysis_windows DIR [MERIDIAN]\n");
        return 2;
    }
    const char *meridian = argc == 3 ? argv[2] : NULL;
    parse_cases();
    with_windows(argv[1], meridian);
    with_window_events(argv[1], meridian);
    without_windows(argv[1], meridian);
    no_window_opened(argv[1]);
    printf("analysis_windows: ok (%s)\n", meridian ? "library and meridian CLI" : "library");
    return 0;
}
