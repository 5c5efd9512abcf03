/* `meridian profile`'s options (see profile.h): the usage text, the option table, each
 * option applied and checked, and the capture tier (steady with windows, or full) resolved
 * from the options and the MERIDIAN_TRACE / MERIDIAN_WINDOWS / MERIDIAN_STEP_NAME /
 * MERIDIAN_STEP_COLLECTIVE / MERIDIAN_TRACE_KINDS environment, refused with exit status 2
 * before anything starts when a value is bad. Runs once, on the main thread, before profile.c starts anything.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collstep.h"
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
        "  each rank in the order they are pushed.\n"
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
 * checking every value that will reach the ranks. Changes nothing else. Returns 0 or -EINVAL (reported). */
static int resolve_tier(struct profile_opts *o)
{
    struct tier *t = &o->tier;
    const char *env_trace = getenv("MERIDIAN_TRACE"), *env_win = getenv("MERIDIAN_WINDOWS");
    const char *kinds = o->trace ? o->trace : getenv("MERIDIAN_TRACE_KINDS");
    const char *step = o->step_name ? o->step_name : getenv("MERIDIAN_STEP_NAME");
    const char *coll = o->step_collective ? o->step_collective
                                          : getenv("MERIDIAN_STEP_COLLECTIVE");
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

/* Options of `meridian profile`. */
enum {
    O_OVER = 256,
    O_HTML,
    O_JSON,
    O_NOREP,
    O_NOFIN,
    O_RUN,
    O_SINGLE,
    O_JOBT,
    O_STYLE,
    O_AGENT,
    O_MPI,
    O_NOMPI,
    O_DAEMON,
    O_LISTEN,
    O_ADV,
    O_DT,
    O_ST,
    O_KEEP,
    O_FT,
    O_SHARDS,
    O_KEEPSH,
    O_FULL,
    O_WINDOWS,
    O_STEPNAME,
    O_TRACE,
    O_TRIGGER,
    O_WDELAY,
    O_WDURATION,
    O_PROGRESS,
    O_QUIET,
    O_STEPCOLL,
    O_TSKEW
};
static const struct option lo[] = {{"output", 1, 0, 'o'},
                                   {"overwrite", 0, 0, O_OVER},
                                   {"html", 1, 0, O_HTML},
                                   {"json", 1, 0, O_JSON},
                                   {"no-report", 0, 0, O_NOREP},
                                   {"no-finalize", 0, 0, O_NOFIN},
                                   {"run-id", 1, 0, O_RUN},
                                   {"single", 0, 0, O_SINGLE},
                                   {"job-timeout", 1, 0, O_JOBT},
                                   {"launcher-style", 1, 0, O_STYLE},
                                   {"agent-lib", 1, 0, O_AGENT},
                                   {"mpi-lib", 1, 0, O_MPI},
                                   {"no-mpi-wrappers", 0, 0, O_NOMPI},
                                   {"meridiand", 1, 0, O_DAEMON},
                                   {"listen", 1, 0, O_LISTEN},
                                   {"advertise", 1, 0, O_ADV},
                                   {"daemon-timeout", 1, 0, O_DT},
                                   {"stop-timeout", 1, 0, O_ST},
                                   {"keep-secret", 0, 0, O_KEEP},
                                   {"finalize-timeout", 1, 0, O_FT},
                                   {"shards", 1, 0, O_SHARDS},
                                   {"keep-shards", 0, 0, O_KEEPSH},
                                   {"full", 0, 0, O_FULL},
                                   {"windows", 1, 0, O_WINDOWS},
                                   {"step-name", 1, 0, O_STEPNAME},
                                   {"step-collective", 1, 0, O_STEPCOLL},
                                   {"trigger-skew", 1, 0, O_TSKEW},
                                   {"trace", 1, 0, O_TRACE},
                                   {"trigger-step-factor", 1, 0, O_TRIGGER},
                                   {"window-delay", 1, 0, O_WDELAY},
                                   {"window-duration", 1, 0, O_WDURATION},
                                   {"verbose", 0, 0, 'v'},
                                   {"progress", 0, 0, O_PROGRESS},
                                   {"quiet", 0, 0, O_QUIET},
                                   {"help", 0, 0, 'h'},
                                   {0, 0, 0, 0}};
/* Applies option c with argument arg to o. Returns 0, 1 after --help (printed), or
 * -EINVAL (reported, except an unknown option, which getopt reported). */
static int apply_profile_option(int c, const char *arg, struct profile_opts *o)
{
    int bad = 0;
    switch (c) {
    case 'o':
        o->db = arg;
        break;
    case O_OVER:
        o->overwrite = 1;
        break;
    case O_HTML:
        o->html = arg;
        break;
    case O_JSON:
        o->json = arg;
        break;
    case O_NOREP:
        o->no_report = 1;
        break;
    case O_NOFIN:
        o->no_finalize = 1;
        break;
    case O_RUN:
        o->run_id = arg;
        break;
    case O_SINGLE:
        o->single = 1;
        break;
    case O_JOBT:
        bad = parse_int(arg, &o->job_timeout_s);
        break;
    case O_STYLE:
        o->style = arg;
        break;
    case O_AGENT:
        o->agent_lib = arg;
        break;
    case O_MPI:
        o->mpi_lib = arg;
        break;
    case O_NOMPI:
        o->no_mpi = 1;
        break;
    case O_DAEMON:
        o->daemon = arg;
        break;
    case O_LISTEN: { /* checked here, before anything (secret file, temp dir) is made */
        char h[256];
        uint16_t port;
        if (mrd_hostport_split(arg, h, sizeof(h), &port) < 0) {
            fprintf(stderr, "meridian profile: --listen %s is not ADDR:PORT ([IPv6]:PORT)\n", arg);
            return -EINVAL;
        }
        o->listen = arg;
        break;
    }
    case O_ADV:
        o->advertise = arg;
        break;
    case O_DT:
        bad = parse_int(arg, &o->daemon_timeout_s);
        break;
    case O_ST:
        bad = parse_int(arg, &o->stop_timeout_s);
        break;
    case O_KEEP:
        o->keep_secret = 1;
        break;
    case O_FT:
        bad = parse_int(arg, &o->finalize_timeout_s);
        break;
    case O_SHARDS:
        if (parse_int(arg, &o->shards) < 0 || o->shards < 1 || o->shards > MAX_SHARDS) {
            fprintf(stderr, "meridian profile: --shards %s: must be 1 to %d\n", arg, MAX_SHARDS);
            return -EINVAL;
        }
        break;
    case O_KEEPSH:
        o->keep_shards = 1;
        break;
    case O_FULL: /* the tier options are checked together, in resolve_tier */
        o->full = 1;
        break;
    case O_WINDOWS:
        o->windows = arg;
        break;
    case O_STEPNAME:
        o->step_name = arg;
        break;
    case O_STEPCOLL:
        o->step_collective = arg;
        break;
    case O_TRACE:
        o->trace = arg;
        break;
    case O_TRIGGER: /* meridiand's rules, checked here so that nothing starts on a typo */
    case O_TSKEW:
    case O_WDELAY:
    case O_WDURATION: {
        char *end;
        double v = strtod(arg, &end);
        int factor = c == O_TRIGGER || c == O_TSKEW;
        if (end == arg || *end || !(v > (factor ? 1.0 : 0.0)) || v > 1e6) {
            fprintf(stderr, "meridian profile: --%s %s: %s\n",
                    c == O_TRIGGER  ? "trigger-step-factor"
                    : c == O_TSKEW  ? "trigger-skew"
                    : c == O_WDELAY ? "window-delay"
                                    : "window-duration",
                    arg, factor ? "a factor over 1 (e.g. 1.5)" : "seconds over 0");
            return -EINVAL;
        }
        *(c == O_TRIGGER  ? &o->trigger
          : c == O_TSKEW  ? &o->trigger_skew
          : c == O_WDELAY ? &o->wdelay
                          : &o->wduration) = arg;
        break;
    }
    case 'v':
        o->verbose = 1;
        break;
    case O_PROGRESS:
        o->progress = MRD_PROGRESS_ON;
        break;
    case O_QUIET:
        o->progress = MRD_PROGRESS_OFF;
        break;
    case 'h':
        profile_usage(stdout);
        return 1;
    default:
        return -EINVAL;
    }
    if (bad) {
        fprintf(stderr, "meridian profile: bad value '%s' for an option\n", arg);
        return -EINVAL;
    }
    return 0;
}

/* Parses the options before the job's command into o. Returns 1 to run the job (argv from
 * optind on), 0 after --help, or -EINVAL (reported). */
int mrd__profile_parse(int argc, char **argv, struct profile_opts *o)
{
    int c;
    memset(o, 0, sizeof(*o));
    o->listen = "127.0.0.1:0";
    o->daemon_timeout_s = 15;
    o->stop_timeout_s = 60;
    o->finalize_timeout_s = 300;
    o->shards = 1;
    optind = 1;
    /* '+': stop at the first non-option, so the job's own options are never parsed here */
    while ((c = getopt_long(argc, argv, "+o:vh", lo, NULL)) != -1) {
        int rc = apply_profile_option(c, optarg, o);
        if (rc != 0)
            return rc == 1 ? 0 : rc;
    }
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
    if (optind >= argc) {
        fprintf(stderr, "meridian profile: no command given (meridian profile [options] -- "
                        "COMMAND ...; see --help)\n");
        return -EINVAL;
    }
    return 1;
}
