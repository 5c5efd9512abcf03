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

-- The event tables, one per event kind (kernels, memcpys, ..., gpu_clock_samples and the
-- kinds added since), are not in this file: the store creates them from their one
-- description, proto/kinds.h (aggregator/store/write.c mrd__store_event_ddl), before this
-- file runs, and the indexes below name some of them. The whole schema as SQL, event tables
-- included, is what mrd_store_schema_sql() returns; the build writes it to
-- BUILD/aggregator/store/schema-full.sql (`mrd-schema-dump`) for tests and tools;
-- aggregator/SCHEMA.md documents every column.

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
