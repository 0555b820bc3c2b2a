/* Lock semantics as the rest of the proxy sees them: start-up and
 * shut-down of the lock modules, what a connection holds or waits for
 * (struct px_cl_locks, embedded in struct px_client), and the one
 * clean-up path when a connection goes.
 *
 * Also the limits every lock module shares (name, owner and channel
 * sizes) and a rate limit for log lines that could flood. */
#ifndef LP_PROXY_LOCKS_LOCKS_H
#define LP_PROXY_LOCKS_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_server;

#define PX_NAME_MAX    4096u                             /* longest object name accepted */
#define PX_OWNER_MAX   256u                              /* owner field capacity (with ":write") */
#define PX_CHANNEL_MAX (PX_NAME_MAX + PX_OWNER_MAX + 64) /* channel and aux key capacity */

/* Something a connection took that must go back when it closes (semaphore
 * permits: sem.c, psem.c). */
struct px_claim {
    struct list node; /* in cl->locks.claims while registered */
    /* The connection closed: give back, then free the claim. Called once,
     * after the claim was unlinked. */
    void (*gone)(struct px_claim *c, struct px_client *cl);
};

/* What one connection waits for and holds. */
struct px_cl_locks {
    struct list waits;  /* struct px_wait_op: its waiting commands (wait.c) */
    struct list holds;  /* struct px_hold: locks it acquired (hold.c) */
    struct list shares; /* struct px_hold_share: its parts of another connection's holds
                           of the same OWNER (hold.c) */
    struct list claims; /* struct px_claim: permits to give back */
};

/* True while the connection holds or waits for a lock, or holds permits
 * (such a connection is never idle: --timeout). */
static inline bool px_locks_client_busy(const struct px_cl_locks *l)
{
    return !list_empty(&l->waits) || !list_empty(&l->holds) || !list_empty(&l->shares) ||
           !list_empty(&l->claims);
}

/* Empty lists for a new connection. */
void px_locks_client_init(struct px_cl_locks *l);

/* The connection is closing: its waits end (replies dropped; those in
 * flight when their reply comes), its holds are released or left to
 * expire (--on-disconnect), its permits go back. The one clean-up path. */
void px_locks_client_gone(struct px_client *cl);

/* The pool's topology callback (pool_topology_fn; arg is the server):
 * the masters of some slots changed (a failover, a migration, a Sentinel
 * switch), so the holds of those slots are verified on their new master
 * at once (watchdog.c): one whose owner field is gone is marked lost. */
void px_locks_on_topology(void *arg, const struct pool_topology_event *ev);

/* Sets up and tears down the lock modules' server state (waitsets, holds
 * and the watchdog, retried jobs). */
int px_locks_init(struct px_server *srv);
void px_locks_deinit(struct px_server *srv);

/* At most one log line a second for one kind of event. */
struct px_ratelog {
    uint64_t last_ms; /* monotonic ms of the last line written, 0: none yet */
    uint64_t quiet;   /* events not logged since */
};

/* True when a line may be written at now_ms; *quiet gets the number of
 * events not logged since the last line (and the count restarts). */
bool px_ratelog_allow(struct px_ratelog *rl, uint64_t now_ms, uint64_t *quiet);

#ifdef __cplusplus
}
#endif

#endif
