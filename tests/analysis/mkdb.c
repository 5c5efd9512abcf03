/* analysis_mkdb OUT.db: writes the collective-matching fixture of fixture.c to a file,
 * for the tests that run the `meridian` command on it (check_outputs.py). */
#include <stdio.h>

#include "fixture.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: analysis_mkdb OUT.db\n");
        return 2;
    }
    sqlite3 *db = fx_create(argv[1]);
    fx_build_match(db);
    return sqlite3_close(db) == SQLITE_OK ? 0 : 1;
}
