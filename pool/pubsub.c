/* The pool's pub/sub side: one upstream subscription per channel, on the
 * pub/sub connection (an rconn of kind PUBSUB) of the channel's home
 * node, and a channel table keyed by name.
 *
 * Home: the single node of a plain pool; in a cluster the master that
 * owns the channel's slot (pool_slot() of the name), in both modes:
 * sharded (SSUBSCRIBE, which Redis accepts only there) and classic
 * (SUBSCRIBE, which any node would take: the slot owner spreads channels
 * over the masters and is a deterministic choice). A channel whose slot
 * has no known owner is homeless (p->homeless) until the map has one.
 *
 * Channel record life (struct pool_chan, owned by the pool):
 *
 *     pool_sub_start --> SUBSCRIBING (SUBSCRIBE now if the home's connection
 *                        is READY, else in the batch sent when it gets READY)
 *     SUBSCRIBING --"subscribe" confirmation--> SUBSCRIBED, listener: READY
 *     SUBSCRIBING | SUBSCRIBED --pool_sub_stop--> UNSUBSCRIBING (UNSUBSCRIBE)
 *     UNSUBSCRIBING --"unsubscribe" confirmation--> freed; or, when a
 *                        listener attached again meanwhile, SUBSCRIBING with
 *                        a new SUBSCRIBE
 *     home's connection lost --> records without a listener are freed, the
 *                        others go back to SUBSCRIBING; listeners that had
 *                        READY get LOST; at READY all are re-subscribed
 *                        (classic: SUBSCRIBE_BATCH channels per command;
 *                        sharded: one per command, as SSUBSCRIBE takes
 *                        channels of one slot only) and each listener gets
 *                        READY again
 *     unsolicited "sunsubscribe" (Redis dropped the channel: its slot moved
 *                        or its shard failed over) --> homeless,
 *                        SUBSCRIBING, LOST if it had READY; a topology
 *                        refresh is asked for and the record is re-homed
 *                        on the slot's new owner when it answers
 *     slot owner changed (pool__pubsub_rehome) --> SUBSCRIBING on the new
 *                        owner (classic: UNSUBSCRIBE on the old one), LOST
 *                        if it had READY; a record without a listener is
 *                        freed
 *     "-MOVED slot addr" on a pub/sub connection (a SSUBSCRIBE sent on a
 *                        stale map) --> the map learns the owner and the
 *                        slot's channels are re-homed there
 *
 * So each listener sees READY (MESSAGE*) LOST READY (MESSAGE*) ...: LOST
 * only ever follows a READY, however often a reconnect attempt fails or a
 * channel moves.
 *
 * Invariants:
 *   - at most one record per name and one listener per record; a record is
 *     on exactly one list: its home's chans, p->homeless, or (while LOST is
 *     being delivered) a local delivery list;
 *   - while the home's connection is not READY nothing is in flight for its
 *     records, every one has a listener and is SUBSCRIBING (so a stop frees
 *     the record at once);
 *   - only pushes from a record's home count: a confirmation or message
 *     from a node the record has left is stale and ignored;
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

#include "common/compiler.h"
#include "common/hmap.h"
#include "common/list.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/pool.h"
#include "pool/rconn.h"
#include "pool/reply.h"
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
    struct hmap_node hnode;  /* in pool.chans, by name */
    struct list node;        /* in home->chans, pool.homeless, or a LOST delivery list */
    struct pool_node *home;  /* borrowed: node it is subscribed on, NULL when homeless */
    struct pool_sub *sub;    /* borrowed: the listener, or NULL once stopped */
    enum chan_state state;   /* see the file comment */
    enum pool_sub_kind kind; /* as started: AUTO follows p->sharded */
    int slot;                /* cluster: pool_slot(name); -1 for a single node */
    size_t len;              /* name length */
    char name[];             /* owned: the name, NUL-terminated */
};

/* The namespace a record lives in upstream (never AUTO): an AUTO record
 * follows the pool's mode, decided before any pub/sub connection starts. */
static enum pool_sub_kind chan_ns(const struct pool *p, const struct pool_chan *ch)
{
    if (ch->kind == POOL_SUB_AUTO)
        return p->sharded ? POOL_SUB_SHARDED : POOL_SUB_CLASSIC;
    return ch->kind;
}

static const char *verb_sub(const struct pool *p, const struct pool_chan *ch)
{
    static const char *const v[] = {"SUBSCRIBE", "SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE"};

    return v[chan_ns(p, ch)];
}

static const char *verb_unsub(const struct pool *p, const struct pool_chan *ch)
{
    static const char *const v[] = {"UNSUBSCRIBE", "UNSUBSCRIBE", "SUNSUBSCRIBE", "PUNSUBSCRIBE"};

    return v[chan_ns(p, ch)];
}

static bool home_ready(const struct pool_node *n)
{
    return n && pool__rconn_is_ready(&n->pubsub);
}

/* Where a channel of slot belongs now. */
static struct pool_node *chan_owner(struct pool *p, int slot)
{
    return p->cl ? pool__cluster_owner(p, slot) : p->single;
}

/* The record of name in namespace ns (CLASSIC, SHARDED or PATTERN). */
static struct pool_chan *chan_find(const struct pool *p, const char *name, size_t len,
                                   enum pool_sub_kind ns)
{
    struct hmap_node *n;

    for (n = hmap_first(&p->chans, hash_bytes(name, len)); n; n = hmap_next(n)) {
        struct pool_chan *ch = LP_CONTAINER_OF(n, struct pool_chan, hnode);

        if (ch->len == len && memcmp(ch->name, name, len) == 0 && chan_ns(p, ch) == ns)
            return ch;
    }
    return NULL;
}

/* Links ch into the list of home (the homeless list for NULL). */
static void chan_link(struct pool *p, struct pool_chan *ch, struct pool_node *home)
{
    ch->home = home;
    list_add_tail(home ? &home->chans : &p->homeless, &ch->node);
}

static struct pool_chan *chan_new(struct pool *p, const char *name, size_t len,
                                  enum pool_sub_kind kind)
{
    struct pool_chan *ch = malloc(sizeof(*ch) + len + 1);

    if (!ch)
        return NULL;
    ch->sub = NULL;
    ch->kind = kind;
    ch->state = CHAN_SUBSCRIBING;
    ch->slot = p->cl ? pool_slot(name, len) : -1;
    ch->len = len;
    memcpy(ch->name, name, len);
    ch->name[len] = '\0';
    /* A failed grow still inserts; the map just stays denser. */
    (void)hmap_insert(&p->chans, &ch->hnode, hash_bytes(name, len));
    list_init(&ch->node);
    chan_link(p, ch, chan_owner(p, ch->slot));
    return ch;
}

static void chan_free(struct pool *p, struct pool_chan *ch)
{
    hmap_remove(&p->chans, &ch->hnode);
    list_del_init(&ch->node);
    free(ch);
}

/* SUBSCRIBE or UNSUBSCRIBE (sharded: the S forms) one channel on its
 * home, which must be READY. Returns 0 or -ENOMEM. */
static int chan_send_on(struct pool_node *n, const char *verb, const struct pool_chan *ch)
{
    const char *argv[2] = {verb, ch->name};
    const size_t lens[2] = {strlen(verb), ch->len};

    return pool__rconn_send(&n->pubsub, 2, argv, lens);
}

/* Subscribes ch on its home if that is READY; a failed append leaves the
 * stream unsure, so the connection is recycled (and re-subscribes all). */
static void chan_subscribe(struct pool *p, struct pool_chan *ch)
{
    if (home_ready(ch->home) && chan_send_on(ch->home, verb_sub(p, ch), ch) < 0)
        pool__rconn_recycle_later(&ch->home->pubsub);
}

int pool_sub_start(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                   pool_sub_fn *cb)
{
    return pool_sub_start_kind(p, s, channel, len, POOL_SUB_AUTO, cb);
}

int pool_sub_start_kind(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                        enum pool_sub_kind kind, pool_sub_fn *cb)
{
    enum pool_sub_kind ns = kind;
    struct pool_chan *ch;
    bool fresh;

    if ((unsigned)kind > POOL_SUB_PATTERN)
        return -EINVAL;
    if (kind == POOL_SUB_AUTO)
        ns = p->sharded ? POOL_SUB_SHARDED : POOL_SUB_CLASSIC;
    ch = chan_find(p, channel, len, ns);
    fresh = ch == NULL;
    if (ch && ch->sub)
        return -EEXIST;
    if (ch)
        ch->kind = kind; /* same namespace: the same commands */
    if (fresh) {
        ch = chan_new(p, channel, len, kind);
        if (!ch)
            return -ENOMEM;
    }
    /* An existing record without a listener is UNSUBSCRIBING: it is
     * re-subscribed when the unsubscribe is confirmed. */
    if (fresh && home_ready(ch->home) && chan_send_on(ch->home, verb_sub(p, ch), ch) < 0) {
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
    if (!home_ready(ch->home)) {
        chan_free(p, ch);
        return;
    }
    if (ch->state == CHAN_UNSUBSCRIBING)
        return;
    ch->state = CHAN_UNSUBSCRIBING;
    if (chan_send_on(ch->home, verb_unsub(p, ch), ch) < 0)
        pool__rconn_recycle_later(&ch->home->pubsub);
}

/* One verb command for the next k records of namespace ns from *pos;
 * advances *pos past the last one taken. */
static int subscribe_batch(struct pool *p, struct pool_node *n, enum pool_sub_kind ns,
                           const char *verb, struct list **pos, size_t k)
{
    struct buf *b = pool__rconn_out(&n->pubsub);
    int err = pool__resp_array(b, k + 1);
    size_t i = 0;

    if (err == 0)
        err = pool__resp_bulk(b, verb, strlen(verb));
    for (; err == 0 && i < k; *pos = (*pos)->next) {
        const struct pool_chan *ch = list_entry(*pos, struct pool_chan, node);

        if (chan_ns(p, ch) != ns)
            continue;
        err = pool__resp_bulk(b, ch->name, ch->len);
        i++;
    }
    return err;
}

/* Records of namespace ns homed on n. */
static size_t count_ns(const struct pool *p, const struct pool_node *n, enum pool_sub_kind ns)
{
    const struct list *pos;
    size_t k = 0;

    for (pos = n->chans.next; pos != &n->chans; pos = pos->next)
        k += chan_ns(p, list_entry(pos, struct pool_chan, node)) == ns;
    return k;
}

/* Classic channels and patterns: SUBSCRIBE_BATCH names per command. */
static int subscribe_batched(struct pool *p, struct pool_node *n, enum pool_sub_kind ns,
                             const char *verb)
{
    struct list *pos = n->chans.next;
    size_t left = count_ns(p, n, ns), k;
    int err = 0;

    while (left > 0 && err == 0) {
        k = LP_MIN(left, (size_t)SUBSCRIBE_BATCH);
        err = subscribe_batch(p, n, ns, verb, &pos, k);
        left -= k;
    }
    return err;
}

/* One SSUBSCRIBE per sharded channel (one slot per command); with
 * all_kinds, every record still SUBSCRIBING (a retry after an error). */
static int subscribe_each(struct pool *p, struct pool_node *n, bool all_kinds)
{
    struct list *pos;
    int err = 0;

    for (pos = n->chans.next; pos != &n->chans && err == 0; pos = pos->next) {
        const struct pool_chan *ch = list_entry(pos, struct pool_chan, node);

        if (all_kinds ? ch->state == CHAN_SUBSCRIBING : chan_ns(p, ch) == POOL_SUB_SHARDED)
            err = chan_send_on(n, verb_sub(p, ch), ch);
    }
    return err;
}

static size_t list_count(const struct list *head)
{
    const struct list *pos;
    size_t k = 0;

    for (pos = head->next; pos != head; pos = pos->next)
        k++;
    return k;
}

void pool__pubsub_up(struct pool_node *n)
{
    struct pool *p = n->pool;
    size_t count = list_count(&n->chans);
    int err;

    if (count == 0)
        return;
    log_msg(LOG_LVL_INFO, "pool: pubsub %s subscribing %zu channels", n->addr.where, count);
    err = subscribe_each(p, n, false);
    if (err == 0)
        err = subscribe_batched(p, n, POOL_SUB_CLASSIC, "SUBSCRIBE");
    if (err == 0)
        err = subscribe_batched(p, n, POOL_SUB_PATTERN, "PSUBSCRIBE");
    pool__rconn_flush(&n->pubsub);
    if (err < 0) {
        /* A partial command may be queued: only a new connection is safe. */
        pool__set_error(p, "pubsub: subscribing: %s", strerror(-err));
        pool__rconn_recycle_later(&n->pubsub);
    }
}

void pool__pubsub_retry(struct pool_node *n)
{
    n->resub = false;
    if (!home_ready(n))
        return;
    if (subscribe_each(n->pool, n, true) < 0)
        pool__rconn_recycle_later(&n->pubsub);
}

/* Delivers LOST to the records on todo (detached), one at a time: each
 * goes back to its home's list first, so a callback that stops it (or
 * any other) finds every record linked somewhere. */
static void deliver_lost(struct pool *p, struct list *todo)
{
    struct list *n;

    while ((n = list_first(todo))) {
        struct pool_chan *ch = list_entry(n, struct pool_chan, node);

        list_del_init(n);
        chan_link(p, ch, ch->home);
        if (ch->sub)
            ch->sub->cb(ch->sub, POOL_SUB_LOST, NULL, 0);
    }
}

/* Records without a listener go; the rest wait for READY again. Returns
 * (in todo) the records whose listener had READY and must hear LOST. */
static void pubsub_reset(struct pool *p, struct pool_node *home, struct list *todo)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &home->chans)
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

void pool__pubsub_down(struct pool_node *n)
{
    struct list todo;

    list_init(&todo);
    pubsub_reset(n->pool, n, &todo);
    deliver_lost(n->pool, &todo);
}

/* Moves ch from its home to want (NULL: homeless), subscribing there if
 * READY. A record whose listener had READY goes to todo for its LOST. A
 * classic subscription on the old node is dropped (it would keep
 * receiving every PUBLISH); a sharded one is gone already or goes when
 * that node learns it lost the slot. */
static void chan_move(struct pool *p, struct pool_chan *ch, struct pool_node *want,
                      struct list *todo)
{
    struct pool_node *old = ch->home;
    bool told = ch->state == CHAN_SUBSCRIBED;

    if (!ch->sub) {
        chan_free(p, ch);
        return;
    }
    if (chan_ns(p, ch) != POOL_SUB_SHARDED && home_ready(old) && ch->state != CHAN_UNSUBSCRIBING &&
        chan_send_on(old, verb_unsub(p, ch), ch) < 0)
        pool__rconn_recycle_later(&old->pubsub);
    list_del_init(&ch->node);
    ch->state = CHAN_SUBSCRIBING;
    chan_link(p, ch, want);
    chan_subscribe(p, ch);
    if (told) {
        list_del_init(&ch->node);
        list_add_tail(todo, &ch->node);
    }
}

/* Moves the records of list whose home should be another node. */
static void rehome_list(struct pool *p, struct list *head, struct list *todo)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, head)
    {
        struct pool_chan *ch = list_entry(pos, struct pool_chan, node);
        struct pool_node *want = chan_owner(p, ch->slot);

        if (want != ch->home)
            chan_move(p, ch, want, todo);
    }
}

void pool__pubsub_rehome(struct pool *p)
{
    struct list todo, *pos;

    list_init(&todo);
    rehome_list(p, &p->homeless, &todo);
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next)
        rehome_list(p, &list_entry(pos, struct pool_node, link)->chans, &todo);
    deliver_lost(p, &todo);
}

uint64_t pool__pubsub_homeless(const struct pool *p)
{
    return list_count(&p->homeless);
}

uint64_t pool__pubsub_count(const struct pool_node *n)
{
    const struct list *pos;
    uint64_t k = 0;

    for (pos = n->chans.next; pos != &n->chans; pos = pos->next)
        k += list_entry(pos, struct pool_chan, node)->sub != NULL;
    return k;
}

static void on_subscribed(struct pool_chan *ch)
{
    if (ch->state != CHAN_SUBSCRIBING)
        return;
    ch->state = CHAN_SUBSCRIBED;
    if (ch->sub)
        ch->sub->cb(ch->sub, POOL_SUB_READY, NULL, 0);
}

/* Redis dropped a subscription we did not ask to drop: in a cluster, the
 * channel's slot left this node (migration, failover), and the record
 * waits, homeless, for the refreshed map (a stale map could only send it
 * back). A single node has nowhere else to go: it subscribes again. */
static void on_dropped(struct pool *p, struct pool_chan *ch)
{
    struct list todo;

    list_init(&todo);
    log_msg(LOG_LVL_INFO, "pool: pubsub %s dropped channel %.*s (slot %d)", ch->home->addr.where,
            (int)LP_MIN(ch->len, (size_t)64), ch->name, ch->slot);
    if (p->cl) {
        chan_move(p, ch, NULL, &todo);
        pool__cluster_refresh(p);
    } else {
        bool told = ch->state == CHAN_SUBSCRIBED;

        ch->state = CHAN_SUBSCRIBING;
        chan_subscribe(p, ch);
        if (told) {
            list_del_init(&ch->node);
            list_add_tail(&todo, &ch->node);
        }
    }
    deliver_lost(p, &todo);
}

static void on_unsubscribed(struct pool *p, struct pool_chan *ch)
{
    if (ch->state != CHAN_UNSUBSCRIBING) {
        on_dropped(p, ch);
        return;
    }
    if (!ch->sub) {
        chan_free(p, ch);
        return;
    }
    ch->state = CHAN_SUBSCRIBING;
    chan_subscribe(p, ch);
}

/* A message; chan is the channel it was published to (for a pattern:
 * the matching channel), readable with pool_sub_msg_channel() during the
 * callback. */
static void on_message(struct pool *p, struct pool_chan *ch, const struct pool_reply *chan,
                       const struct pool_reply *payload)
{
    if (ch->state != CHAN_SUBSCRIBED || !ch->sub || payload->type != POOL_REPLY_STRING ||
        chan->type != POOL_REPLY_STRING)
        return;
    p->msg_chan = chan->str;
    p->msg_chan_len = chan->len;
    ch->sub->cb(ch->sub, POOL_SUB_MESSAGE, payload->str, payload->len);
}

const char *pool_sub_msg_channel(const struct pool *p, size_t *len)
{
    *len = p->msg_chan_len;
    return p->msg_chan;
}

/* An error on a pub/sub connection answers one of our (S)SUBSCRIBEs.
 * MOVED names the slot's owner: the map learns it and the slot's
 * channels follow. Anything else (CLUSTERDOWN during a failover) is
 * retried with the next topology tick. */
static void on_error(struct pool_node *n, const struct pool_reply *r)
{
    struct pool *p = n->pool;
    char host[POOL__HOST_MAX];
    int slot, port;

    if (p->cl && pool__resp_is_error(r, "MOVED ") &&
        pool__redirect_parse(r, &slot, host, sizeof(host), &port) == 0 &&
        pool__cluster_moved(p, n, slot, host, strlen(host), port)) {
        return; /* the channels follow with the deferred re-home */
    }
    log_msg(LOG_LVL_WARN, "pool: pubsub %s error reply: %.*s", n->addr.where,
            (int)LP_MIN(r->len, (size_t)200), r->str);
    if (p->cl) {
        n->resub = true;
        pool__cluster_refresh(p);
    }
}

/* What a push is about: its namespace and event, from its kind. */
struct push_kind {
    const char *name;
    enum pool_sub_kind ns;
    int ev; /* 0 message, 1 subscribed, 2 unsubscribed */
};

static const struct push_kind push_kinds[] = {
    {"message", POOL_SUB_CLASSIC, 0},      {"smessage", POOL_SUB_SHARDED, 0},
    {"pmessage", POOL_SUB_PATTERN, 0},     {"subscribe", POOL_SUB_CLASSIC, 1},
    {"ssubscribe", POOL_SUB_SHARDED, 1},   {"psubscribe", POOL_SUB_PATTERN, 1},
    {"unsubscribe", POOL_SUB_CLASSIC, 2},  {"sunsubscribe", POOL_SUB_SHARDED, 2},
    {"punsubscribe", POOL_SUB_PATTERN, 2},
};

static const struct push_kind *push_kind_of(const struct pool_reply *kind)
{
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(push_kinds); i++)
        if (pool__resp_str_is(kind, push_kinds[i].name))
            return &push_kinds[i];
    return NULL;
}

void pool__pubsub_reply(struct pool_node *n, const struct pool_reply *r)
{
    const struct push_kind *pk;
    const struct pool_reply *name;
    struct pool *p = n->pool;
    struct pool_chan *ch;

    if (r->type == POOL_REPLY_ERROR) {
        on_error(n, r);
        return;
    }
    if (r->type != POOL_REPLY_ARRAY || r->elements < 3)
        return;
    pk = push_kind_of(r->element[0]);
    name = r->element[1];
    if (!pk || name->type != POOL_REPLY_STRING)
        return;
    ch = chan_find(p, name->str, name->len, pk->ns);
    if (!ch || ch->home != n)
        return;
    if (pk->ev == 0 && pk->ns == POOL_SUB_PATTERN && r->elements >= 4)
        on_message(p, ch, r->element[2], r->element[3]);
    else if (pk->ev == 0 && pk->ns != POOL_SUB_PATTERN)
        on_message(p, ch, name, r->element[2]);
    else if (pk->ev == 1)
        on_subscribed(ch);
    else if (pk->ev == 2)
        on_unsubscribed(p, ch);
}

static void deinit_list(struct pool *p, struct list *head)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, head)
    {
        struct pool_chan *ch = list_entry(pos, struct pool_chan, node);

        if (ch->sub)
            ch->sub->chan = NULL;
        chan_free(p, ch);
    }
}

void pool__pubsub_deinit(struct pool *p)
{
    struct list *pos;

    deinit_list(p, &p->homeless);
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next)
        deinit_list(p, &list_entry(pos, struct pool_node, link)->chans);
    p->nsubs = 0;
    hmap_deinit(&p->chans);
}
