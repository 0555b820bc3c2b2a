/* Fair lock commands over Redisson's RFairLock layout (spec section 4):
 * FAIRLOCK and FAIRUNLOCK. The lock hash is the RLock one; waiters queue
 * in redisson_lock_queue:{name} (LIST, FIFO across every proxy and every
 * Redisson client) with deadlines in redisson_lock_timeout:{name} (ZSET,
 * epoch ms), and each waiter is woken on its own channel
 * redisson_lock__channel:{name}:<owner>. */
#ifndef LP_PROXY_LOCKS_FAIRLOCK_H
#define LP_PROXY_LOCKS_FAIRLOCK_H

#include "proxy/cmd.h"
#include "proxy/locks/scripts.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PX_FAIR_WAIT_DEFAULT_MS 300000u /* threadWaitTime without WAIT (fairLockWaitTimeout) */

/* Lua: Redisson's stale-waiter cleanup. While the queue q has a head whose
 * deadline in the zset z is at or before now (or missing: a half-written
 * entry), drop it. q, z and now are Lua expressions. */
#define PX_FAIR_CLEANUP_LUA(q, z, now)                                      \
    "while true do local h = redis.call('lindex', " q ", 0); "              \
    "if (h == false) then break; end; "                                     \
    "local s = redis.call('zscore', " z ", h); "                            \
    "if (s ~= false and tonumber(s) > tonumber(" now ")) then break; end; " \
    "redis.call('zrem', " z ", h); redis.call('lpop', " q "); end; "

/* FAIRLOCK, FAIRUNLOCK. */
extern const struct px_cmd_set px_fairlock_cmd_set;

/* The fair lock's scripts. */
extern const struct px_script_set px_fairlock_script_set;

#ifdef __cplusplus
}
#endif

#endif
