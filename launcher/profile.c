/* `meridian profile`: wrap a whole job (aggregator, environment, wait, finalize, report).
 *
 * Where it sits: the start of meridian's data flow: it creates the run (id, secret,
 * database), starts meridiand, hands every rank the agent's environment (agentenv.c),
 * runs the job, then stops meridiand, completes the database (finalize.c) and prints the
 * report (mrd_cli_render). With --shards N it starts N meridiand (one database each,
 * <db>.shard-K, same run and secret), hands the ranks the list of their addresses (rank R
 * sends to entry R % N), and after the job merges the shards into the requested database
 * (mrd_cli_merge_shards, merge.c) before finalizing it; the shard files are kept when
 * anything fails. The capture tier (steady with windows by default, or --full) is chosen
 * and checked while the options are read (profile_opts.c, the options and the tier) and
 * reaches the ranks as MERIDIAN_* variables. How the variables reach the ranks follows the
 * launchers in the command (agentenv.c): -x / -genv inserted after mpirun or mpiexec, the
 * environment for srun and torchrun, which pass it on.
 *
 * Never hang: the daemon has --daemon-timeout to come up and --stop-timeout to drain
 * (then SIGKILL, after which SQLite's WAL still holds every committed batch); the job may
 * be given --job-timeout (SIGTERM, then SIGKILL 10 s later). Signals: SIGTERM/SIGHUP to
 * meridian are forwarded to the job; Ctrl-C reaches the job through the terminal while
 * meridian survives it to finalize. meridiand runs in its own process group so Ctrl-C
 * does not stop it before the data is committed, and gets SIGTERM if meridian itself
 * dies (PR_SET_PDEATHSIG). One process, main thread only; the waits poll every 20-50 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentenv.h"
#include "cli.h"
#include "control.h"
#include "db.h"
#include "error.h"
#include "profile.h"
#include "runcfg.h"
#include "steps.h"

static volatile sig_atomic_t g_forward; /* signal to forward to the job, 0 = none */

static void on_signal(int sig)
{
    if (sig != SIGINT) /* Ctrl-C already reached the job through the terminal */
        g_forward = sig;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int random_bytes(unsigned char *buf, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    if (fd < 0)
        return -errno;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) {
            close(fd);
            return r < 0 ? -errno : -EIO;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

static void hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

/* "r20261130-012345-a1b2c3" */
static int make_run_id(char *out, size_t n)
{
    unsigned char rnd[3];
    char h[8];
    time_t t = time(NULL);
    struct tm tm;
    int rc = random_bytes(rnd, sizeof(rnd));
    if (rc < 0)
        return rc;
    hex(rnd, sizeof(rnd), h);
    gmtime_r(&t, &tm);
    snprintf(out, n, "r%04d%02d%02d-%02d%02d%02d-%s", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, h);
    return 0;
}

/* Writes a new random secret to `path` (created exclusively, mode 0600). */
static int write_secret(const char *path)
{
    unsigned char rnd[32];
    char h[65];
    int rc = random_bytes(rnd, sizeof(rnd));
    if (rc < 0)
        return rc;
    hex(rnd, sizeof(rnd), h);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    h[64] = '\n';
    rc = write(fd, h, 65) == 65 ? 0 : -EIO;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

/* One meridiand of the run (the only one without --shards). */
struct shard {
    pid_t pid; /* -1: not running (never started, or reaped) */
    int port;
    char db[PATH_MAX + 24], port_file[128], listen[300];
};

/* One run's names, paths and processes. */
struct run_state {
    char run_id[128], db[PATH_MAX], secret[PATH_MAX + 64], tmpdir[64];
    char ctl[PATH_MAX + 8]; /* meridiand's control socket, DB.ctl (`meridian window`) */
    char daemon[PATH_MAX], agent[PATH_MAX], mpi[PATH_MAX];
    char *aggregator; /* "host:port[,host:port...]", malloc'd */
    int have_agent, have_mpi, nshards;
    struct shard *sh; /* nshards, calloc'd */
};

/* "meridiand", or "meridiand (shard K)" in a sharded run: how messages name daemon k. */
static const char *dname(const struct run_state *s, int k, char *buf, size_t n)
{
    if (s->nshards == 1)
        return "meridiand";
    snprintf(buf, n, "meridiand (shard %d)", k);
    return buf;
}

/* Kills every daemon still running (with listening_only: only those not listening yet),
 * saying for each "meridian profile: <daemon> " + why (a format taking timeout_s), and
 * reaps it. Returns how many it killed. */
static int kill_left(struct run_state *s, int listening_only, const char *why, int timeout_s)
{
    char nb[32], msg[160];
    int n = 0;
    snprintf(msg, sizeof(msg), why, timeout_s);
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        if (d->pid < 0 || (listening_only && d->port > 0))
            continue;
        fprintf(stderr, "meridian profile: %s %s\n", dname(s, k, nb, sizeof(nb)), msg);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = -1;
        n++;
    }
    return n;
}

static void describe_exit(int st, const char **what, int *code)
{
    *what = WIFEXITED(st) ? "status" : "signal";
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st);
}

/* Forks and execs meridiand for shard k. Returns its pid, or -1 (reported). */
static pid_t spawn_daemon(const struct run_state *s, const struct profile_opts *o, int k)
{
    char shard_id[16];
    struct shard *d = &s->sh[k];
    const char *av[24] = {s->daemon,     "--db",          d->db,
                          "--listen",    d->listen,       "--run-id",
                          s->run_id,     "--secret-file", s->secret,
                          "--port-file", d->port_file,    o->verbose ? "--verbose" : "--quiet",
                          NULL};
    int n = 12;
    if (s->nshards > 1) { /* a single daemon is started exactly as before shards existed */
        snprintf(shard_id, sizeof(shard_id), "%d", k);
        av[n++] = "--shard-id";
        av[n++] = shard_id;
    } else { /* windows chosen by meridiand: one aggregator sees every rank's steps */
        /* meridiand's window options, passed on as given (profile_opts.c checked them) */
        const char *const passed[][2] = {{"--trigger-step-factor", o->trigger},
                                         {"--window-delay", o->wdelay},
                                         {"--window-duration", o->wduration},
                                         {"--trigger-skew", o->trigger_skew}};
        av[n++] = "--control";
        av[n++] = s->ctl;
        for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
            if (!passed[i][1])
                continue;
            av[n++] = passed[i][0];
            av[n++] = passed[i][1];
        }
    }
    av[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", mrd_strerror(-errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C on the job's terminal must not stop the aggregator */
        /* ... but if meridian itself dies, the daemon commits and exits instead of
         * lingering: SIGTERM is its clean stop */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1)
            _exit(1);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO); /* the "listening" line; we read the port file */
        }
        execv(s->daemon, (char *const *)av);
        fprintf(stderr, "meridian profile: cannot run %s: %s\n", s->daemon, mrd_strerror(-errno));
        _exit(127);
    }
    return pid;
}

/* Starts every shard's meridiand and waits, up to timeout_s for all of them together, for
 * their ports. Returns 0, or -1 (reported; daemons that never listened are reaped, the
 * others are left to stop_daemons). */
static int start_daemons(struct run_state *s, const struct profile_opts *o, int timeout_s)
{
    char nb[32];
    int listening = 0;
    for (int k = 0; k < s->nshards; k++)
        if ((s->sh[k].pid = spawn_daemon(s, o, k)) < 0)
            return -1;
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    while (listening < s->nshards && now_ms() < deadline) {
        for (int k = 0; k < s->nshards; k++) {
            struct shard *d = &s->sh[k];
            int st, code;
            const char *what;
            if (d->port > 0)
                continue;
            FILE *f = fopen(d->port_file, "r");
            if (f) {
                int ok = fscanf(f, "%d", &d->port) == 1 && d->port > 0;
                fclose(f);
                if (!ok)
                    d->port = 0;
                listening += ok;
                if (ok)
                    continue;
            }
            if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
                d->pid = -1;
                describe_exit(st, &what, &code);
                fprintf(stderr,
                        "meridian profile: %s exited (%s %d) before listening; "
                        "its messages are above\n",
                        dname(s, k, nb, sizeof(nb)), what, code);
                return -1;
            }
        }
        if (listening < s->nshards)
            nap_ms(20);
    }
    if (listening == s->nshards)
        return 0;
    kill_left(s, 1, "did not start listening within %d s; stopping it", timeout_s);
    return -1;
}

/* Stops every running daemon: SIGTERM to all, then up to timeout_s (for all together, as
 * they commit in parallel) for them to commit and exit, then SIGKILL. Returns the number
 * that did not exit cleanly with status 0 (one that had died during the run included). */
static int stop_daemons(struct run_state *s, int timeout_s)
{
    char nb[32];
    int failed = 0, running = 0, st, code;
    const char *what;
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        if (d->pid < 0)
            continue;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            describe_exit(st, &what, &code);
            fprintf(stderr, "meridian profile: %s had already exited (%s %d) during the run\n",
                    dname(s, k, nb, sizeof(nb)), what, code);
            d->pid = -1;
            failed++;
            continue;
        }
        kill(d->pid, SIGTERM);
        running++;
    }
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    while (running > 0 && now_ms() < deadline) {
        for (int k = 0; k < s->nshards; k++) {
            struct shard *d = &s->sh[k];
            if (d->pid < 0 || waitpid(d->pid, &st, WNOHANG) != d->pid)
                continue;
            d->pid = -1;
            running--;
            failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        if (running > 0)
            nap_ms(20);
    }
    return failed + kill_left(s, 0,
                              "did not exit within %d s of SIGTERM; killing it (committed "
                              "batches are safe in the WAL)",
                              timeout_s);
}

/* Runs argv as a child and waits for it. Returns its wait status, or -1. When the command
 * could not be started (execvp failed), *exec_err is its errno (else 0) and the child has
 * exited 127 (not found) or 126, like a shell; the caller says so. */
static int run_job(char **argv, int timeout_s, const struct run_state *s, int *exec_err)
{
    struct sigaction sa, old_int, old_term, old_hup;
    unsigned char warned[MAX_SHARDS] = {0};
    char nb[32];
    int st = 0, started[2] = {-1, -1};
    *exec_err = 0;
    int64_t deadline = timeout_s ? now_ms() + (int64_t)timeout_s * 1000 : 0, kill_at = 0;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    /* the exec closes this pipe (O_CLOEXEC) or the child writes its errno into it, so the
     * parent learns which without guessing from the exit status (the job's own could be
     * 127); without the pipe the child says why itself */
    if (pipe2(started, O_CLOEXEC) != 0)
        started[0] = started[1] = -1;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", mrd_strerror(-errno));
        st = -1;
        goto out;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGHUP, &old_hup, NULL);
        execvp(argv[0], argv);
        int e = errno;
        if (started[1] < 0 || write(started[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
            fprintf(stderr, "meridian profile: cannot run %s: %s\n", argv[0], mrd_strerror(-e));
        _exit(e == ENOENT ? MRD_CLI_EXIT_NOTFOUND : MRD_CLI_EXIT_NOEXEC);
    }
    if (started[1] >= 0) {
        int e = 0;
        ssize_t n;
        close(started[1]);
        started[1] = -1;
        do
            n = read(started[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(e)) {
            *exec_err = e;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            goto out;
        }
    }
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            st = -1;
            break;
        }
        if (g_forward) {
            kill(pid, g_forward);
            g_forward = 0;
        }
        if (deadline && !kill_at && now_ms() > deadline) {
            fprintf(stderr, "meridian profile: job timeout (%d s): sending SIGTERM\n", timeout_s);
            kill(pid, SIGTERM);
            kill_at = now_ms() + 10000;
        }
        if (kill_at && now_ms() > kill_at) {
            fprintf(stderr, "meridian profile: job still running: sending SIGKILL\n");
            kill(pid, SIGKILL);
            kill_at = INT64_MAX;
        }
        for (int k = 0; k < s->nshards; k++) {
            pid_t d = s->sh[k].pid;
            siginfo_t si = {0};
            if (warned[k] || waitid(P_PID, (id_t)d, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                si.si_pid != d)
                continue;
            fprintf(stderr,
                    "meridian profile: %s exited during the run; the job continues "
                    "unprofiled from here%s\n",
                    dname(s, k, nb, sizeof(nb)), s->nshards > 1 ? " (its shard's ranks)" : "");
            warned[k] = 1;
        }
        nap_ms(50);
    }
out:
    for (int i = 0; i < 2; i++)
        if (started[i] >= 0)
            close(started[i]);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    return st;
}

/* Runs the finalize in a child process so that a slow pass on a huge database cannot hold
 * the report hostage: after timeout_s the child is killed (SQLite rolls back its open
 * transaction) and the report uses what was committed. Returns 0 when it completed. */
static int finalize_with_timeout(const char *db_path, const char *command, int timeout_s,
                                 int progress)
{
    int st = 0;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "meridian profile: fork: %s\n", mrd_strerror(-errno));
        return -1;
    }
    if (pid == 0) {
        sqlite3 *db = mrd_cli_open_db(db_path, 0, "meridian profile");
        int rc =
            db ? mrd_cli_finalize_progress(db, command, stderr, "meridian profile", progress) : -1;
        if (db)
            sqlite3_close(db);
        fflush(stderr);
        _exit(rc < 0 ? 1 : 0);
    }
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() > deadline) {
            fprintf(stderr,
                    "meridian profile: the clock fit did not finish within %d s: "
                    "stopped (run `meridian finalize %s` to retry); the report uses "
                    "what is in the database\n",
                    timeout_s, db_path);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        nap_ms(50);
    }
}

static char *join_command(char **argv, int argc)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < argc; i++) {
        strcat(s, argv[i]);
        if (i + 1 < argc)
            strcat(s, " ");
    }
    return s;
}

static void unlink_db(const char *db)
{
    char p[PATH_MAX + 32];
    unlink(db);
    snprintf(p, sizeof(p), "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", db);
    unlink(p);
}

/* Leaves the database one file at rest when a -wal is left next to it (a meridiand or a
 * finalize that was killed): a read-write connection that reads and closes is the last
 * one, so SQLite checkpoints the committed frames into the file and deletes the -wal and
 * -shm (a killed transaction's frames were never committed and are dropped). Nothing is
 * done otherwise; the report then opens the file without creating either (readonly.c). */
static void settle_db(const char *db)
{
    char p[PATH_MAX + 32];
    struct stat st;
    sqlite3 *h = NULL;
    snprintf(p, sizeof(p), "%s-wal", db);
    if (stat(p, &st) != 0 || stat(db, &st) != 0)
        return;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(h, 5000);
        sqlite3_exec(h, mrd_db_sql_schema_read, NULL, NULL, NULL);
    }
    sqlite3_close(h);
}

/* The command could not be started (execvp's errno e): nothing was profiled, so nothing is
 * kept. Stops the daemons (SIGTERM: they commit and exit as after any job) and removes
 * the database(s) they created, so -o names no file afterwards. */
static void job_not_started(const struct profile_opts *o, struct run_state *s, const char *cmd,
                            int e)
{
    fprintf(stderr,
            "meridian profile: cannot run %s: %s: the command could not be started; nothing "
            "was profiled (stopping meridiand, no database kept)\n",
            cmd, mrd_strerror(-e));
    if (stop_daemons(s, o->stop_timeout_s) > 0)
        fprintf(stderr, "meridian profile: a meridiand did not stop cleanly\n");
    for (int k = 0; k < s->nshards; k++)
        unlink_db(s->sh[k].db);
    unlink_db(s->db);
}

/* The shard databases' paths, for shard k (next to the requested database), and their
 * listen addresses and port files. A leftover shard file is refused like the database
 * itself (--overwrite removes it). Returns 0 or -1 (reported). */
static int plan_shards(const struct profile_opts *o, struct run_state *s)
{
    char host[256];
    uint16_t port;
    struct stat st;
    if (mrd_hostport_split(o->listen, host, sizeof(host), &port) < 0)
        return -1; /* a user's --listen was checked when parsed: only the default is left */
    int bracket = strchr(host, ':') != NULL; /* an IPv6 address: [..]:port */
    for (int k = 0; k < s->nshards; k++) {
        struct shard *d = &s->sh[k];
        d->pid = -1;
        if (s->nshards == 1) {
            snprintf(d->db, sizeof(d->db), "%s", s->db);
            snprintf(d->port_file, sizeof(d->port_file), "%s/port", s->tmpdir);
            snprintf(d->listen, sizeof(d->listen), "%s", o->listen);
            continue;
        }
        snprintf(d->db, sizeof(d->db), "%s.shard-%d", s->db, k);
        snprintf(d->port_file, sizeof(d->port_file), "%s/port-%d", s->tmpdir, k);
        snprintf(d->listen, sizeof(d->listen), bracket ? "[%s]:%d" : "%s:%d", host,
                 port ? port + k : 0);
        if (stat(d->db, &st) == 0) {
            if (!o->overwrite) {
                fprintf(stderr,
                        "meridian profile: %s exists (a shard of an earlier run? remove "
                        "it, or give --overwrite)\n",
                        d->db);
                return -1;
            }
            unlink_db(d->db);
        }
    }
    return 0;
}

/* Prepares the run: run id, paths, secret, every meridiand started and listening. Returns
 * 0 or -1 (message printed); what was created is undone by cleanup_run / stop_daemons. */
static int setup_run(const struct profile_opts *o, struct run_state *s)
{
    char name[PATH_MAX];
    struct stat st;
    if (o->run_id)
        snprintf(s->run_id, sizeof(s->run_id), "%s", o->run_id);
    else if (make_run_id(s->run_id, sizeof(s->run_id)) < 0) {
        fprintf(stderr, "meridian profile: cannot read /dev/urandom\n");
        return -1;
    }
    snprintf(name, sizeof(name), "meridian-%s.db", s->run_id);
    if (mrd_agentenv_abs_path(o->db ? o->db : name, s->db, sizeof(s->db)) < 0) {
        fprintf(stderr, "meridian profile: bad database path '%s'\n", o->db ? o->db : name);
        return -1;
    }
    if (stat(s->db, &st) == 0) {
        if (!o->overwrite) {
            fprintf(stderr, "meridian profile: %s exists (choose another -o, or --overwrite)\n",
                    s->db);
            return -1;
        }
        unlink_db(s->db);
    }
    snprintf(s->ctl, sizeof(s->ctl), "%s%s", s->db, MRD_CONTROL_SUFFIX);
    if (mrd_agentenv_find_daemon(o->daemon, s->daemon, sizeof(s->daemon)) < 0) {
        fprintf(stderr, "meridian profile: meridiand not found (give --meridiand PATH)\n");
        return -1;
    }
    s->have_agent = mrd_agentenv_find_agent(o->agent_lib, s->agent, sizeof(s->agent)) == 0;
    if (!s->have_agent && o->agent_lib) {
        fprintf(stderr, "meridian profile: --agent-lib %s: no such file\n", o->agent_lib);
        return -1;
    }
    if (!s->have_agent)
        fprintf(stderr, "meridian profile: warning: libmeridian.so not found: ranks will not "
                        "be instrumented (only programs that speak meridian's protocol "
                        "themselves, like `meridian replay`, will report)\n");
    s->have_mpi = !o->no_mpi && mrd_agentenv_find_mpi(o->mpi_lib, s->mpi, sizeof(s->mpi)) == 0;
    if (!s->have_mpi && o->mpi_lib && !o->no_mpi) {
        fprintf(stderr, "meridian profile: --mpi-lib %s: no such file\n", o->mpi_lib);
        return -1;
    }
    /* the secret next to the database (visible to other nodes on a shared file system) */
    const char *slash = strrchr(s->db, '/');
    snprintf(s->secret, sizeof(s->secret), "%.*s/.meridian-%s.secret", (int)(slash - s->db), s->db,
             s->run_id);
    int rc = write_secret(s->secret);
    if (rc < 0) {
        fprintf(stderr, "meridian profile: cannot create %s: %s\n", s->secret, mrd_strerror(rc));
        s->secret[0] = '\0';
        return -1;
    }
    snprintf(s->tmpdir, sizeof(s->tmpdir), "/tmp/meridian-XXXXXX");
    if (!mkdtemp(s->tmpdir)) {
        fprintf(stderr, "meridian profile: mkdtemp: %s\n", mrd_strerror(-errno));
        s->tmpdir[0] = '\0';
        return -1;
    }
    if (plan_shards(o, s) < 0 || start_daemons(s, o, o->daemon_timeout_s) < 0)
        return -1;
    /* agents connect to --advertise, else the listen host (a wildcard means this host) */
    char host[256];
    uint16_t listen_port;
    mrd_hostport_split(o->listen, host, sizeof(host), &listen_port); /* checked above */
    if (o->advertise)
        snprintf(host, sizeof(host), "%s", o->advertise);
    else if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0)
        gethostname(host, sizeof(host));
    int bracket = strchr(host, ':') && host[0] != '['; /* an IPv6 address, not yet [..] */
    size_t cap = (size_t)s->nshards * (strlen(host) + 10) + 1, len = 0;
    if (!(s->aggregator = malloc(cap))) {
        fprintf(stderr, "meridian profile: out of memory\n");
        return -1;
    }
    for (int k = 0; k < s->nshards; k++)
        len += (size_t)snprintf(s->aggregator + len, cap - len, bracket ? "%s[%s]:%d" : "%s%s:%d",
                                k ? "," : "", host, s->sh[k].port);
    return 0;
}

static void cleanup_run(const struct profile_opts *o, struct run_state *s)
{
    struct stat st; /* meridiand removes its control socket; not when it was killed */
    if (s->ctl[0] && lstat(s->ctl, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(s->ctl);
    if (s->secret[0] && !o->keep_secret)
        unlink(s->secret);
    for (int k = 0; s->sh && k < s->nshards; k++)
        if (s->sh[k].port_file[0])
            unlink(s->sh[k].port_file);
    if (s->tmpdir[0])
        rmdir(s->tmpdir);
}

static int exit_code(int st)
{
    if (st < 0)
        return MRD_CLI_EXIT_SETUP;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 1;
}

/* Lists the shard databases that exist, after "meridian profile: <what>", with the
 * command that merges them. */
static void say_kept_shards(const struct run_state *s, const char *what)
{
    struct stat st;
    int n = 0;
    for (int k = 0; k < s->nshards; k++)
        n += stat(s->sh[k].db, &st) == 0;
    if (n == 0)
        return;
    fprintf(stderr, "meridian profile: %s:", what);
    for (int k = 0; k < s->nshards; k++)
        if (stat(s->sh[k].db, &st) == 0)
            fprintf(stderr, " %s", s->sh[k].db);
    fprintf(stderr, "\n");
}

/* After the job: merges the shard databases into s->db (nothing to do for one shard) and
 * removes them unless keep. Returns 0, or -1 when s->db was not written (the shards are
 * kept and listed). */
static int merge_shards(const struct profile_opts *o, const struct run_state *s, int failed)
{
    const char *paths[MAX_SHARDS];
    if (s->nshards == 1)
        return 0;
    for (int k = 0; k < s->nshards; k++)
        paths[k] = s->sh[k].db;
    fprintf(stderr, "meridian profile: merging %d shard databases into %s\n", s->nshards, s->db);
    if (mrd_cli_merge_shards_progress(s->db, paths, s->nshards, o->overwrite, stderr,
                                      "meridian profile", o->progress) != 0) {
        say_kept_shards(s, "the merge failed; the shard databases are kept (once the cause "
                           "is fixed: meridian merge -o DB SHARD...)");
        return -1;
    }
    if (o->keep_shards || failed) {
        say_kept_shards(s, failed ? "a meridiand did not stop cleanly; the shard databases "
                                    "are kept"
                                  : "shard databases kept (--keep-shards)");
        return 0;
    }
    for (int k = 0; k < s->nshards; k++)
        unlink_db(s->sh[k].db);
    return 0;
}

/* One note when the variables travel through the environment and may not arrive. */
static void say_env_route(const struct mrd_launchers *ls, int single)
{
    if (mrd_agentenv_has(ls, MRD_KIND_SLURM) >= 0 && ls->export_limited)
        fprintf(stderr, "meridian profile: warning: srun --export (or SLURM_EXPORT_ENV) does "
                        "not start with ALL: the agent's variables will not reach the ranks "
                        "(use --export=ALL,...)\n");
    else if (ls->n == 0 && !single)
        fprintf(stderr, "meridian profile: note: no launcher (mpirun, mpiexec, srun, "
                        "torchrun) in the command: ranks are recognised by their launcher's "
                        "variables (RANK, SLURM_PROCID, ...); give --single for a one-process "
                        "job\n");
}

int mrd_cli_profile(int argc, char **argv)
{
    struct profile_opts o;
    struct run_state s;
    struct mrd_agentenv env;
    char **job = NULL, **rewritten = NULL, *command = NULL;
    int rc = mrd__profile_parse(argc, argv, &o), st = -1, style, at, exec_err = 0;

    memset(&s, 0, sizeof(s));
    memset(&env, 0, sizeof(env));
    if (rc <= 0)
        return rc == 0 ? 0 : 2;
    if (!(s.sh = calloc((size_t)o.shards, sizeof(*s.sh)))) {
        fprintf(stderr, "meridian profile: out of memory\n");
        return MRD_CLI_EXIT_SETUP;
    }
    s.nshards = o.shards;
    for (int k = 0; k < s.nshards; k++)
        s.sh[k].pid = -1;
    job = argv + optind;
    int njob = argc - optind;
    if (setup_run(&o, &s) < 0)
        goto setup_failed;
    struct mrd_launchers ls;
    mrd_agentenv_scan(job, njob, &ls);
    at = mrd_agentenv_find_launcher(job, njob, &style);
    if (o.style)
        style = strcmp(o.style, "openmpi") == 0 ? MRD_LAUNCHER_OPENMPI
                : strcmp(o.style, "mpich") == 0 ? MRD_LAUNCHER_MPICH
                                                : MRD_LAUNCHER_NONE;
    struct mrd_agentenv_config ec = {.aggregator = s.aggregator,
                                     .run_id = s.run_id,
                                     .secret_file = s.secret,
                                     .agent_lib = s.have_agent ? s.agent : NULL,
                                     .mpi_lib = NULL,
                                     .force = o.single};
    /* the MPI wrappers go to the tasks of mpirun and srun, not to torchrun's workers
     * (torch jobs talk NCCL or Gloo, and the wrappers would load MPI into Python) */
    if (s.have_mpi && (at >= 0 || mrd_agentenv_has(&ls, MRD_KIND_SLURM) >= 0) &&
        mrd_agentenv_has(&ls, MRD_KIND_TORCH) < 0)
        ec.mpi_lib = s.mpi;
    /* the cudaProfilerStart/Stop interposers go to every rank that gets the agent (no
     * dependency: they load anywhere, torchrun's workers included) */
    char profapi[PATH_MAX];
    if (s.have_agent && mrd_agentenv_find_profapi(NULL, profapi, sizeof(profapi)) == 0)
        ec.profapi_lib = profapi;
    if (s.nshards > 1 && getenv("MERIDIAN_SHARD_ID")) {
        /* with a list each rank's shard id is its entry's index; a set value would make
         * the agent inert on every rank but one in N (agent/ENVIRONMENT.md) */
        fprintf(stderr,
                "meridian profile: note: MERIDIAN_SHARD_ID=%.20s is not passed on: "
                "with --shards each rank's shard id is its shard's index\n",
                getenv("MERIDIAN_SHARD_ID"));
        unsetenv("MERIDIAN_SHARD_ID");
    }
    if ((rc = mrd__profile_apply_tier(&o)) < 0) {
        fprintf(stderr, "meridian profile: setenv: %s\n", mrd_strerror(rc));
        goto setup_failed;
    }
    if ((rc = mrd_agentenv_build(&ec, &env)) < 0) {
        fprintf(stderr, "meridian profile: agent environment: %s\n", mrd_strerror(rc));
        goto setup_failed;
    }
    if (at >= 0 && style != MRD_LAUNCHER_NONE) {
        if ((rc = mrd_agentenv_rewrite(job, njob, at, style, &env, &rewritten)) < 0) {
            fprintf(stderr, "meridian profile: %s\n", mrd_strerror(rc));
            goto setup_failed;
        }
        job = rewritten;
    } else {
        /* srun, torchrun and plain commands: through this process's environment, which
         * srun (--export=ALL, its default) and torchrun pass on to every rank */
        say_env_route(&ls, o.single);
        if ((rc = mrd_agentenv_apply(&env)) < 0) {
            fprintf(stderr, "meridian profile: setenv: %s\n", mrd_strerror(rc));
            goto setup_failed;
        }
    }
    command = join_command(argv + optind, njob);
    fprintf(stderr, "meridian profile: run %s, %s %s, database %s\n", s.run_id,
            s.nshards > 1 ? "aggregators (one per shard)" : "aggregator", s.aggregator, s.db);
    mrd__profile_say_tier(&o.tier);
    st = run_job(job, o.job_timeout_s, &s, &exec_err);
    if (exec_err) {
        job_not_started(&o, &s, job[0], exec_err);
        goto done;
    }
    fprintf(stderr, "meridian profile: job finished (%s %d); stopping meridiand%s\n",
            st >= 0 && WIFSIGNALED(st) ? "signal" : "exit status",
            st >= 0 && WIFSIGNALED(st) ? WTERMSIG(st) : exit_code(st), s.nshards > 1 ? "s" : "");
    int failed = stop_daemons(&s, o.stop_timeout_s);
    if (merge_shards(&o, &s, failed) < 0) {
        fprintf(stderr, "meridian profile: %s was not written: no clock fit, no report\n", s.db);
        goto done;
    }
    if (!o.no_finalize)
        finalize_with_timeout(s.db, command, o.finalize_timeout_s, o.progress);
    settle_db(s.db);
    sqlite3 *db = mrd_cli_open_db(s.db, 1, "meridian profile");
    if (db) {
        if (!o.no_report || o.html || o.json) {
            FILE *text = o.no_report || (o.json && strcmp(o.json, "-") == 0) ? NULL : stdout;
            /* the steps the agents counted for the windows are the report's steps */
            const char *step = getenv("MERIDIAN_STEP_NAME");
            mrd_cli_render_progress(db, text, o.html, o.json, 0, step && *step ? step : NULL,
                                    "meridian profile", o.progress);
        }
        sqlite3_close(db);
    }
    fprintf(stderr, "meridian profile: database %s\n", s.db);
    goto done;
setup_failed:
    st = -1;
    stop_daemons(&s, o.stop_timeout_s);
    if (s.nshards > 1)
        say_kept_shards(&s, "the job did not run; shard databases left");
done:
    cleanup_run(&o, &s);
    free(s.aggregator);
    free(s.sh);
    mrd_agentenv_free(&env);
    mrd_agentenv_free_argv(rewritten);
    free(command);
    return exit_code(st);
}
