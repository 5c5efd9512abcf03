/* mrd-schema-dump: prints the whole schema a new database gets (mrd_store_schema_sql: the
 * event tables generated from proto/kinds.h, then schema.sql) to stdout, so that tests
 * and scripts that build databases by hand (tests/analysis/fixture.c, tests/clock,
 * tests/gpu) use exactly what meridiand creates. The build writes it to
 * build/aggregator/store/schema-full.sql. Exit 0, or 1 when stdout failed. */
#include <stdio.h>

#include "store.h"

int main(void)
{
    fputs(mrd_store_schema_sql(), stdout);
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
