/* Per-node upstream figures for INFO and /metrics; see upstream_nodes.h. */
#include "proxy/upstream_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "pool/pool.h"
#include "proxy/server.h"
#include "proxy/stats.h"

#define NODES_MAX 256u /* nodes shown (a cluster has at most a few hundred masters) */

/* The pool's nodes into a heap array (*out, free() it); returns how many. */
static size_t nodes_get(struct px_server *srv, struct pool_node_stats **out)
{
    size_t n = pool_get_node_stats(srv->pool, NULL, 0);

    n = LP_MIN(n, (size_t)NODES_MAX);
    *out = n ? calloc(n, sizeof(**out)) : NULL;
    if (!*out)
        return 0;
    return pool_get_node_stats(srv->pool, *out, n) < n ? 0 : n;
}

void px_upstream_nodes_info(struct px_server *srv, struct buf *o)
{
    struct px_stats_view v;
    struct pool_node_stats *nodes;
    struct pool_stats st;
    size_t i, n;

    pool_get_stats(srv->pool, &st);
    buf_appendf(o,
                "# Cluster\r\ncluster_enabled:%d\r\ncluster_pubsub_mode:%s\r\n"
                "cluster_nodes:%u\r\ncluster_nodes_ready:%u\r\ncluster_slots_served:%u\r\n"
                "cluster_topology_refreshes:%llu\r\ncluster_topology_changes:%llu\r\n"
                "cluster_moved:%llu\r\ncluster_ask:%llu\r\ncluster_tryagain:%llu\r\n"
                "upstream_is_cluster:%d\r\n",
                st.cluster ? 1 : 0,
                st.cluster ? (st.pubsub_mode[0] ? st.pubsub_mode : "detecting") : "classic",
                st.nodes, st.nodes_ready, st.slots_served,
                (unsigned long long)st.topology_refreshes, (unsigned long long)st.topology_changes,
                (unsigned long long)st.moved, (unsigned long long)st.ask,
                (unsigned long long)st.tryagain, st.upstream_is_cluster ? 1 : 0);
    px_stats_view(srv, PX_STATS_G_TOPOLOGY, &v);
    px_stats_write_info(o, &v);
    n = nodes_get(srv, &nodes);
    for (i = 0; i < n; i++) {
        const struct pool_node_stats *d = &nodes[i];

        buf_appendf(o,
                    "node%zu:addr=%s,id=%s,state=%s,role=%s,health=%s,slots=%u,conns=%u,"
                    "conns_ready=%u,pubsub_ready=%d,subscriptions=%llu,requests=%llu,"
                    "errors=%llu,moved=%llu,ask=%llu,tryagain=%llu,latency_us=%llu,"
                    "latency_last_us=%llu\r\n",
                    i, d->addr, d->id, d->state, d->role, d->health, d->slots, d->conns,
                    d->conns_ready, d->pubsub_ready ? 1 : 0, (unsigned long long)d->channels,
                    (unsigned long long)d->requests, (unsigned long long)d->errors,
                    (unsigned long long)d->moved, (unsigned long long)d->ask,
                    (unsigned long long)d->tryagain, (unsigned long long)d->latency_us,
                    (unsigned long long)d->latency_last_us);
    }
    free(nodes);
    buf_appendf(o, "\r\n");
}

/* One labelled family: HELP, TYPE, then a line per node. */
struct node_family {
    const char *name; /* full metric name */
    const char *type; /* "counter" or "gauge" */
    const char *help; /* HELP text */
    /* The node's value, as a decimal string into buf. */
    void (*value)(const struct pool_node_stats *d, char *buf, size_t n);
};

static void v_up(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%d", strcmp(d->state, "up") == 0 ? 1 : 0);
}

static void v_slots(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%u", d->slots);
}

static void v_latency(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu.%06llu", (unsigned long long)(d->latency_us / 1000000),
             (unsigned long long)(d->latency_us % 1000000));
}

static void v_subs(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->channels);
}

static void v_requests(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->requests);
}

static void v_errors(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->errors);
}

static void v_moved(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->moved);
}

static void v_ask(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->ask);
}

static void v_tryagain(const struct pool_node_stats *d, char *b, size_t n)
{
    snprintf(b, n, "%llu", (unsigned long long)d->tryagain);
}

static const struct node_family families[] = {
    {"lockproxy_upstream_node_up", "gauge",
     "1 while the node (a master) has a ready command connection.", v_up},
    {"lockproxy_upstream_node_slots", "gauge", "Cluster slots the node owns (16384 alone).",
     v_slots},
    {"lockproxy_upstream_node_latency_seconds", "gauge",
     "Round trip to the node, moving average of sampled requests.", v_latency},
    {"lockproxy_upstream_node_subscriptions", "gauge", "Channels subscribed on the node.", v_subs},
    {"lockproxy_upstream_node_requests_total", "counter",
     "Requests sent to the node (redirected retries included).", v_requests},
    {"lockproxy_upstream_node_errors_total", "counter",
     "Requests failed on the node by connection loss or timeout.", v_errors},
    {"lockproxy_upstream_node_moved_total", "counter", "MOVED replies the node gave.", v_moved},
    {"lockproxy_upstream_node_ask_total", "counter", "ASK replies the node gave.", v_ask},
    {"lockproxy_upstream_node_tryagain_total", "counter",
     "TRYAGAIN, CLUSTERDOWN and LOADING replies the node gave.", v_tryagain},
};

static void write_node_families(struct buf *o, const struct pool_node_stats *nodes, size_t n)
{
    char v[48];
    size_t f, i;

    for (f = 0; f < LP_ARRAY_SIZE(families); f++) {
        buf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n", families[f].name, families[f].help,
                    families[f].name, families[f].type);
        for (i = 0; i < n; i++) {
            families[f].value(&nodes[i], v, sizeof(v));
            buf_appendf(o, "%s{node=\"%s\"} %s\n", families[f].name, nodes[i].addr, v);
        }
    }
    buf_appendf(o, "# HELP lockproxy_upstream_node_info The node's role, state and cluster "
                   "health (value 1).\n# TYPE lockproxy_upstream_node_info gauge\n");
    for (i = 0; i < n; i++)
        buf_appendf(o,
                    "lockproxy_upstream_node_info{node=\"%s\",id=\"%s\",role=\"%s\","
                    "state=\"%s\",health=\"%s\"} 1\n",
                    nodes[i].addr, nodes[i].id, nodes[i].role, nodes[i].state, nodes[i].health);
}

void px_upstream_nodes_metrics(struct px_server *srv, struct buf *o)
{
    struct pool_node_stats *nodes;
    struct px_stats_view v;
    struct pool_stats st;
    size_t n = nodes_get(srv, &nodes);

    write_node_families(o, nodes, n);
    free(nodes);
    pool_get_stats(srv->pool, &st);
    buf_appendf(o,
                "# HELP lockproxy_upstream_topology_refreshes_total Cluster topology replies "
                "applied.\n# TYPE lockproxy_upstream_topology_refreshes_total counter\n"
                "lockproxy_upstream_topology_refreshes_total %llu\n",
                (unsigned long long)st.topology_refreshes);
    px_stats_view(srv, PX_STATS_G_TOPOLOGY, &v);
    px_stats_write_prom(o, &v);
}
