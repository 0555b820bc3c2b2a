/* The upstream Redis pool: a few pipelined command connections plus one
 * pub/sub connection, shared by every client of the proxy.
 *
 * Requests are appended to a connection's output and go out with everything
 * else queued in the same loop iteration (one write per connection per
 * iteration). Replies are matched FIFO. Scripts registered at creation are
 * SCRIPT LOADed on every (re)connect and run with EVALSHA; a NOSCRIPT reply
 * reloads and retries once, invisibly to the caller.
 *
 * Shape: the pool routes by key to a node (today exactly one: a single Redis
 * master) and by hint to one of that node's connections, so a Cluster upstream
 * (one node per master, slot routing, MOVED/ASK) or a Sentinel-followed master
 * slots in behind pool_route() without changing this API.
 *
 * Failure contract: a request either gets exactly one callback, or the submit
 * call returns < 0 and no callback ever comes. Requests in flight when a
 * connection dies get err = -ECONNRESET; requests that wait longer than the
 * request timeout get -ETIMEDOUT (and the connection is recycled, since a
 * FIFO pipeline cannot skip a reply). While no connection is ready, submits
 * fail fast with -ENOTCONN. Reconnects use exponential backoff. */
#ifndef LP_POOL_POOL_H
#define LP_POOL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "pool/pubsub-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct sched_loop;
struct sched_tls_ctx;

/* Reply callback. err == 0: r is the reply (possibly REDIS_REPLY_ERROR),
 * borrowed for the call. err < 0: r is NULL (-ECONNRESET, -ETIMEDOUT,
 * -ENOMEM, -EPROTO). */
typedef void pool_reply_fn(void *arg, const redisReply *r, int err);

struct pool_opts {
    const char *host;            /* TCP host, or NULL when unix_path is set */
    int port;                    /* TCP port */
    const char *unix_path;       /* unix socket path, or NULL */
    const char *user;            /* AUTH user, or NULL */
    const char *password;        /* AUTH password, or NULL (no AUTH) */
    int db;                      /* SELECT db when non-zero */
    unsigned size;               /* command connections (>= 1) */
    unsigned connect_timeout_ms; /* per connect attempt */
    unsigned request_timeout_ms; /* oldest in-flight reply age before recycling */
    unsigned backoff_min_ms;     /* first reconnect delay */
    unsigned backoff_max_ms;     /* reconnect delay cap */
};

/* Fills opts with defaults (localhost:6379, size 2, 1000/3000/50/2000 ms). */
void pool_opts_default(struct pool_opts *o);

/* A script the pool keeps loaded. Text is borrowed for the pool's life. */
struct pool_script {
    const char *name; /* for logs */
    const char *text; /* Lua source */
};

/* Copies opts (strings included). scripts are borrowed; their index is the
 * script id for pool_eval(). Returns 0 or -ENOMEM / -EINVAL. */
int pool_create(struct pool **out, struct sched_loop *loop, const struct pool_opts *opts,
                const struct pool_script *scripts, size_t nscripts);

/* Upstream TLS (rediss://), set before pool_start() or at any time after
 * (a reload): every connection made from then on runs a TLS handshake with
 * ctx (a SCHED_TLS_CLIENT context; the pool takes a reference; NULL turns
 * TLS off) before its AUTH, and the server's certificate must name
 * server_name, or the host the connection goes to when server_name is
 * NULL or "". Connections already up keep their session. A failed
 * handshake is a failed connect: backoff and retry, last_error "TLS:
 * <OpenSSL's reason>", requests fail fast meanwhile. Returns 0, -EINVAL
 * (a unix socket upstream) or -ENOMEM (nothing changed). */
int pool_set_tls(struct pool *p, struct sched_tls_ctx *ctx, const char *server_name);

/* Starts connecting (command and pub/sub connections). Returns 0 or -errno
 * (e.g. the host does not resolve). */
int pool_start(struct pool *p);

/* Closes every connection; pending requests get -ECONNRESET callbacks and
 * subscribers POOL_SUB_LOST. Call pool_is_stopped() / run the loop until all
 * connections are released, then pool_destroy(). */
void pool_stop(struct pool *p);
bool pool_is_stopped(const struct pool *p);
void pool_destroy(struct pool *p);

/* True when at least one command connection is ready (scripts loaded). */
bool pool_is_ready(const struct pool *p);

/* Sends a command (argv borrowed for the call). hint picks the connection
 * (callers pass a per-client number so one client's requests stay in order
 * on one connection). Returns 0 (callback will come) or -ENOTCONN/-ENOMEM. */
int pool_command(struct pool *p, uint64_t hint, int argc, const char *const *argv,
                 const size_t *lens, pool_reply_fn *cb, void *arg);

/* EVALSHA of script id with numkeys keys: argv holds keys then args.
 * NOSCRIPT is retried once with a reload. Same return contract. */
int pool_eval(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
              const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg);

/* Pub/sub: one upstream SUBSCRIBE per channel, one listener per channel.
 * Starting a sub copies the channel name. The listener gets POOL_SUB_READY
 * each time the subscription is confirmed (first time and after every
 * reconnect), POOL_SUB_MESSAGE per message, POOL_SUB_LOST when the pub/sub
 * connection dropped (messages may have been missed; READY follows once it
 * is back). Returns 0 or -ENOMEM / -EEXIST (channel has a listener). */
int pool_sub_start(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                   pool_sub_fn *cb);

/* Detaches the listener and sends UNSUBSCRIBE. No callback follows; s may
 * be freed at once. */
void pool_sub_stop(struct pool *p, struct pool_sub *s);

struct pool_stats {
    unsigned conns;            /* command connections configured */
    unsigned conns_ready;      /* command connections ready */
    bool pubsub_ready;         /* pub/sub connection subscribed-capable */
    uint64_t channels;         /* channels subscribed or subscribing */
    uint64_t requests;         /* requests sent */
    uint64_t inflight;         /* requests awaiting a reply */
    uint64_t reconnects;       /* successful reconnects after a loss */
    uint64_t errors;           /* requests failed by connection loss or timeout */
    uint64_t batches;          /* writes (flushes) to command connections */
    uint64_t noscript_retries; /* NOSCRIPT reloads */
    const char *state;         /* "up", "connecting", "down" */
    const char *last_error;    /* last connection error text, or "" */
};
void pool_get_stats(const struct pool *p, struct pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif
