/* Timer type embedded by every module that needs a deadline (leases, wait
 * timeouts, reconnect backoff). A timer is idle (node unlinked) or pending
 * in exactly one wheel slot. */
#ifndef LP_SCHED_TIMER_T_H
#define LP_SCHED_TIMER_T_H

#include <stdint.h>

#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_timer;

/* Called when the deadline passes; the timer is idle again on entry, so the
 * callback may re-arm it, free its owner, or add/cancel other timers. */
typedef void sched_timer_fn(struct sched_timer *t);

struct sched_timer {
    struct list node;  /* in a wheel slot while pending; self-linked when idle */
    uint64_t expires;  /* deadline, monotonic ms */
    sched_timer_fn *cb; /* borrowed: expiry callback */
};

static inline void sched_timer_init(struct sched_timer *t, sched_timer_fn *cb)
{
    list_init(&t->node);
    t->expires = 0;
    t->cb = cb;
}

static inline int sched_timer_is_pending(const struct sched_timer *t)
{
    return list_is_linked(&t->node);
}

#ifdef __cplusplus
}
#endif

#endif
