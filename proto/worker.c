/* Background threads started with signals blocked and stopped by a flag (worker.h). */
#include "worker.h"

#include <signal.h>

int mrd_worker_start(pthread_t *thread, const char *name, void *(*main)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(thread, NULL, main, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_setname_np(*thread, name);
    return 0;
}

void mrd_worker_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop)
{
    pthread_mutex_lock(mu);
    *stop = 1;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
    pthread_join(thread, NULL);
}
