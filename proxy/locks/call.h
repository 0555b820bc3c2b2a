/* Commands that are one script and one reply (SEM.TRYSETPERMITS,
 * SEM.AVAILABLE, LATCH.COUNTDOWN, ...): send the script, then pass Redis
 * errors through, turn upstream failures into UPSTREAM errors, and format
 * the rest. */
#ifndef LP_PROXY_LOCKS_CALL_H
#define LP_PROXY_LOCKS_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* Formats a non-error script reply for req. */
typedef void px_call_reply_fn(struct px_req *req, const redisReply *r);

/* Runs script (pool id) for req on the connection hint picks, and
 * finishes req with fmt(r); errors (upstream, Redis error replies) are
 * replied without calling fmt. argv is borrowed for the call. */
void px_call_script(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                    const char *const *argv, const size_t *lens, px_call_reply_fn *fmt);

/* fmt for scripts that return an integer: the integer, as is. */
void px_call_reply_int(struct px_req *req, const redisReply *r);

/* True when argv has "WAIT 0" (a single attempt, so not a barrier). */
bool px_call_wait_zero(const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
