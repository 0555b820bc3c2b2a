/* Command table and the connection-level commands common Redis clients
 * send on connect, so redis-cli, redis-py, ioredis and Jedis work
 * unmodified. */
#include "proxy/cmd.h"

#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/info.h"
#include "proxy/lock.h"
#include "proxy/reply.h"
#include "proxy/server.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

struct px_cmd {
    const char *name;                            /* upper-case command name */
    int min_args;                                /* including the command itself */
    int max_args;                                /* -1: unbounded */
    void (*fn)(struct px_req *req);              /* handler */
    bool (*may_block)(const struct px_req *req); /* NULL: never blocks */
};

static bool arg_is(const struct px_arg *a, const char *lit)
{
    return util_eq_nocase(a->p, a->len, lit);
}

static void finish_status(struct px_req *req, const char *s)
{
    px_reply_status(px_req_out(req), s);
    px_req_done(req);
}

static void cmd_ping(struct px_req *req)
{
    if (req->argc == 2)
        px_reply_bulk(px_req_out(req), req->argv[1].p, req->argv[1].len);
    else
        px_reply_status(px_req_out(req), "PONG");
    px_req_done(req);
}

static void cmd_echo(struct px_req *req)
{
    px_reply_bulk(px_req_out(req), req->argv[1].p, req->argv[1].len);
    px_req_done(req);
}

static void cmd_quit(struct px_req *req)
{
    req->cl->quit = true;
    finish_status(req, "OK");
}

static void cmd_select(struct px_req *req)
{
    if (req->argv[1].len == 1 && req->argv[1].p[0] == '0')
        return finish_status(req, "OK");
    px_reply_error(px_req_out(req), "ERR lockproxy serves database 0 only");
    px_req_done(req);
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 only. */
static void cmd_hello(struct px_req *req)
{
    struct buf *b = px_req_out(req);
    struct px_client *cl = req->cl;
    int i;

    if (req->argc >= 2 && !(req->argv[1].len == 1 && req->argv[1].p[0] == '2')) {
        px_reply_error(b, "NOPROTO lockproxy speaks RESP2 only (HELLO 2)");
        return px_req_done(req);
    }
    for (i = 2; i + 1 < req->argc; i++) {
        if (arg_is(&req->argv[i], "SETNAME"))
            snprintf(cl->name, sizeof(cl->name), "%.*s", (int)req->argv[i + 1].len,
                     req->argv[i + 1].p);
    }
    px_reply_array(b, 14);
    px_reply_cstr(b, "server");
    px_reply_cstr(b, "lockproxy");
    px_reply_cstr(b, "version");
    px_reply_cstr(b, LP_VERSION);
    px_reply_cstr(b, "proto");
    px_reply_int(b, 2);
    px_reply_cstr(b, "id");
    px_reply_int(b, (int64_t)cl->id);
    px_reply_cstr(b, "mode");
    px_reply_cstr(b, "standalone");
    px_reply_cstr(b, "role");
    px_reply_cstr(b, "master");
    px_reply_cstr(b, "modules");
    px_reply_array(b, 0);
    px_req_done(req);
}

static void cmd_client(struct px_req *req)
{
    struct px_client *cl = req->cl;
    const struct px_arg *sub = &req->argv[1];
    struct buf *b = px_req_out(req);

    if (arg_is(sub, "ID") && req->argc == 2) {
        px_reply_int(b, (int64_t)cl->id);
    } else if (arg_is(sub, "GETNAME") && req->argc == 2) {
        if (cl->name[0])
            px_reply_cstr(b, cl->name);
        else
            px_reply_nil(b);
    } else if (arg_is(sub, "SETNAME") && req->argc == 3) {
        snprintf(cl->name, sizeof(cl->name), "%.*s", (int)req->argv[2].len, req->argv[2].p);
        px_reply_status(b, "OK");
    } else if (arg_is(sub, "SETINFO")) {
        px_reply_status(b, "OK");
    } else {
        px_reply_error(b, "ERR unknown CLIENT subcommand or wrong arguments, try ID, "
                          "SETNAME, GETNAME");
    }
    px_req_done(req);
}

/* Minimal COMMAND: clients call it for hints; an empty table is valid. */
static void cmd_command(struct px_req *req)
{
    if (req->argc >= 2 && arg_is(&req->argv[1], "COUNT"))
        px_reply_int(px_req_out(req), 0);
    else
        px_reply_array(px_req_out(req), 0);
    px_req_done(req);
}

static void cmd_info(struct px_req *req)
{
    struct buf text;

    buf_init(&text);
    px_info_write(req->cl->srv, req->argc > 1 ? req->argv[1].p : NULL, &text);
    px_reply_bulk(px_req_out(req), text.data ? text.data : "", buf_size(&text));
    buf_deinit(&text);
    px_req_done(req);
}

static const struct px_cmd cmd_table[] = {
    {"PING", 1, 2, cmd_ping, NULL},
    {"ECHO", 2, 2, cmd_echo, NULL},
    {"QUIT", 1, -1, cmd_quit, NULL},
    {"SELECT", 2, 2, cmd_select, NULL},
    {"HELLO", 1, -1, cmd_hello, NULL},
    {"CLIENT", 2, -1, cmd_client, NULL},
    {"COMMAND", 1, -1, cmd_command, NULL},
    {"INFO", 1, 2, cmd_info, NULL},
    {"LOCK", 2, 8, px_lock_cmd_lock, px_lock_may_block},
    {"TRYLOCK", 2, 6, px_lock_cmd_trylock, NULL},
    {"UNLOCK", 2, 4, px_lock_cmd_unlock, NULL},
    {"FORCEUNLOCK", 2, 2, px_lock_cmd_forceunlock, NULL},
    {"LOCK.INFO", 2, 4, px_lock_cmd_info, NULL},
};

static const struct px_cmd *cmd_lookup(const struct px_arg *name)
{
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(cmd_table); i++) {
        if (arg_is(name, cmd_table[i].name))
            return &cmd_table[i];
    }
    return NULL;
}

bool px_cmd_may_block(const struct px_req *req)
{
    const struct px_cmd *c = cmd_lookup(&req->argv[0]);

    return c && c->may_block && c->may_block(req);
}

void px_cmd_dispatch(struct px_req *req)
{
    const struct px_cmd *c = cmd_lookup(&req->argv[0]);
    const struct px_arg *name = &req->argv[0];

    if (!c) {
        px_reply_error(px_req_out(req), "ERR unknown command '%.*s'", (int)LP_MIN(name->len, 64u),
                       name->p);
        return px_req_done(req);
    }
    if (req->argc < c->min_args || (c->max_args >= 0 && req->argc > c->max_args)) {
        px_reply_error(px_req_out(req), "ERR wrong number of arguments for '%s' command", c->name);
        return px_req_done(req);
    }
    c->fn(req);
}
