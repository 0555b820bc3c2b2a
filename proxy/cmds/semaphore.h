/* Counting synchronizers over Redisson's layouts (spec sections 6 and 7):
 * SEM.* (RSemaphore: a STRING count at the raw name) and PSEM.*
 * (RPermitExpirableSemaphore: the count plus a "{name}:timeout" ZSET of
 * raw 16-byte permit ids), both waking waiters on redisson_sc:{name}.
 * Permits taken through the proxy are remembered per connection and given
 * back when the connection closes (unless taken with KEEP). Waiting
 * acquires run on the wait engine (wait.h). */
#ifndef LP_PROXY_LOCKS_SEMAPHORE_H
#define LP_PROXY_LOCKS_SEMAPHORE_H

#include "common/buf.h"
#include "engine/scripts.h"
#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool_topology_event;
struct lk_engine;
struct px_server;

/* SEM.* and PSEM.* commands; their scripts. */
extern const struct px_cmd_set px_sem_cmd_set;
extern const struct px_script_set px_sem_script_set;

/* INFO section "sync": semaphore and latch figures. */
void px_sync_info(struct px_server *srv, struct buf *out);

#ifdef __cplusplus
}
#endif

#endif
