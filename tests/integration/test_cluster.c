/* Integration tests for pool/ against a real Redis Cluster (6 nodes: 3
 * masters, 3 replicas, started per case by cluster_util): routing of
 * commands and scripts to the owning master for keys of every slot, hash
 * tags and CROSSSLOT, scripts on every master and NOSCRIPT per node, MOVED
 * after a slot migration, ASK during one, TRYAGAIN and CLUSTERDOWN retried
 * within the timeout, periodic refresh without any MOVED, sharded and
 * classic pub/sub on the owning shard, subscriptions moving (LOST then
 * READY) on a migration, a manual failover and a killed master, the
 * topology callback, per-node stats, and the clear error of a plain pool
 * pointed at a cluster node.
 *
 * Every scenario runs on both loop backends; the io_uring case skips only
 * when the kernel refuses io_uring. Cases skip when redis-server or
 * redis-cli is missing. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "harness.h"
#include "pool/pool.h"
#include "pool_fixture.h"
#include "sched/loop.h"

/* ---- fixture ------------------------------------------------------------- */

struct topo_rec {
    int calls;                           /* on_topology calls */
    int initial;                         /* of which initial */
    unsigned last_nchanged;              /* nchanged of the last call */
    uint8_t seen[POOL_SLOT_BITMAP_SIZE]; /* union of changed slots (non-initial calls) */
};

struct cfx {
    struct rcluster c;       /* the cluster */
    struct sched_loop *loop; /* owned */
    struct pool *pool;       /* owned, or NULL */
    struct pool_opts opts;   /* options for cfx_pool() */
    char seeds[64];          /* opts.cluster_seeds */
    struct topo_rec topo;    /* what on_topology reported */
};

static const struct pool_script fx_scripts[] = {
    {.name = "echo", .text = "return ARGV[1]"},
    {.name = "incrby", .text = "return redis.call('INCRBY', KEYS[1], ARGV[1])"},
    {.name = "set2",
     .text = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return 2"},
};

static void on_topology(void *arg, const struct pool_topology_event *ev)
{
    struct topo_rec *t = arg;
    size_t i;

    t->calls++;
    t->last_nchanged = ev->nchanged;
    if (ev->initial) {
        t->initial++;
        return;
    }
    for (i = 0; i < POOL_SLOT_BITMAP_SIZE; i++)
        t->seen[i] |= ev->slots[i];
}

/* Loop, cluster and options (seeds: a master and a replica). */
static void cfx_init(struct cfx *f, enum sched_io io)
{
    struct sched_loop_opts lo = {io, 64, 2};
    char a[32], b[32];
    int rc;

    memset(f, 0, sizeof(*f));
    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rc = sched_loop_create(&f->loop, &lo);
    if (io == SCHED_IO_URING && (rc == -ENOSYS || rc == -EPERM))
        TEST_SKIP("io_uring unavailable: %s", strerror(-rc));
    ASSERT_OK(rc);
    rcluster_start(&f->c);
    snprintf(f->seeds, sizeof(f->seeds), "%s,%s", rcluster_addr(&f->c, 0, a, sizeof(a)),
             rcluster_addr(&f->c, 5, b, sizeof(b)));
    pool_opts_default(&f->opts);
    f->opts.cluster_seeds = f->seeds;
    f->opts.connect_timeout_ms = 500;
    f->opts.request_timeout_ms = 5000;
    f->opts.backoff_min_ms = 10;
    f->opts.backoff_max_ms = 200;
    f->opts.on_topology = on_topology;
    f->opts.topology_arg = &f->topo;
}

static bool pool_all_up(void *arg)
{
    struct pool_stats st;

    pool_get_stats(arg, &st);
    return strcmp(st.state, "up") == 0 && st.pubsub_ready && st.slots_served == POOL_SLOTS &&
           st.nodes == 3;
}

static bool pool_stopped(void *arg)
{
    return pool_is_stopped(arg);
}

static struct pool *cfx_new_pool(struct cfx *f, const struct pool_opts *o)
{
    struct pool *p;

    ASSERT_OK(sched_loop_run_once(f->loop, 0)); /* fresh loop time after the cluster set-up */
    ASSERT_OK(pool_create(&p, f->loop, o, fx_scripts, LP_ARRAY_SIZE(fx_scripts)));
    ASSERT_OK(pool_start(p));
    ASSERT_TRUE(lf_run_until(f->loop, pool_all_up, p, 10000));
    return p;
}

static void cfx_pool(struct cfx *f)
{
    f->pool = cfx_new_pool(f, &f->opts);
}

static void cfx_free_pool(struct cfx *f, struct pool *p)
{
    pool_stop(p);
    ASSERT_TRUE(lf_run_until(f->loop, pool_stopped, p, 3000));
    pool_destroy(p);
}

static void cfx_done(struct cfx *f)
{
    if (f->pool)
        cfx_free_pool(f, f->pool);
    f->pool = NULL;
    sched_loop_destroy(f->loop);
    rcluster_cleanup(&f->c);
}

/* ---- requests ------------------------------------------------------------------ */

static struct pf_rec cfx_cmd_on(struct cfx *f, struct pool *p, int argc, const char *const *argv)
{
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command(p, 0, argc, argv, NULL, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 10000));
    return r;
}

static struct pf_rec cfx_cmd(struct cfx *f, int argc, const char *const *argv)
{
    return cfx_cmd_on(f, f->pool, argc, argv);
}

static void cfx_set(struct cfx *f, const char *key, const char *val)
{
    const char *argv[] = {"SET", key, val};
    struct pf_rec r = cfx_cmd(f, 3, argv);

    ASSERT_EQ(r.err, 0);
    ASSERT_STREQ(r.str, "OK");
}

static void cfx_expect_get(struct cfx *f, const char *key, const char *val)
{
    const char *argv[] = {"GET", key};
    struct pf_rec r = cfx_cmd(f, 2, argv);

    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.type, POOL_REPLY_STRING);
    ASSERT_STREQ(r.str, val);
}

static struct pf_rec cfx_eval(struct cfx *f, unsigned script, int numkeys, int argc,
                              const char *const *argv)
{
    struct pf_rec r;

    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_eval(f->pool, 0, script, numkeys, argc, argv, NULL, pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f->loop, pf_rec_done, &r, 10000));
    ASSERT_EQ(r.err, 0);
    return r;
}

static struct pool_stats cfx_stats(struct cfx *f)
{
    struct pool_stats st;

    pool_get_stats(f->pool, &st);
    return st;
}

/* A key of the form <prefix><n> whose slot is owned by master m. */
static void key_on(struct cfx *f, int m, const char *prefix, char *out, size_t size)
{
    int n;

    for (n = 0; n < 100000; n++) {
        snprintf(out, size, "%s%d", prefix, n);
        if (rcluster_owner(&f->c, pool_slot(out, strlen(out))) == m)
            return;
    }
    TEST_FAIL("no key for node %d", m);
}

/* Node stats of the node at node index i of the cluster, or NULL. */
static bool node_stats_of(struct cfx *f, int i, struct pool_node_stats *out)
{
    struct pool_node_stats all[16];
    char addr[32];
    size_t n = pool_get_node_stats(f->pool, all, 16), k;

    rcluster_addr(&f->c, i, addr, sizeof(addr));
    for (k = 0; k < n && k < 16; k++) {
        if (strcmp(all[k].addr, addr) == 0) {
            *out = all[k];
            return true;
        }
    }
    return false;
}

/* PUBSUB SHARDNUMSUB (sharded) or NUMSUB on node i. */
static long long numsub(struct cfx *f, int i, const char *ch, bool sharded)
{
    redisReply *rep =
        rcluster_cmd(&f->c, i, sharded ? "PUBSUB SHARDNUMSUB %s" : "PUBSUB NUMSUB %s", ch);
    long long v = -1;

    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
        v = rep->element[1]->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

static void wait_numsub(struct cfx *f, int i, const char *ch, bool sharded, long long want)
{
    int k;

    for (k = 0; k < 300; k++) {
        if (numsub(f, i, ch, sharded) == want)
            return;
        lf_run_for(f->loop, 10);
    }
    TEST_FAIL("numsub %s on node %d never reached %lld", ch, i, want);
}

static bool topo_has(const struct topo_rec *t, int slot)
{
    return pool_slot_bitmap_has(t->seen, (unsigned)slot);
}

struct slot_wait {
    struct topo_rec *t;
    int slot;
};

static bool topo_reached(void *arg)
{
    const struct slot_wait *w = arg;

    return topo_has(w->t, w->slot);
}

static void wait_topo(struct cfx *f, struct topo_rec *t, int slot)
{
    struct slot_wait w = {t, slot};

    if (!lf_run_until(f->loop, topo_reached, &w, 10000))
        TEST_FAIL("on_topology never reported slot %d", slot);
}

/* ---- scenarios ------------------------------------------------------------------ */

static int keyslot(struct cfx *f, const char *key)
{
    return (int)rcluster_int(&f->c, 0, "CLUSTER KEYSLOT %s", key);
}

/* pool_slot agrees with the server, brace edge cases included. */
static void check_keyslots(struct cfx *f)
{
    static const char *odd[] = {"foo",        "{user1000}.following",
                                "foo{}{bar}", "foo{{bar}}zap",
                                "a}b{c}",     "}{x}",
                                "{",          "a{b",
                                "",           "redisson_lock__channel:{orders}"};
    char key[32];
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(odd); i++)
        ASSERT_EQ(pool_slot(odd[i], strlen(odd[i])), keyslot(f, odd[i]));
    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "key:%zu", i * 7919);
        ASSERT_EQ(pool_slot(key, strlen(key)), keyslot(f, key));
    }
}

static struct {
    int done; /* completions */
    int bad;  /* anything but +OK */
} setall;

static void setall_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;

    (void)arg;
    setall.done++;
    setall.bad += err != 0 || r->type != POOL_REPLY_STATUS;
}

static bool setall_done(void *arg)
{
    (void)arg;
    return setall.done == POOL_SLOTS;
}

static char slot_key[POOL_SLOTS][16];

/* One key per slot, all SET in one go: each master ends up with exactly
 * the keys of its slots, none was redirected. */
static void check_every_slot(struct cfx *f)
{
    int counts[RCLUSTER_NODES], seen = 0, i, total = 0;
    unsigned n;

    memset(slot_key, 0, sizeof(slot_key));
    for (n = 0; seen < POOL_SLOTS; n++) {
        char key[16];
        uint16_t s;

        snprintf(key, sizeof(key), "k%u", n);
        s = pool_slot(key, strlen(key));
        if (!slot_key[s][0]) {
            memcpy(slot_key[s], key, sizeof(key));
            seen++;
        }
    }
    for (i = 0; i < POOL_SLOTS; i++) {
        const char *argv[] = {"SET", slot_key[i], "0"};

        ASSERT_OK(pool_command(f->pool, (uint64_t)i, 3, argv, NULL, setall_cb, NULL));
    }
    ASSERT_TRUE(lf_run_until(f->loop, setall_done, NULL, 20000));
    ASSERT_EQ(setall.bad, 0);
    ASSERT_EQ(cfx_stats(f).moved, 0);
    rcluster_slot_counts(&f->c, counts);
    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (counts[i])
            ASSERT_EQ(rcluster_int(&f->c, i, "DBSIZE"), counts[i]);
        total += counts[i];
    }
    ASSERT_EQ(total, POOL_SLOTS);
    for (i = 0; i < POOL_SLOTS; i += 997) {
        int owner = rcluster_owner(&f->c, i), other = rcluster_other_master(&f->c, owner);

        ASSERT_EQ(rcluster_int(&f->c, owner, "EXISTS %s", slot_key[i]), 1);
        ASSERT_EQ(rcluster_int(&f->c, other, "EXISTS %s", slot_key[i]), -1); /* MOVED */
    }
}

/* Scripts run on each key's owner; every master has them loaded; keys of
 * one hash tag share a node, keys of two slots get CROSSSLOT. */
static void check_scripts(struct cfx *f)
{
    const char *tagged[] = {"{tag}a", "{tag}b", "7"};
    const char *split[] = {"x1", "x2", "7"};
    redisReply *rep;
    char sha[41];
    int i, owner, m;
    struct pf_rec r;

    for (i = 0; i < POOL_SLOTS; i += 509) {
        const char *argv[] = {slot_key[i], "5"};

        ASSERT_EQ(cfx_eval(f, 1, 1, 2, argv).integer, 5);
        ASSERT_EQ(rcluster_int(&f->c, rcluster_owner(&f->c, i), "EXISTS %s", slot_key[i]), 1);
    }
    /* the SHA1 from a replica, so no master gets the script from us */
    m = rcluster_owner(&f->c, 0);
    rep = rcluster_cmd(&f->c, rcluster_replica_of(&f->c, m), "SCRIPT LOAD %s", fx_scripts[1].text);
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STRING && rep->len == 40);
    memcpy(sha, rep->str, 41);
    freeReplyObject(rep);
    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (!rcluster_is_master(&f->c, i))
            continue;
        rep = rcluster_cmd(&f->c, i, "SCRIPT EXISTS %s", sha);
        ASSERT_TRUE(rep && rep->type == REDIS_REPLY_ARRAY && rep->element[0]->integer == 1);
        freeReplyObject(rep);
    }
    ASSERT_EQ(cfx_eval(f, 2, 2, 3, tagged).integer, 2);
    owner = rcluster_owner(&f->c, pool_slot("tag", 3));
    ASSERT_EQ(rcluster_int(&f->c, owner, "EXISTS {tag}a {tag}b"), 2);
    ASSERT_TRUE(pool_slot("x1", 2) != pool_slot("x2", 2));
    r = cfx_eval(f, 2, 2, 3, split);
    ASSERT_EQ(r.type, POOL_REPLY_ERROR);
    ASSERT_TRUE(strncmp(r.str, "CROSSSLOT", 9) == 0);
}

/* Three masters, each with its share of slots, a latency, requests. */
static void check_node_stats(struct cfx *f)
{
    struct pool_node_stats ns[8];
    size_t n = pool_get_node_stats(f->pool, ns, 8), i;
    unsigned slots = 0;

    ASSERT_EQ(n, 3);
    for (i = 0; i < n; i++) {
        ASSERT_STREQ(ns[i].state, "up");
        ASSERT_STREQ(ns[i].role, "master");
        ASSERT_EQ(strlen(ns[i].id), 40);
        ASSERT_STREQ(ns[i].health, "online");
        ASSERT_TRUE(ns[i].requests > 0);
        ASSERT_TRUE(ns[i].latency_us > 0);
        ASSERT_EQ(ns[i].conns_ready, ns[i].conns);
        ASSERT_TRUE(ns[i].pubsub_ready);
        ASSERT_EQ(ns[i].moved + ns[i].ask + ns[i].tryagain, 0);
        slots += ns[i].slots;
    }
    ASSERT_EQ(slots, POOL_SLOTS);
    for (i = 0; i < POOL_SLOTS; i += 1001) {
        char addr[32];

        rcluster_addr(&f->c, rcluster_owner(&f->c, (int)i), addr, sizeof(addr));
        ASSERT_STREQ(pool_slot_owner(f->pool, (unsigned)i), addr);
    }
    ASSERT_NULL(pool_slot_owner(f->pool, POOL_SLOTS));
}

static bool single_ready(void *arg)
{
    return pool_is_ready(arg);
}

/* A plain pool on one cluster node: a key it does not own gets the
 * error that says to use redis-cluster://. */
static void check_single_on_cluster(struct cfx *f)
{
    const char *argv[] = {"GET", NULL};
    struct pool_opts o;
    struct pool_stats st;
    struct pool *p;
    char key[32];
    struct pf_rec r;
    int m = rcluster_owner(&f->c, 0), other = rcluster_other_master(&f->c, m);

    key_on(f, other, "elsewhere", key, sizeof(key));
    argv[1] = key;
    pool_opts_default(&o);
    o.port = f->c.node[m].port;
    o.connect_timeout_ms = 500;
    o.backoff_min_ms = 10;
    o.backoff_max_ms = 200;
    ASSERT_OK(sched_loop_run_once(f->loop, 0));
    ASSERT_OK(pool_create(&p, f->loop, &o, fx_scripts, LP_ARRAY_SIZE(fx_scripts)));
    ASSERT_OK(pool_start(p));
    ASSERT_TRUE(lf_run_until(f->loop, single_ready, p, 5000));
    r = cfx_cmd_on(f, p, 2, argv);
    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.type, POOL_REPLY_ERROR);
    ASSERT_TRUE(strncmp(r.str, POOL_ERR_IS_CLUSTER_CODE " ", 9) == 0);
    ASSERT_NOTNULL(strstr(r.str, "is a Redis Cluster node"));
    ASSERT_NOTNULL(strstr(r.str, "redis-cluster://"));
    pool_get_stats(p, &st);
    ASSERT_TRUE(st.upstream_is_cluster);
    ASSERT_TRUE(!st.cluster);
    ASSERT_NOTNULL(strstr(st.last_error, "redis-cluster://"));
    cfx_free_pool(f, p);
}

/* An ACL user that may not run CLUSTER SHARDS (as on Redis < 7, which
 * does not know it): the pool falls back to CLUSTER SLOTS, with AUTH as
 * that user on every connection. */
static void check_slots_fallback(struct cfx *f)
{
    struct pool_opts o;
    struct pool *p;
    redisContext *ctx;
    redisReply *rep;
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++)
        rcluster_ok(&f->c, i, "ACL SETUSER lp on >pw ~* &* +@all -cluster|shards");
    ctx = rcluster_connect(&f->c, 0);
    ASSERT_NOTNULL(ctx);
    freeReplyObject(redisCommand(ctx, "AUTH lp pw"));
    rep = redisCommand(ctx, "CLUSTER SHARDS");
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOPERM", 6) == 0);
    freeReplyObject(rep);
    redisFree(ctx);
    o = f->opts;
    o.user = "lp";
    o.password = "pw";
    o.on_topology = NULL;
    p = cfx_new_pool(f, &o);
    ASSERT_STREQ(cfx_cmd_on(f, p, 3, (const char *const[]){"SET", "{fb}k", "1"}).str, "OK");
    cfx_free_pool(f, p);
}

static void run_routing(enum sched_io io)
{
    const char *shardnumsub[] = {"PUBSUB", "SHARDNUMSUB", "somechan"};
    struct pool_stats st;
    struct pf_rec r;
    struct cfx f;

    cfx_init(&f, io);
    cfx_pool(&f);
    st = cfx_stats(&f);
    ASSERT_TRUE(st.cluster && pool_is_cluster(f.pool) && pool_is_ready(f.pool));
    ASSERT_STREQ(st.pubsub_mode, "sharded");
    ASSERT_TRUE(pool_pubsub_sharded(f.pool));
    ASSERT_EQ(st.nodes_ready, 3);
    ASSERT_TRUE(st.topology_refreshes >= 1);
    ASSERT_EQ(f.topo.initial, 1);
    ASSERT_EQ(f.topo.last_nchanged, POOL_SLOTS);
    check_keyslots(&f);
    check_every_slot(&f);
    check_scripts(&f);
    check_node_stats(&f);
    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command_slot(f.pool, 0, pool_slot("somechan", 8), 3, shardnumsub, NULL,
                                pf_rec_cb, &r));
    ASSERT_TRUE(lf_run_until(f.loop, pf_rec_done, &r, 5000));
    ASSERT_EQ(r.type, POOL_REPLY_ARRAY);
    ASSERT_EQ(pool_command_slot(f.pool, 0, POOL_SLOTS, 3, shardnumsub, NULL, pf_rec_cb, &r),
              -EINVAL);
    check_single_on_cluster(&f);
    check_slots_fallback(&f);
    cfx_done(&f);
}

/* Sharded: SSUBSCRIBE on the owner of each channel (one per master),
 * SPUBLISH there delivers, unsubscribe. Classic (a second pool): SUBSCRIBE
 * on the owner, a PUBLISH on another master delivers. */
static void run_pubsub(enum sched_io io)
{
    struct pf_lsn ls[3], cl;
    char names[3][32], cname[32];
    int owners[3], i, j;
    struct pool_opts o;
    struct pool *classic;
    struct pool_node_stats ns;
    struct cfx f;

    memset(ls, 0, sizeof(ls));
    memset(&cl, 0, sizeof(cl));
    cfx_init(&f, io);
    cfx_pool(&f);
    for (i = 0, j = 0; i < RCLUSTER_NODES; i++) {
        if (rcluster_is_master(&f.c, i)) {
            owners[j] = i;
            key_on(&f, i, "chan", names[j], sizeof(names[j]));
            ASSERT_OK(pool_sub_start(f.pool, &ls[j].sub, names[j], strlen(names[j]), pf_lsn_cb));
            j++;
        }
    }
    ASSERT_EQ(j, 3);
    for (i = 0; i < 3; i++) {
        pf_wait_lsn(f.loop, &ls[i], 1, 0, 0, 5000);
        ASSERT_EQ(numsub(&f, owners[i], names[i], true), 1);
        ASSERT_EQ(numsub(&f, owners[(i + 1) % 3], names[i], true), 0);
        ASSERT_EQ(rcluster_int(&f.c, owners[i], "SPUBLISH %s hello%d", names[i], i), 1);
        pf_wait_lsn(f.loop, &ls[i], 1, 0, 1, 5000);
        ASSERT_TRUE(node_stats_of(&f, owners[i], &ns));
        ASSERT_EQ(ns.channels, 1);
    }
    ASSERT_STREQ(ls[2].last, "hello2");
    pool_sub_stop(f.pool, &ls[0].sub);
    wait_numsub(&f, owners[0], names[0], true, 0);
    o = f.opts;
    o.pubsub_mode = POOL_PUBSUB_CLASSIC;
    o.on_topology = NULL;
    classic = cfx_new_pool(&f, &o);
    ASSERT_TRUE(!pool_pubsub_sharded(classic));
    key_on(&f, owners[1], "cchan", cname, sizeof(cname));
    ASSERT_OK(pool_sub_start(classic, &cl.sub, cname, strlen(cname), pf_lsn_cb));
    pf_wait_lsn(f.loop, &cl, 1, 0, 0, 5000);
    ASSERT_EQ(numsub(&f, owners[1], cname, false), 1);
    ASSERT_EQ(numsub(&f, owners[2], cname, false), 0);
    ASSERT_EQ(rcluster_int(&f.c, owners[2], "PUBLISH %s classic", cname) >= 0, 1);
    pf_wait_lsn(f.loop, &cl, 1, 0, 1, 5000);
    ASSERT_STREQ(cl.last, "classic");
    cfx_free_pool(&f, classic);
    cfx_done(&f);
}

/* MOVED after a migration: the request is retried on the new owner, the
 * map learns (no second MOVED), on_topology reports the slot. */
static void migrate_moved(struct cfx *f, int m1, int m2)
{
    struct pool_node_stats ns;
    char mk[32];
    int s;

    key_on(f, m1, "mk", mk, sizeof(mk));
    cfx_set(f, mk, "moved-value");
    s = pool_slot(mk, strlen(mk));
    rcluster_migrate(&f->c, s, m2);
    cfx_expect_get(f, mk, "moved-value");
    ASSERT_EQ(cfx_stats(f).moved, 1);
    cfx_expect_get(f, mk, "moved-value");
    ASSERT_EQ(cfx_stats(f).moved, 1);
    wait_topo(f, &f->topo, s);
    ASSERT_TRUE(node_stats_of(f, m1, &ns));
    ASSERT_EQ(ns.moved, 1);
}

/* A sharded subscription follows its slot: LOST, READY on the new owner,
 * where SPUBLISH reaches it. */
static void migrate_subscription(struct cfx *f, int m1, int m2)
{
    struct pf_lsn l;
    char pch[32];

    memset(&l, 0, sizeof(l));
    key_on(f, m1, "pch", pch, sizeof(pch));
    ASSERT_OK(pool_sub_start(f->pool, &l.sub, pch, strlen(pch), pf_lsn_cb));
    pf_wait_lsn(f->loop, &l, 1, 0, 0, 5000);
    ASSERT_EQ(numsub(f, m1, pch, true), 1);
    rcluster_migrate(&f->c, pool_slot(pch, strlen(pch)), m2);
    pf_wait_lsn(f->loop, &l, 2, 1, 0, 5000);
    ASSERT_EQ(numsub(f, m2, pch, true), 1);
    ASSERT_EQ(rcluster_int(&f->c, m2, "SPUBLISH %s after", pch), 1);
    pf_wait_lsn(f->loop, &l, 2, 1, 1, 5000);
    pool_sub_stop(f->pool, &l.sub);
}

/* True when key exists on node i for a client that sent ASKING first. */
static bool exists_asking(struct cfx *f, int i, const char *key)
{
    redisContext *ctx = rcluster_connect(&f->c, i);
    redisReply *rep;
    bool yes;

    ASSERT_NOTNULL(ctx);
    freeReplyObject(redisCommand(ctx, "ASKING"));
    rep = redisCommand(ctx, "EXISTS %s", key);
    yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    if (rep)
        freeReplyObject(rep);
    redisFree(ctx);
    return yes;
}

/* ASK during a migration: x already moved to the importing node, y still
 * on the source, z new (created on the importing node); the map and the
 * topology callback are left alone. */
static void migrate_ask(struct cfx *f, int m1, int m2)
{
    char tag[32], ax[40], ay[40], az[40];
    int s, calls, moved = (int)cfx_stats(f).moved;

    key_on(f, m1, "ask", tag, sizeof(tag)); /* a hash tag on m1 */
    snprintf(ax, sizeof(ax), "{%s}x", tag);
    snprintf(ay, sizeof(ay), "{%s}y", tag);
    snprintf(az, sizeof(az), "{%s}z", tag);
    s = pool_slot(ax, strlen(ax));
    ASSERT_EQ(pool_slot(ay, strlen(ay)), s);
    cfx_set(f, ax, "ask-x");
    cfx_set(f, ay, "ask-y");
    calls = f->topo.calls;
    rcluster_migrate_begin(&f->c, s, m1, m2);
    rcluster_migrate_key(&f->c, m1, m2, ax);
    cfx_expect_get(f, ax, "ask-x");
    ASSERT_EQ(cfx_stats(f).ask, 1);
    cfx_expect_get(f, ay, "ask-y");
    cfx_set(f, az, "ask-z");
    ASSERT_EQ(cfx_stats(f).ask, 2);
    ASSERT_EQ(cfx_stats(f).moved, moved);
    ASSERT_TRUE(exists_asking(f, m2, az));
    ASSERT_EQ(rcluster_int(&f->c, m1, "EXISTS %s", ay), 1);
    rcluster_migrate_key(&f->c, m1, m2, ay);
    rcluster_migrate_finish(&f->c, s, m1, m2);
    ASSERT_EQ(f->topo.calls, calls);
}

/* A second pool, refreshing every 200 ms, learns of a migration it never
 * sent a request for: no MOVED, no ASK. */
static void migrate_periodic(struct cfx *f, int m1, int m2)
{
    struct pool_opts o = f->opts;
    struct topo_rec bt;
    struct pool_stats st;
    struct pool *b;
    char rk[32];
    int s;

    memset(&bt, 0, sizeof(bt));
    o.cluster_refresh_ms = 200;
    o.topology_arg = &bt;
    b = cfx_new_pool(f, &o);
    key_on(f, m1, "quiet", rk, sizeof(rk));
    s = pool_slot(rk, strlen(rk));
    rcluster_migrate(&f->c, s, m2);
    wait_topo(f, &bt, s);
    pool_get_stats(b, &st);
    ASSERT_EQ(st.moved + st.ask, 0);
    ASSERT_TRUE(st.topology_refreshes >= 2);
    cfx_free_pool(f, b);
}

static void run_migrate(enum sched_io io)
{
    struct cfx f;
    int m1, m2;

    cfx_init(&f, io);
    f.opts.cluster_refresh_ms = 60000; /* only on-demand refreshes here */
    cfx_pool(&f);
    m1 = rcluster_owner(&f.c, 0);
    m2 = rcluster_other_master(&f.c, m1);
    migrate_moved(&f, m1, m2);
    migrate_subscription(&f, m1, m2);
    migrate_ask(&f, m1, m2);
    migrate_periodic(&f, m1, m2);
    cfx_done(&f);
}

static bool no_reply_yet(struct pf_rec *r)
{
    return r->calls == 0;
}

/* TRYAGAIN (a multi-key command while its keys are split by a migration)
 * and CLUSTERDOWN (the owner lost the slot's assignment for a moment):
 * the caller sees neither, only the reply once the cluster is whole. */
static void run_retry(enum sched_io io)
{
    char tag[32], ta[40], tb[40], wk[32];
    const char *mget[] = {"MGET", ta, tb};
    const char *get[] = {"GET", wk};
    int m1, m2, s, w;
    struct pool_stats st;
    struct pf_rec r;
    struct cfx f;
    uint64_t end;

    cfx_init(&f, io);
    cfx_pool(&f);
    m1 = rcluster_owner(&f.c, 0);
    m2 = rcluster_other_master(&f.c, m1);
    key_on(&f, m1, "try", tag, sizeof(tag)); /* a hash tag on m1 */
    snprintf(ta, sizeof(ta), "{%s}a", tag);
    snprintf(tb, sizeof(tb), "{%s}b", tag);
    s = pool_slot(ta, strlen(ta));
    ASSERT_EQ(pool_slot(tb, strlen(tb)), s);
    cfx_set(&f, ta, "A");
    cfx_set(&f, tb, "B");
    rcluster_migrate_begin(&f.c, s, m1, m2);
    rcluster_migrate_key(&f.c, m1, m2, tb);
    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command(f.pool, 0, 3, mget, NULL, pf_rec_cb, &r));
    lf_run_for(f.loop, 300);
    ASSERT_TRUE(no_reply_yet(&r));
    st = cfx_stats(&f);
    ASSERT_TRUE(st.tryagain >= 1);
    rcluster_migrate_key(&f.c, m1, m2, ta);
    rcluster_migrate_finish(&f.c, s, m1, m2);
    ASSERT_TRUE(lf_run_until(f.loop, pf_rec_done, &r, 5000));
    ASSERT_EQ(r.err, 0);
    ASSERT_EQ(r.type, POOL_REPLY_ARRAY);
    ASSERT_EQ(r.elements, 2);
    /* CLUSTERDOWN */
    key_on(&f, m1, "down", wk, sizeof(wk));
    w = pool_slot(wk, strlen(wk));
    cfx_set(&f, wk, "W");
    rcluster_ok(&f.c, m1, "CLUSTER DELSLOTS %d", w);
    end = clock_mono_ms() + 5000;
    while (rcluster_int(&f.c, m1, "EXISTS %s", wk) != -1 && clock_mono_ms() < end)
        usleep(10000); /* until m1 answers CLUSTERDOWN */
    memset(&r, 0, sizeof(r));
    ASSERT_OK(pool_command(f.pool, 0, 2, get, NULL, pf_rec_cb, &r));
    lf_run_for(f.loop, 300);
    ASSERT_TRUE(no_reply_yet(&r));
    ASSERT_TRUE(cfx_stats(&f).tryagain > st.tryagain);
    rcluster_ok(&f.c, m1, "CLUSTER ADDSLOTS %d", w);
    ASSERT_TRUE(lf_run_until(f.loop, pf_rec_done, &r, 5000));
    ASSERT_EQ(r.err, 0);
    ASSERT_STREQ(r.str, "W");
    cfx_done(&f);
}

/* CLUSTER FAILOVER: the subscription moves to the promoted replica (LOST,
 * READY), on_topology reports the shard's slots, scripts work there (its
 * connections loaded them), and a SCRIPT FLUSH on one node costs one
 * NOSCRIPT retry there only. */
static void run_failover(enum sched_io io)
{
    char fch[32], k1[32], k2[32];
    const char *e1[] = {k1, "1"}, *e2[] = {k2, "1"};
    struct pool_node_stats ns;
    struct pool_stats st;
    int m1, r, m2, s;
    struct pf_lsn l;
    struct cfx f;

    memset(&l, 0, sizeof(l));
    cfx_init(&f, io);
    cfx_pool(&f);
    m1 = rcluster_owner(&f.c, 0);
    m2 = rcluster_other_master(&f.c, m1);
    r = rcluster_replica_of(&f.c, m1);
    ASSERT_TRUE(r >= 0);
    key_on(&f, m1, "fch", fch, sizeof(fch));
    key_on(&f, m1, "fk", k1, sizeof(k1));
    key_on(&f, m2, "fk", k2, sizeof(k2));
    s = pool_slot(k1, strlen(k1));
    ASSERT_OK(pool_sub_start(f.pool, &l.sub, fch, strlen(fch), pf_lsn_cb));
    pf_wait_lsn(f.loop, &l, 1, 0, 0, 5000);
    ASSERT_EQ(cfx_eval(&f, 1, 1, 2, e1).integer, 1);
    rcluster_ok(&f.c, r, "SCRIPT FLUSH");
    rcluster_failover(&f.c, r);
    pf_wait_lsn(f.loop, &l, 2, 1, 0, 10000);
    wait_topo(&f, &f.topo, s);
    ASSERT_TRUE(f.topo.last_nchanged > 0);
    ASSERT_EQ(numsub(&f, r, fch, true), 1);
    ASSERT_EQ(rcluster_int(&f.c, r, "SPUBLISH %s promoted", fch), 1);
    pf_wait_lsn(f.loop, &l, 2, 1, 1, 5000);
    ASSERT_EQ(cfx_eval(&f, 1, 1, 2, e1).integer, 2);
    st = cfx_stats(&f);
    ASSERT_EQ(st.noscript_retries, 0);
    ASSERT_TRUE(node_stats_of(&f, r, &ns));
    ASSERT_STREQ(ns.role, "master");
    ASSERT_TRUE(ns.slots > 0);
    /* NOSCRIPT on one node only */
    rcluster_ok(&f.c, r, "SCRIPT FLUSH");
    ASSERT_EQ(cfx_eval(&f, 1, 1, 2, e1).integer, 3);
    ASSERT_EQ(cfx_stats(&f).noscript_retries, 1);
    ASSERT_EQ(cfx_eval(&f, 1, 1, 2, e2).integer, 1);
    ASSERT_EQ(cfx_stats(&f).noscript_retries, 1);
    ASSERT_TRUE(pool_all_up(f.pool));
    cfx_done(&f);
}

struct kill_wait {
    struct pf_lsn *l; /* the listener */
    struct cfx *f;    /* for the pool */
};

static bool kill_recovered(void *arg)
{
    struct kill_wait *w = arg;

    return w->l->ready >= 2 && pool_all_up(w->f->pool);
}

/* kill -9 a master: a request it had received but not answered gets
 * -ECONNRESET (it may have run: never re-sent, not even to the promoted
 * replica), its listener hears LOST at once and READY from the promoted
 * replica once the cluster has failed over (found by the pool's own
 * refreshes), and requests for its slots work again. */
static void run_kill(enum sched_io io)
{
    char kch[32], k1[32];
    const char *e1[] = {k1, "1"};
    const char *incr[] = {"INCR", k1};
    struct kill_wait w;
    struct pf_rec inflight;
    int m1, r, s;
    struct pf_lsn l;
    struct cfx f;

    memset(&l, 0, sizeof(l));
    cfx_init(&f, io);
    cfx_pool(&f);
    m1 = rcluster_owner(&f.c, 0);
    r = rcluster_replica_of(&f.c, m1);
    key_on(&f, m1, "kch", kch, sizeof(kch));
    key_on(&f, m1, "kk", k1, sizeof(k1));
    s = pool_slot(k1, strlen(k1));
    ASSERT_OK(pool_sub_start(f.pool, &l.sub, kch, strlen(kch), pf_lsn_cb));
    pf_wait_lsn(f.loop, &l, 1, 0, 0, 5000);
    ASSERT_EQ(cfx_eval(&f, 1, 1, 2, e1).integer, 1);
    memset(&inflight, 0, sizeof(inflight));
    predis_signal(&f.c.node[m1], SIGSTOP);
    ASSERT_OK(pool_command(f.pool, 0, 2, incr, NULL, pf_rec_cb, &inflight));
    lf_run_for(f.loop, 50);
    ASSERT_EQ(inflight.calls, 0);
    predis_kill(&f.c.node[m1]);
    pf_wait_lsn(f.loop, &l, 1, 1, 0, 3000);
    ASSERT_EQ(inflight.calls, 1);
    ASSERT_EQ(inflight.err, -ECONNRESET);
    w.l = &l;
    w.f = &f;
    if (!lf_run_until(f.loop, kill_recovered, &w, 20000))
        TEST_FAIL("no recovery after the kill: ready %d lost %d, state %s", l.ready, l.lost,
                  cfx_stats(&f).state);
    ASSERT_EQ(l.order_bad, 0);
    rcluster_wait_owner(&f.c, s, r);
    ASSERT_TRUE(topo_has(&f.topo, s));
    ASSERT_EQ(numsub(&f, r, kch, true), 1);
    ASSERT_TRUE(cfx_eval(&f, 1, 1, 2, e1).integer >= 1); /* the first write may be lost */
    cfx_done(&f);
}

/* ---- cases: every scenario on both backends --------------------------------- */

TEST(cluster_routing_epoll)
{
    run_routing(SCHED_IO_EPOLL);
}
TEST(cluster_routing_uring)
{
    run_routing(SCHED_IO_URING);
}
TEST(cluster_pubsub_epoll)
{
    run_pubsub(SCHED_IO_EPOLL);
}
TEST(cluster_pubsub_uring)
{
    run_pubsub(SCHED_IO_URING);
}
TEST(cluster_migrate_epoll)
{
    run_migrate(SCHED_IO_EPOLL);
}
TEST(cluster_migrate_uring)
{
    run_migrate(SCHED_IO_URING);
}
TEST(cluster_retry_epoll)
{
    run_retry(SCHED_IO_EPOLL);
}
TEST(cluster_retry_uring)
{
    run_retry(SCHED_IO_URING);
}
TEST(cluster_failover_epoll)
{
    run_failover(SCHED_IO_EPOLL);
}
TEST(cluster_failover_uring)
{
    run_failover(SCHED_IO_URING);
}
TEST(cluster_kill_master_epoll)
{
    run_kill(SCHED_IO_EPOLL);
}
TEST(cluster_kill_master_uring)
{
    run_kill(SCHED_IO_URING);
}

TEST_MAIN(TEST_CASE(cluster_routing_epoll), TEST_CASE(cluster_routing_uring),
          TEST_CASE(cluster_pubsub_epoll), TEST_CASE(cluster_pubsub_uring),
          TEST_CASE(cluster_migrate_epoll), TEST_CASE(cluster_migrate_uring),
          TEST_CASE(cluster_retry_epoll), TEST_CASE(cluster_retry_uring),
          TEST_CASE(cluster_failover_epoll), TEST_CASE(cluster_failover_uring),
          TEST_CASE(cluster_kill_master_epoll), TEST_CASE(cluster_kill_master_uring))
