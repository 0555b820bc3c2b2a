/* REDLOCK / REDUNLOCK on 3 independent redis-servers (--redlock-upstream
 * x3, started with --enable-debug-command yes) behind one proxy: the
 * RLock layout on every master and the validity reply; exclusion and a
 * wake-up through the masters' pub/sub; release on disconnect; a grant
 * with one master down; a fast refusal with two down (no key left); the
 * validity check refusing a grant delayed past its lease by DEBUG SLEEP on
 * two masters; a Redisson-layout lock on a majority excluding a REDLOCK; a
 * renewal that reaches only a minority turning into LOCKLOST; the
 * start-up error for an even number of masters; give-backs (after a lost
 * lease, of a REDUNLOCK) retried until stalled masters take them, so a
 * re-taken lock counts from 1 again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "harness.h"
#include "proxy_util.h"

#define NMASTERS   3
#define JAVA_OWNER "8f0e7c2a-1111-4222-8333-944455556666:1"

struct rlx {
    struct pu_redis m[NMASTERS]; /* the independent masters */
    struct pu_env e;             /* --upstream redis and the proxy */
    char urls[NMASTERS][64];     /* redis://127.0.0.1:port */
    const char *flags[2 * NMASTERS + 5];
};

static const char *const master_extra[] = {"--enable-debug-command", "yes", NULL};

/* Starts the masters. */
static void rlx_masters(struct rlx *x)
{
    int i;

    memset(x, 0, sizeof(*x));
    for (i = 0; i < NMASTERS; i++) {
        memcpy(x->m[i].extra, master_extra, sizeof(master_extra));
        pu_redis_start(&x->m[i]);
        snprintf(x->urls[i], sizeof(x->urls[i]), "redis://127.0.0.1:%d", x->m[i].port);
    }
}

/* Starts --upstream redis and the proxy with --redlock-upstream for every
 * master, and one more flag when extra_flag is not NULL. */
static void rlx_start(struct rlx *x, const char *extra_flag, const char *extra_val)
{
    int i, n = 0;

    for (i = 0; i < NMASTERS; i++) {
        x->flags[n++] = "--redlock-upstream";
        x->flags[n++] = x->urls[i];
    }
    if (extra_flag) {
        x->flags[n++] = extra_flag;
        x->flags[n++] = extra_val;
    }
    x->flags[n] = NULL;
    pu_env_start(&x->e, "epoll", x->flags);
}

/* As rlx_start, with several extra flags (NULL-terminated). */
static void rlx_start_flags(struct rlx *x, const char *const *extra)
{
    int i, n = 0;

    for (i = 0; i < NMASTERS; i++) {
        x->flags[n++] = "--redlock-upstream";
        x->flags[n++] = x->urls[i];
    }
    while (*extra && n < (int)(sizeof(x->flags) / sizeof(x->flags[0])) - 1)
        x->flags[n++] = *extra++;
    x->flags[n] = NULL;
    pu_env_start(&x->e, "epoll", x->flags);
}

static redisContext *master(struct rlx *x, int i)
{
    return pu_connect(x->m[i].port);
}

/* HEXISTS name owner on master i (0 when it is down). */
static long long m_hexists(struct rlx *x, int i, const char *name, const char *owner)
{
    redisContext *c = pu_try_connect(x->m[i].port);
    redisReply *r;
    long long v = 0;

    if (!c)
        return 0;
    r = redisCommand(c, "HEXISTS %s %s", name, owner);
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return v;
}

static long long m_exists(struct rlx *x, int i, const char *name)
{
    redisContext *c = pu_try_connect(x->m[i].port);
    long long v = 0;

    if (!c)
        return 0;
    v = pu_exists(c, name);
    redisFree(c);
    return v;
}

static long long expect_validity(redisContext *c, const char *fmt, const char *name)
{
    redisReply *r = pu_cmd(c, fmt, name);
    long long v;

    if (r->type != REDIS_REPLY_INTEGER) {
        char d[256];

        TEST_FAIL("REDLOCK %s: expected the validity (integer), got %s", name,
                  pu_describe(r, d, sizeof(d)));
    }
    v = r->integer;
    freeReplyObject(r);
    return v;
}

TEST(redlock_basic)
{
    static struct rlx x;
    redisContext *c, *c2, *c3;
    char owner[PU_OWNER_MAX];
    long long v, t0;
    redisReply *r;
    int i;

    rlx_masters(&x);
    rlx_start(&x, NULL, NULL);
    c = pu_client(&x.e);
    c2 = pu_client(&x.e);
    pu_conn_owner(c, owner, sizeof(owner));

    ASSERT_EQ(pu_info_int(c, "redlock_masters"), 3);
    ASSERT_EQ(pu_info_int(c, "redlock_majority"), 2);
    ASSERT_EQ(pu_info_int(c, "redlock_masters_up"), 3);
    v = expect_validity(c, "REDLOCK %s", "rk");
    ASSERT_TRUE(v > 20000 && v < 30000);
    ASSERT_EQ(pu_info_int(c, "redlock_holds"), 1);
    for (i = 0; i < NMASTERS; i++) {
        redisContext *m = master(&x, i);

        ASSERT_EQ(pu_hget_int(m, "rk", owner), 1);
        ASSERT_TRUE(pu_pttl(m, "rk") > 20000);
        redisFree(m);
    }
    c3 = pu_redis_client(&x.e);
    ASSERT_TRUE(!pu_exists(c3, "rk")); /* not on --upstream */
    redisFree(c3);
    v = expect_validity(c, "REDLOCK %s LEASE 5000", "rk"); /* reentrant */
    ASSERT_TRUE(v > 0 && v <= 5000);
    PU_NIL(c2, "REDLOCK rk WAIT 0");
    PU_INT(c, 0, "REDUNLOCK rk");

    /* A waiter is woken by the release (long before the 5 s lease ends). */
    t0 = pu_now_ms();
    pu_send(c2, "REDLOCK rk WAIT 10000");
    ASSERT_TRUE(pu_try_recv(c2, 300) == NULL);
    PU_INT(c, 1, "REDUNLOCK rk");
    r = pu_recv(c2);
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    ASSERT_TRUE(pu_now_ms() - t0 < 4000);
    PU_ERR(c, "NOTOWNER", "REDUNLOCK rk");

    /* Release on disconnect, on every master. */
    redisFree(c2);
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "rk"), 5000);

    /* Bad input; REDLOCK needs the flag. */
    PU_ERR(c, "ERR", "REDLOCK rk LEASE 0");
    PU_ERR(c, "ERR LEASE must be at least 10 ms, got '9'", "REDLOCK rk LEASE 9");
    PU_ERR(c, "ERR LEASE must be at most 100000000000000 ms", "REDLOCK rk LEASE %s",
           "9223372036854775807");
    PU_ERR(c, "ERR WAIT must be at most 100000000000000 ms", "REDLOCK rk WAIT %s",
           "18446744073709551616");
    for (i = 0; i < NMASTERS; i++)
        ASSERT_TRUE(!m_exists(&x, i, "rk"));
    PU_ERR(c, "ERR", "REDLOCK rk BOGUS 1");
    redisFree(c);
    pu_env_stop(&x.e);
    {
        struct pu_env e;
        redisContext *p;

        pu_env_start(&e, "epoll", NULL);
        p = pu_client(&e);
        PU_ERR(p, "ERR REDLOCK needs --redlock-upstream", "REDLOCK x");
        redisFree(p);
        pu_env_stop(&e);
    }
}

TEST(redlock_startup_needs_odd_masters)
{
    struct pu_proxy p;
    int i;

    for (i = 2; i <= 4; i += 2) {
        int n = 0, k;

        memset(&p, 0, sizeof(p));
        snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:1");
        for (k = 0; k < i; k++) {
            p.extra[n++] = "--redlock-upstream";
            p.extra[n++] = "redis://127.0.0.1:6399";
        }
        p.extra[n] = NULL;
        ASSERT_TRUE(pu_proxy_try_start(&p) < 0);
    }
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:1");
    p.extra[0] = "--redlock-upstream";
    p.extra[1] = "redis-cluster://127.0.0.1:6399";
    p.extra[2] = NULL;
    ASSERT_TRUE(pu_proxy_try_start(&p) < 0);

    /* The control: 3 masters (down, as the upstream) start. */
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:1");
    for (i = 0; i < 3; i++) {
        p.extra[2 * i] = "--redlock-upstream";
        p.extra[2 * i + 1] = "redis://127.0.0.1:6399";
    }
    p.extra[6] = NULL;
    ASSERT_EQ(pu_proxy_try_start(&p), 0);
    pu_proxy_stop(&p);
}

TEST(redlock_masters_down)
{
    static struct rlx x;
    redisContext *c;
    long long t0, v;
    redisReply *r;

    rlx_masters(&x);
    rlx_start(&x, NULL, NULL);
    c = pu_client(&x.e);

    pu_redis_kill(&x.m[2]);
    v = expect_validity(c, "REDLOCK %s", "d1");
    ASSERT_TRUE(v > 0);
    PU_INT(c, 1, "REDUNLOCK d1");

    pu_redis_kill(&x.m[1]);
    t0 = pu_now_ms();
    r = pu_cmd(c, "REDLOCK d2 WAIT 5000");
    ASSERT_TRUE(pu_is_err(r, "UPSTREAM REDLOCK reached fewer than 2 of 3 masters"));
    freeReplyObject(r);
    fprintf(stderr, "redlock: two masters down, refused after %lld ms\n", pu_now_ms() - t0);
    ASSERT_TRUE(pu_now_ms() - t0 < 2000); /* refused at once, not after WAIT */
    ASSERT_TRUE(pu_info_int(c, "redlock_quorum_refusals") >= 1);
    PU_EVENTUALLY(!m_exists(&x, 0, "d2"), 3000); /* the lone grant was given back */
    PU_ERR(c, "NOTOWNER", "REDUNLOCK d2");
    redisFree(c);
    pu_env_stop(&x.e);
}

/* A hung master (SIGSTOP) does not hold up a majority of the others: the
 * grant comes at once, well within a lease shorter than --upstream-timeout
 * (3 s), and the hung master's late grant is given back. */
TEST(redlock_hung_master)
{
    static struct rlx x;
    redisContext *c;
    char owner[PU_OWNER_MAX];
    long long t0;

    rlx_masters(&x);
    rlx_start(&x, NULL, NULL);
    c = pu_client(&x.e);
    pu_conn_owner(c, owner, sizeof(owner));
    pu_redis_pause(&x.m[2]);
    t0 = pu_now_ms();
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s LEASE 2000 WAIT 0", "hm") > 1000);
    fprintf(stderr, "redlock: one master hung, granted after %lld ms\n", pu_now_ms() - t0);
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    PU_INT(c, 1, "REDUNLOCK hm");
    pu_redis_resume(&x.m[2]);
    PU_EVENTUALLY(!m_exists(&x, 2, "hm"), 5000);
    redisFree(c);
    pu_env_stop(&x.e);
}

TEST(redlock_validity_check)
{
    static struct rlx x;
    redisContext *c, *s0, *s1;
    char owner[PU_OWNER_MAX];
    redisReply *r;
    int i;

    rlx_masters(&x);
    rlx_start(&x, NULL, NULL);
    c = pu_client(&x.e);
    pu_conn_owner(c, owner, sizeof(owner));

    /* Two masters stall 700 ms: their grants come back after the 500 ms
     * lease; a majority is reached only late, and is refused. */
    s0 = master(&x, 0);
    s1 = master(&x, 1);
    pu_send(s0, "DEBUG SLEEP 0.7");
    pu_send(s1, "DEBUG SLEEP 0.7");
    pu_sleep_ms(50);
    r = pu_cmd(c, "REDLOCK vk LEASE 500 WAIT 0");
    ASSERT_TRUE(pu_is_err(r, "UPSTREAM Redis answered too late"));
    freeReplyObject(r);
    freeReplyObject(pu_recv(s0));
    freeReplyObject(pu_recv(s1));
    ASSERT_TRUE(pu_info_int(c, "late_grants_refused") >= 1);
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_hexists(&x, i, "vk", owner), 3000);

    /* Without the stall the same request is granted. */
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s LEASE 500 WAIT 0", "vk") > 0);
    redisFree(s0);
    redisFree(s1);
    redisFree(c);
    pu_env_stop(&x.e);
}

TEST(redlock_redisson_layout_excludes)
{
    static struct rlx x;
    redisContext *c;
    int i;

    rlx_masters(&x);
    rlx_start(&x, NULL, NULL);
    c = pu_client(&x.e);
    for (i = 0; i < 2; i++) {
        redisContext *m = master(&x, i);

        freeReplyObject(pu_cmd(m, "HSET jl %s 1", JAVA_OWNER));
        freeReplyObject(pu_cmd(m, "PEXPIRE jl 30000"));
        redisFree(m);
    }
    PU_NIL(c, "REDLOCK jl WAIT 0");
    PU_NIL(c, "REDLOCK jl WAIT 400");
    PU_EVENTUALLY(!m_exists(&x, 2, "jl"), 3000); /* the minority grant was given back */
    ASSERT_EQ(m_hexists(&x, 0, "jl", JAVA_OWNER), 1);

    /* On one master only: a majority is still ours. */
    {
        redisContext *m = master(&x, 1);

        freeReplyObject(pu_cmd(m, "DEL jl"));
        redisFree(m);
    }
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s WAIT 0", "jl") > 0);
    PU_INT(c, 1, "REDUNLOCK jl");
    ASSERT_EQ(m_hexists(&x, 0, "jl", JAVA_OWNER), 1); /* the other owner's hold untouched */
    redisFree(c);
    pu_env_stop(&x.e);
}

TEST(redlock_renewal_needs_majority)
{
    static struct rlx x;
    redisContext *c;
    int i;

    rlx_masters(&x);
    rlx_start(&x, "--lock-watchdog-timeout", "1500");
    c = pu_client(&x.e);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "wr") > 0);
    pu_sleep_ms(1200); /* renewed at least twice: still held */
    for (i = 0; i < NMASTERS; i++)
        ASSERT_TRUE(m_exists(&x, i, "wr"));
    for (i = 0; i < 2; i++) { /* a majority loses the owner field */
        redisContext *m = master(&x, i);

        freeReplyObject(pu_cmd(m, "DEL wr"));
        redisFree(m);
    }
    PU_EVENTUALLY(pu_info_int(c, "leases_lost") >= 1, 3000);
    PU_ERR(c, "LOCKLOST", "REDUNLOCK wr");
    PU_ERR(c, "NOTOWNER", "REDUNLOCK wr");

    /* A proxy that stops releases its REDLOCKs on every master first. */
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "ws") > 0);
    pu_env_stop(&x.e);
    for (i = 0; i < NMASTERS; i++)
        ASSERT_TRUE(!m_exists(&x, i, "ws"));
    redisFree(c);
}

/* ---- give-backs retried ----------------------------------------------------------- */

static const char *const giveback_flags[] = {"--lock-watchdog-timeout", "6000",
                                             "--upstream-timeout", "500", NULL};

/* A renewal times out on two stalled masters (SIGSTOP): the lease is lost.
 * The masters come back with the owner field still there (renewed up to
 * the stall); the give-back reaches them once they answer, so REDUNLOCK
 * answers LOCKLOST, nothing is left on any master, and the lock re-taken
 * at once counts from 1: its REDUNLOCK releases it (it answered :0, an
 * orphan count, when the give-back was sent once). */
TEST(redlock_lost_lease_given_back)
{
    static struct rlx x;
    redisContext *c;
    char owner[PU_OWNER_MAX];
    int i;

    rlx_masters(&x);
    rlx_start_flags(&x, giveback_flags);
    c = pu_client(&x.e);
    pu_conn_owner(c, owner, sizeof(owner));
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "gl") > 0);
    pu_redis_pause(&x.m[1]);
    pu_redis_pause(&x.m[2]);
    PU_EVENTUALLY(pu_info_int(c, "leases_lost") >= 1, 5000);
    pu_redis_resume(&x.m[1]);
    pu_redis_resume(&x.m[2]);
    PU_ERR(c, "LOCKLOST", "REDUNLOCK gl");
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "gl") > 0);
    for (i = 0; i < NMASTERS; i++)
        ASSERT_EQ(m_hexists(&x, i, "gl", owner), 1);
    PU_INT(c, 1, "REDUNLOCK gl");
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "gl"), 3000);

    /* Lost again, and left alone: every master is cleaned up. */
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "gm") > 0);
    pu_redis_pause(&x.m[0]);
    pu_redis_pause(&x.m[1]);
    PU_EVENTUALLY(pu_info_int(c, "leases_lost") >= 2, 5000);
    pu_redis_resume(&x.m[0]);
    pu_redis_resume(&x.m[1]);
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "gm"), 3000);
    PU_ERR(c, "LOCKLOST", "REDUNLOCK gm");
    redisFree(c);
    pu_env_stop(&x.e);
}

/* REDUNLOCK while one master is down (killed; it keeps its data in its
 * AOF): released on the majority at once; that master's release is sent
 * again once it is back, so the lock does not stay there for the rest of
 * its 30 s lease. */
TEST(redlock_unlock_given_back)
{
    static const char *const aof[] = {"--enable-debug-command", "yes", "--appendonly", "yes", NULL};
    static struct rlx x;
    redisContext *c;

    rlx_masters(&x);
    pu_redis_kill(&x.m[2]);
    memcpy(x.m[2].extra, aof, sizeof(aof));
    pu_redis_start(&x.m[2]);
    rlx_start_flags(&x, giveback_flags);
    c = pu_client(&x.e);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s LEASE 30000", "gu") > 0);
    pu_redis_kill(&x.m[2]);
    PU_INT(c, 1, "REDUNLOCK gu");
    pu_redis_start(&x.m[2]);
    PU_EVENTUALLY(!m_exists(&x, 2, "gu"), 5000);
    ASSERT_TRUE(!m_exists(&x, 0, "gu") && !m_exists(&x, 1, "gu"));
    PU_EVENTUALLY(pu_info_int(c, "redlock_givebacks_pending") == 0, 3000);
    ASSERT_TRUE(pu_info_int(c, "redlock_giveback_retries") >= 1);
    redisFree(c);
    pu_env_stop(&x.e);
}

/* REDUNLOCK while two of three masters are stalled (SIGSTOP, past
 * --upstream-timeout): fewer than a majority answer, yet the lease is
 * vouched for (the grant reached all three a moment ago). The release is
 * the proxy's to carry out (issue 22): answered :1, no more renewals, and
 * the give-back reaches the stalled masters once they resume, so another
 * client takes the name at once (before: -UPSTREAM "still held and
 * renewed", and the name stayed taken while the connection lived). */
TEST(redlock_unlock_in_hand)
{
    static struct rlx x;
    redisContext *c, *d;
    long long t0;
    int i;

    rlx_masters(&x);
    rlx_start_flags(&x, giveback_flags);
    c = pu_client(&x.e);
    d = pu_client(&x.e);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "ih") > 0);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "ih2") > 0);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s", "ih2") > 0); /* re-entered */
    pu_redis_pause(&x.m[1]);
    pu_redis_pause(&x.m[2]);
    PU_INT(c, 1, "REDUNLOCK %s", "ih");
    PU_INT(c, 0, "REDUNLOCK %s", "ih2"); /* one hold left: kept, renewed */
    ASSERT_EQ(pu_info_int(c, "unlocks_in_hand"), 2);
    t0 = pu_now_ms();
    pu_redis_resume(&x.m[1]);
    pu_redis_resume(&x.m[2]);
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "ih"), 3000);
    fprintf(stderr, "REDUNLOCK carried out: every master free %lld ms after the resume\n",
            pu_now_ms() - t0);
    ASSERT_TRUE(expect_validity(d, "REDLOCK %s WAIT 0", "ih") > 0);
    PU_INT(d, 1, "REDUNLOCK %s", "ih");
    PU_INT(c, 1, "REDUNLOCK %s", "ih2");
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "ih2"), 3000);
    redisFree(c);
    redisFree(d);
    pu_env_stop(&x.e);
}

/* A connection holding a REDLOCK (LEASE 60000: only a release frees it in
 * time) closes while two of three masters are stalled: its release goes
 * to every master, is sent again until each answers, and the name is free
 * on all three within moments of the resume (issue 22, coverage). */
TEST(redlock_disconnect_given_back)
{
    static struct rlx x;
    redisContext *c, *d;
    long long t0;
    int i;

    rlx_masters(&x);
    rlx_start_flags(&x, giveback_flags);
    c = pu_client(&x.e);
    d = pu_client(&x.e);
    ASSERT_TRUE(expect_validity(c, "REDLOCK %s LEASE 60000", "dg") > 0);
    pu_redis_pause(&x.m[1]);
    pu_redis_pause(&x.m[2]);
    redisFree(c);
    pu_sleep_ms(1000); /* the releases to the stalled masters time out */
    t0 = pu_now_ms();
    pu_redis_resume(&x.m[1]);
    pu_redis_resume(&x.m[2]);
    for (i = 0; i < NMASTERS; i++)
        PU_EVENTUALLY(!m_exists(&x, i, "dg"), 3000);
    fprintf(stderr, "closed REDLOCK holder: every master free %lld ms after the resume\n",
            pu_now_ms() - t0);
    ASSERT_TRUE(expect_validity(d, "REDLOCK %s WAIT 0", "dg") > 0);
    PU_INT(d, 1, "REDUNLOCK %s", "dg");
    redisFree(d);
    pu_env_stop(&x.e);
}

TEST_MAIN(TEST_CASE(redlock_basic), TEST_CASE(redlock_startup_needs_odd_masters),
          TEST_CASE(redlock_masters_down), TEST_CASE(redlock_hung_master),
          TEST_CASE(redlock_validity_check), TEST_CASE(redlock_redisson_layout_excludes),
          TEST_CASE(redlock_renewal_needs_majority), TEST_CASE(redlock_lost_lease_given_back),
          TEST_CASE(redlock_unlock_given_back), TEST_CASE(redlock_unlock_in_hand),
          TEST_CASE(redlock_disconnect_given_back))
