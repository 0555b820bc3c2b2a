/* Lock command contract of lockproxy against a real redis-server: reply
 * values of LOCK/TRYLOCK/UNLOCK/FORCEUNLOCK/LOCK.INFO, the Redisson RLock
 * layout they leave in Redis (hash at the raw name, owner field ->
 * reentrancy count, PTTL = lease, PUBLISH 0 on full release), reentrancy,
 * leases, ownership errors and OWNER tokens. Every case runs on both io
 * backends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

/* Waits for one message and checks it is "0" on name's lock channel. */
static void expect_wake(redisContext *sub, const char *name)
{
    char want[256];

    pu_channel(name, want, sizeof(want));
    su_expect_msg(sub, want, "0");
}

static void scenario_basic(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");
    char uuid[64], owner[PU_OWNER_MAX];
    long long pttl;

    pu_proxy_uuid(c, uuid, sizeof(uuid));
    ASSERT_EQ(strlen(uuid), 36);
    pu_conn_owner(c, owner, sizeof(owner));

    PU_OK(c, "LOCK %s", "basic");
    PU_STR(rc, "hash", "TYPE %s", "basic");
    ASSERT_EQ(pu_hlen(rc, "basic"), 1);
    ASSERT_EQ(pu_hget_int(rc, "basic", owner), 1);
    pttl = pu_pttl(rc, "basic");
    ASSERT_TRUE(pttl > 0 && pttl <= 30000);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 1);

    PU_INT(c, 1, "UNLOCK %s", "basic");
    ASSERT_TRUE(!pu_exists(rc, "basic"));
    expect_wake(sub, "basic");
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);

    PU_OK(c, "TRYLOCK %s", "basic");
    ASSERT_EQ(pu_hget_int(rc, "basic", owner), 1);
    PU_INT(c, 1, "UNLOCK %s", "basic");
    expect_wake(sub, "basic");
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

static void scenario_lease_and_wait(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long t0, pttl, elapsed;

    PU_OK(c1, "LOCK %s LEASE %d", "lw", 5000);
    pttl = pu_pttl(rc, "lw");
    ASSERT_TRUE(pttl > 0 && pttl <= 5000);

    /* WAIT 0 is a single attempt; TRYLOCK never waits. */
    PU_NIL(c2, "LOCK %s WAIT %d", "lw", 0);
    PU_NIL(c2, "TRYLOCK %s", "lw");
    PU_NIL(c2, "TRYLOCK %s LEASE %d", "lw", 1000);

    /* WAIT runs out: nil, after about WAIT ms (not before), well before
     * the holder's lease ends. */
    t0 = pu_now_ms();
    PU_NIL(c2, "LOCK %s WAIT %d", "lw", 300);
    elapsed = pu_now_ms() - t0;
    ASSERT_TRUE(elapsed >= 250);
    ASSERT_TRUE(elapsed < 4000);

    /* The holder is untouched by the failed attempts. */
    ASSERT_EQ(pu_hlen(rc, "lw"), 1);
    PU_INT(c1, 1, "UNLOCK %s", "lw");
    PU_OK(c2, "LOCK %s WAIT %d", "lw", 0);
    PU_INT(c2, 1, "UNLOCK %s", "lw");
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_reentrancy(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];
    struct pu_lockinfo li;

    pu_conn_owner(c, owner, sizeof(owner));
    PU_OK(c, "LOCK %s", "re");
    PU_OK(c, "LOCK %s", "re");
    ASSERT_EQ(pu_hget_int(rc, "re", owner), 2);
    PU_OK(c, "TRYLOCK %s", "re");
    ASSERT_EQ(pu_hget_int(rc, "re", owner), 3);
    pu_lockinfo(c, &li, "LOCK.INFO %s", "re");
    ASSERT_EQ(li.hold_count, 3);
    ASSERT_EQ(pu_hlen(rc, "re"), 1);

    PU_INT(c, 0, "UNLOCK %s", "re");
    ASSERT_EQ(pu_hget_int(rc, "re", owner), 2);
    ASSERT_TRUE(pu_pttl(rc, "re") > 0);
    PU_INT(c, 0, "UNLOCK %s", "re");
    ASSERT_EQ(pu_hget_int(rc, "re", owner), 1);
    PU_INT(c, 1, "UNLOCK %s", "re");
    ASSERT_TRUE(!pu_exists(rc, "re"));
    PU_ERR(c, "NOTOWNER", "UNLOCK %s", "re");

    /* Re-entry resets the lease to the new LEASE (Redisson semantics). */
    PU_OK(c, "LOCK %s LEASE %d", "re2", 1000);
    pu_sleep_ms(300);
    PU_OK(c, "LOCK %s LEASE %d", "re2", 10000);
    ASSERT_TRUE(pu_pttl(rc, "re2") > 1000);
    ASSERT_EQ(pu_hget_int(rc, "re2", owner), 2);
    PU_INT(c, 0, "UNLOCK %s", "re2");
    PU_INT(c, 1, "UNLOCK %s", "re2");
    redisFree(rc);
    redisFree(c);
}

static void scenario_lease_expiry(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long pttl, t0, elapsed;

    PU_OK(c1, "LOCK %s LEASE %d", "le", 200);
    pttl = pu_pttl(rc, "le");
    ASSERT_TRUE(pttl > 0 && pttl <= 200);
    PU_NIL(c2, "TRYLOCK %s", "le");
    PU_EVENTUALLY(!pu_exists(rc, "le"), 3000);
    PU_OK(c2, "TRYLOCK %s LEASE %d", "le", 5000);
    PU_INT(c2, 1, "UNLOCK %s", "le");

    /* A waiter acquires when the lease runs out although nobody publishes
     * (the proxy must re-poll at the holder's PTTL). Not before the lease
     * ends: that would break mutual exclusion. */
    PU_OK(c1, "LOCK %s LEASE %d", "le2", 500);
    t0 = pu_now_ms();
    PU_OK(c2, "LOCK %s WAIT %d", "le2", 8000);
    elapsed = pu_now_ms() - t0;
    ASSERT_TRUE(elapsed >= 400);
    ASSERT_TRUE(elapsed < 3000);
    PU_INT(c2, 1, "UNLOCK %s", "le2");
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_notowner(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner1[PU_OWNER_MAX];

    pu_conn_owner(c1, owner1, sizeof(owner1));
    PU_OK(c1, "LOCK %s LEASE %d", "no", 10000);
    PU_ERR(c2, "NOTOWNER", "UNLOCK %s", "no");
    ASSERT_EQ(pu_hget_int(rc, "no", owner1), 1);

    /* A free lock, and a lock held by a Redisson client. */
    PU_ERR(c2, "NOTOWNER", "UNLOCK %s", "free-lock");
    PU_INT(rc, 1, "HINCRBY %s %s 1", "java", "7f1c2d3e-0000-4000-8000-000000000001:1");
    PU_INT(rc, 1, "PEXPIRE %s 60000", "java");
    PU_ERR(c2, "NOTOWNER", "UNLOCK %s", "java");
    ASSERT_TRUE(pu_exists(rc, "java"));

    /* After a full release the former holder is no owner either. */
    PU_INT(c1, 1, "UNLOCK %s", "no");
    PU_ERR(c1, "NOTOWNER", "UNLOCK %s", "no");
    PU_ERR(c1, "NOTOWNER", "UNLOCK %s OWNER %s", "java", "tok");
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_locklost(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner2[PU_OWNER_MAX];

    pu_conn_owner(c2, owner2, sizeof(owner2));
    /* Expired. */
    PU_OK(c1, "LOCK %s LEASE %d", "ll", 100);
    pu_sleep_ms(300);
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s", "ll");

    /* Expired and taken by someone else, who keeps it. */
    PU_OK(c1, "LOCK %s LEASE %d", "lt", 100);
    pu_sleep_ms(300);
    PU_OK(c2, "LOCK %s LEASE %d", "lt", 10000);
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s", "lt");
    ASSERT_EQ(pu_hget_int(rc, "lt", owner2), 1);
    PU_INT(c2, 1, "UNLOCK %s", "lt");

    /* Deleted behind the holder's back. */
    PU_OK(c1, "LOCK %s", "ld");
    PU_INT(rc, 1, "DEL %s", "ld");
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s", "ld");
    ASSERT_TRUE(pu_info_int(c1, "leases_lost") >= 0);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_owner_tokens(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    const char *tok = "job-7.a_B";
    char uuid[64], field[PU_OWNER_MAX];
    struct pu_lockinfo li;

    pu_proxy_uuid(c1, uuid, sizeof(uuid));
    snprintf(field, sizeof(field), "%s:%s", uuid, tok);
    PU_OK(c1, "LOCK %s OWNER %s", "tk", tok);
    ASSERT_EQ(pu_hget_int(rc, "tk", field), 1);

    /* Another connection naming the token is the same owner. */
    pu_lockinfo(c2, &li, "LOCK.INFO %s OWNER %s", "tk", tok);
    ASSERT_EQ(li.hold_count, 1);
    ASSERT_STREQ(li.owner, field);
    PU_OK(c2, "TRYLOCK %s OWNER %s", "tk", tok);
    ASSERT_EQ(pu_hget_int(rc, "tk", field), 2);

    /* Without the token (or with another) it is someone else's lock. */
    PU_ERR(c2, "NOTOWNER", "UNLOCK %s", "tk");
    PU_ERR(c2, "NOTOWNER", "UNLOCK %s OWNER %s", "tk", "other");
    PU_NIL(c3, "TRYLOCK %s", "tk");
    PU_NIL(c3, "TRYLOCK %s OWNER %s", "tk", "other");

    PU_INT(c2, 0, "UNLOCK %s OWNER %s", "tk", tok);
    PU_INT(c1, 1, "UNLOCK %s OWNER %s", "tk", tok);
    ASSERT_TRUE(!pu_exists(rc, "tk"));

    /* A token lock taken on one connection, released on another. */
    PU_OK(c3, "LOCK %s LEASE %d OWNER %s", "tk2", 10000, "x");
    PU_INT(c1, 1, "UNLOCK %s OWNER %s", "tk2", "x");
    ASSERT_TRUE(!pu_exists(rc, "tk2"));
    redisFree(rc);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_forceunlock(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");

    PU_OK(c1, "LOCK %s LEASE %d", "fu", 10000);
    PU_OK(c1, "LOCK %s LEASE %d", "fu", 10000);
    PU_INT(c2, 1, "FORCEUNLOCK %s", "fu");
    ASSERT_TRUE(!pu_exists(rc, "fu"));
    expect_wake(sub, "fu");
    PU_INT(c2, 0, "FORCEUNLOCK %s", "fu");
    su_expect_no_msg(sub, 200);

    /* Works on a lock held by a Redisson client too. */
    PU_INT(rc, 1, "HINCRBY %s %s 1", "fu-java", "7f1c2d3e-0000-4000-8000-000000000001:9");
    PU_INT(c2, 1, "FORCEUNLOCK %s", "fu-java");
    ASSERT_TRUE(!pu_exists(rc, "fu-java"));
    expect_wake(sub, "fu-java");
    PU_OK(c2, "TRYLOCK %s", "fu");
    PU_INT(c2, 1, "UNLOCK %s", "fu");
    redisFree(sub);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_lock_info(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner1[PU_OWNER_MAX], owner2[PU_OWNER_MAX], uuid[64], tokfield[PU_OWNER_MAX];
    struct pu_lockinfo li;

    pu_conn_owner(c1, owner1, sizeof(owner1));
    pu_conn_owner(c2, owner2, sizeof(owner2));
    ASSERT_TRUE(strcmp(owner1, owner2) != 0);
    pu_proxy_uuid(c1, uuid, sizeof(uuid));
    snprintf(tokfield, sizeof(tokfield), "%s:%s", uuid, "tok1");

    pu_lockinfo(c1, &li, "LOCK.INFO %s", "li");
    ASSERT_EQ(li.locked, 0);
    ASSERT_EQ(li.hold_count, 0);
    ASSERT_EQ(li.ttl_ms, -2);
    ASSERT_EQ(li.watchdog, 0);
    ASSERT_STREQ(li.owner, owner1);

    PU_OK(c1, "LOCK %s LEASE %d", "li", 5000);
    PU_OK(c1, "LOCK %s LEASE %d", "li", 5000);
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "li");
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.hold_count, 2);
    ASSERT_TRUE(li.ttl_ms > 0 && li.ttl_ms <= 5000);
    ASSERT_EQ(li.watchdog, 0);
    ASSERT_STREQ(li.owner, owner1);

    /* Seen from another connection: locked, but not by the caller. */
    pu_lockinfo(c2, &li, "LOCK.INFO %s", "li");
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.hold_count, 0);
    ASSERT_EQ(li.watchdog, 0);
    ASSERT_STREQ(li.owner, owner2);

    /* Watchdog lock. */
    PU_OK(c1, "LOCK %s", "li-wd");
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "li-wd");
    ASSERT_EQ(li.watchdog, 1);
    ASSERT_TRUE(li.ttl_ms > 0 && li.ttl_ms <= 30000);

    /* A lock without expiry, written by someone else. */
    PU_INT(rc, 1, "HSET %s %s 1", "li-noexp", "7f1c2d3e-0000-4000-8000-000000000001:1");
    pu_lockinfo(c2, &li, "LOCK.INFO %s", "li-noexp");
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.ttl_ms, -1);
    ASSERT_EQ(li.hold_count, 0);

    /* Token owners. */
    PU_OK(c2, "LOCK %s LEASE %d OWNER %s", "li-tok", 5000, "tok1");
    pu_lockinfo(c1, &li, "LOCK.INFO %s OWNER %s", "li-tok", "tok1");
    ASSERT_EQ(li.hold_count, 1);
    ASSERT_STREQ(li.owner, tokfield);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

/* Lock names: braces are added to the channel only when the name has no
 * '{'; the key is always the raw name, whatever bytes it holds. */
static void scenario_names(struct pu_env *e)
{
    static const char *const names[] = {"plain", "a{b}c", "{tag}", "with space:1", "x}y", "ünï-ß"};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PU_OK(c, "LOCK %s", names[i]);
        ASSERT_TRUE(pu_exists(rc, names[i]));
        ASSERT_EQ(pu_hlen(rc, names[i]), 1);
        PU_INT(c, 1, "UNLOCK %s", names[i]);
        ASSERT_TRUE(!pu_exists(rc, names[i]));
        expect_wake(sub, names[i]);
    }
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

/* Names that hold another type, and very long names: error replies (or
 * success) but never a crash or a modified foreign key. */
static void scenario_odd_names(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char *name = malloc(50001);
    redisReply *r;

    ASSERT_NOTNULL(name);
    PU_OK(rc, "SET %s %s", "str", "v");
    PU_ERR(c, "", "LOCK %s", "str");
    PU_ERR(c, "", "TRYLOCK %s", "str");
    r = pu_cmd(c, "UNLOCK %s", "str");
    ASSERT_TRUE(r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = pu_cmd(c, "FORCEUNLOCK %s", "str");
    freeReplyObject(r);
    PU_STR(rc, "v", "GET %s", "str");

    memset(name, 'n', 4000);
    name[4000] = '\0';
    PU_OK(c, "LOCK %s", name);
    ASSERT_TRUE(pu_exists(rc, name));
    PU_INT(c, 1, "UNLOCK %s", name);
    memset(name, 'n', 50000);
    name[50000] = '\0';
    r = pu_cmd(c, "LOCK %s", name);
    if (r->type == REDIS_REPLY_STATUS)
        PU_INT(c, 1, "UNLOCK %s", name);
    else
        PU_CHECK(r, PU_K_ERR, 0, "ERR");
    freeReplyObject(r);
    PU_STR(c, "PONG", "PING");
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    free(name);
    redisFree(rc);
    redisFree(c);
}

TEST(lock_basic)
{
    pu_each_backend(scenario_basic, NULL);
}

TEST(lock_lease_and_wait)
{
    pu_each_backend(scenario_lease_and_wait, NULL);
}

TEST(lock_reentrancy)
{
    pu_each_backend(scenario_reentrancy, NULL);
}

TEST(lock_lease_expiry)
{
    pu_each_backend(scenario_lease_expiry, NULL);
}

TEST(lock_notowner)
{
    pu_each_backend(scenario_notowner, NULL);
}

TEST(lock_locklost)
{
    pu_each_backend(scenario_locklost, NULL);
}

TEST(lock_owner_tokens)
{
    pu_each_backend(scenario_owner_tokens, NULL);
}

TEST(lock_forceunlock)
{
    pu_each_backend(scenario_forceunlock, NULL);
}

TEST(lock_info_fields)
{
    pu_each_backend(scenario_lock_info, NULL);
}

TEST(lock_names_and_channels)
{
    pu_each_backend(scenario_names, NULL);
}

TEST(lock_odd_names)
{
    pu_each_backend(scenario_odd_names, NULL);
}

TEST_MAIN(TEST_CASE(lock_basic), TEST_CASE(lock_odd_names), TEST_CASE(lock_lease_and_wait),
          TEST_CASE(lock_reentrancy), TEST_CASE(lock_lease_expiry), TEST_CASE(lock_notowner),
          TEST_CASE(lock_locklost), TEST_CASE(lock_owner_tokens), TEST_CASE(lock_forceunlock),
          TEST_CASE(lock_info_fields), TEST_CASE(lock_names_and_channels))
