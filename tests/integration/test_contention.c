/* Contention and wake-ups: mutual exclusion under many clients, waiters
 * woken by UNLOCK (not by lease expiry), one shared upstream subscription
 * for many waiters, and interoperation with Redisson clients that write
 * the RLock layout directly in Redis. Both io backends. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define JAVA_OWNER  "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a:1"
#define NUM_WAITERS 100

static void scenario_mutual_exclusion(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);

    su_mutex_check(e->proxy.port, "mx", 64, 25);
    ASSERT_TRUE(!pu_exists(rc, "mx"));
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 0, 2000);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    redisFree(rc);
    redisFree(c);
}

/* Waiter blocked behind a 10 s lease returns promptly after UNLOCK. */
static void scenario_wakeup(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);
    const char *const forms[] = {"LOCK %s", "LOCK %s WAIT 8000"};

    for (int i = 0; i < 2; i++) {
        long long t0;

        PU_OK(c1, "LOCK %s LEASE %d", "ww", 10000);
        pu_send(c2, forms[i], "ww");
        ASSERT_NULL(pu_try_recv(c2, 300));
        t0 = pu_now_ms();
        PU_INT(c1, 1, "UNLOCK %s", "ww");
        su_expect_ok_within(c2, 9000);
        if (pu_now_ms() - t0 >= 1000)
            TEST_FAIL("waiter woke %lld ms after UNLOCK", pu_now_ms() - t0);
        PU_INT(c2, 1, "UNLOCK %s", "ww");
    }
    redisFree(c2);
    redisFree(c1);
}

/* Many lease expiries in a row, nobody publishing: each time the waiter
 * must re-poll when the holder's lease ends. Redis reports PTTL 0 during
 * a lease's last millisecond (script time is frozen), and a re-poll timed
 * at the PTTL tends to land right there. */
static void scenario_lease_end_repoll(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);

    for (int i = 0; i < 40; i++) {
        int lease = 20 + i % 7;
        long long t0, waited;
        redisReply *r;
        char got[320];

        PU_OK(c1, "LOCK %s LEASE %d", "rp", lease);
        t0 = pu_now_ms();
        r = pu_cmd(c2, "LOCK %s LEASE %d WAIT %d", "rp", 5000, 3000);
        waited = pu_now_ms() - t0;
        if (r->type != REDIS_REPLY_STATUS || waited >= 1000)
            TEST_FAIL("round %d: after a %d ms lease the waiter got %s after %lld ms", i, lease,
                      pu_describe(r, got, sizeof(got)), waited);
        freeReplyObject(r);
        PU_INT(c2, 1, "UNLOCK %s", "rp");
    }
    redisFree(c2);
    redisFree(c1);
}

struct race {
    int port;
    atomic_int inside, violations, errors, granted, timed_out;
};

/* LOCK with a short random WAIT; OK -> critical section -> UNLOCK :1. */
static void *race_thread(void *arg)
{
    struct race *rs = arg;
    redisContext *c = pu_try_connect(rs->port);
    unsigned seed = (unsigned)(uintptr_t)&c;

    if (!c) {
        atomic_fetch_add(&rs->errors, 1);
        return NULL;
    }
    for (int i = 0; i < 60; i++) {
        redisReply *r = redisCommand(c, "LOCK %s WAIT %d", "race", 1 + rand_r(&seed) % 20);

        if (r && r->type == REDIS_REPLY_NIL) {
            atomic_fetch_add(&rs->timed_out, 1);
        } else if (r && r->type == REDIS_REPLY_STATUS) {
            atomic_fetch_add(&rs->granted, 1);
            if (atomic_fetch_add(&rs->inside, 1) != 0)
                atomic_fetch_add(&rs->violations, 1);
            usleep(200);
            atomic_fetch_sub(&rs->inside, 1);
            freeReplyObject(r);
            r = redisCommand(c, "UNLOCK %s", "race");
            if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
                atomic_fetch_add(&rs->errors, 1);
        } else {
            atomic_fetch_add(&rs->errors, 1);
        }
        if (r)
            freeReplyObject(r);
    }
    /* Keep the connection until the main thread checked for leaked holds. */
    return c;
}

/* WAIT deadlines racing with hand-overs: a waiter answered nil must never
 * be granted the lock afterwards (it would hold it unknowingly). */
static void scenario_wait_race(struct pu_env *e)
{
    struct race rs = {.port = e->proxy.port};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e), *conns[32];
    pthread_t tids[32];

    for (int i = 0; i < 32; i++) {
        if (pthread_create(&tids[i], NULL, race_thread, &rs) != 0)
            TEST_FAIL("pthread_create failed");
    }
    for (int i = 0; i < 32; i++)
        pthread_join(tids[i], (void **)&conns[i]);
    fprintf(stderr, "   granted %d, timed out %d\n", atomic_load(&rs.granted),
            atomic_load(&rs.timed_out));
    ASSERT_EQ(atomic_load(&rs.errors), 0);
    ASSERT_EQ(atomic_load(&rs.violations), 0);
    ASSERT_TRUE(atomic_load(&rs.granted) > 0 && atomic_load(&rs.timed_out) > 0);
    /* All clients are still connected: nobody may hold the lock now. */
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 0, 2000);
    ASSERT_TRUE(!pu_exists(rc, "race"));
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    for (int i = 0; i < 32; i++) {
        if (conns[i])
            redisFree(conns[i]);
    }
    redisFree(rc);
    redisFree(c);
}

static void scenario_many_waiters(struct pu_env *e)
{
    redisContext *w[NUM_WAITERS], *c = pu_client(e), *rc = pu_redis_client(e);
    bool done[NUM_WAITERS] = {false};
    char chan[128];

    pu_channel("os", chan, sizeof(chan));
    PU_OK(c, "LOCK %s LEASE %d", "os", 30000);
    for (int i = 0; i < NUM_WAITERS; i++) {
        w[i] = pu_client(e);
        pu_send(w[i], "LOCK %s", "os");
    }
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == NUM_WAITERS, 5000);
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 3000);
    pu_sleep_ms(100);
    ASSERT_EQ(su_numsub(rc, chan), 1);
    ASSERT_TRUE(pu_info_int(c, "pubsub_channels") >= 1);

    PU_INT(c, 1, "UNLOCK %s", "os");
    for (int n = 0; n < NUM_WAITERS; n++) {
        int i = su_next_granted(w, done, NUM_WAITERS, 5000);

        if (i < 0)
            TEST_FAIL("no waiter got the lock after %d grants", n);
        ASSERT_NULL(pu_try_recv(w[i], 0));
        done[i] = true;
        /* Nobody else may hold it while w[i] does. */
        ASSERT_EQ(su_next_granted(w, done, NUM_WAITERS, 0), -1);
        PU_INT(w[i], 1, "UNLOCK %s", "os");
    }
    ASSERT_EQ(pu_info_int(c, "lock_waiters"), 0);
    ASSERT_TRUE(!pu_exists(rc, "os"));
    for (int i = 0; i < NUM_WAITERS; i++)
        redisFree(w[i]);
    redisFree(rc);
    redisFree(c);
}

/* A Redisson client holds the lock; its unlock (DEL + PUBLISH) wakes the
 * proxy's waiter. */
static void scenario_redisson_wake(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char chan[128], owner[PU_OWNER_MAX];
    long long t0;

    pu_channel("iw", chan, sizeof(chan));
    pu_conn_owner(c, owner, sizeof(owner));
    PU_INT(rc, 1, "HINCRBY %s %s 1", "iw", JAVA_OWNER);
    PU_INT(rc, 1, "PEXPIRE %s 60000", "iw");
    PU_NIL(c, "TRYLOCK %s", "iw");
    pu_send(c, "LOCK %s", "iw");
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 3000);
    ASSERT_NULL(pu_try_recv(c, 300));

    t0 = pu_now_ms();
    PU_INT(rc, 1, "DEL %s", "iw");
    PU_INT(rc, 1, "PUBLISH %s 0", chan);
    su_expect_ok_within(c, 10000);
    if (pu_now_ms() - t0 >= 1000)
        TEST_FAIL("woken %lld ms after the Redisson unlock", pu_now_ms() - t0);
    ASSERT_EQ(pu_hget_int(rc, "iw", owner), 1);
    PU_INT(c, 1, "UNLOCK %s", "iw");
    redisFree(rc);
    redisFree(c);
}

/* Both directions of exclusion with Redisson's own scripts. */
static void scenario_redisson_exclusion(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");
    char chan[128], got_chan[128], payload[32];
    struct pu_lockinfo li;
    redisReply *r;

    pu_channel("ix", chan, sizeof(chan));
    /* Redisson holds: proxy clients are excluded. */
    r = pu_cmd(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, "ix", 60000, JAVA_OWNER);
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    PU_NIL(c, "TRYLOCK %s", "ix");
    PU_NIL(c, "LOCK %s WAIT %d", "ix", 200);
    PU_ERR(c, "NOTOWNER", "UNLOCK %s", "ix");
    pu_lockinfo(c, &li, "LOCK.INFO %s", "ix");
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.hold_count, 0);
    r = pu_cmd(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, "ix", chan, JAVA_OWNER);
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
    ASSERT_TRUE(pu_next_message(sub, 2000, got_chan, sizeof(got_chan), payload, sizeof(payload)));

    /* The proxy holds: Redisson's acquire sees the PTTL, its unlock is
     * refused, and the proxy's release publishes the wake-up it waits for. */
    PU_OK(c, "LOCK %s LEASE %d", "ix", 20000);
    r = pu_cmd(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, "ix", 60000, JAVA_OWNER);
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer > 0 && r->integer <= 20000);
    freeReplyObject(r);
    r = pu_cmd(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, "ix", chan, JAVA_OWNER);
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    PU_INT(c, 1, "UNLOCK %s", "ix");
    ASSERT_TRUE(pu_next_message(sub, 2000, got_chan, sizeof(got_chan), payload, sizeof(payload)));
    ASSERT_STREQ(got_chan, chan);
    ASSERT_STREQ(payload, "0");
    r = pu_cmd(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, "ix", 60000, JAVA_OWNER);
    PU_CHECK(r, PU_K_NIL, 0, NULL);
    freeReplyObject(r);
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

TEST(mutual_exclusion)
{
    pu_each_backend(scenario_mutual_exclusion, NULL);
}

TEST(waiter_woken_by_unlock)
{
    pu_each_backend(scenario_wakeup, NULL);
}

TEST(waiter_repolls_at_lease_end)
{
    pu_each_backend(scenario_lease_end_repoll, NULL);
}

TEST(wait_deadline_races_handover)
{
    pu_each_backend(scenario_wait_race, NULL);
}

TEST(one_subscription_many_waiters)
{
    pu_raise_nofile(1024);
    pu_each_backend(scenario_many_waiters, NULL);
}

TEST(redisson_unlock_wakes_waiter)
{
    pu_each_backend(scenario_redisson_wake, NULL);
}

TEST(redisson_mutual_exclusion)
{
    pu_each_backend(scenario_redisson_exclusion, NULL);
}

TEST_MAIN(TEST_CASE(mutual_exclusion), TEST_CASE(waiter_woken_by_unlock),
          TEST_CASE(waiter_repolls_at_lease_end), TEST_CASE(wait_deadline_races_handover),
          TEST_CASE(one_subscription_many_waiters), TEST_CASE(redisson_unlock_wakes_waiter),
          TEST_CASE(redisson_mutual_exclusion))
