/* Pass-through pub/sub (proxy/subs.h): clients' SUBSCRIBE, PSUBSCRIBE and
 * SSUBSCRIBE ride one upstream subscription per channel, shared with the
 * proxy's own LOCK waiters; replies and messages framed byte for byte as
 * a direct connection to redis-server frames them (RESP2 and RESP3);
 * subscribed mode; the bounds; a Redisson-style client beside LOCK
 * clients; and, on a 3-master cluster with --cluster-pubsub auto, a LOCK
 * waiter woken by a classic PUBLISH of Redisson's unlock, and a mixed
 * fleet of both kinds across a slot migration and a failover. */
#include <sys/socket.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_util.h"
#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"
#include "resp3_util.h"
#include "sync_util.h"

#define PX_SUBS_MAX_TEST 10000 /* proxy/subs.h PX_SUBS_MAX */
#define JAVA_UUID        "8f0e7c2a-1111-4222-8333-944455556666"

/* The next frame of a and of b (within 5 s each) must be the same bytes. */
static void same_next_at(int line, struct r3_conn *a, struct r3_conn *b)
{
    char fa[R3_BUF_MAX];
    const char *fb;

    if (!r3_next(a, 5000))
        TEST_FAIL("line %d: no frame from the proxy", line);
    snprintf(fa, sizeof(fa), "%s", a->frame);
    fb = r3_next(b, 5000);
    if (!fb)
        TEST_FAIL("line %d: no frame from Redis (proxy sent \"%s\")", line, fa);
    if (strcmp(fa, fb) != 0)
        TEST_FAIL("line %d: proxy sent \"%s\", Redis \"%s\"", line, fa, fb);
}
#define SAME_NEXT(a, b) same_next_at(__LINE__, (a), (b))

/* Sends the same command to the proxy (p) and to Redis (d). */
#define BOTH(p, d, ...)                  \
    do {                                 \
        r3_send((p), __VA_ARGS__, NULL); \
        r3_send((d), __VA_ARGS__, NULL); \
    } while (0)

static long long info_field(struct pu_env *e, const char *field)
{
    redisContext *c = pu_client(e);
    long long v = pu_info_int(c, field);

    redisFree(c);
    return v;
}

static void hello3(struct r3_conn *c)
{
    r3_send(c, "HELLO", "3", NULL);
    if (!r3_next(c, 5000) || c->frame[0] != '%')
        TEST_FAIL("HELLO 3 refused");
}

/* Confirmations, messages of the three kinds, and the one upstream
 * subscription two proxy clients share; proto 2 or 3. */
static void check_framing(int proto)
{
    struct pu_env e = {0};
    struct r3_conn *p1, *p2, *d;
    redisContext *rc, *pub;

    pu_env_start(&e, "epoll", NULL);
    rc = pu_redis_client(&e);
    pub = pu_client(&e);
    p1 = r3_open(e.proxy.port);
    p2 = r3_open(e.proxy.port);
    d = r3_open(e.redis.port);
    if (proto == 3) {
        hello3(p1);
        hello3(p2);
        hello3(d);
    }
    BOTH(p1, d, "SUBSCRIBE", "news", "sport");
    SAME_NEXT(p1, d);
    SAME_NEXT(p1, d);
    r3_send(p2, "SUBSCRIBE", "news", NULL);
    R3_EXPECT_PREFIX(p2, proto == 3 ? ">3\r\n$9\r\nsubscribe\r\n" : "*3\r\n$9\r\nsubscribe\r\n");
    /* Two proxy clients, one proxy subscription: Redis counts the proxy
     * once, and the direct connection. */
    ASSERT_EQ(su_numsub(rc, "news"), 2);
    ASSERT_EQ(su_numsub(rc, "sport"), 2);
    BOTH(p1, d, "PSUBSCRIBE", "n*");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "SSUBSCRIBE", "shard1");
    SAME_NEXT(p1, d);
    PU_INT(pub, 4, "PUBLISH %s %s", "news", "hello world"); /* 2 by channel, 2 by n* */
    SAME_NEXT(p1, d);                                       /* message */
    SAME_NEXT(p1, d);                                       /* pmessage n* */
    R3_EXPECT(p2, proto == 3 ? ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$11\r\nhello world\r\n"
                             : "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$11\r\nhello world\r\n");
    PU_INT(pub, 2, "SPUBLISH %s %s", "shard1", "s-msg");
    SAME_NEXT(p1, d);                                     /* smessage */
    PU_INT(pub, 2, "PUBLISH %s %s", "nothing-here", "x"); /* the pattern only */
    SAME_NEXT(p1, d);                                     /* pmessage */
    /* RESP2 subscribed mode refuses PUBLISH; RESP3 takes any command. */
    if (proto == 2)
        BOTH(p1, d, "PUBLISH", "nothing-here", "x");
    else
        BOTH(p1, d, "PING", "nothing-here");
    SAME_NEXT(p1, d);
    ASSERT_EQ(info_field(&e, "passthrough_subscribers"), 5);
    ASSERT_EQ(info_field(&e, "passthrough_channels"), 4);
    ASSERT_TRUE(info_field(&e, "passthrough_messages_delivered") >= 5);
    r3_close(p1);
    r3_close(p2);
    r3_close(d);
    redisFree(pub);
    redisFree(rc);
    pu_env_stop(&e);
}

TEST(passsub_framing_resp2)
{
    check_framing(2);
}

TEST(passsub_framing_resp3)
{
    check_framing(3);
}

/* UNSUBSCRIBE forms and counts as Redis answers them; one client leaving
 * keeps the channel for the other; the last one unsubscribes upstream. */
TEST(passsub_unsubscribe)
{
    struct pu_env e = {0};
    struct r3_conn *p1, *p2, *d;
    redisContext *rc, *pub;
    char got[2][256];
    int i;

    pu_env_start(&e, "epoll", NULL);
    rc = pu_redis_client(&e);
    pub = pu_client(&e);
    p1 = r3_open(e.proxy.port);
    p2 = r3_open(e.proxy.port);
    d = r3_open(e.redis.port);
    BOTH(p1, d, "UNSUBSCRIBE");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "PUNSUBSCRIBE");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "SUNSUBSCRIBE");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "SUBSCRIBE", "a", "b", "a");
    SAME_NEXT(p1, d);
    SAME_NEXT(p1, d);
    SAME_NEXT(p1, d); /* "a" again: count unchanged */
    r3_send(p2, "SUBSCRIBE", "a", NULL);
    R3_EXPECT(p2, "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
    BOTH(p1, d, "PSUBSCRIBE", "x*");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "UNSUBSCRIBE", "a", "zz");
    SAME_NEXT(p1, d);
    SAME_NEXT(p1, d);
    ASSERT_EQ(su_numsub(rc, "a"), 1); /* p2 keeps the proxy's subscription */
    PU_INT(pub, 1, "PUBLISH %s %s", "a", "m1");
    R3_EXPECT(p2, "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nm1\r\n");
    ASSERT_NULL(r3_next(p1, 200)); /* p1 left "a" */
    /* Unsubscribe-all: one reply per channel, in no set order. */
    BOTH(p1, d, "UNSUBSCRIBE", "b");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "PUNSUBSCRIBE");
    SAME_NEXT(p1, d);
    BOTH(p1, d, "SUBSCRIBE", "c1", "c2");
    SAME_NEXT(p1, d);
    SAME_NEXT(p1, d);
    BOTH(p1, d, "UNSUBSCRIBE");
    for (i = 0; i < 2; i++) {
        ASSERT_NOTNULL(r3_next(p1, 5000));
        snprintf(got[i], sizeof(got[i]), "%.200s", p1->frame);
    }
    for (i = 0; i < 2; i++)
        ASSERT_NOTNULL(r3_next(d, 5000)); /* the same two, maybe in the other order */
    ASSERT_TRUE(strstr(got[0], ":1\r\n") && strstr(got[1], ":0\r\n"));
    ASSERT_TRUE(strstr(got[0], "$2\r\nc1\r\n") || strstr(got[1], "$2\r\nc1\r\n"));
    ASSERT_TRUE(strstr(got[0], "$2\r\nc2\r\n") || strstr(got[1], "$2\r\nc2\r\n"));
    /* Out of subscribed mode: any command runs again. */
    BOTH(p1, d, "PING");
    SAME_NEXT(p1, d);
    r3_send(p2, "UNSUBSCRIBE", "a", NULL);
    R3_EXPECT(p2, "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n");
    PU_EVENTUALLY(su_numsub(rc, "a") == 0 && su_numsub(rc, "c1") == 0, 3000);
    ASSERT_EQ(info_field(&e, "passthrough_subscribers"), 0);
    ASSERT_EQ(info_field(&e, "shared_subscriptions"), 0);
    r3_close(p1);
    r3_close(p2);
    r3_close(d);
    redisFree(pub);
    redisFree(rc);
    pu_env_stop(&e);
}

/* RESP2 subscribed mode: Redis's refusal, PING's array; RESP3 keeps
 * running commands. Bad input gets Redis's errors and changes nothing. */
TEST(passsub_subscribed_mode)
{
    struct pu_env e = {0};
    struct r3_conn *p, *d, *p3;

    pu_env_start(&e, "epoll", NULL);
    p = r3_open(e.proxy.port);
    d = r3_open(e.redis.port);
    BOTH(p, d, "SUBSCRIBE", "m");
    SAME_NEXT(p, d);
    BOTH(p, d, "PING");
    SAME_NEXT(p, d);
    BOTH(p, d, "PING", "hi");
    SAME_NEXT(p, d);
    BOTH(p, d, "PUBLISH", "m", "x");
    SAME_NEXT(p, d);
    BOTH(p, d, "INFO");
    SAME_NEXT(p, d);
    r3_send(p, "LOCK", "sm", NULL);
    R3_EXPECT(p, "-ERR Can't execute 'lock': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                 "QUIT / RESET are allowed in this context\r\n");
    BOTH(p, d, "SUBSCRIBE");
    R3_EXPECT_PREFIX(p, "-ERR wrong number of arguments for ");
    R3_EXPECT_PREFIX(d, "-ERR wrong number of arguments for ");
    BOTH(p, d, "QUIT");
    SAME_NEXT(p, d);
    r3_close(p);
    r3_close(d);

    p3 = r3_open(e.proxy.port);
    hello3(p3);
    r3_send(p3, "SUBSCRIBE", "m", NULL);
    R3_EXPECT(p3, ">3\r\n$9\r\nsubscribe\r\n$1\r\nm\r\n:1\r\n");
    r3_send(p3, "LOCK", "sm", NULL);
    R3_EXPECT(p3, "+OK\r\n");
    r3_send(p3, "UNLOCK", "sm", NULL);
    R3_EXPECT(p3, ":1\r\n");
    r3_send(p3, "PUBLISH", "m", NULL);
    R3_EXPECT_PREFIX(p3, "-ERR wrong number of arguments for ");
    r3_close(p3);
    pu_env_stop(&e);
}

/* A LOCK waiter and a client SUBSCRIBEd to the lock's Redisson channel
 * share one upstream subscription and both hear the release; the
 * client's UNSUBSCRIBE keeps the waiters' subscription, and the waiters'
 * set going (its linger over) keeps the client's. */
TEST(passsub_lock_waiter_shares)
{
    static const char *const flags[] = {"--subscription-linger", "200", NULL};
    struct pu_env e = {0};
    redisContext *holder, *waiter, *rc;
    struct r3_conn *sub;
    char chan[64], want[160];
    redisReply *r;
    long long t0;

    pu_env_start(&e, "epoll", flags);
    holder = pu_client(&e);
    waiter = pu_client(&e);
    rc = pu_redis_client(&e);
    sub = r3_open(e.proxy.port);
    pu_channel("sw", chan, sizeof(chan));
    snprintf(want, sizeof(want), "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$1\r\n0\r\n", strlen(chan),
             chan);

    /* A Redisson-layout holder (its scripts straight to Redis): its
     * release's message reaches the LOCK waiter and the subscribed client
     * through the one upstream subscription. */
    r = pu_cmd(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, "sw", 30000, JAVA_UUID ":7");
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    pu_send(waiter, "LOCK %s WAIT %d", "sw", 10000);
    PU_EVENTUALLY(info_field(&e, "lock_waiters") == 1 && su_numsub(rc, chan) == 1, 3000);
    r3_send(sub, "SUBSCRIBE", chan, NULL);
    R3_EXPECT_PREFIX(sub, "*3\r\n$9\r\nsubscribe\r\n");
    ASSERT_EQ(su_numsub(rc, chan), 1);
    ASSERT_EQ(info_field(&e, "shared_subscriptions"), 1);
    t0 = pu_now_ms();
    r = pu_cmd(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, "sw", chan, JAVA_UUID ":7");
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
    ASSERT_LE(su_recv_ok_within(waiter, t0, 1000), 1000);
    R3_EXPECT(sub, want);

    /* The client leaves; a new waiter is still woken at once (the
     * proxy may hand over without a message: then only the waiter knows). */
    pu_send(holder, "LOCK %s WAIT %d", "sw", 10000);
    PU_EVENTUALLY(info_field(&e, "lock_waiters") == 1, 3000);
    r3_send(sub, "UNSUBSCRIBE", chan, NULL);
    R3_EXPECT_PREFIX(sub, "*3\r\n$11\r\nunsubscribe\r\n");
    ASSERT_EQ(su_numsub(rc, chan), 1);
    t0 = pu_now_ms();
    PU_INT(waiter, 1, "UNLOCK %s", "sw");
    ASSERT_LE(su_recv_ok_within(holder, t0, 1000), 1000);

    /* The waiters go (linger 200 ms); the client's subscription stays. */
    r3_send(sub, "SUBSCRIBE", chan, NULL);
    R3_EXPECT_PREFIX(sub, "*3\r\n$9\r\nsubscribe\r\n");
    PU_INT(holder, 1, "UNLOCK %s", "sw");
    R3_EXPECT(sub, want);
    pu_sleep_ms(600);
    ASSERT_EQ(su_numsub(rc, chan), 1);
    PU_INT(rc, 1, "PUBLISH %s %s", chan, "0");
    R3_EXPECT(sub, want);
    r3_close(sub);
    PU_EVENTUALLY(su_numsub(rc, chan) == 0, 3000);
    redisFree(rc);
    redisFree(waiter);
    redisFree(holder);
    pu_env_stop(&e);
}

/* ---- a Redisson-style client beside LOCK clients ---------------------------- */

/* The clients of one run. The Redisson-style ones run RLock's scripts
 * (su_rlock_*_lua: protocol notes 2.1, 2.3) with EVAL forwarded by the
 * proxy (pass-through), and wait as RedissonLock does (2.2): try;
 * SUBSCRIBE to redisson_lock__channel:{name} THROUGH THE PROXY; try again
 * once confirmed; then wait for a message (or the holder's TTL) and try
 * again; UNSUBSCRIBE once acquired. */
struct mix {
    int proxy_port;
    const char *name;
    int rounds;
    struct su_excl x;
    atomic_int failures;    /* commands that failed, waits that timed out */
    atomic_int max_wake_ms; /* longest wait for a message while the lock changed hands */
    atomic_int next_id;     /* thread ids */
};

#define MIX_MSG_TIMEOUT_MS 3000

static redisContext *mix_connect(int port)
{
    struct timeval tv = {MIX_MSG_TIMEOUT_MS / 1000, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

    if (!c || c->err)
        return NULL;
    redisSetTimeout(c, tv);
    return c;
}

/* RLock acquire: 1 acquired, 0 held by another, -1 on error. */
static int rl_try(redisContext *rc, const char *name, const char *owner)
{
    redisReply *r =
        redisCommand(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, name, 30000, owner);
    int v = !r ? -1 : r->type == REDIS_REPLY_NIL ? 1 : r->type == REDIS_REPLY_INTEGER ? 0 : -1;

    if (r)
        freeReplyObject(r);
    return v;
}

static bool rl_unlock(redisContext *rc, const char *name, const char *chan, const char *owner)
{
    redisReply *r =
        redisCommand(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, name, chan, owner);
    bool ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;

    if (r)
        freeReplyObject(r);
    return ok;
}

/* Reads sub until the reply whose first element is kind; false on error. */
static bool sub_until(redisContext *sub, const char *kind)
{
    redisReply *r;

    for (;;) {
        bool hit;

        if (redisGetReply(sub, (void **)&r) != REDIS_OK || !r)
            return false;
        hit = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
              r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, kind) == 0;
        freeReplyObject(r);
        if (hit)
            return true;
    }
}

/* Acquires as RedissonLock.lock() does; false on a failure. */
static bool rl_lock(struct mix *m, redisContext *rc, redisContext *sub, const char *chan,
                    const char *owner)
{
    bool subscribed = false;
    int got;

    while ((got = rl_try(rc, m->name, owner)) == 0) {
        long long t0;

        if (!subscribed) {
            redisAppendCommand(sub, "SUBSCRIBE %s", chan);
            if (!sub_until(sub, "subscribe"))
                return false;
            subscribed = true;
            continue; /* try again once the subscription is confirmed */
        }
        t0 = pu_now_ms();
        if (!sub_until(sub, "message"))
            return false; /* no wake-up within MIX_MSG_TIMEOUT_MS */
        su_atomic_max(&m->max_wake_ms, (int)(pu_now_ms() - t0));
    }
    if (subscribed) {
        redisAppendCommand(sub, "UNSUBSCRIBE %s", chan);
        if (!sub_until(sub, "unsubscribe"))
            return false;
    }
    return got == 1;
}

static void *mix_redisson(void *arg)
{
    struct mix *m = arg;
    redisContext *rc = mix_connect(m->proxy_port), *sub = mix_connect(m->proxy_port);
    char owner[80], chan[64];
    int i;

    snprintf(owner, sizeof(owner), "%s:%d", JAVA_UUID, atomic_fetch_add(&m->next_id, 1) + 1);
    pu_channel(m->name, chan, sizeof(chan));
    for (i = 0; rc && sub && i < m->rounds; i++) {
        if (!rl_lock(m, rc, sub, chan, owner))
            break;
        su_excl_enter(&m->x);
        su_excl_leave(&m->x, 300);
        if (!rl_unlock(rc, m->name, chan, owner))
            break;
    }
    if (i < m->rounds)
        atomic_fetch_add(&m->failures, 1);
    if (rc)
        redisFree(rc);
    if (sub)
        redisFree(sub);
    return NULL;
}

static void *mix_lockproxy(void *arg)
{
    struct mix *m = arg;
    redisContext *c = mix_connect(m->proxy_port);
    int i;

    for (i = 0; c && i < m->rounds; i++) {
        if (!su_cmd_ok(c, SU_OK, "LOCK %s WAIT %d", m->name, 10000))
            break;
        su_excl_enter(&m->x);
        su_excl_leave(&m->x, 300);
        if (!su_cmd_ok(c, 1, "UNLOCK %s", m->name))
            break;
    }
    if (i < m->rounds)
        atomic_fetch_add(&m->failures, 1);
    if (c)
        redisFree(c);
    return NULL;
}

/* Redisson-style clients and LOCK clients on one name: never two inside,
 * no lost update, every Redisson wait woken by a message within 1 s. */
TEST(passsub_redisson_mixed)
{
    enum { NRED = 3, NLOCK = 3 };
    struct pu_env e = {0};
    pthread_t t[NRED + NLOCK];
    static struct mix m;
    int i;

    pu_env_start(&e, "epoll", NULL);
    memset(&m, 0, sizeof(m));
    m.proxy_port = e.proxy.port;
    m.name = "mixed";
    m.rounds = 40;
    for (i = 0; i < NRED + NLOCK; i++)
        ASSERT_OK(pthread_create(&t[i], NULL, i < NRED ? mix_redisson : mix_lockproxy, &m));
    for (i = 0; i < NRED + NLOCK; i++)
        pthread_join(t[i], NULL);
    fprintf(stderr, "mixed: %d rounds, longest Redisson wake-up wait %d ms, failures %d\n",
            (NRED + NLOCK) * m.rounds, atomic_load(&m.max_wake_ms), atomic_load(&m.failures));
    ASSERT_EQ(atomic_load(&m.failures), 0);
    ASSERT_EQ(atomic_load(&m.x.violations), 0);
    ASSERT_EQ(m.x.counter, (long)(NRED + NLOCK) * m.rounds);
    ASSERT_LE(atomic_load(&m.max_wake_ms), 1000);
    pu_env_stop(&e);
}

/* A subscriber that does not read is closed once its unsent messages pass
 * --client-output-hard-limit, as Redis's pubsub output limit does; the
 * proxy's memory comes back. */
TEST(passsub_slow_subscriber)
{
    static const char *const flags[] = {"--client-output-hard-limit", "262144", NULL};
    static const char subcmd[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nslow\r\n";
    struct pu_env e = {0};
    redisContext *rc;
    char payload[16384];
    int fd, i, rcvbuf = 4096;

    pu_env_start(&e, "epoll", flags);
    rc = pu_redis_client(&e);
    fd = pu_raw_connect(e.proxy.port);
    ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)));
    ASSERT_EQ(write(fd, subcmd, sizeof(subcmd) - 1), (ssize_t)(sizeof(subcmd) - 1));
    PU_EVENTUALLY(su_numsub(rc, "slow") == 1, 3000);
    memset(payload, 'p', sizeof(payload) - 1);
    payload[sizeof(payload) - 1] = '\0';
    for (i = 0; i < 400 && info_field(&e, "passthrough_subscribers_dropped") == 0; i++) {
        redisReply *r = redisCommand(rc, "PUBLISH slow %s", payload);

        /* 1 while subscribed; 0 once the proxy dropped it (between the
         * INFO above and this PUBLISH) */
        ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && (r->integer == 1 || r->integer == 0));
        freeReplyObject(r);
    }
    ASSERT_EQ(info_field(&e, "passthrough_subscribers_dropped"), 1);
    ASSERT_EQ(info_field(&e, "passthrough_subscribers"), 0);
    ASSERT_TRUE(i < 400); /* about 6 MB published, 256 KB allowed */
    PU_EVENTUALLY(su_numsub(rc, "slow") == 0, 3000);
    ASSERT_LE(info_field(&e, "client_memory"), 65536);
    /* Closed on the proxy's side (the kernel may still hold bytes for
     * the tiny receive window: not read here). */
    ASSERT_EQ(info_field(&e, "connected_clients"), 1);
    close(fd);
    redisFree(rc);
    pu_env_stop(&e);
}

/* Too many subscriptions, or a user's patterns that do not cover a
 * channel: refused, nothing subscribed. */
TEST(passsub_bounds)
{
    static const char *const flags[] = {"--max-args", "20000", "--max-request-bytes", "1048576",
                                        NULL};
    struct pu_env e = {0};
    redisContext *c;
    const char **argv;
    size_t *lens;
    redisReply *r;
    char(*names)[16];
    int i, n = PX_SUBS_MAX_TEST + 2;

    pu_env_start(&e, "epoll", flags);
    c = pu_client(&e);
    argv = calloc((size_t)n, sizeof(*argv));
    lens = calloc((size_t)n, sizeof(*lens));
    names = calloc((size_t)n, sizeof(*names));
    ASSERT_TRUE(argv && lens && names);
    argv[0] = "SUBSCRIBE";
    lens[0] = 9;
    for (i = 1; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "ch%d", i);
        argv[i] = names[i];
        lens[i] = strlen(names[i]);
    }
    r = redisCommandArgv(c, n, argv, lens);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
    if (!strstr(r->str, "at most 10000 subscriptions"))
        TEST_FAIL("got %s", r->str);
    freeReplyObject(r);
    ASSERT_EQ(info_field(&e, "passthrough_subscribers"), 0);
    PU_OK(c, "LOCK %s", "still-works"); /* not in subscribed mode */
    free(names);
    free(lens);
    free(argv);
    redisFree(c);
    pu_env_stop(&e);
}

/* Reads exactly the n bytes want from fd (blocking); fails otherwise. */
static void read_exact(int fd, const char *want, size_t n)
{
    char buf[256];
    size_t got = 0;

    ASSERT_TRUE(n <= sizeof(buf));
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);

        if (k <= 0)
            TEST_FAIL("subscriber closed or failed after %zu of %zu bytes", got, n);
        got += (size_t)k;
    }
    ASSERT_TRUE(memcmp(buf, want, n) == 0);
}

/* A thousand clients waiting on one lock's channel: one upstream
 * subscription; one PUBLISH reaches every one of them. */
TEST(passsub_thousand_subscribers)
{
    enum { N = 1000 };
    static const char subcmd[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$27\r\nredisson_lock__channel:{k1}\r\n";
    static const char conf[] =
        "*3\r\n$9\r\nsubscribe\r\n$27\r\nredisson_lock__channel:{k1}\r\n:1\r\n";
    static const char msg[] =
        "*3\r\n$7\r\nmessage\r\n$27\r\nredisson_lock__channel:{k1}\r\n$1\r\n0\r\n";
    static int fds[N];
    struct pu_env e = {0};
    redisContext *rc;
    long long t0;
    int i;

    pu_raise_nofile(N + 256);
    pu_env_start(&e, "epoll", NULL);
    rc = pu_redis_client(&e);
    for (i = 0; i < N; i++) {
        fds[i] = pu_raw_connect(e.proxy.port);
        ASSERT_EQ(write(fds[i], subcmd, sizeof(subcmd) - 1), (ssize_t)(sizeof(subcmd) - 1));
    }
    for (i = 0; i < N; i++)
        read_exact(fds[i], conf, sizeof(conf) - 1);
    ASSERT_EQ(su_numsub(rc, "redisson_lock__channel:{k1}"), 1);
    ASSERT_EQ(info_field(&e, "passthrough_subscribers"), N);
    t0 = pu_now_ms();
    PU_INT(rc, 1, "PUBLISH %s %s", "redisson_lock__channel:{k1}", "0");
    for (i = 0; i < N; i++)
        read_exact(fds[i], msg, sizeof(msg) - 1);
    fprintf(stderr, "one message to %d subscribers in %lld ms\n", N, pu_now_ms() - t0);
    for (i = 0; i < N; i++)
        close(fds[i]);
    PU_EVENTUALLY(su_numsub(rc, "redisson_lock__channel:{k1}") == 0, 5000);
    redisFree(rc);
    pu_env_stop(&e);
}

/* --timeout closes quiet clients, but not subscribers (as Redis): a
 * subscriber quiet for twice the timeout still gets its messages. */
TEST(passsub_timeout_spares_subscribers)
{
    static const char *const flags[] = {"--timeout", "1", NULL};
    struct pu_env e = {0};
    struct r3_conn *sub;
    redisContext *rc;

    pu_env_start(&e, "epoll", flags);
    rc = pu_redis_client(&e);
    sub = r3_open(e.proxy.port);
    r3_send(sub, "SUBSCRIBE", "quiet", NULL);
    R3_EXPECT(sub, "*3\r\n$9\r\nsubscribe\r\n$5\r\nquiet\r\n:1\r\n");
    pu_sleep_ms(2500);
    PU_INT(rc, 1, "PUBLISH %s %s", "quiet", "still");
    R3_EXPECT(sub, "*3\r\n$7\r\nmessage\r\n$5\r\nquiet\r\n$5\r\nstill\r\n");
    r3_send(sub, "UNSUBSCRIBE", NULL);
    R3_EXPECT(sub, "*3\r\n$11\r\nunsubscribe\r\n$5\r\nquiet\r\n:0\r\n");
    r3_close(sub);
    redisFree(rc);
    pu_env_stop(&e);
}

/* Users' ~patterns cover channels: NOPERM outside them, nothing subscribed. */
TEST(passsub_acl)
{
    char conf[PU_PATH_MAX];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    struct r3_conn *c;

    ou_path(conf, sizeof(conf), "users.conf");
    ou_write_file(conf, "user app on >pw ~app:*\n");
    ou_env_start(&e, "epoll", extra);
    c = r3_open(e.proxy.port);
    r3_send(c, "AUTH", "app", "pw", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "SUBSCRIBE", "app:news", "other", NULL);
    R3_EXPECT(c, "-NOPERM User app has no permissions to access the 'other' channel\r\n");
    r3_send(c, "PUBLISH", "other", "x", NULL);
    R3_EXPECT(c, "-NOPERM User app has no permissions to access the 'other' channel\r\n");
    r3_send(c, "PSUBSCRIBE", "*", NULL);
    R3_EXPECT(c, "-NOPERM User app has no permissions to access the '*' channel\r\n");
    r3_send(c, "SUBSCRIBE", "app:news", NULL);
    R3_EXPECT(c, "*3\r\n$9\r\nsubscribe\r\n$8\r\napp:news\r\n:1\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

/* ---- cluster, --cluster-pubsub auto ------------------------------------------ */

static bool info_is(redisContext *c, const char *field, const char *want)
{
    char v[64];

    return pu_info_str(c, field, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* On Redis 7, auto picks sharded pub/sub; a Redisson-layout client that
 * releases with classic PUBLISH must still wake a LOCK waiter at once, not
 * at its lease's end. */
TEST(passsub_cluster_auto_classic_publisher)
{
    struct rcluster cl;
    struct pu_proxy p;
    redisContext *c, *waiter, *node;
    char a[32], b[32], chan[64], want[160];
    struct r3_conn *sub;
    const char *name = "cw";
    redisReply *r;
    long long t0, ms;
    int m;

    if (!rcluster_available())
        TEST_SKIP("redis-server or redis-cli not installed");
    rcluster_start(&cl);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&cl, 0, a, sizeof(a)), rcluster_addr(&cl, 5, b, sizeof(b)));
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    PU_EVENTUALLY(info_is(c, "cluster_slots_served", "16384") &&
                      info_is(c, "cluster_pubsub_mode", "sharded"),
                  15000);
    pu_channel(name, chan, sizeof(chan));
    m = rcluster_owner(&cl, (int)rcluster_int(&cl, 0, "CLUSTER KEYSLOT %s", name));
    ASSERT_TRUE(m >= 0);
    r = rcluster_cmd(&cl, m, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, name, 30000,
                     JAVA_UUID ":1");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
    waiter = pu_connect(p.port);
    pu_send(waiter, "LOCK %s WAIT %d", name, 20000);
    node = rcluster_connect(&cl, m);
    PU_EVENTUALLY(su_numsub(node, chan) == 1, 5000); /* the classic twin, on the slot's owner */
    /* A pass-through client, cluster-unaware, subscribes both ways: it
     * joins the waiter's two subscriptions (one each upstream). */
    sub = r3_open(p.port);
    r3_send(sub, "SUBSCRIBE", chan, NULL);
    R3_EXPECT_PREFIX(sub, "*3\r\n$9\r\nsubscribe\r\n");
    r3_send(sub, "SSUBSCRIBE", chan, NULL);
    R3_EXPECT_PREFIX(sub, "*3\r\n$10\r\nssubscribe\r\n");
    ASSERT_EQ(su_numsub(node, chan), 1);
    r = rcluster_cmd(&cl, m, "PUBSUB SHARDNUMSUB %s", chan);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                r->element[1]->integer == 1);
    freeReplyObject(r);
    pu_sleep_ms(100); /* the sharded subscription and the waiter's retry */
    t0 = pu_now_ms();
    r = rcluster_cmd(&cl, m, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, name, chan,
                     JAVA_UUID ":1");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    ms = su_recv_ok_within(waiter, t0, 1000);
    fprintf(stderr, "LOCK waiter woken %lld ms after a classic PUBLISH (auto = sharded)\n", ms);
    snprintf(want, sizeof(want), "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$1\r\n0\r\n", strlen(chan),
             chan);
    R3_EXPECT(sub, want);
    r3_close(sub);
    PU_INT(waiter, 1, "UNLOCK %s", name);
    redisFree(node);
    redisFree(waiter);
    redisFree(c);
    pu_proxy_stop(&p);
    rcluster_cleanup(&cl);
}

/* ---- a cluster that changes under a mixed fleet ------------------------------ */

/* One client of the churn run: it retries on errors (a cluster moving
 * under it answers some commands with an error, as a real client sees)
 * and counts its critical sections. */
struct churn {
    int proxy_port;
    const char *name;
    long long stop_at; /* pu_now_ms() deadline */
    struct su_excl x;
    atomic_int errors;      /* failed commands, retried */
    atomic_int wake_misses; /* waits no message ended within CHURN_WAIT_MS */
    atomic_int max_wake_ms; /* longest wait for a message that came */
    atomic_int lost;        /* UNLOCKs answered LOCKLOST */
    atomic_int next_id;
    atomic_int rounds[8]; /* critical sections per client */
};

#define CHURN_WAIT_MS  3000  /* Redisson waits the holder's TTL (30 s here) */
#define CHURN_THINK_MS 20    /* between a release and the next acquire */
#define CHURN_LEASE_MS 30000 /* rl_try's lease */

static bool churn_over(const struct churn *ch)
{
    return pu_now_ms() >= ch->stop_at;
}

/* c, reconnected when it broke (a timeout or a closed socket). */
static redisContext *churn_fix(struct churn *ch, redisContext *c)
{
    if (c && !c->err)
        return c;
    if (c)
        redisFree(c);
    pu_sleep_ms(20);
    return mix_connect(ch->proxy_port);
}

/* RedissonLock.lock(): try, subscribe, wait for the unlock message (or the
 * wait's end), try again; errors retried. false when the run is over. */
static bool churn_rl_lock(struct churn *ch, redisContext **rc, redisContext **sub, const char *chan,
                          const char *owner)
{
    bool subscribed = false;

    while (!churn_over(ch)) {
        int got = (*rc = churn_fix(ch, *rc)) ? rl_try(*rc, ch->name, owner) : -1;
        long long t0;

        if (got == 1)
            break;
        if (got < 0) {
            atomic_fetch_add(&ch->errors, 1);
            pu_sleep_ms(20);
            continue;
        }
        if (!subscribed) {
            *sub = churn_fix(ch, *sub);
            if (!*sub)
                continue;
            redisAppendCommand(*sub, "SUBSCRIBE %s", chan);
            subscribed = sub_until(*sub, "subscribe");
            if (!subscribed)
                atomic_fetch_add(&ch->errors, 1);
            continue;
        }
        t0 = pu_now_ms();
        if (sub_until(*sub, "message")) {
            su_atomic_max(&ch->max_wake_ms, (int)(pu_now_ms() - t0));
        } else {
            atomic_fetch_add(&ch->wake_misses, 1); /* the context is dead: resubscribe */
            subscribed = false;
        }
    }
    if (churn_over(ch)) {
        return false; /* may hold it: the lease (30 s) outlives the test */
    }
    if (subscribed) {
        redisAppendCommand(*sub, "UNSUBSCRIBE %s", chan);
        if (!sub_until(*sub, "unsubscribe"))
            redisFree(*sub), *sub = NULL;
    }
    return true;
}

static void *churn_redisson(void *arg)
{
    struct churn *ch = arg;
    int id = atomic_fetch_add(&ch->next_id, 1);
    redisContext *rc = NULL, *sub = NULL;
    char owner[80], chan[64];

    snprintf(owner, sizeof(owner), "%s:%d", JAVA_UUID, id + 1);
    pu_channel(ch->name, chan, sizeof(chan));
    while (churn_rl_lock(ch, &rc, &sub, chan, owner)) {
        su_excl_enter(&ch->x);
        su_excl_leave(&ch->x, 300);
        atomic_fetch_add(&ch->rounds[id], 1);
        /* Released or not, the section is over; retry errors until the
         * script answers (1, or nil if an answered-late retry found it
         * already released). */
        for (;;) {
            redisReply *r;

            rc = churn_fix(ch, rc);
            r = rc ? redisCommand(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, ch->name,
                                  chan, owner)
                   : NULL;
            if (r && r->type != REDIS_REPLY_ERROR) {
                freeReplyObject(r);
                break;
            }
            if (r)
                freeReplyObject(r);
            atomic_fetch_add(&ch->errors, 1);
            pu_sleep_ms(20);
        }
        pu_sleep_ms(CHURN_THINK_MS);
    }
    if (rc)
        redisFree(rc);
    if (sub)
        redisFree(sub);
    return NULL;
}

static void *churn_lockproxy(void *arg)
{
    struct churn *ch = arg;
    int id = atomic_fetch_add(&ch->next_id, 1);
    redisContext *c = NULL;

    while (!churn_over(ch)) {
        c = churn_fix(ch, c);
        if (!c || !su_cmd_ok(c, SU_OK, "LOCK %s WAIT %d", ch->name, CHURN_WAIT_MS)) {
            atomic_fetch_add(&ch->errors, 1);
            pu_sleep_ms(20);
            continue;
        }
        su_excl_enter(&ch->x);
        su_excl_leave(&ch->x, 300);
        atomic_fetch_add(&ch->rounds[id], 1);
        /* Retry errors until UNLOCK answers 1, or LOCKLOST: the proxy
         * says the hold is gone, nothing left to release. */
        for (;;) {
            redisReply *r;
            bool done;

            c = churn_fix(ch, c);
            r = c ? redisCommand(c, "UNLOCK %s", ch->name) : NULL;
            done = r && (r->type == REDIS_REPLY_INTEGER ||
                         (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOCKLOST", 8) == 0));
            if (r && r->type == REDIS_REPLY_ERROR && done)
                atomic_fetch_add(&ch->lost, 1);
            if (r)
                freeReplyObject(r);
            if (done)
                break;
            atomic_fetch_add(&ch->errors, 1);
            pu_sleep_ms(20);
        }
        pu_sleep_ms(CHURN_THINK_MS);
    }
    if (c)
        redisFree(c);
    return NULL;
}

/* Sum of the clients' rounds into each[]; returns the total. */
static long churn_rounds(struct churn *ch, int n, int each[])
{
    long sum = 0;
    int i;

    for (i = 0; i < n; i++)
        sum += each[i] = atomic_load(&ch->rounds[i]);
    return sum;
}

/* Cluster-unaware Redisson-style clients (EVAL and SUBSCRIBE through the
 * proxy only) and LOCK clients on one name of a 3-master cluster, while
 * the name's slot migrates to another master and that master is then
 * failed over to its replica: never two holders, no lost update, every
 * client acquiring, wake-ups far under the 30 s lease; strict: also no
 * hold reported lost and every client acquiring after both. */
static void churn_run(bool strict)
{
    enum { NRED = 3, NLOCK = 3, N = NRED + NLOCK };
    struct rcluster cl;
    struct pu_proxy p;
    static struct churn ch;
    pthread_t t[N];
    int before[N], after[N], i, slot, from, to, r;
    char a[32], b[32];
    redisContext *c;

    if (!rcluster_available())
        TEST_SKIP("redis-server or redis-cli not installed");
    rcluster_start(&cl);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&cl, 0, a, sizeof(a)), rcluster_addr(&cl, 5, b, sizeof(b)));
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    PU_EVENTUALLY(info_is(c, "cluster_slots_served", "16384"), 15000);
    memset(&ch, 0, sizeof(ch));
    ch.proxy_port = p.port;
    ch.name = "churn";
    ch.stop_at = pu_now_ms() + 60000; /* set for real below */
    slot = (int)rcluster_int(&cl, 0, "CLUSTER KEYSLOT %s", ch.name);
    from = rcluster_owner(&cl, slot);
    to = rcluster_other_master(&cl, from);
    ASSERT_TRUE(from >= 0 && to >= 0);
    for (i = 0; i < N; i++)
        ASSERT_OK(pthread_create(&t[i], NULL, i < NRED ? churn_redisson : churn_lockproxy, &ch));
    pu_sleep_ms(1500);
    rcluster_migrate(&cl, slot, to);
    pu_sleep_ms(1500);
    r = rcluster_replica_of(&cl, to);
    ASSERT_TRUE(r >= 0);
    rcluster_failover(&cl, r);
    churn_rounds(&ch, N, before);
    ch.stop_at = pu_now_ms() + 4000;
    for (i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    fprintf(stderr,
            "churn: %ld sections, %d errors retried, %d waits with no message, "
            "longest wake-up %d ms, %d violations, %d LOCKLOST, %lld+%lld leases lost, "
            "%lld ghost holds removed\n",
            churn_rounds(&ch, N, after), atomic_load(&ch.errors), atomic_load(&ch.wake_misses),
            atomic_load(&ch.max_wake_ms), atomic_load(&ch.x.violations), atomic_load(&ch.lost),
            pu_info_int(c, "topology_leases_lost"), pu_info_int(c, "leases_lost"),
            pu_info_int(c, "ghost_holds_removed"));
    for (i = 0; i < N; i++) {
        fprintf(stderr, "  client %d (%s): %d sections, %d after the failover\n", i,
                i < NRED ? "Redisson" : "LOCK", after[i], after[i] - before[i]);
    }
    for (i = 0; i < N; i++)
        ASSERT_TRUE(after[i] > 0);
    if (strict) {
        /* Known to fail about 1 run in 5 (issue 21 report): a LOCK
         * client's hold found lost after the graceful migration/failover
         * (LOCKLOST), and some clients with no section after it. */
        ASSERT_EQ(pu_info_int(c, "topology_leases_lost"), 0);
        for (i = 0; i < N; i++)
            ASSERT_TRUE(after[i] > before[i]);
    }
    ASSERT_EQ(atomic_load(&ch.x.violations), 0);
    ASSERT_EQ(ch.x.counter, churn_rounds(&ch, N, after));
    /* A message can be lost while the channel's subscription moves with
     * its slot (measured: woken after ~3 s, i.e. by a later release, where
     * the same run without the migration and failover wakes in < 30 ms);
     * still far under the 30 s lease a real Redisson would wait. Waits
     * no message ends at all happen without the churn too: LOCK clients
     * hand the lock to each other without a release, so nothing is
     * published; this client gives up waiting after CHURN_WAIT_MS and
     * tries again, as Redisson does after the holder's TTL. */
    ASSERT_LE(atomic_load(&ch.max_wake_ms), CHURN_LEASE_MS / 6);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    rcluster_cleanup(&cl);
}

TEST(passsub_cluster_churn)
{
    churn_run(false);
}

/* The same, also requiring what a graceful migration and failover should
 * keep: no hold reported lost, every client acquiring after both. */
TEST(long_passsub_cluster_churn_strict)
{
    churn_run(true);
}

TEST_MAIN(TEST_CASE(passsub_framing_resp2), TEST_CASE(passsub_framing_resp3),
          TEST_CASE(passsub_unsubscribe), TEST_CASE(passsub_subscribed_mode),
          TEST_CASE(passsub_lock_waiter_shares), TEST_CASE(passsub_redisson_mixed),
          TEST_CASE(passsub_slow_subscriber), TEST_CASE(passsub_bounds),
          TEST_CASE(passsub_thousand_subscribers), TEST_CASE(passsub_timeout_spares_subscribers),
          TEST_CASE(passsub_acl), TEST_CASE(passsub_cluster_auto_classic_publisher),
          TEST_CASE(passsub_cluster_churn), TEST_CASE(long_passsub_cluster_churn_strict))
