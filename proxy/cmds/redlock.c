/* REDLOCK name [LEASE ms] [WAIT ms] and REDUNLOCK name; see redlock.h.
 *
 * DESIGN
 *
 * Masters: one pool per --redlock-upstream URL (single nodes, independent:
 * not replicas of each other), created at start with the proxy's script
 * table, so a script id means the same script on every master. Majority:
 * N/2 + 1.
 *
 * Acquire: an op on the wait engine (wait.h) whose attempt is RLock's
 * acquire script (lock.c's, Redisson's layout: the same key and owner
 * field on every master) sent to every master at once; the per-master
 * replies fold into one outcome:
 * - granted on a majority: the engine's validity check (the lease, minus
 *   the time since the attempt was sent, minus the drift allowance
 *   lease/100 + 2 ms) decides; a valid grant answers the remaining
 *   validity in ms; a late one is given back (undo) and retried within
 *   WAIT;
 * - otherwise what this attempt took, or may have taken (a lost reply), is
 *   given back on every such master (the settle script, to the count
 *   confirmed before), and then: a majority answered "held" -> contended
 *   (the engine waits and re-polls at the shortest PTTL); fewer than a
 *   majority answered at all -> an UPSTREAM error at once (no false grant,
 *   no wait for masters that are down).
 * A give-back goes on the connection of the acquire (the name's route
 * hint), so each master runs it after the acquire it undoes; one whose
 * reply is lost is sent again with back-off until that master answers or
 * the lease it gives back has ended, and never after a later request
 * about the same (name, owner) (redlock_giveback.c).
 *
 * Waiting: through the shared engine. The waitset of a REDLOCK is keyed
 * "lockproxy_redlock:" + the lock's channel (so it never mixes with LOCK
 * waiters of the same name on --upstream; its own subscription there hears
 * nothing), and this file subscribes the lock's channel on every master
 * (one subscription per channel and master, counted by the ops using it)
 * and delivers each master's messages into that set
 * (px_waitset_deliver()): a release on any master wakes the waiters.
 *
 * Holds: one record per (name, owner) that this proxy granted, with the
 * confirmed count, the lease and a timer: without LEASE the watchdog
 * renews every lease/3 on every master (the batched renew script, one
 * key), and a renewal that reaches fewer than a majority is a lost lease:
 * the record becomes a tombstone (REDUNLOCK answers LOCKLOST), counted
 * (leases_lost) and logged, and the owner is given back on every master
 * (masters that kept its field would count a re-take as a re-entry). With
 * LEASE, the lease end makes the tombstone (given back the same way).
 * REDUNLOCK gives back what masters still hold after it, and settles the
 * masters whose reply it lost to the count left.
 * A closed connection's records are released on every master at once
 * (--on-disconnect release) through a claim (locks.h).
 *
 * Who frees what: the table owns its records; ops and renewals in flight
 * hold references (refs); a record out of the table with no reference is
 * freed. Channel subscriptions are freed with their last op. */
#include "proxy/cmds/redlock.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/util.h"
#include "engine/redlock.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- the acquire op ------------------------------------------------------------ */

/* The callback argument of one master's reply. */
struct rl_call {
    void *ctx;  /* borrowed: the op (struct rl_op or struct rl_unlock) */
    unsigned i; /* master */
};

struct rl_op;

/* One attempt: the acquire sent to every master. It decides as soon as a
 * majority granted, or can no longer grant, without waiting for a slow
 * master; it outlives its op until every master answered, so a grant that
 * comes after the decision is given back unless the op kept the grant. */
struct rl_attempt {
    struct rl_op *op;                     /* borrowed until decided, then NULL */
    struct px_redlock *rl;                /* borrowed */
    struct rl_call calls[PX_REDLOCK_MAX]; /* reply arguments */
    unsigned pending;                     /* replies outstanding */
    unsigned took;                        /* masters (bits) that granted */
    unsigned unknown;                     /* masters (bits) whose reply was lost */
    unsigned held;                        /* masters that answered "held by another" */
    bool decided;                         /* the outcome went to the engine */
    bool kept;                            /* the op used the grant (late grants stay too) */
    int64_t count;                        /* the highest count granted */
    int64_t min_pttl;                     /* the shortest PTTL of a holder, or -3 */
    uint64_t confirmed;                   /* the count to settle back to */
    uint64_t lease_ms;                    /* the lease asked (how long a grant lives) */
    size_t nlen, olen;                    /* name and owner lengths */
    char *owner;                          /* borrowed: into key */
    char key[];                           /* owned: name NUL owner NUL */
};

struct rl_op {
    struct px_wait_op wait;     /* the engine's part */
    struct px_redlock *rl;      /* borrowed */
    struct rl_chan *chan;       /* reference: the masters' subscriptions, or NULL */
    struct rl_attempt *attempt; /* the attempt being decided (during its decision), or NULL */
    int64_t count;              /* the count granted */
    uint64_t confirmed;         /* the count confirmed before this op */
    bool watchdog;              /* no LEASE */
    uint64_t lease_ms;          /* lease asked on every master */
    const char *name;           /* borrowed: request argument */
    size_t nlen;                /* name length */
    size_t olen;                /* owner length */
    char owner[PX_OWNER_MAX];   /* owned: owner field */
};

static struct rl_op *rl_op_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct rl_op, wait);
}

static size_t rl_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    const struct rl_op *op = rl_op_of(w);
    size_t n;

    if (cap <= RL_PREFIX_LEN)
        return 0;
    memcpy(out, RL_SET_PREFIX, RL_PREFIX_LEN);
    n = px__rl_lock_channel(op->name, op->nlen, out + RL_PREFIX_LEN, cap - RL_PREFIX_LEN);
    return n ? RL_PREFIX_LEN + n : 0;
}

static unsigned popcount(unsigned v)
{
    return (unsigned)__builtin_popcount(v);
}

/* Gives back what att took (or may have) and the op did not keep. */
static void rl_attempt_give_back(struct rl_attempt *att)
{
    unsigned mask = att->took | att->unknown;

    if (att->kept || mask == 0)
        return;
    px__rl_settle(att->rl, att->key, att->nlen, att->owner, att->olen, att->confirmed, mask,
                  att->lease_ms);
    att->took = att->unknown = 0;
}

/* Decides att once a majority granted, or cannot any more: one outcome
 * for the engine, granted (count), held (pttl), or no quorum: "fewer
 * than a majority answered" (see the design block). */
static void rl_decide(struct rl_attempt *att)
{
    struct px_redlock *rl = att->rl;
    struct rl_op *op = att->op;
    unsigned nok = popcount(att->took);
    struct pool_result res = {.acks = -1}; /* no request of its own: no error, no WAIT */
    struct px_wait_outcome o = {.acq = {.token = -1}};

    att->decided = true;
    op->attempt = att;
    if (nok >= rl->majority) {
        o.acq.granted = true;
        o.acq.count = att->count;
    } else {
        rl_attempt_give_back(att);
        if (nok + att->held + att->pending < rl->majority) {
            rl->quorum_refusals++;
            o.no_quorum = true;
        }
        o.acq.pttl = att->min_pttl;
    }
    px_wait_on_outcome(&op->wait, &res, &o); /* op may be freed on return */
    att->op = NULL;
}

static void rl_on_master(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct rl_call *c = arg;
    struct rl_attempt *att = c->ctx;
    unsigned nok, majority = att->rl->majority;
    struct px_shape_acq a;

    att->pending--;
    if (err < 0) {
        att->unknown |= 1u << c->i;
    } else if (px_shape_acquire(r, &a)) {
        if (a.granted) {
            att->took |= 1u << c->i;
            att->count = LP_MAX(att->count, a.count);
        } else {
            int64_t pttl = a.pttl;

            att->held++;
            if (att->min_pttl == -3 || (pttl >= 0 && (att->min_pttl < 0 || pttl < att->min_pttl)))
                att->min_pttl = pttl;
        }
    }
    /* an error reply (WRONGTYPE...) counts as a master that did not answer */
    nok = popcount(att->took);
    if (!att->decided && (nok >= majority || nok + att->pending < majority))
        rl_decide(att);
    else if (att->decided)
        rl_attempt_give_back(att); /* a late grant the op did not keep */
    if (att->pending == 0)
        free(att);
}

static int rl_send(struct px_wait_op *w)
{
    struct rl_op *op = rl_op_of(w);
    struct px_redlock *rl = op->rl;
    struct rl_attempt *att = calloc(1, sizeof(*att) + op->nlen + op->olen + 2);
    char lease[24];
    const char *argv[3] = {op->name, lease, op->owner};
    size_t lens[3] = {op->nlen, 0, op->olen};
    unsigned i;

    if (!att)
        return -ENOMEM;
    att->op = op;
    att->rl = rl;
    att->min_pttl = -3;
    att->confirmed = op->confirmed;
    att->lease_ms = op->lease_ms;
    att->nlen = op->nlen;
    att->olen = op->olen;
    memcpy(att->key, op->name, op->nlen);
    att->owner = att->key + op->nlen + 1;
    memcpy(att->owner, op->owner, op->olen);
    lens[1] = util_u64_to_str(op->lease_ms, lease);
    for (i = 0; i < rl->n; i++) {
        att->calls[i].ctx = att;
        att->calls[i].i = i;
        if (!px__rl_giveback_before(rl, op->name, op->nlen, op->owner, op->olen, i))
            continue; /* a give-back there must run first and cannot be sent */
        if (px__rl_eval(rl, i, px_route_hint(op->name, op->nlen),
                        px__lock_script(w->eng, PX__LK_ACQUIRE), 1, 3, argv, lens, rl_on_master,
                        &att->calls[i]) == 0)
            att->pending++; /* replies are never synchronous */
    }
    if (att->pending == 0) {
        free(att);
        return -ENOTCONN;
    }
    return 0;
}

static enum px_wait_res rl_outcome(struct px_wait_op *w, const struct px_wait_outcome *o,
                                   uint64_t *repoll)
{
    struct rl_op *op = rl_op_of(w);
    int64_t pttl;

    if (o->no_quorum) {
        px_server_of(w->eng)->stats.upstream_errs++;
        px_reply_error(px_req_out(px_wait_req(w)),
                       "UPSTREAM REDLOCK reached fewer than %u of %u masters (a majority is "
                       "needed): not acquired",
                       op->rl->majority, op->rl->n);
        return PX_WAIT_FINISHED;
    }
    if (o->acq.granted) {
        op->count = o->acq.count;
        return PX_WAIT_GRANTED;
    }
    pttl = o->acq.pttl;
    *repoll = pttl >= 0 ? (uint64_t)LP_MAX(pttl, 1) : pttl == -1 ? w->eng->cfg.watchdog_ms : 1;
    return PX_WAIT_CONTENDED;
}

static void rl_granted(struct px_wait_op *w)
{
    struct rl_op *op = rl_op_of(w);
    struct px_req *req = px_wait_req(w);
    struct px_redlock *rl = op->rl;
    uint64_t now = clock_mono_ms(), age = now > w->sent_ms ? now - w->sent_ms : 0;
    uint64_t validity = op->lease_ms - age - px_wait_margin_ms(op->lease_ms);
    struct rl_hold *h = px__rl_hold_find(rl, op->name, op->nlen, op->owner, op->olen);

    if (h && h->state != RL_HELD) {
        px__rl_hold_remove(h);
        h = NULL;
    }
    if (!h)
        h = px__rl_hold_new(rl, op->name, op->nlen, op->owner, op->olen);
    if (!h) {
        rl_attempt_give_back(op->attempt);
        px_reply_error(px_req_out(req), "ERR out of memory");
        return;
    }
    op->attempt->kept = true;
    h->state = RL_HELD;
    h->count = (uint64_t)op->count;
    h->lease_ms = op->lease_ms;
    h->watchdog = op->watchdog;
    if (!h->claimed) {
        list_add_tail(&req->cl->caller.locks.claims, &h->claim.node);
        h->claimed = true;
    }
    px__rl_hold_arm(h);
    w->eng->stats.acquired++;
    px_metrics_observe_wait(px_server_of(w->eng), req);
    px_reply_int(px_req_out(req), (int64_t)validity);
}

/* Gives back what the attempt being decided took (or may have) on every
 * master, and what it takes later. */
static void rl_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct rl_op *op = rl_op_of(w);

    if (why == PX_UNDO_GONE && w->eng->cfg.on_disc != PX_DISCONNECT_RELEASE) {
        op->attempt->kept = true; /* left to expire, as the connection's holds */
        return;
    }
    rl_attempt_give_back(op->attempt);
}

static void rl_destroy(struct px_wait_op *w)
{
    struct rl_op *op = rl_op_of(w);

    px__rl_chan_put(op->rl, op->chan);
    free(op);
}

static const struct px_wait_kind rl_wait_kind = {
    .name = "redlock",
    .wake = PX_WAKE_LOCK,
    .stat = PX_WAIT_STAT_LOCK,
    .channel = rl_channel,
    .send = rl_send,
    .outcome = rl_outcome,
    .granted = rl_granted,
    .undo = rl_undo,
    .destroy = rl_destroy,
};

/* The caller's owner field (the connection's, as LOCK without OWNER). */
static size_t rl_owner(struct px_req *req, char *out)
{
    struct px__lock_args a;
    size_t base;

    memset(&a, 0, sizeof(a));
    return px__lock_owner(req, &a, &px__lock_plain_kind, out, &base);
}

static bool rl_configured(struct px_req *req)
{
    if (req->cl->srv->engine->redlock)
        return true;
    px_reply_error(px_req_out(req),
                   "ERR %.*s needs --redlock-upstream (3 or more independent masters)",
                   (int)req->argv[0].len, req->argv[0].p);
    return false;
}

static void rl_cmd_lock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    struct px__lock_args a;
    struct rl_hold *h;
    struct rl_op *op;

    if (!rl_configured(req) ||
        px__lock_parse_args(req, PX__LOCK_OPT_LEASE | PX__LOCK_OPT_WAIT, &a) < 0)
        return px_req_done(req);
    if (a.token) {
        px_reply_error(px_req_out(req), "ERR REDLOCK takes no OWNER");
        return px_req_done(req);
    }
    op = calloc(1, sizeof(*op));
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->rl = srv->engine->redlock;
    op->name = a.name->p;
    op->nlen = a.name->len;
    op->olen = rl_owner(req, op->owner);
    op->watchdog = a.lease_ms < 0;
    op->lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)a.lease_ms;
    h = px__rl_hold_find(op->rl, op->name, op->nlen, op->owner, op->olen);
    op->confirmed = h && h->state == RL_HELD ? h->count : 0;
    px_cmd_wait_init(&op->wait, &rl_wait_kind, req, a.wait_ms);
    op->wait.lease_ms = op->lease_ms;
    if (px_wait_may_wait(&op->wait))
        op->chan = px__rl_chan_get(op->rl, op->name, op->nlen);
    px_cmd_wait_start(&op->wait);
}

/* ---- REDUNLOCK ------------------------------------------------------------------ */

struct rl_unlock {
    struct px_req *req; /* borrowed */
    struct rl_hold *h;  /* reference */
    struct rl_call calls[PX_REDLOCK_MAX];
    unsigned pending;    /* replies outstanding */
    unsigned released;   /* masters that answered 1 */
    unsigned still;      /* masters that answered 0 */
    unsigned not_held;   /* masters that answered nil */
    unsigned still_mask; /* masters (bits) still holding after it */
    unsigned lost_mask;  /* masters (bits) whose reply was lost */
};

/* Fewer than a majority answered the REDUNLOCK (masters down, stalled
 * or cut off): while the hold is HELD (its last renewal, or its grant,
 * reached a majority, so the lease is vouched for) the release is the
 * proxy's to carry out, as for UNLOCK (hold.h, px_hold_unlock_failed):
 * answered as if a majority had confirmed it, the renewal stops with the
 * last hold, and the give-back goes to every master that did not
 * confirm, retried until it answers or the lease has ended. */
static bool rl_unlock_in_hand(const struct rl_unlock *u)
{
    const struct px_redlock *rl = u->h->rl;

    if (u->released + u->still + u->not_held >= rl->majority || u->h->state != RL_HELD)
        return false;
    u->req->cl->srv->engine->stats.unlocks_in_hand++;
    return true;
}

static void rl_unlock_reply(struct rl_unlock *u)
{
    struct px_req *req = u->req;
    struct rl_hold *h = u->h;
    struct px_redlock *rl = h->rl;
    const struct px_arg *name = &req->argv[1];

    if (u->released + u->still >= rl->majority || rl_unlock_in_hand(u)) {
        if (h->count > 0)
            h->count--;
        if (h->count == 0 || u->released >= rl->majority) {
            req->cl->srv->engine->stats.released++;
            px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, 0, u->still_mask | u->lost_mask,
                          h->lease_ms);
            px__rl_hold_remove(h);
            px_reply_int(px_req_out(req), 1);
            return;
        }
        /* where the reply was lost, the count is one too many or right */
        px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, h->count, u->lost_mask, h->lease_ms);
        px_reply_int(px_req_out(req), 0);
        return;
    }
    if (u->released + u->still + u->not_held >= rl->majority) {
        req->cl->srv->engine->stats.leases_lost++;
        px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, 0, u->still_mask | u->lost_mask,
                      h->lease_ms);
        px__rl_hold_remove(h);
        px_reply_error(px_req_out(req),
                       "LOCKLOST lease on '%.*s' was lost on a majority of the masters "
                       "before REDUNLOCK; it was not held any more",
                       (int)LP_MIN(name->len, 200u), name->p);
        return;
    }
    /* The lease ended or was lost while the REDUNLOCK was in flight. */
    px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, 0, u->still_mask | u->lost_mask,
                  h->lease_ms);
    px__rl_hold_remove(h);
    px_reply_error(px_req_out(req),
                   "LOCKLOST lease on '%.*s' was lost (a renewal reached fewer than a majority of "
                   "the masters, or the lease ended) before REDUNLOCK",
                   (int)LP_MIN(name->len, 200u), name->p);
}

static void rl_on_unlock(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct rl_call *c = arg;
    struct rl_unlock *u = c->ctx;
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    if (err == 0 && r->type == POOL_REPLY_INTEGER) {
        if (r->integer == 1) {
            u->released++;
        } else {
            u->still++;
            u->still_mask |= 1u << c->i;
        }
    } else if (err == 0 && r->type == POOL_REPLY_NIL) {
        u->not_held++;
    } else if (err < 0) {
        u->lost_mask |= 1u << c->i;
    }
    if (--u->pending > 0)
        return;
    rl_unlock_reply(u);
    px__rl_hold_put(u->h);
    free(u);
    req->op = NULL;
    px_req_done(req);
    px_client_put(cl);
}

static void rl_cmd_unlock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    const struct px_arg *name = &req->argv[1];
    char owner[PX_OWNER_MAX], chan[PX_CHANNEL_MAX], lease[24];
    struct px__lock_args a;
    struct rl_unlock *u;
    struct rl_hold *h;
    size_t olen;
    unsigned i, sent = 0;

    if (!rl_configured(req) || px__lock_parse_args(req, 0, &a) < 0)
        return px_req_done(req);
    olen = rl_owner(req, owner);
    h = px__rl_hold_find(srv->engine->redlock, name->p, name->len, owner, olen);
    if (!h || h->state == RL_LOST) {
        if (h)
            px__rl_hold_remove(h);
        if (h)
            px_reply_error(px_req_out(req),
                           "LOCKLOST lease on '%.*s' was lost (a renewal reached fewer than a "
                           "majority of the masters, or the lease ended) before REDUNLOCK",
                           (int)LP_MIN(name->len, 200u), name->p);
        else
            px_reply_error(px_req_out(req), "NOTOWNER lock '%.*s' is not held by this owner",
                           (int)LP_MIN(name->len, 200u), name->p);
        return px_req_done(req);
    }
    u = calloc(1, sizeof(*u));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    u->req = req;
    u->h = h;
    h->refs++;
    {
        const char *argv[5] = {name->p, chan, lease, owner, "publish"};
        size_t lens[5] = {name->len, 0, 0, olen, 7};

        lens[1] = px__rl_lock_channel(name->p, name->len, chan, sizeof(chan));
        lens[2] = util_u64_to_str(h->lease_ms, lease);
        for (i = 0; i < srv->engine->redlock->n; i++) {
            u->calls[i].ctx = u;
            u->calls[i].i = i;
            u->pending++;
            if (px__rl_giveback_before(srv->engine->redlock, name->p, name->len, owner, olen, i) &&
                px__rl_eval(srv->engine->redlock, i, px_route_hint(name->p, name->len),
                            px__lock_script(srv->engine, PX__LK_UNLOCK), 2, 5, argv, lens,
                            rl_on_unlock, &u->calls[i]) == 0) {
                sent++;
            } else {
                u->pending--;
                u->lost_mask |= 1u << i; /* as a lost reply: it may still hold */
            }
        }
    }
    if (sent == 0) {
        rl_unlock_reply(u);
        px__rl_hold_put(h);
        free(u);
        return px_req_done(req);
    }
    px_client_get(req->cl);
    req->op = u;
}

static const struct px_cmd rl_cmds[] = {
    {"REDLOCK", 2, 6, rl_cmd_lock, px_lock_may_block, 1},
    {"REDUNLOCK", 2, 2, rl_cmd_unlock, NULL, 1},
};
const struct px_cmd_set px_redlock_cmd_set = {rl_cmds, LP_ARRAY_SIZE(rl_cmds)};
