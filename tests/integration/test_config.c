/* Config files end to end: settings from --config reach the running
 * proxy, flags override the file, the shipped example deploy/lockproxy.conf
 * works, and a bad or missing file stops the proxy at start-up with exit
 * code 2 and a message naming the file, the line and the key. */
#include <sys/wait.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define RUN_MS 5000

static void expect_info(redisContext *c, const char *field, const char *want)
{
    char got[128];

    if (!pu_info_str(c, field, got, sizeof(got)) || strcmp(got, want) != 0)
        TEST_FAIL("INFO %s: got \"%s\", want \"%s\"", field, got, want);
}

TEST(config_file_sets_options)
{
    char conf[PU_PATH_MAX];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *c;

    ou_path(conf, sizeof(conf), "opts.conf");
    ou_write_file(conf, "# from a file\n"
                        "lock-watchdog-timeout 4000\n"
                        "on-disconnect 'expire'\n"
                        "pool-size \"1\"\n"
                        "max-clients 77\n");
    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    expect_info(c, "lock_watchdog_timeout_ms", "4000");
    expect_info(c, "on_disconnect", "expire");
    expect_info(c, "upstream_conns", "1");
    expect_info(c, "max_clients", "77");
    redisFree(c);
    pu_env_stop(&e);
}

TEST(config_flags_override_file)
{
    char conf[PU_PATH_MAX];
    const char *extra[] = {"--lock-watchdog-timeout", "7000", "--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *c;

    ou_path(conf, sizeof(conf), "override.conf");
    ou_write_file(conf, "lock-watchdog-timeout 4000\nmax-clients 55\n");
    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    expect_info(c, "lock_watchdog_timeout_ms", "7000"); /* the flag wins, wherever it is */
    expect_info(c, "max_clients", "55");                /* the file still applies */
    redisFree(c);
    pu_env_stop(&e);
}

/* The repository root, from this file's path (.../tests/integration/x.c). */
static void repo_root(char *buf, size_t n)
{
    const char *marker = strstr(__FILE__, "/tests/integration/");

    if (!marker || __FILE__[0] != '/')
        TEST_SKIP("cannot locate the repository from %s", __FILE__);
    snprintf(buf, n, "%.*s", (int)(marker - __FILE__), __FILE__);
}

TEST(config_example_file_runs)
{
    char example[PU_PATH_MAX + 32], root[PU_PATH_MAX], maddr[32], body[256];
    const char *extra[] = {"--config", example, "--metrics", maddr, NULL};
    struct pu_env e = {0};
    redisContext *c;
    int mport = pu_free_port();

    repo_root(root, sizeof(root));
    snprintf(example, sizeof(example), "%s/deploy/lockproxy.conf", root);
    snprintf(maddr, sizeof(maddr), "127.0.0.1:%d", mport);
    /* --listen and --upstream from the harness override the example's. */
    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    PU_OK(c, "LOCK %s", "example");
    PU_INT(c, 1, "UNLOCK %s", "example");
    expect_info(c, "lock_watchdog_timeout_ms", "30000");
    ASSERT_EQ(ou_http_get(mport, "/healthz", body, sizeof(body)), 200);
    redisFree(c);
    pu_env_stop(&e);
}

/* Runs lockproxy with --config path; expects exit 2 and want in the output. */
static void expect_exit_2(const char *path, const char *want)
{
    char listen[32], out[4096];
    const char *argv[] = {pu_proxy_bin(), "--listen", listen, "--config", path, NULL};
    int st;

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", pu_free_port());
    st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2)
        TEST_FAIL("--config %s: wait status 0x%x (want exit 2); output: %s", path, st, out);
    if (!strstr(out, want))
        TEST_FAIL("--config %s: output lacks \"%s\": %s", path, want, out);
}

TEST(config_bad_file_exits_2)
{
    char conf[PU_PATH_MAX], want[PU_PATH_MAX + 64];

    ou_path(conf, sizeof(conf), "bad.conf");
    ou_write_file(conf, "pool-size 2\n# fine so far\nmax-clients lots\n");
    snprintf(want, sizeof(want), "%s:3: key 'max-clients'", conf);
    expect_exit_2(conf, want);
    ou_write_file(conf, "listen 127.0.0.1:1\nno-such-key 1\n");
    snprintf(want, sizeof(want), "%s:2: unknown key 'no-such-key'", conf);
    expect_exit_2(conf, want);
    ou_write_file(conf, "user app on >pw ~a* +get\n");
    snprintf(want, sizeof(want), "%s:1: key 'user'", conf);
    expect_exit_2(conf, want);
    ou_write_file(conf, "requirepass \"unterminated\n");
    expect_exit_2(conf, "key 'requirepass': unbalanced quotes");
    ou_path(conf, sizeof(conf), "missing.conf");
    expect_exit_2(conf, "cannot read config file");
}

TEST_MAIN(TEST_CASE(config_file_sets_options), TEST_CASE(config_flags_override_file),
          TEST_CASE(config_example_file_runs), TEST_CASE(config_bad_file_exits_2))
