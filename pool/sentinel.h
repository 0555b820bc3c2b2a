/* The Sentinel state of a pool (module-private to pool/): the master's
 * name, the subscription connection (+switch-master, +promoted-slave), what the sentinels
 * said and the counters. It hangs off the cluster state (cl->sn): a
 * Sentinel upstream is a cluster whose one master owns every slot, with
 * the topology connection asking a sentinel instead of a cluster node.
 * The design is in sentinel.c. */
#ifndef LP_POOL_SENTINEL_H
#define LP_POOL_SENTINEL_H

#include <stdbool.h>
#include <stdint.h>

#include "pool/addr.h"
#include "pool/rconn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct pool__cluster;
struct pool_stats;

struct pool__sentinel {
    struct pool__cluster *cl;        /* borrowed: owner */
    const char *name;                /* borrowed: opts.sentinel_master */
    struct pool__addr sub_addr;      /* owned: where the subscription connection goes */
    struct pool__rconn sub;          /* owned: the events' subscription, on the query's sentinel */
    bool subscribed;                 /* the SUBSCRIBE was confirmed on sub's current socket */
    unsigned failed_in_row;          /* sentinels given up on since the last answer */
    bool role_give_up;               /* the query connection closes for a ROLE, not a failure */
    bool role_warned;                /* a ROLE refusal was logged at WARN for this master */
    uint64_t distrusted_gen;         /* cl->gen whose sentinel was already replaced for a ROLE */
    char master[POOL__HOST_MAX + 8]; /* "host:port" of the last master named, "" */
    uint64_t answers;                /* stats: answers naming a master */
    uint64_t failures;               /* stats: sentinels given up on */
    uint64_t switches;               /* stats: a different master named */
    uint64_t events;                 /* stats: +switch-master/+promoted-slave messages for us */
    uint64_t readonly;               /* stats: READONLY replies */
    uint64_t role_mismatches;        /* stats: ROLE not master on a serving node */
};

/* Creates cl->sn (cl->seeds are parsed). Returns 0 or -ENOMEM. */
int pool__sentinel_create(struct pool__cluster *cl);

/* Frees cl->sn (its connection released). */
void pool__sentinel_destroy(struct pool__cluster *cl);

/* Starts / stops the subscription connection (on the topology
 * connection's sentinel). */
void pool__sentinel_start(struct pool__cluster *cl);
void pool__sentinel_stop(struct pool__cluster *cl);
bool pool__sentinel_is_stopped(const struct pool__cluster *cl);

/* The arguments of the master query. */
void pool__sentinel_query(const struct pool__cluster *cl, const char *argv[3]);

/* One reply to the master query (borrowed): applied to the node table,
 * or the sentinel is given up on. May invoke callbacks. */
void pool__sentinel_reply(struct pool__cluster *cl, const struct pool_reply *r);

/* The query connection was released: one more sentinel failed. */
void pool__sentinel_released(struct pool__cluster *cl);

/* The query connection is READY (on a sentinel the subscription must
 * follow). */
void pool__sentinel_topo_up(struct pool__cluster *cl);

/* A request got READONLY from node n: counted; n leaves the map. */
void pool__sentinel_readonly(struct pool *p, struct pool_node *n);

/* The Sentinel fields of st. */
void pool__sentinel_stats(const struct pool__cluster *cl, struct pool_stats *st);

#ifdef __cplusplus
}
#endif

#endif
