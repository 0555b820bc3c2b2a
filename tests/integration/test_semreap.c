/* A dead proxy's semaphore permits are given back by a live one (issue 18
 * item 10), against a real redis-server: P0 takes permits for its
 * clients and is killed (kill -9: it returns nothing); P1, on the same
 * Redis, finds P0's liveness key expired and gives back what P0's ledger
 * records, within about two --lock-watchdog-timeouts. Permits taken with
 * KEEP stay taken (they are nobody's to return). A proxy that was only
 * stopped past its liveness key learns that it was reaped: its client's
 * SEM.RELEASE answers LOCKLOST, and adds nothing twice. */
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define WATCHDOG "1000"

static void scenario_killed(struct pu_env *e)
{
    struct pu_proxy p0;
    redisContext *live = pu_client(e), *c0, *k0;

    ou_second_proxy(e, &p0);
    c0 = pu_connect(p0.port);
    k0 = pu_connect(p0.port);
    PU_INT(live, 1, "SEM.TRYSETPERMITS %s %d", "rp", 5);
    PU_OK(c0, "SEM.ACQUIRE %s %d", "rp", 2);
    PU_OK(k0, "SEM.ACQUIRE %s %d KEEP", "rp", 1);
    PU_INT(live, 2, "SEM.AVAILABLE %s", "rp");
    ASSERT_EQ(kill(p0.pid, SIGKILL), 0);
    /* P0's two tracked permits come back; the KEEP one does not. */
    PU_EVENTUALLY(pu_int_reply(live, "SEM.AVAILABLE", "rp") == 4, 8000);
    pu_sleep_ms(2500); /* nothing comes back twice */
    PU_INT(live, 4, "SEM.AVAILABLE %s", "rp");
    ASSERT_EQ(pu_info_int(live, "sem_dead_proxy_permits_returned"), 2);
    redisFree(c0);
    redisFree(k0);
    pu_proxy_stop(&p0);
    redisFree(live);
}

TEST(semreap_killed_proxy)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", WATCHDOG, NULL};

    pu_each_backend(scenario_killed, extra);
}

static void scenario_stopped(struct pu_env *e)
{
    struct pu_proxy p0;
    redisContext *live = pu_client(e), *c0;
    redisReply *r;
    char d[256];

    ou_second_proxy(e, &p0);
    c0 = pu_connect(p0.port);
    PU_INT(live, 1, "SEM.TRYSETPERMITS %s %d", "rs", 2);
    PU_OK(c0, "SEM.ACQUIRE %s", "rs");
    ASSERT_EQ(kill(p0.pid, SIGSTOP), 0);
    PU_EVENTUALLY(pu_int_reply(live, "SEM.AVAILABLE", "rs") == 2, 8000);
    ASSERT_EQ(kill(p0.pid, SIGCONT), 0);
    /* Its client's permit was given back for it: its release is told so
     * and adds nothing (the count stays at what was set). */
    r = pu_cmd(c0, "SEM.RELEASE %s", "rs");
    if (!pu_is_err(r, "LOCKLOST"))
        TEST_FAIL("release after the reap: expected -LOCKLOST, got %s",
                  pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
    PU_EVENTUALLY(pu_info_int(c0, "sem_reaped_self") >= 1, 3000);
    PU_INT(live, 2, "SEM.AVAILABLE %s", "rs");
    redisFree(c0);
    pu_proxy_stop(&p0);
    redisFree(live);
}

TEST(semreap_stopped_proxy_told)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", WATCHDOG, NULL};

    pu_each_backend(scenario_stopped, extra);
}

TEST_MAIN(TEST_CASE(semreap_killed_proxy), TEST_CASE(semreap_stopped_proxy_told))
