/* Local hand-off: an UNLOCK that ends the caller's hold while another
 * client of the same proxy waits for the name hands the lock over in one
 * script (no PUBLISH, no second round trip); reentrant holds are not
 * handed over early; and waiters outside the proxy (a Redisson client
 * here) still get their turn, because only so many hand-offs in a row
 * skip the wake-up message. Both io backends. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define JAVA_OWNER "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a:1"
#define CYCLERS    3

/* Two waiters, two hand-offs, each one script and no message; the new
 * holder's field and lease are in Redis before its +OK. */
static void scenario_handoff(struct pu_env *e)
{
    redisContext *h = pu_client(e), *w1 = pu_client(e), *w2 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    char o1[PU_OWNER_MAX], o2[PU_OWNER_MAX];
    long long scripts, publishes;

    pu_conn_owner(w1, o1, sizeof(o1));
    pu_conn_owner(w2, o2, sizeof(o2));
    PU_OK(h, "LOCK %s", "ho");
    pu_send(w1, "LOCK %s", "ho");
    PU_EVENTUALLY(pu_info_int(h, "lock_waiters") == 1, 3000);
    pu_send(w2, "LOCK %s", "ho");
    PU_EVENTUALLY(pu_info_int(h, "lock_waiters") == 2, 3000);
    pu_sleep_ms(50);
    scripts = pu_cmdstat_calls(rc, "evalsha");
    publishes = pu_cmdstat_calls(rc, "publish");
    PU_INT(h, 1, "UNLOCK %s", "ho");
    su_expect_ok_within(w1, 2000);
    ASSERT_EQ(pu_hget_int(rc, "ho", o1), 1);
    ASSERT_TRUE(pu_pttl(rc, "ho") > 0);
    ASSERT_NULL(pu_try_recv(w2, 100));
    ASSERT_EQ(pu_cmdstat_calls(rc, "evalsha") - scripts, 1);
    ASSERT_EQ(pu_cmdstat_calls(rc, "publish") - publishes, 0);
    PU_INT(w1, 1, "UNLOCK %s", "ho");
    su_expect_ok_within(w2, 2000);
    ASSERT_EQ(pu_hget_int(rc, "ho", o2), 1);
    ASSERT_EQ(pu_hlen(rc, "ho"), 1);
    PU_INT(w2, 1, "UNLOCK %s", "ho"); /* nobody waits: an ordinary unlock */
    ASSERT_EQ(pu_dbsize(rc), 0);
    ASSERT_EQ(pu_cmdstat_calls(rc, "publish") - publishes, 1);
    redisFree(rc);
    redisFree(w2);
    redisFree(w1);
    redisFree(h);
}

/* A reentrant holder's first UNLOCK keeps the lock: nothing is handed
 * over until its last. */
static void scenario_handoff_reentrant(struct pu_env *e)
{
    redisContext *h = pu_client(e), *w = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];

    pu_conn_owner(w, owner, sizeof(owner));
    PU_OK(h, "LOCK %s", "hr");
    PU_OK(h, "LOCK %s", "hr");
    pu_send(w, "LOCK %s", "hr");
    PU_EVENTUALLY(pu_info_int(h, "lock_waiters") == 1, 3000);
    PU_INT(h, 0, "UNLOCK %s", "hr");
    ASSERT_NULL(pu_try_recv(w, 200));
    PU_INT(h, 1, "UNLOCK %s", "hr");
    su_expect_ok_within(w, 2000);
    ASSERT_EQ(pu_hget_int(rc, "hr", owner), 1);
    PU_INT(w, 1, "UNLOCK %s", "hr");
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(rc);
    redisFree(w);
    redisFree(h);
}

struct cyclers {
    int port;
    atomic_bool stop;
    atomic_int inside, violations, errors, grants;
};

/* LOCK, hold 300 us, UNLOCK, until told to stop. */
static void *cycler(void *arg)
{
    struct cyclers *cs = arg;
    redisContext *c = pu_try_connect(cs->port);

    while (c && !atomic_load(&cs->stop)) {
        redisReply *r = redisCommand(c, "LOCK %s", "hx");

        if (!r || r->type != REDIS_REPLY_STATUS) {
            atomic_fetch_add(&cs->errors, 1);
            break;
        }
        freeReplyObject(r);
        atomic_fetch_add(&cs->grants, 1);
        if (atomic_fetch_add(&cs->inside, 1) != 0)
            atomic_fetch_add(&cs->violations, 1);
        usleep(300);
        atomic_fetch_sub(&cs->inside, 1);
        r = redisCommand(c, "UNLOCK %s", "hx");
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            atomic_fetch_add(&cs->errors, 1);
        if (r)
            freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return NULL;
}

/* A Redisson client waiting as Redisson does (a wake-up message, or the
 * holder's PTTL, capped at 1 s here) gets the lock while proxy clients
 * keep handing it to each other. Returns when it got it (true) or after
 * 8 s (false). */
static bool outside_waiter_gets_in(struct pu_env *e, struct cyclers *cs)
{
    redisContext *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_lock__channel:*");
    char chan[128], got[128], payload[32];
    long long t0 = pu_now_ms();
    bool in = false;

    pu_channel("hx", chan, sizeof(chan));
    while (!in && pu_now_ms() - t0 < 8000) {
        redisReply *r =
            pu_cmd(rc, "EVAL %s 1 %s %d %s", su_rlock_acquire_lua, "hx", 30000, JAVA_OWNER);
        long long pttl = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;

        in = r->type == REDIS_REPLY_NIL;
        freeReplyObject(r);
        if (!in)
            (void)pu_next_message(sub, pttl > 0 && pttl < 1000 ? (int)pttl : 1000, got, sizeof(got),
                                  payload, sizeof(payload));
    }
    if (in) {
        redisReply *r;

        if (atomic_fetch_add(&cs->inside, 1) != 0)
            atomic_fetch_add(&cs->violations, 1);
        usleep(1000);
        atomic_fetch_sub(&cs->inside, 1);
        r = pu_cmd(rc, "EVAL %s 2 %s %s 0 30000 %s", su_rlock_unlock_lua, "hx", chan, JAVA_OWNER);
        PU_CHECK(r, PU_K_INT, 1, NULL);
        freeReplyObject(r);
    }
    redisFree(sub);
    redisFree(rc);
    return in;
}

static void scenario_handoff_outside_waiter(struct pu_env *e)
{
    struct cyclers cs = {.port = e->proxy.port};
    pthread_t t[CYCLERS];
    bool in;

    for (int i = 0; i < CYCLERS; i++)
        ASSERT_EQ(pthread_create(&t[i], NULL, cycler, &cs), 0);
    PU_EVENTUALLY(atomic_load(&cs.grants) > 50, 5000);
    in = outside_waiter_gets_in(e, &cs);
    atomic_store(&cs.stop, true);
    for (int i = 0; i < CYCLERS; i++)
        pthread_join(t[i], NULL);
    if (!in)
        TEST_FAIL("a Redisson waiter did not get the lock in 8 s (%d proxy grants)",
                  atomic_load(&cs.grants));
    ASSERT_EQ(atomic_load(&cs.violations), 0);
    ASSERT_EQ(atomic_load(&cs.errors), 0);
}

TEST(handoff_one_script)
{
    pu_each_backend(scenario_handoff, NULL);
}

TEST(handoff_waits_for_last_reentrant_unlock)
{
    pu_each_backend(scenario_handoff_reentrant, NULL);
}

TEST(handoff_lets_outside_waiters_in)
{
    pu_each_backend(scenario_handoff_outside_waiter, NULL);
}

TEST_MAIN(TEST_CASE(handoff_one_script), TEST_CASE(handoff_waits_for_last_reentrant_unlock),
          TEST_CASE(handoff_lets_outside_waiters_in))
