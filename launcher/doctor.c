/* `meridian doctor`: checks that this machine can run a profiled job, and says what to fix.
 *
 * Where it sits: a standalone diagnostic of the launcher; touches nothing persistent.
 * It finds meridiand and the agent libraries the way `profile` does, dlopens the agent
 * (its constructors only read the environment) and checks the entry points CUDA, NCCL and
 * NVTX look for (and the exports of the profiler API interposers, libmeridian_profapi.so),
 * loads CUPTI and NCCL to read their versions, looks for mpirun, for
 * another profiler already injected into this environment, and binds a loopback port.
 * Given the job's command (`meridian doctor -- srun ... torchrun ...`) it names the
 * launchers found in it, how the agent's variables will reach the ranks and which variable
 * each rank will take its rank from; with --nodes the command is a launcher prefix run with
 * a one-line check of the agent libraries appended, so every node it reaches says whether
 * the libraries are at the same path there (installed, or on a shared file system).
 * Each check prints one line: "ok", "warn" (profiling works with less) or "FAIL".
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentenv.h"
#include "cli.h"
#include "error.h"

#ifndef MRD_CUDA_ROOT_DIR
#define MRD_CUDA_ROOT_DIR "/usr/local/cuda"
#endif

enum { OK, WARN, FAIL };
static int g_fails, g_warns;

static void report(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int level, const char *fmt, ...)
{
    va_list ap;
    static const char *const tag[] = {"ok  ", "warn", "FAIL"};
    printf("[%s] ", tag[level]);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    g_fails += level == FAIL;
    g_warns += level == WARN;
}

/* dlopen the first name that loads; *which gets it. */
static void *open_any(const char *const *names, const char **which)
{
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *which = names[i];
            return h;
        }
    }
    return NULL;
}

static void check_daemon(void)
{
    char path[PATH_MAX];
    if (mrd_agentenv_find_daemon(NULL, path, sizeof(path)) == 0)
        report(OK, "meridiand: %s", path);
    else
        report(FAIL, "meridiand not found (build it, or set MERIDIAN_DAEMON)");
}

static void check_agent(const char *explicit_path)
{
    static const struct {
        const char *sym;
        int level;
        const char *what;
    } syms[] = {
        {"InitializeInjection", FAIL, "CUDA injection entry (CUDA_INJECTION64_PATH)"},
        {"ncclProfiler_v5", FAIL, "NCCL 2.28 profiler plugin"},
        {"ncclProfiler_v4", WARN, "NCCL 2.27 profiler plugin"},
        {"ncclProfiler_v6", WARN, "NCCL 2.29+ profiler plugin"},
        {"InitializeInjectionNvtx2", WARN, "NVTX injection entry (NVTX_INJECTION64_PATH)"},
    };
    char path[PATH_MAX];
    if (mrd_agentenv_find_agent(explicit_path, path, sizeof(path)) != 0) {
        report(FAIL, "libmeridian.so not found (build the agent, or give --agent-lib)");
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        report(FAIL, "libmeridian.so at %s does not load: %s", path, dlerror());
        return;
    }
    report(OK, "libmeridian.so: %s", path);
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        if (dlsym(h, syms[i].sym))
            report(OK, "  exports %s (%s)", syms[i].sym, syms[i].what);
        else
            report(syms[i].level, "  does not export %s (%s)", syms[i].sym, syms[i].what);
    }
    /* not dlclosed: an injected library is never unloaded */
    if (mrd_agentenv_find_mpi(NULL, path, sizeof(path)) == 0)
        report(OK, "MPI wrappers: %s", path);
    else
        report(WARN, "libmeridian_mpi.so not found: MPI calls will not be captured");
}

/* libmeridian_profapi.so, which `profile` preloads into every rank that gets the agent:
 * found, loads, and exports the four functions it interposes on (the application's
 * cudaProfilerStart/Stop and cuProfilerStart/Stop, which open profiler_api windows).
 * Without it profiling works, blind to those calls: a warning, never a failure. */
static void check_profapi(void)
{
    static const char *const syms[] = {"cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart",
                                       "cuProfilerStop"};
    char path[PATH_MAX];
    if (mrd_agentenv_find_profapi(NULL, path, sizeof(path)) != 0) {
        report(WARN, "libmeridian_profapi.so not found (set MERIDIAN_PROFAPI_LIB): "
                     "cudaProfilerStart/Stop will not open windows");
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        report(WARN,
               "libmeridian_profapi.so at %s does not load: %s (its calls will not "
               "open windows)",
               path, dlerror());
        return;
    }
    report(OK, "profiler API interposers: %s", path);
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        if (dlsym(h, syms[i]))
            report(OK, "  exports %s", syms[i]);
        else
            report(WARN, "  does not export %s: the application's %s will not be seen", syms[i],
                   syms[i]);
    }
    /* not dlclosed, like the agent: loaded once per doctor run */
}

static void check_cuda(void)
{
    static const char *const drv[] = {"libcuda.so.1", NULL};
    static const char *const cupti[] = {"libcupti.so", "libcupti.so.13",
                                        MRD_CUDA_ROOT_DIR "/lib64/libcupti.so",
                                        MRD_CUDA_ROOT_DIR "/extras/CUPTI/lib64/libcupti.so", NULL};
    const char *which = NULL;
    void *h = open_any(drv, &which);
    if (h) {
        int (*get)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
        int v = 0;
        if (get && get(&v) == 0)
            report(OK, "CUDA driver: %s (CUDA %d.%d)", which, v / 1000, (v % 1000) / 10);
        else
            report(OK, "CUDA driver: %s", which);
    } else {
        report(WARN, "no CUDA driver (libcuda.so.1): no GPU capture on this machine");
    }
    h = open_any(cupti, &which);
    if (!h) {
        report(FAIL, "CUPTI not found (libcupti.so; add %s/lib64 to LD_LIBRARY_PATH)",
               MRD_CUDA_ROOT_DIR);
        return;
    }
    int (*ver)(uint32_t *) = (int (*)(uint32_t *))dlsym(h, "cuptiGetVersion");
    uint32_t v = 0;
    if (ver && ver(&v) == 0)
        report(OK, "CUPTI: %s (API version %u)", which, v);
    else
        report(OK, "CUPTI: %s", which);
}

static void check_nccl(void)
{
    static const char *const names[] = {"libnccl.so.2", "libnccl.so",
                                        MRD_CUDA_ROOT_DIR "/lib64/libnccl.so.2", NULL};
    const char *which = NULL;
    void *h = open_any(names, &which);
    if (!h) {
        report(WARN, "NCCL (libnccl.so.2) not found by the dynamic loader: only jobs that "
                     "bring their own NCCL (e.g. PyTorch) will show collectives");
        return;
    }
    int (*get)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
    int v = 0;
    if (!get || get(&v) != 0) {
        report(WARN, "NCCL: %s (version unknown)", which);
        return;
    }
    int major = v / 10000, minor = (v % 10000) / 100, patch = v % 100;
    report(major > 2 || (major == 2 && minor >= 27) ? OK : WARN, "NCCL: %s version %d.%d.%d%s",
           which, major, minor, patch,
           major == 2 && minor < 27 ? " (profiler plugin v4+ needs 2.27 or later)" : "");
}

static void check_mpirun(void)
{
    char path[PATH_MAX], line[256] = "";
    if (mrd_agentenv_locate(NULL, NULL, NULL, NULL, 1, "mpirun", path, sizeof(path)) != 0) {
        report(WARN, "mpirun not in PATH (needed for `meridian profile -- mpirun ...`)");
        return;
    }
    FILE *p = popen("mpirun --version 2>&1", "r");
    if (p) {
        if (!fgets(line, sizeof(line), p))
            line[0] = '\0';
        pclose(p);
        line[strcspn(line, "\n")] = '\0';
    }
    report(OK, "mpirun: %s (%s)", path, line[0] ? line : "version unknown");
}

/* The launchers of `command` (doctor -- COMMAND): found in PATH, how the variables reach
 * the ranks, where each rank's identity comes from. */
static void check_command(char **cmd, int n, const char *agent_opt)
{
    static const char *const how[] = {
        [MRD_KIND_MPI] = "`-x NAME=VALUE` (Open MPI) / `-genv NAME VALUE` (MPICH) inserted "
                         "after it",
        [MRD_KIND_SLURM] = "srun's environment, which it forwards to every task "
                           "(--export=ALL, its default)",
        [MRD_KIND_TORCH] = "torchrun's environment, which it passes to every worker",
    };
    struct mrd_launchers ls;
    char path[PATH_MAX], agent[PATH_MAX], mpi[PATH_MAX];
    mrd_agentenv_scan(cmd, n, &ls);
    if (ls.n == 0)
        report(WARN, "no launcher (mpirun, mpiexec, srun, torchrun) in the command: only its "
                     "own process and children that set a rank variable are ranks "
                     "(meridian profile --single makes one process rank 0)");
    for (int i = 0; i < ls.n; i++) {
        const char *word = cmd[ls.at[i]];
        int found = strchr(word, '/') ? access(word, X_OK) == 0
                                      : mrd_agentenv_locate(NULL, NULL, NULL, NULL, 1, word, path,
                                                            sizeof(path)) == 0;
        if (!found)
            report(FAIL, "launcher %s: not found in PATH", word);
        else if (i == 0 || ls.kind[0] != MRD_KIND_MPI)
            report(OK, "launcher %s: the agent's variables reach the ranks through %s", word,
                   i == 0 ? how[ls.kind[i]] : "the environment of the launcher around it");
        else
            report(OK, "launcher %s: inherits the variables mpirun passes on", word);
    }
    if (mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0 && ls.export_limited)
        report(FAIL, "srun --export (or SLURM_EXPORT_ENV) does not start with ALL: the agent's "
                     "variables stay behind (use --export=ALL,...)");
    int torch = mrd_agentenv_has(&ls, MRD_KIND_TORCH) >= 0;
    int have_agent = mrd_agentenv_find_agent(agent_opt, agent, sizeof(agent)) == 0;
    int have_mpi = !torch && (ls.mpi_style || mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0) &&
                   mrd_agentenv_find_mpi(NULL, mpi, sizeof(mpi)) == 0;
    struct mrd_agentenv_config ec = {.aggregator = "HOST:PORT",
                                     .run_id = "RUN",
                                     .secret_file = "SECRET",
                                     .agent_lib = have_agent ? agent : NULL,
                                     .mpi_lib = have_mpi ? mpi : NULL};
    struct mrd_agentenv env;
    if (mrd_agentenv_build(&ec, &env) == 0) {
        char line[2048];
        size_t len = 0;
        for (int i = 0; i < env.n && len < sizeof(line); i++)
            len +=
                (size_t)snprintf(line + len, sizeof(line) - len, "%s%s", i ? " " : "", env.name[i]);
        report(OK, "ranks will receive: %s", line);
        mrd_agentenv_free(&env);
    }
    if (torch)
        report(OK,
               "rank: torchrun's RANK, LOCAL_RANK, WORLD_SIZE (all three set: they win "
               "over %s, which every worker of a node shares)",
               mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0 ? "SLURM_PROCID"
                                                          : "the outer launcher's rank");
    else if (ls.mpi_style)
        report(OK, "rank: OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK (MPICH)");
    else if (mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0)
        report(OK, "rank: SLURM_PROCID (PMIX_RANK / PMI_RANK first with srun --mpi=pmix/pmi2)");
}

/* --nodes: runs prefix + `sh -c CHECK` and reads one line per task. Each task says whether
 * the agent libraries (libmeridian.so, the profiler API interposers libmeridian_profapi.so
 * that `profile` preloads, and the MPI wrappers when found here) exist at this machine's
 * paths on its node. */
static void check_nodes(char **prefix, int n, const char *agent_opt)
{
    char agent[PATH_MAX], mpi[PATH_MAX] = "", profapi[PATH_MAX] = "", script[4 * PATH_MAX];
    char line[PATH_MAX + 128];
    int fds[2], ok = 0, bad = 0, st = 0;
    if (mrd_agentenv_find_agent(agent_opt, agent, sizeof(agent)) != 0) {
        report(FAIL, "nodes: libmeridian.so not found here, nothing to look for");
        return;
    }
    mrd_agentenv_find_mpi(NULL, mpi, sizeof(mpi));
    mrd_agentenv_find_profapi(NULL, profapi, sizeof(profapi));
    snprintf(script, sizeof(script),
             "h=$(hostname); for f in '%s' '%s' '%s'; do [ -z \"$f\" ] && continue; "
             "if [ -r \"$f\" ]; then echo \"meridian-node $h ok $f\"; "
             "else echo \"meridian-node $h missing $f\"; fi; done",
             agent, profapi, mpi);
    char **argv = calloc((size_t)n + 4, sizeof(char *));
    if (!argv || pipe(fds) != 0) {
        free(argv);
        report(FAIL, "nodes: %s", mrd_strerror(-errno));
        return;
    }
    memcpy(argv, prefix, (size_t)n * sizeof(char *));
    argv[n] = "/bin/sh";
    argv[n + 1] = "-c";
    argv[n + 2] = script;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
    while (f && fgets(line, sizeof(line), f)) {
        char host[256], what[16], file[PATH_MAX];
        if (sscanf(line, "meridian-node %255s %15s %4095s", host, what, file) != 3)
            continue;
        int present = strcmp(what, "ok") == 0;
        report(present ? OK : FAIL, "node %s: %s %s", host, file,
               present ? "present" : "MISSING (install meridian there, or use a shared path)");
        ok += present;
        bad += !present;
    }
    if (f)
        fclose(f);
    else
        close(fds[0]);
    if (pid > 0)
        waitpid(pid, &st, 0);
    free(argv);
    if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || ok + bad == 0)
        report(FAIL, "nodes: `%s ... /bin/sh -c CHECK` %s", prefix[0],
               pid < 0         ? "could not start"
               : ok + bad == 0 ? "printed no check line"
                               : "failed");
}

static void check_other_profilers(void)
{
    /* the variables other tools set, and what each one means here */
    static const struct {
        const char *var;
        int ours_allowed;    /* a value naming libmeridian is meridian's own: no warning */
        const char *warning; /* printf format of the value */
    } others[] = {
        {"NSYS_PROFILING_SESSION_ID", 0,
         "running under Nsight Systems (NSYS_PROFILING_SESSION_ID=%s): it owns CUPTI, "
         "meridian's capture will stay out of the way"},
        {"CUDA_INJECTION64_PATH", 1,
         "CUDA_INJECTION64_PATH is already set (%s): another tool injects itself into CUDA; "
         "meridian profile replaces it for its job"},
        {"NCCL_PROFILER_PLUGIN", 1, "NCCL_PROFILER_PLUGIN is already set (%s)"},
    };
    int any = 0;
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        const char *v = getenv(others[i].var);
        if (!v || (others[i].ours_allowed && strstr(v, "libmeridian")))
            continue;
        report(WARN, others[i].warning, v);
        any = 1;
    }
    if (!any)
        report(OK, "no other profiler injected in this environment");
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    if (nvls)
        report(OK, "NCCL_NVLS_ENABLE=%s will be passed to the ranks", nvls);
}

static void check_loopback(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        report(FAIL, "cannot listen on 127.0.0.1: %s", mrd_strerror(-errno));
    else
        report(OK, "loopback port bindable (127.0.0.1:%u)", ntohs(a.sin_port));
    if (fd >= 0)
        close(fd);
    if (access(".", W_OK) != 0)
        report(WARN, "this folder is not writable: give `meridian profile -o DB`");
}

int mrd_cli_doctor(int argc, char **argv)
{
    const char *agent = NULL;
    int nodes = 0, cmd = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            puts("usage: meridian doctor [--agent-lib PATH] [--nodes] [-- COMMAND...]\n\n"
                 "Checks this machine for profiling: meridiand and the agent libraries found,\n"
                 "libmeridian.so loads and exports the CUDA injection, NCCL profiler (v4, v5,\n"
                 "v6) and NVTX injection entry points, libmeridian_profapi.so loads and exports\n"
                 "cudaProfilerStart/Stop and cuProfilerStart/Stop (warn only), CUDA driver and\n"
                 "CUPTI present, NCCL version, mpirun present, no other profiler already injected\n"
                 "(NSYS_PROFILING_SESSION_ID, CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN),\n"
                 "a loopback port bindable. One line per check: ok, warn or FAIL.\n\n"
                 "-- COMMAND   the job's command as given to `meridian profile`: the launchers\n"
                 "             in it (mpirun, mpiexec, srun, torchrun) found in PATH, how the\n"
                 "             agent's variables will reach the ranks, which ones they are,\n"
                 "             and which variable each rank takes its rank from\n"
                 "--nodes      COMMAND is a launcher prefix reaching every node, e.g.\n"
                 "             `meridian doctor --nodes -- srun -N 4 --ntasks-per-node=1`:\n"
                 "             each task reports whether the agent libraries (libmeridian.so,\n"
                 "             libmeridian_profapi.so, libmeridian_mpi.so) are at the\n"
                 "             paths found here (installed alike, or a shared path)\n\n"
                 "Exit status: 0 when nothing FAILed, 1 otherwise.");
            return 0;
        }
        if (strcmp(argv[i], "--agent-lib") == 0 && i + 1 < argc) {
            agent = argv[++i];
        } else if (strcmp(argv[i], "--nodes") == 0) {
            nodes = 1;
        } else if (strcmp(argv[i], "--") == 0) {
            cmd = i + 1;
            break;
        } else {
            fprintf(stderr, "meridian doctor: unknown argument '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (nodes && cmd >= argc) {
        fprintf(stderr, "meridian doctor: --nodes needs a launcher prefix after -- "
                        "(e.g. -- srun -N 2 --ntasks-per-node=1)\n");
        return 2;
    }
    check_daemon();
    check_agent(agent);
    check_profapi();
    check_cuda();
    check_nccl();
    check_mpirun();
    check_other_profilers();
    check_loopback();
    if (cmd < argc && !nodes)
        check_command(argv + cmd, argc - cmd, agent);
    if (nodes)
        check_nodes(argv + cmd, argc - cmd, agent);
    printf("%d check(s) failed, %d warning(s)\n", g_fails, g_warns);
    return g_fails ? 1 : 0;
}
