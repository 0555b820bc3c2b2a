/* Upstream failures: Redis killed (SIGKILL) and restarted, idle and under
 * load, and Redis frozen with SIGSTOP. While Redis is unreachable lock
 * commands must fail fast with an UPSTREAM error (never +OK), the proxy
 * keeps serving and recovers by itself, and mutual exclusion still holds
 * afterwards. Both io backends. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define LOAD_WORKERS 8
#define JAVA_OWNER   "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a:1"

enum phase {
    PHASE_UP = 0,  /* before the kill */
    PHASE_DOWN,    /* redis is dead (reaped) and not yet restarting */
    PHASE_RESTART, /* restart begun */
};

/* Runs one command, checks it is an UPSTREAM error, returns its latency. */
static long long expect_upstream_err(redisContext *c, const char *fmt, const char *name)
{
    long long t0 = pu_now_ms();
    redisReply *r = pu_cmd(c, fmt, name);
    char got[320];

    if (!pu_is_err(r, "UPSTREAM"))
        TEST_FAIL("\"%s\" with redis down: expected -UPSTREAM..., got %s", fmt,
                  pu_describe(r, got, sizeof(got)));
    freeReplyObject(r);
    return pu_now_ms() - t0;
}

static bool upstream_state_is(redisContext *c, const char *want)
{
    char val[64];

    return pu_info_str(c, "upstream_state", val, sizeof(val)) && strcmp(val, want) == 0;
}

/* Retries LOCK until +OK; only UPSTREAM errors are acceptable meanwhile. */
static void lock_eventually(redisContext *c, const char *name, int ms)
{
    long long deadline = pu_now_ms() + ms;
    char got[320];

    for (;;) {
        redisReply *r = pu_cmd(c, "LOCK %s WAIT %d", name, 1000);

        if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) {
            freeReplyObject(r);
            return;
        }
        if (!pu_is_err(r, "UPSTREAM") && r->type != REDIS_REPLY_NIL)
            TEST_FAIL("LOCK %s while recovering: %s", name, pu_describe(r, got, sizeof(got)));
        freeReplyObject(r);
        if (pu_now_ms() > deadline)
            TEST_FAIL("LOCK %s did not succeed within %d ms after recovery", name, ms);
        pu_sleep_ms(50);
    }
}

/* holder takes name with a long lease, a new client waits for it, and is
 * woken well before the lease ends when holder unlocks. */
static void check_wake(struct pu_env *e, redisContext *holder, const char *name)
{
    redisContext *w = pu_client(e);
    long long t0;

    PU_OK(holder, "LOCK %s LEASE %d", name, 20000);
    pu_send(w, "LOCK %s", name);
    ASSERT_NULL(pu_try_recv(w, 200));
    t0 = pu_now_ms();
    PU_INT(holder, 1, "UNLOCK %s", name);
    su_expect_ok_within(w, 10000);
    if (pu_now_ms() - t0 >= 1000)
        TEST_FAIL("waiter for %s woke %lld ms after UNLOCK", name, pu_now_ms() - t0);
    PU_INT(w, 1, "UNLOCK %s", name);
    redisFree(w);
}

static void scenario_down(struct pu_env *e)
{
    static const char *const cmds[] = {"LOCK %s", "TRYLOCK %s", "LOCK %s WAIT 500",
                                       "FORCEUNLOCK %s", "LOCK.INFO %s"};
    redisContext *c = pu_client(e), *w = pu_client(e), *rc = pu_redis_client(e);
    long long lat, t_restart, left;
    redisReply *r;

    PU_OK(c, "LOCK %s LEASE %d", "held", 60000);
    PU_OK(c, "LOCK %s LEASE %d", "kept", 60000);
    PU_INT(rc, 1, "HINCRBY %s %s 1", "busy", JAVA_OWNER);
    PU_INT(rc, 1, "PEXPIRE %s 60000", "busy");
    pu_send(w, "LOCK %s WAIT %d", "busy", 30000);
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 1, 3000);
    redisFree(rc);

    pu_redis_kill(&e->redis);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        lat = expect_upstream_err(c, cmds[i], "x");
        if (lat >= 1000)
            TEST_FAIL("\"%s\" took %lld ms to fail with redis down", cmds[i], lat);
    }
    /* An UNLOCK of a hold still vouched for is the proxy's to carry out:
     * answered at once, released once Redis is back (issue 22). */
    lat = pu_now_ms();
    PU_INT(c, 1, "UNLOCK %s", "held");
    ASSERT_TRUE(pu_now_ms() - lat < 1000);
    PU_STR(c, "PONG", "PING");
    PU_EVENTUALLY(!upstream_state_is(c, "up"), 3000);

    pu_redis_restart(&e->redis);
    t_restart = pu_now_ms();
    PU_EVENTUALLY(upstream_state_is(c, "up"), 15000);
    lock_eventually(c, "x", 10000);
    PU_INT(c, 1, "UNLOCK %s", "x");
    /* Redis lost its data: the lock held through the outage is gone; the
     * one released during it stays released. */
    PU_ERR(c, "LOCKLOST", "UNLOCK %s", "kept");
    PU_ERR(c, "NOTOWNER", "UNLOCK %s", "held");

    /* The waiter from before the outage is not stranded. */
    left = t_restart + 5000 - pu_now_ms();
    r = pu_try_recv(w, left > 0 ? (int)left : 0);
    if (!r)
        TEST_FAIL("waiter from before the outage got no reply 5 s after redis came back");
    if (!pu_is_err(r, "UPSTREAM"))
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    redisFree(w);
    /* Wake-ups work again: pub/sub was re-established too. */
    check_wake(e, c, "after");
    redisFree(c);
}

/* Redis restarts without persistence while locks are held: the proxy sees
 * the new run_id on reconnect and checks its holds at once, so the holder
 * is told (leases_lost, LOCKLOST) right away, not at the next renewal (a
 * third of the 30 s watchdog lease) or, for a LEASE hold, never before its
 * UNLOCK. */
static void scenario_restart_told(struct pu_env *e)
{
    redisContext *c = pu_client(e), *other = pu_client(e);

    PU_OK(c, "LOCK %s", "wd");
    PU_OK(c, "LOCK %s LEASE %d", "leased", 60000);
    ASSERT_EQ(pu_info_int(c, "upstream_restarts"), 0);
    pu_redis_kill(&e->redis);
    pu_redis_restart(&e->redis);
    PU_EVENTUALLY(upstream_state_is(c, "up"), 15000);
    PU_EVENTUALLY(pu_info_int(c, "leases_lost") == 2, 3000);
    ASSERT_EQ(pu_info_int(c, "upstream_restarts"), 1);
    /* Redis lost both: another client takes one at once. */
    PU_OK(other, "LOCK %s WAIT %d", "wd", 1000);
    PU_ERR(c, "LOCKLOST", "UNLOCK %s", "wd");
    PU_ERR(c, "LOCKLOST", "UNLOCK %s", "leased");
    PU_INT(other, 1, "UNLOCK %s", "wd");
    redisFree(other);
    redisFree(c);
}

/* A restart without persistence loses the permits clients of the proxy
 * took. An operator sets the semaphore up again; neither the holder's
 * SEM.RELEASE nor another holder's disconnect may then raise it above what
 * it was set to (each would add a permit nobody took in this Redis): the
 * release answers LOCKLOST. */
static void scenario_restart_sem(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e), *c = pu_client(e);
    long long until;

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "rs", 2);
    PU_OK(a, "SEM.ACQUIRE %s", "rs");
    PU_OK(b, "SEM.ACQUIRE %s", "rs");
    pu_redis_kill(&e->redis);
    pu_redis_restart(&e->redis);
    PU_EVENTUALLY(upstream_state_is(c, "up"), 15000);
    PU_EVENTUALLY(pu_info_int(c, "upstream_restarts") == 1, 3000);
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", "rs", 2);
    PU_ERR(a, "LOCKLOST", "SEM.RELEASE %s", "rs");
    PU_INT(c, 2, "SEM.AVAILABLE %s", "rs");
    redisFree(b); /* its permit would go back on close */
    for (until = pu_now_ms() + 1000; pu_now_ms() < until; pu_sleep_ms(50))
        PU_INT(c, 2, "SEM.AVAILABLE %s", "rs");
    /* Permits taken after the restart go back as ever. */
    b = pu_client(e);
    PU_OK(b, "SEM.ACQUIRE %s %d", "rs", 2);
    PU_INT(c, 0, "SEM.AVAILABLE %s", "rs");
    redisFree(b);
    PU_EVENTUALLY(pu_int_reply(c, "SEM.AVAILABLE", "rs") == 2, 3000);
    PU_OK(a, "SEM.TRYACQUIRE %s", "rs");
    PU_INT(a, 2, "SEM.RELEASE %s", "rs");
    redisFree(c);
    redisFree(a);
}

struct load {
    int port;
    atomic_int phase;
    atomic_int stop;
    atomic_int ok_up, ok_after, down_errs, upstream_errs, unlock_errs, nils;
    atomic_int unlock_in_hand; /* UNLOCK :1 with Redis down: the proxy carries it out */
    atomic_int bad_ok, bad_nil, other, broken;
    atomic_llong max_down_ms;
    atomic_int after_by_worker[LOAD_WORKERS];
    pthread_mutex_t mu;
    char first_other[256]; /* under mu */
};

static void load_other(struct load *l, const char *what, const redisReply *r)
{
    char got[320];

    atomic_fetch_add(&l->other, 1);
    pthread_mutex_lock(&l->mu);
    if (!l->first_other[0])
        snprintf(l->first_other, sizeof(l->first_other), "%s: %s", what,
                 pu_describe(r, got, sizeof(got)));
    pthread_mutex_unlock(&l->mu);
}

static void note_max(atomic_llong *max, long long v)
{
    long long cur = atomic_load(max);

    while (v > cur && !atomic_compare_exchange_weak(max, &cur, v))
        ;
}

/* UNLOCK after a successful LOCK; errors are expected around the outage. */
static void load_unlock(struct load *l, redisContext *c)
{
    int ph0 = atomic_load(&l->phase);
    redisReply *r = redisCommand(c, "UNLOCK %s", "load");
    int ph1 = atomic_load(&l->phase);

    if (!r) {
        atomic_fetch_add(&l->broken, 1);
        return;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        /* With Redis down, an UNLOCK of a hold the proxy vouches for is
         * answered :1 and carried out by the proxy (README, Guarantees:
         * releases through outages); the lock's later LOCKs by every
         * worker after the restart show it was. */
        if (ph0 == PHASE_DOWN && ph1 == PHASE_DOWN)
            atomic_fetch_add(&l->unlock_in_hand, 1);
    } else if (pu_is_err(r, "UPSTREAM") || pu_is_err(r, "LOCKLOST") || pu_is_err(r, "NOTOWNER")) {
        atomic_fetch_add(&l->unlock_errs, 1);
    } else {
        load_other(l, "UNLOCK", r);
    }
    freeReplyObject(r);
}

/* Classifies one LOCK reply; returns true if the lock was acquired. */
static bool load_classify(struct load *l, int id, const redisReply *r, int ph0, int ph1,
                          long long lat)
{
    bool down = ph0 == PHASE_DOWN && ph1 == PHASE_DOWN;

    if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) {
        if (down)
            atomic_fetch_add(&l->bad_ok, 1);
        if (ph0 == PHASE_RESTART) {
            atomic_fetch_add(&l->after_by_worker[id], 1);
            atomic_fetch_add(&l->ok_after, 1);
        }
        if (ph1 == PHASE_UP)
            atomic_fetch_add(&l->ok_up, 1);
        return true;
    }
    if (r->type == REDIS_REPLY_NIL) {
        atomic_fetch_add(down ? &l->bad_nil : &l->nils, 1);
    } else if (pu_is_err(r, "UPSTREAM")) {
        atomic_fetch_add(&l->upstream_errs, 1);
        if (down) {
            atomic_fetch_add(&l->down_errs, 1);
            note_max(&l->max_down_ms, lat);
        }
        usleep(10000);
    } else {
        load_other(l, "LOCK", r);
    }
    return false;
}

struct worker_arg {
    struct load *l;
    int id;
};

static void *load_worker(void *arg)
{
    struct worker_arg *wa = arg;
    struct load *l = wa->l;
    redisContext *c = pu_try_connect(l->port);

    if (!c) {
        atomic_fetch_add(&l->broken, 1);
        return NULL;
    }
    while (!atomic_load(&l->stop)) {
        int ph0 = atomic_load(&l->phase);
        long long t0 = pu_now_ms();
        redisReply *r = redisCommand(c, "LOCK %s WAIT %d", "load", 300);
        int ph1 = atomic_load(&l->phase);
        bool got;

        if (!r) {
            atomic_fetch_add(&l->broken, 1);
            break;
        }
        got = load_classify(l, wa->id, r, ph0, ph1, pu_now_ms() - t0);
        freeReplyObject(r);
        if (got) {
            usleep(500);
            load_unlock(l, c);
        }
    }
    redisFree(c);
    return NULL;
}

static bool all_workers_recovered(struct load *l)
{
    for (int i = 0; i < LOAD_WORKERS; i++) {
        if (atomic_load(&l->after_by_worker[i]) == 0)
            return false;
    }
    return true;
}

static void check_load(struct load *l)
{
    fprintf(stderr,
            "   load: ok_up=%d ok_after=%d down_errs=%d (max %lld ms) upstream_errs=%d "
            "unlock_errs=%d unlock_in_hand=%d nils=%d bad_ok=%d bad_nil=%d other=%d broken=%d\n",
            atomic_load(&l->ok_up), atomic_load(&l->ok_after), atomic_load(&l->down_errs),
            (long long)atomic_load(&l->max_down_ms), atomic_load(&l->upstream_errs),
            atomic_load(&l->unlock_errs), atomic_load(&l->unlock_in_hand), atomic_load(&l->nils),
            atomic_load(&l->bad_ok), atomic_load(&l->bad_nil), atomic_load(&l->other),
            atomic_load(&l->broken));
    if (atomic_load(&l->other) > 0)
        TEST_FAIL("unexpected replies under load; first: %s", l->first_other);
    ASSERT_EQ(atomic_load(&l->broken), 0);
    ASSERT_EQ(atomic_load(&l->bad_ok), 0);
    ASSERT_EQ(atomic_load(&l->bad_nil), 0);
    ASSERT_TRUE(atomic_load(&l->ok_up) > 0);
    ASSERT_TRUE(atomic_load(&l->down_errs) > 0);
    ASSERT_TRUE(atomic_load(&l->max_down_ms) < 1000);
}

static void scenario_restart_under_load(struct pu_env *e)
{
    static struct load l;
    struct worker_arg args[LOAD_WORKERS];
    pthread_t tids[LOAD_WORKERS];

    memset(&l, 0, sizeof(l));
    l.port = e->proxy.port;
    pthread_mutex_init(&l.mu, NULL);
    for (int i = 0; i < LOAD_WORKERS; i++) {
        args[i] = (struct worker_arg){&l, i};
        if (pthread_create(&tids[i], NULL, load_worker, &args[i]) != 0)
            TEST_FAIL("pthread_create failed");
    }
    pu_sleep_ms(1000);
    pu_redis_kill(&e->redis);
    atomic_store(&l.phase, PHASE_DOWN);
    pu_sleep_ms(1500);
    atomic_store(&l.phase, PHASE_RESTART);
    pu_redis_restart(&e->redis);
    for (long long dl = pu_now_ms() + 20000; !all_workers_recovered(&l) && pu_now_ms() < dl;)
        pu_sleep_ms(20);
    atomic_store(&l.stop, 1);
    for (int i = 0; i < LOAD_WORKERS; i++)
        pthread_join(tids[i], NULL);
    check_load(&l);
    if (!all_workers_recovered(&l))
        TEST_FAIL("some clients never acquired the lock again after the restart");
    pthread_mutex_destroy(&l.mu);
    su_mutex_check(e->proxy.port, "after-restart", 16, 20);
}

/* Redis frozen: requests fail after --upstream-timeout instead of hanging,
 * the proxy keeps answering, and it recovers after SIGCONT. */
static void scenario_sigstop(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];
    long long lat, t0;

    pu_conn_owner(c, owner, sizeof(owner));
    PU_OK(c, "LOCK %s", "warm");
    PU_INT(c, 1, "UNLOCK %s", "warm");
    pu_redis_pause(&e->redis);
    lat = expect_upstream_err(c, "LOCK %s", "st");
    fprintf(stderr, "   LOCK failed after %lld ms with redis stopped\n", lat);
    ASSERT_TRUE(lat < 5000);
    lat = expect_upstream_err(c2, "TRYLOCK %s", "st2");
    ASSERT_TRUE(lat < 5000);
    t0 = pu_now_ms();
    PU_STR(c2, "PONG", "PING");
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);

    pu_redis_resume(&e->redis);
    lock_eventually(c2, "st", 10000);
    if (pu_hget_int(rc, "st", owner) > 0)
        fprintf(stderr,
                "   NOTE: the timed-out LOCK ran in redis after SIGCONT; a phantom "
                "hold by %s had to expire first\n",
                owner);
    PU_INT(c2, 1, "UNLOCK %s", "st");
    PU_ERR(c, "NOTOWNER", "UNLOCK %s", "st");
    PU_EVENTUALLY(upstream_state_is(c, "up"), 5000);
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

/* Redis drops the proxy's connections (CLIENT KILL): the pub/sub one while
 * a waiter waits, then the command ones while a watchdog lock is held. */
static void scenario_conns_killed(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *w = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    char chan[128];
    redisReply *r;
    long long t0, until;

    pu_channel("pk", chan, sizeof(chan));
    PU_OK(c1, "LOCK %s", "wk");
    PU_OK(c2, "LOCK %s LEASE %d", "pk", 20000);
    pu_send(w, "LOCK %s", "pk");
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 3000);
    r = pu_cmd(rc, "CLIENT KILL TYPE %s", "pubsub");
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
    freeReplyObject(r);
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 5000);
    t0 = pu_now_ms();
    PU_INT(c2, 1, "UNLOCK %s", "pk");
    su_expect_ok_within(w, 10000);
    if (pu_now_ms() - t0 >= 1000)
        TEST_FAIL("waiter woke %lld ms after UNLOCK (pub/sub not re-established?)",
                  pu_now_ms() - t0);
    PU_INT(w, 1, "UNLOCK %s", "pk");

    r = pu_cmd(rc, "CLIENT KILL TYPE %s SKIPME %s", "normal", "yes");
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
    freeReplyObject(r);
    lock_eventually(c2, "pk2", 5000);
    PU_INT(c2, 1, "UNLOCK %s", "pk2");
    /* The watchdog lock survives (renewed over the new connections). */
    for (until = pu_now_ms() + 2000; pu_now_ms() < until; pu_sleep_ms(50))
        ASSERT_TRUE(pu_pttl(rc, "wk") > 0);
    PU_INT(c1, 1, "UNLOCK %s", "wk");
    redisFree(rc);
    redisFree(w);
    redisFree(c2);
    redisFree(c1);
}

TEST(upstream_down_and_back)
{
    pu_each_backend(scenario_down, NULL);
}

TEST(upstream_restart_told_at_once)
{
    pu_each_backend(scenario_restart_told, NULL);
}

TEST(upstream_restart_sem_permits_lost)
{
    pu_each_backend(scenario_restart_sem, NULL);
}

TEST(upstream_restart_under_load)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "2000", NULL};

    pu_each_backend(scenario_restart_under_load, extra);
}

TEST(upstream_stopped_times_out)
{
    static const char *const extra[] = {"--upstream-timeout", "500", "--lock-watchdog-timeout",
                                        "2000", NULL};

    pu_each_backend(scenario_sigstop, extra);
}

TEST(upstream_connections_killed)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "600", NULL};

    pu_each_backend(scenario_conns_killed, extra);
}

TEST_MAIN(TEST_CASE(upstream_down_and_back), TEST_CASE(upstream_connections_killed),
          TEST_CASE(upstream_restart_under_load), TEST_CASE(upstream_stopped_times_out),
          TEST_CASE(upstream_restart_told_at_once), TEST_CASE(upstream_restart_sem_permits_lost))
