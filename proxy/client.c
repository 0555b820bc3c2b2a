/* Client connections: RESP2 request parsing with limits, in-order replies,
 * barriers for blocking commands, back-pressure, deadlines, and the
 * connection's lifetime.
 *
 * DESIGN
 *
 * Parsing (request.c) enforces the request limits: a request over one comes
 * out answered (an error, written in its turn) and the connection goes on;
 * malformed input gets "-ERR Protocol error: <why>" after the replies
 * already owed, and the connection is closed (the stream cannot be
 * resynchronised).
 *
 * States of a request: QUEUED (behind a barrier) -> RUNNING (dispatched)
 * -> DONE (reply ready) -> written and freed, strictly in arrival order.
 *
 * Input. client_process() parses received bytes in place (request.c) and
 * takes one request at a time, dispatching what may run, while the client
 * may take more: fewer than --max-pipeline requests outstanding and at most
 * --client-output-soft-limit bytes of replies unsent. When it stops before
 * the end of a read, the rest is copied to cl->in and the socket is paused
 * (cl->input says what resumes it: FULL, a request finishing; OUTPUT, the
 * replies drained); the socket is read again only once cl->in holds no
 * complete request, so it never holds more than what one read delivered
 * (cl->in is freed once empty: an idle connection keeps no input memory).
 * Queued requests are not dispatched while the replies are over the soft
 * limit either; replies of running requests still arrive, and
 * past --client-output-hard-limit the client is closed, releasing its locks
 * like any disconnect. So one client holds at most about soft limit +
 * (max-pipeline x the largest reply of a running request) of replies.
 * client_process() is not re-entered: a request that completes inside a
 * dispatch (most commands do) leaves the next one to the loop already
 * running, which keeps the stack flat however long the pipeline.
 *
 * Deadlines. One wheel timer per client (cl->timer), armed only when
 * --auth-timeout applies (auth on, not yet authenticated) or --timeout is
 * set. It fires at the earlier of accept + auth-timeout and last activity
 * + timeout, and re-checks lazily: input sets active_ms, output progress is
 * seen as a change of conn.bytes_out, and a client that holds or waits for
 * a lock, has a request outstanding or holds a subscription (subs.h)
 * counts as active. So a busy client
 * costs one timer expiry per timeout, never a timer update per request.
 *
 * Freeing: px_client_close() marks the client closing, drops queued
 * requests, and closes the socket; running requests finish through their
 * callbacks (which hold client references) and their replies are dropped.
 * The client is freed once the socket is released and no reference is
 * left. */
#include "proxy/client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine.h"
#include "proxy/auth.h"
#include "proxy/climem.h"
#include "proxy/cmd.h"
#include "proxy/metrics.h"
#include "proxy/push.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "proxy/subs.h"
#include "proxy/tls.h"
#include "proxy/tx.h"
#include "sched/loop.h"
#include "sched/tls.h"

#define LIMIT_LOG_EVERY_MS 1000u /* at most one output-limit line per second */

static void client_process(struct px_client *cl);
static void client_maybe_free(struct px_client *cl);
static void client_close_over_limit(struct px_client *cl);

/* ---- limits ---------------------------------------------------------------- */

static size_t client_unsent(const struct px_client *cl)
{
    return sched_conn_pending_out(&cl->conn);
}

/* Replies over the soft limit: take and dispatch nothing more. */
static bool client_output_full(const struct px_client *cl)
{
    size_t soft = cl->srv->opts.out_soft;

    return soft > 0 && client_unsent(cl) > soft;
}

static bool client_over_hard_limit(const struct px_client *cl)
{
    size_t hard = cl->srv->opts.out_hard;

    return hard > 0 && client_unsent(cl) > hard;
}

/* May cl take another request from its input now? */
static bool client_may_take(const struct px_client *cl)
{
    return !cl->closing && !cl->quit && cl->nreqs < cl->srv->opts.max_pipeline &&
           !client_output_full(cl);
}

/* Moves cl to input state want: pauses or resumes its socket and keeps the
 * paused-for-output gauge. */
static void client_set_input(struct px_client *cl, enum px_client_input want)
{
    struct px_server *srv = cl->srv;

    if (cl->input == want)
        return;
    if (cl->input == PX_INPUT_OUTPUT)
        srv->nclients_out_paused--;
    if (want == PX_INPUT_OUTPUT) {
        srv->nclients_out_paused++;
        srv->stats.output_pauses++;
        log_msg(LOG_LVL_DEBUG, "client %llu: %zu bytes of replies unsent; reading paused",
                (unsigned long long)cl->id, client_unsent(cl));
    }
    cl->input = want;
    if (!cl->closing)
        sched_conn_pause(&cl->conn, want != PX_INPUT_READING);
}

/* The input state after client_process() stopped taking requests;
 * starved: the parser needs more bytes. */
static enum px_client_input client_input_state(const struct px_client *cl, bool starved)
{
    if (cl->quit)
        return PX_INPUT_DONE;
    if (client_output_full(cl))
        return PX_INPUT_OUTPUT;
    if (!starved || cl->nreqs >= cl->srv->opts.max_pipeline)
        return PX_INPUT_FULL;
    return PX_INPUT_READING;
}

/* ---- replies in order ---------------------------------------------------- */

struct buf *px_req_out(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct buf *out;

    if (cl->closing || list_first(&cl->running) != &req->node)
        return &req->reply;
    out = sched_conn_wbuf(&cl->conn);
    if (cl->mark_req != req) { /* remember where its reply starts, for metrics */
        cl->mark_req = req;
        cl->mark = out->len;
    }
    return out;
}

/* Counts req by command and result, read from its reply (written just
 * now: in req->reply, or in the output from mark on). */
static void client_count(struct px_client *cl, struct px_req *req)
{
    const struct buf *out = &cl->conn.out;
    const char *reply = NULL;
    size_t len = 0;

    if (buf_size(&req->reply) > 0) {
        reply = buf_head(&req->reply);
        len = buf_size(&req->reply);
    } else if (cl->mark_req == req && out->len > cl->mark) {
        reply = out->data + cl->mark;
        len = out->len - cl->mark;
    }
    cl->mark_req = NULL;
    if (req->argc > 0)
        px_metrics_command(cl->srv, req->cmd, reply, len);
}

/* Writes finished replies from the head of the running list. */
static void client_flush_done(struct px_client *cl)
{
    struct list *n;

    while ((n = list_first(&cl->running)) != NULL) {
        struct px_req *req = list_entry(n, struct px_req, node);

        if (req->state != PX_REQ_DONE)
            break;
        list_del_init(&req->node);
        cl->nreqs--;
        px_multi_req_gone(cl, req);
        if (!cl->closing && buf_size(&req->reply) > 0)
            buf_append(sched_conn_wbuf(&cl->conn), buf_head(&req->reply), buf_size(&req->reply));
        px_req_free(req);
        /* The new head may have finished already; its reply is in req->reply. */
    }
    px_push_flush(cl);
    if (!cl->closing)
        sched_conn_mark_dirty(&cl->conn);
    px_climem_sync(cl);
}

void px_req_done(struct px_req *req)
{
    struct px_client *cl = req->cl;

    req->state = PX_REQ_DONE;
    if (cl->barrier == req)
        cl->barrier = NULL;
    client_count(cl, req);
    px_client_get(cl);
    client_flush_done(cl);
    if (!cl->closing && client_over_hard_limit(cl)) {
        client_close_over_limit(cl);
    } else if (!cl->closing) {
        client_process(cl);
        if (cl->quit && cl->nreqs == 0)
            px_client_close(cl);
    }
    px_client_put(cl);
}

bool px_client_output_ok(struct px_client *cl)
{
    px_climem_sync(cl);
    if (!cl->closing && client_over_hard_limit(cl))
        client_close_over_limit(cl);
    return !cl->closing;
}

/* Closes cl, whose unsent replies passed the hard limit, without sending
 * them; logs at most one line a second, with the closes not logged. */
static void client_close_over_limit(struct px_client *cl)
{
    struct px_server *srv = cl->srv;
    uint64_t now = sched_loop_now_ms(srv->loop);

    srv->stats.output_closes++;
    if (srv->limit_log_ms != 0 && now - srv->limit_log_ms < LIMIT_LOG_EVERY_MS) {
        srv->limit_log_quiet++;
    } else {
        log_msg(LOG_LVL_WARN,
                "client %llu closed: %zu bytes of replies unsent, over "
                "--client-output-hard-limit %zu (%llu more such closes since the last report)",
                (unsigned long long)cl->id, client_unsent(cl), srv->opts.out_hard,
                (unsigned long long)srv->limit_log_quiet);
        srv->limit_log_ms = now;
        srv->limit_log_quiet = 0;
    }
    cl->quit = false; /* drop the replies: the peer does not read them */
    px_client_close(cl);
}

/* ---- input --------------------------------------------------------------- */

static void client_dispatch(struct px_client *cl, struct px_req *req)
{
    list_del_init(&req->node);
    list_add_tail(&cl->running, &req->node);
    req->state = PX_REQ_RUNNING;
    if (req->answered) /* the parser's answer, kept in order */
        return px_multi_reject(req);
    if (!req->in_exec) /* counted when it came, not again at EXEC */
        cl->srv->stats.commands++;
    cl->last_cmd = req->cmd;
    px_cmd_dispatch(req);
}

/* Dispatches queued requests until one blocks or the replies back up. */
static void client_pump(struct px_client *cl)
{
    struct list *n;

    while (!cl->barrier && !cl->closing && !client_output_full(cl) &&
           (n = list_first(&cl->queued)) != NULL) {
        struct px_req *req = list_entry(n, struct px_req, node);

        req->blocking = px_cmd_may_block(req);
        if (req->blocking) {
            cl->barrier = req;
            cl->barrier_ms = sched_loop_now_ms(cl->srv->loop);
        }
        client_dispatch(cl, req);
    }
}

/* Queues req; an answered one (a request the parser skipped over a limit)
 * only waits for its turn to be written. */
static void client_on_request(struct px_client *cl, struct px_req *req)
{
    req->cl = cl;
    if (req->answered)
        cl->srv->stats.proto_errs++;
    else
        req->cmd = px_cmd_lookup(req->argv[0].p, req->argv[0].len);
    list_add_tail(&cl->queued, &req->node);
    cl->nreqs++;
}

/* Queues a final error reply after those owed and stops reading: the
 * stream is unusable. */
static void client_protocol_error(struct px_client *cl, const char *why)
{
    struct px_req *req = px_req_create(0);

    cl->srv->stats.proto_errs++;
    log_msg(LOG_LVL_DEBUG, "client %llu: protocol error: %s", (unsigned long long)cl->id, why);
    cl->quit = true;
    client_set_input(cl, PX_INPUT_DONE);
    if (!req || px_reply_error(&req->reply, "ERR Protocol error: %s", why) < 0) {
        if (req)
            px_req_free(req);
        px_client_close(cl);
        return;
    }
    req->answered = true;
    req->cl = cl;
    list_add_tail(&cl->queued, &req->node);
    cl->nreqs++;
    client_pump(cl);
}

/* The unparsed input: bytes kept from earlier reads (cl->in) come first,
 * else the rest of the read being handled (cl->rd, borrowed). */
static void client_input(const struct px_client *cl, const char **data, size_t *len)
{
    if (buf_size(&cl->in) > 0) {
        *data = buf_head(&cl->in);
        *len = buf_size(&cl->in);
    } else {
        *data = cl->rd;
        *len = cl->rdlen;
    }
}

/* Takes the next request from the input: 1 (queued), 0 (needs more
 * input) or -errno (E2BIG: too many before AUTH; else a bad frame). */
static int client_take(struct px_client *cl)
{
    struct px_req *req;
    const char *data;
    size_t len, before;
    bool kept = buf_size(&cl->in) > 0;
    int rc;

    client_input(cl, &data, &len);
    if (len == 0) /* the usual second call after a request: nothing to parse */
        return 0;
    before = len;
    rc = px_parser_next(&cl->parser, &data, &len, &req);
    if (kept) {
        buf_consume(&cl->in, before - len);
        if (buf_size(&cl->in) == 0)
            buf_deinit(&cl->in); /* an idle connection keeps no input buffer */
    } else {
        cl->rd = data;
        cl->rdlen = len;
    }
    if (rc <= 0)
        return rc;
    /* One at a time before AUTH (client_process dispatches each before
     * taking the next): a successful AUTH lifts the parser's limits. */
    if (!cl->authed && ++cl->preauth > PX_PREAUTH_PIPELINE) {
        px_req_free(req);
        return -E2BIG;
    }
    client_on_request(cl, req);
    return 1;
}

/* Takes and dispatches requests while the limits allow, then pauses or
 * resumes the socket accordingly. Not re-entered (see the design block). */
static void client_process(struct px_client *cl)
{
    int rc = 1;

    if (cl->processing || cl->closing)
        return;
    cl->processing = true;
    px_client_get(cl);
    for (;;) {
        client_pump(cl);
        if (!client_may_take(cl) || (rc = client_take(cl)) <= 0)
            break;
    }
    cl->processing = false;
    if (rc == -E2BIG)
        client_protocol_error(cl, "too many commands before AUTH");
    else if (rc < 0)
        client_protocol_error(cl, px_parser_error(&cl->parser));
    else if (!cl->closing)
        client_set_input(cl, client_input_state(cl, rc == 0));
    px_climem_sync(cl);
    px_client_put(cl);
}

static void client_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);

    if (cl->quit || cl->closing)
        return;
    cl->active_ms = sched_loop_now_ms(cl->srv->loop);
    cl->preauth = 0;
    if (buf_size(&cl->in) > 0) { /* paused with input left: keep the order */
        if (buf_append(&cl->in, data, len) < 0)
            return client_protocol_error(cl, "out of memory");
    } else {
        cl->rd = data;
        cl->rdlen = len;
    }
    px_client_get(cl);
    client_process(cl);
    /* What the client did not take now is kept until it takes more. */
    if (cl->rdlen > 0 && !cl->quit && !cl->closing && buf_append(&cl->in, cl->rd, cl->rdlen) < 0)
        client_protocol_error(cl, "out of memory");
    cl->rd = NULL;
    cl->rdlen = 0;
    px_climem_sync(cl);
    px_client_put(cl);
}

/* Everything was sent: a client paused for its replies reads again. */
static void client_on_drain(struct sched_conn *c)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);

    if (cl->input == PX_INPUT_OUTPUT)
        client_process(cl);
    px_climem_sync(cl);
}

/* ---- deadlines ------------------------------------------------------------ */

static bool client_auth_pending(const struct px_client *cl)
{
    const struct px_opts *o = &cl->srv->opts;

    return !cl->authed && o->auth_timeout_s > 0 && px_auth_required(o->auth);
}

/* Holding or waiting for a lock (or permits), or a request outstanding. */
static bool client_is_busy(const struct px_client *cl)
{
    return cl->nreqs > 0 || px_locks_client_busy(&cl->caller.locks) || px_subs_client_busy(cl);
}

/* When the deadline must look at cl next, or 0 for never. */
static uint64_t client_deadline_at(const struct px_client *cl)
{
    const struct px_opts *o = &cl->srv->opts;
    uint64_t at = 0, idle;

    if (client_auth_pending(cl))
        at = cl->accept_ms + o->auth_timeout_s * 1000ull;
    if (o->timeout_s > 0) {
        idle = cl->active_ms + o->timeout_s * 1000ull;
        at = at && at < idle ? at : idle;
    }
    return at;
}

static void client_arm_deadline(struct px_client *cl)
{
    uint64_t at = client_deadline_at(cl);

    if (at)
        sched_loop_timer_add(cl->srv->loop, &cl->timer, at);
    else
        sched_loop_timer_del(cl->srv->loop, &cl->timer);
}

static void client_on_deadline(struct sched_timer *t)
{
    struct px_client *cl = LP_CONTAINER_OF(t, struct px_client, timer);
    struct px_server *srv = cl->srv;
    uint64_t now = sched_loop_now_ms(srv->loop);

    if (cl->closing)
        return;
    if (client_auth_pending(cl) && now >= cl->accept_ms + srv->opts.auth_timeout_s * 1000ull) {
        srv->stats.auth_closes++;
        log_msg(LOG_LVL_DEBUG, "client %llu: no AUTH within --auth-timeout %u s; closing",
                (unsigned long long)cl->id, srv->opts.auth_timeout_s);
        return px_client_close(cl);
    }
    if (cl->conn.bytes_out != cl->seen_out || client_is_busy(cl)) {
        cl->seen_out = cl->conn.bytes_out;
        cl->active_ms = now;
    }
    if (srv->opts.timeout_s > 0 && now >= cl->active_ms + srv->opts.timeout_s * 1000ull) {
        srv->stats.idle_closes++;
        log_msg(LOG_LVL_DEBUG, "client %llu: idle for --timeout %u s; closing",
                (unsigned long long)cl->id, srv->opts.timeout_s);
        return px_client_close(cl);
    }
    client_arm_deadline(cl);
}

void px_client_reconfigure(struct px_server *srv)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &srv->clients)
    {
        struct px_client *cl = list_entry(n, struct px_client, client_node);

        if (cl->closing)
            continue;
        client_arm_deadline(cl);
        if (cl->input != PX_INPUT_DONE)
            client_process(cl);
    }
}

/* ---- lifetime ------------------------------------------------------------ */

static void client_on_hangup(struct sched_conn *c, int err)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);

    if (sched_conn_tls_error(c))
        px_tls_log_failure(cl->srv, c);
    else if (err < 0)
        log_msg(LOG_LVL_DEBUG, "client %llu: connection lost: %s", (unsigned long long)cl->id,
                strerror(-err));
    /* An orderly EOF may be a half-close (`printf ... | nc`): the peer
     * still reads, so the replies already made go out before the close,
     * as Redis writes them before it reads the EOF. Requests still queued
     * or running are dropped, as on any disconnect. */
    cl->flush_on_close = err == 0 && !sched_conn_tls_error(c);
    px_client_close(cl);
}

static void client_on_release(struct sched_conn *c)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);

    cl->conn_released = true;
    client_maybe_free(cl);
}

static const struct sched_conn_ops client_ops = {
    .on_data = client_on_data,
    .on_hangup = client_on_hangup,
    .on_connect = NULL,
    .on_drain = client_on_drain,
    .on_release = client_on_release,
};

void px_client_get(struct px_client *cl)
{
    cl->upstream_refs++;
}

void px_client_put(struct px_client *cl)
{
    LP_BUG_ON(cl->upstream_refs == 0);
    cl->upstream_refs--;
    client_maybe_free(cl);
}

/* The engine's hooks on a connection (struct lk_front). */
void px_client_caller_get(struct lk_caller *c)
{
    px_client_get(LP_CONTAINER_OF(c, struct px_client, caller));
}

void px_client_caller_put(struct lk_caller *c)
{
    px_client_put(LP_CONTAINER_OF(c, struct px_client, caller));
}

struct lk_caller *px_client_caller_find(struct lk_engine *eng, uint64_t id)
{
    struct px_server *srv = eng->owner;
    struct list *n;

    for (n = srv->clients.next; n != &srv->clients; n = n->next) {
        struct px_client *cl = LP_CONTAINER_OF(n, struct px_client, client_node);

        if (cl->id == id)
            return cl->closing ? NULL : &cl->caller;
    }
    return NULL;
}

static void client_maybe_free(struct px_client *cl)
{
    if (!cl->conn_released || cl->upstream_refs > 0)
        return;
    LP_BUG_ON(!list_empty(&cl->running) || !list_empty(&cl->queued));
    LP_BUG_ON(sched_timer_is_pending(&cl->timer));
    LP_BUG_ON(cl->mem != 0);
    buf_deinit(&cl->conn.out);
    buf_deinit(&cl->conn.sending);
    buf_deinit(&cl->in);
    px_parser_deinit(&cl->parser);
    if (cl->extra)
        buf_deinit(&cl->extra->pushes);
    free(cl->extra);
    free(cl);
}

const char *px_client_name(const struct px_client *cl)
{
    return cl->extra ? cl->extra->name : "";
}

const char *px_client_lib_name(const struct px_client *cl)
{
    return cl->extra ? cl->extra->lib_name : "";
}

const char *px_client_lib_ver(const struct px_client *cl)
{
    return cl->extra ? cl->extra->lib_ver : "";
}

struct px_client_extra *px_client_extra(struct px_client *cl)
{
    if (!cl->extra)
        cl->extra = calloc(1, sizeof(*cl->extra));
    return cl->extra;
}

static void client_drop_queued(struct px_client *cl)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->queued)
    {
        list_del_init(n);
        cl->nreqs--;
        px_multi_req_gone(cl, list_entry(n, struct px_req, node));
        px_req_free(list_entry(n, struct px_req, node));
    }
}

void px_client_close(struct px_client *cl)
{
    struct px_server *srv = cl->srv;

    if (cl->closing)
        return;
    px_client_get(cl);
    cl->closing = true;
    cl->caller.closing = true;
    client_set_input(cl, PX_INPUT_DONE);
    sched_loop_timer_del(srv->loop, &cl->timer);
    client_drop_queued(cl);
    px_multi_client_gone(cl); /* closing: its memory leaves the sum */
    px_subs_client_gone(cl);
    list_del_init(&cl->client_node);
    srv->nclients--;
    px_locks_client_gone(&cl->caller);
    sched_conn_close(&cl->conn, cl->quit || cl->flush_on_close);
    px_client_put(cl);
}

void px_client_close_all(struct px_server *srv)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &srv->clients)
    {
        px_client_close(list_entry(n, struct px_client, client_node));
    }
}

/* Refuses fd with an error line (none in clear text to a TLS client):
 * the server is full. */
static int client_refuse(struct px_server *srv, int fd, bool tls)
{
    static const char msg[] = "-ERR max number of clients reached\r\n";

    srv->stats.rejected++;
    if (!tls && write(fd, msg, sizeof(msg) - 1) < 0)
        log_msg(LOG_LVL_DEBUG, "rejecting client: write failed");
    close(fd);
    return -EMFILE;
}

static void client_init(struct px_server *srv, struct px_client *cl)
{
    uint64_t now = sched_loop_now_ms(srv->loop);

    px_parser_init(&cl->parser, srv->opts.max_args, srv->opts.max_request_bytes);
    cl->srv = srv;
    cl->proto = PX_PROTO_RESP2;
    px_auth_client_init(cl);
    cl->id = ++srv->next_client_id;
    list_init(&cl->queued);
    list_init(&cl->running);
    px_multi_init(&cl->multi);
    px_locks_client_init(&cl->caller, srv->engine, cl->id);
    sched_timer_init(&cl->timer, client_on_deadline);
    cl->input = PX_INPUT_READING;
    cl->accept_ms = now;
    cl->active_ms = now;
}

int px_client_accept(struct px_server *srv, int fd, struct sched_tls_ctx *tls)
{
    struct px_client *cl;
    int rc;

    if (srv->nclients >= srv->opts.max_clients)
        return client_refuse(srv, fd, tls != NULL);
    cl = calloc(1, sizeof(*cl));
    if (!cl) {
        close(fd);
        return -ENOMEM;
    }
    client_init(srv, cl);
    rc = sched_conn_attach(srv->loop, &cl->conn, fd, &client_ops);
    if (rc < 0) {
        px_parser_deinit(&cl->parser);
        free(cl);
        return rc;
    }
    if (tls && (rc = sched_conn_start_tls(&cl->conn, tls, NULL)) < 0) {
        cl->closing = true;
        cl->caller.closing = true;
        sched_conn_close(&cl->conn, false); /* cl is freed at on_release */
        return rc;
    }
    rc = sched_conn_keepalive(&cl->conn, srv->opts.keepalive_s);
    if (rc < 0)
        log_msg(LOG_LVL_DEBUG, "client %llu: no TCP keepalive: %s", (unsigned long long)cl->id,
                strerror(-rc));
    list_add_tail(&srv->clients, &cl->client_node);
    srv->nclients++;
    srv->stats.connections++;
    client_arm_deadline(cl);
    return 0;
}
