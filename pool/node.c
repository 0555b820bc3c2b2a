/* A node of the pool: one upstream master (the single node of a plain
 * pool, or one master of a cluster) with its command connections, its
 * pub/sub connection, the channels homed on it and its stats.
 *
 * Life of a cluster node (struct pool_node, enum pool__node_state):
 *
 *     created (topology or a MOVED/ASK to a new address) --> ACTIVE
 *     ACTIVE --left the slot map (failover, removed)--> DRAINING: no new
 *         requests reach it; what is in flight may still be answered
 *         (or redirected) until drain_ms
 *     DRAINING --listed as a master again--> ACTIVE
 *     DRAINING --drain_ms passed--> STOPPED: connections stopped
 *         (anything still in flight gets -ECONNRESET)
 *     STOPPED --all connections released--> freed (cluster.c)
 *
 * A single node is ACTIVE from creation to pool_destroy().
 *
 * Invariants: a node on p->nodes is never freed while one of its
 * connections is registered with the loop; channels are homed only on
 * ACTIVE nodes (cluster.c re-homes them before a node drains); parked
 * requests never point at a node that is being freed
 * (pool__redirect_forget_node). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "common/log.h"
#include "pool/cluster.h"
#include "pool/pool-int.h"
#include "pool/rconn.h"
#include "sched/loop.h"

struct pool_node *pool__node_create(struct pool *p, const char *host, int port,
                                    const char *unix_path)
{
    struct pool_node *n = calloc(1, sizeof(*n));
    unsigned i;

    if (!n)
        return NULL;
    n->conns = calloc(p->opts.size, sizeof(*n->conns));
    if (!n->conns || pool__addr_init(&n->addr, host, port, unix_path) < 0) {
        free(n->conns);
        free(n);
        return NULL;
    }
    n->pool = p;
    n->nconns = p->opts.size;
    for (i = 0; i < n->nconns; i++)
        pool__rconn_init(&n->conns[i], p, n, &n->addr, POOL__RCONN_CMD, i);
    pool__rconn_init(&n->pubsub, p, n, &n->addr, POOL__RCONN_PUBSUB, 0);
    list_init(&n->chans);
    n->state = POOL__NODE_ACTIVE;
    n->role = "master";
    list_add_tail(&p->nodes, &n->link);
    p->nnodes++;
    return n;
}

void pool__node_start_pubsub(struct pool_node *n)
{
    if (n->state == POOL__NODE_ACTIVE && n->pool->pubsub_known)
        pool__rconn_start(&n->pubsub);
}

void pool__node_start(struct pool_node *n)
{
    unsigned i;

    for (i = 0; i < n->nconns; i++)
        pool__rconn_start(&n->conns[i]);
    pool__node_start_pubsub(n);
}

void pool__node_stop(struct pool_node *n)
{
    unsigned i;

    n->state = POOL__NODE_STOPPED;
    for (i = 0; i < n->nconns; i++)
        pool__rconn_stop(&n->conns[i]);
    pool__rconn_stop(&n->pubsub);
}

bool pool__node_is_idle(const struct pool_node *n)
{
    unsigned i;

    if (n->pubsub.state != POOL__RCONN_DISCONNECTED)
        return false;
    for (i = 0; i < n->nconns; i++) {
        if (n->conns[i].state != POOL__RCONN_DISCONNECTED)
            return false;
    }
    return true;
}

void pool__node_destroy(struct pool_node *n)
{
    struct pool *p = n->pool;
    unsigned i;

    LP_BUG_ON(!pool__node_is_idle(n) || !list_empty(&n->chans));
    for (i = 0; i < n->nconns; i++)
        pool__rconn_deinit(&n->conns[i]);
    pool__rconn_deinit(&n->pubsub);
    list_del_init(&n->link);
    p->nnodes--;
    pool__addr_deinit(&n->addr);
    free(n->conns);
    free(n);
}

/* The hinted connection, or the next ready one, or NULL. Falling back
 * keeps a client served while its connection reconnects. The price: when
 * the hinted connection comes back, that client's next request goes to it
 * and may overtake one still in flight on the fallback connection, so
 * per-hint order holds only while the hinted connection stays up (a client
 * that waits for each reply is never affected). */
struct pool__rconn *pool__node_pick(struct pool_node *n, uint64_t hint)
{
    unsigned first = (unsigned)(hint % n->nconns), i;

    for (i = 0; i < n->nconns; i++) {
        struct pool__rconn *rc = &n->conns[(first + i) % n->nconns];

        if (pool__rconn_is_ready(rc))
            return rc;
    }
    return NULL;
}

bool pool__node_is_up(const struct pool_node *n)
{
    unsigned i;

    for (i = 0; i < n->nconns; i++) {
        if (pool__rconn_is_ready(&n->conns[i]))
            return true;
    }
    return false;
}

/* Exponentially weighted, 1/8 per sample (as TCP's srtt): recent enough
 * to show a failover's effect within a few round trips, smooth enough
 * not to jump on one slow reply. */
void pool__node_latency(struct pool_node *n, uint64_t us)
{
    n->latency_last_us = us;
    if (n->latency_us == 0)
        n->latency_us = us ? us : 1;
    else
        n->latency_us = n->latency_us - n->latency_us / 8 + us / 8;
}

struct pool_node *pool__node_find(struct pool *p, const char *host, size_t hostlen, int port)
{
    struct list *pos;

    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (pool__addr_is(&n->addr, host, hostlen, port))
            return n;
    }
    return NULL;
}

bool pool__node_is_connecting(const struct pool_node *n)
{
    unsigned i;

    for (i = 0; i < n->nconns; i++) {
        if (pool__rconn_is_connecting(&n->conns[i]))
            return true;
    }
    return false;
}

/* ---- stats ------------------------------------------------------------------- */

static const char *node_state_name(const struct pool_node *n, unsigned ready)
{
    if (n->state != POOL__NODE_ACTIVE)
        return "draining";
    if (ready)
        return "up";
    if (!n->pool->started || n->pool->stopping)
        return "down";
    return pool__node_is_connecting(n) ? "connecting" : "down";
}

static void node_stats(const struct pool_node *n, struct pool_node_stats *st)
{
    unsigned i, ready = 0;

    for (i = 0; i < n->nconns; i++)
        ready += pool__rconn_is_ready(&n->conns[i]);
    memset(st, 0, sizeof(*st));
    st->addr = n->addr.where;
    st->id = n->id;
    st->state = node_state_name(n, ready);
    st->role = n->role;
    st->health = n->health;
    st->slots = n->pool->cl ? n->nslots : POOL_SLOTS;
    st->conns = n->nconns;
    st->conns_ready = ready;
    st->pubsub_ready = pool__rconn_is_ready(&n->pubsub);
    st->channels = pool__pubsub_count(n);
    st->requests = n->requests;
    st->errors = n->errors;
    st->moved = n->moved;
    st->ask = n->ask;
    st->tryagain = n->tryagain;
    st->latency_us = n->latency_us;
    st->latency_last_us = n->latency_last_us;
}

/* Active nodes first, then draining/stopped ones, each in creation order. */
size_t pool_get_node_stats(const struct pool *p, struct pool_node_stats *out, size_t max)
{
    const struct list *pos;
    size_t k = 0;
    int pass;

    for (pass = 0; pass < 2; pass++) {
        for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
            const struct pool_node *n = list_entry(pos, struct pool_node, link);

            if ((n->state == POOL__NODE_ACTIVE) != (pass == 0))
                continue;
            if (k < max)
                node_stats(n, &out[k]);
            k++;
        }
    }
    return k;
}

/* ---- connection events (rconn.c) ------------------------------------------------ */

/* Requests parked while a redirect target was connecting go out now. */
void pool__node_conn_up(struct pool__rconn *rc)
{
    if (rc->pool->cl)
        pool__redirect_kick(rc->pool);
}

/* A serving master went away: the cluster may be failing over, so ask
 * for its view at once (the refresh also speeds up while a node is down,
 * see cluster.c). */
void pool__node_conn_down(struct pool__rconn *rc, bool was_ready)
{
    if (rc->pool->cl && was_ready && rc->node->state == POOL__NODE_ACTIVE)
        pool__cluster_refresh(rc->pool);
}

/* ---- restarts ----------------------------------------------------------------- */

void pool__node_run_id(struct pool_node *n, const char *id, size_t len)
{
    struct pool *p = n->pool;
    bool restarted;

    if (len == 0 || len >= sizeof(n->run_id))
        return;
    restarted = n->run_id[0] != '\0' && (strlen(n->run_id) != len || memcmp(n->run_id, id, len));
    memcpy(n->run_id, id, len);
    n->run_id[len] = '\0';
    if (!restarted || p->stopping)
        return;
    p->restarts++;
    log_msg(LOG_LVL_WARN,
            "pool: %s restarted (new run_id %s); what it held may be lost: checking the holds "
            "of its slots",
            n->addr.where, n->run_id);
    if (p->cl)
        pool__cluster_node_restarted(p->cl, n);
    else
        sched_loop_timer_in(p->loop, &p->restarted, 0);
}
