-- meridian database schema, version 2 (MRD_STORE_SCHEMA_VERSION). Reference and version
-- history: aggregator/SCHEMA.md. meridiand runs this file on every open, after migrating
-- an older version (store.c): statements here must stay CREATE ... IF NOT EXISTS.
-- One database holds one run (one shard of a run later). All times are integer
-- nanoseconds. Event tables store each rank's LOCAL clock (CLOCK_MONOTONIC_RAW of its
-- node, the agent's single host clock); clock_models maps local -> global timebase
-- (aggregator CLOCK_REALTIME at run start, advanced by its monotonic clock). String
-- columns *_id reference strings(id).

CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);

CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    shard_id INTEGER NOT NULL DEFAULT 0,
    world_size INTEGER,
    anchor_realtime_ns INTEGER NOT NULL,  -- aggregator CLOCK_REALTIME at run start
    anchor_monotonic_ns INTEGER NOT NULL, -- aggregator CLOCK_MONOTONIC at the same instant
    boot_id TEXT,                         -- aggregator host boot id (monotonic clock domain)
    created_ns INTEGER NOT NULL,
    command TEXT                          -- what `meridian profile` ran, if known
);

CREATE TABLE IF NOT EXISTS ranks (
    rank INTEGER PRIMARY KEY,
    local_rank INTEGER,
    world_size INTEGER,
    host TEXT,
    pid INTEGER,
    agent_version TEXT,
    agent_instance INTEGER,
    first_seen_ns INTEGER,                -- global timebase
    last_seen_ns INTEGER,
    goodbye INTEGER NOT NULL DEFAULT 0    -- 1 once the agent said goodbye
);

-- Every agent process that proved itself on a data connection of a rank (one row per
-- (rank, agent_instance); ranks keeps only the latest): `meridian report` flags a rank whose
-- batches came from more than one. Added within schema version 2 (a new table).
CREATE TABLE IF NOT EXISTS rank_processes (
    rank INTEGER NOT NULL,
    agent_instance INTEGER NOT NULL,
    host TEXT,
    pid INTEGER,
    first_seen_ns INTEGER,                -- global timebase: its first accepted Hello
    last_seen_ns INTEGER,                 -- and its latest
    PRIMARY KEY (rank, agent_instance)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS gpus (
    rank INTEGER NOT NULL, device INTEGER NOT NULL,
    uuid TEXT, pci_bus_id TEXT, name TEXT,
    PRIMARY KEY (rank, device)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS strings (
    id INTEGER PRIMARY KEY,
    value TEXT NOT NULL UNIQUE
);

-- agent-local string ids -> strings.id, per agent process (wire ids are small integers
-- that each agent process of a rank assigns from 1 again)
CREATE TABLE IF NOT EXISTS rank_strings (
    rank INTEGER NOT NULL, agent_instance INTEGER NOT NULL, local_id INTEGER NOT NULL,
    string_id INTEGER NOT NULL,
    PRIMARY KEY (rank, agent_instance, local_id)
) WITHOUT ROWID;

-- one row per committed batch: the de-duplication key and ingest accounting
CREATE TABLE IF NOT EXISTS batches (
    rank INTEGER NOT NULL, seq INTEGER NOT NULL,
    events INTEGER NOT NULL, wire_bytes INTEGER NOT NULL,
    received_ns INTEGER NOT NULL,
    agent_instance INTEGER,               -- the sending agent process (Hello.agent_instance)
    PRIMARY KEY (rank, seq)
) WITHOUT ROWID;

-- The event tables, one per event kind, are created by the store from proto/kinds.h
-- (aggregator/store/write.c mrd__store_event_ddl) before this file runs, so the statements
-- below are no-ops for meridiand. They stay here, as they were, for whatever reads this file
-- as the whole schema (tests, tools); test_proto_kinds checks that they match the generated
-- tables. A kind added later need not be copied here.

CREATE TABLE IF NOT EXISTS kernels (
    rank INTEGER NOT NULL, device INTEGER, stream INTEGER, context INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    correlation_id INTEGER, name_id INTEGER,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    shared_bytes INTEGER, registers INTEGER, graph_id INTEGER
);

CREATE TABLE IF NOT EXISTS memcpys (
    rank INTEGER NOT NULL, device INTEGER, stream INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, correlation_id INTEGER,
    bytes INTEGER, copy_kind INTEGER, src_kind INTEGER, dst_kind INTEGER, peer_device INTEGER
);

CREATE TABLE IF NOT EXISTS memsets (
    rank INTEGER NOT NULL, device INTEGER, stream INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, correlation_id INTEGER,
    bytes INTEGER, value INTEGER, memory_kind INTEGER
);

CREATE TABLE IF NOT EXISTS syncs (
    rank INTEGER NOT NULL, context INTEGER, stream INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, correlation_id INTEGER, type INTEGER
);

CREATE TABLE IF NOT EXISTS api_calls (
    rank INTEGER NOT NULL, thread INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, correlation_id INTEGER,
    domain INTEGER, cbid INTEGER, name_id INTEGER
);

CREATE TABLE IF NOT EXISTS graph_launches (
    rank INTEGER NOT NULL, device INTEGER, stream INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, correlation_id INTEGER, graph_id INTEGER
);

CREATE TABLE IF NOT EXISTS external_correlations (
    rank INTEGER NOT NULL, correlation_id INTEGER NOT NULL, external_id INTEGER NOT NULL,
    kind INTEGER
);

CREATE TABLE IF NOT EXISTS nvtx (
    rank INTEGER NOT NULL, thread INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    kind INTEGER,           -- 1 push/pop range, 2 start/end range, 3 mark
    domain_id INTEGER, name_id INTEGER, depth INTEGER, color INTEGER
);

CREATE TABLE IF NOT EXISTS nccl_ops (
    rank INTEGER NOT NULL, op_id INTEGER NOT NULL,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,  -- host: startEvent .. stopEvent (enqueue)
    comm_hash INTEGER NOT NULL,  -- 64-bit communicator hash, stored as signed
    comm_rank INTEGER, comm_nranks INTEGER,
    seq INTEGER,                 -- per (communicator, function) sequence number; NULL for p2p
    func_id INTEGER, count INTEGER, datatype_id INTEGER, bytes INTEGER,
    root INTEGER, peer INTEGER, algo_id INTEGER, proto_id INTEGER,
    channels INTEGER, warps INTEGER,
    launch_id INTEGER,           -- external correlation id of its kernel launch
    is_p2p INTEGER NOT NULL, device INTEGER
);

CREATE TABLE IF NOT EXISTS nccl_channels (
    rank INTEGER NOT NULL, op_id INTEGER NOT NULL, channel INTEGER NOT NULL,
    gpu_start INTEGER, gpu_end INTEGER,   -- raw GPU timer ns
    host_start_ns INTEGER                 -- local clock when NCCL reported it (late)
);

CREATE TABLE IF NOT EXISTS mpi_calls (
    rank INTEGER NOT NULL, thread INTEGER,
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    call_id INTEGER, bytes INTEGER, peer INTEGER, tag INTEGER, comm_size INTEGER
);

CREATE TABLE IF NOT EXISTS clock_samples (
    rank INTEGER NOT NULL,
    t0 INTEGER NOT NULL, t1 INTEGER NOT NULL, t2 INTEGER NOT NULL, t3 INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS gpu_clock_samples (
    rank INTEGER NOT NULL, device INTEGER NOT NULL,
    host_ns INTEGER NOT NULL, gpu_ns INTEGER NOT NULL, uncertainty_ns INTEGER
);

-- cumulative agent counters: category 'captured' (by event kind), 'dropped' (by reason),
-- 'transport' (bytes_sent, batches_sent, batches_resent); the largest value reported wins
CREATE TABLE IF NOT EXISTS agent_counters (
    rank INTEGER NOT NULL, category TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (rank, category, name)
) WITHOUT ROWID;

-- aggregator-side counters (duplicates dropped, rejected connections, ...)
CREATE TABLE IF NOT EXISTS aggregator_counters (
    name TEXT PRIMARY KEY, value INTEGER NOT NULL
) WITHOUT ROWID;

-- written by the clock fit (analysis): piecewise-linear local -> global per rank.
-- global = local + offset_ns + drift_ppm * (local - local_begin_ns) / 1e6
CREATE TABLE IF NOT EXISTS clock_models (
    rank INTEGER NOT NULL, segment INTEGER NOT NULL,
    local_begin_ns INTEGER NOT NULL, local_end_ns INTEGER NOT NULL,
    offset_ns INTEGER NOT NULL, drift_ppm REAL NOT NULL,
    error_bound_ns INTEGER NOT NULL,       -- bound on |true - mapped| within the segment
    samples INTEGER NOT NULL, method TEXT,
    PRIMARY KEY (rank, segment)
) WITHOUT ROWID;

-- written by the GPU timer calibration: raw GPU timer -> rank-local host clock per GPU
-- local = gpu_ns * slope + intercept_ns
CREATE TABLE IF NOT EXISTS gpu_timer_models (
    rank INTEGER NOT NULL, device INTEGER NOT NULL,
    slope REAL NOT NULL, intercept_ns INTEGER NOT NULL,
    error_bound_ns INTEGER NOT NULL, samples INTEGER NOT NULL, method TEXT,
    PRIMARY KEY (rank, device)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS kernels_rank_start ON kernels (rank, start_ns);
CREATE INDEX IF NOT EXISTS nccl_ops_match ON nccl_ops (comm_hash, seq, func_id);
CREATE INDEX IF NOT EXISTS extcorr_rank_ext ON external_correlations (rank, external_id);
-- a Hello's lookup of what its agent process already committed (write.c MRD__ST_MAX_SEQ_OWN)
CREATE INDEX IF NOT EXISTS batches_rank_instance ON batches (rank, agent_instance, seq);
