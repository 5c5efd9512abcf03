/* Shared-internal: the report's "Environment" section (report_env.c), for the text and
 * JSON reports. Both render a->env (aggregator/analyze/fingerprint.h) and write nothing
 * when it is NULL (no fingerprint stored). Caller's thread. */
#ifndef MRD_REPORT_ENV_H
#define MRD_REPORT_ENV_H

#include <stdio.h>

#include "analyze.h"

/* The text section: "all N ranks identical (K keys)", or per differing key its majority
 * value and count and the ranks that differ (at most 16 listed per key). */
void mrd__report_env(FILE *f, const struct mrd_analysis *a);

/* Writes the key "environment" and its object, followed by a comma and a newline (the
 * JSON report's members continue after it). */
void mrd__json_env(FILE *f, const struct mrd_analysis *a);

#endif
