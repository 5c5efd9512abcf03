/* The uplink module against a real reference meridiand on loopback (aggregator/uplink):
 * a wrong secret is refused at start; the live model tracks the reference's global time
 * (read from the reference's anchors: same host, same clock) while this node's own
 * timebase is 5 s off; the stop's fit says aligned with a bound; a store opened with the
 * uplink as its clock anchors its run on the reference's time; the record lands in the
 * node database; meridian-adopt's rules (adopted, already adopted, no record, another run).
 */
#define SECRET "uplink-secret-0123"
#include "client.h"
#include "clock.h"
#include "store.h"
#include "uplink.h"

static int64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void run_row(const char *path, int64_t *ar, int64_t *am, char *boot, size_t n)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db,
                                "SELECT anchor_realtime_ns, anchor_monotonic_ns, boot_id FROM runs",
                                -1, &st, NULL),
             SQLITE_OK);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    *ar = sqlite3_column_int64(st, 0);
    *am = sqlite3_column_int64(st, 1);
    if (boot)
        snprintf(boot, n, "%s", (const char *)sqlite3_column_text(st, 2));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static int64_t db_int(const char *path, const char *sql)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t v = check_sql_int(db, sql);
    sqlite3_close(db);
    return v;
}

static void make_shard(const char *path, const char *run, uint32_t shard, struct mrd_uplink *u)
{
    struct mrd_store_config sc = {.db_path = path, .run_id = run, .shard_id = shard, .verbose = -1};
    if (u) {
        sc.global_now = mrd_uplink_now;
        sc.global_now_arg = u;
    }
    struct mrd_store *s = NULL;
    CHECK_OK(mrd_store_open(&sc, &s));
    mrd_store_close(s);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    setup_dirs(argv[1], "uplink");
    mrd_store_process_init();
    const char *extra[] = {"--run-id", "uplink-test", NULL};
    start_daemon_args(extra);
    int64_t ar, am;
    char boot[64];
    run_row(g_db, &ar, &am, boot, sizeof(boot));

    struct mrd_uplink_config uc = {.host = "127.0.0.1",
                                   .port = g_port,
                                   .run_id = "uplink-test",
                                   .secret = (const uint8_t *)"wrong-secret",
                                   .secret_len = 12,
                                   .shard_id = 1,
                                   .start_timeout_ms = 5000,
                                   .test_realtime_offset_ns = 5000000000LL,
                                   .verbose = -1};
    struct mrd_uplink *u = NULL;
    CHECK_EQ(mrd_uplink_start(&uc, &u), -MRD_ERR_AUTH);
    CHECK(u == NULL);

    uc.secret = (const uint8_t *)SECRET;
    uc.secret_len = strlen(SECRET);
    CHECK_OK(mrd_uplink_start(&uc, &u));
    int64_t worst = 0;
    for (int i = 0; i < 15; i++) { /* 1.5 s: the live model against the reference's time */
        usleep(100000);
        int64_t m0 = mono_now();
        int64_t live = mrd_uplink_now(u);
        int64_t m1 = mono_now();
        int64_t err = live - (ar + (m0 + m1) / 2 - am);
        if (getenv("UPLINK_TRACE"))
            printf("  %.1f\n", (double)err / 1e3);
        if (llabs(err) > worst)
            worst = llabs(err);
    }
    printf("test_uplink: live model within %.3f us of the reference (own timebase +5 s off)\n",
           (double)worst / 1e3);
    CHECK_LT(worst, 500000); /* 0.5 ms: a loaded 2-core machine; typically a few us */

    char node[192], other[192], norec[192];
    snprintf(node, sizeof(node), "%s/node1.db", g_dir);
    snprintf(other, sizeof(other), "%s/other.db", g_dir);
    snprintf(norec, sizeof(norec), "%s/norec.db", g_dir);
    int64_t before = mrd_uplink_now(u);
    make_shard(node, "uplink-test", 1, u);
    int64_t nar, nam;
    run_row(node, &nar, &nam, NULL, 0);
    CHECK_GE(nar, before); /* its anchor is the reference's time, not its own +5 s */
    CHECK_LT(nar - before, 2000000000LL);

    struct mrd_uplink_result r;
    CHECK_OK(mrd_uplink_stop(u, &r));
    CHECK_EQ(r.aligned, 1);
    CHECK_GT((int64_t)r.probes, 32);
    int64_t want = (ar - am) - (r.own_anchor_realtime_ns - r.own_anchor_monotonic_ns);
    printf("test_uplink: offset %+.6f s (truth %+.6f s), bound %.3f us, %llu probes, fastest "
           "round trip %.1f us\n",
           (double)r.offset_ns / 1e9, (double)want / 1e9, (double)r.bound_ns / 1e3,
           (unsigned long long)r.probes, (double)r.rtt_min_ns / 1e3);
    CHECK_LT(llabs(r.offset_ns - want), 500000);
    CHECK_LT(llabs(want + 5000000000LL), 10000000); /* the injected 5 s, up to clock slew */
    CHECK_GT(r.bound_ns, 0);
    CHECK_OK(mrd_uplink_record(u, &r, node));
    mrd_uplink_free(u);
    CHECK_EQ(stop_daemon(), 0);

    CHECK_EQ(
        db_int(node, "SELECT value FROM aggregator_counters WHERE name = 'node_clock.1.aligned'"),
        1);
    CHECK_EQ(
        db_int(node, "SELECT value FROM aggregator_counters WHERE name = 'node_clock.1.bound_ns'"),
        r.bound_ns);
    /* adoption: the reference's record; again: left alone */
    FILE *devnull = fopen("/dev/null", "w");
    CHECK_EQ(mrd_uplink_adopt(g_db, node, devnull), 0);
    int64_t aar, aam;
    char aboot[64];
    run_row(node, &aar, &aam, aboot, sizeof(aboot));
    CHECK_EQ(aar, ar);
    CHECK_EQ(aam, am);
    CHECK(strcmp(aboot, boot) == 0);
    CHECK_EQ(mrd_uplink_adopt(g_db, node, devnull), 1);
    /* refused: no alignment record; another run (both left as they were) */
    make_shard(norec, "uplink-test", 2, NULL);
    int64_t r0, m0_;
    run_row(norec, &r0, &m0_, NULL, 0);
    CHECK_EQ(mrd_uplink_adopt(g_db, norec, devnull), -MRD_ERR_CONFIG);
    run_row(norec, &aar, &aam, NULL, 0);
    CHECK_EQ(aar, r0);
    make_shard(other, "another-run", 3, NULL);
    CHECK_EQ(mrd_uplink_adopt(g_db, other, devnull), -MRD_ERR_CONFIG);
    fclose(devnull);
    remove_dirs();
    printf("test_uplink: ok\n");
    return 0;
}
