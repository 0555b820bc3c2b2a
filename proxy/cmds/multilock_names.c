/* The names of a MULTILOCK or MULTIUNLOCK: argument checks (length,
 * cluster slot rule, ACL), the global order (slot, then name), groups of
 * one slot, and the settles a group waits for. See multilock.c. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/hold.h"
#include "engine/lua_scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/multilock-int.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- names ----------------------------------------------------------------- */

static int multi_name_cmp(const void *pa, const void *pb)
{
    const struct multi_name *a = pa, *b = pb;
    int c;

    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    c = memcmp(a->name, b->name, LP_MIN(a->nlen, b->nlen));
    if (c != 0)
        return c;
    return a->nlen < b->nlen ? -1 : a->nlen > b->nlen;
}

static bool is_option(const struct px_arg *a)
{
    return px_args_is(a, "LEASE") || px_args_is(a, "WAIT");
}

/* Checks one name as px_name_check() checks argv[1], plus the caller's ACL. */
static int multi_check_name(struct px_req *req, const struct px_arg *n)
{
    struct px_client *cl = req->cl;

    if (n->len == 0 || n->len > PX_NAME_MAX) {
        px_reply_error(px_req_out(req), "ERR lock name must be 1-%u bytes", PX_NAME_MAX);
        return -EINVAL;
    }
    if (!px_name_slot_ok(cl->srv->engine, n->p, n->len, PX_NAME_PREFIXED)) {
        px_reply_error(px_req_out(req),
                       "ERR name '%.*s' cannot be used with Redis Cluster: its channel would "
                       "hash to another slot than the name (CROSSSLOT)",
                       (int)LP_MIN(n->len, 200u), n->p);
        return -EINVAL;
    }
    if (px_auth_required(cl->srv->opts.auth) && cl->user &&
        !px_user_may_access(cl->user, n->p, n->len)) {
        px_reply_error(px_req_out(req),
                       "NOPERM user '%s' has no permissions to access the '%.*s' lock",
                       cl->user->name, (int)LP_MIN(n->len, 200u), n->p);
        return -EINVAL;
    }
    return 0;
}

/* Fills names[] from argv[1..nnames], sorted, and refuses duplicates. */
int px__multi_fill_names(struct px_req *req, struct multi_name *names, unsigned nnames)
{
    bool cluster = pool_is_cluster(req->cl->srv->pool);
    unsigned i;

    for (i = 0; i < nnames; i++) {
        const struct px_arg *n = &req->argv[1 + i];

        if (multi_check_name(req, n) < 0)
            return -EINVAL;
        names[i].name = n->p;
        names[i].nlen = n->len;
        names[i].slot = cluster ? pool_slot(n->p, n->len) : 0;
    }
    qsort(names, nnames, sizeof(*names), multi_name_cmp);
    for (i = 1; i < nnames; i++) {
        if (multi_name_cmp(&names[i - 1], &names[i]) == 0) {
            px_reply_error(px_req_out(req), "ERR lock name '%.*s' is given twice",
                           (int)LP_MIN(names[i].nlen, 200u), names[i].name);
            return -EINVAL;
        }
    }
    return 0;
}

/* How many leading arguments after the command are names. */
unsigned px__multi_count_names(const struct px_req *req)
{
    int i = 1;

    while (i < req->argc && !is_option(&req->argv[i]))
        i++;
    return (unsigned)(i - 1);
}

/* Checks the name count; replies and returns -EINVAL when it is bad. */
int px__multi_check_count(struct px_req *req, unsigned nnames)
{
    if (nnames == 0) {
        px_reply_error(px_req_out(req), "ERR wrong number of arguments for '%.*s' command",
                       (int)req->argv[0].len, req->argv[0].p);
        return -EINVAL;
    }
    if (nnames > PX_MULTI_MAX) {
        px_reply_error(px_req_out(req), "ERR at most %u lock names per command", PX_MULTI_MAX);
        return -EINVAL;
    }
    return 0;
}

/* The end (exclusive) of the group of one slot that starts at from. */
unsigned px__multi_group_end(const struct multi_name *names, unsigned n, unsigned from)
{
    unsigned i = from + 1;

    while (i < n && names[i].slot == names[from].slot)
        i++;
    return i;
}

/* True when no settle of the names [from, to) is due or in flight (those
 * that are due are pushed). */
bool px__multi_settles_idle(struct multi_name *names, unsigned from, unsigned to)
{
    bool idle = true;
    unsigned i;

    for (i = from; i < to; i++) {
        struct px_hold *h = names[i].hold;

        if (h && !px_hold_settle_idle(h))
            idle = false;
    }
    return idle;
}

/* The caller's owner field (the connection's, as LOCK without OWNER). */
size_t px__multi_owner(struct px_req *req, char *out)
{
    struct px__lock_args a;
    size_t base;

    memset(&a, 0, sizeof(a));
    return px__lock_owner(req, &a, &px__lock_plain_kind, out, &base);
}
