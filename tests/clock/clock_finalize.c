/* clock_finalize: runs the clock module's finalize passes on a meridian database.
 *
 * Where it sits: used by the clock test bed and benchmark (tests/clock/testbed.py) after
 * meridiand has stopped; the same calls the `meridian` CLI makes at the end of a profile.
 *   clock_finalize DB [--no-causality] [--perturb RANK:NS ...]
 * Runs mrd_clock_fit_db, mrd_clock_gpu_fit_db, then (unless --no-causality)
 * mrd_clock_causality_db, logging to stdout. --perturb adds NS to the fitted offset of
 * RANK before the causality pass (a deliberately wrong clock, to watch the check find and
 * tighten it). Exit 0 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "clock.h"
#include "error.h"

int main(int argc, char **argv)
{
    sqlite3 *db = NULL;
    int causality = 1, rc;
    char sql[256];
    if (argc < 2) {
        fprintf(stderr, "usage: clock_finalize DB [--no-causality] [--perturb RANK:NS ...]\n");
        return 2;
    }
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) {
        fprintf(stderr, "clock_finalize: %s: %s\n", argv[1], sqlite3_errmsg(db));
        return 1;
    }
    sqlite3_busy_timeout(db, 10000);
    if ((rc = mrd_clock_fit_db(db, NULL, stdout)) < 0) {
        fprintf(stderr, "clock_finalize: fit: %s\n", mrd_strerror(rc));
        return 1;
    }
    printf("clock_finalize: %d rank model(s)\n", rc);
    if ((rc = mrd_clock_gpu_fit_db(db, stdout)) < 0) {
        fprintf(stderr, "clock_finalize: gpu calibration: %s\n", mrd_strerror(rc));
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--no-causality")) {
            causality = 0;
        } else if (!strcmp(argv[i], "--perturb") && i + 1 < argc) {
            int rank;
            long long ns;
            if (sscanf(argv[++i], "%d:%lld", &rank, &ns) != 2)
                return 2;
            snprintf(sql, sizeof sql,
                     "UPDATE clock_models SET offset_ns = offset_ns + %lld WHERE rank = %d", ns,
                     rank);
            if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
                return 1;
            printf("clock_finalize: rank %d offset perturbed by %+lld ns\n", rank, ns);
        } else {
            fprintf(stderr, "clock_finalize: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (causality) {
        struct mrd_clock_causality_summary s;
        if ((rc = mrd_clock_causality_db(db, 1, &s, stdout)) < 0) {
            fprintf(stderr, "clock_finalize: causality: %s\n", mrd_strerror(rc));
            return 1;
        }
    }
    sqlite3_close(db);
    return 0;
}
