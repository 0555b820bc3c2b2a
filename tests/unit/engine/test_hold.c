/* The engine's holds alone (engine/hold.c, watchdog.c), over the fixture
 * of tests/support/engine_fixture.h: every transition of enum
 * px_hold_state that a test can reach from the engine's API, each checked
 * by what is observable (the state, the counts, the front end's hooks
 * called exactly once, what the Redis model holds). */
#include <string.h>

#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "harness.h"
#include "pool/pool.h"
#include "tests/support/engine_fixture.h"

/* ---- PENDING -> HELD, re-entry ------------------------------------------- */

TEST(hold_pending_then_held_on_grant)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_use(fx.eng, &px_hold_plain, "a", 1, owner, olen, true);
    ASSERT_TRUE(h != NULL);
    /* The first request about the pair: PENDING, nothing confirmed. */
    ASSERT_EQ(h->state, PX_HOLD_PENDING);
    ASSERT_EQ(h->count, 0u);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == h);
    px_hold_begin(h);
    ASSERT_EQ(h->inflight, 1u);
    ASSERT_TRUE(fx_acquire("a", owner, olen, FX_WATCHDOG_MS));
    px_hold_end(h);
    px_hold_granted(h, &px_hold_plain, &fx.callers[0], 1, FX_WATCHDOG_MS, true, fx_now_ms());
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(h->count, 1u);
    ASSERT_EQ(h->inflight, 0u);
    ASSERT_TRUE(h->cl == &fx.callers[0]);
    ASSERT_EQ(fx.eng->nholds, 1u);
    ASSERT_TRUE(px_locks_client_busy(&fx.callers[0].locks));
    ASSERT_EQ(h->expires_ms, fx_now_ms() + FX_WATCHDOG_MS);
    px_hold_put(h);
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == h); /* the table keeps it */
    fx_stop();
}

TEST(hold_reentry_counts_what_clients_were_told)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = fx_grant(0, "a", owner, olen, true, 0);
    h = fx_grant(0, "a", owner, olen, true, 0);
    ASSERT_EQ(h->count, 2u);
    ASSERT_EQ(h->cl_count, 2u);
    ASSERT_EQ(fx.eng->nholds, 1u); /* one hold, counted once */
    ASSERT_EQ(fx_count("a", owner), 2);
    /* Redis merged two acquisitions nobody was told of into the next
     * grant (4 where the clients were told 2 + 1): the hold keeps 3 and
     * a settle gives the extra one back. */
    ASSERT_TRUE(fx_acquire("a", owner, olen, FX_WATCHDOG_MS));
    ASSERT_TRUE(fx_acquire("a", owner, olen, FX_WATCHDOG_MS));
    px_hold_granted(h, &px_hold_plain, &fx.callers[0], 4, FX_WATCHDOG_MS, true, fx_now_ms());
    ASSERT_EQ(h->count, 3u);
    fx_pump();
    ASSERT_EQ(fx_count("a", owner), 3);
    ASSERT_EQ(fx.eng->stats.rolled_back, 1u);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    fx_stop();
}

/* ---- HELD -> PENDING (UNLOCK), HELD -> RELEASING -> DEAD ------------------ */

TEST(hold_unlocked_then_released)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    fx_grant(0, "a", owner, olen, true, 0);
    h = px_hold_get(fx_grant(0, "a", owner, olen, true, 0));
    /* UNLOCK :0: one less, the lease counted from the unlock's send. */
    ASSERT_EQ(fx_unlock("a", owner, olen, FX_WATCHDOG_MS), 0);
    px_hold_unlocked_one(h, &fx.callers[0], fx_now_ms());
    ASSERT_EQ(h->count, 1u);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(fx.hold_ends, 0u);
    /* UNLOCK :1: PENDING, the hold time reported once, nothing held. */
    ASSERT_EQ(fx_unlock("a", owner, olen, FX_WATCHDOG_MS), 1);
    px_hold_released(h);
    ASSERT_EQ(h->state, PX_HOLD_PENDING);
    ASSERT_EQ(h->count, 0u);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.hold_ends, 1u);
    ASSERT_TRUE(!px_locks_client_busy(&fx.callers[0].locks));
    px_hold_put(h); /* the last reference: freed */
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == NULL);
    fx_advance(2 * FX_WATCHDOG_MS); /* no renewal re-creates it */
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.lost[0], 0u);
    fx_stop();
}

/* Redis counts more than the one count the client was told of (an
 * acknowledged unlock a failover lost, or a late acquisition): the
 * client's UNLOCK of that count is answered :0 by Redis, yet it is the
 * last release the client asks for. The proxy carries it out (RELEASING,
 * settled to nothing) and says so, instead of keeping a hold no client
 * will ever release and renewing it for ever. */
TEST(hold_unlock_of_last_count_releases_the_rest)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_get(fx_grant(0, "a", owner, olen, true, 0));
    ASSERT_TRUE(fx_acquire("a", owner, olen, FX_WATCHDOG_MS)); /* told nobody */
    ASSERT_EQ(fx_unlock("a", owner, olen, FX_WATCHDOG_MS), 0);
    ASSERT_TRUE(px_hold_unlocked_one(h, &fx.callers[0], fx_now_ms()));
    ASSERT_EQ(h->state, PX_HOLD_RELEASING);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.hold_ends, 1u);
    fx_pump();
    ASSERT_EQ(fx_count("a", owner), 0);
    ASSERT_EQ(h->state, PX_HOLD_DEAD);
    ASSERT_EQ(fx.lost[0], 0u);
    ASSERT_EQ(fx.eng->stats.released, 1u);
    ASSERT_EQ(fx.eng->stats.unlocks_extra, 1u);
    ASSERT_EQ(fx.eng->stats.disc_releases, 0u); /* no connection closed */
    px_hold_put(h);
    fx_advance(2 * FX_WATCHDOG_MS); /* no renewal re-creates it */
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    fx_stop();
}

TEST(hold_release_settles_to_dead)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_get(fx_grant(0, "a", owner, olen, true, 0));
    px_hold_release(h, fx_now_ms() + FX_WATCHDOG_MS);
    ASSERT_EQ(h->state, PX_HOLD_RELEASING);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.hold_ends, 1u);
    ASSERT_TRUE(px_jobs_busy(fx.eng)); /* the release: a retried job */
    fx_pump();
    /* The release ran in Redis: DEAD, out of the table, counted once. */
    ASSERT_EQ(h->state, PX_HOLD_DEAD);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == NULL);
    ASSERT_EQ(fx.eng->stats.disc_releases, 1u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    ASSERT_EQ(fx.lost[0], 0u);
    px_hold_put(h);
    fx_stop();
}

/* ---- an UNLOCK whose reply is lost (px_hold_unlock_failed) --------------- */

TEST(hold_unlock_failed_kept_in_hand)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;
    uint64_t asked;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    fx_grant(0, "a", owner, olen, true, 0);
    h = fx_grant(0, "a", owner, olen, true, 0);
    fx_advance(500);
    asked = fx_now_ms();
    /* :0 in hand: one less, the lease counted from the unlock. */
    ASSERT_EQ(px_hold_unlock_failed(h, &fx.callers[0], asked), PX_UNLOCK_KEPT);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(h->count, 1u);
    ASSERT_EQ(h->expires_ms, asked + FX_WATCHDOG_MS);
    ASSERT_EQ(fx.eng->stats.unlocks_in_hand, 1u);
    ASSERT_EQ(fx_count("a", owner), 2); /* not yet carried out */
    fx_pump();
    /* The settle carried it out: Redis has the one count left. */
    ASSERT_EQ(fx_count("a", owner), 1);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(h->vouch_cap_ms, 0u);
    ASSERT_EQ(fx.eng->nholds, 1u);
    ASSERT_EQ(fx.lost[0], 0u);
    fx_stop();
}

/* A fixed lease whose end has come, its timer not fired yet (the wheel
 * fires it up to a tick late): before a new acquire of the pair is judged,
 * it lapses as the timer would end it, not early and untold, so a fresh
 * grant (count 1) is no "hold lost before" (LOCKLOST). */
TEST(hold_fixed_lease_lapses_before_a_new_acquire)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_use(fx.eng, &px_hold_plain, "a", 1, owner, olen, true);
    ASSERT_TRUE(h != NULL);
    px_hold_begin(h);
    px_hold_end(h);
    /* Granted 30 ms ago with a 20 ms lease: its end is past by the loop's
     * clock, its timer due but not run. */
    px_hold_granted(h, &px_hold_plain, &fx.callers[0], 1, 20, false, fx_now_ms() - 30);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_TRUE(px_hold_lost_before(h, 1)); /* what a grant would be judged by, unlapsed */
    px_hold_lapse_due(h);
    ASSERT_EQ(h->state, PX_HOLD_LOST);
    ASSERT_TRUE(!px_hold_lost_before(h, 0));
    ASSERT_TRUE(!px_hold_lost_before(h, 1));
    ASSERT_EQ(fx.eng->nholds, 0u);
    px_hold_lapse_due(h); /* once */
    ASSERT_EQ(fx.eng->stats.leases_lost, 1u);
    /* A watchdog hold's lease never lapses here: its renewal decides. */
    px_hold_put(h);
    h = fx_grant(0, "b", owner, olen, true, 0);
    fx_skip(0);
    px_hold_lapse_due(h);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    fx_stop();
}

TEST(hold_unlock_failed_released_in_hand)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_get(fx_grant(0, "a", owner, olen, true, 0));
    /* :1 in hand: the last hold; the proxy releases it. */
    ASSERT_EQ(px_hold_unlock_failed(h, &fx.callers[0], fx_now_ms()), PX_UNLOCK_RELEASED);
    ASSERT_EQ(h->state, PX_HOLD_RELEASING);
    ASSERT_EQ(fx.eng->stats.released, 1u);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.hold_ends, 1u);
    fx_pump();
    ASSERT_EQ(h->state, PX_HOLD_DEAD);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.lost[0], 0u);
    ASSERT_EQ(fx.eng->stats.leases_lost, 0u);
    px_hold_put(h);
    fx_stop();
}

TEST(hold_unlock_failed_past_its_lease_is_lost)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = px_hold_get(fx_grant(0, "a", owner, olen, false, 1000));
    /* Asked when the lease is no longer vouched for: LOCKLOST, the loss
     * told once, and the pair given back all the same. */
    ASSERT_EQ(px_hold_unlock_failed(h, &fx.callers[0], h->expires_ms), PX_UNLOCK_UNVOUCHED);
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_EQ(fx.eng->stats.leases_lost, 1u);
    ASSERT_EQ(h->state, PX_HOLD_RELEASING);
    fx_pump();
    ASSERT_EQ(h->state, PX_HOLD_DEAD);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    fx_advance(1500);
    ASSERT_EQ(fx.lost[0], 1u);
    px_hold_put(h);
    fx_stop();
}

/* ---- HELD -> LOST ------------------------------------------------------- */

TEST(hold_renewal_finds_it_lost_once)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = fx_grant(0, "a", owner, olen, true, 0);
    fx_advance(2 * FX_WATCHDOG_MS);
    ASSERT_TRUE(fx.eng->stats.renewals >= 2u); /* renewed meanwhile, never lost */
    ASSERT_TRUE(fr_pttl(fx.redis, fx_now_ms(), "a") > (long long)(FX_WATCHDOG_MS / 2));
    ASSERT_EQ(fx.lost[0], 0u);
    /* Redis restarts without persistence: the next renewal answers lost. */
    fr_flush(fx.redis);
    fx_advance(FX_WATCHDOG_MS);
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_TRUE(strcmp(fx.lost_name, "a") == 0);
    ASSERT_EQ(fx.eng->stats.leases_lost, 1u);
    ASSERT_EQ(h->state, PX_HOLD_LOST); /* the tombstone */
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == h);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.hold_ends, 1u);
    fx_advance(3 * FX_WATCHDOG_MS); /* told once: no more renewals, no second push */
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    fx_stop();
}

TEST(hold_lost_told_to_each_connection_of_a_shared_owner)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner_token("worker-1", owner);
    fx_grant(0, "a", owner, olen, true, 0);
    h = fx_grant(1, "a", owner, olen, true, 0);
    ASSERT_EQ(h->count, 2u);
    ASSERT_TRUE(h->cl == &fx.callers[0]);
    ASSERT_EQ(h->cl_count, 1u);
    ASSERT_TRUE(px_locks_client_busy(&fx.callers[1].locks));
    fr_flush(fx.redis);
    fx_advance(FX_WATCHDOG_MS);
    /* One loss, counted once, pushed once to each connection with a part. */
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_EQ(fx.lost[1], 1u);
    ASSERT_EQ(fx.eng->stats.leases_lost, 1u);
    ASSERT_EQ(h->state, PX_HOLD_LOST);
    ASSERT_TRUE(!px_locks_client_busy(&fx.callers[1].locks));
    fx_advance(2 * FX_WATCHDOG_MS);
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_EQ(fx.lost[1], 1u);
    /* The tombstone ends after PX_HOLD_TOMBSTONE_MS. */
    fx_advance(PX_HOLD_TOMBSTONE_MS);
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == NULL);
    fx_stop();
}

/* ---- a connection goes --------------------------------------------------- */

TEST(hold_released_when_its_connection_goes)
{
    char owner[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    fx_grant(0, "a", owner, olen, true, 0);
    fx_grant(0, "b", owner, olen, true, 0);
    ASSERT_EQ(fx.eng->nholds, 2u);
    fx_close(0);
    /* --on-disconnect release: both keys are gone from Redis, the table is
     * empty, nothing is told lost, no reference is left. */
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "b"), -2);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_EQ(fx.eng->stats.disc_releases, 2u);
    ASSERT_TRUE(!px_locks_client_busy(&fx.callers[0].locks));
    ASSERT_TRUE(!px_locks_releasing(fx.eng));
    ASSERT_EQ(fx.refs, 0);
    ASSERT_EQ(fx.lost[0], 0u);
    fx_stop();
}

TEST(hold_left_to_expire_when_its_connection_goes)
{
    char owner[PX_OWNER_MAX];
    size_t olen;

    fx_start();
    fx.eng->cfg.on_disc = PX_DISCONNECT_EXPIRE;
    olen = fx_owner(fx.callers[0].id, owner);
    fx_grant(0, "a", owner, olen, true, 0);
    fx_close(0);
    /* Not released, no longer renewed: the key runs out with its lease. */
    ASSERT_TRUE(fr_pttl(fx.redis, fx_now_ms(), "a") > 0);
    ASSERT_EQ(fx.eng->nholds, 0u);
    ASSERT_TRUE(px_hold_find(fx.eng, "a", 1, owner, olen) == NULL);
    fx_advance(FX_WATCHDOG_MS + 100);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.lost[0], 0u);
    ASSERT_EQ(fx.refs, 0);
    fx_stop();
}

TEST(hold_shared_owner_keeps_the_rest_when_one_connection_goes)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h;

    fx_start();
    olen = fx_owner_token("worker-1", owner);
    fx_grant(0, "a", owner, olen, true, 0);
    h = fx_grant(1, "a", owner, olen, true, 0);
    fx_close(0);
    /* Connection 0's part is given back; connection 1 holds the rest,
     * renewed as before. */
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(h->count, 1u);
    ASSERT_TRUE(h->cl == &fx.callers[1]);
    ASSERT_EQ(fx_count("a", owner), 1);
    ASSERT_EQ(fx.eng->stats.disc_releases, 1u);
    fx_advance(2 * FX_WATCHDOG_MS);
    ASSERT_EQ(fx_count("a", owner), 1);
    ASSERT_EQ(fx.lost[1], 0u);
    fx_close(1);
    ASSERT_EQ(fr_pttl(fx.redis, fx_now_ms(), "a"), -2);
    ASSERT_EQ(fx.eng->stats.disc_releases, 2u);
    fx_stop();
}

/* ---- a change of master -------------------------------------------------- */

static void fx_topology_all(void)
{
    static uint8_t slots[POOL_SLOTS / 8];
    struct pool_topology_event ev = {
        .nchanged = POOL_SLOTS, .slots = slots, .masters = 1, .slots_served = POOL_SLOTS};

    memset(slots, 0xff, sizeof(slots));
    px_locks_on_topology(fx.eng, &ev);
}

TEST(hold_unchecked_after_a_topology_change)
{
    char owner[PX_OWNER_MAX];
    size_t olen;
    struct px_hold *h, *g;

    fx_start();
    olen = fx_owner(fx.callers[0].id, owner);
    h = fx_grant(0, "a", owner, olen, true, 0);
    g = fx_grant(0, "b", owner, olen, true, 0);
    fx_topology_all();
    /* Nothing shows the holds are on the new master yet. */
    ASSERT_TRUE(h->unchecked);
    ASSERT_TRUE(g->unchecked);
    ASSERT_EQ(fx.eng->stats.topology_verified, 2u);
    fx_pump();
    /* Checked at once by a renewal: held, no longer unchecked. */
    ASSERT_TRUE(!h->unchecked);
    ASSERT_TRUE(!g->unchecked);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_EQ(fx.lost[0], 0u);
    /* A failover that lost "b": the check finds it gone, told once. */
    fx_advance(100);
    ASSERT_EQ(fx_unlock("b", owner, olen, FX_WATCHDOG_MS), 1);
    fx_topology_all();
    fx_pump();
    ASSERT_EQ(fx.lost[0], 1u);
    ASSERT_TRUE(strcmp(fx.lost_name, "b") == 0);
    ASSERT_EQ(h->state, PX_HOLD_HELD);
    ASSERT_TRUE(!h->unchecked);
    fx_stop();
}

TEST_MAIN(TEST_CASE(hold_pending_then_held_on_grant),
          TEST_CASE(hold_reentry_counts_what_clients_were_told),
          TEST_CASE(hold_unlocked_then_released),
          TEST_CASE(hold_unlock_of_last_count_releases_the_rest),
          TEST_CASE(hold_release_settles_to_dead), TEST_CASE(hold_unlock_failed_kept_in_hand),
          TEST_CASE(hold_fixed_lease_lapses_before_a_new_acquire),
          TEST_CASE(hold_unlock_failed_released_in_hand),
          TEST_CASE(hold_unlock_failed_past_its_lease_is_lost),
          TEST_CASE(hold_renewal_finds_it_lost_once),
          TEST_CASE(hold_lost_told_to_each_connection_of_a_shared_owner),
          TEST_CASE(hold_released_when_its_connection_goes),
          TEST_CASE(hold_left_to_expire_when_its_connection_goes),
          TEST_CASE(hold_shared_owner_keeps_the_rest_when_one_connection_goes),
          TEST_CASE(hold_unchecked_after_a_topology_change))
