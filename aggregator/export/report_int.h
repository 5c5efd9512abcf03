/* Shared-internal helpers of the report renderers (text, HTML, JSON). */
#ifndef MRD_REPORT_INT_H
#define MRD_REPORT_INT_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "analyze.h"

/* "YYYY-mm-dd HH:MM:SS UTC" of a CLOCK_REALTIME ns value, "unknown" for <= 0. */
void mrd__report_time(char *buf, size_t n, int64_t realtime_ns);

/* Upper edge (ns) of the skew-histogram bin that holds quantile q, capped at the largest
 * skew; -1 without data. */
int64_t mrd__report_quantile(const struct mrd_analysis *a, double q);

/* The sentence saying what the straggler ranking left out ("not ranked: N instance(s)
 * outside the steps ... cost X, the most of it caused by rank R"), into buf; "" when
 * nothing was left out (no step scope, or every timed instance within the steps). */
void mrd__report_outside_steps(const struct mrd_analysis *a, char *buf, size_t n);

#endif
