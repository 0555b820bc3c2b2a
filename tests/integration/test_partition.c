/* Network partitions between a proxy and Redis (issue 18), made with the
 * userspace fault relay (relay_util.h): proxy P0's --upstream points at
 * the relay, proxy P1 talks to the same Redis directly. A partition pauses
 * both directions of every P0 <-> Redis connection (what was sent flows on
 * after the heal, as over a healed TCP cut); a heal with reset ends each
 * of them with RST instead. Both io backends.
 *
 * What must hold:
 * - during a partition an acquire through P0 answers -UPSTREAM within
 *   about --upstream-timeout, never +OK; after the heal P0 serves again and
 *   nothing it was not told of stays held (the name frees within a lease);
 * - a holder whose lease ran out during the partition, while a client of
 *   P1 took the lock, is not told it holds it (LOCK.INFO hold_count 0) and
 *   its UNLOCK answers -LOCKLOST;
 * - (issue 18 item 1, issue 22) an UNLOCK during the partition is carried
 *   out by the proxy while it still vouches for the lease (answered :1),
 *   and answered -LOCKLOST once the lease ran out (it was "outcome
 *   unknown", then NOTOWNER after the heal: never told);
 * - (issue 18 item 2) a LOCK re-sent on the same connection right after
 *   the heal does not turn the lost hold into a fresh one without telling
 *   the holder (it was +OK, :1, -NOTOWNER). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "relay_util.h"

#define LEASE_MS    1500 /* --lock-watchdog-timeout of both proxies */
#define UPSTREAM_MS 500  /* --upstream-timeout of both proxies */

struct penv {
    const char *backend;
    struct pu_redis redis;
    struct relay *relay;  /* P0 <-> Redis */
    struct pu_proxy p0;   /* through the relay */
    struct pu_proxy p1;   /* direct */
    redisContext *direct; /* straight to Redis */
    char lease[16], upto[16];
};

static void proxy_args(struct penv *e, struct pu_proxy *p, int upstream_port)
{
    const char *level = getenv("LP_IT_LOG_LEVEL");
    int i = 0;

    memset(p, 0, sizeof(*p));
    snprintf(p->upstream, sizeof(p->upstream), "redis://127.0.0.1:%d", upstream_port);
    p->extra[i++] = "--io";
    p->extra[i++] = e->backend;
    p->extra[i++] = "--log-level";
    p->extra[i++] = level && level[0] ? level : "debug";
    p->extra[i++] = "--lock-watchdog-timeout";
    p->extra[i++] = e->lease;
    p->extra[i++] = "--upstream-timeout";
    p->extra[i++] = e->upto;
    p->extra[i] = NULL;
}

static void penv_start(struct penv *e, const char *backend)
{
    memset(e, 0, sizeof(*e));
    e->backend = backend;
    snprintf(e->lease, sizeof(e->lease), "%d", LEASE_MS);
    snprintf(e->upto, sizeof(e->upto), "%d", UPSTREAM_MS);
    pu_redis_start(&e->redis);
    e->relay = relay_start(e->redis.port);
    if (!e->relay)
        TEST_FAIL("relay_start: %s", strerror(errno));
    proxy_args(e, &e->p0, relay_port(e->relay));
    proxy_args(e, &e->p1, e->redis.port);
    pu_proxy_start(&e->p0);
    pu_proxy_start(&e->p1);
    e->direct = pu_connect(e->redis.port);
}

static void penv_stop(struct penv *e)
{
    struct relay_stats st;

    relay_stats(e->relay, &st);
    fprintf(stderr, "relay: %lld connections relayed, %lld refused, %lld reset\n", st.accepted,
            st.refused, st.resets);
    redisFree(e->direct);
    pu_proxy_assert_alive(&e->p0);
    pu_proxy_assert_alive(&e->p1);
    pu_proxy_stop(&e->p0);
    pu_proxy_stop(&e->p1);
    relay_stop(e->relay);
    pu_redis_kill(&e->redis);
}

static void penv_run(const char *backend, void *arg)
{
    void (*scenario)(struct penv * e) = *(void (**)(struct penv *))arg;
    struct penv e;

    penv_start(&e, backend);
    scenario(&e);
    penv_stop(&e);
}

static void each_backend(void (*scenario)(struct penv *e))
{
    pu_for_each_backend(penv_run, &scenario);
}

/* The reply to fmt on c once the proxy serves again (anything but an
 * UPSTREAM error), for up to 15 s. */
static redisReply *once_served(redisContext *c, const char *fmt, const char *name)
{
    return pu_cmd_until_served(c, fmt, name, 15000);
}
/* Runs fmt (an acquire) through P0 during the partition: -UPSTREAM (or nil
 * for a WAIT that ran out), never +OK, within max_ms. */
static void expect_refused(redisContext *c, const char *fmt, const char *name, int max_ms)
{
    long long t0 = pu_now_ms(), dt;
    redisReply *r = pu_cmd(c, fmt, name);
    char d[320];

    dt = pu_now_ms() - t0;
    fprintf(stderr, "partitioned: \"%s\" -> %s in %lld ms\n", fmt, pu_describe(r, d, sizeof(d)),
            dt);
    if (!pu_is_err(r, "UPSTREAM") && r->type != REDIS_REPLY_NIL)
        TEST_FAIL("\"%s\" during a partition: expected -UPSTREAM, got %s", fmt, d);
    if (dt > max_ms)
        TEST_FAIL("\"%s\" during a partition took %lld ms (bound %d)", fmt, dt, max_ms);
    freeReplyObject(r);
}

/* Waits until name is gone from Redis (its lease ran out), up to ms. */
static void wait_expired(struct penv *e, const char *name, int ms)
{
    PU_EVENTUALLY(!pu_exists(e->direct, name), ms);
}

/* ---- acquires during a partition ------------------------------------------- */

/* Each acquire kind through P0, in a partition of its own (so that it is
 * the request in flight, answered "outcome unknown"), answers -UPSTREAM
 * within the upstream timeout (plus slack), never +OK; so does one sent
 * after it (P0 knows Redis is unreachable). After the heal (plain: the
 * paused request reaches Redis then; or with reset: it dies) P0 serves
 * again, and nothing the refused acquire may have left in Redis outlives a
 * lease: a client of P1 gets the name within it. */
static void scenario_acquire_refused(struct penv *e)
{
    static const char *const acq[] = {"LOCK %s",  "TRYLOCK %s", "LOCK %s FENCED",
                                      "WLOCK %s", "RLOCK %s",   "FAIRLOCK %s"};
    static const char *const names[] = {"pa:k", "pa:t", "pa:f", "pa:w", "pa:r", "pa:q"};
    static const char *const p1acq[] = {"LOCK %s WAIT %d",  "LOCK %s WAIT %d",
                                        "LOCK %s WAIT %d",  "WLOCK %s WAIT %d",
                                        "WLOCK %s WAIT %d", "FAIRLOCK %s WAIT %d"};
    static const char *const p1rel[] = {"UNLOCK %s",  "UNLOCK %s",  "UNLOCK %s",
                                        "WUNLOCK %s", "WUNLOCK %s", "FAIRUNLOCK %s"};
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    redisReply *r;

    for (size_t i = 0; i < sizeof(acq) / sizeof(acq[0]); i++) {
        bool reset = i % 2 == 1;
        long long t0;

        relay_partition(e->relay, false);
        expect_refused(a, acq[i], names[i], UPSTREAM_MS + 1000);
        expect_refused(a, "LOCK %s WAIT 300", "pa:other", UPSTREAM_MS + 1000);
        relay_heal(e->relay, reset);
        t0 = pu_now_ms();
        r = once_served(a, "LOCK %s", "pa:after");
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
        fprintf(stderr, "healed%s: P0 serves again after %lld ms\n", reset ? " with reset" : "",
                pu_now_ms() - t0);
        PU_INT(a, 1, "UNLOCK pa:after");
        r = pu_cmd(b, p1acq[i], names[i], LEASE_MS + 2000);
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
        r = pu_cmd(b, p1rel[i], names[i]);
        PU_CHECK(r, PU_K_INT, 1, NULL);
        freeReplyObject(r);
    }
    redisFree(a);
    redisFree(b);
}

TEST(acquire_during_partition_answers_upstream)
{
    each_backend(scenario_acquire_refused);
}

/* ---- a holder whose lease ran out during the partition ---------------------- */

/* A holds k through P0; the partition outlasts the lease; B takes k through
 * P1. After the heal A is not told it holds k: LOCK.INFO shows B's hold
 * (locked 1) and A's count 0, and A's UNLOCK answers -LOCKLOST. */
static void lease_lost_run(struct penv *e, bool reset)
{
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    struct pu_lockinfo li;
    redisReply *r;
    char d[320];

    PU_OK(a, "LOCK pl:k");
    relay_partition(e->relay, false);
    wait_expired(e, "pl:k", LEASE_MS + 3000);
    PU_OK(b, "LOCK pl:k WAIT 2000");
    relay_heal(e->relay, reset);
    freeReplyObject(once_served(a, "LOCK.INFO %s", "pl:k"));
    pu_lockinfo(a, &li, "LOCK.INFO pl:k");
    fprintf(stderr, "A after the heal%s: locked %lld hold_count %lld watchdog %lld owner %s\n",
            reset ? " (reset)" : "", li.locked, li.hold_count, li.watchdog, li.owner);
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.hold_count, 0);
    ASSERT_EQ(li.watchdog, 0);
    r = pu_cmd(a, "UNLOCK pl:k");
    if (!pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("A's UNLOCK after its lease ran out in a partition: expected -LOCKLOST, got %s",
                  pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
    PU_INT(b, 1, "UNLOCK pl:k");
    redisFree(a);
    redisFree(b);
}

static void scenario_lease_lost(struct penv *e)
{
    lease_lost_run(e, false);
    lease_lost_run(e, true);
}

TEST(lease_lost_during_partition_not_told_held)
{
    each_backend(scenario_lease_lost);
}

/* ---- issue 18 item 1 and issue 22: partition, then UNLOCK ------------------- */

/* A holds k through P0 and P0 is cut off. A's UNLOCK during the cut:
 * - sent while P0 still vouches for the lease: the release is P0's to
 *   carry out; A is answered :1 at once (the work under the lock was
 *   protected), and once the partition heals the release lands (or the
 *   lease has ended): B takes k;
 * - sent once the lease ran out (B took k through P1 meanwhile): A is
 *   answered -LOCKLOST, never "outcome unknown" then NOTOWNER. */
static void unlock_run(struct penv *e, bool reset)
{
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    redisReply *r;
    char d[320];

    r = once_served(a, "LOCK %s", "pu:k"); /* P0 may still reconnect after a reset */
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    relay_partition(e->relay, false);
    r = pu_cmd(a, "UNLOCK %s", "pu:k");
    pu_describe(r, d, sizeof(d));
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
        TEST_FAIL("A's UNLOCK within the lease, P0 cut off: expected :1 (carried out), got %s", d);
    freeReplyObject(r);
    relay_heal(e->relay, reset);
    PU_OK(b, "LOCK pu:k WAIT %d", LEASE_MS + 3000);
    PU_INT(b, 1, "UNLOCK pu:k");

    r = once_served(a, "LOCK %s", "pu:k");
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    relay_partition(e->relay, false);
    wait_expired(e, "pu:k", LEASE_MS + 3000);
    PU_OK(b, "LOCK pu:k WAIT 2000");
    r = pu_cmd(a, "UNLOCK %s", "pu:k");
    fprintf(stderr, "A's UNLOCK after its lease ran out in the partition%s: %s\n",
            reset ? " (reset)" : "", pu_describe(r, d, sizeof(d)));
    if (!pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("A's UNLOCK (lease lost in the partition, B holds): expected -LOCKLOST, got %s",
                  d);
    freeReplyObject(r);
    relay_heal(e->relay, reset);
    PU_INT(b, 1, "UNLOCK pu:k");
    redisFree(a);
    redisFree(b);
}

static void scenario_unlock(struct penv *e)
{
    unlock_run(e, false);
    unlock_run(e, true);
}

TEST(unlock_in_partition_then_lease_lost_is_told)
{
    each_backend(scenario_unlock);
}

/* ---- issue 18 item 2: re-lock right after a lost lease ------------------------ */

/* A holds k through P0; the partition outlasts the lease; B takes and
 * releases k through P1; right after the heal A sends LOCK k again on the
 * same connection, then UNLOCK k twice. A must be told its first hold was
 * lost somewhere in that sequence (the LOCK or an UNLOCK answers
 * -LOCKLOST): a re-entry must never turn a lost hold into a fresh one
 * silently. Today: +OK, :1, -NOTOWNER. */
static void relock_run(struct penv *e, bool reset)
{
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    redisReply *r[3];
    char d[3][320];
    bool told = false;

    PU_OK(a, "LOCK pr:k");
    relay_partition(e->relay, false);
    wait_expired(e, "pr:k", LEASE_MS + 3000);
    PU_OK(b, "LOCK pr:k WAIT 2000");
    PU_INT(b, 1, "UNLOCK pr:k");
    relay_heal(e->relay, reset);
    r[0] = once_served(a, "LOCK %s", "pr:k");
    r[1] = pu_cmd(a, "UNLOCK pr:k");
    r[2] = pu_cmd(a, "UNLOCK pr:k");
    for (int i = 0; i < 3; i++) {
        pu_describe(r[i], d[i], sizeof(d[i]));
        told = told || pu_is_err(r[i], "LOCKLOST");
        freeReplyObject(r[i]);
    }
    fprintf(stderr, "A re-locks after the heal%s: LOCK %s, UNLOCK %s, UNLOCK %s\n",
            reset ? " (reset)" : "", d[0], d[1], d[2]);
    if (!told)
        TEST_FAIL("A re-locked after losing its lease in a partition and was never told "
                  "(LOCK %s, UNLOCK %s, UNLOCK %s)",
                  d[0], d[1], d[2]);
    freeReplyObject(pu_cmd(a, "FORCEUNLOCK pr:k"));
    redisFree(a);
    redisFree(b);
}

static void scenario_relock(struct penv *e)
{
    relock_run(e, false);
    relock_run(e, true);
}

TEST(relock_after_lease_lost_in_partition_is_told)
{
    each_backend(scenario_relock);
}

/* reentries re-entries sent while the hold is still vouched for, caught
 * in the partition; the lease runs out meanwhile and a client of P1 takes
 * and releases the name; the re-entries are answered "outcome unknown"
 * (P0 runs with a 3 s upstream timeout here); at the heal the paused
 * re-entries reach Redis, the first takes the free name afresh, and A's
 * UNLOCK follows. The UNLOCK then releases that fresh grant (:1 from
 * Redis; torture.short.uring, seed 2, found "+OK, UPSTREAM outcome
 * unknown, :1" around another client's hold), or with two late grants
 * counts Redis down to 1 (:0, "still held"; simulator seed 8024167). Either
 * way the hold A was told of lapsed: A must be told LOCKLOST, and what is
 * left of the late grants given back. */
static void relock_in_flight_run(struct penv *e, int reentries)
{
    redisContext *a, *b = pu_connect(e->p1.port);
    redisReply *r;
    char d[320];
    int done = 0, i;

    pu_proxy_stop(&e->p0);
    snprintf(e->upto, sizeof(e->upto), "3000");
    proxy_args(e, &e->p0, relay_port(e->relay));
    pu_proxy_start(&e->p0);
    a = pu_connect(e->p0.port);
    r = once_served(a, "LOCK %s", "pf:k");
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    relay_partition(e->relay, false);
    for (i = 0; i < reentries; i++)
        redisAppendCommand(a, "LOCK %s WAIT 200", "pf:k");
    while (!done && redisBufferWrite(a, &done) == REDIS_OK)
        ;
    PU_OK(b, "LOCK %s WAIT %d", "pf:k", LEASE_MS + 3000);
    PU_INT(b, 1, "UNLOCK %s", "pf:k");
    for (i = 0; i < reentries; i++) {
        if (redisGetReply(a, (void **)&r) != REDIS_OK)
            TEST_FAIL("re-entry in the partition: %s", a->errstr);
        /* the second may find the hold lost by the first's outcome */
        if (!pu_is_err(r, "UPSTREAM") && !(i > 0 && pu_is_err(r, "LOCKLOST")))
            TEST_FAIL("re-entry %d in the partition: expected -UPSTREAM, got %s", i + 1,
                      pu_describe(r, d, sizeof(d)));
        freeReplyObject(r);
    }
    relay_heal(e->relay, false);
    pu_sleep_ms(50); /* the paused re-entries reach Redis first */
    done = 0;
    redisAppendCommand(a, "UNLOCK %s", "pf:k");
    while (!done && redisBufferWrite(a, &done) == REDIS_OK)
        ;
    if (redisGetReply(a, (void **)&r) != REDIS_OK)
        TEST_FAIL("UNLOCK across the heal: %s", a->errstr);
    fprintf(stderr, "%d re-entries, UNLOCK across the heal -> %s\n", reentries,
            pu_describe(r, d, sizeof(d)));
    if (!pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("the hold lapsed while a re-entry was in the partition: expected -LOCKLOST "
                  "at UNLOCK, got %s",
                  d);
    freeReplyObject(r);
    /* Both late grants were A's count in Redis: told LOCKLOST, A holds
     * nothing, so the proxy gives the rest back and B takes the name at
     * once, not at the end of the lease the UNLOCK renewed. */
    PU_OK(b, "LOCK %s WAIT %d", "pf:k", LEASE_MS - 300);
    PU_INT(b, 1, "UNLOCK %s", "pf:k");
    redisFree(a);
    redisFree(b);
    snprintf(e->upto, sizeof(e->upto), "%d", UPSTREAM_MS);
}

static void scenario_relock_in_flight(struct penv *e)
{
    relock_in_flight_run(e, 1);
    relock_in_flight_run(e, 2); /* Redis counts 2: the UNLOCK finds :0 */
}

TEST(relock_in_flight_then_lease_lost_is_told)
{
    each_backend(scenario_relock_in_flight);
}

/* ---- issue 22: semaphore releases during a partition ---------------------------- */

/* A's permit id of a PSEM acquire through P0, once P0 serves. */
static void psem_take(redisContext *a, const char *fmt, const char *name, char *id, size_t cap)
{
    redisReply *r = once_served(a, fmt, name);
    char d[320];

    if (r->type != REDIS_REPLY_STRING || r->len != 32)
        TEST_FAIL("\"%s\": expected a permit id, got %s", fmt, pu_describe(r, d, sizeof(d)));
    snprintf(id, cap, "%s", r->str);
    freeReplyObject(r);
}

/* A takes both permits of a SEM, a tracked PSEM permit and a KEEP one
 * through P0; P0 is cut off; A releases all three. Each release is the
 * proxy's to carry out (it was -UPSTREAM, and with a reset heal the
 * permits stayed taken while A's connection lived): SEM.RELEASE answers
 * +INHAND, the tracked PSEM permit :1, the KEEP one +INHAND, at once.
 * After the heal B takes everything through P1 within moments, and the
 * SEM count shows the release added once (the paused first send and the
 * proxy's resend both reach Redis when the heal is not a reset). */
static void sem_release_run(struct penv *e, bool reset)
{
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    char idp[40], idk[40];
    redisReply *r;
    long long t0;

    r = once_served(a, "SEM.TRYSETPERMITS %s 2", "ps:s");
    freeReplyObject(r);
    PU_OK(a, "SEM.ACQUIRE %s 2", "ps:s");
    PU_INT(a, 1, "PSEM.TRYSETPERMITS %s 1", "ps:p");
    PU_INT(a, 1, "PSEM.TRYSETPERMITS %s 1", "ps:k");
    psem_take(a, "PSEM.ACQUIRE %s", "ps:p", idp, sizeof(idp));
    psem_take(a, "PSEM.ACQUIRE %s KEEP", "ps:k", idk, sizeof(idk));
    relay_partition(e->relay, false);
    t0 = pu_now_ms();
    PU_STR(a, "INHAND", "SEM.RELEASE %s 2", "ps:s");
    pu_expect_at(__FILE__, __LINE__, a, PU_K_INT, 1, NULL, "PSEM.RELEASE ps:p %s", idp);
    pu_expect_at(__FILE__, __LINE__, a, PU_K_STR, 0, "INHAND", "PSEM.RELEASE ps:k %s", idk);
    fprintf(stderr, "partitioned: 3 semaphore releases answered in %lld ms\n", pu_now_ms() - t0);
    ASSERT_TRUE(pu_now_ms() - t0 < 3 * UPSTREAM_MS + 1500);
    relay_heal(e->relay, reset);
    t0 = pu_now_ms();
    PU_OK(b, "SEM.ACQUIRE %s 2 WAIT 5000", "ps:s");
    r = pu_cmd(b, "PSEM.ACQUIRE %s WAIT 5000", "ps:p");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = pu_cmd(b, "PSEM.ACQUIRE %s WAIT 5000", "ps:k");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    fprintf(stderr, "healed%s: B took every released permit %lld ms after the heal\n",
            reset ? " with reset" : "", pu_now_ms() - t0);
    pu_sleep_ms(1500);                           /* any resend still due has landed */
    ASSERT_EQ(pu_get_int(e->direct, "ps:s"), 0); /* released once, not twice */
    PU_INT(b, 0, "PSEM.AVAILABLE %s", "ps:p");
    redisFree(a);
    redisFree(b);
    freeReplyObject(pu_cmd(e->direct, "DEL ps:s ps:p ps:k {ps:p}:timeout {ps:k}:timeout"));
}

static void scenario_sem_release(struct penv *e)
{
    sem_release_run(e, false);
    sem_release_run(e, true);
}

TEST(sem_release_in_partition_carried_out)
{
    each_backend(scenario_sem_release);
}

/* ---- issue 22: releases on disconnect during a partition ------------------------ */

/* A holds a lock of every kind (with LEASE 60000, so only a release frees
 * them in time), two SEM permits and a PSEM permit through P0; P0 is cut
 * off and A's connection closes. The releases P0 sends then never reach
 * Redis (the heal resets the connections); P0 sends them again once it
 * can, and B takes every name through P1 within moments of the heal, not
 * after a minute. */
static void disconnect_run(struct penv *e, bool reset)
{
    static const char *const locks[] = {"LOCK %s LEASE 60000", "FAIRLOCK %s LEASE 60000",
                                        "WLOCK %s LEASE 60000", "RLOCK %s LEASE 60000",
                                        "MULTILOCK %s pd:m2 LEASE 60000"};
    static const char *const takes[] = {"LOCK %s WAIT 5000", "FAIRLOCK %s WAIT 5000",
                                        "WLOCK %s WAIT 5000", "WLOCK %s WAIT 5000",
                                        "MULTILOCK %s pd:m2 WAIT 5000"};
    static const char *const names[] = {"pd:plain", "pd:fair", "pd:write", "pd:read", "pd:m1"};
    redisContext *a = pu_connect(e->p0.port), *b = pu_connect(e->p1.port);
    char id[40];
    redisReply *r;
    long long t0;
    size_t i;

    r = once_served(a, "SEM.TRYSETPERMITS %s 2", "pd:s");
    freeReplyObject(r);
    for (i = 0; i < 5; i++)
        pu_expect_at(__FILE__, __LINE__, a, PU_K_STATUS, 0, "OK", locks[i], names[i]);
    PU_OK(a, "SEM.ACQUIRE %s 2", "pd:s");
    PU_INT(a, 1, "PSEM.TRYSETPERMITS %s 1", "pd:p");
    psem_take(a, "PSEM.ACQUIRE %s", "pd:p", id, sizeof(id));
    relay_partition(e->relay, false);
    redisFree(a);
    pu_sleep_ms(UPSTREAM_MS + 500); /* P0's releases timed out or were refused */
    relay_heal(e->relay, reset);
    t0 = pu_now_ms();
    for (i = 0; i < 5; i++)
        pu_expect_at(__FILE__, __LINE__, b, PU_K_STATUS, 0, "OK", takes[i], names[i]);
    PU_OK(b, "SEM.ACQUIRE %s 2 WAIT 5000", "pd:s");
    r = pu_cmd(b, "PSEM.ACQUIRE %s WAIT 5000", "pd:p");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    fprintf(stderr, "healed%s: B took every name a closed connection held %lld ms after the heal\n",
            reset ? " with reset" : "", pu_now_ms() - t0);
    ASSERT_TRUE(pu_now_ms() - t0 < 5000);
    redisFree(b); /* P1 gives everything back */
    PU_EVENTUALLY(!pu_exists(e->direct, "pd:plain"), 3000);
    freeReplyObject(pu_cmd(e->direct, "DEL pd:s pd:p {pd:p}:timeout"));
}

static void scenario_disconnect(struct penv *e)
{
    disconnect_run(e, false);
    disconnect_run(e, true);
}

TEST(disconnect_in_partition_released_after_heal)
{
    each_backend(scenario_disconnect);
}

TEST_MAIN(TEST_CASE(acquire_during_partition_answers_upstream),
          TEST_CASE(lease_lost_during_partition_not_told_held),
          TEST_CASE(unlock_in_partition_then_lease_lost_is_told),
          TEST_CASE(relock_after_lease_lost_in_partition_is_told),
          TEST_CASE(relock_in_flight_then_lease_lost_is_told),
          TEST_CASE(sem_release_in_partition_carried_out),
          TEST_CASE(disconnect_in_partition_released_after_heal))
