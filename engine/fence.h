/* Fencing-token floors: what keeps the tokens of LOCK ... FENCED rising
 * when Redis forgot its counter (redisson_lock_token:{name}: a restart
 * without persistence, a failover to a replica that missed writes).
 *
 * The proxy remembers, per fenced name, the highest token Redis granted
 * it; every fenced acquire passes that as a floor, and the script raises
 * the counter to the floor before its INCR (lua/lock_acquire_fenced.lua),
 * so a token this proxy hands out is above every token it handed out
 * before for that name. The counter keeps Redisson's key, so Redisson's
 * RFencedLock continues above it too.
 *
 * Memory is bounded: PX_FENCE_SETS sets of PX_FENCE_WAYS names (by a
 * 64-bit hash of the name). A name that finds its set full evicts the
 * set's entry with the lowest token, which raises the set's floor to that
 * token; a name not remembered gets its set's floor. So monotonicity holds
 * for every name, however many: past the bound, tokens of names sharing a
 * set may jump (each at least the evicted one's). Two names with the same
 * 64-bit hash share one entry (the same: jumps, never a step back).
 *
 * What is not kept: a proxy restart forgets (each proxy knows only the
 * tokens it handed out itself). */
#ifndef LP_PROXY_LOCKS_FENCE_H
#define LP_PROXY_LOCKS_FENCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;

#define PX_FENCE_SETS 1024u /* sets of remembered names (a power of two) */
#define PX_FENCE_WAYS 8u    /* names per set */

/* The floor of name's next fenced acquire into *floor (0: none known):
 * the token must exceed it. The table is allocated on the first call:
 * -ENOMEM if it cannot be, else 0. */
int px_fence_floor(struct lk_engine *eng, const char *name, size_t nlen, uint64_t *floor);

/* Redis granted token for name (handed out or not: remembering more
 * only raises floors). */
void px_fence_note(struct lk_engine *eng, const char *name, size_t nlen, int64_t token);

/* Frees the table. */
void px_fence_free(struct lk_engine *eng);

#ifdef __cplusplus
}
#endif

#endif
