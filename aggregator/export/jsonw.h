/* Tiny JSON writing helpers shared by the JSON and Perfetto exports (internal). */
#ifndef MRD_JSONW_H
#define MRD_JSONW_H

#include <stdint.h>
#include <stdio.h>

/* Writes s as a JSON string literal (quotes included), escaping control characters,
 * quotes and backslashes; invalid UTF-8 bytes become U+FFFD. NULL writes "". */
void mrd__json_str(FILE *f, const char *s);

/* Writes ns as microseconds with exactly three decimals ("-1.005"), from integers only,
 * so no precision is lost whatever the magnitude. */
void mrd__json_us(FILE *f, int64_t ns);

#endif
