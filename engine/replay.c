/* Releases re-applied after a change of master; see replay.h. */
#include "engine/replay.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "pool/pool.h"
#include "sched/loop.h"

/* One confirmed release, until its lease would have ended. */
struct px_replay {
    struct list node;                /* in eng->replays.list while remembered */
    struct px_job job;               /* the re-send after a change of master */
    const struct px_hold_kind *kind; /* borrowed: static */
    uint64_t until_ms;               /* monotonic ms no ghost of it outlives */
    size_t nlen;                     /* name length */
    size_t olen;                     /* owner length */
    char *owner;                     /* borrowed: points into key */
    char key[];                      /* owned: name NUL owner NUL */
};

static const struct px_job_ops replay_ops;

static bool replay_wanted(const struct lk_engine *eng)
{
    return eng->cfg.slots_move;
}

static void replay_free(struct lk_engine *eng, struct px_replay *r)
{
    if (list_is_linked(&r->node)) {
        list_del_init(&r->node);
        eng->replays.n--;
    }
    free(r);
}

/* Drops the oldest records whose lease is over (or, past the bound, the
 * oldest that is not being re-sent). */
static void replay_prune(struct lk_engine *eng, uint64_t now)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &eng->replays.list)
    {
        struct px_replay *r = LP_CONTAINER_OF(n, struct px_replay, node);
        bool over = r->until_ms <= now;

        if (!over && eng->replays.n < PX_REPLAY_MAX)
            break;
        if (r->job.state != PX_JOB_IDLE)
            continue; /* freed by its job's end */
        if (!over)
            eng->replays.dropped++;
        replay_free(eng, r);
    }
}

/* Marks ev's slots as moved for --upstream-timeout (a later change adds
 * its slots to a window still open, and extends it). */
static void replay_mark_moved(struct lk_engine *eng, const struct pool_topology_event *ev,
                              uint64_t now)
{
    struct px_replays *rs = &eng->replays;
    size_t i;

    if (rs->moved_until <= now)
        memset(rs->moved, 0, sizeof(rs->moved));
    for (i = 0; i < sizeof(rs->moved); i++)
        rs->moved[i] |= ev->slots[i];
    rs->moved_until = now + eng->cfg.upstream_timeout_ms;
}

/* A release confirmed in a moved slot shortly after the change may have
 * been applied by the old master only. */
static bool replay_after_move(const struct lk_engine *eng, const struct px_replay *r, uint64_t now)
{
    return now < eng->replays.moved_until &&
           pool_slot_bitmap_has(eng->replays.moved, pool_slot(r->key, r->nlen));
}

void px_replay_note(struct lk_engine *eng, const struct px_hold *h)
{
    uint64_t now = sched_loop_now_ms(eng->loop);
    uint64_t until = h->expires_ms + eng->cfg.upstream_timeout_ms;
    struct px_replay *r;

    if (!replay_wanted(eng) || until <= now)
        return;
    replay_prune(eng, now);
    r = malloc(sizeof(*r) + h->nlen + h->olen + 2);
    if (!r)
        return; /* best effort: the lease still ends */
    memset(r, 0, sizeof(*r));
    r->kind = h->kind;
    r->until_ms = until;
    r->nlen = h->nlen;
    r->olen = h->olen;
    memcpy(r->key, h->key, h->nlen + 1);
    r->owner = r->key + h->nlen + 1;
    memcpy(r->owner, h->owner, h->olen + 1);
    px_job_init(&r->job, eng, &replay_ops);
    list_add_tail(&eng->replays.list, &r->node);
    eng->replays.n++;
    if (replay_after_move(eng, r, now)) {
        px_job_submit(&r->job, r->until_ms);
        px_job_soon(&r->job); /* h is still there: ready once it is gone */
    }
}

void px_replay_topology(struct lk_engine *eng, const struct pool_topology_event *ev)
{
    uint64_t now = sched_loop_now_ms(eng->loop);
    unsigned queued = 0;
    struct list *n, *t;

    replay_mark_moved(eng, ev, now);
    replay_prune(eng, now);
    list_for_each_safe(n, t, &eng->replays.list)
    {
        struct px_replay *r = LP_CONTAINER_OF(n, struct px_replay, node);

        if (r->job.state != PX_JOB_IDLE || r->until_ms <= now ||
            !pool_slot_bitmap_has(ev->slots, pool_slot(r->key, r->nlen)))
            continue;
        queued++;
        px_job_submit(&r->job, r->until_ms);
    }
    if (queued > 0)
        log_msg(LOG_LVL_INFO,
                "upstream topology changed: re-applying %u recent release(s) on the new master(s)",
                queued);
}

/* Not while the pair has a live hold again: a later request about it must
 * not be overtaken (its hold's own checks see to a merged ghost). */
static bool replay_ready(const struct px_job *j)
{
    const struct px_replay *r = LP_CONTAINER_OF(j, struct px_replay, job);

    return px_hold_find(j->eng, r->key, r->nlen, r->owner, r->olen) == NULL;
}

static int replay_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct px_replay *r = LP_CONTAINER_OF(j, struct px_replay, job);
    const struct px_settle s = {.keep = 0};

    j->eng->replays.sent++;
    return r->kind->settle(j->eng, r->key, r->nlen, r->owner, r->olen, &s, cb, arg);
}

static void replay_done(struct px_job *j, const struct pool_reply *rep)
{
    struct px_replay *r = LP_CONTAINER_OF(j, struct px_replay, job);
    struct lk_engine *eng = j->eng;
    uint64_t quiet;

    if (rep->type == POOL_REPLY_INTEGER && rep->integer > 0) {
        eng->replays.found++;
        if (px_ratelog_allow(&eng->replay_log, sched_loop_now_ms(eng->loop), &quiet))
            log_msg(LOG_LVL_WARN,
                    "removed a %s of '%.*s' by %.*s that the new master still had after its "
                    "release (a release the failover lost) (%llu similar not logged)",
                    r->kind->name, (int)LP_MIN(r->nlen, 200u), r->key, (int)r->olen, r->owner,
                    (unsigned long long)quiet);
    }
    replay_free(eng, r);
}

static void replay_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    replay_free(j->eng, LP_CONTAINER_OF(j, struct px_replay, job));
}

static const struct px_job_ops replay_ops = {
    .what = "re-applied release after a change of master",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .ready = replay_ready,
    .send = replay_send,
    .done = replay_done,
    .dropped = replay_dropped,
};

void px_replay_init(struct lk_engine *eng)
{
    list_init(&eng->replays.list);
}

/* After px_jobs_deinit(), which dropped (and so freed) the DUE ones: a
 * record whose job is in flight is freed by its reply's end. */
void px_replay_deinit(struct lk_engine *eng)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &eng->replays.list)
    {
        struct px_replay *r = LP_CONTAINER_OF(n, struct px_replay, node);

        if (r->job.state == PX_JOB_IDLE)
            replay_free(eng, r);
    }
}
