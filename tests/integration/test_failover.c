/* Releases across failovers (issue 22): no name a client released stays
 * held on the new master.
 *
 * A fleet of clients locks and releases 50 names through the proxy every
 * few ms (LOCK, FAIRLOCK and WLOCK; three cycles in four with a one-off OWNER
 * token, so a ghost is never merged into its owner's next hold) while the
 * test switches the master: `SENTINEL FAILOVER` and `kill -9` of the
 * master on a Sentinel setup (1 master, 2 replicas, 3 sentinels), `CLUSTER
 * FAILOVER` on a replica and a killed master on a 3+3 Redis Cluster. A
 * scanner reads every name on its current master, straight from Redis,
 * every few ms: a name whose hash is there while no client holds it or is
 * acquiring it (the same "free" generation before and after the read) is
 * a ghost hold. The test fails if one outlives the proxy's retry bound,
 * counted from the later of its release and the moment the proxy followed
 * the switch (topology_changes_seen went up), or if any name is still
 * held once the fleet stopped. The default cases switch twice; the long_
 * ones count over 20 switches and print the figures RELIABILITY.md
 * quotes (ghosts seen, longest held after release, releases replayed).
 *
 * failover_sentinel_window aims at the window itself: SENTINEL FAILOVER
 * promotes the replica about 0.9 s before the sentinels (and so the
 * proxy) name it, and the old master keeps taking writes meanwhile; the
 * test releases 20 replicated holds inside that window, checks the new
 * master kept them (ghosts), and that the proxy removes them once it
 * follows the switch, long before their 30 s lease. The other single
 * switch cases: releases still in flight to a frozen old master when the
 * proxy switches (window_in_flight), UNLOCKs the proxy carries out while
 * a killed master is not yet replaced (unlock_in_hand), and releases a
 * killed Cluster master never replicated (cluster_ghost_release). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "harness.h"
#include "pool/pool.h"
#include "proxy_util.h"
#include "sentinel_util.h"

#define FO_NAMES   50
#define FO_WORKERS 8
/* The proxy's retry bound: a re-applied release is re-sent with back-off
 * up to 1 s (engine/jobs.c); one more second for a busy 2-core box. */
#define FO_BOUND_MS 2000
#define FO_PORTS    8 /* scanner connections (one per node) */

/* ---- the fleet: workers and the scanner ------------------------------------------ */

/* How a cycle ended, for the ghost log. */
enum fo_end { FO_RELEASED, FO_BUSY, FO_LOCK_UPSTREAM, FO_UNLOCK_UPSTREAM, FO_LOST, FO_BAD };
static const char *const fo_ends[] = {
    "released", "busy", "LOCK -UPSTREAM", "UNLOCK -UPSTREAM", "UNLOCK -LOCKLOST", "bad reply"};

struct fo_name {
    pthread_mutex_t mu;
    int busy;           /* workers acquiring or holding it (under mu) */
    unsigned gen;       /* bumped each time busy falls to 0 (under mu) */
    long long t_free;   /* when busy last fell to 0 (under mu) */
    atomic_int port;    /* its current master, set by the main thread */
    atomic_int last;    /* how its last cycle ended: enum fo_end */
    unsigned ghost_gen; /* scanner only: the last free generation seen held */
    bool ghost;         /* scanner only: ghost_gen counted */
};

struct fo {
    int proxy;                      /* the proxy's port */
    struct fo_name names[FO_NAMES]; /* fo:0 ... fo:49 */
    atomic_int stop;
    atomic_llong cycles;          /* LOCK answered +OK and released */
    atomic_llong busy_refusals;   /* LOCK WAIT 0 answered nil */
    atomic_llong lock_upstream;   /* LOCK answered -UPSTREAM */
    atomic_llong unlock_upstream; /* UNLOCK answered -UPSTREAM (not in hand) */
    atomic_llong lost;            /* UNLOCK answered -LOCKLOST */
    atomic_llong bad;             /* any other answer */
    pthread_mutex_t mu;           /* first_bad, the scanner's figures */
    char first_bad[256];
    /* scanner */
    long long t_switch;      /* when topology_changes_seen last went up */
    long long switches_seen; /* its last value */
    long long scans;         /* rounds over the 50 names */
    long long ghosts;        /* distinct (name, free generation) seen held */
    long long max_held;      /* longest a released name was seen held, ms */
    long long max_after;     /* the same from the proxy's switch, ms */
    long long ghosts_rel;    /* of ghosts, names whose last cycle was a release */
    long long max_rel;       /* max_held of those */
    char worst[128];         /* the name and figures of max_after */
};

struct fo_worker {
    struct fo *f;
    int id;
};

static void fo_bad(struct fo *f, const char *what, const redisReply *r)
{
    char got[200];

    atomic_fetch_add(&f->bad, 1);
    pthread_mutex_lock(&f->mu);
    if (!f->first_bad[0])
        snprintf(f->first_bad, sizeof(f->first_bad), "%s: %s", what,
                 r ? pu_describe(r, got, sizeof(got)) : "connection lost");
    pthread_mutex_unlock(&f->mu);
}

static void fo_enter(struct fo_name *n)
{
    pthread_mutex_lock(&n->mu);
    n->busy++;
    pthread_mutex_unlock(&n->mu);
}

static void fo_leave(struct fo_name *n)
{
    pthread_mutex_lock(&n->mu);
    if (--n->busy == 0) {
        n->gen++;
        n->t_free = pu_now_ms();
    }
    pthread_mutex_unlock(&n->mu);
}

/* The kind of fo:i: 0..29 LOCK, 30..39 FAIRLOCK, 40..49 WLOCK. */
static void fo_cmds(int i, const char **lock, const char **unlock)
{
    *lock = i < 30 ? "LOCK" : i < 40 ? "FAIRLOCK" : "WLOCK";
    *unlock = i < 30 ? "UNLOCK" : i < 40 ? "FAIRUNLOCK" : "WUNLOCK";
}

/* One cycle on fo:i: acquire (one attempt), hold 5-15 ms, release; three
 * cycles in four with a token of their own (OWNER), the fourth as the
 * connection. */
static bool fo_cycle(struct fo *f, redisContext *c, int id, unsigned *seed, long long n)
{
    int i = (int)(rand_r(seed) % FO_NAMES);
    const char *lock, *unlock;
    char owner[48];
    redisReply *r;
    bool ok = true;
    enum fo_end end = FO_BAD;

    fo_cmds(i, &lock, &unlock);
    snprintf(owner, sizeof(owner), "w%d-%lld", id, n);
    fo_enter(&f->names[i]);
    r = n % 4 ? redisCommand(c, "%s fo:%d WAIT 0 OWNER %s", lock, i, owner)
              : redisCommand(c, "%s fo:%d WAIT 0", lock, i);
    if (!r) {
        fo_bad(f, lock, NULL);
        ok = false;
    } else if (r->type == REDIS_REPLY_STATUS) {
        freeReplyObject(r);
        usleep(5000 + rand_r(seed) % 10000);
        r = n % 4 ? redisCommand(c, "%s fo:%d OWNER %s", unlock, i, owner)
                  : redisCommand(c, "%s fo:%d", unlock, i);
        if (!r) {
            fo_bad(f, unlock, NULL);
            ok = false;
        } else if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
            atomic_fetch_add(&f->cycles, 1);
            end = FO_RELEASED;
        } else if (pu_is_err(r, "LOCKLOST")) {
            atomic_fetch_add(&f->lost, 1);
            end = FO_LOST;
        } else if (pu_is_err(r, "UPSTREAM")) {
            atomic_fetch_add(&f->unlock_upstream, 1);
            end = FO_UNLOCK_UPSTREAM;
        } else
            fo_bad(f, unlock, r);
    } else if (r->type == REDIS_REPLY_NIL) {
        atomic_fetch_add(&f->busy_refusals, 1);
        end = FO_BUSY;
    } else if (pu_is_err(r, "UPSTREAM")) {
        atomic_fetch_add(&f->lock_upstream, 1);
        end = FO_LOCK_UPSTREAM;
    } else
        fo_bad(f, lock, r);
    if (r)
        freeReplyObject(r);
    atomic_store(&f->names[i].last, (int)end);
    fo_leave(&f->names[i]);
    return ok;
}

static void *fo_worker_main(void *arg)
{
    struct fo_worker *me = arg;
    struct fo *f = me->f;
    redisContext *c = pu_try_connect(f->proxy);
    unsigned seed = 7919u * (unsigned)(me->id + 1);
    long long n = 0;

    if (!c) {
        fo_bad(f, "connect", NULL);
        return NULL;
    }
    while (!atomic_load(&f->stop) && fo_cycle(f, c, me->id, &seed, n++))
        usleep(1000 + rand_r(&seed) % 2000);
    redisFree(c);
    return NULL;
}

/* A connection to the node on port, kept in ctx[] (index by slot). */
static redisContext *fo_node(redisContext *ctx[FO_PORTS], int ports[FO_PORTS], int port)
{
    struct timeval tv = {0, 500000};
    int k, empty = -1;

    for (k = 0; k < FO_PORTS; k++) {
        if (ports[k] == port && ctx[k])
            return ctx[k];
        if (!ctx[k] && empty < 0)
            empty = k;
    }
    if (empty < 0)
        return NULL;
    ctx[empty] = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!ctx[empty] || ctx[empty]->err) {
        if (ctx[empty])
            redisFree(ctx[empty]);
        ctx[empty] = NULL;
        return NULL;
    }
    redisSetTimeout(ctx[empty], tv);
    ports[empty] = port;
    return ctx[empty];
}

static void fo_node_drop(redisContext *ctx[FO_PORTS], int ports[FO_PORTS], int port)
{
    int k;

    for (k = 0; k < FO_PORTS; k++) {
        if (ports[k] == port && ctx[k]) {
            redisFree(ctx[k]);
            ctx[k] = NULL;
        }
    }
}

/* The proxy's topology_changes_seen, or -1. */
static long long fo_switches(redisContext *px)
{
    redisReply *r = redisCommand(px, "INFO");
    const char *p;
    long long v = -1;

    if (r && r->type == REDIS_REPLY_STRING && (p = strstr(r->str, "topology_changes_seen:")))
        v = atoll(p + strlen("topology_changes_seen:"));
    if (r)
        freeReplyObject(r);
    return v;
}

/* EXISTS fo:i on its master; a free name held is a ghost, timed. */
static void fo_scan_one(struct fo *f, int i, redisContext *ctx[FO_PORTS], int ports[FO_PORTS])
{
    struct fo_name *n = &f->names[i];
    int port = atomic_load(&n->port);
    redisContext *c = fo_node(ctx, ports, port);
    unsigned gen;
    long long t_free, t0, held, after;
    redisReply *r;
    bool free1, exists, released;
    int end;

    if (!c)
        return;
    pthread_mutex_lock(&n->mu);
    free1 = n->busy == 0;
    gen = n->gen;
    t_free = n->t_free;
    pthread_mutex_unlock(&n->mu);
    if (!free1)
        return;
    t0 = pu_now_ms();
    r = redisCommand(c, "EXISTS fo:%d", i);
    if (!r) {
        fo_node_drop(ctx, ports, port);
        return;
    }
    exists = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    pthread_mutex_lock(&n->mu);
    free1 = free1 && n->busy == 0 && n->gen == gen;
    pthread_mutex_unlock(&n->mu);
    if (!free1 || !exists || t_free == 0)
        return;
    end = atomic_load(&n->last);
    released = end == FO_RELEASED || end == FO_LOST || end == FO_UNLOCK_UPSTREAM;
    held = t0 - t_free;
    after = t0 - (t_free > f->t_switch ? t_free : f->t_switch);
    pthread_mutex_lock(&f->mu);
    if (!n->ghost || n->ghost_gen != gen) {
        n->ghost = true;
        n->ghost_gen = gen;
        f->ghosts++;
        if (released)
            f->ghosts_rel++;
        if (f->ghosts <= 10)
            fprintf(stderr,
                    "ghost: fo:%d on :%d, free for %lld ms (%lld after the proxy's "
                    "switch), its last cycle: %s\n",
                    i, port, held, after, fo_ends[atomic_load(&n->last)]);
    }
    if (held > f->max_held)
        f->max_held = held;
    if (released && held > f->max_rel)
        f->max_rel = held;
    if (after > f->max_after) {
        f->max_after = after;
        snprintf(f->worst, sizeof(f->worst), "fo:%d on :%d, %lld ms after its release", i, port,
                 held);
    }
    pthread_mutex_unlock(&f->mu);
}

static void *fo_scanner_main(void *arg)
{
    struct fo *f = arg;
    redisContext *ctx[FO_PORTS] = {0}, *px = pu_try_connect(f->proxy);
    int ports[FO_PORTS] = {0}, i, k;

    if (!px) {
        fo_bad(f, "scanner connect", NULL);
        return NULL;
    }
    while (!atomic_load(&f->stop)) {
        long long sw = fo_switches(px);

        pthread_mutex_lock(&f->mu);
        if (sw > f->switches_seen) {
            f->switches_seen = sw;
            f->t_switch = pu_now_ms();
        }
        f->scans++;
        pthread_mutex_unlock(&f->mu);
        for (i = 0; i < FO_NAMES; i++)
            fo_scan_one(f, i, ctx, ports);
        usleep(5000);
    }
    for (k = 0; k < FO_PORTS; k++)
        if (ctx[k])
            redisFree(ctx[k]);
    redisFree(px);
    return NULL;
}

struct fo_run {
    struct fo f;
    struct fo_worker ws[FO_WORKERS];
    pthread_t th[FO_WORKERS], scanner;
};

static void fo_start(struct fo_run *run, int proxy_port)
{
    struct fo *f = &run->f;
    int i;

    memset(run, 0, sizeof(*run));
    f->proxy = proxy_port;
    pthread_mutex_init(&f->mu, NULL);
    for (i = 0; i < FO_NAMES; i++)
        pthread_mutex_init(&f->names[i].mu, NULL);
}

/* Starts the threads once every name's port is set. */
static void fo_go(struct fo_run *run)
{
    struct fo *f = &run->f;
    int i;

    f->switches_seen = -1;
    for (i = 0; i < FO_WORKERS; i++) {
        run->ws[i].f = f;
        run->ws[i].id = i;
        ASSERT_TRUE(pthread_create(&run->th[i], NULL, fo_worker_main, &run->ws[i]) == 0);
    }
    ASSERT_TRUE(pthread_create(&run->scanner, NULL, fo_scanner_main, f) == 0);
    PU_EVENTUALLY(atomic_load(&f->cycles) >= 200, 15000);
}

/* Waits until the fleet did n more cycles (the proxy serves again). */
static void fo_progress(struct fo *f, long long n, int ms)
{
    long long base = atomic_load(&f->cycles);

    PU_EVENTUALLY(atomic_load(&f->cycles) >= base + n, ms);
}

/* Stops the workers, lets the scanner watch the names go free for the
 * retry bound, stops it, and fails on a ghost past the bound, on a name
 * still held, or on an answer no failover explains. */
static void fo_finish(struct fo_run *run, redisContext *px, const char *setup, int switches,
                      bool print)
{
    struct fo *f = &run->f;
    long long replayed, removed, in_hand;
    int i;

    atomic_store(&f->stop, 1);
    for (i = 0; i < FO_WORKERS; i++)
        pthread_join(run->th[i], NULL);
    atomic_store(&f->stop, 0);
    pu_sleep_ms(FO_BOUND_MS + 500); /* the scanner still runs */
    atomic_store(&f->stop, 1);
    pthread_join(run->scanner, NULL);
    replayed = pu_info_int(px, "releases_replayed");
    removed = pu_info_int(px, "ghost_holds_removed");
    in_hand = pu_info_int(px, "unlocks_in_hand");
    fprintf(stderr,
            "%s%s: %d switches (proxy saw %lld), %lld cycles, %lld busy, LOCK UPSTREAM %lld, "
            "UNLOCK UPSTREAM %lld, LOCKLOST %lld; scans %lld; names held while free %lld (of which "
            "after a release %lld, held at most %lld ms; the others after a LOCK answered "
            "UPSTREAM), max held %lld ms, max after the proxy's switch %lld ms (%s); "
            "releases_replayed %lld, ghost_holds_removed %lld, unlocks_in_hand %lld\n",
            print ? "FIGURES " : "", setup, switches, f->switches_seen, atomic_load(&f->cycles),
            atomic_load(&f->busy_refusals), atomic_load(&f->lock_upstream),
            atomic_load(&f->unlock_upstream), atomic_load(&f->lost), f->scans, f->ghosts,
            f->ghosts_rel, f->max_rel, f->max_held, f->max_after, f->worst[0] ? f->worst : "-",
            replayed, removed, in_hand);
    if (atomic_load(&f->bad))
        TEST_FAIL("%lld unexpected replies, the first: %s", atomic_load(&f->bad), f->first_bad);
    if (f->max_after > FO_BOUND_MS)
        TEST_FAIL("a released name stayed held %lld ms after the proxy followed the switch "
                  "(bound %d ms): %s",
                  f->max_after, FO_BOUND_MS, f->worst);
    for (i = 0; i < FO_NAMES; i++)
        pthread_mutex_destroy(&f->names[i].mu);
    pthread_mutex_destroy(&f->mu);
}

static void fo_set_port(struct fo *f, int i, int port)
{
    atomic_store(&f->names[i].port, port);
}

/* ---- Sentinel ------------------------------------------------------------------------ */

static void fo_sentinel_proxy(struct rsentinel *s, struct pu_proxy *p)
{
    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rsentinel_start(s, NULL, NULL);
    rsentinel_wait_master(s, -1);
    memset(p, 0, sizeof(*p));
    snprintf(p->upstream, sizeof(p->upstream), "redis-sentinel://%s/%s", s->list, RSENT_NAME);
    p->extra[0] = "--log-level";
    p->extra[1] = "info";
    p->extra[2] = NULL;
    pu_proxy_start(p);
}

static bool fo_proxy_on(redisContext *px, const struct rsentinel *s, int m)
{
    char want[32], got[64];

    rsentinel_node_addr(s, m, want, sizeof(want));
    return pu_info_str(px, "sentinel_master", got, sizeof(got)) && strcmp(got, want) == 0;
}

/* Data node i replicates the master on port mport, its link up. */
static bool fo_linked_to(const struct rsentinel *s, int i, int mport)
{
    redisReply *r = rsentinel_cmd(s, i, "INFO replication");
    char want[40];
    bool ok;

    snprintf(want, sizeof(want), "master_port:%d\r", mport);
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up") &&
         strstr(r->str, want);
    if (r)
        freeReplyObject(r);
    return ok;
}

/* The restarted node i replicates the master the sentinels agree on now
 * (*m), its link up (or is that master). */
static bool fo_rejoined(const struct rsentinel *s, int i, int *m)
{
    int cur = rsentinel_try_wait_master(s, -1, 2000);

    if (cur < 0)
        return false;
    *m = cur;
    return cur == i || fo_linked_to(s, i, s->node[cur].port); /* promoted again: fine too */
}

/* A SENTINEL FAILOVER (retried while the sentinels refuse it) or a kill
 * -9 of the master (restarted afterwards as a replica); the new master. */
static int fo_sentinel_switch(struct rsentinel *s, int m, bool kill)
{
    int nm = -1, tries;

    if (kill) {
        nm = rsentinel_kill_master(s);
        return nm;
    }
    for (tries = 0; nm < 0 && tries < 10; tries++) {
        nm = rsentinel_try_failover(s, 15000);
        if (nm < 0)
            pu_sleep_ms(1000);
    }
    if (nm < 0)
        TEST_FAIL("no failover away from node %d after %d tries", m, tries);
    return nm;
}

/* Fails if a name is still held on master m after the retry bound,
 * saying what Redis has of it. */
static void fo_sentinel_left(const struct rsentinel *s, int m)
{
    long long end = pu_now_ms() + FO_BOUND_MS;
    int i;

    for (i = 0; i < FO_NAMES; i++) {
        redisReply *r;
        char d[300];

        while (rsentinel_int(s, m, "EXISTS fo:%d", i) != 0 && pu_now_ms() < end)
            pu_sleep_ms(20);
        if (rsentinel_int(s, m, "EXISTS fo:%d", i) == 0)
            continue;
        r = rsentinel_cmd(s, m, "HGETALL fo:%d", i);
        fprintf(stderr, "fo:%d still held on node %d: %s, pttl %lld\n", i, m,
                r ? pu_describe(r, d, sizeof(d)) : "?", rsentinel_int(s, m, "PTTL fo:%d", i));
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 2)
            fprintf(stderr, "  field %s = %s\n", r->element[0]->str, r->element[1]->str);
        if (r)
            freeReplyObject(r);
        TEST_FAIL("fo:%d still held on the master once the fleet stopped", i);
    }
}

static void fo_sentinel_run(int switches, bool print)
{
    struct rsentinel s;
    struct pu_proxy p;
    struct fo_run *run = calloc(1, sizeof(*run));
    redisContext *px;
    char setup[96];
    int m, i, k;

    ASSERT_TRUE(run != NULL);
    fo_sentinel_proxy(&s, &p);
    m = rsentinel_wait_master(&s, -1);
    px = pu_connect(p.port);
    fo_start(run, p.port);
    for (i = 0; i < FO_NAMES; i++)
        fo_set_port(&run->f, i, s.node[m].port);
    fo_go(run);
    for (k = 0; k < switches; k++) {
        bool kill = k % 2 == 1;
        int old = rsentinel_wait_master(&s, -1);

        m = fo_sentinel_switch(&s, old, kill);
        for (i = 0; i < FO_NAMES; i++)
            fo_set_port(&run->f, i, s.node[m].port);
        PU_EVENTUALLY(fo_proxy_on(px, &s, m), 20000);
        fo_progress(&run->f, 100, 20000);
        pu_sleep_ms(1000);
        if (kill) { /* back as a replica, so the next switch has two */
            rsentinel_start_node(&s, old);
            /* the sentinels may switch again meanwhile, by themselves */
            PU_EVENTUALLY(fo_rejoined(&s, old, &m), 30000);
            for (i = 0; i < FO_NAMES; i++)
                fo_set_port(&run->f, i, s.node[m].port);
        }
        fprintf(stderr, "switch %d (%s): node %d -> %d\n", k + 1,
                kill ? "kill -9" : "SENTINEL FAILOVER", old, m);
    }
    snprintf(setup, sizeof(setup), "sentinel (1 master, 2 replicas, 3 sentinels)");
    fo_finish(run, px, setup, switches, print);
    /* nothing left held on the master the sentinels name now (they may
     * have switched again by themselves: the proxy follows first) */
    m = rsentinel_wait_master(&s, -1);
    PU_EVENTUALLY(fo_proxy_on(px, &s, m), 20000);
    fo_sentinel_left(&s, m);
    redisFree(px);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
    free(run);
}

/* One SENTINEL FAILOVER and one kill -9 of the master. */
TEST(failover_sentinel)
{
    fo_sentinel_run(2, false);
}

/* 22 switches, alternating; prints the figures. */
TEST(long_failover_sentinel)
{
    fo_sentinel_run(22, true);
}

/* Releases sent inside the window between the promotion of the replica
 * and the sentinels naming it: the old master applies them (:1), the new
 * one keeps the holds; the proxy re-applies them once it follows. */
TEST(failover_sentinel_window)
{
    enum { NN = 20 };
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *o, *px;
    long long t_promoted, t_unlocked, t_switch, t_free;
    int m, nm = -1, i, k, ghosts = 0;

    fo_sentinel_proxy(&s, &p);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    o = pu_connect(p.port);
    px = pu_connect(p.port);
    for (i = 0; i < NN; i++)
        PU_OK(c, "%s win:%d", i % 2 ? "LOCK" : "WLOCK", i);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    freeReplyObject(rsentinel_scmd(&s, 0, "SENTINEL FAILOVER %s", RSENT_NAME));
    t_promoted = pu_now_ms() + 10000;
    while (nm < 0 && pu_now_ms() < t_promoted) {
        for (k = 0; k < RSENT_NODES; k++)
            if (k != m && rsentinel_is_master(&s, k))
                nm = k;
        if (nm < 0)
            usleep(1000);
    }
    ASSERT_TRUE(nm >= 0);
    t_promoted = pu_now_ms();
    /* The proxy still uses the old master: the releases land there. */
    ASSERT_TRUE(fo_proxy_on(px, &s, m));
    for (i = 0; i < NN; i++)
        PU_INT(c, 1, "%s win:%d", i % 2 ? "UNLOCK" : "WUNLOCK", i);
    t_unlocked = pu_now_ms();
    ASSERT_TRUE(fo_proxy_on(px, &s, m));
    for (i = 0; i < NN; i++)
        ghosts += rsentinel_int(&s, nm, "EXISTS win:%d", i) == 1;
    fprintf(stderr, "promoted %lld ms ago; %d of %d released holds still on the new master\n",
            t_unlocked - t_promoted, ghosts, NN);
    ASSERT_TRUE(ghosts > 0); /* the window was hit */
    ASSERT_EQ(rsentinel_wait_master(&s, m), nm);
    PU_EVENTUALLY(fo_proxy_on(px, &s, nm), 20000);
    t_switch = pu_now_ms();
    PU_EVENTUALLY(rsentinel_int(&s, nm, "DBSIZE") == 0, FO_BOUND_MS);
    t_free = pu_now_ms();
    fprintf(stderr,
            "all free %lld ms after the proxy followed the switch (%lld after the "
            "releases)\n",
            t_free - t_switch, t_free - t_unlocked);
    ASSERT_TRUE(pu_info_int(px, "ghost_holds_removed") >= ghosts);
    for (i = 0; i < NN; i++) {
        PU_OK(o, "%s win:%d WAIT 2000", i % 2 ? "LOCK" : "WLOCK", i);
        PU_INT(o, 1, "%s win:%d", i % 2 ? "UNLOCK" : "WUNLOCK", i);
    }
    redisFree(px);
    redisFree(o);
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* The same window, the releases in flight when the proxy follows the
 * switch: the old master is frozen (DEBUG SLEEP) right after the
 * promotion, the UNLOCKs queue on it, the sentinels name the new master
 * meanwhile, and the old master applies them (:1) only after it wakes.
 * Those releases must be re-applied on the new master too. */
TEST(failover_sentinel_window_in_flight)
{
    enum { NN = 10 };
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *px, *frozen;
    long long t_switch, t_replied, t_free, deadline;
    int m, nm = -1, i, k;

    fo_sentinel_proxy(&s, &p);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    px = pu_connect(p.port);
    frozen = redisConnect("127.0.0.1", s.node[m].port);
    ASSERT_TRUE(frozen && !frozen->err);
    for (i = 0; i < NN; i++)
        PU_OK(c, "LOCK inflight:%d OWNER t%d", i, i);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    freeReplyObject(rsentinel_scmd(&s, 0, "SENTINEL FAILOVER %s", RSENT_NAME));
    deadline = pu_now_ms() + 10000;
    while (nm < 0 && pu_now_ms() < deadline) {
        for (k = 0; k < RSENT_NODES; k++)
            if (k != m && rsentinel_is_master(&s, k))
                nm = k;
        if (nm < 0)
            usleep(1000);
    }
    ASSERT_TRUE(nm >= 0);
    ASSERT_TRUE(fo_proxy_on(px, &s, m));
    pu_send(frozen, "DEBUG SLEEP 2.5");
    pu_sleep_ms(50);
    for (i = 0; i < NN; i++)
        pu_send(c, "UNLOCK inflight:%d OWNER t%d", i, i);
    ASSERT_EQ(rsentinel_wait_master(&s, m), nm);
    PU_EVENTUALLY(fo_proxy_on(px, &s, nm), 20000);
    t_switch = pu_now_ms();
    for (i = 0; i < NN; i++) {
        redisReply *r = pu_recv(c);
        char d[200];

        fprintf(stderr, "UNLOCK inflight:%d: %s\n", i, pu_describe(r, d, sizeof(d)));
        freeReplyObject(r);
    }
    t_replied = pu_now_ms();
    fprintf(stderr, "%lld of %d released holds on the new master once the replies came\n",
            (long long)rsentinel_int(&s, nm, "DBSIZE"), NN);
    PU_EVENTUALLY(rsentinel_int(&s, nm, "DBSIZE") == 0, FO_BOUND_MS);
    t_free = pu_now_ms();
    fprintf(stderr,
            "all free %lld ms after the replies (%lld after the proxy followed the "
            "switch)\n",
            t_free - t_replied, t_free - t_switch);
    freeReplyObject(pu_recv(frozen));
    redisFree(frozen);
    redisFree(px);
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* UNLOCKs sent while the master is dead (killed -9, the sentinels not yet
 * agreed): the proxy answers them at once and carries them out itself,
 * retrying with back-off while no master answers. The replicas had the
 * holds; once the proxy follows the switch the releases must land on the
 * new master at once, not at the next back-off step (up to 1 s later). */
TEST(failover_sentinel_unlock_in_hand)
{
    enum { NN = 10 };
    struct rsentinel s;
    struct pu_proxy p;
    redisContext *c, *px;
    long long t_switch, t_free;
    int m, nm, i;

    fo_sentinel_proxy(&s, &p);
    m = rsentinel_wait_master(&s, -1);
    c = pu_connect(p.port);
    px = pu_connect(p.port);
    for (i = 0; i < NN; i++)
        PU_OK(c, "LOCK hand:%d", i);
    ASSERT_EQ(rsentinel_int(&s, m, "WAIT 2 2000"), 2);
    rsentinel_kill_node(&s, m);
    for (i = 0; i < NN; i++)
        PU_INT(c, 1, "UNLOCK hand:%d", i);
    ASSERT_TRUE(pu_info_int(px, "unlocks_in_hand") >= 1);
    nm = rsentinel_wait_master(&s, m);
    PU_EVENTUALLY(fo_proxy_on(px, &s, nm), 20000);
    t_switch = pu_now_ms();
    PU_EVENTUALLY(rsentinel_int(&s, nm, "DBSIZE") == 0, FO_BOUND_MS);
    t_free = pu_now_ms();
    fprintf(stderr, "released on the new master %lld ms after the proxy followed the switch\n",
            t_free - t_switch);
    ASSERT_TRUE(t_free - t_switch < 250);
    redisFree(px);
    redisFree(c);
    pu_proxy_stop(&p);
    rsentinel_cleanup(&s);
}

/* ---- Cluster ------------------------------------------------------------------------- */

static void fo_cluster_ports(struct fo *f, const struct rcluster *c)
{
    char key[16];
    int i;

    for (i = 0; i < FO_NAMES; i++) {
        int len = snprintf(key, sizeof(key), "fo:%d", i);
        int owner = rcluster_owner(c, pool_slot(key, (size_t)len));

        ASSERT_TRUE(owner >= 0);
        fo_set_port(f, i, c->node[owner].port);
    }
}

static void fo_cluster_run(int switches, bool print)
{
    struct rcluster c;
    struct pu_proxy p;
    struct fo_run *run = calloc(1, sizeof(*run));
    redisContext *px;
    char a[32], b[32];
    long long seen;
    int k;

    ASSERT_TRUE(run != NULL);
    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(&c);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&c, 0, a, sizeof(a)), rcluster_addr(&c, 5, b, sizeof(b)));
    p.extra[0] = "--log-level";
    p.extra[1] = "info";
    pu_proxy_start(&p);
    px = pu_connect(p.port);
    PU_EVENTUALLY(pu_info_int(px, "cluster_slots_served") == 16384, 15000);
    fo_start(run, p.port);
    fo_cluster_ports(&run->f, &c);
    fo_go(run);
    for (k = 0; k < switches; k++) {
        bool kill = k % 2 == 1;
        int m = -1, r, i, n = 0;

        /* the k-th master in node order, so every shard takes its turn */
        for (i = 0; i < RCLUSTER_NODES; i++)
            if (rcluster_is_master(&c, i) && n++ == (k / 2) % 3)
                m = i;
        ASSERT_TRUE(m >= 0);
        r = rcluster_replica_of(&c, m);
        ASSERT_TRUE(r >= 0);
        seen = pu_info_int(px, "topology_changes_seen");
        if (kill)
            r = rcluster_kill_master(&c, m);
        else
            rcluster_failover(&c, r);
        fo_cluster_ports(&run->f, &c);
        PU_EVENTUALLY(pu_info_int(px, "topology_changes_seen") > seen, 20000);
        PU_EVENTUALLY(pu_info_int(px, "cluster_slots_served") == 16384, 20000);
        fo_progress(&run->f, 100, 20000);
        pu_sleep_ms(1000);
        if (kill)
            rcluster_restart_replica(&c, m);
        fprintf(stderr, "switch %d (%s): node %d -> %d\n", k + 1,
                kill ? "kill -9" : "CLUSTER FAILOVER", m, r);
    }
    fo_finish(run, px, "cluster (3 masters, 3 replicas)", switches, print);
    for (k = 0; k < FO_NAMES; k++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "fo:%d", k);

        ASSERT_EQ(
            rcluster_int(&c, rcluster_owner(&c, pool_slot(key, (size_t)len)), "EXISTS %s", key), 0);
    }
    redisFree(px);
    pu_proxy_stop(&p);
    rcluster_cleanup(&c);
    free(run);
}

/* Cluster node m has no replica connected. */
static bool fo_no_replica(const struct rcluster *c, int m)
{
    redisReply *r = rcluster_cmd(c, m, "INFO replication");
    bool none = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "connected_slaves:0\r");

    if (r)
        freeReplyObject(r);
    return none;
}

/* How many of the n keys replica r has (READONLY reads). */
static int fo_replica_has(const struct rcluster *c, int r, char key[][16], int n)
{
    redisContext *rc = rcluster_connect(c, r);
    int i, has = 0;

    if (!rc)
        return -1;
    freeReplyObject(redisCommand(rc, "READONLY"));
    for (i = 0; i < n; i++) {
        redisReply *e = redisCommand(rc, "EXISTS %s", key[i]);

        has += e && e->type == REDIS_REPLY_INTEGER && e->integer == 1;
        if (e)
            freeReplyObject(e);
    }
    redisFree(rc);
    return has;
}

/* Releases a killed master applied but never replicated, on a Cluster:
 * the replica is stopped and its link cut before the releases, the master
 * killed after them, the replica resumed and promoted with every hold.
 * The proxy re-applies its releases once it sees the new owner. */
TEST(failover_cluster_ghost_release)
{
    enum { NN = 10 };
    struct rcluster c;
    struct pu_proxy p;
    redisContext *cl, *px;
    char a[32], b[32], key[NN][16];
    long long seen, t_switch, t_free;
    int m, r, i, n = 0, slot = -1, k;

    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(&c);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&c, 0, a, sizeof(a)), rcluster_addr(&c, 5, b, sizeof(b)));
    p.extra[0] = "--log-level";
    p.extra[1] = "info";
    pu_proxy_start(&p);
    px = pu_connect(p.port);
    cl = pu_connect(p.port);
    PU_EVENTUALLY(pu_info_int(px, "cluster_slots_served") == 16384, 15000);
    m = rcluster_owner(&c, pool_slot("cgh:0", 5));
    for (k = 0; n < NN && k < 1000; k++) { /* NN names on master m */
        int len = snprintf(key[n], sizeof(key[n]), "cgh:%d", k);

        if (rcluster_owner(&c, pool_slot(key[n], (size_t)len)) == m) {
            if (slot < 0)
                slot = pool_slot(key[n], (size_t)len);
            n++;
        }
    }
    ASSERT_EQ(n, NN);
    for (i = 0; i < NN; i++)
        PU_OK(cl, "%s %s OWNER t%d", i % 2 ? "LOCK" : "FAIRLOCK", key[i], i);
    r = rcluster_replica_of(&c, m);
    ASSERT_TRUE(r >= 0);
    ASSERT_EQ(rcluster_int(&c, m, "WAIT 1 2000"), 1);
    PU_EVENTUALLY(fo_replica_has(&c, r, key, NN) == NN, 5000);
    predis_signal(&c.node[r], SIGSTOP);
    ASSERT_EQ(rcluster_int(&c, m, "CLIENT KILL TYPE replica"), 1);
    PU_EVENTUALLY(fo_no_replica(&c, m), 5000); /* its link is gone, nothing more reaches it */
    for (i = 0; i < NN; i++)
        PU_INT(cl, 1, "%s %s OWNER t%d", i % 2 ? "UNLOCK" : "FAIRUNLOCK", key[i], i);
    seen = pu_info_int(px, "topology_changes_seen");
    predis_kill(&c.node[m]);
    predis_signal(&c.node[r], SIGCONT);
    n = fo_replica_has(&c, r, key, NN); /* still every hold */
    rcluster_wait_owner(&c, slot, r);
    PU_EVENTUALLY(pu_info_int(px, "topology_changes_seen") > seen, 20000);
    t_switch = pu_now_ms();
    PU_EVENTUALLY(rcluster_int(&c, r, "DBSIZE") == 0, FO_BOUND_MS);
    t_free = pu_now_ms();
    fprintf(stderr,
            "%d of %d released holds on the replica at its promotion; all gone %lld ms after "
            "the proxy followed; ghost_holds_removed %lld\n",
            n, NN, t_free - t_switch, pu_info_int(px, "ghost_holds_removed"));
    ASSERT_EQ(n, NN);
    ASSERT_EQ(pu_info_int(px, "ghost_holds_removed"), NN);
    redisFree(cl);
    redisFree(px);
    pu_proxy_stop(&p);
    rcluster_cleanup(&c);
}

/* One CLUSTER FAILOVER and one killed master. */
TEST(failover_cluster)
{
    fo_cluster_run(2, false);
}

/* 22 switches, alternating, the shards in turn; prints the figures. */
TEST(long_failover_cluster)
{
    fo_cluster_run(22, true);
}

TEST_MAIN(TEST_CASE(failover_sentinel), TEST_CASE(failover_sentinel_window),
          TEST_CASE(failover_sentinel_window_in_flight),
          TEST_CASE(failover_sentinel_unlock_in_hand), TEST_CASE(failover_cluster),
          TEST_CASE(failover_cluster_ghost_release), TEST_CASE(long_failover_sentinel),
          TEST_CASE(long_failover_cluster))
