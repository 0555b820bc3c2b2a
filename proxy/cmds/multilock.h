/* MULTILOCK and MULTIUNLOCK: several RLock-layout names taken all or none
 * (Redisson's RedissonMultiLock, without its lock-order deadlocks), and
 * released together. Each name stays an ordinary RLock hold of the proxy
 * (hold.h): renewed by the watchdog, released on disconnect, LOCKLOST on
 * an unlock after a lost lease, and reachable by UNLOCK and LOCK.INFO. The
 * design block is in multilock.c. */
#ifndef LP_PROXY_LOCKS_MULTILOCK_H
#define LP_PROXY_LOCKS_MULTILOCK_H

#include "engine/scripts.h"
#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PX_MULTI_MAX 64u /* most names of one MULTILOCK / MULTIUNLOCK */

/* MULTILOCK, MULTIUNLOCK. */
extern const struct px_cmd_set px_multilock_cmd_set;

/* The all-or-nothing acquire and the multi-name unlock (lua/multi_*.lua). */
extern const struct px_script_set px_multilock_script_set;

#ifdef __cplusplus
}
#endif

#endif
