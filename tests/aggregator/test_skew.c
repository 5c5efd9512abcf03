/* aggregator_skew: the collective-skew tracker (aggregator/ingest/skew.c) against a
 * trivial model written from skew.h's rules (arrays scanned linearly, a full sort for each
 * median, the best clock sample found by scanning every sample a rank sent), under random
 * operations:
 *   - 6 to 8 ranks, each with its own clock offset (up to +-50 ms) and clock samples whose
 *     round trips and asymmetries are random (so the best sample is not the newest, and its
 *     offset is not the true one);
 *   - instances of 3 communicators (sizes 2 to all ranks) x 3 functions, their ops sent in
 *     a random interleaving, some twice (a resent batch), some never (a rank that missed
 *     it: the instance waits until evicted), now and then one rank late by 5-40 ms;
 *   - a small pending cap (48), so that evictions happen;
 *   - a rank whose ops arrive before its first clock sample (unaligned instances).
 * Every op's result (hit or not, and the hit's skew, median, error, latest and earliest
 * rank, held) and the counters at the end must equal the model's. A fixed case checks one
 * hit by hand, and that the function name comes from the rank's string definitions.
 * Window control's entry for it (mrd_winctl_trigger): refused, said once, before any step;
 * then a TRIGGER window at highest + margin; silent during the cooldown, which it shares
 * with the step trigger.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "skew.h"
#include "steps.h"
#include "winctl.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int64_t urange(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- the model ---- */

#define MR      8
#define MAXS    4096
#define MS      1000000LL
#define MAXI    4096
#define PENDCAP 48
#define FACTOR  3.0

struct m_sample {
    int64_t off, rtt;
};
static struct m_sample m_samples[MR][MAXS];
static int m_nsamples[MR];

struct m_inst {
    uint64_t comm, seq;
    int func, nranks, live;
    int seen_rank[MR]; /* comm ranks seen */
    int nseen, unaligned;
    int64_t t[MR], err[MR];
    int job_rank[MR];
};
static struct m_inst m_pend[MAXI];
static int m_npend;
static struct {
    uint64_t comm, seq;
    int func;
} m_created[1 << 16];
static int m_created_head, m_created_n;
struct m_group {
    uint64_t comm;
    int func;
    int64_t all[1 << 14];
    int n;
};
static struct m_group m_groups[16];
static int m_ngroups;
static struct mrd_skew_counters m_cnt;

static const char *fname[] = {"AllReduce", "Broadcast", "AllGather"};

static int m_best(int rank, int64_t *off, int64_t *rtt)
{
    int n = m_nsamples[rank], from = n > MRD_SKEW_CLOCK_KEEP ? n - MRD_SKEW_CLOCK_KEEP : 0;
    if (n == 0)
        return 0;
    *rtt = -1;
    for (int i = from; i < n; i++) /* the earliest of equal round trips, in arrival order */
        if (*rtt < 0 || m_samples[rank][i].rtt < *rtt) {
            *rtt = m_samples[rank][i].rtt;
            *off = m_samples[rank][i].off;
        }
    return 1;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The model's answer for one op: 1 and *hit when it completes an instance over the
 * threshold. */
static int m_op(int rank, uint64_t comm, uint64_t seq, int func, int crank, int nranks,
                int64_t start, struct mrd_skew_hit *hit)
{
    struct m_inst *e = NULL;
    for (int i = 0; i < m_npend; i++)
        if (m_pend[i].live && m_pend[i].comm == comm && m_pend[i].seq == seq &&
            m_pend[i].func == func)
            e = &m_pend[i];
    if (!e) {
        if (m_created_n == PENDCAP) {
            int h = m_created_head;
            for (int i = 0; i < m_npend; i++)
                if (m_pend[i].live && m_pend[i].comm == m_created[h].comm &&
                    m_pend[i].seq == m_created[h].seq && m_pend[i].func == m_created[h].func) {
                    m_pend[i].live = 0;
                    m_cnt.evicted++;
                }
            m_created_head = (m_created_head + 1) % (1 << 16);
            m_created_n--;
        }
        CHECK(m_npend < MAXI);
        e = &m_pend[m_npend++];
        memset(e, 0, sizeof(*e));
        e->live = 1;
        e->comm = comm;
        e->seq = seq;
        e->func = func;
        e->nranks = nranks;
        int slot = (m_created_head + m_created_n++) % (1 << 16);
        m_created[slot].comm = comm;
        m_created[slot].seq = seq;
        m_created[slot].func = func;
    }
    for (int i = 0; i < e->nseen; i++)
        if (e->seen_rank[i] == crank)
            return 0; /* resent */
    int64_t off = 0, rtt = 0;
    if (!m_best(rank, &off, &rtt))
        e->unaligned = 1;
    e->seen_rank[e->nseen] = crank;
    e->t[e->nseen] = start + off;
    e->err[e->nseen] = rtt;
    e->job_rank[e->nseen] = rank;
    if (++e->nseen < e->nranks)
        return 0;
    e->live = 0;
    m_cnt.completed++;
    if (e->unaligned) {
        m_cnt.unaligned++;
        return 0;
    }
    int lo = 0, hi = 0; /* the first earliest and the first latest in arrival order */
    for (int i = 1; i < e->nseen; i++) {
        if (e->t[i] < e->t[lo])
            lo = i;
        if (e->t[i] > e->t[hi])
            hi = i;
    }
    int64_t skew = e->t[hi] - e->t[lo], err = (e->err[lo] + e->err[hi]) / 2;
    struct m_group *g = NULL;
    for (int i = 0; i < m_ngroups; i++)
        if (m_groups[i].comm == comm && m_groups[i].func == func)
            g = &m_groups[i];
    if (!g) {
        g = &m_groups[m_ngroups++];
        g->comm = comm;
        g->func = func;
        g->n = 0;
    }
    int held = g->n < MRD_SKEW_HISTORY ? g->n : MRD_SKEW_HISTORY, fire = 0;
    int64_t median = 0;
    if (held >= MRD_SKEW_MIN_COUNT) {
        static int64_t v[MRD_SKEW_HISTORY];
        memcpy(v, g->all + g->n - held, (size_t)held * sizeof(int64_t));
        qsort(v, (size_t)held, sizeof(int64_t), cmp64);
        median = v[held / 2];
        fire = (double)skew > FACTOR * (double)median && skew > err;
    }
    g->all[g->n++] = skew;
    if (!fire)
        return 0;
    m_cnt.hits++;
    *hit = (struct mrd_skew_hit){.comm_hash = comm,
                                 .seq = seq,
                                 .func = fname[func],
                                 .skew_ns = skew,
                                 .median_ns = median,
                                 .error_ns = err,
                                 .latest_rank = (uint32_t)e->job_rank[hi],
                                 .earliest_rank = (uint32_t)e->job_rank[lo],
                                 .nranks = (uint32_t)nranks,
                                 .held = (size_t)held};
    return 1;
}

/* ---- the random run ---- */

struct op {
    int rank, crank, nranks, func;
    uint64_t comm, seq;
    int64_t start;
};
static struct op ops[1 << 16];

static void random_run(void)
{
    struct mrd_skew_config cfg = {.factor = FACTOR, .max_pending = PENDCAP, .max_ranks = 64};
    struct mrd_skew *s;
    CHECK_EQ(mrd_skew_new(&cfg, &s), 0);
    int nr = (int)urange(6, MR);
    int64_t true_off[MR];
    for (int r = 0; r < nr; r++) {
        true_off[r] = urange(-50000000, 50000000);
        for (int f = 0; f < 3; f++) /* each rank's own string ids */
            mrd_skew_string(s, (uint32_t)r, (uint32_t)(10 * r + f + 1), fname[f]);
        mrd_skew_string(s, (uint32_t)r, 99, "ncclFloat32"); /* not a function */
    }
    const uint64_t comms[3] = {0xc0ffee, 0xbeef, 0xfeed};
    int csize[3] = {nr, 2, (int)urange(3, nr)};
    uint64_t seqs[3][3] = {{0}};
    int nops = 0, hits = 0;
    int64_t now = 1000000000;
    for (int round = 0; round < 400; round++) {
        /* clock samples: rank 5 sends none before round 40 */
        for (int r = 0; r < nr; r++) {
            if (r == 5 && round < 40)
                continue;
            int64_t t0 = now + urange(0, 1000000), a = urange(5000, 200000),
                    b = urange(5000, 200000), proc = urange(1000, 20000);
            /* the agent's clock is global + true_off; a and b: the two one-way delays */
            struct mrd_clock_sample c = {.t0 = t0,
                                         .t1 = t0 - true_off[r] + a,
                                         .t2 = t0 - true_off[r] + a + proc,
                                         .t3 = t0 + a + proc + b};
            mrd_skew_clock(s, (uint32_t)r, &c);
            struct m_sample *ms = &m_samples[r][m_nsamples[r]++];
            ms->rtt = (c.t3 - c.t0) - (c.t2 - c.t1);
            ms->off = ((c.t1 - c.t0) + (c.t2 - c.t3)) / 2;
        }
        /* a few instances, their ops shuffled */
        nops = 0;
        for (int k = 0; k < 4; k++) {
            int ci = (int)(rnd() % 3), f = (int)(rnd() % 3);
            uint64_t seq = seqs[ci][f]++;
            int64_t base = now + urange(0, 5000000);
            int late = rnd() % 25 == 0 ? (int)(rnd() % (uint64_t)csize[ci]) : -1;
            for (int cr = 0; cr < csize[ci]; cr++) {
                int rank = ci == 0 ? cr : ci == 1 ? (cr == 0 ? 1 : 3) : cr; /* job ranks */
                if (rnd() % 60 == 0)
                    continue; /* this rank's op never comes */
                int64_t arrive = base + urange(0, 300000) + (cr == late ? urange(5, 40) * MS : 0);
                struct op o = {.rank = rank,
                               .crank = cr,
                               .nranks = csize[ci],
                               .func = f,
                               .comm = comms[ci],
                               .seq = seq,
                               .start = arrive + true_off[rank]};
                ops[nops++] = o;
                if (rnd() % 20 == 0)
                    ops[nops++] = o; /* resent */
            }
        }
        for (int i = nops - 1; i > 0; i--) {
            int j = (int)(rnd() % (uint64_t)(i + 1));
            struct op t = ops[i];
            ops[i] = ops[j];
            ops[j] = t;
        }
        for (int i = 0; i < nops; i++) {
            struct op *o = &ops[i];
            struct mrd_nccl_op e = {0};
            e.comm_hash = o->comm;
            e.seq = o->seq;
            e.func = (uint32_t)(10 * o->rank + o->func + 1);
            e.comm_rank = (uint32_t)o->crank;
            e.comm_nranks = (uint32_t)o->nranks;
            e.start = o->start;
            e.end = o->start + 1000;
            struct mrd_skew_hit got, want;
            memset(&got, 0, sizeof(got));
            memset(&want, 0, sizeof(want));
            int g = mrd_skew_op(s, (uint32_t)o->rank, &e, &got);
            int w = m_op(o->rank, o->comm, o->seq, o->func, o->crank, o->nranks, o->start, &want);
            CHECK_EQ(g, w);
            if (g) {
                CHECK_UEQ(got.comm_hash, want.comm_hash);
                CHECK_UEQ(got.seq, want.seq);
                CHECK_STREQ(got.func, want.func);
                CHECK_EQ(got.skew_ns, want.skew_ns);
                CHECK_EQ(got.median_ns, want.median_ns);
                CHECK_EQ(got.error_ns, want.error_ns);
                CHECK_UEQ(got.latest_rank, want.latest_rank);
                CHECK_UEQ(got.earliest_rank, want.earliest_rank);
                CHECK_UEQ(got.nranks, want.nranks);
                CHECK_UEQ(got.held, want.held);
                hits++;
            }
        }
        now += 10000000;
    }
    struct mrd_skew_counters c;
    mrd_skew_get_counters(s, &c);
    CHECK_UEQ(c.completed, m_cnt.completed);
    CHECK_UEQ(c.unaligned, m_cnt.unaligned);
    CHECK_UEQ(c.evicted, m_cnt.evicted);
    CHECK_UEQ(c.hits, m_cnt.hits);
    printf("random: %d ranks, %llu completed (%llu unaligned), %llu evicted, %d hits: tracker == "
           "model\n",
           nr, (unsigned long long)c.completed, (unsigned long long)c.unaligned,
           (unsigned long long)c.evicted, hits);
    CHECK(hits >= 5 && c.evicted > 0 && c.unaligned > 0); /* every path was taken */
    mrd_skew_free(s);
}

/* One hand-made case: 2 ranks, exact clocks (offset 0, round trip 10 us), 20 AllReduces
 * 100 us apart, then one where rank 1 is 2 ms late: a hit naming rank 1, skew 2 ms,
 * median 100 us. A Send (p2p) and an op whose function string is unknown change nothing. */
static void by_hand(void)
{
    struct mrd_skew_config cfg = {.factor = 4.0};
    struct mrd_skew *s;
    struct mrd_skew_hit hit;
    CHECK_EQ(mrd_skew_new(&(struct mrd_skew_config){.factor = 1.0}, &s), -22);
    CHECK_EQ(mrd_skew_new(&cfg, &s), 0);
    for (uint32_t r = 0; r < 2; r++) {
        struct mrd_clock_sample c = {.t0 = 1000, .t1 = 6000, .t2 = 6000, .t3 = 11000};
        mrd_skew_clock(s, r, &c);
        mrd_skew_string(s, r, 7, "AllReduce");
    }
    struct mrd_nccl_op e = {.comm_hash = 0xabc, .comm_nranks = 2, .func = 7};
    for (uint64_t k = 0; k < 21; k++) {
        int64_t base = 1000000000 + (int64_t)k * 50000000;
        e.seq = k;
        e.comm_rank = 0;
        e.start = base;
        CHECK_EQ(mrd_skew_op(s, 0, &e, &hit), 0);
        e.comm_rank = 1;
        e.start = base + (k < 20 ? 100000 : 2000000);
        CHECK_EQ(mrd_skew_op(s, 1, &e, &hit), k == 20);
    }
    CHECK_STREQ(hit.func, "AllReduce");
    CHECK_EQ(hit.skew_ns, 2000000);
    CHECK_EQ(hit.median_ns, 100000);
    CHECK_EQ(hit.error_ns, 10000);
    CHECK_UEQ(hit.latest_rank, 1u);
    CHECK_UEQ(hit.held, 20u);
    size_t held = 0;
    CHECK_EQ(mrd_skew_median(s, 0xabc, "AllReduce", &held), 100000);
    CHECK_UEQ(held, 21u);
    struct mrd_nccl_op p2p = {.is_p2p = 1, .comm_nranks = 2, .func = 7};
    CHECK_EQ(mrd_skew_op(s, 0, &p2p, &hit), 0);
    e.func = 8; /* never defined as a function */
    CHECK_EQ(mrd_skew_op(s, 0, &e, &hit), 0);
    struct mrd_skew_counters c;
    mrd_skew_get_counters(s, &c);
    CHECK_UEQ(c.completed, 21u);
    CHECK_UEQ(c.hits, 1u);
    CHECK_UEQ(c.ignored, 1u);
    mrd_skew_free(s);
}

static char lines[16][512];
static int nlines;
static void keep_line(void *ctx, const char *line)
{
    (void)ctx;
    if (nlines < 16)
        snprintf(lines[nlines], sizeof(lines[0]), "%s", line);
    nlines++;
}

static void winctl_entry(void)
{
    struct mrd_winctl *w;
    const struct mrd_winctl_request *q;
    struct mrd_winctl_choice ch;
    struct mrd_winctl_config cfg = {
        .trigger_length = 5, .trigger_cooldown = 50, .trigger_factor = 2.0, .log = keep_line};
    CHECK_EQ(mrd_winctl_new(&cfg, &w), 0);
    CHECK_EQ(mrd_winctl_trigger(w, "skew A", 0, NULL), -ENODATA);
    CHECK_EQ(mrd_winctl_trigger(w, "skew B", 0, NULL), -ENODATA);
    CHECK_EQ(nlines, 1); /* said once */
    CHECK(strstr(lines[0], "no trigger window (skew A): no rank has reported a step yet"));
    mrd_winctl_report(w, 0, 40, 0, 0, 10);
    mrd_winctl_report(w, 1, 42, 0, 0, 10);
    CHECK_EQ(mrd_winctl_trigger(w, "skew C", 20, &ch), 0);
    CHECK_UEQ(ch.req.first, 44u); /* highest 42 + least margin 2 */
    CHECK_UEQ(ch.req.last, 48u);
    CHECK_EQ(ch.req.reason, MRD_WINDOW_TRIGGER);
    CHECK_EQ(mrd_winctl_active(w, &q), 1u);
    CHECK(strstr(lines[1], "window 1 (trigger): steps 44-48 (5 steps) = highest step counter 42"));
    CHECK(strstr(lines[1], "; skew C"));
    mrd_winctl_report(w, 1, 91, 0, 0, 30); /* 42 + 49: still cooling down */
    CHECK_EQ(mrd_winctl_trigger(w, "skew D", 30, NULL), -EALREADY);
    /* a slow step now (the step trigger) is held by the same cooldown */
    for (int i = 0; i < 24; i++)
        mrd_winctl_report(w, 0, 41, 100 * MS, 100 * MS, 30);
    mrd_winctl_report(w, 0, 41, 900 * MS, 900 * MS, 30);
    CHECK_EQ(mrd_winctl_active(w, &q), 1u);
    CHECK_EQ(nlines, 2);
    mrd_winctl_report(w, 1, 92, 0, 0, 40);
    CHECK_EQ(mrd_winctl_trigger(w, "skew E", 40, &ch), 0);
    CHECK_UEQ(ch.req.id, 2u);
    CHECK_UEQ(ch.req.first, 92u + ch.margin);
    mrd_winctl_free(w);
}

int main(void)
{
    winctl_entry();
    by_hand();
    random_run();
    printf("aggregator_skew: ok\n");
    return 0;
}
