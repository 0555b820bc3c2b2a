/* Holds: the proxy's view of each (lock name, owner) it acts for, the
 * ledger every request about that pair goes through. A hold remembers the
 * reentrancy count confirmed to clients, the acquiring connection (renewal
 * and release on disconnect are bound to it), its kind (plain, fair, read
 * or write lock: how it renews and settles), the lease and when it ends,
 * and the requests about it in flight. It drives the watchdog (watchdog.c:
 * holds taken without LEASE are renewed every lease/3, batched).
 *
 * The ledger follows the order of requests, not of replies: a hold exists
 * from the first request about the pair (PENDING), so an UNLOCK pipelined
 * behind a LOCK finds it; every request about one name goes to one pool
 * connection (px_route_hint), so Redis runs them, and the proxy sees their
 * replies, in the order they were sent.
 *
 * Settling: when Redis may hold more of the pair than clients were told
 * (a grant refused as late, a reply lost), the hold is settled: once no
 * request about it is in flight, one script sets the owner's count in
 * Redis back to the confirmed count (releasing it at 0) and tells the
 * proxy what Redis had; the proxy then follows Redis. A closed
 * connection's holds are settled to 0 (released) the same way. Settles
 * are retried jobs (jobs.h): sent until Redis answers or the lease they
 * would give back has ended anyway. The design block is in hold.c. */
#ifndef LP_PROXY_LOCKS_HOLD_H
#define LP_PROXY_LOCKS_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "engine/engine.h"
#include "engine/jobs.h"
#include "pool/pool.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;
struct lk_caller;

#define PX_HOLD_TOMBSTONE_MS 60000u /* how long UNLOCK can still report LOCKLOST */
#define PX_RENEW_BATCH       100u   /* keys per renew script (Redisson's default) */

/* What a settle script is asked to do. */
struct px_settle {
    uint64_t keep;    /* leave the owner at most this count (0: release it whole) */
    uint64_t wait_ms; /* fair lock: the waiter's threadWaitTime (deadlines move up by it) */
    /* Plain lock: when the owner keeps a count, the key's TTL goes back to
     * this (ms of the lease clients were told of that are left; a whole
     * lease for a watchdog hold, which a renewal answered meanwhile may
     * vouch for), since an acquire being rolled back may have run its
     * PEXPIRE with a shorter LEASE; 0 leaves the TTL alone. */
    uint64_t ttl_ms;
    bool dequeue; /* fair lock: also leave the queue (Redisson's acquireFailed) */
};

/* How one kind of hold is kept alive and settled in Redis. Static, one per
 * kind, defined by the module that owns the kind. */
struct px_hold_kind {
    const char *name; /* for logs: "lock", "read lock", ... */
    const char *cmd;  /* the command that takes it, in lease-lost pushes: "LOCK", ... */
    /* Pool id of the batched renew script: KEYS n1..nN; ARGV lease,
     * o1..oN -> {1 renewed | 0 not held, ...}. */
    unsigned (*renew_script)(const struct lk_engine *eng);
    /* Settles owner on name, as pool_eval (hint: px_route_hint(name)): if
     * the owner's count is above s->keep, it becomes s->keep (at 0 the
     * owner's hold goes and waiters are woken, as an unlock would). Reply:
     * the count before, or an error. */
    int (*settle)(struct lk_engine *eng, const char *name, size_t nlen, const char *owner,
                  size_t olen, const struct px_settle *s, pool_reply_fn *cb, void *arg);
    /* An unlock that leaves the hold resets its lease (RLock's PEXPIRE);
     * false for read holds, whose timeout keys keep theirs. */
    bool unlock_resets_lease;
};

/* Reentrant (RLock) holds: HEXISTS -> PEXPIRE renewal; settle by HSET, or
 * DEL + "0" at 0. */
extern const struct px_hold_kind px_hold_plain;

/* Where a hold is; see the design block in hold.c. */
enum px_hold_state {
    PX_HOLD_PENDING = 0,   /* no count confirmed to a client: requests in flight, or a settle */
    PX_HOLD_HELD = 1,      /* count > 0 confirmed to a client; renewed while watchdog */
    PX_HOLD_LOST = 2,      /* tombstone: lease lost or expired; UNLOCK answers LOCKLOST */
    PX_HOLD_RELEASING = 3, /* its connection closed: settling to 0 (a retried job) */
    PX_HOLD_DEAD = 4,      /* released or given up; freed when nothing refers to it */
};

/* The part of a HELD hold that a connection other than h->cl acquired:
 * one owner (an OWNER token) holding through several connections. Its
 * close gives back its part only (hold.c). */
struct px_hold_share {
    struct list hold_node;   /* in the shares of h's side part (hold.c) */
    struct list client_node; /* in cl->locks.shares */
    struct px_hold *h;       /* borrowed: the hold it is part of */
    struct lk_caller *cl;    /* borrowed: the connection that acquired it */
    uint64_t count;          /* its part of h->count, > 0 */
};

/* The parts of a hold that only settles and owners shared by several
 * connections use (the settle job, its arguments, the other connections'
 * parts): allocated when first needed, freed once back to their defaults,
 * so a plain held lock carries one pointer for them (hold.c). */
struct px_hold_side;

/* Laid out for the memory of a held lock (BENCHMARKS.md): with a name of
 * up to 27 bytes a hold is one 224-byte block (hold.c, HOLD_BLOCK); the
 * owner string is shared by the holds naming it. */
struct px_hold {
    struct hmap_node node;           /* in eng->holds while in_table */
    struct list client_node;         /* in cl->locks.holds while HELD or LOST */
    struct list due_node;            /* in eng->renew_due while a renewal is due */
    struct px_hold_side *side;       /* owned: the settle job and shared parts, or NULL */
    struct lk_engine *eng;           /* borrowed */
    struct lk_caller *cl;            /* borrowed: acquiring connection, NULL when none */
    struct sched_timer timer;        /* next renewal, lease end, or tombstone end */
    const struct px_hold_kind *kind; /* borrowed: static; set by the first request */
    int64_t token;                   /* last fencing token issued to this holder, or -1 */
    uint64_t count;                  /* reentrancy count confirmed to clients (0 unless HELD) */
    uint64_t cl_count;               /* the part of count cl acquired (> 0 while HELD); the
                                        other connections' parts are in side's shares:
                                        count = cl_count + their counts while HELD */
    uint64_t lease_ms;               /* lease set at every acquire/renewal */
    uint64_t held_ms;                /* monotonic ms it became HELD (LOCK.LIST's age) */
    uint64_t expires_ms;             /* monotonic ms the lease ends by, from the send of the
                                        request that set it (acquire or renewal) */
    uint64_t vouch_cap_ms;           /* 0, or a rolled-back re-entry's possible end in Redis
                                        (its PEXPIRE may have shortened the key): the lease
                                        is vouched for up to min(expires_ms, this) until a
                                        settle puts the TTL back and finds the hold */
    const char *owner;               /* borrowed: the owner's shared record (hold.c), counted */
    unsigned inflight;               /* requests about the pair in flight (acquire, unlock) */
    unsigned refs;                   /* references (ops, renewal batches) */
    unsigned epoch;                  /* bumped by every grant and unlock: a renewal or check
                                        answered "not held" after a change is not proof */
    uint32_t nlen;                   /* name length */
    uint16_t olen;                   /* owner length (at most PX_OWNER_MAX) */
    uint8_t state;                   /* enum px_hold_state */
    bool in_table : 1;               /* in eng->holds (a newer hold may replace a RELEASING one) */
    bool watchdog : 1;               /* renewed by this proxy */
    bool verify : 1;                 /* a check after a topology change is due (watchdog.c) */
    bool unchecked : 1;              /* that check is due or in flight: nothing shows the hold is on
                                        the new master yet (a re-entry sent meanwhile may re-create it) */
    bool lost_early : 1;             /* LOST before its lease's own end (renewed, or a fixed
                                        lease found gone): its holder must be told */
    bool by_unlock : 1;              /* RELEASING for an UNLOCK the proxy carries out (not a
                                        closed connection's release) */
    char key[];                      /* owned: name NUL */
};

int px_hold_init(struct lk_engine *eng);
void px_hold_deinit(struct lk_engine *eng);

/* The hold of (name, owner) that is PENDING, HELD or LOST, or NULL (no
 * reference taken). */
struct px_hold *px_hold_find(struct lk_engine *eng, const char *name, size_t nlen,
                             const char *owner, size_t olen);

/* The hold a request about (name, owner) goes through, with a reference:
 * the live one, else (create) a new PENDING one of kind. A RELEASING hold
 * of a closed connection is first sent on its way (its release precedes
 * the new request), and stays the pair's hold until that release is
 * answered or given up: it is returned (create; NULL without), and a new
 * acquire through it waits (px_hold_ready()) or is tried again. Without
 * create, NULL when there is none; with it, NULL only on -ENOMEM. */
struct px_hold *px_hold_use(struct lk_engine *eng, const struct px_hold_kind *kind,
                            const char *name, size_t nlen, const char *owner, size_t olen,
                            bool create);

/* px_hold_use() for a caller that has the name's px_route_hint() already
 * (the table hashes the name the same way, so it is not hashed twice). */
struct px_hold *px_hold_use_hinted(struct lk_engine *eng, const struct px_hold_kind *kind,
                                   const char *name, size_t nlen, uint64_t hint, const char *owner,
                                   size_t olen, bool create);

/* A reference that keeps h's memory valid (h may be NULL). */
struct px_hold *px_hold_get(struct px_hold *h);
void px_hold_put(struct px_hold *h);

/* A request that may change h's count is about to be sent: a settle that
 * is due goes first (if nothing is in flight), then h counts the request
 * in flight. Pair with px_hold_end() when its reply comes (or when the
 * send failed). */
void px_hold_begin(struct px_hold *h);

/* Before a request about the pair is sent: sends a due settle first. One
 * that cannot be sent now (Redis unreachable, a reconnect or a failover
 * under way) must still reach Redis before anything sent after it, or the
 * request would overtake it (a grant would merge the count the settle is
 * to give back, and the holder's UNLOCK would never free the lock):
 * -ENOTCONN then, and the request is not sent (nothing executed, as for a
 * request refused while Redis is down). 0: go ahead (px_hold_begin). */
int px_hold_ready(struct px_hold *h);
void px_hold_end(struct px_hold *h);

/* True when no settle of h is due or in flight; false when one is (a
 * due one is sent now if it may be: px_job_kick). */
bool px_hold_settle_idle(struct px_hold *h);

/* An acquire of kind for cl was granted with count, lease_ms (renewed if
 * watchdog) from an attempt sent at sent_ms: HELD. */
void px_hold_granted(struct px_hold *h, const struct px_hold_kind *kind, struct lk_caller *cl,
                     uint64_t count, uint64_t lease_ms, bool watchdog, uint64_t sent_ms);

/* Redis may hold more of the pair than count: an acquisition nobody may
 * use (late), or a request whose reply was lost (unknown; unlock: it was
 * an unlock). Settles once nothing is in flight; gives up at until (when
 * an acquisition with no confirmed count would have run out anyway, or
 * PX_JOB_NO_END), never while the hold is HELD (renewal would keep an
 * extra count alive). */
void px_hold_settle(struct px_hold *h, uint64_t until);
void px_hold_unlock_unknown(struct px_hold *h);

/* A fair waiter ended without the lock: the settle also leaves the queue. */
void px_hold_dequeue(struct px_hold *h, uint64_t wait_ms);

/* Release the pair (RELEASING): the connection closed while an acquire of
 * h was granted (policy release). until: when the lease ends anyway. */
void px_hold_release(struct px_hold *h, uint64_t until);

/* UNLOCK answered: still held (the count went down by one, taken from
 * the part of cl, the unlocking connection, if it has one, else from the
 * oldest part; the unlock, sent at sent_ms, reset the lease), released (count 0), or not held (nil:
 * the client is told LOCKLOST if h was HELD or LOST; returns true then;
 * other connections with a part of h, cl being the unlocking one, are
 * told as for a lease found lost: a push, and LOCKLOST at their UNLOCK).
 * "Still held" for the last count clients were told of means Redis counts
 * more than they were told (a lost unlock, a late acquisition): the proxy
 * releases the rest itself (RELEASING) and px_hold_unlocked_one() returns
 * true, the release the client asked for (answer :1). */
bool px_hold_unlocked_one(struct px_hold *h, const struct lk_caller *cl, uint64_t sent_ms);
void px_hold_released(struct px_hold *h);
bool px_hold_not_held(struct px_hold *h, const struct lk_caller *cl);

/* An UNLOCK of h, a tombstone (LOST), answered or not by Redis: whatever
 * Redis answers (nil, :1, :0), the client is told LOCKLOST (true; false:
 * NOTOWNER, as px_hold_not_held), and what Redis may still count of the
 * pair (a grant made after the loss, with a lease of up to lease_ms) is
 * given back by a settle, behind anything in flight about the pair. */
bool px_hold_unlock_lost(struct px_hold *h, const struct lk_caller *cl, uint64_t lease_ms);

/* An UNLOCK of h, asked for at asked_ms, got no answer from Redis (its
 * reply was lost, or it could not be sent). What the client is told: */
enum px_unlock_failed {
    PX_UNLOCK_NOT_HELD = 0, /* h is not HELD: "outcome unknown", settled later */
    PX_UNLOCK_KEPT,         /* in hand: the count went down by one, still held (:0) */
    PX_UNLOCK_RELEASED,     /* in hand: the last hold; the proxy releases it (:1) */
    PX_UNLOCK_UNVOUCHED,    /* the lease could not be vouched for at asked_ms: LOCKLOST */
};

/* The proxy carries the release out itself: renewal stops at once (at the
 * last hold), and a settle to the count left is sent, and retried with
 * back-off, until Redis confirms it or the lease has ended anyway. Asked
 * while the lease is vouched for (before expires_ms), the work under the
 * lock was protected: the unlock counts as done. Asked later, the hold
 * may have lapsed before: it is marked lost (counted, pushed) and given
 * back all the same. */
enum px_unlock_failed px_hold_unlock_failed(struct px_hold *h, const struct lk_caller *cl,
                                            uint64_t asked_ms);

/* A grant of count for h's pair, or an acquire about to be sent, finds
 * the hold its client was told of gone: HELD, yet Redis made a fresh
 * acquisition (count no more than the confirmed count), or a tombstone
 * lost before its lease's end. The re-entry must not turn that lost hold
 * into a fresh one silently. count 0: before sending. */
bool px_hold_lost_before(const struct px_hold *h, uint64_t count);

/* A fixed lease that has run out by now ends here as its timer would
 * end it (px_watchdog_on_timer: LOST, not early; pushed as there). The
 * wheel may fire that timer a tick after a waiter's re-poll timed at the
 * same end; by then the name may have been taken and given back, and the
 * holder's next LOCK, a fresh acquisition, would otherwise be judged a
 * re-entry that found its hold gone (LOCKLOST). Called before an acquire
 * of the pair is judged or sent. */
void px_hold_lapse_due(struct px_hold *h);

/* A re-entry of h whose grant is rolled back (reply lost, or too late)
 * may have run its PEXPIRE: Redis may end the key at end_ms, before the
 * lease clients were told of. The lease is vouched for up to end_ms only
 * (an UNLOCK Redis does not answer after it is LOCKLOST) until the settle
 * puts the TTL back and finds the hold (vouch_cap_ms). */
void px_hold_lower_vouch(struct px_hold *h, uint64_t end_ms);

/* When h's lease stops being vouched for (expires_ms, or sooner after a
 * rolled-back re-entry). */
uint64_t px_hold_vouched_until(const struct px_hold *h);

/* Tells h's loss (counted and pushed if it was HELD): the client is
 * answered LOCKLOST by the caller; the next acquire is a fresh hold, and
 * an UNLOCK before it finds the tombstone (LOCKLOST, whatever Redis
 * answers: a late grant of a request of unknown outcome is no hold the
 * client was told of). A grant Redis made meanwhile is given back by a
 * settle (until: when it would end anyway). */
void px_hold_report_lost(struct px_hold *h, bool give_back, uint64_t until);

/* The acquiring connection closed: release its holds (RELEASING) or let
 * them expire, per --on-disconnect. Of a hold it shares with other
 * connections of the same owner, only its part goes (release: settled
 * down by it; expire: left to the others); the others keep theirs, and
 * the renewal. At most *budget holds and shares are handled (*budget
 * goes down by as many); returns true once cl has none left, false when
 * the budget ran out first (call again: locks.c does, a step a pass). */
bool px_hold_client_gone(struct lk_caller *cl, unsigned *budget);

/* True when h is HELD (a count confirmed to a client). */
bool px_hold_is_held(const struct px_hold *h);

#define PX_OWNER_DEFAULT_USER "default" /* the user whose tokens are not prefixed */
#define PX_OWNER_USER_SEP     "@"       /* between a user's name and its token */
#define PX_OWNER_TOKEN_MAX    64u       /* longest OWNER token */

/* Writes the owner field into out (PX_OWNER_MAX bytes) and returns its
 * length: "<uuid>:<id>" for connection id (no token, Redisson's
 * "<uuid>:<threadId>"); with an OWNER token (1-PX_OWNER_TOKEN_MAX bytes of
 * [A-Za-z0-9_.-], not all digits), "<uuid>:<user>@<token>" for a logged-in
 * ACL user (user not NULL) other than "default", else "<uuid>:<token>".
 * So a token names one holder within one user: two users' "worker-1" are
 * two owners.
 *
 * The fields, and the fields with the suffixes the layouts append
 * (":write"; ":rwlock_timeout:<n>" and the fair lock's channel and queue
 * entries append to a whole field), never collide, whatever the user is
 * called (any printable name, ':' and '@' included):
 * - the connection and default forms have no '@', the user form has one
 *   in its last ':'-separated part (the token has neither ':' nor '@', so
 *   the last '@' splits user from token): no user field is another form;
 * - the connection form's tail is all digits, a default token is not;
 * - no field + ":write" is another field, even for the token "write" or
 *   a user "395": a user field's last part has an '@', so it does not end
 *   in ":write"; a connection or default field that does ("<uuid>:write")
 *   would be the bare uuid + ":write", and the uuid alone is no field. */
size_t px_owner_format(const struct lk_engine *eng, uint64_t id, const char *user,
                       const char *token, size_t tlen, char *out);

/* ---- watchdog (watchdog.c) ------------------------------------------------ */

/* Arms h's timer: the next renewal (watchdog) or the lease end. */
void px_hold_arm(struct px_hold *h);

/* h's timer (set up by hold.c): renewal due, lease ended, tombstone over. */
void px_watchdog_on_timer(struct sched_timer *t);

/* h's lease was found lost (renewal or a check after a failover answered
 * "not held", a settle found less than confirmed), or a fixed lease ran
 * out: a tombstone, counted (UNLOCK answers LOCKLOST). The one place a
 * HELD hold becomes LOST. */
void px_hold_mark_lost(struct px_hold *h);

/* The holds of the slots set in ev->slots are checked on their (new)
 * master at once: watchdog holds by an immediate renewal, the others by a
 * check that changes nothing; "not held" marks them lost. */
void px_watchdog_topology(struct lk_engine *eng, const struct pool_topology_event *ev);

int px_watchdog_init(struct lk_engine *eng);
void px_watchdog_deinit(struct lk_engine *eng);

#ifdef __cplusplus
}
#endif

#endif
