/* meridian batch builder, part 2: the string table (string -> id 1..N).
 *
 * Owned by one batch builder (batch.c) on the agent's flusher thread: every kernel, NVTX,
 * API, NCCL and MPI name goes through mrd__strtab_intern() once per event, so a lookup of
 * a known string hashes it and compares it once, without allocating. A training job has
 * tens to a few thousand distinct names; the table is capped at MRD__STRTAB_MAX strings
 * and MRD__STRTAB_MAX_BYTES bytes, after which intern returns 0 ("none"). Strings are
 * stored cut to 4096 bytes at a UTF-8 character boundary, with invalid bytes replaced by
 * '?', because the wire type (protobuf string) must be UTF-8. Not thread-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "batch_internal.h"

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Length of the valid UTF-8 sequence starting at p (at most n bytes), 0 if invalid. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    size_t len;
    uint32_t cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, cp = p[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* Length of s once cut to MRD__BATCH_MAX_STRLEN bytes, backed off to a character
 * boundary so the cut never splits a UTF-8 sequence. */
static size_t cut_len(const char *s)
{
    size_t n = strnlen(s, MRD__BATCH_MAX_STRLEN + 1);

    if (n <= MRD__BATCH_MAX_STRLEN)
        return n;
    n = MRD__BATCH_MAX_STRLEN;
    while (n > 0 && ((uint8_t)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

static int utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k) {
        k = utf8_seq((const uint8_t *)s + i, n - i);
        if (k == 0)
            return 0;
    }
    return 1;
}

/* Copies s[0..n) with every byte that does not start a valid UTF-8 sequence replaced by
 * '?' (protobuf strings must be UTF-8; NVTX names from applications need not be). */
static char *sanitize(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (!d)
        return NULL;
    for (size_t i = 0, k; i < n; i += k) {
        k = utf8_seq((const uint8_t *)s + i, n - i);
        if (k == 0) {
            d[i] = '?';
            k = 1;
        } else {
            memcpy(d + i, s + i, k);
        }
    }
    d[n] = '\0';
    return d;
}

static int slots_grow(struct mrd__strtab *t)
{
    uint32_t ncap = t->slots ? (t->slot_mask + 1) * 2 : 256;
    uint32_t *ns = calloc(ncap, sizeof(*ns));

    if (!ns)
        return -ENOMEM;
    for (uint32_t id = 1; id <= t->n; id++) {
        uint32_t j = (uint32_t)t->str[id].hash & (ncap - 1);

        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = id;
    }
    free(t->slots);
    t->slots = ns;
    t->slot_mask = ncap - 1;
    return 0;
}

/* Returns the id of s, interning a copy cut to 4096 bytes at a character boundary with
 * invalid UTF-8 bytes replaced by '?'; lookups of known strings do not allocate. 0 for
 * NULL, on allocation failure, or once t holds MRD__STRTAB_MAX strings or
 * MRD__STRTAB_MAX_BYTES bytes (policy at the cap: the caller's event carries "no
 * string"). */
uint32_t mrd__strtab_intern(struct mrd__strtab *t, const char *s)
{
    size_t len;
    char *copy = NULL;
    const char *key = s;
    uint64_t h;
    uint32_t j;

    if (!s)
        return 0;
    len = cut_len(s);
    if (!utf8_valid(s, len)) {
        copy = sanitize(s, len);
        if (!copy)
            return 0;
        key = copy;
    }
    h = hash_bytes(key, len);
    if (t->slots) {
        for (j = (uint32_t)h & t->slot_mask; t->slots[j]; j = (j + 1) & t->slot_mask) {
            const struct mrd__string *e = &t->str[t->slots[j]];

            if (e->hash == h && e->len == len && memcmp(e->s, key, len) == 0) {
                free(copy);
                return t->slots[j];
            }
        }
    }
    if (t->n >= MRD__STRTAB_MAX || t->bytes + len > MRD__STRTAB_MAX_BYTES)
        goto fail; /* full: checked before copying, so a full table costs no allocation */
    if (!copy) {
        copy = malloc(len + 1);
        if (!copy)
            return 0;
        memcpy(copy, s, len);
        copy[len] = '\0';
    }
    if (t->n + 1 >= t->cap) {
        uint32_t ncap = t->cap ? t->cap * 2 : 64;
        struct mrd__string *ns = realloc(t->str, ncap * sizeof(*ns));

        if (!ns)
            goto fail;
        t->str = ns;
        t->cap = ncap;
    }
    if ((!t->slots || (t->n + 1) * 2 > t->slot_mask + 1) && slots_grow(t) < 0)
        goto fail;
    t->n++;
    t->str[t->n] = (struct mrd__string){.s = copy, .len = (uint32_t)len, .hash = h};
    t->bytes += len;
    for (j = (uint32_t)h & t->slot_mask; t->slots[j]; j = (j + 1) & t->slot_mask)
        ;
    t->slots[j] = t->n;
    return t->n;

fail:
    free(copy);
    return 0;
}

/* Frees every string and the table's arrays; t is left empty and reusable. */
void mrd__strtab_clear(struct mrd__strtab *t)
{
    for (uint32_t i = 1; i <= t->n; i++)
        free(t->str[i].s);
    free(t->str);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}
