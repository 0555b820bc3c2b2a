/* The RESP end of a waiting command; see wait_end.h. */
#include "proxy/cmds/wait_end.h"

#include <errno.h>

#include "common/util.h"
#include "engine/engine.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/reply.h"
#include "proxy/server.h"

void px_wait_reply_upstream(struct px_req *req, int err)
{
    if (err != -ENOMEM)
        return px_args_reply_upstream(req, err);
    req->cl->srv->stats.upstream_errs++;
    px_reply_error(px_req_out(req), "ERR out of memory");
}

/* The reply for end (nothing for LK_END_REPLIED). */
static void wait_end_reply(struct px_wait_op *op, enum lk_end end, const struct lk_end_info *info)
{
    struct px_req *req = px_wait_req(op);
    const struct lk_config *o = &op->eng->cfg;

    switch (end) {
    case LK_END_REPLIED:
        break;
    case LK_END_TIMEOUT:
        px_reply_null(px_req_out(req), req->cl->proto);
        break;
    case LK_END_UPSTREAM:
        px_wait_reply_upstream(req, info->err);
        break;
    case LK_END_REDIS_ERROR:
        px_args_reply_redis_error(req, info->r);
        break;
    case LK_END_LATE:
        px_reply_error(px_req_out(req),
                       "UPSTREAM Redis answered too late (%llu ms, lease %llu ms): not acquired",
                       (unsigned long long)op->late_age, (unsigned long long)op->lease_ms);
        req->cl->srv->stats.upstream_errs++;
        break;
    case LK_END_UNREPLICATED:
        px_reply_error(px_req_out(req),
                       "NOREPLICAS %s not replicated to %u replicas within %u ms (%d "
                       "acknowledged); not acquired",
                       op->kind->name, o->sync_replicas, o->sync_timeout_ms,
                       info->acked < 0 ? 0 : info->acked);
        break;
    }
}

void px_wait_finish_resp(struct px_wait_op *op, enum lk_end end, const struct lk_end_info *info)
{
    struct px_req *req = px_wait_req(op);

    req->op = NULL;
    wait_end_reply(op, end, info);
    op->kind->destroy(op);
    px_req_done(req);
}

void px_cmd_wait_init(struct px_wait_op *op, const struct px_wait_kind *kind, struct px_req *req,
                      int64_t wait_ms)
{
    const struct px_arg *name = &req->argv[1];

    px_wait_init(op, kind, &req->cl->caller, req, name->p, name->len,
                 req->in_exec ? 0 : wait_ms); /* inside EXEC: one attempt (multi.h) */
}

void px_cmd_wait_start(struct px_wait_op *op)
{
    px_wait_req(op)->op = op;
    px_wait_start(op);
}
