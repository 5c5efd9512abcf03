/* Shared-internal: the findings (aggregator/analyze/findings.h) in the text report, the
 * JSON report and the HTML report's data object (report_findings.c). Caller's thread. */
#ifndef MRD_REPORT_FINDINGS_H
#define MRD_REPORT_FINDINGS_H

#include <stdio.h>

#include "analyze.h"

/* The "Findings" section: fired findings by severity (high first), each with its evidence
 * and what to try, then one line of the rules not fired and one of those not evaluated. */
void mrd__report_findings(FILE *f, const struct mrd_analysis *a);

/* Writes the key "findings" and its array, followed by a comma and a newline (the JSON
 * report's members continue after it). */
void mrd__json_findings(FILE *f, const struct mrd_analysis *a);

/* Writes ",\"findings\":[...]" for the HTML page's data object: the same array, its
 * strings safe inside <script>. */
void mrd__html_findings(FILE *f, const struct mrd_analysis *a);

#endif
