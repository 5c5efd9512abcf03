/* meridian event kinds: the C side of the one table every per-kind piece of code comes from.
 *
 * The table is proto/kinds.table: a row per kind and a row per field (its SQL column and
 * class, wire number, type and name, codec, canonical position and separator; the format
 * is described at its top). At build time proto/kinds_gen.c (the host tool mrd_kinds_gen)
 * turns it into kinds_table.h in the build folder, included below, with
 *   MRD_KINDS(X): X(ENUM, value, fn, struct type, union member / stable name, Batch member,
 *                   Columns message type, its descriptor, SQL table, canonical text tag)
 *   MRD__F_<fn>(F, K): F(K, member, "SQL column", SQL class, wire number, wire name, codec,
 *                   arg, canonical position, 'separator'), in the SQL table's column order
 *                   (column 1 is always rank; K is the kind's fn, passed through)
 * and into the per-kind parts of the wire contract: meridian.proto's `// @kinds` markers
 * become the Columns messages, the EventKind values and the Batch's column fields in the
 * build folder's meridian.proto, the one protoc-c compiles.
 *
 * From those macros come: the kind enum and union mrd_any_event (events.h), the batch
 * builder's mrd_batch_add_<fn> and the reader's column layout and mrd_batch_next_<fn>
 * (proto/batch*.c), the store's CREATE TABLE, INSERT text and binds
 * (aggregator/store/write.c), the merge's table and string-column classification
 * (launcher/merge_check.c), the canonical hash and text (launcher/replay/canon.c) and the
 * verifier's row reader (tests/integration/verify.c). test_proto_kinds checks every field
 * against the protobuf-c descriptors (name, number, wire type) and every SQL column against
 * the database the store creates.
 *
 * Adding a field: a row in kinds.table, the member in the kind's struct (events.h for the
 * kinds up to gpu_clock_sample, below for later ones) and the capture code that fills it.
 * A new SQL column of an existing table needs a store migration (store.c) for databases
 * that already hold the table.
 * Adding a kind: a kind row and its field rows in kinds.table, its struct, and the capture
 * code that produces it. Its table appears in every database the store opens (CREATE TABLE
 * IF NOT EXISTS, like any new table within a schema version).
 */
#ifndef MRD_KINDS_H
#define MRD_KINDS_H

#include <stdint.h>

#include "kinds_table.h" /* generated from kinds.table: MRD_KINDS, MRD__F_<fn> */

/* gpu_sample: NVML readings of each GPU the rank uses, ~10 per second (capture: the NVML
 * sampler of agent/capture/cupti.c; none where NVML cannot be loaded). */
struct mrd_gpu_sample {
    int64_t host_ns;           /* local clock when read */
    uint64_t throttle_reasons; /* nvmlDeviceGetCurrentClocksThrottleReasons bitmask */
    uint32_t device;           /* CUDA device ordinal */
    uint32_t sm_clock_mhz, mem_clock_mhz;
    uint32_t power_mw, temperature_c, utilization_pct;
};

/* window: one full-detail capture window of the steady tier, written by the agent when the
 * window ends (capture: agent/capture/window.c, its detach or the exit path). start/end:
 * local clock, the attach's start to the detach's end (or the exit); steps inclusive;
 * reason: a string id ("range", "periodic", "on_demand", ...: proto/steps.h's names, so an
 * older aggregator keeps a newer agent's reason); CUPTI's costs in ns, detach_ns -1 when
 * the window was still open at exit. The finalize step derives the `windows` table from
 * these rows (aggregator/analyze/window_table.h). */
struct mrd_window_record {
    int64_t start, end;
    int64_t first_step, last_step;
    int64_t attach_ns, detach_ns, flush_ns;
    uint32_t reason;
};

/* env: one (key, value) pair of the rank's environment fingerprint, written once per process
 * (capture: agent/capture/env.c): library versions as loaded, the GPU's model, UUID, memory
 * and maximum clocks, the host name and allowlisted environment variables; the key list is
 * in aggregator/SCHEMA.md. Both are string ids; an empty value is id 0. The report compares
 * the ranks (aggregator/analyze/fingerprint.h). */
struct mrd_env_record {
    uint32_t key, value;
};

/* Helpers for consumers: the field list of kind fn, and per-field dispatch on the codec or
 * SQL class by token pasting (MRD__CODEC_IS_STR(codec) is 1 for STR, else 0). */
#define MRD__FIELDS(fn, F) MRD__F_##fn(F, fn)
#define MRD__IS_STR_STR 1
#define MRD__IS_STR_PLAIN 0
#define MRD__IS_STR_DELTA 0
#define MRD__IS_STR_DUR 0
#define MRD__CODEC_IS_STR(codec) MRD__IS_STR_##codec
#define MRD__SQL_DECL_INT "INTEGER"
#define MRD__SQL_DECL_NN "INTEGER NOT NULL"
#define MRD__SQL_DECL_GNN "INTEGER NOT NULL"
#define MRD__SQL_DECL_P2PNULL "INTEGER"
#define MRD__SQL_DECL(cls) MRD__SQL_DECL_##cls

#endif
