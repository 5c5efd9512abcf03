/* meridian store, the rows: what each submitted item writes into the database.
 *
 * Runs only on the writer thread (store.c), inside the transaction the writer opened.
 * The hot path is mrd__store_write_item for a BATCH: one INSERT OR IGNORE into `batches`
 * (the de-duplication key), the string definitions, then for every event one bind+step of
 * a prepared statement; string ids are mapped (rank, agent instance, local id) ->
 * strings.id through an in-memory hash map. No allocation per row. All SQL text of the
 * store lives in this file (plus schema.sql).
 *
 * Agent processes: string ids and HelloReply.committed_seq belong to one agent process
 * (Hello.agent_instance), not to the rank: a rank's process restarted within a run
 * numbers its strings from 1 again, and an older process of the rank that comes back
 * after a newer one held the rank must neither resolve its ids to the newer one's
 * strings nor drop its queued batches below the newer one's sequence numbers. Ingest
 * lets only one process per rank send at a time (the others are refused while it is
 * connected); the de-duplication key stays (rank, seq).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "error.h"
#include "events.h"
#include "store_internal.h"

/* Each event kind's table and INSERT, generated from its field list (proto/kinds.h): the
 * columns in table order after rank, which is always column 1. */
#define DDL_COL(K, m, sql, cls, num, wire, codec, arg, pos, sep) ",\n    " sql " " MRD__SQL_DECL(cls)
#define EVENT_DDL(E, v, fn, T, u, bm, C, d, t, tag)                                                \
    "\nCREATE TABLE IF NOT EXISTS " t " (\n    rank INTEGER NOT NULL" MRD__FIELDS(fn, DDL_COL)   \
    "\n);\n"
const char mrd__store_event_ddl[] = MRD_KINDS(EVENT_DDL);

#define INSERT_COL(K, m, sql, cls, num, wire, codec, arg, pos, sep) ", " sql
#define INSERT_ARG(K, m, sql, cls, num, wire, codec, arg, pos, sep) ",?"
#define EVENT_INSERT(E, v, fn, T, u, bm, C, d, t, tag)                                             \
    [MRD__ST_EVENT(E)] = "INSERT INTO " t "(rank" MRD__FIELDS(fn, INSERT_COL) ") VALUES(?1"        \
                         MRD__FIELDS(fn, INSERT_ARG) ")",

const char *const mrd__store_sql[MRD__ST__COUNT] = {
    [MRD__ST_BEGIN] = "BEGIN",
    [MRD__ST_COMMIT] = "COMMIT",
    [MRD__ST_ROLLBACK] = "ROLLBACK",
    [MRD__ST_BATCH] = "INSERT OR IGNORE INTO batches(rank, seq, events, wire_bytes, received_ns,"
                      " agent_instance) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    MRD_KINDS(EVENT_INSERT)
    [MRD__ST_STR_FIND] = "SELECT id FROM strings WHERE value = ?1",
    [MRD__ST_STR_INS] = "INSERT INTO strings(value) VALUES(?1)",
    [MRD__ST_RSTR_PUT] = "INSERT OR REPLACE INTO rank_strings(rank, agent_instance, local_id,"
                         " string_id) VALUES(?1,?2,?3,?4)",
    [MRD__ST_RSTR_GET] = "SELECT string_id FROM rank_strings WHERE rank = ?1"
                         " AND agent_instance = ?2 AND local_id = ?3",
    [MRD__ST_AGENT_COUNTER] = "INSERT INTO agent_counters(rank, category, name, value)"
                              " VALUES(?1,?2,?3,?4) ON CONFLICT(rank, category, name)"
                              " DO UPDATE SET value = max(value, excluded.value)",
    [MRD__ST_AGG_COUNTER] = "INSERT INTO aggregator_counters(name, value) VALUES(?1,?2)"
                            " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
    [MRD__ST_RANK_HELLO] =
        "INSERT INTO ranks(rank, local_rank, world_size, host, pid, agent_version,"
        " agent_instance, first_seen_ns, last_seen_ns, goodbye)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?8,0) ON CONFLICT(rank) DO UPDATE SET"
        " local_rank = excluded.local_rank, world_size = excluded.world_size,"
        " host = excluded.host, pid = excluded.pid, agent_version = excluded.agent_version,"
        " agent_instance = excluded.agent_instance, last_seen_ns = excluded.last_seen_ns,"
        " goodbye = 0",
    [MRD__ST_RANK_PROCESS] =
        "INSERT INTO rank_processes(rank, agent_instance, host, pid, first_seen_ns,"
        " last_seen_ns) VALUES(?1,?2,?3,?4,?5,?5) ON CONFLICT(rank, agent_instance) DO UPDATE"
        " SET host = excluded.host, pid = excluded.pid, last_seen_ns = excluded.last_seen_ns",
    [MRD__ST_GPU_PUT] = "INSERT OR REPLACE INTO gpus(rank, device, uuid, pci_bus_id, name)"
                        " VALUES(?1,?2,?3,?4,?5)",
    [MRD__ST_RUN_WORLD] = "UPDATE runs SET world_size = max(coalesce(world_size, 0), ?1)",
    [MRD__ST_RANK_SEEN] = "UPDATE ranks SET last_seen_ns = max(coalesce(last_seen_ns, 0), ?2)"
                          " WHERE rank = ?1",
    [MRD__ST_RANK_GOODBYE] = "UPDATE ranks SET goodbye = 1, last_seen_ns = ?2 WHERE rank = ?1",
    [MRD__ST_MAX_SEQ] = "SELECT coalesce(max(seq), 0) FROM batches WHERE rank = ?1",
    /* walks the (rank, seq) key down from the top: the process's latest batch is near it */
    [MRD__ST_MAX_SEQ_OWN] = "SELECT seq FROM batches WHERE rank = ?1 AND agent_instance = ?2"
                            " ORDER BY seq DESC LIMIT 1",
};

const char *mrd_store_sql_text(enum mrd_store_sql which)
{
    switch (which) {
    case MRD_STORE_SQL_BATCH:
        return mrd__store_sql[MRD__ST_BATCH];
    case MRD_STORE_SQL_STRING_FIND:
        return mrd__store_sql[MRD__ST_STR_FIND];
    case MRD_STORE_SQL_STRING_ADD:
        return mrd__store_sql[MRD__ST_STR_INS];
    case MRD_STORE_SQL_RANK_STRING:
        return mrd__store_sql[MRD__ST_RSTR_PUT];
    }
    return NULL;
}

const char *mrd_store_event_sql(int kind)
{
    return kind > 0 && kind < MRD_EV__COUNT ? mrd__store_sql[MRD__ST_EVENT(kind)] : NULL;
}

/* ---- string map ---- */

static uint64_t strmap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

void mrd__store_strmap_free(struct mrd__strmap *m)
{
    if (!m)
        return;
    free(m->slot);
    m->slot = NULL;
    m->slots = m->n = 0;
}

int mrd__store_strmap_init(struct mrd__strmap *m, size_t max)
{
    memset(m, 0, sizeof(*m));
    m->max = max ? max : 1;
    m->slots = 1024;
    m->slot = calloc(m->slots, sizeof(*m->slot));
    if (!m->slot) {
        mrd__store_strmap_free(m);
        return -ENOMEM;
    }
    return 0;
}

void mrd__store_strmap_clear(struct mrd__strmap *m)
{
    if (m->slot)
        memset(m->slot, 0, m->slots * sizeof(*m->slot));
    m->n = 0;
}

/* The slot holding key (whichever instance owns it), or NULL. */
static struct mrd__strslot *strmap_find(const struct mrd__strmap *m, uint64_t key)
{
    size_t mask = m->slots - 1;
    for (size_t i = strmap_hash(key) & mask;; i = (i + 1) & mask) {
        if (m->slot[i].key == key)
            return &m->slot[i];
        if (m->slot[i].key == 0)
            return NULL;
    }
}

static int strmap_grow(struct mrd__strmap *m)
{
    size_t nslots = m->slots * 2;
    struct mrd__strslot *ns = calloc(nslots, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    for (size_t j = 0; j < m->slots; j++) {
        if (!m->slot[j].key)
            continue;
        size_t i = strmap_hash(m->slot[j].key) & (nslots - 1);
        while (ns[i].key)
            i = (i + 1) & (nslots - 1);
        ns[i] = m->slot[j];
    }
    free(m->slot);
    m->slot = ns;
    m->slots = nslots;
    return 0;
}

/* Binds key to val for instance inst, taking the slot over from another instance of the
 * rank if one owned it; at the entry cap (or when growing fails) the map is emptied
 * first: it is a cache and rank_strings stays the truth. */
static void strmap_put(struct mrd__strmap *m, uint64_t key, uint64_t inst, int64_t val)
{
    struct mrd__strslot *e = strmap_find(m, key);
    if (e) {
        e->inst = inst;
        e->val = val;
        return;
    }
    if (m->n + 1 > m->max)
        mrd__store_strmap_clear(m);
    if ((m->n + 1) * 2 > m->slots && strmap_grow(m) < 0) {
        mrd__store_strmap_clear(m);
        if (m->slots < 2)
            return;
    }
    size_t i = strmap_hash(key) & (m->slots - 1);
    while (m->slot[i].key)
        i = (i + 1) & (m->slots - 1);
    m->slot[i] = (struct mrd__strslot){.key = key, .inst = inst, .val = val};
    m->n++;
}

static uint64_t strkey(uint32_t rank, uint32_t local)
{
    return (((uint64_t)rank << 32) | local) + 1;
}

int mrd__store_strmap_load(struct mrd_store *s)
{
    /* the ids of each rank's latest process (the one most likely to send again) */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT rs.rank, rs.local_id, rs.string_id, rs.agent_instance"
                                " FROM rank_strings rs JOIN ranks r ON r.rank = rs.rank"
                                " AND r.agent_instance = rs.agent_instance",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return mrd__store_sqlite_err(s, rc, "loading rank_strings");
    size_t n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < s->strmap.max) {
        uint32_t rank = (uint32_t)sqlite3_column_int64(st, 0);
        strmap_put(&s->strmap, strkey(rank, (uint32_t)sqlite3_column_int64(st, 1)),
                   (uint64_t)sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 2));
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return mrd__store_sqlite_err(s, rc, "loading rank_strings");
    return 0;
}

/* strings.id for (rank, inst, local id), or 0 (stored as NULL) for id 0 or an undefined
 * id. A cached binding of another instance of the rank is a miss, never an answer. A
 * failed lookup returns 0 too but sets s->string_err (logged), which fails the row
 * (EVENTS) before it is stored: a SQL error is not an undefined id. */
static int64_t string_id(struct mrd_store *s, uint32_t rank, uint64_t inst, uint32_t local)
{
    if (local == 0)
        return 0;
    uint64_t key = strkey(rank, local);
    const struct mrd__strslot *e = strmap_find(&s->strmap, key);
    if (e && e->inst == inst) {
        s->wstats.string_hits++;
        return e->val > 0 ? e->val : 0;
    }
    s->wstats.string_misses++;
    sqlite3_stmt *st = s->st[MRD__ST_RSTR_GET];
    sqlite3_bind_int64(st, 1, rank);
    sqlite3_bind_int64(st, 2, (int64_t)inst);
    sqlite3_bind_int64(st, 3, local);
    int64_t id = -1;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) { /* an error, not an undefined id */
        s->string_err = mrd__store_sqlite_err(s, rc, "rank_strings lookup");
        return 0;
    }
    strmap_put(&s->strmap, key, inst, id);
    if (id <= 0) {
        s->undefined_refs++;
        return 0;
    }
    return id;
}

/* ---- helpers ---- */

#define BIND(st, i, v) sqlite3_bind_int64((st), (i), (int64_t)(v))

static void bind_str_id(sqlite3_stmt *st, int i, int64_t id)
{
    if (id > 0)
        sqlite3_bind_int64(st, i, id);
    else
        sqlite3_bind_null(st, i);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Steps a bound statement to completion and resets it. Returns 0 or -MRD_ERR_SQLITE. */
static int run(struct mrd_store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return mrd__store_sqlite_err(s, rc, what);
    return 0;
}

static int agg_counter(struct mrd_store *s, const char *name, int64_t delta)
{
    sqlite3_stmt *st = s->st[MRD__ST_AGG_COUNTER];
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    BIND(st, 2, delta);
    return run(s, st, "aggregator_counters");
}

static int agent_counter(struct mrd_store *s, uint32_t rank, const char *category, const char *name,
                         uint64_t value)
{
    sqlite3_stmt *st = s->st[MRD__ST_AGENT_COUNTER];
    BIND(st, 1, rank);
    sqlite3_bind_text(st, 2, category, -1, SQLITE_TRANSIENT); /* named: the message's */
    sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    BIND(st, 4, value > INT64_MAX ? INT64_MAX : value);
    return run(s, st, "agent_counters");
}

/* Counter lists keyed by EventKind or DropReason; unknown keys keep their number. */
static int counter_list(struct mrd_store *s, uint32_t rank, const char *category,
                        Meridian__V1__Counter **c, size_t n, int by_kind)
{
    for (size_t i = 0; i < n; i++) {
        char buf[32];
        const char *name =
            by_kind ? mrd_event_kind_name((int)c[i]->key) : mrd_drop_reason_name((int)c[i]->key);
        if (!name || strcmp(name, "unknown") == 0) {
            snprintf(buf, sizeof(buf), "unknown_%u", c[i]->key);
            name = buf;
        }
        int rc = agent_counter(s, rank, category, name, c[i]->value);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Goodbye.named: a name of 1..max bytes of [a-z0-9_]. */
static int counter_word(const char *w, size_t max)
{
    size_t n = 0;
    if (!w)
        return 0;
    for (; w[n]; n++)
        if (n >= max || !((w[n] >= 'a' && w[n] <= 'z') || (w[n] >= '0' && w[n] <= '9') ||
                          w[n] == '_'))
            return 0;
    return n > 0;
}

/* Named counters (CUPTI's overhead, ...) under their own category; the typed categories
 * stay the typed lists' own, odd names are skipped, and at most 64 are taken. */
static int named_counters(struct mrd_store *s, uint32_t rank, Meridian__V1__NamedCounter **c,
                          size_t n)
{
    for (size_t i = 0; i < n && i < 64; i++) {
        const char *cat = c[i]->category, *name = c[i]->name;
        if (!counter_word(cat, 32) || !counter_word(name, 64) || !strcmp(cat, "captured") ||
            !strcmp(cat, "dropped") || !strcmp(cat, "transport"))
            continue;
        int rc = agent_counter(s, rank, cat, name, c[i]->value);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- items ---- */

/* HelloReply.committed_seq: the highest seq committed from this agent process, so that it
 * drops exactly its own committed batches; a process with none committed gets the rank's
 * highest (a restarted process moves its numbering past its predecessor's). */
static int committed_seq(struct mrd_store *s, struct mrd_store_item *it)
{
    sqlite3_stmt *st = s->st[MRD__ST_MAX_SEQ_OWN];
    BIND(st, 1, it->rank);
    BIND(st, 2, it->agent_instance);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        it->committed_seq = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (r == SQLITE_ROW)
        return 0;
    if (r != SQLITE_DONE)
        return mrd__store_sqlite_err(s, r, "max(seq) of the agent process");
    st = s->st[MRD__ST_MAX_SEQ];
    BIND(st, 1, it->rank);
    r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        it->committed_seq = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return r == SQLITE_ROW ? 0 : mrd__store_sqlite_err(s, r, "max(seq)");
}

static int write_hello(struct mrd_store *s, struct mrd_store_item *it)
{
    const Meridian__V1__Hello *h = (const Meridian__V1__Hello *)it->msg;
    sqlite3_stmt *st = s->st[MRD__ST_RANK_HELLO];
    BIND(st, 1, h->rank);
    BIND(st, 2, h->local_rank);
    BIND(st, 3, h->world_size);
    bind_text(st, 4, h->host);
    BIND(st, 5, h->pid);
    bind_text(st, 6, h->agent_version);
    BIND(st, 7, h->agent_instance);
    BIND(st, 8, it->received_ns);
    int rc = run(s, st, "ranks");
    if (rc == 0) {
        st = s->st[MRD__ST_RANK_PROCESS];
        BIND(st, 1, h->rank);
        BIND(st, 2, h->agent_instance);
        bind_text(st, 3, h->host);
        BIND(st, 4, h->pid);
        BIND(st, 5, it->received_ns);
        rc = run(s, st, "rank_processes");
    }
    for (size_t i = 0; rc == 0 && i < h->n_gpus; i++) {
        st = s->st[MRD__ST_GPU_PUT];
        BIND(st, 1, h->rank);
        BIND(st, 2, h->gpus[i]->device);
        bind_text(st, 3, h->gpus[i]->uuid);
        bind_text(st, 4, h->gpus[i]->pci_bus_id);
        bind_text(st, 5, h->gpus[i]->name);
        rc = run(s, st, "gpus");
    }
    if (rc == 0) {
        st = s->st[MRD__ST_RUN_WORLD];
        BIND(st, 1, h->world_size);
        rc = run(s, st, "runs.world_size");
    }
    if (rc == 0)
        rc = committed_seq(s, it);
    return rc;
}

static int write_goodbye(struct mrd_store *s, struct mrd_store_item *it)
{
    const Meridian__V1__Goodbye *g = (const Meridian__V1__Goodbye *)it->msg;
    int rc = counter_list(s, it->rank, "captured", g->captured, g->n_captured, 1);
    if (rc == 0)
        rc = counter_list(s, it->rank, "dropped", g->dropped, g->n_dropped, 0);
    if (rc == 0)
        rc = agent_counter(s, it->rank, "transport", "bytes_sent", g->bytes_sent);
    if (rc == 0)
        rc = agent_counter(s, it->rank, "transport", "batches_sent", g->batches_sent);
    if (rc == 0)
        rc = agent_counter(s, it->rank, "transport", "batches_resent", g->batches_resent);
    if (rc == 0)
        rc = agent_counter(s, it->rank, "transport", "last_seq", g->last_seq);
    if (rc == 0)
        rc = named_counters(s, it->rank, g->named, g->n_named);
    if (rc == 0) {
        sqlite3_stmt *st = s->st[MRD__ST_RANK_GOODBYE];
        BIND(st, 1, it->rank);
        BIND(st, 2, it->received_ns);
        rc = run(s, st, "ranks.goodbye");
    }
    return rc;
}

static int write_strings(struct mrd_store *s, uint32_t rank, uint64_t inst,
                         const Meridian__V1__Batch *b)
{
    for (size_t i = 0; i < b->n_strings; i++) {
        const Meridian__V1__StringDef *d = b->strings[i];
        if (d->id == 0 || !d->value)
            continue;
        sqlite3_stmt *st = s->st[MRD__ST_STR_FIND];
        sqlite3_bind_text(st, 1, d->value, -1, SQLITE_STATIC);
        int64_t id = 0;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            id = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return mrd__store_sqlite_err(s, rc, "strings lookup");
        if (id == 0) {
            st = s->st[MRD__ST_STR_INS];
            sqlite3_bind_text(st, 1, d->value, -1, SQLITE_STATIC);
            if ((rc = run(s, st, "strings")) < 0)
                return rc;
            id = sqlite3_last_insert_rowid(s->db);
        }
        uint64_t key = strkey(rank, d->id);
        const struct mrd__strslot *cached = strmap_find(&s->strmap, key);
        if (cached && cached->inst == inst && cached->val == id)
            continue; /* this process's binding is stored already */
        st = s->st[MRD__ST_RSTR_PUT];
        BIND(st, 1, rank);
        BIND(st, 2, inst);
        BIND(st, 3, d->id);
        BIND(st, 4, id);
        if ((rc = run(s, st, "rank_strings")) < 0)
            return rc;
        strmap_put(&s->strmap, key, inst, id);
    }
    return 0;
}

/* One writer per event kind, generated from its field list (proto/kinds.h): a cursor over
 * the kind, one bind per column in table order (rank first, string ids mapped, nccl_ops.seq
 * NULL for point-to-point operations), one step per event. Adds the rows to *rows. */
#define BIND_VAL_INT(m) BIND(st, i++, e->m)
#define BIND_VAL_NN(m) BIND(st, i++, e->m)
#define BIND_VAL_GNN(m) BIND(st, i++, e->m)
#define BIND_VAL_P2PNULL(m)                                                                        \
    if (e->is_p2p)                                                                                 \
        sqlite3_bind_null(st, i++);                                                                \
    else                                                                                           \
        BIND(st, i++, e->m)
#define BIND_CODEC_STR(cls, m) bind_str_id(st, i++, string_id(s, rank, inst, e->m))
#define BIND_CODEC_PLAIN(cls, m) BIND_VAL_##cls(m)
#define BIND_CODEC_DELTA(cls, m) BIND_VAL_##cls(m)
#define BIND_CODEC_DUR(cls, m) BIND_VAL_##cls(m)
#define BIND_FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep) BIND_CODEC_##codec(cls, m);
#define WRITE_KIND(E, v, fn, T, u, bm, C, d, t, tag)                                               \
    static int write_##fn(struct mrd_store *s, uint32_t rank, uint64_t inst,                       \
                          const Meridian__V1__Batch *b, uint64_t *rows)                            \
    {                                                                                              \
        sqlite3_stmt *st = s->st[MRD__ST_EVENT(E)];                                                \
        struct mrd_batch_cursor c;                                                                 \
        T ev, *e = &ev;                                                                            \
        mrd_batch_cursor_init(&c, b);                                                              \
        while (mrd_batch_next_##fn(&c, e)) {                                                       \
            int i = 1;                                                                             \
            BIND(st, i++, rank);                                                                   \
            MRD__FIELDS(fn, BIND_FIELD)                                                            \
            if (s->string_err) { /* a string lookup failed: the item fails */                      \
                int e_ = s->string_err;                                                            \
                s->string_err = 0;                                                                 \
                return e_;                                                                         \
            }                                                                                      \
            int r_ = sqlite3_step(st);                                                             \
            sqlite3_reset(st);                                                                     \
            if (r_ != SQLITE_DONE)                                                                 \
                return mrd__store_sqlite_err(s, r_, "mrd_" #fn);                                       \
            (*rows)++;                                                                             \
        }                                                                                          \
        return 0;                                                                                  \
    }
MRD_KINDS(WRITE_KIND)

static int write_events(struct mrd_store *s, uint32_t rank, uint64_t inst,
                        const Meridian__V1__Batch *b, uint64_t *nrows)
{
    uint64_t rows = 0;
    int rc = 0;
#define WRITE_CALL(E, v, fn, T, u, bm, C, d, t, tag)                                               \
    if (rc == 0 && b->bm)                                                                          \
        rc = write_##fn(s, rank, inst, b, &rows);
    MRD_KINDS(WRITE_CALL)
    *nrows = rows;
    return rc;
}

static int write_batch(struct mrd_store *s, struct mrd_store_item *it)
{
    const Meridian__V1__Batch *b = (const Meridian__V1__Batch *)it->msg;
    uint64_t events = 0;
    for (int k = 1; k < MRD_EV__COUNT; k++)
        events += mrd_batch_count(b, k);
    it->seq = b->seq;
    sqlite3_stmt *st = s->st[MRD__ST_BATCH];
    BIND(st, 1, it->rank);
    BIND(st, 2, b->seq);
    BIND(st, 3, events);
    BIND(st, 4, it->wire_bytes);
    BIND(st, 5, it->received_ns);
    BIND(st, 6, it->agent_instance);
    int rc = run(s, st, "batches");
    if (rc < 0)
        return rc;
    if (sqlite3_changes(s->db) == 0) {
        it->duplicate = 1;
        s->txn.duplicates++;
        return agg_counter(s, "duplicate_batches", 1);
    }
    if ((rc = write_strings(s, it->rank, it->agent_instance, b)) < 0)
        return rc;
    uint64_t rows = 0;
    if ((rc = write_events(s, it->rank, it->agent_instance, b, &rows)) < 0)
        return rc;
    s->txn_rows += rows + 1;
    s->txn.rows += rows;
    s->txn.batches++;
    if ((rc = counter_list(s, it->rank, "dropped", b->dropped, b->n_dropped, 0)) < 0)
        return rc;
    if (s->undefined_refs) {
        rc = agg_counter(s, "undefined_string_refs", (int64_t)s->undefined_refs);
        s->undefined_refs = 0;
        if (rc < 0)
            return rc;
    }
    st = s->st[MRD__ST_RANK_SEEN];
    BIND(st, 1, it->rank);
    BIND(st, 2, it->received_ns);
    return run(s, st, "ranks.last_seen_ns");
}

int mrd__store_write_item(struct mrd_store *s, struct mrd_store_item *it)
{
    switch (it->kind) {
    case MRD_STORE_HELLO:
        return write_hello(s, it);
    case MRD_STORE_BATCH:
        return write_batch(s, it);
    case MRD_STORE_GOODBYE:
        return write_goodbye(s, it);
    case MRD_STORE_COUNTER:
        return agg_counter(s, it->counter_name, it->counter_delta);
    case MRD_STORE_BARRIER:
        return 0;
    }
    return -EINVAL;
}
