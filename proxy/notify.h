/* systemd's readiness protocol (sd_notify(3)) without libsystemd: one
 * datagram to the AF_UNIX socket named by $NOTIFY_SOCKET ("/path", or
 * "@name" for the abstract namespace). With Type=notify in the unit,
 * systemd starts the units ordered after lockproxy only once it has sent
 * READY=1, i.e. once Redis answers (see server.c). Without
 * $NOTIFY_SOCKET nothing is sent. */
#ifndef LP_PROXY_NOTIFY_H
#define LP_PROXY_NOTIFY_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sends state (newline-separated "KEY=value" assignments, e.g.
 * "READY=1\nSTATUS=ready") to $NOTIFY_SOCKET. Returns 1 when sent, 0 when
 * there is no $NOTIFY_SOCKET, or -errno. Never blocks (a full socket
 * buffer drops the message). */
int px_notify(const char *state);

#ifdef __cplusplus
}
#endif

#endif
