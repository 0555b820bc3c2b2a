/* The watchdog: renewal of holds taken without LEASE, and the lease end of
 * holds taken with one; see hold.h.
 *
 * Timer use: a hold's timer is armed from its lease end, which is counted
 * from the send of the request that set the lease (the acquire, or the
 * last renewal), never from its reply: a watchdog hold renews when a third
 * of its lease has passed since then, a fixed lease hold becomes a
 * tombstone at its end, and a tombstone is dropped after
 * PX_HOLD_TOMBSTONE_MS. A due renewal queues the hold on srv->renew_due;
 * the per-iteration hook turns the queue into renew scripts of up to
 * PX_RENEW_BATCH keys (one EVALSHA each), one batch per renew script in
 * use (plain, fair and write locks share batches; read locks have their
 * own). The next renewal is scheduled from the batch's reply (as Redisson
 * does), so a slow Redis never accumulates renewals. Renewal checks that
 * the owner field is still ours (never a blind PEXPIRE); "not held" makes
 * the hold a tombstone (LOCKLOST on UNLOCK), logged and counted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "pool/pool.h"
#include "proxy/locks/hold.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define RENEW_GROUPS 4u /* batches open at once in one hook run (distinct renew scripts) */

struct renew_batch {
    struct px_server *srv;                 /* borrowed */
    unsigned script;                       /* pool id of the renew script */
    unsigned n;                            /* holds in the batch */
    uint64_t sent_ms;                      /* monotonic ms it was sent */
    struct px_hold *holds[PX_RENEW_BATCH]; /* each holds a ref */
};

void px_hold_arm(struct px_hold *h)
{
    uint64_t now = sched_loop_now_ms(h->srv->loop);
    uint64_t at = h->expires_ms;

    if (h->state != PX_HOLD_HELD)
        return;
    if (h->watchdog) /* renew once a third of the lease has passed */
        at = h->expires_ms - (h->lease_ms - LP_MAX(h->lease_ms / 3, 1u));
    sched_loop_timer_in(h->srv->loop, &h->timer, at > now ? at - now : 0);
}

void px_watchdog_on_timer(struct sched_timer *t)
{
    struct px_hold *h = LP_CONTAINER_OF(t, struct px_hold, timer);

    if (h->state == PX_HOLD_LOST) {
        px_hold_released(h); /* the tombstone's time is over */
    } else if (h->state == PX_HOLD_HELD && !h->watchdog) {
        px_hold_mark_lost(h); /* a fixed lease ran out */
    } else if (h->state == PX_HOLD_HELD && !list_is_linked(&h->due_node)) {
        list_add_tail(&h->srv->renew_due, &h->due_node);
    }
}

/* ---- renewal batches ------------------------------------------------------ */

static void batch_put_holds(struct renew_batch *b)
{
    unsigned i;

    for (i = 0; i < b->n; i++)
        px_hold_put(b->holds[i]);
}

/* Renewal could not be confirmed: try again soon (the lease is 3x the period). */
static void batch_retry(struct renew_batch *b)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        struct px_hold *h = b->holds[i];

        if (h->state == PX_HOLD_HELD && h->watchdog)
            sched_loop_timer_in(b->srv->loop, &h->timer, LP_MIN(h->lease_ms / 3, 1000u));
    }
}

static void batch_apply(struct renew_batch *b, const redisReply *r)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        struct px_hold *h = b->holds[i];
        const redisReply *e = r->element[i];

        if (h->state != PX_HOLD_HELD || !h->watchdog)
            continue;
        if (e->type == REDIS_REPLY_INTEGER && e->integer == 1) {
            b->srv->stats.renewals++;
            h->expires_ms = b->sent_ms + h->lease_ms;
            px_hold_arm(h);
            continue;
        }
        log_msg(LOG_LVL_WARN, "lease lost: %s '%.*s' owner %.*s is no longer held", h->kind->name,
                (int)LP_MIN(h->nlen, 200u), h->key, (int)h->olen, h->owner);
        px_hold_mark_lost(h);
    }
}

static void batch_on_reply(void *arg, const redisReply *r, int err)
{
    struct renew_batch *b = arg;

    if (err == 0 && r->type == REDIS_REPLY_ARRAY && r->elements == b->n) {
        batch_apply(b, r);
    } else {
        log_msg(LOG_LVL_WARN, "watchdog: renewal of %u locks failed (%s); retrying", b->n,
                err ? strerror(-err) : (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
        batch_retry(b);
    }
    batch_put_holds(b);
    free(b);
}

/* Sends one renew script for the holds in b. */
static void batch_send(struct renew_batch *b)
{
    const char *argv[2 * PX_RENEW_BATCH + 1];
    size_t lens[2 * PX_RENEW_BATCH + 1];
    char lease[24];
    unsigned i;
    int rc;

    lens[b->n] = (size_t)snprintf(lease, sizeof(lease), "%llu",
                                  (unsigned long long)b->srv->opts.watchdog_ms);
    argv[b->n] = lease;
    for (i = 0; i < b->n; i++) {
        argv[i] = b->holds[i]->key;
        lens[i] = b->holds[i]->nlen;
        argv[b->n + 1 + i] = b->holds[i]->owner;
        lens[b->n + 1 + i] = b->holds[i]->olen;
    }
    b->srv->stats.renew_batches++;
    b->sent_ms = sched_loop_now_ms(b->srv->loop);
    rc = px_metrics_eval(b->srv, 0, b->script, (int)b->n, (int)(2 * b->n + 1), argv, lens,
                         batch_on_reply, b);
    if (rc < 0) {
        batch_retry(b);
        batch_put_holds(b);
        free(b);
    }
}

/* Slot in open[] of the batch being filled for script: the open one, or a
 * new one (the oldest open batch is sent to make room). -ENOMEM if none
 * can be allocated. */
static int batch_slot(struct px_server *srv, struct renew_batch **open, unsigned script)
{
    int i, slot = -1;

    for (i = 0; i < (int)RENEW_GROUPS; i++) {
        if (open[i] && open[i]->script == script)
            return i;
        if (!open[i] && slot < 0)
            slot = i;
    }
    if (slot < 0) {
        batch_send(open[0]);
        slot = 0;
    }
    open[slot] = malloc(sizeof(*open[slot]));
    if (!open[slot])
        return -ENOMEM;
    open[slot]->srv = srv;
    open[slot]->script = script;
    open[slot]->n = 0;
    return slot;
}

static void renew_hook(struct sched_hook *hook)
{
    struct px_server *srv = LP_CONTAINER_OF(hook, struct px_server, renew_hook);
    struct renew_batch *open[RENEW_GROUPS] = {NULL};
    struct list *n;
    unsigned i;

    while ((n = list_first(&srv->renew_due)) != NULL) {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, due_node);
        int slot = batch_slot(srv, open, h->kind->renew_script());
        struct renew_batch *b;

        if (slot < 0)
            break; /* the rest waits for the next iteration */
        b = open[slot];
        list_del_init(n);
        b->holds[b->n++] = px_hold_get(h);
        if (b->n == PX_RENEW_BATCH) {
            open[slot] = NULL;
            batch_send(b);
        }
    }
    for (i = 0; i < RENEW_GROUPS; i++) {
        if (open[i])
            batch_send(open[i]);
    }
}

int px_watchdog_init(struct px_server *srv)
{
    list_init(&srv->renew_due);
    srv->renew_hook.fn = renew_hook;
    sched_loop_hook_add(srv->loop, &srv->renew_hook);
    return 0;
}

void px_watchdog_deinit(struct px_server *srv)
{
    sched_loop_hook_del(srv->loop, &srv->renew_hook);
}
