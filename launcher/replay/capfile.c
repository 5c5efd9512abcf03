/* .mrdcap reader and writer (format and contract in capfile.h).
 *
 * stdio-buffered sequential I/O; the reader keeps one frame in a buffer that grows up to
 * the caller's max_frame (never more), the writer holds nothing.
 */
#include "capfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

struct mrd_capfile {
    FILE *fp;
    int writing;
    uint8_t *buf;
    size_t cap;
};

int mrd_capfile_open(const char *path, struct mrd_capfile **out)
{
    char magic[MRD_CAPFILE_MAGIC_LEN];
    struct mrd_capfile *f = calloc(1, sizeof *f);
    int rc = -ENOMEM;
    if (!f)
        goto fail;
    f->fp = fopen(path, "rb");
    if (!f->fp) {
        rc = -errno;
        goto fail;
    }
    if (fread(magic, 1, sizeof magic, f->fp) != sizeof magic ||
        memcmp(magic, MRD_CAPFILE_MAGIC, sizeof magic) != 0) {
        rc = -MRD_ERR_MALFORMED;
        goto fail;
    }
    *out = f;
    return 0;
fail:
    mrd_capfile_close(f);
    return rc;
}

int mrd_capfile_next(struct mrd_capfile *f, uint32_t max_frame, int *type, ProtobufCMessage **msg,
                     const uint8_t **raw, size_t *raw_len)
{
    uint8_t hdr[MRD_FRAME_HEADER_BYTES];
    struct mrd_frame_header h;
    size_t n = fread(hdr, 1, sizeof hdr, f->fp);
    if (n == 0 && feof(f->fp))
        return 0;
    if (n != sizeof hdr)
        return ferror(f->fp) ? -EIO : -MRD_ERR_MALFORMED;
    /* a capture of an older version still reads (frame.h: MRD_PROTOCOL_VERSION_READ_MIN):
     * its frames are decoded as ours, which they mean */
    int rc = mrd_frame_header_parse_recorded(hdr, sizeof hdr, max_frame, &h);
    if (rc < 0)
        return rc == -EAGAIN ? -MRD_ERR_MALFORMED : rc;
    h.version = MRD_PROTOCOL_VERSION;
    size_t total = sizeof hdr + (size_t)h.length;
    if (total > f->cap) {
        uint8_t *p = realloc(f->buf, total);
        if (!p)
            return -ENOMEM;
        f->buf = p;
        f->cap = total;
    }
    memcpy(f->buf, hdr, sizeof hdr);
    if (fread(f->buf + sizeof hdr, 1, h.length, f->fp) != h.length)
        return ferror(f->fp) ? -EIO : -MRD_ERR_MALFORMED;
    rc = mrd_frame_decode(&h, f->buf + sizeof hdr, max_frame, msg);
    if (rc < 0)
        return rc;
    *type = h.type;
    if (raw)
        *raw = f->buf;
    if (raw_len)
        *raw_len = total;
    return 1;
}

int mrd_capfile_create(const char *path, struct mrd_capfile **out)
{
    struct mrd_capfile *f = calloc(1, sizeof *f);
    int rc = -ENOMEM;
    if (!f)
        goto fail;
    f->writing = 1;
    f->fp = fopen(path, "wb");
    if (!f->fp) {
        rc = -errno;
        goto fail;
    }
    if (fwrite(MRD_CAPFILE_MAGIC, 1, MRD_CAPFILE_MAGIC_LEN, f->fp) != MRD_CAPFILE_MAGIC_LEN) {
        rc = -EIO;
        goto fail;
    }
    *out = f;
    return 0;
fail:
    mrd_capfile_close(f);
    return rc;
}

/* Re-encodes a Hello frame with only the fields this version knows into a new buffer
 * (*out, caller frees): a secret (field 3, reserved since version 2) or anything else a
 * peer put there stays out of the file. */
static int strip_secret(const struct mrd_frame_header *h, const uint8_t *payload, uint8_t **out,
                        size_t *out_len)
{
    ProtobufCMessage *msg = NULL;
    int rc = mrd_frame_decode(h, payload, MRD_FRAME_DEFAULT_MAX, &msg);
    if (rc < 0)
        return rc;
    size_t n_unknown = msg->n_unknown_fields;
    msg->n_unknown_fields = 0; /* protobuf-c packs unknown fields back unless told not to */
    rc = mrd_frame_encode(MRD_FRAME_HELLO, msg, 0, MRD_FRAME_DEFAULT_MAX, out, out_len);
    msg->n_unknown_fields = n_unknown; /* so that the free releases them */
    protobuf_c_message_free_unpacked(msg, NULL);
    return rc;
}

int mrd_capfile_write(struct mrd_capfile *f, const uint8_t *frame, size_t len)
{
    struct mrd_frame_header h;
    uint8_t *copy = NULL;
    int rc = mrd_frame_header_parse(frame, len, UINT32_MAX, &h);
    if (rc < 0 || len != MRD_FRAME_HEADER_BYTES + (size_t)h.length)
        return -MRD_ERR_MALFORMED;
    if (h.type == MRD_FRAME_PROOF || h.type == MRD_FRAME_CHALLENGE)
        return 0; /* they belong to one connection's handshake: nothing to replay */
    if (h.type == MRD_FRAME_HELLO) {
        rc = strip_secret(&h, frame + MRD_FRAME_HEADER_BYTES, &copy, &len);
        if (rc < 0)
            return rc;
        frame = copy;
    }
    rc = fwrite(frame, 1, len, f->fp) == len ? 0 : -EIO;
    free(copy);
    return rc;
}

int mrd_capfile_close(struct mrd_capfile *f)
{
    int rc = 0;
    if (!f)
        return 0;
    if (f->fp && fclose(f->fp) != 0 && f->writing)
        rc = -EIO;
    free(f->buf);
    free(f);
    return rc;
}
