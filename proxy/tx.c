/* MULTI/EXEC/DISCARD; see multi.h.
 *
 * A queued request leaves the running list at once: a placeholder request
 * (no arguments) takes its place there and carries the +QUEUED reply, so
 * the replies stay in order and the request keeps its arguments for EXEC.
 * EXEC's elements stream out as they finish; while they do
 * (cl->exec_unsent), pushes wait (push.h). */
#include "proxy/tx.h"

#include <errno.h>
#include <string.h>

#include "common/util.h"
#include "proxy/client.h"
#include "proxy/climem.h"
#include "proxy/cmd.h"
#include "proxy/reply.h"
#include "proxy/server.h"

void px_multi_init(struct px_multi *m)
{
    m->active = false;
    m->dirty = false;
    m->n = 0;
    m->bytes = 0;
    list_init(&m->queue);
}

static void multi_free_queue(struct px_multi *m)
{
    struct list *n;

    while ((n = list_first(&m->queue)) != NULL) {
        list_del_init(n);
        px_req_free(list_entry(n, struct px_req, node));
    }
    px_multi_init(m);
}

void px_multi_client_gone(struct px_client *cl)
{
    multi_free_queue(&cl->multi);
    px_climem_sync(cl);
}

void px_multi_req_gone(struct px_client *cl, const struct px_req *req)
{
    if (req->in_exec) {
        LP_BUG_ON(cl->exec_unsent == 0);
        cl->exec_unsent--;
    }
}

void px_multi_reject(struct px_req *req)
{
    if (req->cl->multi.active)
        req->cl->multi.dirty = true;
    px_req_done(req);
}

/* Commands that run at once inside a transaction (WATCH: to refuse it). */
static bool multi_runs_now(const struct px_cmd *c)
{
    static const char *const names[] = {"MULTI", "EXEC", "DISCARD", "QUIT", "WATCH"};
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(names); i++) {
        if (strcmp(c->name, names[i]) == 0)
            return true;
    }
    return false;
}

/* Commands that change the connection's protocol: not in a transaction. */
static bool multi_refuses(const struct px_cmd *c)
{
    static const char *const names[] = {"HELLO", "SUBSCRIBE", "UNSUBSCRIBE"};
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(names); i++) {
        if (strcmp(c->name, names[i]) == 0)
            return true;
    }
    return false;
}

/* Moves req (RUNNING, nothing written) to the transaction's queue, and
 * answers +QUEUED in its place. Returns 0, -ENOBUFS (over
 * --max-client-memory) or -ENOMEM. */
static int multi_take(struct px_req *req)
{
    struct px_client *cl = req->cl;
    size_t bytes = px_climem_req_bytes(req);
    struct px_req *p;

    px_climem_sync(cl); /* req left the parser: not counted twice */
    if (!px_climem_admit(cl->srv, bytes))
        return -ENOBUFS;
    p = px_req_create(0);
    if (!p)
        return -ENOMEM;
    if (cl->barrier == req) /* a LOCK that may wait does not wait to be queued */
        cl->barrier = NULL;
    req->blocking = false;
    p->cl = cl;
    p->state = PX_REQ_RUNNING;
    list_insert_between(&p->node, req->node.prev, &req->node);
    list_del_init(&req->node);
    req->state = PX_REQ_QUEUED;
    list_add_tail(&cl->multi.queue, &req->node);
    cl->multi.n++;
    cl->multi.bytes += bytes;
    px_climem_sync(cl);
    px_reply_status(px_req_out(p), "QUEUED");
    px_req_done(p);
    return 0;
}

bool px_multi_intercept(struct px_req *req)
{
    struct px_client *cl = req->cl;
    unsigned max = cl->srv->opts.max_pipeline;
    int rc;

    if (!cl->multi.active || multi_runs_now(req->cmd))
        return false;
    if (multi_refuses(req->cmd))
        px_reply_error(px_req_out(req), "ERR Command not allowed inside a transaction");
    else if (cl->multi.n >= max)
        px_reply_error(px_req_out(req),
                       "ERR transaction has more than %u commands queued (--max-pipeline)", max);
    else if ((rc = multi_take(req)) == -ENOBUFS)
        px_reply_error(px_req_out(req),
                       "OOM command not allowed when client memory is over "
                       "--max-client-memory (%zu bytes)",
                       cl->srv->opts.max_client_memory);
    else if (rc < 0)
        px_reply_error(px_req_out(req), "ERR out of memory");
    else
        return true;
    px_multi_reject(req);
    return true;
}

static void finish_error(struct px_req *req, const char *text)
{
    px_reply_error(px_req_out(req), "%s", text);
    px_req_done(req);
}

static void cmd_multi(struct px_req *req)
{
    if (req->cl->multi.active)
        return finish_error(req, "ERR MULTI calls can not be nested");
    req->cl->multi.active = true;
    px_reply_status(px_req_out(req), "OK");
    px_req_done(req);
}

static void cmd_discard(struct px_req *req)
{
    if (!req->cl->multi.active)
        return finish_error(req, "ERR DISCARD without MULTI");
    multi_free_queue(&req->cl->multi);
    px_climem_sync(req->cl);
    px_reply_status(px_req_out(req), "OK");
    px_req_done(req);
}

/* Answers the array header and puts the queued requests, marked in_exec,
 * at the head of the input queue: they run next, in order. */
static void cmd_exec(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct px_multi *m = &cl->multi;
    struct list *n;

    if (!m->active)
        return finish_error(req, "ERR EXEC without MULTI");
    if (m->dirty) {
        multi_free_queue(m);
        px_climem_sync(cl);
        return finish_error(req, "EXECABORT Transaction discarded because of previous errors.");
    }
    px_reply_array(px_req_out(req), m->n);
    for (n = m->queue.next; n != &m->queue; n = n->next)
        list_entry(n, struct px_req, node)->in_exec = true;
    cl->exec_unsent += m->n;
    cl->nreqs += m->n;
    list_splice_tail_init(&m->queue, &cl->queued); /* m->queue: the queue, then what waited */
    list_splice_tail_init(&cl->queued, &m->queue); /* all of it back, in that order */
    px_multi_init(m); /* queued now: bounded by --max-pipeline and the output limits */
    px_climem_sync(cl);
    px_req_done(req);
}

/* WATCH would need one Redis transaction across names: refused clearly. */
static void cmd_watch(struct px_req *req)
{
    finish_error(req, "ERR WATCH is not supported: lockproxy runs no Redis transaction across "
                      "names (see MULTI in its README)");
}

/* UNWATCH: nothing is watched; clients send it defensively. */
static void cmd_unwatch(struct px_req *req)
{
    px_reply_status(px_req_out(req), "OK");
    px_req_done(req);
}

static const struct px_cmd multi_cmds[] = {
    {"MULTI", 1, 1, cmd_multi, NULL, 0},     {"EXEC", 1, 1, cmd_exec, NULL, 0},
    {"DISCARD", 1, 1, cmd_discard, NULL, 0}, {"WATCH", 2, -1, cmd_watch, NULL, 0},
    {"UNWATCH", 1, 1, cmd_unwatch, NULL, 0},
};
const struct px_cmd_set px_multi_cmd_set = {multi_cmds, LP_ARRAY_SIZE(multi_cmds)};
