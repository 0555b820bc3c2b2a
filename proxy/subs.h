/* Shared subscriptions: pass-through pub/sub for clients, and the
 * per-channel hubs that let clients and the proxy's own waiters share one
 * upstream subscription.
 *
 * Hub: one per (name, namespace) — classic channel, sharded channel,
 * pattern — holding the pool's single listener (pool_sub_start_kind) and
 * fanning its events out to any number of px_sub_lsn listeners: the
 * waitsets of LOCK waiters (engine/waitset.c) and the subscriptions
 * of pass-through clients. The hub lives while it has a listener; the
 * last one leaving unsubscribes upstream, so neither a client's
 * UNSUBSCRIBE nor a waitset's linger ending drops the other's
 * subscription. A listener may leave (or close a client) from its own
 * callback: delivery walks the list with a cursor that a leaving listener
 * advances, and a hub emptied during delivery is freed after it.
 *
 * Namespaces: the pool's AUTO kind (the waitsets') is classic on a single
 * node or a classic cluster and sharded on a sharded one, so a client's
 * SUBSCRIBE (or SSUBSCRIBE) of the same name joins the waitset's hub.
 * With --cluster-pubsub auto resolved to sharded, each waitset also
 * listens on the classic channel of its name (waitset.c): Redisson-layout
 * clients that publish wake-ups with classic PUBLISH still wake the
 * proxy's waiters. A release is published once, by one of the two
 * commands (the proxy's scripts SPUBLISH, Redisson's PUBLISH), and each
 * reaches only the matching subscription: no wake-up arrives twice.
 *
 * Clients (Redis semantics): SUBSCRIBE/PSUBSCRIBE/SSUBSCRIBE answer one
 * confirmation per argument, with the connection's count (channels plus
 * patterns; shard channels for SSUBSCRIBE), once the upstream
 * subscription is confirmed (so a message published after the reply is
 * never missed; at most PX_SUBS_CONFIRM_MS when Redis is unreachable) —
 * the command is a barrier meanwhile. Messages reach a client from its
 * confirmation on, framed as Redis frames them: RESP2 arrays, RESP3
 * pushes (message, pmessage with the pattern, smessage). A RESP2
 * connection with a subscription takes only (P|S)SUBSCRIBE,
 * (P|S)UNSUBSCRIBE, PING (answered ["pong", arg]) and QUIT, with Redis's
 * error. lockproxy:lease-lost is a local channel (push.h): RESP3 only.
 *
 * Bounds: PX_SUBS_MAX per connection; a message that would take a
 * client's unsent output past --client-output-hard-limit, or the proxy's
 * client memory past --max-client-memory, closes that client (Redis's
 * client-output-buffer-limit pubsub), counted in subs_dropped. ACL: a
 * user's ~patterns cover channels (and PSUBSCRIBE's pattern, matched as a
 * name): NOPERM otherwise. */
#ifndef LP_PROXY_SUBS_H
#define LP_PROXY_SUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "engine/sub_lsn.h"
#include "pool/pubsub-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_hub;
struct px_req;
struct px_server;
struct px_sub_lsn;

/* Subscriptions (channels, patterns, shard channels) one connection may hold. */
#define PX_SUBS_MAX 10000u

/* How long a SUBSCRIBE waits for the upstream confirmation before it
 * answers anyway (the subscription stays pending upstream). */
#define PX_SUBS_CONFIRM_MS 2000u

/* Pass-through counters (INFO pubsub, /metrics). */
struct px_subs_stats {
    uint64_t channels;    /* hubs with at least one client listener */
    uint64_t subscribers; /* client subscriptions (channel, pattern, shard channel) */
    uint64_t hubs;        /* upstream subscriptions held by hubs (waitsets' too) */
    uint64_t delivered;   /* messages written to clients */
    uint64_t published;   /* PUBLISH / SPUBLISH forwarded */
    uint64_t dropped;     /* clients closed by a message past the output bounds */
};

int px_subs_init(struct px_server *srv);
void px_subs_deinit(struct px_server *srv);

/* Listens on name in namespace kind (pool_sub_kind). Returns 1 when the
 * upstream subscription is already confirmed (no READY follows until a
 * LOST), 0 when READY will come, or -ENOMEM / -EEXIST (the pool holds the
 * name under the other kind: see pool_sub_start_kind). */
int px_subs_listen(struct px_server *srv, struct px_sub_lsn *l, const char *name, size_t len,
                   enum pool_sub_kind kind, px_sub_lsn_fn *cb);

/* Stops listening (no callback follows); the hub goes with its last one. */
void px_subs_unlisten(struct px_sub_lsn *l);

/* Counters, computed now. */
void px_subs_get_stats(struct px_server *srv, struct px_subs_stats *st);

/* The command set (cmd.c lists it). */
extern const struct px_cmd_set px_subs_cmd_set;

/* Dispatch check: true when req is refused because its RESP2 connection
 * is in subscribed mode (the error has been written). */
bool px_subs_refuse(struct px_req *req);

/* PING on a RESP2 connection in subscribed mode: answers ["pong", arg]
 * and returns true; false otherwise (nothing written). */
bool px_subs_ping(struct px_req *req);

/* True while cl holds a subscription: as in Redis, --timeout does not
 * close a pub/sub client for being quiet. */
bool px_subs_client_busy(const struct px_client *cl);

/* The client is closing: drops its subscriptions (and answers a pending
 * SUBSCRIBE). */
void px_subs_client_gone(struct px_client *cl);

#ifdef __cplusplus
}
#endif

#endif
