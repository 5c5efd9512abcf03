/* Shared-internal: the report sections on what stragglers cost and why they were late,
 * collective statistics and top kernels (report_why.c), for the text and JSON reports.
 * Each renders a->why (aggregator/analyze/why.c); a NULL a->why prints a line saying
 * the run had no collectives. Caller's thread. */
#ifndef MRD_REPORT_WHY_H
#define MRD_REPORT_WHY_H

#include <stdio.h>

#include "analyze.h"

void mrd__report_why_cost(FILE *f, const struct mrd_analysis *a);
void mrd__report_why_causes(FILE *f, const struct mrd_analysis *a);
void mrd__report_why_collectives(FILE *f, const struct mrd_analysis *a);
void mrd__report_why_kernels(FILE *f, const struct mrd_analysis *a);

/* Writes the key "why" and its object, followed by a comma and a newline (the JSON
 * report's members continue after it). */
void mrd__json_why(FILE *f, const struct mrd_analysis *a);

#endif
