/* MULTIUNLOCK name [name ...]: one hold of each name released, one
 * script per slot group (lua/multi_unlock.lua: Redisson's RLock unlock on
 * every name of the group); each name's hold follows its result, as for
 * UNLOCK. Groups wait for settles of their names as MULTILOCK's do. See
 * multilock.c. */
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

/* ---- MULTIUNLOCK ------------------------------------------------------------- */

struct multiunlock {
    struct px_req *req;       /* borrowed */
    struct sched_timer defer; /* a group waiting for settles of its names */
    uint64_t defer_since;     /* monotonic ms the group was first deferred, or 0 */
    uint64_t sent_ms;         /* monotonic ms the group in flight was sent */
    unsigned n;               /* names */
    unsigned group;           /* first name of the group in flight */
    int err;                  /* an upstream failure of a group, or 0 */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owned: owner field */
    struct multi_name names[];
};

static void unlock_free(struct multiunlock *u)
{
    unsigned i;

    sched_loop_timer_del(u->req->cl->srv->loop, &u->defer);
    for (i = 0; i < u->n; i++)
        px_hold_put(u->names[i].hold);
    free(u);
}

/* The one reply: the first name not held (LOCKLOST when its lease was
 * lost, else NOTOWNER), else :1 when every hold is over, :0 otherwise. */
static void unlock_reply(struct multiunlock *u)
{
    struct px_req *req = u->req;
    bool all = true;
    unsigned i;

    if (u->err < 0)
        return px_args_reply_upstream(req, u->err);
    for (i = 0; i < u->n; i++) {
        const struct multi_name *m = &u->names[i];

        if (m->result == -2) {
            px_reply_error(px_req_out(req),
                           "LOCKLOST lease on '%.*s' was lost (expired or taken) before "
                           "MULTIUNLOCK; it was not held any more",
                           (int)LP_MIN(m->nlen, 200u), m->name);
            return;
        }
        if (m->result == -1) {
            px_reply_error(px_req_out(req), "NOTOWNER lock '%.*s' is not held by this owner",
                           (int)LP_MIN(m->nlen, 200u), m->name);
            return;
        }
        all = all && m->result == 1;
    }
    px_reply_int(px_req_out(req), all ? 1 : 0);
}

/* Applies one name's result to its hold. */
static void unlock_apply(struct multiunlock *u, struct multi_name *m, long long res)
{
    struct px_server *srv = u->req->cl->srv;

    if (m->hold && m->hold->state == PX_HOLD_LOST && (res == 0 || res == 1)) {
        /* A hold its client was told is lost: what Redis had was granted
         * after the loss (unlock.c, unlock_apply). LOCKLOST; a count left
         * is given back. */
        m->result =
            px_hold_unlock_lost(m->hold, &u->req->cl->caller, srv->opts.watchdog_ms) ? -2 : -1;
        return;
    }
    if (res == 1) {
        srv->engine->stats.released++;
        if (m->hold)
            px_hold_released(m->hold);
        m->result = 1;
    } else if (res == 0) {
        /* 1 when Redis counted more than the caller's last count: the
         * proxy releases the rest (hold.h) */
        m->result = m->hold && px_hold_unlocked_one(m->hold, &u->req->cl->caller, u->sent_ms);
    } else {
        m->result = m->hold && px_hold_not_held(m->hold, &u->req->cl->caller) ? -2 : -1;
    }
}

static int unlock_send_group(struct multiunlock *u);

/* The group [from, to) got no answer from Redis (its reply was lost, or it
 * could not be sent): as for UNLOCK, the proxy carries out the release of
 * each name it holds for the caller (hold.h, px_hold_unlock_failed), and
 * each name's result is what that release will be; a name whose hold was
 * found lost is LOCKLOST whatever Redis had (unlock_apply). False when
 * some name has no hold the proxy knows of: the outcome is unknown,
 * settled later. */
static bool group_in_hand(struct multiunlock *u, unsigned from, unsigned to)
{
    unsigned i;

    for (i = from; i < to; i++) {
        const struct px_hold *h = u->names[i].hold;

        if (!h || (!px_hold_is_held(h) && h->state != PX_HOLD_LOST))
            return false;
    }
    for (i = from; i < to; i++) {
        struct multi_name *m = &u->names[i];

        if (m->hold->state == PX_HOLD_LOST) { /* lost: LOCKLOST, as Redis's answer would be */
            unlock_apply(u, m, 0);
            continue;
        }
        switch (px_hold_unlock_failed(m->hold, &u->req->cl->caller, u->sent_ms)) {
        case PX_UNLOCK_KEPT:
            u->names[i].result = 0;
            break;
        case PX_UNLOCK_RELEASED:
            u->names[i].result = 1;
            break;
        case PX_UNLOCK_UNVOUCHED:
        case PX_UNLOCK_NOT_HELD:
            u->names[i].result = -2;
            break;
        }
    }
    return true;
}

static void unlock_finish(struct multiunlock *u)
{
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    unlock_reply(u);
    req->op = NULL;
    unlock_free(u);
    px_req_done(req);
    px_client_put(cl);
}

/* Goes on with the next group, or answers. */
static void unlock_next(struct multiunlock *u, unsigned to)
{
    int rc;

    for (;;) {
        if (to == u->n || u->err < 0)
            return unlock_finish(u);
        u->group = to;
        u->sent_ms = sched_loop_now_ms(u->req->cl->srv->loop);
        rc = unlock_send_group(u);
        if (rc == 0)
            return;
        if (!group_in_hand(u, to, px__multi_group_end(u->names, u->n, to))) {
            u->err = rc;
            return unlock_finish(u);
        }
        to = px__multi_group_end(u->names, u->n, to);
    }
}

static void unlock_on_group(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct multiunlock *u = arg;
    unsigned from = u->group, to = px__multi_group_end(u->names, u->n, from), i;

    if (err < 0 && group_in_hand(u, from, to))
        err = 0; /* each name's result is set */
    for (i = from; i < to; i++) {
        if (!u->names[i].hold)
            continue;
        if (err < 0)
            px_hold_unlock_unknown(u->names[i].hold); /* did it run? the settle finds out */
    }
    if (err < 0) {
        u->err = err;
    } else if (!r) {
        /* carried out by the proxy */
    } else if (r->type == POOL_REPLY_ERROR) {
        px_args_reply_redis_error(u->req, r);
        u->err = 1; /* replied */
    } else if (r->type != POOL_REPLY_ARRAY || r->elements != to - from) {
        u->err = -EPROTO;
    } else {
        for (i = from; i < to; i++) {
            const struct pool_reply *e = r->element[i - from];

            unlock_apply(u, &u->names[i], e->type == POOL_REPLY_INTEGER ? e->integer : -1);
        }
    }
    for (i = from; i < to; i++) {
        if (u->names[i].hold)
            px_hold_end(u->names[i].hold);
    }
    if (u->err > 0) { /* a Redis error reply was written */
        struct px_req *req = u->req;
        struct px_client *cl = req->cl;

        req->op = NULL;
        unlock_free(u);
        px_req_done(req);
        return px_client_put(cl);
    }
    unlock_next(u, to);
}

static void unlock_on_defer(struct sched_timer *t)
{
    struct multiunlock *u = LP_CONTAINER_OF(t, struct multiunlock, defer);
    unsigned to = px__multi_group_end(u->names, u->n, u->group);
    int rc = unlock_send_group(u);

    if (rc == 0)
        return;
    if (group_in_hand(u, u->group, to))
        return unlock_next(u, to);
    u->err = rc;
    unlock_finish(u);
}

/* Sends the group at u->group (names, channels; owner, leases), or defers
 * it while a settle of one of its names is due or in flight. */
static int unlock_send_group(struct multiunlock *u)
{
    struct px_server *srv = u->req->cl->srv;
    unsigned from = u->group, to = px__multi_group_end(u->names, u->n, from), i, k, nk = to - from;
    const char *argv[4 * PX_MULTI_MAX + 2];
    size_t lens[4 * PX_MULTI_MAX + 2];
    char leases[PX_MULTI_MAX][24], *chans;
    int rc;

    if (!px__multi_settles_idle(u->names, from, to)) {
        uint64_t now = sched_loop_now_ms(srv->loop);

        if (u->defer_since == 0)
            u->defer_since = now;
        if (now - u->defer_since > PX__MULTI_DEFER_MAX)
            return -ETIMEDOUT;
        sched_loop_timer_in(srv->loop, &u->defer, PX__MULTI_DEFER_MS);
        return 0;
    }
    u->defer_since = 0;
    chans = malloc((size_t)nk * PX_CHANNEL_MAX);
    if (!chans)
        return -ENOMEM;
    for (i = from, k = 0; i < to; i++, k++) {
        const struct multi_name *m = &u->names[i];
        struct px_acq a = {.name = m->name, .nlen = m->nlen};
        const struct px_hold *h = m->hold;

        argv[k] = m->name;
        lens[k] = m->nlen;
        argv[nk + k] = chans + (size_t)k * PX_CHANNEL_MAX;
        lens[nk + k] =
            px__lock_plain_channel(&a, chans + (size_t)k * PX_CHANNEL_MAX, PX_CHANNEL_MAX);
        argv[2 * nk + 1 + k] = leases[k];
        lens[2 * nk + 1 + k] = util_u64_to_str(
            h && px_hold_is_held(h) ? h->lease_ms : srv->opts.watchdog_ms, leases[k]);
    }
    argv[2 * nk] = u->owner;
    lens[2 * nk] = u->olen;
    for (i = from; i < to; i++) {
        if (u->names[i].hold)
            px_hold_begin(u->names[i].hold);
    }
    u->sent_ms = sched_loop_now_ms(srv->loop);
    rc = px_script_eval(srv->engine, px_route_hint(argv[0], lens[0]),
                        px__multi_script(srv->engine, PX__MULTI_UNLOCK), (int)(2 * nk),
                        (int)(3 * nk + 1), argv, lens, unlock_on_group, u);
    free(chans);
    if (rc < 0) {
        for (i = from; i < to; i++) {
            if (u->names[i].hold)
                px_hold_end(u->names[i].hold);
        }
    }
    return rc;
}

void px__multi_cmd_unlock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    unsigned n = (unsigned)req->argc - 1, i;
    struct multiunlock *u;

    if (px__multi_check_count(req, n) < 0)
        return px_req_done(req);
    u = calloc(1, sizeof(*u) + n * sizeof(u->names[0]));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    u->req = req;
    u->n = n;
    sched_timer_init(&u->defer, unlock_on_defer);
    if (px__multi_fill_names(req, u->names, n) < 0) {
        free(u);
        return px_req_done(req);
    }
    u->olen = px__multi_owner(req, u->owner);
    for (i = 0; i < n; i++) {
        struct multi_name *m = &u->names[i];

        m->hold =
            px_hold_use(srv->engine, &px_hold_plain, m->name, m->nlen, u->owner, u->olen, false);
    }
    px_client_get(req->cl);
    req->op = u;
    unlock_next(u, 0); /* sends the first group, or answers */
}

/* Both are barriers: the connection's later requests (an UNLOCK of one of
 * the names) go after them. */
