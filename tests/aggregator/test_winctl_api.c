/* aggregator_winctl_api: profiler API windows in window control (aggregator/ingest/winctl.h,
 * the "profiler API" rule) on a virtual clock: the first start opens an open-ended
 * profiler_api window at highest + margin, repeats and other ranks' starts of the same pair
 * open nothing, the stop narrows its last step to max(first, highest + margin) under the
 * same id, successive pairs give successive windows, a pair inside one report gives a
 * window of its own, a start waits for a step counter or a free slot, a stop cancels a
 * start still waiting, the open window outlives its ttl, and a stop after the window ended
 * narrows nothing; counts with more stops than starts are ignored. The expected steps are computed
 * here from the reported counters: every report uses 100 ms steps and the default 500 ms probe
 * interval, so the margin is max(2, ceil(2 x 500 / 100)) = 10.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "steps.h"
#include "winctl.h"

#define MS     1000000LL /* ns */
#define STEP   (100 * MS)
#define MARGIN 10 /* 2 x 500 ms / 100 ms */
#define OPEN   MRD_WINCTL_LENGTH_MAX

static char g_lines[64][768];
static int g_nlines;

static void on_log(void *ctx, const char *line)
{
    (void)ctx;
    if (g_nlines < 64)
        snprintf(g_lines[g_nlines++], sizeof(g_lines[0]), "%s", line);
}

static int logged(const char *needle)
{
    for (int i = 0; i < g_nlines; i++)
        if (strstr(g_lines[i], needle))
            return 1;
    return 0;
}

static struct mrd_winctl *make(void)
{
    struct mrd_winctl *w;
    struct mrd_winctl_config c = {.log = on_log};
    g_nlines = 0;
    CHECK_OK(mrd_winctl_new(&c, &w));
    return w;
}

/* Both ranks report steps_begun `begun` with 100 ms steps at now. */
static void steps(struct mrd_winctl *w, uint64_t begun, int64_t now)
{
    mrd_winctl_report(w, 0, begun, STEP, STEP, now);
    mrd_winctl_report(w, 1, begun, STEP, STEP, now);
}

/* The only active request must be id, reason profiler_api, steps first..last. */
static void expect_one(struct mrd_winctl *w, uint64_t id, uint64_t first, uint64_t last)
{
    const struct mrd_winctl_request *q;
    CHECK_EQ(mrd_winctl_active(w, &q), 1);
    CHECK_UEQ(q[0].id, id);
    CHECK_EQ(q[0].reason, MRD_WINDOW_PROFILER_API);
    CHECK_UEQ(q[0].first, first);
    CHECK_UEQ(q[0].last, last);
}

static size_t nactive(struct mrd_winctl *w)
{
    const struct mrd_winctl_request *q;
    return mrd_winctl_active(w, &q);
}

static void test_open_narrow_repeat(void)
{
    struct mrd_winctl *w = make();
    mrd_winctl_report(w, 0, 50, STEP, STEP, 0);
    mrd_winctl_report(w, 1, 57, STEP, STEP, 0);
    /* rank 0 called start with 50 steps begun: first = highest 57 + 10 */
    mrd_winctl_report_profiler(w, 0, 1, 50, 0, 0, 0);
    expect_one(w, 1, 67, 67 + OPEN - 1);
    CHECK(logged("window 1 (profiler_api): steps 67-100066 (100000 steps) = highest step "
                 "counter 57 (of 2 ranks) + margin 10"));
    CHECK(
        logged("rank 0 called cudaProfilerStart/cuProfilerStart with 50 steps begun; open until"));
    /* the same counts again (a repeated probe), and rank 1's start of the same pair */
    mrd_winctl_report_profiler(w, 0, 1, 50, 0, 0, 10);
    mrd_winctl_report_profiler(w, 1, 1, 57, 0, 0, 10);
    expect_one(w, 1, 67, 67 + OPEN - 1);
    /* the steps go on; rank 0 stops with 80 steps begun, reported when the highest is 81 */
    mrd_winctl_report(w, 0, 80, STEP, STEP, 20);
    mrd_winctl_report(w, 1, 81, STEP, STEP, 20);
    mrd_winctl_report_profiler(w, 0, 1, 50, 1, 80, 20);
    expect_one(w, 1, 67, 81 + MARGIN);
    CHECK(logged("window 1 (profiler_api) narrowed: steps 67-91 (25 steps); last = the larger "
                 "of its first step 67 and highest step counter 81 + margin 10"));
    /* repeats, and rank 1's stop of the same pair, change nothing */
    steps(w, 85, 30);
    mrd_winctl_report_profiler(w, 0, 1, 50, 1, 80, 30);
    mrd_winctl_report_profiler(w, 1, 1, 57, 1, 84, 30);
    expect_one(w, 1, 67, 91);
    /* rank 1's start of this pair arriving only now opens nothing either */
    mrd_winctl_report_profiler(w, 1, 1, 57, 0, 0, 30);
    expect_one(w, 1, 67, 91);
    steps(w, 93, 40); /* both past the detach step 92: done */
    CHECK_EQ(nactive(w), 0);
    /* the second pair: a second window on the steps of its own reports */
    mrd_winctl_report_profiler(w, 0, 2, 93, 1, 80, 50);
    expect_one(w, 2, 93 + MARGIN, 93 + MARGIN + OPEN - 1);
    steps(w, 120, 60);
    mrd_winctl_report_profiler(w, 1, 2, 95, 1, 84, 60);  /* rank 1's start: nothing */
    mrd_winctl_report_profiler(w, 1, 2, 95, 2, 118, 60); /* rank 1's stop closes it */
    expect_one(w, 2, 103, 130);
    mrd_winctl_free(w);
}

static void test_narrow_to_first(void)
{
    struct mrd_winctl *w = make();
    steps(w, 40, 0);
    mrd_winctl_report_profiler(w, 0, 1, 40, 0, 0, 0);
    expect_one(w, 1, 50, 50 + OPEN - 1);
    /* stopped before any rank moved: highest + margin = first */
    mrd_winctl_report_profiler(w, 0, 1, 40, 1, 40, 5);
    expect_one(w, 1, 50, 50);
    /* a start and its stop inside one report: a window of its own, one step */
    steps(w, 60, 10);
    mrd_winctl_report_profiler(w, 0, 2, 58, 2, 59, 10);
    const struct mrd_winctl_request *q;
    CHECK_EQ(mrd_winctl_active(w, &q), 1); /* window 1 is done: both began step 60 > 51 */
    CHECK_UEQ(q[0].id, 2);
    CHECK_UEQ(q[0].first, 70);
    CHECK_UEQ(q[0].last, 70);
    /* counts no agent sends (more stops than starts) are ignored: no third window */
    mrd_winctl_report_profiler(w, 1, 3, 60, 7, 60, 20);
    expect_one(w, 2, 70, 70);
    mrd_winctl_free(w);
}

static void test_waits(void)
{
    struct mrd_winctl *w = make();
    char why[256];
    /* a start before any step: the window waits for the first step counter */
    mrd_winctl_report_profiler(w, 0, 1, 0, 0, 0, 0);
    CHECK_EQ(nactive(w), 0);
    CHECK(logged("the profiler_api window waits (rank 0 called cudaProfilerStart/cuProfilerStart "
                 "with 0 steps begun"));
    CHECK(logged("no rank has reported a step yet"));
    steps(w, 3, 100);
    mrd_winctl_tick(w, 100);
    expect_one(w, 1, 3 + MARGIN, 3 + MARGIN + OPEN - 1);
    mrd_winctl_free(w);

    /* a stop before the waiting window could open: no window */
    w = make();
    mrd_winctl_report_profiler(w, 0, 1, 0, 0, 0, 0);
    mrd_winctl_report_profiler(w, 0, 1, 0, 1, 0, 10);
    steps(w, 3, 100);
    mrd_winctl_tick(w, 100);
    CHECK_EQ(nactive(w), 0);
    CHECK(logged("no profiler_api window: rank 0 called cudaProfilerStop/cuProfilerStop with 0 "
                 "steps begun, before"));
    mrd_winctl_free(w);

    /* a full request list: the window waits for a free slot */
    w = make();
    steps(w, 100, 0);
    for (int i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++)
        CHECK_OK(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 2, NULL, 0, NULL, why, sizeof(why)));
    mrd_winctl_report_profiler(w, 1, 1, 100, 0, 0, 0);
    CHECK_EQ(nactive(w), MRD_WINDOW_REQUESTS_MAX);
    CHECK(logged("the profiler_api window waits"));
    steps(w, 200, 1000); /* every on-demand window (110-111) is past */
    mrd_winctl_tick(w, 1000);
    expect_one(w, 17, 200 + MARGIN, 200 + MARGIN + OPEN - 1);
    mrd_winctl_free(w);
}

static void test_ttl_and_end(void)
{
    struct mrd_winctl *w = make();
    steps(w, 10, 0);
    mrd_winctl_report_profiler(w, 0, 1, 10, 0, 0, 0);
    expect_one(w, 1, 20, 20 + OPEN - 1);
    /* open for twice the ttl: still sent */
    for (int64_t t = 0; t <= 2 * MRD_WINCTL_TTL_MS; t += 10000) {
        steps(w, 10 + (uint64_t)t / 10000, t);
        mrd_winctl_tick(w, t);
    }
    expect_one(w, 1, 20, 20 + OPEN - 1);
    /* narrowed at T (highest 130): its ttl counts from T; rank 1 never gets past it */
    int64_t t0 = 2 * MRD_WINCTL_TTL_MS + 10000;
    mrd_winctl_report(w, 0, 130, STEP, STEP, t0);
    mrd_winctl_report(w, 1, 130, STEP, STEP, t0);
    mrd_winctl_report_profiler(w, 0, 1, 10, 1, 130, t0);
    expect_one(w, 1, 20, 140);
    mrd_winctl_report(w, 0, 141, STEP, STEP, t0 + MRD_WINCTL_TTL_MS - 1000);
    mrd_winctl_report(w, 1, 141, STEP, STEP, t0 + MRD_WINCTL_TTL_MS - 1000);
    mrd_winctl_tick(w, t0 + MRD_WINCTL_TTL_MS - 1000);
    expect_one(w, 1, 20, 140);
    mrd_winctl_tick(w, t0 + MRD_WINCTL_TTL_MS);
    CHECK_EQ(nactive(w), 0);
    CHECK(logged("window 1 (profiler_api, steps 20-140) no longer sent after 600 s"));
    mrd_winctl_free(w);

    /* no stop until every rank ran past the cap: the stop narrows nothing */
    w = make();
    steps(w, 10, 0);
    mrd_winctl_report_profiler(w, 0, 1, 10, 0, 0, 0);
    steps(w, 20 + OPEN + 1, 100); /* begun > last + 1 = 20 + OPEN */
    CHECK_EQ(nactive(w), 0);
    mrd_winctl_report_profiler(w, 0, 1, 10, 1, 20 + OPEN, 200);
    CHECK_EQ(nactive(w), 0);
    CHECK(logged("window 1 (profiler_api) had ended already when rank 0 called "
                 "cudaProfilerStop/cuProfilerStop"));
    mrd_winctl_report_profiler(w, 0, 2, 20 + OPEN + 1, 1, 20 + OPEN, 300);
    expect_one(w, 2, 20 + OPEN + 1 + MARGIN, 20 + OPEN + MARGIN + OPEN);
    mrd_winctl_free(w);
}

int main(void)
{
    test_open_narrow_repeat();
    test_narrow_to_first();
    test_waits();
    test_ttl_and_end();
    printf("aggregator_winctl_api: ok\n");
    return 0;
}
