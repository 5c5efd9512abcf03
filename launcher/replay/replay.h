/* `meridian replay`: the load generator that speaks the real protocol.
 *
 * Simulated ranks (one process each) send synthetic training-job events, or replay recorded
 * .mrdcap captures with run id and rank rewritten, to a meridiand at a chosen rate, with
 * at-least-once delivery, and write a per-rank report (events sent and a checksum computed
 * by the sender) that tests compare with the database. `--help` lists every option.
 */
#ifndef MRD_REPLAY_H
#define MRD_REPLAY_H

/* Entry point of `meridian replay ARGS` (argv[0] is the subcommand name) and of the
 * standalone `meridian-replay` driver. Returns the process exit status: 0 when every rank
 * had all its batches acknowledged, 1 when some rank failed, 2 for a usage error.
 * Forks one process per rank (more than one rank); call from the main thread only. */
int mrd_replay_main(int argc, char **argv);

#endif
