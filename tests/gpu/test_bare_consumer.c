/* test_bare_consumer: CI check of libbare_consumer.so, the overhead benchmark's floor.
 *
 * The library is meant to be dlopened by the CUDA driver inside someone else's process,
 * so what CI can check without a GPU is what would break that process: it must load with
 * RTLD_NOW (no unresolved symbols), export InitializeInjection and hide its internals,
 * accept a second InitializeInjection call, export bare_consumer_attach (the same set-up
 * called by a workload part-way through its run: -1 when nothing was enabled) and
 * bare_consumer_detach / bare_consumer_attached (a detach while detached refused), and, where CUDA/CUPTI cannot start (no driver
 * here), still return 1, print its `kinds=` line and let the process exit 0. The real
 * records are checked on the GPU host (tests/gpu/run_on_gpu_host.sh, stage workloads).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

typedef int (*init_fn)(void);

/* Runs entry (InitializeInjection or bare_consumer_attach) twice in a child with the given
 * kinds, the child exiting 4 unless both calls return `want` (then 0); returns the child's
 * stderr (caller frees) and its wait status through *status. */
static char *run_child(const char *entry, int want, const char *kinds, int *status)
{
    int fds[2];
    pid_t pid;
    char *out = calloc(1, 8192);
    size_t len = 0;
    ssize_t n;

    CHECK(out != NULL);
    CHECK_OK(pipe(fds));
    pid = fork();
    CHECK_GE(pid, 0);
    if (pid == 0) {
        void *h;
        init_fn init;

        alarm(20); /* a hang in CUPTI without a driver must fail the test, not stall it */
        dup2(fds[1], 2);
        close(fds[0]);
        if (kinds)
            setenv("BARE_CONSUMER_KINDS", kinds, 1);
        else
            unsetenv("BARE_CONSUMER_KINDS");
        setenv("BARE_CONSUMER_POOL", "2", 1); /* keep the pre-faulted pool small here */
        h = dlopen(BARE_CONSUMER_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            _exit(3);
        init = (init_fn)(uintptr_t)dlsym(h, entry);
        if (!init || init() != want || init() != want)
            _exit(4);
        exit(0); /* runs the library's atexit flush */
    }
    close(fds[1]);
    while ((n = read(fds[0], out + len, 8191 - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    CHECK_EQ(waitpid(pid, status, 0), pid);
    return out;
}

int main(void)
{
    void *h = dlopen(BARE_CONSUMER_PATH, RTLD_NOW | RTLD_LOCAL);
    char *err;
    int status = 0;

    if (!h)
        fprintf(stderr, "dlopen: %s\n", dlerror());
    CHECK(h != NULL);
    CHECK(dlsym(h, "InitializeInjection") != NULL);
    CHECK(dlsym(h, "bare_consumer_attach") != NULL);
    {
        init_fn detach = (init_fn)(uintptr_t)dlsym(h, "bare_consumer_detach");
        init_fn attached = (init_fn)(uintptr_t)dlsym(h, "bare_consumer_attached");
        CHECK(detach != NULL && attached != NULL);
        CHECK_EQ(attached(), 0);
        CHECK_EQ(detach(), -1); /* nothing attached: refused without touching CUPTI */
    }
    CHECK(dlsym(h, "buffer_requested") == NULL);
    CHECK(dlsym(h, "timestamp_cb") == NULL);
    CHECK(dlsym(h, "bc") == NULL);
    dlclose(h);

    err = run_child("InitializeInjection", 1, "none", &status);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK(strstr(err, "bare_consumer: kinds=none\n") != NULL);
    free(err);

    /* Attached by the workload: nothing enabled is -1, and the second call does nothing. */
    err = run_child("bare_consumer_attach", -1, "none", &status);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK(strstr(err, "bare_consumer: kinds=none\n") != NULL);
    CHECK(strstr(strstr(err, "kinds=none") + 1, "kinds=") == NULL);
    free(err);

    /* Default kinds where no GPU may exist: set-up errors are reported, never fatal. */
    err = run_child("InitializeInjection", 1, NULL, &status);
    fprintf(stderr, "child said:\n%s", err);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    CHECK(strstr(err, "bare_consumer: kinds=") != NULL);
    free(err);
    printf("test_bare_consumer: ok\n");
    return 0;
}
