/* The pool's pub/sub side: one upstream connection (an rconn of kind
 * PUBSUB) shared by every listener, one upstream SUBSCRIBE per channel, and
 * a channel table keyed by name.
 *
 * Channel record life (struct pool_chan, owned by the pool):
 *
 *     pool_sub_start --> SUBSCRIBING (SUBSCRIBE now if the connection is
 *                        READY, else in the batch sent when it gets READY)
 *     SUBSCRIBING --"subscribe" confirmation--> SUBSCRIBED, listener: READY
 *     SUBSCRIBING | SUBSCRIBED --pool_sub_stop--> UNSUBSCRIBING (UNSUBSCRIBE)
 *     UNSUBSCRIBING --"unsubscribe" confirmation--> freed; or, when a
 *                        listener attached again meanwhile, SUBSCRIBING with
 *                        a new SUBSCRIBE
 *     connection lost --> records without a listener are freed, the others
 *                        go back to SUBSCRIBING; listeners that had READY
 *                        get LOST; at READY all are re-subscribed,
 *                        SUBSCRIBE_BATCH channels per command, and each
 *                        listener gets READY again
 *
 * So each listener sees READY (MESSAGE*) LOST READY (MESSAGE*) ...: LOST
 * only ever follows a READY, however often a reconnect attempt fails.
 *
 * Invariants:
 *   - at most one record per name and one listener per record;
 *   - while the connection is not READY nothing is in flight, every record
 *     has a listener and is SUBSCRIBING (so a stop frees the record at once);
 *   - Redis answers in order, so a "subscribe" confirmation that arrives
 *     while UNSUBSCRIBING is stale and ignored: the "unsubscribe" follows;
 *   - MESSAGE is delivered only in SUBSCRIBED, i.e. after READY.
 *
 * Re-entrancy: a listener callback may start or stop any subscription (its
 * own included) and may call pool_stop(). After a callback this file does
 * not touch the record again; LOST is delivered from a detached list, one
 * record at a time, so records removed during delivery are never visited. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "common/compiler.h"
#include "common/hmap.h"
#include "common/list.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/pool.h"
#include "pool/rconn.h"
#include "pool/resp.h"

/* Channels per SUBSCRIBE when re-subscribing after a reconnect: bounds one
 * command's size while keeping thousands of channels to a few commands. */
#define SUBSCRIBE_BATCH 512

enum chan_state {
    CHAN_SUBSCRIBING = 1,   /* SUBSCRIBE queued or sent, not confirmed */
    CHAN_SUBSCRIBED = 2,    /* confirmed: messages flow */
    CHAN_UNSUBSCRIBING = 3, /* UNSUBSCRIBE sent, not confirmed */
};

struct pool_chan {
    struct hmap_node hnode; /* in pool.chans, by name */
    struct list node;       /* in pool.chan_list, or a LOST delivery list */
    struct pool_sub *sub;   /* borrowed: the listener, or NULL once stopped */
    enum chan_state state;  /* see the file comment */
    size_t len;             /* name length */
    char name[];            /* owned: the name, NUL-terminated */
};

static bool pubsub_ready(const struct pool *p)
{
    return pool__rconn_is_ready(&p->pubsub);
}

static struct pool_chan *chan_find(const struct pool *p, const char *name, size_t len)
{
    struct hmap_node *n;

    for (n = hmap_first(&p->chans, hash_bytes(name, len)); n; n = hmap_next(n)) {
        struct pool_chan *ch = LP_CONTAINER_OF(n, struct pool_chan, hnode);

        if (ch->len == len && memcmp(ch->name, name, len) == 0)
            return ch;
    }
    return NULL;
}

static struct pool_chan *chan_new(struct pool *p, const char *name, size_t len)
{
    struct pool_chan *ch = malloc(sizeof(*ch) + len + 1);

    if (!ch)
        return NULL;
    ch->sub = NULL;
    ch->state = CHAN_SUBSCRIBING;
    ch->len = len;
    memcpy(ch->name, name, len);
    ch->name[len] = '\0';
    /* A failed grow still inserts; the map just stays denser. */
    (void)hmap_insert(&p->chans, &ch->hnode, hash_bytes(name, len));
    list_add_tail(&p->chan_list, &ch->node);
    return ch;
}

static void chan_free(struct pool *p, struct pool_chan *ch)
{
    hmap_remove(&p->chans, &ch->hnode);
    list_del_init(&ch->node);
    free(ch);
}

/* SUBSCRIBE or UNSUBSCRIBE one channel. Returns 0 or -ENOMEM. */
static int chan_send(struct pool *p, const char *verb, const struct pool_chan *ch)
{
    const char *argv[2] = {verb, ch->name};
    const size_t lens[2] = {strlen(verb), ch->len};

    return pool__rconn_send(&p->pubsub, 2, argv, lens);
}

int pool_sub_start(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                   pool_sub_fn *cb)
{
    struct pool_chan *ch = chan_find(p, channel, len);
    bool fresh = ch == NULL;

    if (ch && ch->sub)
        return -EEXIST;
    if (fresh) {
        ch = chan_new(p, channel, len);
        if (!ch)
            return -ENOMEM;
    }
    /* An existing record without a listener is UNSUBSCRIBING: it is
     * re-subscribed when the unsubscribe is confirmed. */
    if (fresh && pubsub_ready(p) && chan_send(p, "SUBSCRIBE", ch) < 0) {
        chan_free(p, ch);
        return -ENOMEM;
    }
    s->cb = cb;
    s->chan = ch;
    ch->sub = s;
    p->nsubs++;
    return 0;
}

void pool_sub_stop(struct pool *p, struct pool_sub *s)
{
    struct pool_chan *ch = s->chan;

    if (!ch)
        return;
    s->chan = NULL;
    ch->sub = NULL;
    p->nsubs--;
    if (!pubsub_ready(p)) {
        chan_free(p, ch);
        return;
    }
    if (ch->state == CHAN_UNSUBSCRIBING)
        return;
    ch->state = CHAN_UNSUBSCRIBING;
    if (chan_send(p, "UNSUBSCRIBE", ch) < 0)
        pool__rconn_recycle_later(&p->pubsub);
}

/* One SUBSCRIBE for the k records starting at *pos; advances *pos. */
static int subscribe_batch(struct pool *p, struct list **pos, size_t k)
{
    struct buf *b = pool__rconn_out(&p->pubsub);
    int err = pool__resp_array(b, k + 1);
    size_t i;

    if (err == 0)
        err = pool__resp_bulk(b, "SUBSCRIBE", 9);
    for (i = 0; err == 0 && i < k; i++, *pos = (*pos)->next) {
        const struct pool_chan *ch = list_entry(*pos, struct pool_chan, node);

        err = pool__resp_bulk(b, ch->name, ch->len);
    }
    return err;
}

void pool__pubsub_up(struct pool *p)
{
    size_t left = p->chans.count, k;
    struct list *pos = p->chan_list.next;
    int err = 0;

    if (left == 0)
        return;
    log_msg(LOG_LVL_INFO, "pool: pubsub subscribing %zu channels", left);
    while (left > 0 && err == 0) {
        k = LP_MIN(left, (size_t)SUBSCRIBE_BATCH);
        err = subscribe_batch(p, &pos, k);
        left -= k;
    }
    pool__rconn_flush(&p->pubsub);
    if (err < 0) {
        /* A partial command may be queued: only a new connection is safe. */
        pool__set_error(p, "pubsub: SUBSCRIBE: %s", strerror(-err));
        pool__rconn_recycle_later(&p->pubsub);
    }
}

/* Records without a listener go; the rest wait for READY again. Returns
 * (in todo) the records whose listener had READY and must hear LOST. */
static void pubsub_reset(struct pool *p, struct list *todo)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->chan_list)
    {
        struct pool_chan *ch = list_entry(pos, struct pool_chan, node);
        bool told_ready = ch->state == CHAN_SUBSCRIBED;

        if (!ch->sub) {
            chan_free(p, ch);
            continue;
        }
        ch->state = CHAN_SUBSCRIBING;
        if (told_ready) {
            list_del_init(pos);
            list_add_tail(todo, pos);
        }
    }
}

void pool__pubsub_down(struct pool *p)
{
    struct list todo, *n;

    list_init(&todo);
    pubsub_reset(p, &todo);
    while ((n = list_first(&todo))) {
        struct pool_chan *ch = list_entry(n, struct pool_chan, node);

        list_del_init(n);
        list_add_tail(&p->chan_list, n);
        if (ch->sub)
            ch->sub->cb(ch->sub, POOL_SUB_LOST, NULL, 0);
    }
}

static void on_subscribed(struct pool_chan *ch)
{
    if (ch->state != CHAN_SUBSCRIBING)
        return;
    ch->state = CHAN_SUBSCRIBED;
    if (ch->sub)
        ch->sub->cb(ch->sub, POOL_SUB_READY, NULL, 0);
}

static void on_unsubscribed(struct pool *p, struct pool_chan *ch)
{
    if (ch->state != CHAN_UNSUBSCRIBING)
        return;
    if (!ch->sub) {
        chan_free(p, ch);
        return;
    }
    ch->state = CHAN_SUBSCRIBING;
    if (chan_send(p, "SUBSCRIBE", ch) < 0)
        pool__rconn_recycle_later(&p->pubsub);
}

static void on_message(struct pool_chan *ch, const redisReply *payload)
{
    if (ch->state != CHAN_SUBSCRIBED || !ch->sub || payload->type != REDIS_REPLY_STRING)
        return;
    ch->sub->cb(ch->sub, POOL_SUB_MESSAGE, payload->str, payload->len);
}

void pool__pubsub_reply(struct pool *p, const redisReply *r)
{
    const redisReply *kind, *name;
    struct pool_chan *ch;

    if (r->type == REDIS_REPLY_ERROR) {
        log_msg(LOG_LVL_WARN, "pool: pubsub error reply: %.*s", (int)LP_MIN(r->len, (size_t)200),
                r->str);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
        return;
    kind = r->element[0];
    name = r->element[1];
    if (name->type != REDIS_REPLY_STRING)
        return;
    ch = chan_find(p, name->str, name->len);
    if (!ch)
        return;
    if (pool__resp_str_is(kind, "message"))
        on_message(ch, r->element[2]);
    else if (pool__resp_str_is(kind, "subscribe"))
        on_subscribed(ch);
    else if (pool__resp_str_is(kind, "unsubscribe"))
        on_unsubscribed(p, ch);
}

void pool__pubsub_deinit(struct pool *p)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->chan_list)
    {
        struct pool_chan *ch = list_entry(pos, struct pool_chan, node);

        if (ch->sub)
            ch->sub->chan = NULL;
        chan_free(p, ch);
    }
    p->nsubs = 0;
    hmap_deinit(&p->chans);
}
