/* The texts of the named statements; db_sql.h has each one's contract. Grouped by the
 * module that runs them, in data-flow order: the database module itself, the store's
 * connection setup, the clock passes, the analysis, the exports, the finalize. */
#include "db.h"

/* ---- the module's own (db.c) ---------------------------------------------------------- */

const char mrd_db_sql_table_exists[] =
    "SELECT 1 FROM main.sqlite_master WHERE type='table' AND name=?1";

const char mrd_db_sql_temp_table_exists[] = "SELECT 1 FROM temp.sqlite_master WHERE name=?1";

const char mrd_db_sql_kernels_corr_index[] =
    "SELECT 1 FROM pragma_index_list('kernels') il JOIN "
    "pragma_index_info(il.name) a ON a.seqno = 0 AND a.name = 'rank' "
    "JOIN pragma_index_info(il.name) b ON b.seqno = 1 AND b.name = 'correlation_id'";

const char mrd_db_sql_op_tables[] =
    "CREATE TEMP TABLE mrd_link (rank INTEGER NOT NULL, correlation_id "
    "INTEGER NOT NULL, op_id INTEGER NOT NULL, PRIMARY KEY (rank, "
    "correlation_id, op_id)) WITHOUT ROWID;"
    "CREATE TEMP TABLE mrd_op_time (rank INTEGER NOT NULL, op_id INTEGER "
    "NOT NULL, start_ns INTEGER, end_ns INTEGER, source INTEGER NOT NULL, "
    "PRIMARY KEY (rank, op_id)) WITHOUT ROWID;";

const char mrd_db_sql_op_tables_drop[] =
    "DROP TABLE IF EXISTS temp.mrd_link; DROP TABLE IF EXISTS temp.mrd_op_time";

const char mrd_db_sql_op_links[] =
    "INSERT OR IGNORE INTO temp.mrd_link SELECT n.rank, ec.correlation_id, "
    "n.op_id FROM main.nccl_ops n JOIN main.external_correlations ec ON "
    "ec.rank = n.rank AND ec.external_id = n.launch_id "
    "WHERE n.launch_id IS NOT NULL";

const char mrd_db_sql_op_kernel_time_by_link[] =
    "INSERT OR IGNORE INTO temp.mrd_op_time SELECT l.rank, l.op_id, "
    "MIN(k.start_ns), MAX(k.end_ns), 1 FROM temp.mrd_link l JOIN "
    "main.kernels k ON k.rank = l.rank AND k.correlation_id = "
    "l.correlation_id WHERE " MRD_DB_KERNEL_VALID " GROUP BY l.rank, l.op_id";

const char mrd_db_sql_op_kernel_time_by_kernel[] =
    "INSERT OR IGNORE INTO temp.mrd_op_time SELECT l.rank, l.op_id, "
    "MIN(k.start_ns), MAX(k.end_ns), 1 FROM main.kernels k CROSS "
    "JOIN temp.mrd_link l ON l.rank = k.rank AND l.correlation_id = "
    "k.correlation_id WHERE " MRD_DB_KERNEL_VALID " GROUP BY l.rank, l.op_id";

const char mrd_db_sql_op_channel_time[] =
    "INSERT OR IGNORE INTO temp.mrd_op_time SELECT rank, op_id, "
    "MIN(gpu_start), MAX(gpu_end), 2 FROM main.nccl_channels "
    "WHERE gpu_start > 0 AND gpu_end >= gpu_start GROUP BY rank, op_id";

const char mrd_db_sql_instances[] =
    "SELECT n.comm_hash, n.seq, n.func_id, n.rank, n.comm_nranks, "
    "COALESCE(n.device, 0), t.start_ns, t.end_ns, t.source, s.value, "
    "n.root IS NOT NULL AND n.comm_rank IS NOT NULL AND n.comm_rank = n.root "
    "FROM main.nccl_ops n LEFT JOIN temp.mrd_op_time t ON "
    "t.rank = n.rank AND t.op_id = n.op_id LEFT JOIN main.strings s "
    "ON s.id = n.func_id WHERE n.is_p2p = 0 AND n.seq IS NOT NULL "
    "ORDER BY n.comm_hash, n.seq, n.func_id, n.rank, n.op_id";

const char mrd_db_sql_no_instances[] =
    "SELECT 0, 0, 0, 0, NULL, 0, NULL, NULL, 0, NULL, 0 WHERE 0";

const char mrd_db_sql_run_anchor[] =
    "SELECT anchor_realtime_ns FROM main.runs ORDER BY created_ns LIMIT 1";

const char mrd_db_sql_first_probe[] = "SELECT MIN(t1) FROM main.clock_samples";

#define FIRST_EVENT(table) \
    "SELECT rank, MIN(start_ns) FROM main." table " WHERE start_ns > 0 GROUP BY rank"
const char *const mrd_db_sql_first_event[9] = {
    "SELECT k.rank, MIN(k.start_ns) FROM main.kernels k WHERE k.start_ns > 0 AND "
    MRD_DB_KERNEL_VALID " GROUP BY k.rank",
    FIRST_EVENT("memcpys"),
    FIRST_EVENT("memsets"),
    FIRST_EVENT("syncs"),
    FIRST_EVENT("api_calls"),
    FIRST_EVENT("graph_launches"),
    FIRST_EVENT("nvtx"),
    FIRST_EVENT("nccl_ops"),
    FIRST_EVENT("mpi_calls"),
};
