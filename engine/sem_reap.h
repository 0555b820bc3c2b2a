/* A dead proxy's semaphore permits given back by a live one (issue 18).
 *
 * Each proxy keeps, per semaphore, a ledger of the permits its
 * connections took ({name}:lp-permits:<uuid>, sem_track.c), and gives a
 * closed connection's permits back. A proxy that is killed gives nothing
 * back: its clients' permits stayed taken for ever. So every proxy
 * registers in Redis, under the hash tag {lp-proxies} (one slot, so one
 * script sees it all in a Cluster):
 * - {lp-proxies}:live:<uuid>, set for --lock-watchdog-timeout and renewed
 *   every third of it (sem_alive.lua), from the proxy's first ledger on (a
 *   proxy that keeps none writes nothing);
 * - {lp-proxies}:all, the proxies that keep ledgers, and
 *   {lp-proxies}:sems:<uuid>, the semaphores each keeps one of (added
 *   before the first acquire of a name is sent, sem_register.lua).
 * Every --lock-watchdog-timeout, a proxy looks for a registered proxy
 * whose liveness key expired (sem_reap_find.lua; it marks it reaped),
 * and gives back the sum of its ledger for each of its semaphores
 * (sem_reap.lua: the ledger goes in the same script, so two reapers, or a
 * resend, return nothing twice), then drops the name from its registry.
 * So a dead proxy's permits are back within about two watchdog timeouts,
 * given a live proxy on the same Redis (a restarted one will do: it has a
 * new uuid).
 *
 * A proxy that was only stopped past its liveness key learns at its next
 * renewal that it was reaped (sem_alive.lua answers 1): its ledgers are
 * gone, so its clients' releases answer LOCKLOST for those permits (the
 * ledger's rule, sem_track.c), and it registers its names again.
 *
 * State lives in eng->sem_reap; no file globals. */
#ifndef LP_PROXY_LOCKS_SEM_REAP_H
#define LP_PROXY_LOCKS_SEM_REAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;

#define PX_SEM_REAP_NAMES      64u    /* a dead proxy's names handled per round */
#define PX_SEM_REAP_REGISTERED 65536u /* names remembered as registered (then forgotten) */

struct px_sem_reap {
    struct sched_timer alive;  /* next liveness renewal */
    struct sched_timer reap;   /* next look for a dead proxy */
    struct hmap registered;    /* names whose registration Redis confirmed (or in flight) */
    bool alive_armed;          /* renewals started (at the first registration) */
    bool alive_inflight;       /* a renewal is in flight */
    bool reaping;              /* a round is in flight */
    unsigned pending;          /* replies the round still waits for */
    char dead[64];             /* the uuid the round gives back for */
    uint64_t permits_returned; /* permits of dead proxies given back (INFO sem_reaped_permits) */
    uint64_t reaped_self;      /* times this proxy learnt it had been reaped */
};

int px_sem_reap_init(struct lk_engine *eng);
void px_sem_reap_deinit(struct lk_engine *eng);

/* Before a tracked acquire of name is sent: registers name once. */
void px_sem_reap_register(struct lk_engine *eng, const char *name, size_t len);

#ifdef __cplusplus
}
#endif

#endif
