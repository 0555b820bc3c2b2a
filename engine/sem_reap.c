/* A dead proxy's semaphore permits given back; see sem_reap.h. */
#include "engine/sem_reap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/scripts.h"
#include "engine/sem.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "sched/loop.h"

#define REAP_PREFIX "{lp-proxies}:"
#define REAP_KEY    (PX_CHANNEL_MAX + 64)

struct reg_name {
    struct hmap_node node; /* in eng->sem_reap.registered */
    size_t len;
    char name[];
};

/* One semaphore of a round: its reply's context. */
struct reap_call {
    struct lk_engine *eng; /* borrowed */
    size_t len;            /* name length */
    char name[];           /* owned */
};

static size_t reap_key(char *out, const char *what, const char *uuid)
{
    return (size_t)snprintf(out, REAP_KEY, REAP_PREFIX "%s:%s", what, uuid);
}

static uint64_t reap_hint(void)
{
    return px_route_hint(REAP_PREFIX, sizeof(REAP_PREFIX) - 1);
}

/* ---- registration ------------------------------------------------------------ */

static void registered_clear(struct lk_engine *eng)
{
    struct hmap *m = &eng->sem_reap.registered;
    size_t i;

    for (i = 0; i < m->nbuckets; i++) {
        while (m->buckets[i]) {
            struct reg_name *r = LP_CONTAINER_OF(m->buckets[i], struct reg_name, node);

            hmap_remove(m, &r->node);
            free(r);
        }
    }
}

/* A registration Redis did not confirm (its reply lost, or an error):
 * every name is forgotten, so the next acquire of each registers again
 * (SADD is idempotent). */
static void register_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;

    if (err < 0 || r->type == POOL_REPLY_ERROR)
        registered_clear(arg);
}

void px_sem_reap_register(struct lk_engine *eng, const char *name, size_t len)
{
    struct hmap *m = &eng->sem_reap.registered;
    uint64_t hash = hash_bytes(name, len);
    struct hmap_node *n;
    struct reg_name *r;
    char key[REAP_KEY], all[REAP_KEY], live[REAP_KEY], ttl[24];
    const char *argv[6] = {key, all, live, name, eng->uuid, ttl};
    size_t lens[6];

    for (n = hmap_first(m, hash); n; n = hmap_next(n)) {
        r = LP_CONTAINER_OF(n, struct reg_name, node);
        if (r->len == len && memcmp(r->name, name, len) == 0)
            return;
    }
    if (m->count >= PX_SEM_REAP_REGISTERED)
        registered_clear(eng); /* bounded: names register again, SADD is idempotent */
    lens[0] = reap_key(key, "sems", eng->uuid);
    lens[1] = (size_t)snprintf(all, sizeof(all), REAP_PREFIX "all");
    lens[2] = reap_key(live, "live", eng->uuid);
    lens[3] = len;
    lens[4] = strlen(eng->uuid);
    lens[5] = util_u64_to_str(eng->cfg.watchdog_ms, ttl);
    if (px_script_eval(eng, reap_hint(), px__sem_script(eng, PX__SEM_REGISTER), 3, 6, argv, lens,
                       register_on_reply, eng) < 0)
        return; /* not remembered: the next acquire tries again */
    if (!eng->sem_reap.alive_armed) {
        eng->sem_reap.alive_armed = true;
        sched_loop_timer_in(eng->loop, &eng->sem_reap.alive, LP_MAX(eng->cfg.watchdog_ms / 3, 1u));
    }
    r = malloc(sizeof(*r) + len);
    if (!r)
        return;
    r->len = len;
    memcpy(r->name, name, len);
    hmap_insert(m, &r->node, hash);
}

/* ---- liveness ------------------------------------------------------------------ */

static void alive_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct lk_engine *eng = arg;

    eng->sem_reap.alive_inflight = false;
    if (err < 0 || r->type != POOL_REPLY_INTEGER || r->integer != 1)
        return;
    eng->sem_reap.reaped_self++;
    registered_clear(eng);
    log_msg(LOG_LVL_WARN,
            "another proxy found this one dead (stopped past --lock-watchdog-timeout) and gave "
            "its clients' semaphore permits back: their releases answer LOCKLOST");
}

static void alive_on_timer(struct sched_timer *t)
{
    struct lk_engine *eng = LP_CONTAINER_OF(t, struct lk_engine, sem_reap.alive);
    char live[REAP_KEY], all[REAP_KEY], reaped[REAP_KEY], ttl[24];
    const char *argv[5] = {live, all, reaped, eng->uuid, ttl};
    size_t lens[5];

    sched_loop_timer_in(eng->loop, t, LP_MAX(eng->cfg.watchdog_ms / 3, 1u));
    if (eng->sem_reap.alive_inflight)
        return;
    if (!pool_is_ready(eng->pool)) {
        sched_loop_timer_in(eng->loop, t, 100); /* as soon as Redis answers */
        return;
    }
    lens[0] = reap_key(live, "live", eng->uuid);
    lens[1] = (size_t)snprintf(all, sizeof(all), REAP_PREFIX "all");
    lens[2] = reap_key(reaped, "reaped", eng->uuid);
    lens[3] = strlen(eng->uuid);
    lens[4] = util_u64_to_str(eng->cfg.watchdog_ms, ttl);
    if (px_script_eval(eng, reap_hint(), px__sem_script(eng, PX__SEM_ALIVE), 3, 5, argv, lens,
                       alive_on_reply, eng) == 0)
        eng->sem_reap.alive_inflight = true;
}

/* ---- reaping ------------------------------------------------------------------ */

static void reap_round_end(struct lk_engine *eng, bool more)
{
    eng->sem_reap.reaping = false;
    /* A round that found work looks again soon; else at the next period. */
    sched_loop_timer_in(eng->loop, &eng->sem_reap.reap, more ? 10 : eng->cfg.watchdog_ms);
}

static void reap_done_on_reply(void *arg, const struct pool_result *res)
{
    struct lk_engine *eng = arg;

    (void)res;
    if (--eng->sem_reap.pending == 0)
        reap_round_end(eng, true);
}

static void reap_one_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct reap_call *c = arg;
    struct lk_engine *eng = c->eng;
    char key[REAP_KEY];
    const char *argv[2] = {key, c->name};
    size_t lens[2] = {reap_key(key, "sems", eng->sem_reap.dead), c->len};

    if (err == 0 && r->type == POOL_REPLY_INTEGER && r->integer > 0) {
        eng->sem_reap.permits_returned += (uint64_t)r->integer;
        log_msg(LOG_LVL_INFO, "gave back %lld permit(s) of '%.*s' taken through dead proxy %s",
                r->integer, (int)LP_MIN(c->len, 200u), c->name, eng->sem_reap.dead);
    }
    /* Off the registry only once its ledger went (else the next round
     * tries again). */
    if (err < 0 || r->type != POOL_REPLY_INTEGER ||
        px_script_eval(eng, px_route_hint(REAP_PREFIX, sizeof(REAP_PREFIX) - 1),
                       px__sem_script(eng, PX__SEM_REAP_DONE), 1, 2, argv, lens, reap_done_on_reply,
                       eng) < 0)
        reap_done_on_reply(eng, &(struct pool_result){.err = -1});
    free(c);
}

static void reap_send_one(struct lk_engine *eng, const char *name, size_t len)
{
    struct px__sem_keys k;
    struct reap_call *c = malloc(sizeof(*c) + len);
    size_t n;

    eng->sem_reap.pending++;
    if (!c) {
        reap_done_on_reply(eng, &(struct pool_result){.err = -1});
        return;
    }
    c->eng = eng;
    c->len = len;
    memcpy(c->name, name, len);
    px__sem_keys_fill(&k, name, len, false);
    n = px_channel_name(k.ledger, PX_CHANNEL_MAX, "", name, len);
    n += (size_t)snprintf(k.ledger + n, sizeof(k.ledger) - n, ":lp-permits:%s", eng->sem_reap.dead);
    px__sem_keys_arg(&k, 2, k.ledger, n);
    if (px_script_eval(eng, px_route_hint(name, len), px__sem_script(eng, PX__SEM_REAP), 3, 3,
                       k.argv, k.lens, reap_one_on_reply, c) < 0) {
        free(c);
        reap_done_on_reply(eng, &(struct pool_result){.err = -1});
    }
}

static void reap_find_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct lk_engine *eng = arg;
    const struct pool_reply *names;
    size_t i;

    if (err < 0 || r->type != POOL_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != POOL_REPLY_STRING || r->element[0]->len == 0 ||
        r->element[0]->len >= sizeof(eng->sem_reap.dead) ||
        r->element[1]->type != POOL_REPLY_ARRAY || r->element[1]->elements == 0)
        return reap_round_end(eng, false); /* nobody dead (or no answer) */
    memcpy(eng->sem_reap.dead, r->element[0]->str, r->element[0]->len);
    eng->sem_reap.dead[r->element[0]->len] = '\0';
    names = r->element[1];
    eng->sem_reap.pending = 1; /* held until every call is out */
    for (i = 0; i < names->elements; i++) {
        if (names->element[i]->type == POOL_REPLY_STRING)
            reap_send_one(eng, names->element[i]->str, names->element[i]->len);
    }
    reap_done_on_reply(eng, &(struct pool_result){0});
}

static void reap_on_timer(struct sched_timer *t)
{
    struct lk_engine *eng = LP_CONTAINER_OF(t, struct lk_engine, sem_reap.reap);
    char all[REAP_KEY], max[24];
    const char *argv[4] = {all, REAP_PREFIX, eng->uuid, max};
    size_t lens[4];

    if (eng->sem_reap.reaping)
        return;
    lens[0] = (size_t)snprintf(all, sizeof(all), REAP_PREFIX "all");
    lens[1] = sizeof(REAP_PREFIX) - 1;
    lens[2] = strlen(eng->uuid);
    lens[3] = util_u64_to_str(PX_SEM_REAP_NAMES, max);
    eng->sem_reap.reaping = true;
    if (px_script_eval(eng, reap_hint(), px__sem_script(eng, PX__SEM_REAP_FIND), 1, 4, argv, lens,
                       reap_find_on_reply, eng) < 0)
        reap_round_end(eng, false);
}

int px_sem_reap_init(struct lk_engine *eng)
{
    int rc = hmap_init(&eng->sem_reap.registered, 64);

    if (rc < 0)
        return rc;
    sched_timer_init(&eng->sem_reap.alive, alive_on_timer);
    sched_timer_init(&eng->sem_reap.reap, reap_on_timer);
    /* The liveness key is written from the first registration on: a proxy
     * that keeps no ledger writes nothing. */
    sched_loop_timer_in(eng->loop, &eng->sem_reap.reap, eng->cfg.watchdog_ms);
    return 0;
}

void px_sem_reap_deinit(struct lk_engine *eng)
{
    sched_loop_timer_del(eng->loop, &eng->sem_reap.alive);
    sched_loop_timer_del(eng->loop, &eng->sem_reap.reap);
    registered_clear(eng);
    hmap_deinit(&eng->sem_reap.registered);
}
