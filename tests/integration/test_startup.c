/* Start-up as an operator reads it: the version and every listen address
 * in the log; "ready" only once Redis answers, "waiting for upstream"
 * while it does not; systemd's readiness (Type=notify: READY=1 on
 * $NOTIFY_SOCKET) sent when ready, not before; STOPPING=1 at the stop;
 * and auth failures logged with the peer's address. */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* A datagram socket standing in for systemd's notify socket; sets
 * $NOTIFY_SOCKET for the children started after it. */
static int notify_socket(const char *name)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    ASSERT_TRUE(fd >= 0);
    ou_path(sun.sun_path, sizeof(sun.sun_path), name);
    unlink(sun.sun_path);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    ASSERT_EQ(setenv("NOTIFY_SOCKET", sun.sun_path, 1), 0);
    return fd;
}

/* Appends every datagram that arrives within ms to acc (n bytes). */
static void notify_read(int fd, char *acc, size_t n, int ms)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = 20000};
    long long until = pu_now_ms() + ms;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    while (pu_now_ms() < until) {
        size_t used = strlen(acc);
        ssize_t got;

        if (used + 2 >= n)
            return;
        got = recv(fd, acc + used, n - used - 2, 0);
        if (got > 0) {
            acc[used + (size_t)got] = '\n';
            acc[used + (size_t)got + 1] = '\0';
        }
    }
}

static void proxy_setup(struct pu_proxy *p, int redis_port, const char *log)
{
    snprintf(p->upstream, sizeof(p->upstream), "redis://127.0.0.1:%d", redis_port);
    ou_path(p->log_path, sizeof(p->log_path), log);
}

TEST(startup_logs_listeners_and_ready)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char sock[PU_PATH_MAX], listen2[PU_PATH_MAX + 8], want[PU_PATH_MAX * 2], got[1024] = "";
    int nfd = notify_socket("notify-1.sock");

    pu_redis_start(&r);
    proxy_setup(&p, r.port, "proxy-ready.log");
    ou_path(sock, sizeof(sock), "ready.sock");
    snprintf(listen2, sizeof(listen2), "unix://%s", sock);
    p.extra[0] = "--listen";
    p.extra[1] = listen2;
    pu_proxy_start(&p);
    snprintf(want, sizeof(want), "lockproxy 0.1.0 listening on 127.0.0.1:%d, unix://%s", p.port,
             sock);
    PU_EVENTUALLY(ou_file_contains(p.log_path, want), 5000);
    snprintf(want, sizeof(want), "ready: upstream redis://127.0.0.1:%d answers", r.port);
    PU_EVENTUALLY(ou_file_contains(p.log_path, want), 5000);
    ASSERT_TRUE(!ou_file_contains(p.log_path, "waiting for upstream"));
    notify_read(nfd, got, sizeof(got), 300);
    if (!strstr(got, "READY=1") || strstr(got, "WATCHDOG=1"))
        TEST_FAIL("want READY=1 and no WATCHDOG=1 (not asked for) on $NOTIFY_SOCKET: '%s'", got);
    pu_proxy_stop(&p);
    notify_read(nfd, got, sizeof(got), 300);
    if (!strstr(got, "STOPPING=1"))
        TEST_FAIL("no STOPPING=1 on $NOTIFY_SOCKET: '%s'", got);
    close(nfd);
    pu_redis_kill(&r);
}

TEST(startup_waits_for_upstream)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char want[128], got[1024] = "";
    int nfd = notify_socket("notify-2.sock");
    redisContext *c;

    r.port = pu_free_port(); /* Redis comes later */
    proxy_setup(&p, r.port, "proxy-wait.log");
    pu_proxy_start(&p);
    PU_EVENTUALLY(ou_file_contains(p.log_path, "waiting for upstream"), 5000);
    notify_read(nfd, got, sizeof(got), 500);
    if (!strstr(got, "STATUS=waiting for upstream") || strstr(got, "READY=1"))
        TEST_FAIL("want a waiting STATUS and no READY=1 yet: '%s'", got);
    ASSERT_TRUE(!ou_file_contains(p.log_path, "ready: upstream"));
    c = pu_connect(p.port);
    PU_ERR(c, "UPSTREAM", "LOCK %s WAIT 0", "x");
    pu_redis_start(&r);
    snprintf(want, sizeof(want), "ready: upstream redis://127.0.0.1:%d answers", r.port);
    PU_EVENTUALLY(ou_file_contains(p.log_path, want), 15000);
    notify_read(nfd, got, sizeof(got), 300);
    if (!strstr(got, "READY=1"))
        TEST_FAIL("no READY=1 once Redis answered: '%s'", got);
    PU_OK(c, "LOCK %s", "x");
    redisFree(c);
    pu_proxy_stop(&p);
    close(nfd);
    pu_redis_kill(&r);
}

TEST(auth_failure_names_peer)
{
    static const char *const extra[] = {"--requirepass", "pw", "--log-level", "info", NULL};
    struct pu_env e = {0};
    redisContext *c;

    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    PU_ERR(c, "WRONGPASS", "AUTH %s", "nope");
    PU_EVENTUALLY(ou_file_contains(e.proxy.log_path, "from 127.0.0.1:"), 5000);
    redisFree(c);
    pu_env_stop(&e);
}

/* WatchdogSec= in a unit sets $WATCHDOG_USEC: the loop pings every half
 * of it, and not when it is not asked for. */
TEST(startup_systemd_watchdog)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char got[4096] = "";
    const char *at;
    int nfd = notify_socket("notify-3.sock"), pings = 0;

    pu_redis_start(&r);
    proxy_setup(&p, r.port, "proxy-watchdog.log");
    setenv("WATCHDOG_USEC", "200000", 1);
    pu_proxy_start(&p);
    unsetenv("WATCHDOG_USEC");
    notify_read(nfd, got, sizeof(got), 700);
    for (at = got; (at = strstr(at, "WATCHDOG=1")) != NULL; at++)
        pings++;
    if (pings < 3)
        TEST_FAIL("want a WATCHDOG=1 every 100 ms, got %d in 700 ms: '%s'", pings, got);
    ASSERT_TRUE(ou_file_contains(p.log_path, "systemd watchdog: WATCHDOG=1 every 100 ms"));
    pu_proxy_stop(&p);
    close(nfd);
    pu_redis_kill(&r);
}

TEST_MAIN(TEST_CASE(startup_logs_listeners_and_ready), TEST_CASE(startup_systemd_watchdog),
          TEST_CASE(startup_waits_for_upstream), TEST_CASE(auth_failure_names_peer))
