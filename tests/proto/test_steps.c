/* proto_steps: the step-name rule and the window specification (proto/steps.h).
 *
 * Checked: the names that are steps and those that are not (the analysis and the agent
 * share the rule); every term form parses to what it says and formats back canonically;
 * every malformed specification is refused with a message naming the term; and
 * mrd_windows_holds agrees, step by step over the first 3,000 steps, with a trivial model
 * that expands each term into its set of steps, for random specifications.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "steps.h"

static void check_names(void)
{
    const char *yes[] = {"step", "step 3", "Step#4", "STEP:5", "step-6", "step[7]", "step(8)",
                         "step9", "train_step", "training step 2", "Train_Step 3",
                         "ProfilerStep#11"};
    const char *no[] = {"optimizer_step", "stepper", "steps", "forward", "", "trainer step",
                        "profilerstep#1"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        CHECK(mrd_step_name_match(yes[i], NULL) == 1);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        CHECK(mrd_step_name_match(no[i], NULL) == 0);
    CHECK(mrd_step_name_match(NULL, NULL) == 0);
    CHECK(mrd_step_name_match("iteration 4", "iteration") == 1);
    CHECK(mrd_step_name_match("step 4", "iteration") == 0);
    CHECK(mrd_step_name_match("train_step", "step") == 0); /* a prefix replaces the defaults */
    CHECK(mrd_step_name_match("step 1", "") == 1);         /* "" = the defaults */
}

static void check_parse(void)
{
    struct mrd_windows w;
    char why[256], out[256];
    CHECK_OK(mrd_windows_parse(" 5-9 , 20, 10/200@10,3/7 ", &w, why, sizeof(why)));
    CHECK_EQ(w.n, 4);
    mrd_windows_format(&w, out, sizeof(out));
    CHECK(strcmp(out, "5-9,20,10/200@10,3/7@0") == 0);
    CHECK_OK(mrd_windows_parse("none", &w, why, sizeof(why)));
    CHECK_EQ(w.n, 0);
    mrd_windows_format(&w, out, sizeof(out));
    CHECK(strcmp(out, "none") == 0);
    CHECK_OK(mrd_windows_parse(NULL, &w, why, sizeof(why)));
    CHECK_EQ(w.n, 0);
    struct {
        const char *spec, *needle;
    } bad[] = {{"10/5", "longer than the period"},
               {"abc", "does not start with a step number"},
               {"5-3", "before the first"},
               {"0/10", "at least 1"},
               {"5,,6", "term 2 is empty"},
               {"5-", "expected A-B"},
               {"3/4@", "first step after '@'"},
               {"1x", "expected A, A-B"},
               {"10000000000000", "step number"},
               {"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "more than 16 terms"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int e = mrd_windows_parse(bad[i].spec, &w, why, sizeof(why));
        CHECK_EQ(e, -EINVAL);
        CHECK_EQ(w.n, 0);
        if (!strstr(why, bad[i].needle)) {
            fprintf(stderr, "spec %s: message '%s' lacks '%s'\n", bad[i].spec, why, bad[i].needle);
            exit(1);
        }
    }
    CHECK(strcmp(mrd_window_reason_name(MRD_WINDOW_TRIGGER), "trigger") == 0);
    CHECK(strcmp(mrd_window_reason_name(MRD_WINDOW_PROFILER_API), "profiler_api") == 0);
    CHECK(strcmp(mrd_window_reason_name(99), "unknown") == 0);
}

/* Differential: random specifications against their expanded step sets. */
static void check_holds(void)
{
    enum { STEPS = 3000 };
    static unsigned char model[STEPS];
    unsigned seed = 12345;
    for (int round = 0; round < 300; round++) {
        char spec[512] = "";
        size_t used = 0;
        int nterms = 1 + (int)(rand_r(&seed) % 4);
        memset(model, 0, sizeof(model));
        for (int t = 0; t < nterms; t++) {
            int k;
            if (rand_r(&seed) % 2) {
                int a = (int)(rand_r(&seed) % 2500), b = a + (int)(rand_r(&seed) % 300);
                k = snprintf(spec + used, sizeof(spec) - used, "%s%d-%d", t ? "," : "", a, b);
                for (int s = a; s <= b && s < STEPS; s++)
                    model[s] = 1;
            } else {
                int p = 1 + (int)(rand_r(&seed) % 400), l = 1 + (int)(rand_r(&seed) % (unsigned)p);
                int st = (int)(rand_r(&seed) % 500);
                k = snprintf(spec + used, sizeof(spec) - used, "%s%d/%d@%d", t ? "," : "", l, p,
                             st);
                for (int s = st; s < STEPS; s += p)
                    for (int j = 0; j < l && s + j < STEPS; j++)
                        model[s + j] = 1;
            }
            used += (size_t)k;
        }
        struct mrd_windows w;
        char why[256];
        CHECK_OK(mrd_windows_parse(spec, &w, why, sizeof(why)));
        for (int s = 0; s < STEPS; s++)
            if (mrd_windows_holds(&w, s, NULL) != model[s]) {
                fprintf(stderr, "spec %s: step %d: holds %d, model %d\n", spec, s,
                        mrd_windows_holds(&w, s, NULL), model[s]);
                exit(1);
            }
        CHECK(mrd_windows_holds(&w, -1, NULL) == 0);
    }
}

int main(void)
{
    check_names();
    check_parse();
    check_holds();
    printf("proto_steps: ok\n");
    return 0;
}
