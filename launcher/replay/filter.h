/* Kind filter for capture replay: re-send only some event kinds of a recorded capture.
 *
 * Where it sits: rank.c applies it to each decoded capture batch before re-encoding. Used to
 * measure the wire cost of one kind on real data (e.g. `--kinds kernel`: wire bytes per
 * kernel event of a GPU capture) and to load an aggregator with a chosen mix.
 *
 * A filtered batch keeps the column groups of the chosen kinds, its counters, and only the
 * string definitions that some kept event of the capture references (found by a first pass
 * over the whole capture: a definition can precede its first use by batches). Memory: one
 * bit per possible string id (MRD_FILTER_MAX_ID / 8 bytes). Not thread-safe.
 */
#ifndef MRD_FILTER_H
#define MRD_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "events.h" /* MRD_EV__COUNT */
#include "meridian.pb-c.h"

#define MRD_FILTER_MAX_ID (1u << 20)

struct mrd_filter {
    uint32_t kinds; /* bit k set: keep enum mrd_event_kind k; 0 = no filter */
    uint8_t *used;  /* bitmap of string ids referenced by kept events */
};

/* What mrd_filter_apply changed, to undo before the batch is freed. */
struct mrd_filter_saved {
    void *groups[MRD_EV__COUNT];
    Meridian__V1__StringDef **strings;
    size_t n_strings;
    Meridian__V1__StringDef **kept; /* malloc'd array of the kept definitions */
    int applied;
};

/* Parses "kernel,memcpy,..." (names of mrd_event_kind_name) into a kind mask.
 * Returns 0, or -EINVAL naming nothing known. */
int mrd_filter_parse(const char *list, uint32_t *kinds);

/* First pass: reads the capture and marks the string ids kept events use.
 * Returns 0 or a negative error of mrd_capfile_*; -ENOMEM. */
int mrd_filter_scan(struct mrd_filter *f, const char *capture_path, uint32_t max_frame);

/* Removes other kinds' groups and unused string definitions from a checked batch.
 * Returns 0 or -ENOMEM (then nothing changed). Undo with mrd_filter_restore. */
int mrd_filter_apply(const struct mrd_filter *f, Meridian__V1__Batch *m,
                     struct mrd_filter_saved *sv);
void mrd_filter_restore(Meridian__V1__Batch *m, struct mrd_filter_saved *sv);

/* Frees the bitmap. Accepts NULL. */
void mrd_filter_free(struct mrd_filter *f);

#endif
