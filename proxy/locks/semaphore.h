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
#include "proxy/cmd.h"
#include "proxy/locks/scripts.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* Lua prelude for scripts on a STRING count at KEYS[1] (semaphore,
 * latch): refuses any other type, or a string that is not an integer,
 * with WRONGTYPE before anything is written, and leaves the value (or
 * false) in the local "cur". what names the object in the error. */
#define PX_LUA_CHECK_COUNT(what)                                                  \
    "local t = redis.call('type', KEYS[1])['ok']; "                               \
    "if t ~= 'none' and t ~= 'string' then return redis.error_reply("             \
    "'WRONGTYPE the name holds a ' .. t .. ', not a " what "'); end; "            \
    "local cur = redis.call('get', KEYS[1]); "                                    \
    "if cur and not string.match(cur, '^%-?%d+$') then return redis.error_reply(" \
    "'WRONGTYPE the name holds a string that is not a count, not a " what "'); end; "

/* SEM.* and PSEM.* commands; their scripts. */
extern const struct px_cmd_set px_sem_cmd_set;
extern const struct px_script_set px_sem_script_set;

/* INFO section "sync": semaphore and latch figures. */
void px_sync_info(struct px_server *srv, struct buf *out);

#ifdef __cplusplus
}
#endif

#endif
