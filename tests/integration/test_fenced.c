/* Fenced locks (LOCK ... FENCED) against a real redis-server: the reply is
 * RedissonFencedLock's token (INCR of redisson_lock_token:{name}, which has
 * no TTL), taken on every acquire including re-entry; LOCK.INFO reports the
 * holder's last token (or -1); plain LOCK neither replies with nor bumps a
 * token; tokens continue a sequence a Redisson FencedLock started; a fenced
 * waiter gets its token when woken; a token is above every token the
 * proxy handed out before for its name even when Redis lost the counter
 * (a restart without persistence, a write a failover lost), for more names
 * than the proxy remembers one by one. Both io backends. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "sentinel_util.h"
#include "sync_util.h"

#define JAVA_OWNER "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a:21"
#define MX_THREADS 56
#define MX_ITERS   6

/* RedissonFencedLock's acquire (KEYS name, token; ARGV lease, owner):
 * {-1, token} when acquired, else {pttl, -1}. */
static const char java_fenced_lock[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then local token = redis.call('incr', KEYS[2]); redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};";

/* LOCK.INFO's token field, for OWNER tok when tok is not NULL. */
static long long info_token_of(redisContext *c, const char *name, const char *tok)
{
    redisReply *r =
        tok ? pu_cmd(c, "LOCK.INFO %s OWNER %s", name, tok) : pu_cmd(c, "LOCK.INFO %s", name);
    long long v = -100;

    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        if (strcmp(r->element[i]->str, "token") == 0 &&
            r->element[i + 1]->type == REDIS_REPLY_INTEGER)
            v = r->element[i + 1]->integer;
    }
    freeReplyObject(r);
    if (v == -100)
        TEST_FAIL("LOCK.INFO %s has no integer token field", name);
    return v;
}

static long long info_token(redisContext *c, const char *name)
{
    return info_token_of(c, name, NULL);
}

static void scenario_tokens(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];
    struct pu_lockinfo li;

    pu_conn_owner(c1, owner, sizeof(owner));
    PU_INT(c1, 1, "LOCK %s FENCED", "fe");
    ASSERT_EQ(pu_get_int(rc, "redisson_lock_token:{fe}"), 1);
    ASSERT_EQ(pu_pttl(rc, "redisson_lock_token:{fe}"), -1);
    ASSERT_EQ(pu_hget_int(rc, "fe", owner), 1); /* the RLock hash, as ever */
    ASSERT_TRUE(pu_pttl(rc, "fe") > 0 && pu_pttl(rc, "fe") <= 30000);
    ASSERT_EQ(info_token(c1, "fe"), 1);
    pu_lockinfo(c1, &li, "LOCK.INFO %s", "fe");
    ASSERT_EQ(li.hold_count, 1);
    ASSERT_EQ(li.watchdog, 1);

    /* Re-entry takes a new token too (as Redisson). */
    PU_INT(c1, 2, "LOCK %s FENCED LEASE %d", "fe", 5000);
    ASSERT_EQ(pu_hget_int(rc, "fe", owner), 2);
    ASSERT_EQ(info_token(c1, "fe"), 2);
    ASSERT_EQ(info_token(c2, "fe"), -1); /* not the holder */
    PU_INT(c1, 0, "UNLOCK %s", "fe");
    PU_INT(c1, 1, "UNLOCK %s", "fe");
    ASSERT_EQ(info_token(c1, "fe"), -1);

    /* Another holder continues the sequence; contention gives nil. */
    PU_INT(c2, 3, "LOCK %s WAIT %d FENCED", "fe", 100);
    PU_NIL(c1, "LOCK %s FENCED WAIT %d", "fe", 100);
    PU_NIL(c1, "TRYLOCK %s FENCED", "fe");
    PU_INT(c2, 1, "UNLOCK %s", "fe");
    PU_INT(c1, 4, "TRYLOCK %s FENCED LEASE %d", "fe", 5000);
    PU_INT(c1, 1, "UNLOCK %s", "fe");

    /* Plain LOCK keeps its +OK and leaves the counter alone. */
    PU_OK(c1, "LOCK %s", "fe");
    ASSERT_EQ(pu_get_int(rc, "redisson_lock_token:{fe}"), 4);
    ASSERT_EQ(info_token(c1, "fe"), -1);
    PU_INT(c1, 1, "UNLOCK %s", "fe");

    /* FENCED anywhere among the options, with OWNER tokens, odd names. */
    PU_INT(c2, 1, "LOCK %s LEASE %d FENCED OWNER %s", "a{t}b", 5000, "job-1");
    ASSERT_EQ(pu_get_int(rc, "redisson_lock_token:a{t}b"), 1);
    ASSERT_EQ(info_token_of(c1, "a{t}b", "job-1"), 1);
    PU_INT(c1, 1, "UNLOCK %s OWNER %s", "a{t}b", "job-1");

    /* Bad input. */
    PU_ERR(c1, "ERR LEASE must be a non-negative integer", "LOCK %s LEASE %d FENCED", "fe", -3);
    PU_ERR(c1, "ERR option 'WAIT' needs a value", "LOCK %s FENCED WAIT", "fe");
    PU_ERR(c1, "ERR UNLOCK takes no FENCED option", "UNLOCK %s FENCED", "fe");
    ASSERT_TRUE(!pu_exists(rc, "fe"));
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

/* A fenced waiter gets its token when the holder releases; tokens are
 * strictly increasing across holders, Redisson's included. */
static void scenario_waiter_and_redisson(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;
    long long t0;

    r = pu_cmd(rc, "EVAL %s 2 %s %s %s %s", java_fenced_lock, "fw", "redisson_lock_token:{fw}",
               "30000", JAVA_OWNER);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(r->element[0]->integer, -1);
    ASSERT_EQ(r->element[1]->integer, 1);
    freeReplyObject(r);

    pu_send(c1, "LOCK %s FENCED", "fw");
    ASSERT_NULL(pu_try_recv(c1, 200));
    t0 = pu_now_ms();
    PU_INT(rc, 1, "DEL %s", "fw");
    PU_INT(rc, 1, "PUBLISH %s 0", "redisson_lock__channel:{fw}");
    r = pu_try_recv(c1, 5000);
    PU_CHECK(r, PU_K_INT, 2, NULL);
    freeReplyObject(r);
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);

    /* The proxy holds: Redisson's fenced acquire is refused with the PTTL. */
    r = pu_cmd(rc, "EVAL %s 2 %s %s %s %s", java_fenced_lock, "fw", "redisson_lock_token:{fw}",
               "30000", JAVA_OWNER);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer > 0);
    ASSERT_EQ(r->element[1]->integer, -1);
    freeReplyObject(r);
    PU_INT(c1, 1, "UNLOCK %s", "fw");
    PU_INT(c2, 3, "LOCK %s FENCED", "fw");
    PU_INT(c2, 1, "UNLOCK %s", "fw");
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

/* ---- exclusion and token order under contention ---------------------------------- */

struct fx_state {
    struct su_excl excl;     /* the critical section */
    atomic_int stale;        /* a holder's token did not exceed the one before */
    volatile long long last; /* token of the previous holder (under the lock) */
};

/* One critical section: the token must exceed every earlier holder's, as
 * a fenced resource would check. */
static bool fx_round(void *arg, int i, redisContext *c)
{
    struct fx_state *s = arg;
    redisReply *r = redisCommand(c, "LOCK %s FENCED", "fx");
    long long token;

    (void)i;
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        if (r)
            freeReplyObject(r);
        return false;
    }
    token = r->integer;
    freeReplyObject(r);
    su_excl_enter(&s->excl);
    if (token <= s->last)
        atomic_fetch_add(&s->stale, 1);
    s->last = token;
    su_excl_leave(&s->excl, 100);
    return su_cmd_ok(c, 1, "UNLOCK %s", "fx");
}

static void scenario_exclusion(struct pu_env *e)
{
    static struct fx_state s;
    const struct su_clients spec = {&e->proxy.port, 1, MX_THREADS, MX_ITERS, fx_round, &s};
    redisContext *rc = pu_redis_client(e);

    memset(&s, 0, sizeof(s));
    ASSERT_EQ(su_clients_run(&spec), 0);
    ASSERT_EQ(atomic_load(&s.excl.violations), 0);
    ASSERT_EQ(atomic_load(&s.stale), 0);
    ASSERT_EQ(s.excl.counter, (long)MX_THREADS * MX_ITERS);
    ASSERT_EQ(s.last, (long long)MX_THREADS * MX_ITERS);
    ASSERT_EQ(pu_get_int(rc, "redisson_lock_token:{fx}"), (long long)MX_THREADS * MX_ITERS);
    ASSERT_TRUE(!pu_exists(rc, "fx"));
    redisFree(rc);
}

/* ---- tokens above what Redis forgot ---------------------------------------- */

#define FL_NAMES 10000 /* more names than the proxy remembers one by one */

/* A fenced LOCK (then UNLOCK) of name, retried while Redis comes back;
 * returns the token. */
static long long fenced_eventually(redisContext *c, const char *name)
{
    long long deadline = pu_now_ms() + 15000, t;
    char got[320];

    for (;;) {
        redisReply *r = pu_cmd(c, "LOCK %s FENCED WAIT %d", name, 1000);

        if (r->type == REDIS_REPLY_INTEGER) {
            t = r->integer;
            freeReplyObject(r);
            PU_INT(c, 1, "UNLOCK %s", name);
            return t;
        }
        if (!pu_is_err(r, "UPSTREAM"))
            TEST_FAIL("LOCK %s FENCED while recovering: %s", name,
                      pu_describe(r, got, sizeof(got)));
        freeReplyObject(r);
        if (pu_now_ms() > deadline)
            TEST_FAIL("LOCK %s FENCED did not succeed within 15 s", name);
        pu_sleep_ms(50);
    }
}

/* Fenced LOCK + UNLOCK of fl:0 .. fl:n-1, pipelined; tok[i] gets each
 * token. */
static void fenced_many(redisContext *c, int n, long long *tok)
{
    char got[320];

    for (int at = 0; at < n; at += 500) {
        int end = at + 500 < n ? at + 500 : n;

        for (int i = at; i < end; i++) {
            pu_send(c, "LOCK fl:%d FENCED", i);
            pu_send(c, "UNLOCK fl:%d", i);
        }
        for (int i = at; i < end; i++) {
            redisReply *r = pu_recv(c);

            if (r->type != REDIS_REPLY_INTEGER)
                TEST_FAIL("LOCK fl:%d FENCED: %s", i, pu_describe(r, got, sizeof(got)));
            tok[i] = r->integer;
            freeReplyObject(r);
            PU_RECV(c, PU_K_INT, 1, NULL);
        }
    }
}

static void scenario_forgotten(struct pu_env *e)
{
    static long long before[FL_NAMES], after[FL_NAMES];
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    long long t;
    redisReply *r;

    PU_INT(c, 1, "LOCK %s FENCED", "fr");
    PU_INT(c, 1, "UNLOCK %s", "fr");
    PU_INT(c, 2, "LOCK %s FENCED", "fr");
    PU_INT(c, 1, "UNLOCK %s", "fr");

    /* A write Redis lost (as a failover to a replica that missed it): the
     * counter went back; the next token is still above 2, and Redisson's
     * acquire continues above it. */
    PU_OK(rc, "SET %s %d", "redisson_lock_token:{fr}", 1);
    PU_INT(c, 3, "LOCK %s FENCED", "fr");
    PU_INT(c, 1, "UNLOCK %s", "fr");
    r = pu_cmd(rc, "EVAL %s 2 %s %s %s %s", java_fenced_lock, "fr", "redisson_lock_token:{fr}",
               "30000", JAVA_OWNER);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(r->element[1]->integer, 4);
    freeReplyObject(r);
    PU_INT(rc, 1, "DEL %s", "fr");
    PU_INT(rc, 1, "DEL %s", "redisson_lock_token:{fr}");
    /* Redisson's token 4 never went through the proxy: 1 above its own 3. */
    PU_INT(c, 4, "LOCK %s FENCED", "fr");
    PU_INT(c, 1, "UNLOCK %s", "fr");

    /* Many names, then a restart without persistence: every name's next
     * token is above its last one. */
    fenced_many(c, FL_NAMES, before);
    redisFree(rc);
    pu_redis_restart(&e->redis);
    t = fenced_eventually(c, "fr");
    ASSERT_TRUE(t > 4);
    rc = pu_redis_client(e);
    ASSERT_EQ(pu_dbsize(rc), 1); /* Redis lost everything: only fr's counter */
    fenced_many(c, FL_NAMES, after);
    for (int i = 0; i < FL_NAMES; i++) {
        if (after[i] <= before[i])
            TEST_FAIL("fl:%d: token %lld after the restart, %lld before", i, after[i], before[i]);
    }
    redisFree(rc);
    redisFree(c);
}

/* A Sentinel failover to a replica that missed the last grants (both
 * replicas stopped and cut off while they were made, then the master
 * killed): the
 * promoted replica's counter is behind, the next token is still above
 * every one handed out before. */
TEST(fenced_failover_lost_writes)
{
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c;
    redisReply *r;
    long long t, last = 0;
    int m, nm, i;

    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rsentinel_start(&s, NULL, NULL);
    m = rsentinel_wait_master(&s, -1);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-sentinel://%s/%s", s.list, RSENT_NAME);
    p.extra[0] = "--io";
    p.extra[1] = "epoll";
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    PU_INT(c, 1, "LOCK %s FENCED", "fo");
    PU_INT(c, 1, "UNLOCK %s", "fo");
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    for (i = 0; i < RSENT_NODES; i++) {
        if (i != m)
            rsentinel_signal_node(&s, i, SIGSTOP);
    }
    /* nothing from here on reaches them (not even their socket buffers) */
    ASSERT_EQ(rsentinel_int(&s, m, "CLIENT KILL TYPE replica"), 2);
    for (i = 0; i < 4; i++) {
        r = pu_cmd(c, "LOCK %s FENCED", "fo");
        ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer > last);
        last = r->integer;
        freeReplyObject(r);
        PU_INT(c, 1, "UNLOCK %s", "fo");
    }
    ASSERT_EQ(last, 5);
    rsentinel_kill_node(&s, m);
    for (i = 0; i < RSENT_NODES; i++) {
        if (i != m)
            rsentinel_signal_node(&s, i, SIGCONT);
    }
    nm = rsentinel_wait_master(&s, m);
    r = rsentinel_cmd(&s, nm, "GET %s", "redisson_lock_token:{fo}");
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "1") == 0); /* writes lost */
    freeReplyObject(r);
    t = fenced_eventually(c, "fo");
    fprintf(stderr, "fenced: token %lld after the failover, %lld before\n", t, last);
    ASSERT_TRUE(t > last);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

TEST(fenced_tokens)
{
    pu_each_backend(scenario_tokens, NULL);
}

TEST(fenced_waiter_and_redisson)
{
    pu_each_backend(scenario_waiter_and_redisson, NULL);
}

TEST(fenced_forgotten_counter)
{
    pu_each_backend(scenario_forgotten, NULL);
}

TEST(fenced_exclusion)
{
    pu_raise_nofile(1024);
    pu_each_backend(scenario_exclusion, NULL);
}

TEST_MAIN(TEST_CASE(fenced_tokens), TEST_CASE(fenced_waiter_and_redisson),
          TEST_CASE(fenced_forgotten_counter), TEST_CASE(fenced_failover_lost_writes),
          TEST_CASE(fenced_exclusion))
