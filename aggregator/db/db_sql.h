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
/* The op intervals (op_intervals.c, mrd_db_op_intervals). Creates the TEMP tables
 * mrd_link, mrd_op_time, mrd_link_kernel, mrd_op_gpu and mrd_op_source (the source
 * tables' MAX(rowid) at the build). */
extern const char mrd_db_sql_op_tables[];
/* Creates mrd_link_kernel's index (after its rows: one sort instead of one insert each). */
extern const char mrd_db_sql_op_link_kernel_index[];
/* -> type ('table' or 'view'), name of the op intervals' TEMP objects that exist. */
extern const char mrd_db_sql_op_temp_objects[];
/* DROP TABLE or DROP VIEW (type as mrd_db_sql_op_temp_objects gives it) of temp.<name>;
 * sqlite3_free the text; NULL when out of memory. */
char *mrd_db_sql_op_temp_drop(const char *type, const char *name);
/* -> MAX(rowid) of main.<table>, 0 when empty (the name quoted as an identifier);
 * sqlite3_free the text; NULL when out of memory. */
char *mrd_db_sql_max_rowid(const char *table);
/* ?1 table name, ?2 its MAX(rowid) when the op intervals were built: one mrd_op_source row. */
extern const char mrd_db_sql_op_source_insert[];
/* -> name, max_rowid of the stored op intervals' source tables (nccl_op_intervals_source). */
extern const char mrd_db_sql_op_stored_source[];
/* TEMP views mrd_link and mrd_op_time over the stored nccl_op_links, nccl_op_intervals. */
extern const char mrd_db_sql_op_stored_views[];
/* Creates nccl_op_links, nccl_op_intervals, nccl_op_intervals_source where absent and
 * replaces their rows with the TEMP mrd_link, mrd_op_time, mrd_op_source (the caller's
 * transaction). */
extern const char mrd_db_sql_op_store[];
/* The build's savepoint: opened, released, rolled back (and released). */
extern const char mrd_db_sql_op_build_begin[];
extern const char mrd_db_sql_op_build_commit[];
extern const char mrd_db_sql_op_build_rollback[];
/* Fills mrd_link from nccl_ops.launch_id = external_correlations.external_id. */
extern const char mrd_db_sql_op_links[];
/* -> rank, correlation_id of every mrd_link row. */
extern const char mrd_db_sql_op_link_keys[];
/* -> rank, correlation_id, start_ns, end_ns, device of every kernel, in table order. */
extern const char mrd_db_sql_op_kernel_scan[];
/* ?1 rank, ?2 correlation_id, ?3 start_ns, ?4 end_ns, ?5 device: one mrd_link_kernel row. */
extern const char mrd_db_sql_op_link_kernel_insert[];
/* Fills mrd_op_time source 1: MIN(start)/MAX(end) of each op's mrd_link_kernel rows. */
extern const char mrd_db_sql_op_kernel_time[];
/* -> rank, op_id, device of every nccl_ops row, in table order. */
extern const char mrd_db_sql_op_scan[];
/* -> rank, op_id, gpu_start, gpu_end of the nccl_channels rows with gpu_start > 0 AND
 * gpu_end >= gpu_start, in table order. */
extern const char mrd_db_sql_op_channel_scan[];
/* ?1 rank, ?2 op_id, ?3 device, ?4 MIN(gpu_start), ?5 MAX(gpu_end): one mrd_op_gpu row
 * (a first one per (rank, op_id) wins). */
extern const char mrd_db_sql_op_gpu_insert[];
/* Fills mrd_op_time source 2 (mrd_op_gpu's channel extremes) for ops without source 1. */
extern const char mrd_db_sql_op_channel_time[];
/* The one matching: columns enum mrd_db_inst_col, one row per non-p2p op with a seq,
 * ordered by (comm_hash, seq, func_id, rank, op_id). */
extern const char mrd_db_sql_instances[];
/* -> the number of instances mrd_db_sql_instances yields (distinct comm_hash, seq, func_id);
 * for progress reports. */
extern const char mrd_db_sql_instance_count[];
/* The same columns, no rows (a database without nccl_ops). */
extern const char mrd_db_sql_no_instances[];
/* -> anchor_realtime_ns of the run (the earliest created). */
extern const char mrd_db_sql_run_anchor[];
/* -> MIN(t1) of clock_samples (global), NULL when empty. */
extern const char mrd_db_sql_first_probe[];
/* -> COUNT(*) of main.<table>: the statement text for one table, built with the name
 * quoted as an identifier (any name is safe); NULL when out of memory. The caller frees
 * it with sqlite3_free. mrd_db_table_rows runs it. */
char *mrd_db_sql_table_count(const char *table);
/* Per event table (kernels, memcpys, memsets, syncs, api_calls, graph_launches, nvtx,
 * nccl_ops, mpi_calls, in this order) -> rank, MIN(start_ns) of its rows with a time
 * (start_ns > 0; kernels also MRD_DB_KERNEL_VALID), GROUP BY rank. */
extern const char *const mrd_db_sql_first_event[9];
/* The rows of mrd_db_sql_first_event[0] (kernels), found through the index
 * kernels_rank_start: a few probes per rank instead of a scan of every kernel. Only where
 * that index exists (mrd_db_sql_has_index). */
extern const char mrd_db_sql_first_kernel_by_rank[];
/* ?1 index name -> one row when the index exists. */
extern const char mrd_db_sql_has_index[];
/* Global-time views (mrd_db_global_views). Creates the enum_* TEMP tables with their
 * rows (idempotent). */
extern const char mrd_db_sql_enum_tables[];
/* Creates TEMP table mrd_time_origin(origin_ns) if absent and empties it. */
extern const char mrd_db_sql_origin_table[];
/* ?1 origin_ns: the one row of mrd_time_origin. */
extern const char mrd_db_sql_origin_set[];
/* Per event table (the order of mrd_db_sql_first_event): (re)creates TEMP view
 * <table>_global with the clock models applied ... */
extern const char *const mrd_db_sql_global_view[9];
/* ... or, in a database without clock_models, with every rank's local time. */
extern const char *const mrd_db_sql_local_view[9];

/* ---- the analysis (aggregator/analyze) --------------------------------------------------- */

/* Drops and creates table windows (aggregator/SCHEMA.md, "Capture windows"). */
extern const char mrd_db_sql_windows_create[];

/* -> the same without rank_processes (host, pid NULL). */
extern const char mrd_db_sql_rank_processes[];

/* -> rank, agent_instance, batches, host, pid of every agent process of the ranks whose
 * batches came from more than one (batches, rank_processes), by rank and first batch. */
extern const char mrd_db_sql_rank_processes_hosts[];

/* -> run_id, world_size, anchor_realtime_ns, created_ns, command of the earliest run
 * (runs). */
extern const char mrd_db_sql_run_info[];

/* -> rank, local_rank, world_size, host, pid, goodbye of every rank, by rank (ranks). */
extern const char mrd_db_sql_ranks[];

/* -> rank, device, name, uuid, pci_bus_id of every GPU, by rank and device (gpus). */
extern const char mrd_db_sql_gpus[];

/* printf format, %s = an event table -> the rank of each of its rows, in table order (the
 * caller tallies them: a GROUP BY rank would sort every row of a table without a rank
 * index). */
extern const char mrd_db_sql_rank_of_rows_fmt[];
/* ?1 = a table -> a row when one of its indexes has rank as its first column. */
extern const char mrd_db_sql_rank_led_index[];
/* printf format, %s = an event table with an index led by rank -> rank, rows, by rank (the
 * index is walked in rank order: no sort). */
extern const char mrd_db_sql_rows_per_rank_fmt[];

/* -> rank, category, name, value of the agents' captured/dropped/agent/cupti counters, by
 * rank and name. */
extern const char mrd_db_sql_agent_counters[];

/* -> name, value of every aggregator counter. */
extern const char mrd_db_sql_aggregator_counters[];

/* -> rank, segment, offset_ns, drift_ppm, error_bound_ns, samples, method of every
 * clock_models segment, by rank and local_begin_ns. */
extern const char mrd_db_sql_clock_summary[];

/* -> rank_a, rank_b, instances, violations_before, violations_after,
 * max_violation_before_ns, max_violation_after_ns of clock_causality, most violations
 * first. */
extern const char mrd_db_sql_causality_pairs[];

/* -> rank, shift_ns of every clock_adjustments row. */
extern const char mrd_db_sql_clock_shifts[];

/* Sets the connection's page cache to 16 MiB for the analysis (each kernel is read once:
 * a larger cache only costs the page faults of filling it). */
extern const char mrd_db_sql_analysis_cache_size[];

/* -> first_step, detach_step of every windows row. */
extern const char mrd_db_sql_window_steps[];

/* ?1 step name prefix, ?2 1 to also take 'train%step%' -> rank, start_ns, end_ns (local),
 * name of the NVTX push/pop and start/end ranges that may be steps, by rank and start (the
 * exact rule is mrd_step_name_match's). */
extern const char mrd_db_sql_step_ranges[];

/* -> name ('(unnamed)' without one), total GPU time ns, count of the valid kernels
 * (MRD_DB_KERNEL_VALID) of every rank, one row per name id (`meridian diff`). */
extern const char mrd_db_sql_kernel_totals[];

/* ?1 rank -> device, start_ns, end_ns (local), correlation_id, name_id of the rank's
 * kernels, by start (the kernels_rank_start index's order). */
extern const char mrd_db_sql_rank_kernels[];
/* ?1 rank -> the correlation ids of the rank's kernels linked to an NCCL op (mrd_link),
 * ascending, each once. */
extern const char mrd_db_sql_rank_links[];

/* ?1 value -> strings.id. */
extern const char mrd_db_sql_string_id[];

/* ?1 the window domain's strings.id -> rank, start_ns, end_ns (local), message of every
 * window record an older agent wrote as an NVTX range, by rank, start and rowid. */
extern const char mrd_db_sql_window_records[];

/* -> rank, start_ns, end_ns (local), first_step, last_step, reason (text), attach_ns,
 * detach_ns, flush_ns of every `window` event (table window_records), by rank and start. */
extern const char mrd_db_sql_window_events[];

/* -> one row when window_records has any. */
extern const char mrd_db_sql_window_events_any[];

/* -> the number of distinct ranks in windows. */
extern const char mrd_db_sql_windows_ranks[];

/* ?1..?11 rank, first_step, last_step, detach_step, reason, start_ns, end_ns (global),
 * attach_ns, detach_ns (NULL: open at exit), flush_ns, kernels: one windows row. */
extern const char mrd_db_sql_window_insert[];

/* ?1 rank, ?2 from, ?3 to (local) -> start_ns of the rank's kernels starting in [from, to]
 * (index kernels (rank, start_ns)). */
extern const char mrd_db_sql_kernels_in_interval[];

/* Opens a write transaction now (BEGIN IMMEDIATE). */
extern const char mrd_db_sql_begin_immediate[];

/* Commits the open transaction. */
extern const char mrd_db_sql_commit[];

/* Rolls the open transaction back. */
extern const char mrd_db_sql_rollback[];

/* ?1 rank, ?2 limit, ?3 offset -> attach_ns of the rank's windows in ascending order (the
 * median's rows). */
extern const char mrd_db_sql_window_attach_nth[];

/* ?1 rank, ?2 limit, ?3 offset -> detach_ns of the rank's closed windows in ascending
 * order. */
extern const char mrd_db_sql_window_detach_nth[];

/* -> rank, first_step, last_step, open (detach_ns IS NULL), kernels of every window, by
 * rank, first step and start. */
extern const char mrd_db_sql_windows_list[];

/* ?1 key ("env:MERIDIAN_TRACE", ...) -> the value of the lowest rank whose fingerprint
 * has the key (env_records; '' for the empty value). */
extern const char mrd_db_sql_env_value[];

/* ?1 counter name -> its largest value over the ranks in category `window`, and its sum
 * over them (agent_counters; NULL, NULL when no rank recorded it). */
extern const char mrd_db_sql_window_counter[];

/* ?1 rank -> the mean time of its window closes, ns: counters window/close_ns over
 * window/closes (NULL when the rank recorded neither, an older agent, or no close). */
extern const char mrd_db_sql_window_close_mean[];

/* ---- the clock passes (aggregator/clock) ------------------------------------------------- */

/* Creates the clock module's own tables clock_causality and clock_adjustments
 * (aggregator/SCHEMA.md, "Clock alignment results") and the indexes that serve the
 * calibration's and the matching's joins (CREATE ... IF NOT EXISTS). */
extern const char mrd_db_sql_clock_tables[];

/* -> rank, device, host_ns - uncertainty, gpu_ns, host_ns + uncertainty of every direct
 * GPU clock sample. */
extern const char mrd_db_sql_gpu_sample_brackets[];

/* -> rank, device, start_ns, end_ns (local), MIN(gpu_start), MAX(gpu_end) (raw GPU timer)
 * per CUPTI kernel record reached by the chain nccl_ops.launch_id -> external_correlations
 * -> kernels (MRD_DB_KERNEL_VALID) with the op's nccl_channels: the GPU timer
 * calibration's brackets. Reads the op intervals' TEMP tables (mrd_link_kernel, mrd_link,
 * mrd_op_gpu): mrd_db_op_intervals first. */
extern const char mrd_db_sql_gpu_kernel_brackets[];

/* -> rank, device (the op's), launch host time, gpu_start, host_start_ns per KernelCh
 * channel whose op's kernel launch has a host-side record: the launch time is the earliest
 * API call CUPTI tied to the launch id (nccl_ops.launch_id -> external_correlations ->
 * api_calls: cuLaunchKernelEx, entered before the kernel can start); host_start_ns is when
 * NCCL's proxy reported the channel started (after the GPU wrote that start time). The
 * host-only brackets of the GPU timer calibration. Reads mrd_link and mrd_op_gpu (the op
 * intervals' TEMP tables) and api_calls: mrd_db_op_intervals first, and only where
 * api_calls exists. */
extern const char mrd_db_sql_gpu_host_brackets[];

/* -> rank, device, slope, intercept_ns, error_bound_ns of every gpu_timer_models row. */
extern const char mrd_db_sql_gpu_model_bounds[];

/* Empties clock_causality and clock_adjustments. */
extern const char mrd_db_sql_causality_clear[];

/* ?1..?9: one clock_causality row (its columns in schema order). */
extern const char mrd_db_sql_causality_pair_insert[];

/* ?1..?8: one clock_adjustments row (its columns in schema order). */
extern const char mrd_db_sql_causality_adjustment_insert[];

/* ?1 rank, ?2 shift_ns: adds the shift to every clock_models segment of the rank. */
extern const char mrd_db_sql_clock_offset_shift[];

/* -> rank, t0, t1, t2, t3 of every clock probe, by rank and t0. */
extern const char mrd_db_sql_clock_probes[];

/* ?1 rank: deletes the rank's clock_models rows. */
extern const char mrd_db_sql_clock_model_delete[];

/* ?1..?9 rank, segment, local_begin_ns, local_end_ns, offset_ns, drift_ppm,
 * error_bound_ns, samples, method: one clock_models segment. */
extern const char mrd_db_sql_clock_model_insert[];

/* Empties clock_adjustments (an earlier causality pass's, now stale) and commits. */
extern const char mrd_db_sql_clock_fit_commit[];

/* ?1..?7 rank, device, slope, intercept_ns, error_bound_ns, samples, method: one
 * gpu_timer_models row (replacing the GPU's). */
extern const char mrd_db_sql_gpu_model_insert[];

/* Opens a write transaction and empties gpu_timer_models. */
extern const char mrd_db_sql_gpu_models_begin[];

/* -> the largest rank of clock_models (NULL when empty). */
extern const char mrd_db_sql_clock_models_max_rank[];

/* -> rank, local_begin_ns, local_end_ns, offset_ns, drift_ppm, error_bound_ns, samples,
 * method of every segment of ranks >= 0, by rank and segment. */
extern const char mrd_db_sql_clock_models_all[];

/* -> rank, local_begin_ns, local_end_ns, offset_ns, drift_ppm of every clock_models
 * segment, by rank and local_begin_ns: the global-time mapping's input
 * (aggregator/SCHEMA.md). */
extern const char mrd_db_sql_clock_segments[];

/* -> rank, device, slope, intercept_ns of every gpu_timer_models row, by rank and device. */
extern const char mrd_db_sql_gpu_models[];

/* ---- the exports (aggregator/export) ----------------------------------------------------- */

/* ?1 rank -> MIN(start_ns) of the rank's kernels (local). Both exports. */
extern const char mrd_db_sql_first_kernel_of_rank[];

/* ?1 rank, ?2 from, ?3 to, ?4 end after, ?5 limit (local) -> start_ns, end_ns, linked (an
 * NCCL op's: mrd_link), name of the rank's kernels starting in [from, to) and ending after
 * ?4, by start. */
extern const char mrd_db_sql_html_kernels[];

/* ?1 rank, ?2 starting before, ?3 ending after, ?4 limit (local) -> start_ns, end_ns, name,
 * depth of the rank's NVTX ranges (push/pop and start/end) meeting (?3, ?2), by start. */
extern const char mrd_db_sql_html_nvtx[];

/* ?1 rank -> host. Both exports. */
extern const char mrd_db_sql_rank_host[];

/* ?1 rank, ?2 correlation_id -> op_id, start_ns (local, source 1) of the NCCL ops the
 * kernel's launch belongs to (mrd_link, mrd_op_time). */
extern const char mrd_db_sql_kernel_ops[];

/* -> rank, device, stream, start_ns, end_ns, correlation_id, name, grid_x..z, block_x..z,
 * op_id (the NCCL op that launched it, or NULL) of every kernel. */
extern const char mrd_db_sql_export_kernels[];

/* -> rank, device, stream, start_ns, end_ns, bytes, copy_kind of every memcpy with an
 * interval (MRD_DB_KERNEL_VALID). */
extern const char mrd_db_sql_export_memcpys[];

/* -> rank, device, stream, start_ns, end_ns, bytes of every memset with an interval
 * (MRD_DB_KERNEL_VALID). */
extern const char mrd_db_sql_export_memsets[];

/* -> rank, device, stream, start_ns, end_ns, graph_id of every graph launch. */
extern const char mrd_db_sql_export_graphs[];

/* -> rank, op_id, start_ns, end_ns, seq, func, count, bytes, datatype, algo, proto, peer,
 * channels, is_p2p, device, comm_hash, root, kernel start_ns, kernel end_ns (source 1 of
 * mrd_op_time, else NULL) of every NCCL op, by rank, device, start. */
extern const char mrd_db_sql_export_nccl_ops[];

/* -> rank, thread, start_ns, end_ns, kind, name, domain of every NVTX row but start/end
 * ranges (kind 2). */
extern const char mrd_db_sql_export_nvtx[];

/* -> the same columns for the start/end ranges (kind 2), by rank, thread, start. */
extern const char mrd_db_sql_export_nvtx_start_end[];

/* -> rank, thread, start_ns, end_ns, name, call_id, bytes, peer, tag of every MPI call. */
extern const char mrd_db_sql_export_mpi[];

/* -> rank, start_ns, end_ns, type, stream of every synchronization, by rank and start. */
extern const char mrd_db_sql_export_syncs[];

/* -> rank, thread, start_ns, end_ns, name, cbid, correlation_id of every CUDA API call. */
extern const char mrd_db_sql_export_api[];

/* ---- the store's connection setup and schema checks (aggregator/store) ------------------- */

/* journal_mode=WAL and then mrd_db_sql_conn_pragmas: the writer's connection once the
 * refusals passed (WAL is a persistent change of the file). */
extern const char mrd_db_sql_store_pragmas[];

/* The pragmas of every store connection but journal_mode (synchronous=NORMAL, temp_store,
 * cache_size, wal_autocheckpoint, busy_timeout). */
extern const char mrd_db_sql_conn_pragmas[];

/* -> 1 when rank_strings already has agent_instance (a v1 file written by a later v1
 * build), else 0. */
extern const char mrd_db_sql_store_v2_layout[];

/* Migrates a schema v1 database to v2 (batches.agent_instance, rank_strings per agent
 * process); the DDL as v2 released it. */
extern const char mrd_db_sql_store_migrate_v1_v2[];

/* -> the number of runs rows. */
extern const char mrd_db_sql_run_count[];

/* -> run_id of the runs row. */
extern const char mrd_db_sql_run_id[];

/* Opens a read transaction (BEGIN). */
extern const char mrd_db_sql_begin[];

/* ?1 run_id, ?2 shard_id, ?3 anchor_realtime_ns (also created_ns), ?4 anchor_monotonic_ns,
 * ?5 boot_id, ?6 command: the runs row. */
extern const char mrd_db_sql_run_insert[];

/* -> run_id, anchor_realtime_ns, anchor_monotonic_ns, boot_id ('' when NULL) of the runs
 * row. */
extern const char mrd_db_sql_run_anchors[];

/* printf format, %lld anchor_realtime_ns, %lld anchor_monotonic_ns, %s boot_id (hex,
 * checked by the caller): re-anchors the runs row. */
extern const char mrd_db_sql_run_reanchor_fmt[];

/* printf format, %d version: replaces the schema_version row. */
extern const char mrd_db_sql_schema_version_set_fmt[];

/* -> the number of tables that are not SQLite's own. */
extern const char mrd_db_sql_schema_user_tables[];

/* -> the number of schema_version rows. */
extern const char mrd_db_sql_schema_version_rows[];

/* -> the number of schema_version rows whose version is not an integer. */
extern const char mrd_db_sql_schema_version_odd_rows[];

/* -> quote(version) of a schema_version row whose version is not an integer. */
extern const char mrd_db_sql_schema_version_odd[];

/* -> the largest version in schema_version. */
extern const char mrd_db_sql_schema_version_max[];

/* Sets synchronous=FULL on the connection (every commit reaches the disk). */
extern const char mrd_db_sql_sync_full[];

/* Switches the file to WAL mode -> the journal mode now in effect. */
extern const char mrd_db_sql_wal[];

/* ---- the CLI (launcher/finalize.c, launcher/profile.c) ----------------------------------- */

/* ?1 command: records the job's command line in the runs row when it has none. */
extern const char mrd_db_sql_run_command_set[];

/* -> the number of schema entries: reading it makes SQLite load the schema (and wait for a
 * lock). */
extern const char mrd_db_sql_schema_read[];

/* ---- the native Perfetto trace (aggregator/export/pftrace.c): each streams one track
 * group in the order its rows must be written ---- */

/* GPU work of each stream in (rank, device, stream, start) order: kernels (lost ones,
 * start = end = 0, left out), copies, memsets. Columns: rank, device, stream, start, end,
 * kind (0 kernel, 1 memcpy, 2 memset), name id (kernel) or copy kind, text, correlation id
 * or bytes, grid x y z, block x y z, the kernel's NCCL op (or NULL). */
extern const char mrd_db_sql_pftrace_streams[];
/* the ops whose first kernel is (rank, correlation id) starting at ?3 */
extern const char mrd_db_sql_pftrace_links[];
extern const char mrd_db_sql_pftrace_graphs[];
/* rank, device, start, end, op_id, seq, func id, func, count, bytes, datatype id,
 * datatype, algo id, algo, proto id, proto, peer, channels, is_p2p, comm_hash, root,
 * has a kernel (mrd_op_time source 1) */
extern const char mrd_db_sql_pftrace_nccl[];
/* rank, thread, start, end, kind, name id, name, domain id, domain; ?1: 1 = push/pop
 * ranges and marks, 2 = start/end ranges */
extern const char mrd_db_sql_pftrace_nvtx[];
extern const char mrd_db_sql_pftrace_mpi[];
extern const char mrd_db_sql_pftrace_syncs[];
extern const char mrd_db_sql_pftrace_api[];
/* already global (the finalize mapped them) */
extern const char mrd_db_sql_pftrace_windows[];
extern const char mrd_db_sql_pftrace_steps[];
extern const char mrd_db_sql_pftrace_gpu_clock[];

/* ---- why, and what it cost (aggregator/analyze/why.c) ---- */

/* One row per collective instance in the matching's key order (mrd_db_sql_instances' WHERE
 * and ORDER BY): comm_hash, seq, MAX(bytes). */
extern const char mrd_db_sql_why_instance_bytes[];
/* ?1 strings.id -> value (no row: no such string). */
extern const char mrd_db_sql_why_string[];
/* Copies gpu_samples into temp.mrd_gpu_samples (rowid order kept) with an index on
 * (rank, host_ns), so that each late event's look-up is an index probe, not a scan of the
 * table (which has no such index in the database and may be read-only). */
extern const char mrd_db_sql_why_gpu_samples_copy[];
/* The latest temp.mrd_gpu_samples row of rank ?1 at or before local ?2 (equal times: the
 * last stored): sm_clock_mhz, power_mw, temperature_c, throttle_reasons. */
extern const char mrd_db_sql_why_gpu_sample[];
/* Collectives per (comm_hash, func, bytes, rank, algorithm, protocol), grouped rows
 * adjacent, each rank's most frequent choice first (ties: by algorithm, then protocol
 * name): comm_hash, func, bytes, rank, algo, proto, count. */
extern const char mrd_db_sql_why_algo_proto[];
/* Per (comm_hash, func, bytes of the instance: MAX over its rows), the instances whose
 * ranks chose more than one (algorithm, protocol): comm_hash, func, bytes, count. */
extern const char mrd_db_sql_why_mixed[];

/* ---- findings (aggregator/analyze/findings*.c) ---- */

/* Per rank, copies with a pageable host side (src_kind or dst_kind 1): rank, count, bytes,
 * summed duration. */
extern const char mrd_db_sql_find_pageable[];
/* Host-blocking synchronizations (type 1 event, 3 stream, 4 context) by rank and start:
 * rank, start_ns, end_ns. */
extern const char mrd_db_sql_find_syncs[];
/* Per rank, the widest GPU timer model: rank, max(error_bound_ns). */
extern const char mrd_db_sql_find_gpu_bound[];
/* Every environment fingerprint pair (table env_records), by rank: rank, key, value
 * (NULL for value id 0, the empty string). */
extern const char mrd_db_sql_env_pairs[];

#endif
