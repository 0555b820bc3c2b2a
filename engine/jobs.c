/* Retried upstream jobs; see jobs.h.
 *
 * States: IDLE --submit--> sent at once (INFLIGHT) or queued (DUE);
 * DUE --timer or kick, ready--> INFLIGHT; DUE --until passed, or queue
 * full, or shutdown--> IDLE (dropped); INFLIGHT --reply--> IDLE (done);
 * INFLIGHT --reply lost--> DUE (idempotent) or IDLE (dropped, UNKNOWN).
 * One timer serves the queue: while jobs are DUE it fires after
 * backoff_ms (20 ms, doubling to 1 s while Redis does not take them; back
 * to 20 ms once a job got a reply). Callbacks (done, dropped) run with
 * the job IDLE and unlinked, so they may free or resubmit it. */
#include "engine/jobs.h"

#include <errno.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "pool/pool.h"
#include "sched/loop.h"

#define JOBS_BACKOFF_MAX 1000u /* ms */

void px_job_init(struct px_job *j, struct lk_engine *eng, const struct px_job_ops *ops)
{
    list_init(&j->node);
    j->ops = ops;
    j->eng = eng;
    j->state = PX_JOB_IDLE;
    j->until = PX_JOB_NO_END;
    j->failures = 0;
}

static void jobs_arm(struct lk_engine *eng)
{
    struct px_jobs *q = &eng->jobs;

    if (q->ndue > 0 && !sched_timer_is_pending(&q->timer))
        sched_loop_timer_in(eng->loop, &q->timer, q->backoff_ms);
}

static void job_unlink(struct px_job *j)
{
    list_del_init(&j->node);
    j->eng->jobs.ndue--;
    j->state = PX_JOB_IDLE;
}

static void job_drop(struct px_job *j, enum px_job_drop why)
{
    static const char *const whys[] = {"its lease ended first", "too many pending",
                                       "its outcome is unknown", "the proxy is stopping"};
    struct lk_engine *eng = j->eng;
    uint64_t quiet;

    eng->jobs.dropped[j->ops->group]++;
    if (why == PX_JOB_UNKNOWN)
        eng->jobs.unknown_dropped[j->ops->group]++;
    if (px_ratelog_allow(&eng->drop_log, sched_loop_now_ms(eng->loop), &quiet))
        log_msg(LOG_LVL_WARN, "%s given up: %s (%llu similar not logged)", j->ops->what, whys[why],
                (unsigned long long)quiet);
    j->ops->dropped(j, why);
}

static void job_enqueue(struct px_job *j)
{
    struct px_jobs *q = &j->eng->jobs;

    if (q->ndue >= PX_JOBS_MAX)
        return job_drop(j, PX_JOB_FULL);
    j->state = PX_JOB_DUE;
    list_add_tail(&q->due, &j->node);
    q->ndue++;
    jobs_arm(j->eng);
}

static void job_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct px_job *j = arg;
    struct px_jobs *q = &j->eng->jobs;

    q->ninflight--;
    j->state = PX_JOB_IDLE;
    if (err == 0) {
        q->backoff_ms = PX_JOB_BACKOFF;
        return j->ops->done(j, r);
    }
    j->failures++;
    if (!j->ops->idempotent)
        return job_drop(j, PX_JOB_UNKNOWN);
    job_enqueue(j);
}

/* Sends j (not DUE); returns 0 or the send error (j unchanged). */
static int job_send(struct px_job *j)
{
    int rc = j->ops->send(j, job_on_reply, j);

    if (rc < 0) {
        j->failures++;
        return rc;
    }
    if (j->failures > 0)
        j->eng->jobs.retried[j->ops->group]++;
    j->state = PX_JOB_INFLIGHT;
    j->eng->jobs.ninflight++;
    return 0;
}

static bool job_ready(const struct px_job *j)
{
    return !j->ops->ready || j->ops->ready(j);
}

void px_job_submit(struct px_job *j, uint64_t until)
{
    LP_BUG_ON(j->state != PX_JOB_IDLE);
    j->until = until;
    j->failures = 0;
    if (job_ready(j) && job_send(j) == 0)
        return;
    job_enqueue(j);
}

void px_job_kick(struct px_job *j)
{
    if (j->state != PX_JOB_DUE || !job_ready(j))
        return;
    job_unlink(j);
    if (job_send(j) < 0)
        job_enqueue(j);
}

void px_job_soon(struct px_job *j)
{
    struct px_jobs *q = &j->eng->jobs;

    if (j->state != PX_JOB_DUE)
        return;
    sched_loop_timer_del(j->eng->loop, &q->timer);
    sched_loop_timer_in(j->eng->loop, &q->timer, 0);
}

void px_jobs_retry_now(struct lk_engine *eng)
{
    struct px_jobs *q = &eng->jobs;

    q->backoff_ms = PX_JOB_BACKOFF;
    if (q->ndue == 0)
        return;
    sched_loop_timer_del(eng->loop, &q->timer);
    sched_loop_timer_in(eng->loop, &q->timer, 0);
}

void px_job_cancel(struct px_job *j)
{
    if (j->state == PX_JOB_DUE)
        job_unlink(j);
}

/* Sends what is ready, drops what expired; stops at the first refused
 * send (Redis is not taking requests: the rest would fail as well),
 * except with a Redis Cluster, where a refusal (-ENOTCONN: that slot has
 * no master just now, a failover is under way) says nothing of the other
 * slots' jobs: they are sent, and the refused ones wait for the next
 * retry with the longer back-off. */
static void jobs_on_timer(struct sched_timer *t)
{
    struct lk_engine *eng = LP_CONTAINER_OF(t, struct lk_engine, jobs.timer);
    struct px_jobs *q = &eng->jobs;
    uint64_t now = sched_loop_now_ms(eng->loop);
    struct list *n = q->due.next, *last = q->due.prev; /* refused jobs go behind last */
    bool refused = false, cluster = pool_is_cluster(eng->pool), done = n == &q->due;

    while (!done && (!refused || cluster)) {
        struct px_job *j = LP_CONTAINER_OF(n, struct px_job, node);

        done = n == last;
        n = n->next;
        if (j->until != PX_JOB_NO_END && now >= j->until) {
            job_unlink(j);
            job_drop(j, PX_JOB_EXPIRED);
        } else if (job_ready(j)) {
            job_unlink(j);
            if (job_send(j) < 0) {
                job_enqueue(j);
                refused = true;
            }
        }
    }
    if (refused)
        q->backoff_ms = LP_MIN(q->backoff_ms * 2, JOBS_BACKOFF_MAX);
    jobs_arm(eng);
}

int px_jobs_init(struct lk_engine *eng)
{
    struct px_jobs *q = &eng->jobs;

    list_init(&q->due);
    q->ndue = 0;
    q->ninflight = 0;
    q->backoff_ms = PX_JOB_BACKOFF;
    sched_timer_init(&q->timer, jobs_on_timer);
    return 0;
}

void px_jobs_deinit(struct lk_engine *eng)
{
    struct px_jobs *q = &eng->jobs;
    struct list *n;

    sched_loop_timer_del(eng->loop, &q->timer);
    while ((n = list_first(&q->due)) != NULL) {
        struct px_job *j = LP_CONTAINER_OF(n, struct px_job, node);

        job_unlink(j);
        job_drop(j, PX_JOB_STOPPED);
    }
}

bool px_jobs_busy(const struct lk_engine *eng)
{
    return eng->jobs.ndue > 0 || eng->jobs.ninflight > 0;
}
