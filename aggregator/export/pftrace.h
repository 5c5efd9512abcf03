/* The native Perfetto trace: the run as Perfetto's protobuf TrackEvent format, gzipped.
 *
 * Where it sits: export stage, beside the Chrome JSON writer (perfetto.c); reads the same
 * tables on the same global timebase (aggregator/analyze/timebase.h) and takes the same
 * options. ui.perfetto.dev opens the file as written (it inflates gzip itself).
 *
 * Workload: every exported row once, streamed; memory is one track group's lanes, the
 * per-rank table (MRD_PFTRACE_MAX_RANKS) and the interning tables, whatever the size of
 * the database. Caller's thread; writes to a caller-owned FILE.
 */
#ifndef MRD_PFTRACE_H
#define MRD_PFTRACE_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "export.h"

#define MRD_PFTRACE_MAX_RANKS (1 << 20) /* rows of higher ranks are skipped and counted */

struct mrd_pftrace_stats {
    uint64_t rows;       /* exported rows: slices, instants, counter samples */
    uint64_t packets;    /* TracePackets written (events, descriptors, interning) */
    uint64_t raw_bytes;  /* the Trace before compression */
    uint64_t gz_bytes;   /* the file written */
    uint64_t tracks;     /* track descriptors (processes, lanes, counters) */
    uint64_t sequences;  /* packet sequences: one per track group */
    uint64_t coll_flows; /* NCCL ops on their collective's cross-rank flow */
    uint64_t link_flows; /* NCCL op -> its first kernel */
    uint64_t overlapped; /* slices shortened to nest (every lane of their group busy) */
    uint64_t skipped;    /* rows not written (rank out of range, lane stacks full) */
    uint64_t steps;      /* with by_steps: the steps the run has (as the analysis numbers them) */
    /* the span of every row read, window or not, in ns after the time origin (valid when
     * spanned): what a window that selects nothing can say about where the run lies */
    int spanned;
    int64_t first_ns, last_ns;
};

/* Writes the run as a gzip-compressed Perfetto trace (TracePackets of TrackEvents, the
 * layout is described at the top of pftrace.c) to f, with the options of the JSON export
 * (window or step range, local clocks, API calls). db must be a meridian database (read-only is fine;
 * TEMP tables of mrd_db_op_intervals are created on the connection). Returns 0 and fills
 * *st (may be NULL), -ENOMEM, -EIO (writing or compressing failed), or -MRD_ERR_SQLITE.
 * Caller's thread. */
int mrd_export_pftrace(FILE *f, sqlite3 *db, const struct mrd_perfetto_options *o,
                       struct mrd_pftrace_stats *st);

#endif
