/* The report's "Environment" section: the ranks whose fingerprint (driver, libraries, GPU,
 * allowlisted variables) differs from the majority, per key, in the text report and under
 * "environment" in the JSON report. Renders a->env (aggregator/analyze/fingerprint.h);
 * prints nothing for a database without fingerprints (a capture older than them).
 *
 * Where it sits: export; caller's thread. Text output: O(keys that differ x
 * MAX_TEXT_RANKS) lines; the JSON lists every differing rank.
 */
#include "report_env.h"

#include "jsonw.h"

#define MAX_TEXT_RANKS 16 /* ranks listed per key in the text; the rest counted */
#define MAX_TEXT_VALUE 120

/* A value in quotes, control characters as '?', cut at MAX_TEXT_VALUE bytes. */
static void text_value(FILE *f, const char *v)
{
    if (!v) {
        fputs("absent", f);
        return;
    }
    fputc('"', f);
    size_t i = 0;
    for (; v[i] && i < MAX_TEXT_VALUE; i++)
        fputc((unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i], f);
    fputs(v[i] ? "...\"" : "\"", f);
}

void mrd__report_env(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_env_report *r = a->env;
    if (!r)
        return;
    fputs("\n== Environment (fingerprint per rank: versions, GPU, allowlisted variables)\n", f);
    if (r->nkeys_differ == 0) {
        fprintf(f, "  all %d ranks identical (%d keys)\n", r->nranks, r->nkeys);
        return;
    }
    fprintf(f, "  %d of %d keys differ across %d ranks; the ranks that differ from the majority:\n",
            r->nkeys_differ, r->nkeys, r->nranks);
    for (int i = 0; i < r->nkeys_differ; i++) {
        const struct mrd_env_key *k = &r->keys[i];
        fprintf(f, "  %s: majority ", k->key);
        text_value(f, k->majority);
        fprintf(f, " on %d of %d ranks\n", k->majority_ranks, r->nranks);
        for (int d = 0; d < k->ndiffs && d < MAX_TEXT_RANKS; d++) {
            fprintf(f, "    rank %d: ", k->diffs[d].rank);
            text_value(f, k->diffs[d].value);
            fputc('\n', f);
        }
        if (k->ndiffs > MAX_TEXT_RANKS)
            fprintf(f, "    ... and %d more ranks (meridian report --json lists them)\n",
                    k->ndiffs - MAX_TEXT_RANKS);
    }
}

void mrd__json_env(FILE *f, const struct mrd_analysis *a)
{
    const struct mrd_env_report *r = a->env;
    if (!r)
        return;
    fprintf(f, "\"environment\":{\"ranks\":%d,\"keys\":%d,\"identical\":%s,\"differences\":[",
            r->nranks, r->nkeys, r->nkeys_differ ? "false" : "true");
    for (int i = 0; i < r->nkeys_differ; i++) {
        const struct mrd_env_key *k = &r->keys[i];
        fputs(i ? ",\n{\"key\":" : "\n{\"key\":", f);
        mrd__json_str(f, k->key);
        fputs(",\"majority\":", f);
        if (k->majority)
            mrd__json_str(f, k->majority);
        else
            fputs("null", f);
        fprintf(f, ",\"majority_ranks\":%d,\"ranks\":[", k->majority_ranks);
        for (int d = 0; d < k->ndiffs; d++) {
            fprintf(f, "%s{\"rank\":%d,\"value\":", d ? "," : "", k->diffs[d].rank);
            if (k->diffs[d].value)
                mrd__json_str(f, k->diffs[d].value);
            else
                fputs("null", f);
            fputc('}', f);
        }
        fputs("]}", f);
    }
    fputs("]},\n", f);
}
