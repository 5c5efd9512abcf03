/* One simulated rank: the generate (or read) -> build -> send -> account loop (see rank.h).
 *
 * Pacing: with a rate, the number of events allowed by elapsed time t is the integral of
 * the rate schedule (burst_rate during the first burst_ms of every burst_period_ms, rate
 * otherwise). A batch is finished when it holds batch_events events or when its first
 * event is flush_ms old (as an agent's flusher would), then submitted; when the window of
 * unacked batches is full the loop waits for acks (a load generator may wait; it counts
 * nothing as dropped).
 */
#include "rank.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "canon.h"
#include "capfile.h"
#include "error.h"
#include "filter.h"
#include "frame.h"
#include "gen.h"
#include "split.h"

#define CAPTURE_STRING_IDS (1u << 20) /* capture string ids from here on are refused */

struct rank_run {
    const struct mrd_rank_opts *o;
    struct mrd_rank_result *res;
    struct mrd_batch_builder *b;
    struct mrd_client *c;
    struct mrd_capfile *rec;
    FILE *dump;
    uint8_t **keep; /* copies of the first resend_acked frames */
    size_t *keep_len;
    uint32_t nkeep;
    double t0;
    Meridian__V1__Hello *hello; /* replayed capture's Hello (client config points in) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail_why(struct mrd_rank_result *res, int rc, const char *what)
{
    if (res->rc == 0) {
        res->rc = rc;
        snprintf(res->why, sizeof res->why, "%s: %s", what, mrd_strerror(rc));
    }
}

/* Events the rate schedule allows after t seconds (unbounded when rate is 0). */
static double allowed(const struct mrd_rank_opts *o, double t)
{
    if (o->rate <= 0)
        return 1e300;
    double period = o->burst_period_ms / 1000.0, burst = o->burst_ms / 1000.0;
    double br = o->burst_rate > 0 ? o->burst_rate : o->rate;
    if (period <= 0 || burst <= 0 || burst >= period)
        return o->rate * t;
    double full = (double)(int64_t)(t / period), part = t - full * period;
    double per = burst * br + (period - burst) * o->rate;
    double in = part < burst ? part * br : burst * br + (part - burst) * o->rate;
    return full * per + in;
}

static double rate_at(const struct mrd_rank_opts *o, double t)
{
    double period = o->burst_period_ms / 1000.0, burst = o->burst_ms / 1000.0;
    if (o->burst_rate > 0 && period > 0 && burst > 0 && t - period * (int64_t)(t / period) < burst)
        return o->burst_rate;
    return o->rate;
}

static void on_ack(void *ctx, uint64_t seq, int dup)
{
    struct rank_run *r = ctx;
    (void)dup;
    if (r->b)
        mrd_batch_builder_acked(r->b, seq);
}

static void tap(void *ctx, const uint8_t *frame, size_t len)
{
    struct rank_run *r = ctx;
    if (r->rec && mrd_capfile_write(r->rec, frame, len) < 0) {
        fprintf(stderr, "meridian-replay: rank %u: recording failed, stopped\n", r->res->rank);
        mrd_capfile_close(r->rec);
        r->rec = NULL;
    }
}

static void dump_event(FILE *f, const struct mrd_canon_event *e, mrd_canon_resolve_fn fn, void *ctx)
{
    char text[1024];
    mrd_canon_text(e, fn, ctx, text, sizeof text);
    fprintf(f, "%s\n", text);
}

/* Queues one frame (ownership passes), waiting for room in the window. */
static int submit(struct rank_run *r, uint64_t seq, uint8_t *frame, size_t len, uint64_t events,
                  uint64_t checksum)
{
    int rc;
    if (r->nkeep < r->o->resend_acked) {
        r->keep[r->nkeep] = malloc(len);
        if (!r->keep[r->nkeep]) {
            free(frame);
            return -ENOMEM;
        }
        memcpy(r->keep[r->nkeep], frame, len);
        r->keep_len[r->nkeep++] = len;
    }
    while ((rc = mrd_client_submit(r->c, seq, frame, len, events, checksum)) == -EAGAIN) {
        rc = mrd_client_pump(r->c, 100);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        free(frame);
        return rc;
    }
    if (r->res->batches++ == 0)
        r->res->first_seq = seq;
    r->res->last_seq = seq;
    r->res->events += events;
    r->res->checksum += checksum;
    return mrd_client_pump(r->c, 0);
}

/* The limit frames must fit: ours (--max-frame), or the aggregator's if it announced a
 * smaller one (HelloReply.max_frame_bytes of the latest connection). */
static uint32_t send_limit(const struct rank_run *r)
{
    struct mrd_client_stats st;
    mrd_client_get_stats(r->c, &st);
    return st.peer_max_frame && st.peer_max_frame < r->o->conn.max_frame ? st.peer_max_frame
                                                                         : r->o->conn.max_frame;
}

/* Connects as cc says: the run's connection (r->o->conn) with this rank's Hello fields. */
static int make_client(struct rank_run *r, struct mrd_client_config *cc)
{
    cc->tap = r->o->record_path ? tap : NULL;
    cc->tap_ctx = r;
    int rc = mrd_client_new(cc, &r->c);
    if (rc < 0)
        return rc;
    mrd_client_on_ack(r->c, on_ack, r);
    return mrd_client_connect(r->c);
}

/* ---- synthetic ---- */

/* Finishes the builder's pending events (n, hashes summing to sum) as batch seq and
 * submits it. */
static int finish_submit(struct rank_run *r, uint64_t seq, uint64_t n, uint64_t sum)
{
    uint8_t *frame = NULL;
    size_t len = 0;
    int rc = mrd_batch_builder_finish(r->b, seq, &frame, &len);
    return rc < 0 ? rc : submit(r, seq, frame, len, n, sum);
}

static int run_synthetic(struct rank_run *r)
{
    const struct mrd_rank_opts *o = r->o;
    struct mrd_rank_result *res = r->res;
    struct mrd_gen *g = NULL;
    struct mrd_canon_event e;
    uint64_t generated = 0, seq = 0, bev = 0, bsum = 0;
    double bstart = 0;
    struct mrd_batch_builder_config bc = {
        .run_id = o->conn.run_id,
        .rank = o->rank,
        .agent_instance = 0,
        .max_frame = o->conn.max_frame,
        .target_events = o->batch_events,
        .compress_level = o->compress,
    };
    struct mrd_client_config cc = o->conn;
    struct mrd_gen_config gc = {
        .rank = o->rank, .world_size = o->world_size, .seed = o->seed, .mix = o->mix};
    int rc;

    cc.rank = o->rank;
    cc.local_rank = o->local_rank;
    cc.world_size = o->world_size;
    cc.shard_id = o->shard_id;
    bc.agent_instance = cc.agent_instance =
        (o->seed << 20) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s() * 1e9);
    rc = mrd_batch_builder_new(&bc, &r->b);
    if (rc < 0)
        goto fail;
    rc = mrd_gen_new(&gc, r->b, &g);
    if (rc < 0)
        goto fail;
    rc = make_client(r, &cc);
    if (rc < 0)
        goto fail;
    uint32_t limit = send_limit(r);
    if (limit < o->conn.max_frame) /* nothing pending yet: cannot be -EBUSY */
        (void)mrd_batch_builder_set_max_frame(r->b, limit);
    r->t0 = now_s();
    for (;;) {
        double el = now_s() - r->t0;
        int stop = (o->events && generated >= o->events) || (o->seconds > 0 && el >= o->seconds);
        double allow = allowed(o, el);
        while (!stop && bev < o->batch_events && (double)generated < allow) {
            mrd_gen_next(g, &e);
            rc = mrd_batch_add_any(r->b, e.kind, &e.u);
            if (rc == -EAGAIN && bev > 0) { /* full under the frame limit: send, add again */
                if ((rc = finish_submit(r, ++seq, bev, bsum)) < 0)
                    goto fail;
                bev = bsum = 0;
                rc = mrd_batch_add_any(r->b, e.kind, &e.u);
            }
            if (rc < 0)
                goto fail;
            bsum += mrd_canon_hash(&e, mrd_gen_string_hash, g);
            if (r->dump)
                dump_event(r->dump, &e, mrd_gen_string, g);
            res->by_kind[e.kind]++;
            if (bev++ == 0)
                bstart = el;
            if (o->events && ++generated >= o->events)
                stop = 1;
            else if (!o->events)
                generated++;
        }
        el = now_s() - r->t0;
        if (o->seconds > 0 && el >= o->seconds)
            stop = 1;
        if (bev >= o->batch_events || (bev > 0 && (stop || el - bstart >= o->flush_ms / 1000.0))) {
            if ((rc = finish_submit(r, ++seq, bev, bsum)) < 0)
                goto fail;
            bev = bsum = 0;
            continue;
        }
        if (stop)
            break;
        /* wait for acks until a batch worth of events is allowed or the batch is due */
        double wait = o->flush_ms / 1000.0;
        if (bev > 0)
            wait = bstart + o->flush_ms / 1000.0 - el;
        double ra = rate_at(o, el);
        if (ra > 0) {
            double need = (double)(generated + (o->batch_events - bev)) - allow;
            if (need / ra < wait)
                wait = need / ra;
        }
        int ms = wait <= 0.001 ? 1 : wait > 0.2 ? 200 : (int)(wait * 1000);
        rc = mrd_client_pump(r->c, ms);
        if (rc < 0)
            goto fail;
    }
    rc = 0;
fail:
    if (rc < 0)
        fail_why(res, rc, r->c && seq == 0 ? "connecting" : "sending");
    mrd_gen_free(g);
    return rc;
}

/* ---- capture replay ---- */

/* Counts and hashes every event of a checked batch. Returns the number of events. */
static uint64_t hash_batch(const Meridian__V1__Batch *m, struct mrd_canon_strings *map,
                           uint64_t *sum, uint64_t by_kind[MRD_EV__COUNT], FILE *dump)
{
    struct mrd_batch_cursor cur;
    struct mrd_canon_event e;
    uint64_t n = 0;
    memset(&e, 0, sizeof e);
    for (int k = 1; k < MRD_EV__COUNT; k++) {
        mrd_batch_cursor_init(&cur, m);
        e.kind = k;
        while (mrd_batch_next_any(&cur, k, &e.u)) {
            *sum += mrd_canon_hash(&e, mrd_canon_strings_hash, map);
            if (dump)
                dump_event(dump, &e, mrd_canon_strings_get, map);
            by_kind[k]++;
            n++;
        }
    }
    return n;
}

static int emit_part(void *ctx, uint64_t seq, uint8_t *frame, size_t len, uint64_t events,
                     uint64_t checksum)
{
    return submit(ctx, seq, frame, len, events, checksum);
}

/* Sends the events of checked batch m (n events, hashes summing to sum) as several batches
 * within `limit`, from seq `seq` on (split.h). */
static int resplit(struct rank_run *r, const Meridian__V1__Batch *m, struct mrd_canon_strings *map,
                   uint64_t instance, uint32_t limit, uint64_t seq, uint64_t n, uint64_t sum)
{
    struct mrd_split_config sc = {
        .run_id = r->o->conn.run_id,
        .rank = r->res->rank,
        .agent_instance = instance,
        .max_frame = limit,
        .compress_level = r->o->compress,
        .string = mrd_canon_strings_get,
        .string_hash = mrd_canon_strings_hash,
        .string_ctx = map,
        .emit = emit_part,
        .emit_ctx = r,
    };
    struct mrd_split_result sr;
    int rc = mrd_split_batch(&sc, m, seq, &sr);
    r->res->resplit_frames++;
    r->res->resplit_batches += sr.batches;
    if (rc == 0 && (sr.events != n || sr.checksum != sum))
        rc = -EPROTO; /* every event once, unchanged: anything else is a bug here */
    if (!r->o->conn.quiet || rc < 0)
        fprintf(stderr,
                "meridian-replay: rank %u: capture batch %" PRIu64 " over the frame limit "
                "of %u bytes: re-split into %" PRIu64 " batches (%s)\n",
                r->res->rank, m->seq, limit, sr.batches, rc < 0 ? mrd_strerror(rc) : "ok");
    return rc;
}

static int replay_batch(struct rank_run *r, Meridian__V1__Batch *m, struct mrd_canon_strings *map,
                        uint64_t instance, const struct mrd_filter *filter)
{
    struct mrd_filter_saved saved;
    const char *why = NULL;
    uint64_t sum = 0;
    uint8_t *frame = NULL;
    size_t len = 0;
    int rc = mrd_batch_check(m, &why);
    if (rc < 0) {
        fprintf(stderr, "meridian-replay: capture batch %" PRIu64 " invalid: %s\n", m->seq,
                why ? why : "?");
        return rc;
    }
    for (size_t i = 0; i < m->n_strings; i++)
        if ((rc = mrd_canon_strings_put(map, m->strings[i]->id, m->strings[i]->value,
                                        CAPTURE_STRING_IDS)) < 0)
            return rc;
    if ((rc = mrd_filter_apply(filter, m, &saved)) < 0)
        return rc;
    uint64_t n = hash_batch(m, map, &sum, r->res->by_kind, r->dump);
    /* the pacing of a capture is by events, like the generator's */
    while (r->o->rate > 0 && (double)(r->res->events + n) > allowed(r->o, now_s() - r->t0))
        if ((rc = mrd_client_pump(r->c, 5)) < 0) {
            mrd_filter_restore(m, &saved);
            return rc;
        }
    /* the recorded seq, unless re-split batches before it took that number */
    uint64_t seq = m->seq > r->res->last_seq ? m->seq : r->res->last_seq + 1, oseq = m->seq;
    uint32_t limit = send_limit(r);
    char *run = m->run_id;
    uint32_t rank = m->rank;
    uint64_t inst = m->agent_instance;
    m->run_id = (char *)r->o->conn.run_id;
    m->rank = r->res->rank;
    m->agent_instance = instance;
    m->seq = seq;
    /* encoding under the limit makes the aggregator's checks: payload within it, and
     * decompressed within MRD_FRAME_MAX_EXPANSION times it */
    rc = mrd_frame_encode(MRD_FRAME_BATCH, &m->base, r->o->compress, limit, &frame, &len);
    m->run_id = run; /* the decoded message owns its own strings */
    m->rank = rank;
    m->agent_instance = inst;
    m->seq = oseq;
    if (rc == -MRD_ERR_TOO_LARGE)
        rc = resplit(r, m, map, instance, limit, seq, n, sum);
    else if (rc == 0)
        rc = submit(r, seq, frame, len, n, sum);
    mrd_filter_restore(m, &saved);
    return rc;
}

static int run_capture(struct rank_run *r, Meridian__V1__Goodbye **bye_out)
{
    const struct mrd_rank_opts *o = r->o;
    struct mrd_capfile *f = NULL;
    Meridian__V1__Hello *hello = NULL;
    struct mrd_canon_strings map = {0};
    struct mrd_filter filter = {.kinds = o->kinds};
    uint64_t last_seq = 0, instance = 0;
    int rc = 0, type;
    if (filter.kinds && (rc = mrd_filter_scan(&filter, o->capture_path, o->conn.max_frame)) < 0)
        goto fail;
    if ((rc = mrd_capfile_open(o->capture_path, &f)) < 0)
        goto fail;
    for (;;) {
        ProtobufCMessage *msg = NULL;
        rc = mrd_capfile_next(f, o->conn.max_frame, &type, &msg, NULL, NULL);
        if (rc <= 0)
            break;
        if (type == MRD_FRAME_HELLO && !hello) {
            hello = (Meridian__V1__Hello *)msg;
            uint32_t world = hello->world_size ? hello->world_size : 1;
            struct mrd_client_config cc = o->conn;
            cc.rank = hello->rank + o->rank_offset + o->copy * world;
            cc.local_rank = hello->local_rank;
            cc.world_size = world * (o->copies ? o->copies : 1);
            cc.shard_id = o->shard_id;
            cc.hostname = hello->host;
            cc.pid = hello->pid;
            cc.n_gpus = hello->n_gpus;
            cc.gpus = hello->gpus;
            if (o->as_rank) {
                cc.rank = o->rank;
                cc.world_size = o->world_size ? o->world_size : world;
                if (o->local_rank != UINT32_MAX)
                    cc.local_rank = o->local_rank;
            }
            instance = cc.agent_instance =
                hello->agent_instance ^ ((uint64_t)(o->copy + 1) << 48) ^ (uint64_t)getpid();
            r->res->rank = cc.rank;
            r->t0 = now_s();
            rc = make_client(r, &cc);
            if (rc < 0)
                goto fail;
            continue;
        }
        if (type == MRD_FRAME_BATCH && hello) {
            Meridian__V1__Batch *m = (Meridian__V1__Batch *)msg;
            if (m->seq > last_seq) { /* resends in the capture are skipped */
                last_seq = m->seq;
                rc = replay_batch(r, m, &map, instance, &filter);
                protobuf_c_message_free_unpacked(msg, NULL);
                if (rc < 0)
                    goto fail;
                continue;
            }
        } else if (type == MRD_FRAME_GOODBYE && !*bye_out) {
            *bye_out = (Meridian__V1__Goodbye *)msg;
            continue;
        }
        r->res->skipped_frames++;
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    if (rc == 0 && !hello)
        rc = -MRD_ERR_MALFORMED;
fail:
    if (rc < 0)
        fail_why(r->res, rc, "replaying capture");
    mrd_canon_strings_free(&map);
    mrd_filter_free(&filter);
    mrd_capfile_close(f);
    r->hello = hello; /* the client's config points into it: freed after the client */
    return rc < 0 ? rc : 0;
}

/* ---- one rank, start to end ---- */

/* Test hook: reconnect and send the first batches again; each must come back as a
 * duplicate ack. */
static int resend_kept(struct rank_run *r)
{
    struct mrd_client_stats st;
    int rc;
    mrd_client_disconnect(r->c);
    rc = mrd_client_connect(r->c);
    if (rc < 0)
        return rc;
    mrd_client_get_stats(r->c, &st);
    uint64_t want = st.dup_acks + r->nkeep;
    for (uint32_t i = 0; i < r->nkeep; i++)
        if ((rc = mrd_client_send_raw(r->c, r->keep[i], r->keep_len[i])) < 0)
            return rc;
    double deadline = now_s() + r->o->conn.retry_ms / 1000.0;
    do {
        if ((rc = mrd_client_pump(r->c, 100)) < 0)
            return rc;
        mrd_client_get_stats(r->c, &st);
    } while (st.dup_acks < want && now_s() < deadline);
    return st.dup_acks >= want ? 0 : -ETIMEDOUT;
}

int mrd_rank_run(const struct mrd_rank_opts *o, struct mrd_rank_result *res)
{
    struct rank_run r = {.o = o, .res = res};
    Meridian__V1__Goodbye *captured_bye = NULL;
    Meridian__V1__Goodbye bye = MERIDIAN__V1__GOODBYE__INIT;
    Meridian__V1__Counter counters[MRD_EV__COUNT], *cptr[MRD_EV__COUNT];
    int rc;

    memset(res, 0, sizeof *res);
    res->rank = o->rank;
    if (o->resend_acked) {
        r.keep = calloc(o->resend_acked, sizeof *r.keep);
        r.keep_len = calloc(o->resend_acked, sizeof *r.keep_len);
        if (!r.keep || !r.keep_len) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    if (o->record_path && (rc = mrd_capfile_create(o->record_path, &r.rec)) < 0)
        goto fail;
    if (o->dump_path && !(r.dump = fopen(o->dump_path, "w"))) {
        rc = -errno;
        goto fail;
    }
    double t0 = now_s();
    rc = o->capture_path ? run_capture(&r, &captured_bye) : run_synthetic(&r);
    if (rc < 0 || !r.c)
        goto fail;
    rc = mrd_client_drain(r.c, (int)o->conn.retry_ms);
    if (rc < 0) {
        fail_why(res, rc, "waiting for acks");
        goto fail;
    }
    if (r.nkeep && (rc = resend_kept(&r)) < 0) {
        fail_why(res, rc, "resending acknowledged batches");
        goto fail;
    }
    if (captured_bye) {
        bye.n_captured = captured_bye->n_captured;
        bye.captured = captured_bye->captured;
        bye.n_dropped = captured_bye->n_dropped;
        bye.dropped = captured_bye->dropped;
        bye.n_named = captured_bye->n_named; /* the agent's own counters (CUPTI's), as sent */
        bye.named = captured_bye->named;
    } else {
        for (int k = 1; k < MRD_EV__COUNT; k++) {
            Meridian__V1__Counter init = MERIDIAN__V1__COUNTER__INIT;
            counters[bye.n_captured] = init;
            counters[bye.n_captured].key = (uint32_t)k;
            counters[bye.n_captured].value = res->by_kind[k];
            cptr[bye.n_captured] = &counters[bye.n_captured];
            bye.n_captured++;
        }
        bye.captured = cptr;
    }
    rc = mrd_client_goodbye(r.c, &bye, (int)o->conn.retry_ms);
    if (rc < 0)
        fail_why(res, rc, "goodbye");
    res->seconds = now_s() - t0;
fail:
    if (rc < 0 && res->rc == 0)
        fail_why(res, rc, "setting up");
    if (r.c)
        mrd_client_get_stats(r.c, &res->net);
    if (res->rc == 0 &&
        (res->net.acked_events != res->events || res->net.acked_checksum != res->checksum)) {
        res->rc = -EPROTO;
        snprintf(res->why, sizeof res->why, "not every batch was acknowledged");
    }
    mrd_client_free(r.c);
    if (r.hello)
        protobuf_c_message_free_unpacked(&r.hello->base, NULL);
    if (captured_bye)
        protobuf_c_message_free_unpacked(&captured_bye->base, NULL);
    mrd_batch_builder_free(r.b);
    if (r.rec && mrd_capfile_close(r.rec) < 0 && res->rc == 0) {
        res->rc = -EIO;
        snprintf(res->why, sizeof res->why, "writing %s failed", o->record_path);
    }
    if (r.dump)
        fclose(r.dump);
    for (uint32_t i = 0; i < r.nkeep; i++)
        free(r.keep[i]);
    free(r.keep);
    free(r.keep_len);
    return res->rc;
}

void mrd_rank_format(const struct mrd_rank_result *r, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(
        buf, cap,
        "rank=%u events=%" PRIu64 " checksum=%016" PRIx64 " batches=%" PRIu64 " first_seq=%" PRIu64
        " last_seq=%" PRIu64 " acked_events=%" PRIu64 " acked_checksum=%016" PRIx64
        " acked_batches=%" PRIu64 " bytes_sent=%" PRIu64 " resent=%" PRIu64 " reconnects=%" PRIu64
        " dup_acks=%" PRIu64 " committed_on_hello=%" PRIu64 " goodbyes_sent=%" PRIu64
        " goodbye_acked=%d peer_max_frame=%u resplit=%" PRIu64 " resplit_batches=%" PRIu64
        " seconds=%.3f",
        r->rank, r->events, r->checksum, r->batches, r->first_seq, r->last_seq, r->net.acked_events,
        r->net.acked_checksum, r->net.batches_acked, r->net.bytes_sent, r->net.batches_resent,
        r->net.reconnects, r->net.dup_acks, r->net.committed_on_hello, r->net.goodbyes_sent,
        r->net.goodbye_acked, r->net.peer_max_frame, r->resplit_frames, r->resplit_batches,
        r->seconds);
    for (int k = 1; k < MRD_EV__COUNT && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, " n_%s=%" PRIu64, mrd_event_kind_name(k),
                              r->by_kind[k]);
    if (n < cap) {
        if (r->rc == 0) {
            snprintf(buf + n, cap - n, " status=ok");
        } else {
            /* the reason goes last and without spaces, so the line stays key=value */
            n += (size_t)snprintf(buf + n, cap - n, " status=error:");
            for (const char *p = r->why; *p && n + 1 < cap; p++)
                buf[n++] = *p == ' ' ? '_' : *p;
            buf[n < cap ? n : cap - 1] = '\0';
        }
    }
}
