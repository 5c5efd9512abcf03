/* One integer from an SQL query, for test assertions (the tests that read databases).
 * check_sql_int: the first column of the first row; the test fails (check.h) when the
 * query does not prepare or returns no row. */
#ifndef MRD_TEST_CHECK_SQL_H
#define MRD_TEST_CHECK_SQL_H

#include <sqlite3.h>
#include <stdint.h>

#include "check.h"

static inline int64_t check_sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    CHECK_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

#endif
