/* Command table and the connection-level commands common Redis clients
 * send on connect, so redis-cli, redis-py, ioredis and Jedis work
 * unmodified; AUTH and HELLO ... AUTH; and the admission check (auth.c)
 * that every command passes before its handler runs. */
#include "proxy/cmd.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/client_cmd.h"
#include "proxy/cmds/latch.h"
#include "proxy/cmds/lock.h"
#include "proxy/cmds/multilock.h"
#include "proxy/cmds/redlock.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/fwd.h"
#include "proxy/info.h"
#include "proxy/push.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "proxy/subs.h"
#include "proxy/tx.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

static void finish_status(struct px_req *req, const char *s)
{
    px_reply_status(px_req_out(req), s);
    px_req_done(req);
}

static void cmd_ping(struct px_req *req)
{
    if (px_subs_ping(req))
        return;
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

static void reply_wrongpass(struct px_req *req)
{
    px_reply_error(px_req_out(req),
                   "WRONGPASS invalid username-password pair or user is disabled.");
    px_req_done(req);
}

/* AUTH password | AUTH user password */
static void cmd_auth(struct px_req *req)
{
    const struct px_arg *user = req->argc == 3 ? &req->argv[1] : NULL;
    const struct px_arg *pass = &req->argv[req->argc - 1];

    if (!user && !px_auth_required(req->cl->srv->opts.auth)) {
        px_reply_error(px_req_out(req), "ERR AUTH <password> called without any password "
                                        "configured for the default user. Are you sure your "
                                        "configuration is correct?");
        return px_req_done(req);
    }
    if (px_auth_login(req->cl, user ? user->p : NULL, user ? user->len : 0, pass->p, pass->len) < 0)
        return reply_wrongpass(req);
    finish_status(req, "OK");
}

/* Finds HELLO's AUTH and SETNAME options (argv indexes of their
 * keywords, 0 when absent). Returns false when a reply (a syntax error)
 * has been written: then nothing is applied, as in Redis. */
static bool hello_parse(struct px_req *req, int *auth, int *setname)
{
    int i;

    *auth = *setname = 0;
    for (i = 2; i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];

        if (px_args_is(a, "AUTH") && i + 2 < req->argc) {
            *auth = i;
            i += 2;
        } else if (px_args_is(a, "SETNAME") && i + 1 < req->argc) {
            *setname = i;
            i++;
        } else {
            px_reply_error(px_req_out(req), "ERR Syntax error in HELLO option '%.*s'",
                           (int)LP_MIN(a->len, 32u), a->p);
            px_req_done(req);
            return false;
        }
    }
    return true;
}

/* Applies HELLO's AUTH and SETNAME options. Returns false when a reply
 * (an error) has been written. */
static bool hello_options(struct px_req *req)
{
    struct px_client *cl = req->cl;
    const struct px_arg *v = req->argv;
    int auth, setname;

    if (!hello_parse(req, &auth, &setname))
        return false;
    if (setname && !px_client_extra(cl)) { /* before anything is applied */
        px_reply_error(px_req_out(req), "OOM out of memory");
        px_req_done(req);
        return false;
    }
    if (auth &&
        px_auth_login(cl, v[auth + 1].p, v[auth + 1].len, v[auth + 2].p, v[auth + 2].len) < 0) {
        reply_wrongpass(req);
        return false;
    }
    if (!auth && !cl->authed && px_auth_required(cl->srv->opts.auth)) {
        px_reply_error(px_req_out(req), "NOAUTH HELLO must be called with the client already "
                                        "authenticated, otherwise the HELLO <proto> AUTH <user> "
                                        "<pass> option can be used to authenticate the client "
                                        "and select the RESP protocol version at the same time");
        px_req_done(req);
        return false;
    }
    if (setname)
        snprintf(cl->extra->name, sizeof(cl->extra->name), "%.*s", (int)v[setname + 1].len,
                 v[setname + 1].p);
    return true;
}

/* The protocol HELLO asks for (2 or 3) into *proto, or 0 when it names
 * none; false when a reply (an error) has been written. */
static bool hello_proto(struct px_req *req, int *proto)
{
    const struct px_arg *v = &req->argv[1];

    *proto = 0;
    if (req->argc < 2)
        return true;
    if (v->len != 1 || !isdigit((unsigned char)v->p[0])) {
        px_reply_error(px_req_out(req), "ERR Protocol version is not an integer or out of range");
        px_req_done(req);
        return false;
    }
    *proto = v->p[0] - '0';
    if (*proto == PX_PROTO_RESP2 || *proto == PX_PROTO_RESP3)
        return true;
    px_reply_error(px_req_out(req), "NOPROTO unsupported protocol version");
    px_req_done(req);
    return false;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: switches the
 * connection to RESP2 or RESP3 and answers Redis's server map, in the
 * protocol now in use. */
static void cmd_hello(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct buf *b;
    int proto;

    if (!hello_proto(req, &proto) || !hello_options(req))
        return;
    if (proto)
        cl->proto = proto;
    b = px_req_out(req);
    px_reply_map(b, cl->proto, 7);
    px_reply_cstr(b, "server");
    px_reply_cstr(b, "lockproxy");
    px_reply_cstr(b, "version");
    px_reply_cstr(b, LP_VERSION);
    px_reply_cstr(b, "proto");
    px_reply_int(b, cl->proto);
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

/* Minimal COMMAND: clients call it for hints; an empty table is valid. */
static void cmd_command(struct px_req *req)
{
    if (req->argc >= 2 && px_args_is(&req->argv[1], "COUNT"))
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

static const struct px_cmd conn_cmds[] = {
    {"PING", 1, 2, cmd_ping, NULL, 0},        {"ECHO", 2, 2, cmd_echo, NULL, 0},
    {"QUIT", 1, -1, cmd_quit, NULL, 0},       {"SELECT", 2, 2, cmd_select, NULL, 0},
    {"HELLO", 1, -1, cmd_hello, NULL, 0},     {"CLIENT", 2, -1, px_client_cmd, NULL, 0},
    {"COMMAND", 1, -1, cmd_command, NULL, 0}, {"INFO", 1, 2, cmd_info, NULL, 0},
    {"AUTH", 2, 3, cmd_auth, NULL, 0},
};
static const struct px_cmd_set conn_cmd_set = {conn_cmds, LP_ARRAY_SIZE(conn_cmds)};

/* One line per module. */
static const struct px_cmd_set *const cmd_sets[] = {
    &conn_cmd_set,         &px_lock_cmd_set,
    &px_rwlock_cmd_set,    &px_fairlock_cmd_set, /* lock family: lock.h */
    &px_sem_cmd_set,       &px_latch_cmd_set,
    &px_subs_cmd_set,  /* (P|S)(UN)SUBSCRIBE, (S)PUBLISH: subs.h */
    &px_multi_cmd_set, /* MULTI, EXEC, DISCARD, WATCH, UNWATCH: multi.h */
    &px_multilock_cmd_set, &px_redlock_cmd_set,
};

/* The command modules' script sets, in the engine's order (scripts.h). */
static const struct px_script_set *const script_sets[] = {
    &px_lock_script_set, &px_rwlock_script_set, &px_fairlock_script_set, /* lock.h */
    &px_sem_script_set,  &px_latch_script_set,  &px_multilock_script_set,
};

void px_cmd_register_scripts(struct lk_engine *eng)
{
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(script_sets); i++)
        px_scripts_register(eng, script_sets[i]);
}

struct cmd_entry {
    struct hmap_node node;    /* in cmd_index */
    const struct px_cmd *cmd; /* borrowed: static table entry */
    size_t len;               /* strlen(cmd->name) */
};

static struct hmap cmd_index;
static struct cmd_entry *cmd_entries;

#define CMD_NAME_MAX 32

/* Upper-cases name into out; returns false if it cannot be a command. */
static bool cmd_key(const char *name, size_t len, char *out)
{
    size_t i;

    if (len == 0 || len >= CMD_NAME_MAX)
        return false;
    for (i = 0; i < len; i++)
        out[i] = (char)toupper((unsigned char)name[i]);
    return true;
}

int px_cmd_init(void)
{
    size_t i, k, n = 0, total = 0;

    for (i = 0; i < LP_ARRAY_SIZE(cmd_sets); i++)
        total += cmd_sets[i]->n;
    cmd_entries = calloc(total, sizeof(*cmd_entries));
    if (!cmd_entries || hmap_init(&cmd_index, total * 2) < 0) {
        free(cmd_entries);
        return -ENOMEM;
    }
    for (i = 0; i < LP_ARRAY_SIZE(cmd_sets); i++) {
        for (k = 0; k < cmd_sets[i]->n; k++, n++) {
            const struct px_cmd *c = &cmd_sets[i]->cmds[k];

            cmd_entries[n].cmd = c;
            cmd_entries[n].len = strlen(c->name);
            hmap_insert(&cmd_index, &cmd_entries[n].node, hash_bytes(c->name, cmd_entries[n].len));
        }
    }
    return 0;
}

void px_cmd_deinit(void)
{
    hmap_deinit(&cmd_index);
    free(cmd_entries);
    cmd_entries = NULL;
}

const struct px_cmd *px_cmd_lookup(const char *name, size_t len)
{
    char key[CMD_NAME_MAX];
    struct hmap_node *n;

    if (!cmd_key(name, len, key))
        return NULL;
    for (n = hmap_first(&cmd_index, hash_bytes(key, len)); n; n = hmap_next(n)) {
        const struct cmd_entry *e = LP_CONTAINER_OF(n, struct cmd_entry, node);

        if (e->len == len && memcmp(e->cmd->name, key, len) == 0)
            return e->cmd;
    }
    return NULL;
}

bool px_cmd_may_block(const struct px_req *req)
{
    const struct px_cmd *c = req->cmd;

    return c && c->may_block && !req->in_exec && req->argc >= c->min_args && c->may_block(req);
}

void px_cmd_dispatch(struct px_req *req)
{
    const struct px_cmd *c = req->cmd;

    if (!px_auth_admit(req))
        return px_multi_reject(req);
    if (!c)
        return px_fwd_dispatch(req); /* pass-through, or "unknown command": fwd.h */
    if (req->argc < c->min_args || (c->max_args >= 0 && req->argc > c->max_args)) {
        px_reply_error(px_req_out(req), "ERR wrong number of arguments for '%s' command", c->name);
        return px_multi_reject(req);
    }
    if (px_subs_refuse(req))
        return px_multi_reject(req);
    if (px_multi_intercept(req))
        return;
    c->fn(req);
}
