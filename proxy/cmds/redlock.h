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

struct buf;
struct px_server;

/* INFO redlock (only with --redlock-upstream): redlock_masters,
 * redlock_majority, redlock_masters_up, redlock_holds,
 * redlock_quorum_refusals, and redlock_master_<i>:<host:port>,<state>. */
void px_redlock_info(struct px_server *srv, struct buf *out);

/* REDLOCK, REDUNLOCK. */
extern const struct px_cmd_set px_redlock_cmd_set;

/* Creates and starts one pool per --redlock-upstream master (none when the
 * flag is not given). Returns 0 or -errno (logged). */
int px_redlock_start(struct px_server *srv);

/* True while a master's first connection attempt has not settled (the
 * proxy accepts clients once none is connecting, as for --upstream). */
bool px_redlock_connecting(const struct px_server *srv);

/* True while a request to a master is in flight (the stop lets the
 * releases of closing connections reach the masters, as for --upstream). */
bool px_redlock_busy(const struct px_server *srv);

/* Closes the masters' connections; true once every pool has stopped. */
void px_redlock_stop(struct px_server *srv);
bool px_redlock_stopped(const struct px_server *srv);

/* Frees the pools and what is left of the state (after stopped). */
void px_redlock_destroy(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
