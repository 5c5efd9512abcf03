/* The named statements of the database module (db.h): every SQL text that the clock
 * passes, the analysis, the exports, the finalize and the store's connection setup run.
 * Each declaration says what the statement does, its parameters (?N) and its result
 * columns in order. "local" = the rank's host clock, "global" = the global timebase
 * (aggregator/SCHEMA.md). A statement that names a table needs it to exist: callers check
 * with mrd_db_has_table first, where a database may lack it. The texts are in db_sql.c.
 */
#ifndef MRD_DB_SQL_H
#define MRD_DB_SQL_H

/* ---- the module's own (db.c) ---------------------------------------------------------- */

/* ?1 table name -> one row (1) when the main schema has that table. */
extern const char mrd_db_sql_table_exists[];
/* ?1 table name -> one row (1) when the TEMP schema has that table. */
extern const char mrd_db_sql_temp_table_exists[];
/* -> one row (1) when kernels has an index whose first columns are (rank, correlation_id). */
extern const char mrd_db_sql_kernels_corr_index[];
/* Creates TEMP tables mrd_link and mrd_op_time (see mrd_db_op_intervals). */
extern const char mrd_db_sql_op_tables[];
/* Drops the TEMP tables mrd_link and mrd_op_time where they exist. */
extern const char mrd_db_sql_op_tables_drop[];
/* Fills mrd_link from nccl_ops.launch_id = external_correlations.external_id. */
extern const char mrd_db_sql_op_links[];
/* Fills mrd_op_time source 1 (linked kernels, MRD_DB_KERNEL_VALID), probing kernels per
 * link (needs an index on kernels (rank, correlation_id)) ... */
extern const char mrd_db_sql_op_kernel_time_by_link[];
/* ... or scanning kernels once and probing the link table. */
extern const char mrd_db_sql_op_kernel_time_by_kernel[];
/* Fills mrd_op_time source 2 (nccl_channels' raw GPU times) for ops without source 1. */
extern const char mrd_db_sql_op_channel_time[];
/* The one matching: columns enum mrd_db_inst_col, one row per non-p2p op with a seq,
 * ordered by (comm_hash, seq, func_id, rank, op_id). */
extern const char mrd_db_sql_instances[];
/* The same columns, no rows (a database without nccl_ops). */
extern const char mrd_db_sql_no_instances[];
/* -> anchor_realtime_ns of the run (the earliest created). */
extern const char mrd_db_sql_run_anchor[];
/* -> MIN(t1) of clock_samples (global), NULL when empty. */
extern const char mrd_db_sql_first_probe[];
/* Per event table (kernels, memcpys, memsets, syncs, api_calls, graph_launches, nvtx,
 * nccl_ops, mpi_calls, in this order) -> rank, MIN(start_ns) of its rows with a time
 * (start_ns > 0; kernels also MRD_DB_KERNEL_VALID), GROUP BY rank. */
extern const char *const mrd_db_sql_first_event[9];

#endif
