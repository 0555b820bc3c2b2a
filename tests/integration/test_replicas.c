/* Replicated grants (--sync-replicas) and holds lost in a failover,
 * against real servers started by the test:
 * - a master with one replica (redis-server --replicaof): grants work and
 *   every script that changes lock state is followed by WAIT (the
 *   master's commandstats count them); with the replica stopped
 *   (SIGSTOP) or killed, every acquire kind answers NOREPLICAS within
 *   about --sync-timeout and gives back what it took: nothing stays
 *   locked on the master, PSEM permits go back (SEM permits stay taken,
 *   as for an unknown outcome); refusals
 *   are counted and logged; once the replica is back, grants work again;
 * - Sentinel (sentinel_util: 1 master, 2 replicas, 3 sentinels) with
 *   --sync-replicas 2: grants work; both replicas stopped: NOREPLICAS;
 * - Redis Cluster (cluster_util, 3 masters with a replica each): a master
 *   whose replica is stopped refuses, the others grant;
 * - Sentinel failover: a hold whose owner field the new master lacks is
 *   reported lost at once (LOCKLOST on UNLOCK, topology_leases_lost, a
 *   log line), long before its next renewal would have found it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_util.h"
#include "harness.h"
#include "ops_util.h"
#include "pool/pool.h"
#include "proxy_util.h"
#include "sentinel_util.h"

#define SYNC_TIMEOUT_MS 300
#define SYNC_TIMEOUT    "300"

/* A master (e->redis), its replica, and the proxy with --sync-replicas 1. */
struct rp {
    struct pu_env e;
    struct pu_redis replica;
    char master_port[12];
};

static bool link_up(struct pu_redis *r)
{
    redisContext *c = pu_connect(r->port);
    char v[32];
    bool up = pu_info_str(c, "master_link_status", v, sizeof(v)) && strcmp(v, "up") == 0;

    redisFree(c);
    return up;
}

/* True when a write on the master reaches the replica within 100 ms (it
 * streams to it: after a full sync it starts only at the replica's first
 * acknowledgement, up to a second later). */
static bool master_sees_replica(struct pu_env *e)
{
    redisContext *m = pu_redis_client(e);
    redisReply *r = pu_cmd(m, "SET rp:probe 1");

    freeReplyObject(r);
    r = pu_cmd(m, "WAIT 1 100");
    bool ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;

    freeReplyObject(r);
    redisFree(m);
    return ok;
}

static void replica_start(struct rp *x)
{
    x->replica.extra[0] = "--replicaof";
    x->replica.extra[1] = "127.0.0.1";
    x->replica.extra[2] = x->master_port;
    x->replica.extra[3] = NULL;
    pu_redis_start(&x->replica);
    PU_EVENTUALLY(link_up(&x->replica), 20000);
    PU_EVENTUALLY(master_sees_replica(&x->e), 20000);
}

static void rp_start(struct rp *x, const char *backend)
{
    static const char *const flags[] = {"--sync-replicas", "1", "--sync-timeout", SYNC_TIMEOUT,
                                        NULL};
    redisContext *m;

    memset(x, 0, sizeof(*x));
    pu_env_start(&x->e, backend, flags);
    snprintf(x->master_port, sizeof(x->master_port), "%d", x->e.redis.port);
    m = pu_redis_client(&x->e);
    PU_OK(m, "CONFIG SET repl-diskless-sync-delay 0");
    redisFree(m);
    replica_start(x);
}

static void rp_stop(struct rp *x)
{
    pu_redis_kill(&x->replica);
    pu_env_stop(&x->e);
}

/* Runs a command given as one line of words separated by blanks. */
static redisReply *cmd_line(redisContext *c, const char *line)
{
    char buf[128], *save = NULL, *w;
    const char *argv[16];
    int argc = 0;
    redisReply *r;

    snprintf(buf, sizeof(buf), "%s", line);
    for (w = strtok_r(buf, " ", &save); w && argc < 16; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    r = redisCommandArgv(c, argc, argv, NULL);
    if (!r)
        TEST_FAIL("%s: connection error: %s", line, c->errstr);
    return r;
}

/* Every acquire kind once, each expected to answer like want (PU_K_STATUS
 * "OK" or PU_K_ERR "NOREPLICAS"), on names the caller checks afterwards. */
static void acquire_all(redisContext *c, enum pu_kind kind, const char *s)
{
    redisReply *r;
    long long t0;
    int i;
    static const char *const cmds[] = {
        "LOCK rp:lock WAIT 2000",
        "LOCK rp:lease LEASE 60000 WAIT 2000",
        "LOCK rp:fenced FENCED WAIT 2000",
        "TRYLOCK rp:try",
        "RLOCK rp:rw WAIT 2000",
        "WLOCK rp:w WAIT 2000",
        "FAIRLOCK rp:fair WAIT 2000",
        "SEM.ACQUIRE rp:sem 2 WAIT 2000",
        "PSEM.ACQUIRE rp:psem LEASE 60000 WAIT 2000",
    };

    for (i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])); i++) {
        t0 = pu_now_ms();
        r = cmd_line(c, cmds[i]);
        if (strncmp(cmds[i], "LOCK rp:fenced", 14) == 0 && kind == PU_K_STATUS)
            ASSERT_EQ(r->type, REDIS_REPLY_INTEGER); /* the fencing token */
        else if (strncmp(cmds[i], "PSEM", 4) == 0 && kind == PU_K_STATUS)
            ASSERT_EQ(r->type, REDIS_REPLY_STRING); /* the permit id */
        else
            PU_CHECK(r, kind, 0, s);
        /* One WAIT of --sync-timeout, with a wide margin for 2 shared cores. */
        if (kind == PU_K_ERR)
            ASSERT_LE(pu_now_ms() - t0, SYNC_TIMEOUT_MS + 2500);
        freeReplyObject(r);
    }
}

static const char *const lock_names[] = {
    "rp:lock",
    "rp:lease",
    "rp:fenced",
    "rp:try",
    "rp:rw",
    "rp:w",
    "redisson_lock_queue:{rp:fair}",
    "rp:fair",
    "redisson_lock_timeout:{rp:fair}",
};

/* No lock of acquire_all() exists on the master, and the permit
 * semaphore has every permit. */
static bool nothing_held(redisContext *m, redisContext *c)
{
    size_t i;

    for (i = 0; i < sizeof(lock_names) / sizeof(lock_names[0]); i++) {
        if (pu_exists(m, lock_names[i]))
            return false;
    }
    /* A refused SEM.ACQUIRE's permits stay taken (no owner to check: a
     * return could make permits out of nothing after a failover); a PSEM
     * permit goes back by its id. */
    return pu_int_reply(c, "SEM.AVAILABLE", "rp:sem") == 1 &&
           pu_int_reply(c, "PSEM.AVAILABLE", "rp:psem") == 2;
}

static void release_all(redisContext *c)
{
    PU_INT(c, 1, "UNLOCK rp:lock");
    PU_INT(c, 1, "UNLOCK rp:lease");
    PU_INT(c, 1, "UNLOCK rp:fenced");
    PU_INT(c, 1, "UNLOCK rp:try");
    PU_INT(c, 1, "RUNLOCK rp:rw");
    PU_INT(c, 1, "WUNLOCK rp:w");
    PU_INT(c, 1, "FAIRUNLOCK rp:fair");
    PU_INT(c, 3, "SEM.RELEASE rp:sem 2");
}

static void sems_init(redisContext *c)
{
    PU_INT(c, 1, "SEM.TRYSETPERMITS rp:sem 3");
    PU_INT(c, 1, "PSEM.TRYSETPERMITS rp:psem 2");
}

/* The replica up: every kind granted, every write followed by WAIT. */
TEST(replicas_sync_grants)
{
    struct rp x;
    redisContext *c, *m;
    long long waits0;
    redisReply *r;
    int i;

    rp_start(&x, "epoll");
    c = pu_client(&x.e);
    m = pu_redis_client(&x.e);
    sems_init(c);
    waits0 = pu_cmdstat_calls(m, "wait");
    acquire_all(c, PU_K_STATUS, "OK");
    ASSERT_EQ(pu_hlen(m, "rp:lock"), 1);
    release_all(c);
    /* 9 acquires and 8 releases, each with its WAIT (the PSEM permit is
     * still held). */
    ASSERT_TRUE(pu_cmdstat_calls(m, "wait") >= waits0 + 17);
    ASSERT_EQ(pu_info_int(c, "sync_grants_refused"), 0);
    ASSERT_TRUE(pu_info_int(c, "sync_writes") >= 17);
    ASSERT_EQ(pu_info_int(c, "sync_replicas"), 1);
    /* NOSCRIPT: the script is re-sent as EVAL, with a WAIT of its own
     * behind it; the first WAIT's answer is dropped. Pipelined, so the
     * replies must stay matched. */
    PU_OK(m, "SCRIPT FLUSH");
    pu_send(c, "LOCK rp:ns1");
    pu_send(c, "LOCK rp:ns2");
    pu_send(c, "UNLOCK rp:ns1");
    for (i = 0; i < 3; i++) {
        r = pu_recv(c);
        PU_CHECK(r, i < 2 ? PU_K_STATUS : PU_K_INT, 1, i < 2 ? "OK" : NULL);
        freeReplyObject(r);
    }
    PU_INT(c, 1, "UNLOCK rp:ns2");
    ASSERT_TRUE(pu_info_int(c, "upstream_noscript_retries") >= 1);
    /* A script that answers an error is delivered at once; its WAIT's
     * answer is dropped, and the next replies stay matched. */
    PU_OK(m, "SET rp:str x");
    pu_send(c, "LOCK rp:str WAIT 0");
    pu_send(c, "LOCK rp:ns3");
    r = pu_recv(c);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = pu_recv(c);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    PU_INT(c, 1, "UNLOCK rp:ns3");
    ASSERT_EQ(pu_info_int(c, "sync_grants_refused"), 0);
    redisFree(m);
    redisFree(c);
    rp_stop(&x);
}

/* LOCK name WAIT 2000: true when granted, false on NOREPLICAS. */
static bool granted(redisContext *c, const char *name)
{
    redisReply *r = pu_cmd(c, "LOCK %s WAIT 2000", name);
    bool ok = r->type == REDIS_REPLY_STATUS;

    if (!ok && !pu_is_err(r, "NOREPLICAS"))
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    return ok;
}

/* sig: SIGSTOP (the replica stays connected, silent) or SIGKILL. */
static void check_refused(const char *backend, int sig)
{
    struct rp x;
    redisContext *c, *m;
    long long refused0;

    rp_start(&x, backend);
    c = pu_client(&x.e);
    m = pu_redis_client(&x.e);
    sems_init(c); /* replicated */
    if (sig == SIGSTOP)
        pu_redis_pause(&x.replica);
    else
        pu_redis_kill(&x.replica);
    refused0 = pu_info_int(c, "sync_grants_refused");
    acquire_all(c, PU_K_ERR, "NOREPLICAS");
    ASSERT_EQ(pu_info_int(c, "sync_grants_refused"), refused0 + 9);
    /* The give-backs are writes too (each waits its WAIT out): then
     * nothing is left. */
    PU_EVENTUALLY(nothing_held(m, c), 10000);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    ASSERT_TRUE(ou_file_contains(x.e.proxy.log_path, "grant refused: lock 'rp:lock' reached 0 of "
                                                     "1 replicas"));
    /* A release not replicated is answered (and counted). */
    ASSERT_TRUE(pu_info_int(c, "sync_writes_unreplicated") >= 9);
    if (sig == SIGSTOP)
        pu_redis_resume(&x.replica);
    else
        replica_start(&x);
    /* The replica catches up within moments (its first acknowledgement
     * may come after one --sync-timeout). */
    PU_EVENTUALLY(granted(c, "rp:again"), 10000);
    PU_INT(c, 1, "UNLOCK rp:again");
    redisFree(m);
    redisFree(c);
    rp_stop(&x);
}

TEST(replicas_sync_stopped_epoll)
{
    check_refused("epoll", SIGSTOP);
}

TEST(replicas_sync_stopped_uring)
{
    if (!pu_uring_available())
        TEST_SKIP("io_uring unavailable");
    check_refused("uring", SIGSTOP);
}

TEST(replicas_sync_killed)
{
    check_refused("epoll", SIGKILL);
}

/* ---- Sentinel ------------------------------------------------------------ */

static void sentinel_proxy(struct rsentinel *s, struct pu_proxy *p, const char *const *flags)
{
    int i = 0;

    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rsentinel_start(s, NULL, NULL);
    rsentinel_wait_master(s, -1);
    memset(p, 0, sizeof(*p));
    snprintf(p->upstream, sizeof(p->upstream), "redis-sentinel://%s/%s", s->list, RSENT_NAME);
    p->extra[i++] = "--io";
    p->extra[i++] = "epoll";
    p->extra[i++] = "--log-level";
    p->extra[i++] = "info";
    for (; *flags; flags++)
        p->extra[i++] = *flags;
    p->extra[i] = NULL;
    pu_proxy_start(p);
}

/* --sync-replicas 2 over Sentinel: granted while both replicas answer,
 * NOREPLICAS (and nothing left) while they are stopped. */
TEST(replicas_sync_sentinel)
{
    static const char *const flags[] = {"--sync-replicas", "2", "--sync-timeout", SYNC_TIMEOUT,
                                        NULL};
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c;
    int m, i;

    sentinel_proxy(&s, &p, flags);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    PU_OK(c, "LOCK rs:a WAIT 2000");
    PU_INT(c, 1, "UNLOCK rs:a");
    for (i = 0; i < RSENT_NODES; i++) {
        if (i != m)
            rsentinel_signal_node(&s, i, SIGSTOP);
    }
    PU_ERR(c, "NOREPLICAS", "LOCK rs:b WAIT 2000");
    PU_ERR(c, "NOREPLICAS", "WLOCK rs:c WAIT 2000");
    PU_EVENTUALLY(rsentinel_int(&s, m, "EXISTS rs:b") == 0 &&
                      rsentinel_int(&s, m, "EXISTS rs:c") == 0,
                  10000);
    for (i = 0; i < RSENT_NODES; i++) {
        if (i != m)
            rsentinel_signal_node(&s, i, SIGCONT);
    }
    PU_OK(c, "LOCK rs:b WAIT 5000");
    PU_INT(c, 1, "UNLOCK rs:b");
    ASSERT_EQ(pu_info_int(c, "sync_grants_refused"), 2);
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* ---- Cluster ------------------------------------------------------------- */

/* --sync-replicas 1 on a Redis Cluster (3 masters, 3 replicas): the WAIT
 * runs on the master of the name's slot; a master whose replica is stopped
 * refuses its grants (NOREPLICAS, nothing left), the others grant. */
TEST(replicas_sync_cluster)
{
    struct rcluster cl;
    struct pu_proxy p;
    redisContext *c;
    char v[32];
    const char *stopped_name = "rc:a", *other = NULL;
    static const char *const others[] = {"rc:b", "rc:c", "rc:d", "rc:e", "rc:f", "rc:g"};
    int m, r, i;

    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(&cl);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d",
             cl.node[0].port, cl.node[3].port);
    p.extra[0] = "--sync-replicas";
    p.extra[1] = "1";
    p.extra[2] = "--sync-timeout";
    p.extra[3] = SYNC_TIMEOUT;
    p.extra[4] = "--log-level";
    p.extra[5] = "info";
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    /* Every master's command connection ready too (as the other cluster
     * tests wait): start-up waits for them at most 2 s, which a loaded
     * machine can exceed, and this test is about WAIT, not start-up. */
    PU_EVENTUALLY(pu_info_str(c, "cluster_slots_served", v, sizeof(v)) && strcmp(v, "16384") == 0 &&
                      pu_info_int(c, "cluster_nodes_ready") == 3,
                  15000);
    m = rcluster_owner(&cl, pool_slot(stopped_name, strlen(stopped_name)));
    r = rcluster_replica_of(&cl, m);
    ASSERT_TRUE(m >= 0 && r >= 0);
    for (i = 0; i < (int)(sizeof(others) / sizeof(others[0])) && !other; i++) {
        if (rcluster_owner(&cl, pool_slot(others[i], strlen(others[i]))) != m)
            other = others[i];
    }
    ASSERT_NOTNULL(other);
    /* A replica can take a moment to be online for WAIT after the cluster
     * formed. */
    PU_EVENTUALLY(granted(c, stopped_name), 10000);
    PU_INT(c, 1, "UNLOCK %s", stopped_name);
    predis_signal(&cl.node[r], SIGSTOP);
    PU_ERR(c, "NOREPLICAS", "LOCK %s WAIT 2000", stopped_name);
    PU_EVENTUALLY(rcluster_int(&cl, m, "EXISTS %s", stopped_name) == 0, 10000);
    PU_EVENTUALLY(granted(c, other), 10000);
    PU_INT(c, 1, "UNLOCK %s", other);
    predis_signal(&cl.node[r], SIGCONT);
    PU_EVENTUALLY(granted(c, stopped_name), 15000);
    PU_INT(c, 1, "UNLOCK %s", stopped_name);
    ASSERT_TRUE(pu_info_int(c, "sync_grants_refused") >= 1);
    redisFree(c);
    pu_proxy_stop(&p);
    rcluster_cleanup(&cl);
}

/* A failover that loses a hold: the owner fields of two holds are deleted
 * on the master (and so on the replicas: WAIT) before a SENTINEL
 * FAILOVER, as if the old master had granted them and died before
 * replicating. The proxy re-verifies every hold on the new master when it
 * switches: both are reported lost at once, a third is kept. The lease is
 * 120 s (the first renewal would come 40 s later). */
TEST(replicas_failover_lost_hold)
{
    static const char *const flags[] = {"--lock-watchdog-timeout", "120000", NULL};
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c;
    char owner[PU_OWNER_MAX];
    long long t0;
    int m;

    sentinel_proxy(&s, &p, flags);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    pu_conn_owner(c, owner, sizeof(owner));
    PU_OK(c, "LOCK fo:a");
    PU_OK(c, "LOCK fo:b LEASE 120000");
    PU_OK(c, "LOCK fo:kept");
    ASSERT_EQ(rsentinel_int(&s, m, "HDEL fo:a %s", owner), 1);
    ASSERT_EQ(rsentinel_int(&s, m, "HDEL fo:b %s", owner), 1);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    ASSERT_EQ(pu_info_int(c, "topology_leases_lost"), 0);
    t0 = pu_now_ms();
    rsentinel_failover(&s);
    PU_EVENTUALLY(pu_info_int(c, "topology_leases_lost") == 2, 20000);
    fprintf(stderr, "holds found lost %lld ms after SENTINEL FAILOVER was sent\n",
            pu_now_ms() - t0);
    ASSERT_TRUE(pu_info_int(c, "leases_lost") >= 2);
    ASSERT_TRUE(ou_file_contains(p.log_path, "lease lost: lock 'fo:a'"));
    ASSERT_TRUE(ou_file_contains(p.log_path, "lease lost: lock 'fo:b'"));
    ASSERT_TRUE(ou_file_contains(p.log_path, "after a topology change"));
    PU_ERR(c, "LOCKLOST", "UNLOCK fo:a");
    PU_ERR(c, "LOCKLOST", "UNLOCK fo:b");
    PU_INT(c, 1, "UNLOCK fo:kept");
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* The ledger field of connection c: its owner id's last part. */
static void conn_field(redisContext *c, const char *sem, char *ledger, size_t n, char *field,
                       size_t fn)
{
    char owner[PU_OWNER_MAX];
    const char *id;

    pu_conn_owner(c, owner, sizeof(owner));
    id = strrchr(owner, ':');
    ASSERT_NOTNULL(id);
    snprintf(ledger, n, "{%s}:lp-permits:%.*s", sem, (int)(id - owner), owner);
    snprintf(field, fn, "%s", id + 1);
}

/* A failover that loses a permit: the acquire's writes (the count and the
 * proxy's record of who took it) are undone on the master before a
 * SENTINEL FAILOVER, as if it had granted it and died before replicating.
 * The holder's SEM.RELEASE must not add the permit again (the semaphore
 * would have one more than it was set to): it answers LOCKLOST. A permit
 * the new master has is released as usual. */
TEST(replicas_failover_lost_permit)
{
    static const char *const none[] = {NULL};
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *c2;
    char ledger[128], field[24];
    int m;

    sentinel_proxy(&s, &p, none);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    c2 = pu_connect(p.port);
    PU_INT(c, 1, "SEM.TRYSETPERMITS fo:sem 3");
    PU_OK(c, "SEM.ACQUIRE fo:sem");
    PU_OK(c2, "SEM.ACQUIRE fo:sem");
    conn_field(c, "fo:sem", ledger, sizeof(ledger), field, sizeof(field));
    ASSERT_EQ(rsentinel_int(&s, m, "HDEL %s %s", ledger, field), 1);
    ASSERT_EQ(rsentinel_int(&s, m, "INCRBY fo:sem 1"), 2);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    rsentinel_failover(&s);
    PU_EVENTUALLY(pu_info_int(c2, "topology_changes_seen") >= 1, 20000);
    PU_INT(c2, 2, "SEM.AVAILABLE fo:sem");
    PU_ERR(c, "LOCKLOST 1 permit(s)", "SEM.RELEASE fo:sem");
    PU_INT(c, 2, "SEM.AVAILABLE fo:sem");
    ASSERT_EQ(pu_info_int(c, "sem_permits_lost"), 1);
    PU_INT(c2, 3, "SEM.RELEASE fo:sem");
    redisFree(c2);
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* A failover that loses two releases: their writes (the count, and the
 * proxy's record of who took the permit) are undone on the master before
 * a SENTINEL FAILOVER. Both holders were told they released. The record
 * of the connection that has closed since goes back as soon as the proxy
 * follows the switch; the open one's goes back when it closes (a
 * give-back while it is open could race its next acquire). */
TEST(replicas_failover_lost_release)
{
    static const char *const none[] = {NULL};
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *d, *o;
    char ledger[128], fc[24], fd[24];
    int m;

    sentinel_proxy(&s, &p, none);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    d = pu_connect(p.port);
    o = pu_connect(p.port);
    PU_INT(o, 1, "SEM.TRYSETPERMITS fr:sem 3");
    PU_OK(c, "SEM.ACQUIRE fr:sem");
    PU_OK(d, "SEM.ACQUIRE fr:sem");
    PU_INT(c, 2, "SEM.RELEASE fr:sem");
    PU_INT(d, 3, "SEM.RELEASE fr:sem");
    conn_field(c, "fr:sem", ledger, sizeof(ledger), fc, sizeof(fc));
    conn_field(d, "fr:sem", ledger, sizeof(ledger), fd, sizeof(fd));
    ASSERT_EQ(rsentinel_int(&s, m, "HSET %s %s 1 %s 1", ledger, fc, fd), 2);
    ASSERT_EQ(rsentinel_int(&s, m, "DECRBY fr:sem 2"), 1);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    redisFree(c);
    PU_EVENTUALLY(pu_info_int(o, "connected_clients") == 2, 5000); /* the proxy saw it close */
    rsentinel_failover(&s);
    PU_EVENTUALLY(pu_info_int(o, "sem_permits_restored") == 1, 20000);
    PU_INT(o, 2, "SEM.AVAILABLE fr:sem");
    redisFree(d);
    PU_EVENTUALLY(pu_int_reply(o, "SEM.AVAILABLE", "fr:sem") == 3, 5000);
    m = rsentinel_wait_master(&s, -1);
    ASSERT_EQ(rsentinel_int(&s, m, "EXISTS %s", ledger), 0);
    redisFree(o);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* A release the old master applied but never replicated (issue 22): the
 * replicas stop right before the UNLOCKs and the master dies right after
 * them, so the promoted replica still has every hold, with most of its
 * lease left and nobody renewing it. The proxy re-applies the releases it
 * made recently on the new master once it switches: the names are free
 * within moments, not at lease end, and everyone can take them. */
TEST(replicas_failover_ghost_release)
{
    static const char *const flags[] = {"--lock-watchdog-timeout", "30000", NULL};
    static const char *const locks[] = {"LOCK gh:%d", "FAIRLOCK gh:f%d", "WLOCK gh:w%d",
                                        "RLOCK gh:r%d", "LOCK gh:t%d OWNER t1"};
    static const char *const unlocks[] = {"UNLOCK gh:%d", "FAIRUNLOCK gh:f%d", "WUNLOCK gh:w%d",
                                          "RUNLOCK gh:r%d", "UNLOCK gh:t%d OWNER t1"};
    enum { NK = 5, NN = 4 };
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *o;
    long long t_switch;
    int m, nm, i, k;

    sentinel_proxy(&s, &p, flags);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    o = pu_connect(p.port);
    for (k = 0; k < NK; k++)
        for (i = 0; i < NN; i++)
            pu_expect_at(__FILE__, __LINE__, c, PU_K_STATUS, 0, "OK", locks[k], i);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    for (i = 0; i < RSENT_NODES; i++)
        if (i != m)
            rsentinel_signal_node(&s, i, SIGSTOP);
    /* The replication links close while the replicas are stopped: what the
     * master writes from now on never reaches them. */
    ASSERT_TRUE(rsentinel_int(&s, m, "CLIENT KILL TYPE replica") == 2);
    for (k = 0; k < NK; k++)
        for (i = 0; i < NN; i++)
            pu_expect_at(__FILE__, __LINE__, c, PU_K_INT, 1, NULL, unlocks[k], i);
    rsentinel_kill_node(&s, m);
    for (i = 0; i < RSENT_NODES; i++)
        if (i != m)
            rsentinel_signal_node(&s, i, SIGCONT);
    nm = rsentinel_wait_master(&s, m);
    t_switch = pu_now_ms();
    /* The promoted replica had the holds (the ghosts); the proxy clears
     * them once it follows the switch, long before the 30 s lease. */
    PU_EVENTUALLY(rsentinel_int(&s, nm, "DBSIZE") == 0, 10000);
    ASSERT_TRUE(pu_now_ms() - t_switch < 10000);
    for (i = 0; i < NN; i++) {
        redisReply *r;

        for (;;) { /* the proxy may still be switching: UPSTREAM meanwhile */
            r = pu_cmd(o, "LOCK gh:%d WAIT 0", i);
            if (!pu_is_err(r, "UPSTREAM"))
                break;
            freeReplyObject(r);
            pu_sleep_ms(100);
        }
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
    }
    ASSERT_TRUE(pu_info_int(o, "ghost_holds_removed") >= NK * NN);
    redisFree(c);
    redisFree(o);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

TEST_MAIN(TEST_CASE(replicas_sync_grants), TEST_CASE(replicas_sync_stopped_epoll),
          TEST_CASE(replicas_sync_stopped_uring), TEST_CASE(replicas_sync_killed),
          TEST_CASE(replicas_sync_sentinel), TEST_CASE(replicas_sync_cluster),
          TEST_CASE(replicas_failover_lost_hold), TEST_CASE(replicas_failover_lost_permit),
          TEST_CASE(replicas_failover_lost_release), TEST_CASE(replicas_failover_ghost_release))
