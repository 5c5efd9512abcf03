/* The flusher's batches, record file and Goodbye: what the loop (flusher.c), the data
 * connection (datalink.c), the clock connection (clocklink.c) and the re-split (resplit.c)
 * all build on, so that none of them calls back into another.
 *
 * Where it sits: below those four, above the batch builder (proto/batch.h), the unacked
 * queue (txqueue.c) and the counters (agent/base). Flusher thread only, except the last
 * error (a mutex: the exit line reads it from another thread).
 *
 * Workload: every event drained from the rings passes through mrd__tx_add_event (up to
 * 200,000/s in bursts); a batch is finished a few times a second; the record file gets
 * every batch frame once, as it enters the queue.
 *
 * Record file (MERIDIAN_RECORD_FILE): "MRDCAP1\n", then the Hello (it carries no secret;
 * written just before the first batch so it lists the GPUs seen by then), every batch frame
 * once as it enters the queue (resends are not repeated), and the Goodbye.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"
#include "flusher_int.h"

static const char k_magic[8] = {'M', 'R', 'D', 'C', 'A', 'P', '1', '\n'};

void mrd__tx_set_error(struct mrd_flusher *f, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&f->sh->err_lock);
    va_start(ap, fmt);
    vsnprintf(f->sh->last_error, sizeof f->sh->last_error, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&f->sh->err_lock);
}

/* ---- record file ---------------------------------------------------------------- */

static void rec_write(struct mrd_flusher *f, const void *buf, size_t len)
{
    int fd = atomic_load(&f->rec_fd);
    const uint8_t *p = buf;
    while (fd >= 0 && len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "meridian: rank %d: record file %s: %s; recording stopped\n",
                    f->id.cfg->rank, f->id.cfg->record_file, mrd_strerror(n < 0 ? -errno : -EIO));
            atomic_store(&f->rec_fd, -1);
            close(fd);
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

void mrd__tx_record_frame(struct mrd_flusher *f, const uint8_t *frame, size_t len)
{
    if (atomic_load(&f->rec_fd) < 0)
        return;
    if (!f->rec_hello_done) {
        struct mrd_hello_buf hb;
        uint8_t *hf = NULL;
        size_t hl = 0;
        f->rec_hello_done = 1;
        mrd__link_fill_hello(&f->id, MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA, &hb);
        if (mrd_frame_encode(MRD_FRAME_HELLO, &hb.h.base, 0, MRD_FRAME_DEFAULT_MAX, &hf, &hl) == 0)
            rec_write(f, hf, hl);
        free(hf);
    }
    rec_write(f, frame, len);
}

void mrd__tx_record_open(struct mrd_flusher *f)
{
    if (f->id.cfg->record_file[0] == '\0')
        return;
    int fd = open(f->id.cfg->record_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "meridian: rank %d: cannot open record file %s: %s\n", f->id.cfg->rank,
                f->id.cfg->record_file, mrd_strerror(-errno));
        return;
    }
    atomic_store(&f->rec_fd, fd);
    rec_write(f, k_magic, sizeof k_magic);
}

/* ---- batches ---------------------------------------------------------------------- */

void mrd__tx_count_drop(int reason, uint64_t n)
{
    if (n)
        mrd_agent_count_drop(reason, n);
}

/* Encodes the pending events (and current drop counters) as the next batch and queues
 * it. Returns 0, or a negative code when the builder could not finish (events stay). */
int mrd__tx_finish_batch(struct mrd_flusher *f, int64_t now)
{
    uint64_t captured[MRD_EV__COUNT], dropped[MRD_DROP__COUNT], drops = 0;
    mrd_agent_counters(captured, dropped);
    for (int i = 0; i < MRD_DROP__COUNT; i++)
        drops += dropped[i];
    mrd_batch_builder_set_dropped(f->b, dropped);

    uint32_t events = (uint32_t)mrd_batch_builder_pending(f->b);
    uint8_t *frame = NULL;
    size_t len = 0;
    uint64_t seq = f->next_seq;
    int e = mrd_batch_builder_finish(f->b, seq, &frame, &len);
    if (e != 0) {
        static int logged;
        if (!logged++)
            fprintf(stderr, "meridian: rank %d: cannot encode a batch of %u events: %s\n",
                    f->id.cfg->rank, events, mrd_strerror(e));
        return e;
    }
    f->next_seq++;
    f->batch_first_ns = 0;
    f->last_batch_ns = now;
    f->drops_in_last_batch = drops;
    f->cv.new_string_bytes = 0;
    if (!f->lim.resplitting) /* a re-split frame's events are in the file already (resplit.c) */
        mrd__tx_record_frame(f, frame, len);

    if (f->record_only) {
        mrd_batch_builder_acked(f->b, seq);
        atomic_fetch_add(&f->sh->events_acked, events);
        atomic_fetch_add(&f->sh->batches_acked, 1);
        free(frame);
        return 0;
    }
    e = mrd_txq_push(&f->q, seq, events, frame, len);
    if (e != 0) { /* over MERIDIAN_QUEUE_BYTES (or no memory): drop the newest, counted */
        free(frame);
        mrd__tx_count_drop(MRD_DROP_QUEUE_FULL, events);
        return 0;
    }
    atomic_store(&f->sh->events_queued, f->q.events);
    return 0;
}

int mrd__tx_add_event(struct mrd_flusher *f, int kind, const void *ev, int64_t now)
{
    int e = mrd_batch_add_any(f->b, kind, ev);
    if (e == -EAGAIN) {
        int fe = mrd__tx_finish_batch(f, now);
        e = fe == 0 ? mrd_batch_add_any(f->b, kind, ev) : fe;
    }
    if (e != 0)
        mrd__tx_count_drop(mrd__convert_drop_reason(e), 1);
    return e;
}

void mrd__tx_add_clock_sample(struct mrd_flusher *f, const struct mrd_clock_sample *s)
{
    if (mrd__tx_add_event(f, MRD_EV_CLOCK, s, mrd__mono_ns()) != 0)
        return;
    if (f->batch_first_ns == 0)
        f->batch_first_ns = mrd__mono_ns();
    mrd_agent_count_captured(MRD_EV_CLOCK, 1);
    atomic_fetch_add(&f->sh->clock_samples, 1);
}

/* The n values that are not 0 as Counters (key: the index) in c[], listed in p[]; returns
 * how many. */
static size_t put_counters(const uint64_t *v, int n, Meridian__V1__Counter c[],
                           Meridian__V1__Counter *p[])
{
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        meridian__v1__counter__init(&c[i]);
        c[i].key = (uint32_t)i;
        c[i].value = v[i];
        if (v[i])
            p[k++] = &c[i];
    }
    return k;
}

void mrd__tx_fill_goodbye(struct mrd_flusher *f, struct mrd_goodbye_buf *gb)
{
    uint64_t captured[MRD_EV__COUNT], dropped[MRD_DROP__COUNT];
    Meridian__V1__Goodbye *g = &gb->g;
    mrd_agent_counters(captured, dropped);
    meridian__v1__goodbye__init(g);
    g->n_captured = put_counters(captured, MRD_EV__COUNT, gb->cc, gb->cp);
    g->n_dropped = put_counters(dropped, MRD_DROP__COUNT, gb->dc, gb->dp);
    g->captured = gb->cp;
    g->dropped = gb->dp;
    size_t nn = mrd_agent_named_counters(gb->named, MRD_AGENT_NAMED_MAX);
    for (size_t i = 0; i < nn; i++) {
        meridian__v1__named_counter__init(&gb->nc[i]);
        gb->nc[i].category = (char *)gb->named[i].category;
        gb->nc[i].name = (char *)gb->named[i].name;
        gb->nc[i].value = gb->named[i].value;
        gb->np[i] = &gb->nc[i];
    }
    g->n_named = nn;
    g->named = nn ? gb->np : NULL;
    g->bytes_sent = atomic_load(&f->sh->bytes_sent);
    g->batches_sent =
        f->record_only ? f->next_seq - f->first_seq : atomic_load(&f->sh->batches_sent);
    g->batches_resent = atomic_load(&f->sh->batches_resent);
    g->last_seq = f->next_seq - 1;
}

void mrd__tx_record_goodbye(struct mrd_flusher *f)
{
    struct mrd_goodbye_buf gb;
    uint8_t *fr = NULL;
    size_t len = 0;
    if (atomic_load(&f->rec_fd) < 0)
        return;
    mrd__tx_fill_goodbye(f, &gb);
    if (mrd_frame_encode(MRD_FRAME_GOODBYE, &gb.g.base, 0, MRD_FRAME_DEFAULT_MAX, &fr, &len) == 0)
        mrd__tx_record_frame(f, fr, len);
    free(fr);
}
