/* Holds: the locks this proxy took for its clients, keyed by (name, owner).
 * A hold remembers the acquiring connection (renewal is bound to it), its
 * kind (plain, fair, read or write lock: how it renews and how it is
 * released), the reentrancy count and the lease, and drives the watchdog:
 * holds taken without LEASE are renewed every watchdog/3, due renewals
 * batched per renew script into multi-key scripts once per loop iteration.
 *
 * A hold outlives its lease only as a tombstone (lost or expired), so that
 * UNLOCK can tell the client "LOCKLOST" instead of "NOTOWNER"; tombstones
 * are dropped after PX_HOLD_TOMBSTONE_MS. Holds referenced by an in-flight
 * renewal batch are freed when the batch's reply arrives (refs). */
#ifndef LP_PROXY_LOCKS_HOLD_H
#define LP_PROXY_LOCKS_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "pool/pool.h"
#include "proxy/locks/locks.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;
struct px_client;

#define PX_HOLD_TOMBSTONE_MS 60000u /* how long UNLOCK can still report LOCKLOST */
#define PX_RENEW_BATCH       100u   /* keys per renew script (Redisson's default) */

/* How one kind of hold is kept alive and let go in Redis. Static, one per
 * kind, defined by the module that owns the kind. */
struct px_hold_kind {
    const char *name; /* for logs: "lock", "read lock", ... */
    /* Pool id of the batched renew script: KEYS n1..nN; ARGV lease,
     * o1..oN -> {1 renewed | 0 not held, ...}. */
    unsigned (*renew_script)(void);
    /* Releases the whole hold of owner on name (its connection closed), as
     * pool_eval: 0 and one callback (reply 1 = released), or -errno. */
    int (*release)(struct px_server *srv, const char *name, size_t nlen, const char *owner,
                   size_t olen, pool_reply_fn *cb, void *arg);
};

/* Reentrant (RLock) holds: HEXISTS -> PEXPIRE renewal, DEL + "0" release. */
extern const struct px_hold_kind px_hold_plain;

struct px_hold {
    struct hmap_node node;           /* in srv->holds while live or tombstoned */
    struct list client_node;         /* in cl->locks.holds of the acquiring connection */
    struct list due_node;            /* in srv->renew_due while a renewal is due */
    struct px_server *srv;           /* borrowed */
    struct px_client *cl;            /* borrowed: acquiring connection, NULL once gone */
    struct sched_timer timer;        /* next renewal, or end of the lease/tombstone */
    const struct px_hold_kind *kind; /* borrowed: static; set by the latest acquire */
    int64_t token;                   /* last fencing token issued to this holder, or -1 */
    uint64_t count;                  /* reentrancy count as last reported by Redis */
    uint64_t lease_ms;               /* lease set at every acquire/renewal */
    bool watchdog;                   /* renewed by this proxy */
    bool lost;                       /* lease lost or expired: tombstone */
    bool dead;                       /* out of the table; freed when refs == 0 */
    unsigned refs;                   /* renewal batches in flight */
    size_t nlen;                     /* name length */
    size_t olen;                     /* owner length */
    char *owner;                     /* borrowed: points into key */
    char key[];                      /* owned: name NUL owner NUL */
};

int px_hold_init(struct px_server *srv);
void px_hold_deinit(struct px_server *srv);

/* Looks up a live or tombstoned hold. */
struct px_hold *px_hold_find(struct px_server *srv, const char *name, size_t nlen,
                             const char *owner, size_t olen);

/* Records a successful acquire of a kind-lock by cl (create or re-enter).
 * lease_ms is the lease set in Redis; watchdog says whether to renew it.
 * Returns the hold, or NULL on -ENOMEM (the lock then simply expires at
 * lease end). */
struct px_hold *px_hold_acquired_kind(struct px_server *srv, struct px_client *cl,
                                      const struct px_hold_kind *kind, const char *name,
                                      size_t nlen, const char *owner, size_t olen, uint64_t count,
                                      uint64_t lease_ms, bool watchdog);

/* px_hold_acquired_kind() for a reentrant (RLock) hold. */
struct px_hold *px_hold_acquired(struct px_server *srv, struct px_client *cl, const char *name,
                                 size_t nlen, const char *owner, size_t olen, uint64_t count,
                                 uint64_t lease_ms, bool watchdog);

/* A reference that keeps h's memory valid across an upstream round trip
 * (h may be NULL). After the put, h must not be used; a hold dropped in
 * the meantime has h->dead set and is freed by the last put. */
struct px_hold *px_hold_get(struct px_hold *h);
void px_hold_put(struct px_hold *h);

/* UNLOCK left the lock held (count > 0): Redis reset the lease. */
void px_hold_unlocked_one(struct px_hold *h);

/* Forgets a hold (released, or reported lost to the client). */
void px_hold_drop(struct px_hold *h);

/* The acquiring connection closed: release its holds now or let them
 * expire, per --on-disconnect. */
void px_hold_client_gone(struct px_client *cl);

/* Fire-and-forget release of every hold of owner on name, the kind way
 * (used when an acquire succeeds for a connection that already closed). */
void px_hold_release_orphan(struct px_server *srv, const struct px_hold_kind *kind,
                            const char *name, size_t nlen, const char *owner, size_t olen);

#define PX_OWNER_DEFAULT_USER "default" /* the user whose tokens are not prefixed */

/* Writes the owner field into out (PX_OWNER_MAX bytes) and returns its
 * length: "<uuid>:<id>" for connection id (no token); with an OWNER token
 * (tlen bytes of [A-Za-z0-9_.-]), "<uuid>:<user>:<token>" for a logged-in
 * ACL user (user not NULL) other than "default", else "<uuid>:<token>".
 * So a token names one holder within one user: two users' "worker-1" are
 * two owners. The forms cannot collide: the token has no ':' and is not
 * all digits, and only the user form has two colons after the uuid. */
size_t px_owner_format(const struct px_server *srv, uint64_t id, const char *user,
                       const char *token, size_t tlen, char *out);

#ifdef __cplusplus
}
#endif

#endif
