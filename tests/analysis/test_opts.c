/* analysis_opts: the table-driven option parser of meridian and meridiand (proto/opts.c) against
 * hand-written expectations: each kind of entry stores what its option says, short letters
 * and long names reach the same entry, `given` marks an applied option, the first operand's index
 * comes back (and parsing stops there when asked), --help and -h print the usage, and unknown
 * options, missing arguments and values an apply function refuses are errors. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "opts.h"

static int usage_calls;
static FILE *usage_to;

static void usage(FILE *f)
{
    usage_calls++;
    usage_to = f;
}

/* Refuses "bad", stores anything else; counts its calls in opt->value's place. */
static int calls;
static int apply_checked(const struct mrd_opt *opt, const char *arg, const char *who)
{
    (void)who;
    calls++;
    if (strcmp(arg, "bad") == 0)
        return -EINVAL;
    *(const char **)opt->dest = arg;
    return 0;
}

struct parsed {
    const char *out, *name, *checked;
    int flag, level, count, checked_given;
};

static int parse(struct parsed *p, int flags, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    memset(p, 0, sizeof(*p));
    p->level = -1;
    p->count = -1;
    const struct mrd_opt opts[] = {
        {.name = "output",
         .letter = 'o',
         .arg = required_argument,
         .apply = mrd_opt_text,
         .dest = mrd_opt_text_dest(&p->out)},
        MRD_OPT_TEXT("name", &p->name),
        MRD_OPT_SET("flag", &p->flag, 7),
        MRD_OPT_SET("high", &p->level, 2),
        MRD_OPT_SET("low", &p->level, 1),
        MRD_OPT_COUNT("count", &p->count),
        {.name = "checked",
         .arg = required_argument,
         .apply = apply_checked,
         .dest = mrd_opt_text_dest(&p->checked),
         .given = &p->checked_given},
    };
    return mrd_opts_parse(argc, argv, opts, MRD_OPTS_N(opts), flags, "analysis_opts", usage);
}

static void test_stores(void)
{
    struct parsed p;
    char *argv[] = {"cmd",     "-o",      "O",         "--name=N", "--flag", "--high", "--low",
                    "--count", "1000000", "--checked", "ok",       "DB",     NULL};
    CHECK_EQ(parse(&p, 0, argv), 11);
    CHECK_STREQ(p.out, "O");
    CHECK_STREQ(p.name, "N");
    CHECK_STREQ(p.checked, "ok");
    CHECK_EQ(p.checked_given, 1);
    CHECK_EQ(p.flag, 7);
    CHECK_EQ(p.level, 1); /* the last of two options on one destination wins */
    CHECK_EQ(p.count, 1000000);

    char *longo[] = {"cmd", "--output", "L", NULL};
    CHECK_EQ(parse(&p, 0, longo), 3); /* no operand: argc */
    CHECK_STREQ(p.out, "L");
}

static void test_operands(void)
{
    struct parsed p;
    /* without the flag getopt moves options after an operand to the front */
    char *mixed[] = {"cmd", "A", "--flag", NULL};
    CHECK_EQ(parse(&p, 0, mixed), 2);
    CHECK_EQ(p.flag, 7);
    CHECK_STREQ(mixed[2], "A");
    /* with it, everything from the first operand on is the command's */
    char *job[] = {"cmd", "--name", "x", "job", "--flag", NULL};
    CHECK_EQ(parse(&p, MRD_OPTS_STOP_AT_OPERAND, job), 3);
    CHECK_EQ(p.flag, 0);
    CHECK_STREQ(job[4], "--flag");
}

static void test_help_and_errors(void)
{
    struct parsed p;
    char *help[] = {"cmd", "--flag", "--help", "--name", "x", NULL};
    char *h[] = {"cmd", "-h", NULL};
    usage_calls = 0;
    CHECK_EQ(parse(&p, 0, help), 0);
    CHECK_EQ(usage_calls, 1);
    CHECK(usage_to == stdout);
    CHECK(p.name == NULL); /* parsing stopped at --help */
    CHECK_EQ(parse(&p, 0, h), 0);
    CHECK_EQ(usage_calls, 2);

    char *unknown[] = {"cmd", "--nope", NULL};
    char *missing[] = {"cmd", "--name", NULL};
    char *count[] = {"cmd", "--count", "12x", NULL};
    char *big[] = {"cmd", "--count", "1000001", NULL};
    char *refused[] = {"cmd", "--checked", "bad", "--flag", NULL};
    usage_calls = 0;
    CHECK_EQ(parse(&p, 0, unknown), -EINVAL);
    CHECK_EQ(parse(&p, 0, missing), -EINVAL);
    CHECK_EQ(usage_calls, 0);
    CHECK_EQ(parse(&p, MRD_OPTS_USAGE_ON_ERROR, unknown), -EINVAL);
    CHECK_EQ(usage_calls, 1);
    CHECK(usage_to == stderr);
    CHECK_EQ(parse(&p, 0, count), -EINVAL);
    CHECK_EQ(parse(&p, 0, big), -EINVAL);
    calls = 0;
    CHECK_EQ(parse(&p, MRD_OPTS_USAGE_ON_ERROR, refused), -EINVAL);
    CHECK_EQ(calls, 1);
    CHECK_EQ(p.checked_given, 0); /* a refused value is not given */
    CHECK_EQ(p.flag, 0);          /* nothing after the refused value is applied */
    CHECK_EQ(usage_calls, 1);     /* the apply function said why: no usage */
}

int main(void)
{
    test_stores();
    test_operands();
    test_help_and_errors();
    printf("analysis_opts: ok\n");
    return 0;
}
