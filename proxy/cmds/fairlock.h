/* Fair lock commands over Redisson's RFairLock layout (spec section 4):
 * FAIRLOCK and FAIRUNLOCK. The lock hash is the RLock one; waiters queue
 * in redisson_lock_queue:{name} (LIST, FIFO across every proxy and every
 * Redisson client) with deadlines in redisson_lock_timeout:{name} (ZSET,
 * epoch ms), and each waiter is woken on its own channel
 * redisson_lock__channel:{name}:<owner>. */
#ifndef LP_PROXY_LOCKS_FAIRLOCK_H
#define LP_PROXY_LOCKS_FAIRLOCK_H

#include "engine/scripts.h"
#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PX_FAIR_WAIT_DEFAULT_MS 300000u /* threadWaitTime without WAIT (fairLockWaitTimeout) */

/* FAIRLOCK, FAIRUNLOCK. */
extern const struct px_cmd_set px_fairlock_cmd_set;

/* The fair lock's scripts. */
extern const struct px_script_set px_fairlock_script_set;

#ifdef __cplusplus
}
#endif

#endif
