/* The findings in the reports: the text report's "Findings" section, the JSON report's
 * "findings" array and the HTML page's (rendered by html/report.js).
 *
 * Where it sits: export stage; renders a->findings, which the analysis filled
 * (aggregator/analyze/findings.c, rules and thresholds in aggregator/SCHEMA.md). Size
 * O(MRD_FIND_MAX + rules).
 *
 * Order everywhere: fired findings by severity (high first), then by rule, then as found;
 * then one entry per rule that did not fire or was not evaluated, in rule order.
 */
#include "report_findings.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "findings.h"
#include "html_int.h"
#include "jsonw.h"

/* Indexes of fs->f in report order. Returns the count (0 when none fired), or -1 when the
 * analysis did not evaluate the findings (fs NULL): every output says so its own way. */
static int fired_order(const struct mrd_findings *fs, int order[MRD_FIND_MAX])
{
    int n = 0;
    if (!fs)
        return -1;
    for (int sev = MRD_FIND_HIGH; sev >= MRD_FIND_LOW; sev--)
        for (int rule = 0; rule < MRD_FIND_NRULES; rule++)
            for (int i = 0; i < fs->n; i++)
                if (fs->f[i].severity == sev && fs->f[i].rule == rule)
                    order[n++] = i;
    return n;
}

static int is_share(const char *name)
{
    return strstr(name, "share") != NULL;
}

static int is_ns(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, "_ns") == 0;
}

static void text_evidence(FILE *f, const struct mrd_finding *x)
{
    char b[32];
    fputs("      evidence:", f);
    if (x->nranks) {
        fputs(" ranks", f);
        for (int i = 0; i < x->nranks; i++)
            fprintf(f, "%s %d", i ? "," : "", x->ranks[i]);
        if (x->ranks_total > x->nranks)
            fprintf(f, " (+%d more)", x->ranks_total - x->nranks);
        fputc(';', f);
    }
    if (x->nsteps) {
        fputs(" steps", f);
        for (int i = 0; i < x->nsteps; i++)
            fprintf(f, "%s %" PRId64, i ? "," : "", x->steps[i]);
        fputc(';', f);
    }
    for (int i = 0; i < x->nnumbers; i++) {
        const struct mrd_find_number *nm = &x->numbers[i];
        if (is_share(nm->name))
            fprintf(f, " %s %.1f%%", nm->name, 100.0 * nm->value);
        else if (is_ns(nm->name))
            fprintf(f, " %.*s %s", (int)strlen(nm->name) - 3, nm->name,
                    mrd_export_fmt_ns(b, sizeof(b), (int64_t)nm->value));
        else
            fprintf(f, " %s %.0f", nm->name, nm->value);
        fputc(i + 1 < x->nnumbers ? ',' : '\n', f);
    }
    if (x->nnumbers == 0)
        fputc('\n', f);
    fprintf(f, "      %s\n", x->detail);
}

void mrd__report_findings(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_findings *fs = a->findings;
    int order[MRD_FIND_MAX], n = fired_order(fs, order);
    fputs("\n== Findings\n", f);
    if (n < 0) {
        fputs("  not evaluated\n", f);
        return;
    }
    if (n == 0)
        fputs("  none fired\n", f);
    for (int k = 0; k < n; k++) {
        const struct mrd_finding *x = &fs->f[order[k]];
        fprintf(f, "  [%s] %s: %s\n", mrd_findings_severity_name(x->severity),
                mrd_findings_rule_id(x->rule), x->title);
        text_evidence(f, x);
        fprintf(f, "      try: %s\n", mrd_findings_rule_advice(x->rule));
    }
    if (fs->dropped)
        fprintf(f, "  ... %" PRIu64 " more findings (see --json)\n", fs->dropped);
    int first = 1;
    for (int r = 0; r < MRD_FIND_NRULES; r++)
        if (fs->status[r] == MRD_FIND_NOT_FIRED) {
            fprintf(f, "%s %s", first ? "  not fired:" : ",", mrd_findings_rule_id(r));
            first = 0;
        }
    for (int r = 0, ne = 0; r < MRD_FIND_NRULES; r++)
        if (fs->status[r] == MRD_FIND_NOT_EVALUATED) {
            fprintf(f, "%s %s (%s)",
                    ne      ? ","
                    : first ? "  not evaluated:"
                            : "; not evaluated:",
                    mrd_findings_rule_id(r), fs->note[r]);
            ne = 1;
            first = 0;
        }
    if (!first)
        fputc('\n', f);
}

/* ---- JSON (the report's and the HTML page's) ------------------------------------------ */

typedef void (*str_fn)(FILE *f, const char *s);

static void json_entry_head(FILE *f, str_fn str, int rule, int status)
{
    fputs("{\"rule\":", f);
    str(f, mrd_findings_rule_id(rule));
    fputs(",\"name\":", f);
    str(f, mrd_findings_rule_name(rule));
    fputs(",\"status\":", f);
    str(f, mrd_findings_status_name(status));
}

static void json_array(FILE *f, const struct mrd_analysis *a, str_fn str)
{
    const struct mrd_findings *fs = a->findings;
    int order[MRD_FIND_MAX], n = fired_order(fs, order), first = 1;
    fputc('[', f);
    if (n < 0) {
        fputc(']', f);
        return;
    }
    for (int k = 0; k < n; k++) {
        const struct mrd_finding *x = &fs->f[order[k]];
        fputs(first ? "\n" : ",\n", f);
        first = 0;
        json_entry_head(f, str, x->rule, MRD_FIND_FIRED);
        fputs(",\"severity\":", f);
        str(f, mrd_findings_severity_name(x->severity));
        fputs(",\"title\":", f);
        str(f, x->title);
        fputs(",\"evidence\":{\"ranks\":[", f);
        for (int i = 0; i < x->nranks; i++)
            fprintf(f, "%s%d", i ? "," : "", x->ranks[i]);
        fprintf(f, "],\"ranks_total\":%d,\"steps\":[", x->ranks_total);
        for (int i = 0; i < x->nsteps; i++)
            fprintf(f, "%s%" PRId64, i ? "," : "", x->steps[i]);
        fputs("],\"numbers\":{", f);
        for (int i = 0; i < x->nnumbers; i++) {
            fputs(i ? "," : "", f);
            str(f, x->numbers[i].name);
            fprintf(f, ":%.17g", x->numbers[i].value);
        }
        fputs("},\"detail\":", f);
        str(f, x->detail);
        fputs("},\"advice\":", f);
        str(f, mrd_findings_rule_advice(x->rule));
        fputs(",\"note\":", f);
        str(f, fs->note[x->rule]);
        fputc('}', f);
    }
    for (int r = 0; r < MRD_FIND_NRULES; r++) {
        if (fs->status[r] == MRD_FIND_FIRED)
            continue;
        fputs(first ? "\n" : ",\n", f);
        first = 0;
        json_entry_head(f, str, r, fs->status[r]);
        fputs(",\"severity\":null,\"title\":null,\"evidence\":null,\"advice\":", f);
        str(f, mrd_findings_rule_advice(r));
        fputs(",\"note\":", f);
        str(f, fs->note[r]);
        fputc('}', f);
    }
    fputc(']', f);
}

void mrd__json_findings(FILE *f, const struct mrd_analysis *a)
{
    fputs("\"findings\":", f);
    json_array(f, a, mrd__json_str);
    fputs(",\n", f);
}

void mrd__html_findings(FILE *f, const struct mrd_analysis *a)
{
    fputs(",\"findings\":", f);
    json_array(f, a, mrd__html_jstr);
}
