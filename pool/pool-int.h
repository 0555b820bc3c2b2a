/* Module-private declarations of pool/: the pool object, its upstream
 * node, the request records of the pipelines, and the calls between
 * pool.c (options, routing, stats), rconn.c (connections) and pubsub.c
 * (channel table). Nothing outside pool/ and its unit tests includes this. */
#ifndef LP_POOL_POOL_INT_H
#define LP_POOL_POOL_INT_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common/hmap.h"
#include "common/list.h"
#include "pool/pool.h"
#include "pool/rconn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_loop;

/* Tail bytes kept inline in a request for a NOSCRIPT retry; longer
 * argument lists are copied to the heap. Lock scripts take a key, an owner
 * id and a lease: well under this. */
#define POOL__REQ_INLINE 160

/* Longest script SHA1 in hex, plus the NUL. */
#define POOL__SHA_SIZE 41

enum pool__req_kind {
    POOL__REQ_CMD = 1,    /* caller command */
    POOL__REQ_EVAL = 2,   /* caller EVALSHA, retried once on NOSCRIPT */
    POOL__REQ_AUTH = 3,   /* handshake: AUTH */
    POOL__REQ_SELECT = 4, /* handshake: SELECT */
    POOL__REQ_SCRIPT = 5, /* handshake: SCRIPT LOAD of scripts[script] */
    POOL__REQ_PING = 6,   /* handshake: PING when there is nothing else to send */
};

/* One expected reply in a connection's FIFO. Records are recycled through
 * pool.free_reqs. */
struct pool__req {
    struct list node;           /* in pool__rconn.fifo, or in pool.free_reqs */
    pool_reply_fn *cb;          /* borrowed: caller callback (CMD, EVAL) */
    void *arg;                  /* borrowed: callback argument */
    uint64_t sent_ms;           /* loop time of the (last) send */
    enum pool__req_kind kind;   /* what the reply is for */
    unsigned script;            /* EVAL, SCRIPT: script id */
    unsigned ntail;             /* EVAL: bulks in tail (numkeys, keys, args) */
    bool retried;               /* EVAL: the NOSCRIPT retry was sent */
    char *tail;                 /* EVAL: owned when != inl: formatted bulks, or NULL */
    size_t tail_len;            /* bytes in tail */
    char inl[POOL__REQ_INLINE]; /* owned: inline tail storage */
};

/* A script the pool keeps loaded on every command connection. */
struct pool__script {
    const char *name;         /* borrowed: for logs */
    const char *text;         /* borrowed: Lua source */
    size_t text_len;          /* strlen(text) */
    char sha[POOL__SHA_SIZE]; /* SHA1 returned by SCRIPT LOAD, "" until then */
};

/* One upstream master and its command connections. Today the pool has
 * exactly one; a Cluster upstream would have one per master. */
struct pool_node {
    struct pool *pool;         /* borrowed: owner */
    struct pool__rconn *conns; /* owned: nconns command connections */
    unsigned nconns;           /* opts.size */
};

struct pool {
    struct sched_loop *loop;      /* borrowed: the loop driving every connection */
    struct pool_opts opts;        /* copy; string fields owned (strdup) */
    struct pool__script *scripts; /* owned: nscripts entries */
    size_t nscripts;              /* registered scripts */
    struct pool_node node;        /* the single upstream master */
    struct pool__rconn pubsub;    /* the pub/sub connection */
    struct hmap chans;            /* owned buckets: struct pool_chan by name */
    struct list chan_list;        /* owned: every struct pool_chan */
    uint64_t nsubs;               /* channels with a listener attached */
    struct list free_reqs;        /* owned: recycled struct pool__req */
    size_t nfree_reqs;            /* records on free_reqs */
    struct sockaddr_storage addr; /* resolved upstream address */
    socklen_t addrlen;            /* 0 until resolved (re-resolve on failure) */
    char where[128];              /* "host:port" or the unix path, for logs */
    uint64_t rng;                 /* xorshift state for backoff jitter */
    bool started;                 /* pool_start() was called */
    bool stopping;                /* pool_stop() was called: no reconnects */
    uint64_t requests;            /* stats: caller requests sent */
    uint64_t inflight;            /* stats: caller requests awaiting a reply */
    uint64_t reconnects;          /* stats: READY again after a loss */
    uint64_t errors;              /* stats: requests failed by loss or timeout */
    uint64_t batches;             /* stats: writes to command connections */
    uint64_t noscript_retries;    /* stats: NOSCRIPT retries */
    char last_error[128];         /* last connection error text, or "" */
    struct sched_tls_ctx *tls;    /* owned reference: upstream TLS (tls.c), NULL: plain */
    char *tls_server_name;        /* owned: name to verify instead of the host, or NULL */
};

/* Node that serves key (today always the single node). */
struct pool_node *pool__route(struct pool *p, const char *key, size_t len);

/* A free request record (fields reset), or NULL on allocation failure. */
struct pool__req *pool__req_get(struct pool *p);

/* Returns a request record (not on any list) to the free list. */
void pool__req_put(struct pool *p, struct pool__req *req);

/* Resolves the upstream address into p->addr unless cached. Returns 0 or
 * -errno (-EHOSTUNREACH when the name does not resolve). */
int pool__resolve(struct pool *p);

/* Records the last connection error ("connect: Connection refused"). */
void pool__set_error(struct pool *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Uniform pseudo-random number in [0, n] for jitter. */
uint64_t pool__rand(struct pool *p, uint64_t n);

/* tls.c: with TLS on, makes c (just connecting towards host) a TLS
 * connection: on_connect then reports the end of the handshake. Returns 0
 * or -errno (then c must be closed). */
int pool__tls_start(struct pool *p, struct sched_conn *c, const char *host);

/* tls.c: records why c's TLS layer failed it in last_error ("TLS: ...");
 * false when the failure was not TLS's. */
bool pool__tls_report(struct pool *p, const struct sched_conn *c);

/* tls.c: drops the TLS context (pool_destroy). */
void pool__tls_deinit(struct pool *p);

/* pubsub.c: the pub/sub connection became READY: subscribe every channel. */
void pool__pubsub_up(struct pool *p);

/* pubsub.c: the READY pub/sub connection was lost: reset the channel table
 * and deliver POOL_SUB_LOST to every listener that had POOL_SUB_READY. */
void pool__pubsub_down(struct pool *p);

/* pubsub.c: one reply or push from the READY pub/sub connection
 * (borrowed). May invoke listener callbacks. */
void pool__pubsub_reply(struct pool *p, const redisReply *r);

/* pubsub.c: frees the channel table; listeners still attached are detached. */
void pool__pubsub_deinit(struct pool *p);

#ifdef __cplusplus
}
#endif

#endif
