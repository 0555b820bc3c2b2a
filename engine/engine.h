/* The lock engine: the one object that owns the state of every lock
 * (struct lk_engine), its start-up and shut-down, the record of a
 * connection (struct lk_caller, embedded in the front end's client: what
 * it holds or waits for), the hooks through which the engine calls the
 * front end (struct lk_front), and the one clean-up path when a
 * connection goes. engine/ includes and links no proxy/ code (lp_engine;
 * scripts/layering.sh, scripts/link_layers.sh).
 *
 * Also the limits every lock module shares (name, owner and channel
 * sizes) and a rate limit for log lines that could flood.
 *
 * State: everything the engine keeps lives in struct lk_engine (one per
 * server, srv->engine), none in file globals, so two engines could live in
 * one process; the only file-scope objects of engine/ are constant tables
 * and the _Thread_local free lists (common/spares.h). */
#ifndef LP_PROXY_LOCKS_LOCKS_H
#define LP_PROXY_LOCKS_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "engine/config.h"
#include "engine/jobs.h"
#include "engine/replay.h"
#include "engine/scripts.h"
#include "engine/sem_reap.h"
#include "engine/stats.def"
#include "engine/sub_lsn.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_caller;
struct lk_engine;

#define LK_UUID_LEN    36u   /* a process uuid's characters (util_uuid4) */
#define PX_NAME_MAX    4096u /* longest object name accepted */
#define PX_OWNER_MAX   256u  /* owner field capacity (with ":write") */
#define PX_CHANNEL_MAX (PX_NAME_MAX + PX_OWNER_MAX + 64) /* channel and aux key capacity */

/* Something a connection took that must go back when it closes (semaphore
 * permits: sem.c, psem.c). */
struct px_claim {
    struct list node; /* in cl->locks.claims while registered */
    /* The connection closed: give back, then free the claim. Called once,
     * after the claim was unlinked. */
    void (*gone)(struct px_claim *c, struct lk_caller *cl);
};

/* What one connection waits for and holds. */
struct px_cl_locks {
    struct list waits;  /* struct px_wait_op: its waiting commands (wait.c) */
    struct list holds;  /* struct px_hold: locks it acquired (hold.c) */
    struct list shares; /* struct px_hold_share: its parts of another connection's holds
                           of the same OWNER (hold.c) */
    struct list claims; /* struct px_claim: permits to give back */
};

/* The engine's view of a connection (its caller record), embedded in
 * the front end's client (struct lk_caller: caller), which it gets back
 * with container_of in its hooks (struct lk_front). The front end fills
 * eng and id at accept and sets closing when the connection starts to go;
 * the engine owns the lists. */
struct lk_caller {
    struct lk_engine *eng;    /* borrowed: the engine it talks to */
    uint64_t id;              /* the connection's id: owner fields, the SEM ledger */
    bool closing;             /* the connection is going away: replies are dropped */
    struct px_cl_locks locks; /* what it waits for and holds */
    struct list release_node; /* in eng->releasing while its holds are released (engine.c) */
};

/* True while the connection holds or waits for a lock, or holds permits
 * (such a connection is never idle: --timeout). */
static inline bool px_locks_client_busy(const struct px_cl_locks *l)
{
    return !list_empty(&l->waits) || !list_empty(&l->holds) || !list_empty(&l->shares) ||
           !list_empty(&l->claims);
}

/* A new connection's caller record: its id, empty lists. */
void px_locks_client_init(struct lk_caller *cl, struct lk_engine *eng, uint64_t id);

/* The connection is closing: its waits end (replies dropped; those in
 * flight when their reply comes), its holds are released or left to
 * expire (--on-disconnect), its permits go back. The one clean-up path.
 * Holds beyond PX_RELEASE_STEP are released in later loop passes: cl is
 * kept (a reference: front.caller_get) until they are. */
void px_locks_client_gone(struct lk_caller *cl);

#define PX_RELEASE_STEP     256u  /* holds a closed connection releases per loop pass */
#define PX_RELEASE_INFLIGHT 1024u /* no step while this many jobs wait for Redis */

/* True while closed connections' holds are still being released. */
bool px_locks_releasing(const struct lk_engine *eng);

/* The pool's topology callback (pool_topology_fn; arg is the engine):
 * the masters of some slots changed (a failover, a migration, a Sentinel
 * switch), so the holds of those slots are verified on their new master
 * at once (watchdog.c): one whose owner field is gone is marked lost. */
void px_locks_on_topology(void *arg, const struct pool_topology_event *ev);

/* Sets up and tears down the lock modules' server state (waitsets, holds
 * and the watchdog, retried jobs). */
int px_locks_init(struct lk_engine *eng);
void px_locks_deinit(struct lk_engine *eng);

/* At most one log line a second for one kind of event. */
struct px_ratelog {
    uint64_t last_ms; /* monotonic ms of the last line written, 0: none yet */
    uint64_t quiet;   /* events not logged since */
};

#define LK_WAIT_STATS      4u   /* wait.h's enum px_wait_stat values */
#define LK_SCRIPTS_MAX     128u /* the pool's script table: capacity */
#define LK_SCRIPT_SETS_MAX 16u  /* script sets registered (px_scripts_register) */

/* Engine counters (INFO, /metrics). */
/* The engine's counters: one field per S() row of engine/stats.def's
 * tables (which also give each its INFO field and /metrics family), and
 * the wait figures by kind. */
#define LK_STATS_FIELD(field, info, prom, kind, help) uint64_t field;
#define LK_STATS_NOFIELD(info, prom, kind, help, value)
struct lk_stats {
    PX_STATS_LOCKS(LK_STATS_FIELD, LK_STATS_NOFIELD)
    PX_STATS_TOPOLOGY(LK_STATS_FIELD, LK_STATS_NOFIELD)
    uint64_t waiting[LK_WAIT_STATS];       /* wait.c: members of a waitset now, by px_wait_stat */
    uint64_t wait_timeouts[LK_WAIT_STATS]; /* wait.c: waits whose WAIT ran out, by stat */
};

/* Semaphore figures for INFO "sync" (sem.c, psem.c, sem_track.c). */
struct px__sem_stats {
    uint64_t sem_acquired;            /* permits taken by SEM.(TRY)ACQUIRE */
    uint64_t sem_returned;            /* permits returned for closed connections */
    int64_t sem_tracked;              /* permits tracked for connections now */
    uint64_t sem_unknown;             /* SEM.ACQUIREs whose outcome is unknown (not rolled back) */
    uint64_t sem_released_for_others; /* tracked permits given back by another connection */
    uint64_t sem_lost;                /* tracked permits the master no longer recorded */
    uint64_t sem_restored;            /* recorded permits of closed connections, given back */
    uint64_t psem_acquired;           /* permits taken by PSEM.(TRY)ACQUIRE */
    uint64_t psem_returned;           /* permits returned for closed connections */
    int64_t psem_tracked;             /* permit ids tracked for connections now */
};

struct px_redlock;
struct px_fence;
struct px_script_set;

/* What the engine asks of the front end (the server sets these before
 * the first command), so that it writes no RESP and keeps no metrics. */
struct lk_front {
    /* How a wait op whose kind has no finish of its own ends (writes the
     * reply, ends the request): wait.h. Required. */
    lk_wait_finish_fn *wait_finish;
    /* A hold that became HELD at held_ms (monotonic) stops being held
     * (hold time). NULL: nothing. */
    void (*hold_end)(struct lk_engine *eng, uint64_t held_ms);
    /* cl's hold of name (the kind's command, kind) was found lost: tell
     * it (a push). NULL: nothing. */
    void (*lease_lost)(struct lk_caller *cl, const char *kind, const char *name, size_t nlen);
    /* Takes and drops a reference to cl's connection (its memory stays
     * while a reply or a release step may still come for it). Required. */
    void (*caller_get)(struct lk_caller *cl);
    void (*caller_put)(struct lk_caller *cl);
    /* The open connection whose id is id (not closing), or NULL. Required. */
    struct lk_caller *(*caller_find)(struct lk_engine *eng, uint64_t id);
    /* Listens on a channel through the front end's shared subscriptions
     * (engine/sub_lsn.h; as px_subs_listen) and stops. Required. */
    int (*sub_listen)(struct lk_engine *eng, struct px_sub_lsn *l, const char *name, size_t len,
                      enum pool_sub_kind kind, px_sub_lsn_fn *cb);
    void (*sub_unlisten)(struct px_sub_lsn *l);
};

/* The engine's state: one per server (eng), created before the
 * pool (the script table goes to pool_create), set up by px_locks_init()
 * and torn down by px_locks_deinit() and px_engine_free(). */
struct lk_engine {
    /* Given by the front end before px_locks_init() (engine/config.h). */
    struct sched_loop *loop; /* borrowed: the loop everything runs on */
    struct pool *pool;       /* borrowed: the upstream Redis */
    const char *uuid;        /* borrowed: this process's owner prefix (LK_UUID_LEN) */
    struct lk_config cfg;    /* the options the engine reads; reload refreshes it */
    void *owner;             /* borrowed: the front end's object (the server), for its hooks */
    /* Waits (waitset.c, wait.c). */
    struct hmap locks;     /* struct px_waitset by channel: waiters, subscriptions */
    unsigned nwaiters;     /* LOCK calls currently waiting */
    uint64_t set_next_gen; /* last px_waitset.gen handed out */
    /* Holds and the watchdog (hold.c, watchdog.c). */
    struct hmap holds;               /* struct px_hold by (name, owner) */
    struct hmap hold_owners;         /* hold.c's owner records, shared by the holds */
    unsigned nholds;                 /* holds tracked */
    struct list renew_due;           /* struct px_hold whose renewal is due */
    struct sched_hook renew_hook;    /* sends renew_due in batches */
    struct list verify_retry;        /* struct px_hold: checks after a topology change to retry */
    struct sched_timer verify_timer; /* moves verify_retry to renew_due */
    /* Upstream work retried until Redis answers, and its follow-ups. */
    struct px_jobs jobs;         /* jobs.c */
    struct px_replays replays;   /* releases re-applied after a failover (replay.c) */
    struct px_sem_reap sem_reap; /* dead proxies' permits given back (sem_reap.c) */
    /* Semaphores: the takers of each name and the names lingering
     * without one (sem_track.c), the permit ids of PSEM (psem.c). */
    struct hmap sem_names;     /* struct sem_name by name */
    struct list sem_lingering; /* struct sem_name, oldest first */
    unsigned sem_nlingering;   /* names in sem_lingering */
    struct hmap psem_held;     /* struct psem_held by (name, permit id) */
    struct px__sem_stats sem_stats;
    struct list sem_carries;  /* SEM.RELEASEs carried out in hand (sem.c), oldest first */
    uint64_t sem_release_seq; /* the last SEM.RELEASE number handed out (sem.c) */
    /* REDLOCK's masters (redlock_master.c) and the fencing-token floors
     * (fence.c): owned, or NULL. */
    struct px_redlock *redlock;
    struct px_fence *fence;
    /* The scripts (scripts.c): the sets registered, in order, the pool's
     * table and, by pool id, what each does. */
    const struct px_script_set *script_sets[LK_SCRIPT_SETS_MAX];
    unsigned nscript_sets;
    struct pool_script script_table[LK_SCRIPTS_MAX];
    bool script_publishes[LK_SCRIPTS_MAX];
    bool script_writes[LK_SCRIPTS_MAX];
    const char *script_names[LK_SCRIPTS_MAX];
    unsigned script_bases[LK_SCRIPT_SLOTS]; /* each set's base pool id (enum lk_script_slot) */
    /* Log lines that could flood: at most one a second each. */
    struct px_ratelog settle_log;      /* hold.c: roll-backs */
    struct px_ratelog drop_log;        /* jobs.c: dropped jobs */
    struct px_ratelog replay_log;      /* replay.c: ghosts removed */
    struct px_ratelog repl_log;        /* repl.c: writes not replicated */
    struct px_ratelog late_log;        /* wait.c: grants too late */
    struct px_ratelog unrepl_log;      /* wait.c: grants refused, not replicated */
    struct px_ratelog sem_lost_log;    /* sem.c: tracked permits lost */
    struct px_ratelog sem_unknown_log; /* sem.c: acquires of unknown outcome */
    struct lk_stats stats;
    struct lk_front front; /* set by the front end before the first command */
    /* Closed connections whose holds are still being released, a step a
     * loop pass (engine.c): struct lk_caller by release_node, each with a
     * reference. */
    struct list releasing;
    struct sched_timer rel_timer;
};

/* Allocates an engine for the front end's owner (its tables empty; the
 * front end sets loop, pool, uuid, cfg and front, then px_locks_init()
 * sets it up once the pool exists). Returns NULL when out of memory. */
struct lk_engine *px_engine_alloc(void *owner);

/* Frees an engine px_locks_deinit() tore down (or never set up), after
 * the pools its script table was given to. */
void px_engine_free(struct lk_engine *eng);

/* The semaphore takers' tables (sem_track.c), set up and torn down by
 * px_locks_init() and px_locks_deinit(). */
int px_sem_track_init(struct lk_engine *eng);
void px_sem_track_deinit(struct lk_engine *eng);

/* True when a line may be written at now_ms; *quiet gets the number of
 * events not logged since the last line (and the count restarts). */
bool px_ratelog_allow(struct px_ratelog *rl, uint64_t now_ms, uint64_t *quiet);

#ifdef __cplusplus
}
#endif

#endif
