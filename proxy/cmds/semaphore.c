/* Semaphores over Redisson's layouts (SEM.*: RSemaphore, spec section 6,
 * in sem.c; PSEM.*: RPermitExpirableSemaphore, section 7, in psem.c): the
 * scripts both use, keys, argument rules, INFO "sync" and the command
 * table. Waiting acquires run on the wait engine (wait.h), like every
 * other waiting command.
 *
 * Every script checks the types of its keys before writing (WRONGTYPE on
 * an RLock hash, a list, a non-integer string...), and every increase of a
 * count publishes the new count (decimal, > 0) on redisson_sc:{name}, so
 * Redisson's acquire() wakes. Rejected: one subscription per waiter
 * (Redisson's cost; pain point 1) and waiting without a re-check
 * (Redisson's acquire() hangs on a lost message; pain points 3, 18). */
#include "proxy/cmds/semaphore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/jobs.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/call.h"
#include "proxy/cmds/sem-int.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define SEM_CHANNEL_PREFIX "redisson_sc:"

/* ---- scripts ---------------------------------------------------------------- */

static const struct px_lua *const sem_scripts[PX__SEM_NSCRIPTS] = {
    &px_lua_sem_tryset,    &px_lua_sem_add,        &px_lua_sem_acquire,   &px_lua_sem_release,
    &px_lua_sem_available, &px_lua_sem_drain,      &px_lua_psem_tryset,   &px_lua_psem_acquire,
    &px_lua_psem_release,  &px_lua_psem_available, &px_lua_sem_return,    &px_lua_sem_ledger,
    &px_lua_sem_alive,     &px_lua_sem_register,   &px_lua_sem_reap_find, &px_lua_sem_reap,
    &px_lua_sem_reap_done,
};

static unsigned sem_script_base;
const struct px_script_set px_sem_script_set = {sem_scripts, PX__SEM_NSCRIPTS, &sem_script_base};

unsigned px__sem_script(enum px__sem_script s)
{
    return sem_script_base + (unsigned)s;
}

/* ---- keys and channels -------------------------------------------------- */

size_t px__sem_channel(const char *name, size_t len, char *out, size_t cap)
{
    return px_channel_name(out, cap, SEM_CHANNEL_PREFIX, name, len);
}

int px__sem_keys_fill(struct px__sem_keys *k, const char *name, size_t len, bool psem)
{
    size_t zlen;

    k->argv[0] = name;
    k->lens[0] = len;
    k->argv[psem ? 2 : 1] = k->chan;
    k->lens[psem ? 2 : 1] = px__sem_channel(name, len, k->chan, sizeof(k->chan));
    if (!psem)
        return 2;
    zlen = px_channel_name(k->zset, sizeof(k->zset) - 8, "", name, len);
    memcpy(k->zset + zlen, ":timeout", 9);
    k->argv[1] = k->zset;
    k->lens[1] = zlen + 8;
    return 3;
}

void px__sem_keys_arg(struct px__sem_keys *k, int i, const char *p, size_t len)
{
    k->argv[i] = p;
    k->lens[i] = len;
}

void px__sem_keys_ledger(struct px__sem_keys *k, int i, const struct lk_engine *eng,
                         const char *name, size_t len)
{
    size_t n = px_channel_name(k->ledger, PX_CHANNEL_MAX, "", name, len);

    n += (size_t)snprintf(k->ledger + n, sizeof(k->ledger) - n, ":lp-permits:%s", eng->uuid);
    px__sem_keys_arg(k, i, k->ledger, n);
}

/* ---- returns for closed connections ------------------------------------------ */

struct sem_return {
    struct px_job job;                 /* the retried return */
    bool psem;                         /* a PSEM permit id, not SEM permits */
    bool rollback;                     /* PSEM: undoes an unconfirmed acquisition */
    uint64_t conn;                     /* SEM: the connection whose record goes back */
    int64_t forgiven;                  /* SEM: permits others released for it */
    int64_t exact;                     /* SEM: at most this many (0: its whole record) */
    unsigned char id[PX__PSEM_ID_LEN]; /* PSEM: the permit id */
    size_t nlen;                       /* name length */
    char name[];                       /* owned: the semaphore name */
};

static int return_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct sem_return *t = LP_CONTAINER_OF(j, struct sem_return, job);
    struct px__sem_keys k;
    char a1[24], a2[24], a3[24];
    int nk = px__sem_keys_fill(&k, t->name, t->nlen, t->psem);
    uint64_t hint = px_route_hint(t->name, t->nlen);

    if (t->psem) {
        px__sem_keys_arg(&k, nk, (const char *)t->id, PX__PSEM_ID_LEN);
        px__sem_keys_arg(
            &k, nk + 1, a2,
            (size_t)snprintf(a2, sizeof(a2), "%llu", (unsigned long long)clock_wall_ms()));
        return px_script_eval(j->eng, hint, px__sem_script(PX__PSEM_RELEASE), nk, nk + 2, k.argv,
                              k.lens, cb, arg);
    }
    px__sem_keys_ledger(&k, 2, j->eng, t->name, t->nlen);
    px__sem_keys_arg(&k, 3, a1,
                     (size_t)snprintf(a1, sizeof(a1), "%llu", (unsigned long long)t->conn));
    px__sem_keys_arg(&k, 4, a2, (size_t)snprintf(a2, sizeof(a2), "%lld", (long long)t->forgiven));
    px__sem_keys_arg(&k, 5, a3, (size_t)snprintf(a3, sizeof(a3), "%lld", (long long)t->exact));
    return px_script_eval(j->eng, hint, px__sem_script(PX__SEM_RETURN), 3, 6, k.argv, k.lens, cb,
                          arg);
}

/* SEM: {1, count, returned}, {0, 0, 0} the semaphore is gone, {2, 0, 0}
 * nothing recorded to return (returned by an earlier send whose reply was
 * lost, or lost with a failover); PSEM: 1 or 0 (it had expired) returned,
 * -1 unknown (reclaimed already). */
static void return_done(struct px_job *j, const redisReply *r)
{
    struct sem_return *t = LP_CONTAINER_OF(j, struct sem_return, job);
    long long v[3];

    if (r->type == REDIS_REPLY_ERROR)
        log_msg(LOG_LVL_WARN, "returning permits of '%.*s' failed: %.*s",
                (int)LP_MIN(t->nlen, 200u), t->name, (int)LP_MIN(r->len, 200u), r->str);
    else if (t->psem && r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && t->rollback)
        j->eng->stats.rolled_back++;
    else if (t->psem && r->type == REDIS_REPLY_INTEGER && r->integer >= 0)
        j->eng->sem_stats.psem_returned++;
    else if (!t->psem && px__sem_triple_reply(r, v) && v[0] == 1 && v[2] > 0 && t->exact > 0) {
        j->eng->sem_stats.sem_restored += (uint64_t)v[2];
        log_msg(LOG_LVL_WARN,
                "gave back %lld permits of '%.*s' the new master recorded for connection %llu, "
                "closed (a release or a return the topology change lost)",
                v[2], (int)LP_MIN(t->nlen, 200u), t->name, (unsigned long long)t->conn);
    } else if (!t->psem && px__sem_triple_reply(r, v) && v[0] == 1 && v[2] > 0)
        j->eng->sem_stats.sem_returned += (uint64_t)v[2];
    free(t);
}

static void return_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    free(LP_CONTAINER_OF(j, struct sem_return, job));
}

static const struct px_job_ops sem_return_ops = {
    .what = "return of a closed connection's semaphore permits",
    .group = PX_JOB_RELEASE,
    .idempotent = true, /* the script clears the record it returns */
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static const struct px_job_ops psem_return_ops = {
    .what = "return of a closed connection's semaphore permit",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static const struct px_job_ops psem_rollback_ops = {
    .what = "roll-back of an unconfirmed semaphore permit",
    .group = PX_JOB_ROLLBACK,
    .idempotent = true,
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static struct sem_return *return_new(const char *name, size_t nlen)
{
    struct sem_return *t = calloc(1, sizeof(*t) + nlen + 1);

    if (!t) {
        log_msg(LOG_LVL_WARN, "cannot return permits of '%.*s': out of memory",
                (int)LP_MIN(nlen, 200u), name);
        return NULL;
    }
    t->nlen = nlen;
    memcpy(t->name, name, nlen);
    return t;
}

void px__sem_return(struct lk_engine *eng, const char *name, size_t nlen, const unsigned char *id,
                    uint64_t until, bool rollback)
{
    struct sem_return *t = return_new(name, nlen);

    if (!t)
        return;
    t->psem = true;
    t->rollback = rollback;
    memcpy(t->id, id, PX__PSEM_ID_LEN);
    px_job_init(&t->job, eng, rollback ? &psem_rollback_ops : &psem_return_ops);
    px_job_submit(&t->job, until);
}

void px__sem_return_taken(struct lk_engine *eng, const char *name, size_t nlen, uint64_t conn,
                          int64_t forgiven, int64_t exact)
{
    struct sem_return *t = return_new(name, nlen);

    if (!t)
        return;
    t->conn = conn;
    t->forgiven = forgiven;
    t->exact = exact;
    px_job_init(&t->job, eng, &sem_return_ops);
    px_job_submit(&t->job, sched_loop_now_ms(eng->loop) + PX__SEM_RETURN_WINDOW_MS);
}

/* ---- replies and arguments ------------------------------------------------ */

void px__sem_reply_notinit(struct px_req *req)
{
    bool psem = req->argv[0].len > 0 && (req->argv[0].p[0] | 0x20) == 'p';

    px_reply_error(px_req_out(req),
                   "NOTINIT semaphore '%.*s' has no permits set (use %s.TRYSETPERMITS first)",
                   (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p, psem ? "PSEM" : "SEM");
}

bool px__sem_pair_reply(const redisReply *r, long long *status, long long *value)
{
    long long v[2];
    size_t n;

    if (!px_shape_ints(r, 2, 2, v, &n))
        return false;
    *status = v[0];
    *value = v[1];
    return true;
}

bool px__sem_triple_reply(const redisReply *r, long long v[3])
{
    size_t n;

    return px_shape_ints(r, 3, 3, v, &n);
}

bool px__sem_may_block(const struct px_req *req)
{
    return !px_call_wait_zero(req);
}

/* ---- acquire arguments ---- */

static bool is_keyword(const struct px_arg *a)
{
    return px_args_is(a, "WAIT") || px_args_is(a, "KEEP") || px_args_is(a, "LEASE");
}

/* One option at argv[*i] ("KEEP", or "WAIT ms" / "LEASE ms" when allowed).
 * Advances *i. Replies and returns -EINVAL on bad input. */
static int parse_option(struct px_req *req, int *i, bool wait_ok, bool lease_ok,
                        struct px__sem_acquire_args *a)
{
    const struct px_arg *opt = &req->argv[*i];
    bool wait = wait_ok && px_args_is(opt, "WAIT");
    bool lease = lease_ok && px_args_is(opt, "LEASE");
    const char *keyword = wait ? "WAIT" : "LEASE";

    if (px_args_is(opt, "KEEP")) {
        a->keep = true;
        *i += 1;
        return 0;
    }
    if (!wait && !lease) {
        px_args_reply_option(req, opt);
        return -EINVAL;
    }
    if (*i + 1 >= req->argc) {
        px_args_reply_no_value(req, keyword, strlen(keyword));
        return -EINVAL;
    }
    *i += 2;
    if (wait)
        return px_args_parse_ms(req, *i - 1, keyword, 0, &a->wait_ms);
    return px_args_parse_lease(req, *i - 1, &a->lease_ms);
}

int px__sem_parse_acquire(struct px_req *req, bool count_ok, bool wait_ok, bool lease_ok,
                          struct px__sem_acquire_args *a)
{
    int i = 2;

    a->permits = 1;
    a->wait_ms = -1;
    a->lease_ms = -1;
    a->keep = false;
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return -EINVAL;
    if (count_ok && req->argc > 2 && !is_keyword(&req->argv[2])) {
        if (px_args_parse_count(req, 2, "permits", 1, &a->permits) < 0)
            return -EINVAL;
        i = 3;
    }
    while (i < req->argc) {
        if (parse_option(req, &i, wait_ok, lease_ok, a) < 0)
            return -EINVAL;
    }
    return 0;
}

/* ---- tables and INFO -------------------------------------------------------- */

static const struct px_cmd sem_cmds[] = {
    {"SEM.TRYSETPERMITS", 3, 3, px__sem_cmd_trysetpermits, NULL, 1},
    {"SEM.ADDPERMITS", 3, 3, px__sem_cmd_addpermits, NULL, 1},
    {"SEM.ACQUIRE", 2, 6, px__sem_cmd_acquire, px__sem_may_block, 1},
    {"SEM.TRYACQUIRE", 2, 4, px__sem_cmd_tryacquire, NULL, 1},
    {"SEM.RELEASE", 2, 3, px__sem_cmd_release, NULL, 1},
    {"SEM.AVAILABLE", 2, 2, px__sem_cmd_available, NULL, 1},
    {"SEM.DRAIN", 2, 2, px__sem_cmd_drain, NULL, 1},
    {"PSEM.TRYSETPERMITS", 3, 3, px__psem_cmd_trysetpermits, NULL, 1},
    {"PSEM.ACQUIRE", 2, 7, px__psem_cmd_acquire, px__sem_may_block, 1},
    {"PSEM.TRYACQUIRE", 2, 5, px__psem_cmd_tryacquire, NULL, 1},
    {"PSEM.RELEASE", 3, 3, px__psem_cmd_release, NULL, 1},
    {"PSEM.AVAILABLE", 2, 2, px__psem_cmd_available, NULL, 1},
};
const struct px_cmd_set px_sem_cmd_set = {sem_cmds, LP_ARRAY_SIZE(sem_cmds)};

void px_sync_info(struct px_server *srv, struct buf *o)
{
    const struct px__sem_stats *s = &srv->engine->sem_stats;

    buf_appendf(o,
                "# Sync\r\nsem_waiters:%llu\r\nsem_acquired:%llu\r\nsem_wait_timeouts:%llu\r\n"
                "sem_permits_tracked:%lld\r\nsem_permits_returned:%llu\r\n"
                "sem_unknown_outcomes:%llu\r\nsem_permits_released_for_others:%llu\r\n"
                "sem_permits_lost:%llu\r\nsem_permits_restored:%llu\r\n",
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_SEM),
                (unsigned long long)s->sem_acquired,
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_SEM),
                (long long)s->sem_tracked, (unsigned long long)s->sem_returned,
                (unsigned long long)s->sem_unknown, (unsigned long long)s->sem_released_for_others,
                (unsigned long long)s->sem_lost, (unsigned long long)s->sem_restored);
    buf_appendf(o, "sem_dead_proxy_permits_returned:%llu\r\nsem_reaped_self:%llu\r\n",
                (unsigned long long)srv->engine->sem_reap.permits_returned,
                (unsigned long long)srv->engine->sem_reap.reaped_self);
    buf_appendf(o,
                "psem_waiters:%llu\r\npsem_acquired:%llu\r\npsem_wait_timeouts:%llu\r\n"
                "psem_permits_tracked:%lld\r\npsem_permits_returned:%llu\r\n"
                "latch_waiters:%llu\r\nlatch_wait_timeouts:%llu\r\n\r\n",
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_PSEM),
                (unsigned long long)s->psem_acquired,
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_PSEM),
                (long long)s->psem_tracked, (unsigned long long)s->psem_returned,
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_LATCH),
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_LATCH));
}
