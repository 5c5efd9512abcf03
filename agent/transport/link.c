/* One agent connection to meridiand, from closed to accepted (contract in link.h).
 *
 * Where it sits: below datalink.c and clocklink.c, above conn.c (sockets and framing) and
 * proto/auth.c (the Proof). Both connections reconnect with the same backoff, time out
 * the same way, and say the same Hello but for its role.
 *
 * Workload: a handful of connects per process in the normal case; with an absent
 * aggregator, one attempt per backoff step (at most one every 2 s once backed off), so
 * hundreds of ranks do not reconnect in lockstep (the jitter).
 */
#include "link.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "error.h"

#ifndef MRD_VERSION
#define MRD_VERSION "0.0.0"
#endif

void mrd__link_fill_hello(const struct mrd_tx_ident *id, int role, struct mrd_hello_buf *hb)
{
    const struct mrd_agent_config *c = id->cfg;
    Meridian__V1__Hello *h = &hb->h;
    unsigned n = mrd__gpus_snapshot(hb->gpus, &hb->gpu_gen);

    meridian__v1__hello__init(h);
    h->protocol_version = MRD_PROTOCOL_VERSION;
    h->run_id = (char *)c->run_id;
    h->rank = (uint32_t)c->rank;
    h->local_rank = c->local_rank >= 0 ? (uint32_t)c->local_rank : 0;
    h->world_size = c->world_size >= 0 ? (uint32_t)c->world_size : 0;
    h->host = (char *)id->host;
    h->pid = (uint32_t)getpid();
    for (unsigned i = 0; i < n; i++) {
        meridian__v1__gpu_info__init(&hb->gi[i]);
        hb->gi[i].device = hb->gpus[i].device;
        hb->gi[i].uuid = hb->gpus[i].uuid;
        hb->gi[i].pci_bus_id = hb->gpus[i].pci_bus_id;
        hb->gi[i].name = hb->gpus[i].name;
        hb->gp[i] = &hb->gi[i];
    }
    h->n_gpus = n;
    h->gpus = hb->gp;
    h->agent_version = (char *)"meridian " MRD_VERSION;
    h->role = role;
    h->shard_id = c->shard_id;
    h->agent_instance = id->agent_instance;
}

void mrd__link_init(struct mrd_link *l, int role)
{
    mrd_conn_init(&l->conn);
    l->role = role;
    l->next_connect_ns = 0;
    l->backoff_ms = 0;
}

uint32_t mrd__link_backoff_next(uint32_t *backoff_ms)
{
    uint32_t b = *backoff_ms ? *backoff_ms : MRD_BACKOFF_MIN_MS;
    *backoff_ms = b * 2 > MRD_BACKOFF_MAX_MS ? MRD_BACKOFF_MAX_MS : b * 2;
    /* +-20% jitter so hundreds of ranks do not reconnect in lockstep */
    uint32_t j = (uint32_t)(mrd__mono_ns() / 1000 % 41);
    return b * (80 + j) / 100;
}

void mrd__link_fail(struct mrd_link *l, int64_t now, uint32_t floor_ms)
{
    mrd_conn_close(&l->conn);
    uint32_t b = mrd__link_backoff_next(&l->backoff_ms);
    if (b < floor_ms)
        b = floor_ms;
    l->next_connect_ns = now + (int64_t)b * 1000000;
}

void mrd__link_refused(struct mrd_link *l, int64_t now)
{
    mrd_conn_close(&l->conn);
    l->backoff_ms = MRD_BACKOFF_MAX_MS;
    l->next_connect_ns = now + (int64_t)MRD_BACKOFF_MAX_MS * 1000000;
}

void mrd__link_ready(struct mrd_link *l, int64_t now)
{
    l->conn.state = MRD_CONN_READY;
    l->conn.state_since_ns = now;
    l->backoff_ms = 0;
}

int mrd__link_check_timeout(const struct mrd_link *l, int64_t now, const char **what)
{
    int64_t age = now - l->conn.state_since_ns;
    switch (l->conn.state) {
    case MRD_CONN_CONNECTING:
        *what = "connect: timed out";
        return age > (int64_t)MRD_CONNECT_TIMEOUT_MS * 1000000 ? -ETIMEDOUT : 0;
    case MRD_CONN_HELLO:
    case MRD_CONN_PROOF:
        *what = "no reply to hello";
        return age > (int64_t)MRD_HELLO_TIMEOUT_MS * 1000000 ? -ETIMEDOUT : 0;
    default:
        return 0;
    }
}

int mrd__link_send_hello(struct mrd_link *l, const struct mrd_tx_ident *id, int64_t now,
                         const char **what, uint64_t *gpu_gen)
{
    struct mrd_hello_buf hb;
    mrd__link_fill_hello(id, l->role, &hb);
    int e = mrd_conn_queue(&l->conn, MRD_FRAME_HELLO, &hb.h.base);
    if (e != 0) {
        *what = "hello";
        return e;
    }
    if (gpu_gen)
        *gpu_gen = hb.gpu_gen;
    l->conn.state = MRD_CONN_HELLO;
    l->conn.state_since_ns = now;
    e = mrd_conn_flush(&l->conn);
    if (e != 0 && e != -EAGAIN) {
        *what = "send hello";
        return e;
    }
    return 0;
}

int mrd__link_answer_challenge(const struct mrd_tx_ident *id, struct mrd_conn *c, int role,
                               const Meridian__V1__Challenge *ch)
{
    const struct mrd_agent_config *cfg = id->cfg;
    struct mrd_auth_claim claim = {.run_id = cfg->run_id,
                                   .role = (uint32_t)role,
                                   .rank = (uint32_t)cfg->rank,
                                   .agent_instance = id->agent_instance};
    uint8_t mac[MRD_AUTH_MAC_BYTES];
    if (ch->nonce.len != MRD_AUTH_NONCE_BYTES)
        return -MRD_ERR_MALFORMED;
    int e = mrd_auth_proof((const uint8_t *)cfg->secret, strlen(cfg->secret), ch->nonce.data,
                           ch->nonce.len, &claim, mac);
    if (e != 0)
        return e;
    Meridian__V1__Proof p = MERIDIAN__V1__PROOF__INIT;
    p.mac.data = mac;
    p.mac.len = sizeof mac;
    e = mrd_conn_queue(c, MRD_FRAME_PROOF, &p.base);
    if (e != 0)
        return e;
    c->state = MRD_CONN_PROOF; /* state_since_ns kept: the hello timeout covers both */
    return 0;
}

int mrd__link_handshake_frame(struct mrd_link *l, const struct mrd_tx_ident *id, int type,
                              const ProtobufCMessage *m)
{
    enum mrd_conn_state st = l->conn.state;
    if (type == MRD_FRAME_CHALLENGE && st == MRD_CONN_HELLO) {
        int e =
            mrd__link_answer_challenge(id, &l->conn, l->role, (const Meridian__V1__Challenge *)m);
        return e < 0 ? e : MRD_LINK_ANSWERED;
    }
    /* accepted only after our Proof; refused at any point of the handshake (an older or
     * newer aggregator refuses the Hello itself) */
    if (type == MRD_FRAME_HELLO_REPLY &&
        (st == MRD_CONN_PROOF ||
         (st == MRD_CONN_HELLO && !((const Meridian__V1__HelloReply *)m)->accepted)))
        return MRD_LINK_REPLY;
    return MRD_LINK_NOT_MINE;
}

int mrd__link_take_frames(struct mrd_link *l, const struct mrd_tx_ident *id,
                          mrd_link_frame_fn on_frame, void *arg)
{
    for (;;) {
        int type = 0;
        ProtobufCMessage *m = NULL;
        int e = mrd_conn_next_frame(&l->conn, &type, &m);
        if (e <= 0)
            return e;
        e = mrd__link_handshake_frame(l, id, type, m);
        if (e == MRD_LINK_ANSWERED)
            e = 0;
        else if (e >= 0)
            e = on_frame(arg, type, m, e == MRD_LINK_REPLY);
        protobuf_c_message_free_unpacked(m, NULL);
        if (e != 0)
            return e;
        if (l->conn.state == MRD_CONN_CLOSED)
            return 0;
    }
}

short mrd__link_poll_events(const struct mrd_link *l)
{
    const struct mrd_conn *c = &l->conn;
    switch (c->state) {
    case MRD_CONN_CONNECTING:
        return POLLOUT;
    case MRD_CONN_HELLO:
    case MRD_CONN_PROOF:
        return POLLIN | (c->out_len > c->out_off ? POLLOUT : 0);
    case MRD_CONN_READY:
        return POLLIN;
    default:
        return 0;
    }
}

int mrd__link_flush_handshake(struct mrd_link *l)
{
    if (l->conn.state != MRD_CONN_HELLO && l->conn.state != MRD_CONN_PROOF)
        return 0;
    int e = mrd_conn_flush(&l->conn);
    return e == -EAGAIN ? 0 : e;
}
