/* Unit tests for the FIFO wait queue and the async semaphore
 * (sched/waitq.h), including callbacks that re-enter them. */
#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "sched/waitq.h"

enum act {
    ACT_NONE = 0,    /* just record the wake */
    ACT_REQUEUE = 1, /* push itself on g_q again */
    ACT_CANCEL = 2,  /* cancel other on g_q */
    ACT_WAKE_ONE = 3 /* wake one more waiter of g_q */
};

enum sem_act {
    SEM_NONE = 0,    /* just record the wake */
    SEM_REWAIT = 1,  /* wait on g_sem again */
    SEM_RELEASE = 2, /* release one permit */
    SEM_CANCEL = 3   /* cancel other on g_sem */
};

/* A waiter that records its wakes and acts on g_q or g_sem. */
struct probe {
    struct sched_waiter waiter; /* queued on g_q or g_sem */
    int id;                     /* identity for wake-order checks */
    int woken;                  /* times the callback ran */
    int act;                    /* enum act or enum sem_act */
    int act_left;               /* times the action still runs */
    struct probe *other;        /* borrowed: target of ACT_CANCEL / SEM_CANCEL */
};

static struct sched_waitq g_q;
static struct sched_sem g_sem;
static int g_order[64];
static size_t g_norder;

static void record(struct probe *p)
{
    ASSERT_TRUE(!sched_waiter_is_queued(&p->waiter));
    p->woken++;
    if (g_norder < LP_ARRAY_SIZE(g_order))
        g_order[g_norder++] = p->id;
}

static void q_wake(struct sched_waiter *w)
{
    struct probe *p = LP_CONTAINER_OF(w, struct probe, waiter);

    record(p);
    if (p->act_left <= 0)
        return;
    p->act_left--;
    if (p->act == ACT_REQUEUE)
        sched_waitq_push(&g_q, &p->waiter);
    else if (p->act == ACT_CANCEL)
        sched_waitq_cancel(&g_q, &p->other->waiter);
    else if (p->act == ACT_WAKE_ONE)
        sched_waitq_wake_one(&g_q);
}

static void sem_wake(struct sched_waiter *w)
{
    struct probe *p = LP_CONTAINER_OF(w, struct probe, waiter);

    record(p);
    if (p->act_left <= 0)
        return;
    p->act_left--;
    if (p->act == SEM_REWAIT)
        ASSERT_EQ(sched_sem_wait(&g_sem, &p->waiter), 0);
    else if (p->act == SEM_RELEASE)
        sched_sem_release(&g_sem, 1);
    else if (p->act == SEM_CANCEL)
        sched_sem_cancel(&g_sem, &p->other->waiter);
}

static void probes_init(struct probe *p, int n, sched_wake_fn *cb)
{
    int i;

    g_norder = 0;
    for (i = 0; i < n; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        sched_waiter_init(&p[i].waiter, cb);
        p[i].id = i;
    }
}

static void expect_order(const int *want, size_t n)
{
    size_t i;

    ASSERT_EQ(g_norder, n);
    for (i = 0; i < n; i++)
        ASSERT_EQ(g_order[i], want[i]);
}

TEST(waitq_fifo_wake_order)
{
    static const int want[] = {0, 1, 2, 3, 4};
    struct probe p[5];
    int i;

    probes_init(p, 5, q_wake);
    sched_waitq_init(&g_q);
    ASSERT_EQ(sched_waitq_wake_one(&g_q), 0);
    for (i = 0; i < 5; i++)
        sched_waitq_push(&g_q, &p[i].waiter);
    ASSERT_EQ(g_q.len, 5);
    for (i = 0; i < 5; i++)
        ASSERT_EQ(sched_waitq_wake_one(&g_q), 1);
    ASSERT_EQ(sched_waitq_wake_one(&g_q), 0);
    ASSERT_EQ(g_q.len, 0);
    expect_order(want, 5);
}

/* Waiters that queue again from their callback wait for the next wake_all. */
TEST(waitq_wake_all_only_current)
{
    static const int want[] = {0, 1, 2, 3, 0, 1, 2};
    struct probe p[4];
    int i;

    probes_init(p, 4, q_wake);
    sched_waitq_init(&g_q);
    for (i = 0; i < 4; i++) {
        p[i].act = i < 3 ? ACT_REQUEUE : ACT_NONE;
        p[i].act_left = 1;
        sched_waitq_push(&g_q, &p[i].waiter);
    }
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 4);
    ASSERT_EQ(g_q.len, 3);
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 3);
    ASSERT_EQ(g_q.len, 0);
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 0);
    expect_order(want, 7);
}

TEST(waitq_cancel)
{
    static const int want[] = {0, 2};
    struct probe p[3];
    int i;

    probes_init(p, 3, q_wake);
    sched_waitq_init(&g_q);
    for (i = 0; i < 3; i++)
        sched_waitq_push(&g_q, &p[i].waiter);
    sched_waitq_cancel(&g_q, &p[1].waiter);
    ASSERT_TRUE(!sched_waiter_is_queued(&p[1].waiter));
    ASSERT_EQ(g_q.len, 2);
    sched_waitq_cancel(&g_q, &p[1].waiter); /* idle: no-op */
    ASSERT_EQ(g_q.len, 2);
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 2);
    expect_order(want, 2);
    ASSERT_EQ(p[1].woken, 0);
}

/* During wake_all, a callback cancels a later waiter of the same batch. */
TEST(waitq_cancel_within_wake_all)
{
    static const int want[] = {0, 2};
    struct probe p[3];
    int i;

    probes_init(p, 3, q_wake);
    sched_waitq_init(&g_q);
    p[0].act = ACT_CANCEL;
    p[0].act_left = 1;
    p[0].other = &p[1];
    for (i = 0; i < 3; i++)
        sched_waitq_push(&g_q, &p[i].waiter);
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 2);
    ASSERT_EQ(g_q.len, 0);
    ASSERT_TRUE(!sched_waiter_is_queued(&p[1].waiter));
    expect_order(want, 2);
}

/* During wake_all, wake_one from a callback wakes a waiter queued after the
 * wake_all started (every older one is in the batch being woken). */
TEST(waitq_wake_one_within_wake_all)
{
    static const int want[] = {0, 1, 2, 1};
    struct probe p[3];
    int i;

    probes_init(p, 3, q_wake);
    sched_waitq_init(&g_q);
    p[1].act = ACT_REQUEUE;
    p[1].act_left = 1;
    p[2].act = ACT_WAKE_ONE;
    p[2].act_left = 1;
    for (i = 0; i < 3; i++)
        sched_waitq_push(&g_q, &p[i].waiter);
    ASSERT_EQ(sched_waitq_wake_all(&g_q), 3);
    ASSERT_EQ(g_q.len, 0);
    expect_order(want, 4);
}

TEST(sem_permits_and_cap)
{
    struct probe p[3];

    probes_init(p, 3, sem_wake);
    sched_sem_init(&g_sem, 5, 2); /* initial permits are capped too */
    ASSERT_EQ(g_sem.permits, 2);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[0].waiter), 1);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[1].waiter), 1);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[2].waiter), 0);
    ASSERT_EQ(p[0].woken + p[1].woken + p[2].woken, 0);
    ASSERT_EQ(g_sem.permits, 0);
    sched_sem_release(&g_sem, 1);
    ASSERT_EQ(p[2].woken, 1);
    ASSERT_EQ(g_sem.permits, 0);
    sched_sem_release(&g_sem, 1);
    ASSERT_EQ(g_sem.permits, 1);
    sched_sem_release(&g_sem, 10);
    ASSERT_EQ(g_sem.permits, 2);
    sched_sem_release_all(&g_sem);
    ASSERT_EQ(g_sem.permits, 0);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[0].waiter), 0);
    sched_sem_cancel(&g_sem, &p[0].waiter);
    ASSERT_EQ(g_sem.q.len, 0);
}

TEST(sem_unbounded_cap_saturates)
{
    sched_sem_init(&g_sem, SIZE_MAX - 1, SIZE_MAX);
    sched_sem_release(&g_sem, 10);
    ASSERT_TRUE(g_sem.permits == SIZE_MAX);
    sched_sem_init(&g_sem, 0, SIZE_MAX);
    sched_sem_release(&g_sem, 3);
    ASSERT_EQ(g_sem.permits, 3);
}

/* release(n) wakes at most n waiters, oldest first, and keeps the rest. */
TEST(sem_release_fifo)
{
    static const int want[] = {0, 1, 2, 3};
    struct probe p[4];
    int i;

    probes_init(p, 4, sem_wake);
    sched_sem_init(&g_sem, 0, 100);
    for (i = 0; i < 4; i++)
        ASSERT_EQ(sched_sem_wait(&g_sem, &p[i].waiter), 0);
    sched_sem_release(&g_sem, 2);
    ASSERT_EQ(g_norder, 2);
    ASSERT_EQ(g_sem.q.len, 2);
    ASSERT_EQ(g_sem.permits, 0);
    sched_sem_release(&g_sem, 3);
    ASSERT_EQ(g_sem.permits, 1);
    ASSERT_EQ(g_sem.q.len, 0);
    expect_order(want, 4);
}

/* Callbacks wait again (behind the others), release more, and cancel. */
TEST(sem_reentrant_callbacks)
{
    static const int want[] = {0, 1, 3, 0};
    struct probe p[4];

    probes_init(p, 4, sem_wake);
    sched_sem_init(&g_sem, 0, 100);
    p[0].act = SEM_REWAIT;
    p[0].act_left = 1;
    p[1].act = SEM_CANCEL;
    p[1].act_left = 1;
    p[1].other = &p[2];
    p[3].act = SEM_RELEASE;
    p[3].act_left = 1;
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[0].waiter), 0);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[1].waiter), 0);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[2].waiter), 0);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[3].waiter), 0);
    /* p0 waits again behind p3, p1 cancels p2, the third permit goes to p3
     * (older than p0), whose nested release wakes p0; the fourth permit
     * finds no waiter and is kept. */
    sched_sem_release(&g_sem, 4);
    expect_order(want, 4);
    ASSERT_EQ(p[0].woken, 2);
    ASSERT_EQ(p[2].woken, 0);
    ASSERT_EQ(g_sem.q.len, 0);
    ASSERT_EQ(g_sem.permits, 1);
}

/* release_all wakes only the waiters queued at the call and drops permits;
 * a callback that waits again stays queued. */
TEST(sem_release_all_reentrant)
{
    static const int want[] = {0, 1};
    struct probe p[2];

    probes_init(p, 2, sem_wake);
    sched_sem_init(&g_sem, 0, 10);
    p[0].act = SEM_REWAIT;
    p[0].act_left = 1;
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[0].waiter), 0);
    ASSERT_EQ(sched_sem_wait(&g_sem, &p[1].waiter), 0);
    sched_sem_release_all(&g_sem);
    expect_order(want, 2);
    ASSERT_EQ(g_sem.permits, 0);
    ASSERT_EQ(g_sem.q.len, 1);
    ASSERT_TRUE(sched_waiter_is_queued(&p[0].waiter));
    sched_sem_release(&g_sem, 1);
    ASSERT_EQ(p[0].woken, 2);
}

TEST_MAIN(TEST_CASE(waitq_fifo_wake_order), TEST_CASE(waitq_wake_all_only_current),
          TEST_CASE(waitq_cancel), TEST_CASE(waitq_cancel_within_wake_all),
          TEST_CASE(waitq_wake_one_within_wake_all), TEST_CASE(sem_permits_and_cap),
          TEST_CASE(sem_unbounded_cap_saturates), TEST_CASE(sem_release_fifo),
          TEST_CASE(sem_reentrant_callbacks), TEST_CASE(sem_release_all_reentrant))
