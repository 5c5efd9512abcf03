/* Shared-internal declarations of the analyze library (analyze.c, overlap.c, match.c,
 * ranking.c, window_table.c).
 * Not for other modules: use analyze.h. */
#ifndef MRD_ANALYZE_INT_H
#define MRD_ANALYZE_INT_H

#include "analyze.h"

/* Sweeps every rank's kernels and fills ranks[].ov; hands each kernel to w's top-kernel
 * tally and to the why pass's tasks on the way (why_int.h), so it runs after
 * mrd__why_prepare. Its warnings go in at a->warnings[warn_at] on (where they stood when
 * the sweep ran before the matching). Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
struct mrd__why;
int mrd__analyze_overlap(sqlite3 *db, struct mrd_analysis *a, struct mrd__why *w, int warn_at);

/* Matches collectives across ranks, fills the collective, straggler and step fields.
 * Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__analyze_match(sqlite3 *db, const struct mrd_timebase *tb,
                       const struct mrd_analyze_options *o, struct mrd_analysis *a);

/* One rank's NVTX step ranges (match.c's rule: the step name of the options, a range
 * nested in or overlapping the previous one is not a new step), rank-local clock. */
struct mrd__step_ranges {
    int n;                         /* the first n ranges, at most MRD_AN_MAX_STEPS */
    int64_t *start, *end;          /* ascending, non-overlapping */
    int total;                     /* ranges seen, also past MRD_AN_MAX_STEPS: */
    int64_t first_start, last_end; /* ... the span from the first to the last */
};

/* Fills per_rank[a->nranks] (zeroed by the caller) from the nvtx table; none without it.
 * Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__analyze_step_ranges(sqlite3 *db, const struct mrd_analyze_options *o,
                             struct mrd_analysis *a, struct mrd__step_ranges *per_rank);
/* Frees the lists and the array; accepts NULL. */
void mrd__step_ranges_free(struct mrd__step_ranges *per_rank, int nranks);

/* Reads the windows table (window_table.c) into a->windows; a database without it gets
 * none (and a warning when it has window records). Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__analyze_windows(sqlite3 *db, struct mrd_analysis *a);

/* Appends a warning (dropped silently beyond MRD_AN_MAX_WARNINGS; the last slot then
 * says so). */
void mrd__analyze_warn(struct mrd_analysis *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Inserts a warning at a->warnings[pos] (pos <= nwarnings), with the cap of
 * mrd__analyze_warn applied as if it had been appended in that order. */
void mrd__analyze_warn_at(struct mrd_analysis *a, int pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The entry of `rank` in a->ranks, NULL when the rank is unknown. */
struct mrd_an_rank *mrd__analyze_rank(struct mrd_analysis *a, int rank);

/* Records SQLite's current message for mrd_analyze's err_msg; returns -MRD_ERR_SQLITE. */
int mrd__analyze_sqlerr(sqlite3 *db);

/* mrd_db_each_row (db.h) for the analysis' readers: an absent `table` reads no row, and a
 * statement that fails records SQLite's message for err_msg. Returns 0, row's negative
 * code or -MRD_ERR_SQLITE. */
int mrd__analyze_rows(sqlite3 *db, const char *table, const char *sql,
                      int (*row)(sqlite3_stmt *st, void *ctx), void *ctx);

/* why.c: the collector of the matched instances (opaque). mrd__why_begin copies o into
 * *wrapped with on_instance set to the collector, which calls o's own callback first.
 * Returns 0 or -ENOMEM. */
struct mrd__why;
int mrd__why_begin(const struct mrd_analyze_options *o, struct mrd_analyze_options *wrapped,
                   struct mrd__why **out);
/* After the matching: allocates a->why, computes the step costs and finds the late events,
 * and plans the work the overlap sweep does for it (their gaps, the shares per step).
 * tb must outlive the sweep. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_prepare(sqlite3 *db, const struct mrd_timebase *tb,
                     const struct mrd_analyze_options *o, struct mrd__why *w,
                     struct mrd_analysis *a);
/* After the sweep: the late events' causes, collective statistics, top kernels into
 * a->why. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_finish(sqlite3 *db, struct mrd__why *w, struct mrd_analysis *a);
/* Accept NULL. */
void mrd__why_destroy(struct mrd__why *w);
void mrd__why_free(struct mrd_an_why *y);

#endif
