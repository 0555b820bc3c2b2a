/* Pass-through pub/sub (proxy/subs.h): clients' SUBSCRIBE, PSUBSCRIBE and
 * SSUBSCRIBE ride one upstream subscription per channel, shared with the
 * proxy's own LOCK waiters; replies and messages framed byte for byte as
 * a direct connection to redis-server frames them (RESP2 and RESP3);
 * subscribed mode; the bounds; a Redisson-style client beside LOCK
 * clients; and, on a 3-master cluster with --cluster-pubsub auto, a LOCK
 * waiter woken by a classic PUBLISH of Redisson's unlock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_util.h"
#include "harness.h"
#include "proxy_util.h"
#include "resp3_util.h"
#include "sync_util.h"

#define JAVA_UUID "8f0e7c2a-1111-4222-8333-944455556666"

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
#define BOTH(p, d, ...)                                                                            \
    do {                                                                                           \
        r3_send((p), __VA_ARGS__, NULL);                                                           \
        r3_send((d), __VA_ARGS__, NULL);                                                           \
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
    SAME_NEXT(p1, d); /* message */
    SAME_NEXT(p1, d); /* pmessage n* */
    R3_EXPECT(p2, proto == 3 ? ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$11\r\nhello world\r\n"
                             : "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$11\r\nhello world\r\n");
    PU_INT(pub, 2, "SPUBLISH %s %s", "shard1", "s-msg");
    SAME_NEXT(p1, d); /* smessage */
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

TEST_MAIN(TEST_CASE(passsub_framing_resp2), TEST_CASE(passsub_framing_resp3),
          TEST_CASE(passsub_unsubscribe), TEST_CASE(passsub_subscribed_mode))
