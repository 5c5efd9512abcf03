/* analysis_agentenv: the launcher's side of the agent environment contract: which
 * variables a rank gets, how an mpirun / mpiexec command line is rewritten, and how the
 * agent libraries are located. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentenv.h"
#include "check.h"

static const char *value(const struct mrd_agentenv *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->name[i], name) == 0)
            return e->value[i];
    return NULL;
}

static void test_build(void)
{
    struct mrd_agentenv e;
    struct mrd_agentenv_config c = {.aggregator = "127.0.0.1:4000",
                                    .run_id = "R1",
                                    .secret_file = "/tmp/s",
                                    .agent_lib = "/x/libmeridian.so",
                                    .mpi_lib = "/x/libmeridian_mpi.so",
                                    .force = 0};
    setenv("MERIDIAN_QUEUE_BYTES", "1048576", 1);
    setenv("MERIDIAN_SECRET", "do-not-pass", 1);
    setenv("MERIDIAN_RUN_ID", "stale", 1); /* the launcher's own value must win */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("LD_PRELOAD", "/usr/lib/libfoo.so", 1);
    CHECK_OK(mrd_agentenv_build(&c, &e));
    CHECK_STREQ(value(&e, "MERIDIAN_AGGREGATOR"), "127.0.0.1:4000");
    CHECK_STREQ(value(&e, "MERIDIAN_RUN_ID"), "R1");
    CHECK_STREQ(value(&e, "MERIDIAN_SECRET_FILE"), "/tmp/s");
    CHECK_STREQ(value(&e, "CUDA_INJECTION64_PATH"), "/x/libmeridian.so");
    CHECK_STREQ(value(&e, "NCCL_PROFILER_PLUGIN"), "/x/libmeridian.so");
    CHECK_STREQ(value(&e, "NVTX_INJECTION64_PATH"), "/x/libmeridian.so");
    CHECK_STREQ(value(&e, "LD_PRELOAD"), "/x/libmeridian_mpi.so:/usr/lib/libfoo.so");
    CHECK_STREQ(value(&e, "MERIDIAN_QUEUE_BYTES"), "1048576");
    CHECK_STREQ(value(&e, "NCCL_NVLS_ENABLE"), "0");
    CHECK(value(&e, "MERIDIAN_SECRET") == NULL);
    CHECK(value(&e, "MERIDIAN_FORCE") == NULL);
    mrd_agentenv_free(&e);

    /* the profiler API interposers come first, then the MPI wrappers, then the user's */
    c.profapi_lib = "/x/libmeridian_profapi.so";
    CHECK_OK(mrd_agentenv_build(&c, &e));
    CHECK_STREQ(value(&e, "LD_PRELOAD"),
                "/x/libmeridian_profapi.so:/x/libmeridian_mpi.so:/usr/lib/libfoo.so");
    mrd_agentenv_free(&e);
    c.mpi_lib = NULL;
    unsetenv("LD_PRELOAD");
    CHECK_OK(mrd_agentenv_build(&c, &e));
    CHECK_STREQ(value(&e, "LD_PRELOAD"), "/x/libmeridian_profapi.so");
    mrd_agentenv_free(&e);
    c.profapi_lib = NULL;
    setenv("LD_PRELOAD", "/usr/lib/libfoo.so", 1);

    /* no agent library: nothing points CUDA/NCCL/NVTX anywhere; no MPI lib: no preload */
    c.agent_lib = NULL;
    c.mpi_lib = NULL;
    c.force = 1;
    unsetenv("LD_PRELOAD");
    CHECK_OK(mrd_agentenv_build(&c, &e));
    CHECK(value(&e, "CUDA_INJECTION64_PATH") == NULL);
    CHECK(value(&e, "NCCL_PROFILER_PLUGIN") == NULL);
    CHECK(value(&e, "LD_PRELOAD") == NULL);
    CHECK_STREQ(value(&e, "MERIDIAN_FORCE"), "1");
    CHECK_OK(mrd_agentenv_apply(&e));
    CHECK_STREQ(getenv("MERIDIAN_RUN_ID"), "R1");
    mrd_agentenv_free(&e);

    /* record-only (meridian run --record-file, no aggregator): no aggregator and no secret
     * file are set, the record file is; one the user set is overridden */
    unsetenv("MERIDIAN_AGGREGATOR");
    unsetenv("MERIDIAN_SECRET_FILE");
    setenv("MERIDIAN_RECORD_FILE", "/old/stale.mrdcap", 1);
    c.aggregator = NULL;
    c.secret_file = NULL;
    c.record_file = "/scratch/r%r.mrdcap";
    CHECK_OK(mrd_agentenv_build(&c, &e));
    CHECK(value(&e, "MERIDIAN_AGGREGATOR") == NULL);
    CHECK(value(&e, "MERIDIAN_SECRET_FILE") == NULL);
    CHECK_STREQ(value(&e, "MERIDIAN_RECORD_FILE"), "/scratch/r%r.mrdcap");
    CHECK_STREQ(value(&e, "MERIDIAN_RUN_ID"), "R1");
    mrd_agentenv_free(&e);
    unsetenv("MERIDIAN_RECORD_FILE");
}

static void test_rewrite(void)
{
    char *cmd[] = {"env", "A=1", "/usr/bin/mpirun", "-np", "4", "./app", "--lr", "1", NULL};
    int style = -1;
    int at = mrd_agentenv_find_launcher(cmd, 8, &style);
    CHECK_EQ(at, 2);
    CHECK_EQ(style, MRD_LAUNCHER_OPENMPI);
    char *hydra[] = {"mpiexec.hydra", "-n", "2", "./app", NULL};
    CHECK_EQ(mrd_agentenv_find_launcher(hydra, 4, &style), 0);
    CHECK_EQ(style, MRD_LAUNCHER_MPICH);
    char *none[] = {"torchrun", "--nproc_per_node=2", "train.py", NULL};
    CHECK_EQ(mrd_agentenv_find_launcher(none, 3, &style), -1);
    CHECK_EQ(style, MRD_LAUNCHER_NONE);

    struct mrd_agentenv e;
    memset(&e, 0, sizeof(e));
    e.n = 2;
    e.name[0] = "MERIDIAN_RUN_ID";
    e.value[0] = "R1";
    e.name[1] = "LD_PRELOAD";
    e.value[1] = "/x/a.so";
    char **out = NULL;
    CHECK_OK(mrd_agentenv_rewrite(cmd, 8, at, MRD_LAUNCHER_OPENMPI, &e, &out));
    const char *want[] = {"env",
                          "A=1",
                          "/usr/bin/mpirun",
                          "-x",
                          "MERIDIAN_RUN_ID=R1",
                          "-x",
                          "LD_PRELOAD=/x/a.so",
                          "-np",
                          "4",
                          "./app",
                          "--lr",
                          "1",
                          NULL};
    for (int i = 0; want[i]; i++)
        CHECK_STREQ(out[i], want[i]);
    CHECK(out[12] == NULL);
    mrd_agentenv_free_argv(out);

    CHECK_OK(mrd_agentenv_rewrite(hydra, 4, 0, MRD_LAUNCHER_MPICH, &e, &out));
    const char *want2[] = {"mpiexec.hydra",
                           "-genv",
                           "MERIDIAN_RUN_ID",
                           "R1",
                           "-genv",
                           "LD_PRELOAD",
                           "/x/a.so",
                           "-n",
                           "2",
                           "./app",
                           NULL};
    for (int i = 0; want2[i]; i++)
        CHECK_STREQ(out[i], want2[i]);
    CHECK(out[10] == NULL);
    mrd_agentenv_free_argv(out);
    CHECK_EQ(mrd_agentenv_rewrite(none, 3, -1, MRD_LAUNCHER_OPENMPI, &e, &out), -EINVAL);
}

static void test_locate(void)
{
    char out[4096], dir[4096];
    const char *rel[] = {"no-such-file", NULL};
    CHECK_OK(mrd_agentenv_self_dir(dir, sizeof(dir)));
    CHECK_EQ(mrd_agentenv_locate("/nonexistent/libx.so", NULL, rel, NULL, 0, "x", out, sizeof(out)),
             -ENOENT);
    CHECK_EQ(mrd_agentenv_locate(NULL, NULL, rel, NULL, 0, "x", out, sizeof(out)), -ENOENT);
    /* the test binary itself, found relative to its own folder */
    const char *self[] = {"test_analysis_agentenv", NULL};
    CHECK_OK(mrd_agentenv_locate(NULL, NULL, self, NULL, 0, "x", out, sizeof(out)));
    CHECK(strncmp(out, dir, strlen(dir)) == 0);
    /* $PATH search and an environment override */
    CHECK_OK(mrd_agentenv_locate(NULL, NULL, NULL, NULL, 1, "sh", out, sizeof(out)));
    CHECK(out[0] == '/');
    setenv("MRD_TEST_LIB", "/bin/sh", 1);
    CHECK_OK(mrd_agentenv_locate(NULL, "MRD_TEST_LIB", rel, NULL, 0, "x", out, sizeof(out)));
    CHECK(strstr(out, "sh") != NULL);
}

int main(void)
{
    test_build();
    test_rewrite();
    test_locate();
    printf("analysis_agentenv: ok\n");
    return 0;
}
