/* lockproxy command line and deployment options: --help/--version, bad
 * flags, unix sockets on both sides, upstream password and db number,
 * --pool-size 1, --max-clients, and a clean exit on SIGTERM that releases
 * the locks of its clients. */
#include <sys/wait.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define RUN_MS 5000

static void scenario_cli_help(void)
{
    const char *argv[] = {pu_proxy_bin(), "--help", NULL};
    char out[8192];
    int st;

    st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("--help: wait status 0x%x, output: %s", st, out);
    ASSERT_TRUE(strstr(out, "--listen") && strstr(out, "--upstream"));
    ASSERT_TRUE(strstr(out, "--on-disconnect") && strstr(out, "--io"));
    argv[1] = "--version";
    st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("--version: wait status 0x%x, output: %s", st, out);
    ASSERT_TRUE(strstr(out, "0.1.0") != NULL);
}

TEST(cli_help_and_version)
{
    scenario_cli_help();
}

TEST(cli_rejects_bad_flags)
{
    static const char *const bad[][3] = {
        {"--bogus", NULL, NULL},
        {"--io", "nope", NULL},
        {"--on-disconnect", "maybe", NULL},
        {"--pool-size", "0", NULL},
        {"--pool-size", "abc", NULL},
        {"--lock-watchdog-timeout", "-1", NULL},
        {"--max-clients", "x", NULL},
        {"--log-level", "loud", NULL},
        {"--upstream-timeout", "", NULL},
        {"--upstream", "http://127.0.0.1:1", NULL},
        {"--listen", "nohostport", NULL},
        {"--listen", NULL, NULL},
    };
    char listen[32], out[4096];

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", pu_free_port());
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *argv[] = {pu_proxy_bin(), "--listen", listen, bad[i][0], bad[i][1], NULL};
        int st = pu_run_capture(argv, out, sizeof(out), RUN_MS);

        if (!WIFEXITED(st) || WEXITSTATUS(st) == 0)
            TEST_FAIL("%s %s: expected a non-zero exit, got wait status 0x%x; output: %s",
                      bad[i][0], bad[i][1] ? bad[i][1] : "", st, out);
        if (out[0] == '\0')
            TEST_FAIL("%s: rejected without a message", bad[i][0]);
    }
}

/* Unix sockets on both the client and the upstream side. */
static void scenario_unix(struct pu_env *e)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    redisContext *c, *rc;

    snprintf(r.unix_path, sizeof(r.unix_path), "%.100s/redis-%s.sock", pu_tmpdir(), e->backend);
    pu_redis_start(&r);
    snprintf(p.unix_path, sizeof(p.unix_path), "%.100s/proxy-%s.sock", pu_tmpdir(), e->backend);
    snprintf(p.log_path, sizeof(p.log_path), "%.100s/proxy-unix-%s.log", pu_tmpdir(), e->backend);
    snprintf(p.upstream, sizeof(p.upstream), "unix://%.200s", r.unix_path);
    p.extra[0] = "--io";
    p.extra[1] = e->backend;
    pu_proxy_start(&p);
    c = pu_connect_unix(p.unix_path);
    rc = pu_connect(r.port);
    PU_OK(c, "LOCK %s", "ux");
    ASSERT_TRUE(pu_exists(rc, "ux"));
    PU_INT(c, 1, "UNLOCK %s", "ux");
    ASSERT_TRUE(!pu_exists(rc, "ux"));
    redisFree(rc);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

TEST(cli_unix_sockets)
{
    pu_each_backend(scenario_unix, NULL);
}

/* redis://user:password@host:port/db */
static void scenario_auth_db(struct pu_env *e)
{
    struct pu_redis r = {.extra = {"--requirepass", "s3cret", NULL}};
    struct pu_proxy p = {0};
    redisContext *c, *rc;

    pu_redis_start(&r);
    snprintf(p.upstream, sizeof(p.upstream), "redis://default:s3cret@127.0.0.1:%d/3", r.port);
    snprintf(p.log_path, sizeof(p.log_path), "%.100s/proxy-auth-%s.log", pu_tmpdir(), e->backend);
    p.extra[0] = "--io";
    p.extra[1] = e->backend;
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    rc = pu_connect(r.port);
    PU_OK(rc, "AUTH %s", "s3cret");
    PU_OK(c, "LOCK %s", "authdb");
    PU_OK(rc, "SELECT %d", 3);
    ASSERT_TRUE(pu_exists(rc, "authdb"));
    PU_OK(rc, "SELECT %d", 0);
    ASSERT_TRUE(!pu_exists(rc, "authdb"));
    PU_INT(c, 1, "UNLOCK %s", "authdb");
    PU_OK(rc, "SELECT %d", 3);
    ASSERT_TRUE(!pu_exists(rc, "authdb"));
    redisFree(rc);
    redisFree(c);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

TEST(cli_upstream_auth_and_db)
{
    pu_each_backend(scenario_auth_db, NULL);
}

/* With one upstream connection, a blocked waiter must not stall others. */
static void scenario_pool_one(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    long long t0;

    PU_OK(c1, "LOCK %s LEASE %d", "pa", 10000);
    pu_send(c2, "LOCK %s", "pa");
    ASSERT_NULL(pu_try_recv(c2, 200));
    t0 = pu_now_ms();
    PU_OK(c3, "LOCK %s", "pb");
    PU_INT(c3, 1, "UNLOCK %s", "pb");
    ASSERT_TRUE(pu_now_ms() - t0 < 1000);
    PU_INT(c1, 1, "UNLOCK %s", "pa");
    su_expect_ok_within(c2, 3000);
    PU_INT(c2, 1, "UNLOCK %s", "pa");
    su_mutex_check(e->proxy.port, "pool-one", 16, 10);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
}

TEST(cli_pool_size_one)
{
    static const char *const extra[] = {"--pool-size", "1", NULL};

    pu_each_backend(scenario_pool_one, extra);
}

/* True if a new connection gets PONG. */
static bool fresh_client_served(int port)
{
    redisContext *c = pu_try_connect(port);
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    bool ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;

    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

/* The connection over the limit gets no service (error or close). */
static void scenario_max_clients(struct pu_env *e)
{
    redisContext *c[3], *extra_c;
    redisReply *r;
    bool closed = false;

    pu_sleep_ms(200); /* let the proxy see pu_env_start's probe go away */
    for (int i = 0; i < 3; i++) {
        c[i] = pu_client(e);
        PU_STR(c[i], "PONG", "PING");
    }
    extra_c = pu_try_connect(e->proxy.port);
    if (extra_c) {
        pu_send(extra_c, "PING");
        r = pu_poll_reply(extra_c, 3000, &closed);
        if (r && !(r->type == REDIS_REPLY_ERROR))
            TEST_FAIL("4th client with --max-clients 3 got a non-error reply");
        if (!r && !closed)
            TEST_FAIL("4th client with --max-clients 3: no reply and not closed");
        if (r)
            freeReplyObject(r);
        redisFree(extra_c);
    }
    redisFree(c[0]);
    PU_EVENTUALLY(fresh_client_served(e->proxy.port), 3000);
    redisFree(c[2]);
    redisFree(c[1]);
}

TEST(cli_max_clients)
{
    static const char *const extra[] = {"--max-clients", "3", NULL};

    pu_each_backend(scenario_max_clients, extra);
}

/* SIGTERM: exit status 0 within the grace period; locks of connected
 * clients are released (default --on-disconnect release); a restarted
 * proxy has a new identity. */
static void scenario_sigterm(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    char uuid1[64], uuid2[64];
    int st;

    pu_proxy_uuid(c1, uuid1, sizeof(uuid1));
    PU_OK(c1, "LOCK %s", "g");
    pu_send(c2, "LOCK %s", "g");
    ASSERT_NULL(pu_try_recv(c2, 100));
    st = pu_proxy_stop(&e->proxy);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("SIGTERM: expected exit status 0, got wait status 0x%x", st);
    ASSERT_TRUE(!pu_exists(rc, "g"));
    redisFree(c2);
    redisFree(c1);

    pu_proxy_start(&e->proxy);
    c1 = pu_client(e);
    pu_proxy_uuid(c1, uuid2, sizeof(uuid2));
    ASSERT_TRUE(strcmp(uuid1, uuid2) != 0);
    PU_OK(c1, "TRYLOCK %s", "g");
    PU_INT(c1, 1, "UNLOCK %s", "g");
    redisFree(c1);
    redisFree(rc);
}

TEST(cli_sigterm_clean_exit)
{
    pu_each_backend(scenario_sigterm, NULL);
}

TEST_MAIN(TEST_CASE(cli_help_and_version), TEST_CASE(cli_rejects_bad_flags),
          TEST_CASE(cli_unix_sockets), TEST_CASE(cli_upstream_auth_and_db),
          TEST_CASE(cli_pool_size_one), TEST_CASE(cli_max_clients),
          TEST_CASE(cli_sigterm_clean_exit))
