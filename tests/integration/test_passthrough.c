/* Pass-through (--passthrough, proxy/fwd.h) against real Redis: ordinary
 * commands forwarded (GET, SET, HSET, INCR, MGET, EVAL...) with their
 * effects in Redis and their replies in the client's protocol (RESP3
 * maps, sets, doubles, nulls); refused commands (blocking, server-wide,
 * unknown, wrong arity, bad numkeys, inside MULTI) answered with an error
 * naming the command and changing nothing; the user's key patterns on
 * every forwarded key and the proxy's own {lp- keys refused; scripts a
 * client loaded surviving a Redis restart and SCRIPT FLUSH leaving the
 * proxy's own scripts working; --passthrough off; and on a Redis Cluster:
 * routing by slot, CROSSSLOT, MOVED after a slot migration, ASK in the
 * middle of one, EVALSHA on every master; redis-py's Lock (SET NX PX and its
 * release script by EVALSHA) across a slot migration and a failover. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "common/compiler.h"
#include "harness.h"
#include "ops_util.h"
#include "pool/pool.h"
#include "proxy_util.h"
#include "resp3_util.h"
#include "sync_util.h"

#define GET_LUA "return redis.call('get', KEYS[1])"

static long long dbsize(redisContext *rc)
{
    return pu_dbsize(rc);
}

/* ---- single Redis ----------------------------------------------------------- */

static void scenario_forward(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;

    PU_OK(c, "SET %s %s", "pt:s", "v1");
    PU_STR(c, "v1", "GET %s", "pt:s");
    PU_STR(rc, "v1", "GET %s", "pt:s"); /* in Redis itself */
    PU_INT(c, 2, "HSET %s a 1 b %s", "pt:h", "2");
    PU_STR(c, "2", "HGET %s b", "pt:h");
    PU_INT(c, 1, "INCR %s", "pt:n");
    PU_INT(c, 11, "INCRBY %s 10", "pt:n");
    PU_OK(c, "SET %s x", "{pt}a");
    r = pu_cmd(c, "MGET %s {pt}b", "{pt}a");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    PU_CHECK(r->element[0], PU_K_STR, 0, "x");
    PU_CHECK(r->element[1], PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    PU_NIL(c, "GET %s", "pt:none");
    /* Redis's own errors come back as they are. */
    PU_ERR(c, "WRONGTYPE", "GET %s", "pt:h");
    PU_ERR(c, "ERR value is not an integer", "INCR %s", "pt:s");
    /* Pipelined, replies in order, mixed with lock commands. */
    pu_send(c, "SET %s 1", "pt:p");
    pu_send(c, "TRYLOCK %s", "pt:lock");
    pu_send(c, "INCR %s", "pt:p");
    pu_send(c, "UNLOCK %s", "pt:lock");
    pu_send(c, "GET %s", "pt:p");
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_RECV(c, PU_K_INT, 2, NULL);
    PU_RECV(c, PU_K_INT, 1, NULL);
    PU_RECV(c, PU_K_STR, 0, "2");
    /* Connection state the proxy keeps. */
    PU_OK(c, "READONLY");
    PU_OK(c, "SELECT %s", "0");
    PU_ERR(c, "ERR lockproxy serves database 0 only", "SELECT %s", "1");
    ASSERT_TRUE(pu_info_int(c, "forwarded_commands") >= 10);
    redisFree(rc);
    redisFree(c);
}

TEST(passthrough_forward)
{
    pu_each_backend(scenario_forward, NULL);
}

/* A RESP3 client gets what Redis would send it: maps, sets, doubles,
 * nulls. */
TEST(passthrough_resp3)
{
    struct pu_env e = {0};
    struct r3_conn *c;

    pu_env_start(&e, "epoll", NULL);
    c = r3_open(e.proxy.port);
    r3_send(c, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c, "%7");
    r3_send(c, "HSET", "r3:h", "f", "v", NULL);
    R3_EXPECT(c, ":1\r\n");
    r3_send(c, "HGETALL", "r3:h", NULL);
    R3_EXPECT(c, "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    r3_send(c, "SADD", "r3:s", "m", NULL);
    R3_EXPECT(c, ":1\r\n");
    r3_send(c, "SMEMBERS", "r3:s", NULL);
    R3_EXPECT(c, "~1\r\n$1\r\nm\r\n");
    r3_send(c, "ZADD", "r3:z", "1.5", "m", NULL);
    R3_EXPECT(c, ":1\r\n");
    r3_send(c, "ZSCORE", "r3:z", "m", NULL);
    R3_EXPECT(c, ",1.5\r\n");
    r3_send(c, "ZRANGE", "r3:z", "0", "-1", "WITHSCORES", NULL);
    R3_EXPECT(c, "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n");
    r3_send(c, "GET", "r3:none", NULL);
    R3_EXPECT(c, "_\r\n");
    r3_send(c, "HELLO", "2", NULL);
    R3_EXPECT_PREFIX(c, "*14");
    r3_send(c, "HGETALL", "r3:h", NULL);
    R3_EXPECT(c, "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    r3_send(c, "GET", "r3:none", NULL);
    R3_EXPECT(c, "$-1\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

/* Every refusal names the command, and nothing reaches Redis. */
TEST(passthrough_refused)
{
    static const char *const refused[] = {
        "BLPOP pt:l 0",
        "BRPOP pt:l 0",
        "BLMOVE pt:a pt:b LEFT LEFT 0",
        "BZPOPMIN pt:z 0",
        "WAIT 1 0",
        "MONITOR",
        "SYNC",
        "PSYNC ? -1",
        "DEBUG SLEEP 0",
        "CONFIG SET maxmemory 1",
        "SHUTDOWN",
        "FLUSHALL",
        "FLUSHDB",
        "KEYS *",
        "SCAN 0",
        "FUNCTION FLUSH",
        "SCRIPT KILL",
    };
    struct pu_env e = {0};
    redisContext *c, *rc;
    char want[96];
    size_t i;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_OK(c, "SET %s keep", "pt:k");
    PU_INT(c, 1, "RPUSH %s x", "pt:l");
    for (i = 0; i < LP_ARRAY_SIZE(refused); i++) {
        char name[32];

        sscanf(refused[i], "%31s", name);
        snprintf(want, sizeof(want), "ERR lockproxy does not forward '%s", name);
        PU_ERR(c, want, refused[i]);
    }
    PU_ERR(c, "ERR lockproxy does not forward 'XREAD': it blocks", "XREAD BLOCK 0 STREAMS %s 0",
           "pt:x");
    PU_ERR(c, "ERR lockproxy does not support 'CLIENT TRACKING'", "CLIENT TRACKING %s", "on");
    PU_ERR(c, "ERR unknown command 'NOSUCHCMD'", "NOSUCHCMD %s", "pt:k");
    PU_ERR(c, "ERR wrong number of arguments for 'get' command", "GET %s extra", "pt:k");
    PU_ERR(c, "ERR wrong number of arguments for 'set' command", "SET %s", "pt:k");
    PU_ERR(c, "ERR Number of keys can't be greater than number of args", "EVAL %s 5 pt:k",
           "return 1");
    PU_ERR(c, "ERR numkeys should be", "EVAL %s x pt:k", "return 1");
    PU_ERR(c, "ERR numkeys should be greater than 0", "ZUNIONSTORE %s 0 pt:z", "pt:d");
    /* Inside MULTI: refused, and the transaction aborts; nothing ran. */
    PU_OK(c, "MULTI");
    PU_ERR(c, "ERR lockproxy does not run 'SET' inside MULTI", "SET %s changed", "pt:k");
    PU_ERR(c, "EXECABORT", "EXEC");
    PU_STR(rc, "keep", "GET %s", "pt:k");
    ASSERT_EQ(pu_int_reply(rc, "LLEN", "pt:l"), 1);
    ASSERT_EQ(dbsize(rc), 2);
    ASSERT_TRUE(pu_info_int(c, "forwarded_refused") >= (long long)LP_ARRAY_SIZE(refused) + 8);
    /* The connection goes on. */
    PU_STR(c, "keep", "GET %s", "pt:k");
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

/* Key patterns apply to every forwarded key; the proxy's own keys are
 * nobody's. */
TEST(passthrough_acl)
{
    static const char *const extra[] = {"--user", "app on >pw ~app:*", "--user",
                                        "admin on >pw2 allkeys", NULL};
    struct pu_env e = {0};
    redisContext *c, *adm, *rc;

    ou_env_start(&e, "epoll", extra); /* pu_env_start's INFO would need AUTH */
    c = pu_client(&e);
    adm = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_ERR(c, "NOAUTH", "GET %s", "app:a");
    PU_OK(c, "AUTH app %s", "pw");
    PU_OK(adm, "AUTH admin %s", "pw2");
    PU_OK(c, "SET %s 1", "app:a");
    PU_ERR(c, "NOPERM user 'app' has no permissions to access the 'other' key", "SET %s 1",
           "other");
    PU_ERR(c, "NOPERM", "MGET app:a %s", "other");
    PU_ERR(c, "NOPERM", "MSET app:b 1 %s 2", "other");
    PU_ERR(c, "NOPERM", "EVAL %s 1 other", "return redis.call('set', KEYS[1], 1)");
    PU_ERR(c, "NOPERM", "RENAME app:a %s", "other");
    ASSERT_TRUE(!pu_exists(rc, "other"));
    ASSERT_TRUE(!pu_exists(rc, "app:b"));
    ASSERT_TRUE(pu_exists(rc, "app:a"));
    /* {lp- keys: refused even to allkeys. */
    PU_ERR(adm, "NOPERM '{lp-proxies}:all' is one of lockproxy's own keys", "DEL %s",
           "{lp-proxies}:all");
    PU_OK(adm, "SET %s 1", "other");
    redisFree(rc);
    redisFree(adm);
    redisFree(c);
    pu_env_stop(&e);
}

/* SHA1s clients loaded work after Redis lost every script (a restart,
 * SCRIPT FLUSH straight on Redis); SCRIPT FLUSH through the proxy drops
 * them, and the proxy's own scripts still run. */
TEST(passthrough_scripts_survive_restart)
{
    struct pu_env e = {0};
    redisContext *c, *rc;
    redisReply *r;
    char sha[48], sha2[48];

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    r = pu_cmd(c, "SCRIPT LOAD %s", GET_LUA);
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING && r->len == 40);
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    PU_INT(c, 7, "EVAL %s 0", "return 7");
    r = pu_cmd(c, "SCRIPT LOAD %s", "return 7"); /* Redis names EVAL's script the same */
    snprintf(sha2, sizeof(sha2), "%s", r->str);
    freeReplyObject(r);
    PU_OK(c, "SET %s v", "sc:k");
    PU_STR(c, "v", "EVALSHA %s 1 sc:k", sha);
    /* Redis restarts empty (no persistence): every script is gone. */
    pu_redis_restart(&e.redis);
    r = pu_cmd_until_served(c, "SET %s w", "sc:k", 15000);
    freeReplyObject(r);
    rc = pu_redis_client(&e);
    r = pu_cmd(rc, "SCRIPT EXISTS %s", sha);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 0);
    freeReplyObject(r);
    PU_STR(c, "w", "EVALSHA %s 1 sc:k", sha);
    PU_INT(c, 7, "EVALSHA %s 0", sha2);
    ASSERT_TRUE(pu_info_int(c, "forwarded_noscript_retries") >= 2);
    /* SCRIPT EXISTS counts what the proxy keeps. */
    PU_OK(rc, "SCRIPT FLUSH");
    r = pu_cmd(c, "SCRIPT EXISTS %s 0000000000000000000000000000000000000000", sha);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(r->element[0]->integer, 1);
    ASSERT_EQ(r->element[1]->integer, 0);
    freeReplyObject(r);
    /* SCRIPT FLUSH through the proxy: the client's SHA1 is gone... */
    PU_OK(c, "SCRIPT FLUSH");
    PU_ERR(c, "NOSCRIPT", "EVALSHA %s 1 sc:k", sha);
    /* ...the proxy's own scripts are not. */
    PU_OK(c, "LOCK %s", "sc:lock");
    PU_INT(c, 1, "UNLOCK %s", "sc:lock");
    /* An unknown SHA1 is Redis's NOSCRIPT. */
    PU_ERR(c, "NOSCRIPT", "EVALSHA %s 0", "1111111111111111111111111111111111111111");
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

/* Kept script texts are bounded by a quarter of --max-client-memory. */
TEST(passthrough_script_memory_bounded)
{
    static const char *const extra[] = {"--max-client-memory", "65536", NULL};
    struct pu_env e = {0};
    redisContext *c;
    char body[2100];
    int i;

    pu_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    memset(body, ' ', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    for (i = 0; i < 40; i++) {
        char script[2200];

        snprintf(script, sizeof(script), "return %d --%s", i, body);
        PU_INT(c, i, "EVAL %s 0", script);
    }
    ASSERT_TRUE(pu_info_int(c, "forwarded_script_bytes") <= 65536 / 4);
    ASSERT_TRUE(pu_info_int(c, "forwarded_script_evictions") > 0);
    redisFree(c);
    pu_env_stop(&e);
}

TEST(passthrough_off)
{
    static const char *const extra[] = {"--passthrough", "off", NULL};
    struct pu_env e = {0};
    redisContext *c, *rc;

    pu_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_ERR(c, "ERR unknown command 'SET'", "SET %s 1", "off:k");
    ASSERT_TRUE(!pu_exists(rc, "off:k"));
    PU_OK(c, "LOCK %s", "off:l");
    PU_ERR(c, "ERR unknown command 'PUBLISH'", "PUBLISH %s m", "off:ch");
    PU_ERR(c, "ERR --passthrough is off", "SUBSCRIBE %s", "off:ch");
    ASSERT_EQ(pu_info_int(c, "forwarded_commands"), 0);
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

/* ---- Redisson-style clients through the proxy ---------------------------------- */

/* RLock's acquire and unlock, as Redisson sends them (the publish command
 * is ARGV[4], as Redisson passes it). */
static const char rl_acquire_lua[] = "if (redis.call('exists', KEYS[1]) == 0) or "
                                     "(redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
                                     "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                     "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
                                     "return redis.call('pttl', KEYS[1]);";
static const char rl_unlock_lua[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "return 1; end;";

struct mixed {
    struct su_excl x;      /* the critical section both kinds share */
    const char *name;      /* the lock */
    char chan[128];        /* its Redisson channel */
    char acq[48], rel[48]; /* SHA1s of the scripts (SCRIPT LOAD through the proxy) */
};

/* Even clients: Redisson-style (EVALSHA acquire, retried every 2 ms;
 * EVALSHA unlock that publishes); odd: LOCK/UNLOCK. */
static bool mixed_round(void *arg, int i, redisContext *c)
{
    struct mixed *m = arg;
    char owner[64];
    redisReply *r;
    bool ok;

    if (i % 2) {
        if (!su_cmd_ok(c, SU_OK, "LOCK %s WAIT 20000", m->name))
            return false;
        su_excl_enter(&m->x);
        su_excl_leave(&m->x, 300);
        return su_cmd_ok(c, 1, "UNLOCK %s", m->name);
    }
    snprintf(owner, sizeof(owner), "9a0e7c2a-1111-4222-8333-94445555%04d:1", i);
    for (;;) {
        r = redisCommand(c, "EVALSHA %s 1 %s 30000 %s", m->acq, m->name, owner);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            freeReplyObject(r);
            return false;
        }
        ok = r->type == REDIS_REPLY_NIL;
        freeReplyObject(r);
        if (ok)
            break;
        pu_sleep_ms(2);
    }
    su_excl_enter(&m->x);
    su_excl_leave(&m->x, 300);
    return su_cmd_ok(c, 1, "EVALSHA %s 2 %s %s 0 30000 %s publish", m->rel, m->name, m->chan,
                     owner);
}

/* Redisson-style clients (their scripts by EVALSHA through the proxy)
 * and LOCK clients on the same name never hold it at once; a LOCK waiter
 * is woken by a Redisson-style unlock sent through the proxy. */
TEST(passthrough_redisson_mixed)
{
    static struct mixed m;
    struct pu_env e = {0};
    struct su_clients spec = {0};
    redisContext *c, *w;
    redisReply *r;
    long long t0;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    m.name = "mix:lock";
    pu_channel(m.name, m.chan, sizeof(m.chan));
    r = pu_cmd(c, "SCRIPT LOAD %s", rl_acquire_lua);
    snprintf(m.acq, sizeof(m.acq), "%s", r->str);
    freeReplyObject(r);
    r = pu_cmd(c, "SCRIPT LOAD %s", rl_unlock_lua);
    snprintf(m.rel, sizeof(m.rel), "%s", r->str);
    freeReplyObject(r);
    /* Held Redisson-style: a LOCK client waits, and the unlock wakes it. */
    PU_NIL(c, "EVALSHA %s 1 %s 30000 owner-a:1", m.acq, m.name);
    w = pu_client(&e);
    PU_NIL(w, "TRYLOCK %s", m.name);
    pu_send(w, "LOCK %s WAIT 10000", m.name);
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 1, 5000);
    t0 = pu_now_ms();
    PU_INT(c, 1, "EVALSHA %s 2 %s %s 0 30000 owner-a:1 publish", m.rel, m.name, m.chan);
    PU_RECV(w, PU_K_STATUS, 0, "OK");
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    /* Held by LOCK: the Redisson-style acquire gets the lease left. */
    r = pu_cmd(c, "EVALSHA %s 1 %s 30000 owner-b:1", m.acq, m.name);
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    PU_INT(w, 1, "UNLOCK %s", m.name);
    /* Both kinds at once. */
    spec.ports = &e.proxy.port;
    spec.nports = 1;
    spec.clients = 4;
    spec.rounds = 20;
    spec.round = mixed_round;
    spec.arg = &m;
    ASSERT_EQ(su_clients_run(&spec), 0);
    ASSERT_EQ(atomic_load(&m.x.violations), 0);
    ASSERT_EQ(m.x.counter, 4 * 20);
    redisFree(w);
    redisFree(c);
    pu_env_stop(&e);
}

/* ---- Redis Cluster ------------------------------------------------------------ */

static void cluster_proxy(struct rcluster *rc, struct pu_proxy *p)
{
    char a[32], b[32];
    redisContext *c;

    memset(p, 0, sizeof(*p));
    snprintf(p->upstream, sizeof(p->upstream), "redis-cluster://%s,%s",
             rcluster_addr(rc, 0, a, sizeof(a)), rcluster_addr(rc, 5, b, sizeof(b)));
    p->extra[0] = "--io";
    p->extra[1] = "epoll";
    p->extra[2] = NULL;
    pu_proxy_start(p);
    c = pu_connect(p->port);
    PU_EVENTUALLY(pu_info_int(c, "cluster_slots_served") == 16384 &&
                      pu_info_int(c, "cluster_nodes_ready") == 3,
                  15000);
    redisFree(c);
}

/* A key of slot owned by master m (a hash tag picked for it). */
static void key_on(const struct rcluster *rc, int m, const char *suffix, char *buf, size_t n)
{
    int i;

    for (i = 0; i < 100000; i++) {
        char tag[32];

        snprintf(tag, sizeof(tag), "t%d", i);
        if (rcluster_owner(rc, pool_slot(tag, strlen(tag))) == m) {
            snprintf(buf, n, "{%s}%s", tag, suffix);
            return;
        }
    }
    TEST_FAIL("no key for master %d", m);
}

TEST(passthrough_cluster)
{
    struct rcluster rc;
    struct pu_proxy p;
    redisContext *c;
    redisReply *r;
    char k[3][64], k2[64], sha[48];
    int m, masters[3], n = 0, slot, to;
    long long asks;

    memset(&rc, 0, sizeof(rc));
    if (!rcluster_available())
        TEST_SKIP("redis-server or %s not installed", RCLUSTER_CLI);
    rcluster_start(&rc);
    cluster_proxy(&rc, &p);
    c = pu_connect(p.port);
    for (m = 0; m < RCLUSTER_NODES && n < 3; m++) {
        if (rcluster_is_master(&rc, m))
            masters[n++] = m;
    }
    ASSERT_EQ(n, 3);
    r = pu_cmd(c, "SCRIPT LOAD %s", GET_LUA);
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    /* A key on each master: SET/GET, the value where Redis Cluster keeps
     * it, and the script loaded on one node runs on every one. */
    for (m = 0; m < 3; m++) {
        key_on(&rc, masters[m], ":k", k[m], sizeof(k[m]));
        PU_OK(c, "SET %s v", k[m]);
        PU_STR(c, "v", "GET %s", k[m]);
        r = rcluster_cmd(&rc, masters[m], "GET %s", k[m]);
        PU_CHECK(r, PU_K_STR, 0, "v");
        freeReplyObject(r);
        PU_STR(c, "v", "EVALSHA %s 1 %s", sha, k[m]);
    }
    /* Same slot: one command; different slots: CROSSSLOT, nothing sent. */
    key_on(&rc, masters[0], ":other", k2, sizeof(k2));
    r = pu_cmd(c, "MGET %s %s", k[0], k2);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);
    PU_ERR(c, "CROSSSLOT Keys in request don't hash to the same slot", "MSET %s 1 %s 2", k2, k[1]);
    r = rcluster_cmd(&rc, masters[0], "EXISTS %s", k2);
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    /* The key's slot moves: the proxy follows MOVED, the client sees
     * nothing. */
    slot = pool_slot(k[0], strlen(k[0]));
    to = masters[1];
    rcluster_migrate(&rc, slot, to);
    PU_STR(c, "v", "GET %s", k[0]);
    PU_OK(c, "SET %s w", k[0]);
    r = rcluster_cmd(&rc, to, "GET %s", k[0]);
    PU_CHECK(r, PU_K_STR, 0, "w");
    freeReplyObject(r);
    PU_STR(c, "w", "EVALSHA %s 1 %s", sha, k[0]);
    /* Half-way through a migration: the key already moved answers ASK
     * at the source, and the proxy follows it. */
    slot = pool_slot(k[1], strlen(k[1]));
    asks = pu_info_int(c, "cluster_ask");
    rcluster_migrate_begin(&rc, slot, masters[1], masters[2]);
    rcluster_migrate_key(&rc, masters[1], masters[2], k[1]);
    PU_STR(c, "v", "GET %s", k[1]);
    ASSERT_TRUE(pu_info_int(c, "cluster_ask") > asks);
    rcluster_migrate_finish(&rc, slot, masters[1], masters[2]);
    PU_STR(c, "v", "GET %s", k[1]);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    rcluster_cleanup(&rc);
}

/* redis-py's Lock.LUA_RELEASE_SCRIPT, byte for byte (redis/lock.py). */
static const char py_release_lua[] = "\n        local token = redis.call('get', KEYS[1])\n"
                                     "        if not token or token ~= ARGV[1] then\n"
                                     "            return 0\n"
                                     "        end\n"
                                     "        redis.call('del', KEYS[1])\n"
                                     "        return 1\n    ";

/* redis-py's Script.__call__: EVALSHA of the SHA it computed itself; on
 * NOSCRIPT, SCRIPT LOAD and EVALSHA again. Returns the reply (free it);
 * *noscript counts the NOSCRIPTs the client saw. */
static redisReply *py_release(redisContext *c, const char *sha, const char *name, const char *token,
                              int *noscript)
{
    redisReply *r = pu_cmd(c, "EVALSHA %s 1 %s %s", sha, name, token);

    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOSCRIPT", 8) != 0)
        return r;
    freeReplyObject(r);
    (*noscript)++;
    r = pu_cmd(c, "SCRIPT LOAD %s", py_release_lua);
    PU_CHECK(r, PU_K_STR, 0, sha);
    freeReplyObject(r);
    return pu_cmd(c, "EVALSHA %s 1 %s %s", sha, name, token);
}

/* py_release that retries errors for up to 10 s (redis-py raises them; a
 * caller retries, as a cluster settles) and expects the integer want. */
static void py_release_expect(redisContext *c, const char *sha, const char *name, const char *token,
                              long long want, int *noscript)
{
    long long t0 = pu_now_ms();
    redisReply *r;

    while ((r = py_release(c, sha, name, token, noscript))->type == REDIS_REPLY_ERROR &&
           pu_now_ms() - t0 < 10000) {
        fprintf(stderr, "redis-py release: %s (retried)\n", r->str);
        freeReplyObject(r);
        pu_sleep_ms(100);
    }
    PU_CHECK(r, PU_K_INT, want, NULL);
    freeReplyObject(r);
}

/* redis-py's r.lock(): SET name token NX PX to acquire, its release script
 * by EVALSHA, through the proxy against a cluster, cluster-unaware: a
 * second holder refused; the lock's slot migrates and then its master
 * fails over to a replica (measured: it never saw the script) while held,
 * and the release still works, NOSCRIPT seen by the client once at most
 * (its first use, as against Redis). */
TEST(passthrough_cluster_redis_py_lock)
{
    struct rcluster rc;
    struct pu_proxy p;
    redisContext *a, *b;
    redisReply *r;
    char name[64], sha[48];
    int m, to, rep, noscript = 0;

    memset(&rc, 0, sizeof(rc));
    if (!rcluster_available())
        TEST_SKIP("redis-server or %s not installed", RCLUSTER_CLI);
    rcluster_start(&rc);
    cluster_proxy(&rc, &p);
    a = pu_connect(p.port);
    b = pu_connect(p.port);
    /* The SHA redis-py computes (sha1 of the text), asked of Redis. */
    r = rcluster_cmd(&rc, 0, "EVAL %s 0 %s", "return redis.sha1hex(ARGV[1])", py_release_lua);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    for (m = 0; m < RCLUSTER_NODES && !rcluster_is_master(&rc, m); m++)
        ;
    key_on(&rc, m, "pylock", name, sizeof(name));
    PU_OK(a, "SET %s tok-a NX PX %d", name, 20000);
    PU_NIL(b, "SET %s tok-b NX PX %d", name, 20000);
    py_release_expect(b, sha, name, "tok-b", 0, &noscript); /* not its lock */
    py_release_expect(a, sha, name, "tok-a", 1, &noscript);
    ASSERT_EQ(noscript, 1);
    /* Held while its slot moves to another master. */
    PU_OK(b, "SET %s tok-b NX PX %d", name, 20000);
    to = rcluster_other_master(&rc, m);
    rcluster_migrate(&rc, pool_slot(name, strlen(name)), to);
    PU_NIL(a, "SET %s tok-a NX PX %d", name, 20000);
    py_release_expect(b, sha, name, "tok-b", 1, &noscript);
    ASSERT_EQ(noscript, 1);
    /* Held while its master fails over to a replica. */
    PU_OK(a, "SET %s tok-a NX PX %d", name, 20000);
    ASSERT_EQ(rcluster_int(&rc, to, "WAIT 1 2000"), 1);
    rep = rcluster_replica_of(&rc, to);
    ASSERT_TRUE(rep >= 0);
    rcluster_failover(&rc, rep);
    r = rcluster_cmd(&rc, rep, "GET %s", name);
    PU_CHECK(r, PU_K_STR, 0, "tok-a");
    freeReplyObject(r);
    r = rcluster_cmd(&rc, rep, "SCRIPT EXISTS %s", sha);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    fprintf(stderr, "the new master had the script before the release: %lld\n",
            r->element[0]->integer);
    freeReplyObject(r);
    PU_NIL(b, "SET %s tok-b NX PX %d", name, 20000);
    py_release_expect(a, sha, name, "tok-a", 1, &noscript);
    ASSERT_EQ(rcluster_int(&rc, rep, "EXISTS %s", name), 0);
    PU_OK(b, "SET %s tok-b NX PX %d", name, 20000);
    py_release_expect(b, sha, name, "tok-b", 1, &noscript);
    fprintf(stderr, "redis-py lock on the cluster: NOSCRIPT seen %d time(s)\n", noscript);
    ASSERT_EQ(noscript, 1);
    redisFree(a);
    redisFree(b);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    rcluster_cleanup(&rc);
}

TEST_MAIN(TEST_CASE(passthrough_forward), TEST_CASE(passthrough_resp3),
          TEST_CASE(passthrough_refused), TEST_CASE(passthrough_acl),
          TEST_CASE(passthrough_scripts_survive_restart),
          TEST_CASE(passthrough_script_memory_bounded), TEST_CASE(passthrough_off),
          TEST_CASE(passthrough_redisson_mixed), TEST_CASE(passthrough_cluster),
          TEST_CASE(passthrough_cluster_redis_py_lock))
