/* aggregator_window: windows opened by a real meridiand, driven by fake agents (clock
 * connections sending ClockProbes with step counters) and by `meridian window`.
 *
 *   A. on demand (--control): `meridian window` refused before any step is reported (and
 *      without a meridiand at all); 4 ranks report steps and 100 ms step times; `meridian
 *      window DB --length 5` answers "ok id=1 steps=61-65 margin=10 ranks=4" (highest step
 *      counter 51 + margin max(2, ceil(2 x 500 ms / 100 ms))); every rank's next ClockReply
 *      carries exactly that WindowRequest (ON_DEMAND) until the last rank reports a step
 *      counter past 66; the control socket's bounds (a garbage line, a bad length, a line
 *      over 256 bytes, silence for 2 s, a fifth client at once); the socket file is gone
 *      after the daemon stops; the log names the window, its steps and its margin;
 *   B. trigger (--trigger-step-factor 1.5 --trigger-length 5 --trigger-cooldown-steps 50):
 *      after 24 step times of 100 ms, a rank's 200 ms step opens one TRIGGER window of
 *      steps highest + 10 .. + 14; a slow step within the cooldown opens none; one after it
 *      opens the next (id 2);
 *   C. delay (--window-delay 1 --window-duration 0.5): 3 ranks report constant step
 *      counters (22 the highest) and 100 ms steps; a second after the first step report
 *      one DELAY window, steps 32-36 (0.5 s / 100 ms = 5 steps), and only one;
 *   D. `meridian profile` passes DB.ctl (the job asks for a window and is refused: no
 *      steps) and removes it afterwards; its window options are checked before anything
 *      starts.
 * Every wait polls with a bounded deadline. Usage: test_aggregator_window MERIDIAND MERIDIAN
 */
#define SECRET "window-secret-42"
#define RUN    "run-W"

#include <poll.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "client.h"

#define MS 1000000LL

static const char *g_meridian;
static char g_ctl[160];

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs argv (NULL-terminated) with stdout and stderr into files; waits 30 s at most.
 * Returns the exit status; *out and *err hold what it printed (static buffers). */
static int run(const char *const *argv, char **out, char **err)
{
    static char obuf[8192], ebuf[8192];
    char opath[192], epath[192];
    snprintf(opath, sizeof(opath), "%s/cmd.out", g_dir);
    snprintf(epath, sizeof(epath), "%s/cmd.err", g_dir);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int o = open(opath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(epath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    int64_t end = mono_ms() + 30000;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            CHECK(!"the command did not finish within 30 s");
        }
        usleep(5000);
    }
    snprintf(obuf, sizeof(obuf), "%s", slurp(opath));
    snprintf(ebuf, sizeof(ebuf), "%s", slurp(epath));
    *out = obuf;
    *err = ebuf;
    CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int clock_conn(uint32_t rank)
{
    int fd = cl_connect();
    send_hello(fd, SECRET, MRD_PROTOCOL_VERSION, RUN, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK,
               rank);
    CHECK_EQ(expect_hello_reply(fd, NULL, NULL), 1);
    return fd;
}

/* One probe with a step counter; returns the reply (free with free_reply). */
static Meridian__V1__ClockReply *probe(int fd, uint64_t begun, int64_t last_ns)
{
    static uint64_t id = 1;
    Meridian__V1__ClockProbe p = MERIDIAN__V1__CLOCK_PROBE__INIT;
    p.probe_id = ++id;
    p.t0 = 12345;
    p.steps_begun = begun;
    p.last_step_ns = last_ns;
    send_msg(fd, MRD_FRAME_CLOCK_PROBE, &p.base);
    ProtobufCMessage *m = NULL;
    CHECK_EQ(recv_msg(fd, &m), MRD_FRAME_CLOCK_REPLY);
    Meridian__V1__ClockReply *r = (Meridian__V1__ClockReply *)m;
    CHECK_UEQ(r->probe_id, id);
    CHECK_EQ(r->t0, 12345);
    return r;
}

static void free_reply(Meridian__V1__ClockReply *r)
{
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* The reply carries exactly the requests given (id, first, last, reason; n of them). */
static void expect_windows(Meridian__V1__ClockReply *r, size_t n, const uint64_t (*want)[4])
{
    CHECK_EQ(r->n_windows, n);
    for (size_t i = 0; i < n; i++) {
        CHECK_UEQ(r->windows[i]->id, want[i][0]);
        CHECK_UEQ(r->windows[i]->first_step, want[i][1]);
        CHECK_UEQ(r->windows[i]->last_step, want[i][2]);
        CHECK_EQ(r->windows[i]->reason, (int)want[i][3]);
    }
    free_reply(r);
}

static void probe_expect(int fd, uint64_t begun, int64_t last_ns, size_t n,
                         const uint64_t (*want)[4])
{
    expect_windows(probe(fd, begun, last_ns), n, want);
}

/* Connects to the control socket. */
static int ctl_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK_LT(strlen(g_ctl), sizeof(sa.sun_path)); /* /tmp/mrd-window-XXXXXX/a.db.ctl */
    memcpy(sa.sun_path, g_ctl, strlen(g_ctl) + 1);
    CHECK_OK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    return fd;
}

/* Reads until EOF (5 s at most) into a static buffer. */
static char *ctl_read_all(int fd)
{
    static char buf[1024];
    size_t n = 0;
    int64_t end = mono_ms() + 5000;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = end - mono_ms();
        CHECK(left > 0 && poll(&p, 1, (int)left) == 1); /* else: not closed within 5 s */
        ssize_t r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

/* Sends bytes on a new control connection; returns the whole answer (then closed). */
static char *ctl_ask(const char *bytes, size_t n)
{
    int fd = ctl_connect();
    send_all(fd, bytes, n);
    return ctl_read_all(fd);
}

static void start(const char *db_name, const char *const *extra)
{
    snprintf(g_db, sizeof(g_db), "%s/%s", g_dir, db_name);
    snprintf(g_ctl, sizeof(g_ctl), "%s.ctl", g_db);
    const char *args[24] = {"--run-id", RUN, "--commit-ms", "5"};
    int n = 4;
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    start_daemon_args(args);
}

static void control_bounds(void)
{
    char *a = ctl_ask("hello\n", 6);
    CHECK_STREQ(a, "error bad request \"hello\": the request is \"window [LENGTH]\"\n");
    a = ctl_ask("window 0\n", 9);
    CHECK(strncmp(a, "error a window of 0 steps: the length must be 1 to ", 51) == 0);
    a = ctl_ask("window 5x\r\n", 11);
    CHECK(strncmp(a, "error bad request \"window 5x\"", 29) == 0);
    char big[300];
    memset(big, 'w', sizeof(big));
    a = ctl_ask(big, sizeof(big));
    CHECK_STREQ(a, "error the request is longer than 256 bytes\n");
    /* silence: answered and closed after 2 s (not before, not much later) */
    int64_t t0 = mono_ms();
    int fd = ctl_connect();
    a = ctl_read_all(fd);
    int64_t took = mono_ms() - t0;
    CHECK_STREQ(a, "error no request line within 2000 ms\n");
    CHECK_GE(took, 1900);
    CHECK_LE(took, 4000);
    /* at most 4 clients at once: a fifth is told so */
    int k[4];
    for (int i = 0; i < 4; i++)
        k[i] = ctl_connect();
    usleep(100000); /* let the daemon accept them: a fifth is then over the limit */
    a = ctl_read_all(ctl_connect());
    CHECK_STREQ(a, "error busy: 4 control clients are connected already, try again\n");
    for (int i = 0; i < 4; i++)
        close(k[i]);
}

static void scenario_on_demand(void)
{
    char *out, *err;
    const char *win[] = {g_meridian, "window", g_db, "--length", "5", NULL};
    snprintf(g_db, sizeof(g_db), "%s/a.db", g_dir);
    /* no meridiand at all */
    CHECK_EQ(run(win, &out, &err), 1);
    CHECK(strstr(err, "meridian window: no running meridiand for ") != NULL);
    CHECK(strstr(err, "a.db.ctl does not exist") != NULL);

    const char *extra[] = {"--control", NULL, NULL};
    snprintf(g_ctl, sizeof(g_ctl), "%s/a.db.ctl", g_dir);
    extra[1] = g_ctl;
    start("a.db", extra);
    struct stat st;
    CHECK_OK(stat(g_ctl, &st));
    CHECK(S_ISSOCK(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0600);

    int fd[4];
    for (uint32_t r = 0; r < 4; r++)
        fd[r] = clock_conn(r);
    /* probes without step info (an older agent): still nothing reported */
    for (int r = 0; r < 4; r++)
        probe_expect(fd[r], 0, 0, 0, NULL);
    CHECK_EQ(run(win, &out, &err), 1);
    CHECK_STREQ(out, "error no rank has reported a step yet: is the job in the steady tier, with "
                     "NVTX step ranges or steps counted from a collective "
                     "(MERIDIAN_STEP_COLLECTIVE)?\n");

    /* 5 rounds: rank r at 40 + 2k + r, 100 ms steps (20 samples); highest 51 */
    for (int k = 0; k < 5; k++)
        for (int r = 0; r < 4; r++)
            probe_expect(fd[r], 40 + 2 * (uint64_t)k + (uint64_t)r, 100 * MS, 0, NULL);
    CHECK_EQ(run(win, &out, &err), 0);
    CHECK_STREQ(out, "ok id=1 steps=61-65 margin=10 ranks=4\n");
    static const uint64_t w1[1][4] = {
        {1, 61, 65, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_ON_DEMAND}};
    for (int r = 0; r < 4; r++)
        probe_expect(fd[r], 48 + (uint64_t)r, 100 * MS, 1, w1);
    /* ranks 0-2 past it (67 > 65 + 1), rank 3 at 66 (its detach step): still sent */
    for (int r = 0; r < 3; r++)
        probe_expect(fd[r], 67, 100 * MS, 1, w1);
    probe_expect(fd[3], 66, 100 * MS, 1, w1);
    probe_expect(fd[0], 68, 100 * MS, 1, w1);
    /* the last rank past it: no longer sent, to anyone */
    probe_expect(fd[3], 67, 100 * MS, 0, NULL);
    for (int r = 0; r < 4; r++)
        probe_expect(fd[r], 69, 100 * MS, 0, NULL);

    control_bounds();
    /* the margin follows the step times: 4 ranks x 64 samples of 400 ms -> ceil(2.5) = 3 */
    for (int k = 0; k < 70; k++)
        for (int r = 0; r < 4; r++)
            probe_expect(fd[r], 70 + 2 * (uint64_t)k, 400 * MS, 0, NULL);
    CHECK_EQ(run(win, &out, &err), 0);
    CHECK_STREQ(out, "ok id=2 steps=211-215 margin=3 ranks=4\n"); /* 208 + 3 */

    const char *other[] = {g_meridian, "window", "--control", "/nonexistent/x.ctl", NULL};
    CHECK_EQ(run(other, &out, &err), 1);
    CHECK(strstr(err, "no running meridiand for /nonexistent/x.ctl") != NULL);
    for (int r = 0; r < 4; r++)
        close(fd[r]);
    CHECK_EQ(stop_daemon(), 0);
    CHECK_EQ(stat(g_ctl, &st), -1); /* removed on exit */
    CHECK_EQ(run(win, &out, &err), 1);
    CHECK(strstr(err, "no running meridiand for ") != NULL);
    const char *log = slurp(g_log);
    CHECK(strstr(log, "meridiand: window 1 (on_demand): steps 61-65 (5 steps) = highest step "
                      "counter 51 (of 4 ranks) + margin 10 (the larger of the least margin 2 "
                      "and 2 x 500 ms probe interval / median step 100.000 ms = 10); asked by "
                      "meridian window") != NULL);
    CHECK(strstr(log, "control: window of 5 steps refused: no rank has reported a step yet") !=
          NULL);
}

static void scenario_trigger(void)
{
    const char *extra[] = {"--trigger-step-factor",
                           "1.5",
                           "--trigger-length",
                           "5",
                           "--trigger-cooldown-steps",
                           "50",
                           NULL};
    unlink(g_log);
    start("b.db", extra);
    int fd[2] = {clock_conn(0), clock_conn(1)};
    uint64_t s = 10;
    for (int k = 0; k < 12; k++, s += 2) /* 24 samples of 100 ms */
        for (int r = 0; r < 2; r++)
            probe_expect(fd[r], s, 100 * MS, 0, NULL);
    /* s = 34: rank 1's step took 200 ms > 1.5 x 100 ms: a window from 34 + 10 */
    static const uint64_t t1[1][4] = {
        {1, 44, 48, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_TRIGGER}};
    probe_expect(fd[1], s, 200 * MS, 1, t1);
    probe_expect(fd[0], s, 100 * MS, 1, t1);
    /* within the cooldown (50 steps from 34): slow steps open nothing more */
    for (s += 2; s < 84; s += 2) {
        Meridian__V1__ClockReply *r = probe(fd[0], s, (s == 36 ? 250 : 100) * MS);
        CHECK_LE(r->n_windows, 1);
        if (r->n_windows)
            CHECK_UEQ(r->windows[0]->id, 1);
        free_reply(r);
        r = probe(fd[1], s, (s == 40 ? 300 : 100) * MS);
        CHECK_LE(r->n_windows, 1);
        if (r->n_windows)
            CHECK_UEQ(r->windows[0]->id, 1);
        free_reply(r);
    }
    probe_expect(fd[0], 84, 100 * MS, 0, NULL); /* window 1 is past both ranks */
    /* s = 84 >= 34 + 50: the next slow step opens window 2 */
    static const uint64_t t2[1][4] = {
        {2, 94, 98, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_TRIGGER}};
    probe_expect(fd[1], 84, 210 * MS, 1, t2);
    for (int r = 0; r < 2; r++)
        close(fd[r]);
    CHECK_EQ(stop_daemon(), 0);
    const char *log = slurp(g_log);
    CHECK(strstr(log, "meridiand: window 1 (trigger): steps 44-48 (5 steps) = highest step "
                      "counter 34") != NULL);
    CHECK(strstr(log, "rank 1's step took 200.000 ms, over 1.50 x the median 100.000 ms") != NULL);
    CHECK(strstr(log, "window 2 (trigger): steps 94-98") != NULL);
    CHECK(strstr(log, "window 3") == NULL);
}

static void scenario_delay(void)
{
    const char *extra[] = {"--window-delay", "1", "--window-duration", "0.5", NULL};
    unlink(g_log);
    start("c.db", extra);
    int fd[3] = {clock_conn(0), clock_conn(1), clock_conn(2)};
    int64_t t0 = mono_ms(), seen = 0;
    static const uint64_t d1[1][4] = {
        {1, 32, 36, MERIDIAN__V1__WINDOW_REASON__WINDOW_REASON_DELAY}};
    /* constant counters (20, 21, 22) and 100 ms steps: the window appears about a second
     * after the first report, at the same steps whenever it does */
    while (!seen) {
        CHECK_LT(mono_ms() - t0, 10000);
        for (int r = 0; r < 3; r++) {
            Meridian__V1__ClockReply *rep = probe(fd[r], 20 + (uint64_t)r, 100 * MS);
            if (rep->n_windows && !seen)
                seen = mono_ms();
            if (seen)
                expect_windows(rep, 1, d1);
            else
                free_reply(rep);
        }
        usleep(20000);
    }
    CHECK_GE(seen - t0, 900);
    /* once: sent until the last rank is past it, then nothing more for a while */
    probe_expect(fd[0], 40, 100 * MS, 1, d1);
    probe_expect(fd[1], 40, 100 * MS, 1, d1);
    probe_expect(fd[2], 40, 100 * MS, 0, NULL);
    for (int i = 0; i < 10; i++) {
        usleep(150000);
        probe_expect(fd[i % 3], 40, 100 * MS, 0, NULL);
    }
    for (int r = 0; r < 3; r++)
        close(fd[r]);
    CHECK_EQ(stop_daemon(), 0);
    const char *log = slurp(g_log);
    CHECK(strstr(log, "meridiand: window 1 (delay): steps 32-36 (5 steps) = highest step "
                      "counter 22 (of 3 ranks) + margin 10") != NULL);
    CHECK(strstr(log, "after the first step reported; 0.500 s / median step 100.000 ms") != NULL);
}

static void scenario_profile(void)
{
    char *out, *err, db[192], job[1024], rcfile[192];
    struct stat st;
    snprintf(db, sizeof(db), "%s/p.db", g_dir);
    snprintf(rcfile, sizeof(rcfile), "%s/job.rc", g_dir);
    /* the job: the socket exists while it runs; a window is refused (no steps) */
    snprintf(job, sizeof(job),
             "test -S %s.ctl || exit 9; env -u LD_PRELOAD %s window %s --length 5 >%s/job.out; "
             "echo $? >%s",
             db, g_meridian, db, g_dir, rcfile);
    const char *prof[] = {g_meridian,
                          "profile",
                          "-o",
                          db,
                          "--meridiand",
                          g_meridiand,
                          "--single",
                          "--no-report",
                          "--no-finalize",
                          "--trigger-step-factor",
                          "1.5",
                          "--window-delay",
                          "30",
                          "--window-duration",
                          "2",
                          "--",
                          "sh",
                          "-c",
                          job,
                          NULL};
    int rc = run(prof, &out, &err);
    if (rc != 0)
        fprintf(stderr, "profile said:\n%s\n", err);
    CHECK_EQ(rc, 0);
    CHECK_STREQ(slurp(rcfile), "1\n");
    char path[256];
    snprintf(path, sizeof(path), "%s/job.out", g_dir);
    CHECK(strstr(slurp(path), "error no rank has reported a step yet") != NULL);
    snprintf(path, sizeof(path), "%s.ctl", db);
    CHECK_EQ(stat(path, &st), -1); /* gone after the run */
    CHECK_OK(stat(db, &st));
    /* checked before anything starts */
    const char *bad[] = {g_meridian, "profile", "-o",   db,  "--overwrite", "--trigger-step-factor",
                         "1",        "--",      "true", NULL};
    CHECK_EQ(run(bad, &out, &err), 2);
    CHECK(strstr(err, "--trigger-step-factor 1: a factor over 1") != NULL);
    const char *sh[] = {g_meridian, "profile",        "-o", db,   "--overwrite", "--shards",
                        "2",        "--window-delay", "5",  "--", "true",        NULL};
    CHECK_EQ(run(sh, &out, &err), 2);
    CHECK(strstr(err, "need one aggregator") != NULL);
    const char *help[] = {g_meridian, "window", "--help", NULL};
    CHECK_EQ(run(help, &out, &err), 0);
    CHECK(strstr(out, "usage: meridian window DB [--length N] [--control PATH]") != NULL);
}

int main(int argc, char **argv)
{
    CHECK_EQ(argc, 3);
    setup_dirs(argv[1], "window");
    g_meridian = argv[2];
    scenario_on_demand();
    scenario_trigger();
    scenario_delay();
    scenario_profile();
    remove_dirs();
    printf("aggregator_window: ok\n");
    return 0;
}
