/* Read-write lock commands: two lock kinds (read, write) for lock.c's
 * acquire/unlock machinery, and two hold kinds for hold.c's watchdog and
 * release on disconnect.
 *
 * State in Redis (Redisson's layout, spec section 5), per name:
 *   FREE: no hash.
 *   READ: hash {mode=read, <reader>=count...}; every read hold n of a
 *     reader also has {name}:<reader>:rwlock_timeout:<n> (PX lease); the
 *     hash's TTL is the longest of them.
 *   WRITE: hash {mode=write, <owner>:write=count[, <owner>=reads]}: the
 *     writer may also take read holds (downgrade); when its write hold ends
 *     with reads left, the mode turns back to read.
 * Transitions publish on redisson_rwlock:{name}: "0" when the last read
 * hold goes (one waiter, necessarily a writer, may proceed), "1" when a
 * write hold ends: every waiting reader re-tries (all can go in), but only
 * the first waiting writer does (only one can win; waitset.c).
 *
 * Invariants:
 * - Every script refuses a hash without "mode" (a plain or fair lock) with
 *   WRONGTYPE instead of adding a mode to it; plain lock scripts refuse a
 *   hash with one (lock.c), so neither kind's counts are ever corrupted.
 * - A reader asking for the write lock gets an error at once (Redisson
 *   would wait forever: the upgrade can never be granted while it reads).
 * - Read holds are renewed as Redisson's ReadLockTask does: every timeout
 *   key of the owner and the hash (never shortened); write holds as RLock
 *   holds (HEXISTS <owner>:write -> PEXPIRE).
 * Differences from Redisson, all on the safe side: a write release that
 * leaves the writer's own reads publishes "1" (Redisson does not, so its
 * readers sleep until the lease ends); a read release in write mode never
 * touches the hash's TTL (Redisson may shorten the writer's lease to a
 * read hold's); write re-entry resets the lease like LOCK (Redisson adds).
 *
 * Ownership: nothing here outlives a call; buffers for key names are on
 * the stack, and pool_eval copies its arguments. */
#include "proxy/cmds/rwlock.h"

#include <stdio.h>
#include <string.h>

#include "common/compiler.h"
#include "common/util.h"
#include "engine/hold.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/cmds/lock.h"
#include "proxy/metrics.h"
#include "proxy/request.h"
#include "proxy/server.h"

#define RW_CHANNEL_PREFIX "redisson_rwlock:"
#define RW_WRITE_SUFFIX   ":write"

enum rw_script {
    RW_READ_ACQUIRE = 0,  /* KEYS name, tprefix; ARGV lease, reader, writer -> {1,n} | {0,pttl} */
    RW_WRITE_ACQUIRE = 1, /* KEYS name; ARGV lease, writer, reader -> {1,n} | {0,pttl} */
    RW_READ_UNLOCK = 2,   /* KEYS name, channel, tprefix, kprefix; ARGV reader -> nil | 0 | 1 */
    RW_WRITE_UNLOCK = 3,  /* KEYS name, channel; ARGV lease, writer -> nil | 0 | 1 */
    RW_READ_SETTLE = 4,   /* KEYS name, channel, tprefix, kprefix; ARGV reader, keep -> count */
    RW_WRITE_SETTLE = 5,  /* KEYS name, channel; ARGV writer, keep -> count before */
    RW_READ_RENEW = 6,    /* KEYS n1..nN; ARGV lease, r1..rN -> {0|1,...} */
    RW_COUNT = 7,
};

static const struct px_lua *const rw_scripts[RW_COUNT] = {
    &px_lua_rw_read_acquire, &px_lua_rw_write_acquire, &px_lua_rw_read_unlock,
    &px_lua_rw_write_unlock, &px_lua_rw_read_settle,   &px_lua_rw_write_settle,
    &px_lua_rw_read_renew,
};

const struct px_script_set px_rwlock_script_set = {rw_scripts, RW_COUNT, LK_SCRIPTS_RW};

#define RW_BASE(eng) ((eng)->script_bases[LK_SCRIPTS_RW])

/* ---- key names ---------------------------------------------------------------- */

/* Redisson's aux names for one (name, reader). */
struct rw_keys {
    char chan[PX_CHANNEL_MAX];    /* redisson_rwlock:{name} */
    char kprefix[PX_CHANNEL_MAX]; /* {name} */
    char tprefix[PX_CHANNEL_MAX]; /* {name}:<reader>:rwlock_timeout */
    size_t chlen;                 /* length of chan */
    size_t klen;                  /* length of kprefix */
    size_t tlen;                  /* length of tprefix */
};

static void rw_keys_fill(struct rw_keys *k, const char *name, size_t nlen, const char *reader,
                         size_t rlen)
{
    k->chlen = px_channel_name(k->chan, sizeof(k->chan), RW_CHANNEL_PREFIX, name, nlen);
    k->klen = px_channel_name(k->kprefix, sizeof(k->kprefix), "", name, nlen);
    k->tlen = (size_t)snprintf(k->tprefix, sizeof(k->tprefix), "%s:%.*s:rwlock_timeout", k->kprefix,
                               (int)rlen, reader);
}

static size_t rw_channel(const struct px_acq *a, char *out, size_t cap)
{
    return px_channel_name(out, cap, RW_CHANNEL_PREFIX, a->name, a->nlen);
}

/* Sends a script whose keys are name, channel, tprefix, kprefix and whose
 * only argument is the reader (read unlock). */
static int send_read_keys(struct px_server *srv, uint64_t hint, unsigned script, const char *name,
                          size_t nlen, const char *reader, size_t rlen, pool_reply_fn *cb,
                          void *arg)
{
    struct rw_keys k;
    const char *argv[5];
    size_t lens[5];

    rw_keys_fill(&k, name, nlen, reader, rlen);
    argv[0] = name;
    lens[0] = nlen;
    argv[1] = k.chan;
    lens[1] = k.chlen;
    argv[2] = k.tprefix;
    lens[2] = k.tlen;
    argv[3] = k.kprefix;
    lens[3] = k.klen;
    argv[4] = reader;
    lens[4] = rlen;
    return px_script_eval(srv->engine, hint, RW_BASE(srv->engine) + script, 4, 5, argv, lens, cb,
                          arg);
}

/* ---- hold kinds ------------------------------------------------------------------ */

static unsigned read_renew_script(const struct lk_engine *eng)
{
    return RW_BASE(eng) + RW_READ_RENEW;
}

static unsigned write_renew_script(const struct lk_engine *eng)
{
    (void)eng;
    return PX_SCRIPT_RENEW; /* HEXISTS <owner>:write -> PEXPIRE, as RLock */
}

static int read_settle(struct lk_engine *eng, const char *name, size_t nlen, const char *owner,
                       size_t olen, const struct px_settle *st, pool_reply_fn *cb, void *arg)
{
    struct rw_keys k;
    char keep[24];
    const char *argv[6] = {name, k.chan, k.tprefix, k.kprefix, owner, keep};
    size_t lens[6] = {nlen, 0, 0, 0, olen, 0};

    rw_keys_fill(&k, name, nlen, owner, olen);
    lens[1] = k.chlen;
    lens[2] = k.tlen;
    lens[3] = k.klen;
    lens[5] = util_u64_to_str(st->keep, keep);
    return px_script_eval(eng, px_route_hint(name, nlen), RW_BASE(eng) + RW_READ_SETTLE, 4, 6, argv,
                          lens, cb, arg);
}

static int write_settle(struct lk_engine *eng, const char *name, size_t nlen, const char *owner,
                        size_t olen, const struct px_settle *st, pool_reply_fn *cb, void *arg)
{
    char chan[PX_CHANNEL_MAX], keep[24];
    const char *argv[4] = {name, chan, owner, keep};
    size_t lens[4] = {nlen, 0, olen, 0};

    lens[1] = px_channel_name(chan, sizeof(chan), RW_CHANNEL_PREFIX, name, nlen);
    lens[3] = util_u64_to_str(st->keep, keep);
    return px_script_eval(eng, px_route_hint(name, nlen), RW_BASE(eng) + RW_WRITE_SETTLE, 2, 4,
                          argv, lens, cb, arg);
}

static const struct px_hold_kind read_hold = {"read lock", "RLOCK", read_renew_script, read_settle,
                                              false};
static const struct px_hold_kind write_hold = {"write lock", "WLOCK", write_renew_script,
                                               write_settle, true};

/* ---- lock kinds ------------------------------------------------------------------ */

static int read_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    struct rw_keys k;
    char lease[24], writer[PX_OWNER_MAX];
    const char *argv[5] = {a->name, k.tprefix, lease, a->owner, writer};
    size_t lens[5] = {a->nlen, 0, 0, a->olen, 0};

    rw_keys_fill(&k, a->name, a->nlen, a->owner, a->olen);
    lens[1] = k.tlen;
    lens[2] = util_u64_to_str(a->lease_ms, lease);
    lens[4] =
        (size_t)snprintf(writer, sizeof(writer), "%.*s" RW_WRITE_SUFFIX, (int)a->olen, a->owner);
    return px_script_eval(srv->engine, a->hint, RW_BASE(srv->engine) + RW_READ_ACQUIRE, 2, 5, argv,
                          lens, cb, arg);
}

static int write_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb,
                         void *arg)
{
    char lease[24];
    const char *argv[4] = {a->name, lease, a->owner, a->owner};
    size_t lens[4] = {a->nlen, 0, a->olen, a->base_olen}; /* the reader: owner minus ":write" */

    lens[1] = util_u64_to_str(a->lease_ms, lease);
    return px_script_eval(srv->engine, a->hint, RW_BASE(srv->engine) + RW_WRITE_ACQUIRE, 1, 4, argv,
                          lens, cb, arg);
}

static int read_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return send_read_keys(srv, a->hint, RW_READ_UNLOCK, a->name, a->nlen, a->owner, a->olen, cb,
                          arg);
}

static int write_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return px_lock_eval_unlock(srv, a, RW_BASE(srv->engine) + RW_WRITE_UNLOCK, rw_channel, cb, arg);
}

static const struct px_lock_kind read_kind = {
    "", &read_hold, read_acquire, read_unlock, rw_channel, NULL, false, false,
};

static const struct px_lock_kind write_kind = {
    RW_WRITE_SUFFIX, &write_hold, write_acquire, write_unlock, rw_channel, NULL, true, false,
};

/* ---- commands ---------------------------------------------------------------------- */

static void rw_cmd_rlock(struct px_req *req)
{
    px_lock_cmd_acquire(req, &read_kind, false);
}

static void rw_cmd_runlock(struct px_req *req)
{
    px_lock_cmd_release(req, &read_kind);
}

static void rw_cmd_wlock(struct px_req *req)
{
    px_lock_cmd_acquire(req, &write_kind, false);
}

static void rw_cmd_wunlock(struct px_req *req)
{
    px_lock_cmd_release(req, &write_kind);
}

static const struct px_cmd rw_cmds[] = {
    {"RLOCK", 2, 8, rw_cmd_rlock, px_lock_may_block, 1},
    {"RUNLOCK", 2, 4, rw_cmd_runlock, NULL, 1},
    {"WLOCK", 2, 8, rw_cmd_wlock, px_lock_may_block, 1},
    {"WUNLOCK", 2, 4, rw_cmd_wunlock, NULL, 1},
};
const struct px_cmd_set px_rwlock_cmd_set = {rw_cmds, LP_ARRAY_SIZE(rw_cmds)};
