/* CLIENT and the per-connection facts operators and clients read: ID,
 * SETNAME/GETNAME, SETINFO LIB-NAME|LIB-VER (sent by current clients at
 * connect), INFO and LIST in Redis's line format, and KILL. Also the
 * connection's addresses, for logs (auth failures) and the listings.
 *
 * Who may see and kill what: without auth, every connection sees and may
 * kill every other (as FORCEUNLOCK may release any lock). With auth, a
 * user sees and kills only its own user's connections, unless it may
 * access every lock name (allkeys, ~*, or the requirepass "default"). */
#ifndef LP_PROXY_CLIENT_CMD_H
#define LP_PROXY_CLIENT_CMD_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_req;

#define PX_CLIENT_ADDR_MAX 128 /* "[v6]:port" or a unix path + ":0" */
#define PX_CLIENT_LIB_MAX  64  /* longest lib-name / lib-ver kept (longer ones are cut) */

/* The CLIENT command (argc >= 2). */
void px_client_cmd(struct px_req *req);

/* Writes cl's peer address (local: the address it connected to) as Redis
 * shows it: "ip:port", "[v6]:port", or "<path>:0" for a Unix socket; "?"
 * when the socket is gone. Returns out. */
const char *px_client_addr(const struct px_client *cl, bool local, char *out, size_t n);

/* True when viewer may see (and kill) cl: see the rules above. */
bool px_client_may_see(const struct px_client *viewer, const struct px_client *cl);

#ifdef __cplusplus
}
#endif

#endif
