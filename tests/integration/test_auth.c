/* Client and upstream authentication: requirepass (NOAUTH before AUTH,
 * WRONGPASS), ACL-style users whose patterns limit the lock names they
 * may lock, unlock or force-unlock (NOPERM), HELLO 2 AUTH, the tight
 * limits on unauthenticated connections, and lockproxy running under the
 * minimal Redis ACL the README documents. */
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* The README's minimal ACL for lockproxy's own Redis user. */
#define LP_ACL_RULES                                                                                    \
    "reset on >lppw ~* &redisson_* +ping +auth +select +script|load +evalsha +eval +subscribe "         \
    "+unsubscribe +publish +exists +type +del +pexpire +pttl +set +incr +incrby +decr +decrby "         \
    "+hset +hget +hmget +hdel +hexists +hincrby +hlen +hkeys +lindex +lpop +lrange +lrem +rpush +zadd " \
    "+zincrby +zrange +zrem +zremrangebyscore +zscore"

#define NOPERM_OTHER "NOPERM user 'app' has no permissions to access the 'other' lock"

static void expect_error_text(redisContext *c, const char *text, const char *cmd, const char *arg)
{
    redisReply *r = pu_cmd(c, cmd, arg);
    char d[256];

    if (r->type != REDIS_REPLY_ERROR || strcmp(r->str, text) != 0)
        TEST_FAIL("%s %s: got %s, want -%s", cmd, arg, pu_describe(r, d, sizeof(d)), text);
    freeReplyObject(r);
}

TEST(auth_requirepass)
{
    static const char *const extra[] = {"--requirepass", "s3cret", NULL};
    struct pu_env e = {0};
    redisContext *c, *h;
    redisReply *r;

    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    PU_STR(c, "PONG", "PING");
    expect_error_text(c, "NOAUTH Authentication required.", "LOCK %s", "a");
    PU_ERR(c, "NOAUTH", "INFO");
    PU_ERR(c, "NOAUTH", "UNLOCK %s", "a");
    expect_error_text(c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH %s",
                      "wrong");
    PU_ERR(c, "WRONGPASS", "AUTH %s %s", "nobody", "s3cret");
    PU_ERR(c, "NOAUTH", "LOCK %s", "a");
    PU_OK(c, "AUTH %s", "s3cret");
    PU_OK(c, "LOCK %s", "a");
    PU_INT(c, 1, "UNLOCK %s", "a");
    PU_OK(c, "AUTH %s %s", "default", "s3cret");
    ASSERT_TRUE(pu_info_int(c, "auth_failures") >= 2);

    h = pu_client(&e);
    PU_ERR(h, "NOAUTH HELLO must be called", "HELLO %d", 2);
    PU_ERR(h, "WRONGPASS", "HELLO %d AUTH %s %s", 2, "default", "nope");
    r = pu_cmd(h, "HELLO %d AUTH %s %s SETNAME %s", 2, "default", "s3cret", "me");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 14);
    freeReplyObject(r);
    PU_STR(h, "me", "CLIENT GETNAME");
    PU_OK(h, "TRYLOCK %s", "b");
    redisFree(h);
    PU_OK(c, "QUIT");
    redisFree(c);
    pu_env_stop(&e);
}

TEST(auth_users_and_patterns)
{
    char conf[PU_PATH_MAX];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *app, *admin, *rc;

    ou_path(conf, sizeof(conf), "users.conf");
    ou_write_file(conf, "# users\n"
                        "user app on >apppw ~orders:* ~inv[0-9]\n"
                        "user admin on >adminpw allkeys\n"
                        "user ops off >opspw ~*\n");
    ou_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    admin = ou_client_auth(&e, "admin", "adminpw");
    app = pu_client(&e);
    PU_ERR(app, "WRONGPASS", "AUTH %s %s", "ops", "opspw"); /* off users cannot log in */
    PU_ERR(app, "WRONGPASS", "AUTH %s %s", "app", "wrong");
    PU_ERR(app, "WRONGPASS", "AUTH %s", "apppw"); /* no "default" user here */
    PU_OK(app, "AUTH %s %s", "app", "apppw");
    PU_OK(app, "LOCK %s", "orders:1");
    PU_OK(app, "TRYLOCK %s", "inv7");
    PU_INT(app, 1, "UNLOCK %s", "inv7");
    /* Outside its patterns: refused before anything reaches Redis. */
    PU_OK(admin, "LOCK %s", "other");
    expect_error_text(app, NOPERM_OTHER, "LOCK %s", "other");
    expect_error_text(app, NOPERM_OTHER, "TRYLOCK %s", "other");
    expect_error_text(app, NOPERM_OTHER, "UNLOCK %s", "other");
    expect_error_text(app, NOPERM_OTHER, "FORCEUNLOCK %s", "other");
    expect_error_text(app, NOPERM_OTHER, "LOCK.INFO %s", "other");
    ASSERT_TRUE(pu_exists(rc, "other"));
    PU_ERR(app, "NOPERM", "FORCEUNLOCK %s", "invoices");
    PU_ERR(app, "NOPERM", "LOCK %s", "orders"); /* "orders:*" needs the colon */
    PU_INT(app, 1, "UNLOCK %s", "orders:1");
    PU_INT(admin, 1, "UNLOCK %s", "other");
    PU_STR(app, "PONG", "PING");
    ASSERT_TRUE(pu_info_int(admin, "auth_failures") >= 3);
    redisFree(app);
    redisFree(admin);
    redisFree(rc);
    pu_env_stop(&e);
}

TEST(auth_not_configured)
{
    struct pu_env e = {0};
    redisContext *c;

    ou_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    PU_ERR(c, "ERR AUTH <password> called without any password", "AUTH %s", "x");
    PU_OK(c, "AUTH %s %s", "default", "anything");
    PU_ERR(c, "WRONGPASS", "AUTH %s %s", "someone", "x");
    PU_OK(c, "LOCK %s", "free");
    PU_INT(c, 1, "UNLOCK %s", "free");
    redisFree(c);
    pu_env_stop(&e);
}

TEST(auth_unauthenticated_limits)
{
    static const char *const extra[] = {"--requirepass", "pw", NULL};
    static char big[8192], out[8192];
    struct pu_env e = {0};
    size_t n;
    int fd;

    ou_env_start(&e, "epoll", extra);
    /* A 2000-byte argument before AUTH: refused at once, connection closed. */
    fd = pu_raw_connect(e.proxy.port);
    n = (size_t)snprintf(big, sizeof(big), "*2\r\n$4\r\nAUTH\r\n$2000\r\n");
    memset(big + n, 'x', 2000);
    memcpy(big + n + 2000, "\r\n", 2);
    (void)pu_raw_send(fd, big, n + 2002); /* the proxy may close before reading it all */
    pu_raw_read_line(fd, out, sizeof(out), 3000);
    if (strncmp(out, "-ERR Protocol error", 19) != 0)
        TEST_FAIL("oversized pre-AUTH request: got \"%s\"", out);
    ASSERT_TRUE(pu_raw_wait_closed(fd, 3000));
    close(fd);
    /* Too many arguments before AUTH. */
    fd = pu_raw_connect(e.proxy.port);
    n = (size_t)snprintf(big, sizeof(big), "*11\r\n");
    for (int i = 0; i < 11; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "$1\r\na\r\n");
    pu_raw_send(fd, big, n);
    pu_raw_read_line(fd, out, sizeof(out), 3000);
    ASSERT_TRUE(strncmp(out, "-ERR Protocol error", 19) == 0);
    close(fd);
    /* A pipeline of 9 commands before AUTH: 8 answered, then refused. */
    fd = pu_raw_connect(e.proxy.port);
    for (n = 0; n < 9 * 14; n += 14)
        memcpy(big + n, "*1\r\n$4\r\nPING\r\n", 14);
    pu_raw_send(fd, big, n);
    pu_raw_read_until(fd, out, sizeof(out), 3000, NULL);
    if (!strstr(out, "+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n+PONG\r\n"
                     "-ERR Protocol error: too many commands before AUTH"))
        TEST_FAIL("pre-AUTH pipeline: got \"%s\"", out);
    close(fd);
    /* AUTH lifts the limits, even for a request pipelined right behind it. */
    fd = pu_raw_connect(e.proxy.port);
    n = (size_t)snprintf(big, sizeof(big),
                         "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$4\r\nLOCK\r\n"
                         "$3000\r\n");
    memset(big + n, 'n', 3000);
    memcpy(big + n + 3000, "\r\n", 2);
    pu_raw_send(fd, big, n + 3002);
    pu_raw_read_until(fd, out, sizeof(out), 3000, "+OK\r\n+OK\r\n");
    if (strcmp(out, "+OK\r\n+OK\r\n") != 0)
        TEST_FAIL("AUTH + large LOCK: got \"%s\"", out);
    close(fd);
    pu_proxy_assert_alive(&e.proxy);
    pu_env_stop(&e);
}

/* Sets up lockproxy's Redis user with exactly LP_ACL_RULES. */
static void redis_acl_setup(struct pu_env *e)
{
    static const char *const rargs[] = {"--requirepass", "adminpw", NULL};
    redisContext *rc;

    memcpy(e->redis.extra, rargs, sizeof(rargs));
    pu_redis_start(&e->redis);
    rc = pu_connect(e->redis.port);
    PU_OK(rc, "AUTH %s", "adminpw");
    PU_OK(rc, "ACL SETUSER lockproxy " LP_ACL_RULES);
    redisFree(rc);
    snprintf(e->proxy.upstream, sizeof(e->proxy.upstream), "redis://lockproxy:lppw@127.0.0.1:%d",
             e->redis.port);
}

/* A direct Redis connection as the given user. */
static redisContext *redis_as(struct pu_env *e, const char *user, const char *pass)
{
    redisContext *rc = pu_connect(e->redis.port);

    PU_OK(rc, "AUTH %s %s", user, pass);
    return rc;
}

static void acl_wait_and_wake(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);
    redisReply *r;
    long long t0;

    PU_OK(c1, "LOCK %s LEASE %d", "w", 20000);
    pu_send(c2, "LOCK %s", "w");
    ASSERT_NULL(pu_try_recv(c2, 300));
    t0 = pu_now_ms();
    PU_INT(c1, 1, "UNLOCK %s", "w");
    r = pu_recv(c2); /* woken through pub/sub, long before the 20 s lease */
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    ASSERT_TRUE(pu_now_ms() - t0 < 2000);
    PU_INT(c2, 1, "UNLOCK %s", "w");
    redisFree(c2);
    redisFree(c1);
}

TEST(auth_minimal_redis_acl)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "600", NULL};
    struct pu_env e = {0};
    redisContext *c, *admin, *lp;
    struct pu_lockinfo li;

    redis_acl_setup(&e);
    ou_env_start(&e, "epoll", extra);
    admin = redis_as(&e, "default", "adminpw");
    lp = redis_as(&e, "lockproxy", "lppw");
    PU_ERR(lp, "NOPERM", "FLUSHALL"); /* the ACL really is restrictive */
    PU_ERR(lp, "NOPERM", "GET %s", "x");
    c = pu_client(&e);
    PU_OK(c, "LOCK %s", "acl-lock");
    ASSERT_TRUE(pu_exists(admin, "acl-lock"));
    pu_lockinfo(c, &li, "LOCK.INFO %s", "acl-lock");
    ASSERT_EQ(li.locked, 1);
    ASSERT_EQ(li.watchdog, 1);
    pu_sleep_ms(1500); /* over two watchdog timeouts: renewals keep it */
    ASSERT_TRUE(pu_pttl(admin, "acl-lock") > 0);
    ASSERT_TRUE(pu_info_int(c, "watchdog_renewals") > 0);
    PU_INT(c, 1, "UNLOCK %s", "acl-lock");
    ASSERT_TRUE(!pu_exists(admin, "acl-lock"));
    acl_wait_and_wake(&e);
    PU_OK(c, "LOCK %s", "acl-force");
    PU_INT(c, 1, "FORCEUNLOCK %s", "acl-force");
    ASSERT_EQ(pu_info_int(c, "upstream_error_replies"), 0);
    ASSERT_TRUE(!ou_file_contains(e.proxy.log_path, "NOPERM"));
    redisFree(c);
    redisFree(lp);
    redisFree(admin);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(auth_requirepass), TEST_CASE(auth_users_and_patterns),
          TEST_CASE(auth_not_configured), TEST_CASE(auth_unauthenticated_limits),
          TEST_CASE(auth_minimal_redis_acl))
