/* The wait engine: the one implementation of "try to acquire; if it cannot
 * be had yet, wait on the object's channel and try again" that every
 * waiting command of the proxy runs on: LOCK (FENCED), RLOCK, WLOCK,
 * FAIRLOCK, SEM.ACQUIRE, PSEM.ACQUIRE and LATCH.AWAIT (and their one-shot
 * TRY forms). The design block, states and invariants are in wait.c.
 *
 * A kind (struct px_wait_kind, a static table) says what an attempt is and
 * what its reply means; the engine owns everything else: the shared
 * per-channel subscription (waitset.h), FIFO wake-ups, the retry rules,
 * WAIT deadlines and re-polls, the validity check of a grant against the
 * lease it asked for, and the end of a wait when its connection closes.
 *
 * Usage by a kind: embed struct px_wait_op in the command's state, call
 * px_wait_init(), set lease_ms (and member.exclusive) when they apply, then
 * px_wait_start(). The engine calls the kind back and, at the end,
 * kind->destroy() frees the embedding structure.
 *
 * Shaped for what comes next: an attempt is whatever the kind sends, as
 * long as it reports one combined outcome (px_wait_on_reply), and an undo
 * is whatever the kind does. So a Redis Cluster attempt routes per slot
 * (px_route_hint is per name already; channels live on the owning shard,
 * which is the waitset's business); --sync-replicas N is an attempt of
 * EVALSHA + WAIT whose outcome is "granted" only once replicated (else the
 * kind undoes it); MULTILOCK is an all-or-none attempt over several names
 * with an undo of all of them; REDLOCK is N parallel requests to N masters
 * folded into one outcome (majority), and the validity check it needs, the
 * lease minus the time since the attempt was sent minus the drift margin,
 * is the engine's, for every kind. */
#ifndef LP_PROXY_LOCKS_WAIT_H
#define LP_PROXY_LOCKS_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "engine/shape.h"
#include "engine/waitset.h"
#include "pool/reply.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_caller;
struct lk_engine;
struct px_wait_op;

#define PX_WAIT_FOREVER    UINT64_MAX /* deadline of a wait without WAIT */
#define PX_WAIT_RECHECK_MS 2000u      /* kinds without a lease re-check this often */

/* Back-off after a late grant (wait.c): the n-th late grant of an op waits
 * PX_WAIT_BACKOFF_MS << (n - 1), at most PX_WAIT_BACKOFF_MAX_MS, before
 * the next attempt (never past WAIT). */
#define PX_WAIT_BACKOFF_MS     20u
#define PX_WAIT_BACKOFF_MAX_MS 1000u

/* Where an op is; see the design block in wait.c. */
enum px_wait_state {
    PX_WAIT_NEW = 0,      /* set up; nothing sent */
    PX_WAIT_TRYING = 1,   /* first attempt in flight; not a member of the channel's set */
    PX_WAIT_JOINING = 2,  /* member; subscription not confirmed yet: READY retries */
    PX_WAIT_ASLEEP = 3,   /* member, queued on the set's semaphore, timer armed */
    PX_WAIT_RETRYING = 4, /* member, queued, an attempt in flight */
    PX_WAIT_GRANTING = 5, /* member, queued, a local hand-off's grant in flight for it */
    PX_WAIT_WOKEN = 6,    /* member, not queued, attempt or grant in flight, woken meanwhile */
    PX_WAIT_DONE = 7,     /* replied (or reply dropped); the op is being freed */
    PX_WAIT_BACKOFF = 8,  /* a late grant was given back; timer armed: retry when it fires */
};

/* What an attempt's reply means (px_wait_kind.reply). */
enum px_wait_res {
    PX_WAIT_GRANTED = 0,   /* acquired: the engine checks validity, then kind->granted */
    PX_WAIT_CONTENDED = 1, /* not yet: wait (unless WAIT ran out) and try again */
    PX_WAIT_FINISHED = 2,  /* the kind wrote the reply (an error, a latch found open...) */
};

/* Why kind->undo runs: a grant (or maybe-grant) nobody may use. */
enum px_undo_why {
    PX_UNDO_LATE = 0,    /* granted, but too little of its lease was left when the reply came */
    PX_UNDO_GONE = 1,    /* granted after the client's connection closed */
    PX_UNDO_UNKNOWN = 2, /* the reply was lost: it may or may not have been granted */
    PX_UNDO_UNREPLICATED = 3, /* granted, but fewer replicas than --sync-replicas have it */
};

/* How an op ends: what the caller's reply says (px_wait_kind.finish). */
enum lk_end {
    LK_END_REPLIED = 0,      /* the kind wrote the reply (a grant, FINISHED; or dropped) */
    LK_END_TIMEOUT = 1,      /* nothing granted within WAIT, or in the one attempt: nil */
    LK_END_UPSTREAM = 2,     /* Redis could not be asked, or did not answer: info->err */
    LK_END_REDIS_ERROR = 3,  /* Redis answered an error reply: info->r */
    LK_END_LATE = 4,         /* the last grant came too late (op->late_age, op->lease_ms) */
    LK_END_UNREPLICATED = 5, /* granted, but only info->acked replicas had it: undone */
};

/* What came with the end (the fields its enum lk_end names). */
struct lk_end_info {
    const struct pool_reply *r; /* LK_END_REDIS_ERROR: the error reply (borrowed) */
    int err;                    /* LK_END_UPSTREAM: -errno */
    int acked;                  /* LK_END_UNREPLICATED: replicas WAIT counted, -1 none */
};

/* Ends op: writes the caller's reply for end (nothing for
 * LK_END_REPLIED), frees the op (kind->destroy) and ends the caller's
 * request. Runs once per op, last: the engine does not touch op after. */
typedef void lk_wait_finish_fn(struct px_wait_op *op, enum lk_end end,
                               const struct lk_end_info *info);

/* Counters per family of kinds (INFO). */
enum px_wait_stat {
    PX_WAIT_STAT_LOCK = 0,  /* every lock kind */
    PX_WAIT_STAT_SEM = 1,   /* SEM.ACQUIRE */
    PX_WAIT_STAT_PSEM = 2,  /* PSEM.ACQUIRE */
    PX_WAIT_STAT_LATCH = 3, /* LATCH.AWAIT */
    PX_WAIT_STATS = 4,
};

/* An attempt's outcome that no single Redis reply carries: the grant a
 * local hand-off made in the unlock's script (unlock.c), or what a
 * majority of RedLock's masters answered (redlock.c). */
struct px_wait_outcome {
    bool no_quorum;          /* RedLock: fewer than a majority answered; acq unset */
    struct px_shape_acq acq; /* else: the acquire answer it amounts to */
};

/* One kind of waiting command. Every callback gets the op; the embedding
 * structure is the kind's (container_of). */
struct px_wait_kind {
    const char *name;       /* for logs: "lock", "semaphore", ... */
    enum px_wake_mode wake; /* how the channel's messages wake members */
    enum px_wait_stat stat; /* which counters */
    /* Writes the channel to wait on into out (cap bytes); returns its
     * length, 0 when it does not fit. */
    size_t (*channel)(const struct px_wait_op *op, char *out, size_t cap);
    /* The channel may change between attempts (MULTILOCK: the name that
     * blocked): a contended op moves to the new channel's set. */
    bool moves;
    /* May a new waiter sleep behind this proxy's waiters of its channel
     * without a first attempt? NULL: never. */
    bool (*queue_behind)(const struct px_wait_op *op);
    /* Sends one attempt with px_wait_eval() (or any requests whose
     * combined outcome the kind passes to px_wait_on_reply() once).
     * Returns 0 or -errno (nothing was sent). */
    int (*send)(struct px_wait_op *op);
    /* The attempt in flight (or a hand-off's grant) completed, whatever
     * the outcome; called first. NULL: nothing to do. */
    void (*attempt_done)(struct px_wait_op *op);
    /* Interprets an attempt's reply (never an upstream failure, never a
     * Redis error reply). CONTENDED may set *repoll_ms, the time after
     * which a re-check is worth it (0: PX_WAIT_RECHECK_MS). NULL: the
     * kind's attempts are decided by outcomes only (RedLock). */
    enum px_wait_res (*reply)(struct px_wait_op *op, const struct pool_reply *r,
                              uint64_t *repoll_ms);
    /* The same for an outcome that is not a Redis reply (a local
     * hand-off's grant, a RedLock majority's fold: px_wait_on_outcome()).
     * NULL: the kind's attempts are never decided so. */
    enum px_wait_res (*outcome)(struct px_wait_op *op, const struct px_wait_outcome *o,
                                uint64_t *repoll_ms);
    /* A valid grant for a live client: record it and write the reply. */
    void (*granted)(struct px_wait_op *op);
    /* Gives back exactly what this attempt took, if anything (why). Must
     * not touch what the client held before. NULL: attempts take nothing. */
    void (*undo)(struct px_wait_op *op, enum px_undo_why why);
    /* The op ends without a grant: undo what waiting itself left in Redis
     * (a fair lock's queue entry). NULL: nothing. */
    void (*give_up)(struct px_wait_op *op);
    /* Frees the structure that embeds op. */
    void (*destroy)(struct px_wait_op *op);
    /* Ends the op (see lk_wait_finish_fn): command code, which writes
     * RESP. NULL: the engine's default, engine->front.wait_finish. */
    lk_wait_finish_fn *finish;
};

/* One waiting command in progress. Embedded by the command's own state. */
struct px_wait_op {
    const struct px_wait_kind *kind; /* borrowed: static */
    enum px_wait_state state;        /* see enum */
    struct lk_caller *caller;        /* borrowed: the connection waiting */
    void *front;                     /* borrowed: the front end's record of the request (the
                                        engine never looks inside; kind and finish do) */
    const char *name;                /* borrowed (from front): the name, for log lines */
    size_t nlen;
    struct lk_engine *eng;           /* borrowed */
    struct px_waitset *set;          /* borrowed: joined set, NULL before JOINING */
    struct px_waitset_member member; /* membership in set */
    struct list client_node;         /* in the connection's locks.waits */
    struct sched_timer timer;        /* re-poll / WAIT deadline while JOINING or ASLEEP */
    uint64_t deadline;               /* monotonic ms, PX_WAIT_FOREVER, or 0 (one attempt) */
    uint64_t sent_ms;                /* monotonic ms the attempt in flight was sent */
    uint64_t start_ms;               /* monotonic ms the op started (LOCK.LIST's age) */
    uint64_t lease_ms;               /* lease the attempts ask for; 0: none (no validity check) */
    struct px_wait_snap snap;        /* the channel's set when the first attempt went */
    unsigned late;                   /* late grants so far (the back-off's exponent) */
    uint64_t late_age;               /* age (ms) of the last late grant, for the reply */
};

/* Prepares op for caller's request of kind (front: the front end's
 * record of it, opaque to the engine), about name (for log lines;
 * borrowed for op's life): wait_ms < 0 waits forever, 0 makes one
 * attempt. Sets lease_ms 0 and exclusive false; the kind may change them
 * before px_wait_start(). */
void px_wait_init(struct px_wait_op *op, const struct px_wait_kind *kind, struct lk_caller *caller,
                  void *front, const char *name, size_t nlen, int64_t wait_ms);

/* Runs op: the first attempt, or a sleep behind this proxy's waiters.
 * Ends with exactly one finish (kind->finish or engine->front.wait_finish),
 * which writes the reply (or drops it if the connection closed), calls
 * kind->destroy() and ends the request. */
void px_wait_start(struct px_wait_op *op);

/* True when op may wait (it has a WAIT deadline other than 0). */
bool px_wait_may_wait(const struct px_wait_op *op);

/* EVALSHA for an attempt of op, answered to px_wait_on_reply (argv
 * borrowed for the call). hint routes it (px_route_hint). */
int px_wait_eval(struct px_wait_op *op, uint64_t hint, unsigned script, int numkeys, int argc,
                 const char *const *argv, const size_t *lens);

/* The reply of op's attempt in flight (pool_reply_fn; arg is the op). A
 * kind whose attempt is several requests calls it once, with their
 * combined outcome. Drops the client reference the attempt took. */
void px_wait_on_reply(void *arg, const struct pool_result *res);

/* px_wait_on_reply() for an attempt decided by the proxy from what Redis
 * answered (o, read by kind->outcome) rather than by one reply: res is
 * the request it came from, for its error and replication (RedLock: a
 * record of its own, no error). An error in res goes as in
 * px_wait_on_reply(), o unread. */
void px_wait_on_outcome(struct px_wait_op *op, const struct pool_result *res,
                        const struct px_wait_outcome *o);

/* The pool connection hint for requests about name: every request about
 * one name goes to one connection, so Redis runs them, and the proxy sees
 * their replies, in the order they were sent. */
uint64_t px_route_hint(const char *name, size_t nlen);

/* Least remaining lease (ms) that makes a grant usable: Redlock's clock
 * drift allowance, lease/100 + 2 ms. */
uint64_t px_wait_margin_ms(uint64_t lease_ms);

/* ---- the local hand-off (unlock.c) ----------------------------------- */

/* The longest-joined member of set that is ASLEEP and of kind, if eligible
 * says so, else NULL (ops of other kinds, or in flight, are skipped;
 * the first ASLEEP op of kind decides). */
struct px_wait_op *px_wait_grantee(struct px_waitset *set, const struct px_wait_kind *kind,
                                   bool (*eligible)(const struct px_wait_op *op));

/* op (ASLEEP) gets a grant someone else sent at sent_ms: GRANTING, as if
 * it had sent an attempt; its reply goes to px_wait_on_reply(op, ...). */
void px_wait_grant_begin(struct px_wait_op *op, uint64_t sent_ms);

/* ---- the connection and INFO ------------------------------------------ */

/* The connection closed: waits that are not in flight end now (replies
 * dropped); those in flight end when their reply comes. */
void px_wait_client_gone(struct lk_caller *cl);

/* Waits in progress and waits whose WAIT ran out, per family. */
uint64_t px_wait_waiting(const struct lk_engine *eng, enum px_wait_stat stat);
uint64_t px_wait_timeouts(const struct lk_engine *eng, enum px_wait_stat stat);

#ifdef __cplusplus
}
#endif

#endif
