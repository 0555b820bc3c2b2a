/* RedLock's engine half: the masters' pools, start and stop, INFO
 * (redlock_master.c), and what redlock.c (REDLOCK and REDUNLOCK, command
 * code), redlock_hold.c (the records of
 * granted locks: renewal on a majority, tombstones, release on
 * disconnect), redlock_master.c (the masters' pools, their channel
 * subscriptions, start and stop, INFO) and redlock_giveback.c (give-backs
 * retried until each master answered) share. The internals are private to those four files;
 * the design block is in redlock.c. */
#ifndef LP_ENGINE_REDLOCK_H
#define LP_ENGINE_REDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/hmap.h"
#include "common/list.h"
#include "engine/config.h"
#include "engine/engine.h"
#include "pool/pool.h"
#include "pool/pubsub-t.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

/* INFO redlock (only with --redlock-upstream): redlock_masters,
 * redlock_majority, redlock_masters_up, redlock_holds,
 * redlock_quorum_refusals, and redlock_master_<i>:<host:port>,<state>. */
void px_redlock_info(struct lk_engine *eng, struct buf *out);

/* Creates and starts one pool per --redlock-upstream master (none when the
 * flag is not given). Returns 0 or -errno (logged). */
int px_redlock_start(struct lk_engine *eng);

/* True while a master's first connection attempt has not settled (the
 * proxy accepts clients once none is connecting, as for --upstream). */
bool px_redlock_connecting(const struct lk_engine *eng);

/* True while a request to a master is in flight (the stop lets the
 * releases of closing connections reach the masters, as for --upstream). */
bool px_redlock_busy(const struct lk_engine *eng);

/* Closes the masters' connections; true once every pool has stopped. */
void px_redlock_stop(struct lk_engine *eng);
bool px_redlock_stopped(const struct lk_engine *eng);

/* Frees the pools and what is left of the state (after stopped). */
void px_redlock_destroy(struct lk_engine *eng);

#define RL_SET_PREFIX "lockproxy_redlock:" /* waitset key prefix (see the design block) */
#define RL_PREFIX_LEN (sizeof(RL_SET_PREFIX) - 1)

struct rl_chan;

/* One master's subscription of a lock channel. */
struct rl_sub {
    struct pool_sub sub;  /* on the master's pool */
    struct rl_chan *chan; /* borrowed: the channel */
    bool started;         /* pool_sub_start succeeded */
};

/* A lock channel subscribed on every master while ops wait on it. */
struct rl_chan {
    struct hmap_node node;              /* in rl->chans */
    struct px_redlock *rl;              /* borrowed */
    unsigned refs;                      /* ops using it */
    struct rl_sub subs[PX_REDLOCK_MAX]; /* one per master */
    size_t len;                         /* length of key */
    char key[];                         /* owned: RL_SET_PREFIX + lock channel */
};

enum rl_state {
    RL_HELD = 0, /* granted; renewed while watchdog */
    RL_LOST = 1, /* tombstone: lease lost or ended; REDUNLOCK answers LOCKLOST */
};

/* A (name, owner) this proxy granted. */
struct rl_hold {
    struct hmap_node node;    /* in rl->holds while in_table */
    struct px_claim claim;    /* in cl->locks.claims while HELD */
    struct px_redlock *rl;    /* borrowed */
    struct sched_timer timer; /* renewal, lease end or tombstone end */
    enum rl_state state;      /* see enum */
    bool in_table;            /* in rl->holds */
    bool claimed;             /* claim linked */
    bool watchdog;            /* renewed by this proxy */
    unsigned refs;            /* ops and renewals in flight */
    uint64_t count;           /* reentrancy count confirmed to the client */
    uint64_t lease_ms;        /* lease of every acquire and renewal */
    size_t nlen, olen;        /* name and owner lengths */
    char *owner;              /* borrowed: into key */
    char key[];               /* owned: name NUL owner NUL */
};

struct px_redlock {
    struct lk_engine *eng;              /* borrowed */
    unsigned n;                         /* masters */
    unsigned majority;                  /* n / 2 + 1 */
    struct pool *pools[PX_REDLOCK_MAX]; /* owned: one per master */
    struct hmap chans;                  /* struct rl_chan by key */
    struct hmap holds;                  /* struct rl_hold by (name, owner) */
    struct hmap givebacks;              /* struct rl_giveback by (name, owner) */
    struct list giveback_list;          /* the same records, for stop and INFO */
    bool stopping;                      /* px_redlock_stop: nothing is retried any more */
    uint64_t giveback_retries;          /* give-backs sent again after a lost reply */
    uint64_t quorum_refusals;           /* attempts that reached fewer than a majority */
};

/* ---- masters (redlock_master.c) ---- */

/* EVALSHA of script (a pool id of the proxy's table) on master i; as
 * pool_eval. */
int px__rl_eval(struct px_redlock *rl, unsigned i, uint64_t hint, unsigned script, int numkeys,
                int argc, const char *const *argv, const size_t *lens, pool_reply_fn *cb,
                void *arg);

/* Writes name's lock channel, redisson_lock__channel:{name}; returns its
 * length (0 when it does not fit). */
size_t px__rl_lock_channel(const char *name, size_t nlen, char *out, size_t cap);

/* ---- give-backs (redlock_giveback.c) ---- */

/* Settles owner on name to keep on the masters set in mask (a give-back,
 * a release on disconnect): sent now, and again with back-off to each
 * master whose reply is lost, until it answers or lease_ms after the last
 * moment the pair could have been renewed. */
void px__rl_settle(struct px_redlock *rl, const char *name, size_t nlen, const char *owner,
                   size_t olen, uint64_t keep, unsigned mask, uint64_t lease_ms);

/* Before a request about (name, owner) is sent to master i: a give-back
 * due there is sent first; false if it could not be (then the request
 * must not be sent to i). An in-flight one is not sent again if its reply
 * is lost (it would run after the request). */
bool px__rl_giveback_before(struct px_redlock *rl, const char *name, size_t nlen, const char *owner,
                            size_t olen, unsigned i);

/* True while a give-back is in flight, or due to a master that is up (the
 * stop drains them, bounded). */
bool px__rl_giveback_busy(const struct px_redlock *rl);

/* Stop: nothing is retried any more. */
void px__rl_giveback_stop(struct px_redlock *rl);

/* Frees every record (the masters' pools are gone). */
void px__rl_giveback_free_all(struct px_redlock *rl);

/* The channel record of name, subscribed on every master, with a
 * reference (NULL on -ENOMEM); put drops it (the last one unsubscribes). */
struct rl_chan *px__rl_chan_get(struct px_redlock *rl, const char *name, size_t nlen);
void px__rl_chan_put(struct px_redlock *rl, struct rl_chan *c);

/* ---- records (redlock_hold.c) ---- */

/* The record of (name, owner), HELD or a tombstone, or NULL. */
struct rl_hold *px__rl_hold_find(struct px_redlock *rl, const char *name, size_t nlen,
                                 const char *owner, size_t olen);

/* A new record in the table (state HELD, not yet claimed), or NULL. */
struct rl_hold *px__rl_hold_new(struct px_redlock *rl, const char *name, size_t nlen,
                                const char *owner, size_t olen);

/* Takes h out of the table (with its claim and timer); freed once no
 * reference is left. */
void px__rl_hold_remove(struct rl_hold *h);

/* Drops a reference (h may be NULL). */
void px__rl_hold_put(struct rl_hold *h);

/* Arms h's timer: the next renewal (watchdog) or the lease end. */
void px__rl_hold_arm(struct rl_hold *h);

#ifdef __cplusplus
}
#endif

#endif
