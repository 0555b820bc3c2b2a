/* The lock engine alone (lp_engine): no front end, no real Redis. The
 * engine runs on a real loop whose clock is this file's (common/clock.h's
 * seam), over the simulator's fake pool (tests/support/fake_pool.c), whose
 * Redis model runs the engine's own Lua scripts; the front end's hooks
 * (struct lk_front) are recorders. Covered: a hold's transitions (armed,
 * renewed, found lost and told exactly once, released when its
 * connection goes), a wait granted at once, granted after a re-poll, and
 * timed out, and a job retried after a lost reply. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "harness.h"
#include "sched/loop.h"
#include "tests/support/fake_pool.h"
#include "tests/support/fake_redis.h"

/* ---- clock -------------------------------------------------------------- */

static uint64_t now_ns = 1000000ull * 1000000ull; /* 1,000,000 ms */

static uint64_t fx_mono_ns(void)
{
    return now_ns;
}

static uint64_t fx_wall_ms(void)
{
    return 1700000000000ull + now_ns / 1000000u;
}

static const struct clock_fake fx_clock = {fx_mono_ns, fx_wall_ms};

static uint64_t fx_now_ms(void)
{
    return now_ns / 1000000u;
}

/* ---- the fixture: an engine with recording hooks -------------------------- */

#define WATCHDOG_MS 3000u
#define FX_UUID     "00000000-0000-4000-8000-000000000001"

/* The test's own script set: Redisson's lock acquire first, then every
 * script the batch runner may run (px_scripts_build wants them all in the
 * table), as the command modules' sets have them. */
#define FX_ACQUIRE 0u
#define FX_SCRIPTS 64u
static const struct px_lua *fx_scripts[FX_SCRIPTS];
static struct px_script_set fx_script_set = {fx_scripts, 0, LK_SCRIPTS_LOCK};

static void fx_scripts_fill(void)
{
    size_t n = 0;

    fx_scripts[n++] = &px_lua_lock_acquire;
    for (size_t i = 0; i < px_lua_lock_batch_nops; i++) {
        const struct px_lua *sc = px_lua_lock_batch_ops[i].script;
        size_t k;

        for (k = 0; k < n && fx_scripts[k] != sc; k++)
            ;
        if (k == n) {
            ASSERT_TRUE(n < FX_SCRIPTS);
            fx_scripts[n++] = sc;
        }
    }
    fx_script_set.n = n;
}

struct fx {
    struct fake_redis *redis;
    struct sched_loop *loop;
    struct pool *pool;
    struct lk_engine *eng;
    struct lk_caller caller; /* the one connection */
    int refs;                /* caller_get - caller_put */
    unsigned lost;           /* lease_lost calls */
    char lost_name[64];
    unsigned finished; /* wait_finish calls */
    enum lk_end end;   /* the last one's */
    unsigned granted;  /* test kind: granted calls */
};

static struct fx fx;

static void fx_caller_get(struct lk_caller *c)
{
    ASSERT_TRUE(c == &fx.caller);
    fx.refs++;
}

static void fx_caller_put(struct lk_caller *c)
{
    ASSERT_TRUE(c == &fx.caller);
    ASSERT_TRUE(fx.refs > 0);
    fx.refs--;
}

static struct lk_caller *fx_caller_find(struct lk_engine *eng, uint64_t id)
{
    (void)eng;
    return id == fx.caller.id && !fx.caller.closing ? &fx.caller : NULL;
}

static void fx_lease_lost(struct lk_caller *c, const char *kind, const char *name, size_t nlen)
{
    (void)kind;
    ASSERT_TRUE(c == &fx.caller);
    fx.lost++;
    snprintf(fx.lost_name, sizeof(fx.lost_name), "%.*s", (int)nlen, name);
}

static void fx_wait_finish(struct px_wait_op *op, enum lk_end end, const struct lk_end_info *info)
{
    (void)info;
    fx.finished++;
    fx.end = end;
    op->kind->destroy(op);
}

/* Subscriptions: confirmed at once; no message is ever delivered (the
 * waits here wake by their re-poll or their deadline). */
static int fx_sub_listen(struct lk_engine *eng, struct px_sub_lsn *l, const char *name, size_t len,
                         enum pool_sub_kind kind, px_sub_lsn_fn *cb)
{
    (void)eng, (void)name, (void)len, (void)kind;
    l->cb = cb;
    return 1;
}

static void fx_sub_unlisten(struct px_sub_lsn *l)
{
    (void)l;
}

static void fx_start(void)
{
    struct sched_loop_opts lo = {.io = SCHED_IO_EPOLL, .max_conns = 64, .tick_ms = 4};
    const struct pool_script *scripts;
    struct pool_opts po;
    size_t n;

    log_set_level(LOG_LVL_ERROR);
    clock_fake = &fx_clock;
    memset(&fx, 0, sizeof(fx));
    ASSERT_EQ(fr_create(&fx.redis, NULL, NULL), 0);
    fp_configure(fx_now_ms, fx.redis);
    fx.eng = px_engine_alloc(NULL);
    ASSERT_TRUE(fx.eng != NULL);
    fx_scripts_fill();
    px_scripts_register(fx.eng, &fx_script_set);
    fx.eng->front = (struct lk_front){.wait_finish = fx_wait_finish,
                                      .lease_lost = fx_lease_lost,
                                      .caller_get = fx_caller_get,
                                      .caller_put = fx_caller_put,
                                      .caller_find = fx_caller_find,
                                      .sub_listen = fx_sub_listen,
                                      .sub_unlisten = fx_sub_unlisten};
    ASSERT_EQ(sched_loop_create(&fx.loop, &lo), 0);
    pool_opts_default(&po);
    po.host = "127.0.0.1";
    po.port = 6379;
    n = px_scripts_build(fx.eng, &scripts);
    ASSERT_EQ(pool_create(&fx.pool, fx.loop, &po, scripts, n), 0);
    ASSERT_EQ(pool_start(fx.pool), 0);
    fx.eng->loop = fx.loop;
    fx.eng->pool = fx.pool;
    fx.eng->uuid = FX_UUID;
    fx.eng->cfg.watchdog_ms = WATCHDOG_MS;
    fx.eng->cfg.upstream_timeout_ms = 1000;
    fx.eng->cfg.on_disc = PX_DISCONNECT_RELEASE;
    fx.eng->cfg.linger_ms = 1000;
    ASSERT_EQ(px_locks_init(fx.eng), 0);
    px_locks_client_init(&fx.caller, fx.eng, 7);
}

static void fx_pump(void);

/* The connection goes (if it has not), what it left is settled, and
 * everything is torn down as the server does (px_server_destroy); no
 * reference to the connection may be left. */
static void fx_stop(void)
{
    if (!fx.caller.closing) {
        fx.caller.closing = true;
        px_locks_client_gone(&fx.caller);
    }
    fx_pump();
    ASSERT_EQ(fx.refs, 0);
    pool_stop(fx.pool);
    sched_loop_run_once(fx.loop, 0);
    px_locks_deinit(fx.eng);
    pool_destroy(fx.pool);
    sched_loop_destroy(fx.loop);
    px_engine_free(fx.eng);
    fr_destroy(fx.redis);
}

/* Redis runs and answers everything queued, and the loop runs what came
 * due, until nothing moves. */
static void fx_pump(void)
{
    bool moved = true;

    while (moved) {
        moved = false;
        for (unsigned k = 0; k < fp_nconns(fx.pool); k++) {
            while (fp_execute(fx.pool, k))
                moved = true;
            while (fp_deliver(fx.pool, k))
                moved = true;
        }
        sched_loop_run_once(fx.loop, 0);
    }
}

/* Time goes by in steps of 10 ms, Redis answering as it goes. */
static void fx_advance(uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 10) {
        now_ns += 10u * 1000000u;
        fx_pump();
    }
}

static size_t fx_owner(uint64_t id, char *out)
{
    return px_owner_format(fx.eng, id, NULL, NULL, 0, out);
}

/* ---- acquiring in Redis ------------------------------------------------- */

struct fx_rec {
    bool done;
    int err;
    int type;
    long long integer;
};

static void fx_rec_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct fx_rec *rec = arg;

    rec->done = true;
    rec->err = err;
    rec->type = r ? r->type : 0;
    rec->integer = r ? r->integer : 0;
}

/* Runs the acquire of name for owner with lease_ms: true when granted
 * (-2 - count), false when held by another (its PTTL). */
static bool fx_acquire(const char *name, const char *owner, size_t olen, uint64_t lease_ms)
{
    char lease[24];
    const char *argv[3] = {name, lease, owner};
    size_t lens[3] = {strlen(name),
                      (size_t)snprintf(lease, sizeof(lease), "%llu", (unsigned long long)lease_ms),
                      olen};
    struct fx_rec rec = {0};

    ASSERT_EQ(px_script_eval(fx.eng, px_route_hint(name, lens[0]),
                             fx.eng->script_bases[LK_SCRIPTS_LOCK] + FX_ACQUIRE, 1, 3, argv, lens,
                             fx_rec_cb, &rec),
              0);
    fx_pump();
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.err, 0);
    ASSERT_EQ(rec.type, POOL_REPLY_INTEGER);
    return rec.integer <= -3;
}

/* The connection holds name (plain kind, watchdog lease), as LOCK leaves it. */
static struct px_hold *fx_hold(const char *name, char *owner, size_t *olen)
{
    struct px_hold *h;

    *olen = fx_owner(fx.caller.id, owner);
    ASSERT_TRUE(fx_acquire(name, owner, *olen, WATCHDOG_MS));
    h = px_hold_use(fx.eng, &px_hold_plain, name, strlen(name), owner, *olen, true);
    ASSERT_TRUE(h != NULL);
    px_hold_begin(h);
    px_hold_end(h);
    px_hold_granted(h, &px_hold_plain, &fx.caller, 1, WATCHDOG_MS, true, fx_now_ms());
    px_hold_put(h);
    return h;
}

/* ---- holds -------------------------------------------------------------- */

TEST(hold_armed_and_renewed)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    h = fx_hold("a", owner, &olen);
    ASSERT_TRUE(px_hold_is_held(h));
    ASSERT_EQ(fx.eng->nholds, 1u);
    ASSERT_TRUE(px_locks_client_busy(&fx.caller.locks));
    ASSERT_EQ(fx.eng->stats.renewals, 0u);
    /* Past two lease thirds: renewed (the key's TTL back near the lease),
     * never lost. */
    fx_advance(2 * WATCHDOG_MS);
    ASSERT_TRUE(fx.eng->stats.renewals >= 2u);
    ASSERT_TRUE(fr_pttl(fx.redis, fx_now_ms(), "a") > (long long)(WATCHDOG_MS / 2));
    ASSERT_TRUE(px_hold_is_held(h));
    ASSERT_EQ(fx.lost, 0u);
    ASSERT_EQ(fx.eng->stats.leases_lost, 0u);
    fx_stop();
}

TEST(hold_renewal_finds_it_lost_once)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    h = fx_hold("a", owner, &olen);
    fx_advance(WATCHDOG_MS / 2);
    /* Redis restarts without persistence: the owner field is gone, so the
     * next renewal answers lost. */
    fr_flush(fx.redis);
    fx_advance(WATCHDOG_MS);
    ASSERT_EQ(fx.lost, 1u);
    ASSERT_TRUE(strcmp(fx.lost_name, "a") == 0);
    ASSERT_EQ(fx.eng->stats.leases_lost, 1u);
    ASSERT_TRUE(!px_hold_is_held(h));
    /* Told once: no more renewals of it, no second push. */
    fx_advance(3 * WATCHDOG_MS);
    ASSERT_EQ(fx.lost, 1u);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    fx_stop();
}

TEST(hold_released_when_its_connection_goes)
{
    char owner[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    fx_hold("a", owner, &olen);
    fx_hold("b", owner, &olen);
    ASSERT_EQ(fx.eng->nholds, 2u);
    fx.caller.closing = true;
    px_locks_client_gone(&fx.caller);
    fx_pump();
    /* --on-disconnect release: both keys are gone from Redis, the table is
     * empty, nothing is told lost, no reference is left. */
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "b"), -2);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.eng->stats.disc_releases, 2u);
    ASSERT_TRUE(!px_locks_client_busy(&fx.caller.locks));
    ASSERT_TRUE(!px_locks_releasing(fx.eng));
    ASSERT_EQ(fx.refs, 0);
    ASSERT_EQ(fx.lost, 0u);
    fx_stop();
}

TEST(hold_left_to_expire_when_its_connection_goes)
{
    char owner[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    fx.eng->cfg.on_disc = PX_DISCONNECT_EXPIRE;
    fx_hold("a", owner, &olen);
    fx.caller.closing = true;
    px_locks_client_gone(&fx.caller);
    fx_pump();
    /* Not released, no longer renewed: the key runs out with its lease. */
    ASSERT_TRUE(fr_pttl(fx.redis, fx_now_ms(), "a") > 0);
    fx_advance(WATCHDOG_MS + 100);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.lost, 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

/* ---- waits -------------------------------------------------------------- */

struct fx_waiter {
    struct px_wait_op op;
    char owner[PX_OWNER_MAX];
    size_t olen;
    const char *name;
};

static size_t fxw_channel(const struct px_wait_op *op, char *out, size_t cap)
{
    return px_channel_name(out, cap, PX_LOCK_CHANNEL_PREFIX, op->name, op->nlen);
}

static int fxw_send(struct px_wait_op *op)
{
    struct fx_waiter *w = LP_CONTAINER_OF(op, struct fx_waiter, op);
    char lease[24];
    const char *argv[3] = {w->name, lease, w->owner};
    size_t lens[3] = {op->nlen, (size_t)snprintf(lease, sizeof(lease), "%u", WATCHDOG_MS), w->olen};

    return px_wait_eval(op, px_route_hint(w->name, op->nlen),
                        op->eng->script_bases[LK_SCRIPTS_LOCK] + FX_ACQUIRE, 1, 3, argv, lens);
}

static enum px_wait_res fxw_reply(struct px_wait_op *op, const struct pool_reply *r, uint64_t *repoll)
{
    (void)op;
    if (r->type == POOL_REPLY_INTEGER && r->integer <= -3)
        return PX_WAIT_GRANTED;
    *repoll = r->type == POOL_REPLY_INTEGER && r->integer > 0 ? (uint64_t)r->integer : 0;
    return PX_WAIT_CONTENDED;
}

static void fxw_granted(struct px_wait_op *op)
{
    (void)op;
    fx.granted++;
}

static void fxw_destroy(struct px_wait_op *op)
{
    free(LP_CONTAINER_OF(op, struct fx_waiter, op));
}

static const struct px_wait_kind fxw_kind = {
    .name = "test lock",
    .wake = PX_WAKE_LOCK,
    .stat = PX_WAIT_STAT_LOCK,
    .channel = fxw_channel,
    .send = fxw_send,
    .reply = fxw_reply,
    .granted = fxw_granted,
    .destroy = fxw_destroy,
};

static void fx_wait(const char *name, int64_t wait_ms)
{
    struct fx_waiter *w = calloc(1, sizeof(*w));

    ASSERT_TRUE(w != NULL);
    w->name = name;
    w->olen = fx_owner(fx.caller.id, w->owner);
    px_wait_init(&w->op, &fxw_kind, &fx.caller, NULL, name, strlen(name), wait_ms);
    w->op.lease_ms = WATCHDOG_MS;
    px_wait_start(&w->op);
}

TEST(wait_granted_at_once)
{
    fx_start();
    fx_wait("a", 500);
    fx_pump();
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(fx.refs, 0);
    ASSERT_TRUE(fr_pttl(fx.redis, fx_now_ms(), "a") > 0);
    fx_stop();
}

TEST(wait_granted_after_the_holder_lease_ends)
{
    char other[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_owner(99, other);
    ASSERT_TRUE(fx_acquire("a", other, olen, 300));
    fx_wait("a", 2000);
    fx_pump();
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(fx.finished, 0u);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 1u);
    /* The other lease runs out; the re-poll at its PTTL gets the lock. */
    fx_advance(400);
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(wait_times_out)
{
    char other[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_owner(99, other);
    ASSERT_TRUE(fx_acquire("a", other, olen, 60000));
    fx_wait("a", 500);
    fx_advance(400);
    ASSERT_EQ(fx.finished, 0u);
    fx_advance(200);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_TIMEOUT);
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(px_wait_timeouts(fx.eng, PX_WAIT_STAT_LOCK), 1u);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

/* ---- jobs --------------------------------------------------------------- */

struct fx_job {
    struct px_job job;
    unsigned sends, done, dropped;
};

static int fxj_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct fx_job *f = LP_CONTAINER_OF(j, struct fx_job, job);
    const char *argv[1] = {"x"};
    size_t lens[1] = {1};

    f->sends++;
    return px_script_eval(j->eng, px_route_hint("x", 1), PX_SCRIPT_INFO, 1, 1, argv, lens, cb, arg);
}

static void fxj_done(struct px_job *j, const struct pool_reply *r)
{
    (void)r;
    LP_CONTAINER_OF(j, struct fx_job, job)->done++;
}

static void fxj_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    LP_CONTAINER_OF(j, struct fx_job, job)->dropped++;
}

static const struct px_job_ops fxj_ops = {
    .what = "test job",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .send = fxj_send,
    .done = fxj_done,
    .dropped = fxj_dropped,
};

TEST(job_retried_after_a_lost_reply)
{
    struct fx_job f = {0};

    fx_start();
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    sched_loop_run_once(fx.loop, 0);
    ASSERT_EQ(f.sends, 1u);
    /* The connection resets before Redis ran it: the reply is lost. */
    for (unsigned k = 0; k < fp_nconns(fx.pool); k++)
        fp_fail(fx.pool, k, -ECONNRESET);
    ASSERT_EQ(f.done, 0u);
    ASSERT_TRUE(px_jobs_busy(fx.eng));
    /* Sent again after the back-off, answered once. */
    fx_advance(PX_JOB_BACKOFF + 20);
    ASSERT_EQ(f.sends, 2u);
    ASSERT_EQ(f.done, 1u);
    ASSERT_EQ(f.dropped, 0u);
    ASSERT_TRUE(fx.eng->jobs.retried[PX_JOB_RELEASE] >= 1u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_stop();
}

TEST(job_dropped_when_its_time_ran_out)
{
    struct fx_job f = {0};

    fx_start();
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, fx_now_ms() + 100);
    sched_loop_run_once(fx.loop, 0);
    fp_down(fx.pool); /* Redis unreachable: every send refused */
    fx_advance(300);
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.dropped, 1u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_stop();
}

TEST_MAIN(TEST_CASE(hold_armed_and_renewed), TEST_CASE(hold_renewal_finds_it_lost_once),
          TEST_CASE(hold_released_when_its_connection_goes),
          TEST_CASE(hold_left_to_expire_when_its_connection_goes), TEST_CASE(wait_granted_at_once),
          TEST_CASE(wait_granted_after_the_holder_lease_ends), TEST_CASE(wait_times_out),
          TEST_CASE(job_retried_after_a_lost_reply), TEST_CASE(job_dropped_when_its_time_ran_out))
