/* The database module's functions: the table-exists check, the one-statement helpers,
 * the one collective matching and the time origin (see db.h). The op intervals are
 * op_intervals.c's; the named statements are in db_sql.c.
 *
 * Workload: each function is called a few times per finalize, analysis or export; the
 * origin's fallback is one GROUP BY scan per event table.
 */
#include "db.h"

#include <errno.h>
#include <stdio.h>

#include "error.h"

int mrd_db_step_text(sqlite3 *db, const char *sql, const char *text)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc;
}

int mrd_db_int64(sqlite3 *db, const char *sql, const char *text, int64_t *v)
{
    sqlite3_stmt *st = NULL;
    *v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    if (text)
        sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int type = rc == SQLITE_ROW ? sqlite3_column_type(st, 0) : SQLITE_NULL;
    if (type == SQLITE_INTEGER)
        *v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return -MRD_ERR_SQLITE;
    if (type == SQLITE_NULL)
        return 0;
    return type == SQLITE_INTEGER ? 1 : -MRD_ERR_CONFIG;
}

int mrd_db_has_table(sqlite3 *db, const char *name)
{
    int rc = mrd_db_step_text(db, mrd_db_sql_table_exists, name);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

int mrd_db_table_rows(sqlite3 *db, const char *table, uint64_t *n)
{
    int has = mrd_db_has_table(db, table);
    if (has <= 0)
        return has;
    char *sql = mrd_db_sql_table_count(table);
    if (!sql)
        return -ENOMEM;
    sqlite3_stmt *st = NULL;
    int ok =
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
    if (ok)
        *n += (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_free(sql);
    return ok ? 0 : -MRD_ERR_SQLITE;
}

int mrd_db_each_row(sqlite3 *db, const char *table, const char *sql,
                    int (*row)(sqlite3_stmt *st, void *ctx), void *ctx)
{
    sqlite3_stmt *st = NULL;
    int step, rc = 0;
    if (table && mrd_db_has_table(db, table) != 1)
        return 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        if ((rc = row(st, ctx)) < 0)
            break;
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    return step == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

int mrd_db_exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -MRD_ERR_SQLITE;
}

int mrd_db_write_row(sqlite3_stmt *st, const struct mrd_db_value *v, int n)
{
    sqlite3_reset(st);
    for (int i = 0; i < n; i++) {
        switch (v[i].type) {
        case MRD_DB_V_INT:
            sqlite3_bind_int64(st, i + 1, v[i].i);
            break;
        case MRD_DB_V_REAL:
            sqlite3_bind_double(st, i + 1, v[i].r);
            break;
        case MRD_DB_V_TEXT:
            sqlite3_bind_text(st, i + 1, v[i].s, -1, SQLITE_TRANSIENT);
            break;
        default:
            sqlite3_bind_null(st, i + 1);
        }
    }
    return sqlite3_step(st) == SQLITE_DONE ? 0 : -MRD_ERR_SQLITE;
}

int mrd_db_instances_open(sqlite3 *db, int fresh, sqlite3_stmt **out)
{
    int rc;
    *out = NULL;
    if ((rc = mrd_db_op_intervals(db, fresh)) < 0)
        return rc;
    if (mrd_db_has_table(db, "nccl_ops") != 1)
        return sqlite3_prepare_v2(db, mrd_db_sql_no_instances, -1, out, NULL) == SQLITE_OK
                   ? 0
                   : -MRD_ERR_SQLITE;
    return sqlite3_prepare_v2(db, mrd_db_sql_instances, -1, out, NULL) == SQLITE_OK
               ? 0
               : -MRD_ERR_SQLITE;
}


/* Tables whose rows carry a host start_ns (local clock) and, by index, the statement
 * giving each rank's earliest one. */
static const char *const event_tables[] = {"kernels", "memcpys",   "memsets",
                                           "syncs",   "api_calls", "graph_launches",
                                           "nvtx",    "nccl_ops",  "mpi_calls"};

int mrd_db_time_origin(sqlite3 *db, int have_models,
                       int (*map)(void *ctx, int rank, int64_t local, int64_t *global), void *ctx,
                       int64_t *origin)
{
    int64_t anchor = 0, t1 = 0, best = 0;
    int have_anchor = 0, have_t1 = 0, have_best = 0, rc;
    *origin = 0;
    if (have_models) {
        if (mrd_db_has_table(db, "runs") == 1 &&
            (have_anchor = mrd_db_int64(db, mrd_db_sql_run_anchor, NULL, &anchor)) < 0)
            return have_anchor;
        if (mrd_db_has_table(db, "clock_samples") == 1 &&
            (have_t1 = mrd_db_int64(db, mrd_db_sql_first_probe, NULL, &t1)) < 0)
            return have_t1;
        if (have_anchor && (!have_t1 || t1 >= anchor)) {
            *origin = anchor;
            return 0;
        }
        if (have_t1)
            best = t1, have_best = 1;
    }
    for (size_t i = 0; i < sizeof(event_tables) / sizeof(event_tables[0]); i++) {
        sqlite3_stmt *st = NULL;
        if (mrd_db_has_table(db, event_tables[i]) != 1)
            continue;
        const char *sql = mrd_db_sql_first_event[i];
        if (i == 0 && mrd_db_step_text(db, mrd_db_sql_has_index, "kernels_rank_start") == SQLITE_ROW)
            sql = mrd_db_sql_first_kernel_by_rank;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
            return -MRD_ERR_SQLITE;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t t = sqlite3_column_int64(st, 1), g = t;
            if (have_models && !map(ctx, sqlite3_column_int(st, 0), t, &g))
                continue; /* its times are placed on its own origin */
            if (!have_best || g < best)
                best = g, have_best = 1;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            return -MRD_ERR_SQLITE;
    }
    *origin = have_best ? best : anchor;
    return 0;
}

int mrd_db_global_views(sqlite3 *db, int64_t origin)
{
    sqlite3_stmt *st = NULL;
    int rc, models = mrd_db_has_table(db, "clock_models") == 1;
    if ((rc = mrd_db_exec(db, mrd_db_sql_enum_tables)) < 0 ||
        (rc = mrd_db_exec(db, mrd_db_sql_origin_table)) < 0)
        return rc;
    if (sqlite3_prepare_v2(db, mrd_db_sql_origin_set, -1, &st, NULL) != SQLITE_OK)
        return -MRD_ERR_SQLITE;
    sqlite3_bind_int64(st, 1, origin);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return -MRD_ERR_SQLITE;
    for (size_t i = 0; i < sizeof(event_tables) / sizeof(event_tables[0]); i++) {
        if (mrd_db_has_table(db, event_tables[i]) != 1)
            continue;
        const char *sql = models ? mrd_db_sql_global_view[i] : mrd_db_sql_local_view[i];
        if ((rc = mrd_db_exec(db, sql)) < 0)
            return rc;
    }
    return 0;
}
