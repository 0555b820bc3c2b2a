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
#ifndef LP_PROXY_LOCKS_WAITSET_H
#define LP_PROXY_LOCKS_WAITSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    bool exclusive;            /* a writer: "1" wakes only the first of these */
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
    uint64_t gen;              /* unique per set created (tells a recreated set apart) */
    uint64_t events;           /* READY, LOST and messages seen: a change means a
                                  wake-up may have been consumed or missed */
    uint64_t holder_until;     /* monotonic ms a member last saw the holder's lease end */
    unsigned local_grants;     /* lock.c: hand-offs in a row without a PUBLISH */
    size_t chlen;              /* channel length */
    char channel[];            /* owned: channel name, NUL-terminated */
};

/* What an attempt sent outside the set knew about it (px_waitset_snap). */
struct px_wait_snap {
    uint64_t gen;    /* set->gen at the time, 0 if there was no ready set */
    uint64_t events; /* set->events at the time */
};

void px_wait_init(struct px_wait *w, px_wait_fn *retry);

/* The set for channel, or NULL. */
struct px_waitset *px_waitset_find(struct px_server *srv, const char *channel, size_t chlen);

/* Records the state of channel's set before an attempt is sent. */
void px_waitset_snap(struct px_server *srv, const char *channel, size_t chlen,
                     struct px_wait_snap *snap);

/* True when set is the ready set snap saw and nothing happened on it since:
 * a member joining now cannot have missed a wake-up and may sleep without
 * retrying first. */
bool px_waitset_unchanged(const struct px_waitset *set, const struct px_wait_snap *snap);

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

/* How the messages of a channel that does not carry lock codes wake the
 * members of its set (px_waitset_join_mode). */
enum px_wake_mode {
    PX_WAKE_COUNT = 1, /* "N": wake min(N, members), as Redisson's SemaphorePubSub;
                          N <= 0 wakes nobody, a non-number wakes one */
    PX_WAKE_ALL = 2,   /* any message: every member re-checks (count-down latch) */
};

/* px_waitset_join for a channel whose messages are counts or "open"
 * signals, not lock codes: messages wake members per mode (READY and LOST
 * as px_waitset_join). Every joiner of one channel passes the same mode.
 * Wake-ups that find a member's retry in flight are kept for it, as for
 * locks. Returns the set, or NULL on -ENOMEM. */
struct px_waitset *px_waitset_join_mode(struct px_server *srv, const char *channel, size_t chlen,
                                        struct px_wait *w, enum px_wake_mode mode);

int px_waitset_init(struct px_server *srv);
void px_waitset_deinit(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
