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

/* Every kind's string fields, in the order of the kind's list (proto/kinds.h), are the
 * record's str[0], str[1], ... (record.h); a kind without strings copies as it is. */
#define STR_1(m) e->m = intern_static(cv, r->str[i++]);
#define STR_0(m)
#define STR_(is, m) STR_##is(m)
#define STR_X(is, m) STR_(is, m)
#define STR_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep) STR_X(MRD__CODEC_IS_STR(codec), m)
#define STR_KIND(E, v, fn, T, u, bm, C, d, t, tag)                                                 \
    static void strings_##fn(struct mrd_convert *cv, const struct mrd_record *r, T *e)             \
    {                                                                                              \
        int i = 0;                                                                                 \
        MRD__FIELDS(fn, STR_FIELD)                                                                 \
        (void)cv, (void)r, (void)e, (void)i;                                                       \
    }
MRD_KINDS(STR_KIND)

int mrd__convert_record(struct mrd_convert *cv, const struct mrd_record *r)
{
    struct mrd_batch_builder *b = cv->b;
    union mrd_any_event e;
    if (mrd_batch_builder_pending(b) >= cv->target_events)
        return -EAGAIN;
    if (r->kind == MRD_EV_CLOCK)
        return -EINVAL; /* never travels in rings */
    switch (r->kind) {
#define STR_CASE(E, v, fn, T, um, bm, C, d, t, tag)                                                \
    case E:                                                                                        \
        e.um = r->ev.um;                                                                           \
        strings_##fn(cv, r, &e.um);                                                                \
        break;
        MRD_KINDS(STR_CASE)
    default:
        return -EINVAL; /* unknown kind */
    }
    if (r->kind == MRD_EV_NVTX) { /* a message copied into the record wins over str[1] */
        char name[MRD_RECORD_INLINE_STR];
        memcpy(name, r->inline_str, sizeof name);
        name[sizeof name - 1] = '\0'; /* never trust the writer to terminate it */
        if (name[0])
            e.nvtx.name = intern(cv, name, sizeof name);
    }
    return mrd_batch_add_any(b, r->kind, &e);
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
