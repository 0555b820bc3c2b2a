/* Topology replies (module-private to pool/): CLUSTER SHARDS (Redis >= 7)
 * and CLUSTER SLOTS, and a sentinel's SENTINEL GET-MASTER-ADDR-BY-NAME,
 * parsed from the pool's reply trees into one plain description, a node list
 * plus a slot -> node index, which cluster.c applies to the node table (a
 * Sentinel-monitored master is one node owning every slot). Pure
 * functions: no I/O, no pool. */
#ifndef LP_POOL_TOPO_H
#define LP_POOL_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/addr.h"
#include "pool/pool.h"
#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cluster node ids are 40 hex characters. */
#define POOL__NODE_ID_SIZE 41

struct pool__topo_node {
    char id[POOL__NODE_ID_SIZE]; /* node id, "" when the reply has none */
    char host[POOL__HOST_MAX];   /* endpoint (or ip) as announced */
    int port;                    /* TCP port */
    bool master;                 /* role master (else replica) */
    char health[16];             /* SHARDS "health" ("online", "failed", "loading"), or "" */
    unsigned nslots;             /* slots it owns in this reply (masters) */
};

struct pool__topo {
    struct pool__topo_node *nodes; /* owned: nnodes entries, masters and replicas */
    size_t nnodes;                 /* entries in nodes */
    size_t cap;                    /* allocated entries */
    int16_t owner[POOL_SLOTS];     /* index into nodes of each slot's master, or -1 */
    bool tls;                      /* SHARDS: take each node's "tls-port" (a TLS pool) */
};

/* Parses a CLUSTER SHARDS reply into t (initialised here; free with
 * pool__topo_free() whatever the result). A node announcing no endpoint
 * ("" or "?") gets fallback_host, the host the reply came from. With tls
 * (a rediss-cluster:// pool) each node's "tls-port" is used, else its
 * "port"; a node without the one needed is left out (unreachable).
 * Returns 0, -EPROTO (not a SHARDS reply) or -ENOMEM. CLUSTER SLOTS needs
 * no such choice: Redis answers it with the ports of the connection's
 * kind. */
int pool__topo_parse_shards(struct pool__topo *t, const struct pool_reply *r,
                            const char *fallback_host, bool tls);

/* Same for a CLUSTER SLOTS reply (the first node of each range is its
 * master, the others replicas). */
int pool__topo_parse_slots(struct pool__topo *t, const struct pool_reply *r,
                           const char *fallback_host);

/* Parses a SENTINEL GET-MASTER-ADDR-BY-NAME reply ([host, port], the
 * port as a string) into t: one master owning every slot. Returns 0,
 * -ENOENT (nil: the sentinel does not know the master's name), -EPROTO
 * (any other shape, an error reply included) or -ENOMEM. */
int pool__topo_parse_sentinel(struct pool__topo *t, const struct pool_reply *r);

void pool__topo_free(struct pool__topo *t);

/* Masters that own at least one slot. */
size_t pool__topo_masters(const struct pool__topo *t);

#ifdef __cplusplus
}
#endif

#endif
