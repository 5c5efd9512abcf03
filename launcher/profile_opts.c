/* `meridian profile`'s options (see profile.h): the usage text, the option table, each
 * option applied and checked, and the capture tier (steady with windows, or full) resolved
 * from the options and the MERIDIAN_TRACE / MERIDIAN_WINDOWS / MERIDIAN_STEP_NAME /
 * MERIDIAN_STEP_COLLECTIVE / MERIDIAN_TRACE_KINDS environment, refused with exit status 2
 * before anything starts when a value is bad. Runs once, on the main thread, before profile.c
 * starts anything.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collstep.h"
#include "opts.h"
#include "profile.h"
#include "progress.h"
#include "runcfg.h"
#include "steps.h"

static void profile_usage(FILE *f)
{
    fputs(
        "usage: meridian profile [options] -- COMMAND [ARGS...]\n"
        "\n"
        "Profiles a whole job: creates a run id and a secret, starts meridiand on loopback with\n"
        "an ephemeral port, hands every rank the agent's environment, runs COMMAND, waits for\n"
        "it, stops meridiand (which commits everything), fits the clock models (clock fit, GPU\n"
        "timer calibration, causality check) and prints the report. For `mpirun`/`mpiexec` in\n"
        "COMMAND, `-x NAME=VALUE` (Open MPI) or `-genv NAME VALUE` (MPICH) is inserted after it\n"
        "for each variable, so ranks on every node receive them. For `srun` (Slurm) and\n"
        "`torchrun` the variables are set in their environment, which srun (--export=ALL, its\n"
        "default) and torchrun pass on to every rank; under `srun ... torchrun` each worker\n"
        "takes its rank from torchrun's RANK (agent/ENVIRONMENT.md, \"Who is a rank\").\n"
        "\n"
        "  meridian profile -- mpirun -np 2 ./train --steps 100\n"
        "  meridian profile --listen 0.0.0.0:0 -- srun -N 2 --ntasks-per-node=4 ./train\n"
        "  meridian profile -- torchrun --nproc-per-node=8 train.py\n"
        "\n"
        "output:\n"
        "  -o, --output DB          database (default ./meridian-RUNID.db); must not exist\n"
        "      --overwrite          replace an existing DB\n"
        "      --html FILE          also write the HTML report\n"
        "      --json FILE          also write the JSON report ('-' = stdout instead of text)\n"
        "      --no-report          do not print the report\n"
        "      --no-finalize        skip the clock fit (run `meridian finalize DB` later)\n"
        "      --finalize-timeout S stop the clock fit after S seconds (default 300); the\n"
        "                           report then uses what was fitted, or local clocks\n"
        "run:\n"
        "      --run-id ID          run id (default rYYYYMMDD-HHMMSS-xxxxxx)\n"
        "      --single             the command is one process: make it rank 0 (MERIDIAN_FORCE=1)\n"
        "                           even without a launcher's rank variables\n"
        "      --job-timeout S      stop the job after S seconds: SIGTERM, SIGKILL 10 s later\n"
        "      --launcher-style S   openmpi | mpich | env: how variables reach the ranks\n"
        "                           (default: from the launcher's name; env = only this\n"
        "                           process's environment, inherited by local children)\n"
        "capture tier (agent/ENVIRONMENT.md, \"Tiers and windows\"):\n"
        "  The default is the steady tier with the windows 10/200@10 (10 steps every 200 from\n"
        "  step 10: steps 10-19, 210-219, 410-419, ...). CUPTI stays detached outside the\n"
        "  windows and is attached only for their steps, so its per-launch cost is paid only\n"
        "  inside them and profiling can stay on for the whole job; the NCCL plugin, NVTX steps\n"
        "  and MPI capture are on all the time. A step is an NVTX push/pop range named step,\n"
        "  train_step, training step or ProfilerStep#N (see --step-name), numbered from 0 in\n"
        "  each rank in the order they are pushed. Kernels exist only in window steps: a job\n"
        "  shorter than the first window (or without steps) has none, and its report's\n"
        "  warnings say why and which --windows would cover it.\n"
        "      --full               the full tier (MERIDIAN_TRACE=full): CUPTI attached for the\n"
        "                           whole run, every kernel traced, every launch pays its cost\n"
        "      --windows SPEC       the steady tier with these windows (MERIDIAN_WINDOWS):\n"
        "                           terms separated by ',', at most 16: A-B (steps A to B), A\n"
        "                           (step A), L/P (L steps every P steps from step 0), L/P@S\n"
        "                           (the same from step S); 'none': the steady tier without\n"
        "                           windows (CUPTI never attached). Not with --full.\n"
        "      --step-name PREFIX   a step is an NVTX range whose name starts with PREFIX (any\n"
        "                           case) followed by its end, a digit or one of ' #:=-[('\n"
        "                           (MERIDIAN_STEP_NAME; default: the names above); the\n"
        "                           report's per-step breakdown uses the same rule\n"
        "      --step-collective SPEC\n"
        "                           for a job without NVTX step ranges: steps counted from a\n"
        "                           collective, the same numbers on every rank\n"
        "                           (MERIDIAN_STEP_COLLECTIVE): FUNC[/N][@COMM], every N-th\n"
        "                           FUNC (AllReduce, Broadcast, AllGather, ...; sequence\n"
        "                           number s with s % N == 0) begins a step; or auto[@COMM],\n"
        "                           the DDP rule: N is the repeating period of the AllReduce\n"
        "                           sizes (three repetitions, at least 12 AllReduces; steps\n"
        "                           begin after it is found). COMM: world (default, the first\n"
        "                           communicator of the job's size), a name, or 0xHASH. NVTX\n"
        "                           ranges are then not steps (agent/ENVIRONMENT.md)\n"
        "      --trace KINDS        CUPTI record kinds, comma-separated: kernel, graph, nccl,\n"
        "                           memcpy, memset, sync, api, all (MERIDIAN_TRACE_KINDS;\n"
        "                           default kernel,graph,nccl; kernel is always on)\n"
        "  Without --full and --windows, a MERIDIAN_TRACE or MERIDIAN_WINDOWS already in the\n"
        "  environment is kept (MERIDIAN_TRACE=steady alone gets the default windows); the\n"
        "  options override them. A bad SPEC, KINDS or PREFIX (over 127 bytes), in an option or\n"
        "  in those variables, or --full with --windows, is refused before anything starts.\n"
        "  While the job runs, `meridian window DB [--length N]` asks meridiand for a window\n"
        "  of N steps on every rank (from a step none has reached; control socket DB.ctl).\n"
        "      --trigger-step-factor F\n"
        "                           meridiand opens a window of 10 steps on every rank when a\n"
        "                           rank's step takes more than F (> 1, e.g. 1.5) x the median\n"
        "                           step time (at most one per 200 steps; default: off)\n"
        "      --window-delay S     meridiand opens one window S seconds after the first step\n"
        "      --window-duration S  ... lasting S seconds (default 1), converted to steps at\n"
        "                           the median step time\n"
        "      --trigger-skew F     meridiand opens a window of 10 steps on every rank when a\n"
        "                           collective's arrival skew (latest minus earliest rank's\n"
        "                           start, clocks aligned) exceeds F (> 1) x the median skew\n"
        "                           of that function on that communicator (after 20 instances;\n"
        "                           shared cooldown with the step trigger; default: off)\n"
        "  These four, and `meridian window`, need one aggregator (not with --shards).\n"
        "  The application's own cudaProfilerStart / cudaProfilerStop (or the driver's\n"
        "  cuProfilerStart / cuProfilerStop) open a window on every rank too (reason\n"
        "  profiler_api): it starts at a step no rank has reached after the first start any\n"
        "  rank makes, and ends a margin of steps after the stop (at most 100000 steps\n"
        "  without one). Seen through libmeridian_profapi.so, LD_PRELOADed into every\n"
        "  rank; a program linked with the static CUDA runtime (nvcc's default) is not\n"
        "  seen: mark steps with NVTX and use --windows there. With --shards each\n"
        "  aggregator opens its own from its ranks' calls (steps may differ by shard).\n"
        "agent:\n"
        "      --agent-lib PATH     libmeridian.so (default: $MERIDIAN_AGENT_LIB, else next to\n"
        "                           meridian, else the build tree). Without it ranks are not\n"
        "                           instrumented (a warning says so).\n"
        "      --mpi-lib PATH       libmeridian_mpi.so, LD_PRELOADed into MPI ranks (default:\n"
        "                           $MERIDIAN_MPI_LIB, else found like the agent)\n"
        "      --no-mpi-wrappers    do not preload the MPI wrappers\n"
        "  The agent's other MERIDIAN_* variables set here reach every rank, e.g.\n"
        "  MERIDIAN_GPU_SAMPLE_HZ (NVML readings a second while CUPTI traces, default 1),\n"
        "  MERIDIAN_GPU_SAMPLE_STEADY_HZ (between steady-tier windows, default 1, at most\n"
        "  the first; 0 = none) and the CUPTI buffer sizes (agent/ENVIRONMENT.md).\n"
        "aggregator:\n"
        "      --meridiand PATH     the daemon (default: $MERIDIAN_DAEMON, else next to\n"
        "                           meridian, else the build tree, else $PATH)\n"
        "      --listen ADDR:PORT   where meridiand listens (default 127.0.0.1:0 = loopback,\n"
        "                           ephemeral port). For ranks on other nodes listen on an\n"
        "                           interface they reach and give --advertise.\n"
        "      --advertise HOST     address the agents connect to (default: the listen address)\n"
        "      --daemon-timeout S   give meridiand S seconds to start listening (default 15)\n"
        "      --stop-timeout S     give meridiand S seconds to commit and exit (default 60)\n"
        "      --keep-secret        keep the secret file after the run\n"
        "      --shards N           N aggregators (1-256, default 1), for jobs one meridiand\n"
        "                           cannot take: each with its own port (--listen with a\n"
        "                           port P: P..P+N-1), --shard-id K and database DB.shard-K;\n"
        "                           rank R sends to shard R % N; --advertise is every shard's\n"
        "                           host; the daemon/stop timeouts cover all shards at once.\n"
        "                           After the job the shards are merged into DB and removed;\n"
        "                           if anything fails they are kept and listed (a failed\n"
        "                           merge: no DB, the exit status is still the job's)\n"
        "      --keep-shards        keep the shard databases after a successful merge\n"
        "  -v, --verbose            show meridiand's connection log\n"
        "      --progress           progress lines on stderr for the work after the job when\n"
        "                           it takes over 2 s: the merge (rows read from the\n"
        "                           shards), the finalize (rows its passes read), the report\n"
        "                           (collectives analysed); the default when stderr is a\n"
        "                           terminal\n"
        "      --quiet              no progress lines\n"
        "  -h, --help               this text\n"
        "\n"
        "The secret is written to .meridian-RUNID.secret next to the database (mode 0600):\n"
        "ranks on other nodes must see that folder (a shared file system). Extra MERIDIAN_*\n"
        "variables in the environment (MERIDIAN_QUEUE_BYTES, MERIDIAN_RECORD_FILE, ...) and\n"
        "NCCL_NVLS_ENABLE are passed on to the ranks.\n"
        "\n"
        "Exit status: the job's (128+N if it died of signal N); 2 for a bad option or value\n"
        "(nothing was started); 125 when meridian failed before starting the job, 126/127\n"
        "when COMMAND could not be executed / was not found.\n",
        f);
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v > 1000000)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* ---- capture tier ------------------------------------------------------------------- */

/* The tier, windows, step name and trace kinds reach the ranks as MERIDIAN_* variables
 * (agentenv.c passes every MERIDIAN_* of this process on). They are checked here, by the
 * rules the agent reads them with, because a bad value found by the agent only turns CUDA
 * capture off on every rank with a line each on stderr, after the job has run. */

#define DEFAULT_WINDOWS "10/200@10"
#define STEP_NAME_MAX   127 /* the agent's limit (agent/capture/window.c) */

static const char *const trace_kinds[] = {"kernel", "graph", "nccl", "memcpy",
                                          "memset", "sync",  "api",  "all"};

/* Says why a tier value is refused: `name "value": why` for an option, `name="value" in
 * the environment: why` for a variable. Returns -EINVAL. */
static int refuse(const char *name, int from_env, const char *value, const char *why)
{
    fprintf(stderr,
            from_env ? "meridian profile: %s=\"%.200s\" in the environment: %s\n"
                     : "meridian profile: %s \"%.200s\": %s\n",
            name, value, why);
    return -EINVAL;
}

/* Checks a MERIDIAN_TRACE_KINDS value as the agent parses it (agent/capture/cupti.c):
 * names of trace_kinds[] separated by ','; "" is the default. Returns 0, or -EINVAL with
 * why[] naming the first bad name. */
static int check_kinds(const char *s, char *why, size_t why_len)
{
    const size_t nk = sizeof(trace_kinds) / sizeof(trace_kinds[0]);
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ","), i;
        for (i = 0; i < nk; i++)
            if (strlen(trace_kinds[i]) == len && strncmp(p, trace_kinds[i], len) == 0)
                break;
        if (i == nk) {
            snprintf(why, why_len,
                     "%s%.*s%s is not one of kernel, graph, nccl, memcpy, memset, sync, api, all",
                     len ? "'" : "an empty name", (int)len, p, len ? "'" : "");
            return -EINVAL;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* Resolves o->tier from the tier options and the environment (MERIDIAN_TRACE,
 * MERIDIAN_WINDOWS, MERIDIAN_STEP_NAME, MERIDIAN_STEP_COLLECTIVE, MERIDIAN_TRACE_KINDS),
 * checking every value that will reach the ranks. Changes nothing else. Returns 0 or -EINVAL
 * (reported). */
static int resolve_tier(struct profile_opts *o)
{
    struct tier *t = &o->tier;
    const char *env_trace = getenv("MERIDIAN_TRACE"), *env_win = getenv("MERIDIAN_WINDOWS");
    const char *kinds = o->trace ? o->trace : getenv("MERIDIAN_TRACE_KINDS");
    const char *step = o->step_name ? o->step_name : getenv("MERIDIAN_STEP_NAME");
    const char *coll = o->step_collective ? o->step_collective : getenv("MERIDIAN_STEP_COLLECTIVE");
    const char *spec = NULL;
    struct mrd_windows w;
    struct mrd_collstep_rule rule;
    char why[256];

    memset(t, 0, sizeof(*t));
    if (o->full && o->windows) {
        fprintf(stderr, "meridian profile: --full and --windows together: --full traces every "
                        "kernel all the time, --windows only inside windows (choose one)\n");
        return -EINVAL;
    }
    if (kinds && check_kinds(kinds, why, sizeof(why)) < 0)
        return refuse(o->trace ? "--trace" : "MERIDIAN_TRACE_KINDS", !o->trace, kinds, why);
    if (step && strlen(step) > STEP_NAME_MAX) {
        snprintf(why, sizeof(why), "longer than %d bytes", STEP_NAME_MAX);
        return refuse(o->step_name ? "--step-name" : "MERIDIAN_STEP_NAME", !o->step_name, step,
                      why);
    }
    if (coll && mrd_collstep_parse(coll, &rule, why, sizeof(why)) < 0)
        return refuse(o->step_collective ? "--step-collective" : "MERIDIAN_STEP_COLLECTIVE",
                      !o->step_collective, coll, why);
    if (env_trace && !*env_trace)
        env_trace = NULL; /* set but empty: the agent's default, i.e. not chosen */
    if (env_win && !*env_win)
        env_win = NULL;
    if (!o->full && !o->windows && env_trace && strcmp(env_trace, "steady") != 0 &&
        strcmp(env_trace, "full") != 0)
        return refuse("MERIDIAN_TRACE", 1, env_trace, "not steady or full");
    if (o->full || o->windows) {
        t->steady = !o->full;
    } else {
        t->trace_env = env_trace != NULL;
        t->steady = !env_trace || strcmp(env_trace, "steady") == 0;
    }
    /* the windows: the option; else the environment's (kept, and checked even under the
     * full tier, where the agent still parses them; --full removes them); else the
     * default for the steady tier */
    if (o->windows) {
        spec = o->windows;
    } else if (!o->full && env_win) {
        spec = env_win;
        t->windows_env = 1;
    } else if (t->steady) {
        spec = DEFAULT_WINDOWS;
    }
    if (spec && mrd_windows_parse(spec, &w, why, sizeof(why)) < 0)
        return refuse(o->windows ? "--windows" : "MERIDIAN_WINDOWS", t->windows_env, spec, why);
    if (spec)
        mrd_windows_format(&w, t->windows, sizeof(t->windows));
    t->set_windows = spec && !t->windows_env;
    return 0;
}

/* Sets the resolved tier in this process's environment, before the agent's environment
 * is built from it. Returns 0 or -errno. Main thread. */
int mrd__profile_apply_tier(const struct profile_opts *o)
{
    const struct tier *t = &o->tier;
    if (setenv("MERIDIAN_TRACE", t->steady ? "steady" : "full", 1) < 0 ||
        (t->set_windows && setenv("MERIDIAN_WINDOWS", t->windows, 1) < 0) ||
        (o->full && unsetenv("MERIDIAN_WINDOWS") < 0) ||
        (o->step_name && setenv("MERIDIAN_STEP_NAME", o->step_name, 1) < 0) ||
        (o->step_collective && setenv("MERIDIAN_STEP_COLLECTIVE", o->step_collective, 1) < 0) ||
        (o->trace && setenv("MERIDIAN_TRACE_KINDS", o->trace, 1) < 0))
        return -errno;
    return 0;
}

/* One line at the job's start: the tier and windows the ranks get. */
void mrd__profile_say_tier(const struct tier *t)
{
    const char *from_trace = t->trace_env ? " (MERIDIAN_TRACE)" : "";
    const char *from_win = t->windows_env ? " (MERIDIAN_WINDOWS)" : "";
    if (!t->steady)
        fprintf(stderr,
                "meridian profile: full tier%s (CUPTI attached for the whole run: every "
                "kernel, every launch pays its cost)\n",
                from_trace);
    else if (strcmp(t->windows, "none") == 0)
        fprintf(stderr,
                "meridian profile: steady tier%s, no windows%s (CUPTI never attached: NCCL, "
                "NVTX steps and MPI only; --full traces every kernel)\n",
                from_trace, from_win);
    else
        fprintf(stderr,
                "meridian profile: steady tier%s, windows %s%s (CUPTI attached only inside "
                "them; --full traces every kernel)\n",
                from_trace, t->windows, from_win);
}

/* --listen ADDR:PORT, checked here, before anything (secret file, temp dir) is made. */
static int apply_listen(const struct mrd_opt *opt, const char *arg, const char *who)
{
    char h[256];
    uint16_t port;
    if (mrd_hostport_split(arg, h, sizeof(h), &port) < 0) {
        fprintf(stderr, "%s: --listen %s is not ADDR:PORT ([IPv6]:PORT)\n", who, arg);
        return -EINVAL;
    }
    *(const char **)opt->dest = arg;
    return 0;
}

static int apply_shards(const struct mrd_opt *opt, const char *arg, const char *who)
{
    int *shards = opt->dest;
    if (parse_int(arg, shards) < 0 || *shards < 1 || *shards > MAX_SHARDS) {
        fprintf(stderr, "%s: --shards %s: must be 1 to %d\n", who, arg, MAX_SHARDS);
        return -EINVAL;
    }
    return 0;
}

/* meridiand's rules for its trigger factors and window seconds (proto/steps.h), checked
 * here so that nothing starts on a typo; the text goes on to meridiand as given. */
static int daemon_number(const struct mrd_opt *opt, const char *arg, const char *who, double over,
                         double min, double max, const char *rule)
{
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !(v > over) || v < min || v > max) {
        fprintf(stderr, "%s: --%s %s: %s\n", who, opt->name, arg, rule);
        return -EINVAL;
    }
    *(const char **)opt->dest = arg;
    return 0;
}

static int apply_daemon_factor(const struct mrd_opt *opt, const char *arg, const char *who)
{
    return daemon_number(opt, arg, who, 1.0, 1.0, MRD_TRIGGER_FACTOR_MAX,
                         "a factor over 1 (e.g. 1.5), at most 1000");
}

static int apply_daemon_seconds(const struct mrd_opt *opt, const char *arg, const char *who)
{
    return daemon_number(opt, arg, who, 0.0, MRD_WINDOW_SECONDS_MIN, MRD_WINDOW_SECONDS_MAX,
                         "seconds from 0.001 to 10000000");
}

/* Parses the options before the job's command into o. Returns 1 to run the job (argv from
 * optind on), 0 after --help, or -EINVAL (reported). */
int mrd__profile_parse(int argc, char **argv, struct profile_opts *o)
{
    static const char who[] = "meridian profile";
    memset(o, 0, sizeof(*o));
    o->listen = "127.0.0.1:0";
    o->daemon_timeout_s = 15;
    o->stop_timeout_s = 60;
    o->finalize_timeout_s = 300;
    o->shards = 1;
    /* the tier options (--full, --windows, --trace, --step-*) are checked together, in
     * resolve_tier */
    const struct mrd_opt opts[] = {
        {.name = "output",
         .letter = 'o',
         .arg = required_argument,
         .apply = mrd_opt_text,
         .dest = mrd_opt_text_dest(&o->db)},
        MRD_OPT_SET("overwrite", &o->overwrite, 1),
        MRD_OPT_TEXT("html", &o->html),
        MRD_OPT_TEXT("json", &o->json),
        MRD_OPT_SET("no-report", &o->no_report, 1),
        MRD_OPT_SET("no-finalize", &o->no_finalize, 1),
        MRD_OPT_TEXT("run-id", &o->run_id),
        MRD_OPT_SET("single", &o->single, 1),
        MRD_OPT_COUNT("job-timeout", &o->job_timeout_s),
        MRD_OPT_TEXT("launcher-style", &o->style),
        MRD_OPT_TEXT("agent-lib", &o->agent_lib),
        MRD_OPT_TEXT("mpi-lib", &o->mpi_lib),
        MRD_OPT_SET("no-mpi-wrappers", &o->no_mpi, 1),
        MRD_OPT_TEXT("meridiand", &o->daemon),
        MRD_OPT_WITH("listen", apply_listen, mrd_opt_text_dest(&o->listen)),
        MRD_OPT_TEXT("advertise", &o->advertise),
        MRD_OPT_COUNT("daemon-timeout", &o->daemon_timeout_s),
        MRD_OPT_COUNT("stop-timeout", &o->stop_timeout_s),
        MRD_OPT_SET("keep-secret", &o->keep_secret, 1),
        MRD_OPT_COUNT("finalize-timeout", &o->finalize_timeout_s),
        MRD_OPT_WITH("shards", apply_shards, mrd_opt_int_dest(&o->shards)),
        MRD_OPT_SET("keep-shards", &o->keep_shards, 1),
        MRD_OPT_SET("full", &o->full, 1),
        MRD_OPT_TEXT("windows", &o->windows),
        MRD_OPT_TEXT("step-name", &o->step_name),
        MRD_OPT_TEXT("step-collective", &o->step_collective),
        MRD_OPT_TEXT("trace", &o->trace),
        MRD_OPT_WITH("trigger-step-factor", apply_daemon_factor, mrd_opt_text_dest(&o->trigger)),
        MRD_OPT_WITH("trigger-skew", apply_daemon_factor, mrd_opt_text_dest(&o->trigger_skew)),
        MRD_OPT_WITH("window-delay", apply_daemon_seconds, mrd_opt_text_dest(&o->wdelay)),
        MRD_OPT_WITH("window-duration", apply_daemon_seconds, mrd_opt_text_dest(&o->wduration)),
        {.name = "verbose",
         .letter = 'v',
         .arg = no_argument,
         .apply = mrd_opt_set,
         .dest = mrd_opt_int_dest(&o->verbose),
         .value = 1},
        MRD_OPT_PROGRESS(&o->progress)};
    /* stop at the first non-option, so the job's own options are never parsed here */
    int first = mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), MRD_OPTS_STOP_AT_OPERAND, who,
                               profile_usage);
    if (first <= 0)
        return first;
    if (o->style && strcmp(o->style, "openmpi") && strcmp(o->style, "mpich") &&
        strcmp(o->style, "env")) {
        fprintf(stderr, "meridian profile: --launcher-style must be openmpi, mpich or env\n");
        return -EINVAL;
    }
    if (resolve_tier(o) < 0)
        return -EINVAL;
    if (o->shards > 1 && (o->trigger || o->wdelay || o->wduration || o->trigger_skew)) {
        fprintf(stderr, "meridian profile: --trigger-step-factor, --trigger-skew, --window-delay "
                        "and --window-duration need one aggregator: with --shards each would "
                        "choose other steps for its own ranks\n");
        return -EINVAL;
    }
    char host[256];
    uint16_t port = 0;
    mrd_hostport_split(o->listen, host, sizeof(host), &port); /* checked when read */
    if (port && (int)port + o->shards - 1 > 65535) {
        fprintf(stderr, "meridian profile: --listen %s with --shards %d: ports %u..%d do not fit\n",
                o->listen, o->shards, port, (int)port + o->shards - 1);
        return -EINVAL;
    }
    if (first >= argc) {
        fprintf(stderr, "meridian profile: no command given (meridian profile [options] -- "
                        "COMMAND ...; see --help)\n");
        return -EINVAL;
    }
    return 1;
}
