/* Lock-safety regressions (issue 9, found by an outside fault test), each
 * against a real redis-server and on both io backends:
 * - a grant that reaches the proxy after its lease ran out (the proxy was
 *   stopped meanwhile) is refused, not answered +OK, for every lock kind
 *   and for leased permits;
 * - a holder's own re-entry does not queue behind other waiters;
 * - an acquire and a release pipelined in one write keep the proxy's holds
 *   right (no false "lease lost" at the next renewal);
 * - the releases of a closed connection survive an upstream reconnect;
 * - an acquire answered "outcome unknown" is rolled back once Redis
 *   answers, for every kind;
 * - semaphore permits released by another connection are not returned a
 *   second time when their taker disconnects;
 * - the same OWNER token used by two ACL users names two owners.
 * Redis runs with DEBUG enabled (DEBUG SLEEP freezes it on demand). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"
#include "sync_util.h"

#define LEASE_MS 1500 /* --lock-watchdog-timeout of the late-grant scenario */

/* ---- environment ------------------------------------------------------------ */

static void each_backend(void (*scenario)(struct pu_env *e), const char *const *extra)
{
    ou_each_backend_debug(scenario, "debug", extra);
}

/* Freezes Redis for secs seconds (DEBUG SLEEP sent on its own connection,
 * reply not awaited); returns that connection, to free afterwards. */
static redisContext *redis_sleep(struct pu_env *e, const char *secs)
{
    redisContext *s = pu_redis_client(e);

    pu_send(s, "DEBUG SLEEP %s", secs);
    pu_sleep_ms(100); /* Redis is asleep once it read the command */
    return s;
}

/* Fails the test if a reply arrives on c within ms (c waits on). */
static void expect_no_reply(redisContext *c, int ms, const char *what)
{
    redisReply *r = pu_try_recv(c, ms);
    char d[256];

    if (r)
        TEST_FAIL("%s: got %s while another client holds it", what, pu_describe(r, d, sizeof(d)));
}

static void expect_reply(redisContext *c, int ms, enum pu_kind kind, const char *s)
{
    redisReply *r = pu_try_recv(c, ms);

    if (!r)
        TEST_FAIL("no reply within %d ms", ms);
    PU_CHECK(r, kind, 0, s);
    freeReplyObject(r);
}

/* The reply of c's earlier command: a bulk string (e.g. a permit id), copied. */
static void recv_str(redisContext *c, int ms, char *buf, size_t n)
{
    redisReply *r = pu_try_recv(c, ms);
    char d[256];

    if (!r || r->type != REDIS_REPLY_STRING)
        TEST_FAIL("expected a bulk string, got %s", r ? pu_describe(r, d, sizeof(d)) : "nothing");
    snprintf(buf, n, "%s", r->str);
    freeReplyObject(r);
}

/* ---- 1. a grant that arrives after its lease ran out ------------------------ */

/* Clients of proxy P0 ask for k (LOCK), w (WLOCK), f (FAIRLOCK) and a permit
 * of p (PSEM, LEASE) while Redis sleeps; P0 is stopped before Redis wakes and
 * grants them. Their leases run out while P0 is stopped, clients of P1 take
 * every one, and P0 is resumed: its clients must not be told they hold
 * what P1's clients hold. They keep waiting, and get it once P1's let go. */
static void scenario_late_grant(struct pu_env *e)
{
    static const char *const acq[4] = {"LOCK %s", "WLOCK %s", "FAIRLOCK %s", "PSEM.ACQUIRE %s"};
    static const char *const other[4] = {"LOCK %s WAIT %d", "WLOCK %s WAIT %d",
                                         "FAIRLOCK %s WAIT %d", "PSEM.ACQUIRE %s WAIT %d"};
    static const char *const names[4] = {"k", "w", "f", "p"};
    struct pu_proxy p1;
    redisContext *a[4], *b[4], *s, *c0, *c1;
    char permit[64], lease[16];
    int i;

    ou_second_proxy(e, &p1);
    c0 = pu_client(e);
    c1 = pu_connect(p1.port);
    PU_INT(c0, 1, "PSEM.TRYSETPERMITS %s %d", "p", 1);
    for (i = 0; i < 4; i++) {
        a[i] = pu_client(e);
        b[i] = pu_connect(p1.port);
        PU_STR(a[i], "PONG", "PING");
    }
    snprintf(lease, sizeof(lease), "%d", LEASE_MS);
    s = redis_sleep(e, "1");
    for (i = 0; i < 3; i++)
        pu_send(a[i], acq[i], names[i]);
    pu_send(a[3], "PSEM.ACQUIRE %s LEASE %s", names[3], lease);
    pu_sleep_ms(300); /* P0 has sent them to Redis */
    ASSERT_EQ(kill(e->proxy.pid, SIGSTOP), 0);
    /* Redis wakes and grants P0's clients; their leases run out; P1's
     * clients get everything. */
    for (i = 0; i < 3; i++)
        PU_OK(b[i], other[i], names[i], 8000);
    pu_send(b[3], other[3], names[3], 8000);
    recv_str(b[3], 10000, permit, sizeof(permit));
    pu_sleep_ms(300);
    ASSERT_EQ(kill(e->proxy.pid, SIGCONT), 0);
    for (i = 0; i < 4; i++)
        expect_no_reply(a[i], i == 0 ? 1500 : 100, names[i]);
    ASSERT_TRUE(pu_info_int(c0, "late_grants_refused") >= 4);
    /* They are still waiting, and get it once P1's clients let go. */
    PU_INT(b[0], 1, "UNLOCK %s", "k");
    PU_INT(b[1], 1, "WUNLOCK %s", "w");
    PU_INT(b[2], 1, "FAIRUNLOCK %s", "f");
    PU_INT(b[3], 1, "PSEM.RELEASE %s %s", "p", permit);
    for (i = 0; i < 3; i++)
        expect_reply(a[i], 10000, PU_K_STATUS, "OK");
    recv_str(a[3], 10000, permit, sizeof(permit));
    PU_INT(a[0], 1, "UNLOCK %s", "k");
    PU_INT(a[1], 1, "WUNLOCK %s", "w");
    PU_INT(a[2], 1, "FAIRUNLOCK %s", "f");
    PU_INT(a[3], 1, "PSEM.RELEASE %s %s", "p", permit);
    for (i = 0; i < 4; i++) {
        redisFree(a[i]);
        redisFree(b[i]);
    }
    redisFree(s);
    redisFree(c1);
    redisFree(c0);
    pu_proxy_stop(&p1);
}

TEST(safety_late_grant_refused)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1500", NULL};

    each_backend(scenario_late_grant, extra);
}

/* Redis runs a LEASE 1000 acquire after a 1.5 s stall: its lease counts
 * from then in Redis, but from the send for the client, so the grant comes
 * with nothing left of it. The proxy refuses it and gives the lock back
 * while Redis still has it (counted as rolled back: Redis had it); a LOCK
 * with WAIT left tries again and gets a lease of its own. */
static void scenario_late_rollback(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e), *s;
    redisReply *r;

    PU_STR(a, "PONG", "PING");
    PU_STR(b, "PONG", "PING");
    s = redis_sleep(e, "1.5");
    pu_send(a, "TRYLOCK %s LEASE %d", "t1", 1000);
    pu_send(b, "LOCK %s LEASE %d WAIT %d", "t2", 1000, 8000);
    r = pu_recv(a);
    if (!pu_is_err(r, "UPSTREAM Redis answered too late")) {
        char d[256];

        TEST_FAIL("TRYLOCK granted after its lease: expected -UPSTREAM ... too late, got %s",
                  pu_describe(r, d, sizeof(d)));
    }
    freeReplyObject(r);
    expect_reply(b, 8000, PU_K_STATUS, "OK");
    ASSERT_TRUE(pu_pttl(rc, "t2") > 0);
    PU_INT(b, 1, "UNLOCK %s", "t2");
    ASSERT_TRUE(pu_info_int(a, "late_grants_refused") >= 2);
    ASSERT_TRUE(pu_info_int(a, "unknown_outcomes_rolled_back") >= 2);
    redisFree(s);
    redisFree(b);
    redisFree(a);
    redisFree(rc);
}

TEST(safety_late_grant_rolled_back)
{
    each_backend(scenario_late_rollback, NULL);
}

/* A holder's LEASE re-entry with a shorter lease that Redis runs after a
 * stall: the grant comes too late and is refused, and its count rolled
 * back, but Redis ran its PEXPIRE too. The hold the client was told of
 * (10 s) must keep its lease in Redis: no other client may take the lock
 * while it lasts. Found by the simulator (lp_sim --seed 2 --no-faults). */
static void scenario_late_reentry(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e), *s;
    redisReply *r;

    PU_OK(a, "LOCK %s LEASE %d", "t3", 10000);
    PU_STR(b, "PONG", "PING");
    s = redis_sleep(e, "1.5");
    pu_send(a, "TRYLOCK %s LEASE %d", "t3", 1000);
    r = pu_recv(a);
    if (!pu_is_err(r, "UPSTREAM Redis answered too late")) {
        char d[256];

        TEST_FAIL("re-entry granted after its lease: expected -UPSTREAM ... too late, got %s",
                  pu_describe(r, d, sizeof(d)));
    }
    freeReplyObject(r);
    /* The roll-back lands (count 1 again); the lease must be the LOCK's. */
    PU_EVENTUALLY(pu_info_int(a, "unknown_outcomes_rolled_back") >= 1, 3000);
    pu_sleep_ms(100);
    ASSERT_TRUE(pu_pttl(rc, "t3") > 5000);
    pu_sleep_ms(1200); /* past the refused re-entry's 1000 ms */
    PU_NIL(b, "TRYLOCK %s", "t3");
    PU_INT(a, 1, "UNLOCK %s", "t3");
    redisFree(s);
    redisFree(b);
    redisFree(a);
    redisFree(rc);
}

TEST(safety_late_reentry_keeps_lease)
{
    each_backend(scenario_late_reentry, NULL);
}

/* An UNLOCK of a re-entered LEASE hold whose reply times out (Redis
 * frozen past --upstream-timeout) is answered :0 by the proxy, which
 * carries it out; :0 says, as Redis's does, that the lease runs again from
 * the unlock. The proxy must count it from there too: past the acquire's
 * lease but within the unlock's, the hold is still the client's (no lease
 * lost), and its UNLOCK releases it. Found by the simulator (lp_sim --seed
 * 5021025 --no-faults). */
static void scenario_inhand_unlock_lease(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *s;
    long long lost0, inhand0;

    PU_OK(a, "LOCK %s LEASE %d", "t4", 2000);
    PU_OK(a, "LOCK %s LEASE %d", "t4", 2000);
    lost0 = pu_info_int(a, "leases_lost");
    inhand0 = pu_info_int(a, "unlocks_in_hand");
    pu_sleep_ms(700);
    s = redis_sleep(e, "1");         /* 800 ms in: Redis frozen until about 1800 */
    PU_INT(a, 0, "UNLOCK %s", "t4"); /* answered in hand at about 1300: lease to 2800 */
    ASSERT_EQ(pu_info_int(a, "unlocks_in_hand"), inhand0 + 1);
    pu_sleep_ms(1000); /* about 2300: past the acquires' lease, within the unlock's */
    ASSERT_EQ(pu_info_int(a, "leases_lost"), lost0);
    ASSERT_TRUE(pu_pttl(rc, "t4") > 0);
    PU_INT(a, 1, "UNLOCK %s", "t4");
    ASSERT_EQ(pu_info_int(a, "leases_lost"), lost0);
    redisFree(s);
    redisFree(a);
    redisFree(rc);
}

TEST(safety_inhand_unlock_keeps_lease)
{
    static const char *const extra[] = {"--upstream-timeout", "500", NULL};

    each_backend(scenario_inhand_unlock_lease, extra);
}

/* ---- 2. a holder's re-entry does not queue behind waiters ------------------- */

/* One variant: the commands of the holder a and the waiter b (hiredis
 * formats without arguments). */
struct reentry {
    const char *name;     /* the lock */
    const char *lock;     /* a's LOCK */
    const char *lockwait; /* a's re-entry with WAIT */
    const char *unlock;   /* a's UNLOCK */
    const char *other;    /* b's LOCK */
    const char *unlock_b; /* b's UNLOCK */
    bool fenced;          /* acquires answer a token */
};

static void reentry_variant(struct pu_env *e, redisContext *rc, const struct reentry *v)
{
    redisContext *a = pu_client(e), *b = pu_client(e);
    int want = v->fenced ? REDIS_REPLY_INTEGER : REDIS_REPLY_STATUS;
    char chan[128];
    redisReply *r;

    pu_channel(v->name, chan, sizeof(chan));
    r = pu_cmd(a, v->lock);
    ASSERT_EQ(r->type, want);
    freeReplyObject(r);
    pu_send(b, v->other);
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 3000);
    pu_sleep_ms(200); /* the proxy has seen the subscription confirmed */
    r = pu_cmd(a, v->lockwait);
    if (r->type == REDIS_REPLY_NIL)
        TEST_FAIL("\"%s\" by the holder waited behind another waiter", v->lockwait);
    ASSERT_EQ(r->type, want);
    freeReplyObject(r);
    PU_INT(a, 0, v->unlock);
    PU_INT(a, 1, v->unlock);
    r = pu_try_recv(b, 10000);
    ASSERT_TRUE(r && r->type == want);
    freeReplyObject(r);
    PU_INT(b, 1, v->unlock_b);
    redisFree(b);
    redisFree(a);
}

static void scenario_reentry(struct pu_env *e)
{
    static const struct reentry vs[] = {
        {"re1", "LOCK re1", "LOCK re1 WAIT 5000", "UNLOCK re1", "LOCK re1", "UNLOCK re1", false},
        {"re2", "LOCK re2 FENCED", "LOCK re2 FENCED WAIT 5000", "UNLOCK re2", "LOCK re2 FENCED",
         "UNLOCK re2", true},
        {"re3", "LOCK re3 OWNER tok", "LOCK re3 OWNER tok WAIT 5000", "UNLOCK re3 OWNER tok",
         "LOCK re3 OWNER other", "UNLOCK re3 OWNER other", false},
    };
    redisContext *rc = pu_redis_client(e);

    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++)
        reentry_variant(e, rc, &vs[i]);
    redisFree(rc);
}

TEST(safety_reentry_not_queued)
{
    each_backend(scenario_reentry, NULL);
}

/* ---- 3. acquire and release pipelined in one write ------------------------- */

/* Sends acquire and release in one write; checks both replies. */
static void pipelined_pair(redisContext *c, const char *acq, const char *rel, const char *name,
                           enum pu_kind kind)
{
    redisReply *r;

    ASSERT_EQ(redisAppendCommand(c, acq, name), REDIS_OK);
    ASSERT_EQ(redisAppendCommand(c, rel, name), REDIS_OK);
    r = pu_recv(c);
    if (kind == PU_K_INT) /* a fencing token */
        ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    else
        PU_CHECK(r, kind, 0, "OK");
    freeReplyObject(r);
    r = pu_recv(c);
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
}

static void scenario_pipelined(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c1 = pu_client(e), *c2 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    redisReply *r;
    int i;

    pipelined_pair(c, "LOCK %s WAIT 0", "UNLOCK %s", "q1", PU_K_STATUS);
    pipelined_pair(c, "TRYLOCK %s", "UNLOCK %s", "q2", PU_K_STATUS);
    pipelined_pair(c, "TRYLOCK %s LEASE 5000", "UNLOCK %s", "q3", PU_K_STATUS);
    pipelined_pair(c, "LOCK %s FENCED WAIT 0", "UNLOCK %s", "q4", PU_K_INT);
    pipelined_pair(c, "RLOCK %s WAIT 0", "RUNLOCK %s", "q5", PU_K_STATUS);
    pipelined_pair(c, "WLOCK %s WAIT 0", "WUNLOCK %s", "q6", PU_K_STATUS);
    pipelined_pair(c, "FAIRLOCK %s WAIT 0", "FAIRUNLOCK %s", "q7", PU_K_STATUS);
    /* Re-entry: two acquires, two releases. */
    for (i = 0; i < 2; i++)
        ASSERT_EQ(redisAppendCommand(c, "LOCK %s WAIT 0", "q8"), REDIS_OK);
    for (i = 0; i < 2; i++)
        ASSERT_EQ(redisAppendCommand(c, "UNLOCK %s", "q8"), REDIS_OK);
    for (i = 0; i < 4; i++) {
        r = pu_recv(c);
        if (i < 2)
            PU_CHECK(r, PU_K_STATUS, 0, "OK");
        else
            PU_CHECK(r, PU_K_INT, i - 2, NULL);
        freeReplyObject(r);
    }
    /* One OWNER token on two connections, the release sent before the
     * acquire's reply came: whatever Redis decided, the proxy agrees. */
    for (i = 0; i < 40; i++) {
        pu_send(c1, "LOCK %s OWNER %s WAIT 0", "q9", "tok");
        pu_send(c2, "UNLOCK %s OWNER %s", "q9", "tok");
        r = pu_recv(c1);
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
        r = pu_recv(c2);
        if (r->type == REDIS_REPLY_ERROR) /* NOTOWNER: it ran first */
            PU_INT(c2, 1, "UNLOCK %s OWNER %s", "q9", "tok");
        else
            PU_CHECK(r, PU_K_INT, 1, NULL);
        freeReplyObject(r);
    }
    pu_sleep_ms(1000); /* five renewal periods */
    ASSERT_EQ(pu_info_int(c, "leases_lost"), 0);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    ASSERT_EQ(pu_dbsize(rc), 1); /* q4's fencing counter only */
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
    redisFree(c);
}

TEST(safety_pipelined_acquire_release)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "600", NULL};

    each_backend(scenario_pipelined, extra);
}

/* ---- 5. releases of closed connections survive a reconnect ------------------- */

/* Redis drops the proxy's command connections, and a client holding
 * something closes at once: what it held comes back anyway. */
static void kill_and_close(redisContext *rc, redisContext *c)
{
    redisReply *r = pu_cmd(rc, "CLIENT KILL TYPE %s SKIPME %s", "normal", "yes");

    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
    freeReplyObject(r);
    redisFree(c);
}

static void scenario_disconnect_release(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *o = pu_client(e), *c;
    char name[32];
    int i;

    for (i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "dx%d", i);
        c = pu_client(e);
        PU_OK(c, "LOCK %s", name);
        kill_and_close(rc, c);
        PU_EVENTUALLY(!pu_exists(rc, name), 8000);
    }
    PU_INT(o, 1, "SEM.TRYSETPERMITS %s %d", "ds", 2);
    c = pu_client(e);
    PU_OK(c, "SEM.ACQUIRE %s", "ds");
    kill_and_close(rc, c);
    PU_EVENTUALLY(pu_get_int(rc, "ds") == 2, 8000);
    PU_INT(o, 1, "PSEM.TRYSETPERMITS %s %d", "dp", 1);
    c = pu_client(e);
    freeReplyObject(pu_cmd(c, "PSEM.ACQUIRE %s", "dp"));
    kill_and_close(rc, c);
    PU_EVENTUALLY(pu_get_int(rc, "dp") == 1, 8000);
    ASSERT_TRUE(pu_info_int(o, "disconnect_releases") >= 5);
    redisFree(o);
    redisFree(rc);
}

TEST(safety_disconnect_release_retried)
{
    each_backend(scenario_disconnect_release, NULL);
}

/* ---- 6. an acquire whose outcome is unknown is rolled back ----------------- */

/* Sends cmd on c and checks it fails as "outcome unknown". */
static void expect_unknown(redisContext *c)
{
    redisReply *r = pu_recv(c);
    char d[256];

    if (!pu_is_err(r, "UPSTREAM") || !strstr(r->str, "outcome unknown"))
        TEST_FAIL("expected -UPSTREAM ... outcome unknown, got %s", pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
}

static long long zcard(redisContext *rc, const char *key)
{
    return pu_int_reply(rc, "ZCARD", key);
}

static void scenario_unknown_outcome(struct pu_env *e)
{
    static const char *const cmds[] = {"LOCK %s",       "LOCK %s",     "RLOCK %s",
                                       "WLOCK %s",      "FAIRLOCK %s", "PSEM.ACQUIRE %s",
                                       "LOCK %s FENCED"};
    static const char *const names[] = {"uk", "uk2", "ur", "uw", "uf", "up", "ut"};
    enum { N = 7 };
    redisContext *rc = pu_redis_client(e), *o = pu_client(e), *c[N], *h, *s;
    redisReply *r;
    int i;

    PU_INT(o, 1, "PSEM.TRYSETPERMITS %s %d", "up", 1);
    h = pu_client(e);
    PU_OK(h, "LOCK %s", "uh"); /* held: its re-entry will be unknown */
    for (i = 0; i < N; i++) {
        c[i] = pu_client(e);
        PU_STR(c[i], "PONG", "PING");
    }
    s = redis_sleep(e, "1.5");
    for (i = 0; i < N; i++)
        pu_send(c[i], cmds[i], names[i]);
    pu_send(h, "LOCK %s", "uh");
    for (i = 0; i < N; i++)
        expect_unknown(c[i]);
    expect_unknown(h);
    /* The client retries at once: it must get the lock with one hold. */
    r = pu_cmd_until_served(c[0], "LOCK %s", "uk", 15000);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    PU_INT(c[0], 1, "UNLOCK %s", "uk");
    /* The holder's unknown re-entry is undone: one UNLOCK frees it. */
    PU_INT(h, 1, "UNLOCK %s", "uh");
    /* Nobody retries the others: they are rolled back all the same, long
     * before a 30 s lease ends. */
    /* Left: the semaphore's count and the fencing counter. */
    PU_EVENTUALLY(pu_dbsize(rc) == 2, 10000);
    ASSERT_EQ(pu_get_int(rc, "up"), 1);
    ASSERT_EQ(zcard(rc, "{up}:timeout"), 0);
    PU_EVENTUALLY(!pu_exists(rc, "uh") && !pu_exists(rc, "uk"), 5000);
    /* (unknown_outcomes_rolled_back counts the roll-backs whose reply came:
     * one sent while the connection died undoes as well, unseen.) */
    ASSERT_TRUE(pu_info_int(o, "unknown_outcomes") >= N + 1);
    for (i = 0; i < N; i++)
        redisFree(c[i]);
    redisFree(h);
    redisFree(s);
    redisFree(o);
    redisFree(rc);
}

TEST(safety_unknown_outcome_rolled_back)
{
    static const char *const extra[] = {"--upstream-timeout", "500", NULL};

    each_backend(scenario_unknown_outcome, extra);
}

/* ---- 7. permits released by another connection are not returned twice ------ */

static void scenario_sem_release_by_other(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e), *o = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    long long until;

    PU_INT(o, 1, "SEM.TRYSETPERMITS %s %d", "s", 3);
    PU_OK(a, "SEM.ACQUIRE %s %d", "s", 2);
    PU_INT(b, 3, "SEM.RELEASE %s %d", "s", 2);
    redisFree(a);
    for (until = pu_now_ms() + 1000; pu_now_ms() < until; pu_sleep_ms(20))
        ASSERT_LE(pu_get_int(rc, "s"), 3);
    ASSERT_EQ(pu_get_int(rc, "s"), 3);
    ASSERT_EQ(pu_info_int(o, "sem_permits_released_for_others"), 2);

    /* Two takers, a third releases: the oldest taking is what went back. */
    a = pu_client(e);
    PU_OK(a, "SEM.ACQUIRE %s %d", "s", 2);
    PU_OK(b, "SEM.ACQUIRE %s %d", "s", 1);
    PU_INT(o, 2, "SEM.RELEASE %s %d", "s", 2);
    redisFree(a);
    redisFree(b);
    for (until = pu_now_ms() + 1000; pu_now_ms() < until; pu_sleep_ms(20))
        ASSERT_LE(pu_get_int(rc, "s"), 3);
    ASSERT_EQ(pu_get_int(rc, "s"), 3);
    redisFree(rc);
    redisFree(o);
}

TEST(safety_sem_release_by_other)
{
    each_backend(scenario_sem_release_by_other, NULL);
}

/* ---- 8. an OWNER token names a holder within one user ---------------------- */

static void scenario_owner_per_user(struct pu_env *e)
{
    redisContext *u1 = ou_client_auth(e, "u1", "p1"), *u2 = ou_client_auth(e, "u2", "p2");
    struct pu_lockinfo li;
    char uuid[64], want[256];

    PU_OK(u1, "LOCK %s OWNER %s", "n1", "worker-1");
    PU_NIL(u2, "LOCK %s OWNER %s WAIT 0", "n1", "worker-1");
    PU_ERR(u2, "NOTOWNER", "UNLOCK %s OWNER %s", "n1", "worker-1");
    pu_lockinfo(u1, &li, "LOCK.INFO %s OWNER %s", "n1", "worker-1");
    ASSERT_EQ(li.hold_count, 1);
    pu_proxy_uuid(u1, uuid, sizeof(uuid));
    snprintf(want, sizeof(want), "%s:u1@worker-1", uuid);
    ASSERT_STREQ(li.owner, want);
    PU_INT(u1, 1, "UNLOCK %s OWNER %s", "n1", "worker-1");
    PU_OK(u2, "LOCK %s OWNER %s WAIT 0", "n1", "worker-1");
    PU_INT(u2, 1, "UNLOCK %s OWNER %s", "n1", "worker-1");
    redisFree(u2);
    redisFree(u1);
}

TEST(safety_owner_token_per_user)
{
    static const char *const extra[] = {"--user", "u1 on >p1 ~n*", "--user", "u2 on >p2 ~n*", NULL};

    each_backend(scenario_owner_per_user, extra);
}

TEST_MAIN(TEST_CASE(safety_late_grant_refused), TEST_CASE(safety_late_grant_rolled_back),
          TEST_CASE(safety_late_reentry_keeps_lease), TEST_CASE(safety_inhand_unlock_keeps_lease),
          TEST_CASE(safety_reentry_not_queued), TEST_CASE(safety_pipelined_acquire_release),
          TEST_CASE(safety_disconnect_release_retried),
          TEST_CASE(safety_unknown_outcome_rolled_back), TEST_CASE(safety_sem_release_by_other),
          TEST_CASE(safety_owner_token_per_user))
