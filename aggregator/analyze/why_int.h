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

/* One kernel name's tally on the rank being swept (key INT64_MIN: a NULL name_id). */
struct mrd__why_ktally {
    int64_t name_id;
    uint64_t count;
    int64_t total_ns;
    int used;
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
    /* top kernels, tallied by the overlap sweep (one rank at a time, open addressing) */
    struct mrd__why_ktally *tally;
    size_t tally_cap, tally_n;
    int64_t tally_total_ns;
    struct mrd_an_kernel_top *top; /* MRD_WHY_TOP_KERNELS a rank, in sweep order */
    size_t ntop, cap_top;
    int top_demangled;
};

/* Message sizes of the collected instances, then the statistics per (communicator,
 * function, bytes) into y->stats. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_stats(sqlite3 *db, struct mrd__why *w, struct mrd_an_why *y);

/* Top kernels without a pass of their own: the overlap sweep (overlap.c), which reads
 * every kernel of a rank anyway, adds each kernel with an interval (mrd_db_kernel_valid)
 * with mrd__why_kernel_add (name_id INT64_MIN for NULL), then calls
 * mrd__why_kernel_rank_end, which keeps the rank's MRD_WHY_TOP_KERNELS by total time
 * (ties: by name, NULL first, as SQL's ORDER BY would) with names looked up through
 * name_st (mrd_db_sql_string_by_id) and clears the tally. Memory: the rank's distinct
 * kernel names. An allocation failure sets w->enomem (rank_end returns -ENOMEM). */
void mrd__why_kernel_add(struct mrd__why *w, int64_t name_id, int64_t ns);
int mrd__why_kernel_rank_end(struct mrd__why *w, sqlite3_stmt *name_st, int rank);

/* The MRD_WHY_TOP_KERNELS kernels of each rank by total time into y->kernels (from what
 * the sweep kept), by rank. Returns 0 or -ENOMEM. */
int mrd__why_top_kernels(sqlite3 *db, struct mrd__why *w, struct mrd_analysis *a,
                         struct mrd_an_why *y);

#endif
