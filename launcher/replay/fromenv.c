/* The environment of one launched rank, for `meridian replay --from-env` (see fromenv.h).
 *
 * The lists of variables are the agent's (mrd_rank_vars, proto/runcfg.h): the
 * first variable of a list that is set decides, except that RANK, LOCAL_RANK and
 * WORLD_SIZE decide when all three are set (torchrun starts the workers, so it is the
 * innermost launcher: under `srun ... torchrun` every worker of a node inherits the node's
 * SLURM_PROCID), and a value that is not a non-negative decimal number is an error, as it
 * makes the agent inert. Unlike the agent, a process
 * with no rank variable is an error here: replaying "some" capture as rank 0 by accident
 * would double one rank's data.
 */
#include "fromenv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runcfg.h"

const char *mrd_fromenv_rank_vars(void)
{
    return "OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, RANK (RANK first when "
           "LOCAL_RANK and WORLD_SIZE are set too)";
}

static int parse_dec(const char *s, uint32_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v >= MRD_FROMENV_UNSET)
            return -EINVAL;
    }
    *out = (uint32_t)v;
    return 0;
}

/* The first variable of `vars` that is set: 1 and *out (and *name), 0 when none is set,
 * -EINVAL (reason in why) when its value is not a number. */
static int first_set(const char *const *vars, const char *what, uint32_t *out, const char **name,
                     char *why, size_t cap)
{
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (!v)
            continue;
        if (parse_dec(v, out) < 0) {
            snprintf(why, cap, "%s='%.40s' is not a %s (a non-negative decimal number)", vars[i], v,
                     what);
            return -EINVAL;
        }
        if (name)
            *name = vars[i];
        return 1;
    }
    return 0;
}

static int expand(const char *pattern, uint32_t rank, char *out, size_t cap, char *why,
                  size_t why_cap)
{
    size_t n = 0;
    for (const char *p = pattern; *p; p++) {
        char num[16];
        const char *add = num;
        if (*p != '%') {
            num[0] = *p;
            num[1] = '\0';
        } else if (p[1] == 'r') {
            snprintf(num, sizeof num, "%u", rank);
            p++;
        } else if (p[1] == '%') {
            add = "%";
            p++;
        } else {
            snprintf(why, why_cap,
                     "capture pattern '%s': only %%r (the rank) and %%%% may "
                     "follow a %%",
                     pattern);
            return -EINVAL;
        }
        size_t len = strlen(add);
        if (n + len >= cap) {
            snprintf(why, why_cap, "capture pattern '%.60s...' is too long", pattern);
            return -EINVAL;
        }
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
    if (n == 0) {
        snprintf(why, why_cap, "the capture pattern is empty");
        return -EINVAL;
    }
    return 0;
}

int mrd_fromenv_read(const char *pattern, int64_t rank_override, struct mrd_fromenv *out, char *why,
                     size_t why_cap)
{
    const struct mrd_rank_vars *vars =
        mrd_rank_vars(getenv("RANK") && getenv("LOCAL_RANK") && getenv("WORLD_SIZE"));
    int rc;
    memset(out, 0, sizeof *out);
    out->local_rank = out->world_size = MRD_FROMENV_UNSET;
    if (rank_override >= 0) {
        out->rank = (uint32_t)rank_override;
        out->rank_var = "--rank-base";
    } else {
        rc = first_set(vars->rank, "rank", &out->rank, &out->rank_var, why, why_cap);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            snprintf(why, why_cap,
                     "no rank: none of %s is set (run it as a rank of mpirun or srun, "
                     "e.g. meridian profile -- mpirun -np 2 meridian replay --from-env "
                     "'%.80s', or give --rank-base R)",
                     mrd_fromenv_rank_vars(), pattern);
            return -EINVAL;
        }
    }
    rc = first_set(vars->local_rank, "local rank", &out->local_rank, NULL, why, why_cap);
    if (rc >= 0)
        rc = first_set(vars->world_size, "world size", &out->world_size, NULL, why, why_cap);
    if (rc < 0)
        return rc;
    out->aggregator = getenv("MERIDIAN_AGGREGATOR");
    out->run_id = getenv("MERIDIAN_RUN_ID");
    out->secret = getenv("MERIDIAN_SECRET");
    out->secret_file = getenv("MERIDIAN_SECRET_FILE");
    if (out->aggregator && !*out->aggregator)
        out->aggregator = NULL;
    if (out->run_id && !*out->run_id)
        out->run_id = NULL;
    if (out->secret && !*out->secret)
        out->secret = NULL;
    if (out->secret_file && !*out->secret_file)
        out->secret_file = NULL;
    return expand(pattern, out->rank, out->capture, sizeof out->capture, why, why_cap);
}

