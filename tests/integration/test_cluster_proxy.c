/* Integration tests of the proxy on a real Redis Cluster (6 nodes: 3
 * masters, 3 replicas, cluster_util), upstream redis-cluster://: every
 * command family over names spread across the slots (hash tags and plain
 * names), each key on the master that owns its slot in Redisson's layout;
 * names whose side keys would hash elsewhere refused; waiters woken by an
 * UNLOCK through the proxy, through a second proxy, and by a Redisson
 * unlock sent straight to the owning master (SPUBLISH in sharded mode,
 * PUBLISH in classic); one subscription on the owning shard for 100
 * waiters; AUTO picking sharded on Redis 7; the MOVED error of a plain
 * redis:// upstream reaching the client and the log; holds checked right
 * after a failover (a vanished owner field is lost at once, long before
 * its renewal); waiters and holds across a slot migration and a killed
 * master; INFO cluster and the per-node metrics.
 *
 * One cluster per case (its start costs seconds); each case runs its
 * scenario once per io backend, with a fresh proxy. Skips when
 * redis-server or redis-cli is missing. */
#include <sys/wait.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "harness.h"
#include "pool/pool.h"
#include "proxy_util.h"
#include "resp3_util.h"
#include "sync_util.h"

#define NWAITERS 100

/* The Redisson side: RLock acquire and unlock as Redisson's scripts do
 * them, the publish command being ARGV (as Redisson passes it). */
static const char java_acquire_lua[] = "if (redis.call('exists', KEYS[1]) == 0) or "
                                       "(redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
                                       "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                       "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
                                       "return redis.call('pttl', KEYS[1]);";
static const char java_unlock_lua[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "return 1; end;";
#define JAVA_OWNER "8f0e7c2a-1111-4222-8333-944455556666:1"

struct cpx {
    struct rcluster c;   /* the cluster */
    char upstream[96];   /* redis-cluster://seed,seed */
    struct pu_proxy p;   /* the proxy under test */
    const char *backend; /* "epoll" or "uring" */
    const char *extra[PU_MAX_ARGS];
};

/* ---- fixture ------------------------------------------------------------------ */

static void cpx_cluster(struct cpx *x)
{
    char a[32], b[32];

    memset(x, 0, sizeof(*x));
    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(&x->c);
    snprintf(x->upstream, sizeof(x->upstream), "redis-cluster://%s,%s",
             rcluster_addr(&x->c, 0, a, sizeof(a)), rcluster_addr(&x->c, 5, b, sizeof(b)));
}

static bool info_is(redisContext *c, const char *field, const char *want)
{
    char v[64];

    return pu_info_str(c, field, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* Starts a proxy on the cluster with x->backend and the flags given
 * (NULL-terminated), and waits until it serves every slot. */
static void cpx_proxy_start(struct cpx *x, struct pu_proxy *p, const char *const *flags)
{
    redisContext *c;
    int n = 0;

    memset(p, 0, sizeof(*p));
    snprintf(p->upstream, sizeof(p->upstream), "%s", x->upstream);
    p->extra[n++] = "--io";
    p->extra[n++] = x->backend;
    p->extra[n++] = "--log-level";
    p->extra[n++] = "debug";
    for (; flags && *flags; flags++)
        p->extra[n++] = *flags;
    p->extra[n] = NULL;
    pu_proxy_start(p);
    c = pu_connect(p->port);
    PU_EVENTUALLY(info_is(c, "cluster_slots_served", "16384") &&
                      info_is(c, "cluster_nodes_ready", "3"),
                  15000);
    redisFree(c);
}

struct cpx_each {
    struct cpx *x;                   /* the cluster and proxy */
    void (*scenario)(struct cpx *x); /* run per backend */
    const char *const *flags;        /* the proxy's extra flags */
};

static void cpx_each_run(const char *backend, void *arg)
{
    struct cpx_each *a = arg;
    struct cpx *x = a->x;
    int m;

    x->backend = backend;
    cpx_proxy_start(x, &x->p, a->flags);
    a->scenario(x);
    pu_proxy_assert_alive(&x->p);
    pu_proxy_stop(&x->p);
    for (m = 0; m < RCLUSTER_NODES; m++) {
        if (rcluster_is_master(&x->c, m))
            rcluster_ok(&x->c, m, "FLUSHALL");
    }
}

/* Runs scenario once per selected io backend (pu_for_each_backend), each
 * with a fresh proxy (flags) on the one cluster; keys are flushed between
 * runs. */
static void cpx_each_backend(struct cpx *x, void (*scenario)(struct cpx *x),
                             const char *const *flags)
{
    struct cpx_each a = {x, scenario, flags};

    pu_for_each_backend(cpx_each_run, &a);
}

/* The master owning key's slot. */
static int owner_of(struct cpx *x, const char *key)
{
    int m = rcluster_owner(&x->c, pool_slot(key, strlen(key)));

    ASSERT_TRUE(m >= 0);
    return m;
}

/* Redisson's "<prefix>{name}" (or "<prefix>name" when name has '{'). */
static void rkey(const char *prefix, const char *name, char *buf, size_t n)
{
    pu_redisson_key(prefix, name, buf, n);
}

/* A command on the master owning key: its integer reply, or a bulk
 * string read as one (HGET, GET); -1 for nil or anything else. */
static long long node_int(struct cpx *x, const char *key, const char *fmt, const char *a,
                          const char *b)
{
    redisReply *r = rcluster_cmd(&x->c, owner_of(x, key), fmt, a, b);
    long long v = -1;

    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_STRING)
        v = atoll(r->str);
    if (r)
        freeReplyObject(r);
    return v;
}

/* Waits up to ms for the reply to a command sent earlier on c; +OK. */
static void expect_ok_within(redisContext *c, int ms)
{
    redisReply *r = pu_try_recv(c, ms);
    char d[256];

    if (!r)
        TEST_FAIL("no reply within %d ms", ms);
    if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
        TEST_FAIL("expected +OK, got %s", pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
}

/* Subscribers of chan on its shard: SHARDNUMSUB (sharded) or NUMSUB on the
 * master that owns its slot. */
static long long shard_subs(struct cpx *x, const char *chan, bool sharded)
{
    redisReply *r = rcluster_cmd(&x->c, owner_of(x, chan), "PUBSUB %s %s",
                                 sharded ? "SHARDNUMSUB" : "NUMSUB", chan);
    long long n = -1;

    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    if (r)
        freeReplyObject(r);
    return n;
}

/* ---- every family, every slot ---------------------------------------------------- */

/* A lock and its fenced token on names across the slots. */
static void check_locks(struct cpx *x, redisContext *c, redisContext *c2)
{
    char name[64], owner[PU_OWNER_MAX], tok[128];
    redisReply *r;
    int i;

    pu_conn_owner(c, owner, sizeof(owner));
    for (i = 0; i < 48; i++) {
        if (i % 2)
            snprintf(name, sizeof(name), "{tag%d}lock", i);
        else
            snprintf(name, sizeof(name), "lock:%d", i * 331);
        PU_OK(c, "LOCK %s LEASE 30000", name);
        ASSERT_EQ(node_int(x, name, "HGET %s %s", name, owner), 1);
        ASSERT_TRUE(node_int(x, name, "PTTL %s", name, NULL) > 0);
        PU_NIL(c2, "LOCK %s WAIT 0", name);
        r = pu_cmd(c, "LOCK %s FENCED", name);
        ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
        rkey("redisson_lock_token:", name, tok, sizeof(tok));
        ASSERT_EQ(owner_of(x, tok), owner_of(x, name));
        ASSERT_EQ(node_int(x, tok, "GET %s", tok, NULL), 1);
        ASSERT_EQ(node_int(x, name, "HGET %s %s", name, owner), 2);
        PU_INT(c, 0, "UNLOCK %s", name);
        PU_INT(c, 1, "UNLOCK %s", name);
        ASSERT_EQ(node_int(x, name, "EXISTS %s", name, NULL), 0);
    }
}

/* Read-write and fair locks: the read timeout key and the fair queue live
 * with the name. */
static void check_rw_fair(struct cpx *x, redisContext *c, redisContext *c2)
{
    char name[64], owner[PU_OWNER_MAX], key[256], q[128];
    int i;

    pu_conn_owner(c, owner, sizeof(owner));
    for (i = 0; i < 12; i++) {
        snprintf(name, sizeof(name), i % 2 ? "rw%d" : "{rt%d}rw", i * 977);
        PU_OK(c, "RLOCK %s", name);
        rkey("", name, key, sizeof(key));
        snprintf(key + strlen(key), sizeof(key) - strlen(key), ":%s:rwlock_timeout:1", owner);
        ASSERT_EQ(owner_of(x, key), owner_of(x, name));
        ASSERT_TRUE(node_int(x, key, "PTTL %s", key, NULL) > 0);
        PU_NIL(c2, "WLOCK %s WAIT 0", name);
        PU_INT(c, 1, "RUNLOCK %s", name);
        PU_OK(c2, "WLOCK %s", name);
        PU_INT(c2, 1, "WUNLOCK %s", name);

        snprintf(name, sizeof(name), i % 2 ? "fair%d" : "{ft%d}fair", i * 613);
        PU_OK(c, "FAIRLOCK %s", name);
        pu_send(c2, "FAIRLOCK %s WAIT 20000", name);
        rkey("redisson_lock_queue:", name, q, sizeof(q));
        ASSERT_EQ(owner_of(x, q), owner_of(x, name));
        PU_EVENTUALLY(node_int(x, q, "LLEN %s", q, NULL) == 1, 5000);
        PU_INT(c, 1, "FAIRUNLOCK %s", name);
        expect_ok_within(c2, 10000);
        PU_INT(c2, 1, "FAIRUNLOCK %s", name);
    }
}

/* Semaphores, permit-expirable semaphores and latches, with a waiter each. */
static void check_sync(struct cpx *x, redisContext *c, redisContext *c2)
{
    char name[64], z[128];
    redisReply *r;
    int i;

    for (i = 0; i < 12; i++) {
        snprintf(name, sizeof(name), i % 2 ? "sem%d" : "{st%d}sem", i * 401);
        PU_INT(c, 1, "SEM.TRYSETPERMITS %s 1", name);
        PU_OK(c, "SEM.ACQUIRE %s", name);
        ASSERT_EQ(node_int(x, name, "GET %s", name, NULL), 0);
        pu_send(c2, "SEM.ACQUIRE %s WAIT 20000", name);
        pu_sleep_ms(20);
        PU_INT(c, 1, "SEM.RELEASE %s", name);
        expect_ok_within(c2, 10000);
        PU_INT(c2, 1, "SEM.RELEASE %s", name);

        snprintf(name, sizeof(name), i % 2 ? "psem%d" : "{pt%d}psem", i * 401);
        PU_INT(c, 1, "PSEM.TRYSETPERMITS %s 1", name);
        r = pu_cmd(c, "PSEM.ACQUIRE %s", name);
        ASSERT_TRUE(r->type == REDIS_REPLY_STRING && r->len == 32);
        rkey("", name, z, sizeof(z));
        strcat(z, ":timeout");
        ASSERT_EQ(owner_of(x, z), owner_of(x, name));
        ASSERT_EQ(node_int(x, z, "ZCARD %s", z, NULL), 1);
        PU_INT(c, 1, "PSEM.RELEASE %s %s", name, r->str);
        freeReplyObject(r);

        snprintf(name, sizeof(name), "latch%d", i * 401);
        PU_INT(c, 1, "LATCH.TRYSETCOUNT %s 1", name);
        pu_send(c2, "LATCH.AWAIT %s WAIT 20000", name);
        pu_sleep_ms(20);
        PU_INT(c, 0, "LATCH.COUNTDOWN %s", name);
        expect_ok_within(c2, 10000);
    }
}

/* Names whose side keys would hash to another slot are refused. */
static void check_refused(redisContext *c)
{
    PU_ERR(c, "ERR name 'a{b' cannot be used with Redis Cluster", "LOCK %s", "a{b");
    PU_ERR(c, "ERR name 'x}y' cannot be used with Redis Cluster", "RLOCK %s", "x}y");
    PU_ERR(c, "ERR name 'e{}f' cannot be used with Redis Cluster", "SEM.AVAILABLE %s", "e{}f");
    PU_ERR(c, "ERR name '{t}x' cannot be used with Redis Cluster", "LATCH.COUNT %s", "{t}x");
    PU_OK(c, "LOCK %s LEASE 1000", "{t}x");
    PU_INT(c, 1, "UNLOCK %s", "{t}x");
}

/* INFO cluster names every master with its slots; /metrics has them. */
static void check_info(struct cpx *x, redisContext *c)
{
    char v[512], field[16];
    int i, slots = 0;

    ASSERT_TRUE(info_is(c, "cluster_enabled", "1"));
    ASSERT_TRUE(info_is(c, "cluster_pubsub_mode", "sharded")); /* AUTO on Redis 7 */
    for (i = 0; i < 3; i++) {
        const char *s;

        snprintf(field, sizeof(field), "node%d", i);
        ASSERT_TRUE(pu_info_str(c, field, v, sizeof(v)));
        ASSERT_TRUE(strstr(v, "state=up") && strstr(v, "role=master"));
        s = strstr(v, ",slots=");
        ASSERT_TRUE(s != NULL);
        slots += atoi(s + 7);
    }
    ASSERT_EQ(slots, 16384);
    (void)x;
}

static void scenario_families(struct cpx *x)
{
    redisContext *c = pu_connect(x->p.port), *c2 = pu_connect(x->p.port);

    check_info(x, c);
    check_refused(c);
    check_locks(x, c, c2);
    check_rw_fair(x, c, c2);
    check_sync(x, c, c2);
    redisFree(c);
    redisFree(c2);
}

TEST(cluster_proxy_families)
{
    struct cpx x;

    cpx_cluster(&x);
    cpx_each_backend(&x, scenario_families, NULL);
    rcluster_cleanup(&x.c);
}

/* ---- wake-ups ---------------------------------------------------------------------- */

/* 100 waiters of one lock: one subscription on the owning shard; each
 * UNLOCK hands the lock on, long before the holder's lease would end. */
static void check_many_waiters(struct cpx *x, const char *name, bool sharded)
{
    redisContext *holder = pu_connect(x->p.port), *w[NWAITERS];
    char chan[128];
    bool done[NWAITERS] = {false};
    int i, k, got;

    (void)i;

    pu_channel(name, chan, sizeof(chan));
    PU_OK(holder, "LOCK %s", name); /* watchdog: the lease never ends by itself */
    for (i = 0; i < NWAITERS; i++) {
        w[i] = pu_connect(x->p.port);
        pu_send(w[i], "LOCK %s LEASE 60000", name);
    }
    PU_EVENTUALLY(pu_info_int(holder, "lock_waiters") == NWAITERS, 10000);
    ASSERT_EQ(shard_subs(x, chan, sharded), 1);
    PU_INT(holder, 1, "UNLOCK %s", name);
    for (k = 0; k < NWAITERS; k++) {
        got = su_next_granted(w, done, NWAITERS, 10000); /* leases: 30 s, 60 s */
        ASSERT_TRUE(got >= 0);
        done[got] = true;
        PU_INT(w[got], 1, "UNLOCK %s", name);
    }
    for (i = 0; i < NWAITERS; i++)
        redisFree(w[i]);
    redisFree(holder);
}

/* A Redisson client holds the lock (acquired and released straight on the
 * owning master, publishing with the mode's command); the proxy's waiter
 * wakes at the release, long before the 60 s lease ends. */
static void check_java_release(struct cpx *x, const char *name, bool sharded)
{
    redisContext *c = pu_connect(x->p.port), *ic = pu_connect(x->p.port);
    char chan[128];
    int m = owner_of(x, name);
    redisReply *r;
    long long t0;

    pu_channel(name, chan, sizeof(chan));
    r = rcluster_cmd(&x->c, m, "EVAL %s 1 %s 60000 %s", java_acquire_lua, name, JAVA_OWNER);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    pu_send(c, "LOCK %s LEASE 10000", name);
    PU_EVENTUALLY(pu_info_int(ic, "lock_waiters") == 1 && shard_subs(x, chan, sharded) == 1, 5000);
    t0 = pu_now_ms();
    r = rcluster_cmd(&x->c, m, "EVAL %s 2 %s %s 0 30000 %s %s", java_unlock_lua, name, chan,
                     JAVA_OWNER, sharded ? "spublish" : "publish");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    expect_ok_within(c, 20000); /* the lease would end 60 s after the acquire */
    fprintf(stderr, "waiter woken %lld ms after the Redisson unlock\n", pu_now_ms() - t0);
    PU_INT(c, 1, "UNLOCK %s", name);
    redisFree(c);
    redisFree(ic);
}

/* A second proxy on the cluster: they exclude and wake each other. */
static void check_two_proxies(struct cpx *x, const char *const *flags)
{
    struct pu_proxy p2;
    redisContext *a, *b;
    const char *name = "{two}proxies";

    cpx_proxy_start(x, &p2, flags);
    a = pu_connect(x->p.port);
    b = pu_connect(p2.port);
    PU_OK(a, "LOCK %s", name);
    PU_NIL(b, "LOCK %s WAIT 0", name);
    pu_send(b, "LOCK %s", name);
    pu_sleep_ms(50);
    PU_INT(a, 1, "UNLOCK %s", name);
    expect_ok_within(b, 10000); /* the watchdog lease is 30 s */
    pu_send(a, "LOCK %s", name);
    pu_sleep_ms(50);
    PU_INT(b, 1, "UNLOCK %s", name);
    expect_ok_within(a, 10000);
    PU_INT(a, 1, "UNLOCK %s", name);
    redisFree(a);
    redisFree(b);
    pu_proxy_stop(&p2);
}

/* A plain redis:// upstream that is a cluster node: the client gets the
 * pool's error (use redis-cluster://), and the log has it. */
static void check_plain_moved(struct cpx *x)
{
    struct pu_proxy p;
    char addr[32], name[32], log[8192];
    redisContext *c;
    redisReply *r = NULL;
    FILE *f;
    size_t n;
    int i;

    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis://%s",
             rcluster_addr(&x->c, 0, addr, sizeof(addr)));
    p.extra[0] = "--io";
    p.extra[1] = x->backend;
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    for (i = 0; i < 64; i++) { /* a name the seed does not own */
        snprintf(name, sizeof(name), "moved%d", i);
        if (rcluster_owner(&x->c, pool_slot(name, strlen(name))) != 0)
            break;
    }
    PU_EVENTUALLY((r = pu_cmd(c, "LOCK %s WAIT 0", name)) && r->type == REDIS_REPLY_ERROR &&
                      strstr(r->str, "is a Redis Cluster node") &&
                      strstr(r->str, "use redis-cluster://"),
                  10000);
    fprintf(stderr, "client got: %s\n", r->str);
    freeReplyObject(r);
    f = fopen(p.log_path, "r");
    ASSERT_TRUE(f != NULL);
    n = fread(log, 1, sizeof(log) - 1, f);
    log[n] = '\0';
    fclose(f);
    ASSERT_TRUE(strstr(log, "is a Redis Cluster node") && strstr(log, "redis-cluster://"));
    redisFree(c);
    pu_proxy_stop(&p);
}

static void scenario_wakeups(struct cpx *x, bool sharded, const char *const *flags)
{
    redisContext *c = pu_connect(x->p.port);

    ASSERT_TRUE(info_is(c, "cluster_pubsub_mode", sharded ? "sharded" : "classic"));
    redisFree(c);
    check_many_waiters(x, "many", sharded);
    check_many_waiters(x, "{w2}many", sharded);
    check_java_release(x, "java:a", sharded);
    check_java_release(x, "{jt}b", sharded);
    check_two_proxies(x, flags);
}

static const char *const sharded_flags[] = {NULL}; /* AUTO: sharded on Redis 7 */
static const char *const forced_sharded_flags[] = {"--cluster-pubsub", "sharded", NULL};
static const char *const classic_flags[] = {"--cluster-pubsub", "classic", NULL};

/* The proxy under test runs AUTO; its peer forces sharded: they must agree. */
static void scenario_sharded(struct cpx *x)
{
    scenario_wakeups(x, true, forced_sharded_flags);
    check_plain_moved(x);
}

static void scenario_classic(struct cpx *x)
{
    scenario_wakeups(x, false, classic_flags);
}

TEST(cluster_proxy_wakeups)
{
    struct cpx x;

    cpx_cluster(&x);
    cpx_each_backend(&x, scenario_sharded, sharded_flags);
    cpx_each_backend(&x, scenario_classic, classic_flags);
    rcluster_cleanup(&x.c);
}

/* ---- failover, migration, a killed master -------------------------------------------- */

/* Two names in one slot of master m and one of another master. */
static void names_on(struct cpx *x, int m, char *a, char *b, char *other, size_t n)
{
    int i;

    for (i = 0;; i++) {
        snprintf(a, n, "{fo%d}a", i);
        if (owner_of(x, a) == m)
            break;
    }
    snprintf(b, n, "{fo%d}b", i);
    for (i = 0;; i++) {
        snprintf(other, n, "{ot%d}c", i);
        if (owner_of(x, other) != m)
            break;
    }
}

/* A master with a live replica. */
static int master_with_replica(struct cpx *x)
{
    int m;

    for (m = 0; m < RCLUSTER_NODES; m++) {
        if (rcluster_is_master(&x->c, m) && rcluster_replica_of(&x->c, m) >= 0)
            return m;
    }
    TEST_FAIL("no master with a replica left");
}

/* Holds whose owner field vanished across a failover are found lost right
 * after it (the watchdog would renew only 40 s later); a hold of a slot
 * that did not move is not even checked. A RESP3 holder subscribed to
 * lockproxy:lease-lost is pushed the loss at once. */
static void check_reverify(struct cpx *x)
{
    redisContext *c = pu_connect(x->p.port);
    struct r3_conn *sub = r3_open(x->p.port);
    char a[32], b[32], o[32], p[32], owner[PU_OWNER_MAX], uuid[64], want[128];
    long long lost0 = pu_info_int(c, "topology_leases_lost");
    long long checked0 = pu_info_int(c, "topology_holds_checked");
    int m = master_with_replica(x), r = rcluster_replica_of(&x->c, m);

    names_on(x, m, a, b, o, sizeof(a));
    snprintf(p, sizeof(p), "%.*sp", (int)strlen(a) - 1, a); /* a's slot too */
    pu_conn_owner(c, owner, sizeof(owner));
    pu_proxy_uuid(c, uuid, sizeof(uuid));
    PU_OK(c, "LOCK %s", a);              /* watchdog (120 s lease) */
    PU_OK(c, "LOCK %s LEASE 120000", b); /* fixed lease */
    PU_OK(c, "LOCK %s", o);
    r3_send(sub, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(sub, "%7\r\n");
    r3_send(sub, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT_PREFIX(sub, ">3\r\n$9\r\nsubscribe");
    r3_send(sub, "LOCK", p, "OWNER", "pushed", NULL);
    R3_EXPECT(sub, "+OK\r\n");
    /* The grants the failover did not keep: gone on the replica too. */
    ASSERT_EQ(rcluster_int(&x->c, m, "HDEL %s %s", a, owner), 1);
    ASSERT_EQ(rcluster_int(&x->c, m, "HDEL %s %s", b, owner), 1);
    snprintf(owner, sizeof(owner), "%s:pushed", uuid);
    ASSERT_EQ(rcluster_int(&x->c, m, "HDEL %s %s", p, owner), 1);
    ASSERT_TRUE(rcluster_int(&x->c, m, "WAIT 1 2000") == 1);
    rcluster_failover(&x->c, r);
    PU_EVENTUALLY(pu_info_int(c, "topology_leases_lost") == lost0 + 3, 10000);
    ASSERT_EQ(pu_info_int(c, "topology_holds_checked"), checked0 + 3);
    snprintf(want, sizeof(want),
             ">3\r\n$7\r\nmessage\r\n$20\r\nlockproxy:lease-lost\r\n$%zu\r\nLOCK %s\r\n",
             strlen(p) + 5, p);
    R3_EXPECT(sub, want);
    PU_ERR(c, "LOCKLOST", "UNLOCK %s", a);
    PU_ERR(c, "LOCKLOST", "UNLOCK %s", b);
    PU_INT(c, 1, "UNLOCK %s", o);
    r3_close(sub);
    redisFree(c);
}

/* A slot with a held lock and a waiter moves to another master: the keys
 * move with it, the waiter's subscription follows, the UNLOCK wakes it. */
static void check_migration(struct cpx *x)
{
    redisContext *h = pu_connect(x->p.port), *w = pu_connect(x->p.port);
    const char *name = "{mig}lock";
    int slot = pool_slot(name, strlen(name)), from = owner_of(x, name);
    int to = rcluster_other_master(&x->c, from);

    PU_OK(h, "LOCK %s", name);
    pu_send(w, "LOCK %s", name);
    PU_EVENTUALLY(pu_info_int(h, "lock_waiters") == 1, 5000);
    rcluster_migrate(&x->c, slot, to);
    PU_EVENTUALLY(owner_of(x, name) == to, 10000);
    pu_sleep_ms(300);
    PU_INT(h, 1, "UNLOCK %s", name);
    expect_ok_within(w, 10000); /* the holder's lease is 120 s */
    PU_INT(w, 1, "UNLOCK %s", name);
    redisFree(h);
    redisFree(w);
}

/* A master is killed with a lock held and a waiter: its replica takes
 * over; the hold is still there (replicated long before), the waiter is
 * woken by the UNLOCK; a closed connection's lock is released on the new
 * master (the retried release). */
static void check_kill(struct cpx *x)
{
    redisContext *h = pu_connect(x->p.port), *w = pu_connect(x->p.port);
    redisContext *gone = pu_connect(x->p.port);
    char a[32], b[32], o[32];
    int m = master_with_replica(x), nm;
    redisReply *r;

    names_on(x, m, a, b, o, sizeof(a));
    PU_OK(h, "LOCK %s", a);
    PU_OK(gone, "LOCK %s", b);
    pu_send(w, "LOCK %s WAIT 60000", a);
    ASSERT_TRUE(rcluster_int(&x->c, m, "WAIT 1 2000") == 1);
    nm = rcluster_kill_master(&x->c, m);
    redisFree(gone); /* its release is retried until the new master answers */
    PU_EVENTUALLY(rcluster_int(&x->c, nm, "EXISTS %s", b, NULL) == 0, 15000);
    /* The unlock may meet the end of the failover: retry UPSTREAM errors. */
    PU_EVENTUALLY((r = pu_cmd(h, "UNLOCK %s", a)) &&
                      (r->type == REDIS_REPLY_INTEGER || (freeReplyObject(r), r = NULL, false)),
                  15000);
    ASSERT_EQ(r->integer, 1);
    freeReplyObject(r);
    r = pu_try_recv(w, 15000);
    ASSERT_TRUE(r != NULL);
    fprintf(stderr, "waiter after the kill: %s\n", r->type == REDIS_REPLY_ERROR ? r->str : "OK");
    ASSERT_TRUE(r->type == REDIS_REPLY_STATUS ||
                (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "UPSTREAM", 8) == 0));
    freeReplyObject(r);
    redisFree(h);
    redisFree(w);
}

static void scenario_failover(struct cpx *x)
{
    check_reverify(x);
    check_migration(x);
    check_kill(x);
}

static const char *const failover_flags[] = {"--lock-watchdog-timeout", "120000", NULL};

TEST(cluster_proxy_failover)
{
    struct cpx x;

    cpx_cluster(&x);
    cpx_each_backend(&x, scenario_failover, failover_flags);
    rcluster_cleanup(&x.c);
}

/* ---- a cluster that is down ------------------------------------------------------ */

/* Sends cmd (a lock command on name) and checks the answer is an UPSTREAM
 * error, never Redis's own CLUSTERDOWN (or TRYAGAIN, LOADING,
 * MASTERDOWN), within the upstream timeout plus a margin. */
static void expect_upstream(redisContext *c, const char *cmd, const char *name)
{
    long long t0 = pu_now_ms();
    redisReply *r = pu_cmd(c, "%s %s", cmd, name);
    char d[256];

    if (!pu_is_err(r, "UPSTREAM"))
        TEST_FAIL("%s %s while the cluster is down: %s", cmd, name, pu_describe(r, d, sizeof(d)));
    ASSERT_TRUE(pu_now_ms() - t0 < 4000);
    if (strcmp(cmd, "LOCK") == 0)
        fprintf(stderr, "%s after %lld ms: %s\n", cmd, pu_now_ms() - t0, r->str);
    freeReplyObject(r);
}

static bool node_says_down(struct cpx *x, int m, const char *key)
{
    redisReply *r = rcluster_cmd(&x->c, m, "EXISTS %s", key);
    bool down = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CLUSTERDOWN", 11) == 0;

    if (r)
        freeReplyObject(r);
    return down;
}

/* The master of a name's slot stops serving it (CLUSTER DELSLOTS): Redis
 * answers CLUSTERDOWN; the proxy retries within --upstream-timeout and
 * then answers -UPSTREAM; once the slot is back, the name works. */
static void check_slot_down(struct cpx *x)
{
    redisContext *c = pu_connect(x->p.port);
    const char *name = "{down}lock";
    int slot = pool_slot(name, strlen(name)), m = owner_of(x, name);
    redisReply *r;

    PU_OK(c, "LOCK %s", name);
    PU_INT(c, 1, "UNLOCK %s", name);
    rcluster_ok(&x->c, m, "CLUSTER DELSLOTS %d", slot);
    PU_EVENTUALLY(node_says_down(x, m, name), 5000);
    expect_upstream(c, "LOCK", name);
    expect_upstream(c, "TRYLOCK", name);
    expect_upstream(c, "LOCK.INFO", name);
    expect_upstream(c, "SEM.AVAILABLE", name);
    rcluster_ok(&x->c, m, "CLUSTER ADDSLOTS %d", slot);
    PU_EVENTUALLY((r = pu_cmd(c, "TRYLOCK %s", name)) &&
                      (r->type == REDIS_REPLY_STATUS || (freeReplyObject(r), r = NULL, false)),
                  10000);
    freeReplyObject(r);
    PU_INT(c, 1, "UNLOCK %s", name);
    redisFree(c);
}

static const char *const down_flags[] = {"--upstream-timeout", "1000", NULL};

/* A master and its replica die: the cluster is down (full coverage), and
 * every node left answers CLUSTERDOWN; lock commands on names of the
 * masters still running answer -UPSTREAM, however often they are sent. */
TEST(cluster_proxy_down)
{
    struct cpx x;
    redisContext *c;
    char a[32], b[32], o[32];
    int m, r, live;
    long long end;

    cpx_cluster(&x);
    cpx_each_backend(&x, check_slot_down, down_flags);
    x.backend = "epoll";
    cpx_proxy_start(&x, &x.p, down_flags);
    c = pu_connect(x.p.port);
    m = master_with_replica(&x);
    r = rcluster_replica_of(&x.c, m);
    names_on(&x, m, a, b, o, sizeof(a));
    live = owner_of(&x, o);
    PU_OK(c, "LOCK %s", o);
    PU_INT(c, 1, "UNLOCK %s", o);
    predis_kill(&x.c.node[r]);
    predis_kill(&x.c.node[m]);
    PU_EVENTUALLY(node_says_down(&x, live, o), 15000);
    for (end = pu_now_ms() + 3000; pu_now_ms() < end;) {
        expect_upstream(c, "LOCK", o);
        expect_upstream(c, "TRYLOCK", o);
    }
    redisFree(c);
    pu_proxy_assert_alive(&x.p);
    pu_proxy_stop(&x.p);
    rcluster_cleanup(&x.c);
}

/* Start-up against a healthy cluster whose second master is slow to
 * answer the proxy's first handshake (SIGSTOPped for 600 ms, far below
 * the cluster's node timeout): the proxy starts accepting only once that
 * first attempt settled, so the first client's LOCK on every master's
 * names is granted, never "UPSTREAM Redis is unavailable (not
 * connected)". Before, the proxy accepted as soon as one master's
 * connection was ready (state "degraded"), the replicas_sync_cluster
 * flake under load. */
TEST(cluster_proxy_startup_all_masters)
{
    struct cpx x;
    struct pu_proxy p;
    redisContext *c;
    char seed[32], name[32];
    int s = 0, m, i, k, st;
    pid_t kid;

    cpx_cluster(&x);
    while (!rcluster_is_master(&x.c, s))
        s++;
    for (m = s + 1; !rcluster_is_master(&x.c, m); m++)
        ;
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s",
             rcluster_addr(&x.c, s, seed, sizeof(seed)));
    p.extra[0] = "--io";
    p.extra[1] = "epoll";
    p.extra[2] = "--log-level";
    p.extra[3] = "debug";
    predis_signal(&x.c.node[m], SIGSTOP);
    kid = fork();
    if (kid == 0) {
        usleep(600000);
        kill(x.c.node[m].pid, SIGCONT);
        _exit(0);
    }
    ASSERT_TRUE(kid > 0);
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (!rcluster_is_master(&x.c, i))
            continue;
        for (k = 0;; k++) {
            snprintf(name, sizeof(name), "{st%d}x", k);
            if (owner_of(&x, name) == i)
                break;
        }
        PU_OK(c, "LOCK %s", name);
        PU_INT(c, 1, "UNLOCK %s", name);
    }
    ASSERT_EQ(waitpid(kid, &st, 0), kid);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    rcluster_cleanup(&x.c);
}

TEST_MAIN(TEST_CASE(cluster_proxy_families), TEST_CASE(cluster_proxy_wakeups),
          TEST_CASE(cluster_proxy_failover), TEST_CASE(cluster_proxy_down),
          TEST_CASE(cluster_proxy_startup_all_masters))
