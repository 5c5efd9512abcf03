/* The straggler ranking (analyze.h, "straggler ranking"): ranks ordered by the wait they
 * caused, then by how often they arrived last, then by rank, over the instances the
 * ranking counts (within the steps when a->ranked_in_steps). The renderers in
 * aggregator/export only print this order.
 *
 * Workload: one sort of a->nranks entries (up to the analysis' rank cap) per call.
 */
#include "analyze_int.h"

#include <stdlib.h>

#include "cmp.h"

struct mrd_an_wait mrd_analyze_ranked_wait(const struct mrd_analysis *a,
                                           const struct mrd_an_rank *r)
{
    if (a->ranked_in_steps)
        return r->in_steps;
    return (struct mrd_an_wait){.instances = r->instances,
                                .times_last = r->times_last,
                                .caused_ns = r->wait_caused_ns,
                                .suffered_ns = r->wait_suffered_ns};
}

struct ranked {
    const struct mrd_an_rank *r;
    struct mrd_an_wait w;
};

static int cmp_straggler(const void *x, const void *y)
{
    const struct ranked *a = x, *b = y;
    return MRD_CMP_KEYS(MRD_CMP(b->w.caused_ns, a->w.caused_ns),
                        MRD_CMP(b->w.times_last, a->w.times_last), MRD_CMP(a->r->rank, b->r->rank));
}

const struct mrd_an_rank **mrd_analyze_ranking(const struct mrd_analysis *a)
{
    size_t n = (size_t)(a->nranks ? a->nranks : 1);
    const struct mrd_an_rank **v = malloc(n * sizeof(*v));
    struct ranked *t = malloc(n * sizeof(*t));
    if (!v || !t) {
        free(v);
        free(t);
        return NULL;
    }
    for (int i = 0; i < a->nranks; i++)
        t[i] = (struct ranked){&a->ranks[i], mrd_analyze_ranked_wait(a, &a->ranks[i])};
    qsort(t, (size_t)a->nranks, sizeof(*t), cmp_straggler);
    for (int i = 0; i < a->nranks; i++)
        v[i] = t[i].r;
    free(t);
    return v;
}
