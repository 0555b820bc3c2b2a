/* Reentrant and fenced lock commands over Redisson's RLock layout, and the
 * acquire/unlock state machine every lock kind shares (struct
 * px_lock_kind: plain and fenced here, fair in fairlock.c, read and write
 * in rwlock.c).
 *
 * Acquire flow (one px_lockop per request):
 *   try: kind->acquire -> {1,count[,token]}: held, reply +OK (the token for
 *   LOCK ... FENCED); the hold starts the watchdog unless LEASE was given
 *   | {0,ms}: contended.
 *   contended, no wait left: nil reply. Otherwise the op joins the waitset
 *   of kind->channel (one shared subscription per channel), retries at once
 *   if the subscription is already confirmed (else when it is), then sleeps
 *   until a wake-up, the re-poll time the script reported (the holder's
 *   remaining lease: a missed message costs latency, never a hang), or its
 *   WAIT deadline.
 *
 * States of an op: NEW (first attempt, not joined) -> JOINED, which is
 * either IN FLIGHT (an attempt's reply pending) or ASLEEP (timer armed)
 * -> DONE (replied and freed).
 *
 * Invariants:
 * - px_req_done() is called exactly once per op, after which the op is
 *   freed.
 * - A joined op stays queued on the set's semaphore while its attempt is in
 *   flight; its px_wait.busy stays false, so READY reaches it too. A wake-up
 *   ("0", "1" or READY) that arrives then only sets `rewake`, and the
 *   contended reply retries at once instead of sleeping. So a release that
 *   lands between an attempt's run in Redis and its reply is never lost,
 *   whatever the message ("1" wakes only queued members and keeps no
 *   permit). Rejected: leaving the semaphore during the flight, which loses
 *   exactly that "1" (readers then sleep out the writer's old lease).
 * - While an attempt is in flight the op's client holds a reference, so the
 *   callback can always run; if the client closed meanwhile, a successful
 *   acquire is released (or left to expire) per --on-disconnect and the
 *   reply is dropped.
 * - Local hand-off: an UNLOCK that ends the caller's last plain hold, with
 *   the longest-joined member of the name's waitset asleep and a plain
 *   LOCK, sends one unlock-and-grant script and puts that op IN FLIGHT as
 *   if it had sent an attempt (timer stopped, client reference taken); the
 *   script's reply answers both requests, so every rule above holds for
 *   the grantee. At most 16 hand-offs in a row skip the PUBLISH.
 * - An op that may have left state in Redis while waiting (`queued`: a fair
 *   lock's queue entry) calls kind->give_up whenever it ends without the
 *   lock: WAIT ran out, its connection closed, or an error.
 *
 * Upstream failures are error replies that start with UPSTREAM; the proxy
 * never answers +OK unless Redis confirmed the acquire.
 *
 * Scripts: this file's set replaces the base acquire and unlock with
 * mode-checked ones (a name holding a read-write lock gets WRONGTYPE instead
 * of having a read count bumped or its hash deleted), and adds the fenced
 * acquire (INCR redisson_lock_token:{name}, as RedissonFencedLock) and a
 * FORCEUNLOCK that wakes the waiters of whichever kind the lock is. */
#include "proxy/locks/lock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/util.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/locks/fairlock.h"
#include "proxy/locks/hold.h"
#include "proxy/locks/scripts.h"
#include "proxy/locks/waitset.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define LOCK_CHANNEL_PREFIX "redisson_lock__channel:"
#define WAIT_FOREVER        UINT64_MAX

#define OPT_LEASE  1u /* LEASE ms allowed */
#define OPT_WAIT   2u /* WAIT ms allowed */
#define OPT_FENCED 4u /* FENCED flag allowed */
#define OPT_OWNER  8u /* OWNER token (always allowed) */

/* ---- scripts ---------------------------------------------------------------- */

enum lock_script {
    LK_ACQUIRE = 0, /* KEYS name; ARGV lease, owner -> {1,count} | {0,pttl} */
    LK_FENCED = 1,  /* KEYS name, token; ARGV lease, owner -> {1,count,token} | {0,pttl} */
    LK_UNLOCK = 2,  /* KEYS name, channel; ARGV lease, owner -> nil | 0 | 1 */
    LK_FORCE = 3,   /* KEYS name, channel, rw channel, queue, timeouts; ARGV fair prefix, now */
    LK_GRANT = 4,   /* KEYS name; ARGV lease, owner, next lease, next owner -> nil | 0 | 2 */
    LK_COUNT = 5,
};

#define LK_RWLOCK_ERROR \
    "return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)'); "

/* A free name costs Redisson's three calls (EXISTS, HINCRBY, PEXPIRE); only
 * an existing hash is checked for a read-write lock's 'mode' field (whose
 * read owner fields look like ours). HEXISTS fails with WRONGTYPE on other
 * types. */
#define LK_FREE_OR_MINE                                                                           \
    "local free = redis.call('exists', KEYS[1]) == 0; "                                           \
    "if (not free and redis.call('hexists', KEYS[1], 'mode') == 1) then " LK_RWLOCK_ERROR "end; " \
    "if free or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "

/* Redisson's acquire, refusing a read-write lock's hash. */
static const char acquire_lua[] = LK_FREE_OR_MINE /* then Redisson's acquire: */
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {1, c}; end; "
    "return {0, redis.call('pttl', KEYS[1])};";

/* RedissonFencedLock's acquire: every success, re-entry included, takes
 * the next token from redisson_lock_token:{name} (which never expires). */
static const char fenced_lua[] = LK_FREE_OR_MINE /* then: */
    "local t = redis.call('incr', KEYS[2]); "
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {1, c, t}; end; "
    "return {0, redis.call('pttl', KEYS[1])};";

/* Redisson's unlock, refusing a read-write lock's hash: one HMGET reads
 * 'mode' and the owner's count (Redisson's HEXISTS), so the check is free. */
static const char unlock_lua[] =
    "local v = redis.call('hmget', KEYS[1], 'mode', ARGV[2]); "
    "if (v[1]) then " LK_RWLOCK_ERROR "end; "
    "if (not v[2]) then return nil; end; " /* then Redisson's unlock: */
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (c > 0) then redis.call('pexpire', KEYS[1], ARGV[1]); return 0; end; "
    "redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], '0'); return 1;";

/* Unlock and hand-off in one step: when the caller's last hold goes, the
 * lock goes straight to a waiter of this proxy (a fresh hold of 1 with
 * its lease), without a PUBLISH: nobody else could have taken it. 2 =
 * released and granted; nil and 0 as in unlock_lua (nothing granted). */
static const char grant_lua[] =
    "local v = redis.call('hmget', KEYS[1], 'mode', ARGV[2]); "
    "if (v[1]) then " LK_RWLOCK_ERROR "end; "
    "if (not v[2]) then return nil; end; "
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (c > 0) then redis.call('pexpire', KEYS[1], ARGV[1]); return 0; end; "
    "redis.call('del', KEYS[1]); redis.call('hincrby', KEYS[1], ARGV[4], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[3]); return 2;";

#define LK_FORCE_CLEANUP PX_FAIR_CLEANUP_LUA("KEYS[4]", "KEYS[5]", "ARGV[2]")

/* forceUnlock of any lock kind: a read-write lock wakes all its waiters
 * ("1" on its channel); otherwise "0" on the lock channel and, after
 * Redisson's stale-waiter cleanup, on the fair queue head's channel. */
static const char force_lua[] =
    "local t = redis.call('type', KEYS[1])['ok']; "
    "if (t == 'none') then return 0; end; "
    "if (t ~= 'hash') then return redis.error_reply("
    "'WRONGTYPE the name holds a ' .. t .. ', not a lock'); end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "redis.call('del', KEYS[1]); "
    "if (mode) then redis.call('publish', KEYS[3], '1'); return 1; end; "
    "redis.call('publish', KEYS[2], '0'); " LK_FORCE_CLEANUP /* then the fair head: */
    "local h = redis.call('lindex', KEYS[4], 0); "
    "if (h) then redis.call('publish', ARGV[1] .. ':' .. h, '0'); end; "
    "return 1;";

static const struct pool_script lock_scripts[LK_COUNT] = {
    {"lock_acquire", acquire_lua}, {"lock_acquire_fenced", fenced_lua}, {"lock_unlock", unlock_lua},
    {"lock_force", force_lua},     {"lock_unlock_grant", grant_lua},
};

static unsigned lock_script_base;
const struct px_script_set px_lock_script_set = {lock_scripts, LK_COUNT, &lock_script_base};

/* ---- the plain and fenced kinds ---------------------------------------------- */

static size_t plain_channel(const struct px_acq *a, char *out, size_t cap)
{
    return px_channel_name(out, cap, LOCK_CHANNEL_PREFIX, a->name, a->nlen);
}

static int plain_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb,
                         void *arg)
{
    char lease[24];
    const char *argv[3] = {a->name, lease, a->owner};
    size_t lens[3] = {a->nlen, 0, a->olen};

    lens[1] = util_u64_to_str(a->lease_ms, lease);
    return px_metrics_eval(srv, a->hint, lock_script_base + LK_ACQUIRE, 1, 3, argv, lens, cb, arg);
}

static int fenced_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb,
                          void *arg)
{
    char lease[24], token[PX_CHANNEL_MAX];
    const char *argv[4] = {a->name, token, lease, a->owner};
    size_t lens[4] = {a->nlen, 0, 0, a->olen};

    lens[1] = px_channel_name(token, sizeof(token), "redisson_lock_token:", a->name, a->nlen);
    lens[2] = util_u64_to_str(a->lease_ms, lease);
    return px_metrics_eval(srv, a->hint, lock_script_base + LK_FENCED, 2, 4, argv, lens, cb, arg);
}

int px_lock_eval_unlock(struct px_server *srv, const struct px_acq *a, unsigned script,
                        px_lock_channel_fn *channel, pool_reply_fn *cb, void *arg)
{
    char lease[24], chan[PX_CHANNEL_MAX];
    const char *argv[4] = {a->name, chan, lease, a->owner};
    size_t lens[4] = {a->nlen, 0, 0, a->olen};

    lens[1] = channel(a, chan, sizeof(chan));
    lens[2] = util_u64_to_str(a->lease_ms, lease);
    return px_metrics_eval(srv, a->hint, script, 2, 4, argv, lens, cb, arg);
}

static int plain_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return px_lock_eval_unlock(srv, a, lock_script_base + LK_UNLOCK, plain_channel, cb, arg);
}

static const struct px_lock_kind plain_kind = {
    "", &px_hold_plain, plain_acquire, plain_unlock, plain_channel, NULL, false,
};

static const struct px_lock_kind fenced_kind = {
    "", &px_hold_plain, fenced_acquire, plain_unlock, plain_channel, NULL, false,
};

/* ---- argument parsing ----------------------------------------------------- */

struct lock_args {
    const struct px_arg *name;  /* borrowed: request argument */
    int64_t lease_ms;           /* LEASE, or -1 */
    int64_t wait_ms;            /* WAIT, or -1 (forever) */
    const struct px_arg *token; /* OWNER token, or NULL */
    bool fenced;                /* FENCED given */
};

struct px_lockop {
    struct px_req *req;              /* borrowed: the request being answered */
    struct px_server *srv;           /* borrowed */
    const struct px_lock_kind *kind; /* borrowed: static */
    struct px_waitset *set;          /* borrowed: joined waitset, or NULL */
    struct px_wait wait;             /* membership in set */
    struct list client_node;         /* in cl->waiters while joined */
    struct sched_timer timer;        /* re-poll / WAIT deadline while asleep */
    struct px_acq acq;               /* what attempts send (owner points below) */
    uint64_t deadline;               /* monotonic ms, WAIT_FOREVER, or 0 (no waiting) */
    bool watchdog;                   /* no LEASE: renew while the connection lives */
    bool fenced;                     /* reply with the fencing token */
    bool inflight;                   /* an attempt's reply is pending */
    bool rewake;                     /* woken while in flight: retry, do not sleep */
    bool queued;                     /* a waiting attempt was sent: give up on failure */
    struct px_wait_snap snap;        /* the channel's waitset when the first attempt went */
    char owner[PX_OWNER_MAX];        /* owned: owner field string */
};

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

/* Which option opt is among those allow permits: OPT_*, or 0. */
static unsigned option_kind(const struct px_arg *opt, unsigned allow)
{
    static const struct {
        const char *name; /* option keyword */
        unsigned bit;     /* OPT_* */
    } opts[] = {{"LEASE", OPT_LEASE}, {"WAIT", OPT_WAIT}, {"FENCED", OPT_FENCED}, {"OWNER", 0}};
    size_t k;

    for (k = 0; k < LP_ARRAY_SIZE(opts); k++) {
        if ((opts[k].bit == 0 || (allow & opts[k].bit)) && px_args_is(opt, opts[k].name))
            return opts[k].bit ? opts[k].bit : OPT_OWNER;
    }
    return 0;
}

/* Parses the option at argv[*i] and advances *i past it. Writes an error
 * reply and returns -EINVAL on bad input. */
static int parse_option(struct px_req *req, int *i, unsigned allow, struct lock_args *a)
{
    const struct px_arg *opt = &req->argv[*i];
    unsigned kind = option_kind(opt, allow);
    int v = *i + 1;

    *i += kind == OPT_FENCED ? 1 : 2;
    if (kind == 0) {
        px_args_reply_syntax(req, opt);
        return -EINVAL;
    }
    if (kind == OPT_FENCED) {
        a->fenced = true;
        return 0;
    }
    if (v >= req->argc) {
        px_args_reply_no_value(req, opt->p, opt->len);
        return -EINVAL;
    }
    if (kind == OPT_LEASE)
        return px_args_parse_ms(req, v, "LEASE", 0, &a->lease_ms);
    if (kind == OPT_WAIT)
        return px_args_parse_ms(req, v, "WAIT", 0, &a->wait_ms);
    return check_token(req, a->token = &req->argv[v]);
}

/* Parses "name [option ...]" with the options allow permits. Writes an
 * error reply and returns -EINVAL on bad input. */
static int parse_lock_args(struct px_req *req, unsigned allow, struct lock_args *a)
{
    int i = 2;

    memset(a, 0, sizeof(*a));
    a->name = &req->argv[1];
    a->lease_ms = -1;
    a->wait_ms = -1;
    if (px_args_check_name(req, "lock name") < 0)
        return -EINVAL;
    while (i < req->argc) {
        if (parse_option(req, &i, allow, a) < 0)
            return -EINVAL;
    }
    if (a->lease_ms == 0) {
        px_reply_error(px_req_out(req), "ERR LEASE must be at least 1 ms");
        return -EINVAL;
    }
    return 0;
}

/* Writes the owner field of the caller for kind into out (PX_OWNER_MAX
 * bytes); *base_len gets the length without the kind's suffix. */
static size_t args_owner(struct px_req *req, const struct lock_args *a,
                         const struct px_lock_kind *kind, char *out, size_t *base_len)
{
    size_t n = px_owner_format(req->cl->srv, req->cl->id, a->token ? a->token->p : NULL,
                               a->token ? a->token->len : 0, out);
    size_t slen = strlen(kind->owner_suffix);

    *base_len = n;
    memcpy(out + n, kind->owner_suffix, slen + 1);
    return n + slen;
}

/* Replies for a script reply that failed: an upstream error (err < 0) or
 * a Redis error reply passed through (e.g. WRONGTYPE). Returns false, with
 * nothing written, when r is a reply for the command to interpret. */
static bool reply_failed(struct px_req *req, const redisReply *r, int err)
{
    if (err < 0)
        px_args_reply_upstream(req, err);
    else if (r->type == REDIS_REPLY_ERROR)
        px_args_reply_redis_error(req, r);
    else
        return false;
    return true;
}

/* The start of a command whose script send returned rc: on failure replies
 * and finishes req (false); else the reply callback holds a client
 * reference (true). */
static bool script_sent(struct px_req *req, int rc)
{
    if (rc < 0) {
        px_args_reply_upstream(req, rc);
        px_req_done(req);
        return false;
    }
    px_client_get(req->cl);
    return true;
}

/* ---- acquire ---------------------------------------------------------------- */

static void lock_try(struct px_lockop *op);

static void lockop_finish(struct px_lockop *op)
{
    struct px_req *req = op->req;

    sched_loop_timer_del(op->srv->loop, &op->timer);
    if (op->set) {
        px_waitset_leave(op->set, &op->wait);
        list_del_init(&op->client_node);
    }
    if (op->queued && op->kind->give_up)
        op->kind->give_up(op->srv, &op->acq);
    req->op = NULL;
    free(op);
    px_req_done(req);
}

static void lockop_fail(struct px_lockop *op, int err)
{
    px_args_reply_upstream(op->req, err);
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

    if (sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return lockop_timeout(op);
    lock_try(op);
}

/* Woken by a message or READY (the waitset unlinked w from its semaphore). */
static void lockop_on_wake(struct px_wait *w)
{
    struct px_lockop *op = LP_CONTAINER_OF(w, struct px_lockop, wait);

    if (op->inflight) {
        op->rewake = true;
        return;
    }
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

/* Sleeps until a wake-up, the re-poll time, or the deadline; retries now
 * if a wake-up came while the attempt was in flight. */
static void lockop_sleep(struct px_lockop *op, int64_t pttl)
{
    uint64_t now = sched_loop_now_ms(op->srv->loop);
    uint64_t retry = repoll_ms(op, pttl);

    if (pttl >= 0)
        op->set->holder_until = now + retry;
    if (op->rewake)
        return lock_try(op);
    if (!sched_waiter_is_queued(&op->wait.sleep) && px_waitset_sleep(op->set, &op->wait))
        return lock_try(op);
    if (op->deadline != WAIT_FOREVER && op->deadline - now < retry)
        retry = op->deadline - now;
    sched_loop_timer_in(op->srv->loop, &op->timer, retry);
}

/* Joins the waitset of chan (one shared subscription per channel). */
static bool lockop_join(struct px_lockop *op, const char *chan, size_t chlen)
{
    op->set = px_waitset_join(op->srv, chan, chlen, &op->wait);
    if (!op->set)
        return false;
    list_add_tail(&op->req->cl->waiters, &op->client_node);
    return true;
}

static void lockop_contended(struct px_lockop *op, int64_t pttl)
{
    struct px_req *req = op->req;
    char chan[PX_CHANNEL_MAX];
    size_t chlen;

    if (req->cl->closing)
        return lockop_finish(op);
    if (op->deadline == 0 || sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return lockop_timeout(op);
    if (op->set)
        return lockop_sleep(op, pttl);
    chlen = op->kind->channel(&op->acq, chan, sizeof(chan));
    if (!lockop_join(op, chan, chlen))
        return lockop_fail(op, -ENOMEM);
    if (px_waitset_unchanged(op->set, &op->snap))
        return lockop_sleep(op, pttl); /* subscribed all along, no event since: nothing missed */
    if (op->set->ready)
        return lock_try(op); /* subscribed before this retry: no wake-up can be missed */
    /* Otherwise READY triggers the retry; the timer covers a lost subscribe. */
    sched_loop_timer_in(op->srv->loop, &op->timer, repoll_ms(op, pttl));
}

static void lockop_acquired(struct px_lockop *op, int64_t count, int64_t token)
{
    struct px_req *req = op->req;
    struct px_client *cl = req->cl;
    const struct px_acq *a = &op->acq;
    struct px_hold *h;

    op->queued = false; /* the acquire took the op out of any queue */
    if (cl->closing) {
        if (op->srv->opts.on_disc == PX_DISCONNECT_RELEASE)
            px_hold_release_orphan(op->srv, op->kind->hold, a->name, a->nlen, a->owner, a->olen);
        return lockop_finish(op);
    }
    op->srv->stats.acquired++;
    px_metrics_observe_wait(op->srv, req);
    h = px_hold_acquired_kind(op->srv, cl, op->kind->hold, a->name, a->nlen, a->owner, a->olen,
                              (uint64_t)count, a->lease_ms, op->watchdog);
    if (h && token >= 0)
        h->token = token;
    if (op->fenced)
        px_reply_int(px_req_out(req), token);
    else
        px_reply_status(px_req_out(req), "OK");
    lockop_finish(op);
}

static bool acquire_reply_ok(const redisReply *r)
{
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3)
        return false;
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return false;
    }
    return true;
}

static void lock_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_lockop *op = arg;
    struct px_client *cl = op->req->cl;

    op->inflight = false;
    if (reply_failed(op->req, r, err)) {
        lockop_finish(op);
    } else if (!acquire_reply_ok(r)) {
        lockop_fail(op, -EPROTO);
    } else if (r->element[0]->integer == 1) {
        lockop_acquired(op, r->element[1]->integer, r->elements == 3 ? r->element[2]->integer : -1);
    } else {
        lockop_contended(op, r->element[1]->integer);
    }
    px_client_put(cl);
}

/* Sends one attempt. A joined op stays queued on the semaphore meanwhile
 * (see the invariants at the top). */
static void lock_try(struct px_lockop *op)
{
    int rc;

    op->rewake = false;
    rc = op->kind->acquire(op->srv, &op->acq, lock_on_reply, op);
    if (rc < 0)
        return lockop_fail(op, rc);
    op->inflight = true;
    op->queued = op->queued || op->acq.waiting;
    px_client_get(op->req->cl);
    if (op->set && !sched_waiter_is_queued(&op->wait.sleep) && px_waitset_sleep(op->set, &op->wait))
        op->rewake = true; /* a stored wake-up: use it once the reply is in */
}

static void lockop_init(struct px_lockop *op, struct px_req *req, const struct lock_args *a)
{
    struct px_server *srv = req->cl->srv;

    op->req = req;
    op->srv = srv;
    px_wait_init(&op->wait, lockop_on_wake);
    op->wait.exclusive = op->kind->exclusive;
    list_init(&op->client_node);
    sched_timer_init(&op->timer, lockop_on_timer);
    op->acq.name = a->name->p;
    op->acq.nlen = a->name->len;
    op->acq.owner = op->owner;
    op->acq.olen = args_owner(req, a, op->kind, op->owner, &op->acq.base_olen);
    op->acq.wait_ms = a->wait_ms;
    op->acq.hint = req->cl->id;
    op->watchdog = a->lease_ms < 0;
    op->acq.lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)a->lease_ms;
}

/* Before a first attempt: records the channel's waitset state (so a
 * contended reply can tell whether a wake-up could have been missed), and
 * queues a plain LOCK behind this proxy's waiters of the same name (FIFO)
 * without a doomed attempt: it sleeps until woken, or until the holder's
 * lease end last seen by a waiter. Fair locks must join Redis's queue and
 * read-write waiters share a channel with the other mode, so those always
 * try first. Returns true when the op is now asleep. */
static bool lock_queue_behind(struct px_lockop *op)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen = op->kind->channel(&op->acq, chan, sizeof(chan));
    struct px_waitset *set = px_waitset_find(op->srv, chan, chlen);
    uint64_t now = sched_loop_now_ms(op->srv->loop);
    bool plain = op->kind == &plain_kind || op->kind == &fenced_kind;

    px_waitset_snap(op->srv, chan, chlen, &op->snap);
    if (!plain || !set || !set->ready || set->nmembers == 0 || !lockop_join(op, chan, chlen))
        return false;
    lockop_sleep(op, set->holder_until > now ? (int64_t)(set->holder_until - now) : 0);
    return true;
}

static void acquire_start(struct px_req *req, const struct px_lock_kind *kind, unsigned allow)
{
    struct px_server *srv = req->cl->srv;
    struct lock_args a;
    struct px_lockop *op;

    if (parse_lock_args(req, allow, &a) < 0)
        return px_req_done(req);
    op = calloc(1, sizeof(*op));
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->kind = a.fenced ? &fenced_kind : kind;
    op->fenced = a.fenced;
    req->op = op;
    lockop_init(op, req, &a);
    if (!(allow & OPT_WAIT) || a.wait_ms == 0)
        op->deadline = 0;
    else if (a.wait_ms < 0)
        op->deadline = WAIT_FOREVER;
    else
        op->deadline = sched_loop_now_ms(srv->loop) + (uint64_t)a.wait_ms;
    op->acq.waiting = op->deadline != 0;
    if (op->acq.waiting && srv->locks.count > 0 && lock_queue_behind(op))
        return;
    lock_try(op);
}

void px_lock_cmd_acquire(struct px_req *req, const struct px_lock_kind *kind, bool trylock)
{
    acquire_start(req, kind, trylock ? OPT_LEASE : OPT_LEASE | OPT_WAIT);
}

static void lock_cmd_lock(struct px_req *req)
{
    acquire_start(req, &plain_kind, OPT_LEASE | OPT_WAIT | OPT_FENCED);
}

static void lock_cmd_trylock(struct px_req *req)
{
    acquire_start(req, &plain_kind, OPT_LEASE | OPT_FENCED);
}

bool px_lock_may_block(const struct px_req *req)
{
    int i;

    for (i = 2; i < req->argc; i++) {
        const struct px_arg *o = &req->argv[i];

        if (px_args_is(o, "FENCED"))
            continue;
        if (i + 1 < req->argc && px_args_is(o, "WAIT") && req->argv[i + 1].len == 1 &&
            req->argv[i + 1].p[0] == '0')
            return false;
        i++;
    }
    return true;
}

void px_lock_client_gone(struct px_client *cl)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->waiters)
    {
        struct px_lockop *op = LP_CONTAINER_OF(n, struct px_lockop, client_node);

        if (!op->inflight)
            lockop_finish(op); /* asleep: end the wait now */
    }
}

/* ---- unlock ------------------------------------------------------------------ */

struct unlockop;

/* Interprets a non-error script reply r of u's command and writes the
 * reply; false when r has an unexpected shape (nothing written). */
typedef bool unlock_apply_fn(struct px_req *req, struct unlockop *u, const redisReply *r);

/* An UNLOCK or LOCK.INFO whose script is in flight (req->op). */
struct unlockop {
    struct px_req *req;       /* borrowed */
    unlock_apply_fn *apply;   /* borrowed: static; formats the reply */
    struct px_hold *hold;     /* reference: the caller's hold when sent, or NULL */
    struct px_lockop *next;   /* borrowed: the waiter a hand-off goes to, or NULL */
    uint64_t lease_ms;        /* the caller's lease (a hand-off that finds it held) */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owned: owner field string */
};

/* The hold found when the UNLOCK was sent, unless dropped since. */
static struct px_hold *unlockop_hold(const struct unlockop *u)
{
    return u->hold && !u->hold->dead ? u->hold : NULL;
}

static void unlock_nil(struct px_req *req, struct unlockop *u)
{
    const struct px_arg *name = &req->argv[1];
    struct px_hold *h = unlockop_hold(u);

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

static bool unlock_apply(struct px_req *req, struct unlockop *u, const redisReply *r)
{
    struct px_server *srv = req->cl->srv;
    struct px_hold *h = unlockop_hold(u);

    if (r->type == REDIS_REPLY_NIL) {
        unlock_nil(req, u);
        return true;
    }
    if (r->type != REDIS_REPLY_INTEGER)
        return false;
    if (r->integer == 1) {
        srv->stats.released++;
        if (h)
            px_hold_drop(h);
    } else if (h) {
        px_hold_unlocked_one(h);
    }
    px_reply_int(px_req_out(req), r->integer);
    return true;
}

static void unlockop_on_reply(void *arg, const redisReply *r, int err)
{
    struct unlockop *u = arg;
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    if (!reply_failed(req, r, err) && !u->apply(req, u, r))
        px_args_reply_upstream(req, -EPROTO);
    req->op = NULL;
    px_hold_put(u->hold);
    free(u);
    px_req_done(req);
    px_client_put(cl);
}

/* Parses "name [OWNER token]" and allocates the op of an UNLOCK-like
 * command of kind, with the caller's owner field. Returns NULL after
 * replying and finishing req on bad input or when out of memory;
 * *base_olen gets the owner length without the kind's suffix. */
static struct unlockop *unlockop_create(struct px_req *req, const struct px_lock_kind *kind,
                                        unlock_apply_fn *apply, size_t *base_olen)
{
    struct unlockop *u;
    struct lock_args a;

    if (parse_lock_args(req, 0, &a) < 0) {
        px_req_done(req);
        return NULL;
    }
    u = malloc(sizeof(*u));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        px_req_done(req);
        return NULL;
    }
    u->req = req;
    u->apply = apply;
    u->hold = NULL;
    u->next = NULL;
    u->olen = args_owner(req, &a, kind, u->owner, base_olen);
    return u;
}

/* Ends the start of u's command, whose script send returned rc. */
static void unlockop_sent(struct unlockop *u, int rc)
{
    struct px_req *req = u->req;

    if (script_sent(req, rc)) {
        req->op = u;
        return;
    }
    px_hold_put(u->hold);
    free(u);
}

/* ---- local hand-off ------------------------------------------------------- */

/* Hand-offs in a row without a PUBLISH before one ordinary unlock: waiters
 * outside this proxy (Redisson clients, other proxies) learn of a release
 * only from a message, so every so often they get their chance. */
#define LK_GRANTS_IN_ROW 16u

/* The waiter an UNLOCK of a->name that ends the caller's hold hands the
 * lock to: the longest-joined member of the name's waitset that is asleep,
 * if it is a plain LOCK (a fenced one needs its token: the ordinary unlock
 * and wake-up serve it). NULL: unlock as usual. */
static struct px_lockop *grant_candidate(struct px_server *srv, const struct px_acq *a)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen = plain_channel(a, chan, sizeof(chan));
    struct px_waitset *set = px_waitset_find(srv, chan, chlen);
    struct list *n, *t;

    if (!set || set->local_grants >= LK_GRANTS_IN_ROW) {
        if (set)
            set->local_grants = 0;
        return NULL;
    }
    list_for_each_safe(n, t, &set->members)
    {
        struct px_wait *w = LP_CONTAINER_OF(n, struct px_wait, node);
        struct px_lockop *op = LP_CONTAINER_OF(w, struct px_lockop, wait);

        if (w->retry != lockop_on_wake || !sched_waiter_is_queued(&w->sleep) || op->inflight)
            continue; /* not a lock waiter, or its own attempt is in flight */
        if (op->kind != &plain_kind || op->req->cl->closing)
            return NULL;
        set->local_grants++;
        return op;
    }
    return NULL;
}

static void grant_on_reply(void *arg, const redisReply *r, int err);

/* Unlock of the caller's hold (a) and grant to u->next, in one script. */
static int grant_send(struct px_server *srv, const struct px_acq *a, struct unlockop *u)
{
    const struct px_acq *b = &u->next->acq;
    char lease[24], next_lease[24];
    const char *argv[5] = {a->name, lease, a->owner, next_lease, b->owner};
    size_t lens[5] = {a->nlen, 0, a->olen, 0, b->olen};

    lens[1] = util_u64_to_str(a->lease_ms, lease);
    lens[3] = util_u64_to_str(b->lease_ms, next_lease);
    return px_metrics_eval(srv, a->hint, lock_script_base + LK_GRANT, 1, 5, argv, lens,
                           grant_on_reply, u);
}

/* The grant's target waits as if it had sent an attempt (lock_try): a
 * disconnect or its deadline meanwhile is settled by the reply. */
static void grant_begin(struct px_lockop *op)
{
    sched_loop_timer_del(op->srv->loop, &op->timer);
    op->rewake = false;
    op->inflight = true;
    px_client_get(op->req->cl);
}

/* One reply, two answers: the UNLOCK gets :1 when the lock was handed
 * over (else the reply as it is), and the waiter an acquire reply: granted
 * ({1, 1}), still held by the caller (0: {0, its lease}), not held by it
 * (nil: {0, 0}, an attempt of its own in a millisecond), or the error. */
static void grant_on_reply(void *arg, const redisReply *r, int err)
{
    struct unlockop *u = arg;
    struct px_lockop *next = u->next;
    bool as_is = err < 0 || r->type == REDIS_REPLY_ERROR;
    bool granted = !as_is && r->type == REDIS_REPLY_INTEGER && r->integer == 2;
    redisReply one = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    redisReply el[2] = {{.type = REDIS_REPLY_INTEGER, .integer = granted},
                        {.type = REDIS_REPLY_INTEGER, .integer = 0}};
    redisReply *elp[2] = {&el[0], &el[1]};
    redisReply acq = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = elp};

    if (granted)
        el[1].integer = 1;
    else if (!as_is && r->type == REDIS_REPLY_INTEGER)
        el[1].integer = (long long)u->lease_ms;
    unlockop_on_reply(u, granted ? &one : r, err);
    lock_on_reply(next, as_is ? r : &acq, err);
}

void px_lock_cmd_release(struct px_req *req, const struct px_lock_kind *kind)
{
    struct px_server *srv = req->cl->srv;
    const struct px_arg *name = &req->argv[1];
    struct unlockop *u;
    struct px_acq acq;
    struct px_hold *h;
    int rc;

    u = unlockop_create(req, kind, unlock_apply, &acq.base_olen);
    if (!u)
        return;
    h = px_hold_find(srv, name->p, name->len, u->owner, u->olen);
    u->hold = px_hold_get(h); /* the reply acts on this hold: no second lookup */
    acq.name = name->p;
    acq.nlen = name->len;
    acq.owner = u->owner;
    acq.olen = u->olen;
    acq.lease_ms = h ? h->lease_ms : srv->opts.watchdog_ms;
    acq.wait_ms = -1;
    acq.waiting = false;
    acq.hint = req->cl->id;
    if (kind == &plain_kind && h && h->count == 1 && !h->lost && srv->locks.count > 0)
        u->next = grant_candidate(srv, &acq);
    if (!u->next)
        return unlockop_sent(u, kind->unlock(srv, &acq, unlockop_on_reply, u));
    u->lease_ms = acq.lease_ms;
    rc = grant_send(srv, &acq, u);
    if (rc == 0)
        grant_begin(u->next);
    unlockop_sent(u, rc);
}

static void lock_cmd_unlock(struct px_req *req)
{
    px_lock_cmd_release(req, &plain_kind);
}

/* ---- FORCEUNLOCK --------------------------------------------------------------- */

static void force_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_req *req = arg;
    struct px_client *cl = req->cl;

    if (!reply_failed(req, r, err))
        px_reply_int(px_req_out(req), r->type == REDIS_REPLY_INTEGER ? r->integer : 0);
    px_req_done(req);
    px_client_put(cl);
}

/* What FORCEUNLOCK sends: the name, Redisson's "<prefix>{name}" aux names
 * and the wall clock; argv/lens point into the struct. */
struct force_args {
    char chan[PX_CHANNEL_MAX];   /* redisson_lock__channel:{name} */
    char rwchan[PX_CHANNEL_MAX]; /* redisson_rwlock:{name} */
    char queue[PX_CHANNEL_MAX];  /* redisson_lock_queue:{name} */
    char zset[PX_CHANNEL_MAX];   /* redisson_lock_timeout:{name} */
    char now[24];                /* epoch ms */
    const char *argv[7];         /* KEYS name, chan, rwchan, queue, zset; ARGV chan, now */
    size_t lens[7];              /* lengths of argv */
};

static void force_args_fill(struct force_args *f, const struct px_arg *n)
{
    char *bufs[4] = {f->chan, f->rwchan, f->queue, f->zset};
    static const char *const prefixes[4] = {
        LOCK_CHANNEL_PREFIX, "redisson_rwlock:", "redisson_lock_queue:", "redisson_lock_timeout:"};
    int i;

    f->argv[0] = n->p;
    f->lens[0] = n->len;
    for (i = 0; i < 4; i++) {
        f->argv[1 + i] = bufs[i];
        f->lens[1 + i] = px_channel_name(bufs[i], PX_CHANNEL_MAX, prefixes[i], n->p, n->len);
    }
    f->argv[5] = f->chan; /* the fair head's channel is this + ":" + owner */
    f->lens[5] = f->lens[1];
    f->argv[6] = f->now;
    f->lens[6] =
        (size_t)snprintf(f->now, sizeof(f->now), "%llu", (unsigned long long)clock_wall_ms());
}

static void lock_cmd_forceunlock(struct px_req *req)
{
    struct force_args *f;
    struct lock_args a;
    int rc;

    if (parse_lock_args(req, 0, &a) < 0)
        return px_req_done(req);
    f = malloc(sizeof(*f));
    if (!f) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    force_args_fill(f, a.name);
    rc = px_metrics_eval(req->cl->srv, req->cl->id, lock_script_base + LK_FORCE, 5, 7, f->argv,
                         f->lens, force_on_reply, req);
    free(f);
    script_sent(req, rc);
}

/* ---- LOCK.INFO ----------------------------------------------------------------- */

static bool info_apply(struct px_req *req, struct unlockop *u, const redisReply *r)
{
    const struct px_arg *name = &req->argv[1];
    struct px_hold *h = px_hold_find(req->cl->srv, name->p, name->len, u->owner, u->olen);
    struct buf *b = px_req_out(req);
    bool held;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3)
        return false;
    held = h && !h->lost && r->element[1]->integer > 0;
    px_reply_array(b, 12);
    px_reply_cstr(b, "locked");
    px_reply_int(b, r->element[0]->integer);
    px_reply_cstr(b, "hold_count");
    px_reply_int(b, r->element[1]->integer);
    px_reply_cstr(b, "ttl_ms");
    px_reply_int(b, r->element[2]->integer);
    px_reply_cstr(b, "owner");
    px_reply_bulk(b, u->owner, u->olen);
    px_reply_cstr(b, "watchdog");
    px_reply_int(b, held && h->watchdog);
    px_reply_cstr(b, "token");
    px_reply_int(b, held ? h->token : -1);
    return true;
}

static void lock_cmd_info(struct px_req *req)
{
    struct unlockop *u;
    const char *argv[2];
    size_t lens[2], base;

    u = unlockop_create(req, &plain_kind, info_apply, &base);
    if (!u)
        return;
    argv[0] = req->argv[1].p;
    lens[0] = req->argv[1].len;
    argv[1] = u->owner;
    lens[1] = u->olen;
    unlockop_sent(u, px_metrics_eval(req->cl->srv, req->cl->id, PX_SCRIPT_INFO, 1, 2, argv, lens,
                                     unlockop_on_reply, u));
}

static const struct px_cmd lock_cmds[] = {
    {"LOCK", 2, 9, lock_cmd_lock, px_lock_may_block, 1},
    {"TRYLOCK", 2, 7, lock_cmd_trylock, NULL, 1},
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
