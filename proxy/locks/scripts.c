/* The script sets of every module, the Lua scripts shared by RLock-layout
 * holds (Redisson semantics, sections 2-3 of the compatibility spec), and
 * the channel-name rule. */
#include "proxy/locks/scripts.h"

#include <string.h>

#include "common/compiler.h"
#include "proxy/locks/latch.h"
#include "proxy/locks/lock.h"
#include "proxy/locks/semaphore.h"

/* Settles one owner (hold.h): a count above ARGV[2] becomes ARGV[2]; at 0
 * the hold goes and "0" wakes a waiter (what a release on disconnect, and
 * the roll-back of an unconfirmed acquisition, need). Replies the count
 * before. */
static const char settle_lua[] = "local c = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'); "
                                 "if (c <= tonumber(ARGV[2])) then return c; end; "
                                 "if (ARGV[2] == '0') then redis.call('del', KEYS[1]); "
                                 "redis.call('publish', KEYS[2], '0'); return c; end; "
                                 "redis.call('hset', KEYS[1], ARGV[1], ARGV[2]); return c;";

/* Batched watchdog renewal: extend only where the owner field is still
 * ours, never blindly. pcall keeps one odd key from failing the batch. */
static const char renew_lua[] =
    "local r = {}; "
    "for i = 1, #KEYS do "
    "local ok = redis.pcall('hexists', KEYS[i], ARGV[i + 1]); "
    "if (ok == 1) then redis.call('pexpire', KEYS[i], ARGV[1]); r[i] = 1; "
    "else r[i] = 0; end; end; "
    "return r;";

/* State of a lock as seen by one owner. */
static const char info_lua[] = "local e = redis.call('exists', KEYS[1]); "
                               "local c = 0; "
                               "if (e == 1) then local v = redis.call('hget', KEYS[1], ARGV[1]); "
                               "if v then c = tonumber(v); end; end; "
                               "return {e, c, redis.call('pttl', KEYS[1])};";

static const struct pool_script lock_scripts[PX_SCRIPT_COUNT] = {
    {"settle", settle_lua},
    {"renew", renew_lua},
    {"info", info_lua},
};

size_t px_channel_name(char *dst, size_t cap, const char *prefix, const char *name, size_t len)
{
    size_t plen = strlen(prefix);
    int braces = memchr(name, '{', len) == NULL;
    size_t need = plen + len + (braces ? 2 : 0);

    if (need + 1 > cap)
        return 0;
    memcpy(dst, prefix, plen);
    if (braces)
        dst[plen++] = '{';
    memcpy(dst + plen, name, len);
    plen += len;
    if (braces)
        dst[plen++] = '}';
    dst[plen] = '\0';
    return plen;
}

static unsigned lock_script_base;
static const struct px_script_set lock_script_set = {lock_scripts, PX_SCRIPT_COUNT,
                                                     &lock_script_base};

/* One line per module; the reentrant lock stays first (its ids are base 0). */
const struct px_script_set *const px_script_sets[] = {
    &lock_script_set,        &px_lock_script_set,  &px_rwlock_script_set,
    &px_fairlock_script_set, /* lock family: lock.h */
    &px_sem_script_set,      &px_latch_script_set, NULL,
};

size_t px_scripts_build(const struct pool_script **out)
{
    static struct pool_script table[128];
    size_t n = 0, i, k;

    for (i = 0; px_script_sets[i]; i++) {
        const struct px_script_set *set = px_script_sets[i];

        LP_BUG_ON(n + set->n > LP_ARRAY_SIZE(table));
        *set->base = (unsigned)n;
        for (k = 0; k < set->n; k++)
            table[n++] = set->scripts[k];
    }
    *out = table;
    return n;
}
