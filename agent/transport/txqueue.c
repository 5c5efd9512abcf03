/* The unacknowledged-batch queue: a singly linked FIFO with a send cursor and a byte cap.
 * See txqueue.h for the policy at the cap. Holds at most MERIDIAN_QUEUE_BYTES of frames
 * (64 MiB by default: ~4 million kernel events, minutes of a rank's traffic), touched only
 * by the flusher thread, a few hundred operations per second. */
#include "txqueue.h"

#include <errno.h>
#include <stdlib.h>

void mrd_txq_init(struct mrd_txq *q, uint64_t cap_bytes)
{
    *q = (struct mrd_txq){.cap_bytes = cap_bytes};
}

static void entry_free(struct mrd_txq_entry *e)
{
    free(e->frame);
    free(e);
}

void mrd_txq_clear(struct mrd_txq *q)
{
    struct mrd_txq_entry *e = q->head;
    while (e) {
        struct mrd_txq_entry *next = e->next;
        entry_free(e);
        e = next;
    }
    q->head = q->tail = q->cursor = NULL;
    q->bytes = q->count = q->events = 0;
}

int mrd_txq_push(struct mrd_txq *q, uint64_t seq, uint32_t events, uint8_t *frame, size_t len)
{
    if (len > q->cap_bytes || q->bytes > q->cap_bytes - len)
        return -ENOBUFS;
    struct mrd_txq_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    *e = (struct mrd_txq_entry){.seq = seq, .events = events, .len = len, .frame = frame};
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    if (q->cursor == NULL)
        q->cursor = e;
    q->bytes += len;
    q->count++;
    q->events += events;
    return 0;
}

struct mrd_txq_entry *mrd_txq_peek_unsent(const struct mrd_txq *q)
{
    return q->cursor;
}

void mrd_txq_mark_sent(struct mrd_txq *q)
{
    if (q->cursor) {
        q->cursor->sent_count++;
        q->cursor = q->cursor->next;
    }
}

/* Unlinks the head entry (which must exist), fixing the cursor. */
static void pop_head(struct mrd_txq *q, mrd_txq_acked_fn fn, void *arg)
{
    struct mrd_txq_entry *e = q->head;
    q->head = e->next;
    if (q->head == NULL)
        q->tail = NULL;
    if (q->cursor == e)
        q->cursor = e->next;
    q->bytes -= e->len;
    q->count--;
    q->events -= e->events;
    if (fn)
        fn(e->seq, e->events, arg);
    entry_free(e);
}

size_t mrd_txq_ack(struct mrd_txq *q, uint64_t seq, mrd_txq_acked_fn fn, void *arg)
{
    size_t n = 0;
    /* entries before the cursor are exactly those written on this connection */
    while (q->head && q->head != q->cursor && q->head->seq <= seq) {
        pop_head(q, fn, arg);
        n++;
    }
    return n;
}

void mrd_txq_rewind(struct mrd_txq *q)
{
    q->cursor = q->head;
}

size_t mrd_txq_drop_committed(struct mrd_txq *q, uint64_t committed, mrd_txq_acked_fn fn, void *arg)
{
    size_t n = 0;
    while (q->head && q->head->seq <= committed) {
        pop_head(q, fn, arg);
        n++;
    }
    return n;
}

uint32_t mrd_txq_remove_cursor(struct mrd_txq *q)
{
    struct mrd_txq_entry *c = q->cursor;
    if (c == NULL)
        return 0;
    uint32_t events = c->events;
    if (c == q->head) {
        pop_head(q, NULL, NULL);
        return events;
    }
    struct mrd_txq_entry *prev = q->head;
    while (prev->next != c)
        prev = prev->next;
    prev->next = c->next;
    if (q->tail == c)
        q->tail = prev;
    q->cursor = c->next;
    q->bytes -= c->len;
    q->count--;
    q->events -= events;
    entry_free(c);
    return events;
}
