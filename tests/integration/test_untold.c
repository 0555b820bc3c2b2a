/* A holder that lost its lock is told (issue 18, found by an outside
 * fault test), against a real redis-server, on both io backends:
 * - a re-entry sent right after a lease was lost (the proxy was stopped
 *   past the lease while another client took and released the name) is
 *   answered -LOCKLOST, never +OK with a fresh hold, for every lock kind;
 *   the next LOCK then gets a fresh hold;
 * - an UNLOCK whose reply does not come (Redis unreachable) while the
 *   lease is still vouched for is carried out by the proxy: the client is
 *   answered at once, renewal stops, and the release lands once Redis is
 *   back, long before the lease would end;
 * - an UNLOCK sent when the proxy can no longer vouch for the lease (it
 *   could not renew it in time) answers -LOCKLOST, not "outcome unknown"
 *   followed by NOTOWNER.
 * Redis runs with DEBUG enabled (DEBUG SLEEP freezes it on demand). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define LEASE_MS 1500 /* --lock-watchdog-timeout */

static void each_backend(void (*scenario)(struct pu_env *e), const char *const *extra)
{
    ou_each_backend_debug(scenario, "debug", extra);
}

static redisContext *redis_sleep(struct pu_env *e, const char *secs)
{
    redisContext *s = pu_redis_client(e);

    pu_send(s, "DEBUG SLEEP %s", secs);
    pu_sleep_ms(100);
    return s;
}

static void expect_lost(redisReply *r, const char *what)
{
    char d[256];

    if (!pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("%s: expected -LOCKLOST, got %s", what, pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
}

/* ---- 1. re-entry right after a lost lease -------------------------------------- */

struct relock {
    const char *lock;   /* acquire command, %s the name */
    const char *unlock; /* its release */
    const char *name;
};

static const struct relock relocks[] = {
    {"LOCK %s", "UNLOCK %s", "rl-plain"},
    {"LOCK %s FENCED", "UNLOCK %s", "rl-fenced"},
    {"FAIRLOCK %s", "FAIRUNLOCK %s", "rl-fair"},
    {"WLOCK %s", "WUNLOCK %s", "rl-write"},
    {"RLOCK %s", "RUNLOCK %s", "rl-read"},
    {"LOCK %s OWNER tok-a", "UNLOCK %s OWNER tok-a", "rl-owner"},
    {"MULTILOCK %s rl-multi-2", "MULTIUNLOCK %s rl-multi-2", "rl-multi-1"},
};
#define NRELOCK (sizeof(relocks) / sizeof(relocks[0]))

/* A's holds through P0 run out while P0 is stopped; B takes and releases
 * every name through P1; A's re-entries, queued while P0 was stopped, are
 * the first thing P0 reads when it resumes. */
static void scenario_relock(struct pu_env *e)
{
    struct pu_proxy p1;
    redisContext *a[NRELOCK], *b;
    size_t i;

    ou_second_proxy(e, &p1);
    b = pu_connect(p1.port);
    for (i = 0; i < NRELOCK; i++) {
        a[i] = pu_client(e);
        pu_expect_at(__FILE__, __LINE__, a[i], PU_K_ANY, 0, NULL, relocks[i].lock, relocks[i].name);
    }
    ASSERT_EQ(kill(e->proxy.pid, SIGSTOP), 0);
    pu_sleep_ms(LEASE_MS + 500); /* every lease ran out in Redis */
    for (i = 0; i < NRELOCK; i++) {
        /* B's own acquire, then its release (any OWNER of B's is B's own). */
        pu_expect_at(__FILE__, __LINE__, b, PU_K_ANY, 0, NULL, relocks[i].lock, relocks[i].name);
        pu_expect_at(__FILE__, __LINE__, b, PU_K_INT, 1, NULL, relocks[i].unlock, relocks[i].name);
        pu_send(a[i], relocks[i].lock, relocks[i].name);
    }
    ASSERT_EQ(kill(e->proxy.pid, SIGCONT), 0);
    for (i = 0; i < NRELOCK; i++) {
        pu_set_timeout(a[i], 5000);
        expect_lost(pu_recv(a[i]), relocks[i].lock);
    }
    /* Told once: the next acquire is a fresh hold that one release frees. */
    for (i = 0; i < NRELOCK; i++) {
        pu_expect_at(__FILE__, __LINE__, a[i], PU_K_ANY, 0, NULL, relocks[i].lock, relocks[i].name);
        pu_expect_at(__FILE__, __LINE__, a[i], PU_K_INT, 1, NULL, relocks[i].unlock,
                     relocks[i].name);
        pu_expect_at(__FILE__, __LINE__, b, PU_K_ANY, 0, NULL, relocks[i].lock, relocks[i].name);
        pu_expect_at(__FILE__, __LINE__, b, PU_K_INT, 1, NULL, relocks[i].unlock, relocks[i].name);
    }
    ASSERT_TRUE(pu_info_int(a[0], "leases_lost") >= (long long)NRELOCK);
    for (i = 0; i < NRELOCK; i++)
        redisFree(a[i]);
    redisFree(b);
    pu_proxy_stop(&p1);
}

TEST(untold_relock_after_loss)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1500", NULL};

    each_backend(scenario_relock, extra);
}

/* ---- 2. an UNLOCK Redis does not answer, lease still vouched for ---------------- */

static void scenario_unlock_in_hand(struct pu_env *e)
{
    static const char *const names[] = {"ih-plain", "ih-fair", "ih-write", "ih-read", "ih-m1"};
    static const char *const locks[] = {"LOCK %s", "FAIRLOCK %s", "WLOCK %s", "RLOCK %s",
                                        "MULTILOCK %s ih-m2"};
    static const char *const unlocks[] = {"UNLOCK %s", "FAIRUNLOCK %s", "WUNLOCK %s", "RUNLOCK %s",
                                          "MULTIUNLOCK %s ih-m2"};
    enum { N = 5 };
    redisContext *rc = pu_redis_client(e), *c = pu_client(e), *s;
    long long t0;
    size_t i;

    for (i = 0; i < N; i++)
        pu_expect_at(__FILE__, __LINE__, c, PU_K_STATUS, 0, "OK", locks[i], names[i]);
    PU_OK(c, "LOCK %s", names[0]); /* re-entered: its first UNLOCK keeps it */
    s = redis_sleep(e, "1.5");
    t0 = pu_now_ms();
    PU_INT(c, 0, "UNLOCK %s", names[0]);
    for (i = 0; i < N; i++)
        pu_expect_at(__FILE__, __LINE__, c, PU_K_INT, 1, NULL, unlocks[i], names[i]);
    /* Answered without waiting for Redis. */
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    redisFree(s);
    /* The proxy carries the releases out once Redis is back (it slept
     * 1.5 s of a 6 s lease): nothing is left, long before the lease ends. */
    PU_EVENTUALLY(pu_dbsize(rc) == 0, 3000);
    fprintf(stderr,
            "5 releases carried out: every name free %lld ms after the UNLOCK (Redis "
            "slept 1.5 s)\n",
            pu_now_ms() - t0);
    ASSERT_TRUE(pu_now_ms() - t0 < 4000);
    PU_OK(c, "LOCK %s WAIT 0", names[0]);
    PU_INT(c, 1, "UNLOCK %s", names[0]);
    redisFree(c);
    redisFree(rc);
}

TEST(untold_unlock_in_hand)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "6000", "--upstream-timeout",
                                        "300", NULL};

    each_backend(scenario_unlock_in_hand, extra);
}

/* ---- 3. an UNLOCK past what the proxy can vouch for --------------------------- */

static void scenario_unlock_unvouched(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *c = pu_client(e), *s;
    redisReply *r;
    char d[256];

    PU_OK(c, "LOCK %s", "uv");
    s = redis_sleep(e, "3");
    pu_sleep_ms(LEASE_MS + 200); /* no renewal got through: the lease is over */
    r = pu_cmd(c, "UNLOCK %s", "uv");
    expect_lost(r, "UNLOCK past the lease");
    redisFree(s);
    /* Once Redis is back the name is free, and the retried UNLOCK is not
     * answered as if the hold were released in time. */
    PU_EVENTUALLY(!pu_exists(rc, "uv"), 5000);
    r = pu_cmd_until_served(c, "UNLOCK %s", "uv", 15000);
    if (!pu_is_err(r, "NOTOWNER") && !pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("retried UNLOCK: expected an error, got %s", pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
    PU_OK(c, "LOCK %s WAIT 0", "uv");
    PU_INT(c, 1, "UNLOCK %s", "uv");
    redisFree(c);
    redisFree(rc);
}

TEST(untold_unlock_unvouched)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1500", "--upstream-timeout",
                                        "300", NULL};

    each_backend(scenario_unlock_unvouched, extra);
}

/* ---- 4. semaphore releases Redis does not answer (issue 22) ------------------ */

/* SEM.RELEASE and PSEM.RELEASE while Redis sleeps past --upstream-timeout:
 * answered at once (+INHAND; :1 for the PSEM permit the proxy tracked),
 * and carried out by the proxy. The first sends sit in Redis's input and
 * run when it wakes; the proxy's resends then find their numbers run and
 * add nothing: the SEM count goes up by exactly what was released (KEEP
 * permits: no ledger record limits what a release adds). */
static void scenario_sem_in_hand(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *c = pu_client(e), *d = pu_client(e), *s;
    redisReply *r;
    char id[40];
    long long t0;

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s 3", "ih:s");
    PU_OK(c, "SEM.ACQUIRE %s 3 KEEP", "ih:s"); /* untracked: no record guards the count */
    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s 1", "ih:p");
    r = pu_cmd(c, "PSEM.ACQUIRE %s", "ih:p");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING && r->len == 32);
    snprintf(id, sizeof(id), "%s", r->str);
    freeReplyObject(r);
    s = redis_sleep(e, "1.5");
    t0 = pu_now_ms();
    PU_STR(c, "INHAND", "SEM.RELEASE %s 2", "ih:s");
    PU_STR(c, "INHAND", "SEM.RELEASE %s", "ih:s"); /* behind the first, in order */
    pu_expect_at(__FILE__, __LINE__, c, PU_K_INT, 1, NULL, "PSEM.RELEASE ih:p %s", id);
    ASSERT_TRUE(pu_now_ms() - t0 < 1400);
    redisFree(s);
    r = pu_cmd_until_served(d, "SEM.ACQUIRE %s 3 WAIT 5000", "ih:s", 15000);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    r = pu_cmd_until_served(d, "PSEM.ACQUIRE %s WAIT 5000", "ih:p", 15000);
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    fprintf(stderr, "semaphore releases carried out: taken again %lld ms after the release\n",
            pu_now_ms() - t0);
    pu_sleep_ms(1500); /* every resend has landed */
    ASSERT_EQ(pu_get_int(rc, "ih:s"), 0);
    ASSERT_TRUE(pu_info_int(c, "unlocks_in_hand") >= 3);
    redisFree(d);
    redisFree(c);
    redisFree(rc);
}

TEST(untold_sem_release_in_hand)
{
    static const char *const extra[] = {"--upstream-timeout", "300", NULL};

    each_backend(scenario_sem_in_hand, extra);
}

/* ---- 5. an UNLOCK of the last count Redis counts higher ------------------------ */

struct extra_kind {
    const char *lock, *unlock, *name;
    const char *suffix; /* appended to the owner field by the layout */
};

static const struct extra_kind extra_kinds[] = {
    {"LOCK %s OWNER xc", "UNLOCK %s OWNER xc", "xc-plain", ""},
    {"FAIRLOCK %s OWNER xc", "FAIRUNLOCK %s OWNER xc", "xc-fair", ""},
    {"WLOCK %s OWNER xc", "WUNLOCK %s OWNER xc", "xc-write", ":write"},
    {"RLOCK %s OWNER xc", "RUNLOCK %s OWNER xc", "xc-read", ""},
};

/* The client was told of one hold; Redis counts two (as after an
 * acknowledged UNLOCK a failover lost, or a re-entry of unknown outcome
 * that ran late: made here with HINCRBY). Its UNLOCK is the last release
 * it asks for: answered :1, and the name is free at once for another
 * client, not held (renewed) for ever with a ":0 still held". */
static void scenario_unlock_extra(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e);
    char uuid[64], field[160];
    redisReply *r;
    char d[256];
    size_t i;

    pu_proxy_uuid(a, uuid, sizeof(uuid));
    for (i = 0; i < sizeof(extra_kinds) / sizeof(extra_kinds[0]); i++) {
        const struct extra_kind *k = &extra_kinds[i];

        pu_expect_at(__FILE__, __LINE__, a, PU_K_STATUS, 0, "OK", k->lock, k->name);
        snprintf(field, sizeof(field), "%s:xc%s", uuid, k->suffix);
        freeReplyObject(pu_cmd(rc, "HINCRBY %s %s 1", k->name, field));
        r = pu_cmd(a, k->unlock, k->name);
        if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
            TEST_FAIL("%s: the last release asked for: expected :1, got %s", k->name,
                      pu_describe(r, d, sizeof(d)));
        freeReplyObject(r);
        PU_EVENTUALLY(!pu_exists(rc, k->name), 3000);
        pu_expect_at(__FILE__, __LINE__, b, PU_K_STATUS, 0, "OK", "LOCK %s WAIT 1000", k->name);
        pu_expect_at(__FILE__, __LINE__, b, PU_K_INT, 1, NULL, "UNLOCK %s", k->name);
    }
    redisFree(a);
    redisFree(b);
    redisFree(rc);
}

TEST(untold_unlock_last_count_released)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "30000", NULL};

    each_backend(scenario_unlock_extra, extra);
}

/* ---- 6. an UNLOCK after the lease ended, Redis granting afresh meanwhile ------ */

/* The client's fixed lease ran out (a tombstone: the UNLOCK answers
 * LOCKLOST); meanwhile Redis granted the owner the name afresh, as a
 * request of unknown outcome run late does (made here with HSET: count 1,
 * then 2). UNLOCK and MULTIUNLOCK answer LOCKLOST, never :1 ("released
 * your hold") or :0 ("still held"), and what Redis counts is given back. */
static void scenario_unlock_late_grant(struct pu_env *e)
{
    static const char *const unlocks[] = {"UNLOCK %s", "MULTIUNLOCK %s"};
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e);
    char uuid[64], field[160];
    redisReply *r = pu_cmd(a, "CLIENT ID");
    int i, count;

    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER);
    pu_proxy_uuid(a, uuid, sizeof(uuid));
    snprintf(field, sizeof(field), "%s:%lld", uuid, r->integer); /* the connection's owner */
    freeReplyObject(r);
    for (i = 0; i < 2; i++) {
        for (count = 1; count <= 2; count++) {
            PU_OK(a, "LOCK %s LEASE 300", "lg");
            pu_sleep_ms(450); /* the lease ran out: a tombstone */
            freeReplyObject(pu_cmd(rc, "HSET %s %s %d", "lg", field, count));
            freeReplyObject(pu_cmd(rc, "PEXPIRE %s 30000", "lg"));
            expect_lost(pu_cmd(a, unlocks[i], "lg"), unlocks[i]);
            /* nothing of the owner is left in Redis for long */
            PU_OK(b, "LOCK %s WAIT 2000", "lg");
            PU_INT(b, 1, "UNLOCK %s", "lg");
            /* and the owner's next LOCK is a fresh hold */
            PU_OK(a, "LOCK %s LEASE 5000", "lg");
            PU_INT(a, 1, "UNLOCK %s", "lg");
        }
    }
    redisFree(a);
    redisFree(b);
    redisFree(rc);
}

TEST(untold_unlock_after_lease_end_finds_late_grant)
{
    each_backend(scenario_unlock_late_grant, NULL);
}

/* ---- 7. an UNLOCK of a lost hold while Redis does not answer ------------------- */

/* The proxy found the hold lost (a renewal answered "not held": the key
 * was deleted behind its back) and pushed it; then Redis stops answering.
 * The holder's UNLOCK is answered LOCKLOST at once: Redis's answer could
 * not change that (nil, :1 or :0 of a lost hold all answer LOCKLOST). It
 * was "-UPSTREAM ... outcome unknown", retried by the client through the
 * outage without ever being told (torture seed 2, a P0 cut for 10 s). */
static void scenario_unlock_lost_unreachable(struct pu_env *e)
{
    static const char *const unlocks[] = {"UNLOCK %s", "MULTIUNLOCK %s"};
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e), *s;
    size_t i;

    for (i = 0; i < 2; i++) {
        PU_OK(a, "LOCK %s", "ul:k");
        freeReplyObject(pu_cmd(rc, "DEL %s", "ul:k"));
        pu_sleep_ms(LEASE_MS); /* a renewal found it gone: lost (pushed) */
        s = redis_sleep(e, "2");
        expect_lost(pu_cmd(a, unlocks[i], "ul:k"), unlocks[i]);
        redisFree(s);
        pu_sleep_ms(2200); /* Redis awake */
        PU_OK(b, "LOCK %s WAIT 4000", "ul:k");
        PU_INT(b, 1, "UNLOCK %s", "ul:k");
        PU_OK(a, "LOCK %s WAIT 2000", "ul:k"); /* a fresh hold */
        PU_INT(a, 1, "UNLOCK %s", "ul:k");
    }
    redisFree(a);
    redisFree(b);
    redisFree(rc);
}

TEST(untold_unlock_of_lost_hold_redis_unreachable)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1500", "--upstream-timeout",
                                        "300", NULL};

    each_backend(scenario_unlock_lost_unreachable, extra);
}

TEST_MAIN(TEST_CASE(untold_relock_after_loss), TEST_CASE(untold_unlock_in_hand),
          TEST_CASE(untold_unlock_unvouched), TEST_CASE(untold_sem_release_in_hand),
          TEST_CASE(untold_unlock_last_count_released),
          TEST_CASE(untold_unlock_after_lease_end_finds_late_grant),
          TEST_CASE(untold_unlock_of_lost_hold_redis_unreachable))
