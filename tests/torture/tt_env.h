/* Torture suite: the processes of a run. A lock Redis (AOF on, so a kill
 * -9 loses nothing it acknowledged; DEBUG enabled), a resource Redis that
 * is never faulted, one or two lockproxies in front of the lock Redis, and
 * the forked clients. Servers are started through tests/integration's
 * proxy_util (registered children, killed at exit whatever happens);
 * clients are tracked here and killed by an exit handler too. */
#ifndef LP_TESTS_TORTURE_TT_ENV_H
#define LP_TESTS_TORTURE_TT_ENV_H

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "proxy_util.h"
#include "relay_util.h"
#include "sentinel_util.h"
#include "tt.h"
#include "tt_check.h"

#define TT_MAX_FORKED (TT_MAX_CLIENTS + 15) /* workload + scripted clients */
#define TT_SLOT_AUX   (TT_MAX_CLIENTS + 15) /* shm slot the slow reader reports into */

struct tt_env {
    const struct tt_config *cfg; /* borrowed */
    struct pu_redis lock;        /* the faulted lock Redis (not started with --cluster) */
    struct rcluster *cluster;    /* owned: --cluster: the lock Redis Cluster, else NULL */
    struct rsentinel *sentinel;  /* owned: --sentinel: master, replicas, sentinels, else NULL */
    struct pu_redis res;         /* the resource Redis, never faulted */
    struct pu_proxy proxy[TT_MAX_PROXIES];
    int nproxies;
    struct relay *relay;       /* owned: --partitions: P0 <-> lock Redis, else NULL */
    char log_dir[TT_PATH_MAX]; /* client-<id>.log files */
    struct tt_shm *shm;        /* owned: MAP_SHARED page */
    struct tt_client_cfg ccfg[TT_MAX_FORKED];
    pid_t pid[TT_MAX_FORKED];   /* forked clients by slot, 0 = none */
    bool killed[TT_MAX_FORKED]; /* killed by the driver at the end */
    redisContext *admin;        /* owned: lock Redis admin connection, or NULL */
    long long rss_peak_kb[TT_MAX_PROXIES];
    struct tt_report *report; /* borrowed: driver-side violations go here */
    char numbuf[5][16];       /* proxy flag values (proxy[].extra points here) */
};

/* Starts both Redis servers and the proxies; fails the run (exit) on error. */
void tt_env_start(struct tt_env *e, const struct tt_config *cfg, struct tt_report *report);

/* Stops the proxies (SIGTERM) and the Redis servers. */
void tt_env_stop(struct tt_env *e);

/* Admin connection to the lock Redis (connected on demand); NULL while it
 * is down. tt_env_admin_drop forgets it (after a kill). */
redisContext *tt_env_admin(struct tt_env *e);
void tt_env_admin_drop(struct tt_env *e);

/* --sentinel: a connection to the master the sentinels name now (free
 * it), or NULL. */
redisContext *tt_env_sentinel_master(struct tt_env *e);

/* --cluster: the master owning name's slot now, or -1. */
int tt_env_owner(struct tt_env *e, const char *name);

/* kill -9 proxy i and reap it; start it again on its port. */
void tt_env_proxy_kill(struct tt_env *e, int i);
void tt_env_proxy_start(struct tt_env *e, int i);

/* Forks a client for slot (its cfg is filled by the caller in e->ccfg[slot]). */
void tt_env_fork_client(struct tt_env *e, int slot);

/* Sets stop, resumes every client and waits up to ms for them to exit;
 * stragglers are killed (marked in e->killed). Returns how many. */
int tt_env_stop_clients(struct tt_env *e, int ms);

/* Waits up to ms for the clients of slots [from, to) to exit. */
void tt_env_wait_clients(struct tt_env *e, int from, int to, int ms);

/* Samples the proxies' RSS (VmRSS and VmHWM) into rss_peak_kb; checks they
 * are alive: a proxy that died unasked is a violation, and is restarted. */
void tt_env_watch(struct tt_env *e);

/* Current VmRSS of proxy i in kB, or -1. */
long long tt_env_proxy_rss_kb(struct tt_env *e, int i);

/* The directory of this run's files. */
const char *tt_env_dir(void);

#endif
