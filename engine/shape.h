/* Shape checks of lock-script replies. Every handler that reads a script's
 * answer (acquires of every lock kind, semaphore pairs, LOCK.INFO, the
 * watchdog's batches) reads it through these, so a reply of another shape
 * (a script of another version, something in between, a bug) is refused as
 * a protocol error instead of being read past what the reader built or taken
 * for a grant. Pure functions: tests/fuzz/fuzz_script_reply.c feeds them
 * every reply pool/resp.c parses from arbitrary bytes. */
#ifndef LP_PROXY_LOCKS_SHAPE_H
#define LP_PROXY_LOCKS_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most integers px_shape_ints() reads. */
#define PX_SHAPE_MAX_INTS 8

/* True when r is an array of min..max integers (max <= PX_SHAPE_MAX_INTS);
 * copies them to out and their number to *n. */
bool px_shape_ints(const struct pool_reply *r, size_t min, size_t max, long long *out, size_t *n);

/* An acquire script's answer (lock, read, write and fair holds): {1, count}
 * or {1, count, token} granted; {0, pttl} (or {0, pttl, x}) held by someone
 * else, pttl being the holder's remaining lease (-1: none, -2: gone). The
 * plain lock's acquire (its hot path; a table costs Redis ~6k instructions
 * more to return) answers one integer instead: -2 - count (<= -3) granted,
 * else pttl (>= -2), so no unlock answer (0, 1, 2) reads as a grant. */
struct px_shape_acq {
    bool granted;
    int64_t count; /* granted: the owner's hold count, >= 1 */
    int64_t pttl;  /* not granted */
    int64_t token; /* granted with a fencing token: >= 0; else -1 */
};

/* True when r is an acquire answer as above, parsed into *out. A grant
 * with a count below 1 or a negative token is refused: no script of ours
 * answers it, and taking it would record a hold nobody can release. */
bool px_shape_acquire(const struct pool_reply *r, struct px_shape_acq *out);

/* True when r is an array of exactly n elements (a watchdog batch's
 * answer: one per hold); px_shape_held() reads element i. */
bool px_shape_batch(const struct pool_reply *r, size_t n);
bool px_shape_held(const struct pool_reply *r, size_t i);

#ifdef __cplusplus
}
#endif

#endif
