/* Read-write lock commands (RLOCK, RUNLOCK, WLOCK, WUNLOCK) against a real
 * redis-server: Redisson's RReadWriteLock layout in Redis (hash with
 * "mode", read owner fields, ":write" owner fields, one
 * {name}:<owner>:rwlock_timeout:<n> key per read hold, "0"/"1" on
 * redisson_rwlock:{name}), exclusion under many clients (readers overlap,
 * writers exclusive), wake-ups (a write release wakes every reader), one
 * shared subscription, renewal and release on disconnect of both kinds,
 * errors instead of corrupted keys, and interoperation with a client that
 * runs Redisson's own rwlock scripts. Both io backends. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define JAVA_UUID   "5a0c3b52-1d9e-4c8e-9b8a-3f2e1d0c9b8a"
#define JAVA_READER JAVA_UUID ":7"
#define JAVA_WRITER JAVA_UUID ":8:write"
#define NUM_READERS 20
#define MX_THREADS  60
#define MX_ITERS    8
#define WAKE_MAX_MS 1000

/* Redisson's RedissonReadLock acquire (KEYS name, timeout prefix; ARGV
 * lease, reader, writer of the same thread) and unlock (KEYS name, channel,
 * timeout prefix, {name}; ARGV message, reader), latch left out. */
static const char java_read_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'read'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('set', KEYS[2] .. ':1', 1); "
    "redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) "
    "then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local key = KEYS[2] .. ':' .. ind; redis.call('set', key, 1); "
    "redis.call('pexpire', key, ARGV[1]); local remainTime = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); return nil; end; "
    "return redis.call('pttl', KEYS[1]);";
static const char java_read_unlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); "
    "if (lockExists == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end; "
    "redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then local maxRemainTime = -3; "
    "local keys = redis.call('hkeys', KEYS[1]); "
    "for n, key in ipairs(keys) do counter = tonumber(redis.call('hget', KEYS[1], key)); "
    "if type(counter) == 'number' then for i=counter, 1, -1 do "
    "local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); "
    "maxRemainTime = math.max(remainTime, maxRemainTime); end; end; end; "
    "if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); return 0; end; "
    "if mode == 'write' then return 0; end; end; "
    "redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1;";

/* Redisson's RedissonWriteLock acquire (KEYS name; ARGV lease, writer) and
 * unlock (KEYS name, channel; ARGV message, lease, writer). */
static const char java_write_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('hset', KEYS[1], 'mode', 'write'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if (mode == 'write') then if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); local currentExpire = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); return nil; end; end; "
    "return redis.call('pttl', KEYS[1]);";
static const char java_write_unlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "if (mode == 'write') then local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then return nil; else "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else "
    "redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; return 1; end; end; end; "
    "return nil;";

static const char *const wd_600[] = {"--lock-watchdog-timeout", "600", NULL};

/* ---- helpers ------------------------------------------------------------------ */

/* The read-write lock's channel: redisson_rwlock:{name}. */
static void rw_channel(const char *name, char *buf, size_t n)
{
    pu_redisson_key("redisson_rwlock:", name, buf, n);
}

/* {name}:<owner>:rwlock_timeout[:<i>] (no ":<i>" when i is 0). */
static void timeout_key(const char *name, const char *owner, int i, char *buf, size_t n)
{
    char b[256];
    int len;

    pu_redisson_key("", name, b, sizeof(b));
    if (i > 0)
        len = snprintf(buf, n, "%s:%s:rwlock_timeout:%d", b, owner, i);
    else
        len = snprintf(buf, n, "%s:%s:rwlock_timeout", b, owner);
    if (len >= (int)n)
        TEST_FAIL("timeout key too long");
}

static long long timeout_pttl(redisContext *rc, const char *name, const char *owner, int i)
{
    char key[512];

    timeout_key(name, owner, i, key, sizeof(key));
    return pu_pttl(rc, key);
}

static void hget_str(redisContext *rc, const char *key, const char *field, char *buf, size_t n)
{
    redisReply *r = pu_cmd(rc, "HGET %s %s", key, field);

    snprintf(buf, n, "%s", r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
}

/* Runs a Redisson script with the given keys and arguments (hiredis %s
 * each); returns the reply. */
static redisReply *java_eval(redisContext *rc, const char *script, int nkeys, int nargs,
                             const char *const *av)
{
    const char *argv[12] = {"EVAL", script, NULL};
    char nk[8];
    int argc = 3;

    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[2] = nk;
    for (int i = 0; i < nkeys + nargs; i++)
        argv[argc++] = av[i];
    return redisCommandArgv(rc, argc, argv, NULL);
}

/* ---- layout -------------------------------------------------------------------- */

static void check_read_layout(struct pu_env *e, redisContext *rc, redisContext *c, const char *name)
{
    char owner[PU_OWNER_MAX], chan[256], mode[32];
    redisContext *sub;

    pu_conn_owner(c, owner, sizeof(owner));
    rw_channel(name, chan, sizeof(chan));
    sub = pu_psubscribe(e, chan);
    PU_OK(c, "RLOCK %s", name);
    PU_STR(rc, "hash", "TYPE %s", name);
    hget_str(rc, name, "mode", mode, sizeof(mode));
    ASSERT_STREQ(mode, "read");
    ASSERT_EQ(pu_hlen(rc, name), 2);
    ASSERT_EQ(pu_hget_int(rc, name, owner), 1);
    ASSERT_TRUE(pu_pttl(rc, name) > 0 && pu_pttl(rc, name) <= 30000);
    ASSERT_TRUE(timeout_pttl(rc, name, owner, 1) > 0 && timeout_pttl(rc, name, owner, 1) <= 30000);

    PU_OK(c, "RLOCK %s LEASE %d", name, 60000);
    ASSERT_EQ(pu_hget_int(rc, name, owner), 2);
    ASSERT_TRUE(timeout_pttl(rc, name, owner, 2) > 30000);
    ASSERT_TRUE(pu_pttl(rc, name) > 30000); /* the hash lives as long as its longest hold */

    PU_INT(c, 0, "RUNLOCK %s", name);
    ASSERT_EQ(timeout_pttl(rc, name, owner, 2), -2);
    ASSERT_EQ(pu_hget_int(rc, name, owner), 1);
    su_expect_no_msg(sub, 100);
    PU_INT(c, 1, "RUNLOCK %s", name);
    ASSERT_TRUE(!pu_exists(rc, name));
    ASSERT_EQ(timeout_pttl(rc, name, owner, 1), -2);
    su_expect_msg(sub, chan, "0");
    PU_ERR(c, "NOTOWNER", "RUNLOCK %s", name);
    redisFree(sub);
}

static void check_write_layout(struct pu_env *e, redisContext *rc, redisContext *c,
                               const char *name)
{
    char owner[PU_OWNER_MAX], wfield[PU_OWNER_MAX + 8], chan[256], mode[32];
    redisContext *sub;

    pu_conn_owner(c, owner, sizeof(owner));
    snprintf(wfield, sizeof(wfield), "%s:write", owner);
    rw_channel(name, chan, sizeof(chan));
    sub = pu_psubscribe(e, chan);
    PU_OK(c, "WLOCK %s", name);
    hget_str(rc, name, "mode", mode, sizeof(mode));
    ASSERT_STREQ(mode, "write");
    ASSERT_EQ(pu_hlen(rc, name), 2);
    ASSERT_EQ(pu_hget_int(rc, name, wfield), 1);
    ASSERT_TRUE(pu_pttl(rc, name) > 0 && pu_pttl(rc, name) <= 30000);
    PU_OK(c, "WLOCK %s", name);
    ASSERT_EQ(pu_hget_int(rc, name, wfield), 2);

    /* Downgrade: the writer may read; its write release then leaves mode
     * read, and wakes everyone ("1"). */
    PU_OK(c, "RLOCK %s", name);
    ASSERT_EQ(pu_hget_int(rc, name, owner), 1);
    ASSERT_TRUE(timeout_pttl(rc, name, owner, 1) > 0);
    PU_INT(c, 0, "WUNLOCK %s", name);
    su_expect_no_msg(sub, 100);
    PU_INT(c, 1, "WUNLOCK %s", name);
    hget_str(rc, name, "mode", mode, sizeof(mode));
    ASSERT_STREQ(mode, "read");
    ASSERT_EQ(pu_hget_int(rc, name, wfield), -1);
    su_expect_msg(sub, chan, "1");
    PU_INT(c, 1, "RUNLOCK %s", name);
    ASSERT_TRUE(!pu_exists(rc, name));
    su_expect_msg(sub, chan, "0");

    PU_OK(c, "WLOCK %s LEASE %d", name, 5000);
    PU_INT(c, 1, "WUNLOCK %s", name);
    ASSERT_TRUE(!pu_exists(rc, name));
    su_expect_msg(sub, chan, "1");
    PU_ERR(c, "NOTOWNER", "WUNLOCK %s", name);
    redisFree(sub);
}

static void scenario_layout(struct pu_env *e)
{
    static const char *const names[] = {"rw", "a{b}c"};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        check_read_layout(e, rc, c, names[i]);
        check_write_layout(e, rc, c, names[i]);
    }
    ASSERT_EQ(pu_dbsize(rc), 0); /* nothing left behind */
    redisFree(rc);
    redisFree(c);
}

/* ---- exclusion ----------------------------------------------------------------- */

/* Shared state of the exclusion check. */
struct rw_mx {
    struct su_excl writers; /* writers inside; the counter only they write */
    atomic_int readers;     /* readers inside */
    atomic_int max_readers; /* most readers seen inside at once */
    atomic_int violations;  /* a reader found a writer inside, or a writer readers */
};

static bool rw_write_round(struct rw_mx *s, redisContext *c)
{
    if (!su_cmd_ok(c, SU_OK, "WLOCK %s", "mx"))
        return false;
    su_excl_enter(&s->writers);
    if (atomic_load(&s->readers) != 0)
        atomic_fetch_add(&s->violations, 1);
    su_excl_leave(&s->writers, 200);
    return su_cmd_ok(c, 1, "WUNLOCK %s", "mx");
}

static bool rw_read_round(struct rw_mx *s, redisContext *c)
{
    if (!su_cmd_ok(c, SU_OK, "RLOCK %s", "mx"))
        return false;
    su_atomic_max(&s->max_readers, atomic_fetch_add(&s->readers, 1) + 1);
    if (atomic_load(&s->writers.inside) != 0)
        atomic_fetch_add(&s->violations, 1);
    usleep(1000);
    if (atomic_load(&s->writers.inside) != 0)
        atomic_fetch_add(&s->violations, 1);
    atomic_fetch_sub(&s->readers, 1);
    return su_cmd_ok(c, 1, "RUNLOCK %s", "mx");
}

/* Client i is a writer when i % 3 == 0, else a reader. */
static bool rw_round(void *arg, int i, redisContext *c)
{
    return i % 3 == 0 ? rw_write_round(arg, c) : rw_read_round(arg, c);
}

static void scenario_exclusion(struct pu_env *e)
{
    static struct rw_mx s;
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    const struct su_clients spec = {&e->proxy.port, 1, MX_THREADS, MX_ITERS, rw_round, &s};
    int writers = (MX_THREADS + 2) / 3; /* i % 3 == 0 for i < MX_THREADS */

    memset(&s, 0, sizeof(s));
    ASSERT_EQ(su_clients_run(&spec), 0);
    ASSERT_EQ(atomic_load(&s.violations), 0);
    ASSERT_EQ(atomic_load(&s.writers.violations), 0);
    ASSERT_EQ(s.writers.counter, (long)writers * MX_ITERS);
    ASSERT_TRUE(atomic_load(&s.max_readers) >= 2); /* readers did share the lock */
    ASSERT_TRUE(!pu_exists(rc, "mx"));
    ASSERT_EQ(pu_dbsize(rc), 0);
    PU_EVENTUALLY(pu_info_int(c, "lock_waiters") == 0, 2000);
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);
    redisFree(rc);
    redisFree(c);
}

/* ---- wake-ups ------------------------------------------------------------------ */

static void scenario_wakeups(struct pu_env *e)
{
    redisContext *w = pu_client(e), *rc = pu_redis_client(e), *r[NUM_READERS];
    long long t0, worst = 0;
    char chan[128];

    rw_channel("wk", chan, sizeof(chan));
    PU_OK(w, "WLOCK %s LEASE %d", "wk", 20000);
    for (int i = 0; i < NUM_READERS; i++) {
        r[i] = pu_client(e);
        pu_send(r[i], "RLOCK %s", "wk");
    }
    PU_EVENTUALLY(pu_info_int(w, "lock_waiters") == NUM_READERS, 5000);
    PU_EVENTUALLY(su_numsub(rc, chan) == 1, 3000);
    pu_sleep_ms(100);
    ASSERT_EQ(su_numsub(rc, chan), 1);
    for (int i = 0; i < NUM_READERS; i++)
        ASSERT_NULL(pu_try_recv(r[i], 0));

    /* One write release wakes every reader. */
    t0 = pu_now_ms();
    PU_INT(w, 1, "WUNLOCK %s", "wk");
    for (int i = 0; i < NUM_READERS; i++) {
        long long took = su_recv_ok_within(r[i], t0, 5000);

        worst = took > worst ? took : worst;
    }
    if (worst >= WAKE_MAX_MS)
        TEST_FAIL("last reader woke %lld ms after WUNLOCK", worst);
    ASSERT_EQ(pu_hlen(rc, "wk"), NUM_READERS + 1);

    /* A writer waits for every reader, and goes in right after the last. */
    pu_send(w, "WLOCK %s", "wk");
    for (int i = 0; i < NUM_READERS - 1; i++)
        PU_INT(r[i], 1, "RUNLOCK %s", "wk");
    ASSERT_NULL(pu_try_recv(w, 200));
    t0 = pu_now_ms();
    PU_INT(r[NUM_READERS - 1], 1, "RUNLOCK %s", "wk");
    if (su_recv_ok_within(w, t0, 5000) >= WAKE_MAX_MS)
        TEST_FAIL("writer woke %lld ms after the last RUNLOCK", pu_now_ms() - t0);
    PU_INT(w, 1, "WUNLOCK %s", "wk");
    ASSERT_EQ(pu_dbsize(rc), 0);
    for (int i = 0; i < NUM_READERS; i++)
        redisFree(r[i]);
    redisFree(rc);
    redisFree(w);
}

/* Of NUM_READERS waiting writers, a write release wakes one: Redis runs
 * the unlock and one acquire, not one acquire per writer. Then every
 * writer gets its turn, each woken by the previous one's release. */
static void scenario_writers_one_at_a_time(struct pu_env *e)
{
    redisContext *w0 = pu_client(e), *rc = pu_redis_client(e), *w[NUM_READERS];
    long long before, t0;
    bool done[NUM_READERS] = {false};

    PU_OK(w0, "WLOCK %s", "w1");
    for (int i = 0; i < NUM_READERS; i++) {
        w[i] = pu_client(e);
        pu_send(w[i], "WLOCK %s", "w1");
    }
    PU_EVENTUALLY(pu_info_int(w0, "lock_waiters") == NUM_READERS, 5000);
    pu_sleep_ms(100);
    before = pu_cmdstat_calls(rc, "evalsha");
    PU_INT(w0, 1, "WUNLOCK %s", "w1");
    for (int turn = 0; turn < NUM_READERS; turn++) {
        int got = -1;

        t0 = pu_now_ms();
        while (got < 0 && pu_now_ms() - t0 < 5000) {
            for (int i = 0; i < NUM_READERS && got < 0; i++) {
                redisReply *r = done[i] ? NULL : pu_try_recv(w[i], 1);

                if (r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
                    got = i;
                else if (r)
                    TEST_FAIL("writer %d got an unexpected reply", i);
                if (r)
                    freeReplyObject(r);
            }
        }
        if (got < 0)
            TEST_FAIL("turn %d: no writer got the lock within 5 s", turn);
        if (turn == 0) {
            pu_sleep_ms(200); /* the other writers' attempts would have run by now */
            if (pu_cmdstat_calls(rc, "evalsha") - before > 3)
                TEST_FAIL("one WUNLOCK cost %lld scripts with %d writers waiting",
                          pu_cmdstat_calls(rc, "evalsha") - before, NUM_READERS);
        }
        done[got] = true;
        PU_INT(w[got], 1, "WUNLOCK %s", "w1");
    }
    ASSERT_EQ(pu_dbsize(rc), 0);
    for (int i = 0; i < NUM_READERS; i++)
        redisFree(w[i]);
    redisFree(rc);
    redisFree(w0);
}

/* ---- watchdog and disconnects ---------------------------------------------------- */

static void scenario_watchdog(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char o1[PU_OWNER_MAX], o2[PU_OWNER_MAX];
    long long until;

    pu_conn_owner(c1, o1, sizeof(o1));
    pu_conn_owner(c2, o2, sizeof(o2));
    PU_OK(c1, "RLOCK %s", "wr");
    PU_OK(c1, "RLOCK %s", "wr");
    PU_OK(c2, "RLOCK %s", "wr");
    PU_OK(c2, "WLOCK %s", "ww");
    PU_OK(c1, "RLOCK %s LEASE %d", "wl", 300);
    until = pu_now_ms() + 2500; /* four watchdog timeouts */
    while (pu_now_ms() < until) {
        long long p[5] = {pu_pttl(rc, "wr"), timeout_pttl(rc, "wr", o1, 1),
                          timeout_pttl(rc, "wr", o1, 2), timeout_pttl(rc, "wr", o2, 1),
                          pu_pttl(rc, "ww")};

        for (int i = 0; i < 5; i++) {
            if (p[i] <= 0 || p[i] > 600)
                TEST_FAIL("watchdog key %d has PTTL %lld", i, p[i]);
        }
        pu_sleep_ms(50);
    }
    ASSERT_TRUE(pu_info_int(c1, "watchdog_renewals") > 0);
    ASSERT_TRUE(!pu_exists(rc, "wl")); /* LEASE holds are not renewed */
    PU_ERR(c1, "LOCKLOST", "RUNLOCK %s", "wl");
    PU_INT(c1, 0, "RUNLOCK %s", "wr");
    PU_INT(c1, 1, "RUNLOCK %s", "wr");
    PU_INT(c2, 1, "RUNLOCK %s", "wr");
    PU_INT(c2, 1, "WUNLOCK %s", "ww");
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(rc);
    redisFree(c2);
    redisFree(c1);
}

static void scenario_disconnect(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *c4 = pu_client(e), *rc = pu_redis_client(e);
    char o1[PU_OWNER_MAX];
    long long t0;

    pu_conn_owner(c1, o1, sizeof(o1));
    PU_OK(c1, "RLOCK %s", "dc");
    PU_OK(c1, "RLOCK %s", "dc");
    PU_OK(c2, "RLOCK %s", "dc");
    pu_send(c3, "WLOCK %s", "dc");
    ASSERT_NULL(pu_try_recv(c3, 200));

    /* A reader goes: its fields and timeout keys go, the others' stay. */
    redisFree(c1);
    PU_EVENTUALLY(pu_hget_int(rc, "dc", o1) == -1, 2000);
    ASSERT_EQ(timeout_pttl(rc, "dc", o1, 1), -2);
    ASSERT_EQ(timeout_pttl(rc, "dc", o1, 2), -2);
    ASSERT_EQ(pu_hlen(rc, "dc"), 2);
    ASSERT_NULL(pu_try_recv(c3, 100));

    /* The last reader goes: the writer is in at once. */
    t0 = pu_now_ms();
    redisFree(c2);
    ASSERT_TRUE(su_recv_ok_within(c3, t0, 5000) < 2000);

    /* The writer, which also took a read hold, goes: a reader is in. */
    PU_OK(c3, "RLOCK %s", "dc");
    pu_send(c4, "RLOCK %s", "dc");
    ASSERT_NULL(pu_try_recv(c4, 200));
    t0 = pu_now_ms();
    redisFree(c3);
    ASSERT_TRUE(su_recv_ok_within(c4, t0, 5000) < 2000);
    PU_EVENTUALLY(pu_hlen(rc, "dc") == 2, 2000); /* mode + c4's reader */
    redisFree(c4);
    PU_EVENTUALLY(pu_dbsize(rc) == 0, 2000);
    redisFree(rc);
}

/* ---- errors -------------------------------------------------------------------- */

static void scenario_errors(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char owner[PU_OWNER_MAX];

    pu_conn_owner(c, owner, sizeof(owner));
    /* A plain lock is not a read-write lock, and nothing is added to it. */
    PU_OK(c, "LOCK %s LEASE %d", "pl", 10000);
    PU_ERR(c, "WRONGTYPE", "RLOCK %s", "pl");
    PU_ERR(c, "WRONGTYPE", "WLOCK %s WAIT %d", "pl", 100);
    PU_ERR(c, "WRONGTYPE", "RUNLOCK %s", "pl");
    PU_ERR(c, "WRONGTYPE", "WUNLOCK %s", "pl");
    ASSERT_EQ(pu_hlen(rc, "pl"), 1);
    ASSERT_EQ(pu_hget_int(rc, "pl", owner), 1);
    PU_INT(c, 1, "UNLOCK %s", "pl");

    /* A read-write lock is not a plain or fair lock: its read count (whose
     * field looks like a plain owner's) is never touched. */
    PU_OK(c, "RLOCK %s", "rl");
    PU_ERR(c, "WRONGTYPE", "LOCK %s", "rl");
    PU_ERR(c, "WRONGTYPE", "TRYLOCK %s", "rl");
    PU_ERR(c, "WRONGTYPE", "LOCK %s FENCED", "rl");
    PU_ERR(c, "WRONGTYPE", "UNLOCK %s", "rl");
    PU_ERR(c, "WRONGTYPE", "FAIRLOCK %s WAIT %d", "rl", 100);
    PU_ERR(c, "WRONGTYPE", "FAIRUNLOCK %s", "rl");
    ASSERT_EQ(pu_hget_int(rc, "rl", owner), 1);
    ASSERT_EQ(pu_hlen(rc, "rl"), 2);

    /* Upgrade: answered at once instead of waiting forever. */
    PU_ERR(c, "ERR upgrade from read to write lock is not supported", "WLOCK %s", "rl");
    PU_NIL(c2, "WLOCK %s WAIT %d", "rl", 0);
    PU_INT(c, 1, "RUNLOCK %s", "rl");

    /* Other types. */
    PU_OK(rc, "SET %s %s", "str", "v");
    PU_ERR(c, "WRONGTYPE", "RLOCK %s", "str");
    PU_ERR(c, "WRONGTYPE", "WLOCK %s", "str");
    PU_STR(rc, "v", "GET %s", "str");

    /* Arguments. */
    PU_ERR(c, "ERR LEASE must be a non-negative integer", "RLOCK %s LEASE %d", "x", -5);
    PU_ERR(c, "ERR WAIT must be a non-negative integer", "WLOCK %s WAIT %s", "x", "abc");
    PU_ERR(c, "ERR LEASE must be at least 10 ms", "RLOCK %s LEASE %d", "x", 0);
    PU_ERR(c, "ERR RLOCK takes no FENCED option", "RLOCK %s FENCED", "x");
    PU_ERR(c, "ERR RUNLOCK takes no LEASE option", "RUNLOCK %s LEASE %d", "x", 5);
    PU_ERR(c, "ERR option 'WAIT' needs a value", "WLOCK %s WAIT", "x");
    PU_ERR(c, "ERR wrong number of arguments", "RLOCK");
    PU_ERR(c, "NOTOWNER", "RUNLOCK %s", "x");
    PU_ERR(c, "NOTOWNER", "WUNLOCK %s", "x");
    ASSERT_TRUE(!pu_exists(rc, "x"));

    /* Expired read hold. */
    PU_OK(c, "RLOCK %s LEASE %d", "ex", 100);
    pu_sleep_ms(300);
    PU_ERR(c, "LOCKLOST", "RUNLOCK %s", "ex");
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

/* FORCEUNLOCK knows a read-write lock: it wakes every waiter ("1" on the
 * rwlock channel) and refuses other types. */
static void scenario_forceunlock(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e), *sub;
    char chan[128];
    long long t0;

    rw_channel("fu", chan, sizeof(chan));
    sub = pu_psubscribe(e, "redisson_*");
    PU_OK(c, "WLOCK %s", "fu");
    pu_send(c2, "RLOCK %s", "fu");
    ASSERT_NULL(pu_try_recv(c2, 200));
    t0 = pu_now_ms();
    PU_INT(c3, 1, "FORCEUNLOCK %s", "fu");
    su_expect_msg(sub, chan, "1");
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);
    PU_INT(c3, 1, "FORCEUNLOCK %s", "fu");
    su_expect_msg(sub, chan, "1");
    ASSERT_TRUE(!pu_exists(rc, "fu"));
    PU_INT(c3, 0, "FORCEUNLOCK %s", "fu");
    su_expect_no_msg(sub, 100);
    PU_ERR(c, "LOCKLOST", "WUNLOCK %s", "fu");
    PU_OK(rc, "SET %s %s", "fs", "v");
    PU_ERR(c3, "WRONGTYPE", "FORCEUNLOCK %s", "fs");
    redisFree(sub);
    redisFree(rc);
    redisFree(c3);
    redisFree(c2);
    redisFree(c);
}

/* ---- Redisson interop ------------------------------------------------------------ */

static redisReply *java_read(redisContext *rc, const char *name, bool lock)
{
    char tprefix[256], chan[256], kprefix[256];
    const char *lk[5] = {name, tprefix, "30000", JAVA_READER, JAVA_UUID ":7:write"};
    const char *ul[6] = {name, chan, tprefix, kprefix, "0", JAVA_READER};

    timeout_key(name, JAVA_READER, 0, tprefix, sizeof(tprefix));
    rw_channel(name, chan, sizeof(chan));
    pu_redisson_key("", name, kprefix, sizeof(kprefix));
    return lock ? java_eval(rc, java_read_lock, 2, 3, lk)
                : java_eval(rc, java_read_unlock, 4, 2, ul);
}

static redisReply *java_write(redisContext *rc, const char *name, bool lock)
{
    char chan[256];
    const char *lk[3] = {name, "30000", JAVA_WRITER};
    const char *ul[5] = {name, chan, "1", "30000", JAVA_WRITER};

    rw_channel(name, chan, sizeof(chan));
    return lock ? java_eval(rc, java_write_lock, 1, 2, lk)
                : java_eval(rc, java_write_unlock, 2, 3, ul);
}

static void expect_java(redisReply *r, enum pu_kind kind, long long i)
{
    if (!r)
        TEST_FAIL("EVAL failed");
    PU_CHECK(r, kind, i, NULL);
    freeReplyObject(r);
}

static void scenario_redisson(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;
    long long t0;

    /* A Redisson reader and a proxy reader share the lock; a writer waits. */
    expect_java(java_read(rc, "jr", true), PU_K_NIL, 0);
    PU_OK(c, "RLOCK %s", "jr");
    PU_NIL(c2, "WLOCK %s WAIT %d", "jr", 100);
    /* Redisson's unlock recomputes the hash TTL from the remaining read
     * holds' timeout keys: the proxy's reader keeps it alive. */
    expect_java(java_read(rc, "jr", false), PU_K_INT, 0);
    ASSERT_TRUE(pu_pttl(rc, "jr") > 1000);
    ASSERT_EQ(pu_hlen(rc, "jr"), 2);
    /* And the proxy's release lets a Redisson writer in. */
    PU_INT(c, 1, "RUNLOCK %s", "jr");
    expect_java(java_write(rc, "jr", true), PU_K_NIL, 0);

    /* A Redisson writer holds: proxy readers wait, and its unlock ("1")
     * wakes them all at once. */
    pu_send(c, "RLOCK %s", "jr");
    pu_send(c2, "RLOCK %s", "jr");
    ASSERT_NULL(pu_try_recv(c, 300));
    t0 = pu_now_ms();
    expect_java(java_write(rc, "jr", false), PU_K_INT, 1);
    ASSERT_TRUE(su_recv_ok_within(c, t0, 5000) < WAKE_MAX_MS);
    ASSERT_TRUE(su_recv_ok_within(c2, t0, 5000) < WAKE_MAX_MS);

    /* Proxy readers hold: Redisson's write acquire sees their PTTL. */
    r = java_write(rc, "jr", true);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0);
    freeReplyObject(r);
    PU_INT(c, 1, "RUNLOCK %s", "jr");
    PU_INT(c2, 1, "RUNLOCK %s", "jr");
    expect_java(java_write(rc, "jr", true), PU_K_NIL, 0);
    expect_java(java_write(rc, "jr", false), PU_K_INT, 1);
    ASSERT_EQ(pu_dbsize(rc), 0);
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
}

TEST(rwlock_layout)
{
    pu_each_backend(scenario_layout, NULL);
}

TEST(rwlock_exclusion)
{
    pu_raise_nofile(1024);
    pu_each_backend(scenario_exclusion, NULL);
}

TEST(rwlock_wakeups)
{
    pu_each_backend(scenario_wakeups, NULL);
}

TEST(rwlock_writers_one_at_a_time)
{
    pu_each_backend(scenario_writers_one_at_a_time, NULL);
}

TEST(rwlock_watchdog)
{
    pu_each_backend(scenario_watchdog, wd_600);
}

TEST(rwlock_disconnect)
{
    pu_each_backend(scenario_disconnect, NULL);
}

TEST(rwlock_errors)
{
    pu_each_backend(scenario_errors, NULL);
}

TEST(rwlock_forceunlock)
{
    pu_each_backend(scenario_forceunlock, NULL);
}

TEST(rwlock_redisson_interop)
{
    pu_each_backend(scenario_redisson, NULL);
}

TEST_MAIN(TEST_CASE(rwlock_layout), TEST_CASE(rwlock_exclusion), TEST_CASE(rwlock_wakeups),
          TEST_CASE(rwlock_writers_one_at_a_time), TEST_CASE(rwlock_watchdog),
          TEST_CASE(rwlock_disconnect), TEST_CASE(rwlock_errors), TEST_CASE(rwlock_forceunlock),
          TEST_CASE(rwlock_redisson_interop))
