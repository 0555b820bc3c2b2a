/* Argument checks and error replies that the command modules share (lock.c
 * for every lock kind, sync.c, semaphore.c, latch.c): the object name,
 * counts, millisecond values and option syntax, and the replies for a
 * failed upstream request or a Redis error reply.
 *
 * A check that fails has written its error reply and returns -EINVAL; the
 * caller then finishes the request. The messages are part of the protocol
 * (clients and tests compare them byte for byte): change them here only on
 * purpose. */
#ifndef LP_PROXY_ARGS_H
#define LP_PROXY_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/scripts.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_arg;
struct px_req;
struct pool_reply;

#define PX_ARGS_MAX_COUNT 2147483647u /* largest permit / latch count accepted (Java int) */

/* Largest LEASE or WAIT accepted, in ms (about 3,170 years). Every
 * millisecond value goes through arithmetic the proxy cannot let overflow
 * or lose precision: monotonic now + value (deadlines, lease ends), epoch
 * now + value in Redis (PEXPIRE refuses what passes LLONG_MAX; Lua adds
 * in doubles, exact only below 2^53; a PSEM permit's expiry must stay
 * below Redisson's no-expiry sentinel 922337203685477). */
#define PX_ARGS_MAX_MS 100000000000000ull

/* Shortest LEASE accepted, in ms. A grant is used only if more than
 * px_wait_margin_ms(lease) = lease/100 + 2 ms of the lease is left when
 * Redis's answer arrives (No late grants, wait.h): a lease of 1 or 2 ms is
 * always late, one of a few ms is late at the first hiccup, and each late
 * grant costs Redis an acquire and a give-back. 10 ms leaves 8 ms for the
 * round trip, what the proxy can vouch for on a loaded host. */
#define PX_LEASE_MIN_MS 10u

/* True when a equals the keyword lit, ignoring ASCII case. Borrows both. */
bool px_args_is(const struct px_arg *a, const char *lit);

/* Checks the object name (argv[1]) is 1-PX_NAME_MAX bytes; otherwise
 * replies "-ERR <what> must be 1-<max> bytes" (what: "name", "lock name")
 * and returns -EINVAL. Returns 0 when it is. */
int px_args_check_name(struct px_req *req, const char *what);

/* Checks req's name (argv[1]): its length (px_args_check_name, what
 * names it in the error), then px_name_slot_ok() (engine/scripts.h). On
 * a bad name, replies an error that says why and returns -EINVAL. */
int px_name_check(struct px_req *req, const char *what, enum px_name_rule rule);

/* Parses argv[i] as a decimal integer in [min, PX_ARGS_MAX_COUNT] (and
 * never below -PX_ARGS_MAX_COUNT) into *out. Returns 0, or -EINVAL after
 * replying "-ERR <what> must be <a ... integer | at most N | at least -N>,
 * got '<arg>'" (a number past 64 bits gets the "at most"/"at least" one). */
int px_args_parse_count(struct px_req *req, int i, const char *what, int64_t min, int64_t *out);

/* Parses argv[i] as a number of milliseconds in [min, PX_ARGS_MAX_MS]
 * (min 0 or 1; what: the option name) into *out. Returns 0, or -EINVAL
 * after replying "-ERR <what> must be a (non-negative | positive) integer
 * (ms), got '<arg>'" or, above the range, "-ERR <what> must be at most
 * PX_ARGS_MAX_MS ms, got '<arg>'". */
int px_args_parse_ms(struct px_req *req, int i, const char *what, int64_t min, int64_t *out);

/* px_args_parse_ms for a LEASE: also refuses a value below
 * PX_LEASE_MIN_MS, with "-ERR LEASE must be at least 10 ms, got '<arg>'"
 * and why. */
int px_args_parse_lease(struct px_req *req, int i, int64_t *out);

/* Replies "-ERR <what> must be <must>, got '<a>'" (a cut to 32 bytes). */
void px_args_reply_bad(struct px_req *req, const char *what, const char *must,
                       const struct px_arg *a);

/* Replies "-ERR syntax error near '<a>'" (a cut to 32 bytes). */
void px_args_reply_syntax(struct px_req *req, const struct px_arg *a);

/* Replies for an option a that the command does not take: "-ERR <CMD>
 * takes no <OPT> option" when a is an option keyword of another command
 * (for WAIT on a TRY... command, naming the command that waits), else the
 * syntax error above. */
void px_args_reply_option(struct px_req *req, const struct px_arg *a);

/* Replies "-ERR option '<opt>' needs a value" (opt: len bytes, at most 32
 * shown). */
void px_args_reply_no_value(struct px_req *req, const char *opt, size_t len);

/* Replies the UPSTREAM error for a failed upstream request (err < 0:
 * -ENOTCONN names the pool's last error, -ETIMEDOUT says the outcome is
 * unknown, anything else is a lost connection) and counts it in the
 * server's upstream_errs. */
void px_args_reply_upstream(struct px_req *req, int err);

/* Passes a Redis error reply r through (e.g. WRONGTYPE), cut to 400
 * bytes. Borrows r. */
void px_args_reply_redis_error(struct px_req *req, const struct pool_reply *r);

#ifdef __cplusplus
}
#endif

#endif
