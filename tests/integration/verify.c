/* mrd-verify: checks a meridian database against the load generator's per-rank report.
 *
 * Where it sits: the last step of every integration test and of the ingest benchmark.
 * `meridian replay --report FILE` wrote, per rank, the number of events it sent by kind and
 * a checksum computed by the sender (launcher/replay/canon.h); this program reads every
 * event table of the database, hashes each row the same way (string ids resolved through
 * the strings table), and compares count per kind and checksum per rank. It also checks the
 * batches table (one row per batch, the seqs sent, nothing twice) and the goodbye flag.
 *
 * Workload: databases of a few million rows, read with one full scan per table; memory is
 * the strings table plus a few counters per rank (ranks < 1,048,576).
 *
 * Exit status: 0 when everything matches, 1 on a mismatch, 2 on usage or I/O errors.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "canon.h"

#define MAX_RANKS     (1u << 20)
#define MAX_STRING_ID (1u << 26)

enum col_type { C_I64, C_U64, C_U32, C_I32 };
struct col {
    const char *name;
    size_t off; /* in struct mrd_canon_event */
    enum col_type type;
};
struct table {
    const char *name;
    int kind;
    struct col cols[24];
};

/* Every event table, generated from proto/kinds.h: its columns after rank, each read into
 * its event struct member with that member's type. */
#define EV_TYPEDEF(E, v, fn, T, u, bm, C, d, t, tag) typedef T ev_##fn;
MRD_KINDS(EV_TYPEDEF)
#define COL_TYPE(x) _Generic((x), int64_t: C_I64, uint64_t: C_U64, uint32_t: C_U32, int32_t: C_I32)
#define COL(K, m, sql, cls, num, wire, codec, arg, pos, sep)                                       \
    {sql, offsetof(struct mrd_canon_event, u) + offsetof(ev_##K, m),                              \
     COL_TYPE(((ev_##K *)0)->m)},
#define TABLE(E, v, fn, T, u, bm, C, d, t, tag) {t, E, {MRD__FIELDS(fn, COL)}},

static const struct table tables[] = {MRD_KINDS(TABLE)};
#define N_TABLES (sizeof tables / sizeof tables[0])

struct tally {
    int in_report;
    uint64_t events, checksum, batches, first_seq, last_seq, acked_events, acked_checksum, dup_acks;
    uint64_t by_kind[MRD_EV__COUNT];
    int ok_status;
    /* from the database */
    uint64_t db_events, db_checksum, db_batches, db_min_seq, db_max_seq, db_batch_events;
    uint64_t db_by_kind[MRD_EV__COUNT];
    int db_goodbye;
};

struct strings {
    char **v;
    uint64_t *h; /* mrd_canon_str_hash of v[i] */
    uint64_t n;
};

static const char *resolve(void *ctx, uint32_t id)
{
    struct strings *s = ctx;
    return id < s->n ? s->v[id] : NULL;
}

static uint64_t resolve_hash(void *ctx, uint32_t id)
{
    struct strings *s = ctx;
    return id < s->n ? s->h[id] : 0;
}

static uint64_t kv(const char *line, const char *key, int hex, int *found)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat), *val = NULL;
    if (p)
        val = p + strlen(pat);
    else if (strncmp(line, pat + 1, strlen(pat + 1)) == 0) /* first key of the line */
        val = line + strlen(pat + 1);
    if (found)
        *found = val != NULL;
    return val ? strtoull(val, NULL, hex ? 16 : 10) : 0;
}

static int read_report(const char *path, struct tally *t, uint32_t *nranks)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    if (!f) {
        fprintf(stderr, "mrd-verify: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        int found;
        uint64_t r = kv(line, "rank", 0, &found);
        if (!found)
            continue;
        if (r >= MAX_RANKS || t[r].in_report) {
            fprintf(stderr, "mrd-verify: bad or repeated rank %" PRIu64 " in report\n", r);
            fclose(f);
            return -1;
        }
        struct tally *x = &t[r];
        x->in_report = 1;
        x->events = kv(line, "events", 0, NULL);
        x->checksum = kv(line, "checksum", 1, NULL);
        x->batches = kv(line, "batches", 0, NULL);
        int has_seq;
        x->last_seq = kv(line, "last_seq", 0, &has_seq);
        x->first_seq = has_seq ? kv(line, "first_seq", 0, NULL) : 1;
        if (!has_seq)
            x->last_seq = x->batches;
        x->acked_events = kv(line, "acked_events", 0, NULL);
        x->acked_checksum = kv(line, "acked_checksum", 1, NULL);
        x->dup_acks = kv(line, "dup_acks", 0, NULL);
        x->ok_status = strstr(line, "status=ok") != NULL;
        for (int k = 1; k < MRD_EV__COUNT; k++) {
            char key[32];
            snprintf(key, sizeof key, "n_%s", mrd_event_kind_name(k));
            x->by_kind[k] = kv(line, key, 0, NULL);
        }
        if (r + 1 > *nranks)
            *nranks = (uint32_t)r + 1;
    }
    fclose(f);
    return 0;
}

static int load_strings(sqlite3 *db, struct strings *s)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT id, value FROM strings", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        if (id <= 0 || id >= MAX_STRING_ID)
            continue; /* cannot be referenced by a uint32 column we hash anyway */
        if ((uint64_t)id >= s->n) {
            uint64_t n = (uint64_t)id * 2 + 16;
            char **p = realloc(s->v, n * sizeof *p);
            if (!p)
                break;
            s->v = p;
            uint64_t *h = realloc(s->h, n * sizeof *h);
            if (!h)
                break;
            s->h = h;
            memset(p + s->n, 0, (n - s->n) * sizeof *p);
            memset(h + s->n, 0, (n - s->n) * sizeof *h);
            s->n = n;
        }
        free(s->v[id]);
        s->v[id] = strdup(v ? v : "");
        s->h[id] = mrd_canon_str_hash(v);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static FILE *dump_fp; /* --dump: canonical text of one rank's rows */
static int64_t dump_rank = -1;

static int scan_table(sqlite3 *db, const struct table *tb, struct tally *t, uint32_t nranks,
                      struct strings *strs, uint64_t *stray)
{
    char sql[1024];
    int n = snprintf(sql, sizeof sql, "SELECT rank");
    int ncols = 0;
    for (; ncols < 24 && tb->cols[ncols].name; ncols++)
        n += snprintf(sql + n, sizeof sql - (size_t)n, ", %s", tb->cols[ncols].name);
    snprintf(sql + n, sizeof sql - (size_t)n, " FROM %s", tb->name);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "mrd-verify: %s: %s\n", sql, sqlite3_errmsg(db));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct mrd_canon_event e;
        memset(&e, 0, sizeof e);
        e.kind = tb->kind;
        sqlite3_int64 rank = sqlite3_column_int64(st, 0);
        for (int i = 0; i < ncols; i++) {
            /* NULL reads as 0: "none" is 0 on the wire */
            sqlite3_int64 v = sqlite3_column_int64(st, i + 1);
            char *p = (char *)&e + tb->cols[i].off;
            switch (tb->cols[i].type) {
            case C_I64:
                *(int64_t *)p = v;
                break;
            case C_U64:
                *(uint64_t *)p = (uint64_t)v;
                break;
            case C_U32:
                *(uint32_t *)p = (uint32_t)v;
                break;
            case C_I32:
                *(int32_t *)p = (int32_t)v;
                break;
            }
        }
        if (rank < 0 || (uint64_t)rank >= nranks || !t[rank].in_report) {
            (*stray)++;
            continue;
        }
        struct tally *x = &t[rank];
        x->db_events++;
        x->db_by_kind[tb->kind]++;
        x->db_checksum += mrd_canon_hash(&e, resolve_hash, strs);
        if (dump_fp && rank == dump_rank) {
            char text[1024];
            mrd_canon_text(&e, resolve, strs, text, sizeof text);
            fprintf(dump_fp, "%s\n", text);
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "mrd-verify: reading %s: %s\n", tb->name, sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

static int scan_meta(sqlite3 *db, struct tally *t, uint32_t nranks)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        db, "SELECT rank, count(*), max(seq), sum(events), min(seq) FROM batches GROUP BY rank", -1,
        &st, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 r = sqlite3_column_int64(st, 0);
        if (r >= 0 && (uint64_t)r < nranks) {
            t[r].db_batches = (uint64_t)sqlite3_column_int64(st, 1);
            t[r].db_max_seq = (uint64_t)sqlite3_column_int64(st, 2);
            t[r].db_batch_events = (uint64_t)sqlite3_column_int64(st, 3);
            t[r].db_min_seq = (uint64_t)sqlite3_column_int64(st, 4);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT rank, goodbye FROM ranks", -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto fail;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 r = sqlite3_column_int64(st, 0);
        if (r >= 0 && (uint64_t)r < nranks)
            t[r].db_goodbye = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return 0;
fail:
    fprintf(stderr, "mrd-verify: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return -1;
}

static void print_counters(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name, value FROM aggregator_counters ORDER BY name", -1, &st,
                           NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW)
        printf("aggregator_counter %s=%lld\n", (const char *)sqlite3_column_text(st, 0),
               (long long)sqlite3_column_int64(st, 1));
    sqlite3_finalize(st);
}

static const char usage[] =
    "usage: mrd-verify --db FILE --report FILE [--no-goodbye] [--allow-failed]\n"
    "Compares each rank's events in a meridian database (count per kind, canonical checksum,\n"
    "batches 1..N each once, goodbye flag) with `meridian replay --report FILE`.\n"
    "  --no-goodbye    do not require ranks.goodbye = 1\n"
    "  --allow-failed  ranks whose report says status=error are compared on what they had\n"
    "                  acknowledged: the database must hold at least that many events\n"
    "  --dump-rank R --dump FILE  write the canonical text of rank R's rows to FILE (sort it\n"
    "                  and diff with `meridian-replay --dump FILE` to find a mismatch)\n"
    "Prints aggregator_counters. Exit 0 when all match, 1 on a mismatch, 2 on errors.\n";

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", 1, 0, 'd'},           {"report", 1, 0, 'r'}, {"no-goodbye", 0, 0, 'g'},
        {"allow-failed", 0, 0, 'a'}, {"help", 0, 0, 'h'},   {"dump", 1, 0, 'D'},
        {"dump-rank", 1, 0, 'R'},    {0, 0, 0, 0},
    };
    const char *dbpath = NULL, *report = NULL;
    int want_goodbye = 1, allow_failed = 0, c, status = 2;
    uint32_t nranks = 0, checked = 0, bad = 0;
    uint64_t stray = 0, total = 0;
    struct strings strs = {0};
    sqlite3 *db = NULL;
    struct tally *t = NULL;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dbpath = optarg;
            break;
        case 'r':
            report = optarg;
            break;
        case 'g':
            want_goodbye = 0;
            break;
        case 'a':
            allow_failed = 1;
            break;
        case 'D':
            dump_fp = fopen(optarg, "w");
            if (!dump_fp) {
                perror(optarg);
                return 2;
            }
            break;
        case 'R':
            dump_rank = strtoll(optarg, NULL, 10);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (!dbpath || !report) {
        fputs(usage, stderr);
        return 2;
    }
    t = calloc(MAX_RANKS, sizeof *t);
    if (!t || read_report(report, t, &nranks) < 0)
        goto done;
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "mrd-verify: %s: %s\n", dbpath, db ? sqlite3_errmsg(db) : "no memory");
        goto done;
    }
    sqlite3_busy_timeout(db, 10000);
    if (load_strings(db, &strs) < 0 || scan_meta(db, t, nranks) < 0)
        goto done;
    for (size_t i = 0; i < N_TABLES; i++)
        if (scan_table(db, &tables[i], t, nranks, &strs, &stray) < 0)
            goto done;

    for (uint32_t r = 0; r < nranks; r++) {
        struct tally *x = &t[r];
        if (!x->in_report)
            continue;
        checked++;
        total += x->db_events;
        char why[512] = "";
        size_t n = 0;
#define WHY(...) n += (size_t)snprintf(why + n, n < sizeof why ? sizeof why - n : 0, __VA_ARGS__)
        if (!x->ok_status) {
            if (!allow_failed)
                WHY(" report-status-not-ok");
            else if (x->db_events < x->acked_events)
                WHY(" acked-events-lost(db=%" PRIu64 ",acked=%" PRIu64 ")", x->db_events,
                    x->acked_events);
        } else {
            if (x->db_events != x->events || x->db_checksum != x->checksum)
                WHY(" events(db=%" PRIu64 ",sent=%" PRIu64 ") checksum(db=%016" PRIx64
                    ",sent=%016" PRIx64 ")",
                    x->db_events, x->events, x->db_checksum, x->checksum);
            for (int k = 1; k < MRD_EV__COUNT; k++)
                if (x->db_by_kind[k] != x->by_kind[k])
                    WHY(" %s(db=%" PRIu64 ",sent=%" PRIu64 ")", mrd_event_kind_name(k), x->db_by_kind[k],
                        x->by_kind[k]);
            /* seqs need not start at 1 (the agent starts at its clock), but each batch sent
             * is stored once and nothing else is */
            if (x->db_batches != x->batches || x->db_max_seq != x->last_seq ||
                (x->batches && x->db_min_seq != x->first_seq))
                WHY(" batches(db=%" PRIu64 ",seqs %" PRIu64 "..%" PRIu64 ",sent=%" PRIu64
                    ",seqs %" PRIu64 "..%" PRIu64 ")",
                    x->db_batches, x->db_min_seq, x->db_max_seq, x->batches, x->first_seq,
                    x->last_seq);
            if (want_goodbye && !x->db_goodbye)
                WHY(" no-goodbye");
        }
        if (n) {
            bad++;
            printf("rank %u MISMATCH:%s\n", r, why);
        }
    }
    if (stray) {
        printf("MISMATCH: %" PRIu64 " rows of ranks that are not in the report\n", stray);
        bad++;
    }
    print_counters(db);
    printf("verify: ranks=%u mismatched=%u db_events=%" PRIu64 "\n", checked, bad, total);
    status = bad || checked == 0 ? 1 : 0;
done:
    if (dump_fp)
        fclose(dump_fp);
    if (db)
        sqlite3_close(db);
    for (uint64_t i = 0; i < strs.n; i++)
        free(strs.v[i]);
    free(strs.v);
    free(strs.h);
    free(t);
    return status;
}
