/* Per-channel wait state shared by every waiter of this proxy: ONE
 * upstream subscription and one async semaphore per channel, as Redisson's
 * LockPubSub keeps per client, but shared by all clients of the proxy.
 *
 * A waiter joins the set (the set subscribes if needed), and from then on:
 * - each "0" message releases one permit: the oldest sleeping waiter wakes
 *   (FIFO); a permit that finds nobody asleep is kept for a waiter whose
 *   retry is in flight (capped at the number of members, so stale permits
 *   cost at most one spurious retry each);
 * - a "1" message wakes every sleeper (write-lock release);
 * - when the subscription is confirmed (first time, and after every
 *   pub/sub reconnect, when messages may have been lost), every member
 *   that is not already retrying is told to retry: this closes the
 *   unlock-before-subscribe race.
 * A set with no members lingers for --subscription-linger ms and is then
 * unsubscribed and freed, so lock churn does not become SUBSCRIBE churn. */
#ifndef LP_PROXY_WAITSET_H
#define LP_PROXY_WAITSET_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hmap.h"
#include "common/list.h"
#include "pool/pubsub-t.h"
#include "sched/timer-t.h"
#include "sched/waitq.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;
struct px_wait;

/* Called when a member should try again (woken, or subscription ready).
 * The member is not asleep on entry. */
typedef void px_wait_fn(struct px_wait *w);

struct px_wait {
    struct list node;          /* in set->members while joined */
    struct sched_waiter sleep; /* on set->sem while asleep */
    px_wait_fn *retry;         /* borrowed: what to do when woken */
    bool busy;                 /* a retry is in flight: READY skips it */
};

struct px_waitset {
    struct hmap_node node;     /* in srv->locks, by channel */
    struct px_server *srv;     /* borrowed */
    struct pool_sub sub;       /* the upstream subscription */
    struct sched_sem sem;      /* wake-ups */
    struct list members;       /* struct px_wait */
    unsigned nmembers;         /* joined waiters */
    bool subscribed;           /* pool_sub_start succeeded */
    bool ready;                /* subscription confirmed */
    struct sched_timer linger; /* unsubscribe when idle this long */
    size_t chlen;              /* channel length */
    char channel[];            /* owned: channel name, NUL-terminated */
};

void px_wait_init(struct px_wait *w, px_wait_fn *retry);

/* Joins w to the set for channel (created and subscribed on first use).
 * Returns the set, or NULL on -ENOMEM. */
struct px_waitset *px_waitset_join(struct px_server *srv, const char *channel, size_t chlen,
                                   struct px_wait *w);

/* Leaves the set (cancels a sleep). The set may linger, then go. */
void px_waitset_leave(struct px_waitset *set, struct px_wait *w);

/* Sleeps until a wake-up. Returns true if a stored permit was taken at
 * once (the caller retries now), false if w is now asleep. */
bool px_waitset_sleep(struct px_waitset *set, struct px_wait *w);

/* Cancels a sleep without leaving. */
void px_waitset_wake_cancel(struct px_waitset *set, struct px_wait *w);

int px_waitset_init(struct px_server *srv);
void px_waitset_deinit(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
