/* The environment fingerprint compared across ranks (the rules are in fingerprint.h).
 *
 * Where it sits: analysis. Reads every env_records row once (mrd_db_sql_env_pairs) into
 * an array of (compared key, rank, value), sorts it, and walks one key at a time: per
 * rank its joined value, then the majority and the ranks that differ. Memory O(rows).
 */
#include "fingerprint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmp.h"
#include "db.h"
#include "error.h"

struct pair {
    char *key, *value; /* owned */
    int rank;
};

struct pairs {
    struct pair *v;
    size_t n, cap;
    int *ranks; /* distinct ranks, ascending */
    int nranks;
};

static const char *const identity_keys[] = {
    "hostname",
    "gpu.uuid",
    "env:CUDA_VISIBLE_DEVICES",
    "env:NVIDIA_VISIBLE_DEVICES",
    "env:OMPI_MCA_ess_base_vpid",
    "env:OMPI_MCA_orte_ess_vpid",
    "env:OMPI_MCA_orte_ess_node_rank",
    "env:OMPI_MCA_orte_local_daemon_uri",
    "env:OMPI_MCA_orte_jobfam_session_dir",
    "env:OMPI_MCA_orte_top_session_dir",
};

/* The compared key of a stored one (gpu<N>.<field> -> gpu.<field>), malloc'd. */
static char *compared_key(const char *key)
{
    const char *p = key + 3;
    if (strncmp(key, "gpu", 3) == 0 && *p >= '0' && *p <= '9') {
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == '.') {
            size_t n = strlen(p);
            char *k = malloc(3 + n + 1);
            if (k) {
                memcpy(k, "gpu", 3);
                memcpy(k + 3, p, n + 1);
            }
            return k;
        }
    }
    return strdup(key);
}

static int is_identity(const char *key)
{
    for (size_t i = 0; i < sizeof identity_keys / sizeof identity_keys[0]; i++)
        if (strcmp(key, identity_keys[i]) == 0)
            return 1;
    return 0;
}

static int add_rank(struct pairs *ps, int rank)
{
    if (ps->nranks > 0 && ps->ranks[ps->nranks - 1] == rank)
        return 0;
    int *r = realloc(ps->ranks, (size_t)(ps->nranks + 1) * sizeof *r);
    if (!r)
        return -ENOMEM;
    ps->ranks = r;
    r[ps->nranks++] = rank;
    return 0;
}

/* One row: rank, key, value (rows arrive by rank). */
static int load_row(sqlite3_stmt *st, void *ctx)
{
    struct pairs *ps = ctx;
    int rank = sqlite3_column_int(st, 0);
    const char *key = (const char *)sqlite3_column_text(st, 1);
    const char *value = (const char *)sqlite3_column_text(st, 2);
    if (add_rank(ps, rank) < 0)
        return -ENOMEM;
    if (!key)
        return 0; /* a string the store could not resolve: nothing to compare */
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 256;
        struct pair *v = realloc(ps->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        ps->v = v;
        ps->cap = cap;
    }
    char *k = compared_key(key);
    char *val = strdup(value ? value : ""); /* value id 0: the empty string */
    if (!k || !val || is_identity(k)) {
        free(k);
        free(val);
        return k && val ? 0 : -ENOMEM;
    }
    ps->v[ps->n++] = (struct pair){k, val, rank};
    return 0;
}

static int by_key_rank_value(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    return MRD_CMP_KEYS(strcmp(x->key, y->key), MRD_CMP(x->rank, y->rank),
                        strcmp(x->value, y->value));
}

/* One rank's value of a key: the distinct values of v[0..n) (sorted) joined by ",". */
static char *joined(const struct pair *v, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i].value) + 1;
    char *s = malloc(len + 1), *p = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(v[i].value, v[i - 1].value) == 0)
            continue;
        if (i > 0)
            *p++ = ',';
        size_t l = strlen(v[i].value);
        memcpy(p, v[i].value, l);
        p += l;
    }
    *p = '\0';
    return s;
}

struct rank_value {
    int rank;
    char *value; /* owned */
};

static int by_value(const void *a, const void *b)
{
    return strcmp(((const struct rank_value *)a)->value, ((const struct rank_value *)b)->value);
}

static void free_key(struct mrd_env_key *k)
{
    free((char *)k->key);
    free((char *)k->majority);
    for (int i = 0; i < k->ndiffs; i++)
        free((char *)k->diffs[i].value);
    free(k->diffs);
}

static int cmp_int(const void *a, const void *b)
{
    return MRD_CMP(*(const int *)a, *(const int *)b);
}

static int by_diff_rank(const void *a, const void *b)
{
    return cmp_int(&((const struct mrd_env_diff *)a)->rank,
                   &((const struct mrd_env_diff *)b)->rank);
}

/* Compares one key over the sorted pairs v[0..n) (all of that key); adds it to r when some
 * rank differs. rv: scratch of at least nranks entries. */
static int compare_key(struct mrd_env_report *r, const struct pairs *ps, const struct pair *v,
                       size_t n, struct rank_value *rv)
{
    int present = 0, rc = -ENOMEM;
    struct mrd_env_key k;
    memset(&k, 0, sizeof k);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j].rank == v[i].rank)
            j++;
        rv[present].rank = v[i].rank;
        if (!(rv[present].value = joined(v + i, j - i)))
            goto fail;
        present++;
        i = j;
    }
    qsort(rv, (size_t)present, sizeof *rv, by_value);
    /* the most frequent present value, the first in byte order on a tie */
    int best = -1, best_count = 0;
    for (int i = 0; i < present;) {
        int j = i;
        while (j < present && strcmp(rv[j].value, rv[i].value) == 0)
            j++;
        if (j - i > best_count) {
            best = i;
            best_count = j - i;
        }
        i = j;
    }
    int absent = ps->nranks - present;
    const char *majority = absent > best_count ? NULL : rv[best].value;
    k.majority_ranks = majority ? best_count : absent;
    if (k.majority_ranks == ps->nranks)
        rc = 0; /* every rank agrees */
    else {
        k.diffs = calloc((size_t)(ps->nranks - k.majority_ranks), sizeof *k.diffs);
        if (!k.diffs || !(k.key = strdup(v[0].key)) ||
            (majority && !(k.majority = strdup(majority))))
            goto fail;
        for (int i = 0; i < present; i++)
            if (!majority || strcmp(rv[i].value, majority) != 0) {
                k.diffs[k.ndiffs].rank = rv[i].rank;
                k.diffs[k.ndiffs++].value = rv[i].value;
                rv[i].value = NULL; /* moved */
            }
        if (majority) /* ranks without the key: those of ps->ranks not in rv */
            for (int i = 0; i < ps->nranks; i++) {
                int found = 0;
                for (int j = 0; j < present && !found; j++)
                    found = rv[j].rank == ps->ranks[i];
                if (!found)
                    k.diffs[k.ndiffs++].rank = ps->ranks[i];
            }
        qsort(k.diffs, (size_t)k.ndiffs, sizeof *k.diffs, by_diff_rank);
        struct mrd_env_key *keys = realloc(r->keys, (size_t)(r->nkeys_differ + 1) * sizeof *keys);
        if (!keys)
            goto fail;
        r->keys = keys;
        keys[r->nkeys_differ++] = k;
        memset(&k, 0, sizeof k);
        rc = 0;
    }
fail:
    free_key(&k);
    for (int i = 0; i < present; i++)
        free(rv[i].value);
    return rc;
}

int mrd_analyze_env(sqlite3 *db, struct mrd_env_report **out)
{
    struct pairs ps;
    struct mrd_env_report *r = NULL;
    struct rank_value *rv = NULL;
    int rc;

    memset(&ps, 0, sizeof ps);
    *out = NULL;
    if ((rc = mrd_db_each_row(db, "env_records", mrd_db_sql_env_pairs, load_row, &ps)) < 0)
        goto fail;
    rc = 0;
    if (ps.nranks == 0)
        goto fail; /* no fingerprint stored: *out stays NULL */
    rc = -ENOMEM;
    r = calloc(1, sizeof *r);
    rv = calloc((size_t)ps.nranks, sizeof *rv);
    if (!r || !rv)
        goto fail;
    r->nranks = ps.nranks;
    qsort(ps.v, ps.n, sizeof *ps.v, by_key_rank_value);
    for (size_t i = 0; i < ps.n;) {
        size_t j = i;
        while (j < ps.n && strcmp(ps.v[j].key, ps.v[i].key) == 0)
            j++;
        r->nkeys++;
        if ((rc = compare_key(r, &ps, ps.v + i, j - i, rv)) < 0)
            goto fail;
        i = j;
    }
    *out = r;
    r = NULL;
    rc = 0;
fail:
    mrd_env_report_free(r);
    free(rv);
    for (size_t i = 0; i < ps.n; i++) {
        free(ps.v[i].key);
        free(ps.v[i].value);
    }
    free(ps.v);
    free(ps.ranks);
    return rc;
}

void mrd_env_report_free(struct mrd_env_report *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nkeys_differ; i++)
        free_key(&r->keys[i]);
    free(r->keys);
    free(r);
}
