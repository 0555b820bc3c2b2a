/* Semaphore commands of lockproxy against a real redis-server: SEM.* over
 * Redisson's RSemaphore layout (a STRING count at the raw name, the new
 * count published on redisson_sc:{name}) and PSEM.* over
 * RPermitExpirableSemaphore (count + "{name}:timeout" ZSET of raw 16-byte
 * ids scored by expiry, sentinel 922337203685477). Checks the replies, the
 * exact keys, values and messages left in Redis, the counting invariant
 * under many concurrent clients, prompt wake-ups, one upstream
 * subscription per channel, permits returned when a connection closes
 * (not with KEEP), clean timeouts, interop with a client writing the
 * layout directly, and bad input. Both io backends. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"
#include "sync_util.h"

#define SENTINEL    "922337203685477"
#define NUM_CLIENTS 60
#define NUM_WAITERS 50

/* Keys in Redis other than the proxies' own records (pu_dbsize). */
static long long sem_keys(redisContext *rc)
{
    return pu_dbsize(rc);
}

static void hex_to_raw(const char *hex, unsigned char *raw)
{
    for (int i = 0; i < 16; i++) {
        unsigned v;

        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            TEST_FAIL("bad hex id %s", hex);
        raw[i] = (unsigned char)v;
    }
}

/* PSEM.ACQUIRE (fmt) that must return a 32-hex id, copied to id. */
static void psem_acquire(redisContext *c, char *id, const char *fmt, const char *name)
{
    redisReply *r = pu_cmd(c, fmt, name);
    char got[320];

    if (r->type != REDIS_REPLY_STRING || r->len != 32 || strspn(r->str, "0123456789abcdef") != 32)
        TEST_FAIL("%s: expected a 32-hex permit id, got %s", fmt, pu_describe(r, got, sizeof(got)));
    memcpy(id, r->str, 33);
    freeReplyObject(r);
}

/* ---- SEM: replies, layout, messages ---------------------------------------- */

static void scenario_sem_basic(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_sc:*");

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "s1", 3);
    su_expect_msg(sub, "redisson_sc:{s1}", "3");
    PU_STR(rc, "string", "TYPE %s", "s1");
    ASSERT_EQ(pu_get_int(rc, "s1"), 3);
    ASSERT_EQ(pu_pttl(rc, "s1"), -1);
    PU_INT(c, 0, "SEM.TRYSETPERMITS %s %d", "s1", 10);
    ASSERT_EQ(pu_get_int(rc, "s1"), 3);

    PU_OK(c, "SEM.TRYACQUIRE %s", "s1");
    PU_OK(c, "SEM.ACQUIRE %s %d", "s1", 2);
    ASSERT_EQ(pu_get_int(rc, "s1"), 0);
    PU_NIL(c, "SEM.TRYACQUIRE %s", "s1");
    PU_NIL(c, "SEM.ACQUIRE %s WAIT 0", "s1");
    PU_INT(c, 0, "SEM.AVAILABLE %s", "s1");
    su_expect_no_msg(sub, 100); /* acquiring never publishes */

    PU_INT(c, 2, "SEM.RELEASE %s %d", "s1", 2);
    su_expect_msg(sub, "redisson_sc:{s1}", "2");
    PU_INT(c, 3, "SEM.RELEASE %s", "s1");
    su_expect_msg(sub, "redisson_sc:{s1}", "3");
    PU_INT(c, 5, "SEM.ADDPERMITS %s %d", "s1", 2);
    su_expect_msg(sub, "redisson_sc:{s1}", "5");
    PU_INT(c, 4, "SEM.ADDPERMITS %s %d", "s1", -1);
    su_expect_no_msg(sub, 100); /* a decrease does not publish */
    PU_INT(c, 4, "SEM.AVAILABLE %s", "s1");
    PU_INT(c, 4, "SEM.DRAIN %s", "s1");
    ASSERT_EQ(pu_get_int(rc, "s1"), 0);
    PU_INT(c, 0, "SEM.DRAIN %s", "s1");
    /* addPermits may go below zero (Redisson allows it); never published. */
    PU_INT(c, -2, "SEM.ADDPERMITS %s %d", "s1", -2);
    PU_INT(c, 1, "SEM.ADDPERMITS %s %d", "s1", 3);
    su_expect_msg(sub, "redisson_sc:{s1}", "1");
    /* Counts are written in canonical form (INCRBY refuses "007"). */
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %s", "s0", "007");
    PU_STR(rc, "7", "GET %s", "s0");
    PU_INT(c, 8, "SEM.RELEASE %s", "s0");
    su_expect_msg(sub, "redisson_sc:{s0}", "7");
    su_expect_msg(sub, "redisson_sc:{s0}", "8");
    PU_INT(rc, 1, "DEL %s", "s0");
    PU_INT(c, 0, "SEM.DRAIN %s", "missing");
    PU_INT(c, 0, "SEM.AVAILABLE %s", "missing");
    ASSERT_TRUE(!pu_exists(rc, "missing"));

    /* Braces are added to the channel only when the name has no '{'. */
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "a{t}b", 1);
    su_expect_msg(sub, "redisson_sc:a{t}b", "1");
    ASSERT_EQ(pu_get_int(rc, "a{t}b"), 1);
    ASSERT_EQ(sem_keys(rc), 2); /* s1 and a{t}b: nothing else */
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

/* ---- counting invariant under contention ---------------------------------- */

struct cc_state {
    const char *name;      /* semaphore name */
    bool psem;             /* PSEM.* instead of SEM.* */
    int limit;             /* permits */
    atomic_int inside;     /* clients holding a permit now */
    atomic_int max_inside; /* highest inside seen */
    atomic_int violations; /* inside > limit seen */
};

static void cc_enter(struct cc_state *s)
{
    int now = atomic_fetch_add(&s->inside, 1) + 1;

    if (now > s->limit)
        atomic_fetch_add(&s->violations, 1);
    su_atomic_max(&s->max_inside, now);
    usleep(500);
    atomic_fetch_sub(&s->inside, 1);
}

static bool cc_round(void *arg, int i, redisContext *c)
{
    struct cc_state *s = arg;
    redisReply *r = redisCommand(c, s->psem ? "PSEM.ACQUIRE %s" : "SEM.ACQUIRE %s", s->name);
    char id[40] = "";
    bool ok = r && (s->psem ? r->type == REDIS_REPLY_STRING && r->len == 32
                            : r->type == REDIS_REPLY_STATUS);

    (void)i;
    if (ok && s->psem)
        memcpy(id, r->str, 33);
    if (r)
        freeReplyObject(r);
    if (!ok)
        return false;
    cc_enter(s);
    r = s->psem ? redisCommand(c, "PSEM.RELEASE %s %s", s->name, id)
                : redisCommand(c, "SEM.RELEASE %s", s->name);
    ok = r && r->type == REDIS_REPLY_INTEGER && (!s->psem || r->integer == 1);
    if (r)
        freeReplyObject(r);
    return ok;
}

/* NUM_CLIENTS clients, limit permits: never more than limit inside. */
static void counting_check(struct pu_env *e, const char *name, bool psem, int limit)
{
    struct cc_state s = {.name = name, .psem = psem, .limit = limit};
    const struct su_clients spec = {&e->proxy.port, 1, NUM_CLIENTS, 8, cc_round, &s};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);

    PU_INT(c, 1, psem ? "PSEM.TRYSETPERMITS %s %d" : "SEM.TRYSETPERMITS %s %d", name, limit);
    ASSERT_EQ(su_clients_run(&spec), 0);
    ASSERT_EQ(atomic_load(&s.violations), 0);
    ASSERT_LE(atomic_load(&s.max_inside), limit);
    ASSERT_TRUE(atomic_load(&s.max_inside) >= 1);
    ASSERT_TRUE(pu_info_int(c, "wakeup_messages") > 0); /* clients did wait */
    /* Every permit came back, and nothing is left tracked or waiting. */
    PU_EVENTUALLY(pu_get_int(rc, name) == limit, 3000);
    PU_EVENTUALLY(pu_info_int(c, psem ? "psem_waiters" : "sem_waiters") == 0, 3000);
    ASSERT_EQ(pu_info_int(c, psem ? "psem_permits_tracked" : "sem_permits_tracked"), 0);
    redisFree(rc);
    redisFree(c);
}

static void scenario_sem_counting(struct pu_env *e)
{
    counting_check(e, "cnt", false, 4);
}

static void scenario_psem_counting(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e);

    counting_check(e, "pcnt", true, 3);
    PU_INT(rc, 0, "ZCARD %s", "{pcnt}:timeout");
    redisFree(rc);
}

/* ---- wake-ups and the shared subscription ---------------------------------- */

static void scenario_sem_wakeup(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);
    const char *const forms[] = {"SEM.ACQUIRE %s", "SEM.ACQUIRE %s WAIT 8000",
                                 "SEM.ACQUIRE %s 1 WAIT 8000 KEEP"};

    PU_INT(c1, 1, "SEM.TRYSETPERMITS %s %d", "w", 1);
    for (int i = 0; i < 3; i++) {
        long long t0;

        PU_OK(c1, "SEM.ACQUIRE %s", "w");
        pu_send(c2, forms[i], "w");
        ASSERT_NULL(pu_try_recv(c2, 300));
        t0 = pu_now_ms();
        PU_INT(c1, 1, "SEM.RELEASE %s", "w");
        su_expect_ok_within(c2, 5000);
        if (pu_now_ms() - t0 >= 1000)
            TEST_FAIL("waiter woke %lld ms after SEM.RELEASE", pu_now_ms() - t0);
        PU_INT(c2, 1, "SEM.RELEASE %s", "w");
    }
    redisFree(c2);
    redisFree(c1);
}

/* 50 waiters share one upstream subscription; a release of 50 wakes all
 * of them; closing their connections returns their permits. */
static void scenario_sem_one_subscription(struct pu_env *e)
{
    redisContext *w[NUM_WAITERS], *c = pu_client(e), *rc = pu_redis_client(e);

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "os", 0);
    for (int i = 0; i < NUM_WAITERS; i++) {
        w[i] = pu_client(e);
        pu_send(w[i], "SEM.ACQUIRE %s", "os");
    }
    PU_EVENTUALLY(pu_info_int(c, "sem_waiters") == NUM_WAITERS, 5000);
    PU_EVENTUALLY(su_numsub(rc, "redisson_sc:{os}") == 1, 3000);
    pu_sleep_ms(100);
    ASSERT_EQ(su_numsub(rc, "redisson_sc:{os}"), 1);

    PU_INT(c, NUM_WAITERS, "SEM.RELEASE %s %d", "os", NUM_WAITERS);
    for (int i = 0; i < NUM_WAITERS; i++)
        su_expect_ok_within(w[i], 5000);
    ASSERT_EQ(pu_get_int(rc, "os"), 0);
    ASSERT_EQ(pu_info_int(c, "sem_waiters"), 0);
    ASSERT_EQ(pu_info_int(c, "sem_permits_tracked"), NUM_WAITERS);
    for (int i = 0; i < NUM_WAITERS; i++)
        redisFree(w[i]);
    PU_EVENTUALLY(pu_get_int(rc, "os") == NUM_WAITERS, 3000);
    PU_EVENTUALLY(pu_info_int(c, "sem_permits_tracked") == 0, 3000);
    redisFree(rc);
    redisFree(c);
}

/* ---- connection-bound permits ------------------------------------------------ */

static void scenario_sem_disconnect(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_sc:*");
    redisContext *c2 = pu_client(e), *c3 = pu_client(e), *c4 = pu_client(e);

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "dc", 5);
    su_expect_msg(sub, "redisson_sc:{dc}", "5");

    /* Took 2, released 1: the other one comes back when c2 closes. */
    PU_OK(c2, "SEM.ACQUIRE %s %d", "dc", 2);
    PU_INT(c2, 4, "SEM.RELEASE %s", "dc");
    su_expect_msg(sub, "redisson_sc:{dc}", "4");
    redisFree(c2);
    PU_EVENTUALLY(pu_get_int(rc, "dc") == 5, 3000);
    su_expect_msg(sub, "redisson_sc:{dc}", "5");

    /* KEEP: not returned. */
    PU_OK(c3, "SEM.TRYACQUIRE %s %d KEEP", "dc", 2);
    redisFree(c3);
    pu_sleep_ms(300);
    ASSERT_EQ(pu_get_int(rc, "dc"), 3);
    su_expect_no_msg(sub, 100);

    /* Releasing more than you took is allowed; nothing is left tracked. */
    PU_OK(c4, "SEM.ACQUIRE %s", "dc");
    PU_INT(c4, 5, "SEM.RELEASE %s %d", "dc", 3);
    su_expect_msg(sub, "redisson_sc:{dc}", "5");
    redisFree(c4);
    pu_sleep_ms(300);
    ASSERT_EQ(pu_get_int(rc, "dc"), 5);
    su_expect_no_msg(sub, 100);

    /* A deleted semaphore is not re-created by a return. */
    c2 = pu_client(e);
    PU_OK(c2, "SEM.ACQUIRE %s", "dc");
    PU_INT(rc, 1, "DEL %s", "dc");
    redisFree(c2);
    pu_sleep_ms(300);
    ASSERT_TRUE(!pu_exists(rc, "dc"));
    PU_EVENTUALLY(pu_info_int(c, "sem_permits_tracked") == 0, 3000);
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

/* A waiter whose WAIT runs out, or whose connection closes, leaves
 * nothing behind. */
static void scenario_sem_timeout(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long t0, elapsed;

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "to", 1);
    PU_OK(c, "SEM.ACQUIRE %s", "to");
    t0 = pu_now_ms();
    PU_NIL(c2, "SEM.ACQUIRE %s WAIT %d", "to", 300);
    elapsed = pu_now_ms() - t0;
    ASSERT_TRUE(elapsed >= 250 && elapsed < 3000);
    PU_NIL(c2, "SEM.ACQUIRE %s %d WAIT %d", "to", 1, 100);
    ASSERT_EQ(pu_get_int(rc, "to"), 0);
    ASSERT_EQ(pu_dbsize(rc), 2); /* the count, and who took the permit: {to}:lp-permits:<uuid> */
    ASSERT_EQ(pu_info_int(c, "sem_waiters"), 0);
    ASSERT_TRUE(pu_info_int(c, "sem_wait_timeouts") >= 2);
    ASSERT_EQ(pu_info_int(c, "sem_permits_tracked"), 1);

    /* A waiter that disconnects: the wait ends, nothing is taken. */
    pu_send(c2, "SEM.ACQUIRE %s", "to");
    PU_EVENTUALLY(pu_info_int(c, "sem_waiters") == 1, 3000);
    redisFree(c2);
    PU_EVENTUALLY(pu_info_int(c, "sem_waiters") == 0, 3000);
    PU_INT(c, 1, "SEM.RELEASE %s", "to");
    pu_sleep_ms(100);
    ASSERT_EQ(pu_get_int(rc, "to"), 1);
    ASSERT_EQ(sem_keys(rc), 1); /* the record went with the release */
    ASSERT_EQ(pu_info_int(c, "sem_permits_tracked"), 0);
    redisFree(rc);
    redisFree(c);
}

/* A blocking SEM.ACQUIRE is a barrier on its connection; the one-attempt
 * forms are not. */
static void scenario_sem_pipeline(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e);
    redisReply *r;

    PU_INT(c2, 1, "SEM.TRYSETPERMITS %s %d", "pl", 0);
    pu_send(c, "SEM.ACQUIRE %s", "pl");
    pu_send(c, "SEM.AVAILABLE %s", "pl");
    ASSERT_NULL(pu_try_recv(c, 300));
    PU_INT(c2, 1, "SEM.RELEASE %s", "pl");
    su_expect_ok_within(c, 5000);
    r = pu_try_recv(c, 3000);
    PU_CHECK(r, PU_K_INT, 0, NULL); /* ran after the acquire */
    freeReplyObject(r);

    pu_send(c, "SEM.TRYACQUIRE %s", "pl");
    pu_send(c, "SEM.ACQUIRE %s WAIT 0", "pl");
    pu_send(c, "SEM.AVAILABLE %s", "pl");
    for (int i = 0; i < 2; i++) {
        r = pu_try_recv(c, 3000);
        PU_CHECK(r, PU_K_NIL, 0, NULL);
        freeReplyObject(r);
    }
    r = pu_try_recv(c, 3000);
    PU_CHECK(r, PU_K_INT, 0, NULL);
    freeReplyObject(r);
    redisFree(c2);
    redisFree(c);
}

/* ---- interop with a client writing Redisson's layout directly -------------- */

static void scenario_sem_interop(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    long long t0;

    /* Java: trySetPermits(1), then acquire() takes it. */
    PU_OK(rc, "SET %s %d", "io", 1);
    PU_INT(rc, 0, "DECRBY %s %d", "io", 1);
    PU_NIL(c, "SEM.TRYACQUIRE %s", "io");
    pu_send(c, "SEM.ACQUIRE %s", "io");
    PU_EVENTUALLY(su_numsub(rc, "redisson_sc:{io}") == 1, 3000);
    ASSERT_NULL(pu_try_recv(c, 300));
    /* Java: release() = INCRBY + PUBLISH the new count. */
    t0 = pu_now_ms();
    PU_INT(rc, 1, "INCRBY %s %d", "io", 1);
    PU_INT(rc, 1, "PUBLISH %s %d", "redisson_sc:{io}", 1);
    su_expect_ok_within(c, 5000);
    if (pu_now_ms() - t0 >= 1000)
        TEST_FAIL("waiter woke %lld ms after the Redisson release", pu_now_ms() - t0);
    ASSERT_EQ(pu_get_int(rc, "io"), 0);

    /* A release that never publishes (a lost message) costs a re-check
     * interval, not a hang. */
    pu_send(c, "SEM.ACQUIRE %s WAIT %d", "io", 10000);
    ASSERT_NULL(pu_try_recv(c, 300));
    t0 = pu_now_ms();
    PU_INT(rc, 1, "INCRBY %s %d", "io", 1);
    su_expect_ok_within(c, 8000);
    ASSERT_TRUE(pu_now_ms() - t0 < 5000);
    redisFree(rc);
    redisFree(c);
}

/* ---- bad input ---------------------------------------------------------------- */

static void scenario_sem_bad_input(struct pu_env *e)
{
    static const char *const cmds[] = {
        "SEM.ACQUIRE %s",          "SEM.TRYACQUIRE %s", "SEM.RELEASE %s",
        "SEM.AVAILABLE %s",        "SEM.DRAIN %s",      "SEM.ADDPERMITS %s 1",
        "SEM.TRYSETPERMITS %s 1",  "PSEM.ACQUIRE %s",   "PSEM.AVAILABLE %s",
        "PSEM.TRYSETPERMITS %s 1",
    };
    static const char *const names[] = {"lockhash", "text", "alist"};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    long long t0;

    PU_INT(rc, 1, "HSET %s %s 1", "lockhash", "7f1c2d3e-0000-4000-8000-000000000001:1");
    PU_OK(rc, "SET %s %s", "text", "abc");
    PU_INT(rc, 1, "RPUSH %s %s", "alist", "x");
    for (size_t n = 0; n < 3; n++) {
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
            PU_ERR(c, "WRONGTYPE", cmds[i], names[n]);
    }
    ASSERT_EQ(pu_hget_int(rc, "lockhash", "7f1c2d3e-0000-4000-8000-000000000001:1"), 1);
    PU_STR(rc, "abc", "GET %s", "text");
    PU_INT(rc, 1, "LLEN %s", "alist");

    PU_ERR(c, "ERR permits must be a positive integer, got 'x'", "SEM.ACQUIRE %s %s", "b", "x");
    PU_ERR(c, "ERR permits must be a positive integer, got '0'", "SEM.ACQUIRE %s 0", "b");
    PU_ERR(c, "ERR permits must be a positive integer, got '-2'", "SEM.RELEASE %s -2", "b");
    PU_ERR(c, "ERR permits must be a non-negative integer, got '-1'", "SEM.TRYSETPERMITS %s -1",
           "b");
    PU_ERR(c, "ERR permits must be an integer, got '1.5'", "SEM.ADDPERMITS %s 1.5", "b");
    PU_ERR(c, "ERR permits must be at most 2147483647, got '9999999999'",
           "SEM.TRYSETPERMITS %s 9999999999", "b");
    PU_ERR(c, "ERR WAIT must be a non-negative integer (ms), got '-5'", "SEM.ACQUIRE %s WAIT -5",
           "b");
    PU_ERR(c, "ERR WAIT must be a non-negative integer (ms), got 'soon'",
           "SEM.ACQUIRE %s 2 WAIT soon", "b");
    PU_ERR(c, "ERR option 'WAIT' needs a value", "SEM.ACQUIRE %s 1 WAIT", "b");
    PU_ERR(c, "ERR SEM.TRYACQUIRE takes no WAIT", "SEM.TRYACQUIRE %s WAIT 5", "b");
    PU_ERR(c, "ERR syntax error near 'FOO'", "SEM.ACQUIRE %s 1 FOO", "b");
    PU_ERR(c, "ERR LEASE must be at least 10 ms, got '0'", "PSEM.ACQUIRE %s LEASE 0", "b");
    PU_ERR(c, "ERR LEASE must be a non-negative integer (ms), got '-3'", "PSEM.ACQUIRE %s LEASE -3",
           "b");
    PU_ERR(c, "ERR permit id must be 32 hex characters, got 'zz'", "PSEM.RELEASE %s zz", "b");
    PU_ERR(c, "ERR wrong number of arguments", "SEM.TRYSETPERMITS %s", "b");
    PU_ERR(c, "ERR name must be", "SEM.AVAILABLE %s", "");

    /* An uninitialised semaphore fails at once (no useless wait). */
    t0 = pu_now_ms();
    PU_ERR(c, "NOTINIT", "SEM.ACQUIRE %s WAIT %d", "b", 5000);
    PU_ERR(c, "NOTINIT", "SEM.TRYACQUIRE %s", "b");
    PU_ERR(c, "NOTINIT", "PSEM.ACQUIRE %s WAIT %d", "b", 5000);
    ASSERT_TRUE(pu_now_ms() - t0 < 2000);
    ASSERT_EQ(pu_dbsize(rc), 3); /* nothing created */

    /* A permit set that is not a ZSET. */
    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s 1", "pz");
    PU_OK(rc, "SET %s %s", "{pz}:timeout", "x");
    PU_ERR(c, "WRONGTYPE", "PSEM.ACQUIRE %s", "pz");
    ASSERT_EQ(pu_get_int(rc, "pz"), 1);
    redisFree(rc);
    redisFree(c);
}

/* ---- PSEM ---------------------------------------------------------------------- */

static void scenario_psem_basic(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisContext *sub = pu_psubscribe(e, "redisson_sc:*");
    char id1[40], id2[40];
    unsigned char raw1[16], raw2[16];
    long long before, score;
    redisReply *r;

    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s %d", "pz", 2);
    su_expect_msg(sub, "redisson_sc:{pz}", "2");
    PU_INT(c, 0, "PSEM.TRYSETPERMITS %s %d", "pz", 5);
    psem_acquire(c, id1, "PSEM.ACQUIRE %s", "pz");
    hex_to_raw(id1, raw1);
    ASSERT_EQ(pu_get_int(rc, "pz"), 1);
    r = pu_cmd(rc, "ZRANGE %s 0 -1 WITHSCORES", "{pz}:timeout");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(r->element[0]->len, 16);
    ASSERT_TRUE(memcmp(r->element[0]->str, raw1, 16) == 0);
    ASSERT_STREQ(r->element[1]->str, SENTINEL);
    freeReplyObject(r);

    before = pu_wall_ms();
    psem_acquire(c, id2, "PSEM.TRYACQUIRE %s LEASE 5000", "pz");
    hex_to_raw(id2, raw2);
    r = pu_cmd(rc, "ZSCORE %s %b", "{pz}:timeout", raw2, (size_t)16);
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    score = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    ASSERT_TRUE(score >= before + 4900 && score <= pu_wall_ms() + 5100);
    PU_INT(c, 0, "PSEM.AVAILABLE %s", "pz");
    PU_NIL(c, "PSEM.ACQUIRE %s WAIT 0", "pz");
    PU_NIL(c, "PSEM.TRYACQUIRE %s", "pz");
    su_expect_no_msg(sub, 100);

    PU_INT(c, 1, "PSEM.RELEASE %s %s", "pz", id1);
    su_expect_msg(sub, "redisson_sc:{pz}", "1");
    PU_ERR(c, "NOPERMIT", "PSEM.RELEASE %s %s", "pz", id1);
    PU_INT(c, 1, "PSEM.AVAILABLE %s", "pz");
    PU_INT(rc, 1, "ZCARD %s", "{pz}:timeout");
    PU_INT(c, 1, "PSEM.RELEASE %s %s", "pz", id2);
    su_expect_msg(sub, "redisson_sc:{pz}", "2");
    PU_INT(rc, 0, "EXISTS %s", "{pz}:timeout");
    ASSERT_EQ(pu_get_int(rc, "pz"), 2);
    ASSERT_EQ(pu_dbsize(rc), 1);

    /* A name with a hash tag: no braces added to the aux key or channel. */
    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s %d", "a{t}b", 1);
    su_expect_msg(sub, "redisson_sc:a{t}b", "1");
    psem_acquire(c, id1, "PSEM.ACQUIRE %s", "a{t}b");
    PU_INT(rc, 1, "ZCARD %s", "a{t}b:timeout");
    redisFree(sub);
    redisFree(rc);
    redisFree(c);
}

/* Leased permits expire and are reclaimed by the next user; a waiter
 * polls at the earliest expiry, since nobody publishes then. */
static void scenario_psem_lease(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char id1[40], id2[40];
    long long t0, elapsed;

    PU_INT(c1, 1, "PSEM.TRYSETPERMITS %s %d", "pl", 1);
    psem_acquire(c1, id1, "PSEM.ACQUIRE %s LEASE 300", "pl");
    t0 = pu_now_ms();
    psem_acquire(c2, id2, "PSEM.ACQUIRE %s WAIT 5000", "pl");
    elapsed = pu_now_ms() - t0;
    ASSERT_TRUE(elapsed >= 200 && elapsed < 2000);
    PU_ERR(c1, "NOPERMIT", "PSEM.RELEASE %s %s", "pl", id1); /* reclaimed */
    PU_INT(c2, 1, "PSEM.RELEASE %s %s", "pl", id2);

    /* Expired but not reclaimed yet: the release returns it, reply 0. */
    psem_acquire(c1, id1, "PSEM.ACQUIRE %s LEASE 100", "pl");
    pu_sleep_ms(300);
    PU_INT(c1, 0, "PSEM.RELEASE %s %s", "pl", id1);
    ASSERT_EQ(pu_get_int(rc, "pl"), 1);
    PU_INT(rc, 0, "EXISTS %s", "{pl}:timeout");

    /* Timing out leaves nothing. */
    psem_acquire(c1, id1, "PSEM.ACQUIRE %s", "pl");
    PU_NIL(c2, "PSEM.ACQUIRE %s WAIT %d", "pl", 200);
    PU_INT(rc, 1, "ZCARD %s", "{pl}:timeout");
    ASSERT_EQ(pu_get_int(rc, "pl"), 0);
    ASSERT_EQ(pu_info_int(c2, "psem_waiters"), 0);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_psem_disconnect(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e), *c2 = pu_client(e);
    char id[40];

    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s %d", "pd", 3);
    psem_acquire(c2, id, "PSEM.ACQUIRE %s", "pd");
    psem_acquire(c2, id, "PSEM.ACQUIRE %s LEASE 60000", "pd");
    psem_acquire(c2, id, "PSEM.ACQUIRE %s KEEP", "pd");
    ASSERT_EQ(pu_get_int(rc, "pd"), 0);
    ASSERT_EQ(pu_info_int(c, "psem_permits_tracked"), 2);
    redisFree(c2);
    PU_EVENTUALLY(pu_get_int(rc, "pd") == 2, 3000);
    PU_INT(rc, 1, "ZCARD %s", "{pd}:timeout"); /* the KEEP permit */
    PU_EVENTUALLY(pu_info_int(c, "psem_permits_tracked") == 0, 3000);
    PU_INT(c, 1, "PSEM.RELEASE %s %s", "pd", id);
    ASSERT_EQ(pu_get_int(rc, "pd"), 3);
    redisFree(rc);
    redisFree(c);
}

/* A Redisson client takes a permit (DECRBY + ZADD) and releases it
 * (ZREM + INCRBY + PUBLISH): the proxy's waiter wakes. */
static void scenario_psem_interop(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    const unsigned char raw[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    char id[40];
    long long t0;

    PU_OK(rc, "SET %s %d", "pi", 1);
    PU_INT(rc, 0, "DECRBY %s %d", "pi", 1);
    PU_INT(rc, 1, "ZADD %s %s %b", "{pi}:timeout", SENTINEL, raw, (size_t)16);
    pu_send(c, "PSEM.ACQUIRE %s", "pi");
    PU_EVENTUALLY(su_numsub(rc, "redisson_sc:{pi}") == 1, 3000);
    ASSERT_NULL(pu_try_recv(c, 300));
    t0 = pu_now_ms();
    PU_INT(rc, 1, "ZREM %s %b", "{pi}:timeout", raw, (size_t)16);
    PU_INT(rc, 1, "INCRBY %s %d", "pi", 1);
    PU_INT(rc, 1, "PUBLISH %s %d", "redisson_sc:{pi}", 1);
    {
        redisReply *r = pu_try_recv(c, 5000);

        ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING && r->len == 32);
        memcpy(id, r->str, 33);
        freeReplyObject(r);
    }
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    PU_INT(c, 1, "PSEM.RELEASE %s %s", "pi", id);
    redisFree(rc);
    redisFree(c);
}

TEST(sem_basic)
{
    pu_each_backend(scenario_sem_basic, NULL);
}

TEST(sem_counting)
{
    pu_each_backend(scenario_sem_counting, NULL);
}

TEST(sem_wakeup)
{
    pu_each_backend(scenario_sem_wakeup, NULL);
}

TEST(sem_one_subscription)
{
    pu_each_backend(scenario_sem_one_subscription, NULL);
}

TEST(sem_disconnect)
{
    pu_each_backend(scenario_sem_disconnect, NULL);
}

TEST(sem_timeout)
{
    pu_each_backend(scenario_sem_timeout, NULL);
}

TEST(sem_pipeline)
{
    pu_each_backend(scenario_sem_pipeline, NULL);
}

TEST(sem_interop)
{
    pu_each_backend(scenario_sem_interop, NULL);
}

TEST(sem_bad_input)
{
    pu_each_backend(scenario_sem_bad_input, NULL);
}

TEST(psem_basic)
{
    pu_each_backend(scenario_psem_basic, NULL);
}

TEST(psem_counting)
{
    pu_each_backend(scenario_psem_counting, NULL);
}

TEST(psem_lease)
{
    pu_each_backend(scenario_psem_lease, NULL);
}

TEST(psem_disconnect)
{
    pu_each_backend(scenario_psem_disconnect, NULL);
}

TEST(psem_interop)
{
    pu_each_backend(scenario_psem_interop, NULL);
}

/* ---- SEM.RELEASE after an acquire whose outcome is unknown (issue 18) ------- */

/* Redis (DEBUG enabled) and the proxy with --upstream-timeout 500 on
 * backend. */
static void unknown_env_start(struct pu_env *e, const char *backend)
{
    static const char *const args[] = {"--upstream-timeout", "500", NULL};

    memset(e, 0, sizeof(*e));
    e->redis.extra[0] = "--enable-debug-command";
    e->redis.extra[1] = "yes";
    pu_redis_start(&e->redis);
    ou_env_start(e, backend, args);
}

/* A SEM.ACQUIRE Redis ran while the proxy had given up on it (DEBUG SLEEP
 * past --upstream-timeout): the connection's ledger records the permit, the
 * proxy counts none of its own. Its SEM.RELEASE used to send HINCRBY ... -0
 * and answer Redis's raw "value is not an integer" for ever. */
static void scenario_sem_release_after_unknown(struct pu_env *e)
{
    redisContext *c = pu_client(e), *o = pu_client(e), *rc = pu_redis_client(e);
    redisContext *s = pu_redis_client(e);
    redisReply *r;
    char d[256];
    long long until = pu_now_ms() + 15000;

    PU_INT(o, 1, "SEM.TRYSETPERMITS %s %d", "su", 3);
    PU_STR(c, "PONG", "PING");
    pu_send(s, "DEBUG SLEEP %s", "1.5");
    pu_sleep_ms(100); /* Redis is asleep once it read the command */
    r = pu_cmd(c, "SEM.ACQUIRE %s", "su");
    if (!pu_is_err(r, "UPSTREAM") || !strstr(r->str, "outcome unknown"))
        TEST_FAIL("expected -UPSTREAM ... outcome unknown, got %s", pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
    freeReplyObject(pu_recv(s));                    /* Redis is back */
    PU_EVENTUALLY(pu_get_int(rc, "su") == 2, 5000); /* Redis ran the acquire */
    /* Once the proxy's connections are back (a SEM.RELEASE sent before
     * would be carried out by the proxy: +INHAND, no count). */
    r = pu_cmd_until_served(c, "SEM.AVAILABLE %s", "su", (int)(until - pu_now_ms()));
    PU_CHECK(r, PU_K_INT, 2, NULL);
    freeReplyObject(r);
    r = pu_cmd(c, "SEM.RELEASE %s", "su");
    PU_CHECK(r, PU_K_INT, 3, NULL);
    freeReplyObject(r);
    PU_INT(c, 4, "SEM.RELEASE %s", "su"); /* and again: releasing more is allowed */
    ASSERT_EQ(pu_get_int(rc, "su"), 4);
    redisFree(s);
    redisFree(rc);
    redisFree(o);
    redisFree(c);
}

TEST(sem_release_after_unknown)
{
    static const char *const backends[] = {"epoll", "uring"};
    const char *only = getenv("LP_IT_BACKENDS");
    struct pu_env e;

    for (size_t i = 0; i < 2; i++) {
        if ((only && only[0] && !strstr(only, backends[i])) || (i == 1 && !pu_uring_available()))
            continue;
        fprintf(stderr, "-- io backend %s\n", backends[i]);
        unknown_env_start(&e, backends[i]);
        scenario_sem_release_after_unknown(&e);
        pu_env_stop(&e);
    }
}

TEST_MAIN(TEST_CASE(sem_basic), TEST_CASE(sem_counting), TEST_CASE(sem_wakeup),
          TEST_CASE(sem_one_subscription), TEST_CASE(sem_disconnect), TEST_CASE(sem_timeout),
          TEST_CASE(sem_pipeline), TEST_CASE(sem_interop), TEST_CASE(sem_bad_input),
          TEST_CASE(psem_basic), TEST_CASE(psem_counting), TEST_CASE(psem_lease),
          TEST_CASE(psem_disconnect), TEST_CASE(psem_interop), TEST_CASE(sem_release_after_unknown))
