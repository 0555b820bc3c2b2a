/* The lock family's acquire side: LOCK and TRYLOCK (Redisson's RLock and
 * RFencedLock), the plain and fenced kinds, the argument rules every lock
 * command shares, and the acquire op that every lock kind (plain, fenced,
 * fair in fairlock.c, read and write in rwlock.c) runs on the wait engine.
 * The release side is unlock.c.
 *
 * Acquire: one px__lockop per request, a struct px_wait_op underneath
 * (states, wake-ups, WAIT and re-polls: wait.c). An attempt is the kind's
 * acquire script; its reply is {1, count[, token]} when acquired (the hold
 * is recorded and the watchdog starts unless LEASE was given; the reply is
 * +OK, or the fencing token for FENCED) or {0, pttl} when not: the engine
 * waits on the kind's channel and re-polls at the holder's lease end (pttl;
 * for a holder without expiry, every watchdog timeout).
 *
 * Scripts: this file's set replaces the base acquire and unlock with
 * mode-checked ones (a name holding a read-write lock gets WRONGTYPE instead
 * of having a read count bumped or its hash deleted), and adds the fenced
 * acquire (INCR redisson_lock_token:{name}, as RedissonFencedLock), a
 * FORCEUNLOCK that wakes the waiters of whichever kind the lock is, and the
 * local hand-off's unlock-and-grant (unlock.c). */
#include "proxy/cmds/lock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spares.h"
#include "common/util.h"
#include "engine/fence.h"
#include "engine/hold.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define LOCK_CHANNEL_PREFIX "redisson_lock__channel:"

/* ---- scripts ---------------------------------------------------------------- */

/* The scripts (lua/lock_*.lua): a mode-checked acquire and unlock (a name
 * holding a read-write lock gets WRONGTYPE instead of having a read count
 * bumped or its hash deleted), the fenced acquire, FORCEUNLOCK of any
 * kind, and the local hand-off's unlock-and-grant. */
static const struct px_lua *const lock_scripts[PX__LK_COUNT] = {
    &px_lua_lock_acquire, &px_lua_lock_acquire_fenced, &px_lua_lock_unlock,
    &px_lua_lock_force,   &px_lua_lock_unlock_grant,
};

const struct px_script_set px_lock_script_set = {lock_scripts, PX__LK_COUNT, LK_SCRIPTS_LOCK};

unsigned px__lock_script(const struct lk_engine *eng, enum px__lock_script s)
{
    return eng->script_bases[LK_SCRIPTS_LOCK] + (unsigned)s;
}

/* ---- the plain and fenced kinds ---------------------------------------------- */

size_t px__lock_plain_channel(const struct px_acq *a, char *out, size_t cap)
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
    return px_script_eval(srv->engine, a->hint, px__lock_script(srv->engine, PX__LK_ACQUIRE), 1, 3,
                          argv, lens, cb, arg);
}

/* The floor (fence.h) is read at every attempt: one sent after a grant
 * was seen asks for a token above it. */
static int fenced_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb,
                          void *arg)
{
    char lease[24], token[PX_CHANNEL_MAX], floor_s[24];
    const char *argv[5] = {a->name, token, lease, a->owner, floor_s};
    size_t lens[5] = {a->nlen, 0, 0, a->olen, 0};
    uint64_t floor;
    int rc = px_fence_floor(srv->engine, a->name, a->nlen, &floor);

    if (rc < 0)
        return rc;
    lens[1] = px_channel_name(token, sizeof(token), "redisson_lock_token:", a->name, a->nlen);
    lens[2] = util_u64_to_str(a->lease_ms, lease);
    lens[4] = util_u64_to_str(floor, floor_s);
    return px_script_eval(srv->engine, a->hint, px__lock_script(srv->engine, PX__LK_FENCED), 2, 5,
                          argv, lens, cb, arg);
}

int px_lock_eval_unlock(struct px_server *srv, const struct px_acq *a, unsigned script,
                        px_lock_channel_fn *channel, pool_reply_fn *cb, void *arg)
{
    char lease[24], chan[PX_CHANNEL_MAX];
    const char *argv[4] = {a->name, chan, lease, a->owner};
    size_t lens[4] = {a->nlen, 0, 0, a->olen};

    lens[1] = channel(a, chan, sizeof(chan));
    lens[2] = util_u64_to_str(a->lease_ms, lease);
    return px_script_eval(srv->engine, a->hint, script, 2, 4, argv, lens, cb, arg);
}

static int plain_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return px_lock_eval_unlock(srv, a, px__lock_script(srv->engine, PX__LK_UNLOCK),
                               px__lock_plain_channel, cb, arg);
}

const struct px_lock_kind px__lock_plain_kind = {
    "", &px_hold_plain, plain_acquire, plain_unlock, px__lock_plain_channel, NULL, false, true,
};

static const struct px_lock_kind fenced_kind = {
    "", &px_hold_plain, fenced_acquire, plain_unlock, px__lock_plain_channel, NULL, false, true,
};

/* ---- argument parsing ----------------------------------------------------- */

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
    if (t->len == 0 || t->len > PX_OWNER_TOKEN_MAX || i < t->len || digits == t->len) {
        px_reply_error(px_req_out(req),
                       "ERR OWNER token must be 1-%u characters of "
                       "[A-Za-z0-9_.-] and not all digits",
                       PX_OWNER_TOKEN_MAX);
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
    } opts[] = {{"LEASE", PX__LOCK_OPT_LEASE},
                {"WAIT", PX__LOCK_OPT_WAIT},
                {"FENCED", PX__LOCK_OPT_FENCED},
                {"OWNER", 0}};
    size_t k;

    for (k = 0; k < LP_ARRAY_SIZE(opts); k++) {
        if ((opts[k].bit == 0 || (allow & opts[k].bit)) && px_args_is(opt, opts[k].name))
            return opts[k].bit ? opts[k].bit : PX__LOCK_OPT_OWNER;
    }
    return 0;
}

/* Parses the option at argv[*i] and advances *i past it. Writes an error
 * reply and returns -EINVAL on bad input. */
static int parse_option(struct px_req *req, int *i, unsigned allow, struct px__lock_args *a)
{
    const struct px_arg *opt = &req->argv[*i];
    unsigned kind = option_kind(opt, allow);
    int v = *i + 1;

    *i += kind == PX__LOCK_OPT_FENCED ? 1 : 2;
    if (kind == 0) {
        px_args_reply_option(req, opt);
        return -EINVAL;
    }
    if (kind == PX__LOCK_OPT_FENCED) {
        a->fenced = true;
        return 0;
    }
    if (v >= req->argc) {
        px_args_reply_no_value(req, opt->p, opt->len);
        return -EINVAL;
    }
    if (kind == PX__LOCK_OPT_LEASE)
        return px_args_parse_lease(req, v, &a->lease_ms);
    if (kind == PX__LOCK_OPT_WAIT)
        return px_args_parse_ms(req, v, "WAIT", 0, &a->wait_ms);
    return check_token(req, a->token = &req->argv[v]);
}

int px__lock_parse_args(struct px_req *req, unsigned allow, struct px__lock_args *a)
{
    int i = 2;

    memset(a, 0, sizeof(*a));
    a->name = &req->argv[1];
    a->lease_ms = -1;
    a->wait_ms = -1;
    if (px_name_check(req, "lock name", PX_NAME_PREFIXED) < 0)
        return -EINVAL;
    while (i < req->argc) {
        if (parse_option(req, &i, allow, a) < 0)
            return -EINVAL;
    }
    return 0;
}

size_t px__lock_owner(struct px_req *req, const struct px__lock_args *a,
                      const struct px_lock_kind *kind, char *out, size_t *base_len)
{
    const char *user = req->cl->user ? req->cl->user->name : NULL;
    size_t n = px_owner_format(req->cl->srv->engine, req->cl->id, user,
                               a->token ? a->token->p : NULL, a->token ? a->token->len : 0, out);
    size_t slen = strlen(kind->owner_suffix);

    *base_len = n;
    memcpy(out + n, kind->owner_suffix, slen + 1);
    return n + slen;
}

bool px__lock_reply_failed(struct px_req *req, const struct pool_reply *r, int err)
{
    if (err < 0)
        px_args_reply_upstream(req, err);
    else if (r->type == POOL_REPLY_ERROR)
        px_args_reply_redis_error(req, r);
    else
        return false;
    return true;
}

bool px__lock_script_sent(struct px_req *req, int rc)
{
    if (rc < 0) {
        px_args_reply_upstream(req, rc);
        px_req_done(req);
        return false;
    }
    px_client_get(req->cl);
    return true;
}

/* ---- the acquire op ------------------------------------------------------------ */

static struct px__lockop *lockop_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct px__lockop, wait);
}

static size_t lockop_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    const struct px__lockop *op = lockop_of(w);

    return op->kind->channel(&op->acq, out, cap);
}

/* Queue behind this proxy's waiters, unless the caller holds the lock: its
 * re-entry is granted at once, and waiting behind the others would wait
 * for itself (until WAIT runs out, or the re-poll at its own lease end). */
static bool lockop_queue_behind(const struct px_wait_op *w)
{
    const struct px__lockop *op = lockop_of(w);
    const struct px_hold *h;

    if (!op->kind->queue_behind)
        return false;
    h = px_hold_find(w->eng, op->acq.name, op->acq.nlen, op->acq.owner, op->acq.olen);
    return !h || !px_hold_is_held(h);
}

/* The pair's hold, for a new attempt: a RELEASING or DEAD one (the pair
 * was released since: a closed connection shared the OWNER token) is
 * replaced by the live one, so the attempt goes after that release. */
static struct px_hold *lockop_hold(struct px__lockop *op)
{
    struct px_hold *h = op->hold;
    const struct px_acq *a = &op->acq;

    if (h->state != PX_HOLD_RELEASING && h->state != PX_HOLD_DEAD)
        return h;
    h = px_hold_use(op->wait.eng, op->kind->hold, a->name, a->nlen, a->owner, a->olen, true);
    if (h) {
        px_hold_put(op->hold);
        op->hold = h;
    }
    return op->hold;
}

static int lockop_send(struct px_wait_op *w)
{
    struct px__lockop *op = lockop_of(w);
    struct px_hold *h = lockop_hold(op);
    int rc = px_hold_ready(h);

    if (rc < 0)
        return rc;
    px_hold_lapse_due(h);
    op->unvouched = h->state == PX_HOLD_HELD &&
                    (h->unchecked || sched_loop_now_ms(w->eng->loop) >= px_hold_vouched_until(h));
    op->unvouched_epoch = h->epoch;
    op->vouched_at_send = px_hold_vouched_until(h);
    px_hold_begin(h);
    rc = op->kind->acquire(px_server_of(w->eng), &op->acq, px_wait_on_reply, w);
    if (rc < 0) {
        px_hold_end(h);
        return rc;
    }
    if (op->acq.waiting)
        op->queued = true;
    return 0;
}

static void lockop_attempt_done(struct px_wait_op *w)
{
    px_hold_end(lockop_of(w)->hold);
}

/* When to re-poll a holder whose remaining lease is pttl: at its end (PTTL
 * is 0 during a lease's last millisecond, so never sooner than 1 ms); for a
 * key without expiry (-1), every watchdog timeout as a safety net. */
static uint64_t repoll_ms(const struct px_server *srv, int64_t pttl)
{
    if (pttl >= 0)
        return (uint64_t)LP_MAX(pttl, 1);
    return pttl == -1 ? srv->opts.watchdog_ms : 1;
}

/* The re-entry of a hold that was lost before it: the client is told,
 * once, and holds nothing (its next acquire is a fresh hold). */
static void lockop_reply_lost(struct px_req *req, const struct px_acq *a)
{
    px_reply_error(px_req_out(req),
                   "LOCKLOST the hold of '%.*s' this owner had was lost (expired or taken) "
                   "before this request; nothing is held now (acquire again for a fresh hold)",
                   (int)LP_MIN(a->nlen, 200u), a->name);
}

/* An acquire answer (a script's, or a local hand-off's) for op. */
static enum px_wait_res lockop_acq(struct px_wait_op *w, const struct px_shape_acq *a,
                                   uint64_t *repoll)
{
    struct px__lockop *op = lockop_of(w);

    if (!a->granted) {
        *repoll = repoll_ms(px_server_of(w->eng), a->pttl);
        return PX_WAIT_CONTENDED;
    }
    op->queued = false; /* the acquire took the op out of any queue */
    op->count = a->count;
    op->token = a->token;
    if (a->token >= 0)
        px_fence_note(w->eng, op->acq.name, op->acq.nlen, a->token);
    if (px_hold_lost_before(op->hold, (uint64_t)a->count)) {
        /* Redis made a fresh acquisition: the hold this re-entry was to
         * add to is gone. Told, and this one given back. */
        px_hold_report_lost(op->hold, true, sched_loop_now_ms(w->eng->loop) + op->acq.lease_ms);
        lockop_reply_lost(px_wait_req(w), &op->acq);
        return PX_WAIT_FINISHED;
    }
    if (op->hold->state == PX_HOLD_RELEASING || op->hold->state == PX_HOLD_DEAD) {
        /* The pair's release, sent after this attempt, takes it back: the
         * next attempt goes after the release. */
        *repoll = 1;
        return PX_WAIT_CONTENDED;
    }
    return PX_WAIT_GRANTED;
}

static enum px_wait_res lockop_reply(struct px_wait_op *w, const struct pool_reply *r,
                                     uint64_t *repoll)
{
    struct px_shape_acq a;

    if (!px_shape_acquire(r, &a)) {
        px_args_reply_upstream(px_wait_req(w), -EPROTO);
        return PX_WAIT_FINISHED;
    }
    return lockop_acq(w, &a, repoll);
}

/* A local hand-off's grant (unlock.c); never a quorum. */
static enum px_wait_res lockop_outcome(struct px_wait_op *w, const struct px_wait_outcome *o,
                                       uint64_t *repoll)
{
    return lockop_acq(w, &o->acq, repoll);
}

static void lockop_granted(struct px_wait_op *w)
{
    struct px__lockop *op = lockop_of(w);
    struct px_req *req = px_wait_req(w);

    w->eng->stats.acquired++;
    px_metrics_observe_wait(px_server_of(w->eng), req);
    px_hold_granted(op->hold, op->kind->hold, &req->cl->caller, (uint64_t)op->count,
                    op->acq.lease_ms, op->watchdog, w->sent_ms);
    if (op->token >= 0)
        op->hold->token = op->token;
    if (op->fenced)
        px_reply_int(px_req_out(req), op->token);
    else
        px_reply_status(px_req_out(req), "OK");
}

/* A grant nobody may use, or an attempt whose reply was lost: the pair's
 * hold settles back to the count clients were told (hold.h), which undoes
 * exactly this acquisition if Redis applied it. A connection that closed
 * meanwhile: the same under --on-disconnect release (its holds are being
 * released anyway), nothing under expire (left to expire, as its holds).
 * Worth doing until the lease ends: a grant that came back ran before its
 * reply, so its lease ends by now + lease; a lost reply says nothing about
 * when Redis ran it (maybe not yet: a stalled Redis runs it when it wakes,
 * before it answers anything sent after), so that one is settled whenever
 * Redis answers. */
static void lockop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct px__lockop *op = lockop_of(w);
    uint64_t now = sched_loop_now_ms(w->eng->loop);

    if (why == PX_UNDO_GONE && w->eng->cfg.on_disc != PX_DISCONNECT_RELEASE)
        return;
    /* A re-entry sent once the hold's lease could no longer be vouched for
     * (its renewals did not come back in time) may have been a fresh
     * acquisition of a name Redis had let go: kept by the settle as the
     * old hold, the holder would never learn of the gap. Lost (told, and
     * given back), as an UNLOCK sent then would be (px_hold_unlock_failed).
     * The same for one sent before the check after a topology change
     * answered: the hold may have gone with the old master's data. Judged
     * as at the send: a renewal or check answered since may have found
     * the very grant this re-entry made ("held"), and is no proof; a grant
     * or an unlock answered since (the epoch moved) is. So is a re-entry
     * whose outcome is unknown once the lease vouched for at its send
     * has ended: it may still sit in a cut connection and run after the
     * lease lapsed and another client held and released the name, then
     * take it afresh, and an UNLOCK would release that grant with :1. */
    if (op->hold->state == PX_HOLD_HELD &&
        ((op->unvouched && op->unvouched_epoch == op->hold->epoch) ||
         w->sent_ms >= px_hold_vouched_until(op->hold) ||
         (why == PX_UNDO_UNKNOWN && op->unvouched_epoch == op->hold->epoch &&
          now >= op->vouched_at_send)))
        px_hold_mark_lost(op->hold);
    else if (op->hold->state == PX_HOLD_HELD)
        px_hold_lower_vouch(op->hold, w->sent_ms + op->acq.lease_ms);
    px_hold_settle(op->hold, why == PX_UNDO_UNKNOWN ? PX_JOB_NO_END : now + op->acq.lease_ms);
}

static void lockop_give_up(struct px_wait_op *w)
{
    struct px__lockop *op = lockop_of(w);

    if (op->queued && op->kind->queue_wait)
        px_hold_dequeue(op->hold, op->kind->queue_wait(&op->acq));
}

/* Freed lock ops kept for the next acquires (common/spares.h). */
static _Thread_local struct spares lockop_spares;

static struct px__lockop *lockop_alloc(void)
{
    struct px__lockop *op = spares_get(&lockop_spares);

    if (!op && !(op = malloc(sizeof(*op))))
        return NULL;
    memset(op, 0, sizeof(*op));
    return op;
}

static void lockop_free(struct px__lockop *op)
{
    if (!spares_put(&lockop_spares, op))
        free(op);
}

static void lockop_destroy(struct px_wait_op *w)
{
    struct px__lockop *op = lockop_of(w);

    px_hold_put(op->hold);
    lockop_free(op);
}

const struct px_wait_kind px__lock_wait_kind = {
    .name = "lock",
    .wake = PX_WAKE_LOCK,
    .stat = PX_WAIT_STAT_LOCK,
    .channel = lockop_channel,
    .queue_behind = lockop_queue_behind,
    .send = lockop_send,
    .attempt_done = lockop_attempt_done,
    .reply = lockop_reply,
    .outcome = lockop_outcome,
    .granted = lockop_granted,
    .undo = lockop_undo,
    .give_up = lockop_give_up,
    .destroy = lockop_destroy,
};

/* ---- acquire commands ------------------------------------------------------------ */

static void acquire_start(struct px_req *req, const struct px_lock_kind *kind, unsigned allow)
{
    struct px_server *srv = req->cl->srv;
    struct px__lock_args a;
    struct px__lockop *op;

    if (px__lock_parse_args(req, allow, &a) < 0)
        return px_req_done(req);
    op = lockop_alloc();
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->kind = a.fenced ? &fenced_kind : kind;
    op->fenced = a.fenced;
    px_cmd_wait_init(&op->wait, &px__lock_wait_kind, req,
                     (allow & PX__LOCK_OPT_WAIT) ? a.wait_ms : 0);
    op->wait.member.exclusive = op->kind->exclusive;
    op->acq.name = a.name->p;
    op->acq.nlen = a.name->len;
    op->acq.owner = op->owner;
    op->acq.olen = px__lock_owner(req, &a, op->kind, op->owner, &op->acq.base_olen);
    op->acq.wait_ms = a.wait_ms;
    op->acq.waiting = px_wait_may_wait(&op->wait);
    op->acq.hint = px_route_hint(a.name->p, a.name->len);
    op->watchdog = a.lease_ms < 0;
    op->acq.lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)a.lease_ms;
    op->wait.lease_ms = op->acq.lease_ms; /* a grant with too little of it left is refused */
    op->hold = px_hold_use_hinted(srv->engine, op->kind->hold, a.name->p, a.name->len, op->acq.hint,
                                  op->owner, op->acq.olen, true);
    if (!op->hold) {
        lockop_free(op);
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    px_hold_lapse_due(op->hold);
    if (px_hold_lost_before(op->hold, 0)) { /* a tombstone its holder was not told of */
        px_hold_report_lost(op->hold, false, 0);
        lockop_reply_lost(req, &op->acq);
        px_hold_put(op->hold);
        lockop_free(op);
        return px_req_done(req);
    }
    px_cmd_wait_start(&op->wait);
}

void px_lock_cmd_acquire(struct px_req *req, const struct px_lock_kind *kind, bool trylock)
{
    acquire_start(req, kind, trylock ? PX__LOCK_OPT_LEASE : PX__LOCK_OPT_LEASE | PX__LOCK_OPT_WAIT);
}

static void lock_cmd_lock(struct px_req *req)
{
    acquire_start(req, &px__lock_plain_kind,
                  PX__LOCK_OPT_LEASE | PX__LOCK_OPT_WAIT | PX__LOCK_OPT_FENCED);
}

static void lock_cmd_trylock(struct px_req *req)
{
    acquire_start(req, &px__lock_plain_kind, PX__LOCK_OPT_LEASE | PX__LOCK_OPT_FENCED);
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

static const struct px_cmd lock_cmds[] = {
    {"LOCK", 2, 9, lock_cmd_lock, px_lock_may_block, 1},
    {"TRYLOCK", 2, 7, lock_cmd_trylock, NULL, 1},
    {"UNLOCK", 2, 4, px__lock_cmd_unlock, NULL, 1},
    {"FORCEUNLOCK", 2, 2, px__lock_cmd_forceunlock, NULL, 1},
    {"LOCK.INFO", 2, 4, px__lock_cmd_info, NULL, 1},
    {"LOCK.LIST", 1, 2, px__lock_cmd_list, NULL, 0},
};
const struct px_cmd_set px_lock_cmd_set = {lock_cmds, LP_ARRAY_SIZE(lock_cmds)};
