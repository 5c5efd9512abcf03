/* Progress on stderr for the `meridian` commands that can work for long (report, diff,
 * export, finalize, merge, and profile's own merge, finalize and report): one rule for all
 * of them. Each command picks its unit and says it in --help (README, "Progress", has the
 * table); library code reports through callbacks and never includes this header.
 *
 * Rule: nothing during the first two seconds (MRD_PROGRESS_AFTER_MS); after that, a line
 * at most once a second: "<who>: <what> <done>/<total> <unit> (P%), R/s, about T s left",
 * and one last line with the total when the work ends (only if a line was printed). Shown
 * when stderr is a terminal (each line overwrites the last, "\r") or with --progress (one
 * line each, for logs and tests); never with --quiet. The environment variable
 * MERIDIAN_PROGRESS_AFTER_MS replaces the two seconds (and the one-second interval when
 * smaller): for tests only, so that a small database shows progress.
 * Main thread only; no allocation.
 */
#ifndef MRD_PROGRESS_H
#define MRD_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#define MRD_PROGRESS_AFTER_MS 2000

enum mrd_progress_mode {
    MRD_PROGRESS_AUTO = 0, /* when stderr is a terminal */
    MRD_PROGRESS_ON,       /* --progress */
    MRD_PROGRESS_OFF       /* --quiet */
};

/* The table entries (proto/opts.h) of --progress and --quiet, which every long-running
 * command takes. */
#define MRD_OPT_PROGRESS(dest)                                                                     \
    MRD_OPT_SET("progress", dest, MRD_PROGRESS_ON), MRD_OPT_SET("quiet", dest, MRD_PROGRESS_OFF)

struct mrd_progress {
    int on, tty, printed;
    const char *who, *what, *unit;
    uint64_t total, done;
    int64_t t0_ms, last_ms, after_ms, every_ms;
};

/* Starts counting `total` units of work (0: unknown; no percentage nor time left). who,
 * what and unit must outlive p. */
void mrd_progress_begin(struct mrd_progress *p, int mode, const char *who, const char *what,
                        const char *unit, uint64_t total);

/* Sets the total when it is known only after begin (counted by the work itself). */
void mrd_progress_set_total(struct mrd_progress *p, uint64_t total);

/* Records that `done` units are done; prints a line when the rule says so. */
void mrd_progress_set(struct mrd_progress *p, uint64_t done);

/* The work ended: the last line (done/total), if a line was printed at all. */
void mrd_progress_end(struct mrd_progress *p);

#endif
