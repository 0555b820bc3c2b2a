/* The engine object, start-up, shut-down and the connection's clean-up
 * for the lock modules; see engine.h. */
#include "engine/engine.h"

#include <limits.h>
#include <stdlib.h>

#include "common/util.h"
#include "engine/fence.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "engine/replay.h"
#include "engine/scripts.h"
#include "engine/sem_reap.h"
#include "engine/wait.h"
#include "engine/waitset.h"
#include "sched/loop.h"

void px_locks_client_init(struct lk_caller *cl, struct lk_engine *eng, uint64_t id)
{
    cl->eng = eng;
    cl->id = id;
    cl->closing = false;
    list_init(&cl->locks.waits);
    list_init(&cl->locks.holds);
    list_init(&cl->locks.shares);
    list_init(&cl->locks.claims);
    list_init(&cl->release_node);
}

/* Release on disconnect, a step a pass. A connection that held a million
 * locks would otherwise release them all in the loop pass that saw it
 * close (seconds, every other client waiting), and send a million settle
 * scripts at once. So its close releases PX_RELEASE_STEP holds; if some
 * remain, the closed client (its memory only: the socket is gone) joins
 * engine->releasing with a reference, and a 0 ms timer releases the next
 * PX_RELEASE_STEP in the next pass, across the clients in turn, until
 * none remain. A step is skipped while PX_RELEASE_INFLIGHT jobs wait for
 * Redis (the settles go out as fast as Redis answers them, and other
 * clients' requests share the pipeline with them). Meanwhile the
 * remaining holds stay HELD as before the close (renewed, found by
 * LOCK.LIST and by the same owner's other connections); shutdown waits
 * for the list to empty (server_drain), and deinit releases what is
 * left at once. */
static void locks_release_step(struct sched_timer *t)
{
    struct lk_engine *eng = LP_CONTAINER_OF(t, struct lk_engine, rel_timer);
    unsigned budget = PX_RELEASE_STEP;
    struct list *n;

    if (eng->jobs.ninflight >= PX_RELEASE_INFLIGHT) {
        sched_loop_timer_in(eng->loop, t, 1);
        return;
    }
    while (budget > 0 && (n = list_first(&eng->releasing)) != NULL) {
        struct lk_caller *cl = LP_CONTAINER_OF(n, struct lk_caller, release_node);

        if (!px_hold_client_gone(cl, &budget))
            break;
        list_del_init(&cl->release_node);
        eng->front.caller_put(cl);
    }
    if (!list_empty(&eng->releasing))
        sched_loop_timer_in(eng->loop, t, 0);
}

bool px_locks_releasing(const struct lk_engine *eng)
{
    return !list_empty(&eng->releasing);
}

void px_locks_client_gone(struct lk_caller *cl)
{
    struct lk_engine *eng = cl->eng;
    unsigned budget = PX_RELEASE_STEP;
    struct list *n;

    px_wait_client_gone(cl);
    if (!px_hold_client_gone(cl, &budget)) {
        LP_BUG_ON(list_is_linked(&cl->release_node));
        eng->front.caller_get(cl);
        list_add_tail(&eng->releasing, &cl->release_node);
        if (!sched_timer_is_pending(&eng->rel_timer))
            sched_loop_timer_in(cl->eng->loop, &eng->rel_timer, 0);
    }
    while ((n = list_first(&cl->locks.claims)) != NULL) {
        struct px_claim *c = LP_CONTAINER_OF(n, struct px_claim, node);

        list_del_init(n);
        c->gone(c, cl);
    }
}

struct lk_engine *px_engine_alloc(void *owner)
{
    struct lk_engine *eng = calloc(1, sizeof(*eng));

    if (!eng)
        return NULL;
    eng->owner = owner;
    list_init(&eng->sem_carries);
    px_scripts_init(eng);
    return eng;
}

void px_engine_free(struct lk_engine *eng)
{
    free(eng);
}

int px_locks_init(struct lk_engine *eng)
{
    int rc = px_waitset_init(eng);

    list_init(&eng->releasing);
    sched_timer_init(&eng->rel_timer, locks_release_step);
    if (rc < 0)
        return rc;
    px_jobs_init(eng);
    px_replay_init(eng);
    rc = px_hold_init(eng);
    if (rc < 0)
        goto err_waitset;
    rc = px_sem_track_init(eng);
    if (rc < 0)
        goto err_hold;
    rc = hmap_init(&eng->psem_held, 64);
    if (rc < 0)
        goto err_track;
    rc = px_sem_reap_init(eng);
    if (rc < 0)
        goto err_psem;
    return 0;
err_psem:
    hmap_deinit(&eng->psem_held);
err_track:
    px_sem_track_deinit(eng);
err_hold:
    px_hold_deinit(eng);
err_waitset:
    px_waitset_deinit(eng);
    return rc;
}

void px_locks_deinit(struct lk_engine *eng)
{
    struct list *n;

    sched_loop_timer_del(eng->loop, &eng->rel_timer);
    while ((n = list_first(&eng->releasing)) != NULL) { /* what the drain left: at once */
        struct lk_caller *cl = LP_CONTAINER_OF(n, struct lk_caller, release_node);
        unsigned budget = UINT_MAX;

        px_hold_client_gone(cl, &budget);
        list_del_init(&cl->release_node);
        eng->front.caller_put(cl);
    }
    px_jobs_deinit(eng); /* what still waits for Redis is given up (logged) */
    px_replay_deinit(eng);
    px_sem_reap_deinit(eng);
    if (eng->psem_held.count == 0) /* else connections still open at exit keep theirs */
        hmap_deinit(&eng->psem_held);
    px_sem_track_deinit(eng);
    px_hold_deinit(eng);
    px_waitset_deinit(eng);
    px_fence_free(eng);
}

bool px_ratelog_allow(struct px_ratelog *rl, uint64_t now_ms, uint64_t *quiet)
{
    if (rl->last_ms != 0 && now_ms < rl->last_ms + 1000) {
        rl->quiet++;
        return false;
    }
    *quiet = rl->quiet;
    rl->quiet = 0;
    rl->last_ms = now_ms ? now_ms : 1;
    return true;
}
