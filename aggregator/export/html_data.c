/* The HTML report's data: the one JSON object the page's script draws from.
 *
 * Where it sits: export stage, called by html.c. Inputs: struct mrd_analysis, the
 * per-instance figures gathered while the analysis ran (struct mrd_html_acc, filled by
 * mrd_export_html_on_instance), and range scans of the database (kernels and NVTX of the
 * timeline steps, every kernel of each rank once for the per-step bars, the kernel totals).
 *
 * What it computes (README.md, "HTML report", states it for readers too):
 * - heat map: for rank r and step s, the arrival delay = the sum over the step's timed
 *   collective instances that r took part in of (r's start - the instance's earliest start);
 * - per-step bars: per step [earliest start, latest end over ranks] and rank, the rank's
 *   kernels (all devices together) clipped to the step: compute only = |C \ M|, hidden =
 *   |C n M|, exposed = |M \ C|, idle = step length - |C u M| (C: compute kernels, M:
 *   communication kernels); summed over ranks;
 * - collective durations: per function, log2 histogram of (latest end - earliest start).
 * Kernel names (timelines, top kernels) are shown demangled, as in every other output
 * (mrd_analyze_demangle_cached); the top kernels are ranked by mangled name, one per name.
 *
 * Bounds (the embedded detail): heat map MRD_HTML_HEAT_STEPS steps x MRD_HTML_HEAT_ROWS
 * ranks (the worst first; the others folded into one row of their maximum); timelines of at
 * most MRD_HTML_TL_STEPS steps, MRD_HTML_TL_RANKS ranks drawn lane by lane (the worst
 * first), MRD_HTML_TL_ITEMS items per lane, the other ranks aggregated into
 * MRD_HTML_TL_BINS bins of busy fraction; MRD_HTML_TOP_KERNELS kernel names. Memory: the
 * heat grid (8 bytes x ranks x steps) and one rank's kernel unions at a time.
 */
#include "html_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "error.h"
#include "report_findings.h"

struct heat_row {
    int rank;
    int64_t delay[MRD_HTML_HEAT_STEPS];
};

struct coll_hist {
    char func[32];
    uint64_t n;
    uint64_t bins[MRD_AN_HIST_BINS];
};

struct mrd_html_acc {
    int failed; /* -ENOMEM met in the callback */
    int nrows, caprows;
    struct heat_row **rows; /* [nrows], by first appearance */
    int *row_of_rank;       /* [nrank_index] -> row + 1, 0 = none */
    int nrank_index;
    int ncolls;
    struct coll_hist colls[MRD_HTML_MAX_FUNCS + 1]; /* last: "other" */
};

int mrd_export_html_acc_new(struct mrd_html_acc **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void mrd_export_html_acc_free(struct mrd_html_acc *acc)
{
    if (!acc)
        return;
    mrd_array_free_each(&acc->rows, (size_t)acc->nrows);
    free(acc->row_of_rank);
    free(acc);
}

static struct heat_row *row_for(struct mrd_html_acc *acc, int rank)
{
    if (rank < 0 || rank >= MRD_HTML_MAX_RANK)
        return NULL;
    if (rank >= acc->nrank_index) {
        int n = rank + 64;
        int *v = realloc(acc->row_of_rank, (size_t)n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + acc->nrank_index, 0, (size_t)(n - acc->nrank_index) * sizeof(*v));
        acc->row_of_rank = v;
        acc->nrank_index = n;
    }
    if (acc->row_of_rank[rank])
        return acc->rows[acc->row_of_rank[rank] - 1];
    if (acc->nrows == acc->caprows) {
        int n = acc->caprows ? acc->caprows * 2 : 64;
        struct heat_row **v = realloc(acc->rows, (size_t)n * sizeof(*v));
        if (!v)
            return NULL;
        acc->rows = v;
        acc->caprows = n;
    }
    struct heat_row *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->rank = rank;
    acc->rows[acc->nrows++] = r;
    acc->row_of_rank[rank] = acc->nrows;
    return r;
}

void mrd_export_html_on_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct mrd_html_acc *acc = ctx;
    if (in->ntimed < 1)
        return;
    int64_t first = in->start[0], last_end = in->end[0];
    for (int i = 1; i < in->ntimed; i++) {
        first = in->start[i] < first ? in->start[i] : first;
        last_end = in->end[i] > last_end ? in->end[i] : last_end;
    }
    int c = 0;
    while (c < acc->ncolls && strcmp(acc->colls[c].func, in->func ? in->func : "?") != 0)
        c++;
    if (c == acc->ncolls) {
        if (c == MRD_HTML_MAX_FUNCS) {
            snprintf(acc->colls[c].func, sizeof(acc->colls[c].func), "(other)");
        } else {
            snprintf(acc->colls[c].func, sizeof(acc->colls[c].func), "%s",
                     in->func ? in->func : "?");
        }
        if (c < MRD_HTML_MAX_FUNCS)
            acc->ncolls++;
    }
    acc->colls[c].n++;
    acc->colls[c].bins[mrd_analyze_hist_bin(last_end - first)]++;
    if (in->ntimed < 2 || in->step < 0 || in->step >= MRD_HTML_HEAT_STEPS)
        return;
    for (int i = 0; i < in->ntimed; i++) {
        struct heat_row *r = row_for(acc, in->ranks[i]);
        if (!r) {
            acc->failed = in->ranks[i] >= 0 && in->ranks[i] < MRD_HTML_MAX_RANK;
            continue;
        }
        r->delay[in->step] += in->start[i] - first;
    }
}

/* The inside of a JSON string safe inside <script>: '<', '>' and '&' as \u escapes. */
static void jstr_body(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    for (; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&' || *p >= 0x7f)
            fprintf(f, "\\u%04x", *p < 0x7f ? *p : 0xfffd);
        else
            fputc(*p, f);
    }
}

void mrd__html_jstr(FILE *f, const char *s)
{
    fputc('"', f);
    jstr_body(f, s);
    fputc('"', f);
}

/* ---- kernel unions of one rank --------------------------------------------------------- */

struct ivs {
    int n;
    size_t cap;
    int64_t (*v)[2];
};

static int ivs_add(struct ivs *u, int64_t s, int64_t e)
{
    if (e <= s)
        return 0;
    if (u->n && s <= u->v[u->n - 1][1]) {
        if (e > u->v[u->n - 1][1])
            u->v[u->n - 1][1] = e;
        if (s < u->v[u->n - 1][0])
            u->v[u->n - 1][0] = s;
        return 0;
    }
    int rc = mrd_array_reserve(&u->v, &u->cap, (size_t)u->n, sizeof(*u->v), 256, 0);
    if (rc < 0)
        return rc;
    u->v[u->n][0] = s;
    u->v[u->n][1] = e;
    u->n++;
    return 0;
}

/* |u n [s, e)| */
static int64_t ivs_measure(const struct ivs *u, int64_t s, int64_t e)
{
    int lo = 0, hi = u->n;
    while (lo < hi) { /* first interval ending after s */
        int mid = (lo + hi) / 2;
        if (u->v[mid][1] <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t sum = 0;
    for (int i = lo; i < u->n && u->v[i][0] < e; i++) {
        int64_t a = u->v[i][0] > s ? u->v[i][0] : s, b = u->v[i][1] < e ? u->v[i][1] : e;
        if (b > a)
            sum += b - a;
    }
    return sum;
}

static int ivs_intersect(const struct ivs *x, const struct ivs *y, struct ivs *out)
{
    int i = 0, j = 0, rc = 0;
    while (i < x->n && j < y->n && rc == 0) {
        int64_t a = x->v[i][0] > y->v[j][0] ? x->v[i][0] : y->v[j][0];
        int64_t b = x->v[i][1] < y->v[j][1] ? x->v[i][1] : y->v[j][1];
        if (b > a)
            rc = ivs_add(out, a, b);
        if (x->v[i][1] < y->v[j][1])
            i++;
        else
            j++;
    }
    return rc;
}

static int is_comm(sqlite3_stmt *q)
{
    return sqlite3_column_int(q, 2) ||
           mrd_analyze_is_nccl_name((const char *)sqlite3_column_text(q, 3));
}

/* Binds mrd_db_sql_html_kernels for rank's kernels meeting the global [gs, ge). */
static void bind_kernels(sqlite3_stmt *q, const struct mrd_timebase *tb, int rank, int64_t gs,
                         int64_t ge, int64_t lookback, int limit)
{
    int64_t ls = mrd_timebase_unmap(tb, rank, gs), le = mrd_timebase_unmap(tb, rank, ge);
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, rank);
    sqlite3_bind_int64(q, 2, lookback < 0 ? INT64_MIN : ls - lookback);
    sqlite3_bind_int64(q, 3, le);
    sqlite3_bind_int64(q, 4, ls);
    sqlite3_bind_int(q, 5, limit);
}

static int write_bars(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                      const struct mrd_timebase *tb)
{
    int ns = a->nsteps, rc = 0;
    int64_t(*sum)[4] = calloc((size_t)(ns ? ns : 1), sizeof(*sum));
    struct ivs c = {0}, m = {0}, both = {0};
    sqlite3_stmt *q = NULL;
    if (!sum)
        return -ENOMEM;
    fputs(",\"bars\":[", f);
    if (ns == 0 || mrd_db_has_table(db, "kernels") != 1)
        goto out;
    if (sqlite3_prepare_v2(db, mrd_db_sql_html_kernels, -1, &q, NULL) != SQLITE_OK) {
        rc = -MRD_ERR_SQLITE;
        goto out;
    }
    int64_t g0 = a->steps[0].start_ns, g1 = a->steps[0].end_ns;
    for (int s = 1; s < ns; s++) {
        g0 = a->steps[s].start_ns < g0 ? a->steps[s].start_ns : g0;
        g1 = a->steps[s].end_ns > g1 ? a->steps[s].end_ns : g1;
    }
    for (int i = 0; i < a->nranks && rc == 0; i++) {
        int rank = a->ranks[i].rank;
        c.n = m.n = both.n = 0;
        bind_kernels(q, tb, rank, g0, g1, -1, -1);
        while (rc == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            int64_t ks = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 0));
            int64_t ke = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 1));
            rc = ivs_add(is_comm(q) ? &m : &c, ks, ke);
        }
        if (rc != SQLITE_DONE && rc != 0) {
            rc = rc < 0 ? rc : -MRD_ERR_SQLITE;
            break;
        }
        if ((rc = ivs_intersect(&c, &m, &both)) < 0)
            break;
        for (int s = 0; s < ns; s++) {
            int64_t S = a->steps[s].start_ns, E = a->steps[s].end_ns;
            int64_t hc = ivs_measure(&c, S, E), hm = ivs_measure(&m, S, E);
            int64_t hb = ivs_measure(&both, S, E);
            sum[s][0] += hc - hb;
            sum[s][1] += hb;
            sum[s][2] += hm - hb;
            sum[s][3] += (E - S) - (hc + hm - hb);
        }
    }
    for (int s = 0; rc == 0 && s < ns; s++)
        fprintf(f, "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", s ? "," : "",
                a->steps[s].index, sum[s][0], sum[s][1], sum[s][2], sum[s][3]);
out:
    fputs("]", f);
    sqlite3_finalize(q);
    free(c.v);
    free(m.v);
    free(both.v);
    free(sum);
    return rc;
}

/* ---- timelines ------------------------------------------------------------------------- */

struct names {
    int n;
    char *v[MRD_HTML_MAX_NAMES];
};

static int name_index(struct names *nm, const char *s)
{
    if (!s)
        s = "(unnamed)";
    for (int i = nm->n - 1; i >= 0; i--) /* recent names first: a lane repeats its kernels */
        if (strcmp(nm->v[i], s) == 0)
            return i;
    if (nm->n == MRD_HTML_MAX_NAMES)
        return -1;
    nm->v[nm->n] = strdup(s);
    return nm->v[nm->n] ? nm->n++ : -1;
}

/* The steps the timelines show: the worst (most wait caused; the longest when none
 * caused any), the longest, the median and the shortest, without repeats. */
static int pick_steps(const struct mrd_analysis *a, int out[MRD_HTML_TL_STEPS],
                      const char *why[MRD_HTML_TL_STEPS])
{
    int n = 0, worst = 0, longest = 0, shortest = 0;
    if (a->nsteps == 0)
        return 0;
    int *ord = malloc((size_t)a->nsteps * sizeof(*ord));
    for (int s = 0; s < a->nsteps; s++) {
        const struct mrd_an_step *x = &a->steps[s];
        if (x->cost_ns > a->steps[worst].cost_ns)
            worst = s;
        if (x->end_ns - x->start_ns > a->steps[longest].end_ns - a->steps[longest].start_ns)
            longest = s;
        if (x->end_ns - x->start_ns < a->steps[shortest].end_ns - a->steps[shortest].start_ns)
            shortest = s;
        if (ord)
            ord[s] = s;
    }
    if (a->steps[worst].cost_ns == 0)
        worst = longest;
    int median = a->nsteps / 2;
    if (ord) { /* insertion sort by length: steps are at most MRD_AN_MAX_STEPS */
        for (int i = 1; i < a->nsteps; i++) {
            int v = ord[i], j = i;
            int64_t len = a->steps[v].end_ns - a->steps[v].start_ns;
            while (j > 0 && a->steps[ord[j - 1]].end_ns - a->steps[ord[j - 1]].start_ns > len) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = v;
        }
        median = ord[a->nsteps / 2];
        free(ord);
    }
    int cand[4] = {worst, longest, median, shortest};
    const char *cw[4] = {a->steps[worst].cost_ns ? "worst step: most wait caused"
                                                 : "worst step: the longest (no wait caused)",
                         "the longest step", "a median step (by length)", "the shortest step"};
    for (int k = 0; k < 4 && n < MRD_HTML_TL_STEPS; k++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= out[j] == cand[k];
        if (!dup) {
            why[n] = cw[k];
            out[n++] = cand[k];
        }
    }
    return n;
}

static int lane_kernels(FILE *f, sqlite3_stmt *q, const struct mrd_timebase *tb, int rank,
                        int64_t S, int64_t E, struct names *nm)
{
    int rc, nitems[2] = {0, 0};
    uint64_t more[2] = {0, 0};
    bind_kernels(q, tb, rank, S, E, E - S, -1);
    fprintf(f, "{\"rank\":%d,\"k\":[[", rank);
    /* compute items, then communication items by a second scan of the same range */
    for (int lane = 0; lane < 2; lane++) {
        if (lane) {
            fputs("],[", f);
            bind_kernels(q, tb, rank, S, E, E - S, -1);
        }
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            if (is_comm(q) != lane)
                continue;
            if (nitems[lane] == MRD_HTML_TL_ITEMS) {
                more[lane]++;
                continue;
            }
            int64_t ks = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 0)) - S;
            int64_t ke = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 1)) - S;
            fprintf(f, "%s%" PRId64 ",%" PRId64 ",%d", nitems[lane] ? "," : "", ks, ke,
                    name_index(
                        nm, mrd_analyze_demangle_cached((const char *)sqlite3_column_text(q, 3))));
            nitems[lane]++;
        }
        if (rc != SQLITE_DONE)
            return -MRD_ERR_SQLITE;
    }
    fprintf(f, "]],\"more\":[%" PRIu64 ",%" PRIu64 "]", more[0], more[1]);
    return 0;
}

static int lane_nvtx(FILE *f, sqlite3_stmt *q, const struct mrd_timebase *tb, int rank, int64_t S,
                     int64_t E, struct names *nm)
{
    int rc, n = 0;
    sqlite3_reset(q);
    sqlite3_bind_int(q, 1, rank);
    sqlite3_bind_int64(q, 2, mrd_timebase_unmap(tb, rank, E));
    sqlite3_bind_int64(q, 3, mrd_timebase_unmap(tb, rank, S));
    sqlite3_bind_int(q, 4, MRD_HTML_TL_ITEMS);
    fputs(",\"n\":[", f);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t s = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 0)) - S;
        int64_t e = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 1)) - S;
        fprintf(f, "%s%" PRId64 ",%" PRId64 ",%d,%d", n++ ? "," : "", s, e,
                name_index(nm, (const char *)sqlite3_column_text(q, 2)), sqlite3_column_int(q, 3));
    }
    fputs("]}", f);
    return rc == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

/* The ranks beyond the drawn ones: per bin, the fraction (per mille) of their time busy with
 * compute and with communication kernels. */
static int aggregate_lane(FILE *f, sqlite3_stmt *q, const struct mrd_timebase *tb,
                          const struct mrd_an_rank **order, int from, int nranks, int64_t S,
                          int64_t E)
{
    int64_t busy[2][MRD_HTML_TL_BINS];
    if (from >= nranks) {
        fputs(",\"agg\":null", f);
        return 0;
    }
    int64_t bw = (E - S + MRD_HTML_TL_BINS - 1) / MRD_HTML_TL_BINS;
    int rc = SQLITE_DONE;
    memset(busy, 0, sizeof(busy));
    if (bw <= 0)
        bw = 1;
    for (int i = from; i < nranks; i++) {
        int rank = order[i]->rank;
        bind_kernels(q, tb, rank, S, E, E - S, -1);
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            int lane = is_comm(q);
            int64_t ks = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 0)) - S;
            int64_t ke = mrd_timebase_map(tb, rank, sqlite3_column_int64(q, 1)) - S;
            ks = ks < 0 ? 0 : ks;
            ke = ke > E - S ? E - S : ke;
            for (int64_t b = ks / bw; b < MRD_HTML_TL_BINS && b * bw < ke; b++) {
                int64_t x = ks > b * bw ? ks : b * bw, y = ke < (b + 1) * bw ? ke : (b + 1) * bw;
                if (y > x)
                    busy[lane][b] += y - x;
            }
        }
        if (rc != SQLITE_DONE)
            return -MRD_ERR_SQLITE;
    }
    int others = nranks - from;
    fprintf(f, ",\"agg\":{\"ranks\":%d,\"bin_ns\":%" PRId64 ",\"pm\":[", others, bw);
    for (int lane = 0; lane < 2; lane++) {
        fputs(lane ? "],[" : "[", f);
        for (int b = 0; b < MRD_HTML_TL_BINS; b++)
            fprintf(f, "%s%" PRId64, b ? "," : "",
                    others ? busy[lane][b] * 1000 / ((int64_t)others * bw) : 0);
    }
    fputs("]]}", f);
    return 0;
}

static int write_timelines(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                           const struct mrd_timebase *tb, const struct mrd_an_rank **order)
{
    int steps[MRD_HTML_TL_STEPS], rc = 0;
    const char *why[MRD_HTML_TL_STEPS];
    int nsel = pick_steps(a, steps, why);
    int has_k = mrd_db_has_table(db, "kernels") == 1, has_n = mrd_db_has_table(db, "nvtx") == 1;
    int shown = a->nranks < MRD_HTML_TL_RANKS ? a->nranks : MRD_HTML_TL_RANKS;
    sqlite3_stmt *qk = NULL, *qn = NULL;
    struct names nm = {0};

    fputs(",\"timelines\":[", f);
    if (!has_k || !has_n)
        nsel = 0;
    if (nsel && (sqlite3_prepare_v2(db, mrd_db_sql_html_kernels, -1, &qk, NULL) != SQLITE_OK ||
                 sqlite3_prepare_v2(db, mrd_db_sql_html_nvtx, -1, &qn, NULL) != SQLITE_OK)) {
        rc = -MRD_ERR_SQLITE;
        nsel = 0;
    }
    for (int k = 0; k < nsel && rc == 0; k++) {
        const struct mrd_an_step *st = &a->steps[steps[k]];
        fprintf(f,
                "%s{\"step\":%" PRId64 ",\"why\":\"%s\",\"at\":%" PRId64 ",\"len\":%" PRId64
                ",\"ranks\":[",
                k ? "," : "", st->index, why[k], st->start_ns - a->time_origin_ns,
                st->end_ns - st->start_ns);
        for (int i = 0; i < shown && rc == 0; i++) {
            if (i)
                fputc(',', f);
            rc = lane_kernels(f, qk, tb, order[i]->rank, st->start_ns, st->end_ns, &nm);
            if (rc == 0)
                rc = lane_nvtx(f, qn, tb, order[i]->rank, st->start_ns, st->end_ns, &nm);
        }
        fputc(']', f);
        if (rc == 0)
            rc = aggregate_lane(f, qk, tb, order, shown, a->nranks, st->start_ns, st->end_ns);
        fputc('}', f);
    }
    fputs("],\"names\":[", f);
    for (int i = 0; i < nm.n; i++) {
        if (i)
            fputc(',', f);
        mrd__html_jstr(f, nm.v[i]);
        free(nm.v[i]);
    }
    fputc(']', f);
    sqlite3_finalize(qk);
    sqlite3_finalize(qn);
    return rc;
}

/* ---- the small tables ------------------------------------------------------------------ */

static void write_heat(FILE *f, const struct mrd_analysis *a, const struct mrd_html_acc *acc,
                       const struct mrd_an_rank **order)
{
    int nsteps = a->nsteps < MRD_HTML_HEAT_STEPS ? a->nsteps : MRD_HTML_HEAT_STEPS;
    int rows = a->nranks < MRD_HTML_HEAT_ROWS ? a->nranks : MRD_HTML_HEAT_ROWS;
    static const struct heat_row zero;
    fprintf(f, ",\"heat\":{\"collected\":%d,\"steps\":%d,\"rows\":[", acc != NULL, nsteps);
    for (int i = 0; i < rows; i++) {
        int rank = order[i]->rank;
        const struct heat_row *r = &zero;
        if (acc && rank >= 0 && rank < acc->nrank_index && acc->row_of_rank[rank])
            r = acc->rows[acc->row_of_rank[rank] - 1];
        fprintf(f, "%s[%d", i ? "," : "", rank);
        for (int s = 0; s < nsteps; s++)
            fprintf(f, ",%" PRId64, r->delay[s]);
        fputc(']', f);
    }
    fprintf(f, "],\"others\":%d,\"other_max\":[", a->nranks - rows);
    for (int s = 0; s < nsteps && a->nranks > rows; s++) {
        int64_t mx = 0;
        for (int i = rows; acc && i < a->nranks; i++) {
            int rank = order[i]->rank;
            if (rank >= 0 && rank < acc->nrank_index && acc->row_of_rank[rank]) {
                int64_t d = acc->rows[acc->row_of_rank[rank] - 1]->delay[s];
                mx = d > mx ? d : mx;
            }
        }
        fprintf(f, "%s%" PRId64, s ? "," : "", mx);
    }
    fputs("]}", f);
}

static void write_colls(FILE *f, const struct mrd_html_acc *acc)
{
    fputs(",\"colls\":[", f);
    for (int c = 0, k = 0; acc && c <= MRD_HTML_MAX_FUNCS; c++) {
        const struct coll_hist *h = &acc->colls[c];
        if (h->n == 0 || (c >= acc->ncolls && c != MRD_HTML_MAX_FUNCS))
            continue;
        fprintf(f, "%s{\"func\":", k++ ? "," : "");
        mrd__html_jstr(f, h->func);
        fprintf(f, ",\"n\":%" PRIu64 ",\"bins\":[", h->n);
        for (int b = 0; b < MRD_AN_HIST_BINS; b++)
            fprintf(f, "%s%" PRIu64, b ? "," : "", h->bins[b]);
        fputs("]}", f);
    }
    fputc(']', f);
}

struct ktot {
    char name[256];
    int64_t total;
    int64_t count;
};

static int write_kernels(FILE *f, sqlite3 *db)
{
    struct ktot top[MRD_HTML_TOP_KERNELS];
    int n = 0, rc = SQLITE_DONE;
    sqlite3_stmt *q = NULL;
    fputs(",\"kernels\":[", f);
    if (mrd_db_has_table(db, "kernels") == 1) {
        if (sqlite3_prepare_v2(db, mrd_db_sql_kernel_totals, -1, &q, NULL) != SQLITE_OK) {
            fputc(']', f);
            return -MRD_ERR_SQLITE;
        }
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            int64_t total = sqlite3_column_int64(q, 1);
            int at = n;
            while (at > 0 && top[at - 1].total < total)
                at--;
            if (at >= MRD_HTML_TOP_KERNELS)
                continue;
            if (n < MRD_HTML_TOP_KERNELS)
                n++;
            memmove(&top[at + 1], &top[at], (size_t)(n - 1 - at) * sizeof(top[0]));
            snprintf(top[at].name, sizeof(top[at].name), "%s",
                     mrd_analyze_demangle_cached((const char *)sqlite3_column_text(q, 0)));
            top[at].total = total;
            top[at].count = sqlite3_column_int64(q, 2);
        }
        sqlite3_finalize(q);
    }
    for (int i = 0; i < n; i++) {
        fputs(i ? ",[" : "[", f);
        mrd__html_jstr(f, top[i].name);
        fprintf(f, ",%" PRId64 ",%" PRId64 "]", top[i].total, top[i].count);
    }
    fputc(']', f);
    return rc == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

/* [rank, host, pid, GPUs, kernels, NCCL ops, dropped, drop reasons, fitted, offset vs the
 * first fitted rank, drift ppm, error bound] per rank. */
static void write_ranks(FILE *f, const struct mrd_analysis *a)
{
    int64_t ref = 0;
    char buf[64];
    for (int i = a->nranks - 1; i >= 0; i--)
        if (a->ranks[i].clock_fitted)
            ref = a->ranks[i].clock_offset_ns;
    fputs(",\"ranks\":[", f);
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        fprintf(f, "%s[%d,", i ? "," : "", r->rank);
        mrd__html_jstr(f, r->host);
        fprintf(f, ",%d,\"", r->pid);
        for (int g = 0; g < r->ngpus; g++) {
            snprintf(buf, sizeof(buf), "%s%d: ", g ? "; " : "", r->gpus[g].device);
            fputs(buf, f);
            jstr_body(f, r->gpus[g].name);
        }
        fprintf(f, "\",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",\"", r->events[0], r->events[8],
                r->dropped_total);
        for (int d = 0; d < r->ndrops; d++) {
            fputs(d ? ", " : "", f);
            jstr_body(f, r->drops[d].reason);
            fprintf(f, " %" PRIu64, r->drops[d].n);
        }
        fprintf(f, "\",%d,%" PRId64 ",%.3f,%" PRId64 "]", r->clock_fitted, r->clock_offset_ns - ref,
                r->clock_drift_ppm, r->clock_error_bound_ns);
    }
    fputc(']', f);
}

static void write_windows(FILE *f, const struct mrd_analysis *a)
{
    fputs(",\"windows\":[", f);
    for (int i = 0; i < a->nwindow_ranks; i++) {
        const struct mrd_an_windows *w = &a->windows[i];
        fprintf(f,
                "%s{\"rank\":%d,\"windows\":%" PRIu64 ",\"steps\":%" PRIu64 ",\"kernels\":%" PRIu64
                ",\"open\":%" PRIu64 ",\"ranges\":[",
                i ? "," : "", w->rank, w->windows, w->steps, w->kernels, w->open_at_exit);
        for (int k = 0; k < w->nranges; k++)
            fprintf(f, "%s[%" PRId64 ",%" PRId64 "]", k ? "," : "", w->ranges[k][0],
                    w->ranges[k][1]);
        fputs("]}", f);
    }
    fputc(']', f);
}

int mrd__html_data(FILE *f, sqlite3 *db, const struct mrd_analysis *a,
                   const struct mrd_html_acc *acc)
{
    struct mrd_timebase *tb = NULL;
    const struct mrd_an_rank **order = mrd_analyze_ranking(a);
    int rc;
    if (!order)
        return -ENOMEM;
    if (acc && acc->failed) {
        free(order);
        return -ENOMEM;
    }
    if ((rc = mrd_timebase_load(db, !a->global_timebase, &tb)) < 0) {
        free(order);
        return rc;
    }
    fprintf(f,
            "{\"bounds\":{\"heat_steps\":%d,\"heat_rows\":%d,\"tl_steps\":%d,\"tl_ranks\":%d,"
            "\"tl_items\":%d,\"tl_bins\":%d,\"top_kernels\":%d},\"ranked_in_steps\":%d,"
            "\"ranking\":[",
            MRD_HTML_HEAT_STEPS, MRD_HTML_HEAT_ROWS, MRD_HTML_TL_STEPS, MRD_HTML_TL_RANKS,
            MRD_HTML_TL_ITEMS, MRD_HTML_TL_BINS, MRD_HTML_TOP_KERNELS, a->ranked_in_steps);
    for (int i = 0; i < a->nranks; i++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, order[i]);
        fprintf(f, "%s[%d,%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 "]", i ? "," : "",
                order[i]->rank, w.caused_ns, w.suffered_ns, w.times_last, w.instances);
    }
    fputs("],\"steps\":[", f);
    for (int s = 0; s < a->nsteps; s++) {
        const struct mrd_an_step *st = &a->steps[s];
        fprintf(f,
                "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRIu64 ",%" PRId64 ",%" PRId64
                ",%d,%" PRId64 ",%d]",
                s ? "," : "", st->index, st->start_ns - a->time_origin_ns,
                st->end_ns - st->start_ns, st->instances, st->cost_ns, st->max_skew_ns,
                st->worst_rank, st->worst_caused_ns, st->capture);
    }
    fputc(']', f);
    write_heat(f, a, acc, order);
    write_colls(f, acc);
    write_windows(f, a);
    write_ranks(f, a);
    rc = write_bars(f, db, a, tb);
    if (rc == 0)
        rc = write_timelines(f, db, a, tb, order);
    if (rc == 0)
        rc = write_kernels(f, db);
    mrd__html_findings(f, a);
    fputs("}", f);
    mrd_timebase_destroy(tb);
    free(order);
    return rc;
}
