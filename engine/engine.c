/* The engine object, start-up, shut-down and the connection's clean-up
 * for the lock modules; see engine.h. */
#include "engine/engine.h"

#include <stdlib.h>

#include "engine/fence.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "engine/replay.h"
#include "engine/scripts.h"
#include "engine/sem_reap.h"
#include "engine/wait.h"
#include "engine/waitset.h"
#include "proxy/client.h"
#include "proxy/server.h"

void px_locks_client_init(struct px_cl_locks *l)
{
    list_init(&l->waits);
    list_init(&l->holds);
    list_init(&l->shares);
    list_init(&l->claims);
}

void px_locks_client_gone(struct px_client *cl)
{
    struct list *n;

    px_wait_client_gone(cl);
    px_hold_client_gone(cl);
    while ((n = list_first(&cl->locks.claims)) != NULL) {
        struct px_claim *c = LP_CONTAINER_OF(n, struct px_claim, node);

        list_del_init(n);
        c->gone(c, cl);
    }
}

struct lk_engine *px_engine_alloc(struct px_server *srv)
{
    struct lk_engine *eng = calloc(1, sizeof(*eng));

    if (!eng)
        return NULL;
    eng->srv = srv;
    px_scripts_init(eng);
    return eng;
}

void px_engine_free(struct lk_engine *eng)
{
    free(eng);
}

int px_locks_init(struct px_server *srv)
{
    struct lk_engine *eng = srv->engine;
    int rc = px_waitset_init(srv);

    if (rc < 0)
        return rc;
    px_jobs_init(srv);
    px_replay_init(srv);
    rc = px_hold_init(srv);
    if (rc < 0)
        goto err_waitset;
    rc = px_sem_track_init(eng);
    if (rc < 0)
        goto err_hold;
    rc = hmap_init(&eng->psem_held, 64);
    if (rc < 0)
        goto err_track;
    rc = px_sem_reap_init(srv);
    if (rc < 0)
        goto err_psem;
    return 0;
err_psem:
    hmap_deinit(&eng->psem_held);
err_track:
    px_sem_track_deinit(eng);
err_hold:
    px_hold_deinit(srv);
err_waitset:
    px_waitset_deinit(srv);
    return rc;
}

void px_locks_deinit(struct px_server *srv)
{
    px_jobs_deinit(srv); /* what still waits for Redis is given up (logged) */
    px_replay_deinit(srv);
    px_sem_reap_deinit(srv);
    if (srv->engine->psem_held.count == 0) /* else connections still open at exit keep theirs */
        hmap_deinit(&srv->engine->psem_held);
    px_sem_track_deinit(srv->engine);
    px_hold_deinit(srv);
    px_waitset_deinit(srv);
    px_fence_free(srv);
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
