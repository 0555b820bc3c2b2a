/* The Lua scripts lockproxy runs in Redis. Each module owns a set of
 * scripts; px_scripts_build() concatenates every set into the table handed
 * to the pool and tells each set its base id (pool id = base + index).
 *
 * This file's set comes first (base 0), so its PX_SCRIPT_* values are pool
 * ids: the scripts shared by every RLock-layout hold (settle, batched
 * renewal, LOCK.INFO). The acquire and unlock scripts
 * of each lock kind live with the kind (lock.c, rwlock.c, fairlock.c). */
#ifndef LP_PROXY_LOCKS_SCRIPTS_H
#define LP_PROXY_LOCKS_SCRIPTS_H

#include <stddef.h>

#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

enum px_script {
    PX_SCRIPT_SETTLE = 0, /* KEYS name, channel; ARGV owner, keep -> count before */
    PX_SCRIPT_RENEW = 1,  /* KEYS k1..kN; ARGV lease, o1..oN -> {0|1,...} */
    PX_SCRIPT_INFO = 2,   /* KEYS name; ARGV owner -> {exists, count, pttl} */
    PX_SCRIPT_COUNT = 3,
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
