/* aggregator_store, part two: the schema versions (test_store_schema.c), run from
 * test_store.c's main. */
#ifndef MRD_TEST_STORE_SCHEMA_H
#define MRD_TEST_STORE_SCHEMA_H

/* Databases of schema version 1 (both layouts), of a newer version and without a version
 * are opened by the store and checked; files are created under dir. Fails the test
 * (check.h) on any difference. */
void check_schema_versions(const char *dir);

/* test_store.c: fails the test unless a Hello's committed-seq lookup on db's batches uses
 * the (rank, agent_instance, seq) index. */
struct sqlite3;
void check_seq_index(struct sqlite3 *db);

#endif
