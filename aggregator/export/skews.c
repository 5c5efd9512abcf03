/* Every timed collective instance's arrival skew, kept for the text report's percentiles.
 *
 * Where it sits: export stage; filled through mrd_analyze_options.on_instance while the
 * analysis runs, read by report_text.c. The analysis itself keeps only a log2 histogram
 * (bounded memory); a percentile read from it is a bin's upper edge, not a value. Here the
 * values are kept (8 bytes per timed instance, at most MRD_EXPORT_SKEWS_MAX of them: 128 MiB)
 * and the percentiles are nearest-rank: the p-th percentile of n sorted values is the
 * value at rank ceil(p / 100 * n). Past the cap the collector says so and the report falls
 * back to the histogram's bounds, labelled as such.
 */
#include "export.h"

#include <errno.h>
#include <stdlib.h>

#include "cmp.h"

struct mrd_export_skews {
    size_t n, cap;
    int64_t *v;
    int overflow, sorted;
};

int mrd_export_skews_new(struct mrd_export_skews **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void mrd_export_skews_free(struct mrd_export_skews *s)
{
    if (!s)
        return;
    free(s->v);
    free(s);
}

void mrd_export_skews_on_instance(const struct mrd_an_instance *in, void *ctx)
{
    struct mrd_export_skews *s = ctx;
    if (in->ntimed < 2 || s->overflow)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        int64_t *v = cap <= MRD_EXPORT_SKEWS_MAX ? realloc(s->v, cap * sizeof(*v)) : NULL;
        if (!v) { /* the cap, or out of memory: percentiles fall back to the histogram */
            s->overflow = 1;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = in->skew_ns;
    s->sorted = 0;
}

int64_t mrd_export_skews_percentile(struct mrd_export_skews *s, double p)
{
    if (!s || s->overflow || s->n == 0 || p <= 0 || p > 100)
        return -1;
    if (!s->sorted) {
        qsort(s->v, s->n, sizeof(*s->v), mrd_cmp_int64);
        s->sorted = 1;
    }
    double exact = p / 100.0 * (double)s->n;
    size_t rank = (size_t)exact;
    if ((double)rank < exact) /* ceil without libm */
        rank++;
    return s->v[(rank < 1 ? 1 : rank) - 1];
}

size_t mrd_export_skews_count(const struct mrd_export_skews *s)
{
    return s && !s->overflow ? s->n : 0;
}
