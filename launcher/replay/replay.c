/* `meridian replay`: options, one process per simulated rank, the report (see replay.h).
 *
 * The parent parses options, forks one child per rank (or per capture copy), and collects
 * each child's one-line result through a pipe (lines are shorter than PIPE_BUF, so writes
 * from many children never interleave). It writes the lines to --report and prints one
 * summary line: the end-to-end event rate and wire bytes per event over all ranks.
 * Exit status: 0 all ranks acknowledged, 1 some rank failed, 2 usage.
 */
#include "replay.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "filter.h"
#include "frame.h"
#include "fromenv.h"
#include "gen.h"
#include "opts.h"
#include "rank.h"
#include "runcfg.h"

#define MAX_PROCS 4096
#define LINE_MAX_ 1024 /* one report line; < PIPE_BUF */

static const char usage[] =
    "usage: meridian replay --aggregator HOST:PORT --run-id ID [options] [CAPTURE.mrdcap...]\n"
    "       meridian replay --from-env CAPTURE_PATTERN [options]    (one rank of a job)\n"
    "\n"
    "Load generator speaking meridian's real protocol: simulated ranks (one process each)\n"
    "send batches to meridiand with at-least-once delivery and report, per rank, the events\n"
    "sent and a checksum computed by the sender (compare with the database using\n"
    "mrd-verify). Without CAPTURE files the events are synthetic; with them, each capture\n"
    "(frames as an agent sent them) is decoded and re-sent with run id and rank rewritten.\n"
    "\n"
    "connection:\n"
    "  --aggregator HOST:PORT  meridiand's address (required); a sharded run's list\n"
    "                          HOST:PORT,HOST:PORT,...: rank R sends to entry R % N\n"
    "  --run-id ID             run id the aggregator expects (required)\n"
    "  --secret-file FILE      the run secret (whole file, trailing CR/LF removed, 1-255 bytes);\n"
    "                          default: the MERIDIAN_SECRET environment variable\n"
    "  --window N              unacknowledged batches in flight per rank (default 16)\n"
    "  --retry-ms MS           give up after MS without a successful reconnect (default 60000)\n"
    "  --max-frame BYTES       frame limit (default 4194304); the aggregator's applies when it\n"
    "                          announces a smaller one: a capture batch that it would refuse\n"
    "                          is re-split into smaller batches (new seqs), each event sent once\n"
    "synthetic load:\n"
    "  --ranks N               simulated ranks, one process each (default 1)\n"
    "  --rank-base R           first rank number (default 0)\n"
    "  --world-size W          world size announced (default rank-base + ranks)\n"
    "  --rate EV_PER_S         events/s per rank; 0 = as fast as acks allow (default 0)\n"
    "  --burst-rate EV_PER_S   rate during bursts (default: no bursts)\n"
    "  --burst-ms MS           burst length (default 100)\n"
    "  --burst-period-ms MS    one burst every MS (default 1000)\n"
    "  --seconds S             stop generating after S seconds\n"
    "  --events N              stop after N events per rank (default 100000 when neither\n"
    "                          --seconds nor --events is given)\n"
    "  --batch-events N        events per batch (default 4096)\n"
    "  --flush-ms MS           send a partial batch once its first event is MS old (default 50)\n"
    "  --mix training|kernels  event mix (default training: every kind; kernels: kernels only)\n"
    "  --seed N                seed of the synthetic stream (default 1)\n"
    "  --compress LEVEL        zstd level of batch frames, 0 = off (default 1)\n"
    "captures:\n"
    "  --rank-offset K         add K to each capture's rank\n"
    "  --copies C              play each capture C times as ranks r + K + c * world (default 1)\n"
    "  --kinds LIST            re-send only these kinds (kernel,memcpy,memset,sync,api,graph,\n"
    "                          extcorr,nvtx,nccl_op,nccl_channel,mpi,clock,gpu_clock) and the\n"
    "                          strings they use, e.g. the wire cost of kernels: --kinds kernel\n"
    "one rank of a launched job:\n"
    "  --from-env PATTERN      this process is one rank of an mpirun/srun job, e.g. under\n"
    "                            meridian profile -- mpirun -np 2 meridian replay \\\n"
    "                                --from-env tests/data/ref-rank%r.mrdcap\n"
    "                          it replays the one capture PATTERN names with %r replaced by its\n"
    "                          rank (%% = %) as that rank. RANK, LOCAL_RANK and WORLD_SIZE\n"
    "                          decide when all three are set (torchrun's workers); else the\n"
    "                          first set of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,\n"
    "                          SLURM_PROCID, RANK (local rank and world size likewise from the\n"
    "                          agent's lists, else the capture's); the aggregator, run id and\n"
    "                          secret from the agent's variables, which meridian profile sets:\n"
    "                          MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET or\n"
    "                          MERIDIAN_SECRET_FILE (agent/ENVIRONMENT.md). --aggregator,\n"
    "                          --run-id, --secret-file, --rank-base (the rank) and --world-size\n"
    "                          override them. Prints one line: the rank and what was replayed.\n"
    "output:\n"
    "  --report FILE           per-rank result lines (key=value) ('-' = stdout)\n"
    "  --record FILE           also write what is sent as a .mrdcap (one rank only)\n"
    "  --dump FILE             write the canonical text of every event sent (one rank only;\n"
    "                          compare with mrd-verify --dump)\n"
    "  --resend-acked N        test hook: after all is acknowledged, reconnect and resend the\n"
    "                          first N batches; each must be acknowledged as a duplicate\n"
    "  --quiet                 log only failures\n"
    "  --help                  this text\n"
    "\n"
    "Exit status: 0 when every rank had every batch acknowledged, 1 otherwise, 2 usage.\n";

struct options {
    struct mrd_rank_opts r;
    uint32_t ranks, rank_base;
    char host[256], port[32];
    char secret[MRD_SECRET_MAX + 1];
    const char *report;
    char **captures;
    int ncaptures;
    const char *from_env;  /* --from-env PATTERN, or NULL */
    struct mrd_fromenv fe; /* what --from-env found */
    char *fe_captures[1];  /* captures = this: fe.capture */
};

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v > max || s[0] == '-')
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0)
        return -EINVAL;
    *out = v;
    return 0;
}

/* --from-env: the rank, the capture and (unless given as options) the connection from the
 * environment; each missing piece gets its own message. */
static int from_env(struct options *o, int rank_base_set, int64_t world, const char **agg,
                    const char **secret_file)
{
    struct mrd_rank_opts *r = &o->r;
    struct mrd_fromenv *fe = &o->fe;
    char why[512];
    if (mrd_fromenv_read(o->from_env, rank_base_set ? (int64_t)o->rank_base : -1, fe, why,
                         sizeof why) < 0) {
        fprintf(stderr, "meridian replay: --from-env: %s\n", why);
        return -EINVAL;
    }
    if (world >= 0)
        fe->world_size = (uint32_t)world;
    if (fe->world_size != MRD_FROMENV_UNSET && fe->rank >= fe->world_size) {
        fprintf(stderr,
                "meridian replay: --from-env: rank %u (%s) is not below the world "
                "size %u\n",
                fe->rank, fe->rank_var, fe->world_size);
        return -EINVAL;
    }
    static const char hint[] = "meridian profile sets it for every rank of the job";
    if (!*agg && !(*agg = fe->aggregator)) {
        fprintf(stderr,
                "meridian replay: --from-env: rank %u: MERIDIAN_AGGREGATOR is not set "
                "(%s; or give --aggregator HOST:PORT)\n",
                fe->rank, hint);
        return -EINVAL;
    }
    if (!r->conn.run_id && !(r->conn.run_id = fe->run_id)) {
        fprintf(stderr,
                "meridian replay: --from-env: rank %u: MERIDIAN_RUN_ID is not set "
                "(%s; or give --run-id ID)\n",
                fe->rank, hint);
        return -EINVAL;
    }
    /* the agent's order: MERIDIAN_SECRET wins over MERIDIAN_SECRET_FILE */
    if (!*secret_file && !fe->secret && !(*secret_file = fe->secret_file)) {
        fprintf(stderr,
                "meridian replay: --from-env: rank %u: neither MERIDIAN_SECRET nor "
                "MERIDIAN_SECRET_FILE is set (%s; or give --secret-file FILE)\n",
                fe->rank, hint);
        return -EINVAL;
    }
    if (access(fe->capture, R_OK) != 0) {
        int err = errno;
        fprintf(stderr, "meridian replay: --from-env: rank %u: capture %s (from '%s'): %s\n",
                fe->rank, fe->capture, o->from_env, mrd_strerror(-err));
        return -err;
    }
    o->fe_captures[0] = fe->capture;
    o->captures = o->fe_captures;
    o->ncaptures = 1;
    r->as_rank = 1;
    r->rank = fe->rank;
    r->local_rank = fe->local_rank; /* UNSET = UINT32_MAX = the capture's */
    return 0;
}

/* The numeric options: a whole number into a uint32_t in [opt->min, opt->max] or into a
 * uint64_t, or a real number >= 0 into a double. Each refusal says "bad value for --NAME". */
static int bad_value(const struct mrd_opt *opt, const char *who)
{
    fprintf(stderr, "%s: bad value for --%s\n", who, opt->name);
    return -EINVAL;
}

static int apply_u64(const struct mrd_opt *opt, const char *arg, const char *who)
{
    uint64_t v;
    if (parse_u64(arg, UINT64_MAX, &v) < 0)
        return bad_value(opt, who);
    *(uint64_t *)opt->dest = v;
    return 0;
}

static int apply_u32(const struct mrd_opt *opt, const char *arg, const char *who)
{
    uint64_t v;
    if (parse_u64(arg, (uint64_t)opt->max, &v) < 0 || v < (uint64_t)opt->min)
        return bad_value(opt, who);
    *(uint32_t *)opt->dest = (uint32_t)v;
    return 0;
}

static int apply_double(const struct mrd_opt *opt, const char *arg, const char *who)
{
    return parse_double(arg, opt->dest) < 0 ? bad_value(opt, who) : 0;
}

static int apply_mix(const struct mrd_opt *opt, const char *arg, const char *who)
{
    if (strcmp(arg, "training") == 0)
        *(int *)opt->dest = MRD_GEN_MIX_TRAINING;
    else if (strcmp(arg, "kernels") == 0)
        *(int *)opt->dest = MRD_GEN_MIX_KERNELS;
    else
        return bad_value(opt, who);
    return 0;
}

static int apply_kinds(const struct mrd_opt *opt, const char *arg, const char *who)
{
    return mrd_filter_parse(arg, opt->dest) < 0 ? bad_value(opt, who) : 0;
}

static void print_usage(FILE *f)
{
    fputs(usage, f);
}

/* What the options say beyond struct options, until parse_options resolves it. */
struct cli_state {
    const char *agg, *secret_file;
    uint32_t world, compress;
    int rank_base_set, world_set, ranks_set, offset_set;
};

static void set_defaults(struct options *o, struct cli_state *cs)
{
    struct mrd_rank_opts *r = &o->r;
    r->conn.window = 16;
    r->conn.retry_ms = 60000;
    r->conn.max_frame = MRD_FRAME_DEFAULT_MAX;
    r->burst_ms = 100;
    r->burst_period_ms = 1000;
    r->batch_events = 4096;
    r->flush_ms = 50;
    r->seed = 1;
    r->copies = 1;
    o->ranks = 1;
    cs->compress = 1;
}

/* Reads the options into o and cs. Returns the index of the first CAPTURE argument, 0
 * after --help, or -EINVAL (reported). */
static int read_options(int argc, char **argv, struct options *o, struct cli_state *cs)
{
    struct mrd_rank_opts *r = &o->r;
#define U32(opt_name, u32_dest, lo, hi, seen)                                                      \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = apply_u32, .dest = (u32_dest),      \
        .min = (lo), .max = (hi), .given = (seen)                                                  \
    }
#define U64(opt_name, u64_dest)                                                                    \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = apply_u64, .dest = (u64_dest)       \
    }
    const struct mrd_opt opts[] = {
        MRD_OPT_TEXT("aggregator", &cs->agg),
        MRD_OPT_TEXT("run-id", &r->conn.run_id),
        MRD_OPT_TEXT("secret-file", &cs->secret_file),
        U32("window", &r->conn.window, 1, 65536, NULL),
        U32("retry-ms", &r->conn.retry_ms, 0, UINT32_MAX, NULL),
        U32("max-frame", &r->conn.max_frame, MRD_FRAME_MIN_MAX, UINT32_MAX, NULL),
        U32("ranks", &o->ranks, 1, MAX_PROCS, &cs->ranks_set),
        U32("rank-base", &o->rank_base, 0, UINT32_MAX, &cs->rank_base_set),
        U32("world-size", &cs->world, 0, UINT32_MAX, &cs->world_set),
        MRD_OPT_WITH("rate", apply_double, &r->rate),
        MRD_OPT_WITH("burst-rate", apply_double, &r->burst_rate),
        U32("burst-ms", &r->burst_ms, 0, UINT32_MAX, NULL),
        U32("burst-period-ms", &r->burst_period_ms, 0, UINT32_MAX, NULL),
        MRD_OPT_WITH("seconds", apply_double, &r->seconds),
        U64("events", &r->events),
        U32("batch-events", &r->batch_events, 1, 1000000, NULL),
        U32("flush-ms", &r->flush_ms, 0, UINT32_MAX, NULL),
        MRD_OPT_WITH("mix", apply_mix, &r->mix),
        U64("seed", &r->seed),
        U32("compress", &cs->compress, 0, 19, NULL),
        U32("rank-offset", &r->rank_offset, 0, UINT32_MAX, &cs->offset_set),
        U32("copies", &r->copies, 1, UINT32_MAX, NULL),
        MRD_OPT_WITH("kinds", apply_kinds, &r->kinds),
        MRD_OPT_TEXT("report", &o->report),
        MRD_OPT_TEXT("record", &r->record_path),
        U32("resend-acked", &r->resend_acked, 0, 1024, NULL),
        MRD_OPT_TEXT("dump", &r->dump_path),
        MRD_OPT_SET("quiet", &r->conn.quiet, 1),
        MRD_OPT_TEXT("from-env", &o->from_env)};
#undef U32
#undef U64
#undef WITH
    return mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, "meridian replay", print_usage);
}

/* The aggregator's address, the run id and the secret (by the rule of proto/runcfg.h),
 * each missing or invalid one with its own message. Returns 0 or a negative code. */
static int resolve_connection(struct options *o, const struct cli_state *cs)
{
    struct mrd_rank_opts *r = &o->r;
    uint16_t port = 0;
    char one[300];
    const char *agg = cs->agg;
    if (agg && strchr(agg, ',')) { /* one meridiand per shard: rank R sends to entry R % N */
        int one_rank = o->from_env || (!o->ncaptures && o->ranks == 1);
        uint32_t rank = o->from_env ? r->rank : o->rank_base;
        if (!one_rank) {
            fprintf(stderr, "meridian replay: a list of aggregators (sharded run) needs one "
                            "rank per process (--from-env, or --ranks 1)\n");
            return -EINVAL;
        }
        uint32_t n;
        struct mrd_aggregator_error e;
        if (mrd_aggregator_pick(agg, rank, one, sizeof one, &r->shard_id, &n, &e) < 0) {
            fprintf(stderr,
                    "meridian replay: aggregator list entry %u (%.*s) %s (HOST:PORT,... with "
                    "at most %u entries)\n",
                    e.entry, (int)(e.len < 64 ? e.len : 64), e.text,
                    e.fault == MRD_AGG_EMPTY      ? "is empty"
                    : e.fault == MRD_AGG_TOO_MANY ? "is one too many"
                                                  : "is not HOST:PORT",
                    MRD_AGGREGATORS_MAX);
            return -EINVAL;
        }
        agg = one;
    }
    if (!agg || mrd_hostport_split(agg, o->host, sizeof o->host, &port) < 0 || port == 0) {
        fprintf(stderr, "meridian replay: --aggregator HOST:PORT is required (HOST:PORT or "
                        "[IPv6]:PORT, port 1-65535)\n");
        return -EINVAL;
    }
    snprintf(o->port, sizeof o->port, "%u", port);
    if (!r->conn.run_id || !*r->conn.run_id) {
        fprintf(stderr, "meridian replay: --run-id is required\n");
        return -EINVAL;
    }
    if (!cs->secret_file && !getenv("MERIDIAN_SECRET")) {
        fprintf(stderr, "meridian replay: no secret: --secret-file or MERIDIAN_SECRET\n");
        return -EINVAL;
    }
    const char *why = NULL;
    int slen = mrd_secret_read(cs->secret_file, getenv("MERIDIAN_SECRET"), o->secret, &why);
    if (slen < 0) {
        if (cs->secret_file)
            fprintf(stderr, "meridian replay: cannot use the secret file %s: %s\n", cs->secret_file,
                    why);
        else
            fprintf(stderr, "meridian replay: cannot use MERIDIAN_SECRET: %s\n", why);
        return slen;
    }
    r->conn.secret_len = (size_t)slen;
    r->conn.secret = (const uint8_t *)o->secret;
    r->conn.host = o->host;
    r->conn.port = o->port;
    return 0;
}

/* The world size and the process count, and the options that need a given shape. Returns
 * 0 or -EINVAL (reported). */
static int check_shape(struct options *o, const struct cli_state *cs)
{
    struct mrd_rank_opts *r = &o->r;
    if (!r->events && r->seconds <= 0)
        r->events = 100000;
    r->world_size = cs->world ? cs->world : o->rank_base + o->ranks;
    if (o->from_env) /* 0 = the capture's */
        r->world_size = o->fe.world_size == MRD_FROMENV_UNSET ? 0 : o->fe.world_size;
    if (!o->ncaptures && (uint64_t)o->rank_base + o->ranks > r->world_size) {
        fprintf(stderr, "meridian replay: ranks %u..%u do not fit --world-size %u\n", o->rank_base,
                o->rank_base + o->ranks - 1, r->world_size);
        return -EINVAL;
    }
    if (o->ncaptures && (uint64_t)o->ncaptures * r->copies > MAX_PROCS) {
        fprintf(stderr, "meridian replay: more than %d processes\n", MAX_PROCS);
        return -EINVAL;
    }
    if (r->kinds && !o->ncaptures) {
        fprintf(stderr, "meridian replay: --kinds applies to captures only\n");
        return -EINVAL;
    }
    uint64_t nprocs = o->ncaptures ? (uint64_t)o->ncaptures * r->copies : o->ranks;
    if ((r->record_path || r->dump_path) && nprocs != 1) {
        fprintf(stderr, "meridian replay: --record and --dump need exactly one rank\n");
        return -EINVAL;
    }
    return 0;
}

/* Parses argv into o. Returns 0, 1 after --help, or a negative code (reported). */
static int parse_options(int argc, char **argv, struct options *o)
{
    struct cli_state cs = {0};
    int first, rc;
    set_defaults(o, &cs);
    first = read_options(argc, argv, o, &cs);
    if (first <= 0)
        return first == 0 ? 1 : first;
    o->r.compress = (int)cs.compress;
    o->captures = argv + first;
    o->ncaptures = argc - first;
    if (o->from_env) {
        if (o->ncaptures || cs.ranks_set || cs.offset_set || o->r.copies != 1) {
            fprintf(stderr, "meridian replay: --from-env plays the one capture its pattern "
                            "names, as this process's rank: no CAPTURE files, --ranks, "
                            "--rank-offset or --copies with it\n");
            return -EINVAL;
        }
        rc = from_env(o, cs.rank_base_set, cs.world_set ? (int64_t)cs.world : -1, &cs.agg,
                      &cs.secret_file);
        if (rc < 0)
            return rc;
    }
    if ((rc = resolve_connection(o, &cs)) < 0)
        return rc;
    return check_shape(o, &cs);
}

/* Runs process i's rank and formats its line. */
static int run_one(const struct options *o, uint32_t i, char *line)
{
    struct mrd_rank_opts r = o->r;
    struct mrd_rank_result res;
    if (o->ncaptures) {
        r.capture_path = o->captures[i / r.copies];
        r.copy = i % r.copies;
    } else {
        r.rank = o->rank_base + i;
        r.local_rank = r.rank % 8;
    }
    int rc = mrd_rank_run(&r, &res);
    mrd_rank_format(&res, line, LINE_MAX_);
    if (rc != 0 && !r.conn.quiet)
        fprintf(stderr, "meridian-replay: rank %u failed: %s\n", res.rank, res.why);
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

int mrd_replay_main(int argc, char **argv)
{
    static struct options o; /* the secret buffer is large: keep it off the stack */
    char line[LINE_MAX_];
    FILE *rep = NULL;
    int pfd[2] = {-1, -1}, failed = 0;
    uint32_t nfail = 0;
    uint32_t nprocs, started = 0, lines = 0;
    uint64_t events = 0, bytes = 0;

    memset(&o, 0, sizeof o);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    nprocs = o.ncaptures ? (uint32_t)o.ncaptures * o.r.copies : o.ranks;
    if (o.report) {
        rep = strcmp(o.report, "-") == 0 ? stdout : fopen(o.report, "w");
        if (!rep) {
            fprintf(stderr, "meridian replay: cannot write %s: %s\n", o.report,
                    mrd_strerror(-errno));
            return 2;
        }
    }
    double t0 = now_s();
    if (nprocs == 1) {
        failed = run_one(&o, 0, line) != 0;
        nfail = (uint32_t)failed;
        events = field(line, " events=");
        bytes = field(line, "bytes_sent=");
        if (rep)
            fprintf(rep, "%s\n", line);
        lines = 1;
        goto done;
    }
    if (pipe(pfd) < 0) {
        perror("meridian replay: pipe");
        failed = 1;
        goto done;
    }
    fflush(NULL);
    for (; started < nprocs; started++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("meridian replay: fork");
            failed = 1;
            break;
        }
        if (pid == 0) {
            close(pfd[0]);
            int crc = run_one(&o, started, line);
            size_t n = strlen(line);
            line[n++] = '\n';
            ssize_t w = write(pfd[1], line, n);
            _exit(crc != 0 || w != (ssize_t)n);
        }
    }
    close(pfd[1]);
    {
        /* collect lines until every child closed its end of the pipe */
        char buf[8192];
        size_t have = 0;
        for (;;) {
            ssize_t n = read(pfd[0], buf + have, sizeof buf - have);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            have += (size_t)n;
            char *nl;
            while ((nl = memchr(buf, '\n', have))) {
                *nl = '\0';
                events += field(buf, " events=");
                bytes += field(buf, "bytes_sent=");
                if (!strstr(buf, "status=ok")) {
                    failed = 1;
                    nfail++;
                }
                if (rep)
                    fprintf(rep, "%s\n", buf);
                lines++;
                size_t used = (size_t)(nl - buf) + 1;
                memmove(buf, nl + 1, have - used);
                have -= used;
            }
            if (have == sizeof buf)
                have = 0; /* cannot happen: lines are < LINE_MAX_ */
        }
        close(pfd[0]);
    }
    for (uint32_t i = 0; i < started; i++) {
        int st;
        if (wait(&st) < 0)
            break;
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
done:;
    double secs = now_s() - t0;
    if (lines != nprocs) {
        failed = 1;
        nfail += nprocs - lines; /* a rank that died without a line */
    }
    if (rep && rep != stdout && fclose(rep) != 0)
        failed = 1;
    if (o.from_env)
        printf("meridian replay: rank %u: %s: %" PRIu64 " events in %" PRIu64
               " batches in %.2f s, %s\n",
               o.fe.rank, o.fe.capture, events, field(line, " batches="), secs,
               failed ? "NOT all acknowledged (see above)" : "all acknowledged");
    else
        printf("replay: ranks=%u events=%" PRIu64
               " seconds=%.3f events_per_s=%.0f bytes_sent=%" PRIu64
               " bytes_per_event=%.2f failed=%u\n",
               nprocs, events, secs, secs > 0 ? (double)events / secs : 0.0, bytes,
               events ? (double)bytes / (double)events : 0.0, nfail);
    fflush(stdout);
    return failed ? 1 : 0;
}
