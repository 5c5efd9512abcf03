/* `meridian replay --from-env PATTERN`: one rank of a launched job replays its own capture.
 *
 * Where it sits: replay.c's option parsing calls this when --from-env is given. Under
 * `meridian profile -- mpirun -np N meridian replay --from-env caps/ref-rank%r.mrdcap`
 * every rank process finds who it is in the launcher's variables (the agent's list, see
 * agent/ENVIRONMENT.md "Who is a rank") and where to send in the agent's environment
 * contract (MERIDIAN_AGGREGATOR, MERIDIAN_RUN_ID, MERIDIAN_SECRET / MERIDIAN_SECRET_FILE),
 * expands PATTERN with its rank and replays that one capture as that rank. Runs once per
 * process, before anything is sent; reads the environment only.
 */
#ifndef MRD_FROMENV_H
#define MRD_FROMENV_H

#include <stddef.h>
#include <stdint.h>

#define MRD_FROMENV_UNSET UINT32_MAX /* local rank / world size not given */

struct mrd_fromenv {
    uint32_t rank, local_rank, world_size; /* local_rank, world_size may be UNSET */
    const char *rank_var;                  /* the variable the rank came from */
    const char *aggregator, *run_id;       /* from the environment; NULL when not set */
    const char *secret;                    /* MERIDIAN_SECRET, or NULL */
    const char *secret_file;               /* MERIDIAN_SECRET_FILE, or NULL */
    char capture[4096];                    /* PATTERN with %r replaced by the rank */
};

/* Reads the launcher's rank, local rank and world size and the agent's connection
 * variables from the environment into *out, and expands pattern ("%r" = rank, "%%" = "%",
 * any other '%' is refused). rank_override >= 0 replaces the launcher's rank (an explicit
 * option wins). Returns 0, or -EINVAL with a one-line reason (no prefix, no newline) in
 * why: no rank variable, a rank variable that is not a decimal number, a bad pattern.
 * Missing connection variables are not an error here (the caller may have options). */
int mrd_fromenv_read(const char *pattern, int64_t rank_override, struct mrd_fromenv *out, char *why,
                     size_t why_cap);


/* The names of the rank variables, in the order they are tried, as one line for
 * messages ("OMPI_COMM_WORLD_RANK, PMIX_RANK, ..."). Static storage. */
const char *mrd_fromenv_rank_vars(void);

#endif
