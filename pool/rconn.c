/* One upstream Redis connection: connect, handshake, pipelined requests
 * with FIFO reply matching, NOSCRIPT retry, timeouts, and reconnect with
 * exponential backoff. The same machine drives the pub/sub connection,
 * whose replies go to pubsub.c once it is READY.
 *
 * DESIGN BLOCK
 *
 * States (enum pool__rconn_state), and what the one timer means in each:
 *
 *     DISCONNECTED --start / backoff timer--> CONNECTING
 *     CONNECTING --on_connect(0)--> HANDSHAKE --last handshake reply--> READY
 *     CONNECTING | HANDSHAKE | READY --error, hangup, timeout, stop--> CLOSING
 *     CLOSING --on_release--> DISCONNECTED (+ backoff timer unless stopping)
 *
 *     With upstream TLS (tls.c) CONNECTING includes the TLS handshake:
 *     on_connect comes once it is done, or with its failure.
 *
 *     DISCONNECTED  timer = backoff before the next attempt (idle once stopped)
 *     CONNECTING,
 *     HANDSHAKE     timer = connect deadline (connect_timeout_ms covers both)
 *     READY         command: request-timeout check, armed only while the
 *                   FIFO is non-empty, for when the oldest request expires;
 *                   pub/sub: keepalive PING every request_timeout_ms;
 *                   either: "now" when a recycle was requested
 *     CLOSING       no timer
 *
 * Handshake: AUTH [user] password (if set), SELECT db (if != 0, command
 * connections), SCRIPT LOAD of every registered script (command
 * connections), all pipelined in one write; the SHA1s are stored per pool.
 * With none of these it is a PING: READY always means the server answered
 * (a frozen server accepts connections into its backlog). Any error reply
 * fails the attempt (wrong password, NOAUTH, LOADING, bad script) and the
 * connection backs off and retries.
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
 *     reply is a push (or a subscribe confirmation) for pubsub.c.
 *
 * Ownership: the pool embeds and owns each connection. A connection owns
 * its reader and the records in its fifo (records come from and return to
 * pool.free_reqs). Replies are owned by on_data and freed after dispatch;
 * callbacks borrow them for the call.
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
 * Rejected: one timer per purpose (three timers to keep consistent over
 * every transition); reconnecting from on_release at once (a server that
 * accepts and closes would make us spin); skipping a timed-out reply (a
 * FIFO pipeline cannot, so the connection is recycled); retrying NOSCRIPT
 * with SCRIPT LOAD + EVALSHA (two commands and two replies to match where
 * one EVAL does). */
#include "pool/rconn.h"

#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/resp.h"
#include "sched/loop.h"

static void rconn_on_data(struct sched_conn *c, const char *data, size_t len);
static void rconn_on_hangup(struct sched_conn *c, int err);
static void rconn_on_connect(struct sched_conn *c, int err);
static void rconn_on_release(struct sched_conn *c);

static const struct sched_conn_ops rconn_ops = {
    .on_data = rconn_on_data,
    .on_hangup = rconn_on_hangup,
    .on_connect = rconn_on_connect,
    .on_drain = NULL,
    .on_release = rconn_on_release,
};

static struct pool__rconn *rconn_of(struct sched_conn *c)
{
    return LP_CONTAINER_OF(c, struct pool__rconn, conn);
}

static const char *rconn_name(const struct pool__rconn *rc)
{
    return rc->kind == POOL__RCONN_PUBSUB ? "pubsub" : "cmd";
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
    log_msg(lvl, "pool: %s conn %u to %s %s: %s", rconn_name(rc), rc->id, rc->pool->where,
            loss ? "lost" : "failed", rc->pool->last_error);
}

static void rconn_report(struct pool__rconn *rc, const char *what, int err)
{
    pool__set_error(rc->pool, "%s: %s", what, strerror(-err));
    rconn_log_failure(rc, false);
}

/* Exponential backoff with equal jitter: the delay doubles from
 * backoff_min_ms per failed attempt up to backoff_max_ms, and a random half
 * of it is taken off so that connections do not retry in lockstep. */
static uint64_t rconn_backoff_ms(struct pool__rconn *rc)
{
    const struct pool_opts *o = &rc->pool->opts;
    uint64_t d = o->backoff_min_ms;
    unsigned i;

    for (i = 0; i < rc->attempts && d < o->backoff_max_ms; i++)
        d *= 2;
    d = LP_MIN(d, (uint64_t)o->backoff_max_ms);
    rc->attempts++;
    return d - pool__rand(rc->pool, d / 2);
}

/* Frees the per-socket state once the loop released the socket. */
static void rconn_free_io(struct pool__rconn *rc)
{
    if (rc->reader)
        redisReaderFree(rc->reader);
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

/* Queues req (already formatted into the output) for its reply. */
static void rconn_enqueue(struct pool__rconn *rc, struct pool__req *req, bool fresh)
{
    req->sent_ms = sched_loop_now_ms(rc->pool->loop);
    list_add_tail(&rc->fifo, &req->node);
    rconn_sent(rc, fresh);
    if (rc->state == POOL__RCONN_READY && !sched_timer_is_pending(&rc->timer))
        rconn_arm(rc, rc->pool->opts.request_timeout_ms);
}

/* Formats pre ++ argv and queues req. On failure req is recycled. */
static int rconn_issue(struct pool__rconn *rc, struct pool__req *req, int npre,
                       const char *const *pre, const size_t *prelens, int argc,
                       const char *const *argv, const size_t *lens)
{
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh = buf_size(b) == 0;
    int err = pool__resp_command_split(b, npre, pre, prelens, argc, argv, lens);

    if (err < 0) {
        pool__req_put(rc->pool, req);
        return err;
    }
    rconn_enqueue(rc, req, fresh);
    return 0;
}

/* Hands a caller request its one completion. The record is recycled
 * first, so the callback may submit again. */
static void rconn_complete(struct pool__rconn *rc, struct pool__req *req, const redisReply *r,
                           int err)
{
    pool_reply_fn *cb = req->cb;
    void *arg = req->arg;
    struct pool *p = rc->pool;

    p->inflight--;
    if (err < 0)
        p->errors++;
    pool__req_put(p, req);
    cb(arg, r, err);
}

static bool req_is_caller(const struct pool__req *req)
{
    return req->kind == POOL__REQ_CMD || req->kind == POOL__REQ_EVAL;
}

/* Empties the FIFO: caller requests fail with err. The FIFO is detached
 * first so callbacks never see it half-drained. */
static void rconn_fail_all(struct pool__rconn *rc, int err)
{
    struct list dead;
    struct list *n;

    list_init(&dead);
    list_splice_tail_init(&dead, &rc->fifo);
    rc->handshake = 0;
    while ((n = list_first(&dead))) {
        struct pool__req *req = list_entry(n, struct pool__req, node);

        list_del_init(n);
        if (req_is_caller(req))
            rconn_complete(rc, req, NULL, err);
        else
            pool__req_put(rc->pool, req);
    }
}

/* Closes the socket after a failure or on stop: requests fail with err,
 * the pub/sub layer learns of the loss, and on_release schedules the
 * reconnect. May invoke callbacks. */
static void rconn_drop(struct pool__rconn *rc, int err)
{
    bool was_ready = rc->state == POOL__RCONN_READY;

    rconn_disarm(rc);
    rc->state = POOL__RCONN_CLOSING;
    rc->recycle = false;
    sched_conn_close(&rc->conn, false);
    rconn_fail_all(rc, err);
    if (was_ready && rc->kind == POOL__RCONN_PUBSUB)
        pool__pubsub_down(rc->pool);
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
    log_msg(LOG_LVL_INFO, "pool: %s conn %u to %s ready%s", rconn_name(rc), rc->id, p->where,
            rc->ever_ready ? " again" : "");
    rc->ever_ready = true;
    if (rc->kind != POOL__RCONN_PUBSUB)
        return;
    rc->ping_sent_ms = 0;
    rconn_arm(rc, p->opts.request_timeout_ms);
    pool__pubsub_up(p);
}

/* Starts one attempt now; on a synchronous failure backs off instead. */
static void rconn_connect(struct pool__rconn *rc)
{
    struct pool *p = rc->pool;
    int err = pool__resolve(p);

    if (err < 0) {
        rconn_log_failure(rc, false);
        rconn_arm(rc, rconn_backoff_ms(rc));
        return;
    }
    err = sched_conn_connect(p->loop, &rc->conn, (const struct sockaddr *)&p->addr, p->addrlen,
                             &rconn_ops);
    if (err < 0) {
        rconn_report(rc, "connect", err);
        rconn_free_io(rc);
        rconn_arm(rc, rconn_backoff_ms(rc));
        return;
    }
    rc->state = POOL__RCONN_CONNECTING;
    err = pool__tls_start(p, &rc->conn, p->opts.host);
    if (err < 0) { /* on_release backs off */
        rconn_report(rc, "TLS setup", err);
        rc->state = POOL__RCONN_CLOSING;
        sched_conn_close(&rc->conn, false);
        return;
    }
    rconn_arm(rc, p->opts.connect_timeout_ms);
}

/* ---- handshake ---------------------------------------------------------- */

static int rconn_hs_push(struct pool__rconn *rc, enum pool__req_kind kind, unsigned script,
                         int argc, const char *const *argv, const size_t *lens)
{
    struct pool__req *req = pool__req_get(rc->pool);
    int err;

    if (!req)
        return -ENOMEM;
    req->kind = kind;
    req->script = script;
    err = rconn_issue(rc, req, 0, NULL, NULL, argc, argv, lens);
    if (err == 0)
        rc->handshake++;
    return err;
}

static int rconn_hs_auth(struct pool__rconn *rc)
{
    const struct pool_opts *o = &rc->pool->opts;
    const char *argv[3] = {"AUTH", o->user, o->password};

    if (!o->user) {
        argv[1] = o->password;
        return rconn_hs_push(rc, POOL__REQ_AUTH, 0, 2, argv, NULL);
    }
    return rconn_hs_push(rc, POOL__REQ_AUTH, 0, 3, argv, NULL);
}

static int rconn_hs_select(struct pool__rconn *rc)
{
    char db[24];
    const char *argv[2] = {"SELECT", db};

    pool__resp_u64(db, (unsigned long long)rc->pool->opts.db);
    return rconn_hs_push(rc, POOL__REQ_SELECT, 0, 2, argv, NULL);
}

static int rconn_hs_script(struct pool__rconn *rc, unsigned i)
{
    const struct pool__script *s = &rc->pool->scripts[i];
    const char *argv[3] = {"SCRIPT", "LOAD", s->text};
    const size_t lens[3] = {6, 4, s->text_len};

    return rconn_hs_push(rc, POOL__REQ_SCRIPT, i, 3, argv, lens);
}

/* Pipelines the whole handshake into the first write. With nothing to
 * set up it is a PING, so READY always means the server has answered. */
static int rconn_hs_send(struct pool__rconn *rc)
{
    static const char *const ping[] = {"PING"};
    const struct pool *p = rc->pool;
    bool cmd = rc->kind == POOL__RCONN_CMD;
    int err = 0;
    unsigned i;

    if (p->opts.password)
        err = rconn_hs_auth(rc);
    if (err == 0 && cmd && p->opts.db != 0)
        err = rconn_hs_select(rc);
    for (i = 0; err == 0 && cmd && i < p->nscripts; i++)
        err = rconn_hs_script(rc, i);
    if (err == 0 && rc->handshake == 0)
        err = rconn_hs_push(rc, POOL__REQ_PING, 0, 1, ping, NULL);
    return err;
}

static const char *hs_step_name(const struct pool *p, enum pool__req_kind kind, unsigned script)
{
    if (kind == POOL__REQ_AUTH)
        return "AUTH";
    if (kind == POOL__REQ_SELECT)
        return "SELECT";
    if (kind == POOL__REQ_PING)
        return "PING";
    return p->scripts[script].name ? p->scripts[script].name : "script";
}

static int rconn_store_sha(struct pool__rconn *rc, unsigned script, const redisReply *r)
{
    struct pool__script *s = &rc->pool->scripts[script];

    if (r->type != REDIS_REPLY_STRING || r->len != POOL__SHA_SIZE - 1)
        return -EPROTO;
    memcpy(s->sha, r->str, r->len);
    s->sha[r->len] = '\0';
    return 0;
}

static void rconn_hs_reply(struct pool__rconn *rc, struct pool__req *req, const redisReply *r)
{
    struct pool *p = rc->pool;
    enum pool__req_kind kind = req->kind;
    unsigned script = req->script;
    const char *step = hs_step_name(p, kind, script);

    pool__req_put(p, req);
    if (r->type == REDIS_REPLY_ERROR) {
        pool__set_error(p, "%s%s: %.*s", kind == POOL__REQ_SCRIPT ? "SCRIPT LOAD " : "", step,
                        (int)LP_MIN(r->len, (size_t)80), r->str);
    } else if (kind == POOL__REQ_SCRIPT && rconn_store_sha(rc, script, r) < 0) {
        pool__set_error(p, "SCRIPT LOAD %s: unexpected reply", step);
    } else {
        if (--rc->handshake == 0)
            rconn_ready(rc);
        return;
    }
    rconn_log_failure(rc, false);
    rconn_drop(rc, -ECONNRESET);
}

/* ---- replies ------------------------------------------------------------- */

/* Re-sends an EVALSHA that got NOSCRIPT as EVAL with the text, once. */
static void rconn_retry_eval(struct pool__rconn *rc, struct pool__req *req)
{
    const struct pool__script *s = &rc->pool->scripts[req->script];
    const char *pre[2] = {"EVAL", s->text};
    const size_t prelens[2] = {4, s->text_len};
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh = buf_size(b) == 0;
    int err;

    req->retried = true;
    err = pool__resp_command_raw(b, 2, pre, prelens, req->ntail, req->tail, req->tail_len);
    if (err < 0) {
        rconn_complete(rc, req, NULL, err);
        return;
    }
    rc->pool->noscript_retries++;
    log_msg(LOG_LVL_DEBUG, "pool: cmd conn %u: NOSCRIPT for %s, retrying with EVAL", rc->id,
            s->name ? s->name : "script");
    rconn_enqueue(rc, req, fresh);
}

static void rconn_protocol_error(struct pool__rconn *rc, const char *why)
{
    pool__set_error(rc->pool, "protocol: %s", why);
    rconn_log_failure(rc, true);
    rconn_drop(rc, -EPROTO);
}

static void rconn_dispatch(struct pool__rconn *rc, const redisReply *r)
{
    struct list *n;
    struct pool__req *req;

    if (rc->kind == POOL__RCONN_PUBSUB && rc->state == POOL__RCONN_READY) {
        pool__pubsub_reply(rc->pool, r);
        return;
    }
    n = list_first(&rc->fifo);
    if (!n) {
        rconn_protocol_error(rc, "reply without a request");
        return;
    }
    req = list_entry(n, struct pool__req, node);
    list_del_init(n);
    if (!req_is_caller(req))
        rconn_hs_reply(rc, req, r);
    else if (req->kind == POOL__REQ_EVAL && !req->retried && pool__resp_is_error(r, "NOSCRIPT"))
        rconn_retry_eval(rc, req);
    else
        rconn_complete(rc, req, r, 0);
}

static void rconn_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct pool__rconn *rc = rconn_of(c);
    redisReply *r;
    int rv;

    rc->last_rx_ms = sched_loop_now_ms(rc->pool->loop);
    if (pool__resp_feed(rc->reader, data, len) < 0) {
        rconn_protocol_error(rc, rc->reader->errstr);
        return;
    }
    while (rconn_is_open(rc)) {
        rv = pool__resp_next(rc->reader, &r);
        if (rv == 0)
            return;
        if (rv < 0) {
            rconn_protocol_error(rc, rc->reader->errstr);
            return;
        }
        rconn_dispatch(rc, r);
        freeReplyObject(r);
    }
}

/* ---- connection events ---------------------------------------------------- */

static void rconn_on_connect(struct sched_conn *c, int err)
{
    struct pool__rconn *rc = rconn_of(c);

    if (err < 0) {
        rc->pool->addrlen = 0; /* re-resolve on the next attempt */
        if (pool__tls_report(rc->pool, c))
            rconn_log_failure(rc, false);
        else
            rconn_report(rc, "connect", err);
        rconn_drop(rc, -ECONNRESET);
        return;
    }
    rc->reader = pool__resp_reader_create();
    rc->state = POOL__RCONN_HANDSHAKE;
    err = rc->reader ? rconn_hs_send(rc) : -ENOMEM;
    if (err < 0) {
        rconn_report(rc, "handshake", err);
        rconn_drop(rc, -ECONNRESET);
    }
}

static void rconn_on_hangup(struct sched_conn *c, int err)
{
    struct pool__rconn *rc = rconn_of(c);

    if (!pool__tls_report(rc->pool, c)) {
        if (err == 0)
            pool__set_error(rc->pool, "connection closed by server");
        else
            pool__set_error(rc->pool, "read: %s", strerror(-err));
    }
    rconn_log_failure(rc, rc->state == POOL__RCONN_READY);
    rconn_drop(rc, -ECONNRESET);
}

static void rconn_on_release(struct sched_conn *c)
{
    struct pool__rconn *rc = rconn_of(c);

    rconn_free_io(rc);
    rc->state = POOL__RCONN_DISCONNECTED;
    if (!rc->pool->stopping)
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
        pool__set_error(p, "pubsub: no reply to PING for %u ms", p->opts.request_timeout_ms);
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
    pool__set_error(rc->pool, "request timeout: no reply for %u ms",
                    rc->pool->opts.request_timeout_ms);
    rconn_log_failure(rc, true);
    rconn_drop(rc, -ETIMEDOUT);
}

static void rconn_tick(struct pool__rconn *rc)
{
    if (rc->recycle) {
        pool__set_error(rc->pool, "recycled after an output error");
        rconn_log_failure(rc, true);
        rconn_drop(rc, -ECONNRESET);
    } else if (rc->kind == POOL__RCONN_PUBSUB) {
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

void pool__rconn_init(struct pool__rconn *rc, struct pool *p, enum pool__rconn_kind kind,
                      unsigned id)
{
    memset(rc, 0, sizeof(*rc));
    rconn_reset_io(rc);
    rc->pool = p;
    rc->kind = kind;
    rc->id = id;
    rc->state = POOL__RCONN_DISCONNECTED;
    list_init(&rc->fifo);
    sched_timer_init(&rc->timer, rconn_on_timer);
}

void pool__rconn_deinit(struct pool__rconn *rc)
{
    LP_BUG_ON(rc->state != POOL__RCONN_DISCONNECTED || sched_timer_is_pending(&rc->timer));
    rconn_free_io(rc);
}

void pool__rconn_start(struct pool__rconn *rc)
{
    rc->attempts = 0;
    rconn_connect(rc);
}

void pool__rconn_stop(struct pool__rconn *rc)
{
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
static void rconn_count(struct pool__rconn *rc)
{
    rc->pool->inflight++;
    rc->pool->requests++;
}

int pool__rconn_command(struct pool__rconn *rc, int argc, const char *const *argv,
                        const size_t *lens, pool_reply_fn *cb, void *arg)
{
    struct pool__req *req = pool__req_get(rc->pool);
    int err;

    if (!req)
        return -ENOMEM;
    req->kind = POOL__REQ_CMD;
    req->cb = cb;
    req->arg = arg;
    err = rconn_issue(rc, req, 0, NULL, NULL, argc, argv, lens);
    if (err == 0)
        rconn_count(rc);
    return err;
}

static int req_alloc_tail(struct pool__req *req, size_t n)
{
    req->tail = n <= sizeof(req->inl) ? req->inl : malloc(n);
    if (!req->tail)
        return -ENOMEM;
    req->tail_len = n;
    return 0;
}

/* EVALSHA sha numkeys keys... args...: "numkeys keys args" is the tail,
 * copied from the output right after formatting for a NOSCRIPT retry. */
int pool__rconn_eval(struct pool__rconn *rc, unsigned script, int numkeys, int argc,
                     const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    const struct pool__script *s = &rc->pool->scripts[script];
    struct pool__req *req = pool__req_get(rc->pool);
    char nk[24];
    size_t nklen = pool__resp_u64(nk, (unsigned long long)numkeys);
    const char *pre[3] = {"EVALSHA", s->sha, nk};
    const size_t prelens[3] = {7, strlen(s->sha), nklen};
    struct buf *b;
    int err;

    if (!req)
        return -ENOMEM;
    req->kind = POOL__REQ_EVAL;
    req->cb = cb;
    req->arg = arg;
    req->script = script;
    req->ntail = (unsigned)argc + 1;
    err = req_alloc_tail(req, pool__resp_bulk_size(nklen) + pool__resp_args_size(argc, argv, lens));
    if (err == 0)
        err = rconn_issue(rc, req, 3, pre, prelens, argc, argv, lens);
    else
        pool__req_put(rc->pool, req);
    if (err < 0)
        return err;
    b = sched_conn_wbuf(&rc->conn);
    memcpy(req->tail, b->data + b->len - req->tail_len, req->tail_len);
    rconn_count(rc);
    return 0;
}

int pool__rconn_send(struct pool__rconn *rc, int argc, const char *const *argv, const size_t *lens)
{
    struct buf *b = sched_conn_wbuf(&rc->conn);
    bool fresh = buf_size(b) == 0;
    int err = pool__resp_command(b, argc, argv, lens);

    if (err < 0)
        return err;
    rconn_sent(rc, fresh);
    return 0;
}

struct buf *pool__rconn_out(struct pool__rconn *rc)
{
    return sched_conn_wbuf(&rc->conn);
}

void pool__rconn_flush(struct pool__rconn *rc)
{
    rconn_sent(rc, false);
}
