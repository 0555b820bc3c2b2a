/* A model of one Redis master for the simulator (tests/sim): a small
 * keyspace (strings, hashes, sorted sets, sets, lists; millisecond TTLs on
 * the simulator's clock) and an embedded Lua 5.1 that runs the proxy's
 * real scripts (engine/lua) as Redis does: KEYS/ARGV globals,
 * redis.call/redis.pcall/redis.error_reply/redis.status_reply, Redis's
 * Lua<->reply conversions. Only the commands the scripts call are
 * implemented; any other raises an error, so a script that starts using a
 * new command fails loudly in the simulator.
 *
 * PUBLISH/SPUBLISH are handed to a callback (the fake pool's pub/sub).
 * Expiry is lazy, against the time the caller passes to each run (Redis
 * too freezes time for the length of a script). */
#ifndef LP_TESTS_SUPPORT_FAKE_REDIS_H
#define LP_TESTS_SUPPORT_FAKE_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/reply.h"

struct fr_db;
struct fake_redis;

/* A PUBLISH from a script: channel and message borrowed for the call. */
typedef void fr_publish_fn(void *arg, const char *ch, size_t chlen, const char *msg, size_t mlen);

int fr_create(struct fake_redis **out, fr_publish_fn *pub, void *pub_arg);
/* Where PUBLISH goes from now on. */
void fr_set_publish(struct fake_redis *r, fr_publish_fn *pub, void *pub_arg);
void fr_destroy(struct fake_redis *r);

/* Compiles a script; returns its id (>= 0) or -EINVAL (the Lua error is
 * printed). */
int fr_load(struct fake_redis *r, const char *name, const char *text);

/* Runs script id as EVALSHA would at time now_ms: argv holds numkeys keys
 * then the arguments. Returns a reply tree (free with fr_reply_free). */
struct pool_reply *fr_eval(struct fake_redis *r, int id, uint64_t now_ms, int numkeys, int argc,
                           const char *const *argv, const size_t *lens);

/* Frees a reply of fr_eval() (NULL: nothing). */
void fr_reply_free(struct pool_reply *rep);

/* The live keyspace, and whole-keyspace operations for faults. */
struct fr_db *fr_db(struct fake_redis *r);
struct fr_db *fr_db_copy(const struct fr_db *db); /* deep copy (a replica) */
void fr_db_free(struct fr_db *db);
void fr_set_db(struct fake_redis *r, struct fr_db *db); /* takes db; frees the old one */
void fr_flush(struct fake_redis *r);                    /* a restart without persistence */

/* Queries for the checker, at time now_ms (expired keys are absent). */
size_t fr_db_size(struct fake_redis *r, uint64_t now_ms);
/* A hash field's integer value; false when the key or field is absent. */
bool fr_hget_int(struct fake_redis *r, uint64_t now_ms, const char *key, const char *field,
                 long long *out);
/* The key's remaining TTL: -2 absent, -1 no expiry. */
long long fr_pttl(struct fake_redis *r, uint64_t now_ms, const char *key);
/* True when key expired (by its TTL) at or after since_ms, as far as the
 * last 256 expiries tell; fr_forget_expiries() clears that record. */
bool fr_expired_since(struct fake_redis *r, const char *key, uint64_t since_ms);
void fr_forget_expiries(struct fake_redis *r);
/* Prints every key (for a failure's trace). */
void fr_dump(struct fake_redis *r, uint64_t now_ms);
/* Name of key i (0 <= i < count), for the end-of-run check. */
const char *fr_key_name(struct fake_redis *r, size_t i, size_t *count);

#endif
