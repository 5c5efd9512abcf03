/* agent_config: the environment contract (agent/ENVIRONMENT.md) as mrd__config_parse reads
 * it: rank precedence, inertness, record-only mode, numbers and their limits, secrets (one
 * is required unless in record-only mode: without it the agent used to start, send an
 * empty secret and retry against a meridiand that refuses it for the whole run). */
#include <stdio.h>
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

    /* precedence: OMPI_COMM_WORLD_RANK over PMIX_RANK over ... over RANK */
    struct env e2 = {{BASE,
                      SECRET,
                      {"RANK", "9"},
                      {"PMIX_RANK", "5"},
                      {"OMPI_COMM_WORLD_RANK", "3"},
                      {"SLURM_LOCALID", "2"},
                      {"LOCAL_RANK", "7"},
                      {"WORLD_SIZE", "16"},
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
    return 0;
}
