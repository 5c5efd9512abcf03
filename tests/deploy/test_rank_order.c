/* deploy_rank_order: which variable names a rank, in the agent (mrd__config_parse,
 * agent/core/config.c) and in `meridian replay --from-env` (launcher/replay/fromenv.c),
 * which must agree: a replayed rank stands in for an agent. Each case is the environment
 * one launcher combination gives a process; the table is the precedence README.md
 * ("Slurm and torchrun") documents. The case that motivated it: under `srun ...
 * torchrun ...` every worker of a node sees the node's SLURM_PROCID (and PMIX_RANK with
 * --mpi=pmix) and its own RANK; taking SLURM_PROCID first made all of node 0's workers
 * rank 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "fromenv.h"

#define NVARS 8

struct rcase {
    const char *what;
    const char *kv[NVARS][2];
    int rank, local_rank, world; /* -1: not set / not a rank */
};

static const struct rcase cases[] = {
    {"mpirun (Open MPI)",
     {{"OMPI_COMM_WORLD_RANK", "5"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "8"},
      {"PMIX_RANK", "5"}},
     5,
     1,
     8},
    {"mpiexec (MPICH hydra)",
     {{"PMI_RANK", "3"}, {"MPI_LOCALRANKID", "0"}, {"PMI_SIZE", "4"}},
     3,
     0,
     4},
    {"srun", {{"SLURM_PROCID", "6"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS", "8"}}, 6, 2, 8},
    {"srun --mpi=pmix",
     {{"PMIX_RANK", "6"}, {"SLURM_PROCID", "6"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS", "8"}},
     6,
     2,
     8},
    {"torchrun",
     {{"RANK", "3"}, {"LOCAL_RANK", "3"}, {"WORLD_SIZE", "4"}, {"GROUP_RANK", "0"}},
     3,
     3,
     4},
    {"srun -N 2 torchrun --nproc_per_node=4, node 1, worker 2",
     {{"SLURM_PROCID", "1"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_NTASKS", "2"},
      {"RANK", "6"},
      {"LOCAL_RANK", "2"},
      {"WORLD_SIZE", "8"},
      {"GROUP_RANK", "1"}},
     6,
     2,
     8},
    {"srun --mpi=pmix torchrun, node 0, worker 1",
     {{"PMIX_RANK", "0"},
      {"SLURM_PROCID", "0"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_NTASKS", "2"},
      {"RANK", "1"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "4"}},
     1,
     1,
     4},
    {"mpirun -npernode 1 torchrun, node 1, worker 0",
     {{"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "2"},
      {"RANK", "2"},
      {"LOCAL_RANK", "0"},
      {"WORLD_SIZE", "4"}},
     2,
     0,
     4},
    /* RANK alone (a user's leftover export) does not outrank the launcher's variables */
    {"srun with a stray RANK",
     {{"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"}},
     1,
     1,
     2},
    {"a plain process", {{"HOME", "/root"}}, -1, -1, -1},
};

static const struct rcase *g_case;

static const char *lookup(const char *name, void *arg)
{
    (void)arg;
    if (strcmp(name, "MERIDIAN_AGGREGATOR") == 0)
        return "127.0.0.1:47500";
    if (strcmp(name, "MERIDIAN_RUN_ID") == 0)
        return "run1";
    if (strcmp(name, "MERIDIAN_SECRET") == 0)
        return "s3cret";
    for (int i = 0; i < NVARS && g_case->kv[i][0]; i++)
        if (strcmp(g_case->kv[i][0], name) == 0)
            return g_case->kv[i][1];
    return NULL;
}

static void set_env(const struct rcase *c)
{
    static const char *const all[] = {"OMPI_COMM_WORLD_RANK",
                                      "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "OMPI_COMM_WORLD_SIZE",
                                      "PMIX_RANK",
                                      "PMI_RANK",
                                      "PMI_SIZE",
                                      "MPI_LOCALRANKID",
                                      "SLURM_PROCID",
                                      "SLURM_LOCALID",
                                      "SLURM_NTASKS",
                                      "RANK",
                                      "LOCAL_RANK",
                                      "WORLD_SIZE",
                                      "GROUP_RANK",
                                      NULL};
    for (int i = 0; all[i]; i++)
        unsetenv(all[i]);
    for (int i = 0; i < NVARS && c->kv[i][0]; i++)
        setenv(c->kv[i][0], c->kv[i][1], 1);
}

int main(void)
{
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const struct rcase *c = &cases[k];
        struct mrd_agent_config cfg;
        struct mrd_fromenv fe;
        char why[512];
        printf("case: %s\n", c->what);
        g_case = c;
        int rc = mrd__config_parse(&cfg, lookup, NULL, why, sizeof(why));
        set_env(c);
        int frc = mrd_fromenv_read("r%r.mrdcap", -1, &fe, why, sizeof(why));
        if (c->rank < 0) {
            CHECK_EQ(rc, 0); /* inert: not a rank */
            CHECK(frc < 0);  /* replay refuses to guess */
            continue;
        }
        CHECK_EQ(rc, 1);
        CHECK_EQ(cfg.rank, c->rank);
        CHECK_EQ(cfg.local_rank, c->local_rank);
        CHECK_EQ(cfg.world_size, c->world);
        CHECK_EQ(frc, 0);
        CHECK_EQ((int)fe.rank, c->rank);
        CHECK_EQ((int)fe.local_rank, c->local_rank);
        CHECK_EQ((int)fe.world_size, c->world);
        char want[32];
        snprintf(want, sizeof(want), "r%d.mrdcap", c->rank);
        CHECK_STREQ(fe.capture, want);
    }
    printf("deploy_rank_order: %zu cases\n", sizeof(cases) / sizeof(cases[0]));
    return 0;
}
