/* Fair lock commands: a lock kind for lock.c's acquire/unlock machinery
 * and a hold kind for hold.c's watchdog and release on disconnect.
 *
 * State in Redis (Redisson's layout, spec section 4), per name:
 *   the RLock hash (owner -> count, PTTL = lease);
 *   redisson_lock_queue:{name}: LIST of waiting owners, oldest first;
 *   redisson_lock_timeout:{name}: ZSET owner -> epoch ms by which that
 *     waiter must reach the head (its predecessor's deadline, or the
 *     holder's lease end, plus threadWaitTime = WAIT, else 300000 ms).
 * Every script first drops stale heads (deadline passed, or no deadline
 * at all: a half-written entry, where Redisson's Lua would fail). The
 * lock goes only to the queue head, or to anyone while the queue is
 * empty, so FIFO holds across every proxy and every Redisson client.
 * A release publishes "0" on redisson_lock__channel:{name}:<head> only.
 *
 * Waiting: a waiting FAIRLOCK queues itself from its first attempt (the
 * acquire script's waiting variant; WAIT 0 never queues), subscribes to its
 * own channel through the waitset (one subscription per waiting owner is
 * inherent to the layout; owners of this proxy waiting as the same OWNER
 * token share it), and re-tries when woken or when the holder's lease (or,
 * if the lock is free, the head's deadline) ends.
 *
 * Invariants:
 * - A waiter that ends without the lock (WAIT ran out, its connection
 *   closed, an error) is dequeued at once by its hold's settle (hold.h):
 *   Redisson's acquireFailed (later waiters' deadlines move up by its
 *   threadWaitTime, then ZREM + LREM), and, if it was the head of a free
 *   lock, the next head is woken. So a proxy waiter never blocks the ones
 *   behind it, and leaves no queue or ZSET entry behind; the settle is
 *   retried until Redis answers (or the entry's deadline passes).
 * - Scripts refuse a read-write lock's hash (WRONGTYPE): its read owner
 *   fields look like ours.
 * - Deadlines use this host's wall clock (clock_wall_ms()), like Redisson's
 *   System.currentTimeMillis(): clock skew between hosts shifts them.
 *
 * Ownership: nothing here outlives a call; key names are built on the
 * stack and pool_eval copies its arguments. */
#include "proxy/cmds/fairlock.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "engine/hold.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/cmds/lock.h"
#include "proxy/metrics.h"
#include "proxy/request.h"
#include "proxy/server.h"

#define FAIR_CHANNEL_PREFIX "redisson_lock__channel:"
#define FAIR_QUEUE_PREFIX   "redisson_lock_queue:"
#define FAIR_ZSET_PREFIX    "redisson_lock_timeout:"

/* All scripts: KEYS name, queue, timeouts; ARGV now, owner, channel
 * prefix (redisson_lock__channel:{name}), then their own. */
enum fair_script {
    FAIR_ACQUIRE = 0, /* + lease, threadWaitTime, may queue (0|1) -> {1,n} | {0,ms} */
    FAIR_UNLOCK = 1,  /* + lease -> nil | 0 | 1 */
    FAIR_SETTLE = 2,  /* + keep, dequeue (0|1), threadWaitTime -> count before */
    FAIR_COUNT = 3,
};

static const struct px_lua *const fair_scripts[FAIR_COUNT] = {
    &px_lua_fair_acquire,
    &px_lua_fair_unlock,
    &px_lua_fair_settle,
};

const struct px_script_set px_fairlock_script_set = {fair_scripts, FAIR_COUNT, LK_SCRIPTS_FAIR};

/* ---- script arguments ---------------------------------------------------------- */

/* The common keys and arguments of every fair script, plus up to three
 * numeric ones; argv/lens point into the struct. */
struct fair_args {
    char queue[PX_CHANNEL_MAX]; /* redisson_lock_queue:{name} */
    char zset[PX_CHANNEL_MAX];  /* redisson_lock_timeout:{name} */
    char chan[PX_CHANNEL_MAX];  /* redisson_lock__channel:{name} */
    char num[4][24];            /* now, then the script's numbers */
    const char *argv[9];        /* KEYS name, queue, zset; ARGV now, owner, chan, ... */
    size_t lens[9];             /* lengths of argv */
    int argc;                   /* entries used */
    int nnum;                   /* num[] entries used */
};

static void fair_push(struct fair_args *f, const char *p, size_t len)
{
    f->argv[f->argc] = p;
    f->lens[f->argc++] = len;
}

/* Appends a decimal argument. */
static void fair_push_num(struct fair_args *f, uint64_t v)
{
    char *buf = f->num[f->nnum++];

    fair_push(f, buf, (size_t)snprintf(buf, sizeof(f->num[0]), "%llu", (unsigned long long)v));
}

static void fair_args_init(struct fair_args *f, const char *name, size_t nlen, const char *owner,
                           size_t olen)
{
    size_t qlen = px_channel_name(f->queue, sizeof(f->queue), FAIR_QUEUE_PREFIX, name, nlen);
    size_t zlen = px_channel_name(f->zset, sizeof(f->zset), FAIR_ZSET_PREFIX, name, nlen);
    size_t clen = px_channel_name(f->chan, sizeof(f->chan), FAIR_CHANNEL_PREFIX, name, nlen);

    f->argc = 0;
    f->nnum = 0;
    fair_push(f, name, nlen);
    fair_push(f, f->queue, qlen);
    fair_push(f, f->zset, zlen);
    fair_push_num(f, clock_wall_ms());
    fair_push(f, owner, olen);
    fair_push(f, f->chan, clen);
}

static int fair_send(struct px_server *srv, uint64_t hint, unsigned script,
                     const struct fair_args *f, pool_reply_fn *cb, void *arg)
{
    return px_script_eval(srv->engine, hint, srv->engine->script_bases[LK_SCRIPTS_FAIR] + script, 3,
                          f->argc, f->argv, f->lens, cb, arg);
}

/* threadWaitTime: WAIT when given (and not 0), else fairLockWaitTimeout. */
static uint64_t fair_wait_time(const struct px_acq *a)
{
    return a->wait_ms > 0 ? (uint64_t)a->wait_ms : PX_FAIR_WAIT_DEFAULT_MS;
}

/* ---- hold kind ------------------------------------------------------------------- */

static unsigned fair_renew_script(const struct lk_engine *eng)
{
    (void)eng;
    return PX_SCRIPT_RENEW; /* the hash is an RLock hash: HEXISTS -> PEXPIRE */
}

static int fair_settle(struct lk_engine *eng, const char *name, size_t nlen, const char *owner,
                       size_t olen, const struct px_settle *st, pool_reply_fn *cb, void *arg)
{
    struct fair_args f;

    fair_args_init(&f, name, nlen, owner, olen);
    fair_push_num(&f, st->keep);
    fair_push(&f, st->dequeue ? "1" : "0", 1);
    fair_push_num(&f, st->wait_ms);
    return fair_send(px_server_of(eng), px_route_hint(name, nlen), FAIR_SETTLE, &f, cb, arg);
}

static const struct px_hold_kind fair_hold = {"fair lock", "FAIRLOCK", fair_renew_script,
                                              fair_settle, true};

/* ---- lock kind ------------------------------------------------------------------- */

static int fair_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    struct fair_args f;

    fair_args_init(&f, a->name, a->nlen, a->owner, a->olen);
    fair_push_num(&f, a->lease_ms);
    fair_push_num(&f, fair_wait_time(a));
    fair_push(&f, a->waiting ? "1" : "0", 1);
    return fair_send(srv, a->hint, FAIR_ACQUIRE, &f, cb, arg);
}

static int fair_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    struct fair_args f;

    fair_args_init(&f, a->name, a->nlen, a->owner, a->olen);
    fair_push_num(&f, a->lease_ms);
    return fair_send(srv, a->hint, FAIR_UNLOCK, &f, cb, arg);
}

/* Writes redisson_lock__channel:{name}:<owner>. */
static size_t fair_channel(const struct px_acq *a, char *out, size_t cap)
{
    size_t n = px_channel_name(out, cap, FAIR_CHANNEL_PREFIX, a->name, a->nlen);

    if (n == 0 || n + 1 + a->olen >= cap)
        return 0;
    out[n++] = ':';
    memcpy(out + n, a->owner, a->olen);
    out[n + a->olen] = '\0';
    return n + a->olen;
}

/* The waiter's queue entry outlives it by this much (its deadline). */
static uint64_t fair_queue_wait(const struct px_acq *a)
{
    return fair_wait_time(a);
}

static const struct px_lock_kind fair_kind = {
    "", &fair_hold, fair_acquire, fair_unlock, fair_channel, fair_queue_wait, false, false,
};

/* ---- commands ---------------------------------------------------------------------- */

static void fair_cmd_lock(struct px_req *req)
{
    px_lock_cmd_acquire(req, &fair_kind, false);
}

static void fair_cmd_unlock(struct px_req *req)
{
    px_lock_cmd_release(req, &fair_kind);
}

static const struct px_cmd fair_cmds[] = {
    {"FAIRLOCK", 2, 8, fair_cmd_lock, px_lock_may_block, 1},
    {"FAIRUNLOCK", 2, 4, fair_cmd_unlock, NULL, 1},
};
const struct px_cmd_set px_fairlock_cmd_set = {fair_cmds, LP_ARRAY_SIZE(fair_cmds)};
