/* Integration tests for pool/ against a real Redis Sentinel deployment (1
 * master, 2 replicas, 3 sentinels, started per case by sentinel_util):
 * discovery through a list whose first sentinel is dead, separate
 * sentinel and data-node AUTH, SELECT on the master, the README's minimal
 * ACLs on both; a name no sentinel
 * knows and a wrong sentinel password (fast, clear errors); a stale
 * answer naming a replica (ROLE refuses it, nothing is written there,
 * recovery once the sentinels are fixed); a master demoted under the pool
 * (READONLY: the request waits for the new master, the caller never sees
 * READONLY); SENTINEL FAILOVER and kill -9 of the master under a stream
 * of scripts (only successes or clean errors, service back within a
 * bound, scripts loaded on the new master, subscriptions LOST then READY
 * there, the topology callback); every sentinel down (the master keeps
 * serving, a new pool fails fast with a clear error, both recover when
 * the sentinels return).
 *
 * Every scenario runs on both loop backends; the io_uring case skips only
 * when the kernel refuses io_uring. Cases skip when redis-server is
 * missing. */
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
#include "sched/loop.h"
#include "sentinel_util.h"

/* Service must be back within these after SENTINEL FAILOVER / kill -9
 * (measured on the 2-core test machine: about 1.3 s and 3 s; the
 * sentinels take down-after-milliseconds 1000 plus an election). */
#define FAILOVER_BOUND_MS 15000
#define KILL_BOUND_MS     20000

/* ---- fixture ------------------------------------------------------------- */

struct topo_rec {
    int calls;              /* on_topology calls */
    int initial;            /* of which initial */
    int switches;           /* non-initial calls with every slot changed and one master */
    unsigned last_nchanged; /* nchanged of the last call */
    unsigned last_masters;  /* masters of the last call */
};

struct sfx {
    struct rsentinel s;      /* the deployment */
    struct sched_loop *loop; /* owned */
    struct pool *pool;       /* owned, or NULL */
    struct pool_opts opts;   /* options for sfx_pool() */
    struct topo_rec topo;    /* what on_topology reported */
};

static const struct pool_script fx_scripts[] = {
    {.name = "echo", .text = "return ARGV[1]"},
    {.name = "incrby", .text = "return redis.call('INCRBY', KEYS[1], ARGV[1])"},
};

static void on_topology(void *arg, const struct pool_topology_event *ev)
{
    struct topo_rec *t = arg;

    t->calls++;
    t->last_nchanged = ev->nchanged;
    t->last_masters = ev->masters;
    if (ev->initial)
        t->initial++;
    else if (ev->nchanged == POOL_SLOTS && ev->masters == 1 && ev->slots_served == POOL_SLOTS)
        t->switches++;
}

/* Loop, deployment and options (sentinels of the fixture, its master). */
static void sfx_init(struct sfx *f, enum sched_io io, const char *password,
                     const char *sentinel_password)
{
    struct sched_loop_opts lo = {io, 64, 2};
    int rc;

    memset(f, 0, sizeof(*f));
    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rc = sched_loop_create(&f->loop, &lo);
    if (io == SCHED_IO_URING && (rc == -ENOSYS || rc == -EPERM))
        TEST_SKIP("io_uring unavailable: %s", strerror(-rc));
    ASSERT_OK(rc);
    rsentinel_start(&f->s, password, sentinel_password);
    pool_opts_default(&f->opts);
    f->opts.sentinels = f->s.list;
    f->opts.sentinel_master = RSENT_NAME;
    f->opts.password = password;
    f->opts.sentinel_password = sentinel_password;
    f->opts.connect_timeout_ms = 500;
    f->opts.request_timeout_ms = 5000;
    f->opts.backoff_min_ms = 10;
    f->opts.backoff_max_ms = 200;
    f->opts.on_topology = on_topology;
    f->opts.topology_arg = &f->topo;
}

static struct pool_stats stats_of(struct pool *p)
{
    struct pool_stats st;

    pool_get_stats(p, &st);
    return st;
}

/* Ready, subscribed to +switch-master, pub/sub up. */
static bool pool_all_up(void *arg)
{
    struct pool_stats st = stats_of(arg);

    return strcmp(st.state, "up") == 0 && st.pubsub_ready && st.sentinel_subscribed &&
           st.nodes == 1 && st.slots_served == POOL_SLOTS;
}

static bool pool_stopped(void *arg)
{
    return pool_is_stopped(arg);
}

/* A started pool (not waited for). */
static struct pool *sfx_start_pool(struct sfx *f, const struct pool_opts *o)
{
    struct pool *p;

    ASSERT_OK(sched_loop_run_once(f->loop, 0)); /* fresh loop time after the set-up */
    ASSERT_OK(pool_create(&p, f->loop, o, fx_scripts, LP_ARRAY_SIZE(fx_scripts)));
    ASSERT_OK(pool_start(p));
    return p;
}

static struct pool *sfx_new_pool(struct sfx *f, const struct pool_opts *o)
{
    struct pool *p = sfx_start_pool(f, o);

    if (!lf_run_until(f->loop, pool_all_up, p, 10000))
        TEST_FAIL("pool not up: state %s, last error %s", stats_of(p).state,
                  stats_of(p).last_error);
    return p;
}

static void sfx_pool(struct sfx *f)
{
    f->pool = sfx_new_pool(f, &f->opts);
}

static void sfx_free_pool(struct sfx *f, struct pool *p)
{
    pool_stop(p);
    ASSERT_TRUE(lf_run_until(f->loop, pool_stopped, p, 3000));
    pool_destroy(p);
}

static void sfx_done(struct sfx *f)
{
    if (f->pool)
        sfx_free_pool(f, f->pool);
    f->pool = NULL;
    sched_loop_destroy(f->loop);
    rsentinel_cleanup(&f->s);
}

/* "127.0.0.1:p" of data node i (static buffer per call site use). */
static const char *node_addr(struct sfx *f, int i, char *buf, size_t size)
{
    return rsentinel_node_addr(&f->s, i, buf, size);
}

/* ---- requests ------------------------------------------------------------------ */

static struct pf_rec cmd_on(struct sfx *f, struct pool *p, int argc, const char *const *argv)
{
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command(p, 0, argc, argv, NULL, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 10000));
    return r;
}

static void set_on(struct sfx *f, struct pool *p, const char *key, const char *val)
{
    const char *argv[] = {"SET", key, val};
    struct pf_rec r = cmd_on(f, p, 3, argv);

    if (r.err != 0 || strcmp(r.str, "OK") != 0)
        TEST_FAIL("SET %s: err %d, reply '%s'", key, r.err, r.str);
}

static long long eval_incr(struct sfx *f, struct pool *p, const char *key)
{
    const char *argv[] = {key, "1"};
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_eval(p, 0, 1, 1, 2, argv, NULL, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 10000));
    if (r.err != 0 || r.type != POOL_REPLY_INTEGER)
        TEST_FAIL("EVALSHA incrby %s: err %d, reply '%s'", key, r.err, r.str);
    return r.integer;
}

/* GET key on data node i (db 0), "" when absent. */
static void get_on_node(struct sfx *f, int i, const char *key, char *out, size_t n)
{
    redisReply *rep = rsentinel_cmd(&f->s, i, "GET %s", key);

    out[0] = '\0';
    if (rep && rep->type == REDIS_REPLY_STRING)
        snprintf(out, n, "%s", rep->str);
    if (rep)
        freeReplyObject(rep);
}

/* PUBLISH ch msg on data node i until the listener has n messages (a
 * subscription confirmed on the node may be a moment ahead of READY). */
static void publish_until(struct sfx *f, int i, const char *ch, struct pf_lsn *l, int n)
{
    int k;

    for (k = 0; k < 200 && l->msgs < n; k++) {
        ASSERT_TRUE(rsentinel_int(&f->s, i, "PUBLISH %s hello-from-%d", ch, i) >= 0);
        lf_run_for(f->loop, 20);
    }
    if (l->msgs < n)
        TEST_FAIL("no message from node %d on %s", i, ch);
}

/* ---- load: a stream of scripts ------------------------------------------------- */

#define LOAD_INFLIGHT 32

/* Outcomes of a stream of EVALSHA incrby on 8 keys, LOAD_INFLIGHT at a
 * time, topped up every loop iteration. */
struct load {
    struct sfx *f;
    int inflight;         /* submitted, no callback yet */
    uint64_t ok;          /* integer replies */
    uint64_t err_replies; /* error replies of any kind (READONLY included): must stay 0 */
    uint64_t reset;       /* -ECONNRESET: outcome unknown (in flight on a dead master) */
    uint64_t timedout;    /* -ETIMEDOUT */
    uint64_t notconn;     /* -ENOTCONN in a callback: not executed */
    uint64_t refused;     /* submits refused (-ENOTCONN): no master ready */
    uint64_t other;       /* any other err */
    uint64_t ok_since;    /* successes since the last load_mark() */
    char first_err[256];  /* the first error reply */
    unsigned next;        /* key rotation */
};

static void load_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct load *l = arg;

    l->inflight--;
    if (err == 0 && r->type == POOL_REPLY_INTEGER) {
        l->ok++;
        l->ok_since++;
    } else if (err == 0) {
        if (!l->err_replies++)
            snprintf(l->first_err, sizeof(l->first_err), "%.*s", (int)LP_MIN(r->len, 200u),
                     r->str ? r->str : "(non-integer reply)");
    } else if (err == -ECONNRESET) {
        l->reset++;
    } else if (err == -ETIMEDOUT) {
        l->timedout++;
    } else if (err == -ENOTCONN) {
        l->notconn++;
    } else {
        l->other++;
    }
}

static void load_top_up(struct load *l)
{
    char key[16];
    const char *argv[] = {key, "1"};
    int rc;

    while (l->inflight < LOAD_INFLIGHT) {
        snprintf(key, sizeof(key), "load:%u", l->next % 8);
        rc = pool_eval(l->f->pool, l->next, 1, 1, 2, argv, NULL, load_cb, l);
        l->next++;
        if (rc == -ENOTCONN) {
            l->refused++;
            return;
        }
        ASSERT_OK(rc);
        l->inflight++;
    }
}

/* Runs the loop for ms with the stream going. */
static void load_run(struct load *l, int ms)
{
    uint64_t end = clock_mono_ms() + (uint64_t)ms;

    while (clock_mono_ms() < end) {
        load_top_up(l);
        ASSERT_OK(sched_loop_run_once(l->f->loop, 2));
    }
}

/* Runs the stream until the pool's master is not `from` and enough
 * successes came since, or bound_ms; returns the ms it took. */
static uint64_t load_until_switched(struct load *l, const char *from, int bound_ms)
{
    uint64_t t0 = clock_mono_ms(), end = t0 + (uint64_t)bound_ms;
    bool moved = false;

    while (clock_mono_ms() < end) {
        struct pool_stats st = stats_of(l->f->pool);

        if (!moved && st.master_addr[0] && strcmp(st.master_addr, from) != 0) {
            moved = true;
            l->ok_since = 0;
        }
        if (moved && l->ok_since >= 100)
            return clock_mono_ms() - t0;
        load_top_up(l);
        ASSERT_OK(sched_loop_run_once(l->f->loop, 2));
    }
    TEST_FAIL("service not back on a new master within %d ms: master %s, ok %llu, refused %llu, "
              "last error %s",
              bound_ms, stats_of(l->f->pool).master_addr, (unsigned long long)l->ok,
              (unsigned long long)l->refused, stats_of(l->f->pool).last_error);
}

static bool load_drained(void *arg)
{
    return ((struct load *)arg)->inflight == 0;
}

static void load_report(const char *what, const struct load *l, uint64_t ms)
{
    fprintf(stderr,
            "%s: back in %llu ms; ok %llu, error replies %llu, reset %llu, timed out %llu, "
            "not executed %llu, refused %llu\n",
            what, (unsigned long long)ms, (unsigned long long)l->ok,
            (unsigned long long)l->err_replies, (unsigned long long)l->reset,
            (unsigned long long)l->timedout, (unsigned long long)l->notconn,
            (unsigned long long)l->refused);
}

/* Lets the stream drain; no error reply (READONLY above all) ever reached
 * a caller, and nothing failed in a way the pool does not promise. */
static void load_finish(struct load *l)
{
    ASSERT_TRUE(lf_run_until(l->f->loop, load_drained, l, 15000));
    if (l->err_replies)
        TEST_FAIL("%llu error replies reached callers, the first: %s",
                  (unsigned long long)l->err_replies, l->first_err);
    ASSERT_EQ(l->other, 0);
}

/* ---- scenarios ------------------------------------------------------------------ */

/* SELECT 1 on the master: key holds val there (the pool's db). */
static void expect_in_db1(struct sfx *f, int m, const char *key, const char *val)
{
    redisContext *c = predis_connect(&f->s.node[m]);
    redisReply *rep;

    ASSERT_NOTNULL(c);
    freeReplyObject(redisCommand(c, "SELECT 1"));
    rep = redisCommand(c, "GET %s", key);
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, val) == 0);
    freeReplyObject(rep);
    redisFree(c);
}

struct err_wait {
    struct pool *p;
    const char *needle;
};

static bool error_mentions(void *arg)
{
    const struct err_wait *w = arg;

    return strstr(stats_of(w->p).last_error, w->needle) != NULL;
}

/* A pool that can never be ready: submits fail at once, and last_error
 * comes to say why (needle). */
static void expect_clear_failure(struct sfx *f, const struct pool_opts *o, const char *needle)
{
    const char *argv[] = {"SET", "never", "1"};
    struct pool *p = sfx_start_pool(f, o);
    struct err_wait w = {p, needle};

    if (!lf_run_until(f->loop, error_mentions, &w, 5000))
        TEST_FAIL("last error never mentioned '%s': %s", needle, stats_of(p).last_error);
    ASSERT_TRUE(!pool_is_ready(p));
    ASSERT_EQ(pool_command(p, 0, 3, argv, NULL, pf_rec_cb, NULL), -ENOTCONN);
    sfx_free_pool(f, p);
}

static bool topo_initial_seen(void *arg)
{
    return ((const struct topo_rec *)arg)->initial > 0;
}

static void check_discovered(struct sfx *f, int m)
{
    struct pool_stats st = stats_of(f->pool);
    struct pool_node_stats ns[4];
    char addr[32];

    node_addr(f, m, addr, sizeof(addr));
    ASSERT_TRUE(st.sentinel && !st.cluster);
    ASSERT_TRUE(pool_is_sentinel(f->pool) && !pool_is_cluster(f->pool));
    ASSERT_STREQ(st.master_name, RSENT_NAME);
    ASSERT_STREQ(st.master_addr, addr);
    ASSERT_STREQ(pool_slot_owner(f->pool, 0), addr);
    ASSERT_STREQ(pool_slot_owner(f->pool, POOL_SLOTS - 1), addr);
    ASSERT_EQ(st.sentinels, RSENT_SENTINELS + 1);
    ASSERT_TRUE(st.sentinel_connected);
    ASSERT_TRUE(st.sentinel_failures >= 1); /* the dead first entry */
    ASSERT_TRUE(st.sentinel_answers >= 1);
    ASSERT_EQ(st.master_switches, 0);
    ASSERT_EQ(st.role_mismatches, 0);
    ASSERT_STREQ(st.pubsub_mode, "classic");
    ASSERT_TRUE(!pool_pubsub_sharded(f->pool));
    ASSERT_EQ(pool_get_node_stats(f->pool, ns, 4), 1);
    ASSERT_STREQ(ns[0].addr, addr);
    ASSERT_STREQ(ns[0].role, "master");
    ASSERT_EQ(ns[0].slots, POOL_SLOTS);
    /* The first map is reported from a 0 ms timer: connections that are
     * ready within the same millisecond can be seen up before it fires. */
    ASSERT_TRUE(lf_run_until(f->loop, topo_initial_seen, &f->topo, 1000));
    ASSERT_EQ(f->topo.initial, 1);
    ASSERT_EQ(f->topo.last_nchanged, POOL_SLOTS);
}

/* The minimal ACLs the README gives: on the sentinels, a user that may
 * only ask for the master and hear its events; on the master, the proxy's
 * list plus ROLE. A pool with both users works and follows events. */
static void check_minimal_acls(struct sfx *f, int m)
{
    static const char data_acl[] =
        "ACL SETUSER lp reset on >lp-pw ~* &redisson_* +ping +auth +select +script|load "
        "+evalsha +eval +subscribe +unsubscribe +publish +exists +type +del +pexpire +pttl +set "
        "+incr +incrby +decr +decrby +hset +hget +hmget +hdel +hexists +hincrby +hlen +hkeys "
        "+lindex +lpop +lrange +lrem +rpush +zadd +zincrby +zrange +zrem +zremrangebyscore "
        "+zscore +role";
    struct pool_opts o = f->opts;
    struct pool *p;
    int k;

    for (k = 0; k < RSENT_SENTINELS; k++)
        rsentinel_sok(&f->s, k,
                      "ACL SETUSER lps on >lps-pw +sentinel|get-master-addr-by-name +subscribe "
                      "+ping &+switch-master &+promoted-slave");
    rsentinel_ok(&f->s, m, data_acl);
    o.sentinel_user = "lps";
    o.sentinel_password = "lps-pw";
    o.user = "lp";
    o.password = "lp-pw";
    o.db = 0;
    o.on_topology = NULL;
    p = sfx_new_pool(f, &o);
    ASSERT_EQ(eval_incr(f, p, "acl:n"), 1);
    ASSERT_EQ(stats_of(p).role_mismatches, 0);
    sfx_free_pool(f, p);
}

/* The first sentinel of the list is dead (the next one answers); the
 * sentinels and the data nodes have their own passwords; db 1. Then the
 * clear errors of a name nobody monitors and of a wrong sentinel
 * password. */
static void run_discovery(enum sched_io io)
{
    char list[256], val[32];
    struct pool_opts o;
    struct sfx f;
    int m, dead = 0;

    sfx_init(&f, io, "data-secret", "sentinel-secret");
    {
        struct predis tmp; /* a port nobody listens on */

        ASSERT_OK(predis_init(&tmp));
        dead = tmp.port;
        predis_cleanup(&tmp);
    }
    snprintf(list, sizeof(list), "127.0.0.1:%d,%s", dead, f.s.list);
    f.opts.sentinels = list;
    f.opts.db = 1;
    sfx_pool(&f);
    m = rsentinel_wait_master(&f.s, -1);
    check_discovered(&f, m);
    set_on(&f, f.pool, "disc", "v1");
    expect_in_db1(&f, m, "disc", "v1");
    ASSERT_EQ(eval_incr(&f, f.pool, "disc:n"), 1);
    get_on_node(&f, m, "disc", val, sizeof(val));
    ASSERT_STREQ(val, ""); /* db 0 untouched */
    o = f.opts;
    o.on_topology = NULL;
    o.sentinel_master = "nosuch";
    expect_clear_failure(&f, &o, "does not know master 'nosuch'");
    o.sentinel_master = RSENT_NAME;
    o.sentinel_password = "wrong";
    expect_clear_failure(&f, &o, "WRONGPASS");
    o.sentinel_password = "sentinel-secret";
    o.password = "wrong";
    expect_clear_failure(&f, &o, "WRONGPASS");
    check_minimal_acls(&f, m);
    sfx_done(&f);
}

/* Every sentinel monitors "stale" at a replica: the pool asks, ROLE
 * refuses the node, nothing reaches it, the error says why; once the
 * sentinels name the real master the pool serves from there. */
static void role_stale(struct sfx *f, int m, int replica)
{
    const char *argv[] = {"SET", "stale-key", "1"};
    struct pool_opts o = f->opts;
    struct err_wait w;
    struct pool *p;
    int k;

    for (k = 0; k < RSENT_SENTINELS; k++) {
        rsentinel_sok(&f->s, k, "SENTINEL MONITOR stale 127.0.0.1 %d 2", f->s.node[replica].port);
        rsentinel_sok(&f->s, k, "SENTINEL SET stale down-after-milliseconds 60000");
    }
    o.sentinel_master = "stale";
    o.on_topology = NULL;
    p = sfx_start_pool(f, &o);
    w.p = p;
    w.needle = "not the master";
    if (!lf_run_until(f->loop, error_mentions, &w, 5000))
        TEST_FAIL("no ROLE error: %s", stats_of(p).last_error);
    lf_run_for(f->loop, 300);
    ASSERT_TRUE(!pool_is_ready(p));
    ASSERT_TRUE(stats_of(p).role_mismatches >= 1);
    ASSERT_EQ(pool_command(p, 0, 3, argv, NULL, pf_rec_cb, NULL), -ENOTCONN);
    ASSERT_EQ(rsentinel_int(&f->s, replica, "EXISTS stale-key"), 0);
    for (k = 0; k < RSENT_SENTINELS; k++) {
        rsentinel_sok(&f->s, k, "SENTINEL REMOVE stale");
        rsentinel_sok(&f->s, k, "SENTINEL MONITOR stale 127.0.0.1 %d 2", f->s.node[m].port);
    }
    if (!lf_run_until(f->loop, pool_all_up, p, 10000))
        TEST_FAIL("no recovery from the stale answer: %s", stats_of(p).last_error);
    set_on(f, p, "stale-key", "1");
    ASSERT_EQ(rsentinel_int(&f->s, m, "EXISTS stale-key"), 1);
    sfx_free_pool(f, p);
}

/* The sentinels are repointed by hand (no +switch-master), then the old
 * master becomes a replica without its clients being dropped: the next
 * write gets READONLY there. The pool re-asks, moves to the new master
 * and re-sends: the caller gets +OK; the listener moves too. */
static void role_readonly(struct sfx *f, int m, int other)
{
    char addr[32], val[32];
    struct pool_stats st;
    struct pf_lsn l;
    int k;

    memset(&l, 0, sizeof(l));
    f->opts.cluster_refresh_ms = 60000; /* only on-demand asks */
    sfx_pool(f);
    ASSERT_OK(pool_sub_start(f->pool, &l.sub, "ro-ch", 5, pf_lsn_cb));
    pf_wait_lsn(f->loop, &l, 1, 0, 0, 5000);
    set_on(f, f->pool, "ro-before", "1");
    rsentinel_ok(&f->s, other, "REPLICAOF NO ONE");
    for (k = 0; k < RSENT_SENTINELS; k++) {
        rsentinel_sok(&f->s, k, "SENTINEL REMOVE %s", RSENT_NAME);
        rsentinel_sok(&f->s, k, "SENTINEL MONITOR %s 127.0.0.1 %d 2", RSENT_NAME,
                      f->s.node[other].port);
        rsentinel_sok(&f->s, k, "SENTINEL SET %s down-after-milliseconds 60000", RSENT_NAME);
    }
    rsentinel_ok(&f->s, m, "REPLICAOF 127.0.0.1 %d", f->s.node[other].port);
    ASSERT_STREQ(stats_of(f->pool).master_addr, node_addr(f, m, addr, sizeof(addr)));
    set_on(f, f->pool, "ro-after", "2"); /* READONLY on m, then +OK from other */
    st = stats_of(f->pool);
    ASSERT_TRUE(st.readonly >= 1);
    ASSERT_STREQ(st.master_addr, node_addr(f, other, addr, sizeof(addr)));
    ASSERT_EQ(st.master_switches, 1);
    get_on_node(f, other, "ro-after", val, sizeof(val));
    ASSERT_STREQ(val, "2");
    ASSERT_TRUE(f->topo.switches >= 1);
    pf_wait_lsn(f->loop, &l, 2, 1, 0, 5000);
    publish_until(f, other, "ro-ch", &l, 1);
    pool_sub_stop(f->pool, &l.sub);
}

static void run_role(enum sched_io io)
{
    struct sfx f;
    int m, replica, other;

    sfx_init(&f, io, NULL, NULL);
    m = rsentinel_wait_master(&f.s, -1);
    replica = (m + 1) % RSENT_NODES;
    other = (m + 2) % RSENT_NODES;
    role_stale(&f, m, replica);
    role_readonly(&f, m, other);
    sfx_done(&f);
}

/* The stream of scripts, the listener and the topology callback across
 * a switch from old to the new master nm. */
static void check_switched(struct sfx *f, struct load *ld, struct pf_lsn *l, int nm)
{
    char addr[32];
    struct pool_stats st;

    load_finish(ld);
    st = stats_of(f->pool);
    ASSERT_STREQ(st.master_addr, node_addr(f, nm, addr, sizeof(addr)));
    ASSERT_TRUE(st.master_switches >= 1);
    ASSERT_TRUE(f->topo.switches >= 1);
    ASSERT_EQ(f->topo.last_masters, 1);
    pf_wait_lsn(f->loop, l, 2, 1, 0, 5000);
    publish_until(f, nm, "sw-ch", l, 1);
    /* the new master's connections loaded the scripts in their handshake */
    ASSERT_EQ(st.noscript_retries, 0);
    rsentinel_ok(&f->s, nm, "SCRIPT FLUSH");
    ASSERT_TRUE(eval_incr(f, f->pool, "after:flush") >= 1);
    ASSERT_EQ(stats_of(f->pool).noscript_retries, 1);
    ASSERT_TRUE(pool_all_up(f->pool));
}

/* SENTINEL FAILOVER under a stream of scripts: only successes (or a
 * submit refused in the switch window), never an error reply. */
static void run_failover(enum sched_io io)
{
    char from[32];
    struct load ld;
    struct pf_lsn l;
    struct sfx f;
    uint64_t ms;
    int m, nm;

    memset(&l, 0, sizeof(l));
    memset(&ld, 0, sizeof(ld));
    sfx_init(&f, io, NULL, NULL);
    sfx_pool(&f);
    ld.f = &f;
    m = rsentinel_wait_master(&f.s, -1);
    node_addr(&f, m, from, sizeof(from));
    ASSERT_OK(pool_sub_start(f.pool, &l.sub, "sw-ch", 5, pf_lsn_cb));
    pf_wait_lsn(f.loop, &l, 1, 0, 0, 5000);
    load_run(&ld, 300);
    ASSERT_TRUE(ld.ok > 0);
    rsentinel_sok(&f.s, 0, "SENTINEL FAILOVER %s", RSENT_NAME);
    ms = load_until_switched(&ld, from, FAILOVER_BOUND_MS);
    load_report("SENTINEL FAILOVER", &ld, ms);
    nm = rsentinel_wait_master(&f.s, m);
    ASSERT_TRUE(stats_of(f.pool).switch_events >= 1); /* heard +switch-master */
    check_switched(&f, &ld, &l, nm);
    ASSERT_EQ(ld.reset + ld.timedout + ld.notconn, 0); /* the old master answered all */
    sfx_done(&f);
}

/* kill -9 the master under the stream: a request it had received gets
 * -ECONNRESET (never re-sent), the rest are successes or clean errors;
 * service is back on the promoted replica within the bound. */
static void run_kill(enum sched_io io)
{
    const char *incr[] = {"INCR", "kill:inflight"};
    char from[32];
    struct pf_rec inflight;
    struct load ld;
    struct pf_lsn l;
    struct sfx f;
    uint64_t ms;
    int m, nm;

    memset(&l, 0, sizeof(l));
    memset(&ld, 0, sizeof(ld));
    memset(&inflight, 0, sizeof(inflight));
    sfx_init(&f, io, NULL, NULL);
    sfx_pool(&f);
    ld.f = &f;
    m = rsentinel_wait_master(&f.s, -1);
    node_addr(&f, m, from, sizeof(from));
    ASSERT_OK(pool_sub_start(f.pool, &l.sub, "sw-ch", 5, pf_lsn_cb));
    pf_wait_lsn(f.loop, &l, 1, 0, 0, 5000);
    load_run(&ld, 300);
    rsentinel_signal_node(&f.s, m, SIGSTOP);
    ASSERT_OK(pool_command(f.pool, 0, 2, incr, NULL, pf_rec_cb, &inflight));
    lf_run_for(f.loop, 50);
    ASSERT_EQ(inflight.calls, 0);
    rsentinel_kill_node(&f.s, m);
    ms = load_until_switched(&ld, from, KILL_BOUND_MS);
    load_report("kill -9", &ld, ms);
    ASSERT_EQ(inflight.calls, 1);
    ASSERT_EQ(inflight.err, -ECONNRESET);
    nm = rsentinel_wait_master(&f.s, m);
    check_switched(&f, &ld, &l, nm);
    sfx_done(&f);
}

struct sent_wait {
    struct pool *p;
    bool connected;
};

static bool sentinel_connected_is(void *arg)
{
    const struct sent_wait *w = arg;
    struct pool_stats st = stats_of(w->p);

    return st.sentinel_connected == w->connected &&
           (!w->connected || (st.sentinel_subscribed && pool_is_ready(w->p)));
}

/* Every sentinel down: the known master keeps serving; a new pool fails
 * fast with an error that says no sentinel answers; when the sentinels
 * come back both pools follow them again. */
static void run_sentinels_down(enum sched_io io)
{
    const char *argv[] = {"SET", "down", "1"};
    struct pool_opts o;
    struct sent_wait w;
    struct pool *late;
    struct sfx f;
    int k, m;

    sfx_init(&f, io, NULL, NULL);
    sfx_pool(&f);
    m = rsentinel_wait_master(&f.s, -1);
    for (k = 0; k < RSENT_SENTINELS; k++)
        rsentinel_kill_sentinel(&f.s, k);
    w.p = f.pool;
    w.connected = false;
    ASSERT_TRUE(lf_run_until(f.loop, sentinel_connected_is, &w, 5000));
    lf_run_for(f.loop, 500);
    set_on(&f, f.pool, "while-down", "1");
    ASSERT_EQ(eval_incr(&f, f.pool, "while-down:n"), 1);
    ASSERT_STREQ(stats_of(f.pool).state, "up");
    o = f.opts;
    o.on_topology = NULL;
    late = sfx_start_pool(&f, &o);
    w.p = late;
    {
        struct err_wait ew = {late, "no sentinel answers for master 'mymaster'"};

        if (!lf_run_until(f.loop, error_mentions, &ew, 5000))
            TEST_FAIL("no clear error: %s", stats_of(late).last_error);
    }
    ASSERT_EQ(pool_command(late, 0, 3, argv, NULL, pf_rec_cb, NULL), -ENOTCONN);
    for (k = 0; k < RSENT_SENTINELS; k++)
        rsentinel_start_sentinel(&f.s, k);
    w.connected = true;
    if (!lf_run_until(f.loop, sentinel_connected_is, &w, 10000))
        TEST_FAIL("late pool did not recover: %s", stats_of(late).last_error);
    set_on(&f, late, "down", "1");
    ASSERT_EQ(rsentinel_int(&f.s, m, "EXISTS down"), 1);
    w.p = f.pool;
    ASSERT_TRUE(lf_run_until(f.loop, sentinel_connected_is, &w, 10000));
    sfx_free_pool(&f, late);
    sfx_done(&f);
}

/* ---- cases: every scenario on both backends --------------------------------- */

TEST(sentinel_discovery_epoll)
{
    run_discovery(SCHED_IO_EPOLL);
}
TEST(sentinel_discovery_uring)
{
    run_discovery(SCHED_IO_URING);
}
TEST(sentinel_role_epoll)
{
    run_role(SCHED_IO_EPOLL);
}
TEST(sentinel_role_uring)
{
    run_role(SCHED_IO_URING);
}
TEST(sentinel_failover_epoll)
{
    run_failover(SCHED_IO_EPOLL);
}
TEST(sentinel_failover_uring)
{
    run_failover(SCHED_IO_URING);
}
TEST(sentinel_kill_master_epoll)
{
    run_kill(SCHED_IO_EPOLL);
}
TEST(sentinel_kill_master_uring)
{
    run_kill(SCHED_IO_URING);
}
TEST(sentinel_all_down_epoll)
{
    run_sentinels_down(SCHED_IO_EPOLL);
}
TEST(sentinel_all_down_uring)
{
    run_sentinels_down(SCHED_IO_URING);
}

TEST_MAIN(TEST_CASE(sentinel_discovery_epoll), TEST_CASE(sentinel_discovery_uring),
          TEST_CASE(sentinel_role_epoll), TEST_CASE(sentinel_role_uring),
          TEST_CASE(sentinel_failover_epoll), TEST_CASE(sentinel_failover_uring),
          TEST_CASE(sentinel_kill_master_epoll), TEST_CASE(sentinel_kill_master_uring),
          TEST_CASE(sentinel_all_down_epoll), TEST_CASE(sentinel_all_down_uring))
