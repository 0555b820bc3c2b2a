/* The engine's unit-test fixture; see engine_fixture.h. */
#include "tests/support/engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "harness.h"
#include "sched/loop.h"

struct fx fx;

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

uint64_t fx_now_ms(void)
{
    return now_ns / 1000000u;
}

/* ---- scripts ------------------------------------------------------------ */

/* The fixture's script set: Redisson's lock acquire and unlock, then every
 * script the batch runner may run (px_scripts_build wants them all in the
 * table), as the command modules' sets have them. */
#define FX_SCRIPTS 64u
static const struct px_lua *fx_scripts[FX_SCRIPTS];
static struct px_script_set fx_script_set = {fx_scripts, 0, LK_SCRIPTS_LOCK};

static unsigned fx_script_index(const struct px_lua *sc)
{
    for (unsigned k = 0; k < fx_script_set.n; k++)
        if (fx_scripts[k] == sc)
            return k;
    ASSERT_TRUE(!"script not in the fixture's set");
    return 0;
}

static void fx_script_add(const struct px_lua *sc)
{
    size_t k;

    for (k = 0; k < fx_script_set.n && fx_scripts[k] != sc; k++)
        ;
    if (k == fx_script_set.n) {
        ASSERT_TRUE(k < FX_SCRIPTS);
        fx_scripts[fx_script_set.n++] = sc;
    }
}

static void fx_scripts_fill(void)
{
    fx_script_set.n = 0;
    fx_script_add(&px_lua_lock_acquire);
    fx_script_add(&px_lua_lock_unlock);
    for (size_t i = 0; i < px_lua_lock_batch_nops; i++)
        fx_script_add(px_lua_lock_batch_ops[i].script);
}

static unsigned fx_script(const struct px_lua *sc)
{
    return fx.eng->script_bases[LK_SCRIPTS_LOCK] + fx_script_index(sc);
}

/* ---- the front end's hooks ------------------------------------------------ */

static unsigned fx_caller_index(const struct lk_caller *c)
{
    for (unsigned i = 0; i < FX_CALLERS; i++)
        if (c == &fx.callers[i])
            return i;
    ASSERT_TRUE(!"not a fixture caller");
    return 0;
}

static void fx_caller_get(struct lk_caller *c)
{
    (void)fx_caller_index(c);
    fx.refs++;
}

static void fx_caller_put(struct lk_caller *c)
{
    (void)fx_caller_index(c);
    ASSERT_TRUE(fx.refs > 0);
    fx.refs--;
}

static struct lk_caller *fx_caller_find(struct lk_engine *eng, uint64_t id)
{
    (void)eng;
    for (unsigned i = 0; i < FX_CALLERS; i++)
        if (id == fx.callers[i].id && !fx.callers[i].closing)
            return &fx.callers[i];
    return NULL;
}

static void fx_lease_lost(struct lk_caller *c, const char *kind, const char *name, size_t nlen)
{
    (void)kind;
    fx.lost[fx_caller_index(c)]++;
    snprintf(fx.lost_name, sizeof(fx.lost_name), "%.*s", (int)nlen, name);
}

static void fx_hold_end(struct lk_engine *eng, uint64_t held_ms)
{
    (void)eng, (void)held_ms;
    fx.hold_ends++;
}

static void fx_wait_finish(struct px_wait_op *op, enum lk_end end, const struct lk_end_info *info)
{
    (void)info;
    fx.finished++;
    fx.end = end;
    op->kind->destroy(op);
}

/* Subscriptions: a pool subscription per listener in the fake pool, so a
 * PUBLISH a script makes reaches the waitset (READY comes as the real
 * pool's does, later). */
struct fx_sub {
    struct pool_sub sub;
    struct px_sub_lsn *l;
};

static void fx_on_sub(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct fx_sub *fs = LP_CONTAINER_OF(s, struct fx_sub, sub);
    size_t clen = 0;
    const char *ch = pool_sub_msg_channel(fx.pool, &clen);

    fs->l->cb(fs->l, ev, ch, clen, msg, len);
}

static int fx_sub_listen(struct lk_engine *eng, struct px_sub_lsn *l, const char *name, size_t len,
                         enum pool_sub_kind kind, px_sub_lsn_fn *cb)
{
    struct fx_sub *fs;
    unsigned i;
    int rc;

    (void)eng;
    for (i = 0; i < FX_SUBS && fx.subs[i]; i++)
        ;
    ASSERT_TRUE(i < FX_SUBS);
    fs = calloc(1, sizeof(*fs));
    ASSERT_TRUE(fs != NULL);
    fs->l = l;
    l->cb = cb;
    rc = pool_sub_start_kind(fx.pool, &fs->sub, name, len, kind, fx_on_sub);
    if (rc < 0) {
        free(fs);
        return rc;
    }
    fx.subs[i] = fs;
    return 0;
}

static void fx_sub_unlisten(struct px_sub_lsn *l)
{
    for (unsigned i = 0; i < FX_SUBS; i++) {
        if (fx.subs[i] && fx.subs[i]->l == l) {
            pool_sub_stop(fx.pool, &fx.subs[i]->sub);
            free(fx.subs[i]);
            fx.subs[i] = NULL;
            return;
        }
    }
}

void fx_publish(const char *channel, const char *msg)
{
    size_t clen = strlen(channel);

    for (unsigned i = 0; i < FX_SUBS; i++) {
        struct fx_sub *fs = fx.subs[i];

        if (fs && fs->sub.chan)
            fs->l->cb(fs->l, POOL_SUB_MESSAGE, channel, clen, msg, strlen(msg));
    }
}

/* ---- set-up and tear-down ------------------------------------------------ */

void fx_start(void)
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
                                      .hold_end = fx_hold_end,
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
    fx.eng->cfg.watchdog_ms = FX_WATCHDOG_MS;
    fx.eng->cfg.upstream_timeout_ms = 1000;
    fx.eng->cfg.on_disc = PX_DISCONNECT_RELEASE;
    fx.eng->cfg.linger_ms = 1000;
    ASSERT_EQ(px_locks_init(fx.eng), 0);
    for (unsigned i = 0; i < FX_CALLERS; i++)
        px_locks_client_init(&fx.callers[i], fx.eng, 7 + i);
}

void fx_close(unsigned i)
{
    if (fx.callers[i].closing)
        return;
    fx.callers[i].closing = true;
    px_locks_client_gone(&fx.callers[i]);
    fx_pump();
}

void fx_stop(void)
{
    fx.hold_msgs = false;
    for (unsigned i = 0; i < FX_CALLERS; i++)
        fx_close(i);
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

void fx_pump(void)
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
        while (!fx.hold_msgs && fp_deliver_msg(fx.pool, 0))
            moved = true;
        sched_loop_run_once(fx.loop, 0);
        /* What the loop's hooks and timers sent (renewals, jobs). */
        for (unsigned k = 0; k < fp_nconns(fx.pool); k++)
            if (fp_queued(fx.pool, k) > 0)
                moved = true;
        if (!fx.hold_msgs && fp_msgs(fx.pool) > 0)
            moved = true;
    }
}

void fx_advance(uint64_t ms)
{
    for (uint64_t t = 0; t < ms; t += 10) {
        now_ns += 10u * 1000000u;
        fx_pump();
    }
}

void fx_skip(uint64_t ms)
{
    now_ns += ms * 1000000u;
    sched_loop_run_once(fx.loop, 0);
}

size_t fx_owner(uint64_t id, char *out)
{
    return px_owner_format(fx.eng, id, NULL, NULL, 0, out);
}

size_t fx_owner_token(const char *token, char *out)
{
    return px_owner_format(fx.eng, 0, NULL, token, strlen(token), out);
}

/* ---- Redis --------------------------------------------------------------- */

struct fx_rec {
    bool done;
    int err;
    int type;
    long long integer;
};

static void fx_rec_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    struct fx_rec *rec = arg;

    rec->done = true;
    rec->err = res->err;
    rec->type = r ? r->type : 0;
    rec->integer = r ? r->integer : 0;
}

static struct fx_rec fx_eval3(const struct px_lua *sc, const char *name, const char *a1,
                              size_t a1len, const char *a2, size_t a2len, int numkeys)
{
    const char *argv[3] = {name, a1, a2};
    size_t lens[3] = {strlen(name), a1len, a2len};
    struct fx_rec rec = {0};

    ASSERT_EQ(px_script_eval(fx.eng, px_route_hint(name, lens[0]), fx_script(sc), numkeys, 3, argv,
                             lens, fx_rec_cb, &rec),
              0);
    fx_pump();
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.err, 0);
    return rec;
}

bool fx_acquire(const char *name, const char *owner, size_t olen, uint64_t lease_ms)
{
    char lease[24];
    size_t llen = (size_t)snprintf(lease, sizeof(lease), "%llu", (unsigned long long)lease_ms);
    struct fx_rec rec = fx_eval3(&px_lua_lock_acquire, name, lease, llen, owner, olen, 1);

    ASSERT_EQ(rec.type, POOL_REPLY_INTEGER);
    return rec.integer <= -3; /* -2 - count when granted, the PTTL when held */
}

long long fx_unlock(const char *name, const char *owner, size_t olen, uint64_t lease_ms)
{
    char lease[24], chan[256];
    size_t llen = (size_t)snprintf(lease, sizeof(lease), "%llu", (unsigned long long)lease_ms);
    size_t clen = px_channel_name(chan, sizeof(chan), PX_LOCK_CHANNEL_PREFIX, name, strlen(name));
    const char *argv[5] = {name, chan, lease, owner, "publish"};
    size_t lens[5] = {strlen(name), clen, llen, olen, 7};
    struct fx_rec rec = {0};

    ASSERT_EQ(px_script_eval(fx.eng, px_route_hint(name, lens[0]), fx_script(&px_lua_lock_unlock),
                             2, 5, argv, lens, fx_rec_cb, &rec),
              0);
    fx_pump();
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.err, 0);
    return rec.type == POOL_REPLY_INTEGER ? rec.integer : -1;
}

long long fx_count(const char *name, const char *owner)
{
    long long v = 0;

    return fr_hget_int(fx.redis, fx_now_ms(), name, owner, &v) ? v : 0;
}

struct px_hold *fx_grant(unsigned i, const char *name, const char *owner, size_t olen,
                         bool watchdog, uint64_t lease_ms)
{
    uint64_t lease = watchdog ? FX_WATCHDOG_MS : lease_ms;
    long long count;
    struct px_hold *h;

    ASSERT_TRUE(fx_acquire(name, owner, olen, lease));
    count = fx_count(name, owner);
    ASSERT_TRUE(count > 0);
    h = px_hold_use(fx.eng, &px_hold_plain, name, strlen(name), owner, olen, true);
    ASSERT_TRUE(h != NULL);
    px_hold_begin(h);
    px_hold_end(h);
    px_hold_granted(h, &px_hold_plain, &fx.callers[i], (uint64_t)count, lease, watchdog,
                    fx_now_ms());
    px_hold_put(h);
    return h;
}

/* ---- the test wait kind ---------------------------------------------------- */

static size_t fxw_channel(const struct px_wait_op *op, char *out, size_t cap)
{
    return px_channel_name(out, cap, PX_LOCK_CHANNEL_PREFIX, op->name, op->nlen);
}

static int fxw_send(struct px_wait_op *op)
{
    struct fx_waiter *w = LP_CONTAINER_OF(op, struct fx_waiter, op);
    char lease[24];
    const char *argv[3] = {w->name, lease, w->owner};
    size_t lens[3] = {op->nlen, (size_t)snprintf(lease, sizeof(lease), "%u", FX_WATCHDOG_MS),
                      w->olen};

    return px_wait_eval(op, px_route_hint(w->name, op->nlen), fx_script(&px_lua_lock_acquire), 1, 3,
                        argv, lens);
}

static enum px_wait_res fxw_reply(struct px_wait_op *op, const struct pool_reply *r,
                                  uint64_t *repoll)
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

static void fxw_undo_cb(void *arg, const struct pool_result *res)
{
    (void)arg, (void)res;
}

/* Gives the acquisition back (the unlock), as a lock kind's settle would. */
static void fxw_undo(struct px_wait_op *op, enum px_undo_why why)
{
    struct fx_waiter *w = LP_CONTAINER_OF(op, struct fx_waiter, op);
    char lease[24], chan[256];
    size_t llen = (size_t)snprintf(lease, sizeof(lease), "%u", FX_WATCHDOG_MS);
    size_t clen = px_channel_name(chan, sizeof(chan), PX_LOCK_CHANNEL_PREFIX, w->name, op->nlen);
    const char *argv[5] = {w->name, chan, lease, w->owner, "publish"};
    size_t lens[5] = {op->nlen, clen, llen, w->olen, 7};

    (void)why;
    fx.undone++;
    ASSERT_EQ(px_script_eval(op->eng, px_route_hint(w->name, op->nlen),
                             fx_script(&px_lua_lock_unlock), 2, 5, argv, lens, fxw_undo_cb, NULL),
              0);
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
    .undo = fxw_undo,
    .destroy = fxw_destroy,
};

struct fx_waiter *fx_wait(unsigned i, const char *name, int64_t wait_ms)
{
    struct fx_waiter *w = calloc(1, sizeof(*w));

    ASSERT_TRUE(w != NULL);
    w->name = name;
    w->olen = fx_owner(fx.callers[i].id, w->owner);
    px_wait_init(&w->op, &fxw_kind, &fx.callers[i], NULL, name, strlen(name), wait_ms);
    w->op.lease_ms = FX_WATCHDOG_MS;
    px_wait_start(&w->op);
    return w;
}
