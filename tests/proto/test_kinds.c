/* proto_kinds: the event-kind table (proto/kinds.table, as kinds.h's generated macros)
 * against what it stands for: the macros and the Columns messages are generated from the
 * same rows, so this checks the generator's two outputs and protoc-c against each other as
 * much as the table (a generator wrong in both the same way passes here; proto_kinds_gen,
 * kinds_gen_test.sh, checks the generator against outputs written down once).
 *
 *  - every field against the protobuf-c descriptor of its Columns message: the field
 *    number exists, is named like the wire column, is repeated, and its type is the one
 *    the codec and the struct member imply (DELTA sint64, DUR uint64, STR uint32, PLAIN by
 *    the member: uint32 -> uint32, int32 -> sint32, int64 -> int64, uint64 -> uint64 or
 *    fixed64); every field of the message is in the table once;
 *  - the kind's Batch field holds that message, and meridian.proto's EventKind
 *    EV_<NAME> has the kind's value;
 *  - the canonical positions are 0..n-1, each once;
 *  - the database: every event table the store creates has exactly the table's columns,
 *    in order, with their declared types and NOT NULL; and the tables of the thirteen
 *    kinds of schema version 2 hash (name, column, type, NOT NULL, in order) to the value
 *    recorded when they were generated for the first time: a change there is a schema
 *    change, which needs a schema version and a migration (aggregator/store/store.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "batch_internal.h"
#include "check.h"
#include "store.h"

#define TYPE_OF(x)                                                                             \
    _Generic((x), uint32_t: PROTOBUF_C_TYPE_UINT32, int32_t: PROTOBUF_C_TYPE_SINT32,          \
             int64_t: PROTOBUF_C_TYPE_INT64, uint64_t: PROTOBUF_C_TYPE_UINT64)
#define WIRE_TYPE_DELTA(x) PROTOBUF_C_TYPE_SINT64
#define WIRE_TYPE_DUR(x) PROTOBUF_C_TYPE_UINT64
#define WIRE_TYPE_STR(x) PROTOBUF_C_TYPE_UINT32
#define WIRE_TYPE_PLAIN(x) TYPE_OF(x)

struct field {
    const char *member, *sql, *decl, *wire;
    unsigned num;
    int type, pos, notnull;
};

#define FIELD(K, m, sql, cls, num, wire, codec, arg, pos, sep)                                 \
    {#m, sql, MRD__SQL_DECL(cls), #wire, num, WIRE_TYPE_##codec(((T *)0)->m), pos,             \
     strstr(MRD__SQL_DECL(cls), "NOT NULL") != NULL},

static int same_type(int want, int got)
{
    return want == got || (want == PROTOBUF_C_TYPE_UINT64 && got == PROTOBUF_C_TYPE_FIXED64);
}

static void check_kind(int kind, int value, const char *name, const char *batch_member,
                       const ProtobufCMessageDescriptor *d, const struct field *f, int n)
{
    char ev[64];
    int seen_pos[64] = {0}, seen_num[64] = {0};

    CHECK_EQ(kind, value);
    CHECK(mrd__batch_groups[kind].desc == d);
    CHECK_EQ(n, (int)d->n_fields);
    for (int i = 0; i < n; i++) {
        const ProtobufCFieldDescriptor *pf = protobuf_c_message_descriptor_get_field(d, f[i].num);
        CHECK(pf != NULL);
        CHECK_STREQ(pf->name, f[i].wire);
        CHECK_EQ(pf->label, PROTOBUF_C_LABEL_REPEATED);
        if (!same_type(f[i].type, (int)pf->type))
            CHECK_FAIL_("%s.%s: wire type %d, the table implies %d", name, f[i].member,
                        (int)pf->type, f[i].type);
        CHECK(f[i].pos >= 0 && f[i].pos < n && f[i].num < 64);
        CHECK_EQ(seen_pos[f[i].pos]++, 0);
        CHECK_EQ(seen_num[f[i].num]++, 0);
    }
    const ProtobufCFieldDescriptor *bf =
        protobuf_c_message_descriptor_get_field_by_name(&meridian__v1__batch__descriptor,
                                                        batch_member);
    CHECK(bf != NULL);
    CHECK(bf->descriptor == d);
    snprintf(ev, sizeof ev, "EV_%s", name);
    for (char *p = ev; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value_by_name(&meridian__v1__event_kind__descriptor, ev);
    CHECK(v != NULL);
    CHECK_EQ(v->value, value);
    CHECK_STREQ(mrd_event_kind_name(kind), name);
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Checks table t in db against f[0..n) (after rank); folds it into *h. */
static void check_table(sqlite3 *db, const char *t, const struct field *f, int n, uint64_t *h)
{
    char sql[256];
    sqlite3_stmt *st = NULL;
    int i = -1;

    snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", t);
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    *h = fnv(*h, t);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *col = (const char *)sqlite3_column_text(st, 1);
        const char *type = (const char *)sqlite3_column_text(st, 2);
        int notnull = sqlite3_column_int(st, 3);
        char row[256];
        snprintf(row, sizeof row, "|%s %s %d", col, type, notnull);
        *h = fnv(*h, row);
        if (i < 0) {
            CHECK_STREQ(col, "rank");
            CHECK_EQ(notnull, 1);
        } else {
            CHECK(i < n);
            CHECK_STREQ(col, f[i].sql);
            CHECK_STREQ(type, "INTEGER");
            CHECK_EQ(notnull, f[i].notnull);
        }
        i++;
    }
    sqlite3_finalize(st);
    CHECK_EQ(i, n);
}

/* The thirteen tables of schema version 2 (kernels .. gpu_clock_samples), as first
 * generated: the same value as the tables schema.sql declared by hand before (checked with
 * the same hash over PRAGMA table_info of that schema.sql). */
#define V2_EVENT_TABLES_HASH 0xc3378e79e990a051ull

int main(void)
{
    sqlite3 *db = NULL;
    uint64_t h = 0xcbf29ce484222325ull;

    CHECK_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, mrd_store_schema_sql(), NULL, NULL, NULL), SQLITE_OK);
#define KIND(E, v, fn, T_, u, bm, C, d, t, tag)                                                \
    {                                                                                          \
        typedef T_ T;                                                                          \
        (void)sizeof(T); /* a kind of string fields only never names it */                    \
        const struct field f[] = {MRD__FIELDS(fn, FIELD)}; /* not static: strstr() */       \
        int n = (int)(sizeof f / sizeof f[0]);                                                 \
        check_kind(E, v, #u, #bm, &d, f, n);                                                   \
        uint64_t *hp = v <= MRD_EV_GPU_CLOCK ? &h : &(uint64_t){0};                            \
        check_table(db, t, f, n, hp);                                                          \
    }
    MRD_KINDS(KIND)
    sqlite3_close(db);
    if (h != V2_EVENT_TABLES_HASH)
        CHECK_FAIL_("the event tables of schema version 2 changed (hash 0x%016llx): that needs "
                    "a schema version and a migration",
                    (unsigned long long)h);
    printf("proto_kinds: ok\n");
    return 0;
}
