/* `meridian run`: wrap one rank. Sets the agent's environment (agentenv.c) for this
 * process and executes the command in its place, so the rank keeps its pid, exit status
 * and signals. For jobs whose ranks are started by the user's own launcher, pointing at a
 * meridiand the user started; `meridian profile` does all of this for mpirun jobs.
 * Main thread; nothing runs after the exec.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentenv.h"
#include "cli.h"
#include "error.h"
#include "opts.h"

static void run_usage(FILE *f)
{
    fputs(
        "usage: meridian run [options] -- COMMAND [ARGS...]\n"
        "\n"
        "Wraps one rank: sets the agent's environment for this process and executes COMMAND in\n"
        "its place (same pid, exit status and signals). For ranks started by a launcher of your\n"
        "own, pointing at a meridiand you started:\n"
        "\n"
        "  mpirun -np 4 meridian run --aggregator host:47500 --run-id R --secret-file S -- ./app\n"
        "  srun -n 4 meridian run -- ./app    (MERIDIAN_AGGREGATOR etc. in the environment)\n"
        "\n"
        "Or with no aggregator at all, recording to a file that `meridian replay` plays into\n"
        "one later (record-only mode; no secret needed):\n"
        "\n"
        "  mpirun -np 4 meridian run --record-file /scratch/r%r.mrdcap --run-id R -- ./app\n"
        "\n"
        "  --aggregator HOST:PORT  meridiand's address (default $MERIDIAN_AGGREGATOR)\n"
        "  --run-id ID             the run (default $MERIDIAN_RUN_ID)\n"
        "  --secret-file PATH      the run secret (default $MERIDIAN_SECRET_FILE)\n"
        "  --record-file PATH      also write every frame to PATH (%r = rank, %p = pid;\n"
        "                          default $MERIDIAN_RECORD_FILE); without an aggregator\n"
        "                          the rank records only (run id default `recorded`)\n"
        "  --agent-lib PATH        libmeridian.so (default: $MERIDIAN_AGENT_LIB, else next to\n"
        "                          meridian, else the build tree)\n"
        "  --mpi-lib PATH          libmeridian_mpi.so, preloaded when this process is an MPI\n"
        "                          rank (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK is set)\n"
        "  --no-mpi-wrappers       do not preload the MPI wrappers\n"
        "  -h, --help              this text\n"
        "\n"
        "Without any rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID,\n"
        "RANK) the process is made rank 0 (MERIDIAN_FORCE=1). With RANK, LOCAL_RANK and\n"
        "WORLD_SIZE all set (a torchrun worker) those decide, and no MPI wrappers are loaded.\n"
        "Exit status: COMMAND's; 125 on a usage or setup error, 126/127 when COMMAND cannot be\n"
        "executed / is not found.\n",
        f);
}

int mrd_cli_run(int argc, char **argv)
{
    const char *agg = getenv("MERIDIAN_AGGREGATOR"), *run = getenv("MERIDIAN_RUN_ID");
    const char *secret = getenv("MERIDIAN_SECRET_FILE"), *agent_opt = NULL, *mpi_opt = NULL;
    const char *record = getenv("MERIDIAN_RECORD_FILE");
    char agent[PATH_MAX], mpi[PATH_MAX], secret_abs[PATH_MAX];
    struct mrd_agentenv env;
    int no_mpi = 0, rc;
    const struct mrd_opt opts[] = {
        MRD_OPT_TEXT("aggregator", &agg),     MRD_OPT_TEXT("run-id", &run),
        MRD_OPT_TEXT("secret-file", &secret), MRD_OPT_TEXT("agent-lib", &agent_opt),
        MRD_OPT_TEXT("mpi-lib", &mpi_opt),    MRD_OPT_SET("no-mpi-wrappers", &no_mpi, 1),
        MRD_OPT_TEXT("record-file", &record)};
    int first = mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), MRD_OPTS_STOP_AT_OPERAND,
                               "meridian run", run_usage);
    if (first <= 0)
        return first == 0 ? 0 : MRD_CLI_EXIT_SETUP;
    if (record && !*record)
        record = NULL;
    if (agg && !*agg)
        agg = NULL;
    if (run && !*run)
        run = NULL;
    int record_only = record && !agg; /* the agent's record-only mode: no secret, no daemon */
    if (record_only && !run)
        run = "recorded";
    if (first >= argc || (!record_only && (!agg || !run || !secret))) {
        fprintf(stderr, "meridian run: %s (see --help)\n",
                first >= argc ? "no command given"
                              : "needs --aggregator, --run-id and --secret-file (or "
                                "MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET_FILE), "
                                "or --record-file alone to record without an aggregator");
        return MRD_CLI_EXIT_SETUP;
    }
    if (record_only) {
        /* the agent reads these itself: a stale secret would make it inert, not record */
        secret = NULL;
        unsetenv("MERIDIAN_SECRET");
        unsetenv("MERIDIAN_SECRET_FILE");
        unsetenv("MERIDIAN_AGGREGATOR"); /* an empty one */
        fprintf(stderr, "meridian run: no aggregator: recording only, to %s\n", record);
    } else if (mrd_agentenv_abs_path(secret, secret_abs, sizeof(secret_abs)) < 0 ||
               access(secret_abs, R_OK)) {
        fprintf(stderr, "meridian run: cannot read the secret file %s\n", secret);
        return MRD_CLI_EXIT_SETUP;
    }
    if (mrd_agentenv_find_agent(agent_opt, agent, sizeof(agent)) < 0) {
        fprintf(stderr, "meridian run: libmeridian.so not found (give --agent-lib)\n");
        return MRD_CLI_EXIT_SETUP;
    }
    /* a torchrun worker (RANK, LOCAL_RANK, WORLD_SIZE all set) is no MPI rank, even under
     * srun --mpi=pmix, whose PMIX_RANK it inherits */
    int torch = getenv("RANK") && getenv("LOCAL_RANK") && getenv("WORLD_SIZE");
    int mpi_rank =
        !torch && (getenv("OMPI_COMM_WORLD_RANK") || getenv("PMIX_RANK") || getenv("PMI_RANK"));
    int any_rank = mpi_rank || getenv("SLURM_PROCID") || getenv("RANK");
    int have_mpi = !no_mpi && mpi_rank && mrd_agentenv_find_mpi(mpi_opt, mpi, sizeof(mpi)) == 0;
    struct mrd_agentenv_config ec = {.aggregator = agg,
                                     .run_id = run,
                                     .secret_file = secret ? secret_abs : NULL,
                                     .record_file = record, /* as given: the agent expands
                                                             * %r/%p, in this same cwd */
                                     .agent_lib = agent,
                                     .mpi_lib = have_mpi ? mpi : NULL,
                                     .force = !any_rank};
    char profapi[PATH_MAX]; /* the cudaProfilerStart/Stop interposers, when installed */
    if (mrd_agentenv_find_profapi(NULL, profapi, sizeof(profapi)) == 0)
        ec.profapi_lib = profapi;
    if ((rc = mrd_agentenv_build(&ec, &env)) < 0 || (rc = mrd_agentenv_apply(&env)) < 0) {
        fprintf(stderr, "meridian run: environment: %s\n", mrd_strerror(rc));
        return MRD_CLI_EXIT_SETUP;
    }
    mrd_agentenv_free(&env);
    execvp(argv[first], argv + first);
    rc = errno;
    fprintf(stderr, "meridian run: cannot run %s: %s\n", argv[first], mrd_strerror(-rc));
    return rc == ENOENT ? MRD_CLI_EXIT_NOTFOUND : MRD_CLI_EXIT_NOEXEC;
}
