/* The lock family: LOCK, TRYLOCK, UNLOCK, FORCEUNLOCK, LOCK.INFO (Redisson
 * RLock and RFencedLock layout), and what every lock kind of the proxy
 * shares (plain, fenced, fair, read, write): argument parsing, acquiring
 * on the wait engine (wait.h), holds (hold.h), and the NOTOWNER / LOCKLOST
 * unlock replies. A kind only says which scripts to run and which channel
 * to wait on (struct px_lock_kind). lock.c is the acquire side, unlock.c
 * the release side (UNLOCK of every kind, the local hand-off, FORCEUNLOCK,
 * LOCK.INFO). */
#ifndef LP_PROXY_LOCKS_LOCK_H
#define LP_PROXY_LOCKS_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/scripts.h"
#include "pool/pool.h"
#include "proxy/cmd.h"
#include "proxy/cmds/fairlock.h" /* the family's other kinds: their command and script sets */
#include "proxy/cmds/rwlock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;
struct px_server;

/* LOCK, TRYLOCK, UNLOCK, FORCEUNLOCK, LOCK.INFO. */
extern const struct px_cmd_set px_lock_cmd_set;

/* Scripts of lock.c (mode-checked acquire and unlock, fenced acquire,
 * FORCEUNLOCK of any lock kind, the hand-off's unlock-and-grant). */
extern const struct px_script_set px_lock_script_set;

/* What one attempt, unlock or give-up sends to Redis. */
struct px_acq {
    const char *name;  /* borrowed: the lock name (a request argument) */
    size_t nlen;       /* name length */
    const char *owner; /* borrowed: owner field written to Redis (suffix included) */
    size_t olen;       /* owner length */
    size_t base_olen;  /* length of the owner without the kind's suffix */
    uint64_t lease_ms; /* lease to set */
    int64_t wait_ms;   /* WAIT as given, -1 when absent */
    bool waiting;      /* the command may wait (a fair lock then queues) */
    uint64_t hint;     /* pool connection hint: px_route_hint(name) */
};

/* Writes the channel a waiter of a subscribes to into out (cap bytes);
 * returns its length. */
typedef size_t px_lock_channel_fn(const struct px_acq *a, char *out, size_t cap);

/* One lock kind. Static, defined by the module that owns the kind. */
struct px_lock_kind {
    const char *owner_suffix;        /* appended to "<uuid>:<id>": "" or ":write" */
    const struct px_hold_kind *hold; /* borrowed: renewal and release of holds */
    /* One acquire attempt, as pool_eval; reply {1, count[, token]} when
     * acquired, {0, ms until a re-poll is worthwhile} when not, or an error. */
    int (*acquire)(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg);
    /* One unlock, as pool_eval; reply nil (not held by a->owner), 0 (still
     * held by it), 1 (its hold is over), or an error. */
    int (*unlock)(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg);
    /* Writes the channel a waiter subscribes to; returns its length. */
    px_lock_channel_fn *channel;
    /* A kind whose waiting attempts queue the waiter in Redis (a fair
     * lock): how long an entry of a outlives its waiter (threadWaitTime).
     * A waiter that ends without the lock leaves the queue (its hold's
     * settle, hold.h). NULL: waiting leaves nothing in Redis. */
    uint64_t (*queue_wait)(const struct px_acq *a);
    /* A waiter of this kind excludes the other waiters of its channel: a
     * "1" message wakes only the first (px_waitset_member.exclusive). */
    bool exclusive;
    /* A new waiter may sleep behind this proxy's waiters of its channel
     * without a first attempt (FIFO without a doomed script). Not for fair
     * locks (they must join Redis's queue) nor read-write locks (readers
     * and writers share a channel). */
    bool queue_behind;
};

/* Runs an acquire command "name [LEASE ms] [WAIT ms] [OWNER token]" (no
 * WAIT when trylock) of kind: replies +OK, nil when WAIT ran out, or an
 * error. Completes req now or later. */
void px_lock_cmd_acquire(struct px_req *req, const struct px_lock_kind *kind, bool trylock);

/* Runs an unlock command "name [OWNER token]" of kind: replies :1 (the
 * caller's hold is over), :0 (still held), -NOTOWNER, -LOCKLOST, or an
 * error. Completes req now or later. */
void px_lock_cmd_release(struct px_req *req, const struct px_lock_kind *kind);

/* Sends script (an absolute script id) for a, with KEYS a->name and the
 * channel that channel() writes, ARGV a->lease_ms and a->owner: the shape
 * of RLock's unlock, used by the kinds' unlock functions. Borrows a; cb
 * runs as for pool_eval. Returns 0 or -errno (then cb never runs). */
int px_lock_eval_unlock(struct px_server *srv, const struct px_acq *a, unsigned script,
                        px_lock_channel_fn *channel, pool_reply_fn *cb, void *arg);

/* may_block of acquire commands: false only for WAIT 0. */
bool px_lock_may_block(const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
