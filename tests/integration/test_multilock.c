/* MULTILOCK / MULTIUNLOCK against real servers: the atomic path (one
 * Redis: every name in one script) and the ordered path (a Redis Cluster,
 * names in several slots taken in a fixed order with roll-back). Checked:
 * the Redisson RLock layout on each name, all-or-nothing under contention
 * (a name taken by a plain LOCK, by a Redisson-layout hash written
 * straight to Redis, or by another MULTILOCK leaves the other names
 * untouched, and vice versa), reentrancy, UNLOCK of one member, wake-ups
 * on the channel of whichever name blocked, release on disconnect, bad
 * input, and no deadlock between 60 clients locking overlapping sets in
 * opposite orders (each wait bounded by the client's timeout). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "engine/engine.h"
#include "harness.h"
#include "pool/pool.h"
#include "proxy/cmds/multilock.h"
#include "proxy_util.h"

#define JAVA_OWNER "8f0e7c2a-1111-4222-8333-944455556666:1"

/* ---- single Redis: the atomic path ------------------------------------------ */

static void scenario_layout(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];
    struct pu_lockinfo li;

    pu_conn_owner(c, owner, sizeof(owner));
    PU_OK(c, "MULTILOCK a b c");
    ASSERT_EQ(pu_hget_int(rc, "a", owner), 1);
    ASSERT_EQ(pu_hget_int(rc, "b", owner), 1);
    ASSERT_EQ(pu_hget_int(rc, "c", owner), 1);
    ASSERT_TRUE(pu_pttl(rc, "c") > 20000);
    pu_lockinfo(c, &li, "LOCK.INFO %s", "b");
    ASSERT_EQ(li.watchdog, 1);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 3);

    /* All or nothing: d stays free when c is held. */
    PU_NIL(c2, "MULTILOCK d c WAIT 0");
    ASSERT_TRUE(!pu_exists(rc, "d"));
    PU_NIL(c2, "LOCK b WAIT 0"); /* a member is an ordinary RLock */

    /* Reentrant per name, and LEASE sets every name's lease. */
    PU_OK(c, "MULTILOCK c a LEASE 8000");
    ASSERT_EQ(pu_hget_int(rc, "a", owner), 2);
    ASSERT_TRUE(pu_pttl(rc, "a") <= 8000);
    PU_INT(c, 0, "MULTIUNLOCK a c");
    ASSERT_EQ(pu_hget_int(rc, "a", owner), 1);
    PU_INT(c, 1, "UNLOCK b"); /* one member alone */
    PU_ERR(c, "NOTOWNER", "MULTIUNLOCK a b c");
    ASSERT_TRUE(!pu_exists(rc, "a") && !pu_exists(rc, "c")); /* the others were released */
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);

    /* Bad input. */
    PU_ERR(c, "ERR lock name 'x' is given twice", "MULTILOCK x y x");
    PU_ERR(c, "ERR wrong number", "MULTILOCK LEASE 10");
    PU_ERR(c, "ERR LEASE must be", "MULTILOCK x LEASE 0");
    PU_ERR(c, "ERR", "MULTILOCK x WAIT");
    PU_ERR(c, "ERR", "MULTILOCK x WAIT 10 BOGUS 1");
    PU_ERR(c, "ERR", "MULTILOCK x LEASE -5");
    ASSERT_TRUE(!pu_exists(rc, "x") && !pu_exists(rc, "y"));
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

/* A Redisson-layout hash (as RLock writes it) excludes a MULTILOCK and
 * leaves the other names untouched; a MULTILOCK excludes a plain LOCK and
 * a Redisson acquire. */
static void scenario_exclusion(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;

    r = pu_cmd(rc, "HSET %s %s 1", "jx", JAVA_OWNER);
    freeReplyObject(r);
    r = pu_cmd(rc, "PEXPIRE %s 30000", "jx");
    freeReplyObject(r);
    PU_NIL(c, "MULTILOCK jw jx jy WAIT 200");
    ASSERT_TRUE(!pu_exists(rc, "jw") && !pu_exists(rc, "jy"));
    ASSERT_EQ(pu_hlen(rc, "jx"), 1);

    PU_OK(c2, "LOCK p1");
    PU_NIL(c, "MULTILOCK p0 p1 WAIT 0");
    ASSERT_TRUE(!pu_exists(rc, "p0"));
    PU_INT(c2, 1, "UNLOCK p1");
    PU_OK(c, "MULTILOCK p0 p1");
    PU_NIL(c2, "LOCK p0 WAIT 0");
    /* Redisson's acquire on a member finds it held (returns its PTTL). */
    r = pu_cmd(rc, "EVAL %s 1 p1 30000 %s",
               "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], "
               "ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
               "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return "
               "redis.call('pttl', KEYS[1]);",
               JAVA_OWNER);
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    PU_INT(c, 1, "MULTIUNLOCK p0 p1");
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

/* A waiter wakes on the channel of the name that blocked it, and moves to
 * the next blocking name's channel: granted long before any lease-end
 * re-poll (the holders' leases are the 30 s watchdog lease). */
static void scenario_wake_and_disconnect(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    redisReply *r;
    long long t0;

    PU_OK(c, "LOCK w1");
    PU_OK(c3, "LOCK w2");
    t0 = pu_now_ms();
    pu_send(c2, "MULTILOCK w1 w2 w3 WAIT 20000");
    ASSERT_TRUE(pu_try_recv(c2, 300) == NULL);
    PU_INT(c, 1, "UNLOCK w1");
    ASSERT_TRUE(pu_try_recv(c2, 300) == NULL);                 /* now blocked by w2 */
    ASSERT_TRUE(!pu_exists(rc, "w1") && !pu_exists(rc, "w3")); /* rolled back / untouched */
    PU_INT(c3, 1, "UNLOCK w2");
    r = pu_recv(c2);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    ASSERT_TRUE(pu_now_ms() - t0 < 10000);

    /* Release on disconnect: every name goes. */
    redisFree(c2);
    PU_EVENTUALLY(!pu_exists(rc, "w1") && !pu_exists(rc, "w2") && !pu_exists(rc, "w3"), 5000);
    PU_OK(c, "MULTILOCK w1 w2 w3 WAIT 0");
    redisFree(rc);
    redisFree(c3);
    redisFree(c);
}

/* Renewal and lost leases, as for LOCK: without LEASE every name is
 * renewed (the watchdog timeout is 1500 ms here); with LEASE the names
 * expire and MULTIUNLOCK answers LOCKLOST. */
static void scenario_renew_and_lost(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);

    PU_OK(c, "MULTILOCK r1 r2");
    pu_sleep_ms(2000);
    ASSERT_TRUE(pu_exists(rc, "r1") && pu_exists(rc, "r2"));
    ASSERT_TRUE(pu_info_int(c, "watchdog_renewals") >= 2);
    PU_INT(c, 1, "MULTIUNLOCK r1 r2");

    PU_OK(c, "MULTILOCK l1 l2 LEASE 300");
    pu_sleep_ms(600);
    ASSERT_TRUE(!pu_exists(rc, "l1") && !pu_exists(rc, "l2"));
    PU_ERR(c, "LOCKLOST", "MULTIUNLOCK l1 l2");
    redisFree(rc);
    redisFree(c);
}

/* The documented limits, under the default flags: 64 names (with LEASE and
 * WAIT: 69 arguments, within the default --max-args), names of up to 4096
 * bytes; 65 names or a longer name are refused and change nothing. */
static void scenario_limits(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    const char *argv[PX_MULTI_MAX + 8];
    char names[PX_MULTI_MAX + 1][16], *big = malloc(PX_NAME_MAX + 2);
    redisReply *r;
    int i, argc = 0;

    ASSERT_TRUE(big != NULL);
    argv[argc++] = "MULTILOCK";
    for (i = 0; i < (int)PX_MULTI_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "lim%d", i);
        argv[argc++] = names[i];
    }
    argv[argc++] = "LEASE";
    argv[argc++] = "20000";
    argv[argc++] = "WAIT";
    argv[argc++] = "1000";
    r = redisCommandArgv(c, argc, argv, NULL);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    ASSERT_EQ(pu_dbsize(rc), PX_MULTI_MAX);
    argv[0] = "MULTIUNLOCK";
    r = redisCommandArgv(c, 1 + (int)PX_MULTI_MAX, argv, NULL);
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
    ASSERT_EQ(pu_dbsize(rc), 0);

    /* 65 names: refused by MULTILOCK itself (66 arguments pass --max-args). */
    snprintf(names[PX_MULTI_MAX], sizeof(names[0]), "lim%u", PX_MULTI_MAX);
    argv[0] = "MULTILOCK";
    argv[1 + PX_MULTI_MAX] = names[PX_MULTI_MAX];
    r = redisCommandArgv(c, 2 + (int)PX_MULTI_MAX, argv, NULL);
    PU_CHECK(r, PU_K_ERR, 0, "ERR at most 64 lock names per command");
    freeReplyObject(r);
    ASSERT_EQ(pu_dbsize(rc), 0);

    /* Names: 4096 bytes are taken, 4097 refused. */
    memset(big, 'n', PX_NAME_MAX + 1);
    big[PX_NAME_MAX] = '\0';
    r = pu_cmd(c, "MULTILOCK %s short LEASE 20000", big);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    r = pu_cmd(c, "LOCK %s WAIT 0", big); /* reentrant: the same owner */
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    big[PX_NAME_MAX] = 'n';
    big[PX_NAME_MAX + 1] = '\0';
    r = pu_cmd(c, "MULTILOCK %s other", big);
    PU_CHECK(r, PU_K_ERR, 0, "ERR lock name must be 1-4096 bytes");
    freeReplyObject(r);
    r = pu_cmd(c, "LOCK %s", big);
    PU_CHECK(r, PU_K_ERR, 0, "ERR lock name must be 1-4096 bytes");
    freeReplyObject(r);
    ASSERT_TRUE(!pu_exists(rc, "other"));
    free(big);
    redisFree(rc);
    redisFree(c);
}

TEST(multilock_limits)
{
    pu_each_backend(scenario_limits, NULL);
}

TEST(multilock_renew_and_lost)
{
    static const char *const flags[] = {"--lock-watchdog-timeout", "1500", NULL};

    pu_each_backend(scenario_renew_and_lost, flags);
}

TEST(multilock_layout)
{
    pu_each_backend(scenario_layout, NULL);
}

TEST(multilock_exclusion)
{
    pu_each_backend(scenario_exclusion, NULL);
}

TEST(multilock_wake_and_disconnect)
{
    pu_each_backend(scenario_wake_and_disconnect, NULL);
}

/* ---- contention: all-or-nothing, no deadlock --------------------------------- */

#define NAMES    6
#define RUN_MS   3000
#define NCLIENTS 60

struct contention {
    int port;                /* proxy */
    const char *prefix;      /* name prefix (hash tags on a cluster) */
    atomic_int inuse[NAMES]; /* 1 while a client believes it holds name i */
    atomic_long grants;      /* MULTILOCKs granted */
    atomic_long overlaps;    /* a name found in use by another grantee */
    atomic_long errors;      /* unexpected replies, timeouts (a deadlock) */
    atomic_int next_id;      /* worker numbering */
    bool opposite;           /* half the workers take the names in reverse */
};

static void name_of(const struct contention *x, int i, char *buf, size_t n)
{
    snprintf(buf, n, "%s%d", x->prefix, i);
}

static void *contention_worker(void *arg)
{
    struct contention *x = arg;
    int id = atomic_fetch_add(&x->next_id, 1);
    struct timeval tv = {15, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", x->port, tv);
    unsigned seed = (unsigned)id * 7919u + 1;
    long long end = pu_now_ms() + RUN_MS;

    if (!c || c->err) {
        atomic_fetch_add(&x->errors, 1);
        return NULL;
    }
    redisSetTimeout(c, tv);
    while (pu_now_ms() < end) {
        char names[NAMES][32];
        const char *argv[NAMES + 3];
        int pick[NAMES], k = 0, i;
        redisReply *r;

        for (i = 0; i < NAMES; i++) {
            int j = x->opposite ? ((id & 1) ? NAMES - 1 - i : i) : i;

            if (x->opposite ? j < 4 : (rand_r(&seed) % 2 == 0)) {
                pick[k] = j;
                name_of(x, j, names[k], sizeof(names[k]));
                k++;
            }
        }
        if (k == 0)
            continue;
        argv[0] = "MULTILOCK";
        for (i = 0; i < k; i++)
            argv[1 + i] = names[i];
        argv[1 + k] = "WAIT";
        argv[2 + k] = "5000";
        r = redisCommandArgv(c, k + 3, argv, NULL);
        if (!r) {
            atomic_fetch_add(&x->errors, 1);
            break;
        }
        if (r->type == REDIS_REPLY_STATUS) {
            atomic_fetch_add(&x->grants, 1);
            for (i = 0; i < k; i++) {
                if (atomic_exchange(&x->inuse[pick[i]], 1) != 0)
                    atomic_fetch_add(&x->overlaps, 1);
            }
            usleep(50); /* hold a little, so an overlap would be seen */
            for (i = 0; i < k; i++)
                atomic_store(&x->inuse[pick[i]], 0);
            freeReplyObject(r);
            argv[0] = "MULTIUNLOCK";
            r = redisCommandArgv(c, k + 1, argv, NULL);
            if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
                atomic_fetch_add(&x->errors, 1);
        } else if (r->type != REDIS_REPLY_NIL) {
            atomic_fetch_add(&x->errors, 1);
        }
        if (r)
            freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

/* Runs NCLIENTS workers against the proxy on port; checks no overlap, no
 * error, no deadlock (every worker's calls answered within their
 * timeouts), some grants. */
static void run_contention(int port, const char *prefix, bool opposite)
{
    static struct contention x;
    pthread_t th[NCLIENTS];
    int i;

    memset(&x, 0, sizeof(x));
    x.port = port;
    x.prefix = prefix;
    x.opposite = opposite;
    for (i = 0; i < NCLIENTS; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, contention_worker, &x), 0);
    for (i = 0; i < NCLIENTS; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "multilock contention (%s): %ld grants, %ld overlaps, %ld errors\n",
            opposite ? "opposite orders" : "random subsets", atomic_load(&x.grants),
            atomic_load(&x.overlaps), atomic_load(&x.errors));
    ASSERT_EQ(atomic_load(&x.overlaps), 0);
    ASSERT_EQ(atomic_load(&x.errors), 0);
    ASSERT_TRUE(atomic_load(&x.grants) > NCLIENTS);
}

static void scenario_contention(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e);

    pu_raise_nofile(1024);
    run_contention(e->proxy.port, "ml", false);
    run_contention(e->proxy.port, "ml", true);
    PU_EVENTUALLY(pu_dbsize(rc) == 0, 5000); /* nothing left held */
    redisFree(rc);
}

TEST(multilock_contention)
{
    pu_each_backend(scenario_contention, NULL);
}

/* ---- Redis Cluster: the ordered path ----------------------------------------- */

static bool info_is(redisContext *c, const char *field, const char *want)
{
    char v[64];

    return pu_info_str(c, field, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* The master that holds key (by its slot). */
static int key_node(struct rcluster *rc, const char *key)
{
    return rcluster_owner(rc, pool_slot(key, strlen(key)));
}

TEST(multilock_cluster_ordered)
{
    static struct rcluster cl;
    struct pu_proxy p;
    redisContext *c, *c2;
    char a[32], b[32], owner[PU_OWNER_MAX];
    int i, n;

    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(&cl);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&cl, 0, a, sizeof(a)), rcluster_addr(&cl, 5, b, sizeof(b)));
    n = 0;
    p.extra[n++] = "--log-level";
    p.extra[n++] = "debug";
    p.extra[n] = NULL;
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    c2 = pu_connect(p.port);
    PU_EVENTUALLY(info_is(c, "cluster_slots_served", "16384") &&
                      info_is(c, "cluster_nodes_ready", "3"),
                  15000);
    pu_conn_owner(c, owner, sizeof(owner));

    /* cl0..cl5 spread over the masters (checked); {t}x and {t}y share a slot. */
    ASSERT_TRUE(key_node(&cl, "cl0") != key_node(&cl, "cl1") ||
                key_node(&cl, "cl0") != key_node(&cl, "cl2"));
    PU_OK(c, "MULTILOCK cl0 cl1 cl2 {t}x {t}y");
    for (i = 0; i < 3; i++) {
        char k[8];

        snprintf(k, sizeof(k), "cl%d", i);
        ASSERT_EQ(rcluster_int(&cl, key_node(&cl, k), "HEXISTS %s %s", k, owner), 1);
    }
    ASSERT_EQ(rcluster_int(&cl, key_node(&cl, "{t}y"), "HEXISTS {t}y %s", owner), 1);

    /* All or nothing across slots: cl2 is held, so cl0, cl1 are given back. */
    PU_NIL(c2, "MULTILOCK cl1 cl0 cl2 WAIT 300");
    PU_INT(c, 1, "MULTIUNLOCK cl0 cl1 {t}x {t}y");
    PU_NIL(c2, "MULTILOCK cl1 cl0 cl2 WAIT 300");
    ASSERT_EQ(rcluster_int(&cl, key_node(&cl, "cl0"), "EXISTS cl0"), 0);
    ASSERT_EQ(rcluster_int(&cl, key_node(&cl, "cl1"), "EXISTS cl1"), 0);
    /* A waiter blocked by cl2 gets everything once it is released. */
    pu_send(c2, "MULTILOCK cl1 cl0 cl2 WAIT 10000");
    ASSERT_TRUE(pu_try_recv(c2, 300) == NULL);
    PU_INT(c, 1, "UNLOCK cl2");
    {
        redisReply *r = pu_recv(c2);

        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
    }
    PU_INT(c2, 1, "MULTIUNLOCK cl0 cl1 cl2");

    run_contention(p.port, "cl", false);
    run_contention(p.port, "cl", true);
    for (i = 0; i < NAMES; i++) {
        char k[8];

        snprintf(k, sizeof(k), "cl%d", i);
        PU_EVENTUALLY(rcluster_int(&cl, key_node(&cl, k), "EXISTS %s", k) == 0, 5000);
    }
    redisFree(c2);
    redisFree(c);
    pu_proxy_stop(&p);
    rcluster_cleanup(&cl);
}

TEST_MAIN(TEST_CASE(multilock_limits), TEST_CASE(multilock_layout),
          TEST_CASE(multilock_renew_and_lost), TEST_CASE(multilock_exclusion),
          TEST_CASE(multilock_wake_and_disconnect), TEST_CASE(multilock_contention),
          TEST_CASE(multilock_cluster_ordered))
