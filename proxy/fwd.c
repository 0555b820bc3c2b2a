/* Pass-through forwarding; see fwd.h. */
#include "proxy/fwd.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/fwd_keys.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "proxy/stats.h"
#include "proxy/tx.h"

/* Keys under these hash tags are the proxy's own (sem_reap.h). */
#define FWD_OWN_PREFIX "{lp-"

#define FWD_ARGV_INLINE 16

struct px_fwd {
    struct px_fwd_scripts *scripts; /* owned: kept script texts */
    struct px_fwd_stats st;         /* counters (scripts fields filled on read) */
};

/* The reply shape once the request's options are known. */
enum fwd_out {
    FWD_OUT_PLAIN = 0,
    FWD_OUT_MAP,
    FWD_OUT_SET,
    FWD_OUT_DOUBLE,  /* a bulk, or an array of bulks, as doubles */
    FWD_OUT_PAIRS,   /* flat [m, s, ...] as [[m, double], ...] */
    FWD_OUT_FLATDBL, /* flat [m, s, ...] with every second element a double */
    FWD_OUT_NULLARR, /* RESP2 null is *-1 */
};

/* What the reply needs besides being written. */
enum fwd_kind {
    FWD_PLAIN = 0,
    FWD_EVALSHA,       /* NOSCRIPT retried as EVAL with the kept text */
    FWD_SCRIPT_LOAD,   /* keep the text under the SHA Redis answered */
    FWD_SCRIPT_EXISTS, /* a kept text counts as existing */
};

/* A forwarded request in flight (req->op). */
struct fwd_op {
    struct px_req *req; /* borrowed: the request being answered */
    int slot;           /* cluster slot, or -1 (any node) */
    uint64_t hint;      /* pool connection hint */
    uint8_t kind;       /* enum fwd_kind */
    uint8_t out;        /* enum fwd_out */
    bool retried;       /* the NOSCRIPT retry was sent */
};

/* ---- state ------------------------------------------------------------------ */

int px_fwd_create(struct px_server *srv)
{
    struct px_fwd *f = calloc(1, sizeof(*f));

    if (!f || !(f->scripts = px_fwd_scripts_create())) {
        free(f);
        return -ENOMEM;
    }
    px_fwd_keys_init();
    srv->fwd = f;
    return 0;
}

void px_fwd_destroy(struct px_server *srv)
{
    if (!srv->fwd)
        return;
    px_fwd_scripts_destroy(srv->fwd->scripts);
    free(srv->fwd);
    srv->fwd = NULL;
}

void px_fwd_get_stats(const struct px_server *srv, struct px_fwd_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!srv->fwd)
        return;
    *st = srv->fwd->st;
    px_fwd_scripts_stats(srv->fwd->scripts, st);
}

void px_fwd_info(struct px_server *srv, struct buf *o)
{
    struct px_stats_view v;

    px_stats_view(srv, PX_STATS_G_PASSTHROUGH, &v);
    buf_appendf(o, "# Passthrough\r\npassthrough:%s\r\n", srv->opts.passthrough ? "on" : "off");
    px_stats_write_info(o, &v);
    buf_appendf(o, "\r\n");
}

/* The bound on kept script texts. */
static size_t scripts_max(const struct px_server *srv)
{
    size_t m = srv->opts.max_client_memory / 4;

    return m && m < PX_FWD_SCRIPTS_MAX_BYTES ? m : PX_FWD_SCRIPTS_MAX_BYTES;
}

/* ---- replies ---------------------------------------------------------------- */

static int put(struct buf *b, int proto, const struct pool_reply *r, unsigned out);

static int put_line(struct buf *b, char type, const char *s, size_t n)
{
    int rc = buf_append(b, &type, 1);

    if (rc == 0)
        rc = buf_append(b, s, n);
    return rc ? rc : buf_append(b, "\r\n", 2);
}

/* A score: RESP3 double, else as Redis sent it. */
static int put_double(struct buf *b, int proto, const struct pool_reply *e)
{
    if (proto == PX_PROTO_RESP3 && e->type == POOL_REPLY_STRING)
        return put_line(b, ',', e->str, e->len);
    return put(b, proto, e, FWD_OUT_PLAIN);
}

/* Elements of r from i on, as [member, double] pairs. */
static int put_pairs(struct buf *b, int proto, const struct pool_reply *r)
{
    size_t i;
    int rc = px_reply_array(b, r->elements / 2);

    for (i = 0; rc == 0 && i + 1 < r->elements; i += 2) {
        rc = px_reply_array(b, 2);
        if (rc == 0)
            rc = put(b, proto, r->element[i], FWD_OUT_PLAIN);
        if (rc == 0)
            rc = put_double(b, proto, r->element[i + 1]);
    }
    return rc;
}

static int put_array(struct buf *b, int proto, const struct pool_reply *r, unsigned out)
{
    bool r3 = proto == PX_PROTO_RESP3, even = r->elements % 2 == 0;
    size_t i;
    int rc;

    if (r3 && out == FWD_OUT_PAIRS && even)
        return put_pairs(b, proto, r);
    if (r3 && out == FWD_OUT_MAP && even)
        rc = px_reply_map(b, proto, r->elements / 2);
    else if (r3 && out == FWD_OUT_SET)
        rc = buf_appendf(b, "~%zu\r\n", r->elements);
    else
        rc = px_reply_array(b, r->elements);
    for (i = 0; rc == 0 && i < r->elements; i++) {
        const struct pool_reply *e = r->element[i];

        if (out == FWD_OUT_DOUBLE || (out == FWD_OUT_FLATDBL && i % 2 == 1))
            rc = put_double(b, proto, e);
        else
            rc = put(b, proto, e, FWD_OUT_PLAIN);
    }
    return rc;
}

/* Writes r (a RESP2 reply of Redis) as Redis would have written it to a
 * client of protocol proto (see fwd_keys.h's reply shapes). */
static int put(struct buf *b, int proto, const struct pool_reply *r, unsigned out)
{
    switch (r->type) {
    case POOL_REPLY_STATUS:
        return put_line(b, '+', r->str, r->len);
    case POOL_REPLY_ERROR:
        return put_line(b, '-', r->str, r->len);
    case POOL_REPLY_INTEGER:
        return px_reply_int(b, r->integer);
    case POOL_REPLY_NIL:
        if (proto == PX_PROTO_RESP3)
            return buf_append(b, "_\r\n", 3);
        return out == FWD_OUT_NULLARR ? buf_append(b, "*-1\r\n", 5) : px_reply_nil(b);
    case POOL_REPLY_STRING:
        if (out == FWD_OUT_DOUBLE)
            return put_double(b, proto, r);
        return px_reply_bulk(b, r->str, r->len);
    case POOL_REPLY_ARRAY:
        return put_array(b, proto, r, out);
    default: /* the pool speaks RESP2: nothing else comes */
        return px_reply_error(b, "ERR lockproxy: unexpected upstream reply type %d", r->type);
    }
}

/* The reply shape of req under spec s. */
static unsigned out_shape(const struct px_fwd_spec *s, const struct px_req *req)
{
    int i;

    switch (s->shape) {
    case PX_FS_MAP:
        return FWD_OUT_MAP;
    case PX_FS_SET:
        return FWD_OUT_SET;
    case PX_FS_DOUBLE:
        return FWD_OUT_DOUBLE;
    case PX_FS_NULLARR:
        return FWD_OUT_NULLARR;
    case PX_FS_ZPOP:
        return req->argc > 2 ? FWD_OUT_PAIRS : FWD_OUT_FLATDBL;
    case PX_FS_WITHSCORES:
        for (i = 2; i < req->argc; i++) {
            if (px_args_is(&req->argv[i], "WITHSCORES"))
                return FWD_OUT_PAIRS;
        }
        return FWD_OUT_PLAIN;
    default:
        return FWD_OUT_PLAIN;
    }
}

/* ---- sending ------------------------------------------------------------------ */

static void op_finish(struct fwd_op *op)
{
    struct px_req *req = op->req;
    struct px_client *cl = req->cl;

    req->op = NULL;
    free(op);
    px_req_done(req);
    px_client_put(cl);
}

static void on_reply(void *arg, const struct pool_result *res);

/* Sends req's arguments, argv[0] (and argv[1]) replaced when name (text)
 * is set. Returns pool_command_slot()'s result. */
static int op_send(struct fwd_op *op, const char *name, const char *text, size_t tlen)
{
    struct px_req *req = op->req;
    const char *inl[FWD_ARGV_INLINE], **argv = inl;
    size_t linl[FWD_ARGV_INLINE], *lens = linl;
    int i, rc;

    if (req->argc > FWD_ARGV_INLINE) {
        argv = malloc(sizeof(*argv) * (size_t)req->argc);
        lens = malloc(sizeof(*lens) * (size_t)req->argc);
        if (!argv || !lens) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < req->argc; i++) {
        argv[i] = req->argv[i].p;
        lens[i] = req->argv[i].len;
    }
    if (name) {
        argv[0] = name;
        lens[0] = strlen(name);
        argv[1] = text;
        lens[1] = tlen;
    }
    rc = pool_command_slot(req->cl->srv->pool, op->hint, op->slot, req->argc, argv, lens, on_reply,
                           op);
out:
    if (argv != inl)
        free((void *)argv);
    if (lens != linl)
        free(lens);
    return rc;
}

/* NOSCRIPT to an EVALSHA whose text is kept: sent again as EVAL. True
 * when the retry went out (the reply will come to on_reply again). */
static bool retry_noscript(struct fwd_op *op, const struct pool_reply *r)
{
    struct px_req *req = op->req;
    struct px_fwd *f = req->cl->srv->fwd;
    const char *text;
    size_t len;

    if (op->kind != FWD_EVALSHA || op->retried || r->type != POOL_REPLY_ERROR ||
        strncmp(r->str, "NOSCRIPT", 8) != 0)
        return false;
    text = px_fwd_script_find(f->scripts, req->argv[1].p, req->argv[1].len, &len);
    if (!text)
        return false;
    op->retried = true;
    f->st.noscript_retries++;
    return op_send(op, req->argv[0].len > 7 ? "EVAL_RO" : "EVAL", text, len) == 0;
}

/* SCRIPT LOAD's answer: keep the text under the SHA Redis computed. */
static void after_load(struct fwd_op *op, const struct pool_reply *r)
{
    struct px_req *req = op->req;
    struct px_server *srv = req->cl->srv;

    if (r->type == POOL_REPLY_STRING)
        px_fwd_script_keep(srv->fwd->scripts, r->str, req->argv[2].p, req->argv[2].len,
                           scripts_max(srv));
}

/* SCRIPT EXISTS's answer, with the kept texts counted as existing (the
 * proxy loads them where they are missing). */
static void write_exists(struct fwd_op *op, const struct pool_reply *r, struct buf *b)
{
    struct px_req *req = op->req;
    struct px_fwd *f = req->cl->srv->fwd;
    size_t i, len;

    px_reply_array(b, r->elements);
    for (i = 0; i < r->elements; i++) {
        const struct px_arg *sha = &req->argv[2 + i];
        bool kept =
            (int)i + 2 < req->argc && px_fwd_script_find(f->scripts, sha->p, sha->len, &len);
        const struct pool_reply *e = r->element[i];

        px_reply_int(b, kept || (e->type == POOL_REPLY_INTEGER && e->integer));
    }
}

static void on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct fwd_op *op = arg;
    struct px_req *req = op->req;
    struct px_fwd *f = req->cl->srv->fwd;

    if (err < 0) {
        f->st.errors++;
        px_wait_reply_upstream(req, err);
        return op_finish(op);
    }
    if (retry_noscript(op, r))
        return;
    if (r->type == POOL_REPLY_ERROR)
        f->st.errors++;
    if (op->kind == FWD_SCRIPT_LOAD)
        after_load(op, r);
    if (op->kind == FWD_SCRIPT_EXISTS && r->type == POOL_REPLY_ARRAY)
        write_exists(op, r, px_req_out(req));
    else
        put(px_req_out(req), req->cl->proto, r, op->out);
    op_finish(op);
}

/* Sends req; answers it at once if it could not be sent. */
static void fwd_send(struct px_req *req, int slot, uint64_t hint, enum fwd_kind kind, unsigned out)
{
    struct px_fwd *f = req->cl->srv->fwd;
    struct fwd_op *op = calloc(1, sizeof(*op));
    int rc;

    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->req = req;
    op->slot = slot;
    op->hint = hint;
    op->kind = (uint8_t)kind;
    op->out = (uint8_t)out;
    rc = op_send(op, NULL, NULL, 0);
    if (rc < 0) {
        free(op);
        f->st.errors++;
        px_wait_reply_upstream(req, rc);
        return px_req_done(req);
    }
    f->st.forwarded++;
    req->op = op;
    px_client_get(req->cl);
}

/* ---- checks ------------------------------------------------------------------- */

/* Answers req with an error and completes it (a refusal: nothing sent). */
static void __attribute__((format(printf, 2, 3))) refuse(struct px_req *req, const char *fmt, ...)
{
    struct buf *b = px_req_out(req);
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    px_reply_error(b, "%s", msg);
    if (req->cl->srv->fwd)
        req->cl->srv->fwd->st.refused++;
    px_multi_reject(req);
}

/* A key this client may not touch: answers req and returns false. */
static bool key_allowed(struct px_req *req, const struct px_arg *k)
{
    struct px_client *cl = req->cl;

    if (k->len >= strlen(FWD_OWN_PREFIX) &&
        memcmp(k->p, FWD_OWN_PREFIX, strlen(FWD_OWN_PREFIX)) == 0) {
        refuse(req, "NOPERM '%.*s' is one of lockproxy's own keys", (int)LP_MIN(k->len, 200u),
               k->p);
        return false;
    }
    if (!px_auth_required(cl->srv->opts.auth) || !cl->user ||
        px_user_may_access(cl->user, k->p, k->len))
        return true;
    refuse(req, "NOPERM user '%s' has no permissions to access the '%.*s' key", cl->user->name,
           (int)LP_MIN(k->len, 200u), k->p);
    return false;
}

/* Checks every key (patterns, own keys, one slot on a Cluster); *slot is
 * their slot (-1: no keys, or not a Cluster) and *hint the connection.
 * False when req was answered. */
static bool check_keys(struct px_req *req, const struct px_fwd_keyset *ks, int *slot,
                       uint64_t *hint)
{
    bool cluster = pool_is_cluster(req->cl->srv->pool);
    int r, i;

    *slot = -1;
    *hint = req->cl->id;
    for (r = 0; r < ks->n; r++) {
        for (i = ks->first[r]; i <= ks->last[r]; i += ks->step[r]) {
            const struct px_arg *k = &req->argv[i];
            int s = cluster ? pool_slot(k->p, k->len) : -1;

            if (!key_allowed(req, k))
                return false;
            if (r == 0 && i == ks->first[0]) {
                *slot = s;
                *hint = px_route_hint(k->p, k->len);
            } else if (s != *slot) {
                refuse(req, "CROSSSLOT Keys in request don't hash to the same slot");
                return false;
            }
        }
    }
    return true;
}

/* XREAD / XREADGROUP with BLOCK (before STREAMS) block. */
static bool xread_blocks(const struct px_req *req)
{
    int i;

    for (i = 1; i < req->argc && !px_args_is(&req->argv[i], "STREAMS"); i++) {
        if (px_args_is(&req->argv[i], "BLOCK"))
            return true;
    }
    return false;
}

/* ---- SCRIPT ------------------------------------------------------------------- */

static void script_cmd(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    const struct px_arg *sub = &req->argv[1];

    if (px_args_is(sub, "LOAD") && req->argc == 3)
        return fwd_send(req, -1, req->cl->id, FWD_SCRIPT_LOAD, FWD_OUT_PLAIN);
    if (px_args_is(sub, "EXISTS") && req->argc >= 3)
        return fwd_send(req, -1, req->cl->id, FWD_SCRIPT_EXISTS, FWD_OUT_PLAIN);
    if (px_args_is(sub, "FLUSH") && req->argc <= 3) {
        px_fwd_script_flush(srv->fwd->scripts);
        return fwd_send(req, -1, req->cl->id, FWD_PLAIN, FWD_OUT_PLAIN);
    }
    if (px_args_is(sub, "KILL"))
        return refuse(req, "ERR lockproxy does not forward 'SCRIPT KILL': it stops another "
                           "client's script; run it on Redis directly");
    refuse(req,
           "ERR unknown subcommand or wrong number of arguments for '%.*s'. lockproxy "
           "forwards SCRIPT LOAD, EXISTS and FLUSH",
           (int)LP_MIN(sub->len, 64u), sub->p);
}

/* EVAL family: the text is kept (EVAL), the SHA retried (EVALSHA). */
static void eval_cmd(struct px_req *req, int slot, uint64_t hint)
{
    struct px_server *srv = req->cl->srv;
    const struct px_arg *name = &req->argv[0];

    if (px_args_is(name, "EVALSHA") || px_args_is(name, "EVALSHA_RO"))
        return fwd_send(req, slot, hint, FWD_EVALSHA, FWD_OUT_PLAIN);
    px_fwd_script_keep(srv->fwd->scripts, NULL, req->argv[1].p, req->argv[1].len, scripts_max(srv));
    fwd_send(req, slot, hint, FWD_PLAIN, FWD_OUT_PLAIN);
}

/* ---- dispatch ------------------------------------------------------------------- */

/* Refusals that need no key: unknown, refused, arity, MULTI. */
static bool check_command(struct px_req *req, const struct px_fwd_spec *s)
{
    const struct px_arg *name = &req->argv[0];
    char lower[40];
    size_t i;

    if (!s) {
        refuse(req, "ERR unknown command '%.*s' (neither a lockproxy command nor one it forwards)",
               (int)LP_MIN(name->len, 64u), name->p);
        return false;
    }
    if (s->action == PX_FA_REFUSE || (s->kspec == PX_FK_STREAMS && xread_blocks(req))) {
        refuse(req, "ERR lockproxy does not forward '%s': %s", s->name,
               s->why ? s->why
                      : "it blocks, and would hold an upstream connection every "
                        "client shares");
        return false;
    }
    if (!px_fwd_arity_ok(s, req->argc)) {
        for (i = 0; s->name[i] && i + 1 < sizeof(lower); i++)
            lower[i] = (char)tolower((unsigned char)s->name[i]);
        lower[i] = '\0';
        refuse(req, "ERR wrong number of arguments for '%s' command", lower);
        return false;
    }
    if (req->cl->multi.active) {
        refuse(req,
               "ERR lockproxy does not run '%s' inside MULTI: transactions over forwarded "
               "commands are refused (use EVAL for an atomic change of several keys)",
               s->name);
        return false;
    }
    return true;
}

void px_fwd_dispatch(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    const struct px_arg *name = &req->argv[0];
    const struct px_fwd_spec *s;
    struct px_fwd_keyset ks;
    const char *why = NULL;
    uint64_t hint;
    int slot;

    if (!srv->opts.passthrough || !srv->fwd) {
        px_reply_error(px_req_out(req), "ERR unknown command '%.*s'", (int)LP_MIN(name->len, 64u),
                       name->p);
        return px_multi_reject(req);
    }
    s = px_fwd_lookup(name->p, name->len);
    if (!check_command(req, s))
        return;
    if (s->action == PX_FA_LOCAL) {
        px_reply_status(px_req_out(req), "OK");
        return px_req_done(req);
    }
    if (px_fwd_keys(s, req, &ks, &why) < 0)
        return refuse(req, "%s", why);
    if (!check_keys(req, &ks, &slot, &hint))
        return;
    if (s->action == PX_FA_SCRIPT && s->kspec == PX_FK_NONE)
        return script_cmd(req);
    if (s->action == PX_FA_SCRIPT)
        return eval_cmd(req, slot, hint);
    fwd_send(req, slot, hint, FWD_PLAIN, out_shape(s, req));
}
