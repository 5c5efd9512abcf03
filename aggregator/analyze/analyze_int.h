/* Shared-internal declarations of the analyze library (analyze.c, overlap.c, match.c,
 * ranking.c, window_table.c).
 * Not for other modules: use analyze.h. */
#ifndef MRD_ANALYZE_INT_H
#define MRD_ANALYZE_INT_H

#include "analyze.h"

/* Sweeps every rank's kernels and fills ranks[].ov; hands each kernel to w's top-kernel
 * tally on the way (why_int.h). Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
struct mrd__why;
int mrd__analyze_overlap(sqlite3 *db, struct mrd_analysis *a, struct mrd__why *w);

/* Matches collectives across ranks, fills the collective, straggler and step fields.
 * Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__analyze_match(sqlite3 *db, const struct mrd_timebase *tb,
                       const struct mrd_analyze_options *o, struct mrd_analysis *a);

/* Reads the windows table (window_table.c) into a->windows; a database without it gets
 * none (and a warning when it has window records). Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__analyze_windows(sqlite3 *db, struct mrd_analysis *a);

/* Appends a warning (dropped silently beyond MRD_AN_MAX_WARNINGS; the last slot then
 * says so). */
void mrd__analyze_warn(struct mrd_analysis *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The entry of `rank` in a->ranks, NULL when the rank is unknown. */
struct mrd_an_rank *mrd__analyze_rank(struct mrd_analysis *a, int rank);

/* Records SQLite's current message for mrd_analyze's err_msg; returns -MRD_ERR_SQLITE. */
int mrd__analyze_sqlerr(sqlite3 *db);

/* why.c: the collector of the matched instances (opaque). mrd__why_begin copies o into
 * *wrapped with on_instance set to the collector, which calls o's own callback first.
 * Returns 0 or -ENOMEM. */
struct mrd__why;
int mrd__why_begin(const struct mrd_analyze_options *o, struct mrd_analyze_options *wrapped,
                   struct mrd__why **out);
/* After the matching: fills a->why (straggler cost and cause, collective statistics, top
 * kernels). Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_finish(sqlite3 *db, const struct mrd_timebase *tb,
                    const struct mrd_analyze_options *o, struct mrd__why *w,
                    struct mrd_analysis *a);
/* Accept NULL. */
void mrd__why_destroy(struct mrd__why *w);
void mrd__why_free(struct mrd_an_why *y);

#endif
