/* Reentrant lock commands (Redisson RLock layout): LOCK, TRYLOCK, UNLOCK,
 * FORCEUNLOCK, LOCK.INFO; the per-name wait state shared by every waiter
 * of this proxy (one upstream subscription, one async semaphore). */
#ifndef LP_PROXY_LOCK_H
#define LP_PROXY_LOCK_H

#include <stdbool.h>

#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;
struct px_client;
struct px_server;

#define PX_NAME_MAX 4096u /* longest lock name accepted */

/* LOCK, TRYLOCK, UNLOCK, FORCEUNLOCK, LOCK.INFO. */
extern const struct px_cmd_set px_lock_cmd_set;

/* The connection closed: its waits end (their replies are dropped). */
void px_lock_client_gone(struct px_client *cl);

int px_lock_init(struct px_server *srv);
void px_lock_deinit(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
