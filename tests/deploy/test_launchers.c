/* deploy_launchers: mrd_agentenv_scan (launcher/agentenv.c) finds the launchers of a job's
 * command, outermost first, as `meridian profile` and `meridian doctor` use them: mpirun /
 * mpiexec (rewritten with -x / -genv), srun and torchrun (their environment passes on), in
 * any nesting, torchrun also as `python -m torch.distributed.run`; and whether srun's
 * --export (or SLURM_EXPORT_ENV) keeps the environment behind. */
#include <stdlib.h>
#include <string.h>

#include "agentenv.h"
#include "check.h"

int main(void)
{
    struct mrd_launchers l;
    char *srun_torch[] = {
        "srun",    "-N", "2", "--ntasks-per-node=1", "/usr/bin/torchrun", "--nproc_per_node=8",
        "train.py"};
    unsetenv("SLURM_EXPORT_ENV");
    mrd_agentenv_scan(srun_torch, 7, &l);
    CHECK_EQ(l.n, 2);
    CHECK_EQ(l.kind[0], MRD_KIND_SLURM);
    CHECK_EQ(l.at[0], 0);
    CHECK_EQ(l.kind[1], MRD_KIND_TORCH);
    CHECK_EQ(l.at[1], 4);
    CHECK_EQ(l.mpi_style, MRD_LAUNCHER_NONE);
    CHECK_EQ(l.export_limited, 0);
    CHECK_EQ(mrd_agentenv_has(&l, MRD_KIND_TORCH), 4);
    CHECK_EQ(mrd_agentenv_has(&l, MRD_KIND_MPI), -1);

    char *mpi_torch[] = {"env",     "A=1", "mpirun.openmpi",        "-npernode", "1",
                         "python3", "-m",  "torch.distributed.run", "train.py"};
    mrd_agentenv_scan(mpi_torch, 9, &l);
    CHECK_EQ(l.n, 2);
    CHECK_EQ(l.kind[0], MRD_KIND_MPI);
    CHECK_EQ(l.at[0], 2);
    CHECK_EQ(l.mpi_style, MRD_LAUNCHER_OPENMPI);
    CHECK_EQ(l.kind[1], MRD_KIND_TORCH);

    char *hydra[] = {"mpiexec.hydra", "-n", "2", "./app"};
    mrd_agentenv_scan(hydra, 4, &l);
    CHECK_EQ(l.n, 1);
    CHECK_EQ(l.mpi_style, MRD_LAUNCHER_MPICH);

    char *plain[] = {"./train", "--steps", "10"};
    mrd_agentenv_scan(plain, 3, &l);
    CHECK_EQ(l.n, 0);

    /* srun's --export: ALL (with or without a list after it) passes the environment on */
    char *all[] = {"srun", "--export=ALL,FOO=1", "./app"};
    mrd_agentenv_scan(all, 3, &l);
    CHECK_EQ(l.export_limited, 0);
    char *none[] = {"srun", "--export=NONE", "./app"};
    mrd_agentenv_scan(none, 3, &l);
    CHECK_EQ(l.export_limited, 1);
    char *list[] = {"srun", "--export", "PATH,HOME", "./app"};
    mrd_agentenv_scan(list, 4, &l);
    CHECK_EQ(l.export_limited, 1);
    setenv("SLURM_EXPORT_ENV", "NONE", 1);
    char *bare[] = {"srun", "./app"};
    mrd_agentenv_scan(bare, 2, &l);
    CHECK_EQ(l.export_limited, 1);
    mrd_agentenv_scan(all, 3, &l); /* the option overrides the variable */
    CHECK_EQ(l.export_limited, 0);
    unsetenv("SLURM_EXPORT_ENV");

    /* the existing MPI-only lookup is unchanged: torchrun is no MPI launcher */
    int style = -1;
    CHECK_EQ(mrd_agentenv_find_launcher(srun_torch, 7, &style), -1);
    return 0;
}
