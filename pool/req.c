/* Request records (struct pool__req): the free list, the completion of a
 * caller request, and the kept command a request carries for a second
 * send (the NOSCRIPT retry of an EVALSHA; any re-send of a cluster
 * request after MOVED, ASK or TRYAGAIN).
 *
 * What is kept: the formatted bulks after the command name's prefix,
 * copied from the output right after the first send (one memcpy, no
 * second formatting): for EVALSHA "numkeys keys args" (the SHA1 or the
 * script text goes in front again), for a cluster command every argument.
 * A single-node command keeps nothing: it is never sent twice. Up to
 * POOL__REQ_INLINE bytes live in the record itself. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pool/pool-int.h"
#include "pool/resp.h"

/* Recycled request records kept beyond this are freed: a burst of
 * in-flight requests should not pin its memory forever. */
#define POOL_FREE_REQS_MAX 4096

/* LIFO reuse keeps recently used (cache-warm) records in play; malloc only
 * when the free list is empty. */
struct pool__req *pool__req_get(struct pool *p)
{
    struct list *n = list_first(&p->free_reqs);
    struct pool__req *req;

    if (n) {
        list_del_init(n);
        p->nfree_reqs--;
        req = list_entry(n, struct pool__req, node);
    } else {
        req = malloc(sizeof(*req));
        if (!req)
            return NULL;
        list_init(&req->node);
    }
    req->cb = NULL;
    req->arg = NULL;
    req->sent_ms = 0;
    req->kind = POOL__REQ_CMD;
    req->slot = -1;
    req->target = NULL;
    req->script = 0;
    req->ntail = 0;
    req->redirects = 0;
    req->tries = 0;
    req->retried = false;
    req->asking = false;
    req->tail = NULL;
    req->tail_len = 0;
    req->wait = NULL;
    req->held = NULL;
    req->acked = -1;
    req->start_ns = 0;
    req->batch = 0;
    req->keys_at = 0;
    req->args_at = 0;
    return req;
}

/* A heap tail (long EVAL arguments) is freed at once; the record itself
 * is kept for reuse up to POOL_FREE_REQS_MAX. */
void pool__req_put(struct pool *p, struct pool__req *req)
{
    if (req->tail != req->inl)
        free(req->tail);
    req->tail = NULL;
    if (req->held)
        pool__resp_free(req->held);
    req->held = NULL;
    if (p->nfree_reqs >= POOL_FREE_REQS_MAX) {
        free(req);
        return;
    }
    p->nfree_reqs++;
    list_add_head(&p->free_reqs, &req->node);
}

void pool__req_free_all(struct pool *p)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->free_reqs)
    {
        list_del_init(pos);
        free(list_entry(pos, struct pool__req, node));
    }
    p->nfree_reqs = 0;
}

void pool__req_complete(struct pool *p, struct pool__req *req, const struct pool_reply *r, int err)
{
    pool_reply_fn *cb = req->cb;
    void *arg = req->arg;
    bool script = req->start_ns != 0;
    struct pool_result res = {.reply = r, .err = err, .acks = -1};

    if (req->wait) {
        res.replicas = req->wait->replicas;
        res.acks = err == 0 && r->type != POOL_REPLY_ERROR ? req->acked : -1;
    }
    if (script)
        res.rtt_us = (clock_mono_ns() - req->start_ns) / 1000u;
    if (req->kind != POOL__REQ_INTERNAL) {
        p->inflight--;
        if (err < 0)
            p->errors++;
    }
    pool__req_put(p, req);
    if (script && p->opts.on_eval)
        p->opts.on_eval(p->opts.eval_arg, &res);
    cb(arg, &res);
}

int pool__req_format_kept(const struct pool *p, struct buf *b, const struct pool__req *req)
{
    const struct pool__script *s;
    const char *pre[2];
    size_t prelens[2];

    if (req->kind == POOL__REQ_CMD)
        return pool__resp_command_raw(b, 0, NULL, NULL, req->ntail, req->tail, req->tail_len);
    s = &p->scripts[req->script];
    pre[0] = req->retried ? "EVAL" : "EVALSHA";
    prelens[0] = req->retried ? 4 : 7;
    pre[1] = req->retried ? s->text : s->sha;
    prelens[1] = req->retried ? s->text_len : strlen(s->sha);
    return pool__resp_command_raw(b, 2, pre, prelens, req->ntail, req->tail, req->tail_len);
}
