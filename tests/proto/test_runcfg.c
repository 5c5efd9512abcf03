/* proto_runcfg: the one run-secret reader and the one host:port parser (proto/runcfg.h)
 * that the agent, meridiand, replay and profile share. Every rule of the contract has a
 * case: trailing CR/LF removed (all of them, from a file and from a value), inner newlines
 * kept, 1..255 bytes, NUL refused, a file over 4 KiB refused, a missing file's errno,
 * the file winning over the value; host:port and [v6]:port, unbracketed IPv6 refused,
 * ports 0..65535 in decimal only, a host too long for the buffer, outputs untouched (or,
 * for the secret, zeroed) on failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runcfg.h"

static char g_path[64];

static void put_file(const char *bytes, size_t n)
{
    FILE *f = fopen(g_path, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(bytes, 1, n, f), n);
    CHECK_EQ(fclose(f), 0);
}

/* The file holds bytes[n]: expects length want (>0) and text, or the error want (<0). */
static void file_case(const char *bytes, size_t n, int want, const char *text)
{
    put_file(bytes, n);
    char out[MRD_SECRET_MAX + 1];
    memset(out, 'x', sizeof(out));
    const char *why = NULL;
    int rc = mrd_secret_read(g_path, NULL, out, &why);
    CHECK_EQ(rc, want);
    if (want > 0) {
        CHECK_EQ(memcmp(out, text, (size_t)want), 0);
        CHECK_EQ(out[want], '\0');
    } else {
        CHECK(why != NULL && why[0] != '\0');
        for (size_t i = 0; i < sizeof(out); i++)
            CHECK_EQ(out[i], 0);
    }
}

static void value_case(const char *value, int want, const char *text)
{
    char out[MRD_SECRET_MAX + 1];
    const char *why = NULL;
    int rc = mrd_secret_read(NULL, value, out, &why);
    CHECK_EQ(rc, want);
    if (want > 0)
        CHECK_STREQ(out, text);
    else
        CHECK(why != NULL);
}

static void hp_case(const char *hp, int want, const char *host, unsigned port)
{
    char h[64] = "untouched";
    uint16_t p = 4242;
    CHECK_EQ(mrd_hostport_split(hp, h, sizeof(h), &p), want);
    if (want == 0) {
        CHECK_STREQ(h, host);
        CHECK_EQ(p, port);
    } else {
        CHECK_STREQ(h, "untouched");
        CHECK_EQ(p, 4242);
    }
}

int main(void)
{
    snprintf(g_path, sizeof(g_path), "/tmp/mrd-runcfg-%d", (int)getpid());

    file_case("abc\n", 4, 3, "abc");
    file_case("abc", 3, 3, "abc");
    file_case("abc\r\n\n\r", 7, 3, "abc");
    file_case("a\nb\r\n", 5, 3, "a\nb"); /* the whole file: inner newlines are secret */
    file_case(" sp ace \n", 9, 8, " sp ace ");
    file_case("", 0, -ENODATA, NULL);
    file_case("\n\r\n", 3, -ENODATA, NULL);
    file_case("ab\0cd\n", 6, -EILSEQ, NULL);
    char big[MRD_SECRET_FILE_MAX + 8];
    memset(big, 's', sizeof(big));
    big[MRD_SECRET_MAX] = '\n';
    file_case(big, MRD_SECRET_MAX + 1, MRD_SECRET_MAX, big);     /* 255 + LF */
    file_case(big, MRD_SECRET_MAX + 1 - 1, MRD_SECRET_MAX, big); /* exactly 255 */
    memset(big, 's', sizeof(big));
    file_case(big, MRD_SECRET_MAX + 1, -E2BIG, NULL);
    memset(big, '\n', sizeof(big));
    big[0] = 'k';
    file_case(big, MRD_SECRET_FILE_MAX, 1, "k"); /* 4096 bytes, all but one trailing */
    file_case(big, MRD_SECRET_FILE_MAX + 1, -EFBIG, NULL);

    /* a missing file: its errno; the file wins over the value */
    unlink(g_path);
    char out[MRD_SECRET_MAX + 1];
    const char *why = NULL;
    CHECK_EQ(mrd_secret_read(g_path, "from-value", out, &why), -ENOENT);
    CHECK_STREQ(why, "no such file or directory");
    put_file("from-file\n", 10);
    CHECK_EQ(mrd_secret_read(g_path, "from-value", out, NULL), 9);
    CHECK_STREQ(out, "from-file");
    unlink(g_path);

    value_case("xyz\r\n", 3, "xyz");
    value_case("x\ny", 3, "x\ny");
    value_case("", -ENODATA, NULL);
    value_case("\r\n", -ENODATA, NULL);
    memset(big, 'v', sizeof(big));
    big[MRD_SECRET_MAX] = '\0';
    value_case(big, MRD_SECRET_MAX, big);
    big[MRD_SECRET_MAX] = 'v';
    big[MRD_SECRET_MAX + 1] = '\0';
    value_case(big, -E2BIG, NULL);
    CHECK_EQ(mrd_secret_read(NULL, NULL, out, &why), -EINVAL);

    hp_case("127.0.0.1:47500", 0, "127.0.0.1", 47500);
    hp_case("node7.cluster:1", 0, "node7.cluster", 1);
    hp_case("[::1]:0", 0, "::1", 0);
    hp_case("[fe80::1%eth0]:65535", 0, "fe80::1%eth0", 65535);
    hp_case("localhost:00080", 0, "localhost", 80);
    hp_case("::1:47500", -EINVAL, NULL, 0); /* IPv6 must be bracketed */
    hp_case("host", -EINVAL, NULL, 0);
    hp_case(":80", -EINVAL, NULL, 0);
    hp_case("host:", -EINVAL, NULL, 0);
    hp_case("host:65536", -EINVAL, NULL, 0);
    hp_case("host:123456", -EINVAL, NULL, 0);
    hp_case("host:12a", -EINVAL, NULL, 0);
    hp_case("host:+5", -EINVAL, NULL, 0);
    hp_case("host:-1", -EINVAL, NULL, 0);
    hp_case("host: 5", -EINVAL, NULL, 0);
    hp_case("[::1]47500", -EINVAL, NULL, 0);
    hp_case("[::1:47500", -EINVAL, NULL, 0);
    hp_case("[]:5", -EINVAL, NULL, 0);
    hp_case("", -EINVAL, NULL, 0);
    char small[4] = "zz";
    uint16_t p = 7;
    CHECK_EQ(mrd_hostport_split("abcd:1", small, sizeof(small), &p), -ENAMETOOLONG);
    CHECK_STREQ(small, "zz");
    CHECK_EQ(p, 7);
    CHECK_EQ(mrd_hostport_split("abc:1", small, sizeof(small), &p), 0);
    CHECK_STREQ(small, "abc");
    CHECK_EQ(mrd_hostport_split(NULL, small, sizeof(small), &p), -EINVAL);
    printf("proto_runcfg: ok\n");
    return 0;
}
