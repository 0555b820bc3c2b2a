/* FIFO wait queue and async semaphore; the contract is in waitq.h.
 *
 * Design.
 *
 * A waiter is queued iff its node is linked. Every wake unlinks the waiter
 * (list_del_init) before calling its callback, so the callback sees an idle
 * waiter it may queue again, and may free its owner.
 *
 * len counts linked waiters, including those that a running wake_all has
 * moved to its local list and not yet woken: they are still queued (a
 * callback may cancel them, which decrements len), so len drops one by one
 * as they are woken. wake_all splices the queue to a local list first, so
 * waiters queued by its callbacks wait for a later wake; a wake_one called
 * from one of those callbacks takes the oldest of these new waiters, since
 * every older one is about to be woken anyway.
 *
 * Semaphore invariant: permits > 0 only while no waiter is queued (a
 * release serves the queue before storing anything). sched_sem_release(n)
 * holds its n permits in hand while it wakes waiters one at a time, so a
 * callback that waits again is queued behind the others and may receive one
 * of the permits still in hand; a nested release stores its leftovers only
 * when the queue is empty, which keeps the invariant. */
#include "sched/waitq.h"

#include "common/compiler.h"

static struct sched_waiter *waitq_pop(struct sched_waitq *q, struct list *from)
{
    struct list *node = list_first(from);

    if (!node)
        return NULL;
    list_del_init(node);
    q->len--;
    return list_entry(node, struct sched_waiter, node);
}

void sched_waiter_init(struct sched_waiter *w, sched_wake_fn *cb)
{
    list_init(&w->node);
    w->cb = cb;
}

void sched_waitq_init(struct sched_waitq *q)
{
    list_init(&q->head);
    q->len = 0;
}

void sched_waitq_push(struct sched_waitq *q, struct sched_waiter *w)
{
    LP_BUG_ON(sched_waiter_is_queued(w));
    list_add_tail(&q->head, &w->node);
    q->len++;
}

void sched_waitq_cancel(struct sched_waitq *q, struct sched_waiter *w)
{
    if (!sched_waiter_is_queued(w))
        return;
    LP_BUG_ON(q->len == 0);
    list_del_init(&w->node);
    q->len--;
}

int sched_waitq_wake_one(struct sched_waitq *q)
{
    struct sched_waiter *w = waitq_pop(q, &q->head);

    if (!w)
        return 0;
    w->cb(w);
    return 1;
}

size_t sched_waitq_wake_all(struct sched_waitq *q)
{
    struct list batch;
    struct sched_waiter *w;
    size_t woken = 0;

    list_init(&batch);
    list_splice_tail_init(&batch, &q->head);
    while ((w = waitq_pop(q, &batch))) {
        w->cb(w);
        woken++;
    }
    return woken;
}

void sched_sem_init(struct sched_sem *s, size_t permits, size_t max_permits)
{
    sched_waitq_init(&s->q);
    s->max_permits = max_permits;
    s->permits = LP_MIN(permits, max_permits);
}

int sched_sem_wait(struct sched_sem *s, struct sched_waiter *w)
{
    if (s->permits > 0) {
        s->permits--;
        return 1;
    }
    sched_waitq_push(&s->q, w);
    return 0;
}

void sched_sem_cancel(struct sched_sem *s, struct sched_waiter *w)
{
    sched_waitq_cancel(&s->q, w);
}

void sched_sem_release(struct sched_sem *s, size_t n)
{
    while (n > 0 && sched_waitq_wake_one(&s->q))
        n--;
    s->permits += LP_MIN(n, s->max_permits - s->permits);
}

void sched_sem_release_all(struct sched_sem *s)
{
    s->permits = 0;
    sched_waitq_wake_all(&s->q);
}
