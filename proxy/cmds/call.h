/* Commands that are one script and one reply (SEM.TRYSETPERMITS,
 * SEM.AVAILABLE, LATCH.COUNTDOWN, ...): send the script, then pass Redis
 * errors through, turn upstream failures into UPSTREAM errors, and format
 * the rest. */
#ifndef LP_PROXY_LOCKS_CALL_H
#define LP_PROXY_LOCKS_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* Formats a non-error script reply for req. */
typedef void px_call_reply_fn(struct px_req *req, const struct pool_reply *r);

/* Runs script (pool id) for req on the connection hint picks, and
 * finishes req with fmt(r); errors (upstream, Redis error replies) are
 * replied without calling fmt. argv is borrowed for the call. */
void px_call_script(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                    const char *const *argv, const size_t *lens, px_call_reply_fn *fmt);

/* What px_call_script_arg's fn hears: the reply (r non-NULL, not an
 * error: fn formats it), or a failure already answered to the client (r
 * NULL and err < 0: -ENOTCONN or -ENOMEM when it was never sent, else its
 * outcome is unknown; or r an error reply of Redis: fn must not reply). */
typedef void px_call_result_fn(struct px_req *req, void *arg, const struct pool_reply *r, int err);

/* As px_call_script, but fn (with arg, owned by the caller until fn) hears
 * every outcome, failures too. */
void px_call_script_arg(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                        const char *const *argv, const size_t *lens, px_call_result_fn *fn,
                        void *arg);

/* As px_call_script_arg, but fn answers the upstream failures itself (r
 * NULL, err -ENOTCONN: never sent; another err < 0: its reply was lost);
 * -ENOMEM is answered already. For a release the proxy may carry out. */
void px_call_script_own(struct px_req *req, uint64_t hint, unsigned script, int numkeys, int argc,
                        const char *const *argv, const size_t *lens, px_call_result_fn *fn,
                        void *arg);

/* fmt for scripts that return an integer: the integer, as is. */
void px_call_reply_int(struct px_req *req, const struct pool_reply *r);

/* True when argv has "WAIT 0" (a single attempt, so not a barrier). */
bool px_call_wait_zero(const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
