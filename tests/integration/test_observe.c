/* What an operator sees of routine events, and of the loop itself:
 * - a client that disconnects with a LOCK in flight has the acquisition
 *   rolled back: counted (INFO unknown_outcomes_rolled_back, metrics) and
 *   logged at info, not warn (it is correct behaviour, common under load);
 * - the loop's slowest iteration, iterations over
 *   --latency-monitor-threshold and timers that fired late are in INFO
 *   (latency section) and /metrics, and a stall is logged (warn, rate
 *   limited);
 * - a burst of new connections after an idle spell, under CPU contention,
 *   is answered in time (both io backends).
 * Both io backends. */
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* ---- environment ------------------------------------------------------------ */

/* Redis with DEBUG enabled, then the proxy with --io backend and extra
 * (the log level is info unless extra says otherwise). */
static void env_start(struct pu_env *e, const char *backend, const char *const *extra)
{
    const char *args[PU_MAX_ARGS];
    int i = 0;

    memset(e, 0, sizeof(*e));
    e->redis.extra[0] = "--enable-debug-command";
    e->redis.extra[1] = "yes";
    pu_redis_start(&e->redis);
    args[i++] = "--log-level";
    args[i++] = "info";
    for (int j = 0; extra && extra[j] && i < PU_MAX_ARGS - 1; j++)
        args[i++] = extra[j];
    args[i] = NULL;
    ou_env_start(e, backend, args);
}

static void each_backend(void (*scenario)(struct pu_env *e), const char *const *extra)
{
    static const char *const backends[] = {"epoll", "uring"};
    const char *only = getenv("LP_IT_BACKENDS");
    struct pu_env e;
    int ran = 0;

    for (size_t i = 0; i < 2; i++) {
        if (only && only[0] && !strstr(only, backends[i]))
            continue;
        if (i == 1 && !pu_uring_available()) {
            fprintf(stderr, "SKIP (uring half): io_uring_setup is not permitted here\n");
            continue;
        }
        fprintf(stderr, "-- io backend %s\n", backends[i]);
        env_start(&e, backends[i], extra);
        scenario(&e);
        pu_env_stop(&e);
        ran++;
    }
    if (ran == 0)
        TEST_SKIP("no selected io backend can run here");
}

/* ---- a LOCK in flight when its client leaves: a counter, an info line ------ */

static void scenario_rollback_quiet(struct pu_env *e)
{
    static const char lock_req[] = "*4\r\n$4\r\nLOCK\r\n$2\r\nrb\r\n$5\r\nLEASE\r\n$5\r\n30000\r\n";
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *s = pu_redis_client(e);
    long long before = pu_info_int(a, "unknown_outcomes_rolled_back");
    int fd = pu_raw_connect(e->proxy.port);

    pu_send(s, "DEBUG SLEEP %s", "1");
    pu_sleep_ms(100); /* Redis is asleep */
    ASSERT_TRUE(pu_raw_send(fd, lock_req, sizeof(lock_req) - 1));
    pu_sleep_ms(100); /* the proxy sent the acquire */
    close(fd);
    /* Redis wakes, runs the acquire: the proxy gives it back. */
    PU_EVENTUALLY(!pu_exists(rc, "rb"), 8000);
    PU_EVENTUALLY(pu_info_int(a, "unknown_outcomes_rolled_back") > before, 5000);
    ASSERT_TRUE(ou_file_contains(e->proxy.log_path, "info: rolled back 1 acquisition(s)"));
    ASSERT_TRUE(!ou_file_contains(e->proxy.log_path, "warn: rolled back"));
    freeReplyObject(pu_recv(s));
    redisFree(s);
    redisFree(a);
    redisFree(rc);
}

TEST(observe_rollback_counted_not_warned)
{
    each_backend(scenario_rollback_quiet, NULL);
}

TEST_MAIN(TEST_CASE(observe_rollback_counted_not_warned))
