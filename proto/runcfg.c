/* meridian run configuration: the one reader of the run secret and the one host:port
 * parser (rules and contracts in runcfg.h). Cold path, once per process; no allocation,
 * no stdio (it runs inside the agent, in other people's processes, too).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "runcfg.h"

static int secret_fail(char *out, int rc, const char **why, const char *text)
{
    explicit_bzero(out, MRD_SECRET_MAX + 1);
    if (why)
        *why = text ? text : mrd_strerror(rc);
    return rc;
}

/* The whole file into buf[cap] (at most cap - 1 bytes). Returns the length or -errno;
 * -EFBIG when the file holds cap bytes or more. */
static long read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    long rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            rc = -EFBIG;
            break;
        }
    }
    close(fd);
    return rc < 0 ? rc : (long)n;
}

int mrd_secret_read(const char *path, const char *value, char out[MRD_SECRET_MAX + 1],
                    const char **why)
{
    char file[MRD_SECRET_FILE_MAX + 1];
    const char *src = value;
    size_t n;
    if (path) {
        long r = read_file(path, file, sizeof(file));
        if (r < 0) /* what was read before the error or the size check is secret too */
            explicit_bzero(file, sizeof(file));
        if (r == -EFBIG)
            return secret_fail(out, -EFBIG, why, "file larger than 4096 bytes");
        if (r < 0)
            return secret_fail(out, (int)r, why, NULL);
        src = file;
        n = (size_t)r;
        if (memchr(file, '\0', n)) {
            explicit_bzero(file, sizeof(file));
            return secret_fail(out, -EILSEQ, why, "contains a NUL byte");
        }
    } else if (value) {
        n = strlen(value);
    } else {
        return secret_fail(out, -EINVAL, why, "no secret given");
    }
    while (n > 0 && (src[n - 1] == '\n' || src[n - 1] == '\r'))
        n--;
    int rc = 0;
    const char *reason = NULL;
    if (n == 0) {
        rc = -ENODATA;
        reason = "empty";
    } else if (n > MRD_SECRET_MAX) {
        rc = -E2BIG;
        reason = "longer than 255 bytes";
    } else {
        memcpy(out, src, n);
        out[n] = '\0';
    }
    if (path)
        explicit_bzero(file, sizeof(file));
    return rc < 0 ? secret_fail(out, rc, why, reason) : (int)n;
}

int mrd_hostport_split(const char *hp, char *host, size_t hcap, uint16_t *port)
{
    const char *h = hp, *colon;
    size_t hlen;
    if (!hp)
        return -EINVAL;
    if (hp[0] == '[') {
        const char *close_br = strchr(hp, ']');
        if (!close_br || close_br[1] != ':')
            return -EINVAL;
        h = hp + 1;
        hlen = (size_t)(close_br - h);
        colon = close_br + 1;
    } else {
        colon = strchr(hp, ':');
        if (!colon || strchr(colon + 1, ':'))
            return -EINVAL; /* none, or an unbracketed IPv6 address */
        hlen = (size_t)(colon - hp);
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (hlen == 0 || memchr(h, ']', hlen) || plen == 0 || plen > 5 ||
        strspn(p, "0123456789") != plen)
        return -EINVAL;
    unsigned long v = 0;
    for (size_t i = 0; i < plen; i++)
        v = v * 10 + (unsigned long)(p[i] - '0');
    if (v > 65535)
        return -EINVAL;
    if (hlen >= hcap)
        return -ENAMETOOLONG;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)v;
    return 0;
}

/* The list entry that starts at p: [*b, *e), without the blanks around it when trim.
 * Returns where it ends (its ',' or the NUL). */
static const char *list_entry(const char *p, int trim, const char **b, const char **e)
{
    const char *end = p + strcspn(p, ",");
    *b = p;
    *e = end;
    while (trim && *b < *e && (**b == ' ' || **b == '\t'))
        (*b)++;
    while (trim && *e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
        (*e)--;
    return end;
}

/* 1 when s[0..n) is host:port with a port other than 0 and fits cap bytes with its NUL. */
static int entry_ok(const char *s, size_t n, size_t cap)
{
    char one[512], host[512];
    uint16_t port = 0;
    if (n >= cap || n >= sizeof one)
        return 0;
    memcpy(one, s, n);
    one[n] = '\0';
    return mrd_hostport_split(one, host, sizeof host, &port) == 0 && port != 0;
}

int mrd_aggregator_pick(const char *list, uint64_t rank, char *out, size_t cap,
                        uint32_t *index, uint32_t *count, struct mrd_aggregator_error *err)
{
    struct mrd_aggregator_error dummy;
    err = err ? err : &dummy;
    memset(err, 0, sizeof *err);
    int trim = strchr(list, ',') != NULL;
    const char *p = list, *b, *e, *end;
    uint32_t n = 0;
    for (;; n++) {
        end = list_entry(p, trim, &b, &e);
        size_t len = (size_t)(e - b);
        enum mrd_aggregator_fault f = n == MRD_AGGREGATORS_MAX ? MRD_AGG_TOO_MANY
                                      : len == 0               ? MRD_AGG_EMPTY
                                      : !entry_ok(b, len, cap) ? MRD_AGG_BAD
                                                               : MRD_AGG_OK;
        if (f != MRD_AGG_OK) {
            *err = (struct mrd_aggregator_error){f, n, b, len};
            return -EINVAL;
        }
        if (*end == '\0')
            break;
        p = end + 1;
    }
    uint32_t want = (uint32_t)(rank % (n + 1));
    p = list;
    for (uint32_t i = 0; i < want; i++)
        p = list_entry(p, trim, &b, &e) + 1;
    list_entry(p, trim, &b, &e);
    memcpy(out, b, (size_t)(e - b)); /* fits: entry_ok said so */
    out[e - b] = '\0';
    *index = want;
    *count = n + 1;
    return 0;
}

const struct mrd_rank_vars *mrd_rank_vars(int torchrun_all_set)
{
    static const char *const rank[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID",         "RANK",      NULL};
    static const char *const local_rank[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                             "SLURM_LOCALID", "LOCAL_RANK", NULL};
    static const char *const world_size[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                             "WORLD_SIZE", NULL};
    static const char *const torch_rank[] = {"RANK", NULL};
    static const char *const torch_local_rank[] = {"LOCAL_RANK", NULL};
    static const char *const torch_world_size[] = {"WORLD_SIZE", NULL};
    static const struct mrd_rank_vars launchers = {rank, local_rank, world_size};
    static const struct mrd_rank_vars torchrun = {torch_rank, torch_local_rank, torch_world_size};
    return torchrun_all_set ? &torchrun : &launchers;
}
