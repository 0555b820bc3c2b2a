/* Deadlines and sockets of client connections: --timeout closes idle
 * connections but not one that waits for or holds a lock; --auth-timeout
 * closes connections that do not authenticate in time; the metrics
 * endpoint answers probes while idle HTTP connections are open; TCP
 * keepalive notices a client host that vanished without a FIN (in a
 * network namespace of its own) and releases its lock. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "limits_util.h"
#include "ops_util.h"
#include "proxy_util.h"

#define CLOSE_BOUND_MS 10000 /* a 1 or 2 s deadline, with room for a slow machine */
#define BUSY_MS        6000  /* three times the 2 s idle deadline */
#define HTTP_IDLE      80    /* more idle HTTP connections than the endpoint keeps */

/* PINGs c every 200 ms for ms milliseconds; fails if a reply is missing. */
static void keep_pinging(redisContext *c, int ms)
{
    long long end = pu_now_ms() + ms;

    while (pu_now_ms() < end) {
        PU_STR(c, "PONG", "PING");
        pu_sleep_ms(200);
    }
}

/* ---- --timeout ------------------------------------------------------------ */

static void scenario_idle(struct pu_env *e)
{
    redisContext *active = pu_client(e), *holder = pu_client(e), *waiter = pu_client(e);
    redisReply *r;
    bool closed = false;
    char line[64];
    int idle = pu_raw_connect(e->proxy.port);

    ASSERT_TRUE(pu_raw_send(idle, "*1\r\n$4\r\nPING\r\n", 14));
    pu_raw_read_line(idle, line, sizeof(line), 3000);
    ASSERT_STREQ(line, "+PONG\r\n");
    PU_OK(holder, "LOCK %s", "idle-l");
    pu_send(waiter, "LOCK %s", "idle-l");
    /* The holder and the waiter say nothing for three deadlines. */
    keep_pinging(active, BUSY_MS);
    ASSERT_TRUE(pu_raw_wait_closed(idle, CLOSE_BOUND_MS));
    PU_INT(holder, 1, "UNLOCK %s", "idle-l");
    r = pu_recv(waiter);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    PU_INT(waiter, 1, "UNLOCK %s", "idle-l");
    ASSERT_TRUE(pu_info_int(active, "client_idle_timeouts") >= 1);
    /* Holding nothing and waiting for nothing, both are idle now. */
    ASSERT_NULL(pu_poll_reply(holder, CLOSE_BOUND_MS, &closed));
    ASSERT_TRUE(closed);
    ASSERT_NULL(pu_poll_reply(waiter, CLOSE_BOUND_MS, &closed));
    ASSERT_TRUE(closed);
    redisFree(active);
    active = pu_client(e);
    ASSERT_TRUE(pu_info_int(active, "client_idle_timeouts") >= 3);
    redisFree(waiter);
    redisFree(holder);
    close(idle);
    redisFree(active);
}

TEST(deadlines_idle_timeout)
{
    static const char *const extra[] = {"--timeout", "2", NULL};

    pu_each_backend(scenario_idle, extra);
}

/* A reload turns --timeout on for connections already open. */
TEST(deadlines_reload_turns_timeout_on)
{
    static const char *extra[3] = {"--config", NULL, NULL};
    char conf[PU_PATH_MAX];
    struct pu_env e;
    redisContext *c;
    int idle;

    ou_path(conf, sizeof(conf), "deadlines.conf");
    ou_write_file(conf, "timeout 0\n");
    extra[1] = conf;
    memset(&e, 0, sizeof(e));
    ou_env_start(&e, "epoll", extra);
    idle = pu_raw_connect(e.proxy.port);
    pu_sleep_ms(1500);
    ASSERT_TRUE(!pu_raw_wait_closed(idle, 100));
    ou_write_file(conf, "timeout 1\n");
    kill(e.proxy.pid, SIGHUP);
    c = pu_client(&e); /* busy from here on: it polls */
    PU_EVENTUALLY(pu_info_int(c, "config_reloads") == 1, 5000);
    ASSERT_TRUE(pu_raw_wait_closed(idle, CLOSE_BOUND_MS));
    close(idle);
    redisFree(c);
    pu_env_stop(&e);
}

/* ---- --auth-timeout ---------------------------------------------------------- */

static void scenario_auth(const char *backend)
{
    static const char *const extra[] = {"--requirepass", "pw", "--auth-timeout", "1", NULL};
    struct pu_env e;
    redisContext *authed;
    long long end;
    int silent, pinger;

    memset(&e, 0, sizeof(e));
    ou_env_start(&e, backend, extra);
    silent = pu_raw_connect(e.proxy.port);
    pinger = pu_raw_connect(e.proxy.port);
    authed = ou_client_auth(&e, NULL, "pw");
    /* PING is allowed before AUTH, but does not extend the deadline. */
    end = pu_now_ms() + CLOSE_BOUND_MS;
    while (pu_now_ms() < end && pu_raw_send(pinger, "*1\r\n$4\r\nPING\r\n", 14)) {
        char line[64];

        if (pu_raw_read_line(pinger, line, sizeof(line), 300) == 0)
            break;
        pu_sleep_ms(200);
    }
    ASSERT_TRUE(pu_raw_wait_closed(pinger, CLOSE_BOUND_MS));
    ASSERT_TRUE(pu_raw_wait_closed(silent, CLOSE_BOUND_MS));
    /* The authenticated connection stays, idle or not. */
    pu_sleep_ms(1500);
    PU_STR(authed, "PONG", "PING");
    ASSERT_EQ(pu_info_int(authed, "client_auth_timeouts"), 2);
    close(silent);
    close(pinger);
    redisFree(authed);
    pu_env_stop(&e);
}

TEST(deadlines_auth_timeout)
{
    scenario_auth("epoll");
    if (pu_uring_available())
        scenario_auth("uring");
}

/* ---- HTTP probes with idle connections open ---------------------------------- */

static char metrics_addr[64];
static int metrics_port;

static void scenario_http_idle(struct pu_env *e)
{
    char body[256];
    int fds[HTTP_IDLE];

    for (int i = 0; i < HTTP_IDLE; i++)
        fds[i] = pu_raw_connect(metrics_port);
    /* Every idle connection is still open, yet probes are answered. */
    ASSERT_EQ(ou_http_get(metrics_port, "/livez", body, sizeof(body)), 200);
    ASSERT_STREQ(body, "ok\n");
    ASSERT_EQ(ou_http_get(metrics_port, "/livez", body, sizeof(body)), 200);
    /* The idle ones are closed before long. */
    for (int i = 0; i < HTTP_IDLE; i++) {
        ASSERT_TRUE(pu_raw_wait_closed(fds[i], CLOSE_BOUND_MS));
        close(fds[i]);
    }
    pu_proxy_assert_alive(&e->proxy);
}

TEST(deadlines_http_probes_with_idle_connections)
{
    static const char *const extra[] = {"--metrics", metrics_addr, NULL};

    metrics_port = pu_free_port();
    snprintf(metrics_addr, sizeof(metrics_addr), "127.0.0.1:%d", metrics_port);
    pu_each_backend(scenario_http_idle, extra);
}

/* ---- TCP keepalive: a client host that vanishes ------------------------------ */

static void scenario_keepalive(const char *backend, struct lu_netns *ns)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    redisContext *other;
    char listen[48], line[64];
    int fd, port = pu_free_port();

    pu_redis_start(&r);
    /* The harness's own listener is a unix socket (for its readiness
     * check): every --listen is a listener, and 127.0.0.1:port would
     * collide with 0.0.0.0:port. */
    snprintf(p.unix_path, sizeof(p.unix_path), "%.100s/keepalive-%s.sock", pu_tmpdir(), backend);
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:%d", r.port);
    snprintf(listen, sizeof(listen), "0.0.0.0:%d", port);
    snprintf(p.log_path, sizeof(p.log_path), "%.100s/proxy-keepalive-%s.log", pu_tmpdir(), backend);
    {
        /* The client is another host, and no auth is set: protected mode off. */
        const char *extra[] = {"--io",
                               backend,
                               "--listen",
                               listen,
                               "--tcp-keepalive",
                               "1",
                               "--log-level",
                               "debug",
                               "--protected-mode",
                               "no",
                               NULL};

        memcpy(p.extra, extra, sizeof(extra));
    }
    pu_proxy_start(&p);
    /* The client, in its own namespace, takes the lock. */
    fd = lu_netns_connect(ns, ns->host_ip, port);
    ASSERT_TRUE(pu_raw_send(fd, "*2\r\n$4\r\nLOCK\r\n$2\r\nka\r\n", 22));
    pu_raw_read_line(fd, line, sizeof(line), 5000);
    ASSERT_STREQ(line, "+OK\r\n");
    other = pu_connect(port);
    pu_set_timeout(other, 30000);
    PU_NIL(other, "TRYLOCK %s", "ka");
    /* Its host vanishes: no FIN, no reset, nothing. */
    lu_netns_cut(ns);
    PU_OK(other, "LOCK %s WAIT %d", "ka", 20000);
    PU_INT(other, 1, "UNLOCK %s", "ka");
    ASSERT_TRUE(pu_info_int(other, "connected_clients") == 1);
    close(fd);
    redisFree(other);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

TEST(deadlines_tcp_keepalive_half_open)
{
    struct lu_netns ns;

    lu_netns_create(&ns);
    scenario_keepalive("epoll", &ns);
    lu_netns_destroy(&ns);
    if (!pu_uring_available())
        return;
    lu_netns_create(&ns);
    scenario_keepalive("uring", &ns);
    lu_netns_destroy(&ns);
}

TEST_MAIN(TEST_CASE(deadlines_idle_timeout), TEST_CASE(deadlines_reload_turns_timeout_on),
          TEST_CASE(deadlines_auth_timeout), TEST_CASE(deadlines_http_probes_with_idle_connections),
          TEST_CASE(deadlines_tcp_keepalive_half_open))
