/* Waiting, waking and multi-client helpers for the integration tests; see
 * sync_util.h. */
#include "sync_util.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

const char su_rlock_acquire_lua[] = "if (redis.call('exists', KEYS[1]) == 0) or "
                                    "(redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
                                    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
                                    "return redis.call('pttl', KEYS[1]);";
const char su_rlock_unlock_lua[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1; end;";

#define MSG_WAIT_MS       3000  /* how long su_expect_msg waits for a message */
#define CLIENT_TIMEOUT_MS 60000 /* command timeout of su_clients_run's clients */

/* ---------------------------------------------------------------------
 * Pub/sub and replies of commands sent earlier */

long long su_numsub(redisContext *rc, const char *chan)
{
    redisReply *r = pu_cmd(rc, "PUBSUB NUMSUB %s", chan);
    long long n;

    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_TRUE(r->element[1]->type == REDIS_REPLY_INTEGER);
    n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

void su_expect_msg(redisContext *sub, const char *chan, const char *payload)
{
    char got_chan[512], got[64];

    if (!pu_next_message(sub, MSG_WAIT_MS, got_chan, sizeof(got_chan), got, sizeof(got)))
        TEST_FAIL("no message on %s (expected '%s')", chan, payload);
    ASSERT_STREQ(got_chan, chan);
    ASSERT_STREQ(got, payload);
}

void su_expect_no_msg(redisContext *sub, int ms)
{
    char chan[512], payload[64];

    if (pu_next_message(sub, ms, chan, sizeof(chan), payload, sizeof(payload)))
        TEST_FAIL("unexpected publish on %s: %s", chan, payload);
}

void su_expect_ok_within(redisContext *c, int ms)
{
    redisReply *r = pu_try_recv(c, ms);

    if (!r)
        TEST_FAIL("no reply within %d ms", ms);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
}

long long su_recv_ok_within(redisContext *c, long long since, int ms)
{
    su_expect_ok_within(c, ms);
    return pu_now_ms() - since;
}

/* True if the reply of waiter c (polled as pfd) has come; it must be +OK. */
static bool granted_now(redisContext *c, const struct pollfd *pfd)
{
    redisReply *r;

    if (!(pfd->revents & (POLLIN | POLLHUP | POLLERR)))
        return false;
    r = pu_try_recv(c, 0);
    if (!r)
        return false;
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    return true;
}

int su_next_granted(redisContext **w, const bool *done, int n, int ms)
{
    struct pollfd *pfd = calloc((size_t)n + 1, sizeof(*pfd));
    int *map = calloc((size_t)n + 1, sizeof(*map));
    int k = 0, got = -1;

    if (!pfd || !map)
        TEST_FAIL("out of memory");
    for (int i = 0; i < n; i++) {
        if (!done[i]) {
            pfd[k] = (struct pollfd){.fd = w[i]->fd, .events = POLLIN};
            map[k++] = i;
        }
    }
    if (poll(pfd, (nfds_t)k, ms) > 0) {
        for (int j = 0; j < k; j++) {
            if (!granted_now(w[map[j]], &pfd[j]))
                continue;
            if (got >= 0)
                TEST_FAIL("waiters %d and %d both hold the lock", got, map[j]);
            got = map[j];
        }
    }
    free(map);
    free(pfd);
    return got;
}

/* ---------------------------------------------------------------------
 * Worker threads */

/* True if r (NULL: the command failed) is +OK (want SU_OK) or :want. */
static bool reply_is(const redisReply *r, long long want)
{
    if (!r)
        return false;
    if (want == SU_OK)
        return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    return r->type == REDIS_REPLY_INTEGER && r->integer == want;
}

bool su_cmd_ok(redisContext *c, long long want, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;
    bool ok;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ok = reply_is(r, want);
    if (r)
        freeReplyObject(r);
    return ok;
}

void su_atomic_max(atomic_int *max, int v)
{
    int m = atomic_load(max);

    while (m < v && !atomic_compare_exchange_weak(max, &m, v))
        sched_yield(); /* m now holds the current maximum */
}

void su_excl_enter(struct su_excl *x)
{
    if (atomic_fetch_add(&x->inside, 1) != 0)
        atomic_fetch_add(&x->violations, 1);
}

void su_excl_leave(struct su_excl *x, int hold_us)
{
    long v = x->counter;

    sched_yield();
    usleep((useconds_t)hold_us);
    x->counter = v + 1;
    atomic_fetch_sub(&x->inside, 1);
}

/* What one client thread of su_clients_run gets. */
struct client_thread {
    const struct su_clients *spec; /* borrowed: the run */
    pthread_barrier_t *start;      /* borrowed: all clients connected */
    atomic_int *failed;            /* borrowed: clients that failed */
    int i;                         /* client number */
};

static void *client_main(void *arg)
{
    struct client_thread *t = arg;
    const struct su_clients *spec = t->spec;
    redisContext *c = pu_try_connect(spec->ports[t->i % spec->nports]);

    pthread_barrier_wait(t->start);
    if (!c) {
        atomic_fetch_add(t->failed, 1);
        return NULL;
    }
    pu_set_timeout(c, CLIENT_TIMEOUT_MS);
    for (int k = 0; k < spec->rounds; k++) {
        if (!spec->round(spec->arg, t->i, c)) {
            atomic_fetch_add(t->failed, 1);
            break;
        }
    }
    redisFree(c);
    return NULL;
}

int su_clients_run(const struct su_clients *spec)
{
    struct client_thread *th = calloc((size_t)spec->clients, sizeof(*th));
    pthread_t *tids = calloc((size_t)spec->clients, sizeof(*tids));
    pthread_barrier_t start;
    atomic_int failed = 0;

    if (!th || !tids)
        TEST_FAIL("out of memory");
    pthread_barrier_init(&start, NULL, (unsigned)spec->clients);
    for (int i = 0; i < spec->clients; i++) {
        th[i] = (struct client_thread){spec, &start, &failed, i};
        if (pthread_create(&tids[i], NULL, client_main, &th[i]) != 0)
            TEST_FAIL("pthread_create failed");
    }
    for (int i = 0; i < spec->clients; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&start);
    free(tids);
    free(th);
    return atomic_load(&failed);
}

/* ---------------------------------------------------------------------
 * Mutual exclusion under contention */

struct mx_state {
    const char *name;       /* the lock */
    struct su_excl excl;    /* the critical section */
    pthread_mutex_t err_mu; /* guards first_error */
    char first_error[256];  /* first failure, under err_mu */
};

static void mx_error(struct mx_state *s, const char *what, const redisReply *r,
                     const redisContext *c)
{
    char got[320];

    pthread_mutex_lock(&s->err_mu);
    if (!s->first_error[0])
        snprintf(s->first_error, sizeof(s->first_error), "%s: %s", what,
                 r ? pu_describe(r, got, sizeof(got)) : c->errstr);
    pthread_mutex_unlock(&s->err_mu);
}

/* Runs one command of a round; true if its reply is want (SU_OK: +OK),
 * else records the first failure. */
static bool mx_cmd(struct mx_state *s, redisContext *c, const char *cmd, long long want)
{
    redisReply *r = redisCommand(c, "%s %s", cmd, s->name);
    bool ok = reply_is(r, want);

    if (!ok)
        mx_error(s, cmd, r, c);
    if (r)
        freeReplyObject(r);
    return ok;
}

/* One critical section; returns false after a failed command. */
static bool mx_round(void *arg, int i, redisContext *c)
{
    struct mx_state *s = arg;

    (void)i;
    if (!mx_cmd(s, c, "LOCK", SU_OK))
        return false;
    su_excl_enter(&s->excl);
    su_excl_leave(&s->excl, 100);
    return mx_cmd(s, c, "UNLOCK", 1);
}

void su_mutex_check(int port, const char *name, int threads, int iters)
{
    struct mx_state s = {.name = name};
    const struct su_clients spec = {&port, 1, threads, iters, mx_round, &s};
    int failed;

    pthread_mutex_init(&s.err_mu, NULL);
    failed = su_clients_run(&spec);
    pthread_mutex_destroy(&s.err_mu);
    if (failed > 0)
        TEST_FAIL("%d failed commands under contention; first: %s", failed,
                  s.first_error[0] ? s.first_error : "connect: cannot connect");
    ASSERT_EQ(atomic_load(&s.excl.violations), 0);
    ASSERT_EQ(s.excl.counter, (long)threads * iters);
}
