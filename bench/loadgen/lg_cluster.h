/* Cluster mode of lockproxy-bench (--cluster): --redis names a seed node of
 * a Redis Cluster. The bench reads the slot map once (CLUSTER SLOTS on the
 * seed) and then
 *   - routes each direct client, and its pub/sub connection, to the master
 *     that owns its key's slot (a client's key never changes, so the
 *     routing is done once, at connect time);
 *   - runs Redisson's scripts with SPUBLISH and waits with SSUBSCRIBE on
 *     the owning shard, as Redisson does on Redis >= 7 in its default
 *     shardedSubscriptionMode AUTO (lockproxy's --cluster-pubsub auto too);
 *   - SCRIPT LOADs the scripts on every master;
 *   - sums INFO cpu and commandstats over every master, so "Redis CPU per
 *     acquisition" is the whole cluster's;
 *   - deletes the run's keys on the master of each.
 * The proxy target's clients connect to --proxy (a lockproxy started with
 * --upstream redis-cluster://...): only the figures and the clean-up use
 * the slot map there. The topology is taken as fixed for the run: a MOVED
 * or ASK reply is counted as an error (its text is the run's first error),
 * never followed, so a run during a reshard shows up as errors rather than
 * as slower figures. */
#ifndef LP_BENCH_LOADGEN_LG_CLUSTER_H
#define LP_BENCH_LOADGEN_LG_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_stats.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LG_CLUSTER_SLOTS       16384u
#define LG_CLUSTER_MAX_MASTERS 64u

struct lg_cluster {
    unsigned nmasters;                                  /* masters in the slot map */
    struct lg_endpoint masters[LG_CLUSTER_MAX_MASTERS]; /* their endpoints (seed's creds) */
    struct lg_addr addrs[LG_CLUSTER_MAX_MASTERS];       /* their resolved addresses */
    uint8_t owner[LG_CLUSTER_SLOTS];                    /* master index of each slot */
    char *lua[LG_NSCRIPTS];                             /* owned: SPUBLISH variants */
};

/* Reads the slot map from the seed (r->o->redis) into a new r->cluster.
 * Returns 0 or -errno (r->res->error says why: unreachable, not a
 * cluster, a slot with no master, too many masters). */
int lg_cluster_open(struct lg_run *r);

/* Frees r->cluster (NULL is fine). */
void lg_cluster_close(struct lg_run *r);

/* Replaces r's scripts by copies that SPUBLISH instead of PUBLISH.
 * Returns 0 or -ENOMEM. */
int lg_cluster_scripts(struct lg_run *r);

/* The master that owns key index key. */
unsigned lg_cluster_master_of(const struct lg_run *r, unsigned key);

/* INFO cpu and commandstats of every master, summed into out (CPU added,
 * calls added by command name). Returns 0 or -errno with err set. */
int lg_cluster_snapshot(const struct lg_run *r, struct lg_redis_snap *out, char *err,
                        size_t errlen);

/* Deletes every key of the run on the master of its slot; fills
 * r->res->cleaned, keys_deleted and clean_note. */
void lg_cluster_clean(struct lg_run *r);

#ifdef __cplusplus
}
#endif

#endif
