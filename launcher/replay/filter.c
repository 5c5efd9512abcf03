/* Kind filter for capture replay (contract in filter.h).
 *
 * The column groups of a decoded Batch are separate sub-messages: dropping a kind is
 * setting its pointer to NULL (saved and restored, since the decoded message owns them).
 */
#include "filter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "capfile.h"
#include "events.h"

/* The slot of kind's column group in m (every kind of proto/kinds.h), or NULL. */
static void **group(Meridian__V1__Batch *m, int kind)
{
    switch (kind) {
#define GROUP_CASE(E, v, fn, T, u, bm, C, d, t, tag)                                               \
    case E:                                                                                        \
        return (void **)&m->bm;
        MRD_KINDS(GROUP_CASE)
    default:
        return NULL;
    }
}

int mrd_filter_parse(const char *list, uint32_t *kinds)
{
    uint32_t mask = 0;
    const char *p = list;
    while (p && *p) {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (int k = 1; k < MRD_EV__COUNT; k++) {
            const char *name = mrd_event_kind_name(k);
            if (strlen(name) == n && strncmp(p, name, n) == 0) {
                mask |= 1u << k;
                found = 1;
            }
        }
        if (!found)
            return -EINVAL;
        p += n;
        if (*p == ',')
            p++;
    }
    if (!mask)
        return -EINVAL;
    *kinds = mask;
    return 0;
}

static void mark(uint8_t *used, uint32_t id)
{
    if (id && id < MRD_FILTER_MAX_ID)
        used[id / 8] |= (uint8_t)(1u << (id % 8));
}

static int is_used(const uint8_t *used, uint32_t id)
{
    return id < MRD_FILTER_MAX_ID && (used[id / 8] & (1u << (id % 8)));
}

/* Marks the string ids the kept kinds of one checked batch reference. */
static void mark_batch(struct mrd_filter *f, const Meridian__V1__Batch *m)
{
    struct mrd_batch_cursor c;
    uint32_t k = f->kinds;
    if (k & (1u << MRD_EV_KERNEL)) {
        struct mrd_kernel e;
        for (mrd_batch_cursor_init(&c, m); mrd_batch_next_kernel(&c, &e);)
            mark(f->used, e.name);
    }
    if (k & (1u << MRD_EV_API)) {
        struct mrd_api e;
        for (mrd_batch_cursor_init(&c, m); mrd_batch_next_api(&c, &e);)
            mark(f->used, e.name);
    }
    if (k & (1u << MRD_EV_NVTX)) {
        struct mrd_nvtx e;
        for (mrd_batch_cursor_init(&c, m); mrd_batch_next_nvtx(&c, &e);) {
            mark(f->used, e.domain);
            mark(f->used, e.name);
        }
    }
    if (k & (1u << MRD_EV_NCCL_OP)) {
        struct mrd_nccl_op e;
        for (mrd_batch_cursor_init(&c, m); mrd_batch_next_nccl_op(&c, &e);) {
            mark(f->used, e.func);
            mark(f->used, e.datatype);
            mark(f->used, e.algo);
            mark(f->used, e.proto);
        }
    }
    if (k & (1u << MRD_EV_MPI)) {
        struct mrd_mpi e;
        for (mrd_batch_cursor_init(&c, m); mrd_batch_next_mpi(&c, &e);)
            mark(f->used, e.call);
    }
}

int mrd_filter_scan(struct mrd_filter *f, const char *capture_path, uint32_t max_frame)
{
    struct mrd_capfile *cf = NULL;
    int rc, type;
    if (!f->used && !(f->used = calloc(MRD_FILTER_MAX_ID / 8, 1)))
        return -ENOMEM;
    rc = mrd_capfile_open(capture_path, &cf);
    while (rc >= 0) {
        ProtobufCMessage *msg = NULL;
        rc = mrd_capfile_next(cf, max_frame, &type, &msg, NULL, NULL);
        if (rc <= 0)
            break;
        if (type == MRD_FRAME_BATCH && mrd_batch_check((Meridian__V1__Batch *)msg, NULL) == 0)
            mark_batch(f, (Meridian__V1__Batch *)msg);
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    mrd_capfile_close(cf);
    return rc < 0 ? rc : 0;
}

int mrd_filter_apply(const struct mrd_filter *f, Meridian__V1__Batch *m,
                     struct mrd_filter_saved *sv)
{
    memset(sv, 0, sizeof *sv);
    if (!f->kinds)
        return 0;
    if (m->n_strings) {
        sv->kept = malloc(m->n_strings * sizeof *sv->kept);
        if (!sv->kept)
            return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->n_strings; i++)
        if (f->used && is_used(f->used, m->strings[i]->id))
            sv->kept[n++] = m->strings[i];
    sv->strings = m->strings;
    sv->n_strings = m->n_strings;
    m->strings = sv->kept;
    m->n_strings = n;
    sv->applied = 1;
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        void **g = group(m, k);
        sv->groups[k] = *g;
        if (!(f->kinds & (1u << k)))
            *g = NULL;
    }
    return 0;
}

void mrd_filter_restore(Meridian__V1__Batch *m, struct mrd_filter_saved *sv)
{
    if (!sv->applied)
        return;
    for (int k = 1; k < MRD_EV__COUNT; k++)
        *group(m, k) = sv->groups[k];
    m->strings = sv->strings;
    m->n_strings = sv->n_strings;
    free(sv->kept);
    memset(sv, 0, sizeof *sv);
}

void mrd_filter_free(struct mrd_filter *f)
{
    if (!f)
        return;
    free(f->used);
    f->used = NULL;
}
