/* Canonical event form and checksums (see canon.h for the contract and the format).
 *
 * Used on both sides of the end-to-end check: the load generator as it builds batches, the
 * verifier as it reads the database. The hash works on 64-bit words (no formatting: the
 * generator must stay cheap next to the aggregator it loads); strings enter as the hash of
 * their value so that agent-local ids and database ids hash the same. The text form is for
 * humans diffing a mismatch and lists the same fields in the same order.
 */
#include "canon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "error.h"

uint64_t mrd_canon_fnv1a(uint64_t h, const void *p, uint64_t n)
{
    const unsigned char *s = p;
    for (uint64_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static const char *str(mrd_canon_resolve_fn resolve, void *ctx, uint32_t id)
{
    const char *s = (id && resolve) ? resolve(ctx, id) : NULL;
    return s ? s : "";
}

/* One canonical word of an event: its value as a 64-bit word (unsigned fields
 * zero-extended, signed ones sign-extended; a string field its id), the separator before it
 * in the text and how the text prints it ('i' int64, 'u' uint64, 'w' uint32, 'n' int32,
 * 's' string id). */
struct word {
    uint64_t v;
    char sep, fmt;
};

#define MAX_WORDS 32

/* Every kind's words in canonical order, generated from its field list (proto/kinds.h:
 * each field lands at its canonical position). Returns how many. */
#define FMT_OF(x) _Generic((x), int64_t: 'i', uint64_t: 'u', uint32_t: 'w', int32_t: 'n')
#define WVAL_INT(m) (uint64_t)e->m
#define WVAL_NN(m) (uint64_t)e->m
#define WVAL_GNN(m) (uint64_t)e->m
#define WVAL_P2PNULL(m) (e->is_p2p ? 0 : (uint64_t)e->m) /* the schema stores NULL, the wire 0 */
#define WORD_STR(cls, m, sep) (struct word){(uint64_t)e->m, sep, 's'}
#define WORD_PLAIN(cls, m, sep) (struct word){WVAL_##cls(m), sep, FMT_OF(e->m)}
#define WORD_DELTA(cls, m, sep) WORD_PLAIN(cls, m, sep)
#define WORD_DUR(cls, m, sep) WORD_PLAIN(cls, m, sep)
#define WORD(K, m, sql, cls, num, wire, codec, arg, pos, sep) w[pos] = WORD_##codec(cls, m, sep);
#define WORD_ONE(K, m, sql, cls, num, wire, codec, arg, pos, sep) +1
#define WORDS_KIND(E, v, fn, T, u, bm, C, d, t, tag)                                               \
    _Static_assert(0 MRD__FIELDS(fn, WORD_ONE) <= MAX_WORDS, #fn ": too many fields");             \
    static int words_##fn(const T *e, struct word *w)                                              \
    {                                                                                              \
        MRD__FIELDS(fn, WORD)                                                                      \
        return 0 MRD__FIELDS(fn, WORD_ONE);                                                        \
    }
MRD_KINDS(WORDS_KIND)

/* The words of *e into w[], its text tag into *tag; 0 for an unknown kind. */
static int words(const struct mrd_canon_event *e, struct word *w, const char **tag)
{
    switch (e->kind) {
#define WORDS_CASE(E, v, fn, T, um, bm, C, d, t, tg)                                                \
    case E:                                                                                        \
        *tag = tg;                                                                                 \
        return words_##fn(&e->u.um, w);
        MRD_KINDS(WORDS_CASE)
    default:
        return 0;
    }
}

int mrd_canon_text(const struct mrd_canon_event *e, mrd_canon_resolve_fn resolve, void *ctx,
                   char *buf, int cap)
{
    struct word w[MAX_WORDS];
    const char *tag = "";
    int nw = words(e, w, &tag);
    if (nw == 0) {
        if (cap > 0)
            buf[0] = '\0';
        return -EINVAL;
    }
    int n = snprintf(buf, cap, "%s", tag);
    for (int i = 0; i < nw && n >= 0; i++) {
        char *p = n < cap ? buf + n : NULL;
        size_t room = n < cap ? (size_t)(cap - n) : 0;
        int k;
        switch (w[i].fmt) {
        case 'i':
            k = snprintf(p, room, "%c%" PRId64, w[i].sep, (int64_t)w[i].v);
            break;
        case 'u':
            k = snprintf(p, room, "%c%" PRIu64, w[i].sep, w[i].v);
            break;
        case 'w':
            k = snprintf(p, room, "%c%u", w[i].sep, (uint32_t)w[i].v);
            break;
        case 'n':
            k = snprintf(p, room, "%c%d", w[i].sep, (int32_t)(uint32_t)w[i].v);
            break;
        default:
            k = snprintf(p, room, "%c%s", w[i].sep, str(resolve, ctx, (uint32_t)w[i].v));
            break;
        }
        n = k < 0 ? k : n + k;
    }
    if (n < 0)
        return -EINVAL;
    return n < cap ? n : cap - 1;
}

uint64_t mrd_canon_str_hash(const char *s)
{
    if (!s || !*s)
        return 0;
    uint64_t h = mrd_canon_fnv1a(MRD_CANON_FNV_INIT, s, strlen(s));
    return h ? h : 1; /* 0 means "none" */
}

#define K1 0x9e3779b97f4a7c15ull
#define K2 0xc2b2ae3d27d4eb4full

static inline uint64_t round64(uint64_t h, uint64_t w)
{
    h ^= w * K1;
    h = (h << 31) | (h >> 33);
    return h * K2;
}

static inline uint64_t avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

uint64_t mrd_canon_hash(const struct mrd_canon_event *e, mrd_canon_strhash_fn strhash, void *ctx)
{
    struct word w[MAX_WORDS];
    const char *tag;
    int nw = words(e, w, &tag);
    if (nw == 0)
        return 0;
    uint64_t h = 0x6d72642d63616e6full; /* "mrd-cano" */
    h = round64(h, (uint64_t)e->kind);
    for (int i = 0; i < nw; i++) {
        uint64_t v = w[i].v;
        if (w[i].fmt == 's')
            v = v && strhash ? strhash(ctx, (uint32_t)v) : 0;
        h = round64(h, v);
    }
    return avalanche(h);
}

int mrd_canon_strings_put(struct mrd_canon_strings *t, uint32_t id, const char *s,
                          uint32_t max)
{
    if (id == 0 || id >= max)
        return -MRD_ERR_MALFORMED;
    if (id >= t->n) {
        uint32_t n = id < max / 2 ? id * 2 : max;
        int rc = mrd_array_extend(&t->str, t->n, n, sizeof(*t->str));
        if (rc == 0)
            rc = mrd_array_extend(&t->hash, t->n, n, sizeof(*t->hash));
        if (rc < 0)
            return rc;
        t->n = n;
    }
    char *copy = strdup(s ? s : "");
    if (!copy)
        return -ENOMEM;
    free(t->str[id]);
    t->str[id] = copy;
    t->hash[id] = mrd_canon_str_hash(copy);
    return 0;
}

const char *mrd_canon_strings_get(void *table, uint32_t id)
{
    struct mrd_canon_strings *t = table;
    return id < t->n ? t->str[id] : NULL;
}

uint64_t mrd_canon_strings_hash(void *table, uint32_t id)
{
    struct mrd_canon_strings *t = table;
    return id < t->n ? t->hash[id] : 0;
}

void mrd_canon_strings_free(struct mrd_canon_strings *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        free(t->str[i]);
    free(t->str);
    free(t->hash);
    memset(t, 0, sizeof(*t));
}
