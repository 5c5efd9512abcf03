/* A node aggregator's live timebase, aligned to the reference aggregator (uplink.h).
 *
 * Why the node stamps in the reference's time (and not "record a model, apply at merge"):
 * everything a shard holds on the global timebase is either stamped by its meridiand
 * (clock replies' t1/t2, receive times, first/last seen) or sent by agents as they got it
 * (clock_samples.t1/t2 inside batches). A rewrite after the fact cannot tell the two
 * apart: a replayed rank's recorded probes (launcher/replay) or a restarted agent's
 * resent batches would be shifted by a model that never applied to them, and the same
 * ranks would analyse differently on one aggregator and on several. Stamping in the
 * reference's time from the first probe on leaves nothing to rewrite: a node shard is
 * the database the reference would have written for those ranks, up to the live model's
 * error, which is measured (below) and stored with it. The merge then copies global times
 * as they are; only the shard's runs row must name the reference's timebase, which a node
 * cannot learn over the clock protocol (the reference's boot id and anchors), hence
 * mrd_uplink_adopt after the job.
 *
 * The live model. own(t) = own_realtime_anchor + CLOCK_MONOTONIC(t) - own_monotonic_anchor
 * is the node's own timebase (what a plain meridiand uses). The reference's time is
 * modelled as own + theta(own), theta piecewise linear: a base point and a rate, replaced
 * at every update so that theta stays continuous (no step, the rate stays within
 * +-MAX_SLEW_PPB: time never runs backwards, and an agent's probes see a smooth clock).
 *   - Start: START_PROBES probes in rounds of PROBES_PER_ROUND over ~2 s (before meridiand
 *     listens); theta and the drift = the line through them as below (the offset of the
 *     fastest one, (t1 - t0 + t2 - t3) / 2, if they span too little). Nothing has been
 *     stamped yet, so this one step is free. Why 2 s: a drift left to the slew alone lags
 *     by drift x SLEW_TIME_NS (80 us at 40 ppm), and a slope over a shorter burst was too
 *     noisy (tests/multinode with nodes at +25/-15/+40 ppm: p99 27 us after a 1 s burst,
 *     2-6 us after a 2 s one). Probes go in back-to-back rounds: after an idle gap the
 *     first probe meets cold wake-ups (seen: ~10 us one way, a biased offset).
 *   - Every interval: PROBES_PER_ROUND probes. Over the last FIT_WINDOW_NS of probes, the
 *     fastest probe of each BUCKET_NS bucket (the least queueing, as in fit.c's first line)
 *     gives a point; a weighted line through them (weight 1 / (1 us^2 + excess round
 *     trip^2)) gives the target offset now and the drift (the drift once the points span
 *     MIN_DRIFT_SPAN_NS). The new rate is drift + (target - theta now) / SLEW_TIME_NS: the
 *     model converges on the target in ~SLEW_TIME_NS, low-passing the target's noise.
 *   - Lost reference: the model keeps its rate (extrapolates), reconnects every 500 ms;
 *     after grace_ms without an answer on_lost is called (meridiand stops: a job whose
 *     head is gone has failed).
 * The bound. Each probe also records the live model's reading at send and receive (what
 * the store stamped at those instants). At stop those (live, reference, reference, live)
 * quadruples are fitted by aggregator/clock exactly like an agent's probes: the fitted
 * map is the reference's time as a function of the live one, so its distance from the
 * identity is the live model's error. bound = max over the fit's segment ends of
 * |fit - identity| (piecewise linear: the largest is at an end) + the fit's own bound,
 * under the fit's assumption of a symmetric fastest path (aggregator/clock/README.md).
 * An agent on this node is then within its own clock_models bound + this bound of the
 * reference's timebase.
 *
 * Workload: 20 probes a second (32 a second for the first 2 s); samples in memory, at most
 * SAMPLES_CAP (3 MiB): at the cap, consecutive pairs are merged into their faster probe (halved,
 * counted: the fit keeps the fastest probes anyway). Two threads touch the model: the uplink thread
 * writes it (a sequence lock), any thread reads it (mrd_uplink_now).
 */
#include "uplink.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "array.h"
#include "auth.h"
#include "clock.h"
#include "error.h"
#include "events.h"
#include "frame.h"
#include "worker.h"

#define START_PROBES      64
#define START_SPACING_US  125000 /* between rounds: the burst spans ~2 s, for a first drift */
#define PROBES_PER_ROUND  4
#define FIT_WINDOW_NS     (30 * 1000000000LL)
#define BUCKET_NS         (500000000LL)
#define MIN_DRIFT_SPAN_NS (800000000LL)
#define WEIGHT_FLOOR_NS   1000.0 /* round trips within ~1 us of the fastest weigh alike */
#define SLEW_TIME_NS      (2000000000LL)
#define MAX_SLEW_PPB      500000 /* 500 ppm, as ntpd's slew limit */
#define SAMPLES_CAP       (1u << 16)
#define RECV_TIMEOUT_MS   2000
#define FRAME_CAP         (64u << 10) /* a ClockReply with its window requests fits easily */

struct up_sample {
    int64_t t0_own, t3_own;   /* own timebase at send / receive */
    int64_t t0_live, t3_live; /* the live model at the same instants */
    int64_t t1, t2;           /* the reference's global time (its answer) */
};

struct mrd_uplink {
    struct mrd_uplink_config cfg;
    char *host, *run_id;
    uint8_t *secret;
    uint64_t instance;
    int64_t own_rt, own_mono; /* own timebase anchors */
    /* the live model (sequence lock; written by one thread at a time) */
    atomic_uint mseq;
    atomic_llong base_x, base_theta, rate_ppb;
    /* thread */
    pthread_t thr;
    int started, stopped;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping; /* under mu */
    int fd;       /* uplink thread only, after start */
    uint64_t next_probe_id;
    /* samples (uplink thread; read by stop after join) */
    struct up_sample *s;
    size_t n;
    uint64_t decimations, reconnects;
    int64_t rtt_min, max_slew;
    double drift_est; /* ns/ns, from the last window that spanned MIN_DRIFT_SPAN_NS */
};

static void ulog(const struct mrd_uplink *u, int level, const char *fmt, ...)
{
    if (level > u->cfg.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    mrd_log_vline(u->cfg.log, "meridiand: uplink", fmt, ap);
    va_end(ap);
    fflush(u->cfg.log ? u->cfg.log : stderr);
}

static int64_t own_now(const struct mrd_uplink *u)
{
    int64_t d = mrd_clock_mono_ns() - u->own_mono;
    if (u->cfg.test_clock_ppm != 0) /* TESTS ONLY: this node's clock runs off by that rate */
        d += (int64_t)((double)d * u->cfg.test_clock_ppm * 1e-6);
    return u->own_rt + d;
}

/* theta at own time x under the model (base_x, base_theta, rate). */
static int64_t theta_at(int64_t bx, int64_t bt, int64_t rate, int64_t x)
{
    return bt + (int64_t)llround((double)(x - bx) * (double)rate / 1e9);
}

static void model_read(const struct mrd_uplink *u, int64_t *bx, int64_t *bt, int64_t *rate)
{
    struct mrd_uplink *m = (struct mrd_uplink *)u; /* atomics are read only */
    unsigned s0, s1;
    do {
        /* acquire loads keep the second read of mseq after them, and model_write's
         * release stores come after its odd mseq: a torn read shows as s0 != s1 (no
         * fence: ThreadSanitizer cannot follow one; on x86 these are plain loads) */
        s0 = atomic_load_explicit(&m->mseq, memory_order_acquire);
        *bx = atomic_load_explicit(&m->base_x, memory_order_acquire);
        *bt = atomic_load_explicit(&m->base_theta, memory_order_acquire);
        *rate = atomic_load_explicit(&m->rate_ppb, memory_order_acquire);
        s1 = atomic_load_explicit(&m->mseq, memory_order_relaxed);
    } while ((s0 & 1) || s0 != s1);
}

static void model_write(struct mrd_uplink *u, int64_t bx, int64_t bt, int64_t rate)
{
    unsigned s = atomic_load_explicit(&u->mseq, memory_order_relaxed);
    atomic_store_explicit(&u->mseq, s + 1, memory_order_relaxed);
    atomic_store_explicit(&u->base_x, bx, memory_order_release);
    atomic_store_explicit(&u->base_theta, bt, memory_order_release);
    atomic_store_explicit(&u->rate_ppb, rate, memory_order_release);
    atomic_store_explicit(&u->mseq, s + 2, memory_order_release);
}

static int64_t live_of(const struct mrd_uplink *u, int64_t own)
{
    int64_t bx, bt, rate;
    model_read(u, &bx, &bt, &rate);
    return own + theta_at(bx, bt, rate, own);
}

int64_t mrd_uplink_now(void *arg)
{
    const struct mrd_uplink *u = arg;
    return live_of(u, own_now(u));
}

/* ---- the connection (uplink thread, or the main thread before it starts) ---------------- */

static int send_all(int fd, const uint8_t *b, size_t n)
{
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -EPIPE;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_msg(int fd, enum mrd_frame_type t, const ProtobufCMessage *m)
{
    uint8_t *f;
    size_t n;
    int rc = mrd_frame_encode(t, m, 0, FRAME_CAP, &f, &n);
    if (rc < 0)
        return rc;
    rc = send_all(fd, f, n);
    free(f);
    return rc;
}

static int recv_all(int fd, uint8_t *b, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return -ECONNRESET;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The next frame: its type (> 0) and decoded message in *m (caller frees), or < 0. */
static int recv_msg(int fd, ProtobufCMessage **m)
{
    uint8_t hb[MRD_FRAME_HEADER_BYTES], *payload;
    struct mrd_frame_header h;
    int rc = recv_all(fd, hb, sizeof(hb));
    if (rc < 0)
        return rc;
    if ((rc = mrd_frame_header_parse(hb, sizeof(hb), FRAME_CAP, &h)) < 0)
        return rc;
    if (!(payload = malloc(h.length ? h.length : 1)))
        return -ENOMEM;
    rc = recv_all(fd, payload, h.length);
    if (rc == 0)
        rc = mrd_frame_decode(&h, payload, FRAME_CAP, m);
    free(payload);
    return rc < 0 ? rc : h.type;
}

static int dial(const struct mrd_uplink *u)
{
    char port[8];
    snprintf(port, sizeof(port), "%u", u->cfg.port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(u->host, port, &hints, &res) != 0 || !res)
        return -EHOSTUNREACH;
    int fd = -ECONNREFUSED;
    /* Linux applies SO_SNDTIMEO to connect() too: a head host that went away without a
     * reset costs RECV_TIMEOUT_MS per attempt, not the kernel's SYN retries (~2 min), so
     * the grace period holds */
    struct timeval tv = {.tv_sec = RECV_TIMEOUT_MS / 1000,
                         .tv_usec = RECV_TIMEOUT_MS % 1000 * 1000};
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int s = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            continue;
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
            fd = s;
            break;
        }
        fd = -errno;
        close(s);
    }
    freeaddrinfo(res);
    if (fd < 0)
        return fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Connects and authenticates a clock connection, as an agent's clock link does. The
 * claimed rank is UINT32_MAX - shard: the reference only logs a clock connection's rank. */
static int handshake(struct mrd_uplink *u)
{
    int fd = dial(u);
    if (fd < 0)
        return fd;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Meridian__V1__Hello h = MERIDIAN__V1__HELLO__INIT;
    h.protocol_version = MRD_PROTOCOL_VERSION;
    h.run_id = u->run_id;
    h.rank = UINT32_MAX - u->cfg.shard_id;
    h.host = host;
    h.pid = (uint32_t)getpid();
    h.agent_version = "meridiand-uplink";
    h.role = MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK;
    h.shard_id = u->cfg.shard_id;
    h.agent_instance = u->instance;
    ProtobufCMessage *m = NULL;
    int rc = send_msg(fd, MRD_FRAME_HELLO, &h.base);
    if (rc < 0 || (rc = recv_msg(fd, &m)) < 0)
        goto fail;
    if (rc == MRD_FRAME_HELLO_REPLY) { /* refused before the challenge (version) */
        const Meridian__V1__HelloReply *r = (const Meridian__V1__HelloReply *)m;
        ulog(u, -1, "the reference refused this node: %s", r->reason ? r->reason : "?");
        rc = r->code ? -(int)r->code : -MRD_ERR_AUTH;
        goto fail;
    }
    if (rc != MRD_FRAME_CHALLENGE) {
        rc = -MRD_ERR_MALFORMED;
        goto fail;
    }
    const Meridian__V1__Challenge *ch = (const Meridian__V1__Challenge *)m;
    struct mrd_auth_claim claim = {.run_id = u->run_id,
                                   .role = MERIDIAN__V1__CONNECTION_ROLE__ROLE_CLOCK,
                                   .rank = h.rank,
                                   .agent_instance = u->instance};
    uint8_t mac[MRD_AUTH_MAC_BYTES];
    rc = mrd_auth_proof(u->secret, u->cfg.secret_len, ch->nonce.data, ch->nonce.len, &claim, mac);
    protobuf_c_message_free_unpacked(m, NULL);
    m = NULL;
    if (rc < 0)
        goto fail;
    Meridian__V1__Proof p = MERIDIAN__V1__PROOF__INIT;
    p.mac.data = mac;
    p.mac.len = sizeof(mac);
    if ((rc = send_msg(fd, MRD_FRAME_PROOF, &p.base)) < 0 || (rc = recv_msg(fd, &m)) < 0)
        goto fail;
    if (rc != MRD_FRAME_HELLO_REPLY) {
        rc = -MRD_ERR_MALFORMED;
        goto fail;
    }
    const Meridian__V1__HelloReply *r = (const Meridian__V1__HelloReply *)m;
    if (!r->accepted) {
        ulog(u, -1, "the reference refused this node: %s", r->reason ? r->reason : "?");
        rc = r->code ? -(int)r->code : -MRD_ERR_AUTH;
        goto fail;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return fd;
fail:
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    close(fd);
    return rc;
}

/* Merges consecutive pairs into their faster probe: the buffer is halved. */
static void decimate(struct mrd_uplink *u)
{
    size_t k = 0;
    for (size_t i = 0; i + 1 < u->n; i += 2) {
        const struct up_sample *a = &u->s[i], *b = &u->s[i + 1];
        int64_t ra = (a->t3_own - a->t0_own) - (a->t2 - a->t1);
        int64_t rb = (b->t3_own - b->t0_own) - (b->t2 - b->t1);
        u->s[k++] = ra <= rb ? *a : *b;
    }
    if (u->n % 2)
        u->s[k++] = u->s[u->n - 1];
    u->n = k;
    u->decimations++;
}

/* One probe on fd: a sample appended. Returns 0 or < 0 (connection unusable). */
static int probe(struct mrd_uplink *u, int fd)
{
    Meridian__V1__ClockProbe p = MERIDIAN__V1__CLOCK_PROBE__INIT;
    struct up_sample s;
    p.probe_id = ++u->next_probe_id;
    s.t0_own = own_now(u);
    s.t0_live = live_of(u, s.t0_own);
    p.t0 = s.t0_own;
    int rc = send_msg(fd, MRD_FRAME_CLOCK_PROBE, &p.base);
    ProtobufCMessage *m = NULL;
    while (rc >= 0) {
        if ((rc = recv_msg(fd, &m)) < 0)
            break;
        if (rc == MRD_FRAME_CLOCK_REPLY &&
            ((const Meridian__V1__ClockReply *)m)->probe_id == p.probe_id)
            break;
        protobuf_c_message_free_unpacked(m, NULL); /* anything else: not for us */
        m = NULL;
    }
    if (rc < 0)
        return rc;
    s.t3_own = own_now(u);
    s.t3_live = live_of(u, s.t3_own);
    const Meridian__V1__ClockReply *r = (const Meridian__V1__ClockReply *)m;
    s.t1 = r->t1;
    s.t2 = r->t2;
    protobuf_c_message_free_unpacked(m, NULL);
    int64_t rtt = (s.t3_own - s.t0_own) - (s.t2 - s.t1);
    if (rtt < 0) /* the reference answered before it read: not a probe we can use */
        return 0;
    if (u->rtt_min == 0 || rtt < u->rtt_min)
        u->rtt_min = rtt;
    if (u->n == SAMPLES_CAP)
        decimate(u);
    u->s[u->n++] = s;
    return 0;
}

static int64_t sample_rtt(const struct up_sample *s)
{
    return (s->t3_own - s->t0_own) - (s->t2 - s->t1);
}

static double sample_theta(const struct up_sample *s)
{
    /* halves of int64 differences: exact enough in double (|theta| < 2^53 ns) */
    return ((double)(s->t1 - s->t0_own) + (double)(s->t2 - s->t3_own)) / 2.0;
}

/* The update after a probe round (see the top of the file). */
/* The weighted line through the window's bucket bests (see the top of the file): the
 * target offset at own time `now` in *target, and the drift into u->drift_est when the
 * points span MIN_DRIFT_SPAN_NS (else it keeps its last value, 0 at first). Returns 0, or
 * -ENODATA without any probe in the window. */
static int estimate(struct mrd_uplink *u, int64_t now, double *target)
{
    enum { NB = FIT_WINDOW_NS / BUCKET_NS };
    const struct up_sample *best[NB] = {0};
    int64_t rmin = INT64_MAX;
    for (size_t i = u->n; i-- > 0;) { /* newest first */
        const struct up_sample *s = &u->s[i];
        int64_t age = now - s->t3_own;
        if (age >= FIT_WINDOW_NS)
            break;
        int b = age < 0 ? 0 : (int)(age / BUCKET_NS);
        if (!best[b] || sample_rtt(s) < sample_rtt(best[b]))
            best[b] = s;
        if (sample_rtt(s) < rmin)
            rmin = sample_rtt(s);
    }
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, xlo = 1e300, xhi = -1e300;
    for (int b = 0; b < NB; b++) {
        if (!best[b])
            continue;
        double e = (double)(sample_rtt(best[b]) - rmin);
        double w = 1.0 / (WEIGHT_FLOOR_NS * WEIGHT_FLOOR_NS + e * e);
        double x = ((double)(best[b]->t0_own - now) + (double)(best[b]->t3_own - now)) / 2.0;
        double y = sample_theta(best[b]);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
        xlo = x < xlo ? x : xlo;
        xhi = x > xhi ? x : xhi;
    }
    if (sw == 0)
        return -ENODATA;
    double xm = sx / sw, ym = sy / sw, var = sxx / sw - xm * xm, span = xhi - xlo;
    if (span >= (double)MIN_DRIFT_SPAN_NS && var > 0)
        u->drift_est = (sxy / sw - xm * ym) / var;
    *target = ym + u->drift_est * (0.0 - xm);
    return 0;
}

static int64_t clamp_rate(double ppb)
{
    if (ppb > MAX_SLEW_PPB)
        return MAX_SLEW_PPB;
    if (ppb < -MAX_SLEW_PPB)
        return -MAX_SLEW_PPB;
    return (int64_t)llround(ppb);
}

/* The update after a probe round: slew towards the target, continuously. */
static void model_update(struct mrd_uplink *u)
{
    int64_t now = own_now(u);
    double target;
    if (estimate(u, now, &target) < 0)
        return;
    int64_t bx, bt, rate;
    model_read(u, &bx, &bt, &rate);
    int64_t theta_now = theta_at(bx, bt, rate, now);
    double corr = (target - (double)theta_now) / (double)SLEW_TIME_NS;
    int64_t nr = clamp_rate((u->drift_est + corr) * 1e9);
    if (llabs(nr) > u->max_slew)
        u->max_slew = llabs(nr);
    model_write(u, now, theta_now, nr);
}

/* The first model, from the start burst: the burst's line (offset and drift) when it spans
 * MIN_DRIFT_SPAN_NS, else the fastest probe's offset; set as it is (nothing has been
 * stamped yet, so this one step is free), and the burst's probes read as it would have. */
static void model_init(struct mrd_uplink *u)
{
    const struct up_sample *best = NULL;
    for (size_t i = 0; i < u->n; i++)
        if (!best || sample_rtt(&u->s[i]) < sample_rtt(best))
            best = &u->s[i];
    int64_t now = own_now(u);
    double target = sample_theta(best);
    estimate(u, now, &target);
    int64_t rate = clamp_rate(u->drift_est * 1e9), theta = (int64_t)llround(target);
    model_write(u, now, theta, rate);
    for (size_t i = 0; i < u->n; i++) {
        u->s[i].t0_live = u->s[i].t0_own + theta_at(now, theta, rate, u->s[i].t0_own);
        u->s[i].t3_live = u->s[i].t3_own + theta_at(now, theta, rate, u->s[i].t3_own);
    }
}

/* Sleeps up to ms; returns 1 when asked to stop. */
static int wait_ms(struct mrd_uplink *u, uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&u->mu);
    while (!u->stopping && pthread_cond_timedwait(&u->cv, &u->mu, &ts) == 0)
        ;
    int stop = u->stopping;
    pthread_mutex_unlock(&u->mu);
    return stop;
}

static void *uplink_thread(void *arg)
{
    struct mrd_uplink *u = arg;
    int64_t last_ok = mrd_clock_mono_ns();
    int lost_called = 0;
    while (!wait_ms(u, u->fd >= 0 ? u->cfg.interval_ms : 500)) {
        if (u->fd < 0) {
            int fd = handshake(u);
            if (fd >= 0) {
                u->fd = fd;
                u->reconnects++;
                ulog(u, 0, "reconnected to the reference %s:%u", u->host, u->cfg.port);
            }
        }
        int rc = u->fd >= 0 ? 0 : -ENOTCONN;
        for (int i = 0; i < PROBES_PER_ROUND && rc == 0; i++)
            rc = probe(u, u->fd);
        if (rc == 0) {
            last_ok = mrd_clock_mono_ns();
            model_update(u);
            continue;
        }
        if (u->fd >= 0) {
            ulog(u, 0, "lost the reference %s:%u (%s): the clock runs on its last rate", u->host,
                 u->cfg.port, mrd_strerror(rc));
            close(u->fd);
            u->fd = -1;
        }
        if (!lost_called && mrd_clock_mono_ns() - last_ok > (int64_t)u->cfg.grace_ms * 1000000LL) {
            lost_called = 1;
            ulog(u, -1, "the reference %s:%u has not answered for %u ms: stopping this node",
                 u->host, u->cfg.port, u->cfg.grace_ms);
            if (u->cfg.on_lost)
                u->cfg.on_lost(u->cfg.on_lost_arg);
        }
    }
    return NULL;
}

int mrd_uplink_start(const struct mrd_uplink_config *cfg, struct mrd_uplink **out)
{
    if (!cfg || !cfg->host || !cfg->run_id || !cfg->secret || !cfg->secret_len || !out)
        return -EINVAL;
    struct mrd_uplink *u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->cfg = *cfg;
    u->fd = -1;
    pthread_mutex_init(&u->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!u->cfg.interval_ms)
        u->cfg.interval_ms = 200;
    if (!u->cfg.start_timeout_ms)
        u->cfg.start_timeout_ms = 30000;
    if (!u->cfg.grace_ms)
        u->cfg.grace_ms = 30000;
    u->host = strdup(cfg->host);
    u->run_id = strdup(cfg->run_id);
    u->secret = malloc(cfg->secret_len);
    u->s = malloc(SAMPLES_CAP * sizeof(*u->s));
    int rc = -ENOMEM;
    if (!u->host || !u->run_id || !u->secret || !u->s)
        goto fail;
    memcpy(u->secret, cfg->secret, cfg->secret_len);
    u->cfg.secret = NULL;
    if (getrandom(&u->instance, sizeof(u->instance), 0) != (ssize_t)sizeof(u->instance))
        u->instance = (uint64_t)mrd_clock_mono_ns() ^ ((uint64_t)getpid() << 32);
    int64_t width = mrd_clock_anchor_pair(&u->own_mono, &u->own_rt); /* one instant */
    if (width > MRD_CLOCK_ANCHOR_WARN_NS)
        ulog(u, 1,
             "own timebase anchors read %.1f ms apart (a busy host): up to %.1f ms "
             "off UTC before alignment",
             width / 1e6, width / 2e6);
    u->own_rt += cfg->test_realtime_offset_ns;
    model_write(u, 0, 0, 0);
    int64_t deadline = mrd_clock_mono_ns() + (int64_t)u->cfg.start_timeout_ms * 1000000LL;
    for (;;) {
        rc = handshake(u);
        if (rc >= 0 || rc == -MRD_ERR_AUTH || rc == -MRD_ERR_VERSION)
            break;
        if (mrd_clock_mono_ns() > deadline) {
            ulog(u, -1, "cannot reach the reference %s:%u within %u ms (%s)", u->host, u->cfg.port,
                 u->cfg.start_timeout_ms, mrd_strerror(rc));
            rc = -ETIMEDOUT;
            goto fail;
        }
        usleep(100000);
    }
    if (rc < 0)
        goto fail;
    u->fd = rc;
    for (int i = 0; i < START_PROBES; i++) {
        if ((rc = probe(u, u->fd)) < 0) {
            ulog(u, -1, "the reference %s:%u broke the first probes (%s)", u->host, u->cfg.port,
                 mrd_strerror(rc));
            goto fail;
        }
        /* rounds of PROBES_PER_ROUND back to back, as later: after an idle gap the first
         * probe of a round meets cold wake-ups on both ends (seen: ~10 us one way) */
        usleep((i + 1) % PROBES_PER_ROUND ? 2000 : START_SPACING_US);
    }
    if (u->n == 0) {
        rc = -ENODATA;
        goto fail;
    }
    model_init(u);
    int64_t bx, bt, rate;
    model_read(u, &bx, &bt, &rate);
    ulog(u, 0,
         "aligned to the reference %s:%u: reference - own timebase %+" PRId64
         " ns (fastest round trip %" PRId64 " ns)",
         u->host, u->cfg.port, bt, u->rtt_min);
    if ((rc = mrd_worker_start(&u->thr, "mrd-uplink", uplink_thread, u)) < 0)
        goto fail;
    u->started = 1;
    *out = u;
    return 0;
fail:
    mrd_uplink_free(u);
    return rc;
}

static void stop_thread(struct mrd_uplink *u)
{
    if (u->started && !u->stopped) {
        mrd_worker_stop(u->thr, &u->mu, &u->cv, &u->stopping);
        u->stopped = 1;
    }
    if (u->fd >= 0) {
        close(u->fd);
        u->fd = -1;
    }
}

int mrd_uplink_stop(struct mrd_uplink *u, struct mrd_uplink_result *res)
{
    stop_thread(u);
    memset(res, 0, sizeof(*res));
    int64_t bx, bt, rate;
    model_read(u, &bx, &bt, &rate);
    res->probes = u->n;
    res->decimations = u->decimations;
    res->reconnects = u->reconnects;
    res->rtt_min_ns = u->rtt_min;
    res->offset_at_own_ns = own_now(u);
    res->offset_ns = theta_at(bx, bt, rate, res->offset_at_own_ns);
    res->max_slew_ppb = u->max_slew;
    res->own_anchor_realtime_ns = u->own_rt;
    res->own_anchor_monotonic_ns = u->own_mono;
    struct mrd_clock_sample *cs = malloc((u->n ? u->n : 1) * sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    for (size_t i = 0; i < u->n; i++)
        cs[i] = (struct mrd_clock_sample){u->s[i].t0_live, u->s[i].t1, u->s[i].t2, u->s[i].t3_live};
    struct mrd_clock_model *m = NULL;
    int rc = mrd_clock_fit_samples(cs, u->n, NULL, &m);
    free(cs);
    if (rc == -ENODATA || (rc == 0 && m->nseg == 0)) {
        mrd_clock_model_destroy(m);
        return 0; /* not aligned: recorded as such */
    }
    if (rc < 0)
        return rc;
    for (uint32_t k = 0; k < m->nseg; k++) {
        const struct mrd_clock_segment *g = &m->seg[k];
        int64_t ends[2] = {g->local_begin, g->local_end};
        for (int e = 0; e < 2; e++) {
            int64_t r = llabs(mrd_clock_map(m, ends[e]) - ends[e]);
            if (r > res->residual_ns)
                res->residual_ns = r;
        }
        if (g->error_bound_ns > res->fit_bound_ns)
            res->fit_bound_ns = g->error_bound_ns;
    }
    res->bound_ns = res->residual_ns + res->fit_bound_ns;
    res->aligned = 1;
    mrd_clock_model_destroy(m);
    return 0;
}

void mrd_uplink_free(struct mrd_uplink *u)
{
    if (!u)
        return;
    stop_thread(u);
    pthread_cond_destroy(&u->cv);
    pthread_mutex_destroy(&u->mu);
    if (u->secret)
        explicit_bzero(u->secret, u->cfg.secret_len);
    MRD_ARRAY_FREE_ALL(u->secret, u->host, u->run_id, u->s, u);
}
