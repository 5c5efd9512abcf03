/* Ring record -> batch event: copies the event and interns the record's strings with the
 * batch builder (record.h says which string goes where). Runs on the flusher thread for
 * every drained record (up to ~200,000/s): a string known by its address (str[] pointers
 * live as long as the process, record.h) costs one compare in a direct-mapped cache; any
 * other string one hash lookup (hash, UTF-8 check, compare); no allocation once a string
 * is known. */
#include "convert.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "error.h"

/* Interns s (at most max bytes are counted), counting the bytes of strings seen for the
 * first time. */
static uint32_t intern(struct mrd_convert *cv, const char *s, size_t max)
{
    if (s == NULL || *s == '\0')
        return 0;
    uint32_t id = mrd_batch_builder_intern(cv->b, s);
    if (id > cv->max_id) { /* ids are handed out in increasing order: a new string */
        cv->max_id = id;
        cv->new_string_bytes += strnlen(s, max);
    }
    return id;
}

/* Interns a process-lifetime string (a record's str[i]) through the address cache: the
 * same address always holds the same string, so its id is looked up by the address. */
static uint32_t intern_static(struct mrd_convert *cv, const char *s)
{
    if (s == NULL)
        return 0;
    uintptr_t a = (uintptr_t)s;
    size_t slot = (size_t)((a >> 3) ^ (a >> 13)) & (MRD_CONVERT_PTR_CACHE - 1);
    if (cv->cache[slot].p == s)
        return cv->cache[slot].id;
    uint32_t id = intern(cv, s, 4096);
    if (id != 0) { /* 0 (empty string, table full, no memory) is looked up again next time */
        cv->cache[slot].p = s;
        cv->cache[slot].id = id;
    }
    return id;
}

void mrd__convert_bind(struct mrd_convert *cv, struct mrd_batch_builder *b)
{
    cv->b = b;
    cv->max_id = 0;
    memset(cv->cache, 0, sizeof cv->cache);
}

int mrd__convert_record(struct mrd_convert *cv, const struct mrd_record *r)
{
    struct mrd_batch_builder *b = cv->b;
    if (mrd_batch_builder_pending(b) >= cv->target_events)
        return -EAGAIN;
    switch (r->kind) {
    case MRD_EV_KERNEL: {
        struct mrd_kernel e = r->ev.kernel;
        e.name = intern_static(cv, r->str[0]);
        return mrd_batch_add_kernel(b, &e);
    }
    case MRD_EV_MEMCPY:
        return mrd_batch_add_memcpy(b, &r->ev.memcpy);
    case MRD_EV_MEMSET:
        return mrd_batch_add_memset(b, &r->ev.memset);
    case MRD_EV_SYNC:
        return mrd_batch_add_sync(b, &r->ev.sync);
    case MRD_EV_API: {
        struct mrd_api e = r->ev.api;
        e.name = intern_static(cv, r->str[0]);
        return mrd_batch_add_api(b, &e);
    }
    case MRD_EV_GRAPH:
        return mrd_batch_add_graph(b, &r->ev.graph);
    case MRD_EV_EXTCORR:
        return mrd_batch_add_extcorr(b, &r->ev.extcorr);
    case MRD_EV_NVTX: {
        struct mrd_nvtx e = r->ev.nvtx;
        char name[MRD_RECORD_INLINE_STR];
        memcpy(name, r->inline_str, sizeof name);
        name[sizeof name - 1] = '\0'; /* never trust the writer to terminate it */
        e.domain = intern_static(cv, r->str[0]);
        e.name = name[0] ? intern(cv, name, sizeof name) : intern_static(cv, r->str[1]);
        return mrd_batch_add_nvtx(b, &e);
    }
    case MRD_EV_NCCL_OP: {
        struct mrd_nccl_op e = r->ev.nccl_op;
        e.func = intern_static(cv, r->str[0]);
        e.datatype = intern_static(cv, r->str[1]);
        e.algo = intern_static(cv, r->str[2]);
        e.proto = intern_static(cv, r->str[3]);
        return mrd_batch_add_nccl_op(b, &e);
    }
    case MRD_EV_NCCL_CHANNEL:
        return mrd_batch_add_nccl_channel(b, &r->ev.nccl_channel);
    case MRD_EV_MPI: {
        struct mrd_mpi e = r->ev.mpi;
        e.call = intern_static(cv, r->str[0]);
        return mrd_batch_add_mpi(b, &e);
    }
    case MRD_EV_GPU_CLOCK:
        return mrd_batch_add_gpu_clock_sample(b, &r->ev.gpu_clock);
    default:
        return -EINVAL; /* unknown kind (or MRD_EV_CLOCK, which never travels in rings) */
    }
}

int mrd__convert_add(struct mrd_convert *cv, const struct mrd_record *r, int (*finish)(void *),
                     void *arg)
{
    int e = mrd__convert_record(cv, r);
    if (e != -EAGAIN)
        return e;
    int fe = finish(arg);
    if (fe != 0)
        return fe; /* the full batch could not be encoded: this record never got one */
    return mrd__convert_record(cv, r);
}

int mrd__convert_drop_reason(int err)
{
    switch (err) {
    case -MRD_ERR_TOO_LARGE:
    case -EAGAIN: /* even an empty batch had no room for it */
        return MRD_DROP_TOO_LARGE;
    default: /* -EINVAL, -ENOMEM and anything else: the agent could not encode it */
        return MRD_DROP_UNENCODABLE;
    }
}
