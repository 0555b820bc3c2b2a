/* Client connections: RESP2 request parsing with limits, in-order replies,
 * barriers for blocking commands, and the connection's lifetime.
 *
 * Parsing (request.c) enforces the request limits; a rejected
 * frame gets "-ERR Protocol error: <why>" after the replies already owed,
 * and the connection is closed (the stream cannot be resynchronised).
 *
 * States of a request: QUEUED (behind a barrier) -> RUNNING (dispatched)
 * -> DONE (reply ready) -> written and freed, strictly in arrival order.
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
#include "proxy/auth.h"
#include "proxy/cmd.h"
#include "proxy/locks/locks.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

static void client_pump(struct px_client *cl);
static void client_maybe_free(struct px_client *cl);

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
        if (!cl->closing && buf_size(&req->reply) > 0)
            buf_append(sched_conn_wbuf(&cl->conn), buf_head(&req->reply), buf_size(&req->reply));
        px_req_free(req);
        /* The new head may have finished already; its reply is in req->reply. */
    }
    if (!cl->closing)
        sched_conn_mark_dirty(&cl->conn);
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
    if (!cl->closing) {
        client_pump(cl);
        if (cl->quit && cl->nreqs == 0)
            px_client_close(cl);
        else if (cl->nreqs < cl->srv->opts.max_pipeline)
            sched_conn_pause(&cl->conn, false);
    }
    px_client_put(cl);
}

/* ---- dispatch ------------------------------------------------------------ */

static void client_dispatch(struct px_client *cl, struct px_req *req)
{
    list_del_init(&req->node);
    list_add_tail(&cl->running, &req->node);
    req->state = PX_REQ_RUNNING;
    cl->srv->stats.commands++;
    px_cmd_dispatch(req);
}

/* Dispatches queued requests until one blocks. */
static void client_pump(struct px_client *cl)
{
    struct list *n;

    while (!cl->barrier && !cl->closing && (n = list_first(&cl->queued)) != NULL) {
        struct px_req *req = list_entry(n, struct px_req, node);

        req->blocking = px_cmd_may_block(req);
        if (req->blocking) {
            cl->barrier = req;
            cl->barrier_ms = sched_loop_now_ms(cl->srv->loop);
        }
        client_dispatch(cl, req);
    }
}

static void client_on_request(struct px_client *cl, struct px_req *req)
{
    if (req->argc == 0) {
        px_req_free(req);
        return;
    }
    req->cl = cl;
    req->cmd = px_cmd_lookup(req->argv[0].p, req->argv[0].len);
    list_add_tail(&cl->queued, &req->node);
    cl->nreqs++;
}

/* Queues a final error reply and stops reading: the stream is unusable. */
static void client_protocol_error(struct px_client *cl, const char *why)
{
    struct px_req *req = px_req_create(0);

    cl->srv->stats.proto_errs++;
    log_msg(LOG_LVL_DEBUG, "client %llu: protocol error: %s", (unsigned long long)cl->id, why);
    cl->quit = true;
    sched_conn_pause(&cl->conn, true);
    if (!req) {
        px_client_close(cl);
        return;
    }
    req->cl = cl;
    px_reply_error(&req->reply, "ERR Protocol error: %s", why);
    list_add_tail(&cl->running, &req->node);
    cl->nreqs++;
    px_req_done(req);
}

static void client_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);
    unsigned preauth = 0;
    struct px_req *req;
    int rc = 0;

    if (cl->quit || cl->closing)
        return;
    if (px_parser_feed(&cl->parser, data, len) < 0)
        return client_protocol_error(cl, "out of memory");
    px_client_get(cl);
    while (!cl->quit && !cl->closing && (rc = px_parser_next(&cl->parser, &req)) > 0) {
        if (!cl->authed && ++preauth > PX_PREAUTH_PIPELINE) {
            px_req_free(req);
            rc = -E2BIG;
            break;
        }
        client_on_request(cl, req);
        if (!cl->authed)
            client_pump(cl); /* one at a time: a successful AUTH lifts the limits */
    }
    client_pump(cl);
    if (rc == -E2BIG)
        client_protocol_error(cl, "too many commands before AUTH");
    else if (rc < 0)
        client_protocol_error(cl, px_parser_error(&cl->parser));
    else if (cl->nreqs >= cl->srv->opts.max_pipeline)
        sched_conn_pause(&cl->conn, true);
    px_client_put(cl);
}

/* ---- lifetime ------------------------------------------------------------ */

static void client_on_hangup(struct sched_conn *c, int err)
{
    struct px_client *cl = LP_CONTAINER_OF(c, struct px_client, conn);

    (void)err;
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
    .on_drain = NULL,
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

static void client_maybe_free(struct px_client *cl)
{
    if (!cl->conn_released || cl->upstream_refs > 0)
        return;
    LP_BUG_ON(!list_empty(&cl->running) || !list_empty(&cl->queued));
    buf_deinit(&cl->conn.out);
    buf_deinit(&cl->conn.sending);
    px_parser_deinit(&cl->parser);
    free(cl);
}

static void client_drop_queued(struct px_client *cl)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->queued)
    {
        list_del_init(n);
        cl->nreqs--;
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
    client_drop_queued(cl);
    px_locks_client_gone(cl);
    list_del_init(&cl->client_node);
    srv->nclients--;
    sched_conn_close(&cl->conn, cl->quit);
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

int px_client_accept(struct px_server *srv, int fd)
{
    struct px_client *cl;
    int rc;

    if (srv->nclients >= srv->opts.max_clients) {
        static const char msg[] = "-ERR max number of clients reached\r\n";

        srv->stats.rejected++;
        if (write(fd, msg, sizeof(msg) - 1) < 0)
            log_msg(LOG_LVL_DEBUG, "rejecting client: write failed");
        close(fd);
        return -EMFILE;
    }
    cl = calloc(1, sizeof(*cl));
    if (!cl) {
        close(fd);
        return -ENOMEM;
    }
    px_parser_init(&cl->parser, &srv->readers, srv->opts.max_args, srv->opts.max_request_bytes);
    cl->srv = srv;
    px_auth_client_init(cl);
    cl->id = ++srv->next_client_id;
    list_init(&cl->queued);
    list_init(&cl->running);
    px_locks_client_init(&cl->locks);
    rc = sched_conn_attach(srv->loop, &cl->conn, fd, &client_ops);
    if (rc < 0) {
        px_parser_deinit(&cl->parser);
        free(cl);
        return rc;
    }
    list_add_tail(&srv->clients, &cl->client_node);
    srv->nclients++;
    srv->stats.connections++;
    return 0;
}
