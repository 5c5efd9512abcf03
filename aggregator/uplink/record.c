/* A node aggregator's alignment record in its database, and the step that puts a node
 * shard on the reference's timebase record before `meridian merge` (uplink.h).
 *
 * Where it sits: mrd_uplink_record runs in meridiand after its store has closed (the
 * database is then meridiand's alone); mrd_uplink_adopt runs after the job, on the host
 * where the shards are merged (`meridian-adopt`). The record is a set of integer rows in
 * aggregator_counters named `node_clock.<shard>.<field>` (SCHEMA.md, "Node clocks"): the
 * existing key-value table, so that no schema version changes, and `meridian merge`, which
 * sums that table by name, carries each node's rows into the merged file unchanged (no two
 * shards share a name: shard ids are distinct). Workload: a few rows, once per run.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "error.h"
#include "uplink.h"

static int put(sqlite3 *db, uint32_t shard, const char *field, int64_t v)
{
    char name[96];
    snprintf(name, sizeof(name), "node_clock.%u.%s", shard, field);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO aggregator_counters(name, value) "
                                "VALUES(?1, ?2)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, v);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_OK ? 0 : rc;
}

/* The shard id of the database's runs row (the store wrote it). */
static int run_shard(sqlite3 *db, int64_t *shard)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT shard_id FROM runs", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *shard = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

int mrd_uplink_record(const struct mrd_uplink *u, const struct mrd_uplink_result *r,
                      const char *db_path)
{
    (void)u;
    sqlite3 *db = NULL;
    int64_t shard = 0;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        sqlite3_busy_timeout(db, 10000);
    if (rc == SQLITE_OK)
        rc = run_shard(db, &shard);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    const struct {
        const char *field;
        int64_t v;
    } rows[] = {
        {"aligned", r->aligned},
        {"bound_ns", r->bound_ns},
        {"residual_ns", r->residual_ns},
        {"fit_bound_ns", r->fit_bound_ns},
        {"offset_ns", r->offset_ns},
        {"offset_at_own_ns", r->offset_at_own_ns},
        {"rtt_min_ns", r->rtt_min_ns},
        {"probes", (int64_t)r->probes},
        {"decimations", (int64_t)r->decimations},
        {"reconnects", (int64_t)r->reconnects},
        {"max_slew_ppb", r->max_slew_ppb},
        {"own_anchor_realtime_ns", r->own_anchor_realtime_ns},
        {"own_anchor_monotonic_ns", r->own_anchor_monotonic_ns},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]) && rc == SQLITE_OK; i++)
        rc = put(db, (uint32_t)shard, rows[i].field, rows[i].v);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    sqlite3_close(db);
    return 0;
fail:
    fprintf(stderr, "meridiand: uplink: cannot write the alignment record into %s: %s\n", db_path,
            db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return -MRD_ERR_SQLITE;
}

struct run_row {
    char run_id[160], boot[64];
    int64_t shard, ar, am;
};

static int read_run(sqlite3 *db, struct run_row *r)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT run_id, shard_id, anchor_realtime_ns, anchor_monotonic_ns,"
                                " coalesce(boot_id, ''), (SELECT count(*) FROM runs) FROM runs",
                                -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        snprintf(r->run_id, sizeof(r->run_id), "%s", (const char *)sqlite3_column_text(st, 0));
        r->shard = sqlite3_column_int64(st, 1);
        r->ar = sqlite3_column_int64(st, 2);
        r->am = sqlite3_column_int64(st, 3);
        snprintf(r->boot, sizeof(r->boot), "%s", (const char *)sqlite3_column_text(st, 4));
        rc = sqlite3_column_int64(st, 5) == 1 ? SQLITE_OK : SQLITE_MISMATCH;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_MISMATCH;
    }
    sqlite3_finalize(st);
    return rc;
}

static int counter(sqlite3 *db, const char *name, int64_t *v)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT value FROM aggregator_counters WHERE name = ?1", -1,
                                &st, NULL);
    *v = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *v = sqlite3_column_int64(st, 0);
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

int mrd_uplink_adopt(const char *ref_path, const char *shard_path, FILE *log)
{
    sqlite3 *ref = NULL, *db = NULL;
    struct run_row rr, sr;
    int64_t aligned = 0, bound = 0;
    char name[96];
    int rc = sqlite3_open_v2(ref_path, &ref, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK || (rc = read_run(ref, &rr)) != SQLITE_OK) {
        fprintf(log, "meridian-adopt: %s: not a meridian database with one run (%s)\n", ref_path,
                ref ? sqlite3_errmsg(ref) : sqlite3_errstr(rc));
        rc = rc == SQLITE_MISMATCH ? -MRD_ERR_CONFIG : -MRD_ERR_SQLITE;
        goto out;
    }
    rc = sqlite3_open_v2(shard_path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK)
        sqlite3_busy_timeout(db, 10000);
    if (rc != SQLITE_OK || (rc = read_run(db, &sr)) != SQLITE_OK) {
        fprintf(log, "meridian-adopt: %s: not a meridian database with one run (%s)\n", shard_path,
                db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        rc = rc == SQLITE_MISMATCH ? -MRD_ERR_CONFIG : -MRD_ERR_SQLITE;
        goto out;
    }
    if (strcmp(rr.run_id, sr.run_id) != 0) {
        fprintf(log, "meridian-adopt: %s holds run %s, the reference %s run %s: refused\n",
                shard_path, sr.run_id, ref_path, rr.run_id);
        rc = -MRD_ERR_CONFIG;
        goto out;
    }
    if (sr.ar == rr.ar && sr.am == rr.am && strcmp(sr.boot, rr.boot) == 0) {
        fprintf(log, "meridian-adopt: %s: already on the reference's timebase record\n",
                shard_path);
        rc = 1;
        goto out;
    }
    snprintf(name, sizeof(name), "node_clock.%" PRId64 ".aligned", sr.shard);
    if ((rc = counter(db, name, &aligned)) == SQLITE_OK) {
        snprintf(name, sizeof(name), "node_clock.%" PRId64 ".bound_ns", sr.shard);
        rc = counter(db, name, &bound);
    }
    if (rc != SQLITE_OK) {
        fprintf(log, "meridian-adopt: %s: %s\n", shard_path, sqlite3_errmsg(db));
        rc = -MRD_ERR_SQLITE;
        goto out;
    }
    if (aligned != 1) {
        fprintf(log,
                "meridian-adopt: %s (shard %" PRId64 ") has no alignment record "
                "(node_clock.%" PRId64 ".aligned): its meridiand ran without "
                "--clock-reference, or was killed before it wrote the record; its global times "
                "are not on the reference's timebase: refused\n",
                shard_path, sr.shard, sr.shard);
        rc = -MRD_ERR_CONFIG;
        goto out;
    }
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db,
                            "UPDATE runs SET anchor_realtime_ns = ?1, anchor_monotonic_ns = ?2,"
                            " boot_id = ?3",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, rr.ar);
        sqlite3_bind_int64(st, 2, rr.am);
        sqlite3_bind_text(st, 3, rr.boot, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fprintf(log, "meridian-adopt: %s: %s\n", shard_path, sqlite3_errmsg(db));
        rc = -MRD_ERR_SQLITE;
        goto out;
    }
    fprintf(log,
            "meridian-adopt: %s (shard %" PRId64 "): on the timebase of %s (shard %" PRId64
            "), within %.3f us of it (node_clock.%" PRId64 ".bound_ns)\n",
            shard_path, sr.shard, ref_path, rr.shard, (double)bound / 1e3, sr.shard);
    rc = 0;
out:
    sqlite3_close(ref);
    sqlite3_close(db);
    return rc;
}
