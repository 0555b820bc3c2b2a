/* Lease renewal and connection-bound locks: the watchdog keeps locks taken
 * without LEASE alive while their connection lives (and never extends a
 * lock someone else took over), LEASE locks are not renewed, and a dropped
 * connection releases its locks (--on-disconnect release, the default) or
 * lets them run out (--on-disconnect expire). Both io backends. */
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define FOREIGN_OWNER "7f1c2d3e-0000-4000-8000-000000000001:1"
#define MANY_LOCKS    300

static const char *const wd_600[] = {"--lock-watchdog-timeout", "600", NULL};
static const char *const wd_10s[] = {"--lock-watchdog-timeout", "10000", NULL};
static const char *const wd_expire[] = {"--lock-watchdog-timeout", "1500", "--on-disconnect",
                                        "expire", NULL};

static void scenario_renews(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner1[PU_OWNER_MAX];
    struct pu_lockinfo li;
    long long pttl, until;

    pu_conn_owner(c1, owner1, sizeof(owner1));
    PU_OK(c1, "LOCK %s", "wd");
    PU_OK(c2, "LOCK %s", "wd2");
    PU_OK(c1, "LOCK %s LEASE %d", "wd-lease", 300);
    pttl = pu_pttl(rc, "wd");
    ASSERT_TRUE(pttl > 0 && pttl <= 600);
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "wd");
    ASSERT_EQ(li.watchdog, 1);
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "wd-lease");
    ASSERT_EQ(li.watchdog, 0);

    /* More than four watchdog timeouts. */
    until = pu_now_ms() + 2500;
    while (pu_now_ms() < until) {
        pttl = pu_pttl(rc, "wd");
        if (pttl <= 0 || pttl > 600)
            TEST_FAIL("watchdog lock has PTTL %lld", pttl);
        ASSERT_TRUE(pu_pttl(rc, "wd2") > 0);
        pu_sleep_ms(50);
    }
    ASSERT_EQ(pu_hget_int(rc, "wd", owner1), 1);
    ASSERT_TRUE(pu_info_int(c1, "watchdog_renewals") > 0);

    /* The LEASE lock was not renewed. */
    ASSERT_TRUE(!pu_exists(rc, "wd-lease"));
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s", "wd-lease");
    PU_INT(c1, 1, "UNLOCK %s", "wd");
    PU_INT(c2, 1, "UNLOCK %s", "wd2");
    ASSERT_EQ(pu_info_int(c1, "locks_held"), 0);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

/* Someone deletes the lock and another owner takes it: the watchdog must
 * check ownership before PEXPIRE, and report the loss. */
static void scenario_foreign(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *rc = pu_redis_client(e);
    long long lost0 = pu_info_int(c1, "leases_lost");
    struct pu_lockinfo li;

    PU_OK(c1, "LOCK %s", "wf");
    PU_INT(rc, 1, "DEL %s", "wf");
    PU_INT(rc, 1, "HINCRBY %s %s 1", "wf", FOREIGN_OWNER);
    PU_INT(rc, 1, "PEXPIRE %s 60000", "wf");
    pu_sleep_ms(1500);
    ASSERT_TRUE(pu_pttl(rc, "wf") > 50000);
    ASSERT_EQ(pu_hlen(rc, "wf"), 1);
    ASSERT_EQ(pu_hget_int(rc, "wf", FOREIGN_OWNER), 1);
    PU_EVENTUALLY(pu_info_int(c1, "leases_lost") > lost0, 3000);
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "wf");
    ASSERT_EQ(li.hold_count, 0);
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s", "wf");
    ASSERT_EQ(pu_hget_int(rc, "wf", FOREIGN_OWNER), 1);
    redisFree(rc);
    redisFree(c1);
}

/* Holder drops its connection: a waiter gets the lock long before the
 * 10 s lease could run out, and a reentrant hold is fully released. */
static void scenario_disconnect_release(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner2[PU_OWNER_MAX];
    long long t0;

    pu_conn_owner(c2, owner2, sizeof(owner2));
    PU_OK(c1, "LOCK %s", "dr");
    PU_OK(c1, "LOCK %s", "dr");
    PU_OK(c1, "LOCK %s", "dr-alone");
    pu_send(c2, "LOCK %s", "dr");
    ASSERT_NULL(pu_try_recv(c2, 300));

    t0 = pu_now_ms();
    redisFree(c1);
    su_expect_ok_within(c2, 5000);
    ASSERT_TRUE(pu_now_ms() - t0 < 2000);
    ASSERT_EQ(pu_hlen(rc, "dr"), 1);
    ASSERT_EQ(pu_hget_int(rc, "dr", owner2), 1);
    PU_EVENTUALLY(!pu_exists(rc, "dr-alone"), 2000);

    redisFree(c2);
    PU_EVENTUALLY(!pu_exists(rc, "dr"), 2000);
    c1 = pu_client(e);
    PU_EVENTUALLY(pu_info_int(c1, "locks_held") == 0, 2000);
    PU_OK(c1, "TRYLOCK %s", "dr");
    PU_INT(c1, 1, "UNLOCK %s", "dr");
    redisFree(rc);
    redisFree(c1);
}

/* --on-disconnect expire: the lock stays until its lease runs out, and it
 * is no longer renewed. */
static void scenario_disconnect_expire(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long p1, p2;

    PU_OK(c1, "LOCK %s", "de");
    PU_OK(c1, "LOCK %s", "de");
    redisFree(c1);
    pu_sleep_ms(100);
    ASSERT_TRUE(pu_exists(rc, "de"));
    PU_NIL(c2, "TRYLOCK %s", "de");
    p1 = pu_pttl(rc, "de");
    ASSERT_TRUE(p1 > 0 && p1 <= 1500);
    pu_sleep_ms(400);
    p2 = pu_pttl(rc, "de");
    ASSERT_TRUE(p2 < p1);
    PU_EVENTUALLY(!pu_exists(rc, "de"), 4000);
    PU_OK(c2, "TRYLOCK %s", "de");
    PU_INT(c2, 1, "UNLOCK %s", "de");
    redisFree(rc);
    redisFree(c2);
}

/* Waiters that go away are forgotten; the next waiter gets the lock. */
static void scenario_waiter_disconnect(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    char owner3[PU_OWNER_MAX];
    int raw;

    pu_conn_owner(c3, owner3, sizeof(owner3));
    PU_OK(c1, "LOCK %s LEASE %d", "dw", 10000);
    pu_send(c2, "LOCK %s", "dw");
    pu_send(c3, "LOCK %s", "dw");
    PU_EVENTUALLY(pu_info_int(c1, "lock_waiters") == 2, 3000);
    redisFree(c2);
    PU_EVENTUALLY(pu_info_int(c1, "lock_waiters") == 1, 3000);

    /* A client that dies halfway through a request. */
    raw = pu_raw_connect(e->proxy.port);
    pu_raw_send(raw, "*2\r\n$4\r\nLOCK\r\n$2\r\ndw", 20);
    close(raw);

    PU_INT(c1, 1, "UNLOCK %s", "dw");
    su_expect_ok_within(c3, 3000);
    ASSERT_EQ(pu_hget_int(rc, "dw", owner3), 1);
    ASSERT_EQ(pu_info_int(c1, "lock_waiters"), 0);
    PU_INT(c3, 1, "UNLOCK %s", "dw");
    redisFree(rc);
    redisFree(c3);
    redisFree(c1);
}

/* Many watchdog locks on two connections: all renewed (in batches), all
 * released at once when the connections close. */
static void scenario_many_locks(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;

    for (int i = 0; i < MANY_LOCKS; i++)
        redisAppendCommand(i % 6 ? c1 : c2, "LOCK lk:%d", i);
    for (int i = 0; i < MANY_LOCKS; i++) {
        r = pu_recv(i % 6 ? c1 : c2);
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
    }
    ASSERT_EQ(pu_info_int(c1, "locks_held"), MANY_LOCKS);
    /* Past one renewal period (10 s / 3): renewed locks have > 7 s left,
     * unrenewed ones would have < 6 s. */
    pu_sleep_ms(4000);
    for (int i = 0; i < MANY_LOCKS; i++)
        redisAppendCommand(rc, "PTTL lk:%d", i);
    for (int i = 0; i < MANY_LOCKS; i++) {
        r = pu_recv(rc);
        if (r->type != REDIS_REPLY_INTEGER || r->integer < 7000)
            TEST_FAIL("lk:%d was not renewed: PTTL %lld", i, r->integer);
        freeReplyObject(r);
    }
    redisFree(c1);
    redisFree(c2);
    PU_EVENTUALLY(pu_dbsize(rc) == 0, 2000);
    redisFree(rc);
}

/* Waiters close while the lock is handed over: a grant to a closed
 * connection must be released at once, not left for the 30 s lease. */
static void scenario_waiters_vanish(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e), *w[20];
    redisReply *r;

    for (int round = 0; round < 5; round++) {
        redisContext *holder = pu_client(e);

        PU_OK(holder, "LOCK %s LEASE %d", "vw", 10000);
        for (int i = 0; i < 20; i++) {
            w[i] = pu_client(e);
            pu_send(w[i], "LOCK %s", "vw");
        }
        PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 20, 3000);
        pu_send(holder, "UNLOCK %s", "vw");
        for (int i = 0; i < 20; i++)
            redisFree(w[i]);
        r = pu_recv(holder);
        PU_CHECK(r, PU_K_INT, 1, NULL);
        freeReplyObject(r);
        redisFree(holder);
        PU_EVENTUALLY(!pu_exists(rc, "vw"), 3000);
        PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 0, 3000);
        PU_EVENTUALLY(pu_info_int(c, "locks_held") == 0, 3000);
        PU_OK(c, "TRYLOCK %s", "vw");
        PU_INT(c, 1, "UNLOCK %s", "vw");
    }
    redisFree(rc);
    redisFree(c);
}

TEST(watchdog_renews)
{
    pu_each_backend(scenario_renews, wd_600);
}

TEST(watchdog_respects_new_owner)
{
    pu_each_backend(scenario_foreign, wd_600);
}

TEST(disconnect_releases)
{
    pu_each_backend(scenario_disconnect_release, wd_10s);
}

TEST(disconnect_expire_mode)
{
    pu_each_backend(scenario_disconnect_expire, wd_expire);
}

TEST(disconnect_waiter)
{
    pu_each_backend(scenario_waiter_disconnect, NULL);
}

TEST(watchdog_many_locks)
{
    pu_each_backend(scenario_many_locks, wd_10s);
}

TEST(waiters_vanish_at_release)
{
    pu_each_backend(scenario_waiters_vanish, NULL);
}

TEST_MAIN(TEST_CASE(watchdog_renews), TEST_CASE(watchdog_respects_new_owner),
          TEST_CASE(watchdog_many_locks), TEST_CASE(waiters_vanish_at_release),
          TEST_CASE(disconnect_releases), TEST_CASE(disconnect_expire_mode),
          TEST_CASE(disconnect_waiter))
