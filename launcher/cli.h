/* The `meridian` command's subcommands (one function each, argv[0] = subcommand name) and
 * the pieces they share. Every subcommand returns the process exit status and prints its
 * own errors, one line each, starting with "meridian <subcommand>: ". Each describes its
 * options as a table for the one parser, proto/opts.h (-h/--help included).
 *
 * Where it sits: the user-facing end of the launcher; meridian.c dispatches, profile.c
 * (options in profile_opts.c) runs whole jobs, run.c wraps one rank, doctor.c checks the
 * environment, finalize.c completes a
 * database after a run (clock fit, GPU calibration, causality) and meridian.c renders
 * reports and exports through aggregator/analyze and aggregator/export.
 * Main thread only.
 */
#ifndef MRD_CLI_H
#define MRD_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

/* Exit statuses of meridian itself, as for env(1)/timeout(1). */
#define MRD_CLI_EXIT_SETUP    125 /* meridian failed before the command ran */
#define MRD_CLI_EXIT_NOEXEC   126 /* the command could not be executed */
#define MRD_CLI_EXIT_NOTFOUND 127 /* the command was not found */

/* `meridian profile ...` (profile.c): runs a whole job under a fresh meridiand, then
 * finalizes and reports. Returns the job's exit status (128+N for signal N), 125 when
 * meridian failed before the job started, 126/127 when the job could not be executed. */
int mrd_cli_profile(int argc, char **argv);

/* `meridian run ...` (run.c): sets the agent environment and execs the command; returns
 * only on failure (125 usage/setup, 126/127 exec). */
int mrd_cli_run(int argc, char **argv);

/* `meridian window DB [--length N] [--control PATH]` (window_cmd.c): asks the running
 * meridiand of DB (its control socket DB.ctl) for a window of N steps on every rank and
 * prints the answer line. Returns 0 when the window was opened, 1 on an error answer or
 * no meridiand, 2 on a usage error. */
int mrd_cli_window(int argc, char **argv);

/* `meridian doctor [--agent-lib P] [--nodes] [-- COMMAND]` (doctor.c): prints one line per
 * check; with COMMAND also its launchers (mpirun, srun, torchrun), how the agent's
 * variables reach the ranks and where each rank's number comes from; with --nodes,
 * COMMAND is a launcher prefix run once to check the agent libraries on every node it
 * reaches. Returns 0 when no check FAILed, 1 otherwise, 2 on a usage error. */
int mrd_cli_doctor(int argc, char **argv);

/* Completes a database whose daemon has stopped: writes runs.command when `command` is
 * not NULL, then, when this build has aggregator/clock, fits clock models, calibrates GPU
 * timers and runs the causality check (tightening offsets), logging to `log`. Returns 0,
 * or a negative code when the database could not be updated (the fit itself failing for
 * lack of probes is logged, not an error). */
int mrd_cli_finalize(sqlite3 *db, const char *command, FILE *log);

/* mrd_cli_finalize with progress on stderr (launcher/progress.h: mode MRD_PROGRESS_AUTO,
 * _ON for --progress, _OFF for --quiet; lines prefixed `who`), counted in rows of the
 * tables the four passes read, inside each pass too (finalize.c says which). While
 * progress is shown it sets, then clears, db's sqlite3_trace_v2 callback.
 * mrd_cli_finalize is this with MRD_PROGRESS_OFF. */
int mrd_cli_finalize_progress(sqlite3 *db, const char *command, FILE *log, const char *who,
                              int progress);

/* `meridian merge` (merge.c): merges the shard databases of one run (one meridiand per
 * shard, each with its own database; aggregator hosts sharing one monotonic clock, i.e.
 * equal runs.boot_id) into a new database `out`, as if one aggregator had stored every
 * rank: same run id and schema version required, each rank in exactly one shard, string
 * ids remapped, every global-timebase column of shard k shifted onto shard 0's timebase
 * (global = anchor_realtime_ns + monotonic - anchor_monotonic_ns, so the shift is
 * (ar_0 - am_0) - (ar_k - am_k)). Clock models are not copied: the merged database is
 * finalized afterwards (mrd_cli_finalize), so the clock fit and the causality check see
 * every rank. Refuses (nothing written, `out` not left behind) shards of different runs,
 * hosts or schema versions, a rank in two shards, an existing `out` unless overwrite.
 * Progress and errors go to `log` with the prefix `who`. Returns 0, or 1 after an error. */
int mrd_cli_merge_shards(const char *out, const char *const *shards, int nshards,
                         int overwrite, FILE *log, const char *who);

/* mrd_cli_merge_shards with progress on stderr (launcher/progress.h modes), counted in rows
 * read from the shards: the COUNT(*) of every table copied from every shard, counted
 * first; each table's rows count when its copy ends. mrd_cli_merge_shards is this with
 * MRD_PROGRESS_OFF. */
int mrd_cli_merge_shards_progress(const char *out, const char *const *shards, int nshards,
                                  int overwrite, FILE *log, const char *who, int progress);

/* `meridian merge -o OUT [--overwrite] [--no-finalize] SHARD.db...` (merge.c): the merge
 * above, then mrd_cli_finalize on OUT unless --no-finalize. Returns 0, 1 on error, 2 on a
 * usage error. */
int mrd_cli_merge(int argc, char **argv);

/* `meridian diff BEFORE.db AFTER.db [--json] [--fail-if-slower PCT]` (diff.c): compares
 * two runs, both opened read-only. Returns 0, 1 when a database could not be read or
 * analysed, 2 on a usage error or runs of different world sizes, 3 when
 * --fail-if-slower tripped. */
int mrd_cli_diff(int argc, char **argv);

/* Opens a database for reading (readonly = 1) or for finalize. Logs why it failed, with
 * the subcommand name as prefix. Returns NULL on failure. */
sqlite3 *mrd_cli_open_db(const char *path, int readonly, const char *who);

/* Analyses db and writes the text report to `text` (may be NULL), the HTML report to
 * html_path and the JSON document to json_path (each may be NULL; "-" = stdout).
 * step_name: NVTX step range prefix (NULL = the default names, see analyze.h).
 * Returns 0 or 1 (errors printed with prefix `who`). */
int mrd_cli_render(sqlite3 *db, FILE *text, const char *html_path, const char *json_path,
                   int ignore_clock, const char *step_name, const char *who);

/* mrd_cli_render with progress on stderr (launcher/progress.h: mode MRD_PROGRESS_AUTO, _ON
 * for --progress, _OFF for --quiet), counted in collective instances analysed. */
int mrd_cli_render_progress(sqlite3 *db, FILE *text, const char *html_path,
                            const char *json_path, int ignore_clock, const char *step_name,
                            const char *who, int progress);

/* The number of collective instances the analysis will match in db (0 when unknown), the
 * total of the progress lines. */
uint64_t mrd_cli_instance_count(sqlite3 *db);

#endif
