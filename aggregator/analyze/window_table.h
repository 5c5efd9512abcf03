/* The `windows` table: the steady tier's capture windows, derived from the agents' window
 * records by the finalize step.
 *
 * Where it sits: finalize (launcher/finalize.c), after the clock passes, because the
 * table's times are on the global timebase (timebase.h, the analysis' own map); the
 * analysis reads the table back for the reports (analyze.h, struct mrd_an_windows).
 *
 * The input: one NVTX push/pop row per window in domain "meridian.window" (written by
 * agent/capture/window.c), message "FIRST-LAST REASON a=ATTACH_US d=DETACH_US f=FLUSH_US".
 * aggregator/SCHEMA.md ("Capture windows") documents every column.
 */
#ifndef MRD_WINDOW_TABLE_H
#define MRD_WINDOW_TABLE_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#define MRD_WINDOW_DOMAIN     "meridian.window"
#define MRD_WINDOW_REASON_MAX 16 /* bytes of REASON, NUL included */

/* One window record's message, parsed. Costs are nanoseconds (the message has whole
 * microseconds); detach_ns = -1: the window was still open when the process exited. */
struct mrd_window_msg {
    int64_t first_step, last_step;
    char reason[MRD_WINDOW_REASON_MAX];
    int64_t attach_ns, detach_ns, flush_ns;
};

/* Parses `msg` in exactly the form above: FIRST <= LAST, both >= 0; REASON one word of
 * [a-z_] (at most 15 bytes: "range", "periodic", or one a newer agent adds); the three
 * costs >= 0 microseconds, except d = -1; single spaces, nothing after f. Returns 0 and
 * fills *out, or -EINVAL (NULL, malformed, a value that does not fit in nanoseconds).
 * Pure; any thread. */
int mrd_window_table_parse(const char *msg, struct mrd_window_msg *out);

/* What one derivation did. */
struct mrd_window_table_stats {
    uint64_t windows;   /* rows written */
    uint64_t open;      /* ... of which still open at exit (detach_ns NULL) */
    uint64_t malformed; /* window records skipped: unreadable message, end before start */
    int ranks;          /* distinct ranks with a row */
};

/* Replaces the `windows` table of db: one transaction drops it, creates it again and fills
 * it from nvtx (rows ordered by rank, start), so running it again gives the same table.
 * Start and end are mapped with the clock models stored at the time of the call
 * (mrd_timebase_load), kernels counted per window through the index kernels (rank,
 * start_ns). A malformed record is skipped and counted, never fatal. A database without
 * nvtx (or without any window record) gets an empty table. Logs failures to log (may be
 * NULL). Returns 0 and fills *st (may be NULL), -ENOMEM, -E2BIG (too many clock segments)
 * or -MRD_ERR_SQLITE (nothing changed). Caller's thread; db open read-write, no
 * transaction open. */
int mrd_window_table_derive(sqlite3 *db, struct mrd_window_table_stats *st, FILE *log);

#endif
