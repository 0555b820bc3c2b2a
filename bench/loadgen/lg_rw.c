/* The rwlock workload (read-mostly): each cycle takes the write lock with
 * probability --write-pct, else the read lock, of the client's key.
 *
 * Requests. proxy: RLOCK/RUNLOCK key or WLOCK/WUNLOCK key. direct:
 * Redisson's RReadWriteLock scripts (RedissonReadLock, RedissonWriteLock;
 * spec section 5) on the same layout: hash key {mode, <uuid>:<id> = read
 * holds, <uuid>:<id>:write = write holds}, one {key}:<uuid>:<id>:
 * rwlock_timeout:<n> key per read hold, wake-ups on redisson_rwlock:{key}
 * ("0" from the last read unlock, "1" from a write unlock). The scripts are
 * Redisson's, minus the unlock latch (as for RLock in lg_run.c: it only
 * adds a GET and a SET per unlock) and with PUBLISH written in (Redisson
 * passes the command name). Waiting is lg_sub.c's, as for RLock: the
 * acquire script returns the PTTL when the lock is taken.
 *
 * The draw uses a per-client splitmix64 stream seeded with the client id,
 * so every run and every target makes the same sequence of choices. */
#include <stdio.h>

#include "bench/loadgen/lg_run.h"
#include "common/buf.h"

/* RedissonReadLock.tryLockInnerAsync: nil when taken, else the PTTL.
 * KEYS name, timeout prefix; ARGV lease, read owner, write owner. */
static const char read_acquire_lua[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1); "
    "redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) "
    "then local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local key = KEYS[2] .. ':' .. ind; "
    "redis.call('set', key, 1); "
    "redis.call('pexpire', key, ARGV[1]); "
    "local remainTime = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); "
    "return nil; end; "
    "return redis.call('pttl', KEYS[1]);";

/* RedissonReadLock.unlockInnerAsync (no latch): nil not a holder, 0 other
 * holders remain, 1 the lock is gone (and "0" published). KEYS name,
 * channel, timeout prefix, key prefix {name}; ARGV message (0), owner. */
static const char read_unlock_lua[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return nil; end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); "
    "if (lockExists == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (counter == 0) then redis.call('hdel', KEYS[1], ARGV[2]); end; "
    "redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then "
    "local maxRemainTime = -3; "
    "local keys = redis.call('hkeys', KEYS[1]); "
    "for n, key in ipairs(keys) do "
    "counter = tonumber(redis.call('hget', KEYS[1], key)); "
    "if type(counter) == 'number' then "
    "for i=counter, 1, -1 do "
    "local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); "
    "maxRemainTime = math.max(remainTime, maxRemainTime); end; end; end; "
    "if maxRemainTime > 0 then redis.call('pexpire', KEYS[1], maxRemainTime); return 0; end; "
    "if mode == 'write' then return 0; end; end; "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "return 1;";

/* RedissonWriteLock.tryLockInnerAsync: nil when taken (or re-entered,
 * adding the lease), else the PTTL. KEYS name; ARGV lease, write owner. */
static const char write_acquire_lua[] = "local mode = redis.call('hget', KEYS[1], 'mode'); "
                                        "if (mode == false) then "
                                        "redis.call('hset', KEYS[1], 'mode', 'write'); "
                                        "redis.call('hset', KEYS[1], ARGV[2], 1); "
                                        "redis.call('pexpire', KEYS[1], ARGV[1]); "
                                        "return nil; end; "
                                        "if (mode == 'write') then "
                                        "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
                                        "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                        "local currentExpire = redis.call('pttl', KEYS[1]); "
                                        "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
                                        "return nil; end; end; "
                                        "return redis.call('pttl', KEYS[1]);";

/* RedissonWriteLock.unlockInnerAsync (no latch): nil not the owner, 0
 * still held, 1 released ("1" published unless own read holds remain).
 * KEYS name, channel; ARGV message (1), lease, write owner. */
static const char write_unlock_lua[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then redis.call('publish', KEYS[2], ARGV[1]); return nil; end; "
    "if (mode == 'write') then "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then return nil; "
    "else local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then "
    "redis.call('del', KEYS[1]); "
    "redis.call('publish', KEYS[2], ARGV[1]); "
    "else redis.call('hset', KEYS[1], 'mode', 'read'); end; "
    "return 1; end; end; end; "
    "return nil;";

/* Redisson's names for c on key: owners, channel, timeout prefix, key
 * prefix. The key name never has a '{' (--prefix refuses one), so the
 * braces are always added. */
struct rw_names {
    char name[128];    /* the lock (hash) key */
    char reader[64];   /* <uuid>:<id> */
    char writer[72];   /* <uuid>:<id>:write */
    char chan[160];    /* redisson_rwlock:{name} */
    char tprefix[224]; /* {name}:<uuid>:<id>:rwlock_timeout */
    char kprefix[136]; /* {name} */
    char lease[16];    /* --lease-ms */
};

static void rw_names_fill(const struct lg_client *c, struct rw_names *n)
{
    const struct lg_run *r = c->run;

    lg_run_key_name(r, c->key, n->name, sizeof(n->name));
    snprintf(n->reader, sizeof(n->reader), "%s:%u", r->uuid, c->id);
    snprintf(n->writer, sizeof(n->writer), "%s:write", n->reader);
    snprintf(n->chan, sizeof(n->chan), "redisson_rwlock:{%s}", n->name);
    snprintf(n->kprefix, sizeof(n->kprefix), "{%s}", n->name);
    snprintf(n->tprefix, sizeof(n->tprefix), "%s:%s:rwlock_timeout", n->kprefix, n->reader);
    snprintf(n->lease, sizeof(n->lease), "%u", r->o->lease_ms);
}

/* The four EVALSHA requests of a direct client, in the order acquire
 * read, release read, acquire write, release write. */
static int format_direct(const struct lg_client *c, struct buf *b, unsigned which)
{
    const struct lg_run *r = c->run;
    struct rw_names n;

    rw_names_fill(c, &n);
    if (which == 0) {
        const char *argv[] = {
            "EVALSHA", r->scripts[LG_SCR_ACQ].sha, "2", n.name, n.tprefix, n.lease, n.reader,
            n.writer};

        return lg_resp_append(b, 8, argv);
    }
    if (which == 1) {
        const char *argv[] = {
            "EVALSHA", r->scripts[LG_SCR_REL].sha, "4", n.name, n.chan, n.tprefix, n.kprefix, "0",
            n.reader};

        return lg_resp_append(b, 9, argv);
    }
    if (which == 2) {
        const char *argv[] = {"EVALSHA", r->scripts[LG_SCR_WACQ].sha, "1", n.name, n.lease,
                              n.writer};

        return lg_resp_append(b, 6, argv);
    }
    {
        const char *argv[] = {
            "EVALSHA", r->scripts[LG_SCR_WREL].sha, "2", n.name, n.chan, "1", n.lease, n.writer};

        return lg_resp_append(b, 8, argv);
    }
}

/* The same four through the proxy. */
static int format_proxy(const struct lg_client *c, struct buf *b, unsigned which)
{
    static const char *const cmds[] = {"RLOCK", "RUNLOCK", "WLOCK", "WUNLOCK"};
    char name[128];
    const char *argv[] = {cmds[which], name};

    lg_run_key_name(c->run, c->key, name, sizeof(name));
    return lg_resp_append(b, 2, argv);
}

int lg_rw_build_requests(struct lg_client *c)
{
    char **cmd[] = {&c->acq_cmd, &c->rel_cmd, &c->wacq.cmd, &c->wrel.cmd};
    size_t *len[] = {&c->acq_len, &c->rel_len, &c->wacq.len, &c->wrel.len};
    struct buf b;
    int rc = 0;

    buf_init(&b);
    for (unsigned i = 0; i < 4 && rc == 0; i++) {
        rc = c->run->redisson ? format_direct(c, &b, i) : format_proxy(c, &b, i);
        lg_buf_take(&b, cmd[i], len[i]);
    }
    return rc;
}

void lg_rw_scripts(struct lg_run *r)
{
    r->scripts[LG_SCR_ACQ].lua = read_acquire_lua;
    r->scripts[LG_SCR_REL].lua = read_unlock_lua;
    r->scripts[LG_SCR_WACQ].lua = write_acquire_lua;
    r->scripts[LG_SCR_WREL].lua = write_unlock_lua;
}

void lg_rw_pick(struct lg_client *c)
{
    bool write = lg_rng_next(&c->rng) % 100u < c->run->o->write_pct;

    c->kind = write ? LG_HOLD_WRITE : LG_HOLD_READ;
}
