/* meridian run configuration shared by every component: the run secret and host:port.
 *
 * Where it sits: the agent (MERIDIAN_SECRET / MERIDIAN_SECRET_FILE, MERIDIAN_AGGREGATOR),
 * meridiand (--secret-file / MERIDIAN_SECRET, --listen), `meridian replay` and
 * `meridian profile` all read the same two things; a secret file that one of them read
 * differently from another would be refused as a wrong secret with nothing to show why.
 * So there is one rule for each, here (documented for users in agent/ENVIRONMENT.md):
 *
 *   secret: the whole file (or the whole MERIDIAN_SECRET value) with every trailing CR
 *     and LF removed; what remains must be 1..MRD_SECRET_MAX bytes and contain no NUL
 *     byte. Inner bytes, newlines included, are part of the secret. A file larger than
 *     MRD_SECRET_FILE_MAX bytes is refused without being read further.
 *   host:port: "host:port" or "[ipv6]:port"; host non-empty (a host containing ':' must
 *     be bracketed); port 1 to 5 decimal digits, 0..65535 (callers that connect refuse 0).
 *   rank, local rank, world size: the first variable of each list (mrd_rank_vars) that is
 *     set decides, except that RANK, LOCAL_RANK and WORLD_SIZE decide when all three are
 *     set: torchrun and its kind set them in each worker they start, so that launcher is
 *     the innermost one, while under `srun ... torchrun` or `mpirun ... torchrun` every
 *     worker of a node inherits the node's SLURM_PROCID / PMI_RANK / OMPI_COMM_WORLD_RANK.
 *   aggregator list (sharded aggregation, MERIDIAN_AGGREGATOR): one host:port, or 1 to
 *     MRD_AGGREGATORS_MAX of them separated by ',' with blanks (space, tab) around each
 *     ignored; every entry must be host:port with a port other than 0, and rank r sends to
 *     entry r % N, whose index is its shard id. Every entry is checked, so that every rank
 *     refuses a bad list alike, not only the ranks of the bad entry.
 *
 * Workload: called once per process at start (cold path). No logging: each caller words
 * its own message from the returned reason. Thread-safe, no allocation.
 */
#ifndef MRD_RUNCFG_H
#define MRD_RUNCFG_H

#include <stddef.h>
#include <stdint.h>

#define MRD_SECRET_MAX      255  /* bytes of a run secret (Hello.secret) */
#define MRD_SECRET_FILE_MAX 4096 /* bytes of a secret file, trailing newlines included */

/* Reads the run secret from the file at `path` if path is non-NULL, else from `value`
 * (the text of an environment variable). Writes the secret and a terminating NUL into
 * out[MRD_SECRET_MAX + 1]. Returns its length (1..MRD_SECRET_MAX), or a negative code with
 * *why set to a static reason: -EINVAL (both NULL: "no secret given"), the negative errno
 * of open/read (why: its text), -EFBIG (file over MRD_SECRET_FILE_MAX bytes), -E2BIG
 * (longer than MRD_SECRET_MAX), -ENODATA (empty), -EILSEQ (contains a NUL byte). out is
 * zeroed on failure. Any thread. */
int mrd_secret_read(const char *path, const char *value, char out[MRD_SECRET_MAX + 1],
                    const char **why);

/* Splits "host:port" or "[ipv6]:port" by the rule above: the host (brackets removed) into
 * host[hcap] with a NUL, the port into *port. Returns 0, -EINVAL (not host:port by the
 * rule), or -ENAMETOOLONG (host does not fit hcap); host and *port are untouched on
 * failure. Any thread. */
int mrd_hostport_split(const char *hp, char *host, size_t hcap, uint16_t *port);

/* The environment variables that give a process its place in the job, each list in the
 * order the rule above tries them, NULL-terminated. */
struct mrd_rank_vars {
    const char *const *rank, *const *local_rank, *const *world_size;
};

/* The lists by the rule above: torchrun's three alone when `torchrun_all_set` (RANK,
 * LOCAL_RANK and WORLD_SIZE are all set; the caller asks its own environment), else the
 * launchers' lists. Static storage; any thread. */
const struct mrd_rank_vars *mrd_rank_vars(int torchrun_all_set);

#define MRD_AGGREGATORS_MAX 4096u /* entries an aggregator list may hold */

/* What is wrong with an aggregator list (mrd_aggregator_pick). */
enum mrd_aggregator_fault {
    MRD_AGG_OK = 0,
    MRD_AGG_EMPTY,    /* an entry with nothing but blanks */
    MRD_AGG_BAD,      /* an entry that is not host:port, has port 0, or does not fit */
    MRD_AGG_TOO_MANY, /* entry MRD_AGGREGATORS_MAX exists */
};

/* Where a list failed: the fault, the 0-based index of the entry at fault and its text
 * (blanks left out; not NUL-terminated), for the caller's message. */
struct mrd_aggregator_error {
    enum mrd_aggregator_fault fault;
    uint32_t entry;
    const char *text;
    size_t len;
};

/* Picks rank's aggregator from `list` by the rule above. A value without ',' is one
 * address taken as given (no blank is removed, as before lists existed). Writes the entry
 * and a NUL to out[cap] (an entry that does not fit is MRD_AGG_BAD), its index to *index
 * and the number of entries to *count. Returns 0, or -EINVAL with *err filled (err may be
 * NULL); out, *index and *count are untouched on failure. Any thread. */
int mrd_aggregator_pick(const char *list, uint64_t rank, char *out, size_t cap,
                        uint32_t *index, uint32_t *count, struct mrd_aggregator_error *err);

#endif
