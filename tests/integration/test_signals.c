/* Signals: SIGTERM with clients holding and waiting for locks exits 0
 * within a few seconds and leaves no lock behind in Redis; SIGHUP
 * re-reads the config file (requirepass, users, log level), keeps the
 * running configuration when the file is bad, and closes connections
 * whose user was removed. */
#include <sys/wait.h>

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define STOP_BOUND_MS 5000

static void scenario_sigterm(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *rc = pu_redis_client(e);
    long long t0;
    int st;

    PU_OK(c1, "LOCK %s", "sig-a");
    PU_OK(c1, "LOCK %s LEASE %d", "sig-b", 60000);
    PU_OK(c2, "LOCK %s", "sig-c");
    pu_send(c3, "LOCK %s", "sig-a"); /* a waiter */
    ASSERT_NULL(pu_try_recv(c3, 100));
    ASSERT_TRUE(pu_exists(rc, "sig-a") && pu_exists(rc, "sig-b") && pu_exists(rc, "sig-c"));
    t0 = pu_now_ms();
    kill(e->proxy.pid, SIGTERM);
    st = ou_wait_exit(&e->proxy, STOP_BOUND_MS);
    if (st == -1)
        TEST_FAIL("lockproxy still running %d ms after SIGTERM", STOP_BOUND_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy ended with wait status 0x%x after SIGTERM", st);
    fprintf(stderr, "stopped in %lld ms\n", pu_now_ms() - t0);
    ASSERT_TRUE(!pu_exists(rc, "sig-a"));
    ASSERT_TRUE(!pu_exists(rc, "sig-b"));
    ASSERT_TRUE(!pu_exists(rc, "sig-c"));
    ASSERT_TRUE(ou_file_contains(e->proxy.log_path, "stopping: releasing the locks"));
    redisFree(rc);
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
    pu_redis_kill(&e->redis);
}

static void sigterm_run(const char *backend, void *arg)
{
    struct pu_env e = {0};

    (void)arg;
    ou_env_start(&e, backend, NULL);
    scenario_sigterm(&e);
}

TEST(signals_sigterm_releases_locks)
{
    pu_for_each_backend(sigterm_run, NULL);
}

/* SIGTERM while Redis is down (kill -9; it keeps its data in an AOF
 * written at every command, and is started again 2.5 s later, past the
 * 2 s the stop used to wait for releases), with holds of every kind the
 * proxy renews or returns (issue 22): the proxy keeps sending the
 * releases until Redis answers (bounded: PX_STOP_RELEASE_MS), then exits
 * 0, and every name is free at once, not at the end of a 30 s lease (a
 * SEM's permits and a PSEM permit without lease: never). */
static void scenario_sigterm_redis_down(struct pu_env *e)
{
    static const char *const locks[] = {"LOCK %s",  "FAIRLOCK %s",         "WLOCK %s",
                                        "RLOCK %s", "LOCK %s LEASE 60000", "MULTILOCK %s st-m2"};
    static const char *const names[] = {"st-plain", "st-fair",  "st-write",
                                        "st-read",  "st-lease", "st-m1"};
    redisContext *c = pu_client(e), *c2 = pu_client(e), *rc = pu_redis_client(e);
    long long t0, t_exit;
    redisReply *r;
    size_t i;
    int st;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        pu_expect_at(__FILE__, __LINE__, c, PU_K_STATUS, 0, "OK", locks[i], names[i]);
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s 2", "st-sem");
    PU_OK(c, "SEM.ACQUIRE %s 2", "st-sem");
    PU_INT(c, 1, "PSEM.TRYSETPERMITS %s 1", "st-psem");
    r = pu_cmd(c2, "PSEM.ACQUIRE %s", "st-psem");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    redisFree(rc);
    pu_redis_kill(&e->redis);
    t0 = pu_now_ms();
    kill(e->proxy.pid, SIGTERM);
    pu_sleep_ms(2500);
    pu_redis_restart(&e->redis);
    rc = pu_redis_client(e);
    st = ou_wait_exit(&e->proxy, 15000);
    if (st == -1)
        TEST_FAIL("lockproxy still running 15 s after SIGTERM");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy ended with wait status 0x%x after SIGTERM", st);
    t_exit = pu_now_ms() - t0;
    fprintf(stderr, "SIGTERM with Redis down 2.5 s: exited after %lld ms\n", t_exit);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (pu_exists(rc, names[i]))
            TEST_FAIL("'%s' still held after the proxy stopped", names[i]);
    ASSERT_TRUE(!pu_exists(rc, "st-m2"));
    ASSERT_EQ(pu_get_int(rc, "st-sem"), 2);
    ASSERT_EQ(pu_get_int(rc, "st-psem"), 1);
    redisFree(rc);
    redisFree(c2);
    redisFree(c);
    pu_redis_kill(&e->redis);
}

TEST(signals_sigterm_redis_down)
{
    static const char *const backends[] = {"epoll", "uring"};
    static const char *const extra[] = {"--upstream-timeout", "500", NULL};
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};

    for (size_t i = 0; i < 2; i++) {
        struct pu_env e = {0};

        if (i == 1 && !pu_uring_available())
            continue;
        fprintf(stderr, "-- io backend %s\n", backends[i]);
        memcpy(e.redis.extra, aof, sizeof(aof));
        pu_redis_start(&e.redis);
        ou_env_start(&e, backends[i], extra);
        scenario_sigterm_redis_down(&e);
    }
}

/* Starts the proxy with --config path (no --log-level flag, so the file
 * decides it). */
static void start_with_config(struct pu_env *e, char *path)
{
    static const char *extra[3];

    memset(e, 0, sizeof(*e));
    extra[0] = "--config";
    extra[1] = path;
    extra[2] = NULL;
    ou_env_start(e, "epoll", extra);
}

static void reload(struct pu_env *e, redisContext *c, long long want)
{
    kill(e->proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(c, "config_reloads") + pu_info_int(c, "config_reload_errors") == want,
                  5000);
}

TEST(signals_sighup_reloads_requirepass_and_log_level)
{
    char conf[PU_PATH_MAX];
    struct pu_env e;
    redisContext *old, *c;

    ou_path(conf, sizeof(conf), "reload.conf");
    ou_write_file(conf, "log-level warn\nrequirepass one\n");
    start_with_config(&e, conf);
    old = ou_client_auth(&e, NULL, "one");
    PU_OK(old, "LOCK %s", "kept");
    c = pu_client(&e);
    PU_ERR(c, "WRONGPASS", "AUTH %s", "nope");
    ASSERT_TRUE(!ou_file_contains(e.proxy.log_path, " debug: "));
    ou_write_file(conf, "# rotated\nlog-level debug\nrequirepass two\n");
    reload(&e, old, 1);
    ASSERT_EQ(pu_info_int(old, "config_reloads"), 1);
    ASSERT_TRUE(ou_file_contains(e.proxy.log_path, "config reloaded from"));
    PU_ERR(c, "WRONGPASS", "AUTH %s", "one");
    PU_OK(c, "AUTH %s", "two");
    /* The connection that logged in before keeps its session and lock. */
    PU_INT(old, 1, "UNLOCK %s", "kept");
    /* debug is on now: back-to-back auth failures are logged at debug. */
    PU_ERR(c, "WRONGPASS", "AUTH %s", "again");
    PU_ERR(c, "WRONGPASS", "AUTH %s", "and-again");
    PU_EVENTUALLY(ou_file_contains(e.proxy.log_path, " debug: "), 3000);
    redisFree(c);
    redisFree(old);
    pu_env_stop(&e);
}

TEST(signals_sighup_bad_file_keeps_config)
{
    char conf[PU_PATH_MAX];
    struct pu_env e;
    redisContext *c;

    ou_path(conf, sizeof(conf), "bad-reload.conf");
    ou_write_file(conf, "requirepass one\n");
    start_with_config(&e, conf);
    c = ou_client_auth(&e, NULL, "one");
    ou_write_file(conf, "requirepass two\npool-size lots\n");
    reload(&e, c, 1);
    ASSERT_EQ(pu_info_int(c, "config_reload_errors"), 1);
    ASSERT_TRUE(ou_file_contains(e.proxy.log_path, "bad-reload.conf:2: key 'pool-size'"));
    ASSERT_TRUE(ou_file_contains(e.proxy.log_path, "keeping the running configuration"));
    redisFree(c);
    c = ou_client_auth(&e, NULL, "one"); /* the old password still works */
    PU_OK(c, "LOCK %s", "still");
    /* A restart-only change is reported, the rest applied. */
    ou_write_file(conf, "requirepass one\npool-size 5\n");
    reload(&e, c, 2);
    ASSERT_TRUE(ou_file_contains(e.proxy.log_path, "'pool-size' changed; it takes effect after"));
    pu_proxy_assert_alive(&e.proxy);
    redisFree(c);
    pu_env_stop(&e);
}

TEST(signals_sighup_removed_user_is_disconnected)
{
    char conf[PU_PATH_MAX];
    struct pu_env e;
    redisContext *app, *ops, *rc;
    bool closed = false;
    redisReply *r;

    ou_path(conf, sizeof(conf), "users-reload.conf");
    ou_write_file(conf, "user app on >apppw ~app:*\nuser ops on >opspw allkeys\n");
    start_with_config(&e, conf);
    rc = pu_redis_client(&e);
    app = ou_client_auth(&e, "app", "apppw");
    ops = ou_client_auth(&e, "ops", "opspw");
    PU_OK(app, "LOCK %s", "app:1");
    PU_OK(ops, "LOCK %s", "other");
    /* ops loses "other": its patterns now apply to the live session. */
    ou_write_file(conf, "user ops on >opspw ~ops:*\n");
    reload(&e, ops, 1);
    r = pu_poll_reply(app, 2000, &closed);
    ASSERT_TRUE(r == NULL && closed); /* app was removed: disconnected */
    PU_EVENTUALLY(!pu_exists(rc, "app:1"), 3000);
    PU_ERR(ops, "NOPERM", "UNLOCK %s", "other");
    PU_OK(ops, "LOCK %s", "ops:1");
    redisFree(ops);
    redisFree(app);
    redisFree(rc);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(signals_sigterm_releases_locks), TEST_CASE(signals_sigterm_redis_down),
          TEST_CASE(signals_sighup_reloads_requirepass_and_log_level),
          TEST_CASE(signals_sighup_bad_file_keeps_config),
          TEST_CASE(signals_sighup_removed_user_is_disconnected))
