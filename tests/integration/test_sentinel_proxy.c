/* lockproxy with --upstream redis-sentinel://... against a real Sentinel
 * deployment (sentinel_util: 1 master, 2 replicas, 3 sentinels; the
 * master's password in the URL, the sentinels' in --sentinel-password):
 * LOCK/UNLOCK work, INFO shows the sentinel state, and a SENTINEL
 * FAILOVER while clients lock and unlock in a loop costs them nothing
 * but UPSTREAM errors (and LOCKLOST for a hold the failover lost), never
 * another error (READONLY above all); locks work again on the new master
 * afterwards. Both io backends. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"
#include "sentinel_util.h"

#define WORKERS 4

struct work {
    int port;                     /* the proxy */
    atomic_int stop;              /* set by the main thread */
    atomic_int after;             /* set once the proxy follows the new master */
    atomic_int ok;                /* LOCK + UNLOCK cycles done */
    atomic_int ok_after[WORKERS]; /* of which after the switch, per worker */
    atomic_int upstream;          /* UPSTREAM errors */
    atomic_int lost;              /* LOCKLOST on UNLOCK */
    atomic_int bad;               /* anything else */
    pthread_mutex_t mu;
    char first_upstream[256]; /* under mu */
    char first_bad[256];      /* under mu */
};

struct worker {
    struct work *w;
    int id;
};

static void note(struct work *w, char *slot, const char *what, const redisReply *r)
{
    char got[200];

    pthread_mutex_lock(&w->mu);
    if (!slot[0])
        snprintf(slot, sizeof(w->first_bad), "%s: %s", what, pu_describe(r, got, sizeof(got)));
    pthread_mutex_unlock(&w->mu);
}

/* true when r is what a LOCK or UNLOCK may answer around a failover. */
static bool classify(struct work *w, const char *what, const redisReply *r, bool unlock)
{
    if (pu_is_err(r, "UPSTREAM")) {
        atomic_fetch_add(&w->upstream, 1);
        note(w, w->first_upstream, what, r);
        return false;
    }
    if (unlock && pu_is_err(r, "LOCKLOST")) {
        atomic_fetch_add(&w->lost, 1);
        return false;
    }
    if (r->type == REDIS_REPLY_ERROR || (unlock && r->type != REDIS_REPLY_INTEGER) ||
        (!unlock && r->type != REDIS_REPLY_STATUS)) {
        atomic_fetch_add(&w->bad, 1);
        note(w, w->first_bad, what, r);
        return false;
    }
    return true;
}

static void *worker_main(void *arg)
{
    struct worker *me = arg;
    struct work *w = me->w;
    redisContext *c = pu_try_connect(w->port);
    char name[32];

    if (!c) {
        atomic_fetch_add(&w->bad, 1);
        return NULL;
    }
    snprintf(name, sizeof(name), "fo-lock-%d", me->id);
    while (!atomic_load(&w->stop)) {
        bool after = atomic_load(&w->after);
        redisReply *r = redisCommand(c, "LOCK %s WAIT 1000", name);
        bool held;

        if (!r) {
            atomic_fetch_add(&w->bad, 1);
            break;
        }
        held = classify(w, "LOCK", r, false);
        freeReplyObject(r);
        if (!held) {
            pu_sleep_ms(20);
            continue;
        }
        r = redisCommand(c, "UNLOCK %s", name);
        if (!r) {
            atomic_fetch_add(&w->bad, 1);
            break;
        }
        if (classify(w, "UNLOCK", r, true)) {
            atomic_fetch_add(&w->ok, 1);
            if (after)
                atomic_fetch_add(&w->ok_after[me->id], 1);
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static bool info_is(redisContext *c, const char *field, const char *want)
{
    char val[160];

    return pu_info_str(c, field, val, sizeof(val)) && strcmp(val, want) == 0;
}

static bool all_worked_after(struct work *w, int n)
{
    int i;

    for (i = 0; i < WORKERS; i++) {
        if (atomic_load(&w->ok_after[i]) < n)
            return false;
    }
    return true;
}

static void check_info(redisContext *c, const struct rsentinel *s, int m)
{
    char addr[32], sent[32];

    rsentinel_node_addr(s, m, addr, sizeof(addr));
    snprintf(sent, sizeof(sent), "127.0.0.1:%d", s->sent[0].port);
    PU_EVENTUALLY(info_is(c, "sentinel_subscribed", "1"), 10000);
    ASSERT_TRUE(info_is(c, "sentinel_master_name", RSENT_NAME));
    ASSERT_TRUE(info_is(c, "sentinel_master", addr));
    ASSERT_TRUE(info_is(c, "sentinel_current", sent));
    ASSERT_TRUE(info_is(c, "sentinel_connected", "1"));
    ASSERT_TRUE(info_is(c, "sentinels", "3"));
    ASSERT_TRUE(info_is(c, "upstream_state", "up"));
}

static void run_proxy(const char *backend)
{
    struct rsentinel s;
    struct pu_proxy p;
    struct worker ws[WORKERS];
    pthread_t th[WORKERS];
    struct work w;
    char addr[32];
    redisContext *c;
    int m, nm, i;

    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    if (strcmp(backend, "uring") == 0 && !pu_uring_available())
        TEST_SKIP("io_uring unavailable");
    rsentinel_start(&s, "data-pw", "sentinel-pw");
    m = rsentinel_wait_master(&s, -1);
    memset(&p, 0, sizeof(p));
    snprintf(p.upstream, sizeof(p.upstream), "redis-sentinel://:data-pw@%s/%s", s.list, RSENT_NAME);
    p.extra[0] = "--io";
    p.extra[1] = backend;
    p.extra[2] = "--sentinel-password";
    p.extra[3] = "sentinel-pw";
    p.extra[4] = "--log-level";
    p.extra[5] = "info";
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    PU_OK(c, "LOCK %s", "first");
    ASSERT_EQ(rsentinel_int(&s, m, "EXISTS first"), 1);
    PU_INT(c, 1, "UNLOCK %s", "first");
    check_info(c, &s, m);

    memset(&w, 0, sizeof(w));
    w.port = p.port;
    pthread_mutex_init(&w.mu, NULL);
    for (i = 0; i < WORKERS; i++) {
        ws[i].w = &w;
        ws[i].id = i;
        ASSERT_TRUE(pthread_create(&th[i], NULL, worker_main, &ws[i]) == 0);
    }
    PU_EVENTUALLY(atomic_load(&w.ok) >= 20, 10000);
    nm = rsentinel_failover(&s);
    PU_EVENTUALLY(info_is(c, "sentinel_master", rsentinel_node_addr(&s, nm, addr, sizeof(addr))),
                  15000);
    atomic_store(&w.after, 1);
    PU_EVENTUALLY(all_worked_after(&w, 5), 15000);
    atomic_store(&w.stop, 1);
    for (i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "%s: %d cycles, %d UPSTREAM errors (first: %s), %d LOCKLOST\n", backend,
            atomic_load(&w.ok), atomic_load(&w.upstream), w.first_upstream, atomic_load(&w.lost));
    if (atomic_load(&w.bad))
        TEST_FAIL("%d unexpected replies, the first: %s", atomic_load(&w.bad), w.first_bad);
    ASSERT_TRUE(pu_info_int(c, "sentinel_master_switches") >= 1);
    PU_OK(c, "LOCK %s", "final");
    ASSERT_EQ(rsentinel_int(&s, nm, "EXISTS final"), 1);
    PU_INT(c, 1, "UNLOCK %s", "final");
    redisFree(c);
    pu_proxy_stop(&p);
    pthread_mutex_destroy(&w.mu);
    rsentinel_cleanup(&s);
}

TEST(sentinel_proxy_epoll)
{
    run_proxy("epoll");
}

TEST(sentinel_proxy_uring)
{
    run_proxy("uring");
}

TEST_MAIN(TEST_CASE(sentinel_proxy_epoll), TEST_CASE(sentinel_proxy_uring))
