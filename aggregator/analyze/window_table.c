/* The `windows` table (window_table.h): derived at finalize from the window records, and
 * read back per rank for the reports.
 *
 * Derivation: one scan of the nvtx rows in domain "meridian.window" (looked up once in
 * strings; without it the nvtx table is not scanned at all), in (rank, start) order. Per
 * record: parse the message, map start and end with the analysis' timebase, count the
 * rank's kernels whose start, mapped the same way, lies in [start, end], insert the row.
 * The kernel count is one range query on kernels_rank_start per window with the record's
 * local bounds; every candidate is then compared in global time. A rank's map is
 * nondecreasing (slope 1 + drift, segments that meet), so the local range holds every
 * kernel the global comparison can accept. The whole replacement is one transaction.
 *
 * Workload: a window spans tens to thousands of steps, so a rank has at most a few
 * thousand records; in the steady tier the kernels exist only inside windows, so the
 * counts read each kernel's start once. Memory O(1) beyond the clock segments; nothing is
 * held per window.
 *
 * Reading back (mrd__analyze_windows): one ordered pass over the table into one summary
 * per rank, then per rank the medians by ORDER BY ... LIMIT/OFFSET (no list of values
 * is held) and the mean close from the rank's counters. A steady-tier run whose table is
 * empty gets a warning saying why (no step, a job shorter than the first window, no CUDA
 * capture, refused attaches: warn_no_window).
 */
#include "window_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"
#include "array.h"
#include "error.h"
#include "steps.h"

#define MAX_LOGGED_MALFORMED 8 /* records described in the log; the rest are only counted */

/* ---- the message ---------------------------------------------------------------------- */

/* Microseconds that still fit in int64 nanoseconds. */
#define MAX_US (INT64_MAX / 1000)

/* A decimal >= 0 (no sign, at most 18 digits), or -1 when minus_one is allowed. Advances
 * *p past it. Returns 0 or -EINVAL. */
static int parse_num(const char **p, int64_t *v, int minus_one)
{
    const char *s = *p;
    int64_t x = 0;
    int n = 0;
    if (minus_one && s[0] == '-' && s[1] == '1' && !(s[2] >= '0' && s[2] <= '9')) {
        *v = -1;
        *p = s + 2;
        return 0;
    }
    while (s[n] >= '0' && s[n] <= '9') {
        if (n == 18)
            return -EINVAL;
        x = x * 10 + (s[n] - '0');
        n++;
    }
    if (n == 0)
        return -EINVAL;
    *v = x;
    *p = s + n;
    return 0;
}

static int expect(const char **p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*p, lit, n) != 0)
        return -EINVAL;
    *p += n;
    return 0;
}

static int us_to_ns(int64_t us, int64_t *ns)
{
    if (us > MAX_US)
        return -EINVAL;
    *ns = us < 0 ? -1 : us * 1000;
    return 0;
}

int mrd_window_table_parse(const char *msg, struct mrd_window_msg *out)
{
    struct mrd_window_msg m;
    int64_t a, d, f;
    size_t n = 0;
    const char *p = msg;
    if (!msg || !out)
        return -EINVAL;
    memset(&m, 0, sizeof(m));
    if (parse_num(&p, &m.first_step, 0) || expect(&p, "-") || parse_num(&p, &m.last_step, 0) ||
        expect(&p, " ") || m.last_step < m.first_step)
        return -EINVAL;
    while ((p[n] >= 'a' && p[n] <= 'z') || p[n] == '_') {
        if (n == sizeof(m.reason) - 1)
            return -EINVAL;
        m.reason[n] = p[n];
        n++;
    }
    if (n == 0)
        return -EINVAL;
    p += n;
    if (expect(&p, " a=") || parse_num(&p, &a, 0) || expect(&p, " d=") || parse_num(&p, &d, 1) ||
        expect(&p, " f=") || parse_num(&p, &f, 0) || *p != '\0')
        return -EINVAL;
    if (us_to_ns(a, &m.attach_ns) || us_to_ns(d, &m.detach_ns) || us_to_ns(f, &m.flush_ns))
        return -EINVAL;
    *out = m;
    return 0;
}

/* ---- derivation ----------------------------------------------------------------------- */

struct derive {
    sqlite3 *db;
    struct mrd_timebase *tb;
    sqlite3_stmt *sel, *kern, *ins;
    struct mrd_window_table_stats st;
    FILE *log;
};

static int sqlerr(struct derive *d, const char *what)
{
    if (d->log)
        fprintf(d->log, "windows: %s: %s\n", what, sqlite3_errmsg(d->db));
    return -MRD_ERR_SQLITE;
}

/* strings.id of the window domain: 1 and *id when present, 0 when absent, < 0 on error. */
static int domain_id(struct derive *d, int64_t *id)
{
    if (mrd_db_has_table(d->db, "nvtx") != 1 || mrd_db_has_table(d->db, "strings") != 1)
        return 0;
    int rc = mrd_db_int64(d->db, mrd_db_sql_string_id, MRD_WINDOW_DOMAIN, id);
    return rc < 0 ? sqlerr(d, "looking up the window domain") : rc;
}

/* Kernels of `rank` whose start maps into [gs, ge]; local bounds [ls, le] select them. */
static int count_kernels(struct derive *d, int rank, int64_t ls, int64_t le, int64_t gs, int64_t ge,
                         int64_t *count)
{
    int rc;
    *count = 0;
    if (!d->kern)
        return 0;
    sqlite3_reset(d->kern);
    sqlite3_bind_int(d->kern, 1, rank);
    sqlite3_bind_int64(d->kern, 2, ls);
    sqlite3_bind_int64(d->kern, 3, le);
    while ((rc = sqlite3_step(d->kern)) == SQLITE_ROW) {
        int64_t g = mrd_timebase_map(d->tb, rank, sqlite3_column_int64(d->kern, 0));
        *count += g >= gs && g <= ge;
    }
    return rc == SQLITE_DONE ? 0 : sqlerr(d, "counting kernels");
}

static void skip(struct derive *d, int rank, int64_t start, const char *msg, const char *why)
{
    if (d->log && d->st.malformed < MAX_LOGGED_MALFORMED)
        fprintf(d->log, "windows: rank %d: record at local %lld ns skipped (%s): \"%s\"\n", rank,
                (long long)start, why, msg ? msg : "(no message)");
    d->st.malformed++;
}

/* One window, parsed: mapped, counted, inserted (or skipped when it ends before it
 * starts). msg: the NVTX message it came from, for the log (NULL for a window event). */
static int insert(struct derive *d, int rank, int64_t ls, int64_t le,
                  const struct mrd_window_msg *m, const char *msg)
{
    int64_t gs, ge, kernels;
    int rc;
    if (le < ls) {
        skip(d, rank, ls, msg, "ends before it starts");
        return 0;
    }
    gs = mrd_timebase_map(d->tb, rank, ls);
    ge = mrd_timebase_map(d->tb, rank, le);
    if ((rc = count_kernels(d, rank, ls, le, gs, ge, &kernels)) < 0)
        return rc;
    if (MRD_DB_WRITE_ROW(d->ins, MRD_DB_INT(rank), MRD_DB_INT(m->first_step),
                         MRD_DB_INT(m->last_step), MRD_DB_INT(m->last_step + 1),
                         MRD_DB_TEXT(m->reason), MRD_DB_INT(gs), MRD_DB_INT(ge),
                         MRD_DB_INT(m->attach_ns), MRD_DB_INT_IF(m->detach_ns >= 0, m->detach_ns),
                         MRD_DB_INT(m->flush_ns), MRD_DB_INT(kernels)) < 0)
        return sqlerr(d, "inserting a window");
    d->st.windows++;
    d->st.open += m->detach_ns < 0;
    return 0;
}

/* One NVTX window record (an older agent's): its message parsed, then inserted. */
static int nvtx_record(struct derive *d)
{
    struct mrd_window_msg m;
    int rank = sqlite3_column_int(d->sel, 0);
    int64_t ls = sqlite3_column_int64(d->sel, 1), le = sqlite3_column_int64(d->sel, 2);
    const char *msg = (const char *)sqlite3_column_text(d->sel, 3);
    if (mrd_window_table_parse(msg, &m) < 0) {
        skip(d, rank, ls, msg, "malformed message");
        return 0;
    }
    return insert(d, rank, ls, le, &m, msg);
}

/* One `window` event: its columns checked like a parsed message, then inserted. */
static int window_event(struct derive *d)
{
    struct mrd_window_msg m;
    int rank = sqlite3_column_int(d->sel, 0);
    int64_t ls = sqlite3_column_int64(d->sel, 1), le = sqlite3_column_int64(d->sel, 2);
    const char *reason = (const char *)sqlite3_column_text(d->sel, 5);
    memset(&m, 0, sizeof(m));
    m.first_step = sqlite3_column_int64(d->sel, 3);
    m.last_step = sqlite3_column_int64(d->sel, 4);
    m.attach_ns = sqlite3_column_int64(d->sel, 6);
    m.detach_ns = sqlite3_column_int64(d->sel, 7);
    m.flush_ns = sqlite3_column_int64(d->sel, 8);
    if (m.first_step < 0 || m.last_step < m.first_step || m.attach_ns < 0 || m.flush_ns < 0 ||
        m.detach_ns < -1 || !reason || !reason[0] || strlen(reason) >= sizeof(m.reason)) {
        skip(d, rank, ls, reason, "a window event with impossible values");
        return 0;
    }
    memcpy(m.reason, reason, strlen(reason) + 1);
    return insert(d, rank, ls, le, &m, NULL);
}

/* Inserts every row of `sql` (bound to `domain` when >= 0) through one(). */
static int fill_from(struct derive *d, const char *sql, int64_t domain, int (*one)(struct derive *),
                     const char *what)
{
    int rc, step;
    sqlite3_finalize(d->sel);
    d->sel = NULL;
    if (sqlite3_prepare_v2(d->db, sql, -1, &d->sel, NULL) != SQLITE_OK)
        return sqlerr(d, "prepare");
    if (domain >= 0)
        sqlite3_bind_int64(d->sel, 1, domain);
    while ((step = sqlite3_step(d->sel)) == SQLITE_ROW)
        if ((rc = one(d)) < 0)
            return rc;
    return step == SQLITE_DONE ? 0 : sqlerr(d, what);
}

/* Fills windows from the window events and from older agents' NVTX records (a job may
 * mix both), then counts the ranks. */
static int fill(struct derive *d, int has_domain, int64_t domain)
{
    int rc;
    if (sqlite3_prepare_v2(d->db, mrd_db_sql_window_insert, -1, &d->ins, NULL) != SQLITE_OK)
        return sqlerr(d, "prepare");
    if (mrd_db_has_table(d->db, "kernels") == 1 &&
        sqlite3_prepare_v2(d->db, mrd_db_sql_kernels_in_interval, -1, &d->kern, NULL) != SQLITE_OK)
        return sqlerr(d, "prepare");
    if (mrd_db_has_table(d->db, "window_records") == 1 &&
        (rc = fill_from(d, mrd_db_sql_window_events, -1, window_event,
                        "reading the window events")) < 0)
        return rc;
    if (has_domain && (rc = fill_from(d, mrd_db_sql_window_records, domain, nvtx_record,
                                      "reading the window records")) < 0)
        return rc;
    int64_t ranks;
    if (mrd_db_int64(d->db, mrd_db_sql_windows_ranks, NULL, &ranks) < 0)
        return sqlerr(d, "counting the ranks with windows");
    d->st.ranks = (int)ranks;
    return 0;
}

static int exec(struct derive *d, const char *sql, const char *what)
{
    if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return sqlerr(d, what);
    return 0;
}

int mrd_window_table_derive(sqlite3 *db, struct mrd_window_table_stats *st, FILE *log)
{
    struct derive d;
    int64_t domain = 0;
    int rc, in_tx = 0;
    memset(&d, 0, sizeof(d));
    d.db = db;
    d.log = log;
    if ((rc = mrd_timebase_load(db, 0, &d.tb)) < 0) {
        if (rc == -MRD_ERR_SQLITE)
            sqlerr(&d, "loading the clock models");
        goto fail;
    }
    if ((rc = exec(&d, mrd_db_sql_begin_immediate, "begin")) < 0)
        goto fail;
    in_tx = 1;
    if ((rc = exec(&d, mrd_db_sql_windows_create, "creating the windows table")) < 0 ||
        (rc = domain_id(&d, &domain)) < 0)
        goto fail;
    if ((rc = fill(&d, rc == 1, domain)) < 0)
        goto fail;
    sqlite3_finalize(d.sel); /* no statement may be pending at COMMIT */
    sqlite3_finalize(d.kern);
    sqlite3_finalize(d.ins);
    d.sel = d.kern = d.ins = NULL;
    if ((rc = exec(&d, mrd_db_sql_commit, "commit")) < 0)
        goto fail;
    in_tx = 0;
    if (st)
        *st = d.st;
fail:
    sqlite3_finalize(d.sel);
    sqlite3_finalize(d.kern);
    sqlite3_finalize(d.ins);
    if (in_tx)
        sqlite3_exec(db, mrd_db_sql_rollback, NULL, NULL, NULL);
    mrd_timebase_destroy(d.tb);
    return rc < 0 ? rc : 0;
}

/* ---- reading back for the reports ------------------------------------------------------ */

/* The median of `col` over rank's rows (where col IS NOT NULL), given their count n: the
 * middle value, or the mean of the two middle ones. -1 when n == 0. */
static int median(sqlite3 *db, sqlite3_stmt *q, int rank, int64_t n, int64_t *out)
{
    int64_t sum = 0, k = 0;
    int rc;
    *out = -1;
    if (n <= 0)
        return 0;
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, rank);
    sqlite3_bind_int64(q, 2, 2 - n % 2);
    sqlite3_bind_int64(q, 3, (n - 1) / 2);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        sum += sqlite3_column_int64(q, 0);
        k++;
    }
    if (rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    if (k)
        *out = sum / k;
    return 0;
}

/* The summary of `rank` in a->windows, appended when new (rows arrive in rank order). */
static struct mrd_an_windows *summary(struct mrd_analysis *a, int rank, size_t *cap)
{
    struct mrd_an_windows *w;
    if (a->nwindow_ranks && a->windows[a->nwindow_ranks - 1].rank == rank)
        return &a->windows[a->nwindow_ranks - 1];
    size_t n = (size_t)a->nwindow_ranks;
    if (mrd_array_reserve(&a->windows, cap, n, sizeof(*a->windows), 8, 0) < 0)
        return NULL;
    w = &a->windows[a->nwindow_ranks++];
    memset(w, 0, sizeof(*w));
    w->rank = rank;
    w->first_step = INT64_MAX;
    w->last_step = -1;
    return w;
}

/* The rank's mean close time from its counters (window/close_ns over window/closes), or
 * -1 when they are missing (an older agent, a database without agent_counters). */
static int close_mean(sqlite3 *db, sqlite3_stmt *q, int rank, int64_t *out)
{
    *out = -1;
    if (!q)
        return 0;
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, rank);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
        *out = sqlite3_column_int64(q, 0);
    else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    return 0;
}

static int medians(sqlite3 *db, struct mrd_analysis *a)
{
    sqlite3_stmt *qa = NULL, *qd = NULL, *qc = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(db, mrd_db_sql_window_attach_nth, -1, &qa, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, mrd_db_sql_window_detach_nth, -1, &qd, NULL) != SQLITE_OK ||
        (mrd_db_has_table(db, "agent_counters") == 1 &&
         sqlite3_prepare_v2(db, mrd_db_sql_window_close_mean, -1, &qc, NULL) != SQLITE_OK))
        rc = mrd__analyze_sqlerr(db);
    for (int i = 0; rc == 0 && i < a->nwindow_ranks; i++) {
        struct mrd_an_windows *w = &a->windows[i];
        if ((rc = median(db, qa, w->rank, (int64_t)w->windows, &w->attach_median_ns)) == 0)
            rc = median(db, qd, w->rank, (int64_t)(w->windows - w->open_at_exit),
                        &w->detach_median_ns);
        if (rc == 0)
            rc = close_mean(db, qc, w->rank, &w->close_mean_ns);
    }
    sqlite3_finalize(qa);
    sqlite3_finalize(qd);
    sqlite3_finalize(qc);
    return rc;
}

/* A database with window records (events, or an older agent's NVTX ranges) that was not
 * finalized by a build that knows them. */
static void warn_not_derived(sqlite3 *db, struct mrd_analysis *a)
{
    if ((mrd_db_has_table(db, "window_records") == 1 &&
         mrd_db_step_text(db, mrd_db_sql_window_events_any, NULL) == SQLITE_ROW) ||
        (mrd_db_has_table(db, "strings") == 1 &&
         mrd_db_step_text(db, mrd_db_sql_string_id, MRD_WINDOW_DOMAIN) == SQLITE_ROW))
        mrd__analyze_warn(a, "the run has capture-window records but no windows table: run "
                             "`meridian finalize` on the database for the windows section");
}

/* The text of sql's first column in its first row, ?1 bound to param, into buf: 1, 0
 * without a row, or -MRD_ERR_SQLITE. */
static int text_value(sqlite3 *db, const char *sql, const char *param, char *buf, size_t n)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    sqlite3_bind_text(q, 1, param, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(q, 0) : NULL;
    snprintf(buf, n, "%s", t ? (const char *)t : "");
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return -MRD_ERR_SQLITE;
    return rc == SQLITE_ROW && t;
}

/* The agents' counter window/NAME: *max over the ranks and *sum; 0, or -1 when no rank
 * recorded it (an older agent, or CUDA capture off). */
static int window_counter(sqlite3 *db, const char *name, int64_t *max, int64_t *sum)
{
    sqlite3_stmt *q = NULL;
    int found = 0;
    *max = *sum = 0;
    if (mrd_db_has_table(db, "agent_counters") != 1 ||
        sqlite3_prepare_v2(db, mrd_db_sql_window_counter, -1, &q, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) {
        *max = sqlite3_column_int64(q, 0);
        *sum = sqlite3_column_int64(q, 1);
        found = 1;
    }
    sqlite3_finalize(q);
    return found ? 0 : -1;
}

/* The steady tier opened no capture window, so no kernel was traced: says why, from the
 * ranks' fingerprints (env:MERIDIAN_TRACE, env:MERIDIAN_WINDOWS: the tier and windows the
 * lowest rank ran with) and their counters (window/steps: the steps a rank began, numbered
 * from 0; window/failed: attaches CUPTI refused). Silent in the full tier, with the
 * windows `none`, and for a capture without fingerprints (the tier is not known). A new
 * user's first short job is the usual case: ten steps of a test job end before the
 * default windows' first step (10/200@10). */
static int warn_no_window(sqlite3 *db, struct mrd_analysis *a)
{
    char tier[16], spec[256], why[128];
    struct mrd_windows w;
    int rc;
    if (mrd_db_has_table(db, "env_records") != 1)
        return 0;
    rc = text_value(db, mrd_db_sql_env_value, "env:MERIDIAN_TRACE", tier, sizeof(tier));
    if (rc < 0)
        return mrd__analyze_sqlerr(db);
    if (rc == 0 || strcmp(tier, "steady") != 0)
        return 0;
    rc = text_value(db, mrd_db_sql_env_value, "env:MERIDIAN_WINDOWS", spec, sizeof(spec));
    if (rc < 0)
        return mrd__analyze_sqlerr(db);
    if (rc == 0 || mrd_windows_parse(spec, &w, why, sizeof(why)) != 0 || w.n == 0)
        return 0; /* no windows asked for (none, or the agent's default), or unreadable */
    int64_t first = INT64_MAX, steps = 0, steps_sum, failed, failed_sum;
    for (int i = 0; i < w.n; i++) {
        int64_t f = w.t[i].reason == MRD_WINDOW_RANGE ? w.t[i].first : w.t[i].start;
        first = f < first ? f : first;
    }
    int counted = window_counter(db, "steps", &steps, &steps_sum) == 0;
    int capture = window_counter(db, "failed", &failed, &failed_sum) == 0;
    /* the cause first: a warning holds 255 bytes, and a long specification is cut last */
    const char *lead = "no capture window opened, no kernel traced";
    if (counted && steps == 0)
        mrd__analyze_warn(a,
                          "%s: no rank began a step; mark the steps (--step-name), count them "
                          "from a collective (--step-collective) or use --full (steady tier, "
                          "windows %s)",
                          lead, spec);
    else if (!capture)
        mrd__analyze_warn(a,
                          "%s: CUDA capture never started (no window counters: no CUDA in the "
                          "job, or CUPTI setup failed; each rank's stderr says why) (steady "
                          "tier, windows %s)",
                          lead, spec);
    else if (counted && steps <= first)
        mrd__analyze_warn(a,
                          "%s: the ranks began at most %lld step(s) (0-%lld), the first window "
                          "begins at step %lld; give --windows 0-%lld or --full (steady tier, "
                          "windows %s)",
                          lead, (long long)steps, (long long)steps - 1, (long long)first,
                          (long long)steps - 1, spec);
    else if (failed_sum == 0)
        mrd__analyze_warn(a,
                          "%s, though %s and no CUPTI attach failed: the window records were "
                          "lost (see the dropped events) (steady tier, windows %s)",
                          lead,
                          counted ? "the ranks reached the first window's step"
                                  : "the ranks' step counts were not recorded",
                          spec);
    else
        mrd__analyze_warn(a,
                          "%s, though %s: %lld CUPTI attach(es) failed (counter "
                          "window/failed; each rank's stderr says why) (steady tier, windows "
                          "%s)",
                          lead,
                          counted ? "the ranks reached the first window's step"
                                  : "the ranks' step counts were not recorded",
                          (long long)failed_sum, spec);
    return 0;
}

int mrd__analyze_windows(sqlite3 *db, struct mrd_analysis *a)
{
    sqlite3_stmt *q = NULL;
    size_t cap = 0;
    int rc;
    if (mrd_db_has_table(db, "windows") != 1) {
        warn_not_derived(db, a);
        return 0;
    }
    if (sqlite3_prepare_v2(db, mrd_db_sql_windows_list, -1, &q, NULL) != SQLITE_OK)
        return mrd__analyze_sqlerr(db);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        struct mrd_an_windows *w = summary(a, sqlite3_column_int(q, 0), &cap);
        int64_t first = sqlite3_column_int64(q, 1), last = sqlite3_column_int64(q, 2);
        if (!w) {
            sqlite3_finalize(q);
            return -ENOMEM;
        }
        w->windows++;
        w->open_at_exit += sqlite3_column_int(q, 3) != 0;
        w->steps += (uint64_t)(last - first + 1);
        w->kernels += (uint64_t)sqlite3_column_int64(q, 4);
        w->first_step = first < w->first_step ? first : w->first_step;
        w->last_step = last > w->last_step ? last : w->last_step;
        if (w->nranges < MRD_AN_MAX_WINDOW_RANGES) {
            w->ranges[w->nranges][0] = first;
            w->ranges[w->nranges][1] = last;
            w->nranges++;
        }
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE)
        return mrd__analyze_sqlerr(db);
    if (a->nwindow_ranks == 0)
        return warn_no_window(db, a);
    return medians(db, a);
}
