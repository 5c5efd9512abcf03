/* meridian's one option parser: each command describes its options as a table (name,
 * argument, what to do with it, where it goes) and mrd_opts_parse runs getopt_long over it,
 * so that no command writes its own switch over option codes.
 *
 * Rules: every table accepts -h and --help (usage to stdout); an option's apply function
 * checks its argument and stores it, printing "<who>: <what is wrong>" to stderr itself
 * when the value is bad; getopt reports unknown options and missing arguments.
 * Where it sits: proto/, beside the other code that both sides share, because its users are
 * on both sides: the `meridian` subcommands and `meridian-replay` (launcher/) and meridiand
 * (aggregator/daemon/). Depends on libc alone. Main thread only: getopt's state is global.
 */
#ifndef MRD_OPTS_H
#define MRD_OPTS_H

#include <getopt.h>
#include <stdio.h>

struct mrd_opt;

/* Applies one option: arg is its argument (NULL when it takes none, or an optional one is
 * absent). Returns 0, -EINVAL after printing why the value is refused (prefix who), or
 * MRD_OPT_DONE when the option did all the command is asked to do (--version printed):
 * parsing stops there as after --help. */
typedef int (*mrd_opt_apply_fn)(const struct mrd_opt *opt, const char *arg, const char *who);

enum { MRD_OPT_DONE = 1 };

/* One option. Tables name the fields (designated initializers); those left out are 0. */
struct mrd_opt {
    const char *name;       /* the long name, without "--" */
    int letter;             /* the short option's letter, 0 when none */
    int arg;                /* no_argument, required_argument or optional_argument */
    mrd_opt_apply_fn apply; /* mrd_opt_text, mrd_opt_set, mrd_opt_count or the command's own */
    void *dest;             /* where apply stores the value */
    int value;              /* mrd_opt_set's value; the command's own functions may use it */
    long long min, max;     /* bounds, for the command's own numeric apply functions */
    int *given;             /* when not NULL: set to 1 once the option was applied */
};

/* *(const char **)dest = arg (the argument stays in argv). */
int mrd_opt_text(const struct mrd_opt *opt, const char *arg, const char *who);
/* *(int *)dest = opt->value. */
int mrd_opt_set(const struct mrd_opt *opt, const char *arg, const char *who);
/* *(int *)dest = arg, a whole number from 0 to 1000000 (seconds, counts). */
int mrd_opt_count(const struct mrd_opt *opt, const char *arg, const char *who);

/* Typed destinations, so that a table entry's dest has the type its apply writes. */
static inline void *mrd_opt_text_dest(const char **dest)
{
    return (void *)dest;
}
static inline void *mrd_opt_int_dest(int *dest)
{
    return dest;
}

/* Table entries for the common cases. MRD_OPT_WITH: an option with an argument that fn
 * checks and stores into dest; text and counts are two such functions. */
#define MRD_OPT_WITH(opt_name, fn, any_dest)                                                       \
    {                                                                                              \
        .name = (opt_name), .arg = required_argument, .apply = (fn), .dest = (any_dest)            \
    }
#define MRD_OPT_TEXT(opt_name, text_dest)                                                          \
    MRD_OPT_WITH(opt_name, mrd_opt_text, mrd_opt_text_dest(text_dest))
#define MRD_OPT_COUNT(opt_name, int_dest)                                                          \
    MRD_OPT_WITH(opt_name, mrd_opt_count, mrd_opt_int_dest(int_dest))
#define MRD_OPT_SET(opt_name, int_dest, int_value)                                                 \
    {                                                                                              \
        .name = (opt_name), .arg = no_argument, .apply = mrd_opt_set,                              \
        .dest = mrd_opt_int_dest(int_dest), .value = (int_value)                                   \
    }

/* flags of mrd_opts_parse */
enum {
    MRD_OPTS_STOP_AT_OPERAND = 1, /* stop at the first operand (a command line follows) */
    MRD_OPTS_USAGE_ON_ERROR = 2,  /* after getopt's message, print usage to stderr too */
    MRD_OPTS_HINT_ON_ERROR = 4,   /* after getopt's message, print "<who>: see --help" */
};

/* The number of entries of a table (an array, not a pointer). */
#define MRD_OPTS_N(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* The most entries a table may have. */
#define MRD_OPTS_MAX 48

/* Parses argv[1..argc) against opts[0..n) (n <= MRD_OPTS_MAX), applying each option in
 * the order given. Returns the index in argv of the first operand (argc when none), 0
 * after -h/--help (usage(stdout) printed) or an option whose apply returned MRD_OPT_DONE,
 * or -EINVAL after the message that says why. */
int mrd_opts_parse(int argc, char **argv, const struct mrd_opt *opts, int n, int flags,
                   const char *who, void (*usage)(FILE *));

#endif
