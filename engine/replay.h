/* Releases re-applied after a change of master (issue 22).
 *
 * Redis replicates asynchronously, and a Sentinel or Cluster failover
 * promotes a replica up to a second or more before the proxy follows it:
 * meanwhile the old master keeps taking writes. A hold granted just before
 * the promotion is replicated; its release, sent a moment later, may be
 * applied on the old master only. The new master then keeps the hold (a
 * ghost) until its lease ends, and nobody renews or releases it, since the
 * proxy believes it released.
 *
 * So the proxy remembers the releases Redis confirmed (an UNLOCK answered
 * 1, a closed connection's release, a release the proxy carried out) for
 * as long as the released lease could still be alive on some replica, and
 * after every change of master re-sends those of the moved slots: the
 * kind's settle to 0, which touches the owner's own fields only and is
 * idempotent. A pair that has a live hold again (the owner acquired again)
 * is left to that hold's own checks, and a re-send never overtakes a later
 * request about the pair (it is not sent while one exists).
 *
 * A release still on its way to the old master when the proxy follows
 * the switch is confirmed by that master after the change (it was frozen,
 * or slow: its reply may come up to --upstream-timeout later), too late
 * for the re-send above. So the slots a change moved stay marked for
 * --upstream-timeout after it, and a release of a marked slot confirmed
 * meanwhile is re-applied at once (harmless when it did reach the new
 * master: the settle finds nothing of the owner's and answers 0).
 *
 * Only with an upstream that can fail over (Sentinel, Cluster); bounded
 * at PX_REPLAY_MAX records, the oldest dropped first (counted). */
#ifndef LP_PROXY_LOCKS_REPLAY_H
#define LP_PROXY_LOCKS_REPLAY_H

#include <stdint.h>

#include "common/list.h"
#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;
struct px_hold;
struct pool_topology_event;

#define PX_REPLAY_MAX 65536u /* releases remembered at once */

/* The engine's records (embedded in struct lk_engine: eng->replays). */
struct px_replays {
    struct list list;     /* struct px_replay, oldest first */
    unsigned n;           /* records in list */
    uint64_t sent;        /* releases re-sent after a change of master */
    uint64_t found;       /* of those, that found the hold still there (a ghost) */
    uint64_t dropped;     /* records dropped at PX_REPLAY_MAX before their lease ended */
    uint64_t moved_until; /* monotonic ms: until then a release of a moved slot is re-sent */
    uint8_t moved[POOL_SLOT_BITMAP_SIZE]; /* slots changes moved, up to moved_until */
};

void px_replay_init(struct lk_engine *eng);
void px_replay_deinit(struct lk_engine *eng);

/* Redis confirmed the release of h (HELD or RELEASING, its lease end
 * still set): remember it until that lease would have ended. */
void px_replay_note(struct lk_engine *eng, const struct px_hold *h);

/* The masters of ev's slots changed: re-send the remembered releases of
 * those slots. */
void px_replay_topology(struct lk_engine *eng, const struct pool_topology_event *ev);

#ifdef __cplusplus
}
#endif

#endif
