/* `meridian diff BEFORE.db AFTER.db`: did my change help? Two runs side by side.
 *
 * Where it sits: a consumer of the analysis (aggregator/analyze), like `report`. Both
 * databases are opened read-only (mrd_cli_open_db: a newer schema is refused there, the
 * files are never written) and analysed with the same options; this file compares the
 * two mrd_analysis results and the kernels' time per name, and prints the comparison as
 * text or JSON. `--fail-if-slower PCT` turns it into a CI gate.
 *
 * What is compared, and how (also in --help):
 * - step time: per step, the span from the earliest start to the latest end of that
 *   step's NVTX range over the ranks (mrd_an_step); steps in which a rank attached or
 *   detached CUPTI for a capture window are left out (the profiler's own stall). Median
 *   and mean over the steps. The gate uses the median.
 * - overlap: communication, hidden and exposed time summed over ranks; exposed per step.
 * - stragglers: the first three of the report's ranking (mrd_analyze_ranking) that
 *   arrived last at least once.
 * - collectives: per function, over all communicators: instances, mean arrival skew,
 *   total wait cost.
 * - kernels: total GPU time per kernel name over all ranks, names demangled as in every
 *   output (mrd_analyze_demangle_cached; mangled names that demangle alike are summed); the
 *   ten names whose total moved most (absolute change), with counts.
 * Refused: runs of different world sizes (exit 2). Warned: different commands, ranks
 * without a goodbye (an interrupted run: its numbers may be partial).
 *
 * Workload: two databases of up to hundreds of millions of rows; the analysis streams
 * (analyze.h); the kernel totals are one GROUP BY per database, kept to the names seen
 * (a training run has hundreds to a few thousand distinct kernel names; capped below).
 * Main thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "analyze.h"
#include "cli.h"
#include "db.h"
#include "error.h"
#include "jsonw.h"
#include "opts.h"
#include "progress.h"

#define DIFF_MAX_KERNEL_NAMES 20000 /* distinct names compared; more are summed as "other" */
#define DIFF_TOP_KERNELS      10
#define DIFF_TOP_STRAGGLERS   3
#define DIFF_EXIT_SLOWER      3 /* --fail-if-slower tripped */

/* One side of the comparison. */
struct side {
    const char *path;
    struct mrd_analysis *a;
    int64_t nsteps, step_median_ns, step_mean_ns;
    int64_t comm_ns, hidden_ns, exposed_ns;
    int interrupted_ranks; /* ranks without a goodbye */
    /* the first DIFF_TOP_STRAGGLERS ranks of the report's straggler ranking that arrived
     * last at least once, with the wait they caused */
    int ntop;
    const struct mrd_an_rank *top[DIFF_TOP_STRAGGLERS];
    struct mrd_an_wait top_wait[DIFF_TOP_STRAGGLERS];
};

struct kernel_total {
    char *name;
    int64_t ns[2];
    uint64_t count[2];
};

struct kernel_totals {
    struct kernel_total *v;
    size_t n, cap;
};

static void usage(FILE *f)
{
    fputs("usage: meridian diff BEFORE.db AFTER.db [options]\n"
          "\n"
          "Compares two runs: step time, overlap and exposed communication, stragglers,\n"
          "collectives, and the kernels whose total time moved most. Both databases are\n"
          "only read.\n"
          "\n"
          "options:\n"
          "  --json             print the comparison as one JSON document instead of text\n"
          "  --fail-if-slower PCT  exit 3 when AFTER's median step time is more than PCT\n"
          "                     percent above BEFORE's (a CI gate); also exit 3 when a run\n"
          "                     has no steps to compare\n"
          "  --step-name NAME   NVTX range name prefix that marks a step (as for report)\n"
          "  --local-clocks     ignore the clock models (as for report)\n"
          "  --progress         progress lines on stderr (collectives analysed per run, rate,\n"
          "                     time left) when an analysis takes over 2 s; the default when\n"
          "                     stderr is a terminal\n"
          "  --quiet            no progress lines\n"
          "  -h, --help         this text\n"
          "\n"
          "Definitions: a step's time is the span from the earliest start to the latest end\n"
          "of its NVTX step range over the ranks; steps in which CUPTI was attached or\n"
          "detached for a capture window are left out. Medians and means are over steps.\n"
          "Exposed communication is communication kernel time not covered by compute on the\n"
          "same GPU, summed over ranks. Kernel totals are GPU time summed over ranks, by\n"
          "demangled name.\n"
          "\n"
          "Exit status: 0 compared; 1 a database could not be read or analysed; 2 usage, or\n"
          "runs of different world sizes; 3 --fail-if-slower tripped.\n",
          f);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Step statistics, overlap sums and goodbye count of s->a. 0 or -ENOMEM. */
static int summarize(struct side *s)
{
    const struct mrd_analysis *a = s->a;
    int64_t *d = malloc(sizeof(*d) * (size_t)(a->nsteps > 0 ? a->nsteps : 1));
    if (!d)
        return -ENOMEM;
    int64_t sum = 0;
    s->nsteps = 0;
    for (int i = 0; i < a->nsteps; i++) {
        const struct mrd_an_step *st = &a->steps[i];
        if (st->capture || st->end_ns <= st->start_ns)
            continue;
        d[s->nsteps++] = st->end_ns - st->start_ns;
        sum += st->end_ns - st->start_ns;
    }
    qsort(d, (size_t)s->nsteps, sizeof(*d), cmp_i64);
    /* median: the lower middle for an even count, so it is always a measured step */
    s->step_median_ns = s->nsteps ? d[(s->nsteps - 1) / 2] : 0;
    s->step_mean_ns = s->nsteps ? sum / s->nsteps : 0;
    free(d);
    for (int i = 0; i < a->nranks; i++) {
        const struct mrd_an_rank *r = &a->ranks[i];
        s->comm_ns += r->ov.comm_ns;
        s->hidden_ns += r->ov.hidden_ns;
        s->exposed_ns += r->ov.exposed_ns;
        s->interrupted_ranks += !r->goodbye;
    }
    const struct mrd_an_rank **order = mrd_analyze_ranking(a);
    if (!order)
        return -ENOMEM;
    for (int i = 0; i < a->nranks && s->ntop < DIFF_TOP_STRAGGLERS; i++) {
        struct mrd_an_wait w = mrd_analyze_ranked_wait(a, order[i]);
        if (!w.times_last)
            break;
        s->top[s->ntop] = order[i];
        s->top_wait[s->ntop++] = w;
    }
    free(order);
    return 0;
}

/* Appends one (name, which) total to t. 0 or -ENOMEM. */
static int kernel_append(struct kernel_totals *t, const char *name, int which, int64_t ns,
                         uint64_t count)
{
    int rc = mrd_array_reserve(&t->v, &t->cap, t->n, sizeof(*t->v), 64, 0);
    if (rc < 0)
        return rc;
    struct kernel_total *k = &t->v[t->n];
    memset(k, 0, sizeof(*k));
    if (!(k->name = strdup(name)))
        return -ENOMEM;
    k->ns[which] = ns;
    k->count[which] = count;
    t->n++;
    return 0;
}

/* Kernel GPU time and count per name of db, appended to t in column `which` (one entry
 * per name and database; kernel_merge joins them). Names beyond DIFF_MAX_KERNEL_NAMES
 * per database are summed into "(other names)". 0, -ENOMEM or -MRD_ERR_SQLITE. A
 * database without a kernels table contributes nothing. */
static int load_kernel_totals(sqlite3 *db, int which, struct kernel_totals *t)
{
    int has = mrd_db_has_table(db, "kernels");
    if (has <= 0)
        return has;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, mrd_db_sql_kernel_totals, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    int rc, n = 0, err = 0;
    int64_t other_ns = 0;
    uint64_t other_n = 0;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t ns = sqlite3_column_int64(st, 1);
        uint64_t count = (uint64_t)sqlite3_column_int64(st, 2);
        if (n++ < DIFF_MAX_KERNEL_NAMES)
            err = kernel_append(
                t, mrd_analyze_demangle_cached((const char *)sqlite3_column_text(st, 0)), which, ns,
                count);
        else
            other_ns += ns, other_n += count;
    }
    sqlite3_finalize(st);
    if (!err && other_n)
        err = kernel_append(t, "(other names)", which, other_ns, other_n);
    if (err)
        return err;
    return rc == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

static int cmp_name(const void *x, const void *y)
{
    return strcmp(((const struct kernel_total *)x)->name, ((const struct kernel_total *)y)->name);
}

/* Joins the entries of equal names (one per database) into one. */
static void kernel_merge(struct kernel_totals *t)
{
    if (!t->n)
        return;
    qsort(t->v, t->n, sizeof(*t->v), cmp_name);
    size_t w = 0;
    for (size_t i = 1; i < t->n; i++) {
        if (!strcmp(t->v[w].name, t->v[i].name)) {
            for (int k = 0; k < 2; k++)
                t->v[w].ns[k] += t->v[i].ns[k], t->v[w].count[k] += t->v[i].count[k];
            free(t->v[i].name);
        } else {
            t->v[++w] = t->v[i];
        }
    }
    t->n = w + 1;
}

static int64_t moved(const struct kernel_total *k)
{
    return llabs(k->ns[1] - k->ns[0]);
}

static int cmp_moved(const void *x, const void *y)
{
    const struct kernel_total *a = x, *b = y;
    int64_t ma = moved(a), mb = moved(b);
    if (ma != mb)
        return ma < mb ? 1 : -1;
    return strcmp(a->name, b->name);
}

/* Change of after against before in percent; NAN when before is 0. */
static double pct(int64_t before, int64_t after)
{
    return before ? 100.0 * (double)(after - before) / (double)before : NAN;
}

/* Per-function collective summary over all communicators of a. */
struct func_sum {
    char func[32];
    uint64_t instances, timed;
    int64_t skew_sum_ns, cost_ns;
};

static int func_sums(const struct mrd_analysis *a, struct func_sum *out, int cap)
{
    int n = 0;
    for (int i = 0; i < a->ncolls; i++) {
        const struct mrd_an_coll *c = &a->colls[i];
        int j = 0;
        while (j < n && strcmp(out[j].func, c->func))
            j++;
        if (j == n) {
            if (n == cap)
                continue;
            memset(&out[n], 0, sizeof(out[n]));
            snprintf(out[n].func, sizeof(out[n].func), "%s", c->func);
            n++;
        }
        out[j].instances += c->instances;
        out[j].timed += c->timed;
        out[j].skew_sum_ns += c->skew_sum_ns;
        out[j].cost_ns += c->cost_ns;
    }
    return n;
}

static const struct func_sum *find_func(const struct func_sum *v, int n, const char *func)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].func, func))
            return &v[i];
    return NULL;
}

static void text_row_ns(FILE *f, const char *what, int64_t b, int64_t a)
{
    double p = pct(b, a);
    fprintf(f, "  %-32s %14.3f %14.3f %+14.3f", what, b / 1e6, a / 1e6, (a - b) / 1e6);
    if (isnan(p))
        fputs("           n/a\n", f);
    else
        fprintf(f, " %+12.1f%%\n", p);
}

#define MAX_FUNCS (MRD_AN_MAX_COLLS + 1)

static void print_text(FILE *f, struct side *s, struct kernel_totals *kt)
{
    fprintf(f,
            "meridian diff\n  before: %s (run %s, %d ranks)\n  after:  %s (run %s, %d ranks)\n\n",
            s[0].path, s[0].a->run_id, s[0].a->nranks, s[1].path, s[1].a->run_id, s[1].a->nranks);
    fprintf(f, "Steps (time in ms; a step = earliest start to latest end over ranks)\n");
    fprintf(f, "  %-32s %14s %14s %14s %13s\n", "", "before", "after", "change", "change %");
    fprintf(f, "  %-32s %14" PRId64 " %14" PRId64 "\n", "steps compared", s[0].nsteps, s[1].nsteps);
    text_row_ns(f, "median step time", s[0].step_median_ns, s[1].step_median_ns);
    text_row_ns(f, "mean step time", s[0].step_mean_ns, s[1].step_mean_ns);
    fprintf(f, "\nOverlap (ms, summed over ranks)\n");
    text_row_ns(f, "communication", s[0].comm_ns, s[1].comm_ns);
    text_row_ns(f, "hidden behind compute", s[0].hidden_ns, s[1].hidden_ns);
    text_row_ns(f, "exposed", s[0].exposed_ns, s[1].exposed_ns);
    text_row_ns(f, "exposed per step", s[0].nsteps ? s[0].exposed_ns / s[0].nsteps : 0,
                s[1].nsteps ? s[1].exposed_ns / s[1].nsteps : 0);

    fprintf(f, "\nStragglers (wait each rank caused the others, ms)\n");
    for (int k = 0; k < 2; k++) {
        fprintf(f, "  %-7s", k ? "after:" : "before:");
        for (int i = 0; i < s[k].ntop; i++)
            fprintf(f, "%s rank %d %.3f (last %" PRIu64 "x)", i ? "," : "", s[k].top[i]->rank,
                    s[k].top_wait[i].caused_ns / 1e6, s[k].top_wait[i].times_last);
        fputs(s[k].ntop ? "\n" : " none (no rank arrived last in a timed collective)\n", f);
    }

    struct func_sum fb[MAX_FUNCS], fa[MAX_FUNCS];
    int nb = func_sums(s[0].a, fb, MAX_FUNCS), na = func_sums(s[1].a, fa, MAX_FUNCS);
    fprintf(f, "\nCollectives (per function: instances, mean arrival skew us, wait cost ms)\n");
    if (!nb && !na)
        fputs("  none in either run\n", f);
    for (int k = 0; k < 2; k++) {
        const struct func_sum *v = k ? fa : fb;
        int n = k ? na : nb;
        for (int i = 0; i < n; i++) {
            if (k && find_func(fb, nb, v[i].func))
                continue; /* printed with before */
            const struct func_sum *b = k ? NULL : &v[i];
            const struct func_sum *a = k ? &v[i] : find_func(fa, na, v[i].func);
            fprintf(f, "  %-16s", v[i].func);
            for (int j = 0; j < 2; j++) {
                const struct func_sum *x = j ? a : b;
                if (!x)
                    fprintf(f, "  %-34s", j ? "after: -" : "before: -");
                else
                    fprintf(f, "  %s %6" PRIu64 " x, skew %9.1f, cost %9.3f",
                            j ? "after:" : "before:", x->instances,
                            x->timed ? x->skew_sum_ns / 1e3 / (double)x->timed : 0.0,
                            x->cost_ns / 1e6);
            }
            fputc('\n', f);
        }
    }

    fprintf(f, "\nKernels whose total time moved most (ms, summed over ranks)\n");
    if (!kt->n)
        fputs("  no kernels in either run\n", f);
    for (size_t i = 0; i < kt->n && i < DIFF_TOP_KERNELS; i++) {
        const struct kernel_total *k = &kt->v[i];
        double p = pct(k->ns[0], k->ns[1]);
        fprintf(f, "  %+12.3f  %12.3f -> %12.3f  (%" PRIu64 " -> %" PRIu64 " launches",
                (k->ns[1] - k->ns[0]) / 1e6, k->ns[0] / 1e6, k->ns[1] / 1e6, k->count[0],
                k->count[1]);
        if (!isnan(p))
            fprintf(f, ", %+.1f%%", p);
        fprintf(f, ")  %.120s\n", k->name);
    }
}

static void json_num_pair(FILE *f, const char *key, int64_t b, int64_t a, int comma)
{
    fprintf(f, "\"%s\": {\"before\": %" PRId64 ", \"after\": %" PRId64 ", \"change\": %" PRId64,
            key, b, a, a - b);
    double p = pct(b, a);
    if (isnan(p))
        fputs(", \"change_pct\": null}", f);
    else
        fprintf(f, ", \"change_pct\": %.4f}", p);
    fputs(comma ? ",\n  " : "\n  ", f);
}

static void print_json(FILE *f, struct side *s, struct kernel_totals *kt, double gate_pct)
{
    fputs("{\n  \"before\": {\"path\": ", f);
    mrd__json_str(f, s[0].path);
    fputs(", \"run_id\": ", f);
    mrd__json_str(f, s[0].a->run_id);
    fprintf(f, ", \"ranks\": %d, \"interrupted_ranks\": %d},\n  \"after\": {\"path\": ",
            s[0].a->nranks, s[0].interrupted_ranks);
    mrd__json_str(f, s[1].path);
    fputs(", \"run_id\": ", f);
    mrd__json_str(f, s[1].a->run_id);
    fprintf(f, ", \"ranks\": %d, \"interrupted_ranks\": %d},\n  ", s[1].a->nranks,
            s[1].interrupted_ranks);
    fprintf(f, "\"steps_compared\": {\"before\": %" PRId64 ", \"after\": %" PRId64 "},\n  ",
            s[0].nsteps, s[1].nsteps);
    fputs("\"units\": \"ns\",\n  ", f);
    json_num_pair(f, "step_median_ns", s[0].step_median_ns, s[1].step_median_ns, 1);
    json_num_pair(f, "step_mean_ns", s[0].step_mean_ns, s[1].step_mean_ns, 1);
    json_num_pair(f, "comm_ns", s[0].comm_ns, s[1].comm_ns, 1);
    json_num_pair(f, "hidden_ns", s[0].hidden_ns, s[1].hidden_ns, 1);
    json_num_pair(f, "exposed_ns", s[0].exposed_ns, s[1].exposed_ns, 1);
    fputs("\"stragglers\": {", f);
    for (int k = 0; k < 2; k++) {
        fprintf(f, "%s\"%s\": [", k ? ", " : "", k ? "after" : "before");
        for (int i = 0; i < s[k].ntop; i++)
            fprintf(
                f, "%s{\"rank\": %d, \"wait_caused_ns\": %" PRId64 ", \"times_last\": %" PRIu64 "}",
                i ? ", " : "", s[k].top[i]->rank, s[k].top_wait[i].caused_ns,
                s[k].top_wait[i].times_last);
        fputs("]", f);
    }
    fputs("},\n  \"collectives\": [", f);
    struct func_sum fb[MAX_FUNCS], fa[MAX_FUNCS];
    int nb = func_sums(s[0].a, fb, MAX_FUNCS), na = func_sums(s[1].a, fa, MAX_FUNCS);
    int first = 1;
    for (int k = 0; k < 2; k++) {
        const struct func_sum *v = k ? fa : fb;
        int n = k ? na : nb;
        for (int i = 0; i < n; i++) {
            if (k && find_func(fb, nb, v[i].func))
                continue;
            const struct func_sum *x[2] = {k ? NULL : &v[i],
                                           k ? &v[i] : find_func(fa, na, v[i].func)};
            fprintf(f, "%s\n    {\"func\": ", first ? "" : ",");
            mrd__json_str(f, v[i].func);
            for (int j = 0; j < 2; j++) {
                if (!x[j])
                    fprintf(f, ", \"%s\": null", j ? "after" : "before");
                else
                    fprintf(f,
                            ", \"%s\": {\"instances\": %" PRIu64 ", \"timed\": %" PRIu64
                            ", \"skew_sum_ns\": %" PRId64 ", \"cost_ns\": %" PRId64 "}",
                            j ? "after" : "before", x[j]->instances, x[j]->timed, x[j]->skew_sum_ns,
                            x[j]->cost_ns);
            }
            fputs("}", f);
            first = 0;
        }
    }
    fputs("\n  ],\n  \"kernels_moved\": [", f);
    for (size_t i = 0; i < kt->n && i < DIFF_TOP_KERNELS; i++) {
        const struct kernel_total *k = &kt->v[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        mrd__json_str(f, k->name);
        fprintf(f,
                ", \"before_ns\": %" PRId64 ", \"after_ns\": %" PRId64
                ", \"before_count\": %" PRIu64 ", \"after_count\": %" PRIu64 "}",
                k->ns[0], k->ns[1], k->count[0], k->count[1]);
    }
    fputs("\n  ]", f);
    if (!isnan(gate_pct))
        fprintf(f, ",\n  \"fail_if_slower_pct\": %.4f", gate_pct);
    fputs("\n}\n", f);
}

/* Progress of one run's analysis, counted in collective instances (launcher/progress.h). */
struct diff_progress {
    struct mrd_progress p;
    uint64_t done;
};

static void count_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct diff_progress *dp = ctx;
    (void)in;
    mrd_progress_set(&dp->p, ++dp->done);
}

/* --fail-if-slower PCT into the double at dest. */
static int apply_gate(const struct mrd_opt *opt, const char *arg, const char *who)
{
    char *end;
    double gate = strtod(arg, &end);
    if (end == arg || *end || !(gate >= 0) || gate > 1e6) {
        fprintf(stderr, "%s: --fail-if-slower takes a percentage >= 0 (e.g. 5), not '%s'\n", who,
                arg);
        return -EINVAL;
    }
    *(double *)opt->dest = gate;
    return 0;
}

int mrd_cli_diff(int argc, char **argv)
{
    static const char who[] = "meridian diff";
    int json = 0, local = 0, progress = MRD_PROGRESS_AUTO;
    double gate = NAN;
    const char *step_name = NULL;
    const struct mrd_opt opts[] = {
        MRD_OPT_SET("json", &json, 1), MRD_OPT_WITH("fail-if-slower", apply_gate, &gate),
        MRD_OPT_TEXT("step-name", &step_name), MRD_OPT_SET("local-clocks", &local, 1),
        MRD_OPT_PROGRESS(&progress)};
    int first =
        mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), MRD_OPTS_USAGE_ON_ERROR, who, usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (argc - first != 2) {
        fprintf(stderr, "%s: give two databases, BEFORE and AFTER (see --help)\n", who);
        return 2;
    }
    struct side s[2];
    struct kernel_totals kt = {0};
    sqlite3 *db[2] = {NULL, NULL};
    int status = 1;
    memset(s, 0, sizeof(s));
    for (int k = 0; k < 2; k++) {
        s[k].path = argv[first + k];
        if (!(db[k] = mrd_cli_open_db(s[k].path, 1, who)))
            goto out;
        struct diff_progress dp = {.done = 0};
        struct mrd_analyze_options ao = {.ignore_clock_models = local,
                                         .step_name = step_name,
                                         .on_instance = count_instance,
                                         .ctx = &dp};
        const char *msg = NULL;
        mrd_progress_begin(&dp.p, progress, who,
                           k ? "analysing AFTER's collectives" : "analysing BEFORE's collectives",
                           "instances",
                           progress == MRD_PROGRESS_OFF ? 0 : mrd_cli_instance_count(db[k]));
        int rc = mrd_analyze(db[k], &ao, &s[k].a, &msg);
        if (rc == 0)
            mrd_progress_end(&dp.p);
        if (rc < 0) {
            fprintf(stderr, "%s: %s: analysis failed: %s\n", who, s[k].path,
                    msg ? msg : mrd_strerror(rc));
            goto out;
        }
        if ((rc = summarize(&s[k])) < 0 || (rc = load_kernel_totals(db[k], k, &kt)) < 0) {
            fprintf(stderr, "%s: %s: %s\n", who, s[k].path,
                    rc == -MRD_ERR_SQLITE ? sqlite3_errmsg(db[k]) : mrd_strerror(rc));
            goto out;
        }
    }
    if (s[0].a->world_size != s[1].a->world_size) {
        fprintf(stderr,
                "%s: the runs have different world sizes (%s: %" PRId64 ", %s: %" PRId64
                "): step times and per-rank figures are not comparable; compare runs of"
                " the same job shape\n",
                who, s[0].path, s[0].a->world_size, s[1].path, s[1].a->world_size);
        status = 2;
        goto out;
    }
    if (strcmp(s[0].a->command, s[1].a->command))
        fprintf(stderr,
                "%s: warning: the runs ran different commands:\n  before: %s\n  after:  %s\n", who,
                s[0].a->command[0] ? s[0].a->command : "(not recorded)",
                s[1].a->command[0] ? s[1].a->command : "(not recorded)");
    for (int k = 0; k < 2; k++)
        if (s[k].interrupted_ranks)
            fprintf(stderr,
                    "%s: warning: %s: %d of %d ranks sent no goodbye (an interrupted"
                    " run?): its figures may be partial\n",
                    who, s[k].path, s[k].interrupted_ranks, s[k].a->nranks);
    kernel_merge(&kt);
    qsort(kt.v, kt.n, sizeof(*kt.v), cmp_moved);
    if (json)
        print_json(stdout, s, &kt, gate);
    else
        print_text(stdout, s, &kt);
    status = 0;
    if (!isnan(gate)) {
        if (!s[0].nsteps || !s[1].nsteps) {
            fprintf(stderr,
                    "%s: --fail-if-slower: %s has no steps to compare (no NVTX step"
                    " ranges; see --step-name)\n",
                    who, !s[0].nsteps ? s[0].path : s[1].path);
            status = DIFF_EXIT_SLOWER;
        } else if ((double)s[1].step_median_ns >
                   (double)s[0].step_median_ns * (1.0 + gate / 100.0)) {
            fprintf(stderr,
                    "%s: slower: median step time %.3f ms -> %.3f ms (%+.1f%%, limit"
                    " +%.1f%%)\n",
                    who, s[0].step_median_ns / 1e6, s[1].step_median_ns / 1e6,
                    pct(s[0].step_median_ns, s[1].step_median_ns), gate);
            status = DIFF_EXIT_SLOWER;
        }
    }
out:
    for (int k = 0; k < 2; k++) {
        mrd_analysis_free(s[k].a);
        if (db[k])
            sqlite3_close(db[k]);
    }
    for (size_t i = 0; i < kt.n; i++)
        free(kt.v[i].name);
    free(kt.v);
    return status;
}
