/* Shared-internal declarations of the why pass (why.c: collection, straggler cost and
 * causes; why_kernels.c: the kernel read, gaps and shares per step; why_stats.c: message
 * sizes, collective statistics, top kernels, demangling). Not for other modules: analyze.h
 * has the results. */
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

/* A kernel name met by the sweep: read from strings once, by name_id. */
struct mrd__why_name {
    int64_t id;
    char *name; /* NULL: strings has no such id */
    int nccl;   /* mrd_analyze_is_nccl_name(name) */
};

/* The names by dense index (stable while the table grows) and an open-addressing index
 * from name_id to dense index + 1 (0: empty), grown at half full. */
struct mrd__why_names {
    struct mrd__why_name *v;
    size_t n, cap;
    int32_t *slot;
    size_t nslots;
    sqlite3_stmt *lookup; /* mrd_db_sql_why_string, prepared on first use */
};

/* One late event's gap on one rank: the kernels between its boundary and its arrival. The
 * time per compute kernel name (at most MRD_WHY_GAP_NAMES, in order of first appearance)
 * is kept in w->gap_names[names_off .. names_off + nnames). */
#define MRD_WHY_GAP_NAMES 16

struct mrd__why_gap {
    int64_t first_kernel; /* first kernel start after the boundary (global), INT64_MAX: none */
    int64_t busy;         /* union of compute kernels inside [boundary, arrival) */
    int64_t compute_kernels, kernels;
    size_t names_off;
    int nnames;
};

struct mrd__why_gap_name {
    int64_t ns;
    int32_t name; /* dense name index, -1: no name */
};

/* Work the sweep does for the why pass on one rank's kernels starting in [from, to) (local
 * ns): a late event's gap (clipped to [lo, hi], result in gaps[target]) or a step's
 * exposed/idle shares (clipped to [lo, hi], summed into y->steps[target]). */
struct mrd__why_task {
    int rank_index; /* into a->ranks */
    int is_gap;
    int64_t from, to, lo, hi;
    size_t target;
};

/* A swept kernel kept for the tasks (valid kernels only, starts ascending). */
struct mrd__why_kernel {
    int64_t start, end;
    int32_t name; /* dense name index, -1: none */
    int32_t comm; /* linked to an NCCL op, or an "nccl*" name */
};

struct mrd__why_pending; /* why.c: a late event waiting for its two gaps */

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
    /* the kernel names of the sweep, the gaps and the top kernels */
    struct mrd__why_names names;
    /* the why pass's work on the swept kernels (mrd__why_prepare plans it, the sweep does
     * it): tasks sorted by (rank_index, from); [cur_task, end_task) the swept rank's */
    const struct mrd_timebase *tb;
    struct mrd_an_why *y;
    struct mrd__why_task *tasks;
    size_t ntasks, cap_tasks, cur_task, end_task;
    int sweep_rank;
    struct mrd__why_gap *gaps;
    size_t ngaps, cap_gaps;
    struct mrd__why_gap_name *gap_names; /* every gap's names, one gap after the other */
    size_t ngap_names, cap_gap_names;
    struct mrd__why_kernel *kbuf; /* the swept rank's kernels from the head task's from on */
    size_t kfirst, kn, kcap;
    int64_t (*ivl[2])[2]; /* the shares' merged intervals: communication, compute */
    size_t ivl_n[2], ivl_cap[2];
    struct mrd__why_pending *pending; /* late events in the order found */
    size_t npending, cap_pending;
};

/* The text a gap compares and shows for dense name index k ("?": no name). */
static inline const char *mrd__why_name_text(const struct mrd__why *w, int32_t k)
{
    return k >= 0 && w->names.v[k].name ? w->names.v[k].name : "?";
}

/* Message sizes of the collected instances, then the statistics per (communicator,
 * function, bytes) into y->stats. Returns 0, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_stats(sqlite3 *db, struct mrd__why *w, struct mrd_an_why *y);

/* Top kernels without a pass of their own: the overlap sweep (overlap.c), which reads
 * every kernel of a rank anyway, adds each kernel with an interval (mrd_db_kernel_valid)
 * with mrd__why_kernel_add (name_id INT64_MIN for NULL), then calls
 * mrd__why_kernel_rank_end, which keeps the rank's MRD_WHY_TOP_KERNELS by total time
 * (ties: by name, NULL first, as SQL's ORDER BY would) with names looked up through
 * name_st (mrd_db_sql_why_string) and clears the tally. Memory: the rank's distinct
 * kernel names. An allocation failure sets w->enomem (rank_end returns -ENOMEM). */
void mrd__why_kernel_add(struct mrd__why *w, int64_t name_id, int64_t ns);
int mrd__why_kernel_rank_end(struct mrd__why *w, sqlite3_stmt *name_st, int rank);

/* The dense index of name_id in w->names (read from strings on first sight). Returns the
 * index, -ENOMEM or -MRD_ERR_SQLITE. */
int mrd__why_name_index(sqlite3 *db, struct mrd__why_names *t, int64_t name_id);
void mrd__why_names_free(struct mrd__why_names *t);

/* The sweep's side of the why pass (why_kernels.c). For each rank it sweeps, in a->ranks
 * order: mrd__why_rank_begin (rank_index into a->ranks), mrd__why_kernel for every valid
 * kernel in start order (the kernels_rank_start index's order), mrd__why_rank_end, which
 * completes the rank's tasks. A rank not swept has no kernels: its tasks keep their empty
 * results. Memory: the swept rank's kernels from its earliest open task on (about two
 * steps). Returns 0 or -ENOMEM. */
void mrd__why_rank_begin(struct mrd__why *w, int rank_index, int rank);
int mrd__why_kernel(struct mrd__why *w, int64_t start, int64_t end, int comm, int32_t name);
int mrd__why_rank_end(struct mrd__why *w);

/* Adds a task (why.c plans them in mrd__why_prepare). Returns 0 or -ENOMEM. */
int mrd__why_task_add(struct mrd__why *w, const struct mrd__why_task *t);
/* Sorts the tasks for the sweep. */
void mrd__why_tasks_sorted(struct mrd__why *w);
void mrd__why_kernels_free(struct mrd__why *w);

/* The MRD_WHY_TOP_KERNELS kernels of each rank by total time into y->kernels (from what
 * the sweep kept), by rank. Returns 0 or -ENOMEM. */
int mrd__why_top_kernels(sqlite3 *db, struct mrd__why *w, struct mrd_analysis *a,
                         struct mrd_an_why *y);

#endif
