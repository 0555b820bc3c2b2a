/* Holds and the watchdog; see hold.h for the model.
 *
 * Timer use: a watchdog hold's timer fires every lease/3 and queues the
 * hold on srv->renew_due; the per-iteration hook turns the queue into
 * renew scripts of up to PX_RENEW_BATCH keys (one EVALSHA each), one batch
 * per renew script in use (holds of kinds that renew alike, plain, fair
 * and write locks, share batches; read locks have their own). A fixed
 * lease hold's timer fires at lease end and turns it into a tombstone; a
 * tombstone's timer drops it. The next renewal is scheduled after the
 * previous batch's reply (as Redisson does), so a slow Redis never
 * accumulates renewals. */
#include "proxy/locks/hold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/locks/lock.h"
#include "proxy/locks/scripts.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define RENEW_GROUPS 4u /* batches open at once in one hook run (distinct renew scripts) */

struct renew_batch {
    struct px_server *srv;                 /* borrowed */
    unsigned script;                       /* pool id of the renew script */
    unsigned n;                            /* holds in the batch */
    struct px_hold *holds[PX_RENEW_BATCH]; /* each holds a ref */
};

static uint64_t hold_hash(const char *name, size_t nlen, const char *owner, size_t olen)
{
    return hash_bytes(name, nlen) ^ (hash_bytes(owner, olen) * 31u);
}

size_t px_owner_format(const struct px_server *srv, uint64_t id, const char *user,
                       const char *token, size_t tlen, char *out)
{
    int n;

    if (token && user && strcmp(user, PX_OWNER_DEFAULT_USER) != 0) {
        n = snprintf(out, PX_OWNER_MAX, "%s:%s:%.*s", srv->uuid, user, (int)tlen, token);
        return (size_t)n;
    }
    if (token) {
        n = snprintf(out, PX_OWNER_MAX, "%s:%.*s", srv->uuid, (int)tlen, token);
        return (size_t)n;
    }
    n = (int)strlen(srv->uuid); /* the hot path: no printf per acquire */
    memcpy(out, srv->uuid, (size_t)n);
    out[n++] = ':';
    n += (int)util_u64_to_str(id, out + n);
    out[n] = '\0';
    return (size_t)n;
}

struct px_hold *px_hold_find(struct px_server *srv, const char *name, size_t nlen,
                             const char *owner, size_t olen)
{
    struct hmap_node *n = hmap_first(&srv->holds, hold_hash(name, nlen, owner, olen));

    for (; n; n = hmap_next(n)) {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, node);

        if (h->nlen == nlen && h->olen == olen && memcmp(h->key, name, nlen) == 0 &&
            memcmp(h->owner, owner, olen) == 0)
            return h;
    }
    return NULL;
}

static unsigned plain_renew_script(void)
{
    return PX_SCRIPT_RENEW;
}

static int plain_release(struct px_server *srv, const char *name, size_t nlen, const char *owner,
                         size_t olen, pool_reply_fn *cb, void *arg)
{
    char chan[PX_NAME_MAX + 64];
    const char *argv[3] = {name, chan, owner};
    size_t lens[3] = {nlen, 0, olen};

    lens[1] = px_channel_name(chan, sizeof(chan), "redisson_lock__channel:", name, nlen);
    return px_metrics_eval(srv, 0, PX_SCRIPT_RELEASE, 2, 3, argv, lens, cb, arg);
}

const struct px_hold_kind px_hold_plain = {"lock", plain_renew_script, plain_release};

static void hold_free(struct px_hold *h)
{
    free(h);
}

void px_hold_drop(struct px_hold *h)
{
    struct px_server *srv = h->srv;

    if (h->dead)
        return;
    h->dead = true;
    sched_loop_timer_del(srv->loop, &h->timer);
    list_del_init(&h->client_node);
    list_del_init(&h->due_node);
    hmap_remove(&srv->holds, &h->node);
    srv->nholds--;
    px_metrics_hold_end(srv, h);
    if (h->refs == 0)
        hold_free(h);
}

/* Turns a hold into a tombstone: UNLOCK will answer LOCKLOST for a while. */
static void hold_mark_lost(struct px_hold *h)
{
    struct px_server *srv = h->srv;

    if (!h->lost)
        srv->stats.leases_lost++;
    h->lost = true;
    px_metrics_hold_end(srv, h); /* a tombstone is no longer held */
    h->watchdog = false;
    list_del_init(&h->due_node);
    sched_loop_timer_in(srv->loop, &h->timer, PX_HOLD_TOMBSTONE_MS);
}

static void hold_on_timer(struct sched_timer *t)
{
    struct px_hold *h = LP_CONTAINER_OF(t, struct px_hold, timer);

    if (h->lost)
        return px_hold_drop(h);
    if (!h->watchdog)
        return hold_mark_lost(h); /* a fixed lease ran out */
    if (h->refs == 0 && !list_is_linked(&h->due_node))
        list_add_tail(&h->srv->renew_due, &h->due_node);
}

static void hold_arm(struct px_hold *h)
{
    uint64_t delay = h->watchdog ? LP_MAX(h->lease_ms / 3, 1u) : h->lease_ms;

    sched_loop_timer_in(h->srv->loop, &h->timer, delay);
}

static struct px_hold *hold_create(struct px_server *srv, const char *name, size_t nlen,
                                   const char *owner, size_t olen)
{
    struct px_hold *h = calloc(1, sizeof(*h) + nlen + olen + 2);

    if (!h)
        return NULL;
    h->srv = srv;
    h->token = -1;
    h->nlen = nlen;
    h->olen = olen;
    memcpy(h->key, name, nlen);
    h->owner = h->key + nlen + 1;
    memcpy(h->owner, owner, olen);
    list_init(&h->client_node);
    list_init(&h->due_node);
    sched_timer_init(&h->timer, hold_on_timer);
    hmap_insert(&srv->holds, &h->node, hold_hash(name, nlen, owner, olen));
    srv->nholds++;
    px_metrics_hold_begin(srv, h);
    return h;
}

struct px_hold *px_hold_acquired_kind(struct px_server *srv, struct px_client *cl,
                                      const struct px_hold_kind *kind, const char *name,
                                      size_t nlen, const char *owner, size_t olen, uint64_t count,
                                      uint64_t lease_ms, bool watchdog)
{
    struct px_hold *h = px_hold_find(srv, name, nlen, owner, olen);

    if (h && h->lost) {
        px_hold_drop(h);
        h = NULL;
    }
    if (!h) {
        h = hold_create(srv, name, nlen, owner, olen);
        if (!h)
            return NULL;
        h->cl = cl;
        list_add_tail(&cl->locks.holds, &h->client_node);
    }
    h->kind = kind;
    h->count = count;
    h->lease_ms = lease_ms;
    h->watchdog = watchdog;
    list_del_init(&h->due_node);
    hold_arm(h);
    return h;
}

struct px_hold *px_hold_acquired(struct px_server *srv, struct px_client *cl, const char *name,
                                 size_t nlen, const char *owner, size_t olen, uint64_t count,
                                 uint64_t lease_ms, bool watchdog)
{
    return px_hold_acquired_kind(srv, cl, &px_hold_plain, name, nlen, owner, olen, count, lease_ms,
                                 watchdog);
}

void px_hold_unlocked_one(struct px_hold *h)
{
    if (h->count > 0)
        h->count--;
    if (!h->watchdog && !h->lost)
        hold_arm(h);
}

/* ---- renewal batches ------------------------------------------------------ */

struct px_hold *px_hold_get(struct px_hold *h)
{
    if (h)
        h->refs++;
    return h;
}

void px_hold_put(struct px_hold *h)
{
    if (!h)
        return;
    LP_BUG_ON(h->refs == 0);
    h->refs--;
    if (h->dead && h->refs == 0)
        hold_free(h);
}

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

        if (!h->dead && h->watchdog)
            sched_loop_timer_in(b->srv->loop, &h->timer, LP_MIN(h->lease_ms / 3, 1000u));
    }
}

static void batch_apply(struct renew_batch *b, const redisReply *r)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        struct px_hold *h = b->holds[i];
        const redisReply *e = r->element[i];

        if (h->dead || !h->watchdog)
            continue;
        if (e->type == REDIS_REPLY_INTEGER && e->integer == 1) {
            b->srv->stats.renewals++;
            hold_arm(h);
            continue;
        }
        log_msg(LOG_LVL_WARN, "lease lost: %s '%.*s' owner %.*s is no longer held", h->kind->name,
                (int)LP_MIN(h->nlen, 200u), h->key, (int)h->olen, h->owner);
        hold_mark_lost(h);
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
        h->refs++;
        b->holds[b->n++] = h;
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

/* ---- disconnect ------------------------------------------------------------ */

static void release_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_server *srv = arg;

    if (err == 0 && r->type == REDIS_REPLY_INTEGER && r->integer == 1)
        srv->stats.disc_releases++;
}

void px_hold_release_orphan(struct px_server *srv, const struct px_hold_kind *kind,
                            const char *name, size_t nlen, const char *owner, size_t olen)
{
    if (kind->release(srv, name, nlen, owner, olen, release_on_reply, srv) < 0)
        log_msg(LOG_LVL_WARN,
                "cannot release %s '%.*s' of a closed connection: Redis is down; "
                "it expires at lease end",
                kind->name, (int)LP_MIN(nlen, 200u), name);
}

void px_hold_client_gone(struct px_client *cl)
{
    struct px_server *srv = cl->srv;
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->locks.holds)
    {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, client_node);

        if (srv->opts.on_disc == PX_DISCONNECT_RELEASE && !h->lost)
            px_hold_release_orphan(srv, h->kind, h->key, h->nlen, h->owner, h->olen);
        px_hold_drop(h);
    }
}

int px_hold_init(struct px_server *srv)
{
    int rc = hmap_init(&srv->holds, 1024);

    if (rc < 0)
        return rc;
    list_init(&srv->renew_due);
    srv->renew_hook.fn = renew_hook;
    sched_loop_hook_add(srv->loop, &srv->renew_hook);
    return 0;
}

void px_hold_deinit(struct px_server *srv)
{
    size_t i;

    sched_loop_hook_del(srv->loop, &srv->renew_hook);
    for (i = 0; i < srv->holds.nbuckets; i++) {
        while (srv->holds.buckets[i]) {
            struct px_hold *h = LP_CONTAINER_OF(srv->holds.buckets[i], struct px_hold, node);

            px_hold_drop(h);
        }
    }
    hmap_deinit(&srv->holds);
}
