/* The launcher side of the agent's environment contract (agent/core/agent.h,
 * agent/ENVIRONMENT.md): which variables a profiled rank needs, where the agent libraries
 * and meridiand are found, which launchers a command holds (mpirun/mpiexec, srun,
 * torchrun), and how an `mpirun` command line is rewritten so that every rank, on every
 * node, receives them (srun and torchrun pass their environment on instead).
 *
 * Where it sits: used by `meridian profile` (profile.c) and `meridian run` (run.c) before
 * the job starts, and by `meridian doctor`. No I/O besides stat() and reading environ.
 * Sizes: at most MRD_AGENTENV_MAX variables; paths up to PATH_MAX.
 */
#ifndef MRD_AGENTENV_H
#define MRD_AGENTENV_H

#include <stddef.h>

#define MRD_AGENTENV_MAX 48

struct mrd_agentenv {
    int n;
    char *name[MRD_AGENTENV_MAX];  /* malloc'd */
    char *value[MRD_AGENTENV_MAX]; /* malloc'd */
};

struct mrd_agentenv_config {
    const char *aggregator;  /* "host:port"; NULL: none (record-only, with record_file) */
    const char *run_id;
    const char *secret_file; /* absolute path; NULL: none (record-only) */
    const char *record_file; /* MERIDIAN_RECORD_FILE; NULL: not set here */
    const char *agent_lib;   /* absolute path of libmeridian.so; NULL/"": not injected */
    const char *mpi_lib;     /* absolute path of libmeridian_mpi.so, NULL: no MPI wrappers */
    const char *profapi_lib; /* absolute path of libmeridian_profapi.so, NULL: not preloaded */
    int force;               /* set MERIDIAN_FORCE=1 (a single process is rank 0) */
};

/* Fills *e with the variables a rank needs: MERIDIAN_AGGREGATOR and MERIDIAN_SECRET_FILE
 * (each when given), MERIDIAN_RUN_ID, MERIDIAN_RECORD_FILE (when given),
 * CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN and
 * NVTX_INJECTION64_PATH (= agent_lib), LD_PRELOAD (profapi_lib, then mpi_lib, ahead of
 * any existing value) when either is set (in an ASan build of meridian also ASAN_OPTIONS
 * with verify_asan_link_order=0, since the preloaded libraries then carry ASan), MERIDIAN_FORCE when asked, and every other MERIDIAN_* variable and
 * NCCL_NVLS_ENABLE found in this process's environment (so user settings travel too;
 * MERIDIAN_SECRET itself never does: the file does). Returns 0, -ENOMEM, or -E2BIG. */
int mrd_agentenv_build(const struct mrd_agentenv_config *c, struct mrd_agentenv *e);

/* Frees the strings of *e (not e itself). Accepts NULL. */
void mrd_agentenv_free(struct mrd_agentenv *e);

/* setenv() every variable of e in this process. Returns 0 or -errno. Main thread. */
int mrd_agentenv_apply(const struct mrd_agentenv *e);

enum mrd_launcher_style { MRD_LAUNCHER_NONE = 0, MRD_LAUNCHER_OPENMPI, MRD_LAUNCHER_MPICH };

/* Finds the MPI launcher in a command (the first word whose basename is mpirun, mpiexec,
 * orterun, or their .openmpi / .mpich / .hydra forms). Returns its index and its style in
 * *style, or -1 (style MRD_LAUNCHER_NONE). */
int mrd_agentenv_find_launcher(char *const *argv, int argc, int *style);

/* Every launcher of a command, outermost first: `srun ... torchrun ...` is a Slurm step
 * whose tasks each start torchrun's workers. */
enum mrd_launcher_kind {
    MRD_KIND_MPI = 1, /* mpirun/mpiexec (mrd_agentenv_find_launcher's): -x / -genv rewrite */
    MRD_KIND_SLURM,   /* srun: forwards its own environment to every task (--export=ALL) */
    MRD_KIND_TORCH,   /* torchrun, python -m torch.distributed.run/.launch: sets RANK,
                       * LOCAL_RANK, WORLD_SIZE per worker and passes its environment on */
};

#define MRD_LAUNCHERS_MAX 4

struct mrd_launchers {
    int n;
    int at[MRD_LAUNCHERS_MAX];   /* index in argv */
    int kind[MRD_LAUNCHERS_MAX]; /* enum mrd_launcher_kind */
    int mpi_style;               /* MRD_LAUNCHER_OPENMPI / _MPICH of the MPI one, else NONE */
    int export_limited;          /* srun has --export not starting with ALL (or
                                  * SLURM_EXPORT_ENV says so): its environment stays behind */
};

/* Fills *out with the launchers of argv[0..argc) (at most MRD_LAUNCHERS_MAX, outermost
 * first). Reads SLURM_EXPORT_ENV. No allocation. */
void mrd_agentenv_scan(char *const *argv, int argc, struct mrd_launchers *out);

/* The first launcher of kind k in *l: its index in argv, or -1. */
int mrd_agentenv_has(const struct mrd_launchers *l, int kind);

/* Returns a new argv (NULL-terminated, caller frees the array and the strings it
 * allocated with mrd_agentenv_free_argv) with the variables of e inserted right after the
 * launcher word at index `at`: "-x NAME=VALUE" for Open MPI, "-genv NAME VALUE" for MPICH.
 * Returns 0 and *out, -ENOMEM or -EINVAL. */
int mrd_agentenv_rewrite(char *const *argv, int argc, int at, int style,
                         const struct mrd_agentenv *e, char ***out);

/* Frees an argv returned by mrd_agentenv_rewrite. Accepts NULL. */
void mrd_agentenv_free_argv(char **argv);

/* The folder of the running executable (/proc/self/exe). Returns 0 or -errno. */
int mrd_agentenv_self_dir(char *out, size_t n);

/* Looks for a file: `explicit_path` if set (must exist), else environment variable
 * `env` if set, else each of `rel` (NULL-terminated, relative to the executable's folder),
 * else `builtin` (a build-tree path baked in at compile time, may be NULL), else, when
 * search_path is set, each folder of $PATH. Writes an absolute path. Returns 0, or
 * -ENOENT when nothing exists. */
int mrd_agentenv_locate(const char *explicit_path, const char *env, const char *const *rel,
                        const char *builtin, int search_path, const char *file, char *out,
                        size_t n);

/* The components, found as `meridian profile`, `run` and `doctor` agree to: an explicit
 * path (must exist), then $MERIDIAN_DAEMON / $MERIDIAN_AGENT_LIB / $MERIDIAN_MPI_LIB /
 * $MERIDIAN_PROFAPI_LIB,
 * then next to the executable and in ../sbin, ../lib, ../lib/meridian, ../libexec/meridian
 * (installed), then the build tree (paths compiled in), then (meridiand only) $PATH.
 * Return 0 with an absolute path in out, or -ENOENT. */
int mrd_agentenv_find_daemon(const char *explicit_path, char *out, size_t n);
int mrd_agentenv_find_agent(const char *explicit_path, char *out, size_t n);
int mrd_agentenv_find_mpi(const char *explicit_path, char *out, size_t n);
int mrd_agentenv_find_profapi(const char *explicit_path, char *out, size_t n);

/* Absolute form of a path whose folder exists (the file itself need not). Returns 0, or
 * -errno / -EINVAL. */
int mrd_agentenv_abs_path(const char *path, char *out, size_t n);

#endif
