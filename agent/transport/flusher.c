/* The agent's single background thread: rings -> batches -> frames -> meridiand.
 *
 * Where it sits: the only consumer of the per-thread rings (agent/ring) and the only user
 * of the sockets. Capture code never waits for it: when it falls behind, rings drop and
 * count; when the aggregator is absent or slow, the bounded unacked queue (txqueue.c)
 * refuses new batches and counts them; the exit flush stops at its deadline.
 *
 * Workload: up to 50,000 events/s per rank sustained, bursts of 200,000/s. A batch is
 * finished every MERIDIAN_BATCH_EVENTS events (16384) or MERIDIAN_BATCH_MS (150 ms) after
 * its first event, whichever comes first, or once it defines 1 MiB of new strings; an empty
 * batch carries changed drop counters once a second. Wake-ups: every 2 ms while records
 * flow, every 10 ms when idle (a ring of 16384 records lasts ~80 ms at 200,000/s), and at
 * once when CUPTI's completion worker finds its ring half full (mrd_ring_pace writes the
 * eventfd; application threads never do). A pass drains up to 4 batches' worth of records;
 * the ring releases space to a waiting producer every 1024 records of it.
 *
 * Sequence numbers start at the agent's CLOCK_REALTIME in microseconds and grow by one per
 * batch: unique per (run, rank) even if a rank's process is restarted within a run, so a
 * new process never has its batches taken for duplicates (nor dropped by committed_seq).
 *
 * Batches, the record file and the Goodbye are built in batches.c. With no
 * MERIDIAN_AGGREGATOR the agent only records ("record-only mode").
 *
 * Exit (mrd__transport_stop): drain every ring, a burst of clock probes, finish the last
 * batch, send and wait for acks until the deadline, count what is still unacknowledged as
 * MRD_DROP_UNSENT_AT_EXIT, send the Goodbye with the totals, wait for its Ack{goodbye}
 * (resending it after a reconnect if the connection broke first), close. The Goodbye and
 * its Ack may use MRD_GOODBYE_GRACE_MS past the deadline, never more.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "flusher_int.h"
#include "gpus.h"
#include "ring.h"
#include "worker.h"

static struct mrd_tx_shared g_sh = {.err_lock = PTHREAD_MUTEX_INITIALIZER};
static struct mrd_resolver g_res; /* static: a lookup thread may outlive a failed start */
static struct mrd_flusher *g_f;
static pthread_t g_thread;
static _Atomic int g_started;
static _Atomic int g_stop_req;
static _Atomic int64_t g_deadline_ns;
static _Atomic int g_wake_fd = -1;
static pthread_mutex_t g_done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done_cond;

static int finish_now(void *arg)
{
    return mrd__tx_finish_batch(arg, mrd__mono_ns());
}

static void drain_one(const struct mrd_record *r, void *arg)
{
    struct mrd_flusher *f = arg;
    int e = mrd__convert_add(&f->cv, r, finish_now, f);
    if (e == 0) {
        if (r->kind < MRD_EV__COUNT)
            f->captured_local[r->kind]++;
        if (f->batch_first_ns == 0)
            f->batch_first_ns = mrd__mono_ns();
    } else {
        /* -MRD_ERR_TOO_LARGE: the record cannot fit even an empty batch (too_large);
         * -EINVAL, or -ENOMEM from the add or from encoding the full batch (unencodable) */
        mrd__tx_count_drop(mrd__convert_drop_reason(e), 1);
    }
}

/* Drains up to max records; returns how many. */
static size_t drain(struct mrd_flusher *f, size_t max)
{
    size_t n = mrd_ring_drain(drain_one, f, max);
    for (int k = 0; k < MRD_EV__COUNT; k++) {
        if (f->captured_local[k]) {
            mrd_agent_count_captured(k, f->captured_local[k]);
            f->captured_local[k] = 0;
        }
    }
    return n;
}

static void maybe_finish(struct mrd_flusher *f, int64_t now, int force)
{
    size_t pending = mrd_batch_builder_pending(f->b);
    int due = pending > 0 &&
              (force || now - f->batch_first_ns >= (int64_t)f->id.cfg->batch_ms * 1000000 ||
               f->cv.new_string_bytes >= MRD_NEW_STRING_BYTES_MAX);
    if (!due && now - f->last_batch_ns >= 1000000000) {
        /* no events, but drop counters moved: tell the aggregator once a second */
        uint64_t c[MRD_EV__COUNT], d[MRD_DROP__COUNT], drops = 0;
        mrd_agent_counters(c, d);
        for (int i = 0; i < MRD_DROP__COUNT; i++)
            drops += d[i];
        due = drops != f->drops_in_last_batch;
    }
    if (due)
        (void)mrd__tx_finish_batch(f, now);
}

/* ---- exit ------------------------------------------------------------------------- */

/* What the exit flush still holds is lost: count it before the Goodbye reports totals. */
static void account_unsent(struct mrd_flusher *f)
{
    uint64_t left = f->q.events + mrd_batch_builder_pending(f->b);
    mrd__tx_count_drop(MRD_DROP_UNSENT_AT_EXIT, left);
    mrd_txq_clear(&f->q);
    atomic_store(&f->sh->events_queued, 0);
}

/* One step of the exit flush; returns 1 when it is over. */
static int stop_step(struct mrd_flusher *f, int64_t now)
{
    if (!f->final_probes_done) {
        f->final_probes_done = 1;
        if (f->clk.link.conn.state == MRD_CONN_READY) {
            int64_t until = now + 500 * 1000000ll;
            mrd__clock_round(f, MRD_PROBE_BURST, until < f->deadline_ns ? until : f->deadline_ns);
        }
        /* one pass: takes what every ring holds now; a thread that keeps writing during
         * exit cannot keep the flush going */
        drain(f, SIZE_MAX);
        maybe_finish(f, now, 1);
    }
    if (f->record_only)
        return 1;
    int queue_empty = f->q.count == 0 && mrd_batch_builder_pending(f->b) == 0;
    if (f->data.goodbye_state == 0 && queue_empty && now < f->deadline_ns &&
        f->data.link.conn.state == MRD_CONN_READY && !f->exit_rehello &&
        mrd__gpus_generation() != f->data.hello_gpu_gen) {
        /* GPUs registered since the Hello (CUPTI reports devices late): say hello again so
         * the aggregator learns them, then goodbye */
        f->exit_rehello = 1;
        mrd_conn_close(&f->data.link.conn);
        f->data.link.next_connect_ns = now;
        return 0;
    }
    if (f->data.goodbye_state == MRD_GB_NONE && (queue_empty || now >= f->deadline_ns)) {
        if (f->data.link.conn.state == MRD_CONN_READY && f->data.write_off == 0) {
            account_unsent(f);
            mrd__data_goodbye(f, now);
        } else if (now >= f->deadline_ns) {
            account_unsent(f);
            return 1;
        }
    }
    if (f->data.goodbye_state == MRD_GB_RESEND && f->data.link.conn.state == MRD_CONN_READY &&
        f->data.write_off == 0)
        mrd__data_goodbye(f, now); /* reconnected: the Goodbye again, totals as of now */
    mrd__data_goodbye_progress(f, now);
    if (f->data.goodbye_state == MRD_GB_DONE)
        return 1;
    return now >= f->deadline_ns + (int64_t)MRD_GOODBYE_GRACE_MS * 1000000;
}

/* ---- the thread ------------------------------------------------------------------- */

/* mrd_ring_pace (CUPTI's completion worker, never an application thread) wakes the loop
 * when its ring is half full. */
static void flusher_wake(void)
{
    int fd = atomic_load(&g_wake_fd);
    uint64_t one = 1;
    if (fd >= 0) {
        ssize_t r = write(fd, &one, sizeof one);
        (void)r;
    }
}

static void *flusher_main(void *arg)
{
    struct mrd_flusher *f = arg;
    int64_t now = mrd__mono_ns();
    size_t max_drain = (size_t)f->id.cfg->batch_events * 4;
    f->last_batch_ns = now;

    for (;;) {
        now = mrd__mono_ns();
        if (!f->stopping && atomic_load(&g_stop_req)) {
            f->stopping = 1;
            f->deadline_ns = atomic_load(&g_deadline_ns);
            if (f->data.link.next_connect_ns > now)
                f->data.link.next_connect_ns = now; /* one more try right away */
        }
        /* once stopping, stop_step drains one last time; records written after that
         * (threads still running during exit) are not waited for */
        size_t n = f->stopping ? 0 : drain(f, max_drain);
        if (!f->stopping)
            maybe_finish(f, now, 0);
        if (!f->record_only) {
            mrd__data_step(f, now);
            mrd__clock_step(f, now);
        }
        if (f->stopping && stop_step(f, mrd__mono_ns()))
            break;

        struct pollfd pfd[3] = {{.fd = atomic_load(&g_wake_fd), .events = POLLIN}};
        pfd[1].fd = f->data.link.conn.fd;
        pfd[1].events = mrd__data_poll_events(f);
        pfd[2].fd = f->clk.link.conn.fd;
        pfd[2].events = mrd__clock_poll_events(f);
        int timeout = n >= max_drain ? 0 : n > 0 ? 2 : 10;
        if (f->stopping)
            timeout = n > 0 ? 0 : 2;
        if (poll(pfd, 3, timeout) > 0) {
            if (pfd[0].revents & POLLIN) {
                uint64_t v;
                ssize_t r = read(pfd[0].fd, &v, sizeof v);
                (void)r;
            }
            now = mrd__mono_ns();
            if (pfd[1].revents && f->data.link.conn.fd >= 0)
                mrd__data_on_poll(f, pfd[1].revents, now);
            if (pfd[2].revents && f->clk.link.conn.fd >= 0)
                mrd__clock_on_poll(f, pfd[2].revents, now);
        }
    }
    mrd_conn_close(&f->data.link.conn);
    mrd_conn_close(&f->clk.link.conn);
    mrd__tx_record_goodbye(f);
    int fd = atomic_exchange(&f->rec_fd, -1);
    if (fd >= 0)
        close(fd);
    pthread_mutex_lock(&g_done_lock);
    atomic_store(&f->sh->finished, 1);
    pthread_cond_broadcast(&g_done_cond);
    pthread_mutex_unlock(&g_done_lock);
    return NULL;
}

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
        v = (uint64_t)mrd__mono_ns() ^ ((uint64_t)getpid() << 32);
    return v;
}

int mrd__transport_start(const struct mrd_agent_config *cfg)
{
    struct mrd_flusher *f = NULL;
    int e, wake = -1;

    if (atomic_exchange(&g_started, 1))
        return -EALREADY;
    f = calloc(1, sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    f->id.cfg = cfg;
    f->sh = &g_sh;
    f->record_only = cfg->aggregator[0] == '\0';
    f->id.agent_instance = random_u64();
    atomic_store(&f->rec_fd, -1);
    mrd__link_init(&f->data.link, MERIDIAN__V1__CONNECTION_ROLE__ROLE_DATA);
    mrd__link_init(&f->clk.link, MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK);
    mrd_txq_init(&f->q, cfg->queue_bytes);
    if (gethostname(f->id.host, sizeof f->id.host - 1) != 0)
        strcpy(f->id.host, "unknown");
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    f->first_seq = f->next_seq = (uint64_t)rt.tv_sec * 1000000 + (uint64_t)rt.tv_nsec / 1000;

    struct mrd_batch_builder_config bc = {
        .run_id = cfg->run_id,
        .rank = (uint32_t)cfg->rank,
        .agent_instance = f->id.agent_instance,
        .max_frame = MRD_FRAME_DEFAULT_MAX,
        .target_events = cfg->batch_events,
        .compress_level = 1,
    };
    e = mrd_batch_builder_new(&bc, &f->b);
    if (e != 0)
        goto fail;
    f->cv = (struct mrd_convert){.b = f->b, .target_events = cfg->batch_events};
    if (!f->record_only) {
        const char *why = "";
        f->res = &g_res; /* a name is looked up on a helper thread from here on */
        if (mrd_resolver_init(f->res, cfg->aggregator, mrd__mono_ns(), &why) == -EINVAL) {
            e = -EINVAL; /* config.c checked it already */
            goto fail;
        }
    }
    f->lim.peer_max_frame = f->lim.builder_max_frame = f->lim.builder_max_ever =
        MRD_FRAME_DEFAULT_MAX;

    wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake < 0) {
        e = -errno;
        goto fail;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_done_cond, &ca);
    pthread_condattr_destroy(&ca);
    mrd__tx_record_open(f);
    atomic_store(&g_wake_fd, wake);
    mrd_ring_set_consumer_wake(flusher_wake);
    g_f = f;

    e = mrd_worker_start(&g_thread, "meridian", flusher_main, f);
    if (e != 0)
        goto fail;
    return 0;
fail:
    g_f = NULL;
    mrd_ring_set_consumer_wake(NULL);
    atomic_store(&g_wake_fd, -1);
    if (wake >= 0)
        close(wake);
    if (f) {
        int rfd = atomic_load(&f->rec_fd);
        if (rfd >= 0)
            close(rfd);
        mrd_batch_builder_free(f->b);
        free(f);
    }
    return e;
}

int mrd__transport_stop(int64_t deadline_ns)
{
    if (g_f == NULL)
        return 0;
    atomic_store(&g_deadline_ns, deadline_ns);
    atomic_store(&g_stop_req, 1);
    uint64_t one = 1;
    ssize_t r = write(atomic_load(&g_wake_fd), &one, sizeof one);
    (void)r;

    /* the flusher may use MRD_GOODBYE_GRACE_MS past the deadline; wait a little more */
    int64_t until = deadline_ns + (int64_t)(MRD_GOODBYE_GRACE_MS + 250) * 1000000;
    struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
    int done = 0;
    pthread_mutex_lock(&g_done_lock);
    while (!(done = atomic_load(&g_sh.finished)))
        if (pthread_cond_timedwait(&g_done_cond, &g_done_lock, &ts) == ETIMEDOUT)
            break;
    done = atomic_load(&g_sh.finished);
    pthread_mutex_unlock(&g_done_lock);
    if (done)
        pthread_join(g_thread, NULL);
    return done ? 0 : -ETIMEDOUT;
}

void mrd__transport_stats(struct mrd_transport_stats *s)
{
    memset(s, 0, sizeof *s);
    s->events_acked = atomic_load(&g_sh.events_acked);
    s->batches_acked = atomic_load(&g_sh.batches_acked);
    s->batches_sent = atomic_load(&g_sh.batches_sent);
    s->batches_resent = atomic_load(&g_sh.batches_resent);
    s->bytes_sent = atomic_load(&g_sh.bytes_sent);
    s->events_queued = atomic_load(&g_sh.events_queued);
    s->clock_samples = atomic_load(&g_sh.clock_samples);
    s->connects = atomic_load(&g_sh.connects);
    s->finished = atomic_load(&g_sh.finished);
    s->goodbye = atomic_load(&g_sh.goodbye);
    s->record_only = g_f ? g_f->record_only : 0;
    pthread_mutex_lock(&g_sh.err_lock);
    memcpy(s->last_error, g_sh.last_error, sizeof s->last_error);
    pthread_mutex_unlock(&g_sh.err_lock);
}

void mrd__transport_atfork_child(void)
{
    struct mrd_flusher *f = g_f;
    int fd = atomic_exchange(&g_wake_fd, -1);
    if (fd >= 0)
        close(fd);
    if (f == NULL)
        return;
    int fds[3] = {atomic_exchange(&f->data.link.conn.fd_mirror, -1),
                  atomic_exchange(&f->clk.link.conn.fd_mirror, -1),
                  atomic_exchange(&f->rec_fd, -1)};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    g_f = NULL;
}
