/* Unit tests for configuration files: line splitting (quotes, escapes),
 * every key, comments, error messages naming file, line and key, and the
 * precedence defaults < file < flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy/auth.h"
#include "proxy/config.h"
#include "proxy/opts.h"

static int parse(struct px_opts *o, const char *text, char *msg, size_t n)
{
    return px_config_parse_text(o, "t.conf", text, strlen(text), msg, n);
}

/* Parses text and expects an error whose message holds want1 and want2. */
static void expect_error(const char *text, const char *want1, const char *want2)
{
    struct px_opts o;
    char msg[512] = "";

    px_opts_default(&o);
    if (parse(&o, text, msg, sizeof(msg)) == 0)
        TEST_FAIL("accepted: %s", text);
    if (!strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        TEST_FAIL("message \"%s\" lacks \"%s\" / \"%s\"", msg, want1, want2 ? want2 : "");
    px_opts_deinit(&o);
}

/* Writes text to a fresh temp file; returns its path (static buffer). */
static const char *temp_conf(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/lp-test-config-XXXXXX");
    fd = mkstemp(path);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(write(fd, text, strlen(text)), (int64_t)strlen(text));
    close(fd);
    return path;
}

TEST(split_words_and_quotes)
{
    char line[] = "  user app on \">a b\" '~x y' \"q\\\"\\n\\x41\" 'it\\'s' \\n  ";
    char *argv[16];

    ASSERT_EQ(px_config_split(line, argv, 16), 8);
    ASSERT_STREQ(argv[0], "user");
    ASSERT_STREQ(argv[1], "app");
    ASSERT_STREQ(argv[2], "on");
    ASSERT_STREQ(argv[3], ">a b");
    ASSERT_STREQ(argv[4], "~x y");
    ASSERT_STREQ(argv[5], "q\"\nA");
    ASSERT_STREQ(argv[6], "it's");
    ASSERT_STREQ(argv[7], "\\n"); /* escapes only inside double quotes */
}

TEST(split_rejects)
{
    char unterminated[] = "requirepass \"abc";
    char glued[] = "requirepass \"abc\"def";
    char nul[] = "requirepass \"a\\x00b\"";
    char badhex[] = "requirepass \"a\\xZZ\"";
    char many[] = "a b c d";
    char empty[] = "   ";
    char *argv[4];

    ASSERT_EQ(px_config_split(unterminated, argv, 4), -EINVAL);
    ASSERT_EQ(px_config_split(glued, argv, 4), -EINVAL);
    ASSERT_EQ(px_config_split(nul, argv, 4), -EINVAL);
    ASSERT_EQ(px_config_split(badhex, argv, 4), -EINVAL);
    ASSERT_EQ(px_config_split(many, argv, 3), -EINVAL);
    ASSERT_EQ(px_config_split(empty, argv, 4), 0);
}

TEST(every_key)
{
    static const char text[] = "# lockproxy test config\n"
                               "\n"
                               "listen 127.0.0.1:7400\n"
                               "upstream redis://u:p@10.0.0.5:6380/2\n"
                               "pool-size 4\n"
                               "   # indented comment\n"
                               "lock-watchdog-timeout 9000\n"
                               "on-disconnect expire\n"
                               "io epoll\n"
                               "max-clients 123\n"
                               "upstream-timeout 777\n"
                               "subscription-linger 0\n"
                               "max-request-bytes 2048\n"
                               "max-args 16\n"
                               "log-level debug\r\n"
                               "metrics 0.0.0.0:9121\n"
                               "requirepass \"p#ss word\"\n"
                               "user app on >apppw ~orders:*\n"
                               "user ops on nopass allkeys\n"
                               "tls-cert-file /etc/lp/server.pem\n"
                               "tls-key-file /etc/lp/server.key\n"
                               "tls-ca-cert-file /etc/lp/ca.pem\n"
                               "tls-auth-clients optional\n"
                               "tls-handshake-timeout 2500\n"
                               "upstream-tls-cert-file /etc/lp/up.pem\n"
                               "upstream-tls-key-file /etc/lp/up.key\n"
                               "upstream-tls-ca-cert-file /etc/lp/up-ca.pem\n"
                               "upstream-tls-server-name redis.internal\n";
    struct px_opts o;
    char msg[512] = "";

    px_opts_default(&o);
    if (parse(&o, text, msg, sizeof(msg)) != 0)
        TEST_FAIL("%s", msg);
    ASSERT_EQ(o.nlisten, 1);
    ASSERT_EQ(o.listen[0].port, 7400);
    ASSERT_TRUE(!o.listen[0].tls);
    ASSERT_STREQ(o.upstream.host, "10.0.0.5");
    ASSERT_STREQ(o.upstream.user, "u");
    ASSERT_EQ(o.upstream.db, 2);
    ASSERT_EQ(o.pool_size, 4);
    ASSERT_EQ(o.watchdog_ms, 9000);
    ASSERT_EQ(o.on_disc, PX_DISCONNECT_EXPIRE);
    ASSERT_EQ(o.io, SCHED_IO_EPOLL);
    ASSERT_EQ(o.max_clients, 123);
    ASSERT_EQ(o.upstream_timeout_ms, 777);
    ASSERT_EQ(o.linger_ms, 0);
    ASSERT_EQ(o.max_request_bytes, 2048);
    ASSERT_EQ(o.max_args, 16);
    ASSERT_EQ(o.log_level, LOG_LVL_DEBUG);
    ASSERT_STREQ(o.metrics.host, "0.0.0.0");
    ASSERT_EQ(o.metrics.port, 9121);
    ASSERT_TRUE(px_auth_required(o.auth));
    ASSERT_NOTNULL(px_auth_check(o.auth, "default", 7, "p#ss word", 9));
    ASSERT_NOTNULL(px_auth_check(o.auth, "app", 3, "apppw", 5));
    ASSERT_NOTNULL(px_auth_check(o.auth, "ops", 3, "", 0));
    ASSERT_STREQ(o.tls_cert_file, "/etc/lp/server.pem");
    ASSERT_STREQ(o.tls_key_file, "/etc/lp/server.key");
    ASSERT_STREQ(o.tls_ca_cert_file, "/etc/lp/ca.pem");
    ASSERT_EQ(o.tls_auth_clients, PX_TLS_AUTH_OPTIONAL);
    ASSERT_EQ(o.tls_handshake_timeout_ms, 2500);
    ASSERT_STREQ(o.up_tls_cert_file, "/etc/lp/up.pem");
    ASSERT_STREQ(o.up_tls_key_file, "/etc/lp/up.key");
    ASSERT_STREQ(o.up_tls_ca_cert_file, "/etc/lp/up-ca.pem");
    ASSERT_STREQ(o.up_tls_server_name, "redis.internal");
    px_opts_deinit(&o);
}

TEST(later_lines_win_and_metrics_off)
{
    struct px_opts o;
    char msg[512];

    px_opts_default(&o);
    ASSERT_OK(parse(&o, "pool-size 3\npool-size 5\nmetrics 127.0.0.1:1\nmetrics off\n", msg,
                    sizeof(msg)));
    ASSERT_EQ(o.pool_size, 5);
    ASSERT_EQ(o.metrics.port, 0);
    ASSERT_NULL(o.auth);
    px_opts_deinit(&o);
}

TEST(bad_lines_name_file_line_and_key)
{
    expect_error("pool-size 2\n\npool-size 0\n", "t.conf:3:", "'pool-size'");
    expect_error("# c\nnosuchkey 1\n", "t.conf:2:", "'nosuchkey'");
    expect_error("listen\n", "t.conf:1:", "'listen'");
    expect_error("listen a:1 b:2\n", "t.conf:1:", "exactly one value");
    expect_error("io kqueue\n", "'io'", "kqueue");
    expect_error("upstream http://x:1\n", "'upstream'", NULL);
    expect_error("metrics redis://h:1\n", "'metrics'", NULL);
    expect_error("requirepass \"open\n", "t.conf:1:", "'requirepass'");
    expect_error("user\n", "'user'", NULL);
    expect_error("x 1\nuser bad on +get\n", "t.conf:1:", "'x'");
    expect_error("user bad on +get\n", "t.conf:1:", "'+get'");
    expect_error("config other.conf\n", "t.conf:1:", "'config'");
    expect_error("max-request-bytes 12\n", "'max-request-bytes'", "1024");
    expect_error("upstream tls://h:1\n", "'upstream'", "rediss://");
    expect_error("listen rediss://h:1\n", "'listen'", "tls://HOST:PORT");
    expect_error("metrics tls://h:1\n", "'metrics'", NULL);
    expect_error("tls-auth-clients maybe\n", "'tls-auth-clients'", "maybe");
    expect_error("on-disconnect foo\n", "'on-disconnect'", "(one of: release, expire)");
    expect_error("io-backend epoll\n", "t.conf:1: unknown key 'io-backend'",
                 "(did you mean 'io'?)");
    expect_error("listen a:1\nlisten b:2\nlisten c:3\nlisten d:4\nlisten e:5\nlisten f:6\n"
                 "listen g:7\nlisten h:8\nlisten i:9\n",
                 "t.conf:9:", "at most 8");
}

/* Several listeners; a later layer's list replaces the earlier one. */
TEST(listen_lists_and_layers)
{
    const char *path = temp_conf("listen unix:///tmp/a.sock\nlisten tls://0.0.0.0:7380\n"
                                 "tls-cert-file /c.pem\ntls-auth-clients no\n");
    char name[] = "lockproxy", cfg[] = "--config", l[] = "--listen", lv[] = "127.0.0.1:7001",
         l2[] = "--listen=tls://[::1]:7002";
    char *file_only[] = {name, cfg, (char *)path};
    char *both[] = {name, cfg, (char *)path, l, lv, l2};
    struct px_opts o;
    char msg[512] = "";

    px_opts_default(&o);
    ASSERT_EQ(o.nlisten, 1);
    ASSERT_EQ(o.listen[0].port, 7379);
    if (px_config_load(&o, 3, file_only, msg, sizeof(msg)) != 0)
        TEST_FAIL("%s", msg);
    ASSERT_EQ(o.nlisten, 2); /* the file replaced the default */
    ASSERT_STREQ(o.listen[0].path, "/tmp/a.sock");
    ASSERT_TRUE(o.listen[1].tls);
    ASSERT_STREQ(o.listen[1].host, "0.0.0.0");
    ASSERT_EQ(o.listen[1].port, 7380);
    px_opts_deinit(&o);
    if (px_config_load(&o, 6, both, msg, sizeof(msg)) != 0)
        TEST_FAIL("%s", msg);
    ASSERT_EQ(o.nlisten, 2); /* the flags replaced the file's */
    ASSERT_EQ(o.listen[0].port, 7001);
    ASSERT_TRUE(!o.listen[0].tls);
    ASSERT_TRUE(o.listen[1].tls);
    ASSERT_STREQ(o.listen[1].host, "::1");
    px_opts_deinit(&o);
    unlink(path);
}

/* What px_opts_check refuses, through px_config_load. */
static void expect_check(const char *text, const char *want)
{
    const char *path = temp_conf(text);
    char name[] = "lockproxy", cfg[] = "--config";
    char *argv[] = {name, cfg, (char *)path};
    struct px_opts o;
    char msg[512] = "";

    if (px_config_load(&o, 3, argv, msg, sizeof(msg)) != -EINVAL || !strstr(msg, want))
        TEST_FAIL("\"%s\": message \"%s\" lacks \"%s\"", text, msg, want);
    px_opts_deinit(&o);
    unlink(path);
}

TEST(tls_settings_checked)
{
    expect_check("listen tls://127.0.0.1:1\n", "needs --tls-cert-file");
    expect_check("listen tls://127.0.0.1:1\ntls-cert-file /c\n",
                 "--tls-auth-clients yes needs --tls-ca-cert-file");
    expect_check("listen tls://127.0.0.1:1\ntls-cert-file /c\ntls-auth-clients optional\n",
                 "--tls-auth-clients optional needs");
    expect_check("upstream-tls-key-file /k\n", "needs --upstream-tls-cert-file");
    expect_check("tls-key-file /k\n", "needs --tls-cert-file");
}

TEST(load_file_then_flags)
{
    const char *path = temp_conf("pool-size 3\nlock-watchdog-timeout 5000\nlog-level warn\n");
    char cfg[] = "--config", v1[] = "--lock-watchdog-timeout=7000", name[] = "lockproxy";
    char *argv[] = {name, cfg, (char *)path, v1};
    struct px_opts o;
    char msg[512] = "";

    if (px_config_load(&o, 4, argv, msg, sizeof(msg)) != 0)
        TEST_FAIL("%s", msg);
    ASSERT_EQ(o.pool_size, 3);      /* from the file */
    ASSERT_EQ(o.watchdog_ms, 7000); /* the flag overrides the file */
    ASSERT_EQ(o.log_level, LOG_LVL_WARN);
    ASSERT_STREQ(o.config, path);
    ASSERT_EQ(o.argc, 4);
    px_opts_deinit(&o);
    unlink(path);
}

TEST(load_missing_and_bad_file)
{
    char cfg[] = "--config", missing[] = "/nonexistent/lockproxy.conf", name[] = "lockproxy";
    char *argv[] = {name, cfg, missing};
    const char *path;
    struct px_opts o;
    char msg[512] = "";

    ASSERT_TRUE(px_config_load(&o, 3, argv, msg, sizeof(msg)) < 0);
    ASSERT_TRUE(strstr(msg, missing) != NULL);
    px_opts_deinit(&o);
    path = temp_conf("pool-size 2\nmax-clients many\n");
    argv[2] = (char *)path;
    ASSERT_TRUE(px_config_load(&o, 3, argv, msg, sizeof(msg)) < 0);
    ASSERT_TRUE(strstr(msg, ":2:") != NULL && strstr(msg, "'max-clients'") != NULL);
    px_opts_deinit(&o);
    unlink(path);
}

TEST(user_flag_and_help)
{
    char name[] = "lockproxy", uf[] = "--user", uv[] = "app on \">p w\" ~a*", help[] = "--help";
    char *argv[] = {name, uf, uv};
    char *hargv[] = {name, help};
    struct px_opts o;
    char msg[512] = "";

    if (px_config_load(&o, 3, argv, msg, sizeof(msg)) != 0)
        TEST_FAIL("%s", msg);
    ASSERT_NOTNULL(px_auth_check(o.auth, "app", 3, "p w", 3));
    px_opts_deinit(&o);
    ASSERT_EQ(px_config_load(&o, 2, hargv, msg, sizeof(msg)), 1);
    px_opts_deinit(&o);
}

/* --sync-replicas and --sync-timeout: keys, ranges, reloadable, and a
 * timeout that must stay below --upstream-timeout. */
TEST(sync_replicas_keys)
{
    struct px_opts o;
    char msg[512] = "";

    px_opts_default(&o);
    ASSERT_EQ(o.sync_replicas, 0);
    ASSERT_EQ(o.sync_timeout_ms, 1000);
    ASSERT_OK(parse(&o, "sync-replicas 2\nsync-timeout 250\n", msg, sizeof(msg)));
    ASSERT_EQ(o.sync_replicas, 2);
    ASSERT_EQ(o.sync_timeout_ms, 250);
    ASSERT_OK(px_opts_check(&o, msg, sizeof(msg)));
    o.sync_timeout_ms = 3000; /* = --upstream-timeout */
    ASSERT_EQ(px_opts_check(&o, msg, sizeof(msg)), -EINVAL);
    ASSERT_TRUE(strstr(msg, "--sync-timeout 3000 must be below --upstream-timeout 3000") != NULL);
    o.sync_replicas = 0; /* off: the timeout does not matter */
    ASSERT_OK(px_opts_check(&o, msg, sizeof(msg)));
    ASSERT_TRUE(px_opts_key_reloadable("sync-replicas"));
    ASSERT_TRUE(px_opts_key_reloadable("sync-timeout"));
    px_opts_deinit(&o);
    expect_error("sync-timeout 0\n", "sync-timeout", "needs a number from 1");
    /* TLS to Sentinel is refused, with a message that says so. */
    expect_error("upstream rediss-sentinel://127.0.0.1:26379/mymaster\n", "upstream",
                 "rediss-sentinel:// (TLS to Redis Sentinel) is not supported");
    expect_error("sync-replicas -1\n", "sync-replicas", "needs a number from 0");
}

TEST(reloadable_keys)
{
    struct px_opts a, b;
    const char *names[8];

    ASSERT_TRUE(px_opts_key_reloadable("log-level"));
    ASSERT_TRUE(px_opts_key_reloadable("requirepass"));
    ASSERT_TRUE(px_opts_key_reloadable("user"));
    ASSERT_TRUE(px_opts_key_reloadable("max-clients"));
    ASSERT_TRUE(!px_opts_key_reloadable("upstream"));
    ASSERT_TRUE(!px_opts_key_reloadable("lock-watchdog-timeout"));
    px_opts_default(&a);
    px_opts_default(&b);
    ASSERT_EQ(px_opts_diff_restart(&a, &b, names, 8), 0);
    b.pool_size = 9;
    b.log_level = LOG_LVL_DEBUG;
    px_addr_parse("redis://10.1.1.1:6379", &b.upstream);
    ASSERT_EQ(px_opts_diff_restart(&a, &b, names, 8), 2);
    ASSERT_STREQ(names[0], "upstream");
    ASSERT_STREQ(names[1], "pool-size");
    /* Certificates reload; listeners do not. */
    ASSERT_TRUE(px_opts_key_reloadable("tls-cert-file"));
    ASSERT_TRUE(px_opts_key_reloadable("upstream-tls-ca-cert-file"));
    ASSERT_TRUE(!px_opts_key_reloadable("listen"));
    px_opts_default(&b);
    snprintf(b.tls_cert_file, sizeof(b.tls_cert_file), "/new.pem");
    ASSERT_EQ(px_opts_diff_restart(&a, &b, names, 8), 0);
    px_addr_parse("tls://127.0.0.1:7379", &b.listen[0]);
    ASSERT_EQ(px_opts_diff_restart(&a, &b, names, 8), 1);
    ASSERT_STREQ(names[0], "listen");
}

TEST_MAIN(TEST_CASE(split_words_and_quotes), TEST_CASE(split_rejects), TEST_CASE(every_key),
          TEST_CASE(later_lines_win_and_metrics_off), TEST_CASE(bad_lines_name_file_line_and_key),
          TEST_CASE(load_file_then_flags), TEST_CASE(load_missing_and_bad_file),
          TEST_CASE(user_flag_and_help), TEST_CASE(reloadable_keys), TEST_CASE(sync_replicas_keys),
          TEST_CASE(listen_lists_and_layers), TEST_CASE(tls_settings_checked))
