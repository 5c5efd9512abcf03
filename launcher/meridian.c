/* `meridian`: the command people type. Dispatches subcommands and implements the small
 * ones (report, export, finalize); profile/run live in profile.c, doctor in doctor.c,
 * window in window_cmd.c, replay in launcher/replay (mrd_replay_main).
 *
 * Where it sits: the front of the launcher. `profile` starts the data flow (aggregator,
 * agents), `report`/`export` end it (aggregator/analyze + aggregator/export over the
 * database). Each subcommand has a complete --help. Main thread only.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "error.h"
#include "export.h"
#include "pftrace.h"
#include "opts.h"
#include "progress.h"
#include "replay.h"

#ifndef MRD_VERSION
#define MRD_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
    fputs("usage: meridian COMMAND [options]\n"
          "\n"
          "meridian: a cluster-wide GPU profiler for mpirun-launched training jobs.\n"
          "\n"
          "commands:\n"
          "  profile [opts] -- CMD  profile a whole job (mpirun ...): aggregator, agents, report\n"
          "  run [opts] -- CMD      wrap one rank (set the agent's environment, exec CMD)\n"
          "  report DB              text report; --html FILE, --json for scripts\n"
          "  export DB --trace FILE.pftrace.gz | --perfetto FILE.json\n"
          "                         Perfetto trace (ui.perfetto.dev) / Chrome trace JSON\n"
          "  finalize DB            fit clock models, calibrate GPU timers, check causality\n"
          "                         (profile does this; for databases of interrupted runs)\n"
          "  merge -o OUT SHARD...  merge the shard databases of one run (one meridiand each)\n"
          "  diff BEFORE AFTER      compare two runs (step time, overlap, stragglers, kernels);\n"
          "                         --fail-if-slower PCT for CI gates\n"
          "  window DB [--length N] capture N steps in full detail on every rank of the job\n"
          "                         profiling into DB, from a step all ranks have yet to reach\n"
          "  replay [opts]          load generator / capture replay speaking the real protocol\n"
          "  doctor                 check this machine for profiling\n"
          "  help [COMMAND]         this text, or a command's --help\n"
          "  --version              print the version\n"
          "\n"
          "Quick start:  meridian profile -- mpirun -np 2 ./train\n"
          "Every command takes --help.\n",
          f);
}

static void report_usage(FILE *f)
{
    fputs(
        "usage: meridian report DB [options]\n"
        "\n"
        "Analyses a meridian database and prints the report: run, ranks (host, GPUs), events\n"
        "stored per kind per rank, dropped events per reason per rank, clock model and error\n"
        "bound per rank (\"not fitted\" when absent), collectives matched across ranks (arrival\n"
        "skew, causality), communication/compute overlap per rank, straggler ranking, per-step\n"
        "breakdown (NVTX \"step\" ranges), warnings. The database is opened read-only and\n"
        "left as it was (no -wal/-shm files); one of a newer schema version is refused.\n"
        "When the run has step ranges, the straggler ranking counts only the collectives\n"
        "within the steps (warm-up, start-up and teardown left out; the report says how many\n"
        "and what they cost).\n"
        "Findings close the report: rules that turn the data into advice (GPU idle, pageable\n"
        "copies, tiny kernels, syncs inside steps, exposed communication, stragglers and their\n"
        "cause, algorithm/protocol or environment differing across ranks, a clock bound too\n"
        "wide), each with its evidence and what to try, or \"not evaluated\" with the reason.\n"
        "Where the agents recorded environment fingerprints, an Environment section (after the\n"
        "ranks) lists the ranks whose driver, library versions, GPU or allowlisted variables\n"
        "(NCCL_*, CUDA_*, ...) differ from the majority, or says all ranks are identical.\n"
        "\n"
        "  --html FILE       also write a self-contained interactive HTML report (one file)\n"
        "  --json            print the report as JSON (schema meridian-report/1) instead of text\n"
        "  --json=FILE       also write the JSON to FILE\n"
        "  --local-clocks    ignore clock models (each rank's own clock)\n"
        "  --step-name NAME  NVTX ranges named NAME (followed by nothing, a digit or one of\n"
        "                    \" #:=-[(\") are steps; default: step, train_step, training step,\n"
        "                    ProfilerStep#N. Ranges nested in a step do not start a new one.\n"
        "  --progress        progress lines on stderr (collectives analysed, rate, time left)\n"
        "                    when the analysis takes over 2 s; the default when stderr is a\n"
        "                    terminal\n"
        "  --quiet           no progress lines\n"
        "  -h, --help        this text\n"
        "\n"
        "Exit status: 0, 1 when the database cannot be read or analysed, 2 on a usage error.\n",
        f);
}

/* --json[=FILE]: dest is a struct json_dest. */
struct json_dest {
    const char *file;
    int to_stdout;
};

static int apply_json(const struct mrd_opt *opt, const char *arg, const char *who)
{
    struct json_dest *j = opt->dest;
    if (arg ? j->to_stdout : j->file != NULL) {
        fprintf(stderr, "%s: --json and --json=FILE are exclusive\n", who);
        return -EINVAL;
    }
    if (arg)
        j->file = arg;
    else
        j->to_stdout = 1;
    return 0;
}

static int cmd_report(int argc, char **argv)
{
    const char *html = NULL, *step = NULL;
    struct json_dest j = {NULL, 0};
    int local = 0, progress = MRD_PROGRESS_AUTO;
    const struct mrd_opt opts[] = {
        MRD_OPT_TEXT("html", &html),
        {.name = "json", .arg = optional_argument, .apply = apply_json, .dest = &j},
        MRD_OPT_SET("local-clocks", &local, 1),
        MRD_OPT_TEXT("step-name", &step),
        MRD_OPT_PROGRESS(&progress)};
    int first =
        mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, "meridian report", report_usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (first != argc - 1) {
        fprintf(stderr, "meridian report: give exactly one database (see --help)\n");
        return 2;
    }
    sqlite3 *db = mrd_cli_open_db(argv[first], 1, "meridian report");
    if (!db)
        return 1;
    int rc =
        mrd_cli_render_progress(db, j.to_stdout ? NULL : stdout, html, j.to_stdout ? "-" : j.file,
                                local, step, "meridian report", progress);
    sqlite3_close(db);
    return rc;
}

static void export_usage(FILE *f)
{
    fputs("usage: meridian export DB --trace FILE.pftrace.gz | --perfetto FILE.json [options]\n"
          "\n"
          "--trace writes Perfetto's native format (protobuf TrackEvent, gzipped; open it in\n"
          "ui.perfetto.dev): the layout below, NCCL ops named by function (\"AllReduce\"; seq\n"
          "in args), a flow through each collective's op on every rank, and counters (step time,\n"
          "GPU timer offset), capture windows; about 10-20 bytes per event. --perfetto writes\n"
          "Chrome trace event JSON (about 10 times larger). Both may be given.\n"
          "\n"
          "Writes the run as Chrome trace event JSON, which ui.perfetto.dev and chrome://tracing\n"
          "open: one process per rank (\"rank N (host)\"), one thread per GPU stream (kernels,\n"
          "memcpy, memset, graph launches), an \"NCCL ops\" thread per GPU (host enqueue interval\n"
          "of each collective / p2p, with communicator, seq, bytes, algorithm, protocol, and the\n"
          "kernel's start and end), NVTX and MPI threads per host thread, CUDA synchronization;\n"
          "flow arrows from each NCCL op to its kernel. Times are in the global timebase,\n"
          "microseconds with nanosecond precision, after the run's time origin\n"
          "(otherData.origin_ns; aggregator/SCHEMA.md, \"The time origin\").\n"
          "\n"
          "  --trace FILE      native Perfetto trace, gzipped ('-' = stdout)\n"
          "  --perfetto FILE   Chrome trace JSON ('-' = stdout)\n"
          "  --local-clocks    ignore clock models (each rank's own clock)\n"
          "  --api             also export the captured CUDA API calls\n"
          "  --window A:B      only events between A and B milliseconds after the origin (as\n"
          "                    the trace shows times), e.g. --window 1200:1500 for a few\n"
          "                    steps of a long run (trace viewers load ~1 GB at most)\n"
          "  --steps A-B       only steps A to B (NVTX step ranges as the report numbers them,\n"
          "                    from 0; --steps A for one step) instead of a time window\n"
          "  --step-name NAME  with --steps: the step ranges' NVTX name prefix\n"
          "  --progress        progress lines on stderr when an export takes over 2 s: rows\n"
          "                    read of the exported tables' rows (COUNT(*) of each table the\n"
          "                    export queries, counted first; a table read twice counts\n"
          "                    twice), rate, time left; the default when stderr is a terminal\n"
          "  --quiet           no progress lines\n"
          "  -h, --help        this text\n"
          "\n"
          "Exit status: 0, 1 on a read or write error, 2 on a usage error, 3 when --window or\n"
          "--steps selects no event (the trace then holds metadata only; a warning says\n"
          "where the run's events are).\n",
          f);
}

/* "A:B" in milliseconds (decimals allowed) -> ns; A < B. */
static int parse_window(const char *s, int64_t *from, int64_t *to)
{
    char *end;
    double a = strtod(s, &end), b;
    if (end == s || *end != ':')
        return -EINVAL;
    s = end + 1;
    b = strtod(s, &end);
    if (end == s || *end || !(a < b) || b > 9e12)
        return -EINVAL;
    *from = (int64_t)(a * 1e6);
    *to = (int64_t)(b * 1e6);
    return 0;
}

/* "A-B" or "A" (step numbers, A <= B) -> first, last. */
static int parse_steps(const char *s, int64_t *first, int64_t *last)
{
    char *end;
    long long a = strtoll(s, &end, 10), b = a;
    if (end == s || a < 0 || (*end && *end != '-'))
        return -EINVAL;
    if (*end == '-') {
        s = end + 1;
        b = strtoll(s, &end, 10);
        if (end == s || *end || b < a)
            return -EINVAL;
    }
    *first = a;
    *last = b;
    return 0;
}

/* Says that the export's window or step range selected nothing, and where the run is. */
static void warn_empty(const struct mrd_perfetto_options *po, const struct mrd_perfetto_stats *st)
{
    if (po->by_steps && st->steps == 0)
        fprintf(stderr,
                "meridian export: warning: --steps %lld-%lld selects no event: the run "
                "has no NVTX step ranges (see --step-name)\n",
                (long long)po->step_first, (long long)po->step_last);
    else if (po->by_steps)
        fprintf(stderr,
                "meridian export: warning: --steps %lld-%lld selects no event: the run "
                "has steps 0 to %llu\n",
                (long long)po->step_first, (long long)po->step_last,
                (unsigned long long)st->steps - 1);
    else if (st->rows == 0)
        fprintf(stderr, "meridian export: warning: --window selects no event: the run has "
                        "none\n");
    else
        fprintf(stderr,
                "meridian export: warning: --window %.3f:%.3f selects no event: the "
                "run's events lie between %.3f and %.3f ms after the time origin\n",
                (double)po->window_from_ns / 1e6, (double)po->window_to_ns / 1e6,
                (double)st->first_ns / 1e6, (double)st->last_ns / 1e6);
}

/* Export progress (launcher/progress.h), counted in rows read of the tables' rows. */
struct export_progress {
    struct mrd_progress p;
    struct mrd_export_progress cb;
};

static void on_export_rows(void *ctx, uint64_t done, uint64_t total)
{
    struct mrd_progress *p = ctx;
    mrd_progress_set_total(p, total);
    mrd_progress_set(p, done);
}

/* Starts counting one export (what: which file); po->progress is set only when the lines
 * are shown, so that the rows are counted only then. */
static void export_progress_begin(struct export_progress *ep, int mode, const char *what,
                                  struct mrd_perfetto_options *po)
{
    mrd_progress_begin(&ep->p, mode, "meridian export", what, "rows", 0);
    ep->cb.on_rows = on_export_rows;
    ep->cb.ctx = &ep->p;
    po->progress = ep->p.on ? &ep->cb : NULL;
}

/* Ends one export: reports its error (rc < 0) and closes f (stdout is flushed, not
 * closed). Returns rc, or -EIO when f could not be written out. */
static int export_finish(FILE *f, const char *path, sqlite3 *db, struct export_progress *ep, int rc)
{
    if (rc == 0)
        mrd_progress_end(&ep->p);
    if (rc < 0)
        fprintf(stderr, "meridian export: %s\n",
                rc == -MRD_ERR_SQLITE ? sqlite3_errmsg(db) : mrd_strerror(rc));
    if ((f == stdout ? fflush(f) : fclose(f)) != 0 && rc == 0) {
        fprintf(stderr, "meridian export: error writing %s\n", path);
        rc = -EIO;
    }
    return rc;
}

/* --trace: the native Perfetto trace (aggregator/export/pftrace.h). Returns 0 or 1. */
static int export_trace(sqlite3 *db, const char *path, struct mrd_perfetto_options *po,
                        int progress)
{
    struct mrd_pftrace_stats st;
    struct export_progress ep;
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "meridian export: cannot write %s: %s\n", path, mrd_strerror(-errno));
        return 1;
    }
    export_progress_begin(&ep, progress, "writing the native trace", po);
    int rc = mrd_export_pftrace(f, db, po, &st);
    po->progress = NULL;
    rc = export_finish(f, path, db, &ep, rc);
    if (rc == 0)
        fprintf(stderr,
                "meridian export: %s: %llu events, %llu bytes (%.1f per event), %llu tracks, "
                "%llu ops on cross-rank collective flows, %llu op -> kernel flows%s\n",
                path, (unsigned long long)st.rows, (unsigned long long)st.gz_bytes,
                st.rows ? (double)st.gz_bytes / (double)st.rows : 0.0,
                (unsigned long long)st.tracks, (unsigned long long)st.coll_flows,
                (unsigned long long)st.link_flows,
                st.overlapped ? " (some slices shortened: lanes full)" : "");
    if (rc == 0 && (po->window_to_ns || po->by_steps) && st.rows == 0) {
        if (po->by_steps)
            fprintf(stderr,
                    "meridian export: warning: --steps %lld-%lld selects no event for "
                    "%s: the run has %llu steps (see --step-name)\n",
                    (long long)po->step_first, (long long)po->step_last, path,
                    (unsigned long long)st.steps);
        else if (st.spanned)
            fprintf(stderr,
                    "meridian export: warning: --window %.3f:%.3f selects no event for %s: "
                    "the run's events lie between %.3f and %.3f ms after the time origin\n",
                    (double)po->window_from_ns / 1e6, (double)po->window_to_ns / 1e6, path,
                    (double)st.first_ns / 1e6, (double)st.last_ns / 1e6);
        else
            fprintf(stderr,
                    "meridian export: warning: --window selects no event for %s: the run "
                    "has none\n",
                    path);
        return 3;
    }
    return rc == 0 ? 0 : 1;
}

/* --window FROM_MS:TO_MS into the struct mrd_perfetto_options at dest. */
static int apply_window(const struct mrd_opt *opt, const char *arg, const char *who)
{
    struct mrd_perfetto_options *po = opt->dest;
    if (parse_window(arg, &po->window_from_ns, &po->window_to_ns) < 0) {
        fprintf(stderr, "%s: --window wants FROM_MS:TO_MS, FROM < TO\n", who);
        return -EINVAL;
    }
    return 0;
}

/* --steps A-B into the struct mrd_perfetto_options at dest. */
static int apply_steps(const struct mrd_opt *opt, const char *arg, const char *who)
{
    struct mrd_perfetto_options *po = opt->dest;
    if (parse_steps(arg, &po->step_first, &po->step_last) < 0) {
        fprintf(stderr, "%s: --steps wants A-B or A, 0 <= A <= B\n", who);
        return -EINVAL;
    }
    po->by_steps = 1;
    return 0;
}

static int cmd_export(int argc, char **argv)
{
    struct mrd_perfetto_options po;
    struct mrd_perfetto_stats st;
    struct export_progress ep;
    const char *out = NULL, *trace = NULL;
    int rc, progress = MRD_PROGRESS_AUTO;
    memset(&po, 0, sizeof(po));
    const struct mrd_opt opts[] = {MRD_OPT_TEXT("perfetto", &out),
                                   MRD_OPT_TEXT("trace", &trace),
                                   MRD_OPT_SET("local-clocks", &po.ignore_clock_models, 1),
                                   MRD_OPT_SET("api", &po.include_api, 1),
                                   MRD_OPT_WITH("window", apply_window, &po),
                                   MRD_OPT_WITH("steps", apply_steps, &po),
                                   MRD_OPT_TEXT("step-name", &po.step_name),
                                   MRD_OPT_PROGRESS(&progress)};
    int first =
        mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, "meridian export", export_usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (first != argc - 1 || (!out && !trace)) {
        fprintf(stderr, "meridian export: give one database and --trace FILE or --perfetto FILE "
                        "(see --help)\n");
        return 2;
    }
    if (po.by_steps && po.window_to_ns) {
        fprintf(stderr, "meridian export: give --window or --steps, not both\n");
        return 2;
    }
    sqlite3 *db = mrd_cli_open_db(argv[first], 1, "meridian export");
    if (!db)
        return 1;
    if (trace && (rc = export_trace(db, trace, &po, progress)) != 0) {
        sqlite3_close(db);
        return rc;
    }
    if (!out) {
        sqlite3_close(db);
        return 0;
    }
    FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
    if (!f) {
        fprintf(stderr, "meridian export: cannot write %s: %s\n", out, mrd_strerror(-errno));
        sqlite3_close(db);
        return 1;
    }
    export_progress_begin(&ep, progress, "writing the Chrome JSON", &po);
    rc = export_finish(f, out, db, &ep, mrd_export_perfetto(f, db, &po, &st));
    sqlite3_close(db);
    if (rc == 0)
        fprintf(stderr,
                "meridian export: %s: %llu trace events, %llu tracks, %llu NCCL op -> kernel "
                "flows%s\n",
                out, (unsigned long long)st.events, (unsigned long long)st.tracks,
                (unsigned long long)st.flows, st.folded ? " (track cap reached: see 'other')" : "");
    if (rc == 0 && (po.window_to_ns || po.by_steps) && st.selected == 0) {
        warn_empty(&po, &st);
        return 3;
    }
    return rc == 0 ? 0 : 1;
}

static void finalize_usage(FILE *f)
{
    fputs("usage: meridian finalize DB [--progress | --quiet]\n\n"
          "Completes a database whose meridiand has stopped: fits each rank's clock model\n"
          "(clock_samples -> clock_models), calibrates NCCL's GPU timers\n"
          "(gpu_timer_models) and runs the causality check, tightening offsets within\n"
          "their error bounds. `meridian profile` does this itself; use it for runs that\n"
          "were interrupted or profiled with `meridian run`. Running it again gives the\n"
          "same result. A database this meridian cannot read (not a meridian database,\n"
          "a newer schema version) is refused before anything is written.\n\n"
          "  --progress   progress lines on stderr when the finalize takes over 2 s: rows of\n"
          "               the tables its four passes read (clock fit: clock_samples; GPU\n"
          "               timers: nccl_channels + gpu_clock_samples; causality: twice the\n"
          "               collective rows; capture windows: window_records), counted first\n"
          "               and as each pass reads them; rate, time left; the default when\n"
          "               stderr is a terminal\n"
          "  --quiet      no progress lines\n"
          "  -h, --help   this text\n\n"
          "Exit status: 0, 1 when the database cannot be read or updated, 2 on a usage error.\n",
          f);
}

static int cmd_finalize(int argc, char **argv)
{
    int progress = MRD_PROGRESS_AUTO;
    const struct mrd_opt opts[] = {MRD_OPT_PROGRESS(&progress)};
    int first =
        mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, "meridian finalize", finalize_usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (first != argc - 1) {
        finalize_usage(stderr);
        return 2;
    }
    sqlite3 *db = mrd_cli_open_db(argv[first], 0, "meridian finalize");
    if (!db)
        return 1;
    int rc = mrd_cli_finalize_progress(db, NULL, stderr, "meridian finalize", progress);
    sqlite3_close(db);
    return rc < 0 ? 1 : 0;
}

static int has_opt(int argc, char **argv, const char *opt)
{
    size_t n = strlen(opt);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strncmp(argv[i], opt, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '='))
            return 1;
    return 0;
}

/* `meridian replay` inside a profiled job: options the user left out are taken from the
 * agent's environment (MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET_FILE) and,
 * in an MPI rank of a synthetic run (no .mrdcap arguments), the rank and world size from
 * Open MPI's variables, so that `meridian profile -- mpirun -np 4 meridian replay
 * --events 10000` needs nothing else. Explicit options always win; with --from-env
 * (one rank replaying its own capture) replay reads the environment itself. */
static int cmd_replay(int argc, char **argv)
{
    static const struct {
        const char *opt, *env;
    } from_env[] = {{"--aggregator", "MERIDIAN_AGGREGATOR"},
                    {"--run-id", "MERIDIAN_RUN_ID"},
                    {"--secret-file", "MERIDIAN_SECRET_FILE"},
                    {"--rank-base", "OMPI_COMM_WORLD_RANK"},
                    {"--world-size", "OMPI_COMM_WORLD_SIZE"}};
    enum { NEXTRA = sizeof(from_env) / sizeof(from_env[0]) };
    char buf[NEXTRA][1024], *v[256 + NEXTRA];
    int n = 0,
        mpi_synthetic = !has_opt(argc, argv, "--rank-base") && !has_opt(argc, argv, "--ranks");
    for (int i = 1; i < argc; i++) { /* capture files: the captures carry their ranks */
        size_t len = strlen(argv[i]);
        if (argv[i][0] != '-' && len > 7 && strcmp(argv[i] + len - 7, ".mrdcap") == 0)
            mpi_synthetic = 0;
    }
    /* --from-env: replay itself reads the same variables for one rank of a job */
    if (argc > 256 || has_opt(argc, argv, "--from-env"))
        return mrd_replay_main(argc, argv);
    v[n++] = argv[0];
    for (int i = 0; i < NEXTRA; i++) {
        const char *val = getenv(from_env[i].env);
        if (!val || has_opt(argc, argv, from_env[i].opt) || (i >= 3 && !mpi_synthetic))
            continue;
        snprintf(buf[i], sizeof(buf[i]), "%s=%s", from_env[i].opt, val);
        v[n++] = buf[i];
    }
    for (int i = 1; i < argc; i++)
        v[n++] = argv[i];
    v[n] = NULL;
    return mrd_replay_main(n, v);
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"profile", mrd_cli_profile}, {"run", mrd_cli_run},       {"report", cmd_report},
    {"export", cmd_export},       {"finalize", cmd_finalize}, {"replay", cmd_replay},
    {"doctor", mrd_cli_doctor},   {"merge", mrd_cli_merge},   {"window", mrd_cli_window},
    {"diff", mrd_cli_diff},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("meridian %s\n", MRD_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        if (argc > 2 && strcmp(argv[1], "help") == 0) {
            char *help[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(argv[2], commands[i].name) == 0)
                    return commands[i].fn(2, help);
        }
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "meridian: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
