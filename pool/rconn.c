/* One upstream Redis connection: connect, handshake, pipelined requests
 * with FIFO reply matching, NOSCRIPT retry, timeouts, and reconnect with
 * exponential backoff. The same machine drives every kind: a node's
 * command connections, a node's pub/sub connection (replies go to
 * pubsub.c once it is READY), a cluster pool's topology connection
 * (the pool's own CLUSTER SHARDS queries, answered to cluster.c; a
 * sentinel pool's master queries) and a sentinel subscription (pushes go
 * to sentinel.c once it is READY).
 *
 * DESIGN BLOCK
 *
 * States (enum pool__rconn_state), and what the one timer means in each:
 *
 *     DISCONNECTED --start / backoff timer--> CONNECTING
 *     CONNECTING --on_connect(0)--> HANDSHAKE --last handshake reply--> READY
 *     CONNECTING | HANDSHAKE | READY --error, hangup, timeout, stop--> CLOSING
 *     CLOSING --on_release--> DISCONNECTED (+ backoff timer unless stopped)
 *
 *     With upstream TLS (tls.c) CONNECTING includes the TLS handshake:
 *     on_connect comes once it is done, or with its failure.
 *
 *     DISCONNECTED  timer = backoff before the next attempt (idle once stopped),
 *                   or a short poll while a host name is being resolved
 *                   (addr.c: never blocks the loop)
 *     CONNECTING,
 *     HANDSHAKE     timer = connect deadline (connect_timeout_ms covers both)
 *     READY         command, topology: request-timeout check, armed only
 *                   while the FIFO is non-empty, for when the oldest
 *                   request expires;
 *                   pub/sub, sentinel: keepalive PING every
 *                   request_timeout_ms;
 *                   either: "now" when a recycle was requested
 *     CLOSING       no timer
 *
 * Handshake (what is sent: handshake.c): AUTH, ROLE (a sentinel's
 * master), SELECT, SCRIPT LOAD of every script (command connections, so
 * every node of a cluster has them, a promoted replica included), or a
 * PING, all pipelined in one write: READY always means the server
 * answered (a frozen server accepts connections into its backlog). Any
 * error reply fails the attempt (wrong password, NOAUTH, LOADING, bad
 * script, a ROLE that is not master) and the connection backs off and
 * retries.
 *
 * Invariants:
 *   - conn is registered with the loop exactly from CONNECTING to CLOSING;
 *     its buffers are freed at on_release, re-initialised before connect.
 *   - reader exists from on_connect(0) until on_release.
 *   - fifo holds one struct pool__req per expected reply, in send order. It
 *     is non-empty only in HANDSHAKE and READY; leaving those states empties
 *     it and every caller request gets exactly one callback (-ECONNRESET,
 *     -ETIMEDOUT, -EPROTO).
 *   - only READY command connections take caller requests (pool.c routes
 *     nowhere else), so a submit can never land on a dying connection.
 *   - the pub/sub FIFO carries only handshake replies; when READY every
 *     reply is a push (or a subscribe confirmation) for pubsub.c (for
 *     sentinel.c on a sentinel subscription).
 *   - an ASKING record (cluster) is always directly followed in the FIFO
 *     by the request it prefixes; its reply is dropped.
 *   - a WAIT record (pool_eval_wait) is always directly behind its EVAL
 *     in the FIFO. When the EVAL answers, the record takes the caller
 *     over and holds the reply (owned) until WAIT answers; when the EVAL
 *     errs or is re-sent, the record only drops WAIT's answer (a re-sent
 *     EVAL gets a new WAIT behind it where it goes).
 *   - sample, when set, is a caller request on this FIFO: the one whose
 *     round trip is being timed for the node's latency stats (one at a
 *     time, so a busy pipeline costs one clock read per round trip).
 *
 * Ownership: the node (the cluster state, for the topology connection;
 * the sentinel state, for its subscription) embeds and owns each
 * connection. A connection owns its reader and the
 * records in its fifo (records come from and return to pool.free_reqs).
 * Replies are owned by on_data and freed after dispatch; callbacks borrow
 * them for the call.
 *
 * Re-entrancy: a record is unlinked and recycled before its callback runs,
 * so the callback may submit (to this connection too), start or stop
 * subscriptions, or pool_stop(). After every dispatch on_data re-checks the
 * state and stops parsing when the connection was closed under it; the
 * reader and its unparsed bytes are freed at on_release, never inside
 * on_data. Failing the FIFO detaches it first and happens after the state
 * left READY, so re-entrant submits go to another connection or get
 * -ENOTCONN.
 *
 * NOSCRIPT (after SCRIPT FLUSH or a failover to a fresh server): the EVALSHA
 * is re-sent once as EVAL with the script text, which also loads the
 * script; the retry goes to the back of the pipeline, so it runs after
 * commands queued later on the same connection.
 *
 * Other error replies of a node's caller requests go to redirect.c first
 * (MOVED, ASK, TRYAGAIN...: the command did not run, so it may be sent
 * again, here or on another node, with pool__rconn_resend()). A request
 * whose connection died after it was sent is never re-sent: it may have
 * run. stopped (set by pool__rconn_stop) is what keeps on_release from
 * reconnecting: the whole pool stopping, or one node leaving the cluster.
 *
 * Rejected: one timer per purpose (three timers to keep consistent over
 * every transition); reconnecting from on_release at once (a server that
 * accepts and closes would make us spin); skipping a timed-out reply (a
 * FIFO pipeline cannot, so the connection is recycled); retrying NOSCRIPT
 * with SCRIPT LOAD + EVALSHA (two commands and two replies to match where
 * one EVAL does). */
#include "pool/rconn.h"

#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/reply.h"
#include "pool/resp.h"
#include "sched/loop.h"

static void rconn_on_data(struct sched_conn *c, const char *data, size_t len);
static void rconn_on_hangup(struct sched_conn *c, int err);
static void rconn_on_connect(struct sched_conn *c, int err);
static void rconn_on_release(struct sched_conn *c);
static void rconn_on_flush(struct sched_conn *c);

static const struct sched_conn_ops rconn_ops = {
    .on_data = rconn_on_data,
    .on_hangup = rconn_on_hangup,
    .on_connect = rconn_on_connect,
    .on_drain = NULL,
    .on_flush = rconn_on_flush,
    .on_release = rconn_on_release,
};

static struct pool__rconn *rconn_of(struct sched_conn *c)
{
    return LP_CONTAINER_OF(c, struct pool__rconn, conn);
}

static const char *rconn_name(const struct pool__rconn *rc)
{
    if (rc->kind == POOL__RCONN_PUBSUB)
        return "pubsub";
    if (rc->kind == POOL__RCONN_SENTINEL)
        return "sentinel";
    return rc->kind == POOL__RCONN_TOPO ? "topology" : "cmd";
}

/* The pool's last_error; in a cluster prefixed with the node's address. */
static void rconn_set_error(struct pool__rconn *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rconn_set_error(struct pool__rconn *rc, const char *fmt, ...)
{
    char msg[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (rc->pool->kind == POOL__UP_SENTINEL)
        pool__sentinel_conn_error(rc, msg);
    else if (rc->pool->cl)
        pool__set_error(rc->pool, "%s: %s", rc->addr->where, msg);
    else
        pool__set_error(rc->pool, "%s", msg);
}

static bool rconn_is_open(const struct pool__rconn *rc)
{
    return rc->state == POOL__RCONN_HANDSHAKE || rc->state == POOL__RCONN_READY;
}

static void rconn_arm(struct pool__rconn *rc, uint64_t delay_ms)
{
    sched_loop_timer_in(rc->pool->loop, &rc->timer, delay_ms);
}

static void rconn_disarm(struct pool__rconn *rc)
{
    sched_loop_timer_del(rc->pool->loop, &rc->timer);
}

/* Logs the last error: every loss of a READY connection, and the first
 * failed attempt of a streak, at WARN; repeats while the server stays away
 * at DEBUG, so a down Redis costs one line, not one per retry. */
static void rconn_log_failure(struct pool__rconn *rc, bool loss)
{
    enum log_level lvl = (loss || !rc->warned) ? LOG_LVL_WARN : LOG_LVL_DEBUG;

    rc->warned = true;
    log_msg(lvl, "pool: %s conn %u to %s %s: %s", rconn_name(rc), rc->id, rc->addr->where,
            loss ? "lost" : "failed", rc->pool->last_error);
}

static void rconn_report(struct pool__rconn *rc, const char *what, int err)
{
    rconn_set_error(rc, "%s: %s", what, strerror(-err));
    rconn_log_failure(rc, false);
}

/* Exponential backoff with equal jitter (pool__backoff_ms), so that
 * connections do not retry in lockstep. */
static uint64_t rconn_backoff_ms(struct pool__rconn *rc)
{
    return pool__backoff_ms(rc->pool, rc->attempts++);
}

/* Frees the per-socket state once the loop released the socket. */
static void rconn_free_io(struct pool__rconn *rc)
{
    if (rc->reader)
        pool__resp_reader_free(rc->reader);
    rc->reader = NULL;
    buf_deinit(&rc->conn.out);
    buf_deinit(&rc->conn.sending);
}

/* An idle sched_conn: empty buffers, no fd. sched_conn_connect()
 * initialises everything again for each attempt. */
static void rconn_reset_io(struct pool__rconn *rc)
{
    memset(&rc->conn, 0, sizeof(rc->conn));
    rc->conn.fd = -1;
}

/* Marks output pending; the first append since the last flush starts a
 * new write (the batches stat). */
static void rconn_sent(struct pool__rconn *rc, bool fresh)
{
    sched_conn_mark_dirty(&rc->conn);
    if (fresh && rc->kind == POOL__RCONN_CMD)
        rc->pool->batches++;
}

static uint64_t rconn_timeout_left(const struct pool__rconn *rc, const struct pool__req *oldest)
{
    uint64_t age = sched_loop_now_ms(rc->pool->loop) - oldest->sent_ms;
    uint64_t limit = rc->pool->opts.request_timeout_ms;

    return age >= limit ? 0 : limit - age;
}

/* Queues req (already formatted into the output) for its reply. A
 * caller request on a node's connection becomes the timed sample when
 * none is in flight. */
static void rconn_enqueue(struct pool__rconn *rc, struct pool__req *req, bool fresh)
{
    req->sent_ms = sched_loop_now_ms(rc->pool->loop);
    list_add_tail(&rc->fifo, &req->node);
    if (!rc->sample && rc->node && pool__req_is_caller(req)) {
        rc->sample = req;
        rc->sample_ns = clock_mono_ns();
    }
    rconn_sent(rc, fresh);
    if (rc->state == POOL__RCONN_READY && !sched_timer_is_pending(&rc->timer))
        rconn_arm(rc, rc->pool->opts.request_timeout_ms);
}

int pool__rconn_issue(struct pool__rconn *rc, struct pool__req *req, int npre,
                      const char *const *pre, const size_t *prelens, int argc,
                      const char *const *argv, const size_t *lens)
{
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh;
    int err;

    pool__batch_close(rc);
    fresh = buf_size(b) == 0;
    err = pool__resp_command_split(b, npre, pre, prelens, argc, argv, lens);

    if (err < 0) {
        pool__req_put(rc->pool, req);
        return err;
    }
    rconn_enqueue(rc, req, fresh);
    return 0;
}

/* Hands a caller request its one completion (pool__req_complete). */
static void rconn_complete(struct pool__rconn *rc, struct pool__req *req,
                           const struct pool_reply *r, int err)
{
    if (err < 0 && rc->node)
        rc->node->errors++;
    pool__req_complete(rc->pool, req, r, err);
}

/* Formats WAIT behind req (an EVAL of pool_eval_wait() just queued) and
 * queues its record. When that fails, req goes without: acked stays -1,
 * which its caller takes as "not replicated". */
static void rconn_append_wait(struct pool__rconn *rc, struct pool__req *req)
{
    char nrep[24], tmo[24];
    const char *argv[3] = {"WAIT", nrep, tmo};
    size_t lens[3] = {4, 0, 0};
    struct pool__req *w;

    if (!req->wait)
        return;
    lens[1] = pool__resp_u64(nrep, req->wait->replicas);
    lens[2] = pool__resp_u64(tmo, req->wait->timeout_ms);
    w = pool__req_get(rc->pool);
    if (!w || pool__resp_command(sched_conn_wbuf(&rc->conn), 3, argv, lens) < 0) {
        if (w)
            pool__req_put(rc->pool, w);
        req->wait = NULL;
        return;
    }
    w->kind = POOL__REQ_WAIT;
    rconn_enqueue(rc, w, false);
}

/* Empties the FIFO: caller requests fail with err. The FIFO is detached
 * first so callbacks never see it half-drained. */
static void rconn_fail_all(struct pool__rconn *rc, int err)
{
    struct list dead;
    struct list *n;

    list_init(&dead);
    list_splice_tail_init(&dead, &rc->fifo);
    list_splice_tail_init(&dead, &rc->unsent);
    pool__batch_forget(rc); /* its records are in dead */
    rc->handshake = 0;
    rc->sample = NULL;
    while ((n = list_first(&dead))) {
        struct pool__req *req = list_entry(n, struct pool__req, node);

        list_del_init(n);
        if (pool__req_has_caller(req))
            rconn_complete(rc, req, NULL, err);
        else
            pool__req_put(rc->pool, req);
    }
}

/* Closes the socket after a failure or on stop: requests fail with err,
 * the layers above learn of the loss (pub/sub listeners, the cluster's
 * failure-driven refresh), and on_release schedules the reconnect. May
 * invoke callbacks. */
static void rconn_drop(struct pool__rconn *rc, int err)
{
    bool was_ready = rc->state == POOL__RCONN_READY;

    rconn_disarm(rc);
    rc->state = POOL__RCONN_CLOSING;
    rc->recycle = false;
    sched_conn_close(&rc->conn, false);
    rconn_fail_all(rc, err);
    if (was_ready && rc->kind == POOL__RCONN_PUBSUB)
        pool__pubsub_down(rc->node);
    if (was_ready && rc->kind == POOL__RCONN_SENTINEL)
        pool__sentinel_sub_down(rc->pool);
    if (rc->kind == POOL__RCONN_CMD && !rc->stopped)
        pool__node_conn_down(rc, was_ready);
}

static void rconn_ready(struct pool__rconn *rc)
{
    struct pool *p = rc->pool;

    rconn_disarm(rc);
    rc->state = POOL__RCONN_READY;
    rc->attempts = 0;
    rc->warned = false;
    if (rc->ever_ready)
        p->reconnects++;
    log_msg(rc->kind == POOL__RCONN_TOPO || rc->kind == POOL__RCONN_SENTINEL ? LOG_LVL_DEBUG
                                                                             : LOG_LVL_INFO,
            "pool: %s conn %u to %s ready%s", rconn_name(rc), rc->id, rc->addr->where,
            rc->ever_ready ? " again" : "");
    rc->ever_ready = true;
    if (rc->kind == POOL__RCONN_CMD) {
        pool__node_conn_up(rc);
        return;
    }
    if (rc->kind == POOL__RCONN_TOPO) {
        pool__cluster_topo_up(p);
        return;
    }
    rc->ping_sent_ms = 0;
    rconn_arm(rc, p->opts.request_timeout_ms);
    if (rc->kind == POOL__RCONN_SENTINEL)
        pool__sentinel_sub_up(p);
    else
        pool__pubsub_up(rc->node);
}

/* Polling period while a host name is being resolved off the loop. */
#define RCONN_RESOLVE_POLL_MS 5

/* Starts one attempt now; on a synchronous failure backs off instead. */
static void rconn_connect(struct pool__rconn *rc)
{
    struct pool *p = rc->pool;
    char msg[160];
    int err = pool__addr_resolve(rc->addr, msg, sizeof(msg));

    if (err == -EINPROGRESS) {
        rconn_arm(rc, RCONN_RESOLVE_POLL_MS);
        return;
    }
    if (err < 0) {
        rconn_set_error(rc, "%s", msg);
        rconn_log_failure(rc, false);
        rconn_arm(rc, rconn_backoff_ms(rc));
        return;
    }
    err = sched_conn_connect(p->loop, &rc->conn, (const struct sockaddr *)&rc->addr->ss,
                             rc->addr->sslen, &rconn_ops);
    if (err < 0) {
        rconn_report(rc, "connect", err);
        rconn_free_io(rc);
        rconn_arm(rc, rconn_backoff_ms(rc));
        return;
    }
    rc->state = POOL__RCONN_CONNECTING;
    err = pool__tls_start(p, &rc->conn, rc->addr->host);
    if (err < 0) { /* on_release backs off */
        rconn_report(rc, "TLS setup", err);
        rc->state = POOL__RCONN_CLOSING;
        sched_conn_close(&rc->conn, false);
        return;
    }
    rconn_arm(rc, p->opts.connect_timeout_ms);
}

/* ---- handshake ---------------------------------------------------------- */

/* One handshake reply (handshake.c checks it); the last one makes the
 * connection READY, any failure drops it. */
static void rconn_hs_reply(struct pool__rconn *rc, struct pool__req *req,
                           const struct pool_reply *r)
{
    char msg[128];
    int err = pool__hs_check(rc, req, r, msg, sizeof(msg));

    pool__req_put(rc->pool, req);
    if (err == 0) {
        if (--rc->handshake == 0)
            rconn_ready(rc);
        return;
    }
    rconn_set_error(rc, "%s", msg);
    rconn_log_failure(rc, false);
    rconn_drop(rc, -ECONNRESET);
}

/* ---- replies ------------------------------------------------------------- */

/* Re-sends an EVALSHA that got NOSCRIPT as EVAL with the text, once. */
static void rconn_retry_eval(struct pool__rconn *rc, struct pool__req *req)
{
    const char *name = rc->pool->scripts[req->script].name;
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh;
    int err;

    pool__batch_close(rc);
    fresh = buf_size(b) == 0;
    req->retried = true;
    err = pool__req_format_kept(rc->pool, b, req);
    if (err < 0) {
        rconn_complete(rc, req, NULL, err);
        return;
    }
    rc->pool->noscript_retries++;
    log_msg(LOG_LVL_DEBUG, "pool: cmd conn %u to %s: NOSCRIPT for %s, retrying with EVAL", rc->id,
            rc->addr->where, name ? name : "script");
    rconn_enqueue(rc, req, fresh);
    rconn_append_wait(rc, req);
}

static void rconn_protocol_error(struct pool__rconn *rc, const char *why)
{
    rconn_set_error(rc, "protocol: %s", why);
    rconn_log_failure(rc, true);
    rconn_drop(rc, -EPROTO);
}

/* The timed request's reply arrived: one latency sample for the node. */
static void rconn_sampled(struct pool__rconn *rc)
{
    uint64_t ns = clock_mono_ns() - rc->sample_ns;

    rc->sample = NULL;
    pool__node_latency(rc->node, ns / 1000);
}

/* An error reply to a caller request: NOSCRIPT is retried here, the
 * cluster's redirects in redirect.c. Returns true when the request was
 * taken (not to be completed with r). */
static bool rconn_error_reply(struct pool__rconn *rc, struct pool__req *req,
                              const struct pool_reply *r)
{
    if (req->kind == POOL__REQ_EVAL && !req->retried && pool__resp_is_error(r, "NOSCRIPT")) {
        rconn_retry_eval(rc, req);
        return true;
    }
    if (!rc->node || req->kind == POOL__REQ_INTERNAL)
        return false;
    return pool__redirect(rc, req, r);
}

/* The reply r to an EVAL followed by WAIT (the next record). An error
 * reply is not held: it is delivered (or the script re-sent, with a WAIT
 * of its own), and the WAIT record behind drops its answer. Otherwise the
 * WAIT record takes over the caller and keeps r until WAIT answers.
 * Returns true when r was kept. */
static bool rconn_eval_waited(struct pool__rconn *rc, struct pool__req *req, struct pool_reply *r)
{
    struct list *n = list_first(&rc->fifo);
    struct pool__req *w = n ? list_entry(n, struct pool__req, node) : NULL;

    LP_BUG_ON(!w || w->kind != POOL__REQ_WAIT || w->cb);
    if (r->type == POOL_REPLY_ERROR) {
        if (!rconn_error_reply(rc, req, r))
            rconn_complete(rc, req, r, 0);
        return false;
    }
    w->cb = req->cb;
    w->arg = req->arg;
    w->wait = req->wait;
    w->start_ns = req->start_ns;
    w->held = r;
    pool__req_put(rc->pool, req); /* in flight still: w completes the request */
    return true;
}

/* WAIT's answer: the caller (if its EVAL answered) gets the held reply. A
 * WAIT refused (an ACL without +wait, a replica) leaves acked at -1. */
static void rconn_wait_reply(struct pool__rconn *rc, struct pool__req *w,
                             const struct pool_reply *r)
{
    static bool warned;
    struct pool_reply *held = w->held;

    if (!w->cb) {
        pool__req_put(rc->pool, w);
        return;
    }
    if (r->type == POOL_REPLY_INTEGER)
        w->acked = r->integer < 0 ? 0 : (int)LP_MIN(r->integer, (long long)INT32_MAX);
    else if (!warned && r->type == POOL_REPLY_ERROR) {
        warned = true;
        log_msg(LOG_LVL_WARN, "pool: cmd conn %u to %s: WAIT failed: %.*s", rc->id, rc->addr->where,
                (int)LP_MIN(r->len, (size_t)200), r->str);
    }
    w->held = NULL;
    rconn_complete(rc, w, held, 0);
    pool__resp_free(held);
}

/* A runner call's NOSCRIPT (SCRIPT FLUSH, a fresh server): the whole batch
 * goes again, once, as EVAL with the runner's text, which loads it; its
 * records move to the back of the FIFO in order, as a single retry does. */
static void rconn_batch_retry(struct pool__rconn *rc, struct pool__req *head)
{
    struct list moved, *n;
    unsigned i;
    int err;

    list_init(&moved);
    list_add_tail(&moved, &head->node);
    for (i = 1; i < head->batch; i++) {
        n = list_first(&rc->fifo);
        list_del_init(n);
        list_add_tail(&moved, n);
    }
    pool__batch_close(rc);
    head->retried = true;
    err = pool__batch_resend(rc, head);
    rc->pool->noscript_retries++;
    while ((n = list_first(&moved))) {
        struct pool__req *req = list_entry(n, struct pool__req, node);

        list_del_init(n);
        if (err < 0) {
            req->batch = 0;
            rconn_complete(rc, req, NULL, err);
        } else {
            rconn_enqueue(rc, req, false);
        }
    }
}

/* The reply r to a runner call of head->batch requests (head, unlinked,
 * then the next ones in the FIFO): element i answers request i as its own
 * reply would (an error element goes through the error path: a re-send
 * goes alone); an error reply answers each of them. The loop stops when a
 * callback closed the connection (the rest were failed with the FIFO). */
static void rconn_batch_reply(struct pool__rconn *rc, struct pool__req *head,
                              const struct pool_reply *r)
{
    unsigned n = head->batch, i;

    if (r->type == POOL_REPLY_ERROR && !head->retried && pool__resp_is_error(r, "NOSCRIPT")) {
        rconn_batch_retry(rc, head);
        return;
    }
    if (r->type != POOL_REPLY_ERROR && (r->type != POOL_REPLY_ARRAY || r->elements != n)) {
        list_add_head(&rc->fifo, &head->node); /* failed with the others */
        rconn_protocol_error(rc, "a batch's reply does not match its requests");
        return;
    }
    for (i = 0; i < n && rconn_is_open(rc); i++) {
        const struct pool_reply *e = r->type == POOL_REPLY_ARRAY ? r->element[i] : r;
        struct pool__req *req = head;

        if (i > 0) {
            struct list *node = list_first(&rc->fifo);

            req = list_entry(node, struct pool__req, node);
            list_del_init(node);
            if (req == rc->sample)
                rconn_sampled(rc);
        }
        req->batch = 0;
        if (e->type != POOL_REPLY_ERROR || !rconn_error_reply(rc, req, e))
            rconn_complete(rc, req, e, 0);
    }
}

/* Returns true when r was kept (rconn_eval_waited); else the caller frees it. */
static bool rconn_dispatch(struct pool__rconn *rc, struct pool_reply *r)
{
    struct list *n;
    struct pool__req *req;

    if (rc->kind == POOL__RCONN_PUBSUB && rc->state == POOL__RCONN_READY) {
        pool__pubsub_reply(rc->node, r);
        return false;
    }
    if (rc->kind == POOL__RCONN_SENTINEL && rc->state == POOL__RCONN_READY) {
        pool__sentinel_sub_reply(rc->pool, r);
        return false;
    }
    n = list_first(&rc->fifo);
    if (!n) {
        rconn_protocol_error(rc, "reply without a request");
        return false;
    }
    req = list_entry(n, struct pool__req, node);
    list_del_init(n);
    if (req == rc->sample)
        rconn_sampled(rc);
    if (req->kind == POOL__REQ_ASKING)
        pool__req_put(rc->pool, req);
    else if (req->batch)
        rconn_batch_reply(rc, req, r);
    else if (req->kind == POOL__REQ_WAIT)
        rconn_wait_reply(rc, req, r);
    else if (!pool__req_is_caller(req))
        rconn_hs_reply(rc, req, r);
    else if (req->wait)
        return rconn_eval_waited(rc, req, r);
    else if (r->type != POOL_REPLY_ERROR || !rconn_error_reply(rc, req, r))
        rconn_complete(rc, req, r, 0);
    return false;
}

static void rconn_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct pool__rconn *rc = rconn_of(c);
    struct pool_reply *r;
    int rv;

    rc->last_rx_ms = sched_loop_now_ms(rc->pool->loop);
    if (pool__resp_feed(rc->reader, data, len) < 0) {
        rconn_protocol_error(rc, pool__resp_reader_error(rc->reader));
        return;
    }
    while (rconn_is_open(rc)) {
        rv = pool__resp_next(rc->reader, &r);
        if (rv == 0)
            return;
        if (rv < 0) {
            rconn_protocol_error(rc, pool__resp_reader_error(rc->reader));
            return;
        }
        if (!rconn_dispatch(rc, r))
            pool__resp_free(r);
    }
}

/* ---- connection events ---------------------------------------------------- */

static void rconn_on_connect(struct sched_conn *c, int err)
{
    struct pool__rconn *rc = rconn_of(c);

    if (err < 0) {
        pool__addr_forget(rc->addr); /* a host name is looked up again */
        if (pool__tls_error(c)) {
            rconn_set_error(rc, "TLS: %s", pool__tls_error(c));
            rconn_log_failure(rc, false);
        } else {
            rconn_report(rc, "connect", err);
        }
        rconn_drop(rc, -ECONNRESET);
        return;
    }
    rc->reader = pool__resp_reader_create();
    rc->state = POOL__RCONN_HANDSHAKE;
    err = rc->reader ? pool__hs_send(rc) : -ENOMEM;
    if (err < 0) {
        rconn_report(rc, "handshake", err);
        rconn_drop(rc, -ECONNRESET);
    }
}

static void rconn_on_hangup(struct sched_conn *c, int err)
{
    struct pool__rconn *rc = rconn_of(c);

    if (pool__tls_error(c))
        rconn_set_error(rc, "TLS: %s", pool__tls_error(c));
    else if (err == 0)
        rconn_set_error(rc, "connection closed by server");
    else
        rconn_set_error(rc, "read: %s", strerror(-err));
    rconn_log_failure(rc, rc->state == POOL__RCONN_READY);
    rconn_drop(rc, -ECONNRESET);
}

/* The loop sends the output now: the open batch goes with it. */
static void rconn_on_flush(struct sched_conn *c)
{
    pool__batch_close(rconn_of(c));
}

static void rconn_on_release(struct sched_conn *c)
{
    struct pool__rconn *rc = rconn_of(c);

    rconn_free_io(rc);
    rc->state = POOL__RCONN_DISCONNECTED;
    if (rc->stopped)
        return;
    if (rc->kind == POOL__RCONN_TOPO)
        pool__cluster_topo_released(rc->pool);
    if (rc->kind == POOL__RCONN_SENTINEL)
        pool__sentinel_sub_released(rc->pool);
    rconn_arm(rc, rconn_backoff_ms(rc));
}

/* Pub/sub keepalive (the READY timer of the pub/sub connection): nothing
 * else would notice a frozen server or a silently dead peer, and listeners
 * must learn (LOST) that they may miss messages. Every request_timeout_ms a
 * PING goes out; if nothing at all arrived since the previous PING, the
 * connection is dropped. */
static void rconn_keepalive(struct pool__rconn *rc)
{
    const char *ping[] = {"PING"};
    struct pool *p = rc->pool;

    if (rc->ping_sent_ms && rc->last_rx_ms < rc->ping_sent_ms) {
        rconn_set_error(rc, "pubsub: no reply to PING for %u ms", p->opts.request_timeout_ms);
        rconn_log_failure(rc, true);
        rconn_drop(rc, -ETIMEDOUT);
        return;
    }
    if (pool__rconn_send(rc, 1, ping, NULL) == 0)
        rc->ping_sent_ms = sched_loop_now_ms(p->loop);
    rconn_arm(rc, p->opts.request_timeout_ms);
}

/* Command connection READY tick: fail everything when the oldest reply is
 * overdue (a pipeline cannot skip one), else re-arm for the new oldest
 * request. */
static void rconn_check_timeout(struct pool__rconn *rc)
{
    struct list *n = list_first(&rc->fifo);
    uint64_t left;

    if (!n)
        return;
    left = rconn_timeout_left(rc, list_entry(n, struct pool__req, node));
    if (left > 0) {
        rconn_arm(rc, left);
        return;
    }
    rconn_set_error(rc, "request timeout: no reply for %u ms", rc->pool->opts.request_timeout_ms);
    rconn_log_failure(rc, true);
    /* Its requests are reported "outcome unknown" and may be given back:
     * any the kernel has not delivered yet must never run after that (at
     * the end of a partition, from the closed socket's retransmissions). */
    (void)sched_conn_discard_unsent(&rc->conn);
    rconn_drop(rc, -ETIMEDOUT);
}

static void rconn_tick(struct pool__rconn *rc)
{
    if (rc->recycle) {
        rconn_set_error(rc, "recycled after an output error");
        rconn_log_failure(rc, true);
        rconn_drop(rc, -ECONNRESET);
    } else if (rc->kind == POOL__RCONN_PUBSUB || rc->kind == POOL__RCONN_SENTINEL) {
        rconn_keepalive(rc);
    } else {
        rconn_check_timeout(rc);
    }
}

static void rconn_on_timer(struct sched_timer *t)
{
    struct pool__rconn *rc = LP_CONTAINER_OF(t, struct pool__rconn, timer);

    switch (rc->state) {
    case POOL__RCONN_DISCONNECTED:
        rconn_connect(rc);
        break;
    case POOL__RCONN_CONNECTING:
    case POOL__RCONN_HANDSHAKE:
        rconn_report(rc, rc->state == POOL__RCONN_CONNECTING ? "connect" : "handshake", -ETIMEDOUT);
        rconn_drop(rc, -ECONNRESET);
        break;
    case POOL__RCONN_READY:
        rconn_tick(rc);
        break;
    case POOL__RCONN_CLOSING:
        break;
    }
}

/* ---- module interface ------------------------------------------------------ */

void pool__rconn_init(struct pool__rconn *rc, struct pool *p, struct pool_node *n,
                      struct pool__addr *addr, enum pool__rconn_kind kind, unsigned id)
{
    memset(rc, 0, sizeof(*rc));
    rconn_reset_io(rc);
    rc->pool = p;
    rc->node = n;
    rc->addr = addr;
    rc->kind = kind;
    rc->id = id;
    rc->state = POOL__RCONN_DISCONNECTED;
    list_init(&rc->fifo);
    list_init(&rc->unsent);
    sched_timer_init(&rc->timer, rconn_on_timer);
}

void pool__rconn_deinit(struct pool__rconn *rc)
{
    LP_BUG_ON(rc->state != POOL__RCONN_DISCONNECTED || sched_timer_is_pending(&rc->timer));
    rconn_free_io(rc);
}

/* Idempotent: a connection already connecting, up, or waiting out a
 * backoff is left alone; one still CLOSING after a stop reconnects from
 * on_release now that stopped is clear. */
void pool__rconn_start(struct pool__rconn *rc)
{
    rc->stopped = false;
    if (rc->state != POOL__RCONN_DISCONNECTED || sched_timer_is_pending(&rc->timer))
        return;
    rc->attempts = 0;
    rconn_connect(rc);
}

void pool__rconn_stop(struct pool__rconn *rc)
{
    rc->stopped = true;
    rconn_disarm(rc);
    if (rc->state == POOL__RCONN_DISCONNECTED || rc->state == POOL__RCONN_CLOSING)
        return;
    rconn_drop(rc, -ECONNRESET);
}

void pool__rconn_recycle_later(struct pool__rconn *rc)
{
    if (rc->state != POOL__RCONN_READY)
        return;
    rc->recycle = true;
    rconn_arm(rc, 0);
}

/* Stats for a caller request that was queued. */
static void rconn_count(struct pool__rconn *rc, const struct pool__req *req)
{
    if (req->kind == POOL__REQ_INTERNAL)
        return;
    rc->pool->inflight++;
    rc->pool->requests++;
    rc->node->requests++;
}

/* A cluster pool keeps every command's arguments (argc bulks) for a
 * re-send; a single node keeps nothing. */
int pool__rconn_command(struct pool__rconn *rc, struct pool__req *req, int argc,
                        const char *const *argv, const size_t *lens, bool keep)
{
    int err = 0;

    if (keep)
        err = pool__req_alloc_tail(req, (unsigned)argc, pool__resp_args_size(argc, argv, lens));
    if (err == 0)
        err = pool__rconn_issue(rc, req, 0, NULL, NULL, argc, argv, lens);
    else
        pool__req_put(rc->pool, req);
    if (err < 0)
        return err;
    if (keep)
        pool__req_keep_tail(req, sched_conn_wbuf(&rc->conn));
    rconn_count(rc, req);
    return 0;
}

/* A request that joins the connection's open batch (batch.c): queued now,
 * written when the batch closes. */
static int rconn_eval_batched(struct pool__rconn *rc, struct pool__req *req, int numkeys, int argc,
                              const char *const *argv, const size_t *lens)
{
    bool fresh = buf_size(sched_conn_wbuf(&rc->conn)) == 0 && rc->bn == 0;
    int err = pool__batch_join(rc, req, numkeys, argc, argv, lens);

    if (err < 0) {
        pool__req_put(rc->pool, req);
        return err;
    }
    rconn_enqueue(rc, req, fresh);
    rconn_count(rc, req);
    return 0;
}

/* EVALSHA sha numkeys keys... args...: "numkeys keys args" is the tail,
 * copied from the output right after formatting for a NOSCRIPT retry.
 * "EVALSHA sha" comes encoded from the script (pool__script_set_sha). */
int pool__rconn_eval(struct pool__rconn *rc, struct pool__req *req, unsigned script, int numkeys,
                     int argc, const char *const *argv, const size_t *lens)
{
    const struct pool__script *s = &rc->pool->scripts[script];
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh;
    char nk[24];
    size_t nklen;
    size_t tail;
    int err;

    req->kind = POOL__REQ_EVAL;
    req->script = script;
    if (pool__batch_fits(rc, req, numkeys, argc))
        return rconn_eval_batched(rc, req, numkeys, argc, argv, lens);
    pool__batch_close(rc);
    fresh = buf_size(b) == 0;
    nklen = pool__resp_u64(nk, (unsigned long long)numkeys);
    tail = pool__resp_bulk_size(nklen) + pool__resp_args_size(argc, argv, lens);
    err = pool__req_alloc_tail(req, (unsigned)argc + 1, tail);
    if (err == 0)
        err = pool__resp_evalsha(b, s->evalsha, s->evalsha_len, nk, nklen, argc, argv, lens, tail);
    if (err < 0) {
        pool__req_put(rc->pool, req);
        return err;
    }
    pool__req_keep_tail(req, b);
    rconn_enqueue(rc, req, fresh);
    rconn_count(rc, req);
    rconn_append_wait(rc, req);
    return 0;
}

/* ASKING and the request go out back to back: on failure the output is
 * cut back to where it was, so neither half is left behind. */
int pool__rconn_resend(struct pool__rconn *rc, struct pool__req *req)
{
    static const char *const asking[] = {"ASKING"};
    struct buf *b = sched_conn_wbuf(&rc->conn);
    size_t mark;
    bool fresh;
    struct pool__req *ask = NULL;
    int err = 0;

    pool__batch_close(rc);
    mark = b->len;
    fresh = mark == 0;
    if (req->asking) {
        ask = pool__req_get(rc->pool);
        err = ask ? pool__resp_command(b, 1, asking, NULL) : -ENOMEM;
    }
    if (err == 0)
        err = pool__req_format_kept(rc->pool, b, req);
    if (err < 0) {
        b->len = mark;
        if (ask)
            pool__req_put(rc->pool, ask);
        return err;
    }
    if (ask) {
        ask->kind = POOL__REQ_ASKING;
        rconn_enqueue(rc, ask, fresh);
        fresh = false;
    }
    req->asking = false;
    rconn_enqueue(rc, req, fresh);
    rconn_append_wait(rc, req);
    rc->node->requests++;
    return 0;
}

int pool__rconn_send(struct pool__rconn *rc, int argc, const char *const *argv, const size_t *lens)
{
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh;
    int err;

    pool__batch_close(rc);
    fresh = buf_size(b) == 0;
    err = pool__resp_command(b, argc, argv, lens);

    if (err < 0)
        return err;
    rconn_sent(rc, fresh);
    return 0;
}

struct buf *pool__rconn_out(struct pool__rconn *rc)
{
    pool__batch_close(rc);
    return sched_conn_wbuf(&rc->conn);
}

void pool__rconn_flush(struct pool__rconn *rc)
{
    pool__batch_close(rc);
    rconn_sent(rc, false);
}
