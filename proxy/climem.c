/* Client memory: the sum, the bound, the purge timer; see climem.h.
 *
 * The purge timer runs every second whatever the allocator: with it a
 * timer is always due within a second, so a loop that stalls (stopped,
 * starved of CPU, blocked in the kernel) always shows as a late timer in
 * INFO latency (sched_loop_latency()), even when nothing else is armed.
 *
 * Each client remembers what it last added to the sum (cl->mem); a sync
 * recounts it from sizes known in O(1) and adds the difference. Syncs run
 * where the footprint changes: after a client takes requests or reads,
 * after replies are written to its output and when its output drained,
 * and when a transaction queues or drops requests. Between syncs the sum
 * may lag (output the kernel took since), always towards too much. */
#include "proxy/climem.h"

#include <sys/types.h>

#include <stdint.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine.h"
#include "proxy/client.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define PURGE_EVERY_MS 1000u
#define ARENAS_ALL     "4096" /* MALLCTL_ARENAS_ALL */
#define DECAY_MS       1000   /* dirty pages' decay with background purging */

/* jemalloc purges in its own background thread (climem_background). */
static bool climem_bg;

/* jemalloc's control interface when it is the allocator (weak: not under
 * the sanitizers). */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

size_t px_climem_req_bytes(const struct px_req *req)
{
    size_t n = sizeof(*req) + req->reply.cap;

    if (req->arena != req->arena_inl)
        n += req->arena_cap;
    if (req->argv != req->argv_inl)
        n += (size_t)req->argc * sizeof(*req->argv);
    return n;
}

static size_t climem_parsing(const struct px_parser *p)
{
    return (p->req ? px_climem_req_bytes(p->req) : 0) + (p->line ? p->hlen : 0);
}

static size_t climem_footprint(const struct px_client *cl)
{
    if (cl->closing)
        return 0;
    return cl->multi.bytes + cl->in.cap + climem_parsing(&cl->parser) +
           sched_conn_pending_out(&cl->conn) + (cl->extra ? cl->extra->pushes.cap : 0);
}

void px_climem_sync(struct px_client *cl)
{
    size_t now = climem_footprint(cl);
    struct px_server *srv = cl->srv;

    srv->client_mem = srv->client_mem - cl->mem + now;
    cl->mem = now;
}

bool px_climem_admit(struct px_server *srv, size_t bytes)
{
    size_t bound = srv->opts.max_client_memory;
    uint64_t quiet;

    if (bound == 0 || srv->client_mem + bytes <= bound)
        return true;
    srv->stats.climem_refusals++;
    if (px_ratelog_allow(&srv->climem_log, sched_loop_now_ms(srv->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "refused to queue %zu bytes: %zu bytes held for clients, "
                "--max-client-memory %zu (%llu more refusals not logged)",
                bytes, srv->client_mem, bound, (unsigned long long)quiet);
    return false;
}

/* Unused dirty bytes in every arena and bytes allocated; false if
 * jemalloc cannot tell. */
static bool climem_stats(size_t *dirty, size_t *allocated)
{
    uint64_t epoch = 1;
    size_t pdirty = 0, page = 0, len = sizeof(size_t), elen = sizeof(epoch);

    if (!mallctl || mallctl("epoch", &epoch, &elen, &epoch, elen) != 0 ||
        mallctl("stats.arenas." ARENAS_ALL ".pdirty", &pdirty, &len, NULL, 0) != 0 ||
        mallctl("arenas.page", &page, &len, NULL, 0) != 0 ||
        mallctl("stats.allocated", allocated, &len, NULL, 0) != 0)
        return false;
    *dirty = pdirty * page;
    return true;
}

/* Purges when the unused pages pass PX_CLIMEM_DIRTY_MAX and a quarter of
 * what is in use: a busy proxy's own churn stays to jemalloc's decay (no
 * page given back only to be faulted in again), what a burst left behind
 * goes back. */
static void climem_on_timer(struct sched_timer *t)
{
    struct px_server *srv = LP_CONTAINER_OF(t, struct px_server, climem_timer);
    size_t dirty = 0, allocated = 0;

    /* After a mass release the hold table's buckets are mostly empty. */
    if (hmap_shrink(&srv->engine->holds))
        log_msg(LOG_LVL_DEBUG, "hold table down to %zu buckets", srv->engine->holds.nbuckets);
    (void)hmap_shrink(&srv->engine->hold_owners); /* as many as holds with OWNER tokens */
    if (!climem_bg && climem_stats(&dirty, &allocated) && dirty > PX_CLIMEM_DIRTY_MAX &&
        dirty > allocated / 4) {
        uint64_t t0 = clock_mono_ns();

        if (mallctl("arena." ARENAS_ALL ".purge", NULL, NULL, NULL, 0) == 0)
            log_msg(LOG_LVL_DEBUG, "gave %zu unused bytes back to the system (%llu us)", dirty,
                    (unsigned long long)(clock_mono_ns() - t0) / 1000);
    }
    sched_loop_timer_add(srv->loop, t, sched_loop_now_ms(srv->loop) + PURGE_EVERY_MS);
}

/* Background purging: a purge on the loop stalled it (12 MB of pages
 * freed by a mass release took 0.57 s to purge on a loaded machine, every
 * client waiting). jemalloc's background thread purges dirty pages as
 * they decay (DECAY_MS), off the loop; the timer then only shrinks the
 * hold table. False (the timer purges) where jemalloc cannot. */
static bool climem_background(void)
{
    ssize_t decay = DECAY_MS;
    unsigned narenas = 0, i;
    size_t len = sizeof(narenas);
    bool on = true;
    char name[48];

    if (!mallctl || mallctl("background_thread", NULL, NULL, &on, sizeof(on)) != 0)
        return false;
    (void)mallctl("arenas.dirty_decay_ms", NULL, NULL, &decay, sizeof(decay));
    if (mallctl("arenas.narenas", &narenas, &len, NULL, 0) == 0) {
        for (i = 0; i < narenas; i++) {
            snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", i);
            (void)mallctl(name, NULL, NULL, &decay, sizeof(decay)); /* unused arenas refuse */
        }
    }
    return true;
}

void px_climem_start(struct px_server *srv)
{
    climem_bg = climem_background();
    log_msg(LOG_LVL_DEBUG, "memory: %s gives freed pages back",
            climem_bg ? "jemalloc's background thread" : "the purge timer");
    sched_timer_init(&srv->climem_timer, climem_on_timer);
    sched_loop_timer_add(srv->loop, &srv->climem_timer,
                         sched_loop_now_ms(srv->loop) + PURGE_EVERY_MS);
}

void px_climem_stop(struct px_server *srv)
{
    sched_loop_timer_del(srv->loop, &srv->climem_timer);
}
