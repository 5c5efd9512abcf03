/* `meridian profile`: wrap a whole job (aggregator, environment, wait, finalize, report).
 *
 * Where it sits: the start of meridian's data flow: it creates the run (id, secret,
 * database), starts meridiand, hands every rank the agent's environment (agentenv.c),
 * runs the job, then stops meridiand, completes the database (finalize.c) and prints the
 * report (mrd_cli_render). With --shards N it starts N meridiand (one database each,
 * <db>.shard-K, same run and secret), hands the ranks the list of their addresses (rank R
 * sends to entry R % N), and after the job merges the shards into the requested database
 * (mrd_cli_merge_shards, merge.c) before finalizing it; the shard files are kept when
 * anything fails. The capture tier (steady with windows by default, or --full) is chosen
 * and checked while the options are read and reaches the ranks as MERIDIAN_* variables.
 *
 * Never hang: the daemon has --daemon-timeout to come up and --stop-timeout to drain
 * (then SIGKILL, after which SQLite's WAL still holds every committed batch); the job may
 * be given --job-timeout (SIGTERM, then SIGKILL 10 s later). Signals: SIGTERM/SIGHUP to
 * meridian are forwarded to the job; Ctrl-C reaches the job through the terminal while
 * meridian survives it to finalize. meridiand runs in its own process group so Ctrl-C
 * does not stop it before the data is committed, and gets SIGTERM if meridian itself
 * dies (PR_SET_PDEATHSIG). One process, main thread only; the waits poll every 20-50 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentenv.h"
#include "cli.h"
#include "control.h"
#include "runcfg.h"
#include "steps.h"

static volatile sig_atomic_t g_forward; /* signal to forward to the job, 0 = none */

static void on_signal(int sig)
{
    if (sig != SIGINT) /* Ctrl-C already reached the job through the terminal */
        g_forward = sig;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int random_bytes(unsigned char *buf, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    if (fd < 0)
        return -errno;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) {
            close(fd);
            return r < 0 ? -errno : -EIO;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* "r20261130-012345-a1b2c3" */
static int make_run_id(char *out, size_t n)
{
    unsigned char rnd[3];
    char h[8];
    time_t t = time(NULL);
    struct tm tm;
    int rc = random_bytes(rnd, sizeof(rnd));
    if (rc < 0)
        return rc;
    hex(rnd, sizeof(rnd), h);
    gmtime_r(&t, &tm);
    snprintf(out, n, "r%04d%02d%02d-%02d%02d%02d-%s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, h);
    return 0;
}

/* Writes a new random secret to `path` (created exclusively, mode 0600). */
static int write_secret(const char *path)
{
    unsigned char rnd[32];
    char h[65];
    int rc = random_bytes(rnd, sizeof(rnd));
    if (rc < 0)
        return rc;
    hex(rnd, sizeof(rnd), h);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    h[64] = '\n';
    rc = write(fd, h, 65) == 65 ? 0 : -EIO;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* The capture tier the ranks get (agent/ENVIRONMENT.md, "Tiers and windows"), resolved
 * from the options and the environment while the options are read. */
struct tier {
    int steady;         /* 1: the steady tier, 0: full */
    int trace_env;      /* the tier came from MERIDIAN_TRACE in the environment */
    int windows_env;    /* the windows came from MERIDIAN_WINDOWS in the environment */
    int set_windows;    /* MERIDIAN_WINDOWS := windows (an option or the default) */
    char windows[1024]; /* canonical specification (mrd_windows_format); "" when none passes */
};

struct profile_opts {
    const char *db, *run_id, *agent_lib, *mpi_lib, *daemon, *listen, *advertise;
    const char *html, *json, *style;
    const char *windows, *step_name, *trace; /* --windows, --step-name, --trace */
    int daemon_timeout_s, stop_timeout_s, job_timeout_s, finalize_timeout_s;
    int no_mpi, no_report, no_finalize, single, keep_secret, overwrite, verbose;
    int shards, keep_shards, full;
    struct tier tier;
    /* passed to meridiand: --trigger-step-factor, --window-delay, --window-duration */
    const char *trigger, *wdelay, *wduration;
};

#define MAX_SHARDS 256

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
        "  These three, and `meridian window`, need one aggregator (not with --shards).\n"
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
 * MERIDIAN_WINDOWS, MERIDIAN_STEP_NAME, MERIDIAN_TRACE_KINDS), checking every value that
 * will reach the ranks. Changes nothing else. Returns 0 or -EINVAL (reported). */
static int resolve_tier(struct profile_opts *o)
{
    struct tier *t = &o->tier;
    const char *env_trace = getenv("MERIDIAN_TRACE"), *env_win = getenv("MERIDIAN_WINDOWS");
    const char *kinds = o->trace ? o->trace : getenv("MERIDIAN_TRACE_KINDS");
    const char *step = o->step_name ? o->step_name : getenv("MERIDIAN_STEP_NAME");
    const char *spec = NULL;
    struct mrd_windows w;
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
static int apply_tier(const struct profile_opts *o)
{
    const struct tier *t = &o->tier;
    if (setenv("MERIDIAN_TRACE", t->steady ? "steady" : "full", 1) < 0 ||
        (t->set_windows && setenv("MERIDIAN_WINDOWS", t->windows, 1) < 0) ||
        (o->full && unsetenv("MERIDIAN_WINDOWS") < 0) ||
        (o->step_name && setenv("MERIDIAN_STEP_NAME", o->step_name, 1) < 0) ||
        (o->trace && setenv("MERIDIAN_TRACE_KINDS", o->trace, 1) < 0))
        return -errno;
    return 0;
}

/* One line at the job's start: the tier and windows the ranks get. */
static void say_tier(const struct tier *t)
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
    O_WDURATION
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
                                   {"trace", 1, 0, O_TRACE},
                                   {"trigger-step-factor", 1, 0, O_TRIGGER},
                                   {"window-delay", 1, 0, O_WDELAY},
                                   {"window-duration", 1, 0, O_WDURATION},
                                   {"verbose", 0, 0, 'v'},
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
    case O_TRACE:
        o->trace = arg;
        break;
    case O_TRIGGER: /* meridiand's rules, checked here so that nothing starts on a typo */
    case O_WDELAY:
    case O_WDURATION: {
        char *end;
        double v = strtod(arg, &end);
        if (end == arg || *end || !(v > (c == O_TRIGGER ? 1.0 : 0.0)) || v > 1e6) {
            fprintf(stderr, "meridian profile: --%s %s: %s\n",
                    c == O_TRIGGER  ? "trigger-step-factor"
                    : c == O_WDELAY ? "window-delay"
                                    : "window-duration",
                    arg, c == O_TRIGGER ? "a factor over 1 (e.g. 1.5)" : "seconds over 0");
            return -EINVAL;
        }
        *(c == O_TRIGGER ? &o->trigger : c == O_WDELAY ? &o->wdelay : &o->wduration) = arg;
        break;
    }
    case 'v':
        o->verbose = 1;
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
static int parse_profile(int argc, char **argv, struct profile_opts *o)
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
    if (o->shards > 1 && (o->trigger || o->wdelay || o->wduration)) {
        fprintf(stderr, "meridian profile: --trigger-step-factor, --window-delay and "
                        "--window-duration need one aggregator: with --shards each would "
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

/* One meridiand of the run (the only one without --shards). */
struct shard {
    pid_t pid; /* -1: not running (never started, or reaped) */
    int port;
    char db[PATH_MAX + 24], port_file[128], listen[300];
};

/* One run's names, paths and processes. */
struct run_state {
    char run_id[128], db[PATH_MAX], secret[PATH_MAX + 64], tmpdir[64];
    char ctl[PATH_MAX + 8]; /* meridiand's control socket, DB.ctl (`meridian window`) */
    char daemon[PATH_MAX], agent[PATH_MAX], mpi[PATH_MAX];
    char *aggregator; /* "host:port[,host:port...]", malloc'd */
    int have_agent, have_mpi, nshards;
    struct shard *sh; /* nshards, calloc'd */
};

/* "meridiand", or "meridiand (shard K)" in a sharded run: how messages name daemon k. */
static const char *dname(const struct run_state *s, int k, char *buf, size_t n)
{
    if (s->nshards == 1)
        return "meridiand";
    snprintf(buf, n, "meridiand (shard %d)", k);
    return buf;
}

/* Kills every daemon still running (with listening_only: only those not listening yet),
 * saying for each "meridian profile: <daemon> " + why (a format taking timeout_s), and
 * reaps it. Returns how many it killed. */
static int kill_left(struct run_state *s, int listening_only, const char *why, int timeout_s)
{
    char nb[32], msg[160];
    int n = 0;
    snprintf(msg, sizeof(msg), why, timeout_s);
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        if (d->pid < 0 || (listening_only && d->port > 0))
            continue;
        fprintf(stderr, "meridian profile: %s %s\n", dname(s, k, nb, sizeof(nb)), msg);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = -1;
        n++;
    }
    return n;
}

static void describe_exit(int st, const char **what, int *code)
{
    *what = WIFEXITED(st) ? "status" : "signal";
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st);
}

/* Forks and execs meridiand for shard k. Returns its pid, or -1 (reported). */
static pid_t spawn_daemon(const struct run_state *s, const struct profile_opts *o, int k)
{
    char shard_id[16];
    struct shard *d = &s->sh[k];
    const char *av[24] = {s->daemon,     "--db",          d->db,
                          "--listen",    d->listen,       "--run-id",
                          s->run_id,     "--secret-file", s->secret,
                          "--port-file", d->port_file,    o->verbose ? "--verbose" : "--quiet",
                          NULL};
    int n = 12;
    if (s->nshards > 1) { /* a single daemon is started exactly as before shards existed */
        snprintf(shard_id, sizeof(shard_id), "%d", k);
        av[n++] = "--shard-id";
        av[n++] = shard_id;
    } else { /* windows chosen by meridiand: one aggregator sees every rank's steps */
        av[n++] = "--control";
        av[n++] = s->ctl;
        if (o->trigger) {
            av[n++] = "--trigger-step-factor";
            av[n++] = o->trigger;
        }
        if (o->wdelay) {
            av[n++] = "--window-delay";
            av[n++] = o->wdelay;
        }
        if (o->wduration) {
            av[n++] = "--window-duration";
            av[n++] = o->wduration;
        }
    }
    av[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C on the job's terminal must not stop the aggregator */
        /* ... but if meridian itself dies, the daemon commits and exits instead of
         * lingering: SIGTERM is its clean stop */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1)
            _exit(1);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO); /* the "listening" line; we read the port file */
        }
        execv(s->daemon, (char *const *)av);
        fprintf(stderr, "meridian profile: cannot run %s: %s\n", s->daemon, strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Starts every shard's meridiand and waits, up to timeout_s for all of them together, for
 * their ports. Returns 0, or -1 (reported; daemons that never listened are reaped, the
 * others are left to stop_daemons). */
static int start_daemons(struct run_state *s, const struct profile_opts *o, int timeout_s)
{
    char nb[32];
    int listening = 0;
    for (int k = 0; k < s->nshards; k++)
        if ((s->sh[k].pid = spawn_daemon(s, o, k)) < 0)
            return -1;
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    while (listening < s->nshards && now_ms() < deadline) {
        for (int k = 0; k < s->nshards; k++) {
            struct shard *d = &s->sh[k];
            int st, code;
            const char *what;
            if (d->port > 0)
                continue;
            FILE *f = fopen(d->port_file, "r");
            if (f) {
                int ok = fscanf(f, "%d", &d->port) == 1 && d->port > 0;
                fclose(f);
                if (!ok)
                    d->port = 0;
                listening += ok;
                if (ok)
                    continue;
            }
            if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                d->pid = -1;
                describe_exit(st, &what, &code);
                fprintf(stderr,
                        "meridian profile: %s exited (%s %d) before listening; "
                        "its messages are above\n",
                        dname(s, k, nb, sizeof(nb)), what, code);
                return -1;
            }
        }
        if (listening < s->nshards)
            nap_ms(20);
    }
    if (listening == s->nshards)
        return 0;
    kill_left(s, 1, "did not start listening within %d s; stopping it", timeout_s);
    return -1;
}

/* Stops every running daemon: SIGTERM to all, then up to timeout_s (for all together, as
 * they commit in parallel) for them to commit and exit, then SIGKILL. Returns the number
 * that did not exit cleanly with status 0 (one that had died during the run included). */
static int stop_daemons(struct run_state *s, int timeout_s)
{
    char nb[32];
    int failed = 0, running = 0, st, code;
    const char *what;
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        if (d->pid < 0)
            continue;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            describe_exit(st, &what, &code);
            fprintf(stderr, "meridian profile: %s had already exited (%s %d) during the run\n",
                    dname(s, k, nb, sizeof(nb)), what, code);
            d->pid = -1;
            failed++;
            continue;
        }
        kill(d->pid, SIGTERM);
        running++;
    }
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    while (running > 0 && now_ms() < deadline) {
        for (int k = 0; k < s->nshards; k++) {
            struct shard *d = &s->sh[k];
            if (d->pid < 0 || waitpid(d->pid, &st, WNOHANG) != d->pid)
                continue;
            d->pid = -1;
            running--;
            failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        if (running > 0)
            nap_ms(20);
    }
    return failed + kill_left(s, 0,
                              "did not exit within %d s of SIGTERM; killing it (committed "
                              "batches are safe in the WAL)",
                              timeout_s);
}

/* Runs argv as a child and waits for it. Returns its wait status, or -1. When the command
 * could not be started (execvp failed), *exec_err is its errno (else 0) and the child has
 * exited 127 (not found) or 126, like a shell; the caller says so. */
static int run_job(char **argv, int timeout_s, const struct run_state *s, int *exec_err)
{
    struct sigaction sa, old_int, old_term, old_hup;
    unsigned char warned[MAX_SHARDS] = {0};
    char nb[32];
    int st = 0, started[2] = {-1, -1};
    *exec_err = 0;
    int64_t deadline = timeout_s ? now_ms() + (int64_t)timeout_s * 1000 : 0, kill_at = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    /* the exec closes this pipe (O_CLOEXEC) or the child writes its errno into it, so the
     * parent learns which without guessing from the exit status (the job's own could be
     * 127); without the pipe the child says why itself */
    if (pipe2(started, O_CLOEXEC) != 0)
        started[0] = started[1] = -1;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", strerror(errno));
        st = -1;
        goto out;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        execvp(argv[0], argv);
        int e = errno;
        if (started[1] < 0 || write(started[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
            fprintf(stderr, "meridian profile: cannot run %s: %s\n", argv[0], strerror(e));
        _exit(e == ENOENT ? MRD_CLI_EXIT_NOTFOUND : MRD_CLI_EXIT_NOEXEC);
    }
    if (started[1] >= 0) {
        int e = 0;
        ssize_t n;
        close(started[1]);
        started[1] = -1;
        do
            n = read(started[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(e)) {
            *exec_err = e;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            goto out;
        }
    }
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            st = -1;
            break;
        }
        if (g_forward) {
            kill(pid, g_forward);
            g_forward = 0;
        }
        if (deadline && !kill_at && now_ms() > deadline) {
            fprintf(stderr, "meridian profile: job timeout (%d s): sending SIGTERM\n", timeout_s);
            kill(pid, SIGTERM);
            kill_at = now_ms() + 10000;
        }
        if (kill_at && now_ms() > kill_at) {
            fprintf(stderr, "meridian profile: job still running: sending SIGKILL\n");
            kill(pid, SIGKILL);
            kill_at = INT64_MAX;
        }
        for (int k = 0; k < s->nshards; k++) {
            pid_t d = s->sh[k].pid;
            siginfo_t si = {0};
            if (warned[k] || waitid(P_PID, (id_t)d, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                si.si_pid != d)
                continue;
            fprintf(stderr,
                    "meridian profile: %s exited during the run; the job continues "
                    "unprofiled from here%s\n",
                    dname(s, k, nb, sizeof(nb)), s->nshards > 1 ? " (its shard's ranks)" : "");
            warned[k] = 1;
        }
        nap_ms(50);
    }
out:
    for (int i = 0; i < 2; i++)
        if (started[i] >= 0)
            close(started[i]);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    return st;
}

/* Runs the finalize in a child process so that a slow pass on a huge database cannot hold
 * the report hostage: after timeout_s the child is killed (SQLite rolls back its open
 * transaction) and the report uses what was committed. Returns 0 when it completed. */
static int finalize_with_timeout(const char *db_path, const char *command, int timeout_s)
{
    int st = 0;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sqlite3 *db = mrd_cli_open_db(db_path, 0, "meridian profile");
        int rc = db ? mrd_cli_finalize(db, command, stderr) : -1;
        if (db)
            sqlite3_close(db);
        fflush(stderr);
        _exit(rc < 0 ? 1 : 0);
    }
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() > deadline) {
            fprintf(stderr,
                    "meridian profile: the clock fit did not finish within %d s: "
                    "stopped (run `meridian finalize %s` to retry); the report uses "
                    "what is in the database\n",
                    timeout_s, db_path);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nap_ms(50);
    }
}

static char *join_command(char **argv, int argc)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < argc; i++) {
        strcat(s, argv[i]);
        if (i + 1 < argc)
            strcat(s, " ");
    }
    return s;
}

static void unlink_db(const char *db)
{
    char p[PATH_MAX + 32];
    unlink(db);
    snprintf(p, sizeof(p), "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", db);
    unlink(p);
}

/* Leaves the database one file at rest when a -wal is left next to it (a meridiand or a
 * finalize that was killed): a read-write connection that reads and closes is the last
 * one, so SQLite checkpoints the committed frames into the file and deletes the -wal and
 * -shm (a killed transaction's frames were never committed and are dropped). Nothing is
 * done otherwise; the report then opens the file without creating either (readonly.c). */
static void settle_db(const char *db)
{
    char p[PATH_MAX + 32];
    struct stat st;
    sqlite3 *h = NULL;
    snprintf(p, sizeof(p), "%s-wal", db);
    if (stat(p, &st) != 0 || stat(db, &st) != 0)
        return;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(h, 5000);
        sqlite3_exec(h, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    }
    sqlite3_close(h);
}

/* The command could not be started (execvp's errno e): nothing was profiled, so nothing is
 * kept. Stops the daemons (SIGTERM: they commit and exit as after any job) and removes
 * the database(s) they created, so -o names no file afterwards. */
static void job_not_started(const struct profile_opts *o, struct run_state *s, const char *cmd,
                            int e)
{
    fprintf(stderr,
            "meridian profile: cannot run %s: %s: the command could not be started; nothing "
            "was profiled (stopping meridiand, no database kept)\n",
            cmd, strerror(e));
    if (stop_daemons(s, o->stop_timeout_s) > 0)
        fprintf(stderr, "meridian profile: a meridiand did not stop cleanly\n");
    for (int k = 0; k < s->nshards; k++)
        unlink_db(s->sh[k].db);
    unlink_db(s->db);
}

/* The shard databases' paths, for shard k (next to the requested database), and their
 * listen addresses and port files. A leftover shard file is refused like the database
 * itself (--overwrite removes it). Returns 0 or -1 (reported). */
static int plan_shards(const struct profile_opts *o, struct run_state *s)
{
    char host[256];
    uint16_t port;
    struct stat st;
    if (mrd_hostport_split(o->listen, host, sizeof(host), &port) < 0)
        return -1; /* a user's --listen was checked when parsed: only the default is left */
    int bracket = strchr(host, ':') != NULL; /* an IPv6 address: [..]:port */
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        d->pid = -1;
        if (s->nshards == 1) {
            snprintf(d->db, sizeof(d->db), "%s", s->db);
            snprintf(d->port_file, sizeof(d->port_file), "%s/port", s->tmpdir);
            snprintf(d->listen, sizeof(d->listen), "%s", o->listen);
            continue;
        }
        snprintf(d->db, sizeof(d->db), "%s.shard-%d", s->db, k);
        snprintf(d->port_file, sizeof(d->port_file), "%s/port-%d", s->tmpdir, k);
        snprintf(d->listen, sizeof(d->listen), bracket ? "[%s]:%d" : "%s:%d", host,
                 port ? port + k : 0);
        if (stat(d->db, &st) == 0) {
            if (!o->overwrite) {
                fprintf(stderr,
                        "meridian profile: %s exists (a shard of an earlier run? remove "
                        "it, or give --overwrite)\n",
                        d->db);
                return -1;
            }
            unlink_db(d->db);
        }
    }
    return 0;
}

/* Prepares the run: run id, paths, secret, every meridiand started and listening. Returns
 * 0 or -1 (message printed); what was created is undone by cleanup_run / stop_daemons. */
static int setup_run(const struct profile_opts *o, struct run_state *s)
{
    char name[PATH_MAX];
    struct stat st;
    if (o->run_id)
        snprintf(s->run_id, sizeof(s->run_id), "%s", o->run_id);
    else if (make_run_id(s->run_id, sizeof(s->run_id)) < 0) {
        fprintf(stderr, "meridian profile: cannot read /dev/urandom\n");
        return -1;
    }
    snprintf(name, sizeof(name), "meridian-%s.db", s->run_id);
    if (mrd_agentenv_abs_path(o->db ? o->db : name, s->db, sizeof(s->db)) < 0) {
        fprintf(stderr, "meridian profile: bad database path '%s'\n", o->db ? o->db : name);
        return -1;
    }
    if (stat(s->db, &st) == 0) {
        if (!o->overwrite) {
            fprintf(stderr, "meridian profile: %s exists (choose another -o, or --overwrite)\n",
                    s->db);
            return -1;
        }
        unlink_db(s->db);
    }
    snprintf(s->ctl, sizeof(s->ctl), "%s%s", s->db, MRD_CONTROL_SUFFIX);
    if (mrd_agentenv_find_daemon(o->daemon, s->daemon, sizeof(s->daemon)) < 0) {
        fprintf(stderr, "meridian profile: meridiand not found (give --meridiand PATH)\n");
        return -1;
    }
    s->have_agent = mrd_agentenv_find_agent(o->agent_lib, s->agent, sizeof(s->agent)) == 0;
    if (!s->have_agent && o->agent_lib) {
        fprintf(stderr, "meridian profile: --agent-lib %s: no such file\n", o->agent_lib);
        return -1;
    }
    if (!s->have_agent)
        fprintf(stderr, "meridian profile: warning: libmeridian.so not found: ranks will not "
                        "be instrumented (only programs that speak meridian's protocol "
                        "themselves, like `meridian replay`, will report)\n");
    s->have_mpi = !o->no_mpi && mrd_agentenv_find_mpi(o->mpi_lib, s->mpi, sizeof(s->mpi)) == 0;
    if (!s->have_mpi && o->mpi_lib && !o->no_mpi) {
        fprintf(stderr, "meridian profile: --mpi-lib %s: no such file\n", o->mpi_lib);
        return -1;
    }
    /* the secret next to the database (visible to other nodes on a shared file system) */
    const char *slash = strrchr(s->db, '/');
    snprintf(s->secret, sizeof(s->secret), "%.*s/.meridian-%s.secret", (int)(slash - s->db), s->db,
             s->run_id);
    int rc = write_secret(s->secret);
    if (rc < 0) {
        fprintf(stderr, "meridian profile: cannot create %s: %s\n", s->secret, strerror(-rc));
        s->secret[0] = '\0';
        return -1;
    }
    snprintf(s->tmpdir, sizeof(s->tmpdir), "/tmp/meridian-XXXXXX");
    if (!mkdtemp(s->tmpdir)) {
        fprintf(stderr, "meridian profile: mkdtemp: %s\n", strerror(errno));
        s->tmpdir[0] = '\0';
        return -1;
    }
    if (plan_shards(o, s) < 0 || start_daemons(s, o, o->daemon_timeout_s) < 0)
        return -1;
    /* agents connect to --advertise, else the listen host (a wildcard means this host) */
    char host[256];
    uint16_t listen_port;
    mrd_hostport_split(o->listen, host, sizeof(host), &listen_port); /* checked above */
    if (o->advertise)
        snprintf(host, sizeof(host), "%s", o->advertise);
    else if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
        gethostname(host, sizeof(host));
    int bracket = strchr(host, ':') && host[0] != '['; /* an IPv6 address, not yet [..] */
    size_t cap = (size_t)s->nshards * (strlen(host) + 10) + 1, len = 0;
    if (!(s->aggregator = malloc(cap))) {
        fprintf(stderr, "meridian profile: out of memory\n");
        return -1;
    }
    for (int k = 0; k < s->nshards; k++)
        len += (size_t)snprintf(s->aggregator + len, cap - len, bracket ? "%s[%s]:%d" : "%s%s:%d",
                                k ? "," : "", host, s->sh[k].port);
    return 0;
}

static void cleanup_run(const struct profile_opts *o, struct run_state *s)
{
    struct stat st; /* meridiand removes its control socket; not when it was killed */
    if (s->ctl[0] && lstat(s->ctl, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(s->ctl);
    if (s->secret[0] && !o->keep_secret)
        unlink(s->secret);
    for (int k = 0; s->sh && k < s->nshards; k++)
        if (s->sh[k].port_file[0])
            unlink(s->sh[k].port_file);
    if (s->tmpdir[0])
        rmdir(s->tmpdir);
}

static int exit_code(int st)
{
    if (st < 0)
        return MRD_CLI_EXIT_SETUP;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 1;
}

/* Lists the shard databases that exist, after "meridian profile: <what>", with the
 * command that merges them. */
static void say_kept_shards(const struct run_state *s, const char *what)
{
    struct stat st;
    int n = 0;
    for (int k = 0; k < s->nshards; k++)
        n += stat(s->sh[k].db, &st) == 0;
    if (n == 0)
        return;
    fprintf(stderr, "meridian profile: %s:", what);
    for (int k = 0; k < s->nshards; k++)
        if (stat(s->sh[k].db, &st) == 0)
            fprintf(stderr, " %s", s->sh[k].db);
    fprintf(stderr, "\n");
}

/* After the job: merges the shard databases into s->db (nothing to do for one shard) and
 * removes them unless keep. Returns 0, or -1 when s->db was not written (the shards are
 * kept and listed). */
static int merge_shards(const struct profile_opts *o, const struct run_state *s, int failed)
{
    const char *paths[MAX_SHARDS];
    if (s->nshards == 1)
        return 0;
    for (int k = 0; k < s->nshards; k++)
        paths[k] = s->sh[k].db;
    fprintf(stderr, "meridian profile: merging %d shard databases into %s\n", s->nshards, s->db);
    if (mrd_cli_merge_shards(s->db, paths, s->nshards, o->overwrite, stderr, "meridian profile") !=
        0) {
        say_kept_shards(s, "the merge failed; the shard databases are kept (once the cause "
                           "is fixed: meridian merge -o DB SHARD...)");
        return -1;
    }
    if (o->keep_shards || failed) {
        say_kept_shards(s, failed ? "a meridiand did not stop cleanly; the shard databases "
                                    "are kept"
                                  : "shard databases kept (--keep-shards)");
        return 0;
    }
    for (int k = 0; k < s->nshards; k++)
        unlink_db(s->sh[k].db);
    return 0;
}

/* One note when the variables travel through the environment and may not arrive. */
static void say_env_route(const struct mrd_launchers *ls, int single)
{
    if (mrd_agentenv_has(ls, MRD_KIND_SLURM) >= 0 && ls->export_limited)
        fprintf(stderr, "meridian profile: warning: srun --export (or SLURM_EXPORT_ENV) does "
                        "not start with ALL: the agent's variables will not reach the ranks "
                        "(use --export=ALL,...)\n");
    else if (ls->n == 0 && !single)
        fprintf(stderr, "meridian profile: note: no launcher (mpirun, mpiexec, srun, "
                        "torchrun) in the command: ranks are recognised by their launcher's "
                        "variables (RANK, SLURM_PROCID, ...); give --single for a one-process "
                        "job\n");
}

int mrd_cli_profile(int argc, char **argv)
{
    struct profile_opts o;
    struct run_state s;
    struct mrd_agentenv env;
    char **job = NULL, **rewritten = NULL, *command = NULL;
    int rc = parse_profile(argc, argv, &o), st = -1, style, at, exec_err = 0;

    memset(&s, 0, sizeof(s));
    memset(&env, 0, sizeof(env));
    if (rc <= 0)
        return rc == 0 ? 0 : 2;
    if (!(s.sh = calloc((size_t)o.shards, sizeof(*s.sh)))) {
        fprintf(stderr, "meridian profile: out of memory\n");
        return MRD_CLI_EXIT_SETUP;
    }
    s.nshards = o.shards;
    for (int k = 0; k < s.nshards; k++)
        s.sh[k].pid = -1;
    job = argv + optind;
    int njob = argc - optind;
    if (setup_run(&o, &s) < 0)
        goto setup_failed;
    struct mrd_launchers ls;
    mrd_agentenv_scan(job, njob, &ls);
    at = mrd_agentenv_find_launcher(job, njob, &style);
    if (o.style)
        style = strcmp(o.style, "openmpi") == 0 ? MRD_LAUNCHER_OPENMPI
                : strcmp(o.style, "mpich") == 0 ? MRD_LAUNCHER_MPICH
                                                : MRD_LAUNCHER_NONE;
    struct mrd_agentenv_config ec = {.aggregator = s.aggregator,
                                     .run_id = s.run_id,
                                     .secret_file = s.secret,
                                     .agent_lib = s.have_agent ? s.agent : NULL,
                                     .mpi_lib = NULL,
                                     .force = o.single};
    /* the MPI wrappers go to the tasks of mpirun and srun, not to torchrun's workers
     * (torch jobs talk NCCL or Gloo, and the wrappers would load MPI into Python) */
    if (s.have_mpi && (at >= 0 || mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0) &&
        mrd_agentenv_has(&ls, MRD_KIND_TORCH) < 0)
        ec.mpi_lib = s.mpi;
    if (s.nshards > 1 && getenv("MERIDIAN_SHARD_ID")) {
        /* with a list each rank's shard id is its entry's index; a set value would make
         * the agent inert on every rank but one in N (agent/ENVIRONMENT.md) */
        fprintf(stderr,
                "meridian profile: note: MERIDIAN_SHARD_ID=%.20s is not passed on: "
                "with --shards each rank's shard id is its shard's index\n",
                getenv("MERIDIAN_SHARD_ID"));
        unsetenv("MERIDIAN_SHARD_ID");
    }
    if ((rc = apply_tier(&o)) < 0) {
        fprintf(stderr, "meridian profile: setenv: %s\n", strerror(-rc));
        goto setup_failed;
    }
    if ((rc = mrd_agentenv_build(&ec, &env)) < 0) {
        fprintf(stderr, "meridian profile: agent environment: %s\n", strerror(-rc));
        goto setup_failed;
    }
    if (at >= 0 && style != MRD_LAUNCHER_NONE) {
        if ((rc = mrd_agentenv_rewrite(job, njob, at, style, &env, &rewritten)) < 0) {
            fprintf(stderr, "meridian profile: %s\n", strerror(-rc));
            goto setup_failed;
        }
        job = rewritten;
    } else {
        /* srun, torchrun and plain commands: through this process's environment, which
         * srun (--export=ALL, its default) and torchrun pass on to every rank */
        say_env_route(&ls, o.single);
        if ((rc = mrd_agentenv_apply(&env)) < 0) {
            fprintf(stderr, "meridian profile: setenv: %s\n", strerror(-rc));
            goto setup_failed;
        }
    }
    command = join_command(argv + optind, njob);
    fprintf(stderr, "meridian profile: run %s, %s %s, database %s\n", s.run_id,
            s.nshards > 1 ? "aggregators (one per shard)" : "aggregator", s.aggregator, s.db);
    say_tier(&o.tier);
    st = run_job(job, o.job_timeout_s, &s, &exec_err);
    if (exec_err) {
        job_not_started(&o, &s, job[0], exec_err);
        goto done;
    }
    fprintf(stderr, "meridian profile: job finished (%s %d); stopping meridiand%s\n",
            st >= 0 && WIFSIGNALED(st) ? "signal" : "exit status",
            st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st) : exit_code(st), s.nshards > 1 ? "s" : "");
    int failed = stop_daemons(&s, o.stop_timeout_s);
    if (merge_shards(&o, &s, failed) < 0) {
        fprintf(stderr, "meridian profile: %s was not written: no clock fit, no report\n", s.db);
        goto done;
    }
    if (!o.no_finalize)
        finalize_with_timeout(s.db, command, o.finalize_timeout_s);
    settle_db(s.db);
    sqlite3 *db = mrd_cli_open_db(s.db, 1, "meridian profile");
    if (db) {
        if (!o.no_report || o.html || o.json) {
            FILE *text = o.no_report || (o.json && strcmp(o.json, "-") == 0) ? NULL : stdout;
            /* the steps the agents counted for the windows are the report's steps */
            const char *step = getenv("MERIDIAN_STEP_NAME");
            mrd_cli_render(db, text, o.html, o.json, 0, step && *step ? step : NULL,
                           "meridian profile");
        }
        sqlite3_close(db);
    }
    fprintf(stderr, "meridian profile: database %s\n", s.db);
    goto done;
setup_failed:
    st = -1;
    stop_daemons(&s, o.stop_timeout_s);
    if (s.nshards > 1)
        say_kept_shards(&s, "the job did not run; shard databases left");
done:
    cleanup_run(&o, &s);
    free(s.aggregator);
    free(s.sh);
    mrd_agentenv_free(&env);
    mrd_agentenv_free_argv(rewritten);
    free(command);
    return exit_code(st);
}
