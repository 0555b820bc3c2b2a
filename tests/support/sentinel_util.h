/* A throw-away Redis Sentinel deployment for integration tests: one master
 * and two replicas (redis-server --replicaof), watched by three sentinels
 * (redis-server CONF --sentinel, each with a writable config file of its
 * own that it rewrites as it learns), all on free loopback ports, built on
 * pool_redis_util's struct predis, so they die with the test and their
 * dirs are removed at exit. The master is monitored as RSENT_NAME with
 * quorum 2, down-after-milliseconds 1000 and failover-timeout 5000, so a
 * killed master is replaced within a few seconds.
 *
 * Helpers start, stop, kill and restart each node and each sentinel, run
 * SENTINEL FAILOVER, kill -9 the master, and wait until every running
 * sentinel names the same new master and that node reports ROLE master.
 * Every wait is bounded; a helper that times out fails the test. Reusable
 * by any test that needs a Sentinel-managed master (pool, proxy, torture). */
#ifndef LP_TESTS_INTEGRATION_SENTINEL_UTIL_H
#define LP_TESTS_INTEGRATION_SENTINEL_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "pool_redis_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RSENT_NODES     3          /* data nodes: node[0] starts as the master */
#define RSENT_SENTINELS 3          /* sentinels, quorum 2 */
#define RSENT_NAME      "mymaster" /* the monitored master's name */

struct rsentinel {
    struct predis node[RSENT_NODES];     /* data nodes; pid < 0 once killed */
    struct predis sent[RSENT_SENTINELS]; /* sentinels; pid < 0 once killed */
    char conf[RSENT_SENTINELS][96];      /* each sentinel's config file */
    char master_port[8];                 /* node[0]'s port, for --replicaof */
    char list[160];                      /* "127.0.0.1:p,127.0.0.1:p,127.0.0.1:p" (sentinels) */
    const char *password;                /* borrowed: data nodes' requirepass, or NULL */
    const char *sentinel_password;       /* borrowed: sentinels' requirepass, or NULL */
};

/* True when redis-server is installed (it also runs the sentinels). */
bool rsentinel_available(void);

/* Starts the master, the replicas (waits for their links), then the
 * sentinels, and waits until every sentinel sees both replicas and the
 * two other sentinels. password protects the data nodes (requirepass,
 * masterauth, the sentinels' auth-pass), sentinel_password the sentinels
 * (requirepass, sentinel-pass); either may be NULL. Fails the test on
 * error. */
void rsentinel_start(struct rsentinel *s, const char *password, const char *sentinel_password);

/* Kills every process and removes the dirs (also done at exit). */
void rsentinel_cleanup(struct rsentinel *s);

/* "127.0.0.1:p" of data node i into buf. */
const char *rsentinel_node_addr(const struct rsentinel *s, int i, char *buf, size_t size);

/* Index of the data node listening on port, or -1. */
int rsentinel_by_port(const struct rsentinel *s, int port);

/* One command on data node i / sentinel k; the reply (free it) or NULL. */
redisReply *rsentinel_cmd(const struct rsentinel *s, int i, const char *fmt, ...);
redisReply *rsentinel_scmd(const struct rsentinel *s, int k, const char *fmt, ...);

/* Integer reply of one command on data node i, or -1 on any error. */
long long rsentinel_int(const struct rsentinel *s, int i, const char *fmt, ...);

/* Runs a command on data node i / sentinel k; fails the test unless it
 * answers +OK. */
void rsentinel_ok(const struct rsentinel *s, int i, const char *fmt, ...);
void rsentinel_sok(const struct rsentinel *s, int k, const char *fmt, ...);

/* True when data node i is running and reports ROLE master. */
bool rsentinel_is_master(const struct rsentinel *s, int i);

/* The data node sentinel k names for RSENT_NAME, or -1 (down, unknown). */
int rsentinel_named_by(const struct rsentinel *s, int k);

/* The master every running sentinel names (ROLE master), waiting for them
 * to agree on a node other than not (-1: any). Returns its index. */
int rsentinel_wait_master(const struct rsentinel *s, int not );

/* As rsentinel_wait_master, but gives up after ms: returns -1 then. */
int rsentinel_try_wait_master(const struct rsentinel *s, int not, int ms);

/* SENTINEL FAILOVER on the first running sentinel, whatever it answers
 * (a failover refused or aborted is the caller's to retry); the new
 * master within ms, or -1. */
int rsentinel_try_failover(struct rsentinel *s, int ms);

/* SENTINEL FAILOVER on the first running sentinel; waits for the new
 * master (rsentinel_wait_master) and returns it. */
int rsentinel_failover(struct rsentinel *s);

/* SIGKILLs the current master and waits for the sentinels to promote a
 * replica. Returns the new master. */
int rsentinel_kill_master(struct rsentinel *s);

/* Data node i / sentinel k: SIGKILL, start again (same port, dir and, for
 * a sentinel, its rewritten config), SIGSTOP / SIGCONT. */
void rsentinel_kill_node(struct rsentinel *s, int i);
void rsentinel_start_node(struct rsentinel *s, int i);
void rsentinel_signal_node(struct rsentinel *s, int i, int sig);
void rsentinel_kill_sentinel(struct rsentinel *s, int k);
void rsentinel_start_sentinel(struct rsentinel *s, int k);

/* SENTINEL SET RSENT_NAME option value on every running sentinel. */
void rsentinel_set_all(const struct rsentinel *s, const char *option, const char *value);

#ifdef __cplusplus
}
#endif

#endif
