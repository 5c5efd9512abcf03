/* Background threads of meridian's programs: the one way to start one with every signal
 * blocked (signals stay with the program's main thread, which handles them) and to stop one
 * that sleeps on a condition variable until a stop flag is set.
 *
 * A worker here is a thread the caller owns through its pthread_t; its loop waits on cv
 * under mu and returns once *stop is set. The aggregator's store writer and checkpointer and
 * its uplink use it. Any thread may start or stop a worker, but only one stops a given
 * worker, once. Not for the agent's hot path (creating a thread allocates).
 */
#ifndef MRD_WORKER_H
#define MRD_WORKER_H

#include <pthread.h>

/* Starts *thread running main(arg) with every signal blocked, named `name` (at most 15
 * characters; a longer one leaves the thread unnamed). The caller's signal mask is as it
 * was afterwards. Returns 0 or a negative errno from pthread_create (*thread unset). */
int mrd_worker_start(pthread_t *thread, const char *name, void *(*main)(void *), void *arg);

/* Sets *stop = 1 under mu, signals cv and joins thread: returns once the worker's loop has
 * seen the flag and returned. */
void mrd_worker_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop);

#endif
