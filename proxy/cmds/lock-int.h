/* What lock.c (the acquire side) and unlock.c (the release side) share:
 * argument parsing, owner fields, the acquire op on the wait engine, the
 * plain kind and the scripts of lock.c. Private to those two files (and
 * list.c, which lists the acquire ops, and multilock.c, whose names are
 * plain locks). */
#ifndef LP_PROXY_LOCKS_LOCK_INT_H
#define LP_PROXY_LOCKS_LOCK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/wait.h"
#include "pool/reply.h"
#include "proxy/cmds/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_arg;
struct px_req;

#define PX__LOCK_OPT_LEASE  1u /* LEASE ms allowed */
#define PX__LOCK_OPT_WAIT   2u /* WAIT ms allowed */
#define PX__LOCK_OPT_FENCED 4u /* FENCED flag allowed */
#define PX__LOCK_OPT_OWNER  8u /* OWNER token (always allowed) */

/* Scripts of lock.c. */
enum px__lock_script {
    PX__LK_ACQUIRE = 0, /* KEYS name; ARGV lease, owner -> -2 - count | pttl */
    PX__LK_FENCED = 1,  /* KEYS name, token; ARGV lease, owner, floor -> {1,c,token} | {0,pttl} */
    PX__LK_UNLOCK = 2,  /* KEYS name, channel; ARGV lease, owner -> nil | 0 | 1 */
    PX__LK_FORCE = 3,   /* KEYS name, channel, rw channel, queue, timeouts; ARGV fair prefix, now */
    PX__LK_GRANT = 4,   /* KEYS name; ARGV lease, owner, next lease, next owner -> nil | 0 | 2 */
    PX__LK_COUNT = 5,
};

/* Pool id of one of lock.c's scripts. */
unsigned px__lock_script(const struct lk_engine *eng, enum px__lock_script s);

/* A lock command's arguments. */
struct px__lock_args {
    const struct px_arg *name;  /* borrowed: request argument */
    int64_t lease_ms;           /* LEASE, or -1 */
    int64_t wait_ms;            /* WAIT, or -1 (forever) */
    const struct px_arg *token; /* OWNER token, or NULL */
    bool fenced;                /* FENCED given */
};

/* Parses "name [option ...]" with the options allow (PX__LOCK_OPT_*)
 * permits. Writes an error reply and returns -EINVAL on bad input. */
int px__lock_parse_args(struct px_req *req, unsigned allow, struct px__lock_args *a);

/* Writes the caller's owner field for kind into out (PX_OWNER_MAX bytes);
 * returns its length; *base_len gets the length without the kind's
 * suffix. */
size_t px__lock_owner(struct px_req *req, const struct px__lock_args *a,
                      const struct px_lock_kind *kind, char *out, size_t *base_len);

/* Replies for a script reply that failed: an upstream error (err < 0) or
 * a Redis error reply passed through (e.g. WRONGTYPE). Returns false, with
 * nothing written, when r is a reply for the command to interpret. */
bool px__lock_reply_failed(struct px_req *req, const struct pool_reply *r, int err);

/* The start of a command whose script send returned rc: on failure replies
 * and finishes req (false); else the reply callback holds a client
 * reference (true). */
bool px__lock_script_sent(struct px_req *req, int rc);

/* The channel of a plain lock: redisson_lock__channel:{name}. */
size_t px__lock_plain_channel(const struct px_acq *a, char *out, size_t cap);

/* The plain kind (LOCK without FENCED), the only one a local hand-off
 * serves. */
extern const struct px_lock_kind px__lock_plain_kind;

/* The engine kind of every lock kind's acquire op. */
extern const struct px_wait_kind px__lock_wait_kind;

/* An acquire command in progress (req->op). */
struct px__lockop {
    struct px_wait_op wait;          /* the engine's part */
    const struct px_lock_kind *kind; /* borrowed: static */
    struct px_hold *hold;            /* reference: the pair's ledger entry (hold.h) */
    struct px_acq acq;               /* what attempts send (owner points below) */
    bool watchdog;                   /* no LEASE: renew while the connection lives */
    bool fenced;                     /* reply with the fencing token */
    bool queued;                     /* a waiting attempt was sent: give up when it ends */
    bool unvouched;                  /* the last attempt was a re-entry sent past the hold's
                                        vouched lease, or before its check after a topology
                                        change answered (no grant or unlock since: epoch) */
    unsigned unvouched_epoch;        /* the hold's epoch at that send */
    uint64_t vouched_at_send;        /* px_hold_vouched_until of the hold at that send */
    int64_t count;                   /* reentrancy count of the grant being handled */
    int64_t token;                   /* fencing token of that grant, or -1 */
    char owner[PX_OWNER_MAX];        /* owned: owner field string */
};

/* UNLOCK, FORCEUNLOCK and LOCK.INFO handlers (unlock.c). */
void px__lock_cmd_unlock(struct px_req *req);
void px__lock_cmd_forceunlock(struct px_req *req);
void px__lock_cmd_info(struct px_req *req);

/* LOCK.LIST handler (list.c, which reads the acquire ops' owners). */
void px__lock_cmd_list(struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
