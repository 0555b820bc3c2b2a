/* Start-up announcements: what the proxy serves (its version, every
 * listen address, the metrics address, the upstream without credentials),
 * then "ready" only once Redis answers, and "waiting for upstream ..."
 * while it does not. Readiness also goes to systemd (Type=notify,
 * notify.h): READY=1 once, when the upstream is first ready; STATUS= says
 * what it waits for; STOPPING=1 at the orderly stop; and, when systemd
 * asks for it (WatchdogSec= in the unit sets $WATCHDOG_USEC), WATCHDOG=1
 * from the event loop every half of that period, so a loop that hangs is
 * restarted. */
#ifndef LP_PROXY_READY_H
#define LP_PROXY_READY_H

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* Logs the start-up lines once the listeners accept; announces ready at
 * once if the upstream is. */
void px_ready_start(struct px_server *srv);

/* Called every loop iteration (cheap once ready): announces ready the
 * first time the upstream is. */
void px_ready_poll(struct px_server *srv);

/* The orderly stop begins. */
void px_ready_stopping(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
