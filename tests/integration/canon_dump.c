/* mrd-canon-dump: the canonical text (launcher/replay/canon.h) of every event in a capture
 * or a frame stream, for proving that a change to the batch code leaves every event as it
 * was (tests/integration/canon_dumps.cmake compares it with checked-in hashes).
 *
 * Input: files, each a .mrdcap (magic "MRDCAP1\n", then frames) or a raw byte stream of
 * frames (a fuzz corpus input); dumped one after the other, as if run once per file. Every BATCH frame that decodes and passes mrd_batch_check is walked
 * kind by kind with the batch cursors; each event prints as
 *   <frame#> <kind> <canonical text> <canonical hash, hex>
 * with string ids resolved through the definitions seen so far in the file. A frame that
 * does not parse ends the stream ("end: ..." line); an unchecked batch prints its reason.
 *
 * Exit status: 0 (whatever the input held), 2 on usage or I/O errors.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "canon.h"
#include "error.h"
#include "frame.h"

#define MAX_FRAME (8u * MRD_FRAME_DEFAULT_MAX)
#define MAX_ID    (1u << 20)

struct strs {
    char **v; /* index = string id < n */
    uint32_t n;
};

static const char *resolve(void *ctx, uint32_t id)
{
    struct strs *s = ctx;
    return id < s->n ? s->v[id] : NULL;
}

static void strs_clear(struct strs *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static uint64_t strhash(void *ctx, uint32_t id)
{
    return mrd_canon_str_hash(resolve(ctx, id));
}

static void dump_batch(const Meridian__V1__Batch *m, unsigned long frame, struct strs *s)
{
    char text[4096];
    for (size_t i = 0; i < m->n_strings; i++) {
        uint32_t id = m->strings[i]->id;
        if (id < MAX_ID && id >= s->n) {
            uint32_t n = id * 2 + 16 < MAX_ID ? id * 2 + 16 : MAX_ID;
            char **v = realloc(s->v, n * sizeof *v);
            if (!v)
                continue;
            memset(v + s->n, 0, (n - s->n) * sizeof *v);
            s->v = v;
            s->n = n;
        }
        if (id < s->n) {
            free(s->v[id]);
            s->v[id] = strdup(m->strings[i]->value);
        }
    }
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        struct mrd_batch_cursor c;
        struct mrd_canon_event e;
        mrd_batch_cursor_init(&c, m);
        memset(&e, 0, sizeof e);
        e.kind = k;
        while (mrd_batch_next_any(&c, k, &e.u)) {
            mrd_canon_text(&e, resolve, s, text, sizeof text);
            printf("%lu %s %s %016" PRIx64 "\n", frame, mrd_event_kind_name(k), text,
                   mrd_canon_hash(&e, strhash, s));
            memset(&e.u, 0, sizeof e.u);
        }
    }
}

/* Dumps one file; 0, or 2 on an I/O error. */
static int dump_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 2;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    struct strs s = {NULL, 0};
    if (!buf) {
        fprintf(stderr, "mrd-canon-dump: out of memory\n");
        return 2;
    }
    size_t off = 0;
    if (len >= 8 && memcmp(buf, "MRDCAP1\n", 8) == 0)
        off = 8;
    int recorded = off == 8;
    unsigned long frame = 0;
    while (off < len) {
        struct mrd_frame_header h;
        ProtobufCMessage *msg = NULL;
        int hr = recorded ? mrd_frame_header_parse_recorded(buf + off, len - off, MAX_FRAME, &h)
                          : mrd_frame_header_parse(buf + off, len - off, MAX_FRAME, &h);
        if (hr != 0 || len - off - 8 < h.length) {
            printf("end: no complete frame at byte %zu\n", off);
            break;
        }
        h.version = MRD_PROTOCOL_VERSION;
        int rc = mrd_frame_decode(&h, buf + off + 8, MAX_FRAME, &msg);
        off += 8 + (size_t)h.length;
        frame++;
        if (rc != 0) {
            printf("%lu undecodable (%d)\n", frame, rc);
            continue;
        }
        if (h.type == MRD_FRAME_BATCH) {
            const char *why = NULL;
            const Meridian__V1__Batch *m = (const Meridian__V1__Batch *)msg;
            if (mrd_batch_check(m, &why) == 0)
                dump_batch(m, frame, &s);
            else
                printf("%lu unchecked: %s\n", frame, why ? why : "?");
        }
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    strs_clear(&s);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mrd-canon-dump FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        if (dump_file(argv[i]) != 0)
            return 2;
    return 0;
}
