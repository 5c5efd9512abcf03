/* Canonical event checksums: one number per rank that the sender and the database verifier
 * compute independently and compare.
 *
 * Where it sits: the load generator (launcher/replay) hashes every event it hands to the
 * batch builder; the verifier (tests/integration/verify.c) reads the same events back from
 * the aggregator's SQLite database and hashes them the same way. Nothing here depends on the
 * wire format or on the aggregator's code, so a bug in either shows up as a mismatch.
 *
 * Canonical form: the kind's tag then every field stored in the database, in a fixed order
 * (the order of mrd_canon_text), each as a 64-bit word after conversion to the event
 * struct's type (unsigned fields zero-extended, signed ones sign-extended), and each string
 * as the hash of its value (mrd_canon_str_hash; id 0, unknown and "" all count as "none").
 * Fields the schema documents as "none" in two ways (p2p seq 0 vs NULL) are normalised
 * first. The event's hash mixes those words (64-bit multiply-rotate rounds and a final
 * avalanche); a rank's checksum is the sum (mod 2^64) of its events' hashes: order does not
 * matter (the tables keep no batch order), while a missing, changed or duplicated event
 * changes it. mrd_canon_text prints the same fields as one text line, for diffing.
 *
 * Workload: millions of events per test and benchmark on the same 2 cores as the aggregator:
 * hashing is ~20 word rounds per event (tens of ns), strings hashed once per id by the
 * caller's cache. No allocation. Thread-safe (no state).
 */
#ifndef MRD_CANON_H
#define MRD_CANON_H

#include <stdint.h>

#include "events.h"

/* Resolves a string id of the event's space (agent-local ids on the sender, strings.id in
 * the database) to its value; returns NULL when unknown (hashed as the empty string). */
typedef const char *(*mrd_canon_resolve_fn)(void *ctx, uint32_t id);

/* Any one event, tagged with its enum mrd_event_kind. */
struct mrd_canon_event {
    int kind;
    union mrd_any_event u; /* events.h */
};

/* Returns the hash of a string id's value for the canonical form: mrd_canon_str_hash(value)
 * of the id's string, 0 for id 0 or an unknown id. Callers cache it per id. */
typedef uint64_t (*mrd_canon_strhash_fn)(void *ctx, uint32_t id);

/* Hash of a string value: 0 for NULL and "", otherwise a 64-bit hash of its bytes. */
uint64_t mrd_canon_str_hash(const char *s);

/* Returns the hash of the canonical form of *e (0 for an unknown kind). strhash may be NULL
 * when the event carries no strings. Any thread. */
uint64_t mrd_canon_hash(const struct mrd_canon_event *e, mrd_canon_strhash_fn strhash, void *ctx);

/* Writes the canonical text of *e (NUL-terminated, truncated to cap) into buf; returns its
 * length, or -EINVAL for an unknown kind. For diagnostics and tests. */
int mrd_canon_text(const struct mrd_canon_event *e, mrd_canon_resolve_fn resolve, void *ctx,
                   char *buf, int cap);

/* Strings by id with their hashes (mrd_canon_str_hash), the table behind a sender's
 * resolve and strhash callbacks: pass mrd_canon_strings_get / mrd_canon_strings_hash with
 * the table as ctx. Ids are small dense integers (a batch builder's or a capture's); the
 * table copies each string. Zero-initialize it; free it with mrd_canon_strings_free. */
struct mrd_canon_strings {
    char **str;
    uint64_t *hash;
    uint32_t n; /* ids 0..n-1 have slots */
};

/* Sets id's string to a copy of s (NULL: ""), replacing an earlier one. The table grows
 * to twice the id, at most to `max` slots. Returns 0, -MRD_ERR_MALFORMED (id 0 or
 * id >= max) or -ENOMEM (the table as it was). */
int mrd_canon_strings_put(struct mrd_canon_strings *t, uint32_t id, const char *s,
                          uint32_t max);
/* id's string, NULL when it has none (mrd_canon_resolve_fn). */
const char *mrd_canon_strings_get(void *table, uint32_t id);
/* id's string hash, 0 when it has none (mrd_canon_strhash_fn). */
uint64_t mrd_canon_strings_hash(void *table, uint32_t id);
/* Frees the strings and the slots; the table is empty again. NULL is accepted. */
void mrd_canon_strings_free(struct mrd_canon_strings *t);

/* FNV-1a 64 of n bytes, continuing from h (start with MRD_CANON_FNV_INIT). */
#define MRD_CANON_FNV_INIT 0xcbf29ce484222325ull
uint64_t mrd_canon_fnv1a(uint64_t h, const void *p, uint64_t n);

#endif
