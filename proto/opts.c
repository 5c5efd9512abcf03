/* The table-driven option parser (opts.h): builds getopt_long's long-option
 * array and short-option string from the command's table, then hands each option found to
 * its entry's apply function.
 *
 * Workload: once per command, a few dozen options at most. Main thread only.
 */
#include "opts.h"

#include <errno.h>
#include <stdlib.h>

int mrd_opt_text(const struct mrd_opt *opt, const char *arg, const char *who)
{
    (void)who;
    *(const char **)opt->dest = arg;
    return 0;
}

int mrd_opt_set(const struct mrd_opt *opt, const char *arg, const char *who)
{
    (void)arg;
    (void)who;
    *(int *)opt->dest = opt->value;
    return 0;
}

int mrd_opt_count(const struct mrd_opt *opt, const char *arg, const char *who)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < 0 || v > 1000000) {
        fprintf(stderr, "%s: --%s takes a whole number from 0 to 1000000, not '%s'\n", who,
                opt->name, arg);
        return -EINVAL;
    }
    *(int *)opt->dest = (int)v;
    return 0;
}

/* getopt_long's return value for table entry i's long name (above every letter). */
#define LONG_CODE(i) (256 + (i))

/* The short-option string: '+' when stopping at the first operand, each entry's letter
 * with ':' or '::' by its argument, and 'h'. */
static void short_options(char *s, const struct mrd_opt *opts, int n, int flags)
{
    if (flags & MRD_OPTS_STOP_AT_OPERAND)
        *s++ = '+';
    for (int i = 0; i < n; i++) {
        if (!opts[i].letter)
            continue;
        *s++ = (char)opts[i].letter;
        if (opts[i].arg != no_argument)
            *s++ = ':';
        if (opts[i].arg == optional_argument)
            *s++ = ':';
    }
    *s++ = 'h';
    *s = '\0';
}

int mrd_opts_parse(int argc, char **argv, const struct mrd_opt *opts, int n, int flags,
                   const char *who, void (*usage)(FILE *))
{
    struct option lo[MRD_OPTS_MAX + 2];
    char so[2 + 3 * MRD_OPTS_MAX + 2];
    int c;
    if (n < 0 || n > MRD_OPTS_MAX) {
        fprintf(stderr, "%s: %d options, more than the parser's %d\n", who, n, MRD_OPTS_MAX);
        return -EINVAL;
    }
    for (int i = 0; i < n; i++)
        lo[i] = (struct option){opts[i].name, opts[i].arg, NULL, LONG_CODE(i)};
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    short_options(so, opts, n, flags);
    optind = 0; /* 0, not 1: glibc then also re-reads the ordering ('+') of this optstring */
    while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
        const struct mrd_opt *o = NULL;
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c >= LONG_CODE(0) && c < LONG_CODE(n))
            o = &opts[c - LONG_CODE(0)];
        for (int i = 0; !o && c != '?' && c != ':' && i < n; i++)
            if (opts[i].letter == c)
                o = &opts[i];
        if (!o) { /* getopt said why */
            if (flags & MRD_OPTS_USAGE_ON_ERROR)
                usage(stderr);
            if (flags & MRD_OPTS_HINT_ON_ERROR)
                fprintf(stderr, "%s: see --help\n", who);
            return -EINVAL;
        }
        int applied = o->apply(o, optarg, who);
        if (applied < 0)
            return -EINVAL;
        if (o->given)
            *o->given = 1;
        if (applied == MRD_OPT_DONE)
            return 0;
    }
    return optind;
}
