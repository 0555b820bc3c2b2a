/* Protected mode (--protected-mode yes, the default), as Redis's: while
 * no authentication is configured (no requirepass, no user), only clients
 * on the loopback interface or a Unix socket are served; any other gets
 * Redis's -DENIED explanation and is disconnected. So a proxy started
 * with --listen 0.0.0.0:7379 and no password (the old container default)
 * is not open to anyone who reaches the port, who could FORCEUNLOCK every
 * lock. A tls:// listener that requires a client certificate
 * (--tls-auth-clients yes) counts as authenticated. */
#ifndef LP_PROXY_PROTECT_H
#define LP_PROXY_PROTECT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* Checks a newly accepted socket fd (on a tls:// listener when tls).
 * Returns true when it was refused: the error went out (plain TCP only;
 * a TLS client cannot read clear text) and fd is closed. */
bool px_protect_refuse(struct px_server *srv, int fd, bool tls);

/* At start-up: warns about listeners that are open to other hosts
 * without authentication (protected mode off), or that serve loopback
 * clients only because of protected mode. */
void px_protect_check_listeners(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
