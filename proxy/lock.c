/* Reentrant lock commands over Redisson's RLock layout.
 *
 * LOCK flow (one px_lockop per request):
 *   try: EVALSHA acquire -> {1,count}: held, reply +OK (the hold starts
 *   the watchdog unless LEASE was given) | {0,pttl}: contended.
 *   contended, no wait left: nil reply. Otherwise the op joins the waitset
 *   of redisson_lock__channel:{name} (one shared subscription), retries
 *   at once if the subscription is already confirmed (else when it is),
 *   then sleeps until a wake-up, the holder's remaining lease (pttl: a
 *   missed message costs latency, never a hang), or its WAIT deadline.
 *
 * Invariants: an op is in at most one of {acquire in flight (w.busy),
 * asleep on the semaphore, timer armed}; px_req_done() is called exactly
 * once per op, after which the op is freed. While an acquire is in flight
 * the op's client holds a reference, so the callback can always run; if
 * the client closed meanwhile, a successful acquire is released (or left
 * to expire) per --on-disconnect and the reply is dropped.
 *
 * Upstream failures are error replies that start with UPSTREAM; the proxy
 * never answers +OK unless Redis confirmed the acquire. */
#include "proxy/lock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/hold.h"
#include "proxy/reply.h"
#include "proxy/scripts.h"
#include "proxy/server.h"
#include "proxy/waitset.h"
#include "sched/loop.h"

#define LOCK_CHANNEL_PREFIX "redisson_lock__channel:"
#define WAIT_FOREVER        UINT64_MAX

struct lock_args {
    const struct px_arg *name;  /* borrowed: request argument */
    int64_t lease_ms;           /* LEASE, or -1 */
    int64_t wait_ms;            /* WAIT, or -1 (forever) */
    const struct px_arg *token; /* OWNER token, or NULL */
};

struct px_lockop {
    struct px_req *req;       /* borrowed: the request being answered */
    struct px_server *srv;    /* borrowed */
    struct px_waitset *set;   /* borrowed: joined waitset, or NULL */
    struct px_wait wait;      /* membership in set */
    struct list client_node;  /* in cl->waiters while joined */
    struct sched_timer timer; /* retry at pttl / WAIT deadline while asleep */
    uint64_t deadline;        /* monotonic ms, WAIT_FOREVER, or 0 (no waiting) */
    struct px_wait_snap snap; /* the lock's waitset when the first attempt was sent */
    uint64_t lease_ms;        /* lease to set in Redis */
    bool watchdog;            /* no LEASE: renew while the connection lives */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owner field string */
};

/* ---- argument parsing ----------------------------------------------------- */

static int parse_ms(struct px_req *req, int i, const char *opt, int64_t *out)
{
    const struct px_arg *a = &req->argv[i];

    if (util_parse_i64(a->p, a->len, out) < 0 || *out < 0) {
        px_reply_error(px_req_out(req), "ERR %s must be a non-negative integer (ms), got '%.*s'",
                       opt, (int)LP_MIN(a->len, 32u), a->p);
        return -EINVAL;
    }
    return 0;
}

static int check_token(struct px_req *req, const struct px_arg *t)
{
    size_t i, digits = 0;

    for (i = 0; i < t->len; i++) {
        char c = t->p[i];

        if (c >= '0' && c <= '9')
            digits++;
        else if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && c != '_' && c != '-' && c != '.')
            break;
    }
    if (t->len == 0 || t->len > 64 || i < t->len || digits == t->len) {
        px_reply_error(px_req_out(req), "ERR OWNER token must be 1-64 characters of "
                                        "[A-Za-z0-9_.-] and not all digits");
        return -EINVAL;
    }
    return 0;
}

/* Parses "name [LEASE ms] [WAIT ms] [OWNER token]" with the options the
 * command allows. Writes an error reply and returns -EINVAL on bad input. */
static int parse_lock_args(struct px_req *req, bool lease_ok, bool wait_ok, struct lock_args *a)
{
    int i;

    a->name = &req->argv[1];
    a->lease_ms = -1;
    a->wait_ms = -1;
    a->token = NULL;
    if (a->name->len == 0 || a->name->len > PX_NAME_MAX) {
        px_reply_error(px_req_out(req), "ERR lock name must be 1-%u bytes", PX_NAME_MAX);
        return -EINVAL;
    }
    for (i = 2; i < req->argc; i += 2) {
        const struct px_arg *opt = &req->argv[i];
        int rc = 0;

        if (i + 1 >= req->argc) {
            px_reply_error(px_req_out(req), "ERR option '%.*s' needs a value",
                           (int)LP_MIN(opt->len, 32u), opt->p);
            return -EINVAL;
        }
        if (lease_ok && util_eq_nocase(opt->p, opt->len, "LEASE"))
            rc = parse_ms(req, i + 1, "LEASE", &a->lease_ms);
        else if (wait_ok && util_eq_nocase(opt->p, opt->len, "WAIT"))
            rc = parse_ms(req, i + 1, "WAIT", &a->wait_ms);
        else if (util_eq_nocase(opt->p, opt->len, "OWNER"))
            rc = check_token(req, a->token = &req->argv[i + 1]);
        else {
            px_reply_error(px_req_out(req), "ERR syntax error near '%.*s'",
                           (int)LP_MIN(opt->len, 32u), opt->p);
            return -EINVAL;
        }
        if (rc < 0)
            return rc;
    }
    if (a->lease_ms == 0) {
        px_reply_error(px_req_out(req), "ERR LEASE must be at least 1 ms");
        return -EINVAL;
    }
    return 0;
}

static size_t args_owner(struct px_req *req, const struct lock_args *a, char *out)
{
    return px_owner_format(req->cl->srv, req->cl->id, a->token ? a->token->p : NULL,
                           a->token ? a->token->len : 0, out);
}

static size_t lock_channel(const struct px_arg *name, char *out, size_t cap)
{
    return px_channel_name(out, cap, LOCK_CHANNEL_PREFIX, name->p, name->len);
}

/* Error reply for a failed upstream request. */
static void reply_upstream(struct px_req *req, int err)
{
    struct px_server *srv = req->cl->srv;
    struct pool_stats st;

    srv->stats.upstream_errs++;
    if (err == -ENOTCONN) {
        pool_get_stats(srv->pool, &st);
        px_reply_error(px_req_out(req), "UPSTREAM Redis is unavailable (%s)",
                       st.last_error && st.last_error[0] ? st.last_error : "not connected");
    } else if (err == -ETIMEDOUT) {
        px_reply_error(px_req_out(req), "UPSTREAM Redis did not answer in time; outcome unknown");
    } else {
        px_reply_error(px_req_out(req), "UPSTREAM connection to Redis lost (%s); outcome unknown",
                       strerror(-err));
    }
}

/* Passes a Redis error reply through (e.g. WRONGTYPE). */
static void reply_redis_error(struct px_req *req, const redisReply *r)
{
    px_reply_error(px_req_out(req), "%.*s", (int)LP_MIN(r->len, 400u), r->str);
}

/* ---- LOCK / TRYLOCK --------------------------------------------------------- */

static void lock_try(struct px_lockop *op);

static void lockop_finish(struct px_lockop *op)
{
    struct px_req *req = op->req;

    sched_loop_timer_del(op->srv->loop, &op->timer);
    if (op->set) {
        px_waitset_leave(op->set, &op->wait);
        list_del_init(&op->client_node);
    }
    req->op = NULL;
    free(op);
    px_req_done(req);
}

static void lockop_fail(struct px_lockop *op, int err)
{
    reply_upstream(op->req, err);
    lockop_finish(op);
}

static void lockop_timeout(struct px_lockop *op)
{
    op->srv->stats.timeouts++;
    px_reply_nil(px_req_out(op->req));
    lockop_finish(op);
}

static void lockop_on_timer(struct sched_timer *t)
{
    struct px_lockop *op = LP_CONTAINER_OF(t, struct px_lockop, timer);

    px_waitset_wake_cancel(op->set, &op->wait);
    if (sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return lockop_timeout(op);
    lock_try(op);
}

static void lockop_on_wake(struct px_wait *w)
{
    struct px_lockop *op = LP_CONTAINER_OF(w, struct px_lockop, wait);

    sched_loop_timer_del(op->srv->loop, &op->timer);
    lock_try(op);
}

/* When to re-poll a holder whose remaining lease is pttl: at its end (PTTL
 * is 0 during a lease's last millisecond, so never sooner than 1 ms); for a
 * key without expiry (-1), every watchdog timeout as a safety net. */
static uint64_t repoll_ms(const struct px_lockop *op, int64_t pttl)
{
    if (pttl >= 0)
        return (uint64_t)LP_MAX(pttl, 1);
    return pttl == -1 ? op->srv->opts.watchdog_ms : 1;
}

/* Sleeps until a wake-up, the holder's lease end, or the deadline. */
static void lockop_sleep(struct px_lockop *op, int64_t pttl)
{
    uint64_t now = sched_loop_now_ms(op->srv->loop);
    uint64_t retry = repoll_ms(op, pttl);

    if (pttl >= 0)
        op->set->holder_until = now + retry;

    if (px_waitset_sleep(op->set, &op->wait))
        return lock_try(op);
    if (op->deadline != WAIT_FOREVER && op->deadline - now < retry)
        retry = op->deadline - now;
    sched_loop_timer_in(op->srv->loop, &op->timer, retry);
}

static void lockop_contended(struct px_lockop *op, int64_t pttl)
{
    struct px_req *req = op->req;
    char chan[PX_NAME_MAX + 64];
    size_t chlen;

    if (req->cl->closing)
        return lockop_finish(op);
    if (op->deadline == 0 || sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return lockop_timeout(op);
    if (op->set)
        return lockop_sleep(op, pttl);
    chlen = lock_channel(&req->argv[1], chan, sizeof(chan));
    op->set = px_waitset_join(op->srv, chan, chlen, &op->wait);
    if (!op->set)
        return lockop_fail(op, -ENOMEM);
    list_add_tail(&req->cl->waiters, &op->client_node);
    if (px_waitset_unchanged(op->set, &op->snap))
        return lockop_sleep(op, pttl); /* subscribed all along, no event since: nothing missed */
    if (op->set->ready)
        return lock_try(op); /* subscribed before this retry: no wake-up can be missed */
    /* Otherwise READY triggers the retry; the timer covers a lost subscribe. */
    sched_loop_timer_in(op->srv->loop, &op->timer, repoll_ms(op, pttl));
}

static void lockop_acquired(struct px_lockop *op, int64_t count)
{
    struct px_req *req = op->req;
    struct px_client *cl = req->cl;
    const struct px_arg *name = &req->argv[1];

    if (cl->closing) {
        if (op->srv->opts.on_disc == PX_DISCONNECT_RELEASE)
            px_hold_release_orphan(op->srv, name->p, name->len, op->owner, op->olen);
        return lockop_finish(op);
    }
    op->srv->stats.acquired++;
    px_hold_acquired(op->srv, cl, name->p, name->len, op->owner, op->olen, (uint64_t)count,
                     op->lease_ms, op->watchdog);
    px_reply_status(px_req_out(req), "OK");
    lockop_finish(op);
}

static void lock_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_lockop *op = arg;
    struct px_client *cl = op->req->cl;

    op->wait.busy = false;
    if (err < 0) {
        lockop_fail(op, err);
    } else if (r->type == REDIS_REPLY_ERROR) {
        reply_redis_error(op->req, r);
        lockop_finish(op);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_INTEGER ||
               r->element[1]->type != REDIS_REPLY_INTEGER) {
        lockop_fail(op, -EPROTO);
    } else if (r->element[0]->integer == 1) {
        lockop_acquired(op, r->element[1]->integer);
    } else {
        lockop_contended(op, r->element[1]->integer);
    }
    px_client_put(cl);
}

static void lock_try(struct px_lockop *op)
{
    struct px_req *req = op->req;
    char lease[24];
    const char *argv[3] = {req->argv[1].p, lease, op->owner};
    size_t lens[3] = {req->argv[1].len, 0, op->olen};
    int rc;

    lens[1] = (size_t)snprintf(lease, sizeof(lease), "%llu", (unsigned long long)op->lease_ms);
    rc = pool_eval(op->srv->pool, req->cl->id, PX_SCRIPT_ACQUIRE, 1, 3, argv, lens, lock_on_reply,
                   op);
    if (rc < 0)
        return lockop_fail(op, rc);
    op->wait.busy = true;
    px_client_get(req->cl);
}

/* A LOCK on a name that already has waiters here queues behind them (FIFO)
 * without a doomed attempt: it sleeps until woken, or until the holder's
 * lease end last seen by a member. Returns false when it must try first. */
static bool lock_queue_behind(struct px_lockop *op)
{
    char chan[PX_NAME_MAX + 64];
    size_t chlen = lock_channel(&op->req->argv[1], chan, sizeof(chan));
    struct px_waitset *set = px_waitset_find(op->srv, chan, chlen);
    uint64_t now = sched_loop_now_ms(op->srv->loop);

    px_waitset_snap(op->srv, chan, chlen, &op->snap);
    if (!set || !set->ready || set->nmembers == 0)
        return false;
    op->set = px_waitset_join(op->srv, chan, chlen, &op->wait);
    if (!op->set)
        return false;
    list_add_tail(&op->req->cl->waiters, &op->client_node);
    lockop_sleep(op, set->holder_until > now ? (int64_t)(set->holder_until - now) : 0);
    return true;
}

static void lock_start(struct px_req *req, bool trylock)
{
    struct px_server *srv = req->cl->srv;
    struct lock_args a;
    struct px_lockop *op;

    if (parse_lock_args(req, true, !trylock, &a) < 0)
        return px_req_done(req);
    op = calloc(1, sizeof(*op));
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->req = req;
    op->srv = srv;
    req->op = op;
    px_wait_init(&op->wait, lockop_on_wake);
    list_init(&op->client_node);
    sched_timer_init(&op->timer, lockop_on_timer);
    op->olen = args_owner(req, &a, op->owner);
    op->watchdog = a.lease_ms < 0;
    op->lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)a.lease_ms;
    if (trylock || a.wait_ms == 0)
        op->deadline = 0;
    else if (a.wait_ms < 0)
        op->deadline = WAIT_FOREVER;
    else
        op->deadline = sched_loop_now_ms(srv->loop) + (uint64_t)a.wait_ms;
    if (op->deadline != 0 && srv->locks.count > 0 && lock_queue_behind(op))
        return;
    lock_try(op);
}

static void lock_cmd_lock(struct px_req *req)
{
    lock_start(req, false);
}

static void lock_cmd_trylock(struct px_req *req)
{
    lock_start(req, true);
}

static bool lock_may_block(const struct px_req *req)
{
    int i;

    for (i = 2; i + 1 < req->argc; i += 2) {
        const struct px_arg *o = &req->argv[i], *v = &req->argv[i + 1];

        if (util_eq_nocase(o->p, o->len, "WAIT") && v->len == 1 && v->p[0] == '0')
            return false;
    }
    return true;
}

void px_lock_client_gone(struct px_client *cl)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->waiters)
    {
        struct px_lockop *op = LP_CONTAINER_OF(n, struct px_lockop, client_node);

        if (!op->wait.busy)
            lockop_finish(op); /* asleep: end the wait now */
    }
}

/* ---- UNLOCK ------------------------------------------------------------------ */

struct unlockop {
    struct px_req *req;       /* borrowed */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owner field string */
};

static void unlock_nil(struct px_req *req, struct unlockop *u)
{
    const struct px_arg *name = &req->argv[1];
    struct px_hold *h = px_hold_find(req->cl->srv, name->p, name->len, u->owner, u->olen);

    if (h) {
        if (!h->lost)
            req->cl->srv->stats.leases_lost++;
        px_hold_drop(h);
        px_reply_error(px_req_out(req),
                       "LOCKLOST lease on '%.*s' was lost (expired or taken) "
                       "before UNLOCK; it was not held any more",
                       (int)LP_MIN(name->len, 200u), name->p);
    } else {
        px_reply_error(px_req_out(req), "NOTOWNER lock '%.*s' is not held by this owner",
                       (int)LP_MIN(name->len, 200u), name->p);
    }
}

static void unlock_apply(struct px_req *req, struct unlockop *u, const redisReply *r)
{
    const struct px_arg *name = &req->argv[1];
    struct px_server *srv = req->cl->srv;
    struct px_hold *h = px_hold_find(srv, name->p, name->len, u->owner, u->olen);

    if (r->type == REDIS_REPLY_NIL)
        return unlock_nil(req, u);
    if (r->integer == 1) {
        srv->stats.released++;
        if (h)
            px_hold_drop(h);
    } else if (h) {
        px_hold_unlocked_one(h);
    }
    px_reply_int(px_req_out(req), r->integer);
}

static void unlock_on_reply(void *arg, const redisReply *r, int err)
{
    struct unlockop *u = arg;
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    if (err < 0)
        reply_upstream(req, err);
    else if (r->type == REDIS_REPLY_ERROR)
        reply_redis_error(req, r);
    else if (r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_INTEGER)
        unlock_apply(req, u, r);
    else
        reply_upstream(req, -EPROTO);
    req->op = NULL;
    free(u);
    px_req_done(req);
    px_client_put(cl);
}

/* Sends a script whose keys are {name, channel}, for a command whose
 * state is op (freed by the callback). Replies and finishes on failure. */
static void send_name_channel(struct px_req *req, unsigned script, const char *const *args,
                              const size_t *alens, int nargs, pool_reply_fn *cb, void *op)
{
    char chan[PX_NAME_MAX + 64];
    const char *argv[4] = {req->argv[1].p, chan};
    size_t lens[4] = {req->argv[1].len, 0};
    int i, rc;

    lens[1] = lock_channel(&req->argv[1], chan, sizeof(chan));
    for (i = 0; i < nargs; i++) {
        argv[2 + i] = args[i];
        lens[2 + i] = alens[i];
    }
    rc = pool_eval(req->cl->srv->pool, req->cl->id, script, 2, 2 + nargs, argv, lens, cb, op);
    if (rc < 0) {
        reply_upstream(req, rc);
        req->op = NULL;
        free(op);
        return px_req_done(req);
    }
    req->op = op;
    px_client_get(req->cl);
}

static void lock_cmd_unlock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    struct unlockop *u;
    struct lock_args a;
    struct px_hold *h;
    char lease[24];
    const char *args[2];
    size_t lens[2];

    if (parse_lock_args(req, false, false, &a) < 0)
        return px_req_done(req);
    u = malloc(sizeof(*u));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    u->req = req;
    u->olen = args_owner(req, &a, u->owner);
    h = px_hold_find(srv, a.name->p, a.name->len, u->owner, u->olen);
    lens[0] = (size_t)snprintf(lease, sizeof(lease), "%llu",
                               (unsigned long long)(h ? h->lease_ms : srv->opts.watchdog_ms));
    args[0] = lease;
    args[1] = u->owner;
    lens[1] = u->olen;
    send_name_channel(req, PX_SCRIPT_UNLOCK, args, lens, 2, unlock_on_reply, u);
}

/* ---- FORCEUNLOCK --------------------------------------------------------------- */

static void force_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_req *req = arg;
    struct px_client *cl = req->cl;

    if (err < 0)
        reply_upstream(req, err);
    else if (r->type == REDIS_REPLY_ERROR)
        reply_redis_error(req, r);
    else
        px_reply_int(px_req_out(req), r->type == REDIS_REPLY_INTEGER ? r->integer : 0);
    px_req_done(req);
    px_client_put(cl);
}

static void lock_cmd_forceunlock(struct px_req *req)
{
    struct lock_args a;
    char chan[PX_NAME_MAX + 64];
    const char *argv[2] = {req->argv[1].p, chan};
    size_t lens[2] = {req->argv[1].len, 0};
    int rc;

    if (parse_lock_args(req, false, false, &a) < 0)
        return px_req_done(req);
    lens[1] = lock_channel(a.name, chan, sizeof(chan));
    rc = pool_eval(req->cl->srv->pool, req->cl->id, PX_SCRIPT_FORCE, 2, 2, argv, lens,
                   force_on_reply, req);
    if (rc < 0) {
        reply_upstream(req, rc);
        return px_req_done(req);
    }
    px_client_get(req->cl);
}

/* ---- LOCK.INFO ----------------------------------------------------------------- */

static void info_reply(struct px_req *req, struct unlockop *u, const redisReply *r)
{
    const struct px_arg *name = &req->argv[1];
    struct px_hold *h = px_hold_find(req->cl->srv, name->p, name->len, u->owner, u->olen);
    struct buf *b = px_req_out(req);

    px_reply_array(b, 10);
    px_reply_cstr(b, "locked");
    px_reply_int(b, r->element[0]->integer);
    px_reply_cstr(b, "hold_count");
    px_reply_int(b, r->element[1]->integer);
    px_reply_cstr(b, "ttl_ms");
    px_reply_int(b, r->element[2]->integer);
    px_reply_cstr(b, "owner");
    px_reply_bulk(b, u->owner, u->olen);
    px_reply_cstr(b, "watchdog");
    px_reply_int(b, h && h->watchdog && !h->lost && r->element[1]->integer > 0);
}

static void info_on_reply(void *arg, const redisReply *r, int err)
{
    struct unlockop *u = arg;
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    if (err < 0)
        reply_upstream(req, err);
    else if (r->type == REDIS_REPLY_ERROR)
        reply_redis_error(req, r);
    else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3)
        info_reply(req, u, r);
    else
        reply_upstream(req, -EPROTO);
    req->op = NULL;
    free(u);
    px_req_done(req);
    px_client_put(cl);
}

static void lock_cmd_info(struct px_req *req)
{
    struct unlockop *u;
    struct lock_args a;
    const char *argv[2];
    size_t lens[2];
    int rc;

    if (parse_lock_args(req, false, false, &a) < 0)
        return px_req_done(req);
    u = malloc(sizeof(*u));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    u->req = req;
    u->olen = args_owner(req, &a, u->owner);
    argv[0] = a.name->p;
    lens[0] = a.name->len;
    argv[1] = u->owner;
    lens[1] = u->olen;
    rc = pool_eval(req->cl->srv->pool, req->cl->id, PX_SCRIPT_INFO, 1, 2, argv, lens, info_on_reply,
                   u);
    if (rc < 0) {
        reply_upstream(req, rc);
        free(u);
        return px_req_done(req);
    }
    req->op = u;
    px_client_get(req->cl);
}

static const struct px_cmd lock_cmds[] = {
    {"LOCK", 2, 8, lock_cmd_lock, lock_may_block, 1},
    {"TRYLOCK", 2, 6, lock_cmd_trylock, NULL, 1},
    {"UNLOCK", 2, 4, lock_cmd_unlock, NULL, 1},
    {"FORCEUNLOCK", 2, 2, lock_cmd_forceunlock, NULL, 1},
    {"LOCK.INFO", 2, 4, lock_cmd_info, NULL, 1},
};
const struct px_cmd_set px_lock_cmd_set = {lock_cmds, LP_ARRAY_SIZE(lock_cmds)};

int px_lock_init(struct px_server *srv)
{
    return px_waitset_init(srv);
}

void px_lock_deinit(struct px_server *srv)
{
    px_waitset_deinit(srv);
}
