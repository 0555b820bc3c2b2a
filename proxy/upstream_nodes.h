/* The upstream's nodes as INFO and /metrics show them: per node (every
 * master of a Redis Cluster, or the single Redis) its state, role, slots
 * owned, latency, MOVED/ASK/TRYAGAIN counts and subscriptions, and the
 * cluster-wide figures (pub/sub mode, topology refreshes and changes, the
 * holds checked after a change and the leases found lost then). Read
 * from pool_get_stats() and pool_get_node_stats() at each INFO or scrape;
 * nothing is kept here. */
#ifndef LP_PROXY_UPSTREAM_NODES_H
#define LP_PROXY_UPSTREAM_NODES_H

#include "common/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* INFO section "cluster". */
void px_upstream_nodes_info(struct px_server *srv, struct buf *out);

/* The lockproxy_upstream_node_* and lockproxy_topology_* families. */
void px_upstream_nodes_metrics(struct px_server *srv, struct buf *out);

#ifdef __cplusplus
}
#endif

#endif
