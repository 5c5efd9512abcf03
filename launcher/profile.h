/* The options of `meridian profile` and the capture tier they choose, shared by
 * profile.c (which runs the job) and profile_opts.c (which reads and checks the options).
 * Internal to the launcher; main thread only. */
#ifndef MRD_PROFILE_H
#define MRD_PROFILE_H

/* The capture tier the ranks get (agent/ENVIRONMENT.md, "Tiers and windows"), resolved
 * from the options and the environment while the options are read. */
struct tier {
    int steady;         /* 1: the steady tier, 0: full */
    int trace_env;      /* the tier came from MERIDIAN_TRACE in the environment */
    int windows_env;    /* the windows came from MERIDIAN_WINDOWS in the environment */
    int set_windows;    /* MERIDIAN_WINDOWS := windows (an option or the default) */
    char windows[1024]; /* canonical specification (mrd_windows_format); "" when none passes */
};

struct profile_opts {
    const char *db, *run_id, *agent_lib, *mpi_lib, *daemon, *listen, *advertise;
    const char *html, *json, *style;
    const char *windows, *step_name, *trace; /* --windows, --step-name, --trace */
    const char *step_collective;             /* --step-collective */
    int daemon_timeout_s, stop_timeout_s, job_timeout_s, finalize_timeout_s;
    int no_mpi, no_report, no_finalize, single, keep_secret, overwrite, verbose;
    int shards, keep_shards, full;
    int progress; /* launcher/progress.h: --progress, --quiet, or the default (AUTO) */
    struct tier tier;
    /* passed to meridiand: --trigger-step-factor, --window-delay, --window-duration,
     * --trigger-skew */
    const char *trigger, *wdelay, *wduration, *trigger_skew;
};

#define MAX_SHARDS 256

/* Parses the options before the job's command into o (getopt_long, stopping at the first
 * non-option: the job's own options are never parsed here), resolving and checking the
 * capture tier. Returns 1 to run the job (its argv from optind on), 0 after --help
 * (printed), or -EINVAL (reported on stderr). */
int mrd__profile_parse(int argc, char **argv, struct profile_opts *o);

/* Sets the resolved tier in this process's environment (MERIDIAN_TRACE, MERIDIAN_WINDOWS,
 * MERIDIAN_STEP_NAME, MERIDIAN_STEP_COLLECTIVE, MERIDIAN_TRACE_KINDS), before the agent's environment is built from
 * it. Returns 0 or -errno. */
int mrd__profile_apply_tier(const struct profile_opts *o);

/* One line on stderr at the job's start: the tier and windows the ranks get. */
void mrd__profile_say_tier(const struct tier *t);

#endif
