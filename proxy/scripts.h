/* The Lua scripts lockproxy runs in Redis. Each module owns a set of
 * scripts; px_scripts_build() concatenates every set into the table handed
 * to the pool and tells each set its base id (pool id = base + index).
 *
 * The reentrant lock's set comes first (base 0), so its PX_SCRIPT_* values
 * are pool ids. Its scripts write exactly Redisson's RLock layout: a hash at
 * the raw lock name, one field "<uuid>:<id>" holding the reentrancy count,
 * the lease as the key's PTTL, and "0" published on
 * redisson_lock__channel:{name} at every full release. */
#ifndef LP_PROXY_SCRIPTS_H
#define LP_PROXY_SCRIPTS_H

#include <stddef.h>

#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

enum px_script {
    PX_SCRIPT_ACQUIRE = 0, /* KEYS name; ARGV lease, owner -> {1,count} | {0,pttl} */
    PX_SCRIPT_UNLOCK = 1,  /* KEYS name, channel; ARGV lease, owner -> nil | 0 | 1 */
    PX_SCRIPT_FORCE = 2,   /* KEYS name, channel -> 0 | 1 */
    PX_SCRIPT_RELEASE = 3, /* KEYS name, channel; ARGV owner -> 0 | 1 (whole hold) */
    PX_SCRIPT_RENEW = 4,   /* KEYS k1..kN; ARGV lease, o1..oN -> {0|1,...} */
    PX_SCRIPT_INFO = 5,    /* KEYS name; ARGV owner -> {exists, count, pttl} */
    PX_SCRIPT_COUNT = 6,
};

/* A module's scripts. */
struct px_script_set {
    const struct pool_script *scripts; /* borrowed: the module's scripts */
    size_t n;                          /* how many */
    unsigned *base;                    /* out: pool id of scripts[0] */
};

/* Every module's set, in order (defined in scripts.c, one line each). */
extern const struct px_script_set *const px_script_sets[];

/* Fills the pool's script table (static storage) from px_script_sets and
 * sets each base. Returns the script count. */
size_t px_scripts_build(const struct pool_script **out);

/* Writes Redisson's "{name}" form of name for aux keys and channels:
 * prefix + "{" name "}" unless name already contains '{', in which case the
 * name goes in as-is. Returns the length written (always < cap), or 0 when
 * cap is too small. */
size_t px_channel_name(char *dst, size_t cap, const char *prefix, const char *name, size_t len);

#ifdef __cplusplus
}
#endif

#endif
