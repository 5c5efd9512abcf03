/* Internal to `meridian merge` (merge.c copies, merge_check.c validates): what the merge
 * does with each table and column of the schema, and one shard as validation read it.
 * Not for other modules: their entry point is cli.h's mrd_cli_merge_shards. Main thread. */
#ifndef MRD_MERGE_H
#define MRD_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#define MRD__MERGE_MAX_RANKS (1 << 20) /* distinct ranks per shard; more is refused */
#define MRD__MERGE_MAX_COLS  64        /* columns per table; a wider table is refused */

/* What the merge does with each table of the schema. A table of this build's schema that
 * is not listed in mrd__merge_tables makes every merge fail: a new table must be decided. */
enum mrd__merge_policy {
    MRD__MERGE_VERSION, /* schema_version: written fresh */
    MRD__MERGE_RUN,     /* runs: one row, the base shard's anchors */
    MRD__MERGE_STRINGS, /* strings: values inserted, ids mapped per shard */
    MRD__MERGE_COPY,    /* rank-keyed rows: copied (ranks are disjoint across shards) */
    MRD__MERGE_SUM,     /* aggregator_counters: summed by name */
    MRD__MERGE_SKIP,    /* written by the finalize from the merged data: not copied */
};

struct mrd__merge_table {
    const char *name;
    enum mrd__merge_policy pol;
};

/* Every table the merge knows, in copy order. */
extern const struct mrd__merge_table mrd__merge_tables[];
extern const size_t mrd__merge_ntables;

/* One shard database, filled by mrd__merge_validate; the caller frees run_id, boot_id,
 * command and ranks. */
struct mrd__merge_shard {
    const char *path;
    sqlite3 *db; /* read-only; open only while validating */
    int64_t shard_id, ar, am, created, world;
    int has_world;
    char *run_id, *boot_id, *command;
    int64_t delta;  /* added to its global-timebase columns */
    int64_t *ranks; /* sorted, distinct: every rank of any rank-keyed table */
    size_t nranks, cap;
};

/* 1 when table.column holds strings.id (rewritten through the shard's string map). */
int mrd__merge_is_string_col(const char *table, const char *column);

/* 1 when table.column is on the aggregator's global timebase (shifted by the delta). */
int mrd__merge_is_global_col(const char *table, const char *column);

/* Column names of `schema`.`table` (schema "main" or an attached name), in order, into
 * cols[] (at most cap, each malloc'ed: mrd__merge_free_cols). Returns the count (0: no
 * such table) or -1. */
int mrd__merge_table_columns(sqlite3 *db, const char *schema, const char *table, char **cols,
                             int cap);
void mrd__merge_free_cols(char **cols, int n);

/* Checks this build's schema against the tables above, reads and checks every shard
 * (sh[k].path set; read-only), checks them against each other, orders sh by shard id (the
 * lowest is the base: its anchors are the merged timebase) and sets each delta. Writes
 * nothing; logs the reason of a refusal. Returns 0 or -1. */
int mrd__merge_validate(struct mrd__merge_shard *sh, int n, const char *out, FILE *log,
                        const char *who);

#endif
