/* Integration tests for pool/ against a real redis-server: pipelining and
 * FIFO order, write batching, scripts and NOSCRIPT recovery, fail-fast
 * while Redis is down, connection loss and reconnect, request timeouts,
 * pub/sub (one SUBSCRIBE per channel, READY/MESSAGE/LOST, re-subscribe),
 * AUTH and SELECT, callback re-entrancy.
 *
 * Every scenario runs on both loop backends (the _epoll and _uring cases);
 * the io_uring case skips only when the kernel refuses io_uring (-ENOSYS,
 * -EPERM). Each case starts its own redis-server on a free port (skipped
 * when redis-server is not installed) and kills it on every exit path. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "harness.h"
#include "pool/pool.h"
#include "pool_fixture.h"
#include "pool_redis_util.h"
#include "sched/loop.h"

/* ---- fixture ------------------------------------------------------------- */

struct fx {
    struct predis redis;     /* the upstream server */
    struct sched_loop *loop; /* owned */
    struct pool *pool;       /* owned, or NULL */
    struct pool_opts opts;   /* options for fx_pool() */
};

static const struct pool_script fx_scripts[] = {
    {.name = "echo", .text = "return ARGV[1]"},
    {.name = "incrby", .text = "return redis.call('INCRBY', KEYS[1], ARGV[1])"},
};

/* Loop and options; skips when redis-server or the backend is missing. */
static void fx_init(struct fx *f, enum sched_io io)
{
    struct sched_loop_opts lo = {io, 64, 2};
    int rc;

    memset(f, 0, sizeof(*f));
    if (!predis_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rc = sched_loop_create(&f->loop, &lo);
    if (io == SCHED_IO_URING && (rc == -ENOSYS || rc == -EPERM))
        TEST_SKIP("io_uring unavailable: %s", strerror(-rc));
    ASSERT_OK(rc);
    ASSERT_OK(predis_init(&f->redis));
    pool_opts_default(&f->opts);
    f->opts.port = f->redis.port;
    f->opts.connect_timeout_ms = 500;
    f->opts.request_timeout_ms = 2000;
    f->opts.backoff_min_ms = 10;
    f->opts.backoff_max_ms = 100;
}

static bool pool_all_up(void *arg)
{
    struct pool_stats st;

    pool_get_stats(arg, &st);
    return st.conns_ready == st.conns && st.pubsub_ready;
}

static bool pool_stopped(void *arg)
{
    return pool_is_stopped(arg);
}

static struct pool *fx_new_pool(struct fx *f, const struct pool_opts *o)
{
    struct pool *p;

    ASSERT_OK(pool_create(&p, f->loop, o, fx_scripts, LP_ARRAY_SIZE(fx_scripts)));
    ASSERT_OK(pool_start(p));
    return p;
}

static void fx_pool(struct fx *f)
{
    f->pool = fx_new_pool(f, &f->opts);
}

/* Redis, pool, and every connection ready. */
static void fx_start(struct fx *f)
{
    ASSERT_OK(predis_start(&f->redis));
    fx_pool(f);
    ASSERT_TRUE(lf_run_until(f->loop, pool_all_up, f->pool, 3000));
}

static void fx_free_pool(struct fx *f, struct pool *p)
{
    pool_stop(p);
    ASSERT_TRUE(lf_run_until(f->loop, pool_stopped, p, 2000));
    pool_destroy(p);
}

static void fx_done(struct fx *f)
{
    if (f->pool)
        fx_free_pool(f, f->pool);
    f->pool = NULL;
    sched_loop_destroy(f->loop);
    predis_cleanup(&f->redis);
}

/* ---- reply recorder -------------------------------------------------------- */

/* One command through the pool, waited for. */
static struct pf_rec fx_cmd(struct fx *f, struct pool *p, int argc, const char *const *argv)
{
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command(p, 0, argc, argv, NULL, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 3000));
    return r;
}

static void fx_assert_ping(struct fx *f, struct pool *p)
{
    const char *argv[] = {"PING"};
    struct pf_rec r = fx_cmd(f, p, 1, argv);

    ASSERT_EQ(r.err, 0);
    ASSERT_STREQ(r.str, "PONG");
}

/* Counts completions of many requests by error code. */
struct tally {
    int done;     /* callbacks */
    int ok;       /* err == 0 */
    int reset;    /* -ECONNRESET */
    int timedout; /* -ETIMEDOUT */
    int want;     /* completions expected */
};

static void tally_cb(void *arg, const struct pool_result *res)
{
    int err = res->err;
    struct tally *t = arg;

    t->done++;
    t->ok += err == 0;
    t->reset += err == -ECONNRESET;
    t->timedout += err == -ETIMEDOUT;
}

static bool tally_done(void *arg)
{
    const struct tally *t = arg;

    return t->done >= t->want;
}

static void submit_pings(struct pool *p, struct tally *t, int n)
{
    const char *argv[] = {"PING"};
    int i;

    for (i = 0; i < n; i++)
        ASSERT_OK(pool_command(p, (uint64_t)i, 1, argv, NULL, tally_cb, t));
    t->want += n;
}

/* ---- pub/sub listener ------------------------------------------------------ */

struct lsn {
    struct pool_sub sub;            /* registered with the pool */
    int ready;                      /* READY events */
    int lost;                       /* LOST events */
    int msgs;                       /* MESSAGE events */
    char last[256];                 /* last message payload */
    size_t last_len;                /* its length */
    void (*on_lost)(struct lsn *l); /* test hook, or NULL */
};

static struct pool *lsn_pool; /* the pool listeners' hooks act on */

static void lsn_cb(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct lsn *l = LP_CONTAINER_OF(s, struct lsn, sub);

    if (ev == POOL_SUB_READY)
        l->ready++;
    if (ev == POOL_SUB_MESSAGE) {
        l->msgs++;
        l->last_len = LP_MIN(len, sizeof(l->last));
        memcpy(l->last, msg, l->last_len);
    }
    if (ev == POOL_SUB_LOST) {
        l->lost++;
        if (l->on_lost)
            l->on_lost(l);
        l->on_lost = NULL; /* one-shot: pool_stop() at the end delivers LOST too */
    }
}

struct lsn_wait {
    struct lsn *ls; /* listeners */
    int n;          /* how many */
    int ready;      /* wait until each has at least this many READY */
    int lost;       /* ... and LOST */
    int msgs;       /* ... and MESSAGE */
};

static bool lsn_reached(void *arg)
{
    const struct lsn_wait *w = arg;
    int i;

    for (i = 0; i < w->n; i++) {
        const struct lsn *l = &w->ls[i];

        if (l->ready < w->ready || l->lost < w->lost || l->msgs < w->msgs)
            return false;
    }
    return true;
}

static void wait_lsn(struct fx *f, struct lsn *ls, int n, int ready, int lost, int msgs)
{
    struct lsn_wait w = {ls, n, ready, lost, msgs};

    ASSERT_TRUE(lf_run_until(f->loop, lsn_reached, &w, 3000));
}

/* Polls PUBSUB NUMSUB while running the loop. */
static void wait_numsub(struct fx *f, const char *ch, long long want)
{
    int i;

    for (i = 0; i < 200; i++) {
        if (predis_numsub(&f->redis, ch) == want)
            return;
        lf_run_for(f->loop, 10);
    }
    TEST_FAIL("PUBSUB NUMSUB %s never reached %lld (now %lld)", ch, want,
              predis_numsub(&f->redis, ch));
}

static long long publish(struct fx *f, const char *ch, const char *msg, size_t len)
{
    return predis_int(&f->redis, "PUBLISH %s %b", ch, msg, len);
}

/* ---- scenarios ------------------------------------------------------------- */

#define NPIPE 5000

static struct {
    int done;               /* completions */
    int bad;                /* wrong or out-of-order replies */
    long long incr;         /* last INCR value seen */
    char echo[NPIPE][24];   /* ECHO payloads (binary) */
    size_t echo_len[NPIPE]; /* their lengths */
} fifo;

static void fifo_incr_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;

    (void)arg;
    fifo.done++;
    if (err || r->type != POOL_REPLY_INTEGER || r->integer != fifo.incr + 1)
        fifo.bad++;
    else
        fifo.incr++;
}

static void fifo_echo_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    size_t i = (size_t)(uintptr_t)arg;

    fifo.done++;
    if (err || r->type != POOL_REPLY_STRING || r->len != fifo.echo_len[i] ||
        memcmp(r->str, fifo.echo[i], r->len) != 0)
        fifo.bad++;
}

static bool fifo_done(void *arg)
{
    (void)arg;
    return fifo.done == 2 * NPIPE;
}

static void submit_fifo(struct pool *p)
{
    const char *incr[] = {"INCR", "ctr"};
    size_t i;

    for (i = 0; i < NPIPE; i++) {
        const char *echo[2] = {"ECHO", fifo.echo[i]};
        size_t lens[2] = {4, 0};

        memcpy(fifo.echo[i], "\0\r\n", 3);
        lens[1] = fifo.echo_len[i] = 3 + (size_t)snprintf(fifo.echo[i] + 3, 20, "%zu", i);
        ASSERT_OK(pool_command(p, 0, 2, incr, NULL, fifo_incr_cb, NULL));
        ASSERT_OK(pool_command(p, i, 2, echo, lens, fifo_echo_cb, (void *)(uintptr_t)i));
    }
}

/* Thousands of pipelined commands: replies in FIFO order, per-request
 * matching across connections, and few writes. */
static void run_fifo(enum sched_io io)
{
    struct pool_stats before, mid, after;
    struct fx f;

    fx_init(&f, io);
    fx_start(&f);
    pool_get_stats(f.pool, &before);
    submit_fifo(f.pool);
    pool_get_stats(f.pool, &mid);
    ASSERT_EQ(mid.inflight, 2 * NPIPE);
    ASSERT_TRUE(lf_run_until(f.loop, fifo_done, NULL, 5000));
    ASSERT_EQ(fifo.bad, 0);
    ASSERT_EQ(fifo.incr, NPIPE);
    pool_get_stats(f.pool, &after);
    ASSERT_EQ(after.requests - before.requests, 2 * NPIPE);
    ASSERT_EQ(after.inflight, 0);
    /* everything was submitted in one iteration: one write per connection */
    ASSERT_LE(after.batches - before.batches, 4);
    ASSERT_LE(after.batches * 100, after.requests);
    ASSERT_EQ(predis_int(&f.redis, "INCRBY ctr 0"), NPIPE);
    fx_done(&f);
}

static struct pf_rec fx_eval(struct fx *f, unsigned script, int numkeys, int argc,
                             const char *const *argv, const size_t *lens)
{
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_eval(f->pool, 0, script, numkeys, argc, argv, lens, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 3000));
    ASSERT_EQ(r.err, 0);
    return r;
}

static void run_eval(enum sched_io io)
{
    const char *hello[] = {"hello"};
    const char *bin[] = {"a\0b"};
    const size_t bin_len[] = {3};
    const char *incr[] = {"counter", "5"};
    struct pool_stats st;
    struct pf_rec r;
    struct fx f;

    fx_init(&f, io);
    fx_start(&f);
    r = fx_eval(&f, 0, 0, 1, hello, NULL);
    ASSERT_STREQ(r.str, "hello");
    r = fx_eval(&f, 0, 0, 1, bin, bin_len);
    ASSERT_EQ(r.len, 3);
    ASSERT_TRUE(memcmp(r.str, "a\0b", 3) == 0);
    ASSERT_EQ(fx_eval(&f, 1, 1, 2, incr, NULL).integer, 5);
    ASSERT_EQ(fx_eval(&f, 1, 1, 2, incr, NULL).integer, 10);
    ASSERT_EQ(pool_eval(f.pool, 0, 2, 0, 1, hello, NULL, pf_rec_cb, &r), -EINVAL);
    ASSERT_EQ(pool_eval(f.pool, 0, 1, 3, 2, incr, NULL, pf_rec_cb, &r), -EINVAL);
    ASSERT_EQ(pool_eval(f.pool, 0, 1, -1, 2, incr, NULL, pf_rec_cb, &r), -EINVAL);
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.noscript_retries, 0);
    fx_done(&f);
}

static struct {
    int done; /* completions */
    int bad;  /* wrong replies */
} nos;
static char nos_big[1000];

static void nos_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    size_t i = (size_t)(uintptr_t)arg;
    char want[32];
    const char *w = nos_big;
    size_t wl = sizeof(nos_big);

    if (i % 2) {
        wl = (size_t)snprintf(want, sizeof(want), "v%zu", i);
        w = want;
    }
    nos.done++;
    if (err || r->type != POOL_REPLY_STRING || r->len != wl || memcmp(r->str, w, wl) != 0)
        nos.bad++;
}

static bool nos_done(void *arg)
{
    return nos.done == *(int *)arg;
}

/* SCRIPT FLUSH from another client: EVALSHA gets NOSCRIPT and the pool
 * retries with EVAL, invisibly, for short and long (heap-copied) args. */
static void run_noscript(enum sched_io io)
{
    const char *hello[] = {"hello"};
    const char *incr[] = {"n", "2"};
    struct pool_stats st, st2;
    redisContext *side;
    redisReply *rep;
    int i, want = 50;
    struct fx f;

    fx_init(&f, io);
    fx_start(&f);
    fx_eval(&f, 0, 0, 1, hello, NULL);
    side = predis_connect(&f.redis);
    ASSERT_NOTNULL(side);
    rep = redisCommand(side, "SCRIPT FLUSH");
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(side);
    memset(nos_big, 'z', sizeof(nos_big));
    nos_big[10] = '\0';
    for (i = 0; i < want; i++) {
        char small[32];
        const char *argv[1] = {nos_big};
        size_t len = sizeof(nos_big);

        if (i % 2) {
            len = (size_t)snprintf(small, sizeof(small), "v%d", i);
            argv[0] = small;
        }
        ASSERT_OK(
            pool_eval(f.pool, (uint64_t)i, 0, 0, 1, argv, &len, nos_cb, (void *)(uintptr_t)i));
    }
    ASSERT_TRUE(lf_run_until(f.loop, nos_done, &want, 3000));
    ASSERT_EQ(nos.bad, 0);
    pool_get_stats(f.pool, &st);
    ASSERT_TRUE(st.noscript_retries >= 1 && st.noscript_retries <= 50);
    /* EVAL reloaded the script: no further retries for it */
    fx_eval(&f, 0, 0, 1, hello, NULL);
    pool_get_stats(f.pool, &st2);
    ASSERT_EQ(st2.noscript_retries, st.noscript_retries);
    /* the other script was flushed too and recovers the same way */
    ASSERT_EQ(fx_eval(&f, 1, 1, 2, incr, NULL).integer, 2);
    pool_get_stats(f.pool, &st2);
    ASSERT_EQ(st2.noscript_retries, st.noscript_retries + 1);
    fx_done(&f);
}

/* Redis not running: submits fail fast; the pool connects once it is up. */
static void run_down(enum sched_io io)
{
    const char *argv[] = {"PING"};
    struct pool_stats st;
    struct pf_rec r;
    struct fx f;

    fx_init(&f, io);
    fx_pool(&f);
    lf_run_for(f.loop, 100);
    ASSERT_EQ(pool_command(f.pool, 0, 1, argv, NULL, pf_rec_cb, &r), -ENOTCONN);
    ASSERT_EQ(pool_eval(f.pool, 0, 0, 0, 1, argv, NULL, pf_rec_cb, &r), -ENOTCONN);
    ASSERT_TRUE(!pool_is_ready(f.pool));
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.conns_ready, 0);
    ASSERT_TRUE(strcmp(st.state, "up") != 0);
    ASSERT_NOTNULL(strstr(st.last_error, "Connection refused"));
    ASSERT_OK(predis_start(&f.redis));
    ASSERT_TRUE(lf_run_until(f.loop, pool_all_up, f.pool, 3000));
    pool_get_stats(f.pool, &st);
    ASSERT_STREQ(st.state, "up");
    fx_assert_ping(&f, f.pool);
    fx_done(&f);
}

static bool pool_state_up(void *arg)
{
    struct pool_stats st;

    pool_get_stats(arg, &st);
    return strcmp(st.state, "up") == 0 && st.conns_ready == st.conns && st.pubsub_ready;
}

/* SIGKILL with requests in flight: -ECONNRESET for each; the pool
 * reconnects by itself when Redis is back on the same port. */
static void run_kill(enum sched_io io)
{
    struct tally t = {0};
    struct pool_stats st;
    const char *argv[] = {"PING"};
    const char *hello[] = {"hello"};
    struct pf_rec r;
    struct fx f;

    fx_init(&f, io);
    f.opts.request_timeout_ms = 10000;
    fx_start(&f);
    predis_signal(&f.redis, SIGSTOP);
    submit_pings(f.pool, &t, 20);
    lf_run_for(f.loop, 50);
    ASSERT_EQ(t.done, 0);
    predis_kill(&f.redis);
    ASSERT_TRUE(lf_run_until(f.loop, tally_done, &t, 3000));
    ASSERT_EQ(t.reset, 20);
    ASSERT_EQ(pool_command(f.pool, 0, 1, argv, NULL, pf_rec_cb, &r), -ENOTCONN);
    pool_get_stats(f.pool, &st);
    ASSERT_TRUE(strcmp(st.state, "up") != 0);
    ASSERT_TRUE(st.errors >= 20);
    ASSERT_OK(predis_start(&f.redis));
    ASSERT_TRUE(lf_run_until(f.loop, pool_state_up, f.pool, 3000));
    pool_get_stats(f.pool, &st);
    ASSERT_TRUE(st.reconnects >= 3);
    fx_assert_ping(&f, f.pool);
    /* the fresh server got SCRIPT LOAD in the handshake: no NOSCRIPT */
    ASSERT_STREQ(fx_eval(&f, 0, 0, 1, hello, NULL).str, "hello");
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.noscript_retries, 0);
    fx_done(&f);
}

/* Redis frozen (SIGSTOP): in-flight requests time out with -ETIMEDOUT,
 * the connection is recycled, the pub/sub keepalive notices (LOST), and
 * service resumes after SIGCONT (READY again). */
static void run_timeout_stop(enum sched_io io)
{
    struct tally t = {0};
    struct pool_stats st;
    uint64_t t0, took;
    struct lsn a;
    struct fx f;

    memset(&a, 0, sizeof(a));
    fx_init(&f, io);
    f.opts.request_timeout_ms = 300;
    fx_start(&f);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "frozen", 6, lsn_cb));
    wait_lsn(&f, &a, 1, 1, 0, 0);
    predis_signal(&f.redis, SIGSTOP);
    t0 = clock_mono_ms();
    submit_pings(f.pool, &t, 5);
    ASSERT_TRUE(lf_run_until(f.loop, tally_done, &t, 3000));
    took = clock_mono_ms() - t0;
    ASSERT_EQ(t.timedout, 5);
    ASSERT_TRUE(took >= 250 && took < 1500);
    pool_get_stats(f.pool, &st);
    ASSERT_NOTNULL(strstr(st.last_error, "timeout"));
    wait_lsn(&f, &a, 1, 1, 1, 0);
    lf_run_for(f.loop, 700); /* failed attempts while frozen: no extra LOST */
    ASSERT_EQ(a.lost, 1);
    ASSERT_EQ(a.ready, 1);
    predis_signal(&f.redis, SIGCONT);
    ASSERT_TRUE(lf_run_until(f.loop, pool_all_up, f.pool, 3000));
    wait_lsn(&f, &a, 1, 2, 1, 0);
    fx_assert_ping(&f, f.pool);
    ASSERT_EQ(publish(&f, "frozen", "thawed", 6), 1);
    wait_lsn(&f, &a, 1, 2, 1, 1);
    fx_done(&f);
}

/* Redis busy (DEBUG SLEEP from another client): same timeout path. */
static void run_timeout_sleep(enum sched_io io)
{
    struct tally t = {0};
    redisContext *side;
    redisReply *rep;
    int done = 0;
    struct fx f;

    fx_init(&f, io);
    f.opts.request_timeout_ms = 300;
    fx_start(&f);
    side = predis_connect(&f.redis);
    ASSERT_NOTNULL(side);
    ASSERT_EQ(redisAppendCommand(side, "DEBUG SLEEP 1.2"), REDIS_OK);
    while (!done)
        ASSERT_EQ(redisBufferWrite(side, &done), REDIS_OK);
    usleep(100000); /* let Redis start sleeping before our requests arrive */
    submit_pings(f.pool, &t, 3);
    ASSERT_TRUE(lf_run_until(f.loop, tally_done, &t, 1000));
    ASSERT_EQ(t.timedout, 3);
    ASSERT_EQ(redisGetReply(side, (void **)&rep), REDIS_OK);
    freeReplyObject(rep);
    redisFree(side);
    ASSERT_TRUE(lf_run_until(f.loop, pool_all_up, f.pool, 3000));
    fx_assert_ping(&f, f.pool);
    fx_done(&f);
}

/* One SUBSCRIBE per channel, READY then MESSAGE, stop, start again. */
static void run_pubsub(enum sched_io io)
{
    static struct lsn many[50];
    struct lsn a, b;
    struct pool_stats st;
    struct fx f;
    int i;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    fx_init(&f, io);
    fx_start(&f);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "ch1", 3, lsn_cb));
    ASSERT_EQ(pool_sub_start(f.pool, &b.sub, "ch1", 3, lsn_cb), -EEXIST);
    wait_lsn(&f, &a, 1, 1, 0, 0);
    ASSERT_EQ(predis_numsub(&f.redis, "ch1"), 1);
    ASSERT_EQ(publish(&f, "ch1", "hi\0there", 8), 1);
    wait_lsn(&f, &a, 1, 1, 0, 1);
    ASSERT_EQ(a.last_len, 8);
    ASSERT_TRUE(memcmp(a.last, "hi\0there", 8) == 0);
    pool_sub_stop(f.pool, &a.sub);
    ASSERT_NULL(a.sub.chan);
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.channels, 0);
    wait_numsub(&f, "ch1", 0);
    publish(&f, "ch1", "x", 1);
    lf_run_for(f.loop, 50);
    ASSERT_EQ(a.msgs, 1);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "ch1", 3, lsn_cb));
    wait_lsn(&f, &a, 1, 2, 0, 1);
    ASSERT_EQ(predis_numsub(&f.redis, "ch1"), 1);
    ASSERT_EQ(publish(&f, "ch1", "again", 5), 1);
    wait_lsn(&f, &a, 1, 2, 0, 2);
    for (i = 0; i < 50; i++) {
        char name[16];

        snprintf(name, sizeof(name), "m%d", i);
        ASSERT_OK(pool_sub_start(f.pool, &many[i].sub, name, strlen(name), lsn_cb));
    }
    wait_lsn(&f, many, 50, 1, 0, 0);
    ASSERT_EQ(predis_numsub(&f.redis, "m0"), 1);
    ASSERT_EQ(predis_numsub(&f.redis, "m49"), 1);
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.channels, 51);
    fx_done(&f);
}

/* pool_sub_start_kind: a listener of another kind of the same namespace
 * takes over a record whose UNSUBSCRIBE is in flight (a client's
 * SUBSCRIBE right after a lock waiter's set went, or the reverse); a
 * pattern's messages name their channel; SSUBSCRIBE on a single node. */
static char kinds_chan[64];

static void kinds_cb(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    size_t clen;
    const char *ch;

    if (ev == POOL_SUB_MESSAGE) {
        ch = pool_sub_msg_channel(lsn_pool, &clen);
        snprintf(kinds_chan, sizeof(kinds_chan), "%.*s", (int)clen, ch);
    }
    lsn_cb(s, ev, msg, len);
}

static void run_pubsub_kinds(enum sched_io io)
{
    struct lsn a, p, sh;
    struct fx f;

    memset(&a, 0, sizeof(a));
    memset(&p, 0, sizeof(p));
    memset(&sh, 0, sizeof(sh));
    fx_init(&f, io);
    fx_start(&f);
    lsn_pool = f.pool;
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "k1", 2, lsn_cb));
    wait_lsn(&f, &a, 1, 1, 0, 0);
    pool_sub_stop(f.pool, &a.sub);
    ASSERT_OK(pool_sub_start_kind(f.pool, &a.sub, "k1", 2, POOL_SUB_CLASSIC, lsn_cb));
    ASSERT_EQ(pool_sub_start_kind(f.pool, &p.sub, "k1", 2, POOL_SUB_AUTO, lsn_cb), -EEXIST);
    wait_lsn(&f, &a, 1, 2, 0, 0);
    ASSERT_EQ(predis_numsub(&f.redis, "k1"), 1);
    ASSERT_OK(pool_sub_start_kind(f.pool, &p.sub, "k*", 2, POOL_SUB_PATTERN, kinds_cb));
    ASSERT_OK(pool_sub_start_kind(f.pool, &sh.sub, "k1", 2, POOL_SUB_SHARDED, kinds_cb));
    wait_lsn(&f, &p, 1, 1, 0, 0);
    wait_lsn(&f, &sh, 1, 1, 0, 0);
    ASSERT_EQ(publish(&f, "kz", "pm", 2), 1);
    wait_lsn(&f, &p, 1, 1, 0, 1);
    ASSERT_STREQ(kinds_chan, "kz");
    ASSERT_EQ(predis_int(&f.redis, "SPUBLISH %s %s", "k1", "sm"), 1);
    wait_lsn(&f, &sh, 1, 1, 0, 1);
    ASSERT_EQ(sh.last_len, 2u);
    ASSERT_EQ(a.msgs, 0); /* a classic listener does not hear SPUBLISH */
    pool_sub_stop(f.pool, &p.sub);
    pool_sub_stop(f.pool, &sh.sub);
    pool_sub_stop(f.pool, &a.sub);
    fx_done(&f);
}

/* Re-subscribing while the UNSUBSCRIBE is in flight, and before the first
 * SUBSCRIBE was even confirmed. */
static void run_pubsub_restart(enum sched_io io)
{
    struct lsn a, b;
    struct fx f;
    int i;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    fx_init(&f, io);
    fx_start(&f);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "rs", 2, lsn_cb));
    wait_lsn(&f, &a, 1, 1, 0, 0);
    pool_sub_stop(f.pool, &a.sub);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "rs", 2, lsn_cb));
    wait_lsn(&f, &a, 1, 2, 0, 0);
    ASSERT_EQ(predis_numsub(&f.redis, "rs"), 1);
    ASSERT_EQ(publish(&f, "rs", "m", 1), 1);
    wait_lsn(&f, &a, 1, 2, 0, 1);
    for (i = 0; i < 5; i++) {
        pool_sub_stop(f.pool, &a.sub);
        ASSERT_OK(pool_sub_start(f.pool, &a.sub, "rs", 2, lsn_cb));
    }
    wait_lsn(&f, &a, 1, 3, 0, 1);
    ASSERT_OK(pool_sub_start(f.pool, &b.sub, "rs2", 3, lsn_cb));
    pool_sub_stop(f.pool, &b.sub);
    ASSERT_OK(pool_sub_start(f.pool, &b.sub, "rs2", 3, lsn_cb));
    wait_lsn(&f, &b, 1, 1, 0, 0);
    lf_run_for(f.loop, 100);
    ASSERT_EQ(a.ready, 3);
    ASSERT_EQ(b.ready, 1);
    ASSERT_EQ(predis_numsub(&f.redis, "rs"), 1);
    ASSERT_EQ(predis_numsub(&f.redis, "rs2"), 1);
    ASSERT_EQ(publish(&f, "rs", "n", 1), 1);
    wait_lsn(&f, &a, 1, 3, 0, 2);
    lf_run_for(f.loop, 50);
    ASSERT_EQ(a.msgs, 2);
    fx_done(&f);
}

static struct lsn late;

static void lost_stop_self(struct lsn *l)
{
    pool_sub_stop(lsn_pool, &l->sub);
}

static void lost_start_other(struct lsn *l)
{
    (void)l;
    ASSERT_OK(pool_sub_start(lsn_pool, &late.sub, "late", 4, lsn_cb));
}

/* Redis killed: LOST to every listener (which may start/stop subs right
 * there); after the restart every wanted channel is READY again. */
static void run_pubsub_reconnect(enum sched_io io)
{
    static struct lsn ls[100];
    struct pool_stats st;
    struct fx f;
    int i;

    fx_init(&f, io);
    fx_start(&f);
    lsn_pool = f.pool;
    for (i = 0; i < 100; i++) {
        char name[16];

        snprintf(name, sizeof(name), "c%d", i);
        ASSERT_OK(pool_sub_start(f.pool, &ls[i].sub, name, strlen(name), lsn_cb));
    }
    ls[0].on_lost = lost_stop_self;
    ls[1].on_lost = lost_start_other;
    wait_lsn(&f, ls, 100, 1, 0, 0);
    predis_kill(&f.redis);
    wait_lsn(&f, ls, 100, 1, 1, 0);
    pool_get_stats(f.pool, &st);
    ASSERT_TRUE(!st.pubsub_ready);
    ASSERT_EQ(st.channels, 100);
    ASSERT_NULL(ls[0].sub.chan);
    ASSERT_OK(predis_start(&f.redis));
    wait_lsn(&f, ls + 1, 99, 2, 1, 0);
    wait_lsn(&f, &late, 1, 1, 0, 0);
    for (i = 0; i < 100; i++)
        ASSERT_EQ(ls[i].lost, 1);
    ASSERT_EQ(ls[0].ready, 1);
    ASSERT_EQ(predis_numsub(&f.redis, "c0"), 0);
    ASSERT_EQ(predis_numsub(&f.redis, "c1"), 1);
    ASSERT_EQ(predis_numsub(&f.redis, "late"), 1);
    ASSERT_EQ(publish(&f, "c99", "back", 4), 1);
    wait_lsn(&f, ls + 99, 1, 2, 1, 1);
    fx_done(&f);
}

/* AUTH with a password (and with an ACL user), SELECT db, and scripts and
 * pub/sub behind AUTH. */
static void run_auth_select(enum sched_io io)
{
    const char *set[] = {"SET", "k", "in-db-3"};
    const char *hello[] = {"hello"};
    struct lsn a;
    struct pool_opts o;
    redisContext *side;
    redisReply *rep;
    struct pool *alice;
    struct fx f;

    memset(&a, 0, sizeof(a));
    fx_init(&f, io);
    f.redis.password = "s3cret";
    f.opts.password = "s3cret";
    f.opts.db = 3;
    fx_start(&f);
    ASSERT_STREQ(fx_cmd(&f, f.pool, 3, set).str, "OK");
    side = predis_connect(&f.redis);
    ASSERT_NOTNULL(side);
    rep = redisCommand(side, "SELECT 3");
    freeReplyObject(rep);
    rep = redisCommand(side, "GET k");
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "in-db-3") == 0);
    freeReplyObject(rep);
    rep = redisCommand(side, "ACL SETUSER alice on >pw ~* &* +@all");
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(side);
    ASSERT_STREQ(fx_eval(&f, 0, 0, 1, hello, NULL).str, "hello");
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "authed", 6, lsn_cb));
    wait_lsn(&f, &a, 1, 1, 0, 0);
    ASSERT_EQ(publish(&f, "authed", "x", 1), 1);
    wait_lsn(&f, &a, 1, 1, 0, 1);
    o = f.opts;
    o.user = "alice";
    o.password = "pw";
    o.db = 0;
    alice = fx_new_pool(&f, &o);
    ASSERT_TRUE(lf_run_until(f.loop, pool_all_up, alice, 3000));
    fx_assert_ping(&f, alice);
    fx_free_pool(&f, alice);
    fx_done(&f);
}

static void run_wrong_password(enum sched_io io)
{
    const char *argv[] = {"PING"};
    struct pool_stats st;
    struct pf_rec r;
    struct fx f;

    fx_init(&f, io);
    f.redis.password = "s3cret";
    f.opts.password = "nope";
    ASSERT_OK(predis_start(&f.redis));
    fx_pool(&f);
    lf_run_for(f.loop, 300);
    pool_get_stats(f.pool, &st);
    ASSERT_EQ(st.conns_ready, 0);
    ASSERT_TRUE(!st.pubsub_ready);
    ASSERT_NOTNULL(strstr(st.last_error, "WRONGPASS"));
    ASSERT_EQ(pool_command(f.pool, 0, 1, argv, NULL, pf_rec_cb, &r), -ENOTCONN);
    fx_done(&f);
}

static struct {
    struct pool *pool; /* pool under test */
    int n;             /* completions */
    int ok;            /* successful */
    int reset;         /* -ECONNRESET */
    int after_stop;    /* submits from callbacks after the stop */
} chain;

static void chain_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    const char *argv[] = {"INCR", "chain"};

    (void)arg;
    chain.n++;
    ASSERT_TRUE(err == 0 && r->integer == chain.n);
    if (chain.n < 1000)
        ASSERT_OK(pool_command(chain.pool, 0, 2, argv, NULL, chain_cb, NULL));
}

static void stop_cb(void *arg, const struct pool_result *res)
{
    int err = res->err;
    const char *argv[] = {"PING"};

    (void)arg;
    chain.n++;
    chain.ok += err == 0;
    chain.reset += err == -ECONNRESET;
    if (chain.n == 10)
        pool_stop(chain.pool);
    if (chain.n >= 10 && pool_command(chain.pool, 0, 1, argv, NULL, stop_cb, NULL) == -ENOTCONN)
        chain.after_stop++;
}

static bool chain_at(void *arg)
{
    return chain.n >= *(int *)arg;
}

/* Callbacks submit new requests (a chain of 1000), and one callback
 * stops the whole pool under the reply loop. */
static void run_reentrant(enum sched_io io)
{
    const char *argv[] = {"INCR", "chain"};
    const char *ping[] = {"PING"};
    int want = 1000, i;
    struct fx f;

    fx_init(&f, io);
    fx_start(&f);
    chain.pool = f.pool;
    ASSERT_OK(pool_command(f.pool, 0, 2, argv, NULL, chain_cb, NULL));
    ASSERT_TRUE(lf_run_until(f.loop, chain_at, &want, 5000));
    ASSERT_EQ(chain.n, 1000);
    memset(&chain, 0, sizeof(chain));
    chain.pool = f.pool;
    for (i = 0; i < 100; i++)
        ASSERT_OK(pool_command(f.pool, 0, 1, ping, NULL, stop_cb, NULL));
    want = 100;
    ASSERT_TRUE(lf_run_until(f.loop, chain_at, &want, 3000));
    lf_run_for(f.loop, 50);
    ASSERT_EQ(chain.n, 100);
    ASSERT_EQ(chain.ok, 10);
    ASSERT_EQ(chain.reset, 90);
    ASSERT_EQ(chain.after_stop, 91);
    ASSERT_TRUE(lf_run_until(f.loop, pool_stopped, f.pool, 2000));
    fx_done(&f);
}

/* pool_stop with requests in flight and listeners attached: every
 * request gets -ECONNRESET and every listener LOST, inside the call. */
static void run_stop_inflight(enum sched_io io)
{
    struct tally t = {0};
    struct lsn a;
    struct fx f;

    memset(&a, 0, sizeof(a));
    fx_init(&f, io);
    fx_start(&f);
    ASSERT_OK(pool_sub_start(f.pool, &a.sub, "s", 1, lsn_cb));
    wait_lsn(&f, &a, 1, 1, 0, 0);
    predis_signal(&f.redis, SIGSTOP);
    submit_pings(f.pool, &t, 10);
    lf_run_for(f.loop, 30);
    pool_stop(f.pool);
    ASSERT_EQ(t.reset, 10);
    ASSERT_EQ(a.lost, 1);
    ASSERT_TRUE(lf_run_until(f.loop, pool_stopped, f.pool, 2000));
    pool_sub_stop(f.pool, &a.sub);
    predis_signal(&f.redis, SIGCONT);
    fx_done(&f);
}

static void run_unix(enum sched_io io)
{
    struct fx f;

    fx_init(&f, io);
    f.opts.host = NULL;
    f.opts.unix_path = f.redis.sock;
    fx_start(&f);
    fx_assert_ping(&f, f.pool);
    fx_done(&f);
}

/* ---- cases: every scenario on both backends --------------------------------- */

/* pool_opts.on_eval: every script result, before its callback. */
struct eval_seen {
    int calls;       /* results seen */
    uint64_t rtt_us; /* the last one's round trip */
};

static void eval_seen_cb(void *arg, const struct pool_result *res)
{
    struct eval_seen *s = arg;

    s->calls++;
    s->rtt_us = res->rtt_us;
}

/* The result record: a command has no round trip and no WAIT; a script
 * has its round trip (also seen by on_eval first); a script behind WAIT
 * has the replicas asked for and counted (none: a lone Redis), its round
 * trip including WAIT's own timeout. */
static void run_result_record(enum sched_io io)
{
    const char *ping[] = {"PING"};
    const char *hello[] = {"hello"};
    struct pool_wait w = {.replicas = 1, .timeout_ms = 60};
    struct eval_seen seen = {0, 0};
    struct pf_rec r;
    struct fx f;

    fx_init(&f, io);
    f.opts.on_eval = eval_seen_cb;
    f.opts.eval_arg = &seen;
    fx_start(&f);
    r = fx_cmd(&f, f.pool, 1, ping);
    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.replicas, 0);
    ASSERT_EQ(r.acks, -1);
    ASSERT_EQ(r.rtt_us, 0);
    ASSERT_TRUE(!r.short_);
    ASSERT_EQ(seen.calls, 0);
    r = fx_eval(&f, 0, 0, 1, hello, NULL);
    ASSERT_STREQ(r.str, "hello");
    ASSERT_EQ(r.replicas, 0);
    ASSERT_EQ(r.acks, -1);
    ASSERT_TRUE(r.rtt_us > 0 && r.rtt_us < 2000000);
    ASSERT_TRUE(!r.short_);
    ASSERT_EQ(seen.calls, 1);
    ASSERT_EQ(seen.rtt_us, r.rtt_us);
    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_eval_wait(f.pool, 0, 0, 0, 1, hello, NULL, &w, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f.loop, pf_rec_done, &r, 3000));
    ASSERT_EQ(r.err, 0);
    ASSERT_STREQ(r.str, "hello");
    ASSERT_EQ(r.replicas, 1);
    ASSERT_EQ(r.acks, 0);
    ASSERT_TRUE(r.short_);
    ASSERT_TRUE(r.rtt_us >= 50000); /* WAIT held it for its timeout */
    ASSERT_EQ(seen.calls, 2);
    fx_done(&f);
}

TEST(pool_fifo_epoll)
{
    run_fifo(SCHED_IO_EPOLL);
}
TEST(pool_fifo_uring)
{
    run_fifo(SCHED_IO_URING);
}
TEST(pool_eval_epoll)
{
    run_eval(SCHED_IO_EPOLL);
}
TEST(pool_eval_uring)
{
    run_eval(SCHED_IO_URING);
}
TEST(pool_result_record_epoll)
{
    run_result_record(SCHED_IO_EPOLL);
}

TEST(pool_noscript_epoll)
{
    run_noscript(SCHED_IO_EPOLL);
}
TEST(pool_noscript_uring)
{
    run_noscript(SCHED_IO_URING);
}
TEST(pool_down_enotconn_epoll)
{
    run_down(SCHED_IO_EPOLL);
}
TEST(pool_down_enotconn_uring)
{
    run_down(SCHED_IO_URING);
}
TEST(pool_kill_reconnect_epoll)
{
    run_kill(SCHED_IO_EPOLL);
}
TEST(pool_kill_reconnect_uring)
{
    run_kill(SCHED_IO_URING);
}
TEST(pool_timeout_sigstop_epoll)
{
    run_timeout_stop(SCHED_IO_EPOLL);
}
TEST(pool_timeout_sigstop_uring)
{
    run_timeout_stop(SCHED_IO_URING);
}
TEST(pool_timeout_debug_sleep_epoll)
{
    run_timeout_sleep(SCHED_IO_EPOLL);
}
TEST(pool_timeout_debug_sleep_uring)
{
    run_timeout_sleep(SCHED_IO_URING);
}
TEST(pool_pubsub_epoll)
{
    run_pubsub(SCHED_IO_EPOLL);
}
TEST(pool_pubsub_uring)
{
    run_pubsub(SCHED_IO_URING);
}
TEST(pool_pubsub_kinds_epoll)
{
    run_pubsub_kinds(SCHED_IO_EPOLL);
}

TEST(pool_pubsub_restart_epoll)
{
    run_pubsub_restart(SCHED_IO_EPOLL);
}
TEST(pool_pubsub_restart_uring)
{
    run_pubsub_restart(SCHED_IO_URING);
}
TEST(pool_pubsub_reconnect_epoll)
{
    run_pubsub_reconnect(SCHED_IO_EPOLL);
}
TEST(pool_pubsub_reconnect_uring)
{
    run_pubsub_reconnect(SCHED_IO_URING);
}
TEST(pool_auth_select_epoll)
{
    run_auth_select(SCHED_IO_EPOLL);
}
TEST(pool_auth_select_uring)
{
    run_auth_select(SCHED_IO_URING);
}
TEST(pool_wrong_password_epoll)
{
    run_wrong_password(SCHED_IO_EPOLL);
}
TEST(pool_wrong_password_uring)
{
    run_wrong_password(SCHED_IO_URING);
}
TEST(pool_reentrant_epoll)
{
    run_reentrant(SCHED_IO_EPOLL);
}
TEST(pool_reentrant_uring)
{
    run_reentrant(SCHED_IO_URING);
}
TEST(pool_stop_inflight_epoll)
{
    run_stop_inflight(SCHED_IO_EPOLL);
}
TEST(pool_stop_inflight_uring)
{
    run_stop_inflight(SCHED_IO_URING);
}
TEST(pool_unix_socket_epoll)
{
    run_unix(SCHED_IO_EPOLL);
}
TEST(pool_unix_socket_uring)
{
    run_unix(SCHED_IO_URING);
}

TEST_MAIN(TEST_CASE(pool_pubsub_kinds_epoll), TEST_CASE(pool_fifo_epoll),
          TEST_CASE(pool_fifo_uring), TEST_CASE(pool_eval_epoll), TEST_CASE(pool_eval_uring),
          TEST_CASE(pool_result_record_epoll), TEST_CASE(pool_noscript_epoll),
          TEST_CASE(pool_noscript_uring), TEST_CASE(pool_down_enotconn_epoll),
          TEST_CASE(pool_down_enotconn_uring), TEST_CASE(pool_kill_reconnect_epoll),
          TEST_CASE(pool_kill_reconnect_uring), TEST_CASE(pool_timeout_sigstop_epoll),
          TEST_CASE(pool_timeout_sigstop_uring), TEST_CASE(pool_timeout_debug_sleep_epoll),
          TEST_CASE(pool_timeout_debug_sleep_uring), TEST_CASE(pool_pubsub_epoll),
          TEST_CASE(pool_pubsub_uring), TEST_CASE(pool_pubsub_restart_epoll),
          TEST_CASE(pool_pubsub_restart_uring), TEST_CASE(pool_pubsub_reconnect_epoll),
          TEST_CASE(pool_pubsub_reconnect_uring), TEST_CASE(pool_auth_select_epoll),
          TEST_CASE(pool_auth_select_uring), TEST_CASE(pool_wrong_password_epoll),
          TEST_CASE(pool_wrong_password_uring), TEST_CASE(pool_reentrant_epoll),
          TEST_CASE(pool_reentrant_uring), TEST_CASE(pool_stop_inflight_epoll),
          TEST_CASE(pool_stop_inflight_uring), TEST_CASE(pool_unix_socket_epoll),
          TEST_CASE(pool_unix_socket_uring))
