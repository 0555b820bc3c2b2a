/* Out-of-band messages to clients (RESP3 pushes), and the one pub/sub
 * channel a client may subscribe to for them.
 *
 * lockproxy:lease-lost is a local channel (the other channels are
 * relayed from Redis: subs.h). A RESP3 connection may SUBSCRIBE
 * lockproxy:lease-lost; from then on, the moment the proxy learns
 * that a lock this connection acquired was lost (its lease expired, a
 * renewal or a check after a failover found it gone: see
 * px_hold_mark_lost), the connection gets the push
 *
 *     >3 "message" "lockproxy:lease-lost" "<KIND> <name>"
 *
 * KIND being the command that took it (LOCK, FAIRLOCK, RLOCK, WLOCK),
 * name the lock name as given. The shape is a pub/sub message so clients
 * route it to a subscription listener (node-redis, Lettuce, redis-py's
 * RESP3 push handler); a RESP2 connection cannot take pushes between
 * replies, so SUBSCRIBE there is refused.
 *
 * Pushes are written between whole replies: while a reply is partly
 * written (EXEC's array streams its elements as they finish) the push is
 * kept in cl->pushes and written after it (px_push_flush). */
#ifndef LP_PROXY_PUSH_H
#define LP_PROXY_PUSH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;

#define PX_PUSH_LEASE_LOST_CHANNEL "lockproxy:lease-lost"

/* Writes a whole push (data, len bytes) to cl between whole replies, as
 * px_push_lease_lost does. Returns 0 or -ENOMEM (nothing written). */
int px_push_emit(struct px_client *cl, const char *data, size_t len);

/* Tells cl (the acquiring connection, may be NULL) that its hold of name
 * (nlen bytes), taken by command kind, was lost; nothing unless cl is a
 * subscribed RESP3 connection that is not closing. */
void px_push_lease_lost(struct px_client *cl, const char *kind, const char *name, size_t nlen);

/* Writes the pushes kept while a reply was partly written, once whole
 * replies end the output again. */
void px_push_flush(struct px_client *cl);

#ifdef __cplusplus
}
#endif

#endif
