/* Hashed timing wheel (Varghese & Lauck scheme 6, single level with rounds):
 * O(1) add and cancel, intrusive timers, eager cancel, no allocation after
 * init. Time is injected by the caller (monotonic ms) so tests never sleep.
 *
 * A timer lands in slot ceil(expires / tick_ms) mod nslots. Processing a
 * slot fires only timers whose deadline has passed; timers more than one
 * revolution away stay in the slot for a later round. Deadlines are rounded
 * up to the tick ("deadline" below means the rounded one): a timer never
 * fires early, and at most tick_ms - 1 ms late. */
#ifndef LP_SCHED_WHEEL_H
#define LP_SCHED_WHEEL_H

#include <stdint.h>

#include "sched/wheel-t.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nslots is rounded up to a power of two; tick_ms >= 1. now_ms is the
 * current time. Returns 0 or -ENOMEM / -EINVAL. */
int sched_wheel_init(struct sched_wheel *w, uint64_t now_ms, uint64_t tick_ms, size_t nslots);

/* Frees the slot arrays; pending timers are simply forgotten (unlinked). */
void sched_wheel_deinit(struct sched_wheel *w);

/* Arms t to fire at expires_ms (re-arms it if already pending). A deadline
 * in the past fires on the next sched_wheel_run. */
void sched_wheel_add(struct sched_wheel *w, struct sched_timer *t, uint64_t expires_ms);

/* Cancels t if pending; a no-op otherwise. O(1). */
void sched_wheel_del(struct sched_wheel *w, struct sched_timer *t);

/* Fires every timer whose deadline is <= now_ms, in deadline-slot order.
 * Callbacks may add or cancel any timer; timers they arm fire on a later
 * run at the earliest. Returns the number fired. */
size_t sched_wheel_run(struct sched_wheel *w, uint64_t now_ms);

/* Milliseconds from now_ms until the next non-empty slot is due (0 if due
 * now), or -1 when no timer is pending. May be early for timers that are
 * rounds away; never late. Remembers the slot it found, so the next call
 * starts its search there. */
int64_t sched_wheel_timeout_ms(struct sched_wheel *w, uint64_t now_ms);

#ifdef __cplusplus
}
#endif

#endif
