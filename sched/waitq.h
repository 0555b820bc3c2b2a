/* FIFO wait queue and async semaphore (the per-lock wake-up primitive, as
 * Redisson's AsyncSemaphore): waiters are intrusive, woken in arrival order
 * by callback, never by blocking.
 *
 * sched_sem: permits count releases that found no waiter. sched_sem_wait()
 * either takes a permit at once (returns 1, callback not called) or queues
 * the waiter (returns 0). sched_sem_release(n) hands permits to queued
 * waiters first, FIFO, calling each callback after unlinking it; what is
 * left accumulates, capped at max_permits. Callbacks may re-enter the
 * semaphore (wait again, cancel others, release). */
#ifndef LP_SCHED_WAITQ_H
#define LP_SCHED_WAITQ_H

#include <stddef.h>

#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_waiter;

typedef void sched_wake_fn(struct sched_waiter *w);

struct sched_waiter {
    struct list node;  /* in a waitq while queued; self-linked otherwise */
    sched_wake_fn *cb; /* borrowed: called once when woken */
};

struct sched_waitq {
    struct list head; /* FIFO of struct sched_waiter */
    size_t len;       /* queued waiters */
};

struct sched_sem {
    struct sched_waitq q; /* waiters without a permit */
    size_t permits;       /* releases not yet consumed */
    size_t max_permits;   /* cap on accumulated permits (SIZE_MAX for none) */
};

void sched_waiter_init(struct sched_waiter *w, sched_wake_fn *cb);
static inline int sched_waiter_is_queued(const struct sched_waiter *w)
{
    return list_is_linked(&w->node);
}

void sched_waitq_init(struct sched_waitq *q);
void sched_waitq_push(struct sched_waitq *q, struct sched_waiter *w);
/* Unlinks w if queued on q; a no-op otherwise. */
void sched_waitq_cancel(struct sched_waitq *q, struct sched_waiter *w);
/* Wakes the oldest waiter. Returns 1 if one was woken, 0 if the queue was empty. */
int sched_waitq_wake_one(struct sched_waitq *q);
/* Wakes every waiter queued at the time of the call. Returns how many. */
size_t sched_waitq_wake_all(struct sched_waitq *q);

void sched_sem_init(struct sched_sem *s, size_t permits, size_t max_permits);
/* Returns 1 if a permit was taken at once, 0 if w was queued. */
int sched_sem_wait(struct sched_sem *s, struct sched_waiter *w);
void sched_sem_cancel(struct sched_sem *s, struct sched_waiter *w);
/* Gives n permits: wakes up to n queued waiters, keeps the rest (capped). */
void sched_sem_release(struct sched_sem *s, size_t n);
/* Wakes every queued waiter and drops stored permits. */
void sched_sem_release_all(struct sched_sem *s);

#ifdef __cplusplus
}
#endif

#endif
