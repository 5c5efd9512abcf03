/* `meridian window`: asks the meridiand of a running job for a window of steps captured in
 * full detail on every rank, now.
 *
 * Where it sits: beside a job started by `meridian profile`, whose meridiand listens on
 * the control socket DB.ctl (aggregator/ingest/control.h has the line protocol). This is
 * its client: one connection, one request line, one reply line printed as it came. The
 * steps are chosen by meridiand (aggregator/ingest/winctl.h) and reach the agents in
 * their clock replies. Main thread only; bounded by a 10 s reply deadline.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "control.h"
#include "error.h"
#include "opts.h"
#include "steps.h"
#include "winctl.h"

#define REPLY_TIMEOUT_MS 10000

static void window_usage(FILE *f)
{
    fprintf(f,
            "usage: meridian window DB [--length N] [--control PATH]\n"
            "\n"
            "Asks the meridiand of a running `meridian profile` job (database DB) for a window:\n"
            "N consecutive steps (NVTX step ranges, or the collective-counted steps of\n"
            "--step-collective; default %d) captured in full detail (CUPTI\n"
            "attached) on every rank of the steady tier, on the same step numbers everywhere.\n"
            "meridiand picks the first step: the highest step any rank has begun, plus a margin\n"
            "(at least 2 steps, more when steps are shorter than the agents' probe interval) so\n"
            "that every rank learns of the window before it reaches it; the window is in the\n"
            "database and the report like the windows of --windows.\n"
            "\n"
            "  --length N       steps in the window (1 to %d, default %d)\n"
            "  --control PATH   meridiand's control socket (default DB%s; a meridiand started\n"
            "                   by hand listens where its --control PATH says)\n"
            "  -h, --help       this text\n"
            "\n"
            "Prints meridiand's answer, one line: \"ok id=N steps=A-B margin=M ranks=R\" (R: the\n"
            "ranks reporting steps), or \"error REASON\", e.g. when no rank has reported a step\n"
            "yet (the full tier, or no steps: no NVTX step ranges and no --step-collective)\n"
            "or %d windows are pending already.\n"
            "A sharded run (profile --shards) has no control socket.\n"
            "\n"
            "Exit status: 0 when the window was opened, 1 on an error answer or when no\n"
            "meridiand answers, 2 on a usage error.\n",
            MRD_CONTROL_DEFAULT_LENGTH, MRD_WINCTL_LENGTH_MAX, MRD_CONTROL_DEFAULT_LENGTH,
            MRD_CONTROL_SUFFIX, MRD_WINDOW_REQUESTS_MAX);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects to the control socket at path; returns the fd, or -1 (reported, naming db). */
static int connect_control(const char *path, const char *db)
{
    struct sockaddr_un sa;
    socklen_t len;
    struct stat st;
    int dirfd = -1;
    if (stat(path, &st) < 0) {
        if (errno == ENOENT)
            fprintf(stderr,
                    "meridian window: no running meridiand for %s: %s does not exist (it exists "
                    "while `meridian profile` runs the job; a sharded run has none; a meridiand "
                    "started by hand needs --control PATH)\n",
                    db, path);
        else
            fprintf(stderr, "meridian window: no running meridiand for %s: %s: %s\n", db, path,
                    mrd_strerror(-errno));
        return -1;
    }
    int rc = mrd_control_sockaddr(path, &sa, &len, &dirfd);
    if (rc < 0) {
        fprintf(stderr, "meridian window: %s: %s\n", path, mrd_strerror(rc));
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) < 0) {
        int e = errno;
        close(fd);
        fd = -1;
        if (e == ECONNREFUSED || e == ENOTSOCK)
            fprintf(stderr,
                    "meridian window: no running meridiand for %s: nothing listens on %s (left "
                    "by a meridiand that was killed?)\n",
                    db, path);
        else
            fprintf(stderr, "meridian window: cannot connect to %s: %s\n", path, mrd_strerror(-e));
    } else if (fd < 0) {
        fprintf(stderr, "meridian window: socket: %s\n", mrd_strerror(-errno));
    }
    if (dirfd >= 0)
        close(dirfd);
    return fd;
}

/* Reads one reply line into buf (at most n - 1 bytes, newline removed) within the
 * deadline. Returns 0, or -1 (reported). */
static int read_reply(int fd, char *buf, size_t n, const char *path)
{
    size_t got = 0;
    int64_t deadline = mono_ms() + REPLY_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - mono_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            fprintf(stderr, "meridian window: no answer from %s within %d s\n", path,
                    REPLY_TIMEOUT_MS / 1000);
            return -1;
        }
        ssize_t r = recv(fd, buf + got, n - 1 - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "meridian window: reading %s: %s\n", path, mrd_strerror(-errno));
            return -1;
        }
        got += (size_t)r;
        buf[got] = '\0';
        char *nl = strchr(buf, '\n');
        if (nl) {
            *nl = '\0';
            return 0;
        }
        if (r == 0 || got == n - 1) {
            fprintf(stderr, "meridian window: %s from %s\n",
                    r == 0 ? "no complete answer" : "an answer too long", path);
            return -1;
        }
    }
}

/* --length N into the unsigned long long at dest. */
static int apply_length(const struct mrd_opt *opt, const char *arg, const char *who)
{
    char *end;
    errno = 0;
    unsigned long long length = strtoull(arg, &end, 10);
    if (errno || *end || arg[0] < '0' || arg[0] > '9' || length < 1 ||
        length > MRD_WINCTL_LENGTH_MAX) {
        fprintf(stderr, "%s: --length wants 1 to %d steps\n", who, MRD_WINCTL_LENGTH_MAX);
        return -EINVAL;
    }
    *(unsigned long long *)opt->dest = length;
    return 0;
}

int mrd_cli_window(int argc, char **argv)
{
    const char *control = NULL, *db = NULL;
    unsigned long long length = MRD_CONTROL_DEFAULT_LENGTH;
    char path[PATH_MAX], line[MRD_CONTROL_LINE_MAX], reply[1024];
    const struct mrd_opt opts[] = {MRD_OPT_WITH("length", apply_length, &length),
                                   MRD_OPT_TEXT("control", &control)};
    int first =
        mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), 0, "meridian window", window_usage);
    if (first <= 0)
        return first == 0 ? 0 : 2;
    if (first < argc)
        db = argv[first++];
    if (first < argc || (!db && !control)) {
        fprintf(stderr, "meridian window: give one database, or --control PATH (see --help)\n");
        return 2;
    }
    if (control)
        snprintf(path, sizeof(path), "%s", control);
    else if (snprintf(path, sizeof(path), "%s%s", db, MRD_CONTROL_SUFFIX) >= (int)sizeof(path)) {
        fprintf(stderr, "meridian window: the path %s%s is too long\n", db, MRD_CONTROL_SUFFIX);
        return 2;
    }
    int fd = connect_control(path, db ? db : path);
    if (fd < 0)
        return 1;
    int n = snprintf(line, sizeof(line), "window %llu\n", length);
    int rc = send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "meridian window: writing to %s: %s\n", path, mrd_strerror(-errno));
    else
        rc = read_reply(fd, reply, sizeof(reply), path);
    close(fd);
    if (rc < 0)
        return 1;
    printf("%s\n", reply);
    return strncmp(reply, "ok ", 3) == 0 ? 0 : 1;
}
