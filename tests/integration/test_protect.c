/* Protected mode (Redis's): without requirepass or users, a client that
 * is not on the loopback interface (here: this host's own non-loopback
 * address, so the peer address is not 127.x) gets -DENIED and is
 * disconnected; with auth configured, or --protected-mode no, it is
 * served. Settings also come from LOCKPROXY_* environment variables (the
 * container image's upstream and password). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#include <net/if.h>

/* This host's first non-loopback IPv4 address, or skips the test. */
static void outside_ip(char *out, size_t n)
{
    struct ifaddrs *ifs, *i;

    out[0] = '\0';
    if (getifaddrs(&ifs) < 0)
        TEST_SKIP("getifaddrs failed");
    for (i = ifs; i && !out[0]; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) &&
            (i->ifa_flags & IFF_UP))
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
    }
    freeifaddrs(ifs);
    if (!out[0])
        TEST_SKIP("no non-loopback IPv4 address on this host");
}

static int connect_to(const char *ip, int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
        TEST_FAIL("connect %s:%d: %s", ip, port, strerror(errno));
    return fd;
}

/* Sends PING from ip to the proxy's wildcard listener; returns the first
 * reply line (static buffer). */
static const char *ping_from(const char *ip, int port)
{
    static char line[2048];
    int fd = connect_to(ip, port);

    pu_raw_send(fd, "PING\r\n", 6);
    pu_raw_read_line(fd, line, sizeof(line), 3000);
    close(fd);
    return line;
}

/* A proxy with a second listener on 0.0.0.0:wport and extra flags. */
static void start(struct pu_redis *r, struct pu_proxy *p, int wport, const char *const *extra,
                  const char *log)
{
    static char listen[32];
    int i = 0;

    snprintf(listen, sizeof(listen), "0.0.0.0:%d", wport);
    snprintf(p->upstream, sizeof(p->upstream), "redis://127.0.0.1:%d", r->port);
    ou_path(p->log_path, sizeof(p->log_path), log);
    p->extra[i++] = "--listen";
    p->extra[i++] = listen;
    for (; extra && *extra; extra++)
        p->extra[i++] = *extra;
    p->extra[i] = NULL;
    pu_proxy_start(p);
}

TEST(protected_mode_denies_outside_clients)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char ip[64];
    int wport = pu_free_port();
    const char *line;
    redisContext *c;

    outside_ip(ip, sizeof(ip));
    pu_redis_start(&r);
    start(&r, &p, wport, NULL, "protect-on.log");
    line = ping_from(ip, wport);
    if (strncmp(line, "-DENIED lockproxy is running in protected mode ", 47) != 0)
        TEST_FAIL("outside client: want -DENIED, got '%s'", line);
    ASSERT_TRUE(strstr(line, "--protected-mode no") && strstr(line, "requirepass"));
    /* Loopback clients are served, on every listener. */
    ASSERT_TRUE(strncmp(ping_from("127.0.0.1", wport), "+PONG", 5) == 0);
    c = pu_connect(p.port);
    PU_OK(c, "LOCK %s", "a");
    ASSERT_EQ(pu_info_int(c, "protected_mode_refusals"), 1);
    redisFree(c);
    ASSERT_TRUE(ou_file_contains(p.log_path, "protected mode: refused a client from"));
    ASSERT_TRUE(ou_file_contains(p.log_path, "serves loopback clients only until requirepass"));
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

TEST(protected_mode_off_or_auth_serves_outside)
{
    static const char *const off[] = {"--protected-mode", "no", NULL};
    static const char *const pass[] = {"--requirepass", "pw", NULL};
    struct pu_redis r = {0};
    struct pu_proxy p = {0}, q = {0};
    char ip[64];
    int wport = pu_free_port();
    const char *line;

    outside_ip(ip, sizeof(ip));
    pu_redis_start(&r);
    start(&r, &p, wport, off, "protect-off.log");
    ASSERT_TRUE(strncmp(ping_from(ip, wport), "+PONG", 5) == 0);
    ASSERT_TRUE(ou_file_contains(p.log_path, "open to other hosts without authentication"));
    pu_proxy_stop(&p);
    wport = pu_free_port();
    start(&r, &q, wport, pass, "protect-auth.log");
    line = ping_from(ip, wport); /* PING works before AUTH, as in Redis */
    if (strncmp(line, "+PONG", 5) != 0)
        TEST_FAIL("outside client with auth on: got '%s'", line);
    pu_proxy_stop(&q);
    pu_redis_kill(&r);
}

/* The container image configures the upstream and the password through
 * the environment; flags still win over it. */
TEST(settings_from_environment)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char up[64], ip[64];
    int wport = pu_free_port();
    redisContext *c;

    outside_ip(ip, sizeof(ip));
    pu_redis_start(&r);
    snprintf(up, sizeof(up), "redis://127.0.0.1:%d", r.port);
    setenv("LOCKPROXY_UPSTREAM", up, 1);
    setenv("LOCKPROXY_REQUIREPASS", "from-env", 1);
    setenv("LOCKPROXY_MAX_CLIENTS", "77", 1);
    r.port = pu_free_port(); /* the flag's upstream is wrong: the env is not used for it */
    start(&r, &p, wport, NULL, "env.log");
    unsetenv("LOCKPROXY_UPSTREAM");
    unsetenv("LOCKPROXY_REQUIREPASS");
    unsetenv("LOCKPROXY_MAX_CLIENTS");
    /* Auth is on (from the environment): an outside client is served. */
    ASSERT_TRUE(strncmp(ping_from(ip, wport), "+PONG", 5) == 0);
    c = pu_connect(p.port);
    PU_ERR(c, "NOAUTH", "LOCK %s", "a");
    PU_OK(c, "AUTH %s", "from-env");
    ASSERT_EQ(pu_info_int(c, "max_clients"), 77);
    /* The --upstream flag overrides LOCKPROXY_UPSTREAM: Redis is not there. */
    PU_ERR(c, "UPSTREAM", "LOCK %s WAIT 0", "a");
    redisFree(c);
    pu_proxy_stop(&p);

    /* A bad value names the variable. */
    {
        const char *argv[] = {pu_proxy_bin(), NULL};
        char out[2048];
        int st;

        setenv("LOCKPROXY_POOL_SIZE", "zero", 1);
        st = pu_run_capture(argv, out, sizeof(out), 5000);
        unsetenv("LOCKPROXY_POOL_SIZE");
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 ||
            !strstr(out, "LOCKPROXY_POOL_SIZE: --pool-size"))
            TEST_FAIL("bad env value: status 0x%x: %s", st, out);
    }
}

TEST_MAIN(TEST_CASE(protected_mode_denies_outside_clients),
          TEST_CASE(protected_mode_off_or_auth_serves_outside),
          TEST_CASE(settings_from_environment))
