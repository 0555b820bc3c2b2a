/* Per-channel wait state shared by every waiter of this proxy: ONE
 * upstream subscription and one async semaphore per channel, as Redisson's
 * LockPubSub keeps per client, but shared by all clients of the proxy.
 *
 * A member joins the set (the set subscribes if needed), and from then on
 * the channel's messages wake members as the set's mode says (lock codes:
 * a "0" releases one permit, the oldest queued member wakes (FIFO), a "1"
 * wakes every queued reader and the first queued writer; counts: "N" wakes
 * N; any: every member). A permit that finds nobody queued is kept for a
 * member that is not queued just then (capped at the number of members, so
 * stale permits cost at most one spurious retry each). When the
 * subscription is confirmed (first time, and after every pub/sub
 * reconnect, when messages may have been lost), every member is told to
 * retry: this closes the unlock-before-subscribe race. What a member does
 * with a wake-up while its own attempt is in flight is the wait engine's
 * business (wait.h).
 * The subscription is the channel's hub (subs.h), shared with
 * pass-through clients subscribed to the same channel. On a cluster with
 * --cluster-pubsub auto resolved to sharded, the set also listens on the
 * classic channel of the same name: Redisson-layout clients that publish
 * with PUBLISH wake the proxy's waiters too (only its messages count; the
 * sharded subscription's READY and LOST rule the set's state).
 * A set with no members lingers for --subscription-linger ms and is then
 * unsubscribed and freed, so lock churn does not become SUBSCRIBE churn. */
#ifndef LP_PROXY_LOCKS_WAITSET_H
#define LP_PROXY_LOCKS_WAITSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "engine/sub_lsn.h"
#include "pool/pubsub-t.h"
#include "sched/timer-t.h"
#include "sched/waitq.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;
struct px_waitset_member;

/* Called when a member should try again (woken, or subscription ready).
 * The member is not queued on the semaphore on entry. */
typedef void px_waitset_fn(struct px_waitset_member *m);

/* How the messages of a channel wake the members of its set. */
enum px_wake_mode {
    PX_WAKE_LOCK = 0,  /* lock codes: "0" wakes one (FIFO), "1" every reader and one writer */
    PX_WAKE_COUNT = 1, /* "N": wake min(N, members), as Redisson's SemaphorePubSub;
                          N <= 0 wakes nobody, a non-number wakes one */
    PX_WAKE_ALL = 2,   /* any message: every member re-checks (count-down latch) */
};

struct px_waitset_member {
    struct list node;          /* in set->members while joined */
    struct sched_waiter sleep; /* on set->sem while queued */
    px_waitset_fn *retry;      /* borrowed: what to do when woken */
    bool exclusive;            /* a writer: "1" wakes only the first of these */
    bool took_permit;          /* handed a wake-up meant for one member ("0", a count):
                                  passed on if the member leaves the set unused */
};

struct px_waitset {
    struct hmap_node node;     /* in eng->locks, by channel */
    struct lk_engine *eng;     /* borrowed */
    struct pool_sub sub;       /* sub.cb: the mode's event handler (px_waitset_deliver) */
    struct px_sub_lsn lsn;     /* on the channel's hub: the shared upstream subscription */
    struct px_sub_lsn classic; /* --cluster-pubsub auto, sharded: the classic channel too */
    struct sched_sem sem;      /* wake-ups */
    struct list members;       /* struct px_waitset_member, oldest first */
    unsigned nmembers;         /* joined waiters */
    bool subscribed;           /* listening on lsn */
    bool dual;                 /* listening on classic as well */
    bool ready;                /* subscription confirmed */
    struct sched_timer linger; /* unsubscribe when idle this long */
    uint64_t gen;              /* unique per set created (tells a recreated set apart) */
    uint64_t events;           /* READY, LOST and messages seen: a change means a
                                  wake-up may have been consumed or missed */
    uint64_t repoll_at;        /* monotonic ms a member was last told a re-check is worth it
                                  (for locks: the holder's lease end) */
    unsigned local_grants;     /* unlock.c: hand-offs in a row without a PUBLISH */
    size_t chlen;              /* channel length */
    char channel[];            /* owned: channel name, NUL-terminated */
};

/* What an attempt sent outside the set knew about it (px_waitset_snap). */
struct px_wait_snap {
    uint64_t gen;    /* set->gen at the time, 0 if there was no ready set */
    uint64_t events; /* set->events at the time */
};

void px_waitset_member_init(struct px_waitset_member *m, px_waitset_fn *retry);

/* The set for channel, or NULL. */
struct px_waitset *px_waitset_find(struct lk_engine *eng, const char *channel, size_t chlen);

/* Records the state of channel's set before an attempt is sent. */
void px_waitset_snap(struct lk_engine *eng, const char *channel, size_t chlen,
                     struct px_wait_snap *snap);

/* True when set is the ready set snap saw and nothing happened on it since:
 * a member joining now cannot have missed a wake-up and may sleep without
 * retrying first. */
bool px_waitset_unchanged(const struct px_waitset *set, const struct px_wait_snap *snap);

/* Joins m to the set for channel (created and subscribed on first use);
 * messages wake members per mode (every joiner of one channel passes the
 * same mode). Returns the set, or NULL on -ENOMEM. */
struct px_waitset *px_waitset_join(struct lk_engine *eng, const char *channel, size_t chlen,
                                   struct px_waitset_member *m, enum px_wake_mode mode);

/* Leaves the set (unqueues m). The set may linger, then go. */
void px_waitset_leave(struct px_waitset *set, struct px_waitset_member *m);

/* px_waitset_leave() for a member that may have been handed a wake-up meant
 * for one member and leaves without using it (used false: it timed out,
 * failed, or moved to another channel, a MULTILOCK blocked by another of
 * its names): the wake-up goes to the next member, or the set's release
 * would be lost for every other waiter until their re-poll. */
void px_waitset_leave_passing_on(struct px_waitset *set, struct px_waitset_member *m, bool used);

/* A message on the set's channel heard elsewhere than on its own
 * subscription (REDLOCK's masters, redlock.c): wakes members as one heard
 * on it would. */
void px_waitset_deliver(struct px_waitset *set, const char *msg, size_t len);

/* Queues m on the set's semaphore until a wake-up. Returns true if a
 * stored permit was taken at once (m is not queued: the caller retries
 * now), false if m is now queued. */
bool px_waitset_sleep(struct px_waitset *set, struct px_waitset_member *m);

/* Takes m off the set's semaphore (if queued), staying a member: wake-ups
 * go to the members behind it meanwhile. */
void px_waitset_unqueue(struct px_waitset *set, struct px_waitset_member *m);

/* True while m is queued on its set's semaphore. */
bool px_waitset_is_queued(const struct px_waitset_member *m);

int px_waitset_init(struct lk_engine *eng);
void px_waitset_deinit(struct lk_engine *eng);

#ifdef __cplusplus
}
#endif

#endif
