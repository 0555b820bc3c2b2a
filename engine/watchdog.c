/* The watchdog: renewal of holds taken without LEASE, the lease end of
 * holds taken with one, and the check of holds after a topology change;
 * see hold.h.
 *
 * Timer use: a hold's timer is armed from its lease end, which is counted
 * from the send of the request that set the lease (the acquire, or the
 * last renewal), never from its reply: a watchdog hold renews when a third
 * of its lease has passed since then, a fixed lease hold becomes a
 * tombstone at its end, and a tombstone is dropped after
 * PX_HOLD_TOMBSTONE_MS. A due renewal queues the hold on eng->renew_due;
 * the per-iteration hook turns the queue into scripts of up to
 * PX_RENEW_BATCH keys (one EVALSHA each), one batch per (script, cluster
 * slot): plain, fair and write locks share the renew script, read locks
 * have their own, and a multi-key script must keep to one slot in a
 * Redis Cluster (else CROSSSLOT). A single Redis has one slot here. The
 * next renewal is scheduled from the batch's reply (as Redisson does), so
 * a slow Redis never accumulates renewals. Renewal checks that the owner
 * field is still ours (never a blind PEXPIRE); "not held" makes the hold
 * a tombstone (LOCKLOST on UNLOCK), logged and counted.
 *
 * After a topology change (pool_topology_fn: a failover, a slot migration,
 * a Sentinel master switch), the holds of the changed slots are queued at
 * once with `verify` set: a watchdog hold is renewed right away (which
 * checks it), any other is checked by the verify script (HEXISTS only:
 * its fixed lease must not be extended). Replication is asynchronous, so
 * a grant that had not reached the replica is gone on the new master:
 * "not held" marks it lost now, not at the next renewal (or never, for a
 * fixed lease). Until a check answers "held" the hold is `unchecked`: a
 * re-entry sent meanwhile may have re-created it on the new master, so
 * one whose outcome is unknown marks it lost (lock.c, lockop_undo). An
 * answer about a hold whose grant or unlock changed it after the batch
 * was sent (its epoch), or that has a request in flight, proves nothing
 * and is ignored (the renewal is retried soon). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/hold.h"
#include "engine/replay.h"
#include "engine/scripts.h"
#include "engine/sem.h"
#include "engine/shape.h"
#include "pool/pool.h"
#include "sched/loop.h"

#define RENEW_GROUPS    16u  /* batches open at once in one hook run (distinct script, slot) */
#define VERIFY_RETRY_MS 200u /* a check after a topology change that failed goes again */

struct renew_batch {
    struct lk_engine *eng;                 /* borrowed */
    unsigned script;                       /* pool id of the renew (or verify) script */
    int slot;                              /* cluster slot of every key, 0 for a single node */
    unsigned n;                            /* holds in the batch */
    uint64_t sent_ms;                      /* monotonic ms it was sent */
    struct px_hold *holds[PX_RENEW_BATCH]; /* each holds a ref */
    unsigned epochs[PX_RENEW_BATCH];       /* each hold's epoch when queued */
    bool verifying[PX_RENEW_BATCH];        /* queued by a topology change */
};

void px_hold_arm(struct px_hold *h)
{
    uint64_t now = sched_loop_now_ms(h->eng->loop);
    uint64_t at = h->expires_ms;

    if (h->state != PX_HOLD_HELD)
        return;
    if (h->watchdog) /* renew once a third of the lease has passed */
        at = h->expires_ms - (h->lease_ms - LP_MAX(h->lease_ms / 3, 1u));
    sched_loop_timer_in(h->eng->loop, &h->timer, at > now ? at - now : 0);
}

void px_watchdog_on_timer(struct sched_timer *t)
{
    struct px_hold *h = LP_CONTAINER_OF(t, struct px_hold, timer);

    if (h->state == PX_HOLD_LOST) {
        px_hold_released(h); /* the tombstone's time is over */
    } else if (h->state == PX_HOLD_HELD && !h->watchdog) {
        px_hold_mark_lost(h); /* a fixed lease ran out */
    } else if (h->state == PX_HOLD_HELD && !list_is_linked(&h->due_node)) {
        list_add_tail(&h->eng->renew_due, &h->due_node);
    }
}

/* ---- renewal batches ------------------------------------------------------ */

static bool batch_renews(const struct renew_batch *b)
{
    return b->script != PX_SCRIPT_VERIFY;
}

static void batch_put_holds(struct renew_batch *b)
{
    unsigned i;

    for (i = 0; i < b->n; i++)
        px_hold_put(b->holds[i]);
}

/* A check that could not be made (no master yet, a lost reply) is made
 * again VERIFY_RETRY_MS later: a fixed-lease hold has no renewal timer to
 * carry it. */
static void verify_later(struct px_hold *h)
{
    struct lk_engine *eng = h->eng;

    list_add_tail(&eng->verify_retry, &h->due_node);
    if (!sched_timer_is_pending(&eng->verify_timer))
        sched_loop_timer_in(eng->loop, &eng->verify_timer, VERIFY_RETRY_MS);
}

static void verify_on_timer(struct sched_timer *t)
{
    struct lk_engine *eng = LP_CONTAINER_OF(t, struct lk_engine, verify_timer);
    struct list *n;

    while ((n = list_first(&eng->verify_retry)) != NULL) {
        list_del_init(n);
        list_add_tail(&eng->renew_due, n);
    }
}

/* Renewal could not be confirmed: try again soon (the lease is 3x the
 * period). A check that could not be made is made again as well. */
static void batch_retry(struct renew_batch *b)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        struct px_hold *h = b->holds[i];

        if (h->state != PX_HOLD_HELD)
            continue;
        if (b->verifying[i])
            h->verify = true;
        if (h->watchdog)
            sched_loop_timer_in(b->eng->loop, &h->timer, LP_MIN(h->lease_ms / 3, 1000u));
        else if (b->verifying[i] && !list_is_linked(&h->due_node))
            verify_later(h);
    }
}

static void batch_lost(struct renew_batch *b, unsigned i)
{
    struct px_hold *h = b->holds[i];

    if (b->verifying[i]) {
        b->eng->stats.topology_leases_lost++;
        log_msg(LOG_LVL_WARN,
                "lease lost: %s '%.*s' owner %.*s is not held on its master after a "
                "topology change (failover or migration)",
                h->kind->name, (int)LP_MIN(h->nlen, 200u), h->key, (int)h->olen, h->owner);
    } else {
        log_msg(LOG_LVL_WARN, "lease lost: %s '%.*s' owner %.*s is no longer held", h->kind->name,
                (int)LP_MIN(h->nlen, 200u), h->key, (int)h->olen, h->owner);
    }
    px_hold_mark_lost(h);
}

static void batch_apply(struct renew_batch *b, const struct pool_reply *r)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        struct px_hold *h = b->holds[i];
        bool held = px_shape_held(r, i);

        if (h->state != PX_HOLD_HELD || (batch_renews(b) && !h->watchdog))
            continue;
        if (!held && (h->epoch != b->epochs[i] || h->inflight > 0)) {
            /* No proof either way: what changed it, or is in flight, tells
             * (an unlock answers nil: LOCKLOST); a renewal goes again. */
            if (h->watchdog)
                sched_loop_timer_in(b->eng->loop, &h->timer, 10);
            continue;
        }
        if (!held) {
            batch_lost(b, i);
            continue;
        }
        if (b->verifying[i])
            h->unchecked = false; /* on the master it is on now */
        if (!batch_renews(b))
            continue; /* still held; its fixed lease runs on */
        b->eng->stats.renewals++;
        h->expires_ms = b->sent_ms + h->lease_ms;
        px_hold_arm(h);
    }
}

static void batch_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct renew_batch *b = arg;

    if (err == 0 && px_shape_batch(r, b->n)) {
        batch_apply(b, r);
    } else {
        log_msg(LOG_LVL_WARN, "watchdog: %s of %u locks failed (%s); retrying",
                batch_renews(b) ? "renewal" : "check", b->n,
                err ? strerror(-err) : (r->type == POOL_REPLY_ERROR ? r->str : "bad reply"));
        batch_retry(b);
    }
    batch_put_holds(b);
    free(b);
}

/* Sends one renew (or verify) script for the holds in b. */
static void batch_send(struct renew_batch *b)
{
    const char *argv[2 * PX_RENEW_BATCH + 1];
    size_t lens[2 * PX_RENEW_BATCH + 1];
    char lease[24];
    unsigned i;
    int rc;

    lens[b->n] =
        (size_t)snprintf(lease, sizeof(lease), "%llu", (unsigned long long)b->eng->cfg.watchdog_ms);
    argv[b->n] = lease;
    for (i = 0; i < b->n; i++) {
        argv[i] = b->holds[i]->key;
        lens[i] = b->holds[i]->nlen;
        argv[b->n + 1 + i] = b->holds[i]->owner;
        lens[b->n + 1 + i] = b->holds[i]->olen;
    }
    if (batch_renews(b))
        b->eng->stats.renew_batches++;
    b->sent_ms = sched_loop_now_ms(b->eng->loop);
    rc = px_script_eval(b->eng, (uint64_t)b->slot, b->script, (int)b->n, (int)(2 * b->n + 1), argv,
                        lens, batch_on_reply, b);
    if (rc < 0) {
        batch_retry(b);
        batch_put_holds(b);
        free(b);
    }
}

/* Index in open[] of the batch being filled for (script, slot): the open
 * one, or a new one (the oldest open batch is sent to make room). -ENOMEM
 * if none can be allocated. */
static int batch_find(struct lk_engine *eng, struct renew_batch **open, unsigned script, int slot)
{
    int i, free_at = -1;

    for (i = 0; i < (int)RENEW_GROUPS; i++) {
        if (open[i] && open[i]->script == script && open[i]->slot == slot)
            return i;
        if (!open[i] && free_at < 0)
            free_at = i;
    }
    if (free_at < 0) {
        batch_send(open[0]);
        free_at = 0;
    }
    open[free_at] = malloc(sizeof(*open[free_at]));
    if (!open[free_at])
        return -ENOMEM;
    open[free_at]->eng = eng;
    open[free_at]->script = script;
    open[free_at]->slot = slot;
    open[free_at]->n = 0;
    return free_at;
}

/* The script a due hold goes out with: its kind's renewal when the
 * watchdog renews it, else (a check after a topology change) verify. */
static unsigned hold_script(const struct px_hold *h)
{
    return h->watchdog ? h->kind->renew_script(h->eng) : PX_SCRIPT_VERIFY;
}

static int hold_slot(const struct lk_engine *eng, const struct px_hold *h)
{
    return pool_is_cluster(eng->pool) ? (int)pool_slot(h->key, h->nlen) : 0;
}

/* Turns the queue of due holds into batches and sends them. */
static void renew_send_due(struct lk_engine *eng)
{
    struct renew_batch *open[RENEW_GROUPS] = {NULL};
    struct list *n;
    unsigned i;

    while ((n = list_first(&eng->renew_due)) != NULL) {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, due_node);
        int at = batch_find(eng, open, hold_script(h), hold_slot(eng, h));
        struct renew_batch *b;

        if (at < 0)
            break; /* the rest waits for the next iteration */
        b = open[at];
        list_del_init(n);
        b->epochs[b->n] = h->epoch;
        b->verifying[b->n] = h->verify;
        h->verify = false;
        b->holds[b->n++] = px_hold_get(h);
        if (b->n == PX_RENEW_BATCH) {
            open[at] = NULL;
            batch_send(b);
        }
    }
    for (i = 0; i < RENEW_GROUPS; i++) {
        if (open[i])
            batch_send(open[i]);
    }
}

/* Runs every loop iteration; the usual one has nothing due and returns
 * before setting anything up. */
static void renew_hook(struct sched_hook *hook)
{
    struct lk_engine *eng = LP_CONTAINER_OF(hook, struct lk_engine, renew_hook);

    if (!list_empty(&eng->renew_due))
        renew_send_due(eng);
}

/* ---- topology changes ---------------------------------------------------------- */

void px_watchdog_topology(struct lk_engine *eng, const struct pool_topology_event *ev)
{
    unsigned queued = 0;
    size_t i;

    for (i = 0; i < eng->holds.nbuckets; i++) {
        struct hmap_node *n;

        for (n = eng->holds.buckets[i]; n; n = n->next) {
            struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, node);

            if (h->state != PX_HOLD_HELD ||
                !pool_slot_bitmap_has(ev->slots, pool_slot(h->key, h->nlen)))
                continue;
            h->verify = true;
            h->unchecked = true;
            queued++;
            if (!list_is_linked(&h->due_node))
                list_add_tail(&eng->renew_due, &h->due_node);
        }
    }
    eng->stats.topology_verified += queued;
    log_msg(LOG_LVL_INFO,
            "upstream topology changed: %u slots moved (%u masters, %u slots served); "
            "checking %u holds of those slots",
            ev->nchanged, ev->masters, ev->slots_served, queued);
}

void px_locks_on_topology(void *arg, const struct pool_topology_event *ev)
{
    struct lk_engine *eng = arg;

    if (ev->initial || ev->nchanged == 0)
        return; /* the first map: nothing was held before it */
    eng->stats.topology_changes++;
    px_watchdog_topology(eng, ev);
    px_replay_topology(eng, ev);
    px_sem_on_topology(eng, ev);
    px_jobs_retry_now(eng); /* releases in hand, roll-backs: the new master takes them */
}

int px_watchdog_init(struct lk_engine *eng)
{
    list_init(&eng->renew_due);
    list_init(&eng->verify_retry);
    sched_timer_init(&eng->verify_timer, verify_on_timer);
    eng->renew_hook.fn = renew_hook;
    sched_loop_hook_add(eng->loop, &eng->renew_hook);
    return 0;
}

void px_watchdog_deinit(struct lk_engine *eng)
{
    sched_loop_timer_del(eng->loop, &eng->verify_timer);
    sched_loop_hook_del(eng->loop, &eng->renew_hook);
}
