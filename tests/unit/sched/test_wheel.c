/* Unit tests for the hashed timing wheel (sched/wheel.h). The clock is a
 * plain variable passed to the wheel, so no test sleeps. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "sched/wheel.h"

#define TICK   4u
#define NSLOTS 4096u

/* A timer that records when it fired and can act on the wheel. */
struct probe {
    struct sched_timer timer; /* armed on g_wheel */
    int id;                   /* identity for fire-order checks */
    int fired;                /* times the callback ran */
    uint64_t fired_at;        /* g_now at the last fire */
    struct probe *victim;     /* borrowed: cancelled by the callback, or NULL */
    uint64_t rearm_delay;     /* re-arm at g_now + this after firing, 0: don't */
    int rearm_left;           /* re-arms still to do */
};

static struct sched_wheel g_wheel;
static uint64_t g_now;
static int g_order[64];
static size_t g_norder;

static void probe_fire(struct sched_timer *t)
{
    struct probe *p = LP_CONTAINER_OF(t, struct probe, timer);

    ASSERT_TRUE(!sched_timer_is_pending(t));
    ASSERT_LE(t->expires, g_now);
    p->fired++;
    p->fired_at = g_now;
    if (g_norder < LP_ARRAY_SIZE(g_order))
        g_order[g_norder++] = p->id;
    if (p->victim)
        sched_wheel_del(&g_wheel, &p->victim->timer);
    if (p->rearm_left > 0) {
        p->rearm_left--;
        sched_wheel_add(&g_wheel, &p->timer, g_now + p->rearm_delay);
    }
}

static void probe_init(struct probe *p, int id)
{
    memset(p, 0, sizeof(*p));
    sched_timer_init(&p->timer, probe_fire);
    p->id = id;
}

static void setup(uint64_t now, size_t nslots)
{
    g_now = now;
    g_norder = 0;
    ASSERT_OK(sched_wheel_init(&g_wheel, now, TICK, nslots));
}

/* Advances the clock 1 ms at a time up to until, running the wheel each ms. */
static size_t step_to(uint64_t until)
{
    size_t fired = 0;

    while (g_now < until) {
        g_now++;
        fired += sched_wheel_run(&g_wheel, g_now);
    }
    return fired;
}

TEST(wheel_init_rejects_bad_args)
{
    struct sched_wheel w;

    ASSERT_EQ(sched_wheel_init(&w, 0, 0, 16), -EINVAL);
    ASSERT_EQ(sched_wheel_init(&w, 0, 4, 0), -EINVAL);
    ASSERT_OK(sched_wheel_init(&w, 12345, 3, 100));
    ASSERT_EQ(w.nslots, 128);
    ASSERT_EQ(w.cur_tick, 12345 / 3);
    ASSERT_EQ(sched_wheel_timeout_ms(&w, 12345), -1);
    sched_wheel_deinit(&w);
}

TEST(wheel_fires_in_order)
{
    static const uint64_t delays[] = {50, 7, 300, 8, 1, 120, 9};
    static const int want[] = {4, 1, 3, 6, 0, 5, 2};
    struct probe p[LP_ARRAY_SIZE(delays)];
    size_t i;

    setup(1000, NSLOTS);
    for (i = 0; i < LP_ARRAY_SIZE(delays); i++) {
        probe_init(&p[i], (int)i);
        sched_wheel_add(&g_wheel, &p[i].timer, g_now + delays[i]);
    }
    ASSERT_EQ(g_wheel.count, LP_ARRAY_SIZE(delays));
    ASSERT_EQ(step_to(2000), LP_ARRAY_SIZE(delays));
    ASSERT_EQ(g_norder, LP_ARRAY_SIZE(want));
    for (i = 0; i < LP_ARRAY_SIZE(want); i++)
        ASSERT_EQ(g_order[i], want[i]);
    ASSERT_EQ(g_wheel.count, 0);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), -1);
    sched_wheel_deinit(&g_wheel);
}

/* Same-slot timers fire in arming order. */
TEST(wheel_same_slot_is_fifo)
{
    struct probe p[5];
    int i;

    setup(0, NSLOTS);
    for (i = 0; i < 5; i++) {
        probe_init(&p[i], i);
        sched_wheel_add(&g_wheel, &p[i].timer, 44 - (uint64_t)(i % 3)); /* all tick 11 */
    }
    ASSERT_EQ(step_to(43), 0);
    ASSERT_EQ(step_to(44), 5);
    for (i = 0; i < 5; i++)
        ASSERT_EQ(g_order[i], i);
    sched_wheel_deinit(&g_wheel);
}

/* Every deadline around several ticks fires at the first tick boundary at or
 * after it: never early, less than one tick late. */
TEST(wheel_never_early)
{
    struct probe p[40];
    uint64_t base = 1001, e;
    int i;

    setup(base, NSLOTS);
    for (i = 0; i < 40; i++) {
        probe_init(&p[i], i);
        sched_wheel_add(&g_wheel, &p[i].timer, base + 1 + (uint64_t)i);
    }
    step_to(base + 100);
    for (i = 0; i < 40; i++) {
        e = base + 1 + (uint64_t)i;
        ASSERT_EQ(p[i].fired, 1);
        ASSERT_EQ(p[i].fired_at, (e + TICK - 1) / TICK * TICK);
    }
    sched_wheel_deinit(&g_wheel);
}

/* Timers several revolutions away stay in their slot across rounds. */
TEST(wheel_rounds)
{
    struct probe far, near;

    setup(3, 8); /* one revolution = 32 ms */
    probe_init(&far, 1);
    probe_init(&near, 2);
    sched_wheel_add(&g_wheel, &far.timer, 1000);
    sched_wheel_add(&g_wheel, &near.timer, 1000 - 8 * TICK * 5);
    step_to(999);
    ASSERT_EQ(far.fired, 0);
    ASSERT_EQ(near.fired, 1);
    ASSERT_EQ(near.fired_at, 1000 - 8 * TICK * 5);
    ASSERT_TRUE(sched_timer_is_pending(&far.timer));
    ASSERT_EQ(step_to(1000), 1);
    ASSERT_EQ(far.fired_at, 1000);
    ASSERT_EQ(g_wheel.count, 0);
    sched_wheel_deinit(&g_wheel);
}

TEST(wheel_cancel)
{
    struct probe a, b;

    setup(0, NSLOTS);
    probe_init(&a, 1);
    probe_init(&b, 2);
    sched_wheel_add(&g_wheel, &a.timer, 100);
    sched_wheel_add(&g_wheel, &b.timer, 200);
    sched_wheel_del(&g_wheel, &a.timer);
    ASSERT_TRUE(!sched_timer_is_pending(&a.timer));
    sched_wheel_del(&g_wheel, &a.timer); /* idle: no-op */
    ASSERT_EQ(g_wheel.count, 1);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 0), 200);
    sched_wheel_del(&g_wheel, &b.timer);
    ASSERT_EQ(g_wheel.count, 0);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 0), -1);
    ASSERT_EQ(g_wheel.occupied[0] | g_wheel.occupied[1], 0);
    ASSERT_EQ(step_to(1000), 0);
    sched_wheel_deinit(&g_wheel);
}

/* A callback cancels a timer of the same slot (already on the run's due
 * list) and one of a later slot processed by the same run. */
TEST(wheel_cancel_from_callback)
{
    struct probe a, b, c, d;

    setup(0, NSLOTS);
    probe_init(&a, 1);
    probe_init(&b, 2);
    probe_init(&c, 3);
    probe_init(&d, 4);
    a.victim = &b;
    b.victim = &a;
    c.victim = &d;
    sched_wheel_add(&g_wheel, &a.timer, 40);
    sched_wheel_add(&g_wheel, &b.timer, 40);
    sched_wheel_add(&g_wheel, &c.timer, 41);
    sched_wheel_add(&g_wheel, &d.timer, 60);
    g_now = 100;
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 2);
    ASSERT_EQ(a.fired + b.fired + c.fired + d.fired, 2);
    ASSERT_EQ(a.fired, 1);
    ASSERT_EQ(c.fired, 1);
    ASSERT_EQ(g_wheel.count, 0);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), -1);
    sched_wheel_deinit(&g_wheel);
}

/* A periodic timer re-arms itself; a timer re-armed at "now" from its own
 * callback fires on the next run, not again in the same one. */
TEST(wheel_rearm_from_callback)
{
    struct probe per, now_again;

    setup(0, NSLOTS);
    probe_init(&per, 1);
    per.rearm_delay = 10;
    per.rearm_left = 4;
    sched_wheel_add(&g_wheel, &per.timer, 10);
    ASSERT_EQ(step_to(100), 5);
    ASSERT_EQ(per.fired_at, 60); /* fires at 12, 24, 36, 48, 60 */
    probe_init(&now_again, 2);
    now_again.rearm_delay = 0;
    now_again.rearm_left = 3;
    ASSERT_EQ(g_now % TICK, 0); /* so g_now is a past deadline */
    sched_wheel_add(&g_wheel, &now_again.timer, g_now);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 1);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 1);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 1);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 1);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 0);
    ASSERT_EQ(now_again.fired, 4);
    sched_wheel_deinit(&g_wheel);
}

/* add() on a pending timer moves it; count stays exact. */
TEST(wheel_add_rearms_pending)
{
    struct probe a;

    setup(0, NSLOTS);
    probe_init(&a, 1);
    sched_wheel_add(&g_wheel, &a.timer, 100);
    sched_wheel_add(&g_wheel, &a.timer, 500);
    ASSERT_EQ(g_wheel.count, 1);
    ASSERT_EQ(step_to(499), 0);
    ASSERT_EQ(step_to(500), 1);
    sched_wheel_add(&g_wheel, &a.timer, 900);
    sched_wheel_add(&g_wheel, &a.timer, 600);
    ASSERT_EQ(step_to(1000), 1);
    ASSERT_EQ(a.fired_at, 600);
    ASSERT_EQ(g_wheel.count, 0);
    sched_wheel_deinit(&g_wheel);
}

/* A deadline whose rounded-up tick has been reached fires on the next run
 * without the clock moving; one inside the current, unfinished tick waits
 * for the tick boundary. */
TEST(wheel_add_in_past)
{
    struct probe a, b, c, d;

    setup(1000, NSLOTS);
    ASSERT_EQ(sched_wheel_run(&g_wheel, 1003), 0);
    g_now = 1003;
    probe_init(&a, 1);
    probe_init(&b, 2);
    probe_init(&c, 3);
    probe_init(&d, 4);
    sched_wheel_add(&g_wheel, &a.timer, 0);
    sched_wheel_add(&g_wheel, &b.timer, 1000);
    sched_wheel_add(&g_wheel, &c.timer, 997);
    sched_wheel_add(&g_wheel, &d.timer, 1002); /* rounds up to 1004 */
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), 0);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 3);
    ASSERT_EQ(g_order[0], 1);
    ASSERT_EQ(g_order[1], 2);
    ASSERT_EQ(g_order[2], 3);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), 1);
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 0);
    ASSERT_EQ(step_to(1004), 1);
    ASSERT_EQ(d.fired_at, 1004);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), -1);
    sched_wheel_deinit(&g_wheel);
}

TEST(wheel_timeout_ms)
{
    struct probe a, b, far;

    setup(1000, NSLOTS);
    probe_init(&a, 1);
    probe_init(&b, 2);
    probe_init(&far, 3);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1000), -1);
    sched_wheel_add(&g_wheel, &a.timer, 1100);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1000), 100);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1002), 98);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1100), 0);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 5000), 0);
    sched_wheel_add(&g_wheel, &b.timer, 1050 + 1); /* rounded up to 1052 */
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1000), 52);
    sched_wheel_del(&g_wheel, &b.timer);
    sched_wheel_del(&g_wheel, &a.timer);
    /* Ten revolutions away in the current slot: not "due now" (no busy
     * loop), and never later than the real deadline. */
    sched_wheel_add(&g_wheel, &far.timer, 1000 + 10 * NSLOTS * TICK);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1000), NSLOTS * TICK);
    ASSERT_EQ(sched_wheel_run(&g_wheel, 1001), 0);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, 1001), NSLOTS * TICK - 1);
    sched_wheel_deinit(&g_wheel);
}

/* timeout_ms drives a simulated loop: jumping straight to each reported
 * deadline fires every timer exactly at its rounded-up deadline. */
TEST(wheel_timeout_drives_loop)
{
    static const uint64_t deadlines[] = {5, 6, 17, 200, 16385, 70000, 70001, 300000};
    struct probe p[LP_ARRAY_SIZE(deadlines)];
    int64_t to;
    size_t i, fired = 0, spins = 0;

    setup(0, NSLOTS);
    for (i = 0; i < LP_ARRAY_SIZE(deadlines); i++) {
        probe_init(&p[i], (int)i);
        sched_wheel_add(&g_wheel, &p[i].timer, deadlines[i]);
    }
    while ((to = sched_wheel_timeout_ms(&g_wheel, g_now)) >= 0) {
        g_now += (uint64_t)to;
        fired += sched_wheel_run(&g_wheel, g_now);
        spins++;
        ASSERT_LE(spins, 1000);
    }
    ASSERT_EQ(fired, LP_ARRAY_SIZE(deadlines));
    for (i = 0; i < LP_ARRAY_SIZE(deadlines); i++)
        ASSERT_EQ(p[i].fired_at, (deadlines[i] + TICK - 1) / TICK * TICK);
    sched_wheel_deinit(&g_wheel);
}

/* A jump of many revolutions processes each slot once and fires everything
 * due; timers beyond the jump stay pending. */
TEST(wheel_big_time_jump)
{
    struct probe p[100], late;
    uint64_t jump = 1000000000000ull;
    int i;

    setup(7, NSLOTS);
    for (i = 0; i < 100; i++) {
        probe_init(&p[i], i);
        sched_wheel_add(&g_wheel, &p[i].timer, 7 + (uint64_t)i * 997);
    }
    probe_init(&late, 100);
    sched_wheel_add(&g_wheel, &late.timer, jump + 10);
    g_now = jump;
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), 100);
    ASSERT_EQ(g_wheel.cur_tick, jump / TICK);
    ASSERT_EQ(g_wheel.count, 1);
    ASSERT_EQ(sched_wheel_timeout_ms(&g_wheel, g_now), 12);
    ASSERT_EQ(step_to(jump + 12), 1);
    ASSERT_EQ(late.fired_at, jump + 12);
    sched_wheel_deinit(&g_wheel);
}

/* deinit forgets pending timers: they are idle afterwards. */
TEST(wheel_deinit_unlinks)
{
    struct probe a, b;

    setup(0, 16);
    probe_init(&a, 1);
    probe_init(&b, 2);
    sched_wheel_add(&g_wheel, &a.timer, 10);
    sched_wheel_add(&g_wheel, &b.timer, 10000);
    sched_wheel_deinit(&g_wheel);
    ASSERT_TRUE(!sched_timer_is_pending(&a.timer));
    ASSERT_TRUE(!sched_timer_is_pending(&b.timer));
}

/* Randomised check against a reference model. Each timer records its
 * deadline and the number of runs completed when it was armed; when it
 * fires in run r it must be due (expires <= now) and must not have been
 * due by tick in run r - 1 (not late), unless it was armed after that run.
 * Callbacks cancel and re-arm random timers. */
#define RND_N 100000

struct rnd_timer {
    struct sched_timer timer; /* armed on g_wheel */
    bool pending;             /* the model's view */
    uint64_t armed_runs;      /* runs completed when last armed */
};

static struct rnd_timer *g_rnd;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t g_runs, g_prev_now, g_model_count, g_fired, g_total_fired;
static bool g_rnd_quiet; /* callbacks stop poking and re-arming */

static uint64_t rnd(uint64_t n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng % n;
}

static uint64_t rnd_deadline(void)
{
    switch (rnd(4)) {
    case 0:
        return g_now - rnd(g_now < 50 ? g_now + 1 : 50); /* past or now */
    case 1:
        return g_now + rnd(100);
    case 2:
        return g_now + rnd(NSLOTS * TICK);
    default:
        return g_now + rnd(5 * NSLOTS * TICK); /* several rounds */
    }
}

static void rnd_arm(struct rnd_timer *r)
{
    if (!r->pending)
        g_model_count++;
    r->pending = true;
    r->armed_runs = g_runs;
    sched_wheel_add(&g_wheel, &r->timer, rnd_deadline());
}

static void rnd_cancel(struct rnd_timer *r)
{
    if (r->pending)
        g_model_count--;
    r->pending = false;
    sched_wheel_del(&g_wheel, &r->timer);
}

static void rnd_poke(void)
{
    struct rnd_timer *r = &g_rnd[rnd(RND_N)];

    if (rnd(2))
        rnd_cancel(r);
    else
        rnd_arm(r);
}

static void rnd_fire(struct sched_timer *t)
{
    struct rnd_timer *r = LP_CONTAINER_OF(t, struct rnd_timer, timer);
    uint64_t due_at = (t->expires + TICK - 1) / TICK * TICK;

    ASSERT_TRUE(r->pending);
    ASSERT_LE(due_at, g_now);
    if (r->armed_runs + 1 < g_runs && g_prev_now >= due_at)
        TEST_FAIL("timer %zu late: due %" PRIu64 ", previous run at %" PRIu64, (size_t)(r - g_rnd),
                  due_at, g_prev_now);
    r->pending = false;
    g_model_count--;
    g_fired++;
    g_total_fired++;
    if (g_rnd_quiet)
        return;
    if (rnd(8) == 0)
        rnd_poke();
    if (rnd(8) == 0)
        rnd_arm(r);
}

static void rnd_run(void)
{
    int64_t to;

    g_runs++;
    g_fired = 0;
    ASSERT_EQ(sched_wheel_run(&g_wheel, g_now), g_fired);
    g_prev_now = g_now;
    ASSERT_EQ(g_wheel.count, g_model_count);
    to = sched_wheel_timeout_ms(&g_wheel, g_now);
    ASSERT_EQ(to < 0, g_model_count == 0);
    if (to == 0) {
        /* Only a callback's past deadline can be due right after a run. */
        g_runs++;
        ASSERT_TRUE(sched_wheel_run(&g_wheel, g_now) > 0);
        ASSERT_EQ(g_wheel.count, g_model_count);
    }
}

/* timeout_ms is never later than the earliest rounded-up deadline. */
static void rnd_check_timeout(void)
{
    uint64_t min = UINT64_MAX, due_at;
    int64_t to = sched_wheel_timeout_ms(&g_wheel, g_now);
    size_t i;

    for (i = 0; i < RND_N; i++) {
        if (!g_rnd[i].pending)
            continue;
        due_at = (g_rnd[i].timer.expires + TICK - 1) / TICK * TICK;
        min = LP_MIN(min, due_at);
    }
    if (min == UINT64_MAX)
        return;
    ASSERT_TRUE(to >= 0);
    ASSERT_LE(g_now + (uint64_t)to, LP_MAX(min, g_now));
}

static void rnd_advance(void)
{
    switch (rnd(16)) {
    case 0:
        g_now += rnd(3 * NSLOTS * TICK); /* may jump whole revolutions */
        break;
    case 1:
        break;
    default:
        g_now += rnd(40);
        break;
    }
}

TEST(wheel_random_vs_model)
{
    size_t i, step;

    g_rnd = calloc(RND_N, sizeof(*g_rnd));
    ASSERT_NOTNULL(g_rnd);
    setup(123456, NSLOTS);
    for (i = 0; i < RND_N; i++) {
        sched_timer_init(&g_rnd[i].timer, rnd_fire);
        rnd_arm(&g_rnd[i]);
    }
    for (step = 0; step < 4000; step++) {
        for (i = 0; i < 50; i++)
            rnd_poke();
        rnd_advance();
        rnd_run();
        if (step % 100 == 0)
            rnd_check_timeout();
    }
    g_rnd_quiet = true;
    g_now += 10 * NSLOTS * TICK;
    rnd_run();
    ASSERT_EQ(g_model_count, 0);
    ASSERT_EQ(g_wheel.count, 0);
    fprintf(stderr, "%" PRIu64 " runs, %" PRIu64 " fired\n", g_runs, g_total_fired);
    sched_wheel_deinit(&g_wheel);
    free(g_rnd);
}

/* sched_wheel_timeout_ms() remembers the slot it found (empty_below): with
 * a few timers within one revolution it must stay exact while timers are
 * added sooner than that slot, cancelled, and the clock moves, checked
 * after every single change. */
static uint64_t exact_timeout(struct probe *p, size_t n)
{
    uint64_t min = UINT64_MAX, due_at;
    size_t i;

    for (i = 0; i < n; i++) {
        if (!sched_timer_is_pending(&p[i].timer))
            continue;
        due_at = (p[i].timer.expires + TICK - 1) / TICK * TICK;
        min = LP_MIN(min, due_at);
    }
    return min == UINT64_MAX ? UINT64_MAX : min > g_now ? min - g_now : 0;
}

TEST(wheel_timeout_follows_changes)
{
    struct probe p[8];
    size_t i, step;
    int64_t to;

    setup(5000, NSLOTS);
    for (i = 0; i < LP_ARRAY_SIZE(p); i++)
        probe_init(&p[i], (int)i);
    for (step = 0; step < 20000; step++) {
        struct probe *q = &p[rnd(LP_ARRAY_SIZE(p))];

        if (rnd(3) == 0)
            sched_wheel_del(&g_wheel, &q->timer);
        else
            sched_wheel_add(&g_wheel, &q->timer, g_now + 1 + rnd(NSLOTS * TICK / 2));
        to = sched_wheel_timeout_ms(&g_wheel, g_now);
        ASSERT_EQ(to, exact_timeout(p, LP_ARRAY_SIZE(p)) == UINT64_MAX
                          ? -1
                          : (int64_t)exact_timeout(p, LP_ARRAY_SIZE(p)));
        if (rnd(4) == 0) {
            g_now += rnd(to > 0 ? (uint64_t)to + 1 : 60);
            sched_wheel_run(&g_wheel, g_now);
        }
    }
    sched_wheel_deinit(&g_wheel);
}

/* Lateness: a timer run 300 ms after its deadline is late (over late_ms);
 * one armed already in the past is due at once, not late; within late_ms
 * is not counted, but the latest lateness is kept. */
TEST(wheel_counts_late_timers)
{
    struct probe a, b, c;

    setup(1000, NSLOTS);
    g_wheel.late_ms = 100;
    probe_init(&a, 1);
    probe_init(&b, 2);
    probe_init(&c, 3);
    sched_wheel_add(&g_wheel, &a.timer, 1100);
    g_now = 1400; /* the loop did not run for 400 ms */
    sched_wheel_run(&g_wheel, g_now);
    ASSERT_EQ(a.fired, 1);
    ASSERT_EQ(g_wheel.late, 1u);
    ASSERT_EQ(g_wheel.late_max_ms, 300u);
    sched_wheel_add(&g_wheel, &b.timer, 500); /* in the past: due now */
    g_now = 1404;
    sched_wheel_run(&g_wheel, g_now);
    ASSERT_EQ(b.fired, 1);
    ASSERT_EQ(g_wheel.late, 1u);
    sched_wheel_add(&g_wheel, &c.timer, 1420);
    g_now = 1480; /* 60 ms late: under late_ms */
    sched_wheel_run(&g_wheel, g_now);
    ASSERT_EQ(c.fired, 1);
    ASSERT_EQ(g_wheel.late, 1u);
    ASSERT_EQ(g_wheel.late_max_ms, 300u);
    g_wheel.late_ms = 0; /* off: nothing counted */
    sched_wheel_add(&g_wheel, &a.timer, 1500);
    g_now = 3000;
    sched_wheel_run(&g_wheel, g_now);
    ASSERT_EQ(g_wheel.late, 1u);
    ASSERT_EQ(g_wheel.late_max_ms, 1500u);
    sched_wheel_deinit(&g_wheel);
}

TEST_MAIN(TEST_CASE(wheel_init_rejects_bad_args), TEST_CASE(wheel_fires_in_order),
          TEST_CASE(wheel_same_slot_is_fifo), TEST_CASE(wheel_never_early), TEST_CASE(wheel_rounds),
          TEST_CASE(wheel_cancel), TEST_CASE(wheel_cancel_from_callback),
          TEST_CASE(wheel_rearm_from_callback), TEST_CASE(wheel_add_rearms_pending),
          TEST_CASE(wheel_add_in_past), TEST_CASE(wheel_timeout_ms),
          TEST_CASE(wheel_timeout_drives_loop), TEST_CASE(wheel_big_time_jump),
          TEST_CASE(wheel_deinit_unlinks), TEST_CASE(wheel_random_vs_model),
          TEST_CASE(wheel_timeout_follows_changes), TEST_CASE(wheel_counts_late_timers))
