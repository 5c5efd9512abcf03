/* JSON writing helpers (see jsonw.h). Called once per string or time in the exports;
 * no allocation. */
#include "jsonw.h"

#include <inttypes.h>

/* Length of the valid UTF-8 sequence at s, 0 when invalid. */
static int utf8_len(const unsigned char *s)
{
    int n;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0 && s[0] >= 0xC2)
        n = 2;
    else if ((s[0] & 0xF0) == 0xE0)
        n = 3;
    else if ((s[0] & 0xF8) == 0xF0 && s[0] <= 0xF4)
        n = 4;
    else
        return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

void mrd__json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    fputc('"', f);
    while (*p) {
        int n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p++, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            fwrite(p, 1, (size_t)n, f);
            p += n;
        }
    }
    fputc('"', f);
}

void mrd__json_us(FILE *f, int64_t ns)
{
    uint64_t m = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(f, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", m / 1000, m % 1000);
}
