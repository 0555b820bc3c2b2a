/* Count-down latch commands of lockproxy against a real redis-server,
 * over Redisson's RCountDownLatch layout: a STRING count at the raw name,
 * "1" published on redisson_countdownlatch__channel__{name} when a count
 * is set and "0" when it reaches zero (the key is then deleted). Checks the
 * replies, keys and messages, that the latch opens exactly once and only
 * at zero under many concurrent clients, prompt wake-ups, one upstream
 * subscription for many waiters, clean timeouts and disconnects, interop
 * with a client writing the layout directly, and bad input. Both io
 * backends. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define NUM_WAITERS      60
#define NUM_COUNTERS     50
#define LATCH_CHANNEL(n) "redisson_countdownlatch__channel__{" n "}"

static void scenario_latch_basic(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_countdownlatch__channel__*");

    PU_INT(c, 0, "LATCH.COUNT %s", "l1");
    PU_OK(c, "LATCH.AWAIT %s", "l1"); /* never set: open */
    PU_INT(c, 1, "LATCH.TRYSETCOUNT %s %d", "l1", 3);
    su_expect_msg(sub, LATCH_CHANNEL("l1"), "1");
    PU_STR(rc, "string", "TYPE %s", "l1");
    PU_STR(rc, "3", "GET %s", "l1");
    ASSERT_EQ(pu_pttl(rc, "l1"), -1);
    PU_INT(c, 0, "LATCH.TRYSETCOUNT %s %d", "l1", 9);
    PU_INT(c, 3, "LATCH.COUNT %s", "l1");
    PU_NIL(c, "LATCH.AWAIT %s WAIT 0", "l1");

    PU_INT(c, 2, "LATCH.COUNTDOWN %s", "l1");
    PU_INT(c, 1, "LATCH.COUNTDOWN %s", "l1");
    su_expect_no_msg(sub, 100);
    PU_STR(rc, "1", "GET %s", "l1");
    PU_INT(c, 0, "LATCH.COUNTDOWN %s", "l1");
    su_expect_msg(sub, LATCH_CHANNEL("l1"), "0");
    ASSERT_TRUE(!pu_exists(rc, "l1"));
    PU_INT(c, 0, "LATCH.COUNTDOWN %s", "l1"); /* already open: nothing written */
    ASSERT_TRUE(!pu_exists(rc, "l1"));
    su_expect_no_msg(sub, 100);
    PU_OK(c, "LATCH.AWAIT %s WAIT 0", "l1");

    /* The channel always gets braces, even around a hash tag. */
    PU_INT(c, 1, "LATCH.TRYSETCOUNT %s %d", "a{t}b", 1);
    su_expect_msg(sub, LATCH_CHANNEL("a{t}b"), "1");
    PU_INT(c, 0, "LATCH.COUNTDOWN %s", "a{t}b");
    su_expect_msg(sub, LATCH_CHANNEL("a{t}b"), "0");
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

struct cd_state {
    int port;                          /* proxy port */
    atomic_int errors;                 /* failed commands */
    atomic_int seen[NUM_COUNTERS + 1]; /* how often each reply value came */
};

/* One client, one LATCH.COUNTDOWN. */
static void *cd_thread(void *arg)
{
    struct cd_state *s = arg;
    redisContext *c = pu_try_connect(s->port);
    redisReply *r = c ? redisCommand(c, "LATCH.COUNTDOWN %s", "cd") : NULL;

    if (r && r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= NUM_COUNTERS)
        atomic_fetch_add(&s->seen[r->integer], 1);
    else
        atomic_fetch_add(&s->errors, 1);
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return NULL;
}

static void run_countdowns(struct cd_state *s, int n)
{
    pthread_t tids[NUM_COUNTERS];

    for (int i = 0; i < n; i++)
        ASSERT_EQ(pthread_create(&tids[i], NULL, cd_thread, s), 0);
    for (int i = 0; i < n; i++)
        pthread_join(tids[i], NULL);
}

/* 60 waiters, 50 concurrent countdowns: nobody passes before the last one;
 * then everyone does, promptly; "0" is published exactly once and each
 * remaining count is reported exactly once. One upstream subscription. */
static void scenario_latch_counting(struct pu_env *e)
{
    static struct cd_state s;
    redisContext *w[NUM_WAITERS], *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_countdownlatch__channel__*");
    long long t0;

    memset(&s, 0, sizeof(s));
    s.port = e->proxy.port;
    PU_INT(c, 1, "LATCH.TRYSETCOUNT %s %d", "cd", NUM_COUNTERS);
    su_expect_msg(sub, LATCH_CHANNEL("cd"), "1");
    for (int i = 0; i < NUM_WAITERS; i++) {
        w[i] = pu_client(e);
        pu_send(w[i], i % 2 ? "LATCH.AWAIT %s" : "LATCH.AWAIT %s WAIT 20000", "cd");
    }
    PU_EVENTUALLY(pu_info_int(c, "latch_waiters") == NUM_WAITERS, 5000);
    PU_EVENTUALLY(su_numsub(rc, LATCH_CHANNEL("cd")) == 1, 3000);

    run_countdowns(&s, NUM_COUNTERS - 1);
    ASSERT_EQ(atomic_load(&s.errors), 0);
    PU_STR(rc, "1", "GET %s", "cd");
    for (int i = 0; i < NUM_WAITERS; i++)
        ASSERT_NULL(pu_try_recv(w[i], i == 0 ? 300 : 0));
    su_expect_no_msg(sub, 10);

    t0 = pu_now_ms();
    run_countdowns(&s, 1);
    for (int i = 0; i < NUM_WAITERS; i++)
        su_expect_ok_within(w[i], 3000);
    if (pu_now_ms() - t0 >= 1000)
        TEST_FAIL("waiters passed %lld ms after the last countdown", pu_now_ms() - t0);
    ASSERT_EQ(atomic_load(&s.errors), 0);
    for (int v = 0; v < NUM_COUNTERS; v++)
        ASSERT_EQ(atomic_load(&s.seen[v]), 1);
    su_expect_msg(sub, LATCH_CHANNEL("cd"), "0");
    su_expect_no_msg(sub, 200);
    ASSERT_TRUE(!pu_exists(rc, "cd"));
    ASSERT_EQ(pu_info_int(c, "latch_waiters"), 0);
    for (int i = 0; i < NUM_WAITERS; i++)
        redisFree(w[i]);
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

/* A waiter whose WAIT runs out, or whose connection closes, leaves
 * nothing behind; a new waiter is then woken as usual. */
static void scenario_latch_timeout(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long t0, elapsed;

    PU_INT(c, 1, "LATCH.TRYSETCOUNT %s %d", "lt", 1);
    t0 = pu_now_ms();
    PU_NIL(c2, "LATCH.AWAIT %s WAIT %d", "lt", 300);
    elapsed = pu_now_ms() - t0;
    ASSERT_TRUE(elapsed >= 250 && elapsed < 3000);
    ASSERT_EQ(pu_info_int(c, "latch_waiters"), 0);
    ASSERT_TRUE(pu_info_int(c, "latch_wait_timeouts") >= 1);
    PU_STR(rc, "1", "GET %s", "lt");
    ASSERT_EQ(pu_dbsize(rc), 1);

    pu_send(c2, "LATCH.AWAIT %s", "lt");
    PU_EVENTUALLY(pu_info_int(c, "latch_waiters") == 1, 3000);
    redisFree(c2);
    PU_EVENTUALLY(pu_info_int(c, "latch_waiters") == 0, 3000);

    c2 = pu_client(e);
    pu_send(c2, "LATCH.AWAIT %s WAIT %d", "lt", 8000);
    ASSERT_NULL(pu_try_recv(c2, 200));
    t0 = pu_now_ms();
    PU_INT(c, 0, "LATCH.COUNTDOWN %s", "lt");
    su_expect_ok_within(c2, 3000);
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

/* A Redisson client sets and counts down the latch directly; its publish
 * of "0" wakes the proxy's waiters, and deleting the latch (publish "1")
 * releases them too (a missing latch reads as open). */
static void scenario_latch_interop(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long t0;

    PU_OK(rc, "SET %s %d", "li", 2);
    PU_INT(c, 2, "LATCH.COUNT %s", "li");
    pu_send(c, "LATCH.AWAIT %s", "li");
    PU_EVENTUALLY(su_numsub(rc, LATCH_CHANNEL("li")) == 1, 3000);
    PU_INT(rc, 1, "DECR %s", "li");
    ASSERT_NULL(pu_try_recv(c, 300));
    t0 = pu_now_ms();
    PU_INT(rc, 0, "DECR %s", "li");
    PU_INT(rc, 1, "DEL %s", "li");
    PU_INT(rc, 1, "PUBLISH %s 0", LATCH_CHANNEL("li"));
    su_expect_ok_within(c, 3000);
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);

    PU_OK(rc, "SET %s %d", "li", 5);
    pu_send(c2, "LATCH.AWAIT %s", "li");
    ASSERT_NULL(pu_try_recv(c2, 300));
    PU_INT(rc, 1, "DEL %s", "li");
    PU_INT(rc, 1, "PUBLISH %s 1", LATCH_CHANNEL("li"));
    su_expect_ok_within(c2, 3000);
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

static void scenario_latch_bad_input(struct pu_env *e)
{
    static const char *const cmds[] = {"LATCH.TRYSETCOUNT %s 1", "LATCH.COUNTDOWN %s",
                                       "LATCH.COUNT %s", "LATCH.AWAIT %s"};
    static const char *const names[] = {"lockhash", "text", "aset"};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);

    PU_INT(rc, 1, "HSET %s %s 1", "lockhash", "7f1c2d3e-0000-4000-8000-000000000001:1");
    PU_OK(rc, "SET %s %s", "text", "ten");
    PU_INT(rc, 1, "SADD %s %s", "aset", "x");
    for (size_t n = 0; n < 3; n++) {
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
            PU_ERR(c, "WRONGTYPE", cmds[i], names[n]);
    }
    ASSERT_EQ(pu_hget_int(rc, "lockhash", "7f1c2d3e-0000-4000-8000-000000000001:1"), 1);
    PU_STR(rc, "ten", "GET %s", "text");

    PU_ERR(c, "ERR count must be a positive integer, got '0'", "LATCH.TRYSETCOUNT %s 0", "b");
    PU_ERR(c, "ERR count must be a positive integer, got '-3'", "LATCH.TRYSETCOUNT %s -3", "b");
    PU_ERR(c, "ERR count must be a positive integer, got 'x'", "LATCH.TRYSETCOUNT %s x", "b");
    PU_ERR(c, "ERR WAIT must be a non-negative integer (ms), got '-1'", "LATCH.AWAIT %s WAIT -1",
           "b");
    PU_ERR(c, "ERR syntax error near 'SOON'", "LATCH.AWAIT %s SOON 5", "b");
    PU_ERR(c, "ERR syntax error near 'WAIT'", "LATCH.AWAIT %s WAIT", "b");
    PU_ERR(c, "ERR wrong number of arguments", "LATCH.COUNTDOWN %s extra", "b");
    ASSERT_EQ(pu_dbsize(rc), 3);
    redisFree(rc);
    redisFree(c);
}

TEST(latch_basic)
{
    pu_each_backend(scenario_latch_basic, NULL);
}

TEST(latch_counting)
{
    pu_each_backend(scenario_latch_counting, NULL);
}

TEST(latch_timeout)
{
    pu_each_backend(scenario_latch_timeout, NULL);
}

TEST(latch_interop)
{
    pu_each_backend(scenario_latch_interop, NULL);
}

TEST(latch_bad_input)
{
    pu_each_backend(scenario_latch_bad_input, NULL);
}

TEST_MAIN(TEST_CASE(latch_basic), TEST_CASE(latch_counting), TEST_CASE(latch_timeout),
          TEST_CASE(latch_interop), TEST_CASE(latch_bad_input))
