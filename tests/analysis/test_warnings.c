/* analysis_warnings: mrd__analyze_warn_at (the overlap sweep's warnings, inserted where
 * they stood when the sweep ran before the matching) against a trivial model: the list the
 * messages would make appended in their final order, cut at the cap as mrd__analyze_warn
 * cuts it (MRD_AN_MAX_WARNINGS - 1 messages, then "more warnings were left out"). Random
 * sizes around the cap: messages before the insertion point, messages after it, and the
 * inserted ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_int.h"
#include "check.h"

#define MAXW    MRD_AN_MAX_WARNINGS
#define NOTE    "more warnings were left out"
#define LONGEST (3 * MAXW)

/* The model: messages in their final order, then the cap. */
static int model(char (*out)[256], int before, int inserted, int after)
{
    int n = 0, total = before + inserted + after;
    for (int i = 0; i < total; i++) {
        if (n == MAXW - 1) {
            snprintf(out[n++], 256, "%s", NOTE);
            break;
        }
        if (i < before)
            snprintf(out[n++], 256, "before %d", i);
        else if (i < before + inserted)
            snprintf(out[n++], 256, "sweep %d", i - before);
        else
            snprintf(out[n++], 256, "after %d", i - before - inserted);
    }
    return n;
}

static void one(int before, int inserted, int after)
{
    static struct mrd_analysis a;
    static char want[MAXW][256];
    memset(&a, 0, sizeof(a));
    for (int i = 0; i < before; i++)
        mrd__analyze_warn(&a, "before %d", i);
    int at = a.nwarnings; /* where the sweep's warnings go */
    for (int i = 0; i < after; i++)
        mrd__analyze_warn(&a, "after %d", i);
    for (int i = 0; i < inserted; i++)
        mrd__analyze_warn_at(&a, at++, "sweep %d", i);
    int n = model(want, before, inserted, after);
    if (a.nwarnings != n)
        fprintf(stderr, "before %d inserted %d after %d\n", before, inserted, after);
    CHECK_EQ(a.nwarnings, n);
    for (int i = 0; i < n; i++)
        CHECK_STREQ(a.warnings[i], want[i]);
}

int main(void)
{
    /* every combination near the cap, then random larger ones */
    for (int b = 0; b <= MAXW + 1; b++)
        for (int k = 0; k <= MAXW + 1; k++)
            for (int f = 0; f <= MAXW + 1; f++)
                one(b, k, f);
    srand(11);
    for (int t = 0; t < 2000; t++)
        one(rand() % LONGEST, rand() % LONGEST, rand() % LONGEST);
    printf("analysis_warnings: ok\n");
    return 0;
}
