/* The environment fingerprint compared across ranks: which rank runs with another driver,
 * library, GPU model or NCCL setting than most ranks (table env_records, one row per
 * (rank, key, value), written by agent/capture/env.c; keys in aggregator/SCHEMA.md).
 *
 * The rules (what the report and the findings rely on):
 * - The ranks compared are those with at least one env_records row.
 * - Keys are compared as stored, except gpu<N>.<field>, compared as "gpu.<field>" (ranks
 *   drive different ordinals of the same model). A rank's value of a key is its distinct
 *   values in byte order joined by "," (one value unless a rank drives several GPUs).
 * - Not compared, because they name the rank or its node rather than configure it:
 *   hostname, gpu.uuid, env:CUDA_VISIBLE_DEVICES, env:NVIDIA_VISIBLE_DEVICES, and the
 *   variables Open MPI's launcher sets per rank or per node (measured under mpirun 4.1):
 *   env:OMPI_MCA_ess_base_vpid, env:OMPI_MCA_orte_ess_vpid, env:OMPI_MCA_orte_ess_node_rank,
 *   env:OMPI_MCA_orte_local_daemon_uri, env:OMPI_MCA_orte_jobfam_session_dir,
 *   env:OMPI_MCA_orte_top_session_dir.
 * - Per key, absence is a value like any other. The majority is the value most ranks
 *   have; on a tie a present value wins over absence, and among present values the first
 *   in byte order. Every rank whose value (or absence) is not the majority differs.
 *
 * Workload: O(ranks x keys) rows (tens of keys per rank), read once into memory and
 * sorted. One thread per database connection.
 */
#ifndef MRD_ANALYZE_FINGERPRINT_H
#define MRD_ANALYZE_FINGERPRINT_H

#include <sqlite3.h>

/* A rank whose value of a key differs from the majority. */
struct mrd_env_diff {
    int rank;
    const char *value; /* NULL: the key is absent on this rank */
};

/* A compared key on which at least one rank differs. */
struct mrd_env_key {
    const char *key;      /* "driver_version", "gpu.name", "env:NCCL_ALGO", ... */
    const char *majority; /* NULL: most ranks lack the key */
    int majority_ranks;   /* ranks with the majority value (or without the key) */
    int ndiffs;
    struct mrd_env_diff *diffs; /* ascending rank */
};

struct mrd_env_report {
    int nranks;               /* ranks with a fingerprint */
    int nkeys;                /* distinct keys compared */
    int nkeys_differ;         /* entries of keys[] */
    struct mrd_env_key *keys; /* by key, byte order */
};

/* Compares the fingerprints stored on db. Returns 0 and *out (caller frees with
 * mrd_env_report_free; NULL when db has no env_records rows: a capture older than the
 * fingerprint), -ENOMEM, or -MRD_ERR_SQLITE (sqlite3_errmsg(db) says why). Caller's
 * thread. */
int mrd_analyze_env(sqlite3 *db, struct mrd_env_report **out);

/* Accepts NULL. */
void mrd_env_report_free(struct mrd_env_report *r);

#endif
