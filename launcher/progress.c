/* Progress lines on stderr (see progress.h for the rule). */
#include "progress.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mrd_progress_begin(struct mrd_progress *p, int mode, const char *who, const char *what,
                        const char *unit, uint64_t total)
{
    memset(p, 0, sizeof(*p));
    p->tty = isatty(STDERR_FILENO);
    p->on = mode == MRD_PROGRESS_ON || (mode == MRD_PROGRESS_AUTO && p->tty);
    p->who = who;
    p->what = what;
    p->unit = unit;
    p->total = total;
    p->t0_ms = now_ms();
    p->after_ms = MRD_PROGRESS_AFTER_MS;
    p->every_ms = 1000;
    const char *env = getenv("MERIDIAN_PROGRESS_AFTER_MS"); /* tests only */
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0) {
            p->after_ms = v;
            p->every_ms = v < p->every_ms ? v : p->every_ms;
        }
    }
}

static void line(struct mrd_progress *p, int64_t t, int last)
{
    double secs = (double)(t - p->t0_ms) / 1000.0;
    double rate = secs > 0 ? (double)p->done / secs : 0;
    fprintf(stderr, "%s%s: %s %" PRIu64, p->tty ? "\r" : "", p->who, p->what, p->done);
    if (p->total)
        fprintf(stderr, "/%" PRIu64 " %s (%.1f%%)", p->total, p->unit,
                100.0 * (double)p->done / (double)p->total);
    else
        fprintf(stderr, " %s", p->unit);
    fprintf(stderr, ", %.0f/s", rate);
    if (last)
        fprintf(stderr, ", done in %.1f s", secs);
    else if (p->total && rate > 0 && p->done <= p->total)
        fprintf(stderr, ", about %.0f s left", (double)(p->total - p->done) / rate);
    fputs(p->tty && !last ? "\033[K" : "\n", stderr);
    fflush(stderr);
    p->printed = 1;
    p->last_ms = t;
}

void mrd_progress_set_total(struct mrd_progress *p, uint64_t total)
{
    p->total = total;
}

void mrd_progress_set(struct mrd_progress *p, uint64_t done)
{
    p->done = done;
    if (!p->on)
        return;
    int64_t t = now_ms();
    if (t - p->t0_ms < p->after_ms || (p->printed && t - p->last_ms < p->every_ms))
        return;
    line(p, t, 0);
}

void mrd_progress_end(struct mrd_progress *p)
{
    if (p->on && p->printed)
        line(p, now_ms(), 1);
}
