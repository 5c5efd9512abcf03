/* agent_config: the environment contract (agent/ENVIRONMENT.md) as mrd__config_parse reads
 * it: rank precedence, inertness, record-only mode, numbers and their limits, secrets (one
 * is required unless in record-only mode: without one the agent would start, send an
 * empty secret and retry against a meridiand that refuses it for the whole run), and a
 * list of aggregators (sharded aggregation): rank r takes entry r % N as its aggregator and
 * shard id, every entry is checked with its index in the error, an explicit
 * MERIDIAN_SHARD_ID must agree with a list, a single address is unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "error.h"

struct env {
    const char *kv[32][2];
};

static const char *lookup(const char *name, void *arg)
{
    struct env *e = arg;
    for (int i = 0; i < 32 && e->kv[i][0]; i++)
        if (strcmp(e->kv[i][0], name) == 0)
            return e->kv[i][1];
    return NULL;
}

static int parse(struct env *e, struct mrd_agent_config *c, char *why)
{
    return mrd__config_parse(c, lookup, e, why, 256);
}

#define BASE                                                                                       \
    {"MERIDIAN_AGGREGATOR", "127.0.0.1:47500"},                                                    \
    {                                                                                              \
        "MERIDIAN_RUN_ID", "run1"                                                                  \
    }

#define SECRET                                                                                     \
    {                                                                                              \
        "MERIDIAN_SECRET", "s3cret"                                                                \
    }

/* MERIDIAN_AGGREGATOR as a list of shards (ENVIRONMENT.md, "Sharded aggregation"). */
static void shards(void)
{
    struct mrd_agent_config c;
    char why[256];
    const char *three = "alpha.example:47501,10.0.0.2:47502,[fd00::3]:47503";
    const char *want_agg[] = {"alpha.example:47501", "10.0.0.2:47502", "[fd00::3]:47503"};
    const int ranks[] = {0, 4, 5, 1, 3, 2147483647};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", ranks[i]);
        struct env e = {{{"MERIDIAN_AGGREGATOR", three},
                         {"MERIDIAN_RUN_ID", "r"},
                         SECRET,
                         {"OMPI_COMM_WORLD_RANK", rank}}};
        CHECK_EQ(parse(&e, &c, why), 1);
        unsigned entry = (unsigned)ranks[i] % 3u;
        CHECK_STREQ(c.aggregator, want_agg[entry]);
        CHECK_UEQ(c.shard_index, entry);
        CHECK_UEQ(c.shard_id, entry);
        CHECK_UEQ(c.shard_count, 3);
    }
    /* MERIDIAN_FORCE without a rank variable is rank 0: entry 0 */
    struct env ef = {{{"MERIDIAN_AGGREGATOR", three}, {"MERIDIAN_RUN_ID", "r"}, SECRET,
                      {"MERIDIAN_FORCE", "1"}}};
    CHECK_EQ(parse(&ef, &c, why), 1);
    CHECK_STREQ(c.aggregator, want_agg[0]);
    CHECK_UEQ(c.shard_id, 0);

    /* blanks (space, tab) around entries are ignored; the chosen entry is stored bare */
    struct env ew = {{{"MERIDIAN_AGGREGATOR", " a.example:1 ,\tb.example:2\t, c.example:3 "},
                      {"MERIDIAN_RUN_ID", "r"},
                      SECRET,
                      {"RANK", "7"}}};
    CHECK_EQ(parse(&ew, &c, why), 1);
    CHECK_STREQ(c.aggregator, "b.example:2");
    CHECK_UEQ(c.shard_id, 1);

    /* explicit MERIDIAN_SHARD_ID with a list: accepted when it equals the entry's index,
     * refused (inert, with the reason) otherwise */
    struct env ex = {{{"MERIDIAN_AGGREGATOR", three},
                      {"MERIDIAN_RUN_ID", "r"},
                      SECRET,
                      {"RANK", "4"},
                      {"MERIDIAN_SHARD_ID", "1"}}};
    CHECK_EQ(parse(&ex, &c, why), 1);
    CHECK_UEQ(c.shard_id, 1);
    CHECK_STREQ(c.aggregator, want_agg[1]);
    const char *mismatch[] = {"0", "2", "4", "4294967295"};
    for (size_t i = 0; i < sizeof mismatch / sizeof mismatch[0]; i++) {
        ex.kv[4][1] = mismatch[i];
        CHECK_EQ(parse(&ex, &c, why), -MRD_ERR_CONFIG);
        CHECK(strstr(why, "MERIDIAN_SHARD_ID") != NULL);
        CHECK(strstr(why, "entry 1 of 3") != NULL);
    }
    ex.kv[4][1] = "one"; /* not a number: the number rule first */
    CHECK_EQ(parse(&ex, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_SHARD_ID=one is not a number") != NULL);
    ex.kv[4][1] = ""; /* empty is unset */
    CHECK_EQ(parse(&ex, &c, why), 1);
    CHECK_UEQ(c.shard_id, 1);

    /* a single address: exactly as before (shard 0, or MERIDIAN_SHARD_ID whatever it is) */
    struct env es = {{BASE, SECRET, {"RANK", "5"}, {"MERIDIAN_SHARD_ID", "7"}}};
    CHECK_EQ(parse(&es, &c, why), 1);
    CHECK_STREQ(c.aggregator, "127.0.0.1:47500");
    CHECK_UEQ(c.shard_id, 7);
    CHECK_UEQ(c.shard_index, 0);
    CHECK_UEQ(c.shard_count, 1);
    es.kv[4][0] = "MERIDIAN_BATCH_MS", es.kv[4][1] = "20";
    CHECK_EQ(parse(&es, &c, why), 1);
    CHECK_UEQ(c.shard_id, 0);
    es.kv[0][1] = " 127.0.0.1:47500"; /* a single address is kept verbatim (as before) */
    CHECK_EQ(parse(&es, &c, why), 1);
    CHECK_STREQ(c.aggregator, " 127.0.0.1:47500");
    es.kv[0][1] = "127.0.0.1:0";
    CHECK_EQ(parse(&es, &c, why), -MRD_ERR_CONFIG);
    CHECK_STREQ(why, "MERIDIAN_AGGREGATOR=127.0.0.1:0 is not host:port");

    /* bad entries: the message names the entry's 0-based index; every entry is checked,
     * also those this rank does not connect to */
    const char *bad[][2] = {{"a:1,b,c:3", "entry 1 (b) is not host:port"},
                            {"a:1,b:,c:3", "entry 1 (b:) is not host:port"},
                            {"a:1,b:2,c:0", "entry 2 (c:0) is not host:port"},
                            {"a:1,b:2,c:65536", "entry 2 (c:65536) is not host:port"},
                            {"a:1,::1:2", "entry 1 (::1:2) is not host:port"},
                            {"a:x,b:2", "entry 0 (a:x) is not host:port"},
                            {"a:1,,c:3", "entry 1 is empty"},
                            {"a:1, \t ,c:3", "entry 1 is empty"},
                            {",a:1", "entry 0 is empty"},
                            {"a:1,", "entry 1 is empty"},
                            {",", "entry 0 is empty"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct env eb = {{{"MERIDIAN_AGGREGATOR", bad[i][0]},
                          {"MERIDIAN_RUN_ID", "r"},
                          SECRET,
                          {"RANK", "0"}}};
        CHECK_EQ(parse(&eb, &c, why), -MRD_ERR_CONFIG);
        CHECK(strncmp(why, "MERIDIAN_AGGREGATOR: ", 21) == 0);
        CHECK(strstr(why, bad[i][1]) != NULL);
        /* not a rank: inert and silent as before, whatever the list holds */
        eb.kv[3][0] = "MERIDIAN_QUEUE_BYTES";
        CHECK_EQ(parse(&eb, &c, why), 0);
        CHECK_STREQ(why, "");
    }
    /* an entry longer than an address may be (255 bytes) */
    char longlist[600];
    memset(longlist, 'h', sizeof longlist);
    memcpy(longlist, "a:1,", 4);
    memcpy(longlist + 4 + 300, ":9", 3);
    struct env el = {{{"MERIDIAN_AGGREGATOR", longlist}, {"MERIDIAN_RUN_ID", "r"}, SECRET,
                      {"RANK", "0"}}};
    CHECK_EQ(parse(&el, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "entry 1 (hhhh") != NULL);

    /* 4096 entries: the last one is reachable; 4097: the one too many is named */
    size_t cap = 4097 * 16 + 1, o = 0;
    char *big = malloc(cap);
    CHECK(big != NULL);
    for (unsigned i = 0; i < MRD_AGGREGATORS_MAX; i++)
        o += (size_t)snprintf(big + o, cap - o, "%sh%u:%u", i ? "," : "", i, 1000 + i);
    struct env eg = {{{"MERIDIAN_AGGREGATOR", big}, {"MERIDIAN_RUN_ID", "r"}, SECRET,
                      {"RANK", "8191"}}};
    CHECK_EQ(parse(&eg, &c, why), 1);
    CHECK_STREQ(c.aggregator, "h4095:5095");
    CHECK_UEQ(c.shard_id, 4095);
    CHECK_UEQ(c.shard_count, 4096);
    eg.kv[3][1] = "4096";
    CHECK_EQ(parse(&eg, &c, why), 1);
    CHECK_STREQ(c.aggregator, "h0:1000");
    snprintf(big + o, cap - o, ",h4096:5096");
    CHECK_EQ(parse(&eg, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "entry 4096 is one too many") != NULL);
    free(big);

    /* the missing-secret reason names the entry this rank would have used */
    struct env en = {{{"MERIDIAN_AGGREGATOR", three}, {"MERIDIAN_RUN_ID", "r"}, {"RANK", "2"}}};
    CHECK_EQ(parse(&en, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "[fd00::3]:47503") != NULL);
    /* record-only mode: no aggregator, no shard */
    struct env er = {{{"RANK", "2"}, {"MERIDIAN_RUN_ID", "r"},
                      {"MERIDIAN_RECORD_FILE", "/tmp/x.mrdcap"}}};
    CHECK_EQ(parse(&er, &c, why), 1);
    CHECK_UEQ(c.shard_count, 0);
    CHECK_UEQ(c.shard_id, 0);
}

int main(void)
{
    struct mrd_agent_config c;
    char why[256];

    /* not a rank: inert, silently */
    struct env e0 = {{BASE}};
    CHECK_EQ(parse(&e0, &c, why), 0);
    CHECK_STREQ(why, "");

    /* MERIDIAN_FORCE without a rank variable: rank 0 */
    struct env e1 = {{BASE, SECRET, {"MERIDIAN_FORCE", "1"}}};
    CHECK_EQ(parse(&e1, &c, why), 1);
    CHECK_EQ(c.rank, 0);
    CHECK_EQ(c.local_rank, -1);
    CHECK_UEQ(c.queue_bytes, 64ull << 20);
    CHECK_UEQ(c.flush_deadline_ms, 5000);
    CHECK_UEQ(c.ring_records, 16384);

    /* precedence: OMPI_COMM_WORLD_RANK over PMIX_RANK over ... over RANK (RANK,
     * LOCAL_RANK and WORLD_SIZE all set win instead: tests/deploy/test_rank_order.c) */
    struct env e2 = {{BASE,
                      SECRET,
                      {"RANK", "9"},
                      {"PMIX_RANK", "5"},
                      {"OMPI_COMM_WORLD_RANK", "3"},
                      {"SLURM_LOCALID", "2"},
                      {"LOCAL_RANK", "7"},
                      {"PMI_SIZE", "8"}}};
    CHECK_EQ(parse(&e2, &c, why), 1);
    CHECK_EQ(c.rank, 3);
    CHECK_EQ(c.local_rank, 2);
    CHECK_EQ(c.world_size, 8);
    struct env e3 = {{BASE, SECRET, {"RANK", "9"}, {"SLURM_PROCID", "4"}}};
    CHECK_EQ(parse(&e3, &c, why), 1);
    CHECK_EQ(c.rank, 4);

    /* disabled wins over everything */
    struct env e4 = {{BASE, {"RANK", "1"}, {"MERIDIAN_DISABLE", "1"}}};
    CHECK_EQ(parse(&e4, &c, why), 0);

    /* a rank without an aggregator or run id: inert with a reason */
    struct env e5 = {{{"RANK", "1"}, {"MERIDIAN_RUN_ID", "r"}}};
    CHECK_EQ(parse(&e5, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_AGGREGATOR") != NULL);
    struct env e6 = {{{"RANK", "1"}, {"MERIDIAN_AGGREGATOR", "h:1"}}};
    CHECK_EQ(parse(&e6, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_RUN_ID") != NULL);
    struct env e7 = {{{"RANK", "1"}, {"MERIDIAN_AGGREGATOR", "nocolon"}, {"MERIDIAN_RUN_ID", "r"}}};
    CHECK_EQ(parse(&e7, &c, why), -MRD_ERR_CONFIG);

    /* record-only mode: a record file and no aggregator; %r and %p expand */
    struct env e8 = {{{"RANK", "12"},
                      {"MERIDIAN_RUN_ID", "r"},
                      {"MERIDIAN_RECORD_FILE", "/tmp/cap-%r-%p-%%.mrdcap"}}};
    CHECK_EQ(parse(&e8, &c, why), 1);
    CHECK_STREQ(c.aggregator, "");
    char want[128];
    snprintf(want, sizeof want, "/tmp/cap-12-%ld-%%.mrdcap", (long)getpid());
    CHECK_STREQ(c.record_file, want);

    /* numbers: suffixes, limits, rounding of ring sizes */
    struct env e9 = {{BASE,
                      SECRET,
                      {"RANK", "0"},
                      {"MERIDIAN_QUEUE_BYTES", "2m"},
                      {"MERIDIAN_RING_RECORDS", "100"},
                      {"MERIDIAN_FLUSH_DEADLINE_MS", "0"},
                      {"MERIDIAN_TEST_CLOCK_PPM", "-37.5"},
                      {"MERIDIAN_BATCH_MS", "20"}}};
    CHECK_EQ(parse(&e9, &c, why), 1);
    CHECK_UEQ(c.queue_bytes, 2u << 20);
    CHECK_UEQ(c.ring_records, 128);
    CHECK_UEQ(c.flush_deadline_ms, 0);
    CHECK_UEQ(c.batch_ms, 20);
    CHECK(c.test_clock_ppm == -37.5);
    const char *bad[][2] = {{"MERIDIAN_QUEUE_BYTES", "12x"},
                            {"MERIDIAN_QUEUE_BYTES", "1k"},
                            {"MERIDIAN_RING_RECORDS", "-5"},
                            {"MERIDIAN_RING_THREADS", "0"},
                            {"MERIDIAN_TEST_CLOCK_PPM", "fast"},
                            {"RANK", "one"},
                            {"MERIDIAN_FLUSH_DEADLINE_MS", "99999999999999999999999"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct env eb = {{BASE, {"OMPI_COMM_WORLD_RANK", "0"}, {bad[i][0], bad[i][1]}, SECRET}};
        if (strcmp(bad[i][0], "RANK") == 0)
            eb.kv[2][0] = "MERIDIAN_FORCE", eb.kv[2][1] = "0";
        CHECK_EQ(parse(&eb, &c, why), -MRD_ERR_CONFIG);
        CHECK(strstr(why, bad[i][0]) != NULL);
    }

    /* secrets: the variable, else the file (the whole file less trailing CR/LF, the rule
     * of proto/runcfg.h that meridiand applies too), else an unreadable file fails */
    char path[] = "/tmp/mrd_test_secretXXXXXX";
    int fd = mkstemp(path);
    CHECK_GE(fd, 0);
    CHECK_EQ(write(fd, "from-file\nsecond line\r\n", 23), 23);
    close(fd);
    struct env e10 = {{BASE, {"RANK", "0"}, {"MERIDIAN_SECRET_FILE", path}}};
    CHECK_EQ(parse(&e10, &c, why), 1);
    CHECK_STREQ(c.secret, "from-file\nsecond line");
    struct env e12 = {{BASE, {"RANK", "0"}, {"MERIDIAN_SECRET", "env\r\n"}}};
    CHECK_EQ(parse(&e12, &c, why), 1);
    CHECK_STREQ(c.secret, "env");
    struct env e13 = {{BASE, {"RANK", "0"}}};
    e13.kv[0][1] = "::1:47500";
    CHECK_EQ(parse(&e13, &c, why), -MRD_ERR_CONFIG); /* IPv6 must be [bracketed] */
    CHECK(strstr(why, "MERIDIAN_AGGREGATOR") != NULL);
    struct env e11 = {
        {BASE, {"RANK", "0"}, {"MERIDIAN_SECRET", "env"}, {"MERIDIAN_SECRET_FILE", path}}};
    CHECK_EQ(parse(&e11, &c, why), 1);
    CHECK_STREQ(c.secret, "env");
    unlink(path);
    CHECK_EQ(parse(&e10, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_SECRET_FILE") != NULL);

    /* no secret at all (or an empty one) with an aggregator: inert, with a reason */
    struct env e14 = {{BASE, {"RANK", "2"}}};
    CHECK_EQ(parse(&e14, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_SECRET") != NULL);
    struct env e15 = {{BASE, {"RANK", "2"}, {"MERIDIAN_SECRET", ""}, {"MERIDIAN_SECRET_FILE", ""}}};
    CHECK_EQ(parse(&e15, &c, why), -MRD_ERR_CONFIG);
    CHECK(strstr(why, "MERIDIAN_SECRET") != NULL);
    /* also when it records besides: it still connects */
    struct env e16 = {{BASE, {"RANK", "2"}, {"MERIDIAN_RECORD_FILE", "/tmp/x.mrdcap"}}};
    CHECK_EQ(parse(&e16, &c, why), -MRD_ERR_CONFIG);
    /* record-only mode (no aggregator) needs none (e8 above has none either) */
    struct env e17 = {
        {{"RANK", "2"}, {"MERIDIAN_RUN_ID", "r"}, {"MERIDIAN_RECORD_FILE", "/tmp/x.mrdcap"}}};
    CHECK_EQ(parse(&e17, &c, why), 1);
    CHECK_STREQ(c.secret, "");
    /* not a rank: inert and silent, secret or not */
    struct env e18 = {{BASE}};
    CHECK_EQ(parse(&e18, &c, why), 0);
    CHECK_STREQ(why, "");
    shards();
    return 0;
}
