/* One script, one reply; see call.h. */
#include "proxy/cmds/call.h"

#include <errno.h>
#include <stdlib.h>

#include "engine/scripts.h"
#include "engine/wait.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"

/* A call in flight (req->op). */
struct call {
    struct px_req *req;    /* borrowed: the request being answered */
    px_call_reply_fn *fmt; /* borrowed: formats the script's reply, or NULL */
    px_call_result_fn *fn; /* borrowed: hears every outcome (when fmt is NULL) */
    void *arg;             /* fn's */
    bool own_failures;     /* fn answers upstream failures itself */
};

static void call_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct call *c = arg;
    struct px_req *req = c->req;
    struct px_client *cl = req->cl;

    if (err < 0) {
        if (!c->own_failures) /* else fn answers */
            px_wait_reply_upstream(req, err);
    } else if (r->type == POOL_REPLY_ERROR)
        px_args_reply_redis_error(req, r);
    else if (c->fmt)
        c->fmt(req, r);
    if (c->fn)
        c->fn(req, c->arg, err < 0 ? NULL : r, err);
    req->op = NULL;
    free(c);
    px_req_done(req);
    px_client_put(cl);
}

static void call_start(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                       const char *const *argv, const size_t *lens, struct call *c)
{
    int rc;

    if (!c) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    c->req = req;
    rc = px_script_eval(req->cl->srv->engine, hint, script, numkeys, argc, argv, lens,
                        call_on_reply, c);
    if (rc < 0) {
        if (!c->own_failures || rc == -ENOMEM)
            px_wait_reply_upstream(req, rc);
        if (c->fn)
            c->fn(req, c->arg, NULL, rc == -ENOMEM ? -ENOMEM : -ENOTCONN);
        free(c);
        return px_req_done(req);
    }
    req->op = c;
    px_client_get(req->cl);
}

void px_call_script(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                    const char *const *argv, const size_t *lens, px_call_reply_fn *fmt)
{
    struct call *c = calloc(1, sizeof(*c));

    if (c)
        c->fmt = fmt;
    call_start(req, hint, script, numkeys, argc, argv, lens, c);
}

/* px_call_script_arg and _own: fn gets the result; own_failures: it also
 * answers Redis's failures itself. */
static void call_script_fn(struct px_req *req, uint64_t hint, unsigned script, int numkeys,
                           int argc, const char *const *argv, const size_t *lens,
                           px_call_result_fn *fn, void *arg, bool own_failures)
{
    struct call *c = calloc(1, sizeof(*c));

    if (!c) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        fn(req, arg, NULL, -ENOMEM);
        return px_req_done(req);
    }
    c->fn = fn;
    c->arg = arg;
    c->own_failures = own_failures;
    call_start(req, hint, script, numkeys, argc, argv, lens, c);
}

void px_call_script_arg(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                        const char *const *argv, const size_t *lens, px_call_result_fn *fn,
                        void *arg)
{
    call_script_fn(req, hint, script, numkeys, argc, argv, lens, fn, arg, false);
}

void px_call_script_own(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                        const char *const *argv, const size_t *lens, px_call_result_fn *fn,
                        void *arg)
{
    call_script_fn(req, hint, script, numkeys, argc, argv, lens, fn, arg, true);
}

void px_call_reply_int(struct px_req *req, const struct pool_reply *r)
{
    if (r->type != POOL_REPLY_INTEGER)
        return px_wait_reply_upstream(req, -EPROTO);
    px_reply_int(px_req_out(req), r->integer);
}

bool px_call_wait_zero(const struct px_req *req)
{
    int i;

    for (i = 2; i + 1 < req->argc; i++) {
        const struct px_arg *o = &req->argv[i], *v = &req->argv[i + 1];

        if (px_args_is(o, "WAIT") && v->len == 1 && v->p[0] == '0')
            return true;
    }
    return false;
}
