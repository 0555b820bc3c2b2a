/* One upstream Redis connection (module-private to pool/): a node's
 * command connection with its pipeline of in-flight requests, a node's
 * pub/sub connection, a cluster pool's topology connection (a sentinel
 * pool's queries to a sentinel), or a sentinel subscription. The state
 * machine, invariants and ownership rules are in the design block at the
 * top of rconn.c. */
#ifndef LP_POOL_RCONN_H
#define LP_POOL_RCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "pool/pool.h"
#include "pool/reply.h"
#include "sched/conn-t.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct pool_node;
struct pool__addr;
struct pool__req;
struct pool__resp_reader;

enum pool__rconn_state {
    POOL__RCONN_DISCONNECTED = 0, /* no socket; the backoff timer may be pending */
    POOL__RCONN_CONNECTING = 1,   /* connect in flight; connect deadline armed */
    POOL__RCONN_HANDSHAKE = 2,    /* AUTH/SELECT/SCRIPT LOAD replies pending */
    POOL__RCONN_READY = 3,        /* accepting requests (pub/sub: subscribing) */
    POOL__RCONN_CLOSING = 4,      /* socket closed, waiting for on_release */
};

enum pool__rconn_kind {
    POOL__RCONN_CMD = 1,      /* a node's command connection: FIFO of requests */
    POOL__RCONN_PUBSUB = 2,   /* a node's pub/sub connection: pushes go to pubsub.c */
    POOL__RCONN_TOPO = 3,     /* a cluster's topology connection: the pool's own queries */
    POOL__RCONN_SENTINEL = 4, /* a sentinel subscription (+switch-master): pushes to sentinel.c */
};

struct pool__rconn {
    struct sched_conn conn;  /* owned: stream state, live unless DISCONNECTED */
    struct pool *pool;       /* borrowed: the owning pool */
    struct pool_node *node;  /* borrowed: the owning node, NULL for TOPO and SENTINEL */
    struct pool__addr *addr; /* borrowed: where to connect (the node's, or the topology's) */
    struct pool__resp_reader *reader; /* owned: parser of the current socket, or NULL */
    struct list fifo;                 /* owned: struct pool__req awaiting replies, send order */
    struct sched_timer timer;         /* backoff, connect deadline or timeout tick, by state */
    enum pool__rconn_state state;     /* see the design block in rconn.c */
    enum pool__rconn_kind kind;       /* command or pub/sub */
    unsigned id;                      /* index for logs */
    unsigned attempts;                /* failures since last READY: backoff exponent */
    unsigned handshake;               /* handshake replies still expected */
    bool ever_ready;                  /* was READY once (for the reconnects stat) */
    bool warned;                      /* a failure was logged at WARN since last READY */
    bool recycle;                     /* READY: drop and reconnect at the next tick */
    bool stopped;                     /* pool__rconn_stop() was called: no reconnect */
    struct pool__req *sample;         /* borrowed: the request whose round trip is timed, or NULL */
    uint64_t sample_ns;               /* clock_mono_ns() when sample was sent */
    uint64_t last_rx_ms;              /* loop time of the last bytes received */
    uint64_t ping_sent_ms;            /* pub/sub: loop time of the last keepalive PING */
    /* The open batch (pool/batch.c): requests already in the FIFO whose
     * bytes are written when it closes, before anything else is. */
    struct pool__req *bhead; /* borrowed: its first request, or NULL when none is open */
    unsigned bn;             /* requests in it */
    unsigned bkeys;          /* their keys */
    unsigned bargs;          /* their ops and arguments */
    size_t bbytes;           /* their tails' bytes (less the numkeys bulks) and ops' */
    struct list unsent;      /* owned: struct pool__req of a batch that could not be
                                written, failed with the FIFO (pool/batch.c) */
};

/* Sets up an idle connection of p, for node n (NULL for TOPO), that
 * connects to addr. */
void pool__rconn_init(struct pool__rconn *rc, struct pool *p, struct pool_node *n,
                      struct pool__addr *addr, enum pool__rconn_kind kind, unsigned id);

/* Frees what an idle (DISCONNECTED, stopped) connection still holds. */
void pool__rconn_deinit(struct pool__rconn *rc);

/* Starts the first connect attempt now, unless one is under way (also
 * after a stop: the connection reconnects once released). */
void pool__rconn_start(struct pool__rconn *rc);

/* Closes for good: in-flight requests get -ECONNRESET, the pub/sub layer
 * is told (LOST), no reconnect follows. May invoke callbacks. */
void pool__rconn_stop(struct pool__rconn *rc);

/* Drops a READY connection from a timer soon (never from inside this call)
 * and reconnects; used when the output stream could not be kept whole. */
void pool__rconn_recycle_later(struct pool__rconn *rc);

static inline bool pool__rconn_is_ready(const struct pool__rconn *rc)
{
    return rc->state == POOL__RCONN_READY;
}

/* True while a connect attempt or handshake is under way. */
static inline bool pool__rconn_is_connecting(const struct pool__rconn *rc)
{
    return rc->state == POOL__RCONN_CONNECTING || rc->state == POOL__RCONN_HANDSHAKE;
}

/* Formats pre ++ argv into the output and queues req (kind and fields
 * set; taken over) for its reply, on a connection with a socket. Returns 0
 * or -ENOMEM (req recycled, nothing appended). */
int pool__rconn_issue(struct pool__rconn *rc, struct pool__req *req, int npre,
                      const char *const *pre, const size_t *prelens, int argc,
                      const char *const *argv, const size_t *lens);

/* Queues req (kind CMD or INTERNAL, cb/arg set; taken over) as argv on
 * a READY command or topology connection (argv borrowed for the call).
 * keep: copy the formatted command into req->tail for a re-send (cluster).
 * Returns 0 (one callback will come) or -ENOMEM (req recycled). */
int pool__rconn_command(struct pool__rconn *rc, struct pool__req *req, int argc,
                        const char *const *argv, const size_t *lens, bool keep);

/* Queues req (cb/arg set; taken over) as EVALSHA of script (valid id,
 * 0 <= numkeys <= argc) on a READY command connection, keeping the
 * arguments for a NOSCRIPT retry or a re-send. Returns 0 or -ENOMEM (req
 * recycled). */
int pool__rconn_eval(struct pool__rconn *rc, struct pool__req *req, unsigned script, int numkeys,
                     int argc, const char *const *argv, const size_t *lens);

/* Sends a kept request again (cluster: after MOVED/ASK/TRYAGAIN) on a
 * READY command connection, preceded by ASKING when req->asking. Returns 0
 * or -ENOMEM (req untouched: the caller completes it). */
int pool__rconn_resend(struct pool__rconn *rc, struct pool__req *req);

/* Appends a command that expects no FIFO reply (pub/sub SUBSCRIBE and
 * UNSUBSCRIBE) to a READY connection. Returns 0 or -ENOMEM (nothing sent). */
int pool__rconn_send(struct pool__rconn *rc, int argc, const char *const *argv, const size_t *lens);

/* Output buffer for formatting pub/sub commands directly; call
 * pool__rconn_flush() after appending. */
struct buf *pool__rconn_out(struct pool__rconn *rc);
void pool__rconn_flush(struct pool__rconn *rc);

#ifdef __cplusplus
}
#endif

#endif
