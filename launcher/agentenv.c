/* The agent's environment for a profiled job, and the mpirun rewrite (see agentenv.h).
 *
 * Why -x NAME=VALUE instead of exporting into mpirun's own environment: Open MPI starts
 * remote ranks through its daemons and forwards only what -x names; giving the value on
 * the command line also keeps LD_PRELOAD (the MPI wrappers) out of mpirun and its
 * daemons, which are not ranks. Ranks started on the local node see the same values.
 */
#include "agentenv.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* Build-tree locations, compiled in by launcher/CMakeLists.txt ("" when not built). */
#ifndef MRD_BUILTIN_DAEMON
#define MRD_BUILTIN_DAEMON ""
#endif
#ifndef MRD_BUILTIN_AGENT
#define MRD_BUILTIN_AGENT ""
#endif
#ifndef MRD_BUILTIN_MPI
#define MRD_BUILTIN_MPI ""
#endif
#ifndef MRD_BUILTIN_PROFAPI
#define MRD_BUILTIN_PROFAPI ""
#endif

static const char *const daemon_rel[] = {"meridiand", "../sbin/meridiand",
                                         "../libexec/meridian/meridiand",
                                         "../aggregator/daemon/meridiand", NULL};
static const char *const agent_rel[] = {"libmeridian.so", "../lib/libmeridian.so",
                                        "../lib/meridian/libmeridian.so", "../agent/libmeridian.so",
                                        NULL};
static const char *const mpi_rel[] = {"libmeridian_mpi.so", "../lib/libmeridian_mpi.so",
                                      "../lib/meridian/libmeridian_mpi.so",
                                      "../agent/mpi/libmeridian_mpi.so", NULL};
static const char *const profapi_rel[] = {"libmeridian_profapi.so", "../lib/libmeridian_profapi.so",
                                          "../lib/meridian/libmeridian_profapi.so",
                                          "../agent/profapi/libmeridian_profapi.so", NULL};

static int add(struct mrd_agentenv *e, const char *name, const char *value)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->name[i], name) == 0)
            return 0; /* first setting wins */
    if (e->n >= MRD_AGENTENV_MAX)
        return -E2BIG;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return -ENOMEM;
    }
    e->name[e->n] = n;
    e->value[e->n] = v;
    e->n++;
    return 0;
}

void mrd_agentenv_free(struct mrd_agentenv *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n; i++) {
        free(e->name[i]);
        free(e->value[i]);
    }
    e->n = 0;
}

int mrd_agentenv_build(const struct mrd_agentenv_config *c, struct mrd_agentenv *e)
{
    int rc = 0;
    memset(e, 0, sizeof(*e));
    if ((c->aggregator && (rc = add(e, "MERIDIAN_AGGREGATOR", c->aggregator)) < 0) ||
        (rc = add(e, "MERIDIAN_RUN_ID", c->run_id)) < 0 ||
        (c->secret_file && (rc = add(e, "MERIDIAN_SECRET_FILE", c->secret_file)) < 0) ||
        (c->record_file && (rc = add(e, "MERIDIAN_RECORD_FILE", c->record_file)) < 0))
        goto fail;
    if (c->agent_lib && *c->agent_lib &&
        ((rc = add(e, "CUDA_INJECTION64_PATH", c->agent_lib)) < 0 ||
         (rc = add(e, "NCCL_PROFILER_PLUGIN", c->agent_lib)) < 0 ||
         (rc = add(e, "NVTX_INJECTION64_PATH", c->agent_lib)) < 0))
        goto fail;
    if (c->force && (rc = add(e, "MERIDIAN_FORCE", "1")) < 0)
        goto fail;
    if (c->mpi_lib || c->profapi_lib) {
        const char *old = getenv("LD_PRELOAD"), *pa = c->profapi_lib, *mpi = c->mpi_lib;
        size_t len = (pa ? strlen(pa) : 0) + (mpi ? strlen(mpi) : 0) + (old ? strlen(old) : 0) + 3;
        char *v = malloc(len);
        if (!v) {
            rc = -ENOMEM;
            goto fail;
        }
        snprintf(v, len, "%s%s%s%s%s", pa ? pa : "", pa && mpi ? ":" : "", mpi ? mpi : "",
                 old && *old ? ":" : "", old ? old : "");
        rc = add(e, "LD_PRELOAD", v);
        free(v);
        if (rc < 0)
            goto fail;
#if defined(__SANITIZE_ADDRESS__)
        /* an ASan build of the tree: the preloaded libraries need the ASan runtime, which
         * refuses to start unless it comes first in a process's library list */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[512];
        snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", asan ? asan : "",
                 asan && *asan ? ":" : "");
        if ((rc = add(e, "ASAN_OPTIONS", opts)) < 0)
            goto fail;
#endif
    }
    for (char **p = environ; p && *p; p++) {
        const char *eq = strchr(*p, '=');
        char name[128];
        if (!eq || (size_t)(eq - *p) >= sizeof(name))
            continue;
        memcpy(name, *p, (size_t)(eq - *p));
        name[eq - *p] = '\0';
        if (strcmp(name, "MERIDIAN_SECRET") == 0)
            continue; /* the secret travels as a file, never on a command line */
        if ((strncmp(name, "MERIDIAN_", 9) == 0 || strcmp(name, "NCCL_NVLS_ENABLE") == 0) &&
            (rc = add(e, name, eq + 1)) < 0)
            goto fail;
    }
    return 0;
fail:
    mrd_agentenv_free(e);
    return rc;
}

int mrd_agentenv_apply(const struct mrd_agentenv *e)
{
    for (int i = 0; i < e->n; i++)
        if (setenv(e->name[i], e->value[i], 1) != 0)
            return -errno;
    return 0;
}

int mrd_agentenv_find_launcher(char *const *argv, int argc, int *style)
{
    static const struct {
        const char *name;
        int style;
    } known[] = {
        {"mpirun", MRD_LAUNCHER_OPENMPI},          {"mpiexec", MRD_LAUNCHER_OPENMPI},
        {"orterun", MRD_LAUNCHER_OPENMPI},         {"mpirun.openmpi", MRD_LAUNCHER_OPENMPI},
        {"mpiexec.openmpi", MRD_LAUNCHER_OPENMPI}, {"mpirun.mpich", MRD_LAUNCHER_MPICH},
        {"mpiexec.mpich", MRD_LAUNCHER_MPICH},     {"mpiexec.hydra", MRD_LAUNCHER_MPICH},
    };
    *style = MRD_LAUNCHER_NONE;
    for (int i = 0; i < argc; i++) {
        const char *base = strrchr(argv[i], '/');
        base = base ? base + 1 : argv[i];
        for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
            if (strcmp(base, known[k].name) == 0) {
                *style = known[k].style;
                return i;
            }
        }
    }
    return -1;
}

/* srun's --export: "ALL", "ALL,..." and absent pass srun's environment on; NONE or a
 * list of names does not. */
static int export_limits(const char *v)
{
    return v && strncmp(v, "ALL", 3) != 0;
}

void mrd_agentenv_scan(char *const *argv, int argc, struct mrd_launchers *out)
{
    int style;
    memset(out, 0, sizeof(*out));
    out->export_limited = export_limits(getenv("SLURM_EXPORT_ENV"));
    for (int i = 0; i < argc && out->n < MRD_LAUNCHERS_MAX; i++) {
        const char *base = strrchr(argv[i], '/');
        int kind = 0;
        base = base ? base + 1 : argv[i];
        if (mrd_agentenv_find_launcher(argv + i, 1, &style) == 0) {
            kind = MRD_KIND_MPI;
            if (!out->mpi_style)
                out->mpi_style = style;
        } else if (strcmp(base, "srun") == 0) {
            kind = MRD_KIND_SLURM;
            for (int k = i + 1; k < argc; k++) {
                if (strncmp(argv[k], "--export=", 9) == 0)
                    out->export_limited = export_limits(argv[k] + 9);
                else if (strcmp(argv[k], "--export") == 0 && k + 1 < argc)
                    out->export_limited = export_limits(argv[k + 1]);
            }
        } else if (strcmp(base, "torchrun") == 0 || strcmp(base, "torch.distributed.run") == 0 ||
                   strcmp(base, "torch.distributed.launch") == 0) {
            kind = MRD_KIND_TORCH;
        }
        if (kind) {
            out->at[out->n] = i;
            out->kind[out->n++] = kind;
        }
    }
}

int mrd_agentenv_has(const struct mrd_launchers *l, int kind)
{
    for (int i = 0; i < l->n; i++)
        if (l->kind[i] == kind)
            return l->at[i];
    return -1;
}

void mrd_agentenv_free_argv(char **argv)
{
    if (!argv)
        return;
    /* the strings allocated by mrd_agentenv_rewrite follow the argv's NULL terminator */
    char **owned = argv;
    while (*owned)
        owned++;
    for (char **p = owned + 1; *p; p++)
        free(*p);
    free(argv);
}

int mrd_agentenv_rewrite(char *const *argv, int argc, int at, int style,
                         const struct mrd_agentenv *e, char ***out)
{
    int per = style == MRD_LAUNCHER_MPICH ? 3 : 2;
    int total = argc + per * e->n;
    /* layout: total argv entries, NULL, then the allocated strings, NULL */
    char **v = calloc((size_t)total + 1 + (size_t)e->n * 2 + 1, sizeof(char *));
    char **owned;
    int k = 0;
    if (!v)
        return -ENOMEM;
    if (at < 0 || at >= argc || style == MRD_LAUNCHER_NONE) {
        free(v);
        return -EINVAL;
    }
    owned = v + total + 1;
    for (int i = 0; i <= at; i++)
        v[k++] = argv[i];
    for (int i = 0; i < e->n; i++) {
        if (style == MRD_LAUNCHER_MPICH) {
            v[k++] = "-genv";
            v[k++] = e->name[i];
            v[k++] = e->value[i];
            continue;
        }
        size_t len = strlen(e->name[i]) + strlen(e->value[i]) + 2;
        char *s = malloc(len);
        if (!s) {
            for (char **o = v + total + 1; *o; o++)
                free(*o);
            free(v);
            return -ENOMEM;
        }
        snprintf(s, len, "%s=%s", e->name[i], e->value[i]);
        *owned++ = s;
        v[k++] = "-x";
        v[k++] = s;
    }
    for (int i = at + 1; i < argc; i++)
        v[k++] = argv[i];
    v[k] = NULL;
    *out = v;
    return 0;
}

int mrd_agentenv_self_dir(char *out, size_t n)
{
    char buf[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (len < 0)
        return -errno;
    buf[len] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if (snprintf(out, n, "%s", buf) >= (int)n)
        return -ENAMETOOLONG;
    return 0;
}

static int exists_abs(const char *path, char *out, size_t n)
{
    struct stat st;
    char *real;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return -ENOENT;
    real = realpath(path, NULL);
    if (!real)
        return -errno;
    int ok = snprintf(out, n, "%s", real) < (int)n;
    free(real);
    return ok ? 0 : -ENAMETOOLONG;
}

int mrd_agentenv_locate(const char *explicit_path, const char *env, const char *const *rel,
                        const char *builtin, int search_path, const char *file, char *out, size_t n)
{
    char dir[PATH_MAX], cand[PATH_MAX * 2];
    const char *ev = env ? getenv(env) : NULL;
    if (explicit_path)
        return exists_abs(explicit_path, out, n);
    if (ev && *ev)
        return exists_abs(ev, out, n);
    if (mrd_agentenv_self_dir(dir, sizeof(dir)) == 0) {
        for (int i = 0; rel && rel[i]; i++) {
            snprintf(cand, sizeof(cand), "%s/%s", dir, rel[i]);
            if (exists_abs(cand, out, n) == 0)
                return 0;
        }
    }
    if (builtin && *builtin && exists_abs(builtin, out, n) == 0)
        return 0;
    const char *path = search_path ? getenv("PATH") : NULL;
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, path, file);
        if (len && access(cand, X_OK) == 0 && exists_abs(cand, out, n) == 0)
            return 0;
        path = colon ? colon + 1 : NULL;
    }
    return -ENOENT;
}

int mrd_agentenv_find_daemon(const char *explicit_path, char *out, size_t n)
{
    return mrd_agentenv_locate(explicit_path, "MERIDIAN_DAEMON", daemon_rel, MRD_BUILTIN_DAEMON, 1,
                               "meridiand", out, n);
}

int mrd_agentenv_find_agent(const char *explicit_path, char *out, size_t n)
{
    return mrd_agentenv_locate(explicit_path, "MERIDIAN_AGENT_LIB", agent_rel, MRD_BUILTIN_AGENT, 0,
                               "libmeridian.so", out, n);
}

int mrd_agentenv_find_mpi(const char *explicit_path, char *out, size_t n)
{
    return mrd_agentenv_locate(explicit_path, "MERIDIAN_MPI_LIB", mpi_rel, MRD_BUILTIN_MPI, 0,
                               "libmeridian_mpi.so", out, n);
}

int mrd_agentenv_find_profapi(const char *explicit_path, char *out, size_t n)
{
    return mrd_agentenv_locate(explicit_path, "MERIDIAN_PROFAPI_LIB", profapi_rel,
                               MRD_BUILTIN_PROFAPI, 0, "libmeridian_profapi.so", out, n);
}

int mrd_agentenv_abs_path(const char *path, char *out, size_t n)
{
    char dir[PATH_MAX], *real;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
    else
        snprintf(dir, sizeof(dir), ".");
    real = realpath(dir, NULL);
    if (!real)
        return -errno;
    int ok = snprintf(out, n, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) < (int)n;
    free(real);
    return ok && *base ? 0 : -EINVAL;
}
