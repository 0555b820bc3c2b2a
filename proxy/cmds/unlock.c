/* The lock family's release side: UNLOCK of every lock kind (and its
 * NOTOWNER / LOCKLOST replies), the local hand-off, FORCEUNLOCK and
 * LOCK.INFO. The acquire side is lock.c.
 *
 * Local hand-off: an UNLOCK that ends the caller's last plain hold, while
 * the longest-joined lock op of the name's set is an asleep plain LOCK of
 * this proxy, sends one unlock-and-grant script instead of the unlock, and
 * puts that op in GRANTING (wait.h) as if it had sent an attempt: the
 * script's reply answers both requests, so every rule of the wait engine
 * (wake-ups in flight, validity, a connection that closed meanwhile) holds
 * for the grantee. At most LK_GRANTS_IN_ROW hand-offs in a row skip the
 * PUBLISH; then an ordinary unlock lets waiters elsewhere (Redisson
 * clients, other proxies) have their chance. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/spares.h"
#include "common/util.h"
#include "engine/hold.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "engine/waitset.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/lock.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define LOCK_CHANNEL_PREFIX "redisson_lock__channel:"

/* ---- unlock ------------------------------------------------------------------ */

struct unlockop;

/* Interprets a non-error script reply r of u's command and writes the
 * reply; false when r has an unexpected shape (nothing written). */
typedef bool unlock_apply_fn(struct px_req *req, struct unlockop *u, const struct pool_reply *r);

/* An UNLOCK or LOCK.INFO whose script is in flight (req->op). */
struct unlockop {
    struct px_req *req;       /* borrowed */
    unlock_apply_fn *apply;   /* borrowed: static; formats the reply */
    struct px_hold *hold;     /* reference: the pair's hold when an UNLOCK was sent (its
                                 request is counted in flight), or NULL */
    struct px__lockop *next;  /* borrowed: the waiter a hand-off goes to, or NULL */
    uint64_t lease_ms;        /* the lease the unlock sets if the name stays held */
    uint64_t sent_ms;         /* monotonic ms the script was sent */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owned: owner field string */
};

/* The reply to an UNLOCK that found nothing held: LOCKLOST when the
 * client had been told of a hold (told), else NOTOWNER. */
static void unlock_reply_not_held(struct px_req *req, bool told)
{
    const struct px_arg *name = &req->argv[1];

    if (told) {
        px_reply_error(px_req_out(req),
                       "LOCKLOST lease on '%.*s' was lost (expired or taken) "
                       "before UNLOCK; it was not held any more",
                       (int)LP_MIN(name->len, 200u), name->p);
    } else {
        px_reply_error(px_req_out(req), "NOTOWNER lock '%.*s' is not held by this owner",
                       (int)LP_MIN(name->len, 200u), name->p);
    }
}

static void unlock_nil(struct px_req *req, struct unlockop *u)
{
    unlock_reply_not_held(req, u->hold && px_hold_not_held(u->hold, &req->cl->caller));
}

/* The hold follows the reply first (px_hold_end() after it, so a settle
 * that became due keeps the count this reply left). */
static bool unlock_apply(struct px_req *req, struct unlockop *u, const struct pool_reply *r)
{
    struct px_server *srv = req->cl->srv;
    struct px_hold *h = u->hold;

    if (r->type == POOL_REPLY_NIL) {
        unlock_nil(req, u);
        return true;
    }
    if (r->type != POOL_REPLY_INTEGER)
        return false;
    if (h && h->state == PX_HOLD_LOST) {
        /* The hold the client was told of was found lost (a re-entry of
         * unknown outcome outlived its lease, lock.c's lockop_undo); what
         * Redis has is what it granted after the loss (such re-entries,
         * run late). :1 released it all the same; :0 counted one down, and
         * any rest is given back. Either way the work under the lock was
         * not protected: LOCKLOST, as for a nil. */
        unlock_reply_not_held(req, px_hold_unlock_lost(h, &req->cl->caller, u->lease_ms));
        return true;
    }
    if (r->integer == 1 || (u->next && r->integer == 2)) { /* 2: released to u->next */
        srv->engine->stats.released++;
        if (h)
            px_hold_released(h);
        px_reply_int(px_req_out(req), 1);
        return true;
    }
    if (h && px_hold_unlocked_one(h, &req->cl->caller, u->sent_ms)) {
        px_reply_int(px_req_out(req), 1); /* the rest is released by the proxy */
        return true;
    }
    px_reply_int(px_req_out(req), r->integer);
    return true;
}

/* Freed unlock ops kept for the next unlocks (common/spares.h). */
static _Thread_local struct spares unlockop_spares;

static void unlockop_free(struct unlockop *u)
{
    if (u->hold && u->apply == unlock_apply)
        px_hold_end(u->hold);
    px_hold_put(u->hold);
    if (!spares_put(&unlockop_spares, u))
        free(u);
}

/* An UNLOCK of u's hold that Redis did not answer (err: its reply was
 * lost, or it could not be sent): the proxy carries the release out
 * (hold.h, px_hold_unlock_failed) and answers as the release will end;
 * false when the hold is not HELD (the reply is the upstream error). */
static bool unlock_in_hand(struct px_req *req, struct unlockop *u)
{
    const struct px_arg *name = &req->argv[1];

    if (!u->hold || u->apply != unlock_apply)
        return false;
    switch (px_hold_unlock_failed(u->hold, &req->cl->caller, u->sent_ms)) {
    case PX_UNLOCK_NOT_HELD:
        return false;
    case PX_UNLOCK_KEPT:
        px_reply_int(px_req_out(req), 0);
        return true;
    case PX_UNLOCK_RELEASED:
        px_reply_int(px_req_out(req), 1);
        return true;
    case PX_UNLOCK_UNVOUCHED:
        break;
    }
    px_reply_error(px_req_out(req),
                   "LOCKLOST lease on '%.*s' could not be renewed in time before UNLOCK (Redis "
                   "unreachable past its end): the work under it was not protected",
                   (int)LP_MIN(name->len, 200u), name->p);
    return true;
}

static void unlockop_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct unlockop *u = arg;
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    if (err < 0 && unlock_in_hand(req, u)) {
        /* answered; the release is the proxy's now */
    } else {
        if (err < 0 && u->hold && u->apply == unlock_apply)
            px_hold_unlock_unknown(u->hold); /* did it run? the settle finds out */
        if (!px__lock_reply_failed(req, r, err) && !u->apply(req, u, r))
            px_args_reply_upstream(req, -EPROTO);
    }
    req->op = NULL;
    unlockop_free(u);
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
    struct px__lock_args a;

    if (px__lock_parse_args(req, 0, &a) < 0) {
        px_req_done(req);
        return NULL;
    }
    u = spares_get(&unlockop_spares);
    if (!u && !(u = malloc(sizeof(*u)))) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        px_req_done(req);
        return NULL;
    }
    u->req = req;
    u->apply = apply;
    u->hold = NULL;
    u->next = NULL;
    u->lease_ms = 0;
    u->sent_ms = sched_loop_now_ms(req->cl->srv->loop);
    u->olen = px__lock_owner(req, &a, kind, u->owner, base_olen);
    return u;
}

/* Ends the start of u's command, whose script send returned rc. An
 * UNLOCK that could not be sent is carried out by the proxy, as one whose
 * reply was lost. */
static void unlockop_sent(struct unlockop *u, int rc)
{
    struct px_req *req = u->req;

    if (rc < 0 && unlock_in_hand(req, u)) {
        unlockop_free(u);
        px_req_done(req);
        return;
    }
    if (px__lock_script_sent(req, rc)) {
        req->op = u;
        return;
    }
    unlockop_free(u);
}

/* ---- local hand-off ------------------------------------------------------- */

/* Hand-offs in a row without a PUBLISH before one ordinary unlock: waiters
 * outside this proxy (Redisson clients, other proxies) learn of a release
 * only from a message, so every so often they get their chance. */
#define LK_GRANTS_IN_ROW 16u

/* Only a plain LOCK of a live connection takes a hand-off (a fenced one
 * needs its token: the ordinary unlock and wake-up serve it). */
static bool grant_eligible(const struct px_wait_op *w)
{
    const struct px__lockop *op = LP_CONTAINER_OF(w, struct px__lockop, wait);

    return op->kind == &px__lock_plain_kind && !px_wait_req(w)->cl->closing;
}

/* The waiter an UNLOCK of a->name that ends the caller's hold hands the
 * lock to: the longest-joined lock op of the name's set that is asleep, if
 * eligible. NULL: unlock as usual. */
static struct px__lockop *grant_candidate(struct px_server *srv, const struct px_acq *a)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen = px__lock_plain_channel(a, chan, sizeof(chan));
    struct px_waitset *set = px_waitset_find(srv->engine, chan, chlen);
    struct px_wait_op *w;

    if (!set || set->local_grants >= LK_GRANTS_IN_ROW) {
        if (set)
            set->local_grants = 0;
        return NULL;
    }
    w = px_wait_grantee(set, &px__lock_wait_kind, grant_eligible);
    if (!w)
        return NULL;
    set->local_grants++;
    return LP_CONTAINER_OF(w, struct px__lockop, wait);
}

static void grant_on_reply(void *arg, const struct pool_result *res);

/* Unlock of the caller's hold (a) and grant to u->next, in one script. */
static int grant_send(struct px_server *srv, const struct px_acq *a, struct unlockop *u)
{
    const struct px_acq *b = &u->next->acq;
    char lease[24], next_lease[24];
    const char *argv[5] = {a->name, lease, a->owner, next_lease, b->owner};
    size_t lens[5] = {a->nlen, 0, a->olen, 0, b->olen};

    lens[1] = util_u64_to_str(a->lease_ms, lease);
    lens[3] = util_u64_to_str(b->lease_ms, next_lease);
    return px_script_eval(srv->engine, a->hint, px__lock_script(srv->engine, PX__LK_GRANT), 1, 5,
                          argv, lens, grant_on_reply, u);
}

/* One reply, two answers: the UNLOCK gets :1 when the lock was handed
 * over (unlock_apply reads :2 so), else the reply as it is; the waiter an
 * acquire outcome: granted (count 1), still held by the caller (0: its
 * lease to wait), not held by it (nil: pttl 0, an attempt of its own in a
 * millisecond), or the error. Both go with res, whose replication (WAIT)
 * was the one script's. */
static void grant_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    struct unlockop *u = arg;
    struct px__lockop *next = u->next;
    bool as_is = res->err < 0 || r->type == POOL_REPLY_ERROR;
    bool integer = !as_is && r->type == POOL_REPLY_INTEGER;
    struct px_wait_outcome o = {.acq = {.token = -1}};

    o.acq.granted = integer && r->integer == 2;
    o.acq.count = o.acq.granted ? 1 : 0;
    o.acq.pttl = integer && !o.acq.granted ? (int64_t)u->lease_ms : 0;
    unlockop_on_reply(u, res);
    if (as_is)
        px_wait_on_reply(&next->wait, res);
    else
        px_wait_on_outcome(&next->wait, res, &o);
}

/* An UNLOCK of a hold found lost (a tombstone) is answered LOCKLOST at
 * once, whatever Redis could answer (unlock_apply: nil, :1 and :0 of a
 * lost hold all answer so), and even while Redis does not answer; what
 * Redis may still count of the pair (a grant made after the loss) is
 * given back by a settle, behind any request about it in flight. */
static void unlock_lost(struct px_req *req, struct unlockop *u)
{
    unlock_reply_not_held(req, px_hold_unlock_lost(u->hold, &req->cl->caller, u->lease_ms));
    u->apply = NULL; /* not sent: the op owes the hold no px_hold_end */
    unlockop_free(u);
    px_req_done(req);
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
    /* The reply acts on this hold (no second lookup); Redis runs this
     * unlock after every request about the pair sent before it. */
    acq.hint = px_route_hint(name->p, name->len);
    h = u->hold = px_hold_use_hinted(srv->engine, kind->hold, name->p, name->len, acq.hint,
                                     u->owner, u->olen, false);
    acq.name = name->p;
    acq.nlen = name->len;
    acq.owner = u->owner;
    acq.olen = u->olen;
    acq.lease_ms = h && px_hold_is_held(h) ? h->lease_ms : srv->opts.watchdog_ms;
    acq.wait_ms = -1;
    acq.waiting = false;
    u->lease_ms = acq.lease_ms;
    if (h && h->state == PX_HOLD_LOST)
        return unlock_lost(req, u);
    rc = h ? px_hold_ready(h) : 0;
    if (rc < 0) {
        if (unlock_in_hand(req, u)) {
            u->apply = NULL; /* not sent: the op owes the hold no px_hold_end */
            unlockop_free(u);
            return px_req_done(req);
        }
        px_hold_put(h); /* not sent: the op owes the hold nothing */
        u->hold = NULL;
        return unlockop_sent(u, rc);
    }
    if (h)
        px_hold_begin(h);
    if (kind == &px__lock_plain_kind && h && px_hold_is_held(h) && h->count == 1 &&
        srv->engine->locks.count > 0)
        u->next = grant_candidate(srv, &acq);
    if (!u->next)
        return unlockop_sent(u, kind->unlock(srv, &acq, unlockop_on_reply, u));
    px_hold_begin(u->next->hold);
    rc = grant_send(srv, &acq, u);
    if (rc == 0)
        px_wait_grant_begin(&u->next->wait, sched_loop_now_ms(srv->loop));
    else
        px_hold_end(u->next->hold);
    unlockop_sent(u, rc);
}

void px__lock_cmd_unlock(struct px_req *req)
{
    px_lock_cmd_release(req, &px__lock_plain_kind);
}

/* ---- FORCEUNLOCK --------------------------------------------------------------- */

static void force_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct px_req *req = arg;
    struct px_client *cl = req->cl;

    if (!px__lock_reply_failed(req, r, err))
        px_reply_int(px_req_out(req), r->type == POOL_REPLY_INTEGER ? r->integer : 0);
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

void px__lock_cmd_forceunlock(struct px_req *req)
{
    struct force_args *f;
    struct px__lock_args a;
    int rc;

    if (px__lock_parse_args(req, 0, &a) < 0)
        return px_req_done(req);
    f = malloc(sizeof(*f));
    if (!f) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    force_args_fill(f, a.name);
    rc = px_script_eval(req->cl->srv->engine, px_route_hint(f->argv[0], f->lens[0]),
                        px__lock_script(req->cl->srv->engine, PX__LK_FORCE), 5, 7, f->argv, f->lens,
                        force_on_reply, req);
    free(f);
    px__lock_script_sent(req, rc);
}

/* ---- LOCK.INFO ----------------------------------------------------------------- */

/* The caller's hold of name that this proxy confirmed: a plain, fair or
 * read hold (owner), else a write hold (owner + ":write"), or NULL. */
static struct px_hold *info_hold(struct px_req *req, const struct unlockop *u)
{
    const struct px_arg *name = &req->argv[1];
    char wowner[PX_OWNER_MAX + 8];
    struct px_hold *h = px_hold_find(req->cl->srv->engine, name->p, name->len, u->owner, u->olen);

    if (h && px_hold_is_held(h))
        return h;
    memcpy(wowner, u->owner, u->olen);
    memcpy(wowner + u->olen, ":write", 6);
    h = px_hold_find(req->cl->srv->engine, name->p, name->len, wowner, u->olen + 6);
    return h && px_hold_is_held(h) ? h : NULL;
}

static bool info_apply(struct px_req *req, struct unlockop *u, const struct pool_reply *r)
{
    struct px_hold *h = info_hold(req, u);
    struct buf *b = px_req_out(req);
    long long v[3];
    size_t n;
    bool held;

    if (!px_shape_ints(r, 3, 3, v, &n))
        return false;
    held = h && v[1] > 0;
    px_reply_map(b, req->cl->proto, 6);
    px_reply_cstr(b, "locked");
    px_reply_int(b, v[0]);
    px_reply_cstr(b, "hold_count");
    px_reply_int(b, v[1]);
    px_reply_cstr(b, "ttl_ms");
    px_reply_int(b, v[2]);
    px_reply_cstr(b, "owner");
    px_reply_bulk(b, u->owner, u->olen);
    px_reply_cstr(b, "watchdog");
    px_reply_int(b, held && h->watchdog);
    px_reply_cstr(b, "token");
    px_reply_int(b, held ? h->token : -1);
    return true;
}

void px__lock_cmd_info(struct px_req *req)
{
    struct unlockop *u;
    const char *argv[2];
    size_t lens[2], base;

    u = unlockop_create(req, &px__lock_plain_kind, info_apply, &base);
    if (!u)
        return;
    argv[0] = req->argv[1].p;
    lens[0] = req->argv[1].len;
    argv[1] = u->owner;
    lens[1] = u->olen;
    unlockop_sent(u, px_script_eval(req->cl->srv->engine, px_route_hint(argv[0], lens[0]),
                                    PX_SCRIPT_INFO, 1, 2, argv, lens, unlockop_on_reply, u));
}
