/* meridiand: the meridian aggregator daemon.
 *
 * Where it sits: the central end of the wire. Agents (one per rank) connect, present the
 * run secret, stream batches and probe the clock; meridiand stores everything in one
 * SQLite database (aggregator/store) through one event loop (aggregator/ingest). This file
 * is only the command line, the secret, the signals and the order of start and stop. The
 * options are one table (parse_args) for the parser every meridian command shares
 * (proto/opts.h); --help's text is usage() below.
 *
 * Workload: one process per run (or shard), up to 512 ranks; two threads (the loop and
 * the store's writer).
 */
#include <errno.h>
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
#include "opts.h"
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

/* An address and port given as ADDR:PORT. */
struct endpoint {
    char host[128];
    uint16_t port;
};

/* Everything the command line sets. */
struct daemon_opts {
    struct mrd_store_config sc;
    struct mrd_ingest_config ic;
    struct endpoint listen;
    const char *secret_file, *port_file;
    int ready_fd, verbose;
    uint32_t queue_mb;         /* --queue-mb; 0: the ingest's default */
    struct endpoint reference; /* --clock-reference; host "": a reference or a lone aggregator */
    uint32_t ref_grace_s;
    double test_ppm; /* --test-clock-ppm */
};

/* The one message of every value an option refuses. Returns -EINVAL. */
static int refuse(const struct mrd_opt *opt, const char *arg, const char *who)
{
    fprintf(stderr, "%s: invalid value '%s' for --%s (see --help)\n", who, arg, opt->name);
    return -EINVAL;
}

/* The types apply_whole stores, named by an entry's .value. */
enum whole_type { WHOLE_U32, WHOLE_U64, WHOLE_INT };

/* A whole number in [min, max], stored into dest as its type (value) says. */
static int apply_whole(const struct mrd_opt *opt, const char *arg, const char *who)
{
    unsigned long long v;
    if (parse_u64(arg, (unsigned long long)opt->min, (unsigned long long)opt->max, &v) < 0)
        return refuse(opt, arg, who);
    if (opt->value == WHOLE_U32)
        *(uint32_t *)opt->dest = (uint32_t)v;
    else if (opt->value == WHOLE_U64)
        *(uint64_t *)opt->dest = v;
    else
        *(int *)opt->dest = (int)v;
    return 0;
}

/* *(int64_t *)dest = a signed whole number in [min, max]. */
static int apply_signed(const struct mrd_opt *opt, const char *arg, const char *who)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || *end || end == arg || v < opt->min || v > opt->max)
        return refuse(opt, arg, who);
    *(int64_t *)opt->dest = v;
    return 0;
}

/* *(double *)dest = a decimal number in (min, max]. */
static int apply_decimal(const struct mrd_opt *opt, const char *arg, const char *who)
{
    if (parse_num(arg, (double)opt->min, (double)opt->max, (double *)opt->dest) < 0)
        return refuse(opt, arg, who);
    return 0;
}

/* *(int64_t *)dest = seconds (decimals allowed, MRD_WINDOW_SECONDS_MIN to _MAX) in whole
 * ms. */
static int apply_seconds_as_ms(const struct mrd_opt *opt, const char *arg, const char *who)
{
    double x;
    if (parse_num(arg, 0.0, MRD_WINDOW_SECONDS_MAX, &x) < 0 || x < MRD_WINDOW_SECONDS_MIN)
        return refuse(opt, arg, who);
    *(int64_t *)opt->dest = (int64_t)(x * 1000 + 0.5);
    return 0;
}

/* *(struct endpoint *)dest = ADDR:PORT, the port at least min. */
static int apply_endpoint(const struct mrd_opt *opt, const char *arg, const char *who)
{
    struct endpoint *e = opt->dest;
    if (mrd_hostport_split(arg, e->host, sizeof(e->host), &e->port) < 0 || e->port < opt->min)
        return refuse(opt, arg, who);
    return 0;
}

/* *(const char **)dest = a path, not empty. */
static int apply_path(const struct mrd_opt *opt, const char *arg, const char *who)
{
    if (!*arg)
        return refuse(opt, arg, who);
    return mrd_opt_text(opt, arg, who);
}

static int apply_version(const struct mrd_opt *opt, const char *arg, const char *who)
{
    (void)opt;
    (void)arg;
    (void)who;
    printf("meridiand 0.1.0 (protocol %d, schema %d)\n", MRD_PROTOCOL_VERSION,
           MRD_STORE_SCHEMA_VERSION);
    return MRD_OPT_DONE;
}

/* Typed destinations, so that each entry's dest has the type its apply writes. */
static inline void *u32_dest(uint32_t *dest)
{
    return dest;
}
static inline void *u64_dest(uint64_t *dest)
{
    return dest;
}
static inline void *i64_dest(int64_t *dest)
{
    return dest;
}
static inline void *double_dest(double *dest)
{
    return dest;
}
static inline void *endpoint_dest(struct endpoint *dest)
{
    return dest;
}

/* Table entries: a whole number stored as type, a uint32_t, a decimal, an ADDR:PORT. */
#define WHOLE(opt_name, any_dest, type, lo, hi)                                                    \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = apply_whole, .dest = (any_dest),    \
        .value = (type), .min = (lo), .max = (hi)                                                  \
    }
#define U32(opt_name, to, lo, hi) WHOLE(opt_name, u32_dest(to), WHOLE_U32, lo, hi)
#define DECIMAL(opt_name, to, lo, hi)                                                              \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = apply_decimal,                      \
        .dest = double_dest(to), .min = (lo), .max = (hi)                                          \
    }
#define ENDPOINT(opt_name, to, least_port)                                                         \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = apply_endpoint,                     \
        .dest = endpoint_dest(to), .min = (least_port)                                             \
    }

/* Parses argv into d. Returns 0 to go on, 1 after --help or --version (printed: exit 0),
 * or 2 on a usage error (reported). */
static int parse_args(int argc, char **argv, struct daemon_opts *d)
{
    struct mrd_winctl_config *wc = &d->ic.windows;
    wc->trigger_cooldown = 200;
    snprintf(d->listen.host, sizeof(d->listen.host), "127.0.0.1");
    d->listen.port = DEFAULT_PORT;
    d->ready_fd = -1;
    /* in the order of --help */
    const struct mrd_opt opts[] = {
        MRD_OPT_TEXT("db", &d->sc.db_path),
        ENDPOINT("listen", &d->listen, 0),
        MRD_OPT_TEXT("run-id", &d->sc.run_id),
        MRD_OPT_TEXT("secret-file", &d->secret_file),
        U32("max-frame", &d->ic.max_frame, MRD_FRAME_MIN_MAX, 64u << 20),
        U32("max-connections", &d->ic.max_connections, 1, 1u << 20),
        U32("max-unauthenticated", &d->ic.max_prehello, 1, 1u << 20),
        U32("max-unauthenticated-per-address", &d->ic.max_prehello_per_addr, 1, 1u << 20),
        U32("max-connections-per-secret", &d->ic.max_per_secret, 1, 1u << 20),
        U32("queue-mb", &d->queue_mb, 1, 1u << 20),
        U32("commit-ms", &d->sc.commit_ms, 1, 60000),
        U32("hello-timeout-ms", &d->ic.hello_timeout_ms, 1, 3600000),
        MRD_OPT_SET("sync-full", &d->sc.sync_full, 1),
        U32("shard-id", &d->sc.shard_id, 0, UINT32_MAX),
        ENDPOINT("clock-reference", &d->reference, 1),
        U32("reference-grace-s", &d->ref_grace_s, 1, 86400),
        {.name = "test-realtime-offset-ns",
         .arg = required_argument,
         .apply = apply_signed,
         .dest = i64_dest(&d->sc.test_realtime_offset_ns),
         .min = -(1LL << 50),
         .max = 1LL << 50},
        DECIMAL("test-clock-ppm", &d->test_ppm, -1000, 1000),
        MRD_OPT_TEXT("port-file", &d->port_file),
        WHOLE("ready-fd", mrd_opt_int_dest(&d->ready_fd), WHOLE_INT, 0, INT_MAX),
        MRD_OPT_WITH("control", apply_path, mrd_opt_text_dest(&d->ic.control_path)),
        U32("window-margin", &wc->margin, 1, MRD_WINCTL_MARGIN_MAX),
        U32("probe-interval-ms", &wc->probe_interval_ms, 1, 3600000),
        DECIMAL("trigger-step-factor", &wc->trigger_factor, 1, MRD_TRIGGER_FACTOR_MAX),
        DECIMAL("trigger-skew", &d->ic.trigger_skew, 1, MRD_TRIGGER_FACTOR_MAX),
        U32("trigger-length", &wc->trigger_length, 1, MRD_WINCTL_LENGTH_MAX),
        WHOLE("trigger-cooldown-steps", u64_dest(&wc->trigger_cooldown), WHOLE_U64, 0,
              MRD_WINDOW_STEP_MAX),
        MRD_OPT_WITH("window-delay", apply_seconds_as_ms, i64_dest(&wc->delay_ms)),
        MRD_OPT_WITH("window-duration", apply_seconds_as_ms, i64_dest(&wc->duration_ms)),
        MRD_OPT_SET("quiet", &d->verbose, -1),
        MRD_OPT_SET("verbose", &d->verbose, 1),
        {.name = "version", .arg = no_argument, .apply = apply_version},
    };
    int first = mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), MRD_OPTS_HINT_ON_ERROR,
                               "meridiand", usage);
    if (first < 0)
        return 2;
    if (first == 0)
        return 1;
    if (first < argc) {
        fprintf(stderr, "meridiand: unexpected argument '%s' (see --help)\n", argv[first]);
        return 2;
    }
    if (d->test_ppm != 0 && !d->reference.host[0]) {
        fprintf(stderr, "meridiand: --test-clock-ppm needs --clock-reference (see --help)\n");
        return 2;
    }
    if (!d->sc.db_path) {
        fprintf(stderr, "meridiand: --db PATH is required (see --help)\n");
        return 2;
    }
    if (d->queue_mb)
        d->ic.queue_cap = (size_t)d->queue_mb << 20;
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
    printf(strchr(d->listen.host, ':') ? "meridiand: listening on [%s]:%u\n"
                                       : "meridiand: listening on %s:%u\n",
           d->listen.host, bound);
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
    if (d.reference.host[0]) {
        struct mrd_uplink_config uc = {.host = d.reference.host,
                                       .port = d.reference.port,
                                       .run_id = d.sc.run_id,
                                       .secret = (const uint8_t *)secret,
                                       .secret_len = (size_t)slen,
                                       .shard_id = d.sc.shard_id,
                                       .grace_ms = d.ref_grace_s * 1000,
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
                    d.reference.host, d.reference.port, mrd_strerror(rc));
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
    d.ic.host = d.listen.host;
    d.ic.port = d.listen.port;
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
                d.reference.host, d.reference.port);
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
