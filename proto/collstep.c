/* Steps counted from a collective (contract and the rule's argument in collstep.h). */
#include "collstep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EVERY_MAX 1000000u

_Static_assert(MRD_COLLSTEP_RING_MASK + 1 > MRD_COLLSTEP_PERIOD_MAX &&
                   ((MRD_COLLSTEP_RING_MASK + 1) & MRD_COLLSTEP_RING_MASK) == 0,
               "the key ring holds a power of two over P_MAX keys");

/* NCCL's collective names (ncclFuncToString); point-to-point has no sequence number. */
static const char *const funcs[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                    "ReduceScatter", "AllToAll",  "Gather", "Scatter"};

static const char *known_func(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
        if (strlen(funcs[i]) == len && strncasecmp(s, funcs[i], len) == 0)
            return funcs[i];
    return NULL;
}

static int parse_comm(const char *s, struct mrd_collstep_rule *r, char *why, size_t why_len)
{
    if (!*s) {
        snprintf(why, why_len, "nothing after '@': name a communicator, 'world' or 0xHASH");
        return -EINVAL;
    }
    if (strcmp(s, "world") == 0) {
        r->comm = MRD_COLLSTEP_WORLD;
        return 0;
    }
    if (strncmp(s, "0x", 2) == 0 || strncmp(s, "0X", 2) == 0) {
        char *end;
        errno = 0;
        unsigned long long h = strtoull(s + 2, &end, 16);
        if (s[2] == '\0' || *end || errno) {
            snprintf(why, why_len, "communicator hash \"%.40s\" is not 1 to 16 hex digits", s);
            return -EINVAL;
        }
        r->comm = MRD_COLLSTEP_HASH;
        r->comm_hash = h;
        return 0;
    }
    if (strlen(s) >= sizeof(r->comm_name)) {
        snprintf(why, why_len, "communicator name longer than %zu bytes", sizeof(r->comm_name) - 1);
        return -EINVAL;
    }
    r->comm = MRD_COLLSTEP_NAMED;
    snprintf(r->comm_name, sizeof(r->comm_name), "%s", s);
    return 0;
}

int mrd_collstep_parse(const char *spec, struct mrd_collstep_rule *r, char *why, size_t why_len)
{
    memset(r, 0, sizeof(*r));
    if (!spec || !*spec)
        return 0;
    const char *at = strchr(spec, '@');
    size_t head = at ? (size_t)(at - spec) : strlen(spec);
    const char *slash = memchr(spec, '/', head);
    size_t flen = slash ? (size_t)(slash - spec) : head;
    if (at && parse_comm(at + 1, r, why, why_len) < 0)
        return -EINVAL;
    if (flen == 4 && strncmp(spec, "auto", 4) == 0) {
        if (slash) {
            snprintf(why, why_len, "'auto' finds N itself: write auto[@COMM], or FUNC/N[@COMM]");
            return -EINVAL;
        }
        r->mode = MRD_COLLSTEP_AUTO;
        snprintf(r->func, sizeof(r->func), "AllReduce");
        return 0;
    }
    const char *f = known_func(spec, flen);
    if (!f) {
        snprintf(why, why_len,
                 "\"%.*s\" is not a collective: one of AllReduce, Broadcast, Reduce, AllGather, "
                 "ReduceScatter, AllToAll, Gather, Scatter, or 'auto' (point-to-point calls "
                 "have no sequence number)",
                 (int)(flen > 40 ? 40 : flen), spec);
        return -EINVAL;
    }
    r->mode = MRD_COLLSTEP_EXPLICIT;
    snprintf(r->func, sizeof(r->func), "%s", f);
    r->every = 1;
    if (slash) {
        const char *n = slash + 1;
        size_t nlen = head - flen - 1;
        char buf[16];
        unsigned long long v = 0;
        size_t i = 0;
        for (; i < nlen && n[i] >= '0' && n[i] <= '9' && v <= EVERY_MAX; i++)
            v = v * 10 + (unsigned)(n[i] - '0');
        if (nlen == 0 || i != nlen || v < 1 || v > EVERY_MAX) {
            snprintf(buf, sizeof(buf), "%.*s", (int)(nlen < 12 ? nlen : 12), n);
            snprintf(why, why_len, "N must be a whole number from 1 to %u, not \"%s\"", EVERY_MAX,
                     buf);
            memset(r, 0, sizeof(*r));
            return -EINVAL;
        }
        r->every = v;
    }
    return 0;
}

void mrd_collstep_format(const struct mrd_collstep_rule *r, char *out, size_t n)
{
    char comm[96];
    if (r->comm == MRD_COLLSTEP_NAMED)
        snprintf(comm, sizeof(comm), "@%s", r->comm_name);
    else if (r->comm == MRD_COLLSTEP_HASH)
        snprintf(comm, sizeof(comm), "@0x%llx", (unsigned long long)r->comm_hash);
    else
        snprintf(comm, sizeof(comm), "@world");
    if (r->mode == MRD_COLLSTEP_OFF)
        snprintf(out, n, "off");
    else if (r->mode == MRD_COLLSTEP_AUTO)
        snprintf(out, n, "auto%s", comm);
    else
        snprintf(out, n, "%s/%llu%s", r->func, (unsigned long long)r->every, comm);
}

int mrd_collstep_func_is(const struct mrd_collstep_rule *r, const char *func)
{
    return func && strcasecmp(func, r->func) == 0;
}

void mrd_collstep_detect_reset(struct mrd_collstep_detect *d)
{
    memset(d, 0, sizeof(*d));
}

uint64_t mrd_collstep_key(uint64_t count, const char *datatype)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the count's bytes and the name */
    for (int i = 0; i < 8; i++) {
        h ^= (count >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    for (const char *p = datatype ? datatype : ""; *p; p++) {
        h ^= (uint8_t)*p;
        h *= 1099511628211ull;
    }
    return h;
}

/* The locked detector: a step begins at every P-th AllReduce from the anchor, from the
 * first one after the lock. */
static int locked_feed(const struct mrd_collstep_detect *d, uint64_t seq)
{
    return seq >= d->first_step_seq && (seq - d->anchor) % d->period == 0;
}

int mrd_collstep_detect_feed(struct mrd_collstep_detect *d, uint64_t seq, uint64_t key)
{
    if (d->period)
        return locked_feed(d, seq);
    if (d->fed >= MRD_COLLSTEP_SEARCH_MAX)
        return 0; /* gave up: no period in the first MRD_COLLSTEP_SEARCH_MAX AllReduces */
    uint64_t fed = d->fed + 1;
    if (d->n && seq != d->next_seq)
        mrd_collstep_detect_reset(d); /* a gap: the sequence starts again here */
    d->fed = fed;
    /* L(P) for every P, and the smallest P whose periodic suffix is long enough */
    uint64_t pmax = d->n < MRD_COLLSTEP_PERIOD_MAX ? d->n : MRD_COLLSTEP_PERIOD_MAX, lock = 0;
    for (uint64_t p = 1; p <= pmax; p++) {
        uint32_t run = d->key[(d->n - p) & MRD_COLLSTEP_RING_MASK] == key ? d->run[p] + 1 : 0;
        d->run[p] = run;
        if (run && !lock) {
            uint64_t need = MRD_COLLSTEP_REPEATS * p;
            if (need < MRD_COLLSTEP_SPAN_MIN)
                need = MRD_COLLSTEP_SPAN_MIN;
            if (run + p >= need)
                lock = p;
        }
    }
    d->key[d->n & MRD_COLLSTEP_RING_MASK] = key;
    d->n++;
    d->next_seq = seq + 1;
    if (lock) {
        uint64_t suffix = d->run[lock] + lock;
        d->period = lock;
        d->anchor = seq + 1 - suffix;
        d->first_step_seq = d->anchor + (suffix + lock - 1) / lock * lock;
    }
    return 0;
}
