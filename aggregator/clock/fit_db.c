/* The clock fit over a meridian database: every rank's clock_samples -> clock_models.
 *
 * Where it sits: first pass of the finalize step (after the daemon stopped or while it
 * still runs: the write is one short transaction). One ordered scan of clock_samples;
 * a rank's probes are held (capped, see clock_internal.h) only while that rank is fitted.
 * The method itself is in fit.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "clock.h"
#include "clock_internal.h"
#include "error.h"

/* Writes one rank's model rows (inside the caller's transaction). */
static int store_model(sqlite3_stmt *del, sqlite3_stmt *ins, const struct mrd_clock_model *m)
{
    if (MRD_DB_WRITE_ROW(del, MRD_DB_INT(m->rank)) < 0)
        return -MRD_ERR_SQLITE;
    for (uint32_t j = 0; j < m->nseg; j++) {
        const struct mrd_clock_segment *g = &m->seg[j];
        if (MRD_DB_WRITE_ROW(ins, MRD_DB_INT(m->rank), MRD_DB_INT(j), MRD_DB_INT(g->local_begin),
                             MRD_DB_INT(g->local_end), MRD_DB_INT(g->offset_ns),
                             MRD_DB_REAL(g->drift_ppm), MRD_DB_INT(g->error_bound_ns),
                             MRD_DB_INT(g->samples), MRD_DB_TEXT(m->method)) < 0)
            return -MRD_ERR_SQLITE;
    }
    return 0;
}

/* Fits the rank whose probes are in p, stores it and logs one line. Returns 1 when a
 * model was stored, 0 when the rank could not be fitted, negative on errors. */
static int finish_rank(sqlite3_stmt *del, sqlite3_stmt *ins, struct mrd__clock_probes *p, int rank,
                       FILE *log)
{
    struct mrd_clock_model *m = NULL;
    struct mrd__clock_probe_stats st;
    int rc = mrd__clock_probes_fit(p, &m);
    mrd__clock_probes_stats(p, &st);
    if (rc == -ENODATA || rc == -EDOM) {
        if (log)
            fprintf(log, "clock: rank %d: %llu usable probes: not fitted\n", rank,
                    (unsigned long long)st.valid);
        return 0;
    }
    if (rc)
        return rc;
    m->rank = rank;
    rc = store_model(del, ins, m);
    if (rc == 0 && log) {
        int64_t bmax = 0;
        for (uint32_t j = 0; j < m->nseg; j++)
            bmax = m->seg[j].error_bound_ns > bmax ? m->seg[j].error_bound_ns : bmax;
        fprintf(log,
                "clock: rank %d: %llu probes (%llu rejected, %llu thinned), fastest round trip"
                " %.1f us, offset %+.9f s, drift %+.3f ppm, %u segment(s), bound %.2f us\n",
                rank, (unsigned long long)st.valid, (unsigned long long)st.invalid,
                (unsigned long long)st.thinned, (double)st.fastest_rtt / 1e3,
                (double)m->seg[0].offset_ns / 1e9, m->seg[0].drift_ppm, m->nseg,
                (double)bmax / 1e3);
    }
    mrd_clock_model_destroy(m);
    return rc ? rc : 1;
}

int mrd_clock_fit_db(sqlite3 *db, const struct mrd_clock_fit_options *o, FILE *log)
{
    sqlite3_stmt *sel = NULL, *del = NULL, *ins = NULL;
    struct mrd__clock_probes *p = NULL;
    int rc, step, cur = -1, fitted = 0, in_tx = 0;
    if ((rc = mrd__clock_ensure_tables(db, log)))
        return rc;
    if (sqlite3_prepare_v2(db, mrd_db_sql_clock_probes, -1, &sel, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, mrd_db_sql_clock_model_delete, -1, &del, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, mrd_db_sql_clock_model_insert, -1, &ins, NULL) != SQLITE_OK) {
        rc = mrd__clock_sqlerr(db, log, "prepare");
        goto fail;
    }
    if ((rc = mrd__clock_exec(db, log, mrd_db_sql_begin_immediate)))
        goto fail;
    in_tx = 1;
    while ((step = sqlite3_step(sel)) == SQLITE_ROW) {
        int rank = sqlite3_column_int(sel, 0);
        struct mrd_clock_sample x = {sqlite3_column_int64(sel, 1), sqlite3_column_int64(sel, 2),
                                     sqlite3_column_int64(sel, 3), sqlite3_column_int64(sel, 4)};
        if (rank != cur || !p) {
            if (p) {
                if ((rc = finish_rank(del, ins, p, cur, log)) < 0)
                    goto fail;
                fitted += rc;
            }
            mrd__clock_probes_destroy(p);
            p = NULL;
            if ((rc = mrd__clock_probes_create(o, &p)))
                goto fail;
            cur = rank;
        }
        if ((rc = mrd__clock_probes_add(p, &x)))
            goto fail;
    }
    if (step != SQLITE_DONE) {
        rc = mrd__clock_sqlerr(db, log, "reading clock_samples");
        goto fail;
    }
    if (p) {
        if ((rc = finish_rank(del, ins, p, cur, log)) < 0)
            goto fail;
        fitted += rc;
    }
    if ((rc = mrd__clock_exec(db, log, mrd_db_sql_clock_fit_commit)))
        goto fail;
    in_tx = 0;
    rc = fitted;
fail:
    if (rc == -MRD_ERR_SQLITE && log)
        fprintf(log, "clock: fit: %s\n", sqlite3_errmsg(db));
    if (in_tx)
        mrd__clock_exec(db, NULL, mrd_db_sql_rollback);
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    sqlite3_finalize(ins);
    mrd__clock_probes_destroy(p);
    return rc;
}
