/* REDLOCK and REDUNLOCK: one lock name taken on a majority of independent
 * Redis masters (--redlock-upstream, 3 or more, an odd number), with the
 * Redlock validity check Redisson's RedissonRedLock never implemented.
 * The design block is in redlock.c. */
#ifndef LP_PROXY_LOCKS_REDLOCK_H
#define LP_PROXY_LOCKS_REDLOCK_H

#include <stdbool.h>

#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* REDLOCK, REDUNLOCK. */
extern const struct px_cmd_set px_redlock_cmd_set;

#ifdef __cplusplus
}
#endif

#endif
