/* Fair lock commands (FAIRLOCK, FAIRUNLOCK) against a real redis-server:
 * Redisson's RFairLock layout (the RLock hash, the queue LIST and the
 * deadline ZSET in epoch ms, per-waiter channels, "0" to the head only),
 * FIFO order across two proxies on one Redis, waiters that time out or
 * disconnect leaving the queue at once (and waking the next head),
 * stale-waiter cleanup, exclusion under many clients on two proxies, and
 * interoperation with a client running Redisson's own fair lock scripts.
 * Both io backends. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define JAVA_OWNER  "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a:11"
#define NUM_FIFO    10
#define MX_THREADS  50
#define MX_ITERS    6
#define WAKE_MAX_MS 1000
#define DEFAULT_WT  300000 /* threadWaitTime without WAIT */

/* Redisson's RedissonFairLock tryLock, waiting variant (KEYS name, queue,
 * timeouts; ARGV lease, owner, threadWaitTime, now): nil when acquired,
 * else the ttl to wait. */
static const char java_fair_lock[] =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); "
    "if firstThreadId2 == false then break; end; "
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2)); "
    "if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); "
    "redis.call('lpop', KEYS[2]); else break; end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]); "
    "redis.call('zrem', KEYS[3], ARGV[2]); local keys = redis.call('zrange', KEYS[3], 0, -1); "
    "for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]); end; "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2],1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]); "
    "if timeout ~= false then return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]); end; "
    "local lastThreadId = redis.call('lindex', KEYS[2], -1); local ttl; "
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]); "
    "else ttl = redis.call('pttl', KEYS[1]); end; "
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]); "
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
    "redis.call('rpush', KEYS[2], ARGV[2]); end; return ttl;";

/* Redisson's fair unlock (KEYS name, queue, timeouts, channel; ARGV
 * message, lease, owner, now), latch left out. */
static const char java_fair_unlock[] =
    "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0); "
    "if firstThreadId2 == false then break; end; "
    "local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2)); "
    "if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); "
    "redis.call('lpop', KEYS[2]); else break; end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; "
    "redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1;";

/* ---- helpers ------------------------------------------------------------------ */

struct fair_names {
    char queue[256]; /* redisson_lock_queue:{name} */
    char zset[256];  /* redisson_lock_timeout:{name} */
    char chan[256];  /* redisson_lock__channel:{name} */
};

static void fair_names(const char *name, struct fair_names *n)
{
    pu_redisson_key("redisson_lock_queue:", name, n->queue, sizeof(n->queue));
    pu_redisson_key("redisson_lock_timeout:", name, n->zset, sizeof(n->zset));
    pu_channel(name, n->chan, sizeof(n->chan));
}

static long long zscore(redisContext *rc, const char *key, const char *member)
{
    redisReply *r = pu_cmd(rc, "ZSCORE %s %s", key, member);
    long long v = -1;

    if (r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    return v;
}

/* The queue as "a,b,c". */
static void queue_str(redisContext *rc, const char *key, char *buf, size_t n)
{
    redisReply *r = pu_cmd(rc, "LRANGE %s 0 -1", key);
    size_t len = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < r->elements && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "," : "", r->element[i]->str);
    freeReplyObject(r);
}

/* Sends FAIRLOCK (with WAIT wait unless it is < 0) on c and waits until
 * the queue is qlen long. */
static void enqueue(redisContext *c, redisContext *rc, const char *name, int wait, long long qlen)
{
    struct fair_names n;

    fair_names(name, &n);
    if (wait >= 0)
        pu_send(c, "FAIRLOCK %s WAIT %d", name, wait);
    else
        pu_send(c, "FAIRLOCK %s", name);
    PU_EVENTUALLY(pu_int_reply(rc, "LLEN", n.queue) == qlen, 3000);
}

static void owner_channel(const char *name, const char *owner, char *buf, size_t n)
{
    struct fair_names fn;

    fair_names(name, &fn);
    snprintf(buf, n, "%s:%s", fn.chan, owner);
}

/* A second proxy on the same Redis, with the first one's flags. */
static void second_proxy(struct pu_env *e, struct pu_proxy *p2)
{
    memset(p2, 0, sizeof(*p2));
    snprintf(p2->upstream, sizeof(p2->upstream), "%s", e->proxy.upstream);
    memcpy(p2->extra, e->proxy.extra, sizeof(p2->extra));
    pu_proxy_start(p2);
}

/* ---- layout -------------------------------------------------------------------- */

static void scenario_layout(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e), *sub = pu_psubscribe(e, "redisson_lock__channel:*");
    char o1[PU_OWNER_MAX], o2[PU_OWNER_MAX], o3[PU_OWNER_MAX], ch2[512], ch3[512], q[1024];
    long long s2, s3, now, t0;
    struct fair_names n;

    fair_names("fl", &n);
    pu_conn_owner(c1, o1, sizeof(o1));
    pu_conn_owner(c2, o2, sizeof(o2));
    pu_conn_owner(c3, o3, sizeof(o3));
    owner_channel("fl", o2, ch2, sizeof(ch2));
    owner_channel("fl", o3, ch3, sizeof(ch3));

    PU_OK(c1, "FAIRLOCK %s", "fl");
    PU_STR(rc, "hash", "TYPE %s", "fl");
    ASSERT_EQ(pu_hget_int(rc, "fl", o1), 1);
    ASSERT_TRUE(pu_pttl(rc, "fl") > 0 && pu_pttl(rc, "fl") <= 30000);
    ASSERT_TRUE(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset));

    /* Waiters queue in order, with Redisson's deadlines: the holder's
     * lease (or the previous waiter's deadline) plus threadWaitTime. */
    now = pu_wall_ms();
    enqueue(c2, rc, "fl", -1, 1);
    enqueue(c3, rc, "fl", 5000, 2);
    queue_str(rc, n.queue, q, sizeof(q));
    ASSERT_TRUE(strncmp(q, o2, strlen(o2)) == 0 && strcmp(q + strlen(o2) + 1, o3) == 0);
    s2 = zscore(rc, n.zset, o2);
    s3 = zscore(rc, n.zset, o3);
    ASSERT_TRUE(s2 - now >= DEFAULT_WT && s2 - now <= DEFAULT_WT + 30000 + 2000);
    ASSERT_EQ(s3 - s2, 5000);
    PU_EVENTUALLY(su_numsub(rc, ch2) == 1 && su_numsub(rc, ch3) == 1, 3000);

    /* A release wakes the head only, on its own channel; its acquire moves
     * the deadlines behind it up by its threadWaitTime. */
    t0 = pu_now_ms();
    PU_INT(c1, 1, "FAIRUNLOCK %s", "fl");
    su_expect_msg(sub, ch2, "0");
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);
    ASSERT_EQ(pu_hget_int(rc, "fl", o2), 1);
    ASSERT_EQ(zscore(rc, n.zset, o3), s3 - DEFAULT_WT);
    ASSERT_EQ(pu_int_reply(rc, "LLEN", n.queue), 1);
    ASSERT_NULL(pu_try_recv(c3, 100));

    t0 = pu_now_ms();
    PU_INT(c2, 1, "FAIRUNLOCK %s", "fl");
    su_expect_msg(sub, ch3, "0");
    ASSERT_TRUE(su_recv_ok_within(c3, t0, 5000) < WAKE_MAX_MS);
    ASSERT_TRUE(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset));

    /* Reentrancy; nobody queued: no message. */
    PU_OK(c3, "FAIRLOCK %s", "fl");
    ASSERT_EQ(pu_hget_int(rc, "fl", o3), 2);
    PU_INT(c3, 0, "FAIRUNLOCK %s", "fl");
    PU_INT(c3, 1, "FAIRUNLOCK %s", "fl");
    su_expect_no_msg(sub, 100);
    PU_ERR(c3, "NOTOWNER", "FAIRUNLOCK %s", "fl");
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(sub);
    redisFree(rc);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
}

/* ---- giving up ------------------------------------------------------------------ */

static void scenario_timeout(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *c4 = pu_client(e), *rc = pu_redis_client(e);
    char o2[PU_OWNER_MAX], o3[PU_OWNER_MAX], o4[PU_OWNER_MAX];
    struct fair_names n;
    long long t0, s4;
    redisReply *r;

    fair_names("ft", &n);
    pu_conn_owner(c2, o2, sizeof(o2));
    pu_conn_owner(c3, o3, sizeof(o3));
    pu_conn_owner(c4, o4, sizeof(o4));
    PU_OK(c1, "FAIRLOCK %s LEASE %d", "ft", 10000);

    /* WAIT 0 never queues; a lone waiter that times out leaves nothing. */
    PU_NIL(c2, "FAIRLOCK %s WAIT %d", "ft", 0);
    ASSERT_TRUE(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset));
    t0 = pu_now_ms();
    PU_NIL(c2, "FAIRLOCK %s WAIT %d", "ft", 300);
    ASSERT_TRUE(pu_now_ms() - t0 >= 250);
    PU_EVENTUALLY(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset), 500);

    /* A waiter in the middle times out: the one behind it moves up. */
    enqueue(c2, rc, "ft", -1, 1);
    enqueue(c3, rc, "ft", 800, 2);
    enqueue(c4, rc, "ft", -1, 3);
    s4 = zscore(rc, n.zset, o4);
    r = pu_try_recv(c3, 3000);
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    PU_EVENTUALLY(pu_int_reply(rc, "LLEN", n.queue) == 2, 500);
    ASSERT_EQ(zscore(rc, n.zset, o3), -1);
    ASSERT_EQ(zscore(rc, n.zset, o4), s4 - 800);

    /* The rest are served in order. */
    t0 = pu_now_ms();
    PU_INT(c1, 1, "FAIRUNLOCK %s", "ft");
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);
    ASSERT_NULL(pu_try_recv(c4, 100));
    t0 = pu_now_ms();
    PU_INT(c2, 1, "FAIRUNLOCK %s", "ft");
    ASSERT_TRUE(su_recv_ok_within(c4, t0, 5000) < WAKE_MAX_MS);
    PU_INT(c4, 1, "FAIRUNLOCK %s", "ft");
    ASSERT_EQ(pu_dbsize(rc), 0);
    ASSERT_EQ(pu_info_int(c1, "lock_waiters"), 0);
    redisFree(rc);
    redisFree(c4);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_disconnect(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    char o1[PU_OWNER_MAX], o3[PU_OWNER_MAX], q[1024];
    struct fair_names n;
    long long t0;
    redisReply *r;

    fair_names("fd", &n);
    pu_conn_owner(c3, o3, sizeof(o3));
    PU_OK(c1, "FAIRLOCK %s LEASE %d", "fd", 10000);
    enqueue(c2, rc, "fd", -1, 1);
    enqueue(c3, rc, "fd", -1, 2);

    /* The head's connection closes: it leaves the queue at once. */
    redisFree(c2);
    PU_EVENTUALLY(pu_int_reply(rc, "LLEN", n.queue) == 1, 1000);
    queue_str(rc, n.queue, q, sizeof(q));
    ASSERT_STREQ(q, o3);
    ASSERT_EQ(pu_int_reply(rc, "ZCARD", n.zset), 1);

    /* The holder's connection closes: the lock is released and the head
     * woken on its channel. */
    t0 = pu_now_ms();
    redisFree(c1);
    ASSERT_TRUE(su_recv_ok_within(c3, t0, 5000) < WAKE_MAX_MS);

    /* A head whose lease-holder vanished without a release (no message)
     * gives up: the next waiter is woken at once, not at its re-poll. */
    c1 = pu_client(e);
    c2 = pu_client(e);
    PU_INT(c3, 1, "FAIRUNLOCK %s", "fd");
    PU_OK(c3, "FAIRLOCK %s LEASE %d", "fd", 10000);
    pu_conn_owner(c1, o1, sizeof(o1));
    enqueue(c1, rc, "fd", 1000, 1);
    enqueue(c2, rc, "fd", -1, 2);
    /* c1 has subscribed and made its retry after subscribing (else that
     * retry could find the lock gone and take it). */
    owner_channel("fd", o1, q, sizeof(q));
    PU_EVENTUALLY(su_numsub(rc, q) == 1, 3000);
    pu_sleep_ms(200);
    PU_INT(rc, 1, "DEL %s", "fd");
    r = pu_try_recv(c1, 3000);
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    t0 = pu_now_ms();
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);
    PU_INT(c2, 1, "FAIRUNLOCK %s", "fd");
    PU_EVENTUALLY(pu_dbsize(rc) == 0, 1000);
    ASSERT_EQ(pu_info_int(c2, "lock_waiters"), 0);
    redisFree(rc);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
}

/* ---- FIFO across two proxies ---------------------------------------------------- */

static void scenario_fifo(struct pu_env *e)
{
    redisContext *w[NUM_FIFO], *h = pu_client(e), *rc = pu_redis_client(e), *h2;
    bool done[NUM_FIFO] = {false};
    struct pu_proxy p2;
    long long t0;

    second_proxy(e, &p2);
    h2 = pu_connect(p2.port);
    PU_OK(h, "FAIRLOCK %s LEASE %d", "ff", 30000);
    for (int i = 0; i < NUM_FIFO; i++) {
        w[i] = i % 2 ? pu_connect(p2.port) : pu_client(e);
        enqueue(w[i], rc, "ff", -1, i + 1);
    }
    /* Redis shows an entry before its proxy has handled the reply. */
    PU_EVENTUALLY(pu_info_int(h, "lock_waiters") == NUM_FIFO / 2, 3000);
    PU_EVENTUALLY(pu_info_int(h2, "lock_waiters") == NUM_FIFO / 2, 3000);

    t0 = pu_now_ms();
    PU_INT(h, 1, "FAIRUNLOCK %s", "ff");
    for (int k = 0; k < NUM_FIFO; k++) {
        int i = su_next_granted(w, done, NUM_FIFO, 5000);

        if (i != k)
            TEST_FAIL("grant %d went to waiter %d (queued %d-th)", k, i, i);
        if (pu_now_ms() - t0 >= WAKE_MAX_MS)
            TEST_FAIL("waiter %d got the lock %lld ms after the release", i, pu_now_ms() - t0);
        done[i] = true;
        ASSERT_EQ(su_next_granted(w, done, NUM_FIFO, 0), -1);
        t0 = pu_now_ms();
        PU_INT(w[i], 1, "FAIRUNLOCK %s", "ff");
    }
    ASSERT_EQ(pu_dbsize(rc), 0);
    for (int i = 0; i < NUM_FIFO; i++)
        redisFree(w[i]);
    redisFree(h2);
    pu_proxy_stop(&p2);
    redisFree(rc);
    redisFree(h);
}

/* ---- exclusion ------------------------------------------------------------------ */

/* One critical section under FAIRLOCK; arg is the section. */
static bool mx_round(void *arg, int i, redisContext *c)
{
    struct su_excl *x = arg;

    (void)i;
    if (!su_cmd_ok(c, SU_OK, "FAIRLOCK %s", "fmx"))
        return false;
    su_excl_enter(x);
    su_excl_leave(x, 100);
    return su_cmd_ok(c, 1, "FAIRUNLOCK %s", "fmx");
}

/* MX_THREADS clients, alternating between two proxies on one Redis. */
static void scenario_exclusion(struct pu_env *e)
{
    static struct su_excl x;
    redisContext *rc = pu_redis_client(e), *c;
    struct su_clients spec = {NULL, 2, MX_THREADS, MX_ITERS, mx_round, &x};
    struct pu_proxy p2;
    int ports[2];

    second_proxy(e, &p2);
    memset(&x, 0, sizeof(x));
    ports[0] = e->proxy.port;
    ports[1] = p2.port;
    spec.ports = ports;
    ASSERT_EQ(su_clients_run(&spec), 0);
    ASSERT_EQ(atomic_load(&x.violations), 0);
    ASSERT_EQ(x.counter, (long)MX_THREADS * MX_ITERS);
    ASSERT_EQ(pu_dbsize(rc), 0);
    c = pu_connect(p2.port);
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 0, 2000);
    redisFree(c);
    pu_proxy_stop(&p2);
    redisFree(rc);
}

/* ---- stale waiters, errors ------------------------------------------------------- */

static void scenario_stale(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    struct fair_names n;

    fair_names("fs", &n);
    /* A waiter past its deadline, and one with no deadline at all (where
     * Redisson's own cleanup fails): both dropped, the lock is free. */
    PU_INT(rc, 2, "RPUSH %s %s %s", n.queue, "ghost:1", "ghost:2");
    PU_INT(rc, 1, "ZADD %s %lld %s", n.zset, pu_wall_ms() - 1000, "ghost:1");
    PU_OK(c, "FAIRLOCK %s WAIT %d", "fs", 0);
    ASSERT_TRUE(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset));
    PU_INT(c, 1, "FAIRUNLOCK %s", "fs");

    /* A live waiter ahead is respected, even by WAIT 0. */
    PU_INT(rc, 1, "RPUSH %s %s", n.queue, "ghost:3");
    PU_INT(rc, 1, "ZADD %s %lld %s", n.zset, pu_wall_ms() + 600, "ghost:3");
    PU_NIL(c, "FAIRLOCK %s WAIT %d", "fs", 0);
    ASSERT_TRUE(!pu_exists(rc, "fs"));
    /* ... until its deadline passes: a waiter re-polls then. */
    PU_OK(c, "FAIRLOCK %s WAIT %d", "fs", 5000);
    ASSERT_TRUE(!pu_exists(rc, n.queue) && !pu_exists(rc, n.zset));
    PU_INT(c, 1, "FAIRUNLOCK %s", "fs");

    /* Arguments and types. */
    PU_ERR(c, "ERR LEASE must be a non-negative integer", "FAIRLOCK %s LEASE %d", "fs", -1);
    PU_ERR(c, "ERR WAIT must be a non-negative integer", "FAIRLOCK %s WAIT %s", "fs", "1.5");
    PU_ERR(c, "ERR FAIRLOCK takes no FENCED option", "FAIRLOCK %s FENCED", "fs");
    PU_ERR(c, "ERR FAIRUNLOCK takes no WAIT option", "FAIRUNLOCK %s WAIT %d", "fs", 1);
    PU_OK(rc, "SET %s %s", "fstr", "v");
    PU_ERR(c, "WRONGTYPE", "FAIRLOCK %s", "fstr");
    PU_STR(rc, "v", "GET %s", "fstr");
    ASSERT_EQ(pu_dbsize(rc), 1);
    redisFree(rc);
    redisFree(c);
}

/* ---- Redisson interop ------------------------------------------------------------ */

static redisReply *java_lock(redisContext *rc, const char *name)
{
    struct fair_names n;
    char now[32];

    fair_names(name, &n);
    snprintf(now, sizeof(now), "%lld", pu_wall_ms());
    return redisCommand(rc, "EVAL %s 3 %s %s %s %s %s %s %s", java_fair_lock, name, n.queue, n.zset,
                        "30000", JAVA_OWNER, "300000", now);
}

static redisReply *java_unlock(redisContext *rc, const char *name)
{
    struct fair_names n;
    char now[32];

    fair_names(name, &n);
    snprintf(now, sizeof(now), "%lld", pu_wall_ms());
    return redisCommand(rc, "EVAL %s 4 %s %s %s %s %s %s %s %s", java_fair_unlock, name, n.queue,
                        n.zset, n.chan, "0", "30000", JAVA_OWNER, now);
}

static void scenario_redisson(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");
    char jchan[512], o2[PU_OWNER_MAX];
    struct fair_names n;
    redisReply *r;
    long long t0;

    fair_names("fj", &n);
    owner_channel("fj", JAVA_OWNER, jchan, sizeof(jchan));
    pu_conn_owner(c2, o2, sizeof(o2));

    /* The proxy holds; a Redisson waiter queues, then a proxy waiter
     * behind it. The proxy's release wakes the Redisson waiter only. */
    PU_OK(c1, "FAIRLOCK %s", "fj");
    r = java_lock(rc, "fj");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    enqueue(c2, rc, "fj", -1, 2);
    PU_INT(c1, 1, "FAIRUNLOCK %s", "fj");
    su_expect_msg(sub, jchan, "0");
    ASSERT_NULL(pu_try_recv(c2, 200));
    r = java_lock(rc, "fj");
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    ASSERT_EQ(pu_hget_int(rc, "fj", JAVA_OWNER), 1);

    /* Redisson's release wakes the proxy waiter. */
    t0 = pu_now_ms();
    r = java_unlock(rc, "fj");
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);
    ASSERT_EQ(pu_hget_int(rc, "fj", o2), 1);
    PU_INT(c2, 1, "FAIRUNLOCK %s", "fj");
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(sub);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

TEST(fair_layout)
{
    pu_each_backend(scenario_layout, NULL);
}

TEST(fair_waiter_timeout)
{
    pu_each_backend(scenario_timeout, NULL);
}

TEST(fair_waiter_disconnect)
{
    pu_each_backend(scenario_disconnect, NULL);
}

TEST(fair_fifo_two_proxies)
{
    pu_each_backend(scenario_fifo, NULL);
}

TEST(fair_exclusion_two_proxies)
{
    pu_raise_nofile(1024);
    pu_each_backend(scenario_exclusion, NULL);
}

TEST(fair_stale_and_errors)
{
    pu_each_backend(scenario_stale, NULL);
}

TEST(fair_redisson_interop)
{
    pu_each_backend(scenario_redisson, NULL);
}

TEST_MAIN(TEST_CASE(fair_layout), TEST_CASE(fair_waiter_timeout), TEST_CASE(fair_waiter_disconnect),
          TEST_CASE(fair_fifo_two_proxies), TEST_CASE(fair_exclusion_two_proxies),
          TEST_CASE(fair_stale_and_errors), TEST_CASE(fair_redisson_interop))
