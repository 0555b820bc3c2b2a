/* RESP3: HELLO 3 and its server map, the protocol switch per connection
 * (and back with HELLO 2), RESP3 types in replies (maps for LOCK.INFO and
 * HELLO, nulls for nil), HELLO's errors and AUTH, and RESP2 left as it was
 * for connections that never asked for RESP3. Asserted on the exact bytes
 * (hiredis 0.14 cannot parse RESP3). */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"
#include "resp3_util.h"

/* "$<len>\r\n<s>\r\n" into buf. */
static const char *bulk(char *buf, size_t n, const char *s)
{
    snprintf(buf, n, "$%zu\r\n%s\r\n", strlen(s), s);
    return buf;
}

/* The HELLO reply's fields, in Redis's order, whatever the header. */
static void expect_hello_body(const char *got, int proto)
{
    char want[64];

    ASSERT_TRUE(strstr(got, "$6\r\nserver\r\n$9\r\nlockproxy\r\n$7\r\nversion\r\n") != NULL);
    snprintf(want, sizeof(want), "$5\r\nproto\r\n:%d\r\n$2\r\nid\r\n:", proto);
    ASSERT_TRUE(strstr(got, want) != NULL);
    ASSERT_TRUE(strstr(got, "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
                            "$7\r\nmodules\r\n*0\r\n") != NULL);
}

TEST(resp3_hello)
{
    struct pu_env e = {0};
    struct r3_conn *c;
    const char *got;

    pu_env_start(&e, "epoll", NULL);
    c = r3_open(e.proxy.port);
    r3_send(c, "HELLO", "3", NULL);
    expect_hello_body(R3_EXPECT_PREFIX(c, "%7\r\n$6\r\nserver\r\n"), 3);
    r3_send(c, "HELLO", NULL); /* no version: the current one */
    expect_hello_body(R3_EXPECT_PREFIX(c, "%7\r\n"), 3);
    r3_send(c, "HELLO", "2", NULL);
    got = R3_EXPECT_PREFIX(c, "*14\r\n$6\r\nserver\r\n");
    expect_hello_body(got, 2);
    r3_send(c, "HELLO", "4", NULL);
    R3_EXPECT(c, "-NOPROTO unsupported protocol version\r\n");
    r3_send(c, "HELLO", "three", NULL);
    R3_EXPECT(c, "-ERR Protocol version is not an integer or out of range\r\n");
    r3_send(c, "HELLO", "3", "SETNAME", "w1", "BOGUS", NULL);
    R3_EXPECT(c, "-ERR Syntax error in HELLO option 'BOGUS'\r\n");
    r3_send(c, "PING", NULL); /* still RESP2: a failed HELLO switches nothing */
    R3_EXPECT(c, "+PONG\r\n");
    r3_send(c, "CLIENT", "GETNAME", NULL);
    R3_EXPECT(c, "$-1\r\n");
    r3_send(c, "HELLO", "3", "SETNAME", "w1", NULL);
    R3_EXPECT_PREFIX(c, "%7\r\n");
    r3_send(c, "CLIENT", "GETNAME", NULL);
    R3_EXPECT(c, "$2\r\nw1\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

/* Nil is "_", LOCK.INFO a map; a RESP2 connection beside it keeps "$-1"
 * and the flat array, byte for byte. */
TEST(resp3_types)
{
    struct pu_env e = {0};
    struct r3_conn *c3, *c2;
    char info3[512], info2[512], b[64];

    pu_env_start(&e, "epoll", NULL);
    c3 = r3_open(e.proxy.port);
    c2 = r3_open(e.proxy.port);
    r3_send(c3, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c3, "%7\r\n");
    r3_send(c2, "LOCK", "r3a", NULL);
    R3_EXPECT(c2, "+OK\r\n");
    r3_send(c3, "TRYLOCK", "r3a", NULL);
    R3_EXPECT(c3, "_\r\n");
    r3_send(c3, "LOCK", "r3a", "WAIT", "50", NULL);
    R3_EXPECT(c3, "_\r\n");
    r3_send(c2, "TRYLOCK", "r3b", NULL);
    R3_EXPECT(c2, "+OK\r\n");
    r3_send(c3, "TRYLOCK", "r3b", NULL);
    R3_EXPECT(c3, "_\r\n");
    r3_send(c2, "TRYLOCK", "r3c", NULL);
    R3_EXPECT(c2, "+OK\r\n");
    r3_send(c3, "CLIENT", "GETNAME", NULL);
    R3_EXPECT(c3, "_\r\n");
    r3_send(c2, "CLIENT", "GETNAME", NULL);
    R3_EXPECT(c2, "$-1\r\n");
    r3_send(c3, "TRYLOCK", "r3mine", NULL);
    R3_EXPECT(c3, "+OK\r\n");
    r3_send(c3, "LOCK.INFO", "r3mine", NULL);
    snprintf(info3, sizeof(info3), "%s", R3_EXPECT_PREFIX(c3, "%6\r\n$6\r\nlocked\r\n:1\r\n"));
    ASSERT_TRUE(strstr(info3, bulk(b, sizeof(b), "hold_count")) != NULL);
    ASSERT_TRUE(strstr(info3, "$8\r\nwatchdog\r\n:1\r\n$5\r\ntoken\r\n:-1\r\n") != NULL);
    r3_send(c2, "LOCK.INFO", "r3a", NULL);
    snprintf(info2, sizeof(info2), "%s", R3_EXPECT_PREFIX(c2, "*12\r\n$6\r\nlocked\r\n:1\r\n"));
    ASSERT_TRUE(strstr(info2, "$8\r\nwatchdog\r\n:1\r\n$5\r\ntoken\r\n:-1\r\n") != NULL);
    /* EXEC's array holds RESP3 elements. */
    r3_send(c3, "MULTI", NULL);
    R3_EXPECT(c3, "+OK\r\n");
    r3_send(c3, "TRYLOCK", "r3a", NULL);
    R3_EXPECT(c3, "+QUEUED\r\n");
    r3_send(c3, "LOCK.INFO", "r3mine", NULL);
    R3_EXPECT(c3, "+QUEUED\r\n");
    r3_send(c3, "EXEC", NULL);
    R3_EXPECT_PREFIX(c3, "*2\r\n_\r\n%6\r\n$6\r\nlocked\r\n:1\r\n");
    /* Back to RESP2 on the same connection. */
    r3_send(c3, "HELLO", "2", NULL);
    R3_EXPECT_PREFIX(c3, "*14\r\n");
    r3_send(c3, "TRYLOCK", "r3a", NULL);
    R3_EXPECT(c3, "$-1\r\n");
    r3_send(c3, "LOCK.INFO", "r3mine", NULL);
    R3_EXPECT_PREFIX(c3, "*12\r\n");
    r3_close(c3);
    r3_close(c2);
    pu_env_stop(&e);
}

TEST(resp3_hello_auth)
{
    static const char *const extra[] = {"--requirepass", "s3cret", NULL};
    struct pu_env e = {0};
    struct r3_conn *c;

    ou_env_start(&e, "epoll", extra);
    c = r3_open(e.proxy.port);
    r3_send(c, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c, "-NOAUTH HELLO must be called with the client already authenticated");
    r3_send(c, "HELLO", "3", "AUTH", "default", "nope", NULL);
    R3_EXPECT_PREFIX(c, "-WRONGPASS");
    r3_send(c, "TRYLOCK", "x", NULL);
    R3_EXPECT(c, "-NOAUTH Authentication required.\r\n");
    r3_send(c, "HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "me", NULL);
    expect_hello_body(R3_EXPECT_PREFIX(c, "%7\r\n"), 3);
    r3_send(c, "CLIENT", "GETNAME", NULL);
    R3_EXPECT(c, "$2\r\nme\r\n");
    r3_send(c, "TRYLOCK", "x", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

#define LOST_MSG(payload) ">3\r\n$7\r\nmessage\r\n$20\r\nlockproxy:lease-lost\r\n$" payload "\r\n"

/* SUBSCRIBE lockproxy:lease-lost: RESP3 only, beside relayed channels
 * (subs.h); UNSUBSCRIBE as Redis answers it. */
TEST(resp3_subscribe_rules)
{
    struct pu_env e = {0};
    struct r3_conn *c;

    pu_env_start(&e, "epoll", NULL);
    c = r3_open(e.proxy.port);
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT(c, "-ERR SUBSCRIBE lockproxy:lease-lost needs RESP3 (HELLO 3): its messages are "
                 "pushed between the replies of the connection that holds the locks\r\n");
    r3_send(c, "UNSUBSCRIBE", NULL);
    R3_EXPECT(c, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    r3_send(c, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c, "%7\r\n");
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", "news", NULL);
    R3_EXPECT(c, ">3\r\n$9\r\nsubscribe\r\n$20\r\nlockproxy:lease-lost\r\n:1\r\n");
    R3_EXPECT(c, ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:2\r\n");
    r3_send(c, "UNSUBSCRIBE", "news", NULL);
    R3_EXPECT(c, ">3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT(c, ">3\r\n$9\r\nsubscribe\r\n$20\r\nlockproxy:lease-lost\r\n:1\r\n");
    r3_send(c, "PING", NULL); /* commands still run on a subscribed RESP3 connection */
    R3_EXPECT(c, "+PONG\r\n");
    r3_send(c, "UNSUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT(c, ">3\r\n$11\r\nunsubscribe\r\n$20\r\nlockproxy:lease-lost\r\n:0\r\n");
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT(c, ">3\r\n$9\r\nsubscribe\r\n$20\r\nlockproxy:lease-lost\r\n:1\r\n");
    r3_send(c, "UNSUBSCRIBE", NULL);
    R3_EXPECT(c, ">3\r\n$11\r\nunsubscribe\r\n$20\r\nlockproxy:lease-lost\r\n:0\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

/* Takes the next n frames (within 5 s) and checks each is one of want[]
 * (each once), in any order. */
static void expect_pushes(struct r3_conn *c, const char *const *want, int n)
{
    bool seen[8] = {false};

    for (int k = 0; k < n; k++) {
        const char *got = r3_next(c, 5000);
        int i;

        if (!got)
            TEST_FAIL("push %d of %d did not come", k + 1, n);
        for (i = 0; i < n && (seen[i] || strcmp(got, want[i]) != 0); i++)
            ;
        if (i == n)
            TEST_FAIL("unexpected frame \"%s\"", got);
        seen[i] = true;
    }
}

/* Every kind of hold lost by every way the proxy learns it: a fixed lease
 * running out, and renewals finding the lock gone (deleted behind the
 * proxy's back). The push comes at once, also while the connection waits
 * in a LOCK; a connection that did not subscribe gets nothing. */
TEST(resp3_lease_lost_push)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "600", NULL};
    static const char *const watchdog_lost[] = {
        LOST_MSG("7\r\nLOCK wd"), LOST_MSG("9\r\nRLOCK rwr"), LOST_MSG("9\r\nWLOCK rww"),
        LOST_MSG("11\r\nFAIRLOCK fl")};
    struct pu_env e = {0};
    struct r3_conn *c, *quiet, *other;
    redisContext *rc;
    redisReply *r;

    pu_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    c = r3_open(e.proxy.port);
    quiet = r3_open(e.proxy.port);
    other = r3_open(e.proxy.port);
    r3_send(c, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c, "%7\r\n");
    r3_send(quiet, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(quiet, "%7\r\n");
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT_PREFIX(c, ">3\r\n$9\r\nsubscribe");

    /* A fixed lease runs out while c waits for another lock. */
    r3_send(other, "LOCK", "busy", NULL);
    R3_EXPECT(other, "+OK\r\n");
    r3_send(c, "TRYLOCK", "fixed", "LEASE", "300", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(quiet, "TRYLOCK", "qfixed", "LEASE", "300", NULL);
    R3_EXPECT(quiet, "+OK\r\n");
    r3_send(c, "LOCK", "busy", NULL);
    R3_EXPECT(c, LOST_MSG("10\r\nLOCK fixed"));
    r3_send(other, "UNLOCK", "busy", NULL);
    R3_EXPECT(other, ":1\r\n");
    R3_EXPECT(c, "+OK\r\n"); /* the LOCK, after the push */
    r3_send(c, "UNLOCK", "busy", NULL);
    R3_EXPECT(c, ":1\r\n");

    /* Renewals find each kind gone. */
    r3_send(c, "LOCK", "wd", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "RLOCK", "rwr", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "WLOCK", "rww", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "FAIRLOCK", "fl", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(quiet, "LOCK", "qwd", NULL);
    R3_EXPECT(quiet, "+OK\r\n");
    r = pu_cmd(rc, "DEL wd rwr rww fl qwd");
    PU_CHECK(r, PU_K_INT, 5, NULL);
    freeReplyObject(r);
    expect_pushes(c, watchdog_lost, 4);
    /* The unsubscribed connection got nothing, but its UNLOCK says LOCKLOST. */
    r3_send(quiet, "UNLOCK", "qwd", NULL);
    R3_EXPECT_PREFIX(quiet, "-LOCKLOST");
    r3_send(quiet, "UNLOCK", "qfixed", NULL);
    R3_EXPECT_PREFIX(quiet, "-LOCKLOST");
    r3_close(other);
    r3_close(quiet);
    r3_close(c);
    redisFree(rc);
    pu_env_stop(&e);
}

/* A lease lost while EXEC's array is being written: the push comes after
 * the whole array, never inside it. Redis is paused so that the EXEC's
 * TRYLOCK is in flight when the fixed lease runs out. */
TEST(resp3_push_waits_for_exec)
{
    struct pu_env e = {0};
    struct r3_conn *c;

    pu_env_start(&e, "epoll", NULL);
    c = r3_open(e.proxy.port);
    r3_send(c, "HELLO", "3", NULL);
    R3_EXPECT_PREFIX(c, "%7\r\n");
    r3_send(c, "SUBSCRIBE", "lockproxy:lease-lost", NULL);
    R3_EXPECT_PREFIX(c, ">3\r\n$9\r\nsubscribe");
    r3_send(c, "TRYLOCK", "fixed", "LEASE", "400", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "MULTI", NULL);
    R3_EXPECT(c, "+OK\r\n");
    r3_send(c, "TRYLOCK", "inexec", NULL);
    R3_EXPECT(c, "+QUEUED\r\n");
    pu_redis_pause(&e.redis);
    r3_send(c, "EXEC", NULL);
    ASSERT_NULL(r3_next(c, 900)); /* "*1" only: the lease ran out meanwhile */
    pu_redis_resume(&e.redis);
    R3_EXPECT(c, "*1\r\n+OK\r\n");
    R3_EXPECT(c, LOST_MSG("10\r\nLOCK fixed"));
    r3_send(c, "PING", NULL);
    R3_EXPECT(c, "+PONG\r\n");
    r3_close(c);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(resp3_hello), TEST_CASE(resp3_types), TEST_CASE(resp3_hello_auth),
          TEST_CASE(resp3_subscribe_rules), TEST_CASE(resp3_lease_lost_push),
          TEST_CASE(resp3_push_waits_for_exec))
