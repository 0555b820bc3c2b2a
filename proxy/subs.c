/* Shared subscriptions and pass-through pub/sub; see subs.h. */
#include "proxy/subs.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/log.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/climem.h"
#include "proxy/cmd.h"
#include "proxy/push.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- hubs --------------------------------------------------------------- */

struct px_hub {
    struct hmap_node node;   /* in subs->hubs, by name */
    struct px_server *srv;   /* borrowed */
    struct pool_sub sub;     /* the pool's one listener for the name */
    struct list lsns;        /* struct px_sub_lsn, in joining order */
    unsigned nlsns;          /* listeners */
    unsigned nclients;       /* of which clients' */
    struct list *cursor;     /* next listener of the delivery under way */
    bool delivering;         /* a delivery is walking lsns */
    bool ready;              /* upstream subscription confirmed */
    enum pool_sub_kind kind; /* as asked of the pool (AUTO for the pool's own mode) */
    size_t len;              /* name length */
    char name[];             /* owned: NUL-terminated */
};

/* Per server (srv->subs). */
struct px_subs {
    struct hmap hubs;     /* struct px_hub */
    uint64_t nhubs;       /* hubs */
    uint64_t channels;    /* hubs with nclients > 0 */
    uint64_t subscribers; /* client subscriptions with a hub */
    uint64_t delivered;
    uint64_t published;
    uint64_t dropped;
};

int px_subs_init(struct px_server *srv)
{
    struct px_subs *s = calloc(1, sizeof(*s));

    if (!s || hmap_init(&s->hubs, 64) < 0) {
        free(s);
        return -ENOMEM;
    }
    srv->subs = s;
    return 0;
}

/* Hubs still present belong to listeners that outlive this call only at
 * shutdown: detach them so nothing points into freed hubs. */
void px_subs_deinit(struct px_server *srv)
{
    struct px_subs *s = srv->subs;
    size_t i;

    if (!s)
        return;
    for (i = 0; i < s->hubs.nbuckets; i++) {
        while (s->hubs.buckets[i]) {
            struct px_hub *h = LP_CONTAINER_OF(s->hubs.buckets[i], struct px_hub, node);
            struct list *n;

            while ((n = list_first(&h->lsns))) {
                list_del_init(n);
                list_entry(n, struct px_sub_lsn, node)->hub = NULL;
            }
            pool_sub_stop(srv->pool, &h->sub);
            hmap_remove(&s->hubs, &h->node);
            free(h);
        }
    }
    hmap_deinit(&s->hubs);
    free(s);
    srv->subs = NULL;
}

/* The namespace a hub of kind serves now: AUTO follows the pool's mode
 * once it is known, and matches only AUTO before (a cluster still
 * detecting), so a client's SUBSCRIBE then keeps its own classic hub
 * rather than one that may turn sharded. (A classic hub and an AUTO hub of
 * one name both made before detection, which then picks classic, are two
 * records of one channel in the pool: the later one is not confirmed and
 * its listeners fall back to polling. Lock waits do not start that early.) */
static enum pool_sub_kind hub_ns(struct px_server *srv, enum pool_sub_kind kind)
{
    if (kind != POOL_SUB_AUTO || !pool_pubsub_known(srv->pool))
        return kind;
    return pool_pubsub_sharded(srv->pool) ? POOL_SUB_SHARDED : POOL_SUB_CLASSIC;
}

static uint64_t hub_hash(const char *name, size_t len)
{
    return hash_bytes(name, len);
}

/* The hub of name serving namespace ns. */
static struct px_hub *hub_find(struct px_server *srv, const char *name, size_t len,
                               enum pool_sub_kind ns)
{
    struct hmap_node *n;

    for (n = hmap_first(&srv->subs->hubs, hub_hash(name, len)); n; n = hmap_next(n)) {
        struct px_hub *h = LP_CONTAINER_OF(n, struct px_hub, node);

        if (h->len == len && memcmp(h->name, name, len) == 0 && hub_ns(srv, h->kind) == ns)
            return h;
    }
    return NULL;
}

static void hub_free(struct px_hub *h)
{
    struct px_subs *s = h->srv->subs;

    pool_sub_stop(h->srv->pool, &h->sub);
    hmap_remove(&s->hubs, &h->node);
    s->nhubs--;
    free(h);
}

/* Hands ev to every listener; each may leave, or make others leave. */
static void hub_deliver(struct px_hub *h, enum pool_sub_event ev, const char *chan, size_t clen,
                        const char *msg, size_t len)
{
    struct list *pos;

    LP_BUG_ON(h->delivering);
    h->delivering = true;
    for (pos = h->lsns.next; pos != &h->lsns; pos = h->cursor) {
        struct px_sub_lsn *l = list_entry(pos, struct px_sub_lsn, node);

        h->cursor = pos->next;
        l->cb(l, ev, chan, clen, msg, len);
    }
    h->delivering = false;
    if (h->nlsns == 0)
        hub_free(h);
}

static void hub_on_sub(struct pool_sub *sub, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct px_hub *h = LP_CONTAINER_OF(sub, struct px_hub, sub);
    const char *chan = h->name;
    size_t clen = h->len;

    if (ev == POOL_SUB_MESSAGE)
        chan = pool_sub_msg_channel(h->srv->pool, &clen);
    h->ready = ev != POOL_SUB_LOST && (ev == POOL_SUB_READY || h->ready);
    hub_deliver(h, ev, chan, clen, msg, len);
}

static struct px_hub *hub_create(struct px_server *srv, const char *name, size_t len,
                                 enum pool_sub_kind kind, int *err)
{
    struct px_hub *h = calloc(1, sizeof(*h) + len + 1);

    *err = -ENOMEM;
    if (!h)
        return NULL;
    h->srv = srv;
    h->kind = kind;
    h->len = len;
    memcpy(h->name, name, len);
    list_init(&h->lsns);
    *err = pool_sub_start_kind(srv->pool, &h->sub, name, len, kind, hub_on_sub);
    if (*err < 0) {
        free(h);
        return NULL;
    }
    (void)hmap_insert(&srv->subs->hubs, &h->node, hub_hash(name, len));
    srv->subs->nhubs++;
    return h;
}

int px_subs_listen(struct px_server *srv, struct px_sub_lsn *l, const char *name, size_t len,
                   enum pool_sub_kind kind, px_sub_lsn_fn *cb)
{
    struct px_hub *h = hub_find(srv, name, len, hub_ns(srv, kind));
    int err;

    if (!h && !(h = hub_create(srv, name, len, kind, &err)))
        return err;
    l->hub = h;
    l->cb = cb;
    list_add_tail(&h->lsns, &l->node);
    h->nlsns++;
    if (l->client && h->nclients++ == 0)
        srv->subs->channels++;
    if (l->client)
        srv->subs->subscribers++;
    return h->ready ? 1 : 0;
}

void px_subs_unlisten(struct px_sub_lsn *l)
{
    struct px_hub *h = l->hub;
    struct px_subs *s;

    if (!h)
        return;
    s = h->srv->subs;
    if (h->delivering && h->cursor == &l->node)
        h->cursor = l->node.next;
    list_del_init(&l->node);
    l->hub = NULL;
    h->nlsns--;
    if (l->client) {
        s->subscribers--;
        if (--h->nclients == 0)
            s->channels--;
    }
    if (h->nlsns == 0 && !h->delivering)
        hub_free(h);
}

void px_subs_get_stats(struct px_server *srv, struct px_subs_stats *st)
{
    const struct px_subs *s = srv->subs;

    memset(st, 0, sizeof(*st));
    if (!s)
        return;
    st->channels = s->channels;
    st->subscribers = s->subscribers;
    st->hubs = s->nhubs;
    st->delivered = s->delivered;
    st->published = s->published;
    st->dropped = s->dropped;
}

/* ---- a client's subscriptions ------------------------------------------ */

/* Index of a namespace in the per-client counts. */
enum { NS_CLASSIC = 0, NS_SHARDED = 1, NS_PATTERN = 2, NS_N = 3 };

static const enum pool_sub_kind ns_kind[NS_N] = {POOL_SUB_CLASSIC, POOL_SUB_SHARDED,
                                                 POOL_SUB_PATTERN};

/* Redis's words per namespace: confirmations and messages. */
static const char *const ns_sub[NS_N] = {"subscribe", "ssubscribe", "psubscribe"};
static const char *const ns_unsub[NS_N] = {"unsubscribe", "sunsubscribe", "punsubscribe"};
static const char *const ns_msg[NS_N] = {"message", "smessage", "pmessage"};

struct csub {
    struct px_sub_lsn lsn; /* on the hub; lsn.hub NULL for the local lease-lost channel */
    struct hmap_node node; /* in cs->map */
    struct px_client *cl;  /* borrowed */
    int ns;                /* NS_* */
    bool local;            /* lockproxy:lease-lost: no hub */
    bool ready;            /* upstream confirmed (always for local) */
    bool confirmed;        /* its confirmation was written: messages flow */
    size_t len;            /* name length */
    char name[];           /* owned */
};

struct px_csubs {
    struct hmap map;          /* struct csub by (ns, name) */
    unsigned n[NS_N];         /* subscriptions per namespace */
    struct px_req *pending;   /* borrowed: the SUBSCRIBE waiting for Redis, or NULL */
    struct sched_timer timer; /* PX_SUBS_CONFIRM_MS bound on pending */
};

/* A pending SUBSCRIBE's answer: each argument's count (req->op). */
struct sub_op {
    int ns;
    int64_t counts[];
};

static unsigned cs_total(const struct px_csubs *cs)
{
    return cs ? cs->n[NS_CLASSIC] + cs->n[NS_SHARDED] + cs->n[NS_PATTERN] : 0;
}

/* Redis's count in a confirmation: channels plus patterns, or shard channels. */
static int64_t cs_count(const struct px_csubs *cs, int ns)
{
    if (!cs)
        return 0;
    return ns == NS_SHARDED ? cs->n[NS_SHARDED] : cs->n[NS_CLASSIC] + cs->n[NS_PATTERN];
}

static uint64_t csub_hash(int ns, const char *name, size_t len)
{
    return hash_bytes(name, len) ^ (uint64_t)ns;
}

static struct csub *csub_find(const struct px_csubs *cs, int ns, const char *name, size_t len)
{
    struct hmap_node *n;

    if (!cs)
        return NULL;
    for (n = hmap_first(&cs->map, csub_hash(ns, name, len)); n; n = hmap_next(n)) {
        struct csub *c = LP_CONTAINER_OF(n, struct csub, node);

        if (c->ns == ns && c->len == len && memcmp(c->name, name, len) == 0)
            return c;
    }
    return NULL;
}

static bool is_lease_lost(int ns, const struct px_arg *a)
{
    static const char ch[] = PX_PUSH_LEASE_LOST_CHANNEL;

    return ns == NS_CLASSIC && a->len == sizeof(ch) - 1 && memcmp(a->p, ch, a->len) == 0;
}

static void cs_on_timer(struct sched_timer *t);

static struct px_csubs *cs_get(struct px_client *cl)
{
    struct px_csubs *cs = cl->subs;

    if (cs)
        return cs;
    cs = calloc(1, sizeof(*cs));
    if (!cs || hmap_init(&cs->map, 8) < 0) {
        free(cs);
        return NULL;
    }
    sched_timer_init(&cs->timer, cs_on_timer);
    cl->subs = cs;
    return cs;
}

/* Writes one whole message push to cl, then holds it to the bounds. */
static void csub_emit(struct csub *c, const char *chan, size_t clen, const char *msg, size_t len)
{
    struct px_client *cl = c->cl;
    struct px_server *srv = cl->srv;
    bool pat = c->ns == NS_PATTERN;
    struct buf b;
    int err;

    buf_init(&b);
    err = px_reply_push(&b, cl->proto, pat ? 4 : 3) | px_reply_cstr(&b, ns_msg[c->ns]);
    if (pat)
        err |= px_reply_bulk(&b, c->name, c->len);
    err |= px_reply_bulk(&b, chan, clen) | px_reply_bulk(&b, msg, len);
    if (err == 0 && px_climem_admit(srv, buf_size(&b)))
        err = px_push_emit(cl, buf_head(&b), buf_size(&b));
    else
        err = -ENOBUFS;
    buf_deinit(&b);
    if (err == 0 && px_client_output_ok(cl)) {
        srv->subs->delivered++;
        return;
    }
    /* Redis's client-output-buffer-limit pubsub: a subscriber that does
     * not keep up is disconnected, not buffered for without bound. */
    srv->subs->dropped++;
    if (!cl->closing) {
        log_msg(LOG_LVL_WARN, "client %llu closed: a pub/sub message would pass the output bounds",
                (unsigned long long)cl->id);
        cl->quit = false;
        px_client_close(cl);
    }
}

static void sub_finish(struct px_client *cl);

static void csub_on_event(struct px_sub_lsn *l, enum pool_sub_event ev, const char *chan,
                          size_t clen, const char *msg, size_t len)
{
    struct csub *c = LP_CONTAINER_OF(l, struct csub, lsn);
    struct px_client *cl = c->cl;

    if (ev == POOL_SUB_LOST) {
        c->ready = false;
    } else if (ev == POOL_SUB_READY) {
        c->ready = true;
        if (cl->subs->pending && !c->confirmed)
            sub_finish(cl);
    } else if (c->confirmed && !cl->closing) {
        csub_emit(c, chan, clen, msg, len);
    }
}

static void csub_free(struct px_csubs *cs, struct csub *c)
{
    if (c->local)
        c->cl->sub_lease_lost = false;
    px_subs_unlisten(&c->lsn);
    hmap_remove(&cs->map, &c->node);
    cs->n[c->ns]--;
    free(c);
}

/* A new subscription of cl; NULL on -ENOMEM or a pool refusal (*err). */
static struct csub *csub_new(struct px_client *cl, int ns, const struct px_arg *a, int *err)
{
    struct px_csubs *cs = cl->subs;
    struct csub *c = calloc(1, sizeof(*c) + a->len + 1);
    int rc = 1;

    *err = -ENOMEM;
    if (!c)
        return NULL;
    c->cl = cl;
    c->ns = ns;
    c->len = a->len;
    memcpy(c->name, a->p, a->len);
    list_init(&c->lsn.node);
    c->lsn.client = true;
    c->local = is_lease_lost(ns, a);
    if (!c->local)
        rc = px_subs_listen(cl->srv, &c->lsn, c->name, c->len, ns_kind[ns], csub_on_event);
    if (rc < 0) {
        *err = rc;
        free(c);
        return NULL;
    }
    c->ready = rc == 1;
    if (c->local)
        cl->sub_lease_lost = true;
    (void)hmap_insert(&cs->map, &c->node, csub_hash(ns, c->name, c->len));
    cs->n[ns]++;
    *err = 0;
    return c;
}

/* ---- commands ------------------------------------------------------------ */

static int cmd_ns(const struct px_req *req)
{
    const struct px_arg *a = &req->argv[0];

    if (px_args_is(a, "SSUBSCRIBE") || px_args_is(a, "SUNSUBSCRIBE") || px_args_is(a, "SPUBLISH"))
        return NS_SHARDED;
    if (px_args_is(a, "PSUBSCRIBE") || px_args_is(a, "PUNSUBSCRIBE"))
        return NS_PATTERN;
    return NS_CLASSIC;
}

/* ">3 kind name count" (RESP2: "*3"); a NULL name is Redis's null. */
static void reply_conf(struct buf *b, int proto, const char *kind, const char *name, size_t len,
                       int64_t count)
{
    px_reply_push(b, proto, 3);
    px_reply_cstr(b, kind);
    if (name)
        px_reply_bulk(b, name, len);
    else
        px_reply_null(b, proto);
    px_reply_int(b, count);
}

/* NOPERM unless the user's patterns allow every name of argv[from..]. */
static bool acl_allows(struct px_req *req, int from)
{
    const struct px_user *u = req->cl->user;
    int i;

    for (i = from; u && i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];

        if (px_user_may_access(u, a->p, a->len))
            continue;
        px_reply_error(px_req_out(req),
                       "NOPERM User %s has no permissions to access the '%.*s' channel", u->name,
                       (int)LP_MIN(a->len, 200u), a->p);
        return false;
    }
    return true;
}

/* SSUBSCRIBE / SUNSUBSCRIBE on a cluster: one slot per command, as Redis. */
static bool same_slot(struct px_req *req)
{
    int i;

    if (!pool_is_cluster(req->cl->srv->pool))
        return true;
    for (i = 2; i < req->argc; i++) {
        if (pool_slot(req->argv[i].p, req->argv[i].len) !=
            pool_slot(req->argv[1].p, req->argv[1].len)) {
            px_reply_error(px_req_out(req),
                           "CROSSSLOT Keys in request don't hash to the same slot");
            return false;
        }
    }
    return true;
}

/* Refusals that leave everything as it was; true when one was written. */
static bool sub_refused(struct px_req *req, int ns)
{
    struct px_client *cl = req->cl;
    int i;

    if (!acl_allows(req, 1) || (ns == NS_SHARDED && !same_slot(req)))
        return true;
    for (i = 1; i < req->argc && !cl->srv->opts.passthrough; i++) {
        if (!is_lease_lost(ns, &req->argv[i])) {
            px_reply_error(px_req_out(req),
                           "ERR --passthrough is off: only " PX_PUSH_LEASE_LOST_CHANNEL
                           " may be subscribed");
            return true;
        }
    }
    for (i = 1; i < req->argc; i++) {
        if (is_lease_lost(ns, &req->argv[i]) && cl->proto != PX_PROTO_RESP3) {
            px_reply_error(px_req_out(req),
                           "ERR SUBSCRIBE " PX_PUSH_LEASE_LOST_CHANNEL
                           " needs RESP3 (HELLO 3): its "
                           "messages are pushed between the replies of the connection that holds "
                           "the locks");
            return true;
        }
    }
    if (cs_total(cl->subs) + (unsigned)(req->argc - 1) > PX_SUBS_MAX) {
        px_reply_error(px_req_out(req),
                       "ERR lockproxy: a connection may hold at most %u subscriptions",
                       PX_SUBS_MAX);
        return true;
    }
    return false;
}

/* Writes the confirmations of the pending SUBSCRIBE and completes it. */
static void sub_answer(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct px_csubs *cs = cl->subs;
    struct sub_op *op = req->op;
    struct buf *b = px_req_out(req);
    int i;

    for (i = 1; i < req->argc; i++) {
        struct csub *c = csub_find(cs, op->ns, req->argv[i].p, req->argv[i].len);

        if (c)
            c->confirmed = true;
        reply_conf(b, cl->proto, ns_sub[op->ns], req->argv[i].p, req->argv[i].len,
                   op->counts[i - 1]);
    }
    cs->pending = NULL;
    sched_loop_timer_del(cl->srv->loop, &cs->timer);
    req->op = NULL;
    free(op);
    px_req_done(req);
}

/* True when every subscription the pending SUBSCRIBE names is confirmed upstream. */
static bool sub_all_ready(const struct px_req *req)
{
    const struct sub_op *op = req->op;
    int i;

    for (i = 1; i < req->argc; i++) {
        const struct csub *c = csub_find(req->cl->subs, op->ns, req->argv[i].p, req->argv[i].len);

        if (c && !c->ready)
            return false;
    }
    return true;
}

static void sub_finish(struct px_client *cl)
{
    struct px_req *req = cl->subs->pending;

    if (req && sub_all_ready(req))
        sub_answer(req);
}

static void cs_on_timer(struct sched_timer *t)
{
    struct px_csubs *cs = LP_CONTAINER_OF(t, struct px_csubs, timer);

    if (cs->pending)
        sub_answer(cs->pending);
}

/* Undoes the subscriptions this command created (after a failure). */
static void sub_undo(struct px_req *req, int ns, int upto)
{
    struct px_csubs *cs = req->cl->subs;
    int i;

    for (i = 1; i < upto; i++) {
        struct csub *c = csub_find(cs, ns, req->argv[i].p, req->argv[i].len);

        if (c && !c->confirmed)
            csub_free(cs, c);
    }
}

/* SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE name [name ...] */
static void cmd_subscribe(struct px_req *req)
{
    struct px_client *cl = req->cl;
    int ns = cmd_ns(req), i, err = 0;
    struct px_csubs *cs;
    struct sub_op *op;

    if (sub_refused(req, ns))
        return px_req_done(req);
    cs = cs_get(cl);
    op = calloc(1, sizeof(*op) + sizeof(int64_t) * (size_t)(req->argc - 1));
    if (!cs || !op) {
        free(op);
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->ns = ns;
    for (i = 1; i < req->argc && err == 0; i++) {
        const struct px_arg *a = &req->argv[i];

        if (!csub_find(cs, ns, a->p, a->len) && !csub_new(cl, ns, a, &err))
            break;
        op->counts[i - 1] = cs_count(cs, ns);
    }
    if (i < req->argc) {
        sub_undo(req, ns, i);
        free(op);
        px_reply_error(px_req_out(req), "ERR lockproxy cannot subscribe to '%.*s': %s",
                       (int)LP_MIN(req->argv[i].len, 64u), req->argv[i].p,
                       err == -EEXIST ? "the channel is held in the other namespace"
                                      : "out of memory");
        return px_req_done(req);
    }
    req->op = op;
    cs->pending = req;
    if (sub_all_ready(req))
        return sub_answer(req);
    sched_loop_timer_in(cl->srv->loop, &cs->timer, PX_SUBS_CONFIRM_MS);
}

/* Every subscription of ns, each confirmed; a null one when there is none. */
static void unsub_all(struct px_req *req, int ns)
{
    struct px_client *cl = req->cl;
    struct px_csubs *cs = cl->subs;
    struct buf *b = px_req_out(req);
    bool any = false;
    size_t i;

    for (i = 0; cs && i < cs->map.nbuckets; i++) {
        struct hmap_node *n = cs->map.buckets[i];

        while (n) {
            struct csub *c = LP_CONTAINER_OF(n, struct csub, node);

            n = n->next;
            if (c->ns != ns)
                continue;
            reply_conf(b, cl->proto, ns_unsub[ns], c->name, c->len, cs_count(cs, ns) - 1);
            csub_free(cs, c);
            any = true;
        }
    }
    if (!any)
        reply_conf(b, cl->proto, ns_unsub[ns], NULL, 0, cs_count(cs, ns));
}

/* UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE [name ...] */
static void cmd_unsubscribe(struct px_req *req)
{
    struct px_client *cl = req->cl;
    int ns = cmd_ns(req), i;
    struct buf *b;

    if (ns == NS_SHARDED && req->argc > 1 && !same_slot(req))
        return px_req_done(req);
    b = px_req_out(req);
    if (req->argc == 1) {
        unsub_all(req, ns);
        return px_req_done(req);
    }
    for (i = 1; i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];
        struct csub *c = csub_find(cl->subs, ns, a->p, a->len);

        if (c)
            csub_free(cl->subs, c);
        reply_conf(b, cl->proto, ns_unsub[ns], a->p, a->len, cs_count(cl->subs, ns));
    }
    px_req_done(req);
}

static bool sub_may_block(const struct px_req *req)
{
    (void)req;
    return true; /* waits for Redis's confirmation: later commands follow it */
}

static void pub_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct px_req *req = arg;
    struct px_client *cl = req->cl;

    if (err < 0)
        px_args_reply_upstream(req, err);
    else if (r->type == POOL_REPLY_ERROR)
        px_args_reply_redis_error(req, r);
    else if (r->type == POOL_REPLY_INTEGER)
        px_reply_int(px_req_out(req), r->integer);
    else
        px_reply_error(px_req_out(req), "ERR unexpected reply from Redis to %s",
                       cmd_ns(req) == NS_SHARDED ? "SPUBLISH" : "PUBLISH");
    px_req_done(req);
    px_client_put(cl);
}

/* PUBLISH / SPUBLISH channel message: forwarded through the pool (a
 * cluster: to the channel's slot owner). */
static void cmd_publish(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    const char *verb = cmd_ns(req) == NS_SHARDED ? "SPUBLISH" : "PUBLISH";
    const char *argv[3] = {verb, req->argv[1].p, req->argv[2].p};
    const size_t lens[3] = {strlen(verb), req->argv[1].len, req->argv[2].len};
    int rc;

    if (!srv->opts.passthrough) {
        px_reply_error(px_req_out(req), "ERR unknown command '%s' (--passthrough is off)", verb);
        return px_req_done(req);
    }
    if (req->cl->user && !px_user_may_access(req->cl->user, argv[1], lens[1])) {
        px_reply_error(px_req_out(req),
                       "NOPERM User %s has no permissions to access the '%.*s' channel",
                       req->cl->user->name, (int)LP_MIN(lens[1], 200u), argv[1]);
        return px_req_done(req);
    }
    rc = pool_command(srv->pool, req->cl->id, 3, argv, lens, pub_on_reply, req);
    if (rc < 0) {
        px_args_reply_upstream(req, rc);
        return px_req_done(req);
    }
    srv->subs->published++;
    px_client_get(req->cl);
}

static const struct px_cmd subs_cmds[] = {
    {"SUBSCRIBE", 2, -1, cmd_subscribe, sub_may_block, 0},
    {"PSUBSCRIBE", 2, -1, cmd_subscribe, sub_may_block, 0},
    {"SSUBSCRIBE", 2, -1, cmd_subscribe, sub_may_block, 0},
    {"UNSUBSCRIBE", 1, -1, cmd_unsubscribe, NULL, 0},
    {"PUNSUBSCRIBE", 1, -1, cmd_unsubscribe, NULL, 0},
    {"SUNSUBSCRIBE", 1, -1, cmd_unsubscribe, NULL, 0},
    {"PUBLISH", 3, 3, cmd_publish, NULL, 0},
    {"SPUBLISH", 3, 3, cmd_publish, NULL, 0},
};
const struct px_cmd_set px_subs_cmd_set = {subs_cmds, LP_ARRAY_SIZE(subs_cmds)};

/* ---- subscribed mode ------------------------------------------------------ */

static bool in_sub_mode(const struct px_client *cl)
{
    return cl->proto == PX_PROTO_RESP2 && cs_total(cl->subs) > 0;
}

bool px_subs_refuse(struct px_req *req)
{
    static const char *const ok[] = {"SUBSCRIBE",   "PSUBSCRIBE",   "SSUBSCRIBE",
                                     "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
                                     "PING",        "QUIT",         "RESET"};
    const struct px_arg *name = &req->argv[0];
    char low[32];
    size_t i;

    if (!in_sub_mode(req->cl))
        return false;
    for (i = 0; i < LP_ARRAY_SIZE(ok); i++)
        if (px_args_is(name, ok[i]))
            return false;
    for (i = 0; i < name->len && i < sizeof(low) - 1; i++)
        low[i] = (char)tolower((unsigned char)name->p[i]);
    low[i] = '\0';
    px_reply_error(px_req_out(req),
                   "ERR Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
                   "RESET are allowed in this context",
                   low);
    return true;
}

bool px_subs_ping(struct px_req *req)
{
    struct buf *b;

    if (!in_sub_mode(req->cl))
        return false;
    b = px_req_out(req);
    px_reply_array(b, 2);
    px_reply_cstr(b, "pong");
    if (req->argc == 2)
        px_reply_bulk(b, req->argv[1].p, req->argv[1].len);
    else
        px_reply_bulk(b, "", 0);
    px_req_done(req);
    return true;
}

bool px_subs_client_busy(const struct px_client *cl)
{
    return cs_total(cl->subs) > 0;
}

void px_subs_client_gone(struct px_client *cl)
{
    struct px_csubs *cs = cl->subs;
    size_t i;

    if (!cs)
        return;
    sched_loop_timer_del(cl->srv->loop, &cs->timer);
    for (i = 0; i < cs->map.nbuckets; i++)
        while (cs->map.buckets[i])
            csub_free(cs, LP_CONTAINER_OF(cs->map.buckets[i], struct csub, node));
    if (cs->pending) {
        struct px_req *req = cs->pending;

        cs->pending = NULL;
        free(req->op);
        req->op = NULL;
        px_req_done(req);
    }
    hmap_deinit(&cs->map);
    free(cs);
    cl->subs = NULL;
}
