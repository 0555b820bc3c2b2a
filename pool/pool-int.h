/* Module-private declarations of pool/: the pool object, its nodes, the
 * request records of the pipelines, and the calls between pool.c
 * (options, submission, stats), req.c (request records), node.c (a node and its
 * connections), rconn.c (one connection), pubsub.c (channel table),
 * cluster.c (topology), sentinel.c (a Sentinel's answers and events) and
 * redirect.c (MOVED/ASK/TRYAGAIN/READONLY). Nothing outside pool/ and its
 * unit tests includes this. */
#ifndef LP_POOL_POOL_INT_H
#define LP_POOL_POOL_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hmap.h"
#include "common/list.h"
#include "pool/addr.h"
#include "pool/pool.h"
#include "pool/rconn.h"
#include "pool/reply.h"
#include "pool/topo.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_loop;
struct pool__cluster;

/* Tail bytes kept inline in a request for a NOSCRIPT retry or a cluster
 * re-send; longer argument lists are copied to the heap. Lock scripts take
 * a key, an owner id and a lease: well under this. */
#define POOL__REQ_INLINE 160

/* Longest script SHA1 in hex, plus the NUL. */
#define POOL__SHA_SIZE 41

/* "$7\r\nEVALSHA\r\n$40\r\n" + SHA1 + "\r\n" and its NUL. */
#define POOL__EVALSHA_PRE_SIZE 64

enum pool__req_kind {
    POOL__REQ_CMD = 1,      /* caller command */
    POOL__REQ_EVAL = 2,     /* caller EVALSHA, retried once on NOSCRIPT */
    POOL__REQ_AUTH = 3,     /* handshake: AUTH */
    POOL__REQ_SELECT = 4,   /* handshake: SELECT */
    POOL__REQ_SCRIPT = 5,   /* handshake: SCRIPT LOAD of scripts[script] */
    POOL__REQ_PING = 6,     /* handshake: PING when there is nothing else to send */
    POOL__REQ_ASKING = 7,   /* ASKING before a request sent on an ASK redirect: reply dropped */
    POOL__REQ_INTERNAL = 8, /* the pool's own command (topology): a callback, no stats, no
                               redirects */
    POOL__REQ_ROLE = 9,     /* handshake (sentinel): ROLE, the node must be a master */
    POOL__REQ_WAIT = 10,    /* WAIT behind an EVAL of pool_eval_wait(): carries the caller
                               once the EVAL answered (cb set), else its reply is dropped */
    POOL__REQ_RUNID = 11,   /* handshake (command connections): INFO server, for run_id */
};

/* One expected reply in a connection's FIFO, or a cluster request waiting
 * to be re-sent. Records are recycled through pool.free_reqs. The cluster
 * fields are set (and the command kept in tail) only in a cluster pool. */
struct pool__req {
    struct list node;           /* in pool__rconn.fifo, pool__cluster.parked, or pool.free_reqs */
    pool_reply_fn *cb;          /* borrowed: caller callback (CMD, EVAL, INTERNAL) */
    void *arg;                  /* borrowed: callback argument */
    uint64_t sent_ms;           /* loop time of the (last) send */
    uint64_t born_ms;           /* cluster: loop time of the submit; retries end a timeout later */
    uint64_t retry_ms;          /* cluster, parked: loop time of the next attempt */
    uint64_t hint;              /* cluster: connection choice for re-sends */
    struct pool_node *target;   /* cluster: borrowed: node of a MOVED/ASK, NULL = by slot */
    enum pool__req_kind kind;   /* what the reply is for */
    int slot;                   /* cluster: routing slot, -1 for any node */
    unsigned script;            /* EVAL, SCRIPT: script id */
    unsigned ntail;             /* EVAL: bulks in tail (numkeys, keys, args); cluster CMD: argc */
    unsigned redirects;         /* cluster: MOVED/ASK followed */
    unsigned tries;             /* cluster: TRYAGAIN/CLUSTERDOWN/LOADING retries */
    bool retried;               /* EVAL: the NOSCRIPT retry was sent */
    bool asking;                /* cluster: the next send is preceded by ASKING */
    unsigned batch;             /* EVAL: first of a runner call of this many requests (>= 2;
                                   the others follow it in the FIFO), else 0 */
    size_t keys_at;             /* EVAL joining a batch: offset in tail where the keys start */
    size_t args_at;             /* EVAL joining a batch: offset in tail where the arguments start */
    struct pool_wait *wait;     /* borrowed: EVAL followed by WAIT, its WAIT record, or NULL */
    struct pool_reply *held;    /* owned: WAIT: the script's reply, until WAIT answers */
    int acked;                  /* WAIT: its answer (replicas), -1 until then or without one */
    uint64_t start_ns;          /* EVAL (and its WAIT): monotonic time of the submit, else 0 */
    char *tail;                 /* owned when != inl: formatted bulks, or NULL */
    size_t tail_len;            /* bytes in tail */
    char inl[POOL__REQ_INLINE]; /* owned: inline tail storage */
};

/* A script the pool keeps loaded on every command connection. SHA1 is a
 * function of the text, so one value serves every node. */
struct pool__script {
    const char *name;                     /* borrowed: for logs */
    const char *text;                     /* borrowed: Lua source */
    size_t text_len;                      /* strlen(text) */
    char sha[POOL__SHA_SIZE];             /* SHA1 returned by SCRIPT LOAD, "" until then */
    char evalsha[POOL__EVALSHA_PRE_SIZE]; /* "EVALSHA <sha>" as two bulks, set with sha */
    size_t evalsha_len;                   /* bytes in evalsha */
    unsigned batch_op;                    /* the runner's op number, 0: not batched */
    unsigned batch_keys, batch_args;      /* batch_op: KEYS and ARGV counts */
    char op[12];                          /* batch_op: its number as a bulk ("$1\r\n1\r\n") */
    size_t op_len;                        /* bytes in op */
};

enum pool__node_state {
    POOL__NODE_ACTIVE = 1,   /* a master: routable, connections kept up */
    POOL__NODE_DRAINING = 2, /* left the slot map: no new requests, stopped at drain_ms */
    POOL__NODE_STOPPED = 3,  /* connections stopping; freed once all are released */
};

/* One upstream master and its connections: the single node of a plain
 * pool, or one master of a cluster. Design notes in node.c. */
struct pool_node {
    struct list link;            /* in pool.nodes */
    struct pool *pool;           /* borrowed: owner */
    struct pool__addr addr;      /* owned: where its connections go */
    struct pool__rconn *conns;   /* owned: nconns command connections */
    unsigned nconns;             /* opts.size */
    struct pool__rconn pubsub;   /* owned: its pub/sub connection */
    struct list chans;           /* struct pool_chan homed here (records owned by the pool) */
    bool resub;                  /* an error reply on pubsub: re-send pending SUBSCRIBEs */
    enum pool__node_state state; /* see enum */
    uint64_t drain_ms;           /* DRAINING: loop time its connections stop */
    uint64_t gen;                /* cluster: last topology generation listing it as master */
    unsigned nslots;             /* slots it owns in the map */
    char id[POOL__NODE_ID_SIZE]; /* cluster node id, or "" */
    const char *role;            /* static: "master", "replica", "gone" */
    char health[16];             /* last CLUSTER SHARDS health, or "" */
    bool demoted;                /* sentinel: answered READONLY; reconnects (ROLE) to serve again */
    char run_id[POOL__SHA_SIZE]; /* the server's run_id as last seen, or "" */
    uint64_t requests;           /* stats: caller requests sent here */
    uint64_t errors;             /* stats: requests failed here by loss or timeout */
    uint64_t moved;              /* stats: MOVED replies from here */
    uint64_t ask;                /* stats: ASK replies from here */
    uint64_t tryagain;           /* stats: TRYAGAIN/CLUSTERDOWN/LOADING replies from here */
    uint64_t latency_us;         /* stats: moving average of sampled round trips */
    uint64_t latency_last_us;    /* stats: last sampled round trip */
};

/* Where the masters come from. */
enum pool__upstream {
    POOL__UP_SINGLE = 1,   /* one node, given by the options */
    POOL__UP_CLUSTER = 2,  /* Redis Cluster: the masters of the slot map (cl) */
    POOL__UP_SENTINEL = 3, /* Redis Sentinel: one master owning every slot (cl, cl->sn) */
};

struct pool {
    struct sched_loop *loop;      /* borrowed: the loop driving every connection */
    enum pool__upstream kind;     /* see enum; fixed at creation */
    struct pool_opts opts;        /* copy; string fields owned (strdup) */
    struct pool__script *scripts; /* owned: nscripts entries */
    size_t nscripts;              /* registered scripts */
    struct list nodes;            /* owned: struct pool_node, creation order */
    size_t nnodes;                /* entries on nodes */
    struct pool_node *single;     /* borrowed: the node of a single-node pool, else NULL */
    struct pool__cluster *cl;     /* owned: cluster (or sentinel) state, NULL for a single node */
    struct hmap chans;            /* owned buckets: struct pool_chan by name */
    struct list homeless;         /* owned: struct pool_chan with no node (slot not served) */
    uint64_t nsubs;               /* channels with a listener attached */
    bool sharded;                 /* channels use SSUBSCRIBE/SUNSUBSCRIBE */
    bool pubsub_known;            /* sharded is decided (cluster AUTO: after detection) */
    const char *msg_chan;         /* borrowed: channel of the message being delivered */
    size_t msg_chan_len;          /* its length */
    struct list free_reqs;        /* owned: recycled struct pool__req */
    size_t nfree_reqs;            /* records on free_reqs */
    uint64_t rng;                 /* xorshift state for backoff jitter */
    bool started;                 /* pool_start() was called */
    bool stopping;                /* pool_stop() was called: no reconnects */
    bool upstream_is_cluster;     /* single node: it answered MOVED or ASK */
    uint64_t requests;            /* stats: caller requests sent */
    uint64_t inflight;            /* stats: caller requests awaiting a reply */
    uint64_t reconnects;          /* stats: READY again after a loss */
    uint64_t errors;              /* stats: requests failed by loss or timeout */
    uint64_t batches;             /* stats: writes to command connections */
    uint64_t noscript_retries;    /* stats: NOSCRIPT retries */
    uint64_t script_batches;      /* stats: runner calls */
    uint64_t batched;             /* stats: requests in runner calls */
    unsigned runner;              /* script id + 1 of the batch runner, 0: no batching */
    uint64_t moved;               /* stats: MOVED replies (cluster) */
    uint64_t ask;                 /* stats: ASK replies (cluster) */
    uint64_t tryagain;            /* stats: TRYAGAIN/CLUSTERDOWN/LOADING replies (cluster) */
    uint64_t restarts;            /* stats: a master answered with a new run_id */
    struct sched_timer restarted; /* single node: reports a restart from the loop (0 ms) */
    char last_error[160];         /* last connection error text, or "" */
    struct sched_tls_ctx *tls;    /* owned reference: upstream TLS (tls.c), NULL: plain */
    char *tls_server_name;        /* owned: name to verify instead of the host, or NULL */
};

/* ---- req.c ------------------------------------------------------------------- */

/* A free request record (fields reset), or NULL on allocation failure. */
struct pool__req *pool__req_get(struct pool *p);

/* Returns a request record (not on any list) to the free list. */
void pool__req_put(struct pool *p, struct pool__req *req);

/* Frees the free list (pool_destroy). */
void pool__req_free_all(struct pool *p);

/* Gives a caller request (CMD, EVAL, INTERNAL; on no list) its one
 * completion: recycles the record first, so the callback may submit. */
void pool__req_complete(struct pool *p, struct pool__req *req, const struct pool_reply *r, int err);

/* CMD, EVAL or INTERNAL: a request with a callback. */
static inline bool pool__req_is_caller(const struct pool__req *req)
{
    return req->kind == POOL__REQ_CMD || req->kind == POOL__REQ_EVAL ||
           req->kind == POOL__REQ_INTERNAL;
}

/* A request whose reply goes to a caller's callback: a caller request, or
 * a WAIT record that took the caller over from its EVAL. */
static inline bool pool__req_has_caller(const struct pool__req *req)
{
    return pool__req_is_caller(req) || (req->kind == POOL__REQ_WAIT && req->cb);
}

/* Makes room for a kept tail of nbulks bulks, n bytes (inline when it
 * fits: every EVALSHA keeps one). Returns 0 or -ENOMEM. */
static inline int pool__req_alloc_tail(struct pool__req *req, unsigned nbulks, size_t n)
{
    req->tail = n <= sizeof(req->inl) ? req->inl : (char *)malloc(n);
    if (!req->tail)
        return -ENOMEM;
    req->ntail = nbulks;
    req->tail_len = n;
    return 0;
}

/* Copies the last req->tail_len bytes of b (just formatted) into the tail. */
static inline void pool__req_keep_tail(struct pool__req *req, const struct buf *b)
{
    memcpy(req->tail, b->data + b->len - req->tail_len, req->tail_len);
}

/* Formats the kept command into b: the command itself (CMD), or EVALSHA
 * sha + tail (EVAL text + tail once retried). Returns 0 or -ENOMEM. */
int pool__req_format_kept(const struct pool *p, struct buf *b, const struct pool__req *req);

/* ---- batch.c ---------------------------------------------------------------- */

/* True when req (an EVAL whose script id is set) may join rc's batch. */
bool pool__batch_fits(const struct pool__rconn *rc, const struct pool__req *req, int numkeys,
                      int argc);

/* Formats req's tail into req and adds it to rc's open batch (opening
 * one), closing a full batch first. The caller then queues req in the
 * FIFO. Returns 0 or -ENOMEM (req not joined, nothing written). */
int pool__batch_join(struct pool__rconn *rc, struct pool__req *req, int numkeys, int argc,
                     const char *const *argv, const size_t *lens);

/* Writes the open batch's bytes, if one is open, and forgets it. */
void pool__batch_close(struct pool__rconn *rc);

/* Forgets the open batch without writing it (its records were failed). */
void pool__batch_forget(struct pool__rconn *rc);

/* Writes head's batch (head->batch requests from head on, in the FIFO in
 * order) again as EVAL with the runner's text. Returns 0 or -ENOMEM. */
int pool__batch_resend(struct pool__rconn *rc, struct pool__req *head);

/* Sets s up as op number op of the runner, with its KEYS and ARGV counts. */
void pool__batch_op_init(struct pool__script *s, unsigned op, unsigned keys, unsigned args);

/* ---- handshake.c --------------------------------------------------------------- */

/* Stores a script's SHA1 (len < POOL__SHA_SIZE; "" before SCRIPT LOAD
 * answered) and its encoded "EVALSHA <sha>" bulks. */
void pool__script_set_sha(struct pool__script *s, const char *sha, size_t len);

/* Pipelines the handshake of a freshly connected rc (counted in
 * rc->handshake). Returns 0 or -ENOMEM. */
int pool__hs_send(struct pool__rconn *rc);

/* Checks one handshake reply r to req on rc (and stores a SCRIPT LOAD's
 * SHA1). Returns 0, or -EPROTO with the reason in err. */
int pool__hs_check(struct pool__rconn *rc, const struct pool__req *req, const struct pool_reply *r,
                   char *err, size_t errlen);

/* ---- pool.c ------------------------------------------------------------------ */

/* Records the last connection error ("connect: Connection refused"). */
void pool__set_error(struct pool *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Uniform pseudo-random number in [0, n] for jitter. */
uint64_t pool__rand(struct pool *p, uint64_t n);

/* Delay before retry number attempt (0-based): backoff_min_ms doubling up
 * to backoff_max_ms, minus a random half (equal jitter). */
uint64_t pool__backoff_ms(struct pool *p, unsigned attempt);

/* ---- tls.c --------------------------------------------------------------------- */

/* With TLS on, makes c (just connecting towards host) a TLS connection:
 * on_connect then reports the end of the handshake. Returns 0 or -errno
 * (then c must be closed). */
int pool__tls_start(struct pool *p, struct sched_conn *c, const char *host);

/* Why c's TLS layer failed it ("certificate verify failed: ..."), or NULL
 * when the failure was not TLS's. */
const char *pool__tls_error(const struct sched_conn *c);

/* Drops the TLS context (pool_destroy). */
void pool__tls_deinit(struct pool *p);

/* ---- node.c ------------------------------------------------------------------ */

/* A new idle node for host:port (or unix_path), linked into p->nodes.
 * Returns NULL on allocation failure or a bad address. */
struct pool_node *pool__node_create(struct pool *p, const char *host, int port,
                                    const char *unix_path);

/* Starts connecting its command and (when the pub/sub mode is known)
 * pub/sub connections. */
void pool__node_start(struct pool_node *n);

/* Starts its pub/sub connection if it is not running (the mode just
 * became known). */
void pool__node_start_pubsub(struct pool_node *n);

/* Stops every connection for good (in-flight requests -ECONNRESET,
 * listeners LOST); the node becomes STOPPED. May invoke callbacks. */
void pool__node_stop(struct pool_node *n);

/* True once a STOPPED node's connections are all released. */
bool pool__node_is_idle(const struct pool_node *n);

/* Unlinks and frees an idle node. */
void pool__node_destroy(struct pool_node *n);

/* The hinted READY command connection, or the next ready one, or NULL. */
struct pool__rconn *pool__node_pick(struct pool_node *n, uint64_t hint);

/* True when at least one command connection is READY. */
bool pool__node_is_up(const struct pool_node *n);

/* Adds one sampled round trip to the node's latency stats. */
void pool__node_latency(struct pool_node *n, uint64_t us);

/* The node of p whose address is host:port, or NULL. */
struct pool_node *pool__node_find(struct pool *p, const char *host, size_t hostlen, int port);

/* ---- rconn.c hooks into the layers above ---------------------------------------- */

/* A command connection of node n became READY. */
void pool__node_conn_up(struct pool__rconn *rc);

/* A command connection failed (was_ready: it was serving). */
void pool__node_conn_down(struct pool__rconn *rc, bool was_ready);

/* The run_id n's server answered in a handshake (len bytes of id). A new
 * one after an earlier one means the server restarted, and may have lost
 * what it held: the holds of its slots are reported for a check, as after
 * a failover (on_topology, from the loop). */
void pool__node_run_id(struct pool_node *n, const char *id, size_t len);

/* ---- pubsub.c ------------------------------------------------------------------ */

/* n's pub/sub connection became READY: subscribe every channel homed on n. */
void pool__pubsub_up(struct pool_node *n);

/* n's READY pub/sub connection was lost: reset its channels and deliver
 * POOL_SUB_LOST to every listener that had POOL_SUB_READY. */
void pool__pubsub_down(struct pool_node *n);

/* One reply or push from n's READY pub/sub connection (borrowed). May
 * invoke listener callbacks. */
void pool__pubsub_reply(struct pool_node *n, const struct pool_reply *r);

/* Moves every channel whose home is no longer the owner of its slot (and
 * every homeless one) to the owner: unsubscribes on the old node (classic
 * mode), subscribes on the new one, LOST to listeners that had READY.
 * Cluster only. May invoke listener callbacks. */
void pool__pubsub_rehome(struct pool *p);

/* Re-sends SUBSCRIBE for channels of n still waiting for a confirmation
 * (after an error reply on its pub/sub connection). */
void pool__pubsub_retry(struct pool_node *n);

/* Channels with a listener on the homeless list. */
uint64_t pool__pubsub_homeless(const struct pool *p);

/* Channels with a listener homed on n. */
uint64_t pool__pubsub_count(const struct pool_node *n);

/* Frees the channel table; listeners still attached are detached. */
void pool__pubsub_deinit(struct pool *p);

/* ---- cluster.c / redirect.c ---------------------------------------------------- */

/* Creates the cluster state from opts.cluster_seeds. Returns 0 or -errno. */
int pool__cluster_create(struct pool *p);

/* Resolves the seeds and starts the topology connection. Returns 0 or
 * -errno (no seed resolves). */
int pool__cluster_start(struct pool *p);

/* Stops the topology connection and fails parked requests (-ECONNRESET). */
void pool__cluster_stop(struct pool *p);

/* True once the topology connection is released. */
bool pool__cluster_is_stopped(const struct pool *p);

void pool__cluster_destroy(struct pool *p);

/* The owner of slot, or NULL (unknown or not served). */
struct pool_node *pool__cluster_owner(const struct pool *p, int slot);

/* Any active node with a ready command connection, preferring hint's. */
struct pool_node *pool__cluster_any(struct pool *p, uint64_t hint);

/* Asks for a topology refresh now (coalesced with one in flight). */
void pool__cluster_refresh(struct pool *p);

/* Records that slot is served by host:port (a MOVED): creates the node
 * if new, updates the map, schedules a refresh. Returns the node or NULL
 * (allocation failure, bad address). empty host = same host as from. */
struct pool_node *pool__cluster_moved(struct pool *p, struct pool_node *from, int slot,
                                      const char *host, size_t hostlen, int port);

/* The active node at host:port, created (and started) if unknown.
 * empty host = from's host. NULL on failure. */
struct pool_node *pool__cluster_node_at(struct pool *p, struct pool_node *from, const char *host,
                                        size_t hostlen, int port);

/* A connection of the topology connection became READY / was released. */
void pool__cluster_topo_up(struct pool *p);
void pool__cluster_topo_released(struct pool *p);

/* n is no longer a master (sentinel: it answered READONLY): its slots
 * leave the map, it drains, the topology is asked for again. */
void pool__cluster_drop_node(struct pool *p, struct pool_node *n);

/* Stats of the cluster state. */
void pool__cluster_stats(const struct pool *p, struct pool_stats *st);

/* A caller request got an error reply r on rc. Returns true when the
 * pool took the request (re-sent, parked, or completed with a rewritten
 * reply); false: deliver r to the caller. Single node: MOVED/ASK become
 * the "is a Redis Cluster node" error; TRYAGAIN, CLUSTERDOWN, LOADING and
 * MASTERDOWN end in -ENOTCONN, never delivered. May invoke callbacks. */
bool pool__redirect(struct pool__rconn *rc, struct pool__req *req, const struct pool_reply *r);

/* Sends (or parks) a routed cluster request (kind CMD/EVAL, tail kept):
 * by req->target, else by req->slot. */
void pool__redirect_send(struct pool *p, struct pool__req *req);

/* A node came up: parked requests are tried again at once. */
void pool__redirect_kick(struct pool *p);

/* Parked requests aimed at n lose their target (n is going away). */
void pool__redirect_forget_node(struct pool *p, struct pool_node *n);

/* Sets up / stops (failing every parked request with -ECONNRESET) the
 * parked-request list of cl. */
void pool__redirect_init(struct pool__cluster *cl);
void pool__redirect_stop(struct pool__cluster *cl);

/* True while a connect attempt or handshake of n is under way. */
bool pool__node_is_connecting(const struct pool_node *n);

/* Fails every parked request with err. May invoke callbacks. */
void pool__redirect_fail_all(struct pool *p, int err);

/* ---- sentinel.c --------------------------------------------------------------- */

/* A master connection's ROLE said r, not master: counted, and the sentinel
 * that named this node (when it still serves) is replaced by the next. */
void pool__sentinel_not_master(struct pool__rconn *rc, const struct pool_reply *r);

/* The subscription connection became READY / lost READY / was released,
 * and one push from it (borrowed). */
void pool__sentinel_sub_up(struct pool *p);
void pool__sentinel_sub_down(struct pool *p);
void pool__sentinel_sub_released(struct pool *p);
void pool__sentinel_sub_reply(struct pool *p, const struct pool_reply *r);

/* Records msg as the last error of rc, named for a reader: "sentinel
 * host:port: msg" or "master NAME at host:port: msg". */
void pool__sentinel_conn_error(struct pool__rconn *rc, const char *msg);

/* Parses an error reply "<word> <slot> <host>:<port>" (MOVED, ASK) into
 * slot, host (NUL-terminated, hostsize bytes at most; "" when Redis left
 * it out) and port. Returns 0 or -EPROTO. */
int pool__redirect_parse(const struct pool_reply *r, int *slot, char *host, size_t hostsize,
                         int *port);

#ifdef __cplusplus
}
#endif

#endif
