/* aggregator_winctl: window control (aggregator/ingest/winctl.h) on its own, on a virtual
 * clock: which reports are samples, the median against a sorted copy (differential, random
 * reports), the margin rule, refusals (no steps, a full list, a bad length), the end of a
 * request (every live rank past it; a silent rank not waited for; the ttl), the rank and
 * history caps, the trigger with its cooldown and the delayed window.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "steps.h"
#include "winctl.h"

#define MS 1000000LL /* ns */

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

static struct mrd_winctl *make(struct mrd_winctl_config c)
{
    struct mrd_winctl *w;
    c.log = on_log;
    g_nlines = 0;
    CHECK_OK(mrd_winctl_new(&c, &w));
    return w;
}

static size_t active(struct mrd_winctl *w, const struct mrd_winctl_request **q)
{
    return mrd_winctl_active(w, q);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Random reports against a trivial model: each rank's last 64 samples; the median is
 * element n/2 of all of them sorted. */
static void test_median_differential(void)
{
    static int64_t model[8][MRD_WINCTL_HISTORY], all[8 * MRD_WINCTL_HISTORY];
    int mn[8] = {0}, mpos[8] = {0};
    uint64_t begun[8] = {0};
    struct mrd_winctl *w = make((struct mrd_winctl_config){.max_ranks = 8});
    srand(7);
    for (int i = 0; i < 5000; i++) {
        int r = rand() % 8;
        begun[r] += (uint64_t)(rand() % 3);          /* the counter may stand still */
        int64_t v = 1 + rand() % (i % 3 ? 1000 : 5); /* many equal values too */
        mrd_winctl_report(w, (uint32_t)r, begun[r], v, v, i);
        model[r][mpos[r]] = v;
        mpos[r] = (mpos[r] + 1) % MRD_WINCTL_HISTORY;
        if (mn[r] < MRD_WINCTL_HISTORY)
            mn[r]++;
        if (i % 97 == 0 || i == 4999) {
            size_t n = 0, got_n;
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < mn[k]; j++)
                    all[n++] = model[k][j];
            qsort(all, n, sizeof(all[0]), cmp64);
            CHECK_EQ(mrd_winctl_median(w, &got_n), all[n / 2]);
            CHECK_EQ(got_n, n);
        }
    }
    mrd_winctl_free(w);
}

static void test_samples(void)
{
    size_t n;
    struct mrd_winctl *w = make((struct mrd_winctl_config){0});
    mrd_winctl_report(w, 0, 1, 0, 0, 0); /* a step begun, none finished: no sample */
    mrd_winctl_median(w, &n);
    CHECK_EQ(n, 0);
    /* each non-zero value is the longest step since the previous probe: a new sample,
     * equal to the last one or not, the step counter moved or not */
    mrd_winctl_report(w, 0, 2, 5 * MS, 5 * MS, 0);
    mrd_winctl_report(w, 0, 2, 0, 0, 1); /* no step ended since: nothing */
    mrd_winctl_report(w, 0, 2, 5 * MS, 5 * MS, 2);
    mrd_winctl_report(w, 0, 3, 6 * MS, 6 * MS, 3);
    CHECK_EQ(mrd_winctl_median(w, &n), 5 * MS); /* 5, 5, 6 */
    CHECK_EQ(n, 3);
    for (int i = 0; i < 200; i++) /* the history cap */
        mrd_winctl_report(w, 0, 10 + (uint64_t)i, 7 * MS, 7 * MS, 5);
    CHECK_EQ(mrd_winctl_median(w, &n), 7 * MS);
    CHECK_EQ(n, MRD_WINCTL_HISTORY);
    mrd_winctl_free(w);
}

static void test_ranks_cap(void)
{
    struct mrd_winctl *w = make((struct mrd_winctl_config){.max_ranks = 4});
    for (uint32_t r = 0; r < 6; r++)
        mrd_winctl_report(w, r * 1000003u, 10 + r, 100 * MS, 100 * MS, 0);
    CHECK_EQ(mrd_winctl_ignored(w), 2);
    CHECK(logged("ranks are tracked already"));
    struct mrd_winctl_choice ch;
    char why[256];
    CHECK_OK(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 3, NULL, 0, &ch, why, sizeof(why)));
    CHECK_EQ(ch.ranks, 4);
    CHECK_EQ(ch.highest, 13); /* ranks 4 and 5 (steps 14, 15) were not tracked */
    mrd_winctl_free(w);
}

static void test_margin(void)
{
    static const struct {
        uint32_t least, interval_ms;
        int64_t step_ns;
        uint64_t margin;
    } cases[] = {
        {2, 500, 100 * MS, 10},  /* 2 x 500 / 100 */
        {2, 500, 1000 * MS, 2},  /* 1 < the least margin */
        {2, 500, 300 * MS, 4},   /* ceil(3.33) */
        {2, 250, 100 * MS, 5},   /* another probe interval */
        {20, 500, 100 * MS, 20}, /* the least margin wins */
        {2, 500, 0, 2},          /* no step time yet */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mrd_winctl *w = make((struct mrd_winctl_config){
            .margin = cases[i].least, .probe_interval_ms = cases[i].interval_ms});
        mrd_winctl_report(w, 0, 50, cases[i].step_ns, cases[i].step_ns, 0);
        mrd_winctl_report(w, 1, 57, cases[i].step_ns, cases[i].step_ns, 0);
        struct mrd_winctl_choice ch;
        char why[256];
        CHECK_OK(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 5, "asked", 0, &ch, why, sizeof(why)));
        CHECK_UEQ(ch.margin, cases[i].margin);
        CHECK_UEQ(ch.req.first, 57 + cases[i].margin);
        CHECK_UEQ(ch.req.last, 57 + cases[i].margin + 4);
        CHECK_EQ(ch.req.id, 1);
        CHECK(logged("window 1 (on_demand): steps "));
        mrd_winctl_free(w);
    }
}

static void test_refusals_and_end(void)
{
    struct mrd_winctl *w = make((struct mrd_winctl_config){0});
    const struct mrd_winctl_request *q;
    struct mrd_winctl_choice ch;
    char why[256];
    CHECK_EQ(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 5, NULL, 0, &ch, why, sizeof(why)), -ENODATA);
    CHECK_STREQ(why, "no rank has reported a step yet: is the job in the steady tier, with NVTX "
                     "step ranges or steps counted from a collective (MERIDIAN_STEP_COLLECTIVE)?");
    for (uint32_t r = 0; r < 3; r++)
        mrd_winctl_report(w, r, 100, 100 * MS, 100 * MS, 0);
    CHECK_EQ(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 0, NULL, 0, &ch, why, sizeof(why)), -EINVAL);
    CHECK_EQ(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, MRD_WINCTL_LENGTH_MAX + 1, NULL, 0, &ch, why,
                             sizeof(why)),
             -EINVAL);
    for (int i = 0; i < MRD_WINDOW_REQUESTS_MAX; i++)
        CHECK_OK(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 1 + (uint64_t)i, NULL, 0, &ch, why,
                                 sizeof(why)));
    CHECK_EQ(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 5, NULL, 0, &ch, why, sizeof(why)), -EAGAIN);
    CHECK(strstr(why, "16 window requests are active") != NULL);
    CHECK_EQ(active(w, &q), MRD_WINDOW_REQUESTS_MAX);
    /* all are steps 110..110+i; the longest ends at 125: past it means begun > 126 */
    CHECK_UEQ(q[0].first, 110);
    CHECK_UEQ(q[15].last, 125);
    mrd_winctl_report(w, 0, 112, 100 * MS, 100 * MS, 10); /* past request 1 (last 110) */
    mrd_winctl_report(w, 1, 112, 100 * MS, 100 * MS, 10);
    CHECK_EQ(active(w, &q), 16); /* rank 2 is not */
    mrd_winctl_report(w, 2, 112, 100 * MS, 100 * MS, 10);
    CHECK_EQ(active(w, &q), 15);
    CHECK_EQ(q[0].id, 2);
    /* ranks 0 and 1 go on; rank 2 goes silent: waited for until it is stale (30 s) */
    mrd_winctl_report(w, 0, 200, 100 * MS, 100 * MS, 20000);
    mrd_winctl_report(w, 1, 200, 100 * MS, 100 * MS, 20000);
    mrd_winctl_tick(w, 20000);
    CHECK_EQ(active(w, &q), 15);
    mrd_winctl_report(w, 0, 201, 100 * MS, 100 * MS, 30011);
    mrd_winctl_report(w, 1, 201, 100 * MS, 100 * MS, 30011);
    mrd_winctl_tick(w, 30011);
    CHECK_EQ(active(w, &q), 0);
    /* the ttl: a rank that never passes */
    CHECK_OK(mrd_winctl_open(w, MRD_WINDOW_ON_DEMAND, 5, NULL, 40000, &ch, why, sizeof(why)));
    CHECK_EQ(ch.req.id, 17);
    CHECK_EQ(ch.ranks, 2);
    for (int64_t t = 40000; t < 40000 + MRD_WINCTL_TTL_MS; t += 10000) {
        mrd_winctl_report(w, 0, ch.req.last + 1, 100 * MS, 100 * MS, t); /* not past: last + 1 */
        mrd_winctl_report(w, 1, 500, 100 * MS, 100 * MS, t);
        mrd_winctl_tick(w, t);
        CHECK_EQ(active(w, &q), 1);
    }
    mrd_winctl_tick(w, 40000 + MRD_WINCTL_TTL_MS);
    CHECK_EQ(active(w, &q), 0);
    CHECK(logged("window 17 (on_demand, steps "));
    CHECK(logged("no longer sent after 600 s: rank 0 has reported only"));
    mrd_winctl_free(w);
}

static void test_trigger(void)
{
    struct mrd_winctl *w = make((struct mrd_winctl_config){
        .trigger_factor = 1.5, .trigger_length = 4, .trigger_cooldown = 100});
    const struct mrd_winctl_request *q;
    uint64_t s = 10;
    /* 19 samples: not enough for a trigger, even a slow step */
    for (int i = 0; i < 19; i++, s += 2)
        mrd_winctl_report(w, (uint32_t)i % 2, s, (i == 18 ? 900 : 100) * MS, (i == 18 ? 900 : 100) * MS, 0);
    CHECK_EQ(active(w, &q), 0);
    mrd_winctl_report(w, 0, s, 100 * MS, 100 * MS, 0); /* 20 held, the 900 ms one among them */
    s += 2;
    mrd_winctl_report(w, 1, s, 150 * MS, 150 * MS, 0); /* not over 1.5 x */
    CHECK_EQ(active(w, &q), 0);
    s += 2;
    mrd_winctl_report(w, 1, s, 151 * MS, 151 * MS, 0);
    CHECK_EQ(active(w, &q), 1);
    CHECK_EQ(q[0].reason, MRD_WINDOW_TRIGGER);
    CHECK_UEQ(q[0].first, s + 10);
    CHECK_UEQ(q[0].last, s + 13);
    CHECK(logged("rank 1's step took 151.000 ms, over 1.50 x the median 100.000 ms"));
    uint64_t at = s;
    for (s += 2; s < at + 100; s += 2) { /* cooling down: rank 0 slow, rank 1 not */
        mrd_winctl_report(w, 0, s, 400 * MS, 400 * MS, 0);
        mrd_winctl_report(w, 1, s, 100 * MS, 100 * MS, 0);
    }
    CHECK_EQ(active(w, &q), 0); /* the first one is past (both ranks), none new */
    CHECK_EQ(mrd_winctl_median(w, NULL), 100 * MS);
    mrd_winctl_report(w, 1, s, 400 * MS, 400 * MS, 0);
    CHECK_EQ(active(w, &q), 1);
    CHECK_EQ(q[0].id, 2);
    CHECK_UEQ(q[0].first, s + 10);
    mrd_winctl_free(w);
}

static void test_delay(void)
{
    struct mrd_winctl *w = make((struct mrd_winctl_config){.delay_ms = 5000, .duration_ms = 1250});
    const struct mrd_winctl_request *q;
    mrd_winctl_report(w, 0, 1, 0, 0, 1000); /* the first step: the delay runs from here */
    mrd_winctl_tick(w, 5999);
    CHECK_EQ(active(w, &q), 0);
    mrd_winctl_tick(w, 6000); /* due, but no step time known yet: waits */
    CHECK_EQ(active(w, &q), 0);
    mrd_winctl_report(w, 1, 30, 100 * MS, 100 * MS, 6500);
    CHECK_EQ(active(w, &q), 1);
    CHECK_EQ(q[0].reason, MRD_WINDOW_DELAY);
    CHECK_UEQ(q[0].first, 40);
    CHECK_UEQ(q[0].last, 52); /* ceil(1250 / 100) = 13 steps */
    mrd_winctl_tick(w, 99000);
    mrd_winctl_report(w, 0, 100, 100 * MS, 100 * MS, 99000);
    mrd_winctl_report(w, 1, 100, 100 * MS, 100 * MS, 99000);
    CHECK_EQ(active(w, &q), 0); /* once */
    mrd_winctl_free(w);
}

static void test_config(void)
{
    struct mrd_winctl *w;
    CHECK_EQ(mrd_winctl_new(&(struct mrd_winctl_config){.trigger_factor = 1.0}, &w), -EINVAL);
    CHECK_EQ(mrd_winctl_new(&(struct mrd_winctl_config){.margin = MRD_WINCTL_MARGIN_MAX + 1}, &w),
             -EINVAL);
    mrd_winctl_free(NULL);
}

int main(void)
{
    test_config();
    test_samples();
    test_median_differential();
    test_ranks_cap();
    test_margin();
    test_refusals_and_end();
    test_trigger();
    test_delay();
    printf("aggregator_winctl: ok\n");
    return 0;
}
