/* capture_collstep_rule: the collective step rule (proto/collstep.c), alone.
 *
 *  - parsing: FUNC[/N][@COMM] and auto[@COMM] (N explicit and default, COMM by name, hash
 *    and world, case of the function), every refusal with its reason, the canonical text;
 *  - the DDP rule's detector against a brute-force oracle that applies the definition in
 *    collstep.h directly (for each AllReduce, each period's periodic suffix counted by
 *    walking back over the whole sequence), on 3000 random sequences: a random prefix (the
 *    first iteration's other layout), then a random period of random keys from a small
 *    alphabet (so that smaller inner periods and tails matching the layout occur), repeated,
 *    sometimes with a key changed part-way or a gap in the sequence numbers. Both must begin
 *    steps at exactly the same AllReduces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collstep.h"

static void parse_ok(const char *spec, int mode, const char *func, uint64_t every, int comm,
                     const char *canon)
{
    struct mrd_collstep_rule r;
    char why[256] = "", text[128];
    CHECK_EQ(mrd_collstep_parse(spec, &r, why, sizeof(why)), 0);
    CHECK_EQ(r.mode, mode);
    if (func)
        CHECK_STREQ(r.func, func);
    CHECK_EQ(r.every, every);
    CHECK_EQ(r.comm, comm);
    mrd_collstep_format(&r, text, sizeof(text));
    CHECK_STREQ(text, canon);
}

static void parse_bad(const char *spec, const char *why_has)
{
    struct mrd_collstep_rule r;
    char why[256] = "";
    CHECK_EQ(mrd_collstep_parse(spec, &r, why, sizeof(why)), -22);
    if (!strstr(why, why_has)) {
        fprintf(stderr, "\"%s\": reason \"%s\" lacks \"%s\"\n", spec, why, why_has);
        CHECK(0);
    }
    printf("refused \"%s\": %s\n", spec, why);
}

static void parsing(void)
{
    struct mrd_collstep_rule r;
    char why[64];
    parse_ok(NULL, MRD_COLLSTEP_OFF, NULL, 0, MRD_COLLSTEP_WORLD, "off");
    parse_ok("", MRD_COLLSTEP_OFF, NULL, 0, MRD_COLLSTEP_WORLD, "off");
    parse_ok("auto", MRD_COLLSTEP_AUTO, "AllReduce", 0, MRD_COLLSTEP_WORLD, "auto@world");
    parse_ok("auto@ddp", MRD_COLLSTEP_AUTO, "AllReduce", 0, MRD_COLLSTEP_NAMED, "auto@ddp");
    parse_ok("AllReduce", MRD_COLLSTEP_EXPLICIT, "AllReduce", 1, MRD_COLLSTEP_WORLD,
             "AllReduce/1@world");
    parse_ok("allreduce/12@0x1F", MRD_COLLSTEP_EXPLICIT, "AllReduce", 12, MRD_COLLSTEP_HASH,
             "AllReduce/12@0x1f");
    parse_ok("Broadcast/4@world", MRD_COLLSTEP_EXPLICIT, "Broadcast", 4, MRD_COLLSTEP_WORLD,
             "Broadcast/4@world");
    parse_ok("ReduceScatter/1000000@pg 3", MRD_COLLSTEP_EXPLICIT, "ReduceScatter", 1000000,
             MRD_COLLSTEP_NAMED, "ReduceScatter/1000000@pg 3");
    CHECK_EQ(mrd_collstep_parse("AllGather/3@tp", &r, why, sizeof(why)), 0);
    CHECK_STREQ(r.comm_name, "tp");
    CHECK(mrd_collstep_func_is(&r, "AllGather") && !mrd_collstep_func_is(&r, "AllReduce"));
    CHECK(!mrd_collstep_func_is(&r, NULL));
    CHECK_EQ(mrd_collstep_parse("Gather@0xdeadbeefcafe", &r, why, sizeof(why)), 0);
    CHECK_EQ(r.comm_hash, 0xdeadbeefcafeull);

    parse_bad("AllReduce/0", "N must be a whole number from 1 to 1000000, not \"0\"");
    parse_bad("AllReduce/x", "not \"x\"");
    parse_bad("AllReduce/", "not \"\"");
    parse_bad("AllReduce/1000001", "not \"1000001\"");
    parse_bad("AllReduce/99999999999999999999999", "N must be a whole number");
    parse_bad("Send", "\"Send\" is not a collective");
    parse_bad("step", "is not a collective");
    parse_bad("auto/3", "'auto' finds N itself");
    parse_bad("AllReduce@", "nothing after '@'");
    parse_bad("AllReduce@0xzz", "is not 1 to 16 hex digits");
    parse_bad("AllReduce@0x", "is not 1 to 16 hex digits");
    parse_bad("AllReduce@0x11112222333344445", "is not 1 to 16 hex digits");
    parse_bad("auto@a-name-much-longer-than-sixty-three-bytes-is-refused-xxxxxxxxxxxx",
              "longer than 63 bytes");
    CHECK_EQ(mrd_collstep_key(10, "ncclFloat32"), mrd_collstep_key(10, "ncclFloat32"));
    CHECK(mrd_collstep_key(10, "ncclFloat32") != mrd_collstep_key(11, "ncclFloat32"));
    CHECK(mrd_collstep_key(10, "ncclFloat32") != mrd_collstep_key(10, "ncclBfloat16"));
}

/* ---- the oracle: collstep.h's definition, by brute force ---- */

#define MAXN 2000

struct oracle {
    int locked;
    uint64_t period, anchor, first;
};

/* x[0..n) are the keys since the last reset, the newest last; seq the newest's sequence
 * number. Locks when the definition says so. */
static void oracle_step(struct oracle *o, const uint64_t *x, size_t n, uint64_t seq)
{
    if (o->locked)
        return;
    for (uint64_t p = 1; p <= MRD_COLLSTEP_PERIOD_MAX && p < n; p++) {
        uint64_t run = 0; /* consecutive j, ending at n-1, with x[j] == x[j-p] */
        for (size_t j = n - 1; j >= p && x[j] == x[j - p]; j--)
            run++;
        uint64_t suffix = run + p, need = 3 * p > 12 ? 3 * p : 12;
        if (run && suffix >= need) {
            o->locked = 1;
            o->period = p;
            o->anchor = seq + 1 - suffix;
            o->first = o->anchor + (suffix + p - 1) / p * p;
            return;
        }
    }
}

static int oracle_begins(const struct oracle *o, uint64_t seq)
{
    return o->locked && seq >= o->first && (seq - o->anchor) % o->period == 0;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void random_sequences(void)
{
    static uint64_t x[MAXN];
    static struct mrd_collstep_detect d;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    unsigned locked = 0, steps_total = 0, gaps = 0;
    for (int trial = 0; trial < 3000; trial++) {
        size_t prefix = rnd(&s) % 24;
        uint64_t period = 1 + rnd(&s) % 40, alpha = 2 + rnd(&s) % 6;
        uint64_t pattern[64];
        for (uint64_t i = 0; i < period; i++)
            pattern[i] = 100 + rnd(&s) % alpha;
        size_t total = prefix + period * (2 + rnd(&s) % 12);
        size_t change = rnd(&s) % 3 == 0 ? prefix + rnd(&s) % (total - prefix) : total;
        size_t gap_at = rnd(&s) % 5 == 0 ? rnd(&s) % total : total;
        struct oracle o = {0};
        size_t n = 0; /* keys since the oracle's reset */
        uint64_t seq = rnd(&s) % 3, begun_det = 0, begun_or = 0;
        mrd_collstep_detect_reset(&d);
        for (size_t i = 0; i < total; i++) {
            uint64_t key = i < prefix ? 1 + rnd(&s) % alpha : pattern[(i - prefix) % period];
            if (i >= change)
                key += 1000; /* the layout changed part-way */
            if (i == gap_at) {
                seq += 1 + rnd(&s) % 5; /* sequence numbers skipped */
                if (!o.locked)
                    n = 0; /* the definition: detection starts again at a gap */
                gaps++;
            }
            int got = mrd_collstep_detect_feed(&d, seq, key);
            int want = oracle_begins(&o, seq);
            x[n++] = key;
            oracle_step(&o, x, n, seq);
            if (got != want) {
                fprintf(stderr,
                        "trial %d: AllReduce %zu (seq %llu): detector %d, oracle %d "
                        "(prefix %zu period %llu)\n",
                        trial, i, (unsigned long long)seq, got, want, prefix,
                        (unsigned long long)period);
                CHECK(0);
            }
            begun_det += (uint64_t)got;
            begun_or += (uint64_t)want;
            CHECK_EQ(d.period, o.locked ? o.period : 0);
            seq++;
        }
        CHECK_EQ(begun_det, begun_or);
        locked += o.locked;
        steps_total += (unsigned)begun_det;
    }
    printf("random sequences: 3000, %u locked, %u steps, %u gaps: detector == oracle\n", locked,
           steps_total, gaps);
    CHECK(locked > 1000 && steps_total > 3000); /* the comparison saw real locks */
}

/* The DDP shape by hand: 3 buckets, then 4 distinct ones repeated. */
static void ddp_shape(void)
{
    static struct mrd_collstep_detect d;
    const uint64_t first[3] = {9, 6, 2}, later[4] = {4, 8, 2, 1};
    uint64_t seq = 0, begins[16];
    int nb = 0;
    mrd_collstep_detect_reset(&d);
    for (int it = 0; it < 8; it++)
        for (int b = 0; b < (it ? 4 : 3); b++, seq++)
            if (mrd_collstep_detect_feed(&d, seq, it ? later[b] : first[b]))
                begins[nb++] = seq;
    /* iterations 1-3 (seqs 3-14) lock the period 4 from seq 3; steps at iterations 4-7 */
    CHECK_EQ(d.period, 4u);
    CHECK_EQ(d.anchor, 3u);
    CHECK_EQ(nb, 4);
    for (int j = 0; j < 4; j++)
        CHECK_EQ(begins[j], 15u + 4u * (uint64_t)j);
}

/* The search ends after MRD_COLLSTEP_SEARCH_MAX AllReduces without a period (counted across
 * gaps): a period that starts only then is not taken; one found just before the end is. */
static void search_limit(void)
{
    static struct mrd_collstep_detect d;
    uint64_t seq = 0, begins = 0;
    mrd_collstep_detect_reset(&d);
    for (; seq < MRD_COLLSTEP_SEARCH_MAX; seq++)
        begins += (uint64_t)mrd_collstep_detect_feed(&d, seq + (seq > 1000 ? 7 : 0), seq);
    for (uint64_t i = 0; i < 400; i++, seq++)
        begins += (uint64_t)mrd_collstep_detect_feed(&d, seq + 7, i % 4);
    CHECK_EQ(d.period, 0u);
    CHECK_EQ(begins, 0u);
    mrd_collstep_detect_reset(&d);
    for (seq = 0; seq < MRD_COLLSTEP_SEARCH_MAX - 12; seq++)
        mrd_collstep_detect_feed(&d, seq, seq);
    for (uint64_t i = 0; i < 400; i++, seq++)
        begins += (uint64_t)mrd_collstep_detect_feed(&d, seq, i % 4);
    CHECK_EQ(d.period, 4u);
    CHECK_EQ(begins, 97u); /* locked at the 12th, the last searched; steps at 13, 17, ... */
}

int main(void)
{
    parsing();
    ddp_shape();
    search_limit();
    random_sequences();
    printf("capture_collstep_rule: ok\n");
    return 0;
}
