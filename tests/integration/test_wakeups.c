/* Wake-ups are not lost when the waiter they went to cannot use them
 * (found by the issue-18 torture workload: a lock free for 1-1.3 s while
 * its waiters slept until their WAIT ran out). A release message ("0")
 * wakes one waiter of the name; a MULTILOCK waiter woken on one name that
 * then finds another of its names held moves to that name, and a waiter
 * that times out right after being woken leaves: either way the wake-up
 * goes on to the next waiter. Both io backends. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* H (through P1, so no local hand-off on P0) holds a and b; M's MULTILOCK
 * a b and then L's LOCK a wait on a through P0, M first. H releases a:
 * the message wakes M, which finds b held and moves to b's channel; L must
 * get a at once, not when its WAIT runs out. */
static void scenario_multi_moves(struct pu_env *e)
{
    struct pu_proxy p1;
    redisContext *h, *m = pu_client(e), *l = pu_client(e), *o = pu_client(e);
    long long t0;

    ou_second_proxy(e, &p1);
    h = pu_connect(p1.port);
    PU_OK(h, "LOCK %s", "wk:a");
    PU_OK(h, "LOCK %s", "wk:b");
    pu_send(m, "MULTILOCK wk:a wk:b WAIT %d", 8000);
    PU_EVENTUALLY(pu_info_int(o, "lock_waiters") == 1, 3000);
    pu_send(l, "LOCK wk:a WAIT %d", 8000);
    PU_EVENTUALLY(pu_info_int(o, "lock_waiters") == 2, 3000);
    pu_sleep_ms(200);
    t0 = pu_now_ms();
    PU_INT(h, 1, "UNLOCK %s", "wk:a");
    PU_RECV(l, PU_K_STATUS, 0, "OK");
    if (pu_now_ms() - t0 > 2000)
        TEST_FAIL("LOCK wk:a got the free lock %lld ms after its release", pu_now_ms() - t0);
    PU_INT(l, 1, "UNLOCK %s", "wk:a");
    PU_INT(h, 1, "UNLOCK %s", "wk:b");
    PU_RECV(m, PU_K_STATUS, 0, "OK");
    PU_INT(m, 1, "MULTIUNLOCK %s %s", "wk:a", "wk:b");
    redisFree(h);
    redisFree(m);
    redisFree(l);
    redisFree(o);
    pu_proxy_stop(&p1);
}

TEST(wakeups_multilock_moves_on)
{
    ou_each_backend_debug(scenario_multi_moves, "info", NULL);
}

TEST_MAIN(TEST_CASE(wakeups_multilock_moves_on))
