/* bench_nvtx: what an NVTX push + pop costs the application's thread with the agent as the
 * NVTX injection (a measurement, not a test; tests/agent/RESULTS.md has the numbers).
 *
 * A real NVTX v3 client (nvtx_client.c) calls into the library NVTX_INJECTION64_PATH names
 * (libmeridian.so, active through the environment, e.g. record-only mode). ROUNDS bursts of
 * BURST push+pop pairs, with a 15 ms pause before each so the flusher has emptied the ring
 * (the cost measured is capture's, not a full ring's). Prints the mean and the best burst.
 *   NVTX_INJECTION64_PATH=$PWD/build/agent/libmeridian.so MERIDIAN_FORCE=1 MERIDIAN_RUN_ID=b \
 *   MERIDIAN_RECORD_FILE=/dev/null build/tests/capture/bench_nvtx
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define BURST  2000
#define ROUNDS 400

int nvtx_client_a_push(const char *msg);
int nvtx_client_a_pop(void);

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void)
{
    nvtx_client_a_push("warm-up"); /* NVTX loads the injection, the thread claims its ring */
    nvtx_client_a_pop();
    int64_t total = 0, best = INT64_MAX;
    for (int r = 0; r < ROUNDS; r++) {
        struct timespec pause = {0, 15000000};
        nanosleep(&pause, NULL);
        int64_t t0 = mono_ns();
        for (int i = 0; i < BURST; i++) {
            nvtx_client_a_push("step");
            nvtx_client_a_pop();
        }
        int64_t d = mono_ns() - t0;
        total += d;
        if (d < best)
            best = d;
    }
    printf("bench_nvtx: push+pop mean %.1f ns, best burst %.1f ns (%d x %d pairs)\n",
           (double)total / ((double)BURST * ROUNDS), (double)best / BURST, ROUNDS, BURST);
    return 0;
}
