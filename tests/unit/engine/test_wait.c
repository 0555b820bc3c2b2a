/* The engine's wait ops alone (engine/wait.c, waitset.c), over the
 * fixture of tests/support/engine_fixture.h: a wait granted at once,
 * after a re-poll, woken by a PUBLISH, woken twice, timed out, cancelled
 * by its connection's close, and a grant racing the WAIT deadline; each
 * checked by the finish called exactly once, the counters and what the
 * Redis model holds. */
#include <string.h>

#include "engine/engine.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "harness.h"
#include "tests/support/engine_fixture.h"

#define FX_CHANNEL PX_LOCK_CHANNEL_PREFIX "a"

/* "a" is held by another connection (id 99) for lease_ms; returns its
 * owner in other. */
static size_t fx_held_by_other(char *other, uint64_t lease_ms)
{
    size_t olen = fx_owner(99, other);

    ASSERT_TRUE(fx_acquire("a", other, olen, lease_ms));
    return olen;
}

static long long fx_count0(const char *name)
{
    char owner[PX_OWNER_MAX];

    fx_owner(fx.callers[0].id, owner);
    return fx_count(name, owner);
}

TEST(wait_granted_at_once)
{
    fx_start();
    fx_wait(0, "a", 500);
    fx_pump();
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(fx.refs, 0);
    ASSERT_EQ(fx_count0("a"), 1);
    fx_stop();
}

TEST(wait_granted_after_the_holder_lease_ends)
{
    char other[PX_OWNER_MAX];

    fx_start();
    fx_held_by_other(other, 300);
    fx_wait(0, "a", 2000);
    fx_pump();
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(fx.finished, 0u);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 1u);
    /* The other lease runs out; the re-poll at its PTTL gets the lock. */
    fx_advance(400);
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(wait_woken_by_a_publish)
{
    char other[PX_OWNER_MAX];
    size_t olen;
    struct fx_waiter *w;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    w = fx_wait(0, "a", 10000);
    fx_pump();
    /* Joined the channel's set, subscription confirmed, asleep until a
     * re-poll a minute away. */
    ASSERT_EQ(w->op.state, PX_WAIT_ASLEEP);
    ASSERT_TRUE(w->op.set != NULL);
    fx_advance(100);
    ASSERT_EQ(fx.granted, 0u);
    /* The holder's UNLOCK publishes "0": the waiter retries and gets it
     * at once, not at the re-poll. */
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(fx_count0("a"), 1);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(wait_woken_twice_grants_once)
{
    char other[PX_OWNER_MAX];
    size_t olen;
    struct fx_waiter *w;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    w = fx_wait(0, "a", 10000);
    fx_pump();
    ASSERT_EQ(w->op.state, PX_WAIT_ASLEEP);
    fx.hold_msgs = true; /* the unlock's own message waits */
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    ASSERT_EQ(fx.granted, 0u);
    /* Two wake-ups before the retry is answered: one attempt in flight,
     * the second wake-up noted (WOKEN), not a second attempt. */
    fx_publish(FX_CHANNEL, "0");
    ASSERT_EQ(w->op.state, PX_WAIT_RETRYING);
    fx_publish(FX_CHANNEL, "0");
    ASSERT_EQ(w->op.state, PX_WAIT_WOKEN);
    fx_pump();
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    fx.hold_msgs = false;
    fx_pump(); /* the unlock's message finds nobody waiting */
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.undone, 0u);
    ASSERT_EQ(fx_count0("a"), 1); /* acquired once in Redis */
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(wait_times_out)
{
    char other[PX_OWNER_MAX];

    fx_start();
    fx_held_by_other(other, 60000);
    fx_wait(0, "a", 500);
    fx_advance(400);
    ASSERT_EQ(fx.finished, 0u);
    fx_advance(200);
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_TIMEOUT);
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(px_wait_timeouts(fx.eng, PX_WAIT_STAT_LOCK), 1u);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(wait_cancelled_when_its_connection_closes)
{
    char other[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    fx_wait(0, "a", -1);
    fx_pump();
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 1u);
    fx_close(0);
    /* Asleep: ended at once, the reply dropped, nothing taken. */
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(px_wait_waiting(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx.refs, 0);
    /* The holder's release wakes nobody: the lock stays free. */
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    fx_advance(100);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.finished, 1u);
    fx_stop();
}

TEST(wait_granted_after_its_connection_closed_is_given_back)
{
    char other[PX_OWNER_MAX];
    size_t olen;
    struct fx_waiter *w;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    w = fx_wait(0, "a", -1);
    fx_pump();
    fx.hold_msgs = true;
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    fx_publish(FX_CHANNEL, "0");
    ASSERT_EQ(w->op.state, PX_WAIT_RETRYING);
    /* The connection closes with the attempt in flight: the op waits for
     * its reply, which grants; the grant is given back. */
    fx.callers[0].closing = true;
    px_locks_client_gone(&fx.callers[0]);
    ASSERT_EQ(fx.finished, 0u);
    fx_pump();
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(fx.undone, 1u);
    fx_pump();
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

/* The holder releases just before the deadline; the retry's reply comes
 * after it. A valid grant wins over the timeout: used, not timed out. */
TEST(wait_grant_racing_the_timeout_wins)
{
    char other[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    fx_wait(0, "a", 500);
    fx_advance(400);
    fx.hold_msgs = true;
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    fx_publish(FX_CHANNEL, "0");
    fx_skip(300); /* past WAIT's deadline, the attempt unanswered */
    ASSERT_EQ(fx.finished, 0u);
    fx_pump();
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_REPLIED);
    ASSERT_EQ(fx.granted, 1u);
    ASSERT_EQ(px_wait_timeouts(fx.eng, PX_WAIT_STAT_LOCK), 0u);
    ASSERT_EQ(fx_count0("a"), 1);
    fx_stop();
}

/* The same race, the reply so late that the lease it asked for is all but
 * spent: the grant is given back and the wait ends without it. */
TEST(wait_grant_racing_the_timeout_too_late)
{
    char other[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_held_by_other(other, 60000);
    fx_wait(0, "a", 500);
    fx_advance(400);
    fx.hold_msgs = true;
    ASSERT_EQ(fx_unlock("a", other, olen, 60000), 1);
    fx_publish(FX_CHANNEL, "0");
    for (unsigned k = 0; k < fp_nconns(fx.pool); k++)
        while (fp_execute(fx.pool, k)) /* Redis grants it now... */
            ;
    fx_skip(FX_WATCHDOG_MS - 20); /* ...and the reply comes with 20 ms of it left */
    fx_pump();
    ASSERT_EQ(fx.finished, 1u);
    ASSERT_EQ(fx.end, LK_END_LATE);
    ASSERT_EQ(fx.granted, 0u);
    ASSERT_EQ(fx.undone, 1u);
    fx_pump();
    ASSERT_EQ(fx_count0("a"), 0);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST_MAIN(TEST_CASE(wait_granted_at_once), TEST_CASE(wait_granted_after_the_holder_lease_ends),
          TEST_CASE(wait_woken_by_a_publish), TEST_CASE(wait_woken_twice_grants_once),
          TEST_CASE(wait_times_out), TEST_CASE(wait_cancelled_when_its_connection_closes),
          TEST_CASE(wait_granted_after_its_connection_closed_is_given_back),
          TEST_CASE(wait_grant_racing_the_timeout_wins),
          TEST_CASE(wait_grant_racing_the_timeout_too_late))
