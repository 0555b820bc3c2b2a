/* Protected mode; see protect.h. */
#include "proxy/protect.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "proxy/auth.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* Redis's words, with lockproxy's settings. */
static const char denied[] =
    "-DENIED lockproxy is running in protected mode because protected mode is enabled and no "
    "password is set (no requirepass and no user). In this mode connections are only accepted "
    "from the loopback interface and Unix sockets. If you want to connect from other hosts, "
    "you may adopt one of the following solutions: 1) Set up authentication: requirepass or "
    "user in the config file, or LOCKPROXY_REQUIREPASS in the environment (recommended: "
    "anyone who reaches the port could otherwise take or FORCEUNLOCK any lock). 2) If the "
    "network is trusted, start lockproxy with '--protected-mode no' (or 'protected-mode no' "
    "in the config file and a reload). NOTE: You only need to do one of the above things in "
    "order for the server to start accepting connections from the outside.\r\n";

/* True for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return true; /* AF_UNIX */
}

static bool protecting(const struct px_server *srv, bool tls)
{
    return srv->opts.protected_mode && !px_auth_required(srv->opts.auth) &&
           !(tls && srv->opts.tls_auth_clients == PX_TLS_AUTH_YES);
}

bool px_protect_refuse(struct px_server *srv, int fd, bool tls)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    uint64_t quiet;

    if (!protecting(srv, tls) || getpeername(fd, (struct sockaddr *)&ss, &len) < 0 ||
        is_loopback(&ss))
        return false;
    if (!tls && write(fd, denied, sizeof(denied) - 1) < 0)
        log_msg(LOG_LVL_DEBUG, "protected mode: write failed");
    if (px_ratelog_allow(&srv->protect_log, sched_loop_now_ms(srv->loop), &quiet)) {
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
        else
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
        log_msg(LOG_LVL_WARN,
                "protected mode: refused a client from %s (no requirepass or user is set; "
                "see --protected-mode) (%llu more since the last report)",
                ip, (unsigned long long)quiet);
    }
    srv->stats.protected_refusals++;
    close(fd);
    return true;
}

/* True when a listens on a loopback address only (or a Unix socket). */
static bool listen_is_local(const struct px_addr *a)
{
    struct in6_addr a6;
    struct in_addr a4;

    if (a->path[0] || strcmp(a->host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, a->host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, a->host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

void px_protect_check_listeners(struct px_server *srv)
{
    unsigned i;

    for (i = 0; i < srv->opts.nlisten; i++) {
        const struct px_addr *a = &srv->opts.listen[i];

        if (listen_is_local(a) || px_auth_required(srv->opts.auth) ||
            (a->tls && srv->opts.tls_auth_clients == PX_TLS_AUTH_YES))
            continue;
        if (srv->opts.protected_mode)
            log_msg(LOG_LVL_WARN,
                    "protected mode: %s:%d serves loopback clients only until requirepass or a "
                    "user is set (others get -DENIED)",
                    a->host, a->port);
        else
            log_msg(LOG_LVL_WARN,
                    "%s:%d is open to other hosts without authentication (protected-mode no): "
                    "anyone who reaches it can take or force-unlock any lock",
                    a->host, a->port);
    }
}
