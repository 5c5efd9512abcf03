/* Helpers shared by the clock module's files (fit.c, model.c, gpu.c, causality.c).
 * Not part of the public interface (clock.h). */
#ifndef MRD_CLOCK_INTERNAL_H
#define MRD_CLOCK_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <sqlite3.h>

#include "clock.h"
#include "db.h"

/* Logs "clock: <what>: <sqlite message>" to log (may be NULL) and returns -MRD_ERR_SQLITE. */
int mrd__clock_sqlerr(sqlite3 *db, FILE *log, const char *what);

/* Runs SQL text without results (several statements allowed). 0 or -MRD_ERR_SQLITE. */
int mrd__clock_exec(sqlite3 *db, FILE *log, const char *sql);

/* Creates the clock module's own tables and indexes (CREATE ... IF NOT EXISTS). */
int mrd__clock_ensure_tables(sqlite3 *db, FILE *log);

/* Solves the symmetric positive definite p x p system A x = b in place (b becomes x) by
 * Cholesky; A is overwritten by its factor. When inv_diag is not NULL it receives the
 * diagonal of A^-1. Returns 0 or -EDOM (not positive definite). */
int mrd__clock_spd_solve(double *A, double *b, int p, double *inv_diag);

/* One rank's probes on their way into the fit (fit.c), fed in non-decreasing t0 order.
 * Holds at most MRD__CLOCK_PROBE_CAP probes; at the cap every second one is dropped and
 * from then on only every 2^k-th arriving probe is taken (uniform thinning, counted). */
#define MRD__CLOCK_PROBE_CAP (1u << 20)
struct mrd__clock_probes;
struct mrd__clock_probe_stats {
    uint64_t valid, invalid, thinned, kept, windows;
    int64_t fastest_rtt;
};
int mrd__clock_probes_create(const struct mrd_clock_fit_options *o, struct mrd__clock_probes **out);
int mrd__clock_probes_add(struct mrd__clock_probes *p, const struct mrd_clock_sample *x);
/* Fits what was added; the set stays valid (stats readable) until destroyed. */
int mrd__clock_probes_fit(struct mrd__clock_probes *p, struct mrd_clock_model **out);
void mrd__clock_probes_stats(const struct mrd__clock_probes *p, struct mrd__clock_probe_stats *st);
void mrd__clock_probes_destroy(struct mrd__clock_probes *p);

/* mrd_clock_anchor_pair with its clock reads supplied (anchor.c; tests script them):
 * MRD_ANCHOR_TRIES brackets of read(MONOTONIC), read(REALTIME), read(MONOTONIC). */
#define MRD_ANCHOR_TRIES 5
int64_t mrd__clock_anchor_pair_read(int64_t (*read)(clockid_t, void *), void *arg,
                                    int64_t *monotonic_ns, int64_t *realtime_ns);

#endif
