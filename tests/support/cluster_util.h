/* A throw-away Redis Cluster for integration tests: 6 redis-server
 * processes (--cluster-enabled yes, each in its own temp dir, built on
 * pool_redis_util's struct predis, so they die with the test and their
 * dirs are removed at exit), joined by `redis-cli --cluster create
 * --cluster-replicas 1`: 3 masters, 3 replicas. Ports are picked so that
 * port + 10000 (the cluster bus) is free too.
 *
 * Helpers find a slot's owner, migrate a slot (SETSLOT IMPORTING/MIGRATING,
 * MIGRATE, SETSLOT NODE), run CLUSTER FAILOVER on a replica, kill -9 a
 * master and wait for its replica to take over. Every wait is bounded;
 * a helper that times out fails the test. */
#ifndef LP_TESTS_INTEGRATION_CLUSTER_UTIL_H
#define LP_TESTS_INTEGRATION_CLUSTER_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "pool_redis_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RCLUSTER_NODES 6
#define RCLUSTER_CLI   "/usr/bin/redis-cli"

struct rcluster {
    struct predis node[RCLUSTER_NODES]; /* the servers; node[i].pid < 0 once killed */
    char id[RCLUSTER_NODES][41];        /* cluster node ids */
};

/* True when redis-server and redis-cli are installed. */
bool rcluster_available(void);

/* Starts the 6 servers, creates the cluster, waits for cluster_state:ok on
 * every node and for every replica's link to its master. Fails the test
 * on error. */
void rcluster_start(struct rcluster *c);

/* Kills every server and removes the dirs (also done at exit). */
void rcluster_cleanup(struct rcluster *c);

/* "127.0.0.1:p" of node i into buf. */
const char *rcluster_addr(const struct rcluster *c, int i, char *buf, size_t size);

/* Index of the node listening on port, or -1. */
int rcluster_by_port(const struct rcluster *c, int port);

/* A blocking connection to node i (2 s timeouts), or NULL. */
redisContext *rcluster_connect(const struct rcluster *c, int i);

/* Runs one command on node i; returns the reply (free it) or NULL. */
redisReply *rcluster_cmd(const struct rcluster *c, int i, const char *fmt, ...);

/* Integer reply of one command on node i, or -1 on any error. */
long long rcluster_int(const struct rcluster *c, int i, const char *fmt, ...);

/* Runs a command on node i and fails the test unless it answers +OK. */
void rcluster_ok(const struct rcluster *c, int i, const char *fmt, ...);

/* True when node i is running and reports role master. */
bool rcluster_is_master(const struct rcluster *c, int i);

/* The master owning slot, as node i sees it (CLUSTER SLOTS), or -1. */
int rcluster_owner_seen_by(const struct rcluster *c, int i, int slot);

/* The master owning slot, as the first running master sees it. */
int rcluster_owner(const struct rcluster *c, int slot);

/* A running master other than not, or -1. */
int rcluster_other_master(const struct rcluster *c, int not_idx);

/* The replica of master m, or -1. */
int rcluster_replica_of(const struct rcluster *c, int m);

/* The slot owned by master m that comes first at or after from. */
int rcluster_slot_of(const struct rcluster *c, int m, int from);

/* Slots owned by each node (counts[i]), as the first running master sees
 * it: one CLUSTER SLOTS. */
void rcluster_slot_counts(const struct rcluster *c, int counts[RCLUSTER_NODES]);

/* Waits (bounded) until every running node says slot is owned by node
 * owner and reports cluster_state:ok. */
void rcluster_wait_owner(const struct rcluster *c, int slot, int owner);

/* Slot migration in steps: begin (IMPORTING on to, MIGRATING on the owner),
 * move the keys named (MIGRATE ... KEYS), finish (SETSLOT NODE on every
 * running master, target first). rcluster_migrate does all, all keys. */
void rcluster_migrate_begin(const struct rcluster *c, int slot, int from, int to);
void rcluster_migrate_key(const struct rcluster *c, int from, int to, const char *key);
void rcluster_migrate_finish(const struct rcluster *c, int slot, int from, int to);
void rcluster_migrate(const struct rcluster *c, int slot, int to);

/* CLUSTER FAILOVER on replica r; waits until r is master and every
 * running node agrees. */
void rcluster_failover(const struct rcluster *c, int r);

/* SIGKILLs master m and waits until its replica is master and every
 * running node agrees (cluster_state:ok). Returns the new master. */
int rcluster_kill_master(struct rcluster *c, int m);

/* Starts node i again (killed by rcluster_kill_master: same port, dir
 * and nodes.conf); it rejoins as a replica of the master that replaced
 * it. Waits until it is linked and the cluster settled. */
void rcluster_restart_replica(struct rcluster *c, int i);

#ifdef __cplusplus
}
#endif

#endif
