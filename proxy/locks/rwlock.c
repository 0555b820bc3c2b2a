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
#include "proxy/locks/rwlock.h"

#include <stdio.h>
#include <string.h>

#include "common/compiler.h"
#include "common/util.h"
#include "pool/pool.h"
#include "proxy/locks/hold.h"
#include "proxy/locks/lock.h"
#include "proxy/locks/scripts.h"
#include "proxy/locks/wait.h"
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

/* Lua: mode = the hash's mode; a hash without one is another lock kind. */
#define RW_MODE                                                                                   \
    "local mode = redis.call('hget', KEYS[1], 'mode'); "                                          \
    "if (mode == false and redis.call('exists', KEYS[1]) == 1) then return redis.error_reply("    \
    "'WRONGTYPE the name holds a lock that is not a read-write lock (use LOCK/FAIRLOCK)'); end; " \
    "if (mode and mode ~= 'read' and mode ~= 'write') then return redis.error_reply("             \
    "'WRONGTYPE the name holds a hash whose mode is neither read nor write'); end; "

/* Lua: a read hold is gone; settle the hash as Redisson's read unlock does
 * (KEYS name, channel, -, {name}): while other holders remain, the hash
 * lives as long as the longest remaining read hold; with none left (or
 * only expired ones), it goes and "0" wakes a waiter. In write mode the
 * writer's lease rules: nothing changes. */
#define RW_SETTLE                                                             \
    "if (mode == 'write') then return r; end; "                               \
    "if (redis.call('hlen', KEYS[1]) > 1) then local m = -3; "                \
    "for _, f in ipairs(redis.call('hkeys', KEYS[1])) do "                    \
    "local n = tonumber(redis.call('hget', KEYS[1], f)); "                    \
    "if (n) then for i = n, 1, -1 do m = math.max(m, redis.call('pttl', "     \
    "KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i)); end; end; end; "       \
    "if (m > 0) then redis.call('pexpire', KEYS[1], m); return r; end; end; " \
    "redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], '0'); return r;"

/* Free: take it as read. Read mode, or write mode held by this owner's
 * write hold (downgrade): one more read hold. Else report the PTTL. */
static const char read_acquire_lua[] = RW_MODE /* then: */
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {1, 1}; end; "
    "if (mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), "
    "tonumber(ARGV[1]))); return {1, n}; end; "
    "return {0, redis.call('pttl', KEYS[1])};";

/* Free: take it as write. Write mode held by this owner: re-enter. A
 * reader of the lock asking for it: error (it would wait for itself). */
static const char write_acquire_lua[] = RW_MODE /* then: */
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {1, 1}; end; "
    "if (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "local n = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {1, n}; end; "
    "if (mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "return redis.error_reply('ERR upgrade from read to write lock is not supported; "
    "RUNLOCK first'); end; "
    "return {0, redis.call('pttl', KEYS[1])};";

/* Redisson's read unlock (no latch); replies 1 when this owner's last read
 * hold went, 0 while it has more. */
static const char read_unlock_lua[] = RW_MODE /* then: */
    "if (mode == false) then redis.call('publish', KEYS[2], '0'); return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[1]) == 0) then return nil; end; "
    "local c = redis.call('hincrby', KEYS[1], ARGV[1], -1); "
    "if (c == 0) then redis.call('hdel', KEYS[1], ARGV[1]); end; "
    "redis.call('del', KEYS[3] .. ':' .. (c + 1)); "
    "local r = 0; if (c == 0) then r = 1; end; " RW_SETTLE;

/* Redisson's write unlock (no latch). */
static const char write_unlock_lua[] = RW_MODE /* then: */
    "if (mode == false) then redis.call('publish', KEYS[2], '1'); return nil; end; "
    "if (mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0) then "
    "return nil; end; "
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (c > 0) then redis.call('pexpire', KEYS[1], ARGV[1]); return 0; end; "
    "redis.call('hdel', KEYS[1], ARGV[2]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; "
    "redis.call('publish', KEYS[2], '1'); return 1;";

/* Settles one reader (hold.h): read holds above ARGV[2] go (their timeout
 * keys with them); at 0 the reader leaves, and the hash is settled as a
 * read unlock does. Replies the count before. */
static const char read_settle_lua[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); if (mode == false) then return 0; end; "
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1])); if (n == nil) then return 0; end; "
    "local keep = tonumber(ARGV[2]); if (n <= keep) then return n; end; "
    "for i = keep + 1, n do redis.call('del', KEYS[3] .. ':' .. i); end; "
    "if (keep == 0) then redis.call('hdel', KEYS[1], ARGV[1]); "
    "else redis.call('hset', KEYS[1], ARGV[1], keep); end; local r = n; " RW_SETTLE;

/* Settles one writer: a write count above ARGV[2] becomes ARGV[2]; at 0 the
 * write hold goes as a write unlock's last one does ("1": readers go).
 * Replies the count before. */
static const char write_settle_lua[] =
    "if (redis.call('hget', KEYS[1], 'mode') ~= 'write') then return 0; end; "
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'); "
    "if (n <= tonumber(ARGV[2])) then return n; end; "
    "if (ARGV[2] ~= '0') then redis.call('hset', KEYS[1], ARGV[1], ARGV[2]); return n; end; "
    "redis.call('hdel', KEYS[1], ARGV[1]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then redis.call('del', KEYS[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; "
    "redis.call('publish', KEYS[2], '1'); return n;";

/* Batched ReadLockTask: for each (name, reader) still holding reads,
 * extend every one of its timeout keys and the hash (never shortening it).
 * The {name} rule is applied here, as px_channel_name() does. pcall keeps
 * one odd key from failing the batch. */
static const char read_renew_lua[] =
    "local r = {}; "
    "for i = 1, #KEYS do local v = redis.pcall('hget', KEYS[i], ARGV[i + 1]); "
    "local n = (type(v) == 'string') and tonumber(v); "
    "if (n and n > 0) then local p = KEYS[i]; "
    "if (not string.find(p, '{', 1, true)) then p = '{' .. p .. '}'; end; "
    "for k = n, 1, -1 do redis.call('pexpire', p .. ':' .. ARGV[i + 1] .. "
    "':rwlock_timeout:' .. k, ARGV[1]); end; "
    "if (redis.call('pttl', KEYS[i]) < tonumber(ARGV[1])) then "
    "redis.call('pexpire', KEYS[i], ARGV[1]); end; r[i] = 1; "
    "else r[i] = 0; end; end; "
    "return r;";

static const struct pool_script rw_scripts[RW_COUNT] = {
    {"rw_read_acquire", read_acquire_lua}, {"rw_write_acquire", write_acquire_lua},
    {"rw_read_unlock", read_unlock_lua},   {"rw_write_unlock", write_unlock_lua},
    {"rw_read_settle", read_settle_lua},   {"rw_write_settle", write_settle_lua},
    {"rw_read_renew", read_renew_lua},
};

static unsigned rw_script_base;
const struct px_script_set px_rwlock_script_set = {rw_scripts, RW_COUNT, &rw_script_base};

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
    return px_metrics_eval(srv, hint, rw_script_base + script, 4, 5, argv, lens, cb, arg);
}

/* ---- hold kinds ------------------------------------------------------------------ */

static unsigned read_renew_script(void)
{
    return rw_script_base + RW_READ_RENEW;
}

static unsigned write_renew_script(void)
{
    return PX_SCRIPT_RENEW; /* HEXISTS <owner>:write -> PEXPIRE, as RLock */
}

static int read_settle(struct px_server *srv, const char *name, size_t nlen, const char *owner,
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
    return px_metrics_eval(srv, px_route_hint(name, nlen), rw_script_base + RW_READ_SETTLE, 4, 6,
                           argv, lens, cb, arg);
}

static int write_settle(struct px_server *srv, const char *name, size_t nlen, const char *owner,
                        size_t olen, const struct px_settle *st, pool_reply_fn *cb, void *arg)
{
    char chan[PX_CHANNEL_MAX], keep[24];
    const char *argv[4] = {name, chan, owner, keep};
    size_t lens[4] = {nlen, 0, olen, 0};

    lens[1] = px_channel_name(chan, sizeof(chan), RW_CHANNEL_PREFIX, name, nlen);
    lens[3] = util_u64_to_str(st->keep, keep);
    return px_metrics_eval(srv, px_route_hint(name, nlen), rw_script_base + RW_WRITE_SETTLE, 2, 4,
                           argv, lens, cb, arg);
}

static const struct px_hold_kind read_hold = {"read lock", read_renew_script, read_settle,
                                               false};
static const struct px_hold_kind write_hold = {"write lock", write_renew_script, write_settle,
                                                true};

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
    return px_metrics_eval(srv, a->hint, rw_script_base + RW_READ_ACQUIRE, 2, 5, argv, lens, cb,
                           arg);
}

static int write_acquire(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb,
                         void *arg)
{
    char lease[24];
    const char *argv[4] = {a->name, lease, a->owner, a->owner};
    size_t lens[4] = {a->nlen, 0, a->olen, a->base_olen}; /* the reader: owner minus ":write" */

    lens[1] = util_u64_to_str(a->lease_ms, lease);
    return px_metrics_eval(srv, a->hint, rw_script_base + RW_WRITE_ACQUIRE, 1, 4, argv, lens, cb,
                           arg);
}

static int read_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return send_read_keys(srv, a->hint, RW_READ_UNLOCK, a->name, a->nlen, a->owner, a->olen, cb,
                          arg);
}

static int write_unlock(struct px_server *srv, const struct px_acq *a, pool_reply_fn *cb, void *arg)
{
    return px_lock_eval_unlock(srv, a, rw_script_base + RW_WRITE_UNLOCK, rw_channel, cb, arg);
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
