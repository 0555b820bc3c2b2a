/* The cluster state of a pool (module-private to pool/): seeds, the
 * topology connection, the slot map, the requests waiting to be re-sent,
 * and the deferred topology notification. Shared by cluster.c (topology),
 * redirect.c (MOVED/ASK/TRYAGAIN/READONLY) and, for a Sentinel upstream
 * (a one-master "cluster": the seeds are the sentinels, sn is set),
 * sentinel.c; the design is in cluster.c. */
#ifndef LP_POOL_CLUSTER_H
#define LP_POOL_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "pool/addr.h"
#include "pool/pool.h"
#include "pool/rconn.h"
#include "pool/topo.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct pool_node;
struct pool__sentinel;

struct pool__cluster {
    struct pool *pool;                      /* borrowed: owner */
    struct pool__sentinel *sn;              /* owned: Sentinel state, NULL for a cluster */
    struct pool__addr *seeds;               /* owned: nseeds seed (sentinel) addresses */
    size_t nseeds;                          /* entries in seeds */
    struct pool__addr topo_addr;            /* owned: where the topology connection goes */
    size_t next_candidate;                  /* rotation over active nodes, then seeds */
    struct pool__rconn topo;                /* owned: the topology connection */
    struct pool_node *slots[POOL_SLOTS];    /* borrowed: each slot's ACTIVE owner, or NULL */
    unsigned slots_served;                  /* non-NULL entries of slots */
    bool have_map;                          /* a topology was applied */
    bool querying;                          /* a topology query is in flight */
    bool again;                             /* another query is wanted after this one */
    bool detecting;                         /* PUBSUB SHARDNUMSUB is in flight */
    bool use_slots;                         /* CLUSTER SHARDS is unknown: use CLUSTER SLOTS */
    bool warned;                            /* a query error was logged at WARN */
    uint64_t gen;                           /* topology generation (applied replies) */
    struct sched_timer tick;                /* periodic refresh and node housekeeping */
    struct sched_timer notify;              /* deferred re-home and on_topology */
    struct sched_timer retry;               /* the earliest parked request */
    struct list parked;                     /* owned: struct pool__req waiting to be re-sent */
    uint8_t changed[POOL_SLOT_BITMAP_SIZE]; /* slots changed since the last notify */
    unsigned nchanged;                      /* bits set in changed */
    bool initial;                           /* the next notify reports the first map */
    uint64_t refreshes;                     /* stats: topology replies applied */
    uint64_t changes;                       /* stats: on_topology notifications */
};

/* Applies a parsed topology t to the node table and slot map (nodes
 * created, revived or drained; changed slots marked for the deferred
 * notification). */
void pool__cluster_apply(struct pool__cluster *cl, const struct pool__topo *t);

/* n restarted (pool__node_run_id): reports its slots changed, as a
 * failover would, so that their holds are checked. */
void pool__cluster_node_restarted(struct pool__cluster *cl, const struct pool_node *n);

#ifdef __cplusplus
}
#endif

#endif
