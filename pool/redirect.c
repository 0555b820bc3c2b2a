/* Cluster redirects and retries of caller requests: MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN, LOADING, MASTERDOWN; a Sentinel master's READONLY; and, for
 * a single node, the clear error when the upstream turns out to be a
 * cluster node.
 *
 * Each of these replies means the command did not run, so the request may
 * be sent again; a cluster request keeps its formatted command (tail) for
 * that. The caller never sees a redirect:
 *
 *   MOVED slot addr  the map learns the owner (cluster.c), the request goes
 *                    to it at once
 *   ASK slot addr    ASKING + the request on that node, the map unchanged
 *   TRYAGAIN,        parked, re-sent after a backoff (pool__backoff_ms of
 *   CLUSTERDOWN,     the request's retries), routed afresh by its slot;
 *   LOADING,         CLUSTERDOWN also asks for a topology refresh; one
 *   MASTERDOWN       still refused at its deadline gets -ENOTCONN (it
 *                    never ran), the refusal in last_error; a Sentinel
 *                    master's LOADING and MASTERDOWN the same; a single
 *                    node's gets -ENOTCONN at once (nothing is parked)
 *   READONLY         (Sentinel) the master was demoted under us: the node
 *                    leaves the map, the sentinels are asked again, the
 *                    request is parked after a backoff and then routed to
 *                    the master named by then; it gets -ENOTCONN (not
 *                    executed) rather than the READONLY at its deadline
 *
 * Bounds: at most MAX_REDIRECTS MOVED/ASK per request (two nodes that
 * disagree cannot bounce it forever), then the caller gets the redirect as
 * an error reply; a retry that would start after born_ms + request timeout
 * is not made, the caller gets the error reply it has. A request whose
 * node has no ready connection waits (parked) until one comes up or its
 * time is over, then its callback gets -ENOTCONN (it never ran).
 *
 * Parked requests are on cl->parked with retry_ms, the next attempt; one
 * timer (cl->retry) is armed for the earliest. A node coming up kicks the
 * ones waiting for a connection at once. pool_stop() fails them all with
 * -ECONNRESET, like the requests in flight. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/compiler.h"
#include "common/log.h"
#include "common/util.h"
#include "pool/cluster.h"
#include "pool/pool-int.h"
#include "pool/resp.h"
#include "pool/sentinel.h"
#include "sched/loop.h"

/* MOVED/ASK followed per request before the redirect is handed back. */
#define MAX_REDIRECTS 5

static void redirect_on_retry(struct sched_timer *t);

void pool__redirect_init(struct pool__cluster *cl)
{
    list_init(&cl->parked);
    sched_timer_init(&cl->retry, redirect_on_retry);
}

int pool__redirect_parse(const struct pool_reply *r, int *slot, char *host, size_t hostsize,
                         int *port)
{
    const char *s = r->str, *end = r->str + r->len, *sp;
    int64_t v;

    sp = memchr(s, ' ', r->len);
    if (!sp)
        return -EPROTO;
    s = sp + 1;
    sp = memchr(s, ' ', (size_t)(end - s));
    if (!sp || util_parse_i64(s, (size_t)(sp - s), &v) < 0 || v < 0 || v >= POOL_SLOTS)
        return -EPROTO;
    *slot = (int)v;
    s = sp + 1;
    if (pool__addr_split(s, (size_t)(end - s), host, hostsize, port) < 0)
        return -EPROTO;
    return 0;
}

/* ---- single node ----------------------------------------------------------------- */

/* Redis refused the command without running it, for now: the cluster (or
 * the slot) is down, a slot is being migrated, the node is loading its
 * data or is a replica cut from its master. */
static bool is_busy(const struct pool_reply *r)
{
    return pool__resp_is_error(r, "TRYAGAIN") || pool__resp_is_error(r, "CLUSTERDOWN") ||
           pool__resp_is_error(r, "LOADING") || pool__resp_is_error(r, "MASTERDOWN");
}

/* A request Redis refused (is_busy) until it gives up: it never ran, so
 * the caller gets -ENOTCONN, never the raw refusal; why is in
 * last_error. */
static void busy_give_up(struct pool__rconn *rc, struct pool__req *req, const struct pool_reply *r)
{
    struct pool *p = rc->pool;

    pool__set_error(p, "%s answered %.*s", rc->addr->where, (int)LP_MIN(r->len, (size_t)120),
                    r->str);
    pool__req_complete(p, req, NULL, -ENOTCONN);
}

/* The upstream of a plain pool is a cluster node: the caller gets an error
 * that says so (and what to do) instead of a redirect it cannot follow. */
static bool single_redirect(struct pool__rconn *rc, struct pool__req *req,
                            const struct pool_reply *r)
{
    struct pool *p = rc->pool;
    const char *where = rc->addr->where;
    struct pool_reply fake;
    char text[POOL__HOST_MAX * 2 + 200];
    int n;

    if (is_busy(r)) {
        busy_give_up(rc, req, r);
        return true;
    }
    if (!pool__resp_is_error(r, "MOVED ") && !pool__resp_is_error(r, "ASK "))
        return false;
    n = snprintf(text, sizeof(text),
                 "%s redis://%s is a Redis Cluster node (it answered %.*s): use "
                 "redis-cluster://%s",
                 POOL_ERR_IS_CLUSTER_CODE, where, (int)LP_MIN(r->len, (size_t)POOL__HOST_MAX + 20),
                 r->str, where);
    if (!p->upstream_is_cluster)
        log_msg(LOG_LVL_ERROR, "pool: %s", text);
    p->upstream_is_cluster = true;
    pool__set_error(p, "%s", text);
    memset(&fake, 0, sizeof(fake));
    fake.type = POOL_REPLY_ERROR;
    fake.str = text;
    fake.len = (size_t)LP_MIN(n, (int)sizeof(text) - 1);
    pool__req_complete(p, req, &fake, 0);
    return true;
}

/* ---- parking ------------------------------------------------------------------- */

static uint64_t req_deadline(const struct pool *p, const struct pool__req *req)
{
    return req->born_ms + p->opts.request_timeout_ms;
}

/* Arms the retry timer for the earliest parked request. */
static void retry_arm(struct pool__cluster *cl)
{
    uint64_t first = UINT64_MAX;
    struct list *pos;

    for (pos = cl->parked.next; pos != &cl->parked; pos = pos->next)
        first = LP_MIN(first, list_entry(pos, struct pool__req, node)->retry_ms);
    if (first == UINT64_MAX)
        sched_loop_timer_del(cl->pool->loop, &cl->retry);
    else
        sched_loop_timer_add(cl->pool->loop, &cl->retry, first);
}

static void park(struct pool__cluster *cl, struct pool__req *req, uint64_t when)
{
    req->retry_ms = when;
    list_add_tail(&cl->parked, &req->node);
    if (!sched_timer_is_pending(&cl->retry) || when < cl->retry.expires)
        sched_loop_timer_add(cl->pool->loop, &cl->retry, when);
}

/* A request parked to wait for a connection waits until its deadline. */
static bool waits_for_conn(const struct pool *p, const struct pool__req *req)
{
    return req->retry_ms == req_deadline(p, req);
}

void pool__redirect_send(struct pool *p, struct pool__req *req)
{
    uint64_t now = sched_loop_now_ms(p->loop);
    struct pool_node *n;
    struct pool__rconn *rc = NULL;
    int err;

    if (p->stopping) {
        pool__req_complete(p, req, NULL, -ECONNRESET);
        return;
    }
    n = req->target      ? req->target
        : req->slot >= 0 ? pool__cluster_owner(p, req->slot)
                         : pool__cluster_any(p, req->hint);
    if (n && n->state == POOL__NODE_ACTIVE)
        rc = pool__node_pick(n, req->hint);
    if (rc) {
        err = pool__rconn_resend(rc, req);
        if (err < 0)
            pool__req_complete(p, req, NULL, err);
        return;
    }
    if (now >= req_deadline(p, req)) {
        pool__req_complete(p, req, NULL, -ENOTCONN);
        return;
    }
    park(p->cl, req, req_deadline(p, req));
}

/* Re-sends the parked requests that are due (kick: also those waiting for
 * a connection). Completions may submit or stop the pool: the list is
 * detached first, and after a stop everything left fails. */
static void retry_due(struct pool__cluster *cl, bool kick)
{
    struct pool *p = cl->pool;
    uint64_t now = sched_loop_now_ms(p->loop);
    struct list todo, *n;

    list_init(&todo);
    list_splice_tail_init(&todo, &cl->parked);
    while ((n = list_first(&todo))) {
        struct pool__req *req = list_entry(n, struct pool__req, node);
        bool due = req->retry_ms <= now || (kick && waits_for_conn(p, req));

        list_del_init(n);
        if (!due && !p->stopping)
            list_add_tail(&cl->parked, n);
        else
            pool__redirect_send(p, req);
    }
    if (!p->stopping)
        retry_arm(cl);
}

static void redirect_on_retry(struct sched_timer *t)
{
    retry_due(LP_CONTAINER_OF(t, struct pool__cluster, retry), false);
}

void pool__redirect_kick(struct pool *p)
{
    if (!list_empty(&p->cl->parked))
        retry_due(p->cl, true);
}

void pool__redirect_forget_node(struct pool *p, struct pool_node *n)
{
    struct list *pos;

    for (pos = p->cl->parked.next; pos != &p->cl->parked; pos = pos->next) {
        struct pool__req *req = list_entry(pos, struct pool__req, node);

        if (req->target == n) {
            req->target = NULL;
            req->asking = false;
        }
    }
}

void pool__redirect_fail_all(struct pool *p, int err)
{
    struct list todo, *n;

    list_init(&todo);
    list_splice_tail_init(&todo, &p->cl->parked);
    while ((n = list_first(&todo))) {
        list_del_init(n);
        pool__req_complete(p, list_entry(n, struct pool__req, node), NULL, err);
    }
}

void pool__redirect_stop(struct pool__cluster *cl)
{
    sched_loop_timer_del(cl->pool->loop, &cl->retry);
    pool__redirect_fail_all(cl->pool, -ECONNRESET);
}

/* ---- cluster replies ------------------------------------------------------------- */

/* MOVED or ASK: parse, bound, retarget. Returns false to deliver r. */
static bool on_redirect(struct pool__rconn *rc, struct pool__req *req, const struct pool_reply *r,
                        bool ask)
{
    struct pool *p = rc->pool;
    char host[POOL__HOST_MAX];
    struct pool_node *to;
    int slot, port;

    if (ask) {
        rc->node->ask++;
        p->ask++;
    } else {
        rc->node->moved++;
        p->moved++;
    }
    if (++req->redirects > MAX_REDIRECTS ||
        pool__redirect_parse(r, &slot, host, sizeof(host), &port) < 0)
        return false;
    if (ask)
        to = pool__cluster_node_at(p, rc->node, host, strlen(host), port);
    else
        to = pool__cluster_moved(p, rc->node, slot, host, strlen(host), port);
    if (!to)
        return false;
    req->target = to;
    req->asking = ask;
    pool__redirect_send(p, req);
    return true;
}

/* TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN: the same request later,
 * routed afresh, if that is still within its time; else -ENOTCONN. */
static bool on_busy(struct pool__rconn *rc, struct pool__req *req, const struct pool_reply *r)
{
    struct pool *p = rc->pool;
    uint64_t now = sched_loop_now_ms(p->loop);
    uint64_t when = now + pool__backoff_ms(p, req->tries++);

    rc->node->tryagain++;
    p->tryagain++;
    if (pool__resp_is_error(r, "CLUSTERDOWN"))
        pool__cluster_refresh(p);
    if (when >= req_deadline(p, req)) {
        busy_give_up(rc, req, r);
        return true;
    }
    req->target = NULL;
    req->asking = false;
    log_msg(LOG_LVL_DEBUG, "pool: %s answered %.*s; retrying in %llu ms", rc->addr->where,
            (int)LP_MIN(r->len, (size_t)60), r->str, (unsigned long long)(when - now));
    park(p->cl, req, when);
    return true;
}

/* Sentinel: READONLY (see the file comment; the backoff keeps a request
 * from bouncing on a node that a stale sentinel still names), LOADING (a
 * restarted master loading its data) and MASTERDOWN (a demoted master cut
 * from its new master); anything else is the caller's, MOVED included: a
 * Sentinel-managed master is no cluster node. */
static bool sentinel_redirect(struct pool__rconn *rc, struct pool__req *req,
                              const struct pool_reply *r)
{
    struct pool *p = rc->pool;
    uint64_t when;

    if (pool__resp_is_error(r, "LOADING") || pool__resp_is_error(r, "MASTERDOWN"))
        return on_busy(rc, req, r);
    if (!pool__resp_is_error(r, "READONLY"))
        return false;
    pool__sentinel_readonly(p, rc->node);
    when = sched_loop_now_ms(p->loop) + pool__backoff_ms(p, req->tries++);
    if (when >= req_deadline(p, req)) {
        pool__req_complete(p, req, NULL, -ENOTCONN);
        return true;
    }
    req->target = NULL;
    req->asking = false;
    park(p->cl, req, when);
    return true;
}

bool pool__redirect(struct pool__rconn *rc, struct pool__req *req, const struct pool_reply *r)
{
    if (!rc->pool->cl)
        return single_redirect(rc, req, r);
    if (rc->pool->kind == POOL__UP_SENTINEL)
        return sentinel_redirect(rc, req, r);
    if (pool__resp_is_error(r, "MOVED "))
        return on_redirect(rc, req, r, false);
    if (pool__resp_is_error(r, "ASK "))
        return on_redirect(rc, req, r, true);
    if (is_busy(r))
        return on_busy(rc, req, r);
    return false;
}
