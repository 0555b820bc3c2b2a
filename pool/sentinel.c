/* A Redis Sentinel upstream: which master the sentinels name, and when to
 * ask them. The node table, slot map, parking of requests, re-homing of
 * channels and the topology callback are cluster.c's: the master is one
 * node owning every slot, and a new master is a new topology.
 *
 * DESIGN BLOCK
 *
 * Sentinels. One is asked at a time, on the cluster's topology connection
 * (SENTINEL GET-MASTER-ADDR-BY-NAME name): the first of the list that
 * resolves, then the same one for as long as it answers. It is given up on
 * (the connection closes and cluster.c rotates to the next one, round
 * robin) when the connection fails, when it answers an error or nil (it
 * does not monitor that name), and when the master it named says, in the
 * handshake's ROLE, that it is not a master (once per answer). A backoff
 * that grows with the sentinels given up on in a row keeps a name no
 * sentinel knows from turning into a connect loop.
 *
 * When to ask: on every topology tick (cluster_refresh_ms, 1 s by default,
 * 100 ms while no master is ready: cluster.c's fast tick), when a master's
 * command connection is lost (node.c), when a node answers READONLY
 * (redirect.c), when the subscription is (re)established or lost, and on
 * a +switch-master or +promoted-slave message for our name. The periodic ask is what saves
 * us from a missed message; the ROLE check on every (re)connect is what
 * saves us from a stale answer.
 *
 * Subscription. One connection (kind SENTINEL) SUBSCRIBEs to
 * +switch-master and +promoted-slave on the sentinel the queries go to,
 * and either message for our name triggers a query. A sentinel that
 * learns of a failover from another publishes +switch-master just before
 * it answers the new address; the sentinel that leads the failover
 * answers the new address from the moment it sees the replica promoted,
 * which it announces with +promoted-slave, but publishes +switch-master
 * only when the failover ends (the other replicas reconfigured, or
 * failover-timeout later). So the query a message triggers gets the new
 * master from the same sentinel, whichever role it had.
 * When it is released it reconnects to the query connection's sentinel,
 * and when the query connection settles on another sentinel the
 * subscription is moved there.
 *
 * Errors (pool_get_stats' last_error, what a caller sees with -ENOTCONN):
 * "master NAME is being switched from A to B (sentinel S)" during a
 * switch, "master NAME at A: ..." for the master's connections (ROLE
 * included), "sentinel S: ..." for a sentinel's, and "no sentinel answers
 * for master 'NAME' (N tried; last: ...)" once every sentinel failed in a
 * row.
 *
 * Rejected: subscribing on every sentinel (N connections for an event the
 * periodic ask catches within a second anyway); voting among sentinels (a
 * sentinel's answer is already the quorum's, and a minority sentinel
 * cannot be told from a majority one without asking them all, which is
 * what Sentinel itself does); trusting a +switch-master message's address
 * directly (a second path to the same state; the re-ask costs one round
 * trip). */
#include "pool/sentinel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "common/log.h"
#include "pool/cluster.h"
#include "pool/pool-int.h"
#include "pool/resp.h"
#include "pool/topo.h"

/* Backoff exponent cap for sentinels given up on in a row. */
#define GIVE_UP_BACKOFF_MAX 6

/* Points a at the host and port of to. */
static int addr_retarget(struct pool__addr *a, const struct pool__addr *to)
{
    struct pool__addr n;
    int err = pool__addr_init(&n, to->host, to->port, NULL);

    if (err < 0)
        return err;
    pool__addr_deinit(a);
    *a = n;
    return 0;
}

static bool same_addr(const struct pool__addr *a, const struct pool__addr *b)
{
    return pool__addr_is(a, b->host, strlen(b->host), b->port);
}

int pool__sentinel_create(struct pool__cluster *cl)
{
    struct pool *p = cl->pool;
    struct pool__sentinel *sn = calloc(1, sizeof(*sn));

    if (!sn)
        return -ENOMEM;
    cl->sn = sn;
    sn->cl = cl;
    sn->name = p->opts.sentinel_master;
    pool__rconn_init(&sn->sub, p, NULL, &sn->sub_addr, POOL__RCONN_SENTINEL, 0);
    return pool__addr_init(&sn->sub_addr, cl->seeds[0].host, cl->seeds[0].port, NULL);
}

void pool__sentinel_destroy(struct pool__cluster *cl)
{
    struct pool__sentinel *sn = cl->sn;

    pool__rconn_deinit(&sn->sub);
    pool__addr_deinit(&sn->sub_addr);
    free(sn);
    cl->sn = NULL;
}

void pool__sentinel_start(struct pool__cluster *cl)
{
    (void)addr_retarget(&cl->sn->sub_addr, &cl->topo_addr);
    pool__rconn_start(&cl->sn->sub);
}

void pool__sentinel_stop(struct pool__cluster *cl)
{
    pool__rconn_stop(&cl->sn->sub);
}

bool pool__sentinel_is_stopped(const struct pool__cluster *cl)
{
    return cl->sn->sub.state == POOL__RCONN_DISCONNECTED;
}

/* ---- the master query ---------------------------------------------------------- */

void pool__sentinel_query(const struct pool__cluster *cl, const char *argv[3])
{
    argv[0] = "SENTINEL";
    argv[1] = "GET-MASTER-ADDR-BY-NAME";
    argv[2] = cl->sn->name;
}

/* Closes the query connection: on release cluster.c moves it to the next
 * sentinel. The pause before it grows with the sentinels given up on in
 * a row (a READY connection would start its backoff from zero, and a
 * name no sentinel knows would become a connect loop). */
static void give_up(struct pool__cluster *cl)
{
    struct pool__sentinel *sn = cl->sn;

    if (cl->pool->stopping)
        return;
    cl->topo.attempts = LP_MIN(sn->failed_in_row, (unsigned)GIVE_UP_BACKOFF_MAX);
    pool__rconn_stop(&cl->topo);
    pool__rconn_start(&cl->topo);
}

/* The answer is unusable: say why, then ask the next sentinel. */
static void answer_refused(struct pool__cluster *cl, const struct pool_reply *r, int rc)
{
    struct pool *p = cl->pool;
    const char *where = cl->topo_addr.where;

    if (rc == -ENOENT)
        pool__set_error(p, "sentinel %s does not know master '%s'", where, cl->sn->name);
    else if (r->type == POOL_REPLY_ERROR)
        pool__set_error(p, "sentinel %s: %.*s", where, (int)LP_MIN(r->len, (size_t)100), r->str);
    else
        pool__set_error(p, "sentinel %s: %s", where,
                        rc == -ENOMEM ? "out of memory"
                                      : "unexpected answer to GET-MASTER-ADDR-BY-NAME");
    log_msg(cl->warned ? LOG_LVL_DEBUG : LOG_LVL_WARN, "pool: %s", p->last_error);
    cl->warned = true;
    give_up(cl);
}

/* "host:port" ("[v6]:port") of the answer's master. */
static void master_where(const struct pool__topo *t, char *out, size_t size)
{
    const struct pool__topo_node *m = &t->nodes[0];

    snprintf(out, size, strchr(m->host, ':') ? "[%s]:%d" : "%s:%d", m->host, m->port);
}

/* An answer: logged when it names another master than the last one, then
 * applied (a new master is a new topology for cluster.c). */
static void answered(struct pool__cluster *cl, const struct pool__topo *t)
{
    struct pool__sentinel *sn = cl->sn;
    struct pool *p = cl->pool;
    char now[sizeof(sn->master)];

    master_where(t, now, sizeof(now));
    sn->answers++;
    sn->failed_in_row = 0;
    cl->warned = false;
    if (!sn->master[0]) {
        log_msg(LOG_LVL_INFO, "pool: sentinel %s names %s as master '%s'", cl->topo_addr.where, now,
                sn->name);
    } else if (strcmp(sn->master, now) != 0) {
        sn->switches++;
        sn->role_warned = false;
        pool__set_error(p, "master %s is being switched from %s to %s (sentinel %s)", sn->name,
                        sn->master, now, cl->topo_addr.where);
        log_msg(LOG_LVL_WARN, "pool: %s", p->last_error);
    }
    memcpy(sn->master, now, sizeof(now));
    pool__cluster_apply(cl, t);
}

void pool__sentinel_reply(struct pool__cluster *cl, const struct pool_reply *r)
{
    struct pool__topo *t = malloc(sizeof(*t));
    int rc = t ? pool__topo_parse_sentinel(t, r) : -ENOMEM;

    if (rc == 0)
        answered(cl, t);
    else
        answer_refused(cl, r, rc);
    if (t)
        pool__topo_free(t);
    free(t);
}

/* Every sentinel failed in a row: the error says so, with the last
 * reason (a connect error, an unknown name...). */
void pool__sentinel_released(struct pool__cluster *cl)
{
    struct pool__sentinel *sn = cl->sn;
    struct pool *p = cl->pool;
    char last[sizeof(p->last_error)];

    sn->failures++;
    if (sn->role_give_up) {
        sn->role_give_up = false; /* it answered; the node it named did not agree */
        return;
    }
    if (++sn->failed_in_row < cl->nseeds || strncmp(p->last_error, "no sentinel", 11) == 0)
        return;
    memcpy(last, p->last_error, sizeof(last));
    pool__set_error(p, "no sentinel answers for master '%s' (%zu tried; last: %s)", sn->name,
                    cl->nseeds, last);
    log_msg(sn->failed_in_row == cl->nseeds ? LOG_LVL_WARN : LOG_LVL_DEBUG, "pool: %s",
            p->last_error);
}

/* ---- what the master's connections say ------------------------------------------- */

void pool__sentinel_not_master(struct pool__rconn *rc, const struct pool_reply *r)
{
    struct pool__cluster *cl = rc->pool->cl;
    struct pool__sentinel *sn = cl->sn;

    (void)r;
    if (!rc->node || rc->node->state != POOL__NODE_ACTIVE)
        return; /* a former master reconnecting while it drains */
    sn->role_mismatches++;
    if (sn->distrusted_gen == cl->gen)
        return; /* already asking another sentinel about this answer */
    sn->distrusted_gen = cl->gen;
    log_msg(sn->role_warned ? LOG_LVL_DEBUG : LOG_LVL_WARN,
            "pool: sentinel %s named %s as master '%s', but it is not a master: "
            "asking the next sentinel",
            cl->topo_addr.where, rc->addr->where, sn->name);
    sn->role_warned = true;
    sn->role_give_up = true;
    give_up(cl);
}

void pool__sentinel_readonly(struct pool *p, struct pool_node *n)
{
    struct pool__sentinel *sn = p->cl->sn;

    sn->readonly++;
    if (n->state != POOL__NODE_ACTIVE)
        return; /* already dropped */
    pool__set_error(p, "master %s at %s answered READONLY (it was demoted): asking the sentinels",
                    sn->name, n->addr.where);
    log_msg(LOG_LVL_WARN, "pool: %s", p->last_error);
    pool__cluster_drop_node(p, n);
}

void pool__sentinel_conn_error(struct pool__rconn *rc, const char *msg)
{
    struct pool *p = rc->pool;

    if (rc->node)
        pool__set_error(p, "master %s at %s: %s", p->cl->sn->name, rc->addr->where, msg);
    else
        pool__set_error(p, "sentinel %s: %s", rc->addr->where, msg);
}

/* ---- the events' subscription ------------------------------------------------------- */

void pool__sentinel_sub_up(struct pool *p)
{
    static const char *const sub[] = {"SUBSCRIBE", "+switch-master", "+promoted-slave"};
    struct pool__sentinel *sn = p->cl->sn;

    sn->subscribed = false;
    if (pool__rconn_send(&sn->sub, 3, sub, NULL) < 0)
        pool__rconn_recycle_later(&sn->sub);
    pool__cluster_refresh(p); /* a switch may have gone by unheard */
}

void pool__sentinel_sub_down(struct pool *p)
{
    p->cl->sn->subscribed = false;
    pool__cluster_refresh(p);
}

/* Follows the query connection's sentinel. */
void pool__sentinel_sub_released(struct pool *p)
{
    struct pool__cluster *cl = p->cl;

    (void)addr_retarget(&cl->sn->sub_addr, &cl->topo_addr);
}

/* +switch-master "NAME oldhost oldport newhost newport", +promoted-slave
 * "slave host:port host port @ NAME mhost mport": ours when NAME is. */
static bool event_is_ours(const struct pool__sentinel *sn, const struct pool_reply *chan,
                          const struct pool_reply *msg)
{
    size_t n = strlen(sn->name);
    const char *at;

    if (msg->type != POOL_REPLY_STRING || msg->len <= n)
        return false;
    if (pool__resp_str_is(chan, "+switch-master"))
        return msg->str[n] == ' ' && memcmp(msg->str, sn->name, n) == 0;
    at = memmem(msg->str, msg->len, " @ ", 3);
    return at && (size_t)(msg->str + msg->len - at) > n + 4 && memcmp(at + 3, sn->name, n) == 0 &&
           at[3 + n] == ' ';
}

static void on_event(struct pool *p, const struct pool_reply *chan, const struct pool_reply *msg)
{
    struct pool__sentinel *sn = p->cl->sn;

    sn->events++;
    log_msg(LOG_LVL_INFO, "pool: sentinel %s: %.*s %.*s", sn->sub_addr.where,
            (int)LP_MIN(chan->len, (size_t)32), chan->str, (int)LP_MIN(msg->len, (size_t)200),
            msg->str);
    pool__cluster_refresh(p);
}

void pool__sentinel_sub_reply(struct pool *p, const struct pool_reply *r)
{
    struct pool__sentinel *sn = p->cl->sn;
    const struct pool_reply *kind;

    if (r->type == POOL_REPLY_ERROR) {
        log_msg(LOG_LVL_WARN, "pool: sentinel %s: SUBSCRIBE: %.*s", sn->sub_addr.where,
                (int)LP_MIN(r->len, (size_t)100), r->str);
        return; /* the periodic ask still follows the master */
    }
    if (r->type != POOL_REPLY_ARRAY || r->elements < 3 || r->element[1]->type != POOL_REPLY_STRING)
        return;
    kind = r->element[0];
    if (pool__resp_str_is(kind, "subscribe")) {
        sn->subscribed = true;
        log_msg(LOG_LVL_DEBUG, "pool: sentinel %s: subscribed to %s", sn->sub_addr.where,
                r->element[1]->str);
    } else if (pool__resp_str_is(kind, "message") &&
               event_is_ours(sn, r->element[1], r->element[2])) {
        on_event(p, r->element[1], r->element[2]);
    }
}

/* The query connection is READY on a sentinel: the subscription moves
 * there if it is elsewhere. */
void pool__sentinel_topo_up(struct pool__cluster *cl)
{
    struct pool__sentinel *sn = cl->sn;

    if (same_addr(&sn->sub_addr, &cl->topo_addr))
        return;
    pool__rconn_stop(&sn->sub);
    if (sn->sub.state == POOL__RCONN_DISCONNECTED) /* else on release */
        (void)addr_retarget(&sn->sub_addr, &cl->topo_addr);
    pool__rconn_start(&sn->sub);
}

/* ---- stats ------------------------------------------------------------------------ */

void pool__sentinel_stats(const struct pool__cluster *cl, struct pool_stats *st)
{
    const struct pool__sentinel *sn = cl->sn;
    const struct pool_node *m = cl->slots[0];

    st->sentinel = true;
    st->master_name = sn->name;
    st->master_addr = m ? m->addr.where : "";
    st->sentinel_addr = cl->topo_addr.where;
    st->sentinels = (unsigned)cl->nseeds;
    st->sentinel_connected = pool__rconn_is_ready(&cl->topo);
    st->sentinel_subscribed = pool__rconn_is_ready(&sn->sub) && sn->subscribed;
    st->sentinel_answers = sn->answers;
    st->sentinel_failures = sn->failures;
    st->master_switches = sn->switches;
    st->switch_events = sn->events;
    st->readonly = sn->readonly;
    st->role_mismatches = sn->role_mismatches;
}
