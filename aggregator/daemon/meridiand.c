/* meridiand: the meridian aggregator daemon.
 *
 * Where it sits: the central end of the wire. Agents (one per rank) connect, present the
 * run secret, stream batches and probe the clock; meridiand stores everything in one
 * SQLite database (aggregator/store) through one event loop (aggregator/ingest). This file
 * is only the command line, the secret, the signals and the order of start and stop.
 *
 * Workload: one process per run (or shard), up to 512 ranks; two threads (the loop and
 * the store's writer).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "error.h"
#include "frame.h"
#include "ingest.h"
#include "runcfg.h"
#include "steps.h"
#include "store.h"
#include "uplink.h"
#include "winctl.h"

#define DEFAULT_PORT 47500

static struct mrd_ingest *_Atomic g_ingest;
static volatile sig_atomic_t g_signal;
static volatile sig_atomic_t g_reference_lost;

static void usage(FILE *f)
{
    /* the text as it prints: */
    // clang-format off
    fprintf(f,
"Usage: meridiand --db PATH [options]\n"
"\n"
"The meridian aggregator: accepts the agents of one profiled run, checks the run\n"
"secret, answers clock probes and stores every batch in one SQLite database\n"
"(schema: aggregator/SCHEMA.md). A batch is acknowledged only after it is committed.\n"
"\n"
"Required:\n"
"  --db PATH              database file; created if absent. Restarted on an existing\n"
"                         database, meridiand continues its run (same run id and\n"
"                         timebase) and appends to it.\n"
"  the run secret         --secret-file PATH, or the environment variable\n"
"                         MERIDIAN_SECRET. Agents prove they hold it without sending\n"
"                         it (an HMAC over a challenge fresh for each connection,\n"
"                         compared in constant time); it is never logged. meridiand\n"
"                         refuses to start without one.\n"
"\n"
"Options:\n"
"  --listen ADDR:PORT     address to listen on (default 127.0.0.1:%d). A numeric IPv4\n"
"                         or IPv6 address ([::1]:47500); port 0 picks a free port.\n"
"                         Traffic is not encrypted: listen beyond loopback only on a\n"
"                         network you trust.\n"
"  --run-id ID            the run this database holds (printable ASCII, < 128 chars).\n"
"                         A new database takes it (default: a random id); an existing\n"
"                         one must already belong to it. Agents must present it.\n"
"  --secret-file PATH     read the run secret from PATH: the whole file, trailing CR/LF\n"
"                         removed, 1 to %d bytes, no NUL byte (the rule of every\n"
"                         meridian component). Overrides MERIDIAN_SECRET.\n"
"  --max-frame BYTES      largest frame accepted (default %u, minimum %u, maximum\n"
"                         64 MiB).\n"
"  --max-connections N    connections open at once (default 1024: two per rank).\n"
"  --max-unauthenticated N\n"
"                         of those, connections that have not sent a valid Hello yet\n"
"                         (default 128). At the limit the oldest of them is closed\n"
"                         for a new one (after reading whatever it sent): peers\n"
"                         without the secret cannot take the slots of the agents.\n"
"  --max-unauthenticated-per-address N\n"
"                         of those, from one source address (default 64; 16 ranks of\n"
"                         one node open 32). More from that address are refused.\n"
"  --max-connections-per-secret N\n"
"                         authenticated connections at once (they all hold the one run\n"
"                         secret). Default: 2 x the largest world size announced + 8,\n"
"                         so that a holder of the secret cannot lock the ranks out.\n"
"  --queue-mb N           memory for batches received but not yet committed (default\n"
"                         256). When full, meridiand stops reading and TCP pushes back\n"
"                         on the agents.\n"
"  --commit-ms N          commit at most N ms after a transaction's first batch\n"
"                         (default 50); larger means bigger transactions.\n"
"  --hello-timeout-ms N   close a connection that sent no valid Hello within N ms\n"
"                         (default 10000; checked once a second).\n"
"  --sync-full            fsync every commit (survives power loss; slower). Default:\n"
"                         WAL with synchronous=NORMAL, which survives the daemon being\n"
"                         killed at any moment but not a power loss or kernel crash.\n"
"  --shard-id N           shard number stored with a new run (default 0).\n"
"  --clock-reference HOST:PORT\n"
"                         this is a node aggregator of a job over several nodes: before\n"
"                         listening, probe the reference meridiand at HOST:PORT (same\n"
"                         run id and secret; started without this option) like an\n"
"                         agent, and keep probing it: every global time this one stamps\n"
"                         is on the reference's timebase (aggregator/uplink). At stop the\n"
"                         alignment and its error bound are recorded in the database\n"
"                         (aggregator_counters node_clock.<shard>.*; SCHEMA.md \"Node\n"
"                         clocks\"); `meridian-adopt` then readies the shard for\n"
"                         `meridian merge`. Give each node its own --shard-id.\n"
"  --reference-grace-s S  stop (commit, exit 0) when the reference has not answered for\n"
"                         S seconds (default 30): the job's head is gone.\n"
"  --test-realtime-offset-ns N\n"
"                         TESTS ONLY: add N ns (may be negative) to CLOCK_REALTIME where\n"
"                         this meridiand anchors its own timebase, so that aggregators\n"
"                         on one machine get timebases seconds apart (tests/multinode).\n"
"  --test-clock-ppm P     TESTS ONLY, with --clock-reference: this node's own clock runs\n"
"                         P ppm (-1000 < P <= 1000) fast, as another host's would.\n"
"  --port-file PATH       once listening, write the bound port (decimal, newline) to\n"
"                         PATH (written to a temporary file, then renamed).\n"
"  --ready-fd FD          once listening, write the bound port and a newline to file\n"
"                         descriptor FD, then close it.\n"
"  --quiet                log only errors, rejected connections and windows.\n"
"  --verbose              also log every connection, hello and goodbye.\n"
"  --help                 this text.\n"
"  --version              print the version.\n"
"\n"
"Windows: agents of the steady tier attach CUPTI only for windows of steps (NVTX step\n"
"ranges, numbered from 0 on every rank). Besides their own (MERIDIAN_WINDOWS), meridiand\n"
"opens windows on the same steps of every rank: each clock probe reports the rank's\n"
"step counter and recent step time, and each reply carries the windows asked for (at most\n"
"%d), until every rank has begun the second step after its last (or for 10 minutes).\n"
"A window starts at the highest step begun on any rank + a margin: the larger of\n"
"--window-margin and 2 x --probe-interval-ms / the median step time, so that every\n"
"rank gets the request before it reaches that step. The median is over the step times\n"
"the ranks reported (each probe: the longest step since the previous one; the last %d\n"
"per rank). Each window is one log line (id, steps, reason, margin and why).\n"
"The application's cudaProfilerStart/cudaProfilerStop (counted by each agent through\n"
"libmeridian_profapi.so) open windows too (reason profiler_api): the first start any\n"
"rank reports opens one, open-ended (at most 100000 steps, kept past 10 minutes), and\n"
"the next stop ends it at max(its first step, the highest step begun + the margin),\n"
"sent again under its id (a second log line).\n"
"  --control PATH         listen for `meridian window` on the Unix socket PATH (mode\n"
"                         0600; removed on exit; a stale one is replaced). One line\n"
"                         per connection: \"window [LENGTH]\" (default %d steps) is\n"
"                         answered \"ok id=N steps=A-B margin=M ranks=R\" or \"error\n"
"                         REASON\" (e.g. when no rank has reported a step yet).\n"
"  --window-margin N      least margin in steps (default 2).\n"
"  --probe-interval-ms N  the agents' clock probe interval, MERIDIAN_PROBE_INTERVAL_MS\n"
"                         (default 500): meridiand cannot see it, the margin needs it.\n"
"  --trigger-step-factor F\n"
"                         open a window (reason trigger) when a rank reports a step\n"
"                         that took more than F (> 1, e.g. 1.5) x the median step time,\n"
"                         once %d step times are known (default: off).\n"
"  --trigger-skew F       open a window (reason trigger) when a collective's arrival\n"
"                         skew (the latest rank's start minus the earliest's, each\n"
"                         mapped to the global timebase with the rank's best recent\n"
"                         clock sample) exceeds F (> 1, e.g. 4) x the median skew of\n"
"                         the last 128 instances of that function on that\n"
"                         communicator, once 20 are known, and exceeds its own clock\n"
"                         error bound; the log line names the collective, the skew,\n"
"                         the median and the latest rank (default: off). Shares\n"
"                         --trigger-length and the cooldown with the step trigger.\n"
"  --trigger-length N     steps of a trigger window (default 10).\n"
"  --trigger-cooldown-steps C\n"
"                         no trigger window within C steps of the last one (default\n"
"                         200).\n"
"  --window-delay S       S seconds (decimals allowed) after the first step reported,\n"
"                         open one window (reason delay) ...\n"
"  --window-duration S    ... of S seconds (default 1), in steps at the median step\n"
"                         time (at least 1 step).\n"
"\n"
"Output: once ready, one line on standard output: \"meridiand: listening on ADDR:PORT\".\n"
"Logs go to standard error, one line per event, each starting with \"meridiand: \".\n"
"A refused connection (wrong or missing secret, wrong protocol version, wrong run,\n"
"a rank held by another live process, a connection cap, oversized or malformed frame,\n"
"unexpected message, a Batch after the Goodbye, a frame cut by the close) is logged\n"
"with the peer and the reason and closed; other connections are not affected. At most\n"
"10 such lines a second; then one line counts the rest (\"N more refusals suppressed\").\n"
"\n"
"Files: PATH, PATH-wal and PATH-shm while running (SQLite WAL mode; readers may open\n"
"PATH read-only at any time); after a clean stop only PATH remains. The --control\n"
"socket exists while meridiand runs.\n"
"\n"
"Environment: MERIDIAN_SECRET (the run secret, when --secret-file is not given).\n"
"\n"
"Signals: SIGINT or SIGTERM stops accepting, commits everything received, sends the\n"
"last acknowledgements and exits 0.\n"
"\n"
"Exit status: 0 after a clean stop, 1 when it cannot start, 2 on a usage error.\n",
            DEFAULT_PORT, MRD_SECRET_MAX, MRD_FRAME_DEFAULT_MAX, MRD_FRAME_MIN_MAX,
            MRD_WINDOW_REQUESTS_MAX, MRD_WINCTL_HISTORY, MRD_CONTROL_DEFAULT_LENGTH,
            MRD_WINCTL_TRIGGER_MIN);
    // clang-format on
}

static void on_signal(int sig)
{
    g_signal = sig;
    if (g_ingest)
        mrd_ingest_stop(g_ingest);
}

static int parse_u64(const char *s, unsigned long long min, unsigned long long max,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s || s[0] == '-' || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* A decimal number (fractions allowed) in (min, max]. */
static int parse_num(const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v > min) || !(v <= max))
        return -EINVAL;
    *out = v;
    return 0;
}

/* Reads the run secret from path, else MERIDIAN_SECRET, by the rule every component shares
 * (proto/runcfg.h) into buf[MRD_SECRET_MAX + 1]. Returns its length, or -1 (reported). */
static int read_secret(const char *path, char *buf)
{
    const char *env = getenv("MERIDIAN_SECRET");
    if (!path && !env) {
        fprintf(stderr, "meridiand: no run secret: pass --secret-file PATH or set "
                        "MERIDIAN_SECRET\n");
        return -1;
    }
    struct stat st;
    if (path && stat(path, &st) == 0 && (st.st_mode & 0077))
        fprintf(stderr,
                "meridiand: warning: secret file %s is readable by other users (chmod 600 it)\n",
                path);
    const char *why = NULL;
    int n = mrd_secret_read(path, env, buf, &why);
    if (n < 0) {
        if (path)
            fprintf(stderr, "meridiand: cannot use the secret file %s: %s\n", path, why);
        else
            fprintf(stderr, "meridiand: cannot use MERIDIAN_SECRET: %s\n", why);
        return -1;
    }
    return n;
}

static int write_port_file(const char *path, uint16_t port)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* same order as opts[] (the error message indexes it) */
enum {
    OPT_DB = 256,
    OPT_LISTEN,
    OPT_RUN,
    OPT_SECRET,
    OPT_MAXFRAME,
    OPT_MAXCONN,
    OPT_MAXPRE,
    OPT_MAXPRE_ADDR,
    OPT_MAXSECRET,
    OPT_QUEUE,
    OPT_COMMIT,
    OPT_HELLO_TIMEOUT,
    OPT_SYNC,
    OPT_SHARD,
    OPT_CLOCKREF,
    OPT_REFGRACE,
    OPT_TESTRT,
    OPT_TESTPPM,
    OPT_PORTFILE,
    OPT_READYFD,
    OPT_CONTROL,
    OPT_MARGIN,
    OPT_PROBE_INTERVAL,
    OPT_TRIGGER,
    OPT_TRIGGER_SKEW,
    OPT_TRIGGER_LENGTH,
    OPT_TRIGGER_COOLDOWN,
    OPT_DELAY,
    OPT_DURATION,
    OPT_QUIET,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_VERSION
};

static const struct option opts[] = {
    {"db", required_argument, 0, OPT_DB},
    {"listen", required_argument, 0, OPT_LISTEN},
    {"run-id", required_argument, 0, OPT_RUN},
    {"secret-file", required_argument, 0, OPT_SECRET},
    {"max-frame", required_argument, 0, OPT_MAXFRAME},
    {"max-connections", required_argument, 0, OPT_MAXCONN},
    {"max-unauthenticated", required_argument, 0, OPT_MAXPRE},
    {"max-unauthenticated-per-address", required_argument, 0, OPT_MAXPRE_ADDR},
    {"max-connections-per-secret", required_argument, 0, OPT_MAXSECRET},
    {"queue-mb", required_argument, 0, OPT_QUEUE},
    {"commit-ms", required_argument, 0, OPT_COMMIT},
    {"hello-timeout-ms", required_argument, 0, OPT_HELLO_TIMEOUT},
    {"sync-full", no_argument, 0, OPT_SYNC},
    {"shard-id", required_argument, 0, OPT_SHARD},
    {"clock-reference", required_argument, 0, OPT_CLOCKREF},
    {"reference-grace-s", required_argument, 0, OPT_REFGRACE},
    {"test-realtime-offset-ns", required_argument, 0, OPT_TESTRT},
    {"test-clock-ppm", required_argument, 0, OPT_TESTPPM},
    {"port-file", required_argument, 0, OPT_PORTFILE},
    {"ready-fd", required_argument, 0, OPT_READYFD},
    {"control", required_argument, 0, OPT_CONTROL},
    {"window-margin", required_argument, 0, OPT_MARGIN},
    {"probe-interval-ms", required_argument, 0, OPT_PROBE_INTERVAL},
    {"trigger-step-factor", required_argument, 0, OPT_TRIGGER},
    {"trigger-skew", required_argument, 0, OPT_TRIGGER_SKEW},
    {"trigger-length", required_argument, 0, OPT_TRIGGER_LENGTH},
    {"trigger-cooldown-steps", required_argument, 0, OPT_TRIGGER_COOLDOWN},
    {"window-delay", required_argument, 0, OPT_DELAY},
    {"window-duration", required_argument, 0, OPT_DURATION},
    {"quiet", no_argument, 0, OPT_QUIET},
    {"verbose", no_argument, 0, OPT_VERBOSE},
    {"help", no_argument, 0, OPT_HELP},
    {"version", no_argument, 0, OPT_VERSION},
    {0, 0, 0, 0},
};

/* Everything the command line sets. */
struct daemon_opts {
    struct mrd_store_config sc;
    struct mrd_ingest_config ic;
    char host[128];
    uint16_t port;
    const char *secret_file, *port_file;
    int ready_fd, verbose;
    char ref_host[128]; /* --clock-reference; "" = this is a reference or a lone aggregator */
    uint16_t ref_port;
    uint32_t ref_grace_ms;
    double test_ppm; /* --test-clock-ppm */
};

/* An option that sets a uint32_t field from a number in [lo, hi]. */
struct u32_opt {
    int opt;
    unsigned long long lo, hi;
    uint32_t *field;
};

static const struct u32_opt *find_u32_opt(const struct u32_opt *t, size_t n, int opt)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].opt == opt)
            return &t[i];
    return NULL;
}

/* Parses argv into d. Returns 0 to go on, 1 after --help or --version (printed: exit 0),
 * or 2 on a usage error (reported). */
static int parse_args(int argc, char **argv, struct daemon_opts *d)
{
    int opt;
    unsigned long long v;
    double x;
    struct mrd_winctl_config *wc = &d->ic.windows;
    wc->trigger_cooldown = 200;
    snprintf(d->host, sizeof(d->host), "127.0.0.1");
    d->port = DEFAULT_PORT;
    d->ready_fd = -1;
    /* the options that set a uint32_t setting from a number in a range */
    const struct u32_opt u32_opts[] = {
        {OPT_MAXFRAME, MRD_FRAME_MIN_MAX, 64u << 20, &d->ic.max_frame},
        {OPT_MAXCONN, 1, 1u << 20, &d->ic.max_connections},
        {OPT_MAXPRE, 1, 1u << 20, &d->ic.max_prehello},
        {OPT_MAXPRE_ADDR, 1, 1u << 20, &d->ic.max_prehello_per_addr},
        {OPT_MAXSECRET, 1, 1u << 20, &d->ic.max_per_secret},
        {OPT_COMMIT, 1, 60000, &d->sc.commit_ms},
        {OPT_HELLO_TIMEOUT, 1, 3600000, &d->ic.hello_timeout_ms},
        {OPT_SHARD, 0, UINT32_MAX, &d->sc.shard_id},
        {OPT_MARGIN, 1, MRD_WINCTL_MARGIN_MAX, &wc->margin},
        {OPT_PROBE_INTERVAL, 1, 3600000, &wc->probe_interval_ms},
        {OPT_TRIGGER_LENGTH, 1, MRD_WINCTL_LENGTH_MAX, &wc->trigger_length},
    };
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        const struct u32_opt *u = find_u32_opt(u32_opts, sizeof u32_opts / sizeof u32_opts[0], opt);
        if (u) {
            if (parse_u64(optarg, u->lo, u->hi, &v) < 0)
                goto bad_value;
            *u->field = (uint32_t)v;
            continue;
        }
        switch (opt) {
        case OPT_DB:
            d->sc.db_path = optarg;
            break;
        case OPT_LISTEN:
            if (mrd_hostport_split(optarg, d->host, sizeof(d->host), &d->port) < 0)
                goto bad_value;
            break;
        case OPT_RUN:
            d->sc.run_id = optarg;
            break;
        case OPT_SECRET:
            d->secret_file = optarg;
            break;
        case OPT_QUEUE:
            if (parse_u64(optarg, 1, 1u << 20, &v) < 0)
                goto bad_value;
            d->ic.queue_cap = (size_t)v << 20;
            break;
        case OPT_SYNC:
            d->sc.sync_full = 1;
            break;
        case OPT_CLOCKREF:
            if (mrd_hostport_split(optarg, d->ref_host, sizeof(d->ref_host), &d->ref_port) < 0 ||
                !d->ref_port)
                goto bad_value;
            break;
        case OPT_REFGRACE:
            if (parse_u64(optarg, 1, 86400, &v) < 0)
                goto bad_value;
            d->ref_grace_ms = (uint32_t)(v * 1000);
            break;
        case OPT_TESTRT: {
            char *end;
            errno = 0;
            long long t = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || t < -(1LL << 50) || t > (1LL << 50))
                goto bad_value;
            d->sc.test_realtime_offset_ns = t;
            break;
        }
        case OPT_TESTPPM:
            if (parse_num(optarg, -1000.0, 1000.0, &x) < 0)
                goto bad_value;
            d->test_ppm = x;
            break;
        case OPT_PORTFILE:
            d->port_file = optarg;
            break;
        case OPT_READYFD:
            if (parse_u64(optarg, 0, INT_MAX, &v) < 0)
                goto bad_value;
            d->ready_fd = (int)v;
            break;
        case OPT_CONTROL:
            if (!*optarg)
                goto bad_value;
            d->ic.control_path = optarg;
            break;
        case OPT_TRIGGER:
            if (parse_num(optarg, 1.0, 1000.0, &x) < 0)
                goto bad_value;
            wc->trigger_factor = x;
            break;
        case OPT_TRIGGER_SKEW:
            if (parse_num(optarg, 1.0, 1000.0, &x) < 0 || !(x > 1.0))
                goto bad_value;
            d->ic.trigger_skew = x;
            break;
        case OPT_TRIGGER_COOLDOWN:
            if (parse_u64(optarg, 0, MRD_WINDOW_STEP_MAX, &v) < 0)
                goto bad_value;
            wc->trigger_cooldown = v;
            break;
        case OPT_DELAY:
        case OPT_DURATION:
            if (parse_num(optarg, 0.0, 1e7, &x) < 0 || x * 1000 < 1)
                goto bad_value;
            *(opt == OPT_DELAY ? &wc->delay_ms : &wc->duration_ms) = (int64_t)(x * 1000 + 0.5);
            break;
        case OPT_QUIET:
            d->verbose = -1;
            break;
        case OPT_VERBOSE:
            d->verbose = 1;
            break;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return 1;
        case OPT_VERSION:
            printf("meridiand 0.1.0 (protocol %d, schema %d)\n", MRD_PROTOCOL_VERSION,
                   MRD_STORE_SCHEMA_VERSION);
            return 1;
        default:
            fprintf(stderr, "meridiand: see --help\n");
            return 2;
        }
        continue;
    bad_value:
        fprintf(stderr, "meridiand: invalid value '%s' for --%s (see --help)\n", optarg,
                opts[opt - OPT_DB].name);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "meridiand: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (d->test_ppm != 0 && !d->ref_host[0]) {
        fprintf(stderr, "meridiand: --test-clock-ppm needs --clock-reference (see --help)\n");
        return 2;
    }
    if (!d->sc.db_path) {
        fprintf(stderr, "meridiand: --db PATH is required (see --help)\n");
        return 2;
    }
    return 0;
}

/* Once listening: the port file, the ready fd, and the "listening" line. Returns 0, or -1
 * when the port file cannot be written (reported). */
static int announce(const struct daemon_opts *d, struct mrd_store *store, uint16_t bound)
{
    int rc;
    if (d->port_file && (rc = write_port_file(d->port_file, bound)) < 0) {
        fprintf(stderr, "meridiand: cannot write the port file %s: %s\n", d->port_file,
                mrd_strerror(rc));
        return -1;
    }
    if (d->ready_fd >= 0) {
        dprintf(d->ready_fd, "%u\n", bound);
        close(d->ready_fd);
    }
    if (d->verbose >= 0)
        fprintf(stderr, "meridiand: run %s, database %s\n", mrd_store_run_id(store), d->sc.db_path);
    printf(strchr(d->host, ':') ? "meridiand: listening on [%s]:%u\n"
                                : "meridiand: listening on %s:%u\n",
           d->host, bound);
    fflush(stdout);
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGXFSZ, &sa, NULL); /* a file size limit: an error to handle, not a crash */
}

static void on_stop_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The uplink's thread, when the reference stays silent past its grace: stop as on SIGTERM. */
static void on_reference_lost(void *arg)
{
    (void)arg;
    g_reference_lost = 1;
    struct mrd_ingest *g = g_ingest;
    if (g)
        mrd_ingest_stop(g);
}

/* After the store closed: record the alignment the uplink's probes showed (stop_rc: what
 * mrd_uplink_stop returned, before the ingest was freed: its thread may stop the ingest). */
static int finish_uplink(struct mrd_uplink *u, int stop_rc, const struct mrd_uplink_result *rp,
                         const char *db_path, int verbose)
{
    struct mrd_uplink_result r = *rp;
    int rc = stop_rc;
    if (rc == 0)
        rc = mrd_uplink_record(u, &r, db_path);
    if (rc < 0) {
        fprintf(stderr, "meridiand: the clock alignment was not recorded: %s\n", mrd_strerror(rc));
        return rc;
    }
    if (!r.aligned)
        fprintf(stderr, "meridiand: uplink: too few probes answered to bound the alignment: "
                        "recorded as not aligned\n");
    else if (verbose >= 0)
        fprintf(stderr,
                "meridiand: uplink: %llu probes; within %.3f us of the reference's timebase "
                "(fitted residual %.3f us + fit bound %.3f us; fastest round trip %.1f us)\n",
                (unsigned long long)r.probes, (double)r.bound_ns / 1e3, (double)r.residual_ns / 1e3,
                (double)r.fit_bound_ns / 1e3, (double)r.rtt_min_ns / 1e3);
    return 0;
}

static void print_stats(struct mrd_store *store)
{
    struct mrd_store_stats st;
    mrd_store_get_stats(store, &st);
    fprintf(stderr,
            "meridiand: stopped: %llu batches stored (%llu rows), %llu duplicates dropped, "
            "%llu transactions (%llu failed); writer idle %.2f s, in COMMIT %.2f s\n",
            (unsigned long long)st.batches, (unsigned long long)st.rows,
            (unsigned long long)st.duplicates, (unsigned long long)st.transactions,
            (unsigned long long)st.failed_transactions, (double)st.idle_ns / 1e9,
            (double)st.commit_ns / 1e9);
}

int main(int argc, char **argv)
{
    static struct daemon_opts d;
    int rc = parse_args(argc, argv, &d);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    static char secret[MRD_SECRET_MAX + 1];
    int slen = read_secret(d.secret_file, secret);
    if (slen < 0)
        return 1;
    raise_fd_limit();
    install_signals();

    mrd_store_process_init();
    d.sc.verbose = d.verbose;
    struct mrd_store *store = NULL;
    struct mrd_ingest *ingest = NULL;
    struct mrd_uplink *uplink = NULL;
    if (d.ref_host[0]) {
        struct mrd_uplink_config uc = {.host = d.ref_host,
                                       .port = d.ref_port,
                                       .run_id = d.sc.run_id,
                                       .secret = (const uint8_t *)secret,
                                       .secret_len = (size_t)slen,
                                       .shard_id = d.sc.shard_id,
                                       .grace_ms = d.ref_grace_ms,
                                       .test_realtime_offset_ns = d.sc.test_realtime_offset_ns,
                                       .test_clock_ppm = d.test_ppm,
                                       .on_lost = on_reference_lost,
                                       .verbose = d.verbose};
        if (!d.sc.run_id) {
            fprintf(stderr, "meridiand: --clock-reference needs --run-id (the reference's run)\n");
            goto fail;
        }
        if ((rc = mrd_uplink_start(&uc, &uplink)) < 0) {
            fprintf(stderr, "meridiand: cannot align to the clock reference %s:%u: %s\n",
                    d.ref_host, d.ref_port, mrd_strerror(rc));
            goto fail;
        }
        d.sc.global_now = mrd_uplink_now;
        d.sc.global_now_arg = uplink;
    }
    rc = mrd_store_open(&d.sc, &store);
    if (rc < 0) {
        if (rc != -MRD_ERR_CONFIG && rc != -MRD_ERR_SQLITE) /* those were logged with details */
            fprintf(stderr, "meridiand: cannot open the database %s: %s\n", d.sc.db_path,
                    mrd_strerror(rc));
        goto fail;
    }
    d.ic.host = d.host;
    d.ic.port = d.port;
    d.ic.secret = (const uint8_t *)secret;
    d.ic.secret_len = (size_t)slen;
    d.ic.verbose = d.verbose;
    rc = mrd_ingest_new(&d.ic, store, &ingest);
    explicit_bzero(secret, sizeof(secret)); /* the ingest holds its own copy */
    if (rc < 0)
        goto fail;
    g_ingest = ingest;
    on_stop_signals();
    if (announce(&d, store, mrd_ingest_port(ingest)) < 0)
        goto fail;

    rc = mrd_ingest_run(ingest);
    struct mrd_uplink_result ur;
    int urc = uplink ? mrd_uplink_stop(uplink, &ur) : 0;
    if (g_reference_lost)
        fprintf(stderr,
                "meridiand: stopped: the clock reference %s:%u is gone (the job's "
                "head stopped or failed); everything received is committed\n",
                d.ref_host, d.ref_port);
    if (g_signal && d.verbose >= 0)
        fprintf(stderr, "meridiand: stopping on %s: everything received is committed\n",
                g_signal == SIGINT ? "SIGINT" : "SIGTERM");
    g_ingest = NULL;
    mrd_ingest_free(ingest);
    if (d.verbose >= 0)
        print_stats(store); /* final: the writer committed everything before the loop ended */
    mrd_store_close(store);
    if (uplink && finish_uplink(uplink, urc, &ur, d.sc.db_path, d.verbose) < 0)
        rc = -1;
    mrd_uplink_free(uplink);
    return rc < 0 ? 1 : 0;
fail:
    g_ingest = NULL;
    mrd_ingest_free(ingest);
    mrd_store_close(store);
    mrd_uplink_free(uplink); /* nothing stored on its timebase is kept without a record */
    return 1;
}
