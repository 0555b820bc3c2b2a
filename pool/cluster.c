/* A Redis Cluster upstream: seeds, the topology connection, the slot map
 * and the node table's life. Redirects of requests are in redirect.c. A
 * Redis Sentinel upstream is this same machinery with the sentinels as
 * seeds and one master owning every slot (sentinel.c: its query, its
 * answers, its subscription); the differences are marked "Sentinel:".
 *
 * DESIGN BLOCK
 *
 * Topology. One connection of kind TOPO (rconn.c, AUTH-only handshake)
 * asks one node at a time for CLUSTER SHARDS (CLUSTER SLOTS when the
 * server does not know SHARDS: Redis < 7). It starts on the first seed
 * that resolves; each time it is lost it moves to the next candidate: the
 * active masters, then the seeds, round robin, so a dead node (or seed)
 * never stops refreshes. Queries go out
 *   - when the connection becomes READY (the first map, and after a loss),
 *   - every cluster_refresh_ms (tick), or every FAST_REFRESH_MS while the
 *     map is incomplete: a slot without an owner, a master without a ready
 *     connection, a channel without a home (a failover is under way),
 *   - at once when a node's connection is lost, when a MOVED arrives, and
 *     when Redis drops a sharded subscription (its slot moved),
 * one at a time: a request made while one is in flight sets `again`.
 * In AUTO pub/sub mode the first READY also sends PUBSUB SHARDNUMSUB
 * before the first query: sharded when it succeeds (Redisson's rule).
 * Replies are applied in order, so the mode is known before any node (and
 * so any pub/sub connection) exists.
 *
 * Apply (pool__cluster_apply): every master owning slots gets a node
 * (found by its announced address, else created and started; a DRAINING
 * or STOPPED one is revived), the slot map is rebuilt, nodes no longer listed as masters
 * with slots start DRAINING (no new requests; their connections stop a
 * request timeout later, so replies, MOVED included, still arrive), and
 * every slot whose owner changed is marked in `changed`.
 *
 * A MOVED (pool__cluster_moved) updates one slot at once, between
 * refreshes; an ASK never touches the map.
 *
 * Deferred notification (notify timer, 0 ms): after a change the loop
 * re-homes the channels (pubsub.c: LOST, then READY from the new owner)
 * and calls on_topology with the changed slots. Both run from the loop,
 * never from inside a reply dispatch or a pool call, so listener and
 * topology callbacks may do anything a callback may.
 *
 * Node housekeeping (tick): DRAINING past drain_ms -> STOPPED (connections
 * stopped); STOPPED and idle -> freed; a node whose pub/sub connection
 * answered an error gets its pending subscriptions re-sent.
 *
 * Invariants: slots[] points only at ACTIVE nodes; slots_served counts
 * its non-NULL entries and each node's nslots its own; a node is freed
 * only by the tick, when idle and no parked request points at it.
 *
 * Sentinel: the topology connection asks the sentinels only (round robin
 * over them, never a master), the query is SENTINEL
 * GET-MASTER-ADDR-BY-NAME, the pub/sub mode is classic from the start,
 * and a node that answered READONLY leaves the map at once
 * (pool__cluster_drop_node). Reviving such a node (a sentinel names it
 * again) restarts its connections, so ROLE is checked again before it
 * serves.
 *
 * Rejected: a refresh after every N redirects (Envoy) or only on MOVED
 * (redis-cluster-proxy, which then never notices a dead master: its #32):
 * a failed node and the period cover those; querying every node and
 * voting (slow, and the cluster's own epochs already settle conflicts);
 * CLUSTER NODES (a text format to parse where SHARDS/SLOTS are RESP). */
#include "pool/cluster.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/resp.h"
#include "pool/sentinel.h"
#include "pool/topo.h"
#include "sched/loop.h"

/* Refresh period while the map is incomplete (a failover under way). */
#define FAST_REFRESH_MS 100

static void cluster_on_tick(struct sched_timer *t);
static void cluster_on_notify(struct sched_timer *t);
static void topo_query(struct pool__cluster *cl);
static void tick_fast(struct pool__cluster *cl);

/* ---- seeds and creation ----------------------------------------------------------- */

/* Splits opts.cluster_seeds ("h:p,h:p", blanks around entries allowed)
 * into cl->seeds. */
static int seeds_parse(struct pool__cluster *cl, const char *list)
{
    size_t n = 1, i = 0;
    const char *s;

    for (s = list; *s; s++)
        n += *s == ',';
    cl->seeds = calloc(n, sizeof(*cl->seeds));
    if (!cl->seeds)
        return -ENOMEM;
    for (s = list; i < n; i++) {
        const char *end = strchrnul(s, ','), *last = end;
        char host[POOL__HOST_MAX];
        int port, err;

        while (s < last && *s == ' ')
            s++;
        while (last > s && last[-1] == ' ')
            last--;
        err = pool__addr_split(s, (size_t)(last - s), host, sizeof(host), &port);
        if (err == 0 && !host[0])
            err = -EINVAL;
        if (err == 0)
            err = pool__addr_init(&cl->seeds[i], host, port, NULL);
        if (err < 0)
            return err;
        cl->nseeds++;
        s = *end ? end + 1 : end;
    }
    return 0;
}

/* The seeds are the cluster's nodes, or the sentinels. */
int pool__cluster_create(struct pool *p)
{
    struct pool__cluster *cl = calloc(1, sizeof(*cl));
    bool sentinel = p->kind == POOL__UP_SENTINEL;
    int err;

    if (!cl)
        return -ENOMEM;
    p->cl = cl;
    cl->pool = p;
    sched_timer_init(&cl->tick, cluster_on_tick);
    sched_timer_init(&cl->notify, cluster_on_notify);
    pool__redirect_init(cl);
    pool__rconn_init(&cl->topo, p, NULL, &cl->topo_addr, POOL__RCONN_TOPO, 0);
    cl->initial = true;
    err = seeds_parse(cl, sentinel ? p->opts.sentinels : p->opts.cluster_seeds);
    if (err == 0)
        err = pool__addr_init(&cl->topo_addr, cl->seeds[0].host, cl->seeds[0].port, NULL);
    if (err == 0 && sentinel)
        err = pool__sentinel_create(cl);
    return err;
}

void pool__cluster_destroy(struct pool *p)
{
    struct pool__cluster *cl = p->cl;
    size_t i;

    LP_BUG_ON(sched_timer_is_pending(&cl->tick) || sched_timer_is_pending(&cl->notify) ||
              sched_timer_is_pending(&cl->retry) || !list_empty(&cl->parked));
    if (cl->sn)
        pool__sentinel_destroy(cl);
    pool__rconn_deinit(&cl->topo);
    pool__addr_deinit(&cl->topo_addr);
    for (i = 0; i < cl->nseeds; i++)
        pool__addr_deinit(&cl->seeds[i]);
    free(cl->seeds);
    free(cl);
    p->cl = NULL;
}

/* ---- life cycle ------------------------------------------------------------------ */

/* Points the topology connection at host:port. */
static int topo_retarget(struct pool__cluster *cl, const char *host, int port)
{
    struct pool__addr a;
    int err = pool__addr_init(&a, host, port, NULL);

    if (err < 0)
        return err;
    pool__addr_deinit(&cl->topo_addr);
    cl->topo_addr = a;
    return 0;
}

/* Seeds resolve at start, blocking like a single node's host (start-up
 * only): one that resolves is enough; the first becomes the topology
 * connection's target. */
int pool__cluster_start(struct pool *p)
{
    struct pool__cluster *cl = p->cl;
    int err = -EHOSTUNREACH, first = -1;
    char msg[160];
    size_t i;

    for (i = 0; i < cl->nseeds; i++) {
        int rc = pool__addr_resolve_now(&cl->seeds[i], msg, sizeof(msg));

        if (rc < 0) {
            pool__set_error(p, "%s", msg);
            log_msg(LOG_LVL_WARN, "pool: cluster seed %s: %s", cl->seeds[i].where, msg);
            err = rc;
        } else if (first < 0) {
            first = (int)i;
        }
    }
    if (first < 0) {
        log_msg(LOG_LVL_ERROR, "pool: no cluster seed resolves: %s", p->last_error);
        return err;
    }
    err = topo_retarget(cl, cl->seeds[first].host, cl->seeds[first].port);
    if (err < 0)
        return err;
    if (cl->sn)
        cl->next_candidate = (size_t)first + 1; /* after a failure: the next sentinel */
    if (cl->sn)
        log_msg(LOG_LVL_INFO,
                "pool: sentinel master '%s' via %s (%zu sentinels; %u command connections)",
                p->opts.sentinel_master, cl->topo_addr.where, cl->nseeds, p->opts.size);
    else
        log_msg(LOG_LVL_INFO,
                "pool: cluster via %s (%u command connections per master, pub/sub %s)",
                cl->topo_addr.where, p->opts.size,
                p->opts.pubsub_mode == POOL_PUBSUB_AUTO      ? "auto"
                : p->opts.pubsub_mode == POOL_PUBSUB_SHARDED ? "sharded"
                                                             : "classic");
    pool__rconn_start(&cl->topo);
    if (cl->sn)
        pool__sentinel_start(cl);
    sched_loop_timer_in(p->loop, &cl->tick, p->opts.cluster_refresh_ms);
    return 0;
}

void pool__cluster_stop(struct pool *p)
{
    struct pool__cluster *cl = p->cl;

    sched_loop_timer_del(p->loop, &cl->tick);
    sched_loop_timer_del(p->loop, &cl->notify);
    pool__rconn_stop(&cl->topo);
    if (cl->sn)
        pool__sentinel_stop(cl);
    pool__redirect_stop(cl);
}

bool pool__cluster_is_stopped(const struct pool *p)
{
    const struct pool__cluster *cl = p->cl;

    return cl->topo.state == POOL__RCONN_DISCONNECTED && (!cl->sn || pool__sentinel_is_stopped(cl));
}

/* The topology connection was lost: the next attempt goes to the next
 * candidate (active masters first, then the seeds), round robin.
 * Sentinel: the next sentinel (a master cannot answer for them). */
void pool__cluster_topo_released(struct pool *p)
{
    struct pool__cluster *cl = p->cl;
    size_t nactive = 0, k;
    struct list *pos;

    if (cl->sn)
        pool__sentinel_released(cl);
    for (pos = p->nodes.next; pos != &p->nodes && !cl->sn; pos = pos->next)
        nactive += list_entry(pos, struct pool_node, link)->state == POOL__NODE_ACTIVE;
    k = cl->next_candidate++ % (nactive + cl->nseeds);
    for (pos = p->nodes.next; pos != &p->nodes && nactive; pos = pos->next) {
        struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && k-- == 0) {
            (void)topo_retarget(cl, n->addr.host, n->addr.port);
            return;
        }
    }
    (void)topo_retarget(cl, cl->seeds[k].host, cl->seeds[k].port);
}

/* ---- routing ------------------------------------------------------------------- */

struct pool_node *pool__cluster_owner(const struct pool *p, int slot)
{
    if (slot < 0 || slot >= POOL_SLOTS)
        return NULL;
    return p->cl->slots[slot];
}

/* The hint spreads slot-less commands over the masters. */
struct pool_node *pool__cluster_any(struct pool *p, uint64_t hint)
{
    struct pool_node *first = NULL;
    struct list *pos;
    uint64_t k = hint % (p->nnodes ? p->nnodes : 1);

    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state != POOL__NODE_ACTIVE || !pool__node_is_up(n))
            continue;
        if (!first)
            first = n;
        if (k-- == 0)
            return n;
    }
    return first;
}

/* ---- nodes --------------------------------------------------------------------- */

/* Makes a DRAINING or STOPPED node serve again. One that answered
 * READONLY (demoted) reconnects first, so that its handshake's ROLE
 * confirms it is a master before it takes a request. */
static void node_revive(struct pool_node *n)
{
    bool restart = n->state == POOL__NODE_STOPPED || n->demoted;

    if (n->demoted && n->state != POOL__NODE_STOPPED)
        pool__node_stop(n);
    n->state = POOL__NODE_ACTIVE;
    n->role = "master";
    n->demoted = false;
    if (restart)
        pool__node_start(n);
    log_msg(LOG_LVL_INFO, "pool: %s node %s is a master again",
            n->pool->cl->sn ? "sentinel" : "cluster", n->addr.where);
}

struct pool_node *pool__cluster_node_at(struct pool *p, struct pool_node *from, const char *host,
                                        size_t hostlen, int port)
{
    char name[POOL__HOST_MAX];
    struct pool_node *n;

    if (hostlen == 0 && from) {
        host = from->addr.host;
        hostlen = strlen(host);
    }
    if (hostlen == 0 || hostlen >= sizeof(name))
        return NULL;
    n = pool__node_find(p, host, hostlen, port);
    if (n) {
        if (n->state != POOL__NODE_ACTIVE)
            node_revive(n);
        return n;
    }
    memcpy(name, host, hostlen);
    name[hostlen] = '\0';
    n = pool__node_create(p, name, port, NULL);
    if (!n) {
        pool__set_error(p, "cluster: cannot add node %s:%d", name, port);
        return NULL;
    }
    log_msg(LOG_LVL_INFO, "pool: %s node %s added", p->cl->sn ? "sentinel" : "cluster",
            n->addr.where);
    pool__node_start(n);
    return n;
}

static void notify_soon(struct pool__cluster *cl)
{
    if (!cl->pool->stopping)
        sched_loop_timer_in(cl->pool->loop, &cl->notify, 0);
}

static void slot_changed(struct pool__cluster *cl, int slot)
{
    if (!(cl->changed[slot >> 3] & (1u << (slot & 7)))) {
        cl->changed[slot >> 3] |= (uint8_t)(1u << (slot & 7));
        cl->nchanged++;
    }
}

/* Sets slot's owner, keeping the counters and the changed bitmap. */
static void slot_set(struct pool__cluster *cl, int slot, struct pool_node *n)
{
    struct pool_node *old = cl->slots[slot];

    if (old == n)
        return;
    if (old)
        old->nslots--;
    else
        cl->slots_served++;
    if (n)
        n->nslots++;
    else
        cl->slots_served--;
    cl->slots[slot] = n;
    slot_changed(cl, slot);
}

void pool__cluster_node_restarted(struct pool__cluster *cl, const struct pool_node *n)
{
    int slot;

    for (slot = 0; slot < POOL_SLOTS; slot++) {
        if (cl->slots[slot] == n)
            slot_changed(cl, slot);
    }
    if (cl->nchanged)
        notify_soon(cl);
}

struct pool_node *pool__cluster_moved(struct pool *p, struct pool_node *from, int slot,
                                      const char *host, size_t hostlen, int port)
{
    struct pool__cluster *cl = p->cl;
    struct pool_node *n;

    if (slot < 0 || slot >= POOL_SLOTS)
        return NULL;
    n = pool__cluster_node_at(p, from, host, hostlen, port);
    if (!n)
        return NULL;
    slot_set(cl, slot, n);
    notify_soon(cl);
    pool__cluster_refresh(p);
    return n;
}

/* ---- applying a topology ------------------------------------------------------- */

/* Nodes of the reply's masters (NULL for replicas and slot-less masters). */
static int apply_nodes(struct pool__cluster *cl, const struct pool__topo *t, struct pool_node **of)
{
    struct pool *p = cl->pool;
    size_t i;

    for (i = 0; i < t->nnodes; i++) {
        const struct pool__topo_node *tn = &t->nodes[i];
        struct pool_node *n;

        of[i] = NULL;
        if (!tn->master || tn->nslots == 0)
            continue;
        n = pool__cluster_node_at(p, NULL, tn->host, strlen(tn->host), tn->port);
        if (!n)
            return -ENOMEM;
        n->gen = cl->gen;
        memcpy(n->id, tn->id, sizeof(n->id));
        memcpy(n->health, tn->health, sizeof(n->health));
        of[i] = n;
    }
    return 0;
}

/* What a node that left the map is now, for its stats: its role in t
 * (the topology that left it out, or NULL), else role. */
static void node_drain(struct pool__cluster *cl, struct pool_node *n, const struct pool__topo *t,
                       const char *role)
{
    size_t i;

    n->state = POOL__NODE_DRAINING;
    n->drain_ms = sched_loop_now_ms(cl->pool->loop) + cl->pool->opts.request_timeout_ms;
    n->role = role;
    for (i = 0; t && i < t->nnodes; i++) {
        if (pool__addr_is(&n->addr, t->nodes[i].host, strlen(t->nodes[i].host), t->nodes[i].port)) {
            n->role = t->nodes[i].master ? "master" : "replica";
            memcpy(n->health, t->nodes[i].health, sizeof(n->health));
        }
    }
    log_msg(LOG_LVL_INFO, "pool: %s node %s left the slot map (%s)",
            cl->sn ? "sentinel" : "cluster", n->addr.where, n->role);
}

void pool__cluster_drop_node(struct pool *p, struct pool_node *n)
{
    struct pool__cluster *cl = p->cl;
    int s;

    if (n->state != POOL__NODE_ACTIVE)
        return;
    for (s = 0; s < POOL_SLOTS; s++) {
        if (cl->slots[s] == n)
            slot_set(cl, s, NULL);
    }
    node_drain(cl, n, NULL, "replica");
    n->demoted = true;
    notify_soon(cl);
    pool__cluster_refresh(p);
}

void pool__cluster_apply(struct pool__cluster *cl, const struct pool__topo *t)
{
    struct pool *p = cl->pool;
    struct pool_node **of = calloc(t->nnodes ? t->nnodes : 1, sizeof(*of));
    struct list *pos;
    unsigned before = cl->nchanged;
    int s;

    cl->gen++;
    if (!of || apply_nodes(cl, t, of) < 0) {
        free(of);
        pool__set_error(p, "cluster: out of memory applying the topology");
        return;
    }
    for (s = 0; s < POOL_SLOTS; s++)
        slot_set(cl, s, t->owner[s] >= 0 ? of[t->owner[s]] : NULL);
    free(of);
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && n->gen != cl->gen && n->nslots == 0)
            node_drain(cl, n, t, "gone");
    }
    cl->refreshes++;
    if (cl->nchanged != before || !cl->have_map || pool__pubsub_homeless(p))
        notify_soon(cl);
    if (cl->nchanged != before)
        log_msg(cl->sn ? LOG_LVL_DEBUG : LOG_LVL_INFO,
                "pool: cluster map: %u masters, %u slots served, %u changed",
                (unsigned)pool__topo_masters(t), cl->slots_served, cl->nchanged - before);
    cl->have_map = true;
    tick_fast(cl);
    pool__redirect_kick(p);
}

/* ---- queries ------------------------------------------------------------------- */

static int topo_send(struct pool__cluster *cl, int argc, const char *const *argv, pool_reply_fn *cb)
{
    struct pool__req *req = pool__req_get(cl->pool);

    if (!req)
        return -ENOMEM;
    req->kind = POOL__REQ_INTERNAL;
    req->cb = cb;
    req->arg = cl;
    return pool__rconn_command(&cl->topo, req, argc, argv, NULL, false);
}

/* Starts the pub/sub connections that waited for the mode. */
static void pubsub_mode_known(struct pool__cluster *cl, bool sharded)
{
    struct pool *p = cl->pool;
    struct list *pos;

    p->sharded = sharded;
    p->pubsub_known = true;
    log_msg(LOG_LVL_INFO, "pool: cluster pub/sub mode: %s (auto)", sharded ? "sharded" : "classic");
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next)
        pool__node_start_pubsub(list_entry(pos, struct pool_node, link));
}

static void on_detect(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct pool__cluster *cl = arg;

    cl->detecting = false;
    if (err < 0 || cl->pool->pubsub_known)
        return;
    pubsub_mode_known(cl, r->type != POOL_REPLY_ERROR);
}

/* An error reply to a topology query. */
static void topo_error(struct pool__cluster *cl, const struct pool_reply *r)
{
    struct pool *p = cl->pool;
    enum log_level lvl = cl->warned ? LOG_LVL_DEBUG : LOG_LVL_WARN;

    /* Redis < 7 does not know SHARDS; an ACL may forbid it alone. */
    if (!cl->use_slots &&
        (pool__resp_is_error(r, "ERR unknown subcommand") ||
         pool__resp_is_error(r, "ERR Unknown subcommand") || pool__resp_is_error(r, "NOPERM"))) {
        log_msg(LOG_LVL_INFO, "pool: cluster: CLUSTER SHARDS refused (%.*s): using CLUSTER SLOTS",
                (int)LP_MIN(r->len, (size_t)80), r->str);
        cl->use_slots = true;
        cl->again = true;
        return;
    }
    if (strstr(r->str, "cluster support disabled")) {
        pool__set_error(p, "%s is not a Redis Cluster node (cluster support disabled)",
                        cl->topo_addr.where);
        lvl = cl->warned ? LOG_LVL_DEBUG : LOG_LVL_ERROR;
    } else {
        pool__set_error(p, "%s: topology: %.*s", cl->topo_addr.where,
                        (int)LP_MIN(r->len, (size_t)100), r->str);
    }
    log_msg(lvl, "pool: cluster: %s", p->last_error);
    cl->warned = true;
    pool__rconn_recycle_later(&cl->topo); /* ask another node next time */
}

static void on_topology(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct pool__cluster *cl = arg;
    struct pool__topo *t;
    int rc;

    cl->querying = false;
    if (err == 0 && cl->sn) {
        pool__sentinel_reply(cl, r);
    } else if (err == 0 && r->type == POOL_REPLY_ERROR) {
        topo_error(cl, r);
    } else if (err == 0) {
        t = malloc(sizeof(*t));
        rc = !t ? -ENOMEM
             : cl->use_slots
                 ? pool__topo_parse_slots(t, r, cl->topo_addr.host)
                 : pool__topo_parse_shards(t, r, cl->topo_addr.host, cl->pool->tls != NULL);
        if (rc == 0 && pool__topo_masters(t) > 0) {
            cl->warned = false;
            pool__cluster_apply(cl, t);
        } else {
            pool__set_error(cl->pool, "%s: unusable topology reply (%s)", cl->topo_addr.where,
                            rc < 0 ? strerror(-rc) : "no master serves a slot");
            log_msg(LOG_LVL_WARN, "pool: cluster: %s", cl->pool->last_error);
        }
        if (t)
            pool__topo_free(t);
        free(t);
    }
    if (cl->again)
        topo_query(cl);
}

/* The question: CLUSTER SHARDS (SLOTS), or a sentinel's. Returns argc. */
static int topo_question(const struct pool__cluster *cl, const char *argv[3])
{
    if (cl->sn) {
        pool__sentinel_query(cl, argv);
        return 3;
    }
    argv[0] = "CLUSTER";
    argv[1] = cl->use_slots ? "SLOTS" : "SHARDS";
    return 2;
}

static void topo_query(struct pool__cluster *cl)
{
    static const char *const detect[] = {"PUBSUB", "SHARDNUMSUB"};
    struct pool *p = cl->pool;
    const char *argv[3];
    int argc;

    cl->again = true;
    if (p->stopping || cl->querying || !pool__rconn_is_ready(&cl->topo))
        return; /* after the one in flight, or when the connection is READY */
    if (!p->pubsub_known && !cl->detecting && topo_send(cl, 2, detect, on_detect) == 0)
        cl->detecting = true;
    argc = topo_question(cl, argv);
    if (topo_send(cl, argc, argv, on_topology) == 0) {
        cl->querying = true;
        cl->again = false;
    }
}

void pool__cluster_refresh(struct pool *p)
{
    topo_query(p->cl);
    tick_fast(p->cl);
}

void pool__cluster_topo_up(struct pool *p)
{
    p->cl->querying = false;
    if (p->cl->sn)
        pool__sentinel_topo_up(p->cl);
    topo_query(p->cl);
}

/* ---- notification and housekeeping ------------------------------------------------ */

static void cluster_on_notify(struct sched_timer *t)
{
    struct pool__cluster *cl = LP_CONTAINER_OF(t, struct pool__cluster, notify);
    struct pool *p = cl->pool;
    struct pool_topology_event ev;
    uint8_t bits[POOL_SLOT_BITMAP_SIZE];
    struct list *pos;
    unsigned masters = 0;

    pool__pubsub_rehome(p);
    if (cl->nchanged == 0 || p->stopping)
        return;
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next)
        masters += list_entry(pos, struct pool_node, link)->nslots > 0;
    memcpy(bits, cl->changed, sizeof(bits));
    ev.initial = cl->initial;
    ev.nchanged = cl->nchanged;
    ev.slots = bits;
    ev.masters = masters;
    ev.slots_served = cl->slots_served;
    memset(cl->changed, 0, sizeof(cl->changed));
    cl->nchanged = 0;
    cl->initial = false;
    cl->changes++;
    if (p->opts.on_topology)
        p->opts.on_topology(p->opts.topology_arg, &ev);
}

/* Incomplete: a slot without owner, an owner without a ready connection,
 * or a channel without a home. Refresh fast until complete. */
static bool map_incomplete(const struct pool__cluster *cl)
{
    const struct pool *p = cl->pool;
    const struct list *pos;

    if (!cl->have_map || cl->slots_served < POOL_SLOTS || pool__pubsub_homeless(p))
        return true;
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        const struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && n->nslots && !pool__node_is_up(n))
            return true;
    }
    return false;
}

/* Drains, stops and frees nodes that left the map; re-sends pending
 * subscriptions after a pub/sub error. */
static void housekeeping(struct pool__cluster *cl)
{
    struct pool *p = cl->pool;
    uint64_t now = sched_loop_now_ms(p->loop);
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->nodes)
    {
        struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && n->resub)
            pool__pubsub_retry(n);
        else if (n->state == POOL__NODE_DRAINING && now >= n->drain_ms)
            pool__node_stop(n);
        else if (n->state == POOL__NODE_STOPPED && pool__node_is_idle(n) && list_empty(&n->chans)) {
            log_msg(LOG_LVL_INFO, "pool: cluster node %s removed", n->addr.where);
            pool__redirect_forget_node(p, n);
            pool__node_destroy(n);
        }
    }
}

/* While the map is incomplete the next tick comes within FAST_REFRESH_MS
 * (the period may be long: a failover must not wait for it). */
static void tick_fast(struct pool__cluster *cl)
{
    struct pool *p = cl->pool;
    uint64_t at = sched_loop_now_ms(p->loop) + FAST_REFRESH_MS;

    if (p->stopping || !map_incomplete(cl))
        return;
    if (!sched_timer_is_pending(&cl->tick) || cl->tick.expires > at)
        sched_loop_timer_add(p->loop, &cl->tick, at);
}

static void cluster_on_tick(struct sched_timer *t)
{
    struct pool__cluster *cl = LP_CONTAINER_OF(t, struct pool__cluster, tick);
    struct pool *p = cl->pool;
    unsigned period = p->opts.cluster_refresh_ms;

    housekeeping(cl);
    if (p->stopping)
        return;
    topo_query(cl);
    if (map_incomplete(cl))
        period = LP_MIN(period, FAST_REFRESH_MS);
    sched_loop_timer_in(p->loop, &cl->tick, period);
}

/* ---- stats --------------------------------------------------------------------- */

static const char *cluster_state(const struct pool *p, const struct pool_stats *st)
{
    const struct pool__cluster *cl = p->cl;
    const struct list *pos;

    if (!p->started || p->stopping)
        return "down";
    if (!cl->have_map)
        return pool__rconn_is_connecting(&cl->topo) || pool__rconn_is_ready(&cl->topo)
                   ? "connecting"
                   : "down";
    if (st->nodes_ready == st->nodes && cl->slots_served == POOL_SLOTS)
        return "up";
    if (st->nodes_ready > 0)
        return "degraded";
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        const struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && pool__node_is_connecting(n))
            return "connecting";
    }
    return "down";
}

void pool__cluster_stats(const struct pool *p, struct pool_stats *st)
{
    const struct pool__cluster *cl = p->cl;

    st->cluster = cl->sn == NULL;
    if (cl->sn)
        pool__sentinel_stats(cl, st);
    st->slots_served = cl->slots_served;
    st->topology_refreshes = cl->refreshes;
    st->topology_changes = cl->changes;
    st->state = cluster_state(p, st);
}
