/* Internal to proto/: the column layout of every event group of a Batch, shared by the
 * builder (batch.c) and the reader (batch_read.c). Not for other modules.
 *
 * Each group (KernelColumns, MemcpyColumns, ...) is described once: where its pointer
 * sits in Meridian__V1__Batch, and for each column, in field-number order, where its
 * count and array sit in the group struct and how wide one element is (4 or 8 bytes).
 * The builder fills columns through this table; the reader validates through it.
 */
#ifndef MRD_BATCH_INTERNAL_H
#define MRD_BATCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "meridian.pb-c.h"

#define MRD__BATCH_MAX_COLS 20      /* NcclOpColumns, the widest group */
#define MRD__BATCH_MAX_STRCOLS 4    /* string-id columns per group (NcclOpColumns) */
#define MRD__BATCH_MAX_EVENTS 1000000u /* per kind and batch (reader cap) */
#define MRD__BATCH_MAX_DEFS 65536u  /* StringDefs per batch (reader cap) */
#define MRD__BATCH_MAX_STRLEN 4096u /* bytes of one string value */
#define MRD__BATCH_MAX_RUN_ID 256u  /* bytes of Batch.run_id */
#define MRD__BATCH_MAX_COUNTERS 256u /* Batch.dropped entries */
#define MRD__BATCH_MAX_STRING_ID 0x7fffffffu

struct mrd__colspec {
    uint16_t n_off; /* offset of size_t n_<col> in the group struct */
    uint16_t p_off; /* offset of the <col> array pointer */
    uint8_t width;  /* bytes per element: 4 or 8 */
};

struct mrd__groupspec {
    const ProtobufCMessageDescriptor *desc;
    size_t batch_off; /* offset of the group pointer in Meridian__V1__Batch */
    uint8_t ncols;
    uint8_t nstr;                          /* number of string-id columns */
    uint8_t strcol[MRD__BATCH_MAX_STRCOLS]; /* their column indexes */
    struct mrd__colspec col[MRD__BATCH_MAX_COLS];
};

/* Indexed by enum mrd_event_kind; entry 0 is unused (desc == NULL). */
extern const struct mrd__groupspec mrd__batch_groups[MRD_EV__COUNT];

/* The builder's string table (batch_strings.c): ids 1..n index str[]. */
#define MRD__STRTAB_MAX (1u << 18)       /* distinct strings */
#define MRD__STRTAB_MAX_BYTES (32u << 20) /* their total size */

struct mrd__string {
    char *s;
    uint32_t len;
    uint32_t mark; /* builder's batch number when defined in the pending batch */
    uint64_t hash;
    uint8_t acked; /* a batch that defined it was acknowledged */
};

struct mrd__strtab {
    struct mrd__string *str; /* index = id; str[0] unused */
    uint32_t n, cap;
    size_t bytes;
    uint32_t *slots; /* open addressing: string id, 0 = empty */
    uint32_t slot_mask;
};

uint32_t mrd__strtab_intern(struct mrd__strtab *t, const char *s);
void mrd__strtab_clear(struct mrd__strtab *t);

/* The group struct of `kind` inside m, or NULL when absent. */
static inline const ProtobufCMessage *mrd__batch_group(const Meridian__V1__Batch *m, int kind)
{
    const ProtobufCMessage *const *slot =
        (const ProtobufCMessage *const *)((const char *)m + mrd__batch_groups[kind].batch_off);
    return *slot;
}

/* Count of column `c` of a group struct. */
static inline size_t mrd__batch_col_len(const ProtobufCMessage *g, const struct mrd__colspec *c)
{
    return *(const size_t *)((const char *)g + c->n_off);
}

/* Two's-complement reinterpretation without implementation-defined conversions. */
static inline int64_t mrd__u2s(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}

static inline int32_t mrd__u2s32(uint32_t v)
{
    return v <= (uint32_t)INT32_MAX ? (int32_t)v : -(int32_t)(~v) - 1;
}

/* The Columns message type of kind fn (proto/kinds.h), for the generated per-kind code. */
#define MRD__COLS_TYPEDEF(E, v, fn, T, u, bm, C, d, t, tag) typedef C mrd__cols_##fn;
MRD_KINDS(MRD__COLS_TYPEDEF)

#endif
