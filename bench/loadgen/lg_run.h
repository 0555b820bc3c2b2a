/* One target run: the shared state of the bench while it drives one target
 * (the clients, their pub/sub registries, the per-key holder table, the
 * counters, the phases), and the interface between the three files that
 * implement it:
 *   lg_run.c     phases, connection set-up and tear-down, timers, holds,
 *                exclusion check;
 *   lg_figures.c the measured phase's figures (snapshots, counters);
 *   lg_client.c  the per-client request state machines (proxy, direct,
 *                twemproxy, pipelined);
 *   lg_rate.c    the open-loop schedule (--rate);
 *   lg_script.c  the Redisson scripts' names, SCRIPT LOAD, and the NOSCRIPT
 *                fallback to EVAL;
 *   lg_clean.c   the deletion of the run's keys at the end;
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

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include "bench/loadgen/lg_opts.h"
#include "bench/loadgen/lg_result.h"
#include "common/buf.h"
#include "common/list.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lg_cluster;
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
    LG_CS_GREET = 10,  /* new connection: AUTH or PING sent, not answered */
    LG_CS_POLL = 11,   /* twemproxy: waiting out the poll delay */
    LG_CS_SCHED = 12,  /* --rate: waiting for the start of its next slot */
    LG_CS_MOVE = 13,   /* --cluster: reconnecting to another master (MOVED/ASK) */
    LG_CS_AGAIN = 14,  /* --cluster: TRYAGAIN, re-sending after a pause */
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

/* The Redisson scripts a target uses (the lock workloads use ACQ and REL;
 * rwlock's read lock is ACQ/REL and its write lock WACQ/WREL; semaphore's
 * tryAcquire and release are ACQ and REL). */
enum lg_script_id {
    LG_SCR_ACQ = 0,
    LG_SCR_REL = 1,
    LG_SCR_WACQ = 2,
    LG_SCR_WREL = 3,
    LG_NSCRIPTS = 4,
};

struct lg_script {
    const char *lua; /* borrowed: the static script text, NULL when unused */
    char sha[41];    /* its SHA-1, the EVALSHA name */
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
    uint64_t t0_ns;           /* when the timed acquire was sent (--rate: scheduled) */
    uint64_t slot_ns;         /* --rate: start of the current or next slot */
    unsigned heap_idx;        /* --rate: index in the schedule heap, or UINT_MAX */
    bool slot_waited;         /* --rate: the slot was ahead when scheduled */
    uint64_t jitter;          /* twemproxy: PRNG state of the poll delays */
    const char *inflight;     /* borrowed: the request in flight (acq/rel), for NOSCRIPT */
    size_t inflight_len;      /* bytes in inflight */
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
    unsigned resume;          /* --cluster: the state to re-send in after a redirect */
    unsigned master;          /* --cluster: the master its connection goes to */
    bool asking;              /* --cluster: ASKING sent, its +OK not read yet */
    bool ask_next;            /* --cluster: send ASKING before the re-sent request */
    unsigned moving;          /* --cluster: enum lg_move_step */
};

/* Where a client's move to another master is (lg_redirect.c). */
enum lg_move_step {
    LG_MV_NONE = 0,       /* not moving */
    LG_MV_CLOSING = 1,    /* the old connection is closing */
    LG_MV_CONNECTING = 2, /* the new one is connecting or being greeted */
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
    bool greeting;                /* AUTH or PING sent, its reply not read yet */
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
    uint64_t polls;          /* twemproxy: retries after a poll delay */
    uint64_t noscripts;      /* EVALSHA answered NOSCRIPT and re-sent as EVAL */
};

struct lg_run {
    struct sched_loop *loop;               /* borrowed: the bench's loop */
    const struct lg_opts *o;               /* borrowed: options */
    struct lg_result *res;                 /* borrowed: where the figures go */
    enum lg_target target;                 /* what is being driven */
    bool redisson;                         /* clients run Redisson's scripts (not proxy) */
    bool polling;                          /* waiters poll (twemproxy): no pub/sub */
    const struct lg_endpoint *cmd_ep;      /* borrowed: where the clients connect */
    unsigned phase;                        /* enum lg_phase */
    unsigned acq_per_cycle;                /* 1, or 2 (reentrant) */
    struct lg_client *clients;             /* owned: nclients */
    unsigned nclients;                     /* clients */
    struct lg_sub *subs;                   /* owned: nsubs registries (direct) */
    unsigned nsubs;                        /* 0, 1 (shared) or nclients */
    struct lg_key *keys;                   /* owned: nkeys holder counters */
    struct lg_unheld *unheld;              /* owned: releases queued this iteration */
    unsigned nunheld;                      /* entries in unheld (at most nclients) */
    unsigned nkeys;                        /* keys of the workload */
    struct lg_addr cmd_addr;               /* proxy or Redis, for the clients */
    struct sched_tls_ctx *tls;             /* owned reference: TLS to the proxy, or NULL */
    const struct lg_endpoint *sub_ep;      /* borrowed: where pub/sub connections go */
    struct lg_addr sub_addr;               /* sub_ep resolved */
    char uuid[37];                         /* redisson: owner prefix */
    const char *chan_prefix;               /* redisson: wake channel up to the key ("...:{") */
    struct lg_script scripts[LG_NSCRIPTS]; /* redisson: the scripts, by enum lg_script_id */
    bool sems_set;                         /* semaphore: the semaphores were created */
    unsigned conns_total;                  /* connections to open */
    unsigned conns_next;                   /* next one to start connecting */
    unsigned conns_pending;                /* connects in flight */
    unsigned conns_up;                     /* connected */
    unsigned conns_released;               /* on_release delivered */
    unsigned active;                       /* clients still cycling (not idle or dead) */
    struct lg_counters cnt;                /* counters since the measured phase began */
    uint64_t acq_all;                      /* grants since the warm-up began */
    uint64_t last_acq;                     /* acq_all at the last progress line */
    uint64_t t_phase_ns;                   /* start of the current phase */
    struct list hold_q;                    /* clients holding, by due_ns (FIFO) */
    struct sched_timer hold_timer;         /* wakes the loop for the hold queue head */
    struct sched_hook iter_hook;           /* end of iteration: due holds, unheld keys */
    struct sched_timer phase_timer;        /* end of warm-up / measurement / drain */
    struct sched_timer progress_timer;     /* one progress line per second */
    struct lg_redis_snap *snap0;           /* owned: Redis figures at measure start */
    double proxy_cpu0;                     /* proxy CPU at measure start */
    double proxy_sys0;                     /* of which kernel (stime) */
    double bench_cpu0;                     /* bench CPU at measure start */
    double sys_busy0;                      /* machine busy CPU at measure start */
    struct lg_client **sched;              /* owned: --rate: min-heap of clients by slot_ns */
    unsigned nsched;                       /* entries in sched */
    uint64_t slot_ns;                      /* --rate: each client's slot length */
    uint64_t rate_t0_ns;                   /* --rate: start of the schedule */
    struct sched_timer rate_timer;         /* --rate: wakes the loop for the heap's head */
    struct lg_cluster *cluster;            /* owned: --cluster: the slot map, else NULL */
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

/* Resolves ep (TCP or Unix) into a. Returns 0 or -EINVAL with err set. */
int lg_run_resolve(const struct lg_endpoint *ep, struct lg_addr *a, char *err, size_t errlen);

/* Writes the name of key index key ("<prefix>:<target>:<n>"). Returns the
 * length (truncated to cap - 1). */
size_t lg_run_key_name(const struct lg_run *r, unsigned key, char *buf, size_t cap);

/* A connection of the run finished connecting: err is 0 or -errno (the
 * owner has already closed it then). */
void lg_run_conn_done(struct lg_run *r, int err);

/* A connection of the run was refused after connecting (AUTH failed, or
 * it closed before its greeting was answered): the run stops with why as
 * its error. */
void lg_run_conn_failed(struct lg_run *r, const char *why);

/* Queues the greeting of a new connection to ep: AUTH [user] password
 * when ep has a password, else PING. A connection counts as connected once
 * its greeting is answered, so the connect window (lg_run.c) bounds the
 * connections the server has not accepted yet, on Unix sockets too (whose
 * connect completes at once, and whose backlog would overflow with
 * EAGAIN). Returns 0 or -ENOMEM. */
int lg_greet_send(struct sched_conn *conn, const struct lg_endpoint *ep);

/* The greeting's reply: NULL when it is +OK (AUTH) or +PONG, else what
 * was wrong with it (a static or the reply's own text). */
const char *lg_greet_error(const redisReply *rep);

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

/* The connection is gone or unusable: gives up whatever c holds or waits
 * for, counts why (may be NULL) as an error, goes idle. */
void lg_client_die(struct lg_client *c, const char *why);

/* Starts a cycle, or goes idle when the run no longer cycles. */
void lg_client_start(struct lg_client *c);

/* The hold is over: release. */
void lg_client_release(struct lg_client *c);

/* Direct: the subscription is there or a message/PTTL woke c: retry. */
void lg_client_retry(struct lg_client *c);

/* Sends c's request p (n bytes) and remembers it as the one in flight. */
void lg_client_send(struct lg_client *c, const char *p, size_t n);

/* --rate: the schedule says c's cycle starts now (c->t0_ns = its slot). */
void lg_client_begin_cycle(struct lg_client *c);

/* Appends a RESP command of argc C strings to b. Returns 0 or -ENOMEM. */
int lg_resp_append(struct buf *b, unsigned argc, const char *const *argv);

/* Moves b's bytes into a malloc'd string (b is left empty). */
void lg_buf_take(struct buf *b, char **out, size_t *len);

/* One step of a splitmix64 stream. */
uint64_t lg_rng_next(uint64_t *state);

/* ---- lg_figures.c ------------------------------------------------------ */

/* The measured phase begins: snapshots of Redis, the proxy, the bench and
 * the machine (the counters are zeroed by the caller). */
void lg_figures_begin(struct lg_run *r);

/* The measured phase ended (r->res->seconds set): the counters, fairness
 * and the deltas of every snapshot go into r->res. */
void lg_figures_end(struct lg_run *r);

/* ---- lg_rate.c --------------------------------------------------------- */

/* The callback of r->rate_timer: lg_rate_run(). */
void lg_rate_timer_cb(struct sched_timer *t);

/* Allocates the schedule heap (o->rate > 0), after the clients are set
 * up. Returns 0 or -ENOMEM. */
int lg_rate_init(struct lg_run *r);
void lg_rate_deinit(struct lg_run *r);

/* Warm-up begins: slot 0 of client i starts i/clients of a slot from now. */
void lg_rate_begin(struct lg_run *r);

/* c finished a cycle (or is starting its first): wait for its next slot
 * (in the heap; a slot already due starts at the end of this iteration). */
void lg_rate_schedule(struct lg_client *c);

/* Starts every client whose slot has come; re-arms the timer. Runs in the
 * end-of-iteration hook. */
void lg_rate_run(struct lg_run *r);

/* Takes c out of the heap (drain, lost connection). */
void lg_rate_cancel(struct lg_client *c);

/* The drain began: every client still waiting for a slot goes idle. */
void lg_rate_drain(struct lg_run *r);

/* ---- lg_script.c and lg_clean.c ---------------------------------------- */

/* Names r's scripts (r->scripts[].lua set) by their SHA-1; direct targets
 * SCRIPT LOAD them on Redis, which must answer the same names. Returns 0
 * or -errno (r->res->error says why). */
int lg_scripts_prepare(struct lg_run *r);

/* c's request in flight was answered NOSCRIPT: sends it again as EVAL
 * with the script's text (which also loads it into Redis). Returns 0, or
 * -EINVAL when the request was not an EVALSHA of a known script. */
int lg_scripts_resend_eval(struct lg_client *c);

/* After the target: deletes every key the run may have left, through the
 * target's endpoint when it takes DEL (Redis, twemproxy) or through --redis
 * (proxy target), and records the count (or why it could not) in r->res. */
void lg_clean_keys(struct lg_run *r);

/* ---- lg_redirect.c ---------------------------------------------------- */

/* --cluster: rep (an error reply to c's request in flight) is MOVED, ASK
 * or TRYAGAIN: follows it (see lg_redirect.c) and returns true; false for
 * any other reply. */
bool lg_redirect_reply(struct lg_client *c, const redisReply *rep);

/* c's connection was released: true when lg_redirect.c took it over (the
 * client is moving to another master), false when the release is final. */
bool lg_redirect_released(struct lg_client *c);

/* The greeting of a moved connection was answered (err: NULL or why
 * not): re-sends the request, or gives the client up. */
void lg_redirect_greeted(struct lg_client *c, const char *err);

/* A moved connection's connect failed (err < 0): gives the client up. */
void lg_redirect_connect_failed(struct lg_client *c, int err);

/* c's TRYAGAIN pause is over: re-sends its request. */
void lg_redirect_again(struct lg_client *c);

/* ---- lg_rw.c and lg_sem.c ---------------------------------------------- */

/* rwlock: formats c's read- and write-lock requests. Returns 0 or -ENOMEM. */
int lg_rw_build_requests(struct lg_client *c);

/* rwlock: the four Redisson scripts into r->scripts. */
void lg_rw_scripts(struct lg_run *r);

/* rwlock: draws c's lock for the next cycle (sets c->kind). */
void lg_rw_pick(struct lg_client *c);

/* semaphore: formats c's acquire and release. Returns 0 or -ENOMEM. */
int lg_sem_build_requests(struct lg_client *c);

/* semaphore: the tryAcquire and release scripts into r->scripts. */
void lg_sem_scripts(struct lg_run *r);

/* semaphore: deletes every key of the run and sets it to --permits
 * permits (proxy: SEM.TRYSETPERMITS, keys deleted on --redis; others:
 * DEL and the trySetPermits script on the target's endpoint).
 * Returns 0 or -errno (r->res->error says why). */
int lg_sem_create(struct lg_run *r);

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
