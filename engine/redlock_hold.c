/* REDLOCK's records of granted locks: the confirmed count, the lease and
 * a timer per (name, owner). Without LEASE the lease is renewed on every
 * master every lease/3 and needs a majority; a renewal that reaches fewer
 * makes a tombstone (REDUNLOCK answers LOCKLOST), counted and logged, as
 * does the end of a LEASE. A closed connection's records are released on
 * every master (a claim, locks.h). See redlock.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/hold.h"
#include "engine/redlock.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "sched/loop.h"

/* ---- holds ----------------------------------------------------------------------- */

static uint64_t rl_hold_hash(const char *name, size_t nlen, const char *owner, size_t olen)
{
    return hash_bytes(name, nlen) ^ (hash_bytes(owner, olen) * 31u);
}

struct rl_hold *px__rl_hold_find(struct px_redlock *rl, const char *name, size_t nlen,
                                 const char *owner, size_t olen)
{
    struct hmap_node *n;

    for (n = hmap_first(&rl->holds, rl_hold_hash(name, nlen, owner, olen)); n; n = hmap_next(n)) {
        struct rl_hold *h = LP_CONTAINER_OF(n, struct rl_hold, node);

        if (h->nlen == nlen && h->olen == olen && memcmp(h->key, name, nlen) == 0 &&
            memcmp(h->owner, owner, olen) == 0)
            return h;
    }
    return NULL;
}

static void rl_hold_maybe_free(struct rl_hold *h)
{
    if (!h->in_table && h->refs == 0)
        free(h);
}

/* Takes h out of the table (and its claim and timer); freed once no
 * reference is left. */
void px__rl_hold_remove(struct rl_hold *h)
{
    if (h->claimed)
        list_del_init(&h->claim.node);
    h->claimed = false;
    sched_loop_timer_del(h->rl->eng->loop, &h->timer);
    if (h->in_table)
        hmap_remove(&h->rl->holds, &h->node);
    h->in_table = false;
    rl_hold_maybe_free(h);
}

void px__rl_hold_put(struct rl_hold *h)
{
    if (!h)
        return;
    h->refs--;
    rl_hold_maybe_free(h);
}

/* The lease was lost (a renewal without a majority) or ended (LEASE): a
 * tombstone for REDUNLOCK's LOCKLOST, and the owner given back on every
 * master (those the renewal reached still hold it, and would count a
 * re-take as a re-entry: an orphan count). */
static void rl_hold_lost(struct rl_hold *h, bool renewal)
{
    struct lk_engine *eng = h->rl->eng;
    struct px_redlock *rl = h->rl;

    if (h->claimed)
        list_del_init(&h->claim.node);
    h->claimed = false;
    h->state = RL_LOST;
    if (renewal) {
        eng->stats.leases_lost++;
        log_msg(LOG_LVL_WARN,
                "redlock: lease on '%.*s' lost: a renewal reached fewer than %u of %u masters",
                (int)LP_MIN(h->nlen, 200u), h->key, h->rl->majority, h->rl->n);
    }
    px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, 0, (1u << rl->n) - 1, h->lease_ms);
    sched_loop_timer_in(eng->loop, &h->timer, PX_HOLD_TOMBSTONE_MS);
}

/* A renewal's replies, folded. */
struct rl_renewal {
    struct rl_hold *h; /* reference */
    unsigned pending;  /* replies outstanding */
    unsigned renewed;  /* masters where the owner field was still there */
};

void px__rl_hold_arm(struct rl_hold *h)
{
    sched_loop_timer_in(h->rl->eng->loop, &h->timer,
                        h->watchdog ? LP_MAX(h->lease_ms / 3, 1u) : h->lease_ms);
}

static void rl_on_renew(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct rl_renewal *rn = arg;
    struct rl_hold *h = rn->h;

    if (err == 0 && r->type == POOL_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == POOL_REPLY_INTEGER && r->element[0]->integer == 1)
        rn->renewed++;
    if (--rn->pending > 0)
        return;
    if (h->in_table && h->state == RL_HELD) {
        if (rn->renewed >= h->rl->majority) {
            h->rl->eng->stats.renewals++;
            px__rl_hold_arm(h);
        } else {
            rl_hold_lost(h, true);
        }
    }
    px__rl_hold_put(h);
    free(rn);
}

/* Renews h on every master; a majority keeps it. */
static void rl_renew(struct rl_hold *h)
{
    struct px_redlock *rl = h->rl;
    struct rl_renewal *rn = calloc(1, sizeof(*rn));
    char lease[24];
    const char *argv[3] = {h->key, lease, h->owner};
    size_t lens[3] = {h->nlen, 0, h->olen};
    unsigned i;

    if (!rn)
        return px__rl_hold_arm(h); /* try again at the next period */
    lens[1] = util_u64_to_str(h->lease_ms, lease);
    rn->h = h;
    h->refs++;
    rn->pending = 1; /* guard until every master was tried */
    for (i = 0; i < rl->n; i++) {
        rn->pending++;
        if (px__rl_eval(rl, i, px_route_hint(h->key, h->nlen), PX_SCRIPT_RENEW, 1, 3, argv, lens,
                        rl_on_renew, rn) < 0)
            rn->pending--;
    }
    rl_on_renew(rn, &(struct pool_result){.err = -ENOTCONN}); /* drops the guard */
}

static void rl_on_timer(struct sched_timer *t)
{
    struct rl_hold *h = LP_CONTAINER_OF(t, struct rl_hold, timer);

    if (h->state == RL_LOST)
        return px__rl_hold_remove(h);
    if (h->watchdog)
        return rl_renew(h);
    rl_hold_lost(h, false);
}

/* The connection closed: release on every master (policy release). */
static void rl_claim_gone(struct px_claim *c, struct lk_caller *cl)
{
    struct rl_hold *h = LP_CONTAINER_OF(c, struct rl_hold, claim);
    struct px_redlock *rl = h->rl;

    (void)cl;
    h->claimed = false;
    if (rl->eng->cfg.on_disc == PX_DISCONNECT_RELEASE) {
        px__rl_settle(rl, h->key, h->nlen, h->owner, h->olen, 0, (1u << rl->n) - 1, h->lease_ms);
        rl->eng->stats.disc_releases++;
    }
    px__rl_hold_remove(h);
}

struct rl_hold *px__rl_hold_new(struct px_redlock *rl, const char *name, size_t nlen,
                                const char *owner, size_t olen)
{
    struct rl_hold *h = calloc(1, sizeof(*h) + nlen + olen + 2);

    if (!h)
        return NULL;
    h->rl = rl;
    h->nlen = nlen;
    h->olen = olen;
    memcpy(h->key, name, nlen);
    h->owner = h->key + nlen + 1;
    memcpy(h->owner, owner, olen);
    sched_timer_init(&h->timer, rl_on_timer);
    list_init(&h->claim.node);
    h->claim.gone = rl_claim_gone;
    /* -ENOMEM only says the table did not grow: h is in it all the same. */
    (void)hmap_insert(&rl->holds, &h->node, rl_hold_hash(name, nlen, owner, olen));
    h->in_table = true;
    return h;
}
