/* The engine's retried jobs alone (engine/jobs.c), over the fixture of
 * tests/support/engine_fixture.h: a job whose reply is lost is sent again
 * (idempotent) or given up (not), one whose time ran out is dropped, one
 * cancelled is never sent; each callback runs exactly once. */
#include <errno.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/jobs.h"
#include "engine/scripts.h"
#include "harness.h"
#include "sched/loop.h"
#include "tests/support/engine_fixture.h"

struct fx_job {
    struct px_job job;
    unsigned sends, done, dropped;
    enum px_job_drop why;
};

static int fxj_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct fx_job *f = LP_CONTAINER_OF(j, struct fx_job, job);
    const char *argv[1] = {"x"};
    size_t lens[1] = {1};

    f->sends++;
    return px_script_eval(j->eng, px_route_hint("x", 1), PX_SCRIPT_INFO, 1, 1, argv, lens, cb, arg);
}

static void fxj_done(struct px_job *j, const struct pool_reply *r)
{
    (void)r;
    ASSERT_EQ(j->state, PX_JOB_IDLE);
    LP_CONTAINER_OF(j, struct fx_job, job)->done++;
}

static void fxj_dropped(struct px_job *j, enum px_job_drop why)
{
    struct fx_job *f = LP_CONTAINER_OF(j, struct fx_job, job);

    ASSERT_EQ(j->state, PX_JOB_IDLE);
    f->dropped++;
    f->why = why;
}

static const struct px_job_ops fxj_ops = {
    .what = "test job",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .send = fxj_send,
    .done = fxj_done,
    .dropped = fxj_dropped,
};

static const struct px_job_ops fxj_once_ops = {
    .what = "test job, not idempotent",
    .group = PX_JOB_ROLLBACK,
    .idempotent = false,
    .send = fxj_send,
    .done = fxj_done,
    .dropped = fxj_dropped,
};

static void fx_fail_all(int err)
{
    for (unsigned k = 0; k < fp_nconns(fx.pool); k++)
        fp_fail(fx.pool, k, err);
}

TEST(job_answered_once)
{
    struct fx_job f = {0};

    fx_start();
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    ASSERT_EQ(f.job.state, PX_JOB_INFLIGHT);
    fx_pump();
    ASSERT_EQ(f.sends, 1u);
    ASSERT_EQ(f.done, 1u);
    ASSERT_EQ(f.dropped, 0u);
    ASSERT_EQ(fx.eng->jobs.retried[PX_JOB_RELEASE], 0u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_stop();
}

TEST(job_retried_after_a_lost_reply)
{
    struct fx_job f = {0};

    fx_start();
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    sched_loop_run_once(fx.loop, 0);
    ASSERT_EQ(f.sends, 1u);
    /* The connection resets before Redis ran it: the reply is lost. */
    fx_fail_all(-ECONNRESET);
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.job.state, PX_JOB_DUE);
    ASSERT_TRUE(px_jobs_busy(fx.eng));
    /* Sent again after the back-off, answered once. */
    fx_advance(PX_JOB_BACKOFF + 20);
    ASSERT_EQ(f.sends, 2u);
    ASSERT_EQ(f.done, 1u);
    ASSERT_EQ(f.dropped, 0u);
    ASSERT_EQ(fx.eng->jobs.retried[PX_JOB_RELEASE], 1u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_advance(1000); /* and never again */
    ASSERT_EQ(f.sends, 2u);
    fx_stop();
}

TEST(job_not_idempotent_dropped_after_a_lost_reply)
{
    struct fx_job f = {0};

    fx_start();
    px_job_init(&f.job, fx.eng, &fxj_once_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    /* Redis ran it, the reply was lost: sending it again could do harm. */
    for (unsigned k = 0; k < fp_nconns(fx.pool); k++)
        while (fp_execute(fx.pool, k))
            ;
    fx_fail_all(-ETIMEDOUT);
    ASSERT_EQ(f.dropped, 1u);
    ASSERT_EQ(f.why, PX_JOB_UNKNOWN);
    ASSERT_EQ(fx.eng->jobs.unknown_dropped[PX_JOB_ROLLBACK], 1u);
    fx_advance(1000);
    ASSERT_EQ(f.sends, 1u);
    ASSERT_EQ(f.done, 0u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_stop();
}

TEST(job_dropped_when_its_time_ran_out)
{
    struct fx_job f = {0};

    fx_start();
    fp_down(fx.pool); /* Redis unreachable: every send refused */
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, fx_now_ms() + 100);
    ASSERT_EQ(f.job.state, PX_JOB_DUE);
    fx_advance(300);
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.dropped, 1u);
    ASSERT_EQ(f.why, PX_JOB_EXPIRED);
    ASSERT_EQ(fx.eng->jobs.dropped[PX_JOB_RELEASE], 1u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fp_up(fx.pool, false);
    fx_advance(1000); /* given up: not sent when Redis is back */
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.dropped, 1u);
    fx_stop();
}

TEST(job_sent_when_redis_is_back)
{
    struct fx_job f = {0};

    fx_start();
    fp_down(fx.pool);
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    fx_advance(200);
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.job.state, PX_JOB_DUE);
    fp_up(fx.pool, false);
    fx_advance(1100); /* the back-off grows to 1 s at most */
    ASSERT_EQ(f.done, 1u);
    ASSERT_EQ(f.dropped, 0u);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fx_stop();
}

TEST(job_cancelled_is_never_sent)
{
    struct fx_job f = {0};

    fx_start();
    fp_down(fx.pool);
    px_job_init(&f.job, fx.eng, &fxj_ops);
    px_job_submit(&f.job, PX_JOB_NO_END);
    ASSERT_EQ(f.job.state, PX_JOB_DUE);
    px_job_cancel(&f.job);
    ASSERT_EQ(f.job.state, PX_JOB_IDLE);
    ASSERT_TRUE(!px_jobs_busy(fx.eng));
    fp_up(fx.pool, false);
    fx_advance(1100);
    /* No callback either way: cancelling is the owner's act. */
    ASSERT_EQ(f.done, 0u);
    ASSERT_EQ(f.dropped, 0u);
    ASSERT_EQ(fx.eng->jobs.dropped[PX_JOB_RELEASE], 0u);
    fx_stop();
}

TEST_MAIN(TEST_CASE(job_answered_once), TEST_CASE(job_retried_after_a_lost_reply),
          TEST_CASE(job_not_idempotent_dropped_after_a_lost_reply),
          TEST_CASE(job_dropped_when_its_time_ran_out), TEST_CASE(job_sent_when_redis_is_back),
          TEST_CASE(job_cancelled_is_never_sent))
