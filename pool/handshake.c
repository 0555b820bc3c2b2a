/* What a new upstream connection sends before it takes requests, and
 * whether each reply is what it should be. The connection state machine
 * (rconn.c) sends it on connect and becomes READY after the last reply.
 *
 *   AUTH [user] password   if a password is set (every kind; a sentinel's
 *                          own credentials on connections to a sentinel)
 *   ROLE                   Sentinel upstream, command and pub/sub
 *                          connections: the node must say "master" (a
 *                          sentinel may name a demoted node for a while)
 *   SELECT db              if db != 0 (command connections; a cluster has
 *                          only db 0)
 *   SCRIPT LOAD text       every registered script (command connections):
 *                          the SHA1s are stored per pool, as SHA1 is a
 *                          function of the text, the same on every node
 *   INFO server            command connections: the server's run_id; a
 *                          new one means it restarted (node.c); an error
 *                          (an ACL user without +info) only skips that
 *   PING                   when none of the above applies, so that READY
 *                          always means the server has answered
 *
 * Pub/sub, topology and sentinel connections send AUTH (and ROLE) only,
 * or PING. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/compiler.h"
#include "pool/pool-int.h"
#include "pool/rconn.h"
#include "pool/resp.h"

static int hs_push(struct pool__rconn *rc, enum pool__req_kind kind, unsigned script, int argc,
                   const char *const *argv, const size_t *lens)
{
    struct pool__req *req = pool__req_get(rc->pool);
    int err;

    if (!req)
        return -ENOMEM;
    req->kind = kind;
    req->script = script;
    err = pool__rconn_issue(rc, req, 0, NULL, NULL, argc, argv, lens);
    if (err == 0)
        rc->handshake++;
    return err;
}

/* True for a connection to a sentinel (its queries, its subscription). */
static bool hs_to_sentinel(const struct pool__rconn *rc)
{
    return rc->pool->kind == POOL__UP_SENTINEL &&
           (rc->kind == POOL__RCONN_TOPO || rc->kind == POOL__RCONN_SENTINEL);
}

static int hs_auth(struct pool__rconn *rc, const char *user, const char *password)
{
    const char *argv[3] = {"AUTH", user, password};

    if (!user) {
        argv[1] = password;
        return hs_push(rc, POOL__REQ_AUTH, 0, 2, argv, NULL);
    }
    return hs_push(rc, POOL__REQ_AUTH, 0, 3, argv, NULL);
}

static int hs_select(struct pool__rconn *rc)
{
    char db[24];
    const char *argv[2] = {"SELECT", db};

    pool__resp_u64(db, (unsigned long long)rc->pool->opts.db);
    return hs_push(rc, POOL__REQ_SELECT, 0, 2, argv, NULL);
}

static int hs_script(struct pool__rconn *rc, unsigned i)
{
    const struct pool__script *s = &rc->pool->scripts[i];
    const char *argv[3] = {"SCRIPT", "LOAD", s->text};
    const size_t lens[3] = {6, 4, s->text_len};

    return hs_push(rc, POOL__REQ_SCRIPT, i, 3, argv, lens);
}

int pool__hs_send(struct pool__rconn *rc)
{
    static const char *const ping[] = {"PING"};
    static const char *const role[] = {"ROLE"};
    static const char *const info[] = {"INFO", "server"};
    const struct pool *p = rc->pool;
    bool cmd = rc->kind == POOL__RCONN_CMD, sentinel = hs_to_sentinel(rc);
    const char *user = sentinel ? p->opts.sentinel_user : p->opts.user;
    const char *password = sentinel ? p->opts.sentinel_password : p->opts.password;
    int err = 0;
    unsigned i;

    if (password)
        err = hs_auth(rc, user, password);
    if (err == 0 && p->kind == POOL__UP_SENTINEL && rc->node)
        err = hs_push(rc, POOL__REQ_ROLE, 0, 1, role, NULL);
    if (err == 0 && cmd && p->opts.db != 0)
        err = hs_select(rc);
    for (i = 0; err == 0 && cmd && i < p->nscripts; i++)
        err = hs_script(rc, i);
    if (err == 0 && cmd && rc->node)
        err = hs_push(rc, POOL__REQ_RUNID, 0, 2, info, NULL);
    if (err == 0 && rc->handshake == 0)
        err = hs_push(rc, POOL__REQ_PING, 0, 1, ping, NULL);
    return err;
}

static const char *hs_step_name(const struct pool *p, enum pool__req_kind kind, unsigned script)
{
    if (kind == POOL__REQ_AUTH)
        return "AUTH";
    if (kind == POOL__REQ_SELECT)
        return "SELECT";
    if (kind == POOL__REQ_PING)
        return "PING";
    if (kind == POOL__REQ_ROLE)
        return "ROLE";
    if (kind == POOL__REQ_RUNID)
        return "INFO server";
    return p->scripts[script].name ? p->scripts[script].name : "script";
}

void pool__script_set_sha(struct pool__script *s, const char *sha, size_t len)
{
    memcpy(s->sha, sha, len);
    s->sha[len] = '\0';
    s->evalsha_len = (size_t)snprintf(s->evalsha, sizeof(s->evalsha),
                                      "$7\r\nEVALSHA\r\n$%zu\r\n%s\r\n", len, s->sha);
}

static int hs_store_sha(struct pool *p, unsigned script, const struct pool_reply *r)
{
    if (r->type != POOL_REPLY_STRING || r->len != POOL__SHA_SIZE - 1)
        return -EPROTO;
    pool__script_set_sha(&p->scripts[script], r->str, r->len);
    return 0;
}

/* ROLE answers ["master", offset, replicas]; a replica ["slave", host,
 * port, state, offset], named in the error. */
static int hs_check_role(struct pool__rconn *rc, const struct pool_reply *r, char *err,
                         size_t errlen)
{
    const struct pool_reply *role =
        r->type == POOL_REPLY_ARRAY && r->elements > 0 ? r->element[0] : NULL;

    if (role && pool__resp_str_is(role, "master"))
        return 0;
    if (role && pool__resp_str_is(role, "slave") && r->elements >= 3 &&
        r->element[1]->type == POOL_REPLY_STRING && r->element[2]->type == POOL_REPLY_INTEGER)
        snprintf(err, errlen,
                 "ROLE: a replica (of %.*s:%lld), not the master: asking the sentinels",
                 (int)LP_MIN(r->element[1]->len, (size_t)64), r->element[1]->str,
                 (long long)r->element[2]->integer);
    else
        snprintf(err, errlen, "ROLE: not a master (%.*s): asking the sentinels",
                 role && role->str ? (int)LP_MIN(role->len, (size_t)32) : 1,
                 role && role->str ? role->str : "?");
    pool__sentinel_not_master(rc, r);
    return -EPROTO;
}

/* INFO server has a "run_id:<40 hex>" line; a server without one (a
 * proxy in between) is not checked for restarts. */
static void hs_run_id(struct pool__rconn *rc, const struct pool_reply *r)
{
    static const char key[] = "run_id:";
    const char *p, *end;

    if (r->type != POOL_REPLY_STRING)
        return;
    p = strstr(r->str, key);
    if (!p)
        return;
    p += sizeof(key) - 1;
    end = p;
    while (end < r->str + r->len && *end != '\r' && *end != '\n')
        end++;
    pool__node_run_id(rc->node, p, (size_t)(end - p));
}

int pool__hs_check(struct pool__rconn *rc, const struct pool__req *req, const struct pool_reply *r,
                   char *err, size_t errlen)
{
    struct pool *p = rc->pool;
    const char *step = hs_step_name(p, req->kind, req->script);
    bool script = req->kind == POOL__REQ_SCRIPT;

    if (req->kind == POOL__REQ_RUNID) {
        hs_run_id(rc, r); /* best effort: a user without +info is not checked */
        return 0;
    }
    if (r->type == POOL_REPLY_ERROR) {
        snprintf(err, errlen, "%s%s: %.*s", script ? "SCRIPT LOAD " : "", step,
                 (int)LP_MIN(r->len, (size_t)80), r->str);
        return -EPROTO;
    }
    if (req->kind == POOL__REQ_ROLE)
        return hs_check_role(rc, r, err, errlen);
    if (script && hs_store_sha(p, req->script, r) < 0) {
        snprintf(err, errlen, "SCRIPT LOAD %s: unexpected reply", step);
        return -EPROTO;
    }
    return 0;
}
