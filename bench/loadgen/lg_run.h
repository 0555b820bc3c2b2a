/* One target run: the shared state of the bench while it drives one target
 * (the clients, their pub/sub registries, the per-key holder table, the
 * counters, the phases), and the interface between the three files that
 * implement it:
 *   lg_run.c     phases, connection set-up and tear-down, timers, holds,
 *                exclusion check, statistics;
 *   lg_client.c  the per-client request state machines (proxy, direct,
 *                pipelined);
 *   lg_sub.c     the direct targets' pub/sub registries (Redisson's
 *                PublishSubscribe: reference-counted entries, latch permits);
 *   lg_rw.c      the rwlock workload's requests and scripts;
 *   lg_sem.c     the semaphore workload's requests, scripts, and the
 *                semaphores' set-up and removal.
 * Everything runs on one event loop thread. */
#ifndef LP_BENCH_LOADGEN_LG_RUN_H
#define LP_BENCH_LOADGEN_LG_RUN_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/read.h>

#include "bench/loadgen/lg_opts.h"
#include "bench/loadgen/lg_result.h"
#include "common/buf.h"
#include "common/list.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lg_run;
struct lg_sub;
struct sched_tls_ctx;

enum lg_phase {
    LG_PH_CONNECT = 0, /* opening connections */
    LG_PH_WARMUP = 1,  /* cycling, not measured */
    LG_PH_MEASURE = 2, /* cycling, measured */
    LG_PH_DRAIN = 3,   /* no new cycles; waiting for the current ones */
    LG_PH_CLOSE = 4,   /* closing connections */
};

enum lg_client_state {
    LG_CS_IDLE = 0,    /* not cycling */
    LG_CS_ACQ = 1,     /* acquire sent */
    LG_CS_SUBWAIT = 2, /* direct: waiting for the subscription */
    LG_CS_RETRY = 3,   /* direct: acquire sent while subscribed */
    LG_CS_LATCH = 4,   /* direct: waiting for a message or the PTTL */
    LG_CS_HOLD = 5,    /* holding, in the hold queue */
    LG_CS_REL = 6,     /* release sent */
    LG_CS_BATCH = 7,   /* pipelined batch in flight */
    LG_CS_BACKOFF = 8, /* after an error, waiting to start over */
    LG_CS_DEAD = 9,    /* connection lost */
};

/* What a grant gives a client, for the exclusion check. */
enum lg_hold_kind {
    LG_HOLD_EXCL = 0,   /* a lock: one holder per key */
    LG_HOLD_READ = 1,   /* rwlock read lock: no writer */
    LG_HOLD_WRITE = 2,  /* rwlock write lock: no writer, no reader */
    LG_HOLD_PERMIT = 3, /* one semaphore permit: at most --permits holders */
};

/* A pre-formatted request. */
struct lg_req {
    char *cmd;  /* owned: RESP bytes */
    size_t len; /* bytes in cmd */
};

/* A resolved address. */
struct lg_addr {
    struct sockaddr_storage ss; /* the address */
    socklen_t len;              /* its length */
};

/* One client: a command connection with one request in flight (or one
 * pipelined batch). */
struct lg_client {
    struct sched_conn conn;   /* command connection (to the proxy or Redis) */
    struct lg_run *run;       /* borrowed: the run */
    redisReader *rd;          /* owned: reply parser */
    unsigned id;              /* 0 .. clients - 1 */
    unsigned key;             /* key index (first of its batch with --pipeline) */
    unsigned state;           /* enum lg_client_state */
    unsigned depth;           /* holds currently granted (reentrant: up to 2) */
    unsigned kind;            /* enum lg_hold_kind of the current cycle */
    uint64_t rng;             /* rwlock: PRNG state (read or write per cycle) */
    unsigned pending;         /* replies still expected for the batch */
    uint64_t t0_ns;           /* when the timed acquire was sent */
    uint64_t granted;         /* grants in the measured phase (fairness) */
    struct sched_timer timer; /* latch wait (PTTL) or error back-off */
    struct list node;         /* in the hold queue or a sub entry's wait list */
    uint64_t due_ns;          /* end of the hold */
    struct lg_sub *sub;       /* borrowed: pub/sub registry (direct), or NULL */
    bool sub_ref;             /* holds a reference on its key's sub entry */
    char *acq_cmd;            /* owned: RESP acquire (or the whole batch) */
    size_t acq_len;           /* bytes in acq_cmd */
    char *rel_cmd;            /* owned: RESP release, NULL with --pipeline */
    size_t rel_len;           /* bytes in rel_cmd */
    struct lg_req wacq;       /* rwlock: write-lock acquire (acq_cmd: read lock) */
    struct lg_req wrel;       /* rwlock: write-lock release (rel_cmd: read lock) */
};

enum lg_sub_state {
    LG_SUB_IDLE = 0,        /* not subscribed */
    LG_SUB_SUBSCRIBING = 1, /* SUBSCRIBE sent, not confirmed */
    LG_SUB_SUBSCRIBED = 2,  /* confirmed */
};

/* Redisson's RedissonLockEntry: one per (registry, key). */
struct lg_sub_entry {
    unsigned key;        /* key index */
    unsigned state;      /* enum lg_sub_state */
    unsigned refs;       /* waiters using the entry (Redisson's counter) */
    unsigned permits;    /* latch permits left by messages nobody waited for */
    struct list confirm; /* clients waiting for the subscription */
    struct list latch;   /* clients waiting for a message, FIFO */
};

/* A pub/sub connection and the entries subscribed through it: one per
 * client (direct) or one for all clients (direct-shared). */
struct lg_sub {
    struct sched_conn conn;       /* pub/sub connection to Redis */
    struct lg_run *run;           /* borrowed: the run */
    redisReader *rd;              /* owned: reply parser */
    struct lg_sub_entry *entries; /* owned: nentries entries */
    unsigned nentries;            /* one per key (shared) or 1 (per client) */
};

/* Per-key state of the exclusion check. */
struct lg_key {
    unsigned holders; /* clients holding the lock or write lock (0 or 1), or permits */
    unsigned readers; /* rwlock: clients holding the read lock */
    unsigned owner;   /* id of the last client that was granted it */
};

/* A release queued in this loop iteration (the key is held until its end). */
struct lg_unheld {
    unsigned key;  /* key index */
    unsigned kind; /* enum lg_hold_kind that ends */
};

struct lg_counters {
    uint64_t acquisitions;   /* granted acquires */
    uint64_t attempts;       /* acquire requests sent */
    uint64_t waits;          /* direct: subscriptions joined */
    uint64_t subscribes;     /* SUBSCRIBE sent */
    uint64_t unsubscribes;   /* UNSUBSCRIBE sent */
    uint64_t messages;       /* pub/sub messages received */
    uint64_t reads;          /* rwlock: read locks granted */
    uint64_t writes;         /* rwlock: write locks granted */
    uint64_t latch_timeouts; /* direct: latch waits ended by the timer (PTTL, re-check) */
};

struct lg_run {
    struct sched_loop *loop;           /* borrowed: the bench's loop */
    const struct lg_opts *o;           /* borrowed: options */
    struct lg_result *res;             /* borrowed: where the figures go */
    enum lg_target target;             /* what is being driven */
    bool direct;                       /* target speaks to Redis directly */
    unsigned phase;                    /* enum lg_phase */
    unsigned acq_per_cycle;            /* 1, or 2 (reentrant) */
    struct lg_client *clients;         /* owned: nclients */
    unsigned nclients;                 /* clients */
    struct lg_sub *subs;               /* owned: nsubs registries (direct) */
    unsigned nsubs;                    /* 0, 1 (shared) or nclients */
    struct lg_key *keys;               /* owned: nkeys holder counters */
    struct lg_unheld *unheld;          /* owned: releases queued this iteration */
    unsigned nunheld;                  /* entries in unheld (at most nclients) */
    unsigned nkeys;                    /* keys of the workload */
    struct lg_addr cmd_addr;           /* proxy or Redis, for the clients */
    struct sched_tls_ctx *tls;         /* owned reference: TLS to the proxy, or NULL */
    struct lg_addr sub_addr;           /* Redis, for the pub/sub connections */
    char uuid[37];                     /* direct: owner prefix */
    const char *chan_prefix;           /* direct: wake channel up to the key ("...:{") */
    char sha_acq[41];                  /* direct: acquire script (rwlock: read lock) */
    char sha_rel[41];                  /* direct: unlock script (rwlock: read lock) */
    char sha_wacq[41];                 /* direct rwlock: write-lock acquire script */
    char sha_wrel[41];                 /* direct rwlock: write-lock unlock script */
    bool sems_set;                     /* semaphore: the semaphores were created */
    unsigned conns_total;              /* connections to open */
    unsigned conns_next;               /* next one to start connecting */
    unsigned conns_pending;            /* connects in flight */
    unsigned conns_up;                 /* connected */
    unsigned conns_released;           /* on_release delivered */
    unsigned active;                   /* clients still cycling (not idle or dead) */
    struct lg_counters cnt;            /* counters since the measured phase began */
    uint64_t acq_all;                  /* grants since the warm-up began */
    uint64_t last_acq;                 /* acq_all at the last progress line */
    uint64_t t_phase_ns;               /* start of the current phase */
    struct list hold_q;                /* clients holding, by due_ns (FIFO) */
    struct sched_timer hold_timer;     /* wakes the loop for the hold queue head */
    struct sched_hook iter_hook;       /* end of iteration: due holds, unheld keys */
    struct sched_timer phase_timer;    /* end of warm-up / measurement / drain */
    struct sched_timer progress_timer; /* one progress line per second */
    struct lg_redis_snap *snap0;       /* owned: Redis figures at measure start */
    double proxy_cpu0;                 /* proxy CPU at measure start */
    double bench_cpu0;                 /* bench CPU at measure start */
    double sys_busy0;                  /* machine busy CPU at measure start */
};

/* Runs target t of o on loop l, filling res (res->hist must be allocated).
 * Returns 0 when the target ran (see res for figures and problems), or
 * -errno when it could not start (res->error says why). */
int lg_run_target(struct sched_loop *l, const struct lg_opts *o, enum lg_target t,
                  struct lg_result *res);

/* Makes the running target stop at its next progress tick (within a
 * second), closing its connections cleanly. Async-signal-safe. */
void lg_run_interrupt(void);

/* True once lg_run_interrupt() was called. */
bool lg_run_was_interrupted(void);

/* ---- lg_run.c services for the clients --------------------------------- */

/* Writes the name of key index key ("<prefix>:<target>:<n>"). Returns the
 * length (truncated to cap - 1). */
size_t lg_run_key_name(const struct lg_run *r, unsigned key, char *buf, size_t cap);

/* A connection of the run finished connecting: err is 0 or -errno (the
 * owner has already closed it then). */
void lg_run_conn_done(struct lg_run *r, int err);

/* on_release of any connection of the run. */
void lg_run_conn_released(struct lg_run *r);

/* True while clients should start new cycles. */
bool lg_run_cycling(const struct lg_run *r);

/* A grant of key for client c arrived (depth is the hold count after it;
 * c->kind says what was granted). Checks exclusion and records the latency
 * since c->t0_ns. */
void lg_run_granted(struct lg_client *c, unsigned key, unsigned depth);

/* Client c has queued the release of its last hold (of kind c->kind) of
 * key. The key counts as held until the end of this loop iteration, when
 * the release is flushed to the socket: a grant to another client
 * processed before then cannot have been caused by this release. */
void lg_run_releasing(struct lg_client *c, unsigned key);

/* c's hold (of kind c->kind) of key is over at once (its release was
 * answered, or its connection died). */
void lg_run_released(struct lg_client *c, unsigned key);

/* Counts an error; msg (may be NULL) is kept if it is the first. */
void lg_run_error(struct lg_run *r, const char *what, const char *msg, size_t len);

/* Puts c in the hold queue (hold-us > 0). */
void lg_run_hold(struct lg_client *c);

/* Client c stopped cycling (drain, or its connection died). */
void lg_run_client_idle(struct lg_client *c);

/* ---- lg_client.c ------------------------------------------------------- */

extern const struct sched_conn_ops lg_client_ops;

/* Prepares c's requests. Returns 0 or -ENOMEM. */
int lg_client_init(struct lg_client *c, struct lg_run *r, unsigned id);
void lg_client_deinit(struct lg_client *c);

/* Starts a cycle, or goes idle when the run no longer cycles. */
void lg_client_start(struct lg_client *c);

/* The hold is over: release. */
void lg_client_release(struct lg_client *c);

/* Direct: the subscription is there or a message/PTTL woke c: retry. */
void lg_client_retry(struct lg_client *c);

/* Appends a RESP command of argc C strings to b. Returns 0 or -ENOMEM. */
int lg_resp_append(struct buf *b, unsigned argc, const char *const *argv);

/* Moves b's bytes into a malloc'd string (b is left empty). */
void lg_buf_take(struct buf *b, char **out, size_t *len);

/* ---- lg_rw.c and lg_sem.c ---------------------------------------------- */

/* rwlock: formats c's read- and write-lock requests. Returns 0 or -ENOMEM. */
int lg_rw_build_requests(struct lg_client *c);

/* rwlock: SCRIPT LOADs the four direct scripts. Returns 0 or -errno
 * (r->res->error says why). */
int lg_rw_load_scripts(struct lg_run *r);

/* rwlock: draws c's lock for the next cycle (sets c->kind). */
void lg_rw_pick(struct lg_client *c);

/* semaphore: formats c's acquire and release. Returns 0 or -ENOMEM. */
int lg_sem_build_requests(struct lg_client *c);

/* semaphore: SCRIPT LOADs the direct tryAcquire and release scripts.
 * Returns 0 or -errno (r->res->error says why). */
int lg_sem_load_scripts(struct lg_run *r);

/* semaphore: deletes every key of the run and sets it to --permits
 * permits (proxy: SEM.TRYSETPERMITS; direct: trySetPermits script).
 * Returns 0 or -errno (r->res->error says why). */
int lg_sem_create(struct lg_run *r);

/* semaphore: deletes every key of the run (after it), if lg_sem_create
 * ran. Failures are ignored. */
void lg_sem_delete(struct lg_run *r);

/* semaphore, direct: a latch wait's re-check period (Redisson has none). */
#define LG_SEM_RECHECK_MS 1000u

/* ---- lg_sub.c ---------------------------------------------------------- */

extern const struct sched_conn_ops lg_sub_ops;

/* Prepares s for nentries keys starting at first_key. Returns 0 or -ENOMEM. */
int lg_sub_init(struct lg_sub *s, struct lg_run *r, unsigned first_key, unsigned nentries);
void lg_sub_deinit(struct lg_sub *s);

/* Client c must wait for its key (held, pttl ms left): take a reference on
 * the entry, subscribing if needed; c is retried once the subscription is
 * confirmed (at once if it already is). If the pub/sub connection is gone,
 * c falls back to retrying after pttl. */
void lg_sub_join(struct lg_client *c, long long pttl);

/* c got the lock (or gives up): drop its reference; the last one out
 * sends UNSUBSCRIBE without waiting for it. */
void lg_sub_leave(struct lg_client *c);

/* c's retry failed with the holder's pttl: wait for a latch permit (a
 * message) or pttl ms, whichever comes first (retry at once if a permit is
 * already there). */
void lg_sub_wait(struct lg_client *c, long long pttl);

/* Takes c off any wait list and cancels its timer. */
void lg_sub_cancel(struct lg_client *c);

#ifdef __cplusplus
}
#endif

#endif
