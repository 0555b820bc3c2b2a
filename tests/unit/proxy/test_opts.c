/* Unit tests for flag and address parsing and Redisson's channel-name rule. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "engine/scripts.h"
#include "harness.h"
#include "proxy/opts.h"

TEST(addr_forms)
{
    struct px_addr a;

    ASSERT_OK(px_addr_parse("redis://u:p@w@db.local:6380/3", &a));
    ASSERT_STREQ(a.user, "u");
    ASSERT_STREQ(a.password, "p@w");
    ASSERT_STREQ(a.host, "db.local");
    ASSERT_EQ(a.port, 6380);
    ASSERT_EQ(a.db, 3);
    ASSERT_OK(px_addr_parse("redis://secret@127.0.0.1:6379", &a));
    ASSERT_STREQ(a.password, "secret");
    ASSERT_STREQ(a.user, "");
    ASSERT_OK(px_addr_parse("127.0.0.1:7379", &a));
    ASSERT_EQ(a.port, 7379);
    ASSERT_OK(px_addr_parse("[::1]:7379", &a));
    ASSERT_STREQ(a.host, "::1");
    ASSERT_OK(px_addr_parse("unix:///tmp/lp.sock", &a));
    ASSERT_STREQ(a.path, "/tmp/lp.sock");
    ASSERT_TRUE(px_addr_parse("localhost", &a) < 0);
    ASSERT_TRUE(px_addr_parse("h:0", &a) < 0);
    ASSERT_TRUE(px_addr_parse("h:70000", &a) < 0);
    ASSERT_TRUE(px_addr_parse("unix://relative", &a) < 0);
    ASSERT_TRUE(px_addr_parse("redis://h:1/x", &a) < 0);
    ASSERT_TRUE(!a.tls);
    ASSERT_OK(px_addr_parse("rediss://u:p@cache.example:6380/1", &a));
    ASSERT_TRUE(a.tls);
    ASSERT_STREQ(a.host, "cache.example");
    ASSERT_STREQ(a.user, "u");
    ASSERT_EQ(a.db, 1);
    ASSERT_OK(px_addr_parse("tls://0.0.0.0:7380", &a));
    ASSERT_TRUE(a.tls);
    ASSERT_EQ(a.port, 7380);
    ASSERT_OK(px_addr_parse("redis://h:1", &a));
    ASSERT_TRUE(!a.tls);
}

/* redis-sentinel://: the master's credentials and db, the sentinels as
 * given, the name; anything malformed refused. */
TEST(addr_sentinel)
{
    static const char *const bad[] = {
        "redis-sentinel://10.0.0.1:26379",           /* no name */
        "redis-sentinel://10.0.0.1:26379/",          /* empty name */
        "redis-sentinel:///mymaster",                /* no sentinel */
        "redis-sentinel://10.0.0.1:26379,/mymaster", /* empty entry */
        "redis-sentinel://10.0.0.1/mymaster",        /* no port */
        "redis-sentinel://10.0.0.1:0/mymaster",      /* bad port */
        "redis-sentinel://:26379/mymaster",          /* no host */
        "redis-sentinel://h:26379/my master",        /* blank in the name */
        "redis-sentinel://h:26379/my\"master",       /* quote in the name */
        "redis-sentinel://h:26379/mymaster/x",       /* bad db */
        "redis-sentinel://h:26379/mymaster/-1",      /* bad db */
    };
    struct px_addr a;
    size_t i;

    ASSERT_OK(px_addr_parse("redis-sentinel://app:p@ss@10.0.0.1:26379,[::1]:26380,s3.local:26381/"
                            "orders-master/2",
                            &a));
    ASSERT_STREQ(a.sentinels, "10.0.0.1:26379,[::1]:26380,s3.local:26381");
    ASSERT_STREQ(a.master_name, "orders-master");
    ASSERT_STREQ(a.user, "app");
    ASSERT_STREQ(a.password, "p@ss");
    ASSERT_EQ(a.db, 2);
    ASSERT_STREQ(a.host, "");
    ASSERT_OK(px_addr_parse("redis-sentinel://127.0.0.1:26379/mymaster", &a));
    ASSERT_STREQ(a.sentinels, "127.0.0.1:26379");
    ASSERT_STREQ(a.master_name, "mymaster");
    ASSERT_STREQ(a.password, "");
    ASSERT_EQ(a.db, 0);
    ASSERT_OK(px_addr_parse("redis-sentinel://:secret@127.0.0.1:26379/mymaster/", &a));
    ASSERT_STREQ(a.password, "secret");
    ASSERT_STREQ(a.user, "");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (px_addr_parse(bad[i], &a) == 0)
            TEST_FAIL("accepted %s", bad[i]);
    }
}

/* The sentinels' own credentials are settings of their own; only the
 * upstream may be a redis-sentinel:// address; a restart is needed to
 * change any of them. */
TEST(flags_sentinel)
{
    char *argv[] = {
        "lockproxy",       "--upstream", "redis-sentinel://:datapw@127.0.0.1:26379/mymaster",
        "--sentinel-user", "watcher",    "--sentinel-password=sentpw"};
    char *bad[] = {"lockproxy", "--listen", "redis-sentinel://127.0.0.1:26379/mymaster"};
    const char *changed[8];
    struct px_opts o, o2;
    FILE *null = fopen("/dev/null", "w");

    px_opts_default(&o);
    ASSERT_EQ(px_opts_parse(&o, 6, argv, null, null), 0);
    ASSERT_STREQ(o.upstream.sentinels, "127.0.0.1:26379");
    ASSERT_STREQ(o.upstream.master_name, "mymaster");
    ASSERT_STREQ(o.upstream.password, "datapw");
    ASSERT_STREQ(o.sentinel_user, "watcher");
    ASSERT_STREQ(o.sentinel_password, "sentpw");
    ASSERT_TRUE(!px_opts_key_reloadable("sentinel-password"));
    o2 = o;
    ASSERT_EQ(px_opts_diff_restart(&o, &o2, changed, 8), 0);
    ASSERT_OK(px_opts_set(&o2, "sentinel-password", 1, (const char *const[]){"s"}, NULL, 0));
    ASSERT_OK(px_opts_set(&o2, "sentinel-password", 1, (const char *const[]){"sentpw"}, NULL, 0));
    ASSERT_EQ(px_opts_diff_restart(&o, &o2, changed, 8), 0);
    ASSERT_OK(px_opts_set(&o2, "sentinel-user", 1, (const char *const[]){"other"}, NULL, 0));
    ASSERT_EQ(px_opts_diff_restart(&o, &o2, changed, 8), 1);
    ASSERT_STREQ(changed[0], "sentinel-user");
    px_opts_default(&o);
    ASSERT_TRUE(px_opts_parse(&o, 3, bad, null, null) < 0);
    fclose(null);
}

TEST(flags)
{
    char *argv[] = {"lockproxy",       "--pool-size", "4",    "--lock-watchdog-timeout=900",
                    "--on-disconnect", "expire",      "--io", "epoll",
                    "--log-level",     "debug"};
    struct px_opts o;
    FILE *null = fopen("/dev/null", "w");

    px_opts_default(&o);
    ASSERT_EQ(px_opts_parse(&o, 10, argv, null, null), 0);
    ASSERT_EQ(o.pool_size, 4);
    ASSERT_EQ(o.watchdog_ms, 900);
    ASSERT_EQ(o.on_disc, PX_DISCONNECT_EXPIRE);
    ASSERT_EQ(o.io, SCHED_IO_EPOLL);
    ASSERT_EQ(o.log_level, LOG_LVL_DEBUG);
    fclose(null);
}

TEST(flags_rejected)
{
    char *bad1[] = {"lockproxy", "--pool-size", "0"};
    char *bad2[] = {"lockproxy", "--io", "kqueue"};
    char *bad3[] = {"lockproxy", "--nope", "1"};
    char *bad4[] = {"lockproxy", "--listen"};
    char *help[] = {"lockproxy", "--help"};
    struct px_opts o;
    FILE *null = fopen("/dev/null", "w");

    px_opts_default(&o);
    ASSERT_TRUE(px_opts_parse(&o, 3, bad1, null, null) < 0);
    ASSERT_TRUE(px_opts_parse(&o, 3, bad2, null, null) < 0);
    ASSERT_TRUE(px_opts_parse(&o, 3, bad3, null, null) < 0);
    ASSERT_TRUE(px_opts_parse(&o, 2, bad4, null, null) < 0);
    ASSERT_EQ(px_opts_parse(&o, 2, help, null, null), 1);
    fclose(null);
}

TEST(flags_client_limits)
{
    char *argv[] = {"lockproxy",
                    "--client-output-soft-limit",
                    "0",
                    "--client-output-hard-limit=1048576",
                    "--max-pipeline",
                    "16",
                    "--timeout",
                    "5",
                    "--auth-timeout",
                    "0",
                    "--tcp-keepalive",
                    "60",
                    "--unixsocketperm",
                    "0660"};
    struct px_opts o, d;
    const char *changed[8];
    FILE *null = fopen("/dev/null", "w");

    px_opts_default(&o);
    ASSERT_EQ(o.out_soft, 256 * 1024);
    ASSERT_EQ(o.out_hard, 16 * 1024 * 1024);
    ASSERT_EQ(o.max_pipeline, 1024);
    ASSERT_EQ(o.timeout_s, 0);
    ASSERT_EQ(o.auth_timeout_s, 10);
    ASSERT_EQ(o.keepalive_s, 300);
    ASSERT_EQ(o.unix_perm, 0);
    ASSERT_EQ(px_opts_parse(&o, 14, argv, null, null), 0);
    ASSERT_EQ(o.out_soft, 0);
    ASSERT_EQ(o.out_hard, 1048576);
    ASSERT_EQ(o.max_pipeline, 16);
    ASSERT_EQ(o.timeout_s, 5);
    ASSERT_EQ(o.auth_timeout_s, 0);
    ASSERT_EQ(o.keepalive_s, 60);
    ASSERT_EQ(o.unix_perm, 0660);
    /* Every limit is reloadable but the socket mode (the socket exists). */
    ASSERT_TRUE(px_opts_key_reloadable("client-output-soft-limit"));
    ASSERT_TRUE(px_opts_key_reloadable("client-output-hard-limit"));
    ASSERT_TRUE(px_opts_key_reloadable("max-pipeline"));
    ASSERT_TRUE(px_opts_key_reloadable("timeout"));
    ASSERT_TRUE(px_opts_key_reloadable("auth-timeout"));
    ASSERT_TRUE(px_opts_key_reloadable("tcp-keepalive"));
    ASSERT_TRUE(!px_opts_key_reloadable("unixsocketperm"));
    px_opts_default(&d);
    ASSERT_EQ(px_opts_diff_restart(&d, &o, changed, 8), 1);
    ASSERT_STREQ(changed[0], "unixsocketperm");
    fclose(null);
}

TEST(flags_client_limits_rejected)
{
    static const char *const bad[][2] = {
        {"--unixsocketperm", "888"},
        {"--unixsocketperm", "1777"},
        {"--unixsocketperm", ""},
        {"--unixsocketperm", "rw"},
        {"--tcp-keepalive", "40000"},
        {"--max-pipeline", "0"},
        {"--timeout", "-1"},
        {"--client-output-hard-limit", "1k"},
        {"--max-client-memory", "-1"},
        {"--max-client-memory", "abc"},
        {"--max-client-memory", "18446744073709551616"},
        {"--max-client-memory", ""},
        {"--latency-monitor-threshold", "-1"},
        {"--latency-monitor-threshold", "1e3"},
        {"--latency-monitor-threshold", "3600001"},
    };
    FILE *null = fopen("/dev/null", "w");
    struct px_opts o;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[] = {"lockproxy", (char *)bad[i][0], (char *)bad[i][1]};

        px_opts_default(&o);
        if (px_opts_parse(&o, 3, argv, null, null) >= 0)
            TEST_FAIL("accepted %s '%s'", bad[i][0], bad[i][1]);
    }
    fclose(null);
}

TEST(channel_names)
{
    char out[64];

    ASSERT_EQ(px_channel_name(out, sizeof(out), "redisson_lock__channel:", "a", 1), 26);
    ASSERT_STREQ(out, "redisson_lock__channel:{a}");
    px_channel_name(out, sizeof(out), "redisson_lock__channel:", "x{t}y", 5);
    ASSERT_STREQ(out, "redisson_lock__channel:x{t}y");
    px_channel_name(out, sizeof(out), "redisson_lock__channel:", "{", 1);
    ASSERT_STREQ(out, "redisson_lock__channel:{");
    ASSERT_EQ(px_channel_name(out, 8, "redisson_lock__channel:", "a", 1), 0);
}

/* Runs px_opts_parse on one flag and its value; returns what it printed
 * on its error stream (static buffer). */
static const char *flag_error_text(const char *flag, const char *value)
{
    static char buf[1024];
    char *argv[] = {"lockproxy", (char *)flag, (char *)value};
    struct px_opts o;
    FILE *err = tmpfile(), *null = fopen("/dev/null", "w");
    size_t got;

    ASSERT_TRUE(err && null);
    px_opts_default(&o);
    ASSERT_TRUE(px_opts_parse(&o, value ? 3 : 2, argv, null, err) < 0);
    rewind(err);
    got = fread(buf, 1, sizeof(buf) - 1, err);
    buf[got] = '\0';
    fclose(err);
    fclose(null);
    px_opts_deinit(&o);
    return buf;
}

#define ASSERT_HAS(text, want)                            \
    do {                                                  \
        const char *t_ = (text);                          \
        if (!strstr(t_, (want)))                          \
            TEST_FAIL("\"%s\" lacks \"%s\"", t_, (want)); \
    } while (0)

/* A bad value of a key with a fixed set of values names every valid one,
 * for each such key, from a flag and from px_opts_set (config files and
 * LOCKPROXY_* variables go through it). */
TEST(enum_errors_list_the_values)
{
    static const struct {
        const char *key, *values;
    } enums[] = {
        {"on-disconnect", "(one of: release, expire)"},
        {"io", "(one of: auto, uring, epoll)"},
        {"log-level", "(one of: error, warn, info, debug)"},
        {"cluster-pubsub", "(one of: auto, sharded, classic)"},
        {"tls-auth-clients", "(one of: no, optional, yes)"},
        {"protected-mode", "(one of: no, yes)"},
        {"passthrough", "(one of: off, on)"},
    };
    const char *bad = "foo";
    char why[256], flag[64];
    struct px_opts o;
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(enums); i++) {
        px_opts_default(&o);
        ASSERT_EQ(px_opts_set(&o, enums[i].key, 1, &bad, why, sizeof(why)), -EINVAL);
        ASSERT_HAS(why, "unknown value 'foo'");
        ASSERT_HAS(why, enums[i].values);
        px_opts_deinit(&o);
        snprintf(flag, sizeof(flag), "--%s", enums[i].key);
        ASSERT_HAS(flag_error_text(flag, "foo"), enums[i].values);
    }
}

/* An unknown flag names the one it most likely meant. */
TEST(unknown_flags_suggest_a_key)
{
    ASSERT_HAS(flag_error_text("--io-backend", "foo"),
               "unknown option '--io-backend' (did you mean --io? see --help)");
    ASSERT_HAS(flag_error_text("--io-backend", NULL), "did you mean --io?");
    ASSERT_HAS(flag_error_text("--watchdog-timeout", "100"),
               "did you mean --lock-watchdog-timeout?");
    ASSERT_HAS(flag_error_text("--max-arg", "100"), "did you mean --max-args?");
    ASSERT_HAS(flag_error_text("--bogus", "1"), "unknown option '--bogus' (see --help)");
    ASSERT_STREQ(px_opts_key_suggest("on-disconect"), "on-disconnect");
    ASSERT_NULL(px_opts_key_suggest("bogus"));
}

TEST_MAIN(TEST_CASE(addr_forms), TEST_CASE(addr_sentinel), TEST_CASE(flags_sentinel),
          TEST_CASE(flags), TEST_CASE(flags_rejected), TEST_CASE(flags_client_limits),
          TEST_CASE(flags_client_limits_rejected), TEST_CASE(channel_names),
          TEST_CASE(enum_errors_list_the_values), TEST_CASE(unknown_flags_suggest_a_key))
