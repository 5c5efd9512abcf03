/* Shared-internal declarations of the why pass (why.c: collection, straggler cost and
 * causes, shares per step; why_stats.c: message sizes, collective statistics, top kernels,
 * demangling). Not for other modules: analyze.h has the results. */
#ifndef MRD_WHY_INT_H
#define MRD_WHY_INT_H

#include "analyze_int.h"

#define MRD_WHY_MAX_ROWS  (1 << 22) /* rank intervals kept over all instances */
#define MRD_WHY_MAX_FUNCS 32        /* distinct function names */

struct mrd__why_row {
    int rank;
    int64_t start, end; /* global (or local) ns, as match.c gives them */
};

struct mrd__why_inst {
    uint64_t comm_hash, seq;
    uint64_t ordinal; /* position in the matching's key order (every instance counts) */
    int64_t step;
    int func;   /* index into funcs */
    int off, n; /* rows[off .. off + n) */
    int64_t last_start, max_end;
    int64_t bytes;
    int nranks;
};

struct mrd__why {
    void (*user_cb)(const struct mrd_an_instance *in, void *ctx);
    void *user_ctx;
    struct mrd__why_inst *inst;
    size_t ninst, cap_inst;
    struct mrd__why_row *rows;
    size_t nrows, cap_rows;
    uint64_t seen, over_cap;
    int nfuncs;
    char funcs[MRD_WHY_MAX_FUNCS][32];
    int enomem;
};

/* Message sizes of the collected instances, then the statistics per (communicator,
 * function, bytes) into y->stats. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_stats(sqlite3 *db, struct mrd__why *w, struct mrd_an_why *y);

/* The MRD_WHY_TOP_KERNELS kernels of each rank by total time into y->kernels. Returns 0,
 * -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_top_kernels(sqlite3 *db, struct mrd_analysis *a, struct mrd_an_why *y);

#endif
