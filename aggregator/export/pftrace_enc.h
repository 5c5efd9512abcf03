/* Internal to the native trace export (pftrace.c reads rows, pftrace_enc.c encodes them):
 * the vocabulary of track classes, categories and argument names, the exporter's state, and
 * the encoder's calls. Not for other modules (their header is pftrace.h).
 */
#ifndef MRD_PFTRACE_ENC_H
#define MRD_PFTRACE_ENC_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>
#include <zlib.h>

#include "meridian_pftrace.pb-c.h"
#include "pftrace.h"
#include "timebase.h"

/* Track classes, event categories and argument names (their iids). */

enum cls {
    C_STREAM = 1,
    C_GRAPH,
    C_NCCL,
    C_NVTX,
    C_NVTX_SE,
    C_MPI,
    C_SYNC,
    C_API,
    C_WINDOW,
    C_STEP,
    C_GPUCLK
};

enum cat {
    CAT_KERNEL = 1,
    CAT_MEMCPY,
    CAT_MEMSET,
    CAT_GRAPH,
    CAT_NCCL,
    CAT_NVTX,
    CAT_MPI,
    CAT_SYNC,
    CAT_API,
    CAT_WINDOW
};

enum arg {
    A_CORR = 1,
    A_GRID,
    A_BLOCK,
    A_NCCL_OP,
    A_BYTES,
    A_COPY_KIND,
    A_GRAPH_ID,
    A_OP_ID,
    A_SEQ,
    A_COMM,
    A_COUNT,
    A_DATATYPE,
    A_ALGO,
    A_PROTO,
    A_CHANNELS,
    A_PEER,
    A_ROOT,
    A_DOMAIN,
    A_TAG,
    A_TYPE,
    A_STREAM,
    A_CBID,
    A_FIRST,
    A_LAST,
    A_REASON,
    A_ATTACH,
    A_DETACH,
    A_FLUSH,
    A_KERNELS,
    A_COUNT_
};

#define MAX_LANES         32
#define MAX_DEPTH         32
#define MAX_ANN           12
#define MAX_TERMS         16         /* ops ending their link flow on one kernel (grouped launch) */
#define SEEN_SLOTS        (1u << 15) /* interning keys per sequence: cap at half */
#define SHAPE_SLOTS       (1u << 16) /* distinct (x, y, z) launch shapes: cap at half */
#define PACKET_MAX        (1u << 24)
#define OUTBUF            (1u << 16)
#define CLOCK_INCREMENTAL 64
#define CLOCK_BOOTTIME    6

struct lane {
    uint64_t uuid;
    int depth;
    uint64_t end[MAX_DEPTH]; /* open slices' ends (written clock), innermost last */
};

/* The sequence being written: one track group. */
struct group {
    int open; /* its first packet is out */
    int rank, cls;
    uint64_t key;
    uint32_t seq; /* trusted_packet_sequence_id */
    uint64_t last;
    int nlanes;
    struct lane lane[MAX_LANES];
};

struct rankinfo {
    int seen, aligned;
    int64_t origin;
    uint64_t uuid;
    int ntracks;
};

struct shape {
    uint32_t x, y, z, used;
};

struct px {
    FILE *f;
    sqlite3 *db;
    struct mrd_timebase *tb;
    const struct mrd_perfetto_options *o;
    struct mrd_perfetto_options opts; /* --steps: the caller's options with the steps' window */
    uint64_t steps_in_run;            /* --steps: the steps the run has */
    struct mrd__export_rows rows;     /* progress, when the caller asked for it */
    struct mrd_pftrace_stats st;
    int64_t origin;
    sqlite3_stmt *links, *host, *rank_first;
    z_stream z;
    int zinit, err;
    unsigned char *in, *out;
    size_t nin;
    struct rankinfo *ranks;
    size_t nranks;
    uint32_t next_seq;
    struct group g;
    int64_t step_end;     /* step counter: end of the group's previous step (nesting) */
    int64_t gpuclk_first; /* GPU timer counter: the group's first offset */
    /* interning: keys (space << 56 | iid) sent on the current sequence */
    uint64_t *seen;
    uint32_t *seen_gen, gen, nseen;
    struct shape *shapes;
    char shape_txt[2][40]; /* grid and block of the packet being built */
    uint32_t nshapes;
    /* the packet being built */
    Pftrace__TrackEvent te;
    Pftrace__DebugAnnotation ann[MAX_ANN], *annp[MAX_ANN];
    uint64_t cats[1], flows[2], terms[MAX_TERMS];
    Pftrace__InternedData idata;
    Pftrace__EventName en[1], *enp[1];
    Pftrace__EventCategory ec[1], *ecp[1];
    Pftrace__DebugAnnotationName an[MAX_ANN], *anp[MAX_ANN];
    Pftrace__InternedString is[MAX_ANN], *isp[MAX_ANN];
    unsigned char *pk_buf; /* the packet being framed (PACKET_MAX at most) */
    size_t pk_cap;
};

/* Interning keys: strings of the database (even iids) and our own names (odd). */
static inline uint64_t mrd__pf_db_iid(int64_t string_id)
{
    return 2 * (uint64_t)string_id + 2;
}

static inline uint64_t mrd__pf_fixed_iid(int k)
{
    return 2 * (uint64_t)k + 1;
}

/* Buffers and deflate (0 or -ENOMEM); the gzip trailer (0 or -EIO); frees (NULL-safe
 * members, the struct is the caller's). */
int mrd__pf_init(struct px *p);
int mrd__pf_finish(struct px *p);
void mrd__pf_release(struct px *p);

uint64_t mrd__pf_mix(uint64_t x);

/* Moves to the track group (rank, cls, key): rows of one group come together, in start
 * order. Closes the previous group (writes its pending ENDs); describes the rank's process
 * and the group's first track on first use. Returns the rank's entry, or NULL (rank out of
 * range: the row is skipped and counted). */
struct rankinfo *mrd__pf_group(struct px *p, int rank, int cls, uint64_t key);
/* Ends the current group (at the end of a query). */
void mrd__pf_close_group(struct px *p);

/* The written time of a rank's local timestamp (mapped: already global). */
uint64_t mrd__pf_wtime(struct px *p, const struct rankinfo *ri, int rank, int64_t local,
                       int mapped);
int mrd__pf_in_window(struct px *p, uint64_t s, uint64_t e);

/* A slice [s, *e] of the current group: starts its BEGIN packet on a lane where it nests
 * (*e shortened when every lane is busy) and returns the lane, or -1 (outside the window,
 * or no lane: counted). The caller adds name, args and flows, then commits. */
int mrd__pf_slice_begin(struct px *p, struct rankinfo *ri, uint64_t s, uint64_t *e, int cat);
void mrd__pf_slice_commit(struct px *p, int lane, uint64_t s, uint64_t e);
int mrd__pf_instant_begin(struct px *p, uint64_t t, int cat);
void mrd__pf_instant_commit(struct px *p, uint64_t t);
/* One sample of the current group's counter track. */
void mrd__pf_counter(struct px *p, uint64_t t, double v);

/* The event's name and arguments (of the packet begun above). */
void mrd__pf_name(struct px *p, uint64_t iid, const char *name);
void mrd__pf_arg_int(struct px *p, int name, int64_t v);
void mrd__pf_arg_uint(struct px *p, int name, uint64_t v);
void mrd__pf_arg_str(struct px *p, int name, uint64_t iid, const char *v); /* iid 0: inline */
void mrd__pf_arg_shape(struct px *p, int name, uint32_t x, uint32_t y, uint32_t z);

#endif
