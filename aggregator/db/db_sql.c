/* The texts of the named statements; db_sql.h has each one's contract. Grouped by the
 * module that runs them, in data-flow order: the database module itself, the store's
 * connection setup, the clock passes, the analysis, the exports, the finalize. */
#include "db.h"

/* ---- the module's own (db.c) ---------------------------------------------------------- */

const char mrd_db_sql_table_exists[] =
    "SELECT 1 FROM main.sqlite_master WHERE type='table' AND name=?1";

const char mrd_db_sql_temp_table_exists[] = "SELECT 1 FROM temp.sqlite_master WHERE name=?1";

char *mrd_db_sql_table_count(const char *table)
{
    return sqlite3_mprintf("SELECT COUNT(*) FROM main.\"%w\"", table);
}

const char mrd_db_sql_op_tables[] =
    "CREATE TEMP TABLE mrd_link (rank INTEGER NOT NULL, correlation_id "
    "INTEGER NOT NULL, op_id INTEGER NOT NULL, PRIMARY KEY (rank, "
    "correlation_id, op_id)) WITHOUT ROWID;"
    "CREATE TEMP TABLE mrd_op_time (rank INTEGER NOT NULL, op_id INTEGER "
    "NOT NULL, start_ns INTEGER, end_ns INTEGER, source INTEGER NOT NULL, "
    "PRIMARY KEY (rank, op_id)) WITHOUT ROWID;"
    "CREATE TEMP TABLE mrd_link_kernel (rank INTEGER NOT NULL, correlation_id INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, device INTEGER);"
    "CREATE TEMP TABLE mrd_op_gpu (rank INTEGER NOT NULL, op_id INTEGER NOT NULL,"
    " device INTEGER, gpu_start INTEGER, gpu_end INTEGER, PRIMARY KEY (rank, op_id))"
    " WITHOUT ROWID;"
    "CREATE TEMP TABLE mrd_op_source (name TEXT PRIMARY KEY, max_rowid INTEGER NOT NULL)"
    " WITHOUT ROWID;";

const char mrd_db_sql_op_link_kernel_index[] =
    "CREATE INDEX temp.mrd_link_kernel_corr ON mrd_link_kernel (rank, correlation_id)";

const char mrd_db_sql_op_temp_objects[] =
    "SELECT type, name FROM temp.sqlite_master WHERE type IN ('table', 'view') AND name IN"
    " ('mrd_link', 'mrd_op_time', 'mrd_link_kernel', 'mrd_op_gpu', 'mrd_op_source')";

char *mrd_db_sql_op_temp_drop(const char *type, const char *name)
{
    return sqlite3_mprintf("DROP %s temp.\"%w\"", type[0] == 'v' ? "VIEW" : "TABLE", name);
}

char *mrd_db_sql_max_rowid(const char *table)
{
    return sqlite3_mprintf("SELECT COALESCE(MAX(rowid), 0) FROM main.\"%w\"", table);
}

const char mrd_db_sql_op_source_insert[] = "INSERT INTO temp.mrd_op_source VALUES (?1, ?2)";

const char mrd_db_sql_op_stored_source[] =
    "SELECT name, max_rowid FROM main.nccl_op_intervals_source";

const char mrd_db_sql_op_stored_views[] =
    "CREATE TEMP VIEW mrd_link AS SELECT rank, correlation_id, op_id FROM main.nccl_op_links;"
    "CREATE TEMP VIEW mrd_op_time AS SELECT rank, op_id, start_ns, end_ns, source"
    " FROM main.nccl_op_intervals";

const char mrd_db_sql_op_store[] =
    "CREATE TABLE IF NOT EXISTS main.nccl_op_links (rank INTEGER NOT NULL,"
    " correlation_id INTEGER NOT NULL, op_id INTEGER NOT NULL,"
    " PRIMARY KEY (rank, correlation_id, op_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS main.nccl_op_intervals (rank INTEGER NOT NULL,"
    " op_id INTEGER NOT NULL, start_ns INTEGER, end_ns INTEGER, source INTEGER NOT NULL,"
    " PRIMARY KEY (rank, op_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS main.nccl_op_intervals_source (name TEXT PRIMARY KEY,"
    " max_rowid INTEGER NOT NULL) WITHOUT ROWID;"
    "DELETE FROM main.nccl_op_links; DELETE FROM main.nccl_op_intervals;"
    "DELETE FROM main.nccl_op_intervals_source;"
    "INSERT INTO main.nccl_op_links SELECT rank, correlation_id, op_id FROM temp.mrd_link;"
    "INSERT INTO main.nccl_op_intervals SELECT rank, op_id, start_ns, end_ns, source"
    " FROM temp.mrd_op_time;"
    "INSERT INTO main.nccl_op_intervals_source SELECT name, max_rowid FROM temp.mrd_op_source;";

const char mrd_db_sql_op_build_begin[] = "SAVEPOINT mrd_op_build";
const char mrd_db_sql_op_build_commit[] = "RELEASE mrd_op_build";
const char mrd_db_sql_op_build_rollback[] = "ROLLBACK TO mrd_op_build; RELEASE mrd_op_build";

const char mrd_db_sql_op_links[] =
    "INSERT OR IGNORE INTO temp.mrd_link SELECT n.rank, ec.correlation_id, "
    "n.op_id FROM main.nccl_ops n JOIN main.external_correlations ec ON "
    "ec.rank = n.rank AND ec.external_id = n.launch_id "
    "WHERE n.launch_id IS NOT NULL";

const char mrd_db_sql_op_link_keys[] = "SELECT rank, correlation_id FROM temp.mrd_link";

const char mrd_db_sql_op_kernel_scan[] =
    "SELECT rank, correlation_id, start_ns, end_ns, device FROM main.kernels";

const char mrd_db_sql_op_link_kernel_insert[] =
    "INSERT INTO temp.mrd_link_kernel VALUES (?1, ?2, ?3, ?4, ?5)";

const char mrd_db_sql_op_kernel_time[] =
    "INSERT OR IGNORE INTO temp.mrd_op_time SELECT l.rank, l.op_id, "
    "MIN(k.start_ns), MAX(k.end_ns), 1 FROM temp.mrd_link l JOIN "
    "temp.mrd_link_kernel k ON k.rank = l.rank AND k.correlation_id = "
    "l.correlation_id GROUP BY l.rank, l.op_id";

const char mrd_db_sql_op_scan[] = "SELECT rank, op_id, device FROM main.nccl_ops";

const char mrd_db_sql_op_channel_scan[] =
    "SELECT rank, op_id, gpu_start, gpu_end FROM main.nccl_channels "
    "WHERE gpu_start > 0 AND gpu_end >= gpu_start";

const char mrd_db_sql_op_gpu_insert[] =
    "INSERT OR IGNORE INTO temp.mrd_op_gpu VALUES (?1, ?2, ?3, ?4, ?5)";

const char mrd_db_sql_op_channel_time[] =
    "INSERT OR IGNORE INTO temp.mrd_op_time SELECT rank, op_id, gpu_start, "
    "gpu_end, 2 FROM temp.mrd_op_gpu WHERE gpu_start IS NOT NULL";

const char mrd_db_sql_instances[] =
    "SELECT n.comm_hash, n.seq, n.func_id, n.rank, n.comm_nranks, "
    "COALESCE(n.device, 0), t.start_ns, t.end_ns, t.source, s.value, "
    "n.root IS NOT NULL AND n.comm_rank IS NOT NULL AND n.comm_rank = n.root "
    "FROM main.nccl_ops n LEFT JOIN temp.mrd_op_time t ON "
    "t.rank = n.rank AND t.op_id = n.op_id LEFT JOIN main.strings s "
    "ON s.id = n.func_id WHERE n.is_p2p = 0 AND n.seq IS NOT NULL "
    "ORDER BY n.comm_hash, n.seq, n.func_id, n.rank, n.op_id";

const char mrd_db_sql_instance_count[] =
    "SELECT COUNT(*) FROM (SELECT 1 FROM main.nccl_ops WHERE is_p2p = 0 AND seq IS NOT NULL "
    "GROUP BY comm_hash, seq, func_id)";

const char mrd_db_sql_no_instances[] = "SELECT 0, 0, 0, 0, NULL, 0, NULL, NULL, 0, NULL, 0 WHERE 0";

const char mrd_db_sql_run_anchor[] =
    "SELECT anchor_realtime_ns FROM main.runs ORDER BY created_ns LIMIT 1";

const char mrd_db_sql_first_probe[] = "SELECT MIN(t1) FROM main.clock_samples";

#define FIRST_EVENT(table)                                                                         \
    "SELECT rank, MIN(start_ns) FROM main." table " WHERE start_ns > 0 GROUP BY rank"
const char *const mrd_db_sql_first_event[9] = {
    "SELECT k.rank, MIN(k.start_ns) FROM main.kernels k WHERE k.start_ns > 0 "
    "AND " MRD_DB_KERNEL_VALID " GROUP BY k.rank",
    FIRST_EVENT("memcpys"),
    FIRST_EVENT("memsets"),
    FIRST_EVENT("syncs"),
    FIRST_EVENT("api_calls"),
    FIRST_EVENT("graph_launches"),
    FIRST_EVENT("nvtx"),
    FIRST_EVENT("nccl_ops"),
    FIRST_EVENT("mpi_calls"),
};

/* Each rank of kernels found by a seek of the (rank, start_ns) index past the previous
 * one, then its first kernel with a time by the same index: a few index probes per rank
 * instead of a scan of every kernel. */
const char mrd_db_sql_first_kernel_by_rank[] =
    "WITH RECURSIVE r(rank) AS (SELECT MIN(rank) FROM main.kernels UNION ALL"
    " SELECT (SELECT rank FROM main.kernels WHERE rank > r.rank ORDER BY rank LIMIT 1)"
    " FROM r WHERE r.rank IS NOT NULL)"
    " SELECT rank, t FROM (SELECT r.rank, (SELECT k.start_ns FROM main.kernels k"
    "  WHERE k.rank = r.rank AND k.start_ns > 0 AND " MRD_DB_KERNEL_VALID
    "  ORDER BY k.start_ns LIMIT 1) AS t FROM r WHERE r.rank IS NOT NULL) WHERE t IS NOT NULL";

const char mrd_db_sql_has_index[] =
    "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1";

const char mrd_db_sql_enum_tables[] =
    "CREATE TEMP TABLE IF NOT EXISTS enum_nvtx_kind (value INTEGER PRIMARY KEY, name TEXT);"
    "INSERT OR IGNORE INTO enum_nvtx_kind VALUES (1, 'push/pop range'), (2, 'start/end range'),"
    " (3, 'mark');"
    "CREATE TEMP TABLE IF NOT EXISTS enum_memcpy_kind (value INTEGER PRIMARY KEY, name TEXT);"
    "INSERT OR IGNORE INTO enum_memcpy_kind VALUES (0, 'unknown'), (1, 'HtoD'), (2, 'DtoH'),"
    " (3, 'HtoA'), (4, 'AtoH'), (5, 'AtoA'), (6, 'AtoD'), (7, 'DtoA'), (8, 'DtoD'),"
    " (9, 'HtoH'), (10, 'PtoP');"
    "CREATE TEMP TABLE IF NOT EXISTS enum_memory_kind (value INTEGER PRIMARY KEY, name TEXT);"
    "INSERT OR IGNORE INTO enum_memory_kind VALUES (0, 'unknown'), (1, 'pageable'),"
    " (2, 'pinned'), (3, 'device'), (4, 'array'), (5, 'managed'), (6, 'device static'),"
    " (7, 'managed static');"
    "CREATE TEMP TABLE IF NOT EXISTS enum_sync_type (value INTEGER PRIMARY KEY, name TEXT);"
    "INSERT OR IGNORE INTO enum_sync_type VALUES (0, 'unknown'), (1, 'event synchronize'),"
    " (2, 'stream wait event'), (3, 'stream synchronize'), (4, 'context synchronize');"
    "CREATE TEMP TABLE IF NOT EXISTS enum_api_domain (value INTEGER PRIMARY KEY, name TEXT);"
    "INSERT OR IGNORE INTO enum_api_domain VALUES (1, 'runtime'), (2, 'driver');";

const char mrd_db_sql_origin_table[] =
    "CREATE TEMP TABLE IF NOT EXISTS mrd_time_origin (origin_ns INTEGER NOT NULL);"
    "DELETE FROM temp.mrd_time_origin";

const char mrd_db_sql_origin_set[] = "INSERT INTO temp.mrd_time_origin VALUES (?1)";

/* The global-time mapping of column c of row t (aggregator/SCHEMA.md, "Time"): the
 * segment of the last local_begin_ns <= t.c, else the rank's first; the rank's local time
 * without a model. round() and llround() both round half away from zero. */
#define MAP_TERM(c, where, order)                                                                  \
    "(SELECT m.offset_ns + CAST(round(m.drift_ppm * (t." c " - m.local_begin_ns) / 1e6) AS "       \
    "INTEGER) FROM main.clock_models m WHERE m.rank = t.rank" where                                \
    " ORDER BY m.local_begin_ns" order " LIMIT 1)"
#define GLOBAL(c)                                                                                  \
    "(t." c " + COALESCE(" MAP_TERM(c, " AND m.local_begin_ns <= t." c,                            \
                                    " DESC") ", " MAP_TERM(c, "", "") ", 0))"
/* clang-format (14) would cut this macro's strings into pieces of a few letters */
/* clang-format off */
#define GLOBAL_VIEW(table)                                                                         \
    "DROP VIEW IF EXISTS temp." table "_global; CREATE TEMP VIEW " table "_global AS SELECT "      \
    "t.*, " GLOBAL("start_ns") " AS start_global_ns, " GLOBAL("end_ns") " AS end_global_ns, "      \
    GLOBAL("start_ns") " - o.origin_ns AS start_at_ns, " GLOBAL("end_ns") " - o.origin_ns AS "     \
    "end_at_ns FROM main." table " t, temp.mrd_time_origin o"
/* clang-format on */
#define LOCAL_VIEW(table)                                                                          \
    "DROP VIEW IF EXISTS temp." table "_global; CREATE TEMP VIEW " table "_global AS SELECT "      \
    "t.*, t.start_ns AS start_global_ns, t.end_ns AS end_global_ns, t.start_ns - o.origin_ns "     \
    "AS start_at_ns, t.end_ns - o.origin_ns AS end_at_ns FROM main." table " t, "                  \
    "temp.mrd_time_origin o"
const char *const mrd_db_sql_global_view[9] = {
    GLOBAL_VIEW("kernels"), GLOBAL_VIEW("memcpys"),   GLOBAL_VIEW("memsets"),
    GLOBAL_VIEW("syncs"),   GLOBAL_VIEW("api_calls"), GLOBAL_VIEW("graph_launches"),
    GLOBAL_VIEW("nvtx"),    GLOBAL_VIEW("nccl_ops"),  GLOBAL_VIEW("mpi_calls"),
};
const char *const mrd_db_sql_local_view[9] = {
    LOCAL_VIEW("kernels"), LOCAL_VIEW("memcpys"),   LOCAL_VIEW("memsets"),
    LOCAL_VIEW("syncs"),   LOCAL_VIEW("api_calls"), LOCAL_VIEW("graph_launches"),
    LOCAL_VIEW("nvtx"),    LOCAL_VIEW("nccl_ops"),  LOCAL_VIEW("mpi_calls"),
};

/* ---- the analysis (aggregator/analyze) --------------------------------------------------- */

const char mrd_db_sql_windows_create[] =
    "DROP TABLE IF EXISTS windows;"
    "CREATE TABLE windows ("
    " rank INTEGER NOT NULL,"
    " first_step INTEGER NOT NULL, last_step INTEGER NOT NULL, detach_step INTEGER NOT NULL,"
    " reason TEXT NOT NULL,"
    " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    " attach_ns INTEGER NOT NULL, detach_ns INTEGER, flush_ns INTEGER NOT NULL,"
    " kernels INTEGER NOT NULL);";

const char mrd_db_sql_rank_processes[] =
    "SELECT b.rank, b.agent_instance, count(*), NULL, NULL FROM batches b"
    " WHERE b.agent_instance IS NOT NULL AND b.rank IN (SELECT rank FROM batches"
    " WHERE agent_instance IS NOT NULL GROUP BY rank"
    " HAVING count(DISTINCT agent_instance) > 1)"
    " GROUP BY b.rank, b.agent_instance ORDER BY b.rank, min(b.received_ns)";

const char mrd_db_sql_rank_processes_hosts[] =
    "SELECT b.rank, b.agent_instance, count(*), p.host, p.pid FROM batches b"
    " LEFT JOIN rank_processes p ON p.rank = b.rank AND p.agent_instance = b.agent_instance"
    " WHERE b.agent_instance IS NOT NULL AND b.rank IN (SELECT rank FROM batches"
    " WHERE agent_instance IS NOT NULL GROUP BY rank"
    " HAVING count(DISTINCT agent_instance) > 1)"
    " GROUP BY b.rank, b.agent_instance ORDER BY b.rank, min(b.received_ns)";

const char mrd_db_sql_run_info[] =
    "SELECT run_id, world_size, anchor_realtime_ns, created_ns, command "
    "FROM runs ORDER BY created_ns LIMIT 1";

const char mrd_db_sql_ranks[] = "SELECT rank, local_rank, world_size, host, pid, goodbye "
                                "FROM ranks ORDER BY rank";

const char mrd_db_sql_gpus[] = "SELECT rank, device, name, uuid, pci_bus_id FROM gpus "
                               "ORDER BY rank, device";

const char mrd_db_sql_rank_of_rows_fmt[] = "SELECT rank FROM %s";
const char mrd_db_sql_rank_led_index[] =
    "SELECT 1 FROM pragma_index_list(?1) il JOIN pragma_index_info(il.name) a "
    "ON a.seqno = 0 AND a.name = 'rank' WHERE il.partial = 0";
const char mrd_db_sql_rows_per_rank_fmt[] = "SELECT rank, COUNT(*) FROM %s GROUP BY rank";

const char mrd_db_sql_agent_counters[] = "SELECT rank, category, name, value FROM agent_counters "
                                         "WHERE category IN ('captured','dropped','agent','cupti') "
                                         "ORDER BY rank, name";

const char mrd_db_sql_aggregator_counters[] = "SELECT name, value FROM aggregator_counters";

const char mrd_db_sql_clock_summary[] =
    "SELECT rank, segment, offset_ns, drift_ppm, error_bound_ns, "
    "samples, method FROM clock_models ORDER BY rank, local_begin_ns";

const char mrd_db_sql_causality_pairs[] =
    "SELECT rank_a, rank_b, instances, violations_before, "
    "violations_after, max_violation_before_ns, max_violation_after_ns "
    "FROM clock_causality ORDER BY violations_before DESC, rank_a, "
    "rank_b";

const char mrd_db_sql_clock_shifts[] = "SELECT rank, shift_ns FROM clock_adjustments";

const char mrd_db_sql_analysis_cache_size[] = "PRAGMA cache_size=-16384";

const char mrd_db_sql_window_steps[] = "SELECT first_step, detach_step FROM main.windows";

const char mrd_db_sql_step_ranges[] =
    "SELECT n.rank, n.start_ns, n.end_ns, s.value FROM main.nvtx n JOIN "
    "main.strings s ON s.id = n.name_id WHERE n.kind IN (1, 2) AND "
    "(s.value LIKE ?1 || '%' OR s.value LIKE 'ProfilerStep%' OR "
    "(?2 AND s.value LIKE 'train%step%')) "
    "ORDER BY n.rank, n.start_ns";

const char mrd_db_sql_kernel_totals[] =
    "SELECT COALESCE(s.value, '(unnamed)'), SUM(k.end_ns - k.start_ns), COUNT(*) FROM "
    "main.kernels k LEFT JOIN main.strings s ON s.id = k.name_id WHERE " MRD_DB_KERNEL_VALID
    " GROUP BY k.name_id";

const char mrd_db_sql_rank_kernels[] =
    "SELECT k.device, k.start_ns, k.end_ns, k.correlation_id, k.name_id FROM main.kernels k "
    "WHERE k.rank = ?1 ORDER BY k.start_ns";

const char mrd_db_sql_rank_links[] =
    "SELECT DISTINCT correlation_id FROM temp.mrd_link WHERE rank = ?1 ORDER BY correlation_id";

const char mrd_db_sql_string_id[] = "SELECT id FROM strings WHERE value = ?1";

const char mrd_db_sql_window_records[] =
    "SELECT n.rank, n.start_ns, n.end_ns, s.value FROM nvtx n "
    "LEFT JOIN strings s ON s.id = n.name_id WHERE n.domain_id = ?1 "
    "ORDER BY n.rank, n.start_ns, n.rowid";

const char mrd_db_sql_window_events[] =
    "SELECT w.rank, w.start_ns, w.end_ns, w.first_step, w.last_step, s.value, w.attach_ns, "
    "w.detach_ns, w.flush_ns FROM window_records w LEFT JOIN strings s ON s.id = w.reason_id "
    "ORDER BY w.rank, w.start_ns, w.first_step";

const char mrd_db_sql_window_events_any[] = "SELECT 1 FROM window_records LIMIT 1";

const char mrd_db_sql_windows_ranks[] = "SELECT count(DISTINCT rank) FROM windows";

const char mrd_db_sql_window_insert[] =
    "INSERT INTO windows (rank, first_step, last_step, detach_step, "
    "reason, start_ns, end_ns, attach_ns, detach_ns, flush_ns, kernels) "
    "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)";

const char mrd_db_sql_kernels_in_interval[] =
    "SELECT start_ns FROM kernels WHERE rank = ?1 AND start_ns >= ?2 "
    "AND start_ns <= ?3";

const char mrd_db_sql_begin_immediate[] = "BEGIN IMMEDIATE";

const char mrd_db_sql_commit[] = "COMMIT";

const char mrd_db_sql_rollback[] = "ROLLBACK";

const char mrd_db_sql_window_attach_nth[] =
    "SELECT attach_ns FROM windows WHERE rank = ?1 ORDER BY attach_ns "
    "LIMIT ?2 OFFSET ?3";

const char mrd_db_sql_window_detach_nth[] =
    "SELECT detach_ns FROM windows WHERE rank = ?1 AND detach_ns IS NOT "
    "NULL ORDER BY detach_ns LIMIT ?2 OFFSET ?3";

const char mrd_db_sql_windows_list[] =
    "SELECT rank, first_step, last_step, detach_ns IS NULL, kernels "
    "FROM windows ORDER BY rank, first_step, start_ns";

const char mrd_db_sql_env_value[] =
    "SELECT coalesce(v.value, '') FROM main.env_records e "
    "JOIN main.strings k ON k.id = e.key_id LEFT JOIN main.strings v ON v.id = e.value_id "
    "WHERE k.value = ?1 ORDER BY e.rank LIMIT 1";

const char mrd_db_sql_window_counter[] = "SELECT max(value), sum(value) FROM main.agent_counters "
                                         "WHERE category = 'window' AND name = ?1";

const char mrd_db_sql_window_close_mean[] =
    "SELECT (SELECT value FROM main.agent_counters WHERE rank = ?1 AND category = 'window' "
    "AND name = 'close_ns') / NULLIF((SELECT value FROM main.agent_counters WHERE rank = ?1 "
    "AND category = 'window' AND name = 'closes'), 0)";

/* ---- the clock passes (aggregator/clock) ------------------------------------------------- */

const char mrd_db_sql_clock_tables[] =
    "CREATE TABLE IF NOT EXISTS clock_causality ("
    " rank_a INTEGER NOT NULL, rank_b INTEGER NOT NULL, instances INTEGER NOT NULL,"
    " violations_before INTEGER NOT NULL, violations_after INTEGER NOT NULL,"
    " max_violation_before_ns INTEGER NOT NULL, max_violation_after_ns INTEGER NOT NULL,"
    " feasible_lo_ns INTEGER, feasible_hi_ns INTEGER,"
    " PRIMARY KEY (rank_a, rank_b)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS clock_adjustments ("
    " rank INTEGER PRIMARY KEY, shift_ns INTEGER NOT NULL,"
    " bound_before_ns INTEGER NOT NULL, bound_after_ns INTEGER NOT NULL,"
    " feasible_lo_ns INTEGER, feasible_hi_ns INTEGER, bound_scale REAL NOT NULL,"
    " instances INTEGER NOT NULL);";

const char mrd_db_sql_gpu_sample_brackets[] =
    "SELECT rank, device, host_ns - COALESCE(uncertainty_ns, 0), gpu_ns,"
    "       host_ns + COALESCE(uncertainty_ns, 0) FROM gpu_clock_samples";

const char mrd_db_sql_gpu_kernel_brackets[] =
    "SELECT k.rank, COALESCE(k.device, g.device, 0), k.start_ns, k.end_ns,"
    "       MIN(g.gpu_start), MAX(g.gpu_end)"
    " FROM temp.mrd_link_kernel k"
    " CROSS JOIN temp.mrd_link l ON l.rank = k.rank AND l.correlation_id = k.correlation_id"
    " CROSS JOIN temp.mrd_op_gpu g ON g.rank = l.rank AND g.op_id = l.op_id"
    " WHERE g.gpu_start IS NOT NULL GROUP BY k.rank, k.correlation_id, k.start_ns";

const char mrd_db_sql_gpu_host_brackets[] =
    "WITH launch AS (SELECT l.rank, l.op_id, MIN(a.start_ns) AS t"
    "                FROM main.api_calls a"
    "                CROSS JOIN temp.mrd_link l ON l.rank = a.rank"
    "                 AND l.correlation_id = a.correlation_id"
    "                GROUP BY l.rank, l.op_id)"
    " SELECT c.rank, COALESCE(g.device, 0), launch.t, c.gpu_start, c.host_start_ns"
    " FROM main.nccl_channels c"
    " CROSS JOIN launch ON launch.rank = c.rank AND launch.op_id = c.op_id"
    " CROSS JOIN temp.mrd_op_gpu g ON g.rank = c.rank AND g.op_id = c.op_id"
    " WHERE c.gpu_start > 0 AND c.host_start_ns > 0";

const char mrd_db_sql_gpu_model_bounds[] =
    "SELECT rank, device, slope, intercept_ns, error_bound_ns"
    " FROM gpu_timer_models";

const char mrd_db_sql_causality_clear[] =
    "DELETE FROM clock_causality; DELETE FROM clock_adjustments";

const char mrd_db_sql_causality_pair_insert[] =
    "INSERT INTO clock_causality VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)";

const char mrd_db_sql_causality_adjustment_insert[] =
    "INSERT INTO clock_adjustments VALUES (?1,?2,?3,?4,?5,?6,?7,?8)";

const char mrd_db_sql_clock_offset_shift[] = "UPDATE clock_models SET offset_ns = offset_ns + ?2"
                                             " WHERE rank = ?1";

const char mrd_db_sql_clock_probes[] = "SELECT rank, t0, t1, t2, t3 FROM clock_samples"
                                       " ORDER BY rank, t0";

const char mrd_db_sql_clock_model_delete[] = "DELETE FROM clock_models WHERE rank = ?1";

const char mrd_db_sql_clock_model_insert[] =
    "INSERT INTO clock_models (rank, segment, local_begin_ns,"
    " local_end_ns, offset_ns, drift_ppm, error_bound_ns, samples,"
    " method) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)";

const char mrd_db_sql_clock_fit_commit[] = "DELETE FROM clock_adjustments; COMMIT";

const char mrd_db_sql_gpu_model_insert[] =
    "INSERT OR REPLACE INTO gpu_timer_models (rank, device, slope,"
    " intercept_ns, error_bound_ns, samples, method)"
    " VALUES (?1,?2,?3,?4,?5,?6,?7)";

const char mrd_db_sql_gpu_models_begin[] = "BEGIN IMMEDIATE; DELETE FROM gpu_timer_models";

const char mrd_db_sql_clock_models_max_rank[] = "SELECT max(rank) FROM clock_models";

const char mrd_db_sql_clock_models_all[] =
    "SELECT rank, local_begin_ns, local_end_ns, offset_ns, drift_ppm,"
    " error_bound_ns, samples, method FROM clock_models"
    " WHERE rank >= 0 ORDER BY rank, segment";

const char mrd_db_sql_clock_segments[] =
    "SELECT rank, local_begin_ns, local_end_ns, offset_ns, drift_ppm "
    "FROM clock_models ORDER BY rank, local_begin_ns";

const char mrd_db_sql_gpu_models[] =
    "SELECT rank, device, slope, intercept_ns FROM gpu_timer_models "
    "ORDER BY rank, device";

/* ---- the exports (aggregator/export) ----------------------------------------------------- */

const char mrd_db_sql_first_kernel_of_rank[] =
    "SELECT MIN(start_ns) FROM main.kernels WHERE rank = ?1";

const char mrd_db_sql_html_kernels[] =
    "SELECT k.start_ns, k.end_ns, EXISTS (SELECT 1 FROM temp.mrd_link l "
    "WHERE l.rank = k.rank AND l.correlation_id = k.correlation_id), "
    "s.value FROM main.kernels k LEFT JOIN main.strings s ON s.id = "
    "k.name_id WHERE k.rank = ?1 AND k.start_ns >= ?2 AND k.start_ns < "
    "?3 AND k.end_ns > ?4 ORDER BY k.start_ns LIMIT ?5";

const char mrd_db_sql_html_nvtx[] =
    "SELECT n.start_ns, n.end_ns, s.value, n.depth FROM main.nvtx n LEFT JOIN "
    "main.strings s ON s.id = n.name_id WHERE n.rank = ?1 AND n.kind IN (1, 2) AND "
    "n.start_ns < ?2 AND n.end_ns > ?3 ORDER BY n.start_ns LIMIT ?4";

const char mrd_db_sql_rank_host[] = "SELECT host FROM main.ranks WHERE rank = ?1";

const char mrd_db_sql_kernel_ops[] =
    "SELECT l.op_id, t.start_ns FROM temp.mrd_link l JOIN "
    "temp.mrd_op_time t ON t.rank = l.rank AND t.op_id = l.op_id AND "
    "t.source = 1 WHERE l.rank = ?1 AND l.correlation_id = ?2";

const char mrd_db_sql_export_kernels[] =
    "SELECT k.rank, k.device, k.stream, k.start_ns, k.end_ns, "
    "k.correlation_id, s.value, k.grid_x, k.grid_y, k.grid_z, k.block_x, "
    "k.block_y, k.block_z, (SELECT l.op_id FROM temp.mrd_link l WHERE "
    "l.rank = k.rank AND l.correlation_id = k.correlation_id LIMIT 1) "
    "FROM main.kernels k LEFT JOIN main.strings s ON s.id = k.name_id";

const char mrd_db_sql_export_memcpys[] =
    "SELECT rank, device, stream, start_ns, end_ns, bytes, copy_kind "
    "FROM main.memcpys k WHERE " MRD_DB_KERNEL_VALID;

const char mrd_db_sql_export_memsets[] =
    "SELECT rank, device, stream, start_ns, end_ns, bytes FROM "
    "main.memsets k WHERE " MRD_DB_KERNEL_VALID;

const char mrd_db_sql_export_graphs[] =
    "SELECT rank, device, stream, start_ns, end_ns, graph_id FROM "
    "main.graph_launches";

const char mrd_db_sql_export_nccl_ops[] =
    "SELECT n.rank, n.op_id, n.start_ns, n.end_ns, n.seq, f.value, "
    "n.count, n.bytes, d.value, a.value, pr.value, n.peer, n.channels, "
    "n.is_p2p, n.device, n.comm_hash, n.root, t.start_ns, t.end_ns "
    "FROM main.nccl_ops n LEFT JOIN main.strings f ON f.id = n.func_id "
    "LEFT JOIN main.strings d ON d.id = n.datatype_id LEFT JOIN "
    "main.strings a ON a.id = n.algo_id LEFT JOIN main.strings pr ON "
    "pr.id = n.proto_id LEFT JOIN temp.mrd_op_time t ON t.rank = n.rank "
    "AND t.op_id = n.op_id AND t.source = 1 "
    "ORDER BY n.rank, n.device, n.start_ns";

const char mrd_db_sql_export_nvtx[] =
    "SELECT n.rank, n.thread, n.start_ns, n.end_ns, n.kind, s.value, "
    "d.value FROM main.nvtx n LEFT JOIN main.strings s ON s.id = "
    "n.name_id LEFT JOIN main.strings d ON d.id = n.domain_id "
    "WHERE n.kind <> 2";

const char mrd_db_sql_export_nvtx_start_end[] =
    "SELECT n.rank, n.thread, n.start_ns, n.end_ns, n.kind, s.value, "
    "d.value FROM main.nvtx n LEFT JOIN main.strings s ON s.id = "
    "n.name_id LEFT JOIN main.strings d ON d.id = n.domain_id "
    "WHERE n.kind = 2 ORDER BY n.rank, n.thread, n.start_ns";

const char mrd_db_sql_export_mpi[] =
    "SELECT m.rank, m.thread, m.start_ns, m.end_ns, s.value, m.call_id, "
    "m.bytes, m.peer, m.tag FROM main.mpi_calls m LEFT JOIN main.strings "
    "s ON s.id = m.call_id";

const char mrd_db_sql_export_syncs[] =
    "SELECT rank, start_ns, end_ns, type, stream FROM main.syncs "
    "ORDER BY rank, start_ns";

const char mrd_db_sql_export_api[] =
    "SELECT c.rank, c.thread, c.start_ns, c.end_ns, s.value, c.cbid, "
    "c.correlation_id FROM main.api_calls c LEFT JOIN main.strings s ON "
    "s.id = c.name_id";

/* ---- the store's connection setup and schema checks (aggregator/store) ------------------- */

/* The settings of every connection the store opens; the store's own also sets WAL mode. */
#define CONN_PRAGMAS                                                                               \
    "PRAGMA synchronous=NORMAL;\n"                                                                 \
    "PRAGMA temp_store=MEMORY;\n"                                                                  \
    "PRAGMA cache_size=-65536;\n"                                                                  \
    "PRAGMA wal_autocheckpoint=16384;\n"                                                           \
    "PRAGMA busy_timeout=10000;\n"

const char mrd_db_sql_store_pragmas[] = "PRAGMA journal_mode=WAL;\n" CONN_PRAGMAS;

const char mrd_db_sql_conn_pragmas[] = CONN_PRAGMAS;

const char mrd_db_sql_store_v2_layout[] = "SELECT count(*) FROM pragma_table_info('rank_strings')"
                                          " WHERE name = 'agent_instance'";

const char mrd_db_sql_store_migrate_v1_v2[] =
    "ALTER TABLE batches ADD COLUMN agent_instance INTEGER;"
    "ALTER TABLE rank_strings RENAME TO rank_strings_v1;"
    "CREATE TABLE rank_strings ("
    " rank INTEGER NOT NULL, agent_instance INTEGER NOT NULL,"
    " local_id INTEGER NOT NULL, string_id INTEGER NOT NULL,"
    " PRIMARY KEY (rank, agent_instance, local_id)) WITHOUT ROWID;"
    "INSERT INTO rank_strings(rank, agent_instance, local_id, string_id)"
    " SELECT o.rank, coalesce(r.agent_instance, 0), o.local_id, o.string_id"
    " FROM rank_strings_v1 o LEFT JOIN ranks r ON r.rank = o.rank;"
    "DROP TABLE rank_strings_v1;";

const char mrd_db_sql_run_count[] = "SELECT count(*) FROM runs";

const char mrd_db_sql_run_id[] = "SELECT run_id FROM runs";

const char mrd_db_sql_begin[] = "BEGIN";

const char mrd_db_sql_run_insert[] = "INSERT INTO runs(run_id, shard_id, anchor_realtime_ns,"
                                     " anchor_monotonic_ns, boot_id, created_ns, command)"
                                     " VALUES(?1,?2,?3,?4,?5,?3,?6)";

const char mrd_db_sql_run_anchors[] = "SELECT run_id, anchor_realtime_ns, anchor_monotonic_ns,"
                                      " coalesce(boot_id, '') FROM runs";

const char mrd_db_sql_run_reanchor_fmt[] =
    "UPDATE runs SET anchor_realtime_ns = %lld, anchor_monotonic_ns = %lld,"
    " boot_id = '%s'";

const char mrd_db_sql_schema_version_set_fmt[] =
    "DELETE FROM schema_version; INSERT INTO schema_version(version) VALUES(%d)";

const char mrd_db_sql_schema_user_tables[] =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
    " AND name NOT LIKE 'sqlite!_%' ESCAPE '!'";

const char mrd_db_sql_schema_version_rows[] = "SELECT count(*) FROM schema_version";

const char mrd_db_sql_schema_version_odd_rows[] = "SELECT count(*) FROM schema_version"
                                                  " WHERE typeof(version) != 'integer'";

const char mrd_db_sql_schema_version_odd[] = "SELECT quote(version) FROM schema_version"
                                             " WHERE typeof(version) != 'integer'";

const char mrd_db_sql_schema_version_max[] = "SELECT max(version) FROM schema_version";

const char mrd_db_sql_sync_full[] = "PRAGMA synchronous=FULL";

const char mrd_db_sql_wal[] = "PRAGMA journal_mode=WAL";

/* ---- the CLI (launcher/finalize.c, launcher/profile.c) ----------------------------------- */

const char mrd_db_sql_run_command_set[] = "UPDATE runs SET command = ?1 WHERE command IS NULL OR "
                                          "command = ''";

const char mrd_db_sql_schema_read[] = "SELECT count(*) FROM sqlite_master";

/* ---- the native Perfetto trace (aggregator/export/pftrace.c) ---- */

/* GPU work of each stream in (rank, device, stream, start) order: kernels (lost ones,
 * start = end = 0, left out), copies, memsets. Columns: rank, device, stream, start, end,
 * kind (0 kernel, 1 memcpy, 2 memset), name id (kernel) or copy kind, text, correlation id
 * or bytes, grid x y z, block x y z, the kernel's NCCL op (or NULL). */
const char mrd_db_sql_pftrace_streams[] =
    "SELECT k.rank, k.device, k.stream, k.start_ns, k.end_ns, 0, k.name_id, s.value, "
    "k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, "
    "(SELECT l.op_id FROM temp.mrd_link l WHERE l.rank = k.rank AND l.correlation_id = "
    "k.correlation_id LIMIT 1) FROM main.kernels k LEFT JOIN main.strings s ON s.id = "
    "k.name_id WHERE " MRD_DB_KERNEL_VALID " "
    "UNION ALL SELECT rank, device, stream, start_ns, end_ns, 1, copy_kind, NULL, bytes, "
    "0, 0, 0, 0, 0, 0, NULL FROM main.memcpys WHERE NOT (start_ns = 0 AND end_ns = 0) "
    "UNION ALL SELECT rank, device, stream, start_ns, end_ns, 2, 0, NULL, bytes, 0, 0, 0, "
    "0, 0, 0, NULL FROM main.memsets WHERE NOT (start_ns = 0 AND end_ns = 0) "
    "ORDER BY 1, 2, 3, 4, 5 DESC";
/* the ops whose first kernel is (rank, correlation id) starting at ?3 */
const char mrd_db_sql_pftrace_links[] =
    "SELECT l.op_id FROM temp.mrd_link l JOIN temp.mrd_op_time t ON t.rank = l.rank AND "
    "t.op_id = l.op_id AND t.source = 1 WHERE l.rank = ?1 AND l.correlation_id = ?2 AND "
    "t.start_ns = ?3";
const char mrd_db_sql_pftrace_graphs[] =
    "SELECT rank, device, stream, start_ns, end_ns, graph_id FROM main.graph_launches "
    "ORDER BY 1, 2, 3, 4, 5 DESC";
/* rank, device, start, end, op_id, seq, func id, func, count, bytes, datatype id,
 * datatype, algo id, algo, proto id, proto, peer, channels, is_p2p, comm_hash, root,
 * has a kernel (mrd_op_time source 1) */
const char mrd_db_sql_pftrace_nccl[] =
    "SELECT n.rank, n.device, n.start_ns, n.end_ns, n.op_id, n.seq, n.func_id, f.value, "
    "n.count, n.bytes, n.datatype_id, d.value, n.algo_id, a.value, n.proto_id, pr.value, "
    "n.peer, n.channels, n.is_p2p, n.comm_hash, n.root, t.start_ns IS NOT NULL "
    "FROM main.nccl_ops n LEFT JOIN main.strings f ON f.id = n.func_id "
    "LEFT JOIN main.strings d ON d.id = n.datatype_id LEFT JOIN main.strings a ON a.id = "
    "n.algo_id LEFT JOIN main.strings pr ON pr.id = n.proto_id LEFT JOIN temp.mrd_op_time "
    "t ON t.rank = n.rank AND t.op_id = n.op_id AND t.source = 1 "
    "ORDER BY 1, 2, 3, 4 DESC";
/* rank, thread, start, end, kind, name id, name, domain id, domain; ?1: 1 = push/pop
 * ranges and marks, 2 = start/end ranges */
const char mrd_db_sql_pftrace_nvtx[] =
    "SELECT n.rank, n.thread, n.start_ns, n.end_ns, n.kind, n.name_id, s.value, "
    "n.domain_id, d.value FROM main.nvtx n LEFT JOIN main.strings s ON s.id = n.name_id "
    "LEFT JOIN main.strings d ON d.id = n.domain_id WHERE (n.kind = 2) = (?1 = 2) "
    "ORDER BY 1, 2, 3, 4 DESC";
const char mrd_db_sql_pftrace_mpi[] =
    "SELECT m.rank, m.thread, m.start_ns, m.end_ns, m.call_id, s.value, m.bytes, m.peer, "
    "m.tag FROM main.mpi_calls m LEFT JOIN main.strings s ON s.id = m.call_id "
    "ORDER BY 1, 2, 3, 4 DESC";
const char mrd_db_sql_pftrace_syncs[] =
    "SELECT rank, 0, start_ns, end_ns, type, stream FROM main.syncs ORDER BY 1, 3, 4 DESC";
const char mrd_db_sql_pftrace_api[] =
    "SELECT c.rank, c.thread, c.start_ns, c.end_ns, c.name_id, s.value, c.cbid, "
    "c.correlation_id FROM main.api_calls c LEFT JOIN main.strings s ON s.id = c.name_id "
    "ORDER BY 1, 2, 3, 4 DESC";
/* already global (the finalize mapped them) */
const char mrd_db_sql_pftrace_windows[] =
    "SELECT rank, 0, start_ns, end_ns, first_step, last_step, reason, attach_ns, "
    "detach_ns, flush_ns, kernels FROM main.windows ORDER BY 1, 3, 4 DESC";
const char mrd_db_sql_pftrace_steps[] =
    "SELECT n.rank, 0, n.start_ns, n.end_ns, s.value FROM main.nvtx n JOIN main.strings s "
    "ON s.id = n.name_id WHERE n.kind = 1 ORDER BY 1, 3, 4 DESC";
const char mrd_db_sql_pftrace_gpu_clock[] =
    "SELECT rank, device, host_ns, gpu_ns FROM main.gpu_clock_samples ORDER BY 1, 2, 3";

/* ---- why, and what it cost (aggregator/analyze/why.c) ---- */

const char mrd_db_sql_why_instance_bytes[] =
    "SELECT comm_hash, seq, MAX(bytes) FROM main.nccl_ops WHERE is_p2p = 0 AND seq IS NOT "
    "NULL GROUP BY comm_hash, seq, func_id ORDER BY comm_hash, seq, func_id";
const char mrd_db_sql_why_string[] = "SELECT value FROM main.strings WHERE id = ?1";
const char mrd_db_sql_why_gpu_samples_copy[] =
    "DROP TABLE IF EXISTS temp.mrd_gpu_samples;"
    "CREATE TEMP TABLE mrd_gpu_samples AS SELECT rank, host_ns, sm_clock_mhz, power_mw, "
    "temperature_c, throttle_reasons FROM main.gpu_samples ORDER BY rowid;"
    "CREATE INDEX temp.mrd_gpu_samples_rank_time ON mrd_gpu_samples (rank, host_ns)";
const char mrd_db_sql_why_gpu_sample[] =
    "SELECT sm_clock_mhz, power_mw, temperature_c, throttle_reasons, host_ns "
    "FROM temp.mrd_gpu_samples "
    "WHERE rank = ?1 AND host_ns <= ?2 ORDER BY host_ns DESC, rowid DESC LIMIT 1";
const char mrd_db_sql_why_algo_proto[] =
    "SELECT n.comm_hash, f.value, n.bytes, n.rank, a.value, p.value, COUNT(*) "
    "FROM main.nccl_ops n LEFT JOIN main.strings f ON f.id = n.func_id "
    "LEFT JOIN main.strings a ON a.id = n.algo_id LEFT JOIN main.strings p ON p.id = "
    "n.proto_id WHERE n.is_p2p = 0 AND n.seq IS NOT NULL "
    "GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 7 DESC, 5, 6";
const char mrd_db_sql_why_mixed[] =
    "SELECT i.comm_hash, f.value, i.bytes, COUNT(*) FROM (SELECT comm_hash, func_id, "
    "MAX(bytes) AS bytes, COUNT(DISTINCT COALESCE(algo_id, -1) || '/' || "
    "COALESCE(proto_id, -1)) AS choices FROM main.nccl_ops WHERE is_p2p = 0 AND seq IS NOT "
    "NULL GROUP BY comm_hash, seq, func_id) i LEFT JOIN main.strings f ON f.id = i.func_id "
    "WHERE i.choices > 1 GROUP BY 1, 2, 3";
const char mrd_db_sql_find_pageable[] =
    "SELECT rank, count(*), sum(bytes), sum(end_ns - start_ns) FROM main.memcpys "
    "WHERE src_kind = 1 OR dst_kind = 1 GROUP BY rank ORDER BY rank";
const char mrd_db_sql_find_syncs[] = "SELECT rank, start_ns, end_ns FROM main.syncs "
                                     "WHERE type IN (1, 3, 4) ORDER BY rank, start_ns";
const char mrd_db_sql_find_gpu_bound[] =
    "SELECT rank, max(error_bound_ns) FROM main.gpu_timer_models GROUP BY rank";
const char mrd_db_sql_env_pairs[] =
    "SELECT e.rank, k.value, v.value FROM main.env_records e "
    "LEFT JOIN main.strings k ON k.id = e.key_id LEFT JOIN main.strings v ON v.id = e.value_id "
    "ORDER BY e.rank";
