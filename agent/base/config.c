/* Agent configuration: the launcher <-> agent environment contract, read once.
 *
 * Where it sits: the first mrd_agent_start() (from CUDA injection, the NCCL plugin, NVTX
 * injection or the MPI wrappers) calls mrd__config_parse() with getenv; nothing else in the
 * agent reads the environment. agent/ENVIRONMENT.md documents every variable; keep the two
 * in step.
 *
 * Workload: once per process. Numbers accept a k/m/g suffix (powers of 1024). Anything
 * malformed makes the agent inert with one stderr line: a profiler that silently ignores a
 * setting would produce data the user did not ask for.
 *
 * Sharded aggregation: MERIDIAN_AGGREGATOR may list up to 4096 host:port entries; every
 * entry is checked, rank r connects to entry r % N and that index is its shard id (an
 * explicit MERIDIAN_SHARD_ID must then equal it). A single address is taken as before.
 *
 * Every variable the agent reads (ENVIRONMENT.md has the ranges and defaults):
 *   here:  MERIDIAN_DISABLE, MERIDIAN_FORCE; the rank (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 *          PMI_RANK, SLURM_PROCID, RANK), local rank (OMPI_COMM_WORLD_LOCAL_RANK,
 *          MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK) and world size (OMPI_COMM_WORLD_SIZE,
 *          PMI_SIZE, SLURM_NTASKS, WORLD_SIZE), first set wins, except that RANK,
 *          LOCAL_RANK and WORLD_SIZE win when all three are set (torchrun; the lists
 *          and the rule: mrd_rank_vars, proto/runcfg.h);
 *          MERIDIAN_RECORD_FILE,
 *          MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET / MERIDIAN_SECRET_FILE
 *          (required with an aggregator; record-only mode needs none), MERIDIAN_QUEUE_BYTES,
 *          MERIDIAN_FLUSH_DEADLINE_MS, MERIDIAN_RING_RECORDS, MERIDIAN_RING_THREADS,
 *          MERIDIAN_BATCH_EVENTS, MERIDIAN_BATCH_MS, MERIDIAN_PROBE_INTERVAL_MS,
 *          MERIDIAN_SHARD_ID, MERIDIAN_GRAPH_NODES, MERIDIAN_TEST_CLOCK_PPM (tests only);
 *   in agent/capture/cupti.c, once, in InitializeInjection (a bad value turns CUDA capture
 *          off, not the agent): MERIDIAN_CUPTI_BUFFER_MB, MERIDIAN_CUPTI_BUFFERS,
 *          MERIDIAN_CUPTI_FLUSH_MS, MERIDIAN_CUPTI_PACE, MERIDIAN_CUPTI_SELF_RECORDS,
 *          MERIDIAN_CUPTI_ALTERNATE, MERIDIAN_CUPTI_CLOSE, MERIDIAN_CUPTI_API,
 *          MERIDIAN_TRACE_KINDS,
 *          MERIDIAN_PRINT_KINDS, and NSYS_PROFILING_SESSION_ID (detected: Nsight Systems
 *          owns CUPTI);
 *   in agent/capture/gpu_sample.c, once, when the first GPU arrives (a bad value turns the
 *          NVML readings at that rate off): MERIDIAN_GPU_SAMPLE_HZ,
 *          MERIDIAN_GPU_SAMPLE_STEADY_HZ.
 * Memory a rank takes by default (ENVIRONMENT.md, "Memory"): the CUPTI pool, 16 x 8 MiB =
 * 128 MiB mapped and pre-faulted when CUDA capture is on; the rings, 64 x 16384 x 216 bytes
 * = 216 MiB of address space (MAP_NORESERVE; up to 3.4 MiB + 4 KiB of state resident per
 * capturing thread); the unacknowledged queue, up to 64 MiB only while the aggregator lags;
 * a few MiB for the batch builder, 2 MiB of static capture tables, 256 KiB of socket
 * buffers.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "runcfg.h"

/* Parses a non-negative integer with an optional k/m/g suffix into [lo, hi]. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    if (s == NULL || *s == '\0' || *s == '-' || isspace((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -EINVAL;
    v <<= shift;
    if (v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

/* Rank-style variable: a decimal int >= 0. Returns 1 if set and valid, 0 if unset,
 * -EINVAL if set but not a number. */
static int parse_rank(const char *s, int *out)
{
    uint64_t v;
    if (s == NULL || *s == '\0')
        return 0;
    if (parse_u64(s, 0, INT32_MAX, &v) != 0)
        return -EINVAL;
    *out = (int)v;
    return 1;
}

/* First variable of `names` that is set decides; returns as parse_rank, *which = its name. */
static int first_rank(mrd_env_fn get, void *arg, const char *const *names, int *out,
                      const char **which)
{
    for (; *names; names++) {
        int r = parse_rank(get(*names, arg), out);
        if (r != 0) {
            *which = *names;
            return r;
        }
    }
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Expands %r (rank), %p (pid) and %% in a record-file pattern. */
static int expand_path(char *dst, size_t cap, const char *pat, int rank)
{
    size_t o = 0;
    for (const char *p = pat; *p; p++) {
        char tmp[24];
        const char *add = tmp;
        if (p[0] == '%' && p[1] == 'r') {
            snprintf(tmp, sizeof tmp, "%d", rank);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            snprintf(tmp, sizeof tmp, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            add = "%";
            p++;
        } else {
            tmp[0] = *p;
            tmp[1] = '\0';
        }
        size_t n = strlen(add);
        if (o + n >= cap)
            return -ENAMETOOLONG;
        memcpy(dst + o, add, n);
        o += n;
    }
    dst[o] = '\0';
    return 0;
}

/* Writes the reason into why[] and returns -MRD_ERR_CONFIG: `return fail(...)`. */
__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t why_len, const char *fmt,
                                                      ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return -MRD_ERR_CONFIG;
}

/* An optional numeric variable and its range. */
struct num_var {
    const char *name;
    uint64_t lo, hi;
    uint64_t *value; /* kept when the variable is unset or empty */
};

/* Reads v->name into *v->value. Returns 0, or -MRD_ERR_CONFIG with why[] set. */
static int read_num(mrd_env_fn get, void *arg, const struct num_var *v, char *why, size_t why_len)
{
    const char *s = get(v->name, arg);
    uint64_t x;
    if (s == NULL || *s == '\0')
        return 0;
    if (parse_u64(s, v->lo, v->hi, &x) != 0)
        return fail(why, why_len, "%s=%s is not a number in [%llu, %llu]", v->name, s,
                    (unsigned long long)v->lo, (unsigned long long)v->hi);
    *v->value = x;
    return 0;
}

/* MERIDIAN_AGGREGATOR (one host:port, or a list: mrd_aggregator_pick's rule, runcfg.h):
 * fills c->aggregator, c->shard_index and c->shard_count from rank c->rank; returns 0, or
 * -MRD_ERR_CONFIG with why[] naming what is wrong (a list's entry by its 0-based index). */
static int pick_aggregator(struct mrd_agent_config *c, const char *s, char *why, size_t why_len)
{
    struct mrd_aggregator_error e;
    if (mrd_aggregator_pick(s, (uint64_t)c->rank, c->aggregator, sizeof c->aggregator,
                            &c->shard_index, &c->shard_count, &e) == 0)
        return 0;
    if (strchr(s, ',') == NULL)
        return fail(why, why_len, "MERIDIAN_AGGREGATOR=%.64s is not host:port", s);
    if (e.fault == MRD_AGG_TOO_MANY)
        return fail(why, why_len,
                    "MERIDIAN_AGGREGATOR: entry %u is one too many (a list holds at most %u "
                    "host:port entries)",
                    e.entry, MRD_AGGREGATORS_MAX);
    if (e.fault == MRD_AGG_EMPTY)
        return fail(why, why_len,
                    "MERIDIAN_AGGREGATOR: entry %u is empty (expected host:port,host:port,...)",
                    e.entry);
    return fail(why, why_len, "MERIDIAN_AGGREGATOR: entry %u (%.*s) is not host:port", e.entry,
                (int)(e.len < 64 ? e.len : 64), e.text);
}

static int flag_on(const char *s)
{
    return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

int mrd__config_parse(struct mrd_agent_config *c, mrd_env_fn get, void *arg, char *why,
                      size_t why_len)
{
    const char *which = "";
    const char *s;

    memset(c, 0, sizeof *c);
    why[0] = '\0';
    c->queue_bytes = MRD_DEFAULT_QUEUE_BYTES;
    c->flush_deadline_ms = MRD_DEFAULT_FLUSH_DEADLINE_MS;
    c->ring_records = MRD_DEFAULT_RING_RECORDS;
    c->ring_threads = MRD_DEFAULT_RING_THREADS;
    c->batch_events = MRD_DEFAULT_BATCH_EVENTS;
    c->batch_ms = MRD_DEFAULT_BATCH_MS;
    c->probe_interval_ms = MRD_DEFAULT_PROBE_INTERVAL_MS;
    c->rank = c->local_rank = c->world_size = -1;

    if (flag_on(get("MERIDIAN_DISABLE", arg)))
        return 0;
    c->force = flag_on(get("MERIDIAN_FORCE", arg));

    /* the rule of proto/runcfg.h, torchrun's variables first when all three are set */
    const struct mrd_rank_vars *vars =
        mrd_rank_vars(get("RANK", arg) && get("LOCAL_RANK", arg) && get("WORLD_SIZE", arg));
    int r = first_rank(get, arg, vars->rank, &c->rank, &which);
    if (r < 0)
        return fail(why, why_len, "%s=%s is not a rank number", which, get(which, arg));
    if (r == 0) {
        if (!c->force)
            return 0; /* mpirun itself, helper processes: not a rank */
        c->rank = 0;
    }
    if (first_rank(get, arg, vars->local_rank, &c->local_rank, &which) < 0)
        return fail(why, why_len, "%s=%s is not a rank number", which, get(which, arg));
    if (first_rank(get, arg, vars->world_size, &c->world_size, &which) < 0)
        return fail(why, why_len, "%s=%s is not a number", which, get(which, arg));

    s = get("MERIDIAN_RECORD_FILE", arg);
    if (s != NULL && *s != '\0' &&
        expand_path(c->record_file, sizeof c->record_file, s, c->rank) != 0)
        return fail(why, why_len, "MERIDIAN_RECORD_FILE is longer than %zu bytes",
                    sizeof c->record_file - 1);

    s = get("MERIDIAN_AGGREGATOR", arg);
    if (s != NULL && *s != '\0') {
        if (pick_aggregator(c, s, why, why_len) != 0)
            return -MRD_ERR_CONFIG;
    } else if (c->record_file[0] == '\0') {
        return fail(why, why_len,
                    "MERIDIAN_AGGREGATOR is not set (expected host:port of meridiand)");
    }
    s = get("MERIDIAN_RUN_ID", arg);
    if (s == NULL || *s == '\0')
        return fail(why, why_len, "MERIDIAN_RUN_ID is not set");
    if (copy_str(c->run_id, sizeof c->run_id, s) != 0)
        return fail(why, why_len, "MERIDIAN_RUN_ID is longer than %zu bytes", sizeof c->run_id - 1);

    s = get("MERIDIAN_SECRET", arg);
    const char *sw = NULL;
    if (s != NULL && *s != '\0') {
        if (mrd_secret_read(NULL, s, c->secret, &sw) < 0)
            return fail(why, why_len, "MERIDIAN_SECRET: %s", sw);
    } else if ((s = get("MERIDIAN_SECRET_FILE", arg)) != NULL && *s != '\0') {
        if (mrd_secret_read(s, NULL, c->secret, &sw) < 0)
            return fail(why, why_len, "MERIDIAN_SECRET_FILE %.200s: %s", s, sw);
    }
    /* meridiand refuses every agent without the run's secret: connecting without one would
     * only retry for nothing and lose everything. Record-only mode needs none. */
    if (c->secret[0] == '\0' && c->aggregator[0] != '\0')
        return fail(why, why_len,
                    "neither MERIDIAN_SECRET nor MERIDIAN_SECRET_FILE is set (meridiand %.64s "
                    "requires the run's secret)",
                    c->aggregator);

    uint64_t ring_records = c->ring_records, ring_threads = c->ring_threads;
    uint64_t deadline = c->flush_deadline_ms, batch_events = c->batch_events;
    uint64_t batch_ms = c->batch_ms, probe_ms = c->probe_interval_ms, shard = 0;
    const struct num_var nums[] = {
        {"MERIDIAN_QUEUE_BYTES", 1ull << 20, 1ull << 40, &c->queue_bytes},
        {"MERIDIAN_FLUSH_DEADLINE_MS", 0, 600000, &deadline},
        {"MERIDIAN_RING_RECORDS", 16, 1u << 24, &ring_records},
        {"MERIDIAN_RING_THREADS", 1, 4096, &ring_threads},
        {"MERIDIAN_BATCH_EVENTS", 64, 1u << 20, &batch_events},
        {"MERIDIAN_BATCH_MS", 1, 60000, &batch_ms},
        {"MERIDIAN_PROBE_INTERVAL_MS", 10, 3600000, &probe_ms},
        {"MERIDIAN_SHARD_ID", 0, UINT32_MAX, &shard},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (read_num(get, arg, &nums[i], why, why_len) != 0)
            return -MRD_ERR_CONFIG;
    /* a list decides the shard: an explicit id must agree with it (a mismatch would store
     * this rank under another shard's id in this shard's database) */
    if (c->shard_count > 1) {
        s = get("MERIDIAN_SHARD_ID", arg);
        if (s != NULL && *s != '\0' && shard != c->shard_index)
            return fail(
                why, why_len,
                "MERIDIAN_SHARD_ID=%.16s but rank %d connects to MERIDIAN_AGGREGATOR entry "
                "%u of %u (rank %% %u), whose shard id is %u: leave MERIDIAN_SHARD_ID unset "
                "with a list of aggregators",
                s, c->rank, c->shard_index, c->shard_count, c->shard_count, c->shard_index);
        shard = c->shard_index;
    }
    /* rings are indexed with a mask: round up to a power of two */
    uint32_t pow2 = 16;
    while (pow2 < ring_records)
        pow2 <<= 1;
    c->ring_records = pow2;
    c->ring_threads = (uint32_t)ring_threads;
    c->flush_deadline_ms = (uint32_t)deadline;
    c->batch_events = (uint32_t)batch_events;
    c->batch_ms = (uint32_t)batch_ms;
    c->probe_interval_ms = (uint32_t)probe_ms;
    c->shard_id = (uint32_t)shard;
    c->graph_nodes = flag_on(get("MERIDIAN_GRAPH_NODES", arg));

    s = get("MERIDIAN_TEST_CLOCK_PPM", arg);
    if (s != NULL && *s != '\0') {
        char *end = NULL;
        errno = 0;
        double ppm = strtod(s, &end);
        if (errno != 0 || end == s || *end != '\0' || ppm < -10000.0 || ppm > 10000.0)
            return fail(why, why_len,
                        "MERIDIAN_TEST_CLOCK_PPM=%.32s is not a number in [-10000, 10000]", s);
        c->test_clock_ppm = ppm;
    }
    return 1;
}
