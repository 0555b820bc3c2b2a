/* Pass-through (--passthrough on): ordinary Redis commands forwarded on
 * the lock commands' port, through the pool's pipelined connections.
 *
 * px_cmd_dispatch() hands px_fwd_dispatch() every request whose name is
 * not one of the proxy's own commands. The request is then:
 *   - unknown (not in fwd_keys.c's table): "ERR unknown command";
 *   - refused (blocking, server-wide, replication: fwd_keys.c says why),
 *     or inside MULTI (transactions over forwarded commands are refused:
 *     the proxy's MULTI runs its queue one command at a time, which is not
 *     Redis's atomic EXEC, and pinning an upstream connection per
 *     transaction would stall every other client's pipeline on it);
 *   - checked: arity, key positions (numkeys), the user's key patterns
 *     (every key; keys under the "{lp-" hash tags are the proxy's own and
 *     refused to everyone), and on a Cluster that every key hashes to one
 *     slot (else CROSSSLOT, as Redis Cluster answers);
 *   - sent with pool_command_slot() to the owner of the keys' slot (any
 *     node when there are no keys), on the connection the first key's
 *     px_route_hint() picks (the connection the lock commands on that name
 *     use, so a client's commands on one name stay in order). The pool
 *     follows MOVED/ASK and retries TRYAGAIN/CLUSTERDOWN; the reply is
 *     written back in the client's protocol, in request order.
 * Nothing is sent for a request refused by a check: it changes nothing.
 *
 * Scripts (fwd_script.c): the proxy keeps the text of every script a
 * client sent with EVAL or SCRIPT LOAD, by SHA1, so EVALSHA works on every
 * connection and node and after a restart or failover: a NOSCRIPT reply to
 * an EVALSHA whose text is kept is retried once as EVAL (which also loads
 * it there). The texts are bounded (PX_FWD_SCRIPTS_MAX_BYTES, or a
 * quarter of --max-client-memory when that is smaller), least recently
 * used first out: an evicted SHA answers NOSCRIPT, as Redis does after
 * SCRIPT FLUSH, and clients reload it. SCRIPT FLUSH empties the kept texts
 * and is forwarded (one node on a Cluster); the proxy's own scripts
 * recover from it by their own NOSCRIPT reload. */
#ifndef LP_PROXY_FWD_H
#define LP_PROXY_FWD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;
struct px_server;

#define PX_FWD_SCRIPTS_MAX_BYTES (64u << 20)

struct px_fwd_stats {
    uint64_t forwarded;        /* requests sent upstream */
    uint64_t errors;           /* of those, answered with an error (Redis's or UPSTREAM) */
    uint64_t refused;          /* refused before sending (unknown, refused, checks, MULTI) */
    uint64_t noscript_retries; /* EVALSHA retried as EVAL after NOSCRIPT */
    uint64_t scripts;          /* script texts kept */
    uint64_t script_bytes;     /* their bytes */
    uint64_t script_evictions; /* texts dropped to stay within the bound */
};

/* Creates srv's pass-through state (srv->fwd). Returns 0 or -ENOMEM. */
int px_fwd_create(struct px_server *srv);
void px_fwd_destroy(struct px_server *srv);

/* Runs req, whose name is none of the proxy's own commands (see above).
 * Completes it now or when Redis answers. */
void px_fwd_dispatch(struct px_req *req);

void px_fwd_get_stats(const struct px_server *srv, struct px_fwd_stats *st);

/* INFO's "# Passthrough" section. */
void px_fwd_info(struct px_server *srv, struct buf *o);

/* ---- fwd_script.c ---- */

struct px_fwd_scripts;

/* The kept text of sha (40 hex digits, any case), or NULL; marks it
 * recently used. Borrowed until the next px_fwd_script_* call. */
const char *px_fwd_script_find(struct px_fwd_scripts *sc, const char *sha, size_t shalen,
                               size_t *len);
/* Keeps text under its SHA1 (computed when sha is NULL); evicts the least
 * recently used texts past max_bytes. Returns 0, or -ENOMEM / -E2BIG
 * (nothing kept). */
int px_fwd_script_keep(struct px_fwd_scripts *sc, const char *sha, const char *text, size_t len,
                       size_t max_bytes);
void px_fwd_script_flush(struct px_fwd_scripts *sc);
struct px_fwd_scripts *px_fwd_scripts_create(void);
void px_fwd_scripts_destroy(struct px_fwd_scripts *sc);
void px_fwd_scripts_stats(const struct px_fwd_scripts *sc, struct px_fwd_stats *st);

#ifdef __cplusplus
}
#endif

#endif
