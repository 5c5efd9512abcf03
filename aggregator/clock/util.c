/* Small shared pieces of the clock module: SQLite error reporting, the module's own
 * tables (their SQL text is the database module's, aggregator/db), and a dense Cholesky
 * solver for the (small) normal equations of the fits.
 *
 * Where it sits: used by fit.c, gpu.c and causality.c in the finalize step after ingest.
 * Workload: a handful of calls per finalize; matrices of at most a few hundred rows.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock_internal.h"
#include "error.h"

int mrd__clock_sqlerr(sqlite3 *db, FILE *log, const char *what)
{
    if (log)
        fprintf(log, "clock: %s: %s\n", what, db ? sqlite3_errmsg(db) : "no database");
    return -MRD_ERR_SQLITE;
}

int mrd__clock_exec(sqlite3 *db, FILE *log, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        if (log)
            fprintf(log, "clock: %s\n", msg ? msg : "sqlite error");
        sqlite3_free(msg);
        return -MRD_ERR_SQLITE;
    }
    return 0;
}

int mrd__clock_ensure_tables(sqlite3 *db, FILE *log)
{
    return mrd__clock_exec(db, log, mrd_db_sql_clock_tables);
}

int mrd__clock_spd_solve(double *A, double *b, int p, double *inv_diag)
{
    /* Cholesky A = L L^T, L stored in the lower triangle. */
    for (int j = 0; j < p; j++) {
        double d = A[j * p + j];
        for (int k = 0; k < j; k++)
            d -= A[j * p + k] * A[j * p + k];
        if (!(d > 0))
            return -EDOM;
        d = sqrt(d);
        A[j * p + j] = d;
        for (int i = j + 1; i < p; i++) {
            double s = A[i * p + j];
            for (int k = 0; k < j; k++)
                s -= A[i * p + k] * A[j * p + k];
            A[i * p + j] = s / d;
        }
    }
    /* forward then backward substitution for b */
    for (int i = 0; i < p; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= A[i * p + k] * b[k];
        b[i] = s / A[i * p + i];
    }
    for (int i = p - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < p; k++)
            s -= A[k * p + i] * b[k];
        b[i] = s / A[i * p + i];
    }
    if (!inv_diag)
        return 0;
    /* diag(A^-1) = column sums of squares of L^-1: solve L y = e_j for each j. */
    double *y = malloc(sizeof(*y) * (size_t)p);
    if (!y)
        return -ENOMEM;
    for (int j = 0; j < p; j++) {
        for (int i = 0; i < p; i++) {
            double s = i == j ? 1.0 : 0.0;
            if (i < j) {
                y[i] = 0;
                continue;
            }
            for (int k = j; k < i; k++)
                s -= A[i * p + k] * y[k];
            y[i] = s / A[i * p + i];
        }
        /* (A^-1)_jj = sum_i (L^-1)_{ij}^2 over column j of L^-1: y is that column. */
        double s2 = 0;
        for (int i = j; i < p; i++)
            s2 += y[i] * y[i];
        inv_diag[j] = s2;
    }
    free(y);
    return 0;
}
