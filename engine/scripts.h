/* The Lua scripts lockproxy runs in Redis, and the one path every lock
 * module sends them through.
 *
 * The scripts are the files of engine/lua/ (each states its KEYS and
 * ARGV at the top), joined from fragments and embedded at build time
 * (lua/scripts.cmake, cmake/lua_embed.cmake) as struct px_lua values. Each
 * module owns a set of scripts and registers it with the engine
 * (px_scripts_register, at start-up); px_scripts_build() concatenates every
 * set into the table handed to the pool and tells each set its base id
 * (pool id = base + index).
 *
 * This file's set comes first (base 0), so its PX_SCRIPT_* values are pool
 * ids: the scripts shared by every RLock-layout hold (settle, batched
 * renewal and verification, LOCK.INFO). The acquire and unlock scripts of
 * each lock kind live with the kind (lock.c, rwlock.c, fairlock.c, ...).
 *
 * Publishing: a script that publishes takes the command, PUBLISH or
 * SPUBLISH, as its last ARGV, as Redisson's scripts do (spec 13.3):
 * px_script_eval() appends it, SPUBLISH while the pool subscribes with
 * SSUBSCRIBE (pool_pubsub_sharded(), read at every send, so a mode the
 * pool learns after start applies from then on), else PUBLISH. So a
 * proxy and a Redisson fleet in the same mode wake each other.
 *
 * Writes: a script that changes data (lua_embed.cmake decides from the
 * commands it calls) is followed by WAIT under --sync-replicas (repl.h).
 *
 * Names in a Redis Cluster: every key and channel of an object must hash
 * to the slot of its name (a script's keys must share a slot, and a
 * sharded channel lives on its slot's shard). Redisson's "{name}" rule
 * (px_channel_name) guarantees it except for names with a '{' that opens
 * no non-empty hash tag, or a '}' without a '{'; a latch's channel always
 * adds braces, so a latch name must have neither. px_name_check_slot()
 * refuses those names up front in cluster mode. */
#ifndef LP_PROXY_LOCKS_SCRIPTS_H
#define LP_PROXY_LOCKS_SCRIPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;

/* One embedded script (generated: lua_scripts.h). */
struct px_lua {
    const char *name; /* for logs */
    const char *text; /* Lua source */
    bool publishes;   /* takes the publish command as its last ARGV */
    bool writes;      /* changes data: followed by WAIT under --sync-replicas */
};

/* A script the batch runner runs (lp_lua_batch in lua/scripts.cmake):
 * its op number and KEYS/ARGV counts (pool.h, struct pool_script). */
struct px_lua_op {
    const struct px_lua *script; /* borrowed: the script */
    unsigned op;                 /* its op number in the runner, >= 1 */
    unsigned keys;               /* its KEYS count */
    unsigned args;               /* its ARGV count (the publish command included) */
};

enum px_script {
    PX_SCRIPT_SETTLE = 0, /* lua/settle.lua */
    PX_SCRIPT_RENEW = 1,  /* lua/renew.lua */
    PX_SCRIPT_INFO = 2,   /* lua/info.lua */
    PX_SCRIPT_VERIFY = 3, /* lua/verify.lua */
    PX_SCRIPT_COUNT = 4,
};

/* Where each set's base pool id is kept (eng->script_bases[]): one slot
 * per module that registers scripts, so no module keeps its base in a
 * file global. */
enum lk_script_slot {
    LK_SCRIPTS_ENGINE = 0, /* scripts.c's own set (base 0: it comes first) */
    LK_SCRIPTS_LOCK = 1,   /* proxy/cmds/lock.c */
    LK_SCRIPTS_FAIR = 2,   /* proxy/cmds/fairlock.c */
    LK_SCRIPTS_RW = 3,     /* proxy/cmds/rwlock.c */
    LK_SCRIPTS_MULTI = 4,  /* proxy/cmds/multilock.c */
    LK_SCRIPTS_LATCH = 5,  /* proxy/cmds/latch.c */
    LK_SCRIPTS_SEM = 6,    /* SEM and PSEM (engine/sem.c) */
    LK_SCRIPT_SLOTS = 7,
};

/* A module's scripts. */
struct px_script_set {
    const struct px_lua *const *scripts; /* borrowed: the module's scripts */
    size_t n;                            /* how many */
    unsigned slot;                       /* where px_scripts_build records the pool id
                                            of scripts[0]: eng->script_bases[slot] */
};

/* Registers the engine's own set (first: PX_SCRIPT_* are pool ids). */
void px_scripts_init(struct lk_engine *eng);

/* Adds a command module's set (static; its base is set by
 * px_scripts_build). Every set is registered before the first build. */
void px_scripts_register(struct lk_engine *eng, const struct px_script_set *set);

/* Fills the pool's script table (eng->script_table, which outlives every
 * pool it is given to) from the registered sets, in order of
 * registration, and sets each base; the batch
 * runner comes last, its ops marked as such. Returns the script count. */
size_t px_scripts_build(struct lk_engine *eng, const struct pool_script **out);

/* Most arguments (keys included) of a script that publishes. */
#define PX_SCRIPT_PUBLISH_ARGS 200 /* MULTIUNLOCK: 3 per name (64) + 1 */

/* EVALSHA of script (a pool id), with the publish command appended when
 * the script publishes, and, with --sync-replicas, followed by WAIT when
 * the script writes (repl.h: the callback then runs after WAIT answered,
 * pool_result_short(res) telling whether too few replicas acknowledged).
 * Same contract as pool_eval. */
int px_script_eval(struct lk_engine *eng, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg);

/* Writes Redisson's "{name}" form of name for aux keys and channels:
 * prefix + "{" name "}" unless name already contains '{', in which case the
 * name goes in as-is. Returns the length written (always < cap), or 0 when
 * cap is too small. */
size_t px_channel_name(char *dst, size_t cap, const char *prefix, const char *name, size_t len);

/* The channel prefix of Redisson's RLock (LOCK, REDLOCK's masters). */
#define PX_LOCK_CHANNEL_PREFIX "redisson_lock__channel:"

/* How an object's channel is named from its name. */
enum px_name_rule {
    PX_NAME_PREFIXED = 0, /* Redisson's prefixName: px_channel_name() */
    PX_NAME_BRACED = 1,   /* braces always added (RCountDownLatch's channel) */
};

/* True when, with rule, every side key and channel of name hashes to the
 * slot of name itself (always true for a single Redis). */
bool px_name_slot_ok(const struct lk_engine *eng, const char *name, size_t len,
                     enum px_name_rule rule);

/* The check of a command's name, which replies to it, is the front end's:
 * px_name_check (proxy/args.h). */

#ifdef __cplusplus
}
#endif

#endif
