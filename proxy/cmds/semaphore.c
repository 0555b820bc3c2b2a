/* Semaphores over Redisson's layouts (SEM.*: RSemaphore, spec section 6,
 * in sem.c; PSEM.*: RPermitExpirableSemaphore, section 7, in psem.c): the
 * scripts both use, keys, argument rules, INFO "sync" and the command
 * table. Waiting acquires run on the wait engine (wait.h), like every
 * other waiting command.
 *
 * Every script checks the types of its keys before writing (WRONGTYPE on
 * an RLock hash, a list, a non-integer string...), and every increase of a
 * count publishes the new count (decimal, > 0) on redisson_sc:{name}, so
 * Redisson's acquire() wakes. Rejected: one subscription per waiter
 * (Redisson's cost; pain point 1) and waiting without a re-check
 * (Redisson's acquire() hangs on a lost message; pain points 3, 18). */
#include "proxy/cmds/semaphore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/jobs.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/call.h"
#include "proxy/cmds/sem-int.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- scripts ---------------------------------------------------------------- */

static const struct px_lua *const sem_scripts[PX__SEM_NSCRIPTS] = {
    &px_lua_sem_tryset,    &px_lua_sem_add,        &px_lua_sem_acquire,   &px_lua_sem_release,
    &px_lua_sem_available, &px_lua_sem_drain,      &px_lua_psem_tryset,   &px_lua_psem_acquire,
    &px_lua_psem_release,  &px_lua_psem_available, &px_lua_sem_return,    &px_lua_sem_ledger,
    &px_lua_sem_alive,     &px_lua_sem_register,   &px_lua_sem_reap_find, &px_lua_sem_reap,
    &px_lua_sem_reap_done,
};

const struct px_script_set px_sem_script_set = {sem_scripts, PX__SEM_NSCRIPTS, LK_SCRIPTS_SEM};

/* ---- replies and arguments ------------------------------------------------ */

void px__sem_reply_notinit(struct px_req *req)
{
    bool psem = req->argv[0].len > 0 && (req->argv[0].p[0] | 0x20) == 'p';

    px_reply_error(px_req_out(req),
                   "NOTINIT semaphore '%.*s' has no permits set (use %s.TRYSETPERMITS first)",
                   (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p, psem ? "PSEM" : "SEM");
}

bool px__sem_may_block(const struct px_req *req)
{
    return !px_call_wait_zero(req);
}

/* ---- acquire arguments ---- */

static bool is_keyword(const struct px_arg *a)
{
    return px_args_is(a, "WAIT") || px_args_is(a, "KEEP") || px_args_is(a, "LEASE");
}

/* One option at argv[*i] ("KEEP", or "WAIT ms" / "LEASE ms" when allowed).
 * Advances *i. Replies and returns -EINVAL on bad input. */
static int parse_option(struct px_req *req, int *i, bool wait_ok, bool lease_ok,
                        struct px__sem_acquire_args *a)
{
    const struct px_arg *opt = &req->argv[*i];
    bool wait = wait_ok && px_args_is(opt, "WAIT");
    bool lease = lease_ok && px_args_is(opt, "LEASE");
    const char *keyword = wait ? "WAIT" : "LEASE";

    if (px_args_is(opt, "KEEP")) {
        a->keep = true;
        *i += 1;
        return 0;
    }
    if (!wait && !lease) {
        px_args_reply_option(req, opt);
        return -EINVAL;
    }
    if (*i + 1 >= req->argc) {
        px_args_reply_no_value(req, keyword, strlen(keyword));
        return -EINVAL;
    }
    *i += 2;
    if (wait)
        return px_args_parse_ms(req, *i - 1, keyword, 0, &a->wait_ms);
    return px_args_parse_lease(req, *i - 1, &a->lease_ms);
}

int px__sem_parse_acquire(struct px_req *req, bool count_ok, bool wait_ok, bool lease_ok,
                          struct px__sem_acquire_args *a)
{
    int i = 2;

    a->permits = 1;
    a->wait_ms = -1;
    a->lease_ms = -1;
    a->keep = false;
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return -EINVAL;
    if (count_ok && req->argc > 2 && !is_keyword(&req->argv[2])) {
        if (px_args_parse_count(req, 2, "permits", 1, &a->permits) < 0)
            return -EINVAL;
        i = 3;
    }
    while (i < req->argc) {
        if (parse_option(req, &i, wait_ok, lease_ok, a) < 0)
            return -EINVAL;
    }
    return 0;
}

/* ---- tables and INFO -------------------------------------------------------- */

static const struct px_cmd sem_cmds[] = {
    {"SEM.TRYSETPERMITS", 3, 3, px__sem_cmd_trysetpermits, NULL, 1},
    {"SEM.ADDPERMITS", 3, 3, px__sem_cmd_addpermits, NULL, 1},
    {"SEM.ACQUIRE", 2, 6, px__sem_cmd_acquire, px__sem_may_block, 1},
    {"SEM.TRYACQUIRE", 2, 4, px__sem_cmd_tryacquire, NULL, 1},
    {"SEM.RELEASE", 2, 3, px__sem_cmd_release, NULL, 1},
    {"SEM.AVAILABLE", 2, 2, px__sem_cmd_available, NULL, 1},
    {"SEM.DRAIN", 2, 2, px__sem_cmd_drain, NULL, 1},
    {"PSEM.TRYSETPERMITS", 3, 3, px__psem_cmd_trysetpermits, NULL, 1},
    {"PSEM.ACQUIRE", 2, 7, px__psem_cmd_acquire, px__sem_may_block, 1},
    {"PSEM.TRYACQUIRE", 2, 5, px__psem_cmd_tryacquire, NULL, 1},
    {"PSEM.RELEASE", 3, 3, px__psem_cmd_release, NULL, 1},
    {"PSEM.AVAILABLE", 2, 2, px__psem_cmd_available, NULL, 1},
};
const struct px_cmd_set px_sem_cmd_set = {sem_cmds, LP_ARRAY_SIZE(sem_cmds)};

void px_sync_info(struct px_server *srv, struct buf *o)
{
    const struct px__sem_stats *s = &srv->engine->sem_stats;

    buf_appendf(o,
                "# Sync\r\nsem_waiters:%llu\r\nsem_acquired:%llu\r\nsem_wait_timeouts:%llu\r\n"
                "sem_permits_tracked:%lld\r\nsem_permits_returned:%llu\r\n"
                "sem_unknown_outcomes:%llu\r\nsem_permits_released_for_others:%llu\r\n"
                "sem_permits_lost:%llu\r\nsem_permits_restored:%llu\r\n",
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_SEM),
                (unsigned long long)s->sem_acquired,
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_SEM),
                (long long)s->sem_tracked, (unsigned long long)s->sem_returned,
                (unsigned long long)s->sem_unknown, (unsigned long long)s->sem_released_for_others,
                (unsigned long long)s->sem_lost, (unsigned long long)s->sem_restored);
    buf_appendf(o, "sem_dead_proxy_permits_returned:%llu\r\nsem_reaped_self:%llu\r\n",
                (unsigned long long)srv->engine->sem_reap.permits_returned,
                (unsigned long long)srv->engine->sem_reap.reaped_self);
    buf_appendf(o,
                "psem_waiters:%llu\r\npsem_acquired:%llu\r\npsem_wait_timeouts:%llu\r\n"
                "psem_permits_tracked:%lld\r\npsem_permits_returned:%llu\r\n"
                "latch_waiters:%llu\r\nlatch_wait_timeouts:%llu\r\n\r\n",
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_PSEM),
                (unsigned long long)s->psem_acquired,
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_PSEM),
                (long long)s->psem_tracked, (unsigned long long)s->psem_returned,
                (unsigned long long)px_wait_waiting(srv->engine, PX_WAIT_STAT_LATCH),
                (unsigned long long)px_wait_timeouts(srv->engine, PX_WAIT_STAT_LATCH));
}
