/* Count-down latch commands; see latch.h.
 *
 * Scripts follow RCountDownLatch: trySetCount sets the count if absent and
 * publishes "1"; countDown decrements, deletes the key at 0 or below and
 * publishes "0" when it reaches exactly 0; a missing key reads as 0 (an
 * open latch). Every script refuses a name holding anything but an
 * integer string (WRONGTYPE), so an RLock hash is never touched.
 *
 * LATCH.AWAIT runs on the wait engine: read the count; if it is above 0,
 * join the channel's waitset in PX_WAKE_ALL mode (one subscription however many
 * wait) and sleep until any message (each makes every waiter re-read the
 * count: "0" opens the latch, "1" means re-set or deleted, and a deleted
 * latch reads as open), the safety re-check, or WAIT. */
#include "proxy/cmds/latch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/lua_scripts.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/call.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/reply.h"
#include "proxy/request.h"
#include "proxy/server.h"

#define LATCH_CHANNEL_PREFIX "redisson_countdownlatch__channel__"

enum latch_script {
    LATCH_TRYSET = 0,    /* KEYS name, chan; ARGV n -> 1 | 0 */
    LATCH_COUNTDOWN = 1, /* KEYS name, chan -> count left (0 when open) */
    LATCH_COUNT = 2,     /* KEYS name -> count (0 when absent) */
    LATCH_NSCRIPTS = 3,
};

static const struct px_lua *const latch_scripts[LATCH_NSCRIPTS] = {
    &px_lua_latch_tryset,
    &px_lua_latch_countdown,
    &px_lua_latch_count,
};

const struct px_script_set px_latch_script_set = {latch_scripts, LATCH_NSCRIPTS, LK_SCRIPTS_LATCH};

static unsigned script_id(const struct lk_engine *eng, enum latch_script s)
{
    return eng->script_bases[LK_SCRIPTS_LATCH] + (unsigned)s;
}

/* "redisson_countdownlatch__channel__{" name "}": braces always. Returns
 * the length, or 0 when cap is too small. */
static size_t latch_channel(const char *name, size_t len, char *out, size_t cap)
{
    size_t plen = strlen(LATCH_CHANNEL_PREFIX);

    if (plen + len + 3 > cap)
        return 0;
    memcpy(out, LATCH_CHANNEL_PREFIX, plen);
    out[plen] = '{';
    memcpy(out + plen + 1, name, len);
    out[plen + 1 + len] = '}';
    out[plen + 2 + len] = '\0';
    return plen + 2 + len;
}

/* Runs a latch script with keys {name, chan} (nkeys 2) or {name} and at
 * most one argument. */
static void latch_simple(struct px_req *req, enum latch_script s, int nkeys, const char *arg,
                         size_t alen)
{
    const struct px_arg *name = &req->argv[1];
    char chan[PX_NAME_MAX + 64];
    const char *argv[3] = {name->p, chan, NULL};
    size_t lens[3] = {name->len, 0, 0};
    int argc = nkeys;

    lens[1] = latch_channel(name->p, name->len, chan, sizeof(chan));
    if (arg) {
        argv[argc] = arg;
        lens[argc++] = alen;
    }
    px_call_script(req, px_route_hint(name->p, name->len), script_id(req->cl->srv->engine, s),
                   nkeys, argc, argv, lens, px_call_reply_int);
}

static void latch_cmd_trysetcount(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_BRACED) < 0 ||
        px_args_parse_count(req, 2, "count", 1, &n) < 0)
        return px_req_done(req);
    latch_simple(req, LATCH_TRYSET, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n));
}

static void latch_cmd_countdown(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_BRACED) < 0)
        return px_req_done(req);
    latch_simple(req, LATCH_COUNTDOWN, 2, NULL, 0);
}

static void latch_cmd_count(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_BRACED) < 0)
        return px_req_done(req);
    latch_simple(req, LATCH_COUNT, 1, NULL, 0);
}

/* ---- LATCH.AWAIT -------------------------------------------------------------- */

/* An await in progress (req->op). */
struct latchop {
    struct px_wait_op wait; /* the engine's part */
};

static size_t latchop_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    return latch_channel(px_wait_req(w)->argv[1].p, px_wait_req(w)->argv[1].len, out, cap);
}

static int latchop_send(struct px_wait_op *w)
{
    const struct px_arg *name = &px_wait_req(w)->argv[1];
    const char *argv[1] = {name->p};
    size_t lens[1] = {name->len};

    return px_wait_eval(w, px_route_hint(name->p, name->len), script_id(w->eng, LATCH_COUNT), 1, 1,
                        argv, lens);
}

/* Count above 0: wait; else the latch is open (+OK). Never a grant. */
static enum px_wait_res latchop_reply(struct px_wait_op *w, const struct pool_reply *r,
                                      uint64_t *repoll)
{
    (void)repoll;
    if (r->type != POOL_REPLY_INTEGER) {
        px_wait_reply_upstream(px_wait_req(w), -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (r->integer > 0)
        return PX_WAIT_CONTENDED;
    px_reply_status(px_req_out(px_wait_req(w)), "OK");
    return PX_WAIT_FINISHED;
}

static void latchop_destroy(struct px_wait_op *w)
{
    free(LP_CONTAINER_OF(w, struct latchop, wait));
}

static const struct px_wait_kind latchop_kind = {
    .name = "latch",
    .wake = PX_WAKE_ALL,
    .stat = PX_WAIT_STAT_LATCH,
    .channel = latchop_channel,
    .queue_behind = NULL,
    .send = latchop_send,
    .attempt_done = NULL,
    .reply = latchop_reply,
    .granted = NULL,
    .undo = NULL,
    .give_up = NULL,
    .destroy = latchop_destroy,
};

/* LATCH.AWAIT name [WAIT ms] */
static void latch_cmd_await(struct px_req *req)
{
    int64_t wait_ms = -1;
    struct latchop *l;

    if (px_name_check(req, "name", PX_NAME_BRACED) < 0)
        return px_req_done(req);
    if (req->argc == 3 || (req->argc == 4 && !px_args_is(&req->argv[2], "WAIT"))) {
        px_args_reply_syntax(req, &req->argv[2]);
        return px_req_done(req);
    }
    if (req->argc == 4 && px_args_parse_ms(req, 3, "WAIT", 0, &wait_ms) < 0)
        return px_req_done(req);
    l = calloc(1, sizeof(*l));
    if (!l) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    px_cmd_wait_init(&l->wait, &latchop_kind, req, wait_ms);
    px_cmd_wait_start(&l->wait);
}

static bool latch_may_block(const struct px_req *req)
{
    return !px_call_wait_zero(req);
}

static const struct px_cmd latch_cmds[] = {
    {"LATCH.TRYSETCOUNT", 3, 3, latch_cmd_trysetcount, NULL, 1},
    {"LATCH.COUNTDOWN", 2, 2, latch_cmd_countdown, NULL, 1},
    {"LATCH.COUNT", 2, 2, latch_cmd_count, NULL, 1},
    {"LATCH.AWAIT", 2, 4, latch_cmd_await, latch_may_block, 1},
};
const struct px_cmd_set px_latch_cmd_set = {latch_cmds, LP_ARRAY_SIZE(latch_cmds)};
