/* MULTILOCK name [name ...] [LEASE ms] [WAIT ms] and MULTIUNLOCK name
 * [name ...]; see multilock.h.
 *
 * DESIGN
 *
 * The names are sorted by cluster slot, then by name (a single Redis: one
 * slot for all), and cut into groups of one slot. Each group is taken by
 * one script (lua/multi_acquire.lua), atomically: Redisson's RLock acquire
 * on every name, or nothing. One group (always, on a single Redis) is the
 * atomic path. Several groups (a Redis Cluster, names in several slots)
 * are taken one after the other in that fixed global order, and a group
 * that finds a name held gives back the groups already taken before the
 * op waits: so no MULTILOCK ever waits while holding a name, and two
 * MULTILOCKs over overlapping sets, in whatever order their names were
 * given, cannot deadlock (and contend in the same order).
 *
 * The op runs on the wait engine (wait.h) as one kind whose attempt is the
 * whole sequence of groups, reported once: granted (every group taken),
 * contended (the reply of the group that found a name held: the engine
 * waits on that name's channel, and moves when a later attempt is blocked
 * by another name), or an error. The engine's validity check then covers
 * the whole sequence (counted from the first group's send).
 *
 * Holds: one ordinary RLock hold per name (px_hold_plain): the watchdog
 * renews them, a closed connection releases them, an UNLOCK of one name
 * works. Giving back (a partial sequence, a late grant, a closed
 * connection, a lost reply) is the holds' settle (hold.h), which takes
 * back exactly what this op added. A group's script goes on the
 * connection of its first name, while a settle goes on its own name's: so
 * a group is not sent while a settle of one of its names is due or in
 * flight (it is deferred, PX__MULTI_DEFER_MS at a time), and Redis never runs
 * a retry before the give-back it must follow. MULTIUNLOCK follows the
 * same rule, and both are barriers for the connection's later requests.
 *
 * Files: this one (the acquire op, the scripts and the commands),
 * multi_names.c (argument checks, the order, the groups), multiunlock.c
 * (MULTIUNLOCK); they share multilock-int.h.
 *
 * Who frees what: the op owns its name array and its references to the
 * holds; the engine calls multi_destroy() once. */
#include "proxy/cmds/multilock.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "engine/hold.h"
#include "engine/lua_scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/multilock-int.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/opts.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- scripts ---------------------------------------------------------------- */

static const struct px_lua *const multi_scripts[PX__MULTI_COUNT] = {
    &px_lua_multi_acquire,
    &px_lua_multi_unlock,
};

const struct px_script_set px_multilock_script_set = {multi_scripts, PX__MULTI_COUNT,
                                                      LK_SCRIPTS_MULTI};

unsigned px__multi_script(const struct lk_engine *eng, enum px__multi_script s)
{
    return eng->script_bases[LK_SCRIPTS_MULTI] + (unsigned)s;
}

/* ---- the acquire op ----------------------------------------------------------- */

struct multiop {
    struct px_wait_op wait;   /* the engine's part */
    struct sched_timer defer; /* a group waiting for settles of its names */
    uint64_t defer_since;     /* monotonic ms the group in flight was first deferred, or 0 */
    unsigned n;               /* names */
    unsigned group;           /* first name of the group in flight */
    unsigned blocked;         /* the name whose channel the op waits on */
    bool watchdog;            /* no LEASE: renewed while the connection lives */
    uint64_t lease_ms;        /* lease of every name */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owned: owner field */
    struct multi_name names[];
};

static struct multiop *multiop_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct multiop, wait);
}

static size_t multi_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    const struct multiop *op = multiop_of(w);
    const struct multi_name *b = &op->names[op->blocked];
    struct px_acq a = {.name = b->name, .nlen = b->nlen};

    return px__lock_plain_channel(&a, out, cap);
}

/* Gives back what this attempt took of the names before to. */
static void multi_rollback(struct multiop *op, unsigned to)
{
    uint64_t until = sched_loop_now_ms(op->wait.eng->loop) + op->lease_ms;
    unsigned i;

    for (i = 0; i < to; i++) {
        if (op->names[i].count > 0)
            px_hold_settle(op->names[i].hold, until);
        op->names[i].count = 0;
    }
}

/* The pair's live hold for a new attempt (as lock.c's lockop_hold). */
static void multi_refresh_hold(struct multiop *op, struct multi_name *m)
{
    struct px_hold *h = m->hold;

    if (h->state != PX_HOLD_RELEASING && h->state != PX_HOLD_DEAD)
        return;
    h = px_hold_use(op->wait.eng, &px_hold_plain, m->name, m->nlen, op->owner, op->olen, true);
    if (h) {
        px_hold_put(m->hold);
        m->hold = h;
    }
}

static void multi_on_group(void *arg, const struct pool_result *res);

/* Sends the group at op->group now, or defers it while a settle of one of
 * its names is due or in flight. Returns 0 or -errno (nothing sent). */
static int multi_send_group(struct multiop *op)
{
    struct px_server *srv = px_server_of(op->wait.eng);
    unsigned from = op->group, to = px__multi_group_end(op->names, op->n, from), i, k = 0;
    const char *argv[PX_MULTI_MAX + 2];
    size_t lens[PX_MULTI_MAX + 2];
    char lease[24];
    int rc;

    for (i = from; i < to; i++)
        multi_refresh_hold(op, &op->names[i]);
    if (!px__multi_settles_idle(op->names, from, to)) {
        uint64_t now = sched_loop_now_ms(srv->loop);

        if (op->defer_since == 0)
            op->defer_since = now;
        if (now - op->defer_since > PX__MULTI_DEFER_MAX)
            return -ETIMEDOUT;
        sched_loop_timer_in(srv->loop, &op->defer, PX__MULTI_DEFER_MS);
        return 0;
    }
    op->defer_since = 0;
    for (i = from; i < to; i++, k++) {
        argv[k] = op->names[i].name;
        lens[k] = op->names[i].nlen;
    }
    argv[k] = lease;
    lens[k++] = util_u64_to_str(op->lease_ms, lease);
    argv[k] = op->owner;
    lens[k++] = op->olen;
    for (i = from; i < to; i++)
        px_hold_begin(op->names[i].hold);
    rc = px_script_eval(srv->engine, px_route_hint(argv[0], lens[0]),
                        px__multi_script(op->wait.eng, PX__MULTI_ACQUIRE), (int)(to - from), (int)k,
                        argv, lens, multi_on_group, op);
    if (rc < 0) {
        for (i = from; i < to; i++)
            px_hold_end(op->names[i].hold);
    }
    return rc;
}

/* The deferred group's timer. */
static void multi_on_defer(struct sched_timer *t)
{
    struct multiop *op = LP_CONTAINER_OF(t, struct multiop, defer);
    int rc = multi_send_group(op);

    if (rc < 0) {
        multi_rollback(op, op->group);
        px_wait_on_reply(&op->wait, &(struct pool_result){.err = rc});
    }
}

static bool multi_reply_ok(const struct pool_reply *r)
{
    size_t i;

    if (r->type != POOL_REPLY_ARRAY || r->elements < 2)
        return false;
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != POOL_REPLY_INTEGER)
            return false;
    }
    return true;
}

/* One group answered: record its grant and go on with the next group, or
 * report the outcome of the whole attempt to the engine. */
static void multi_on_group(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct multiop *op = arg;
    unsigned from = op->group, to = px__multi_group_end(op->names, op->n, from), i;
    int rc;

    for (i = from; i < to; i++)
        px_hold_end(op->names[i].hold);
    if (err < 0 || !multi_reply_ok(r)) {
        multi_rollback(op, from); /* the engine undoes this group (unknown) or nothing */
        return px_wait_on_reply(&op->wait, res);
    }
    if (r->element[0]->integer != 1) {
        if (r->elements == 3 && r->element[2]->integer >= 1 &&
            (unsigned)r->element[2]->integer <= to - from)
            op->blocked = from + (unsigned)r->element[2]->integer - 1;
        multi_rollback(op, from);
        return px_wait_on_reply(&op->wait, res);
    }
    if (r->elements != 1 + (size_t)(to - from)) {
        multi_rollback(op, from);
        return px_wait_on_reply(&op->wait, res); /* multi_reply answers -EPROTO */
    }
    for (i = from; i < to; i++)
        op->names[i].count = r->element[1 + i - from]->integer;
    if (to == op->n)
        return px_wait_on_reply(&op->wait, res);
    op->group = to;
    rc = multi_send_group(op);
    if (rc < 0) {
        multi_rollback(op, to);
        px_wait_on_reply(&op->wait, &(struct pool_result){.err = rc});
    }
}

static int multi_send(struct px_wait_op *w)
{
    struct multiop *op = multiop_of(w);

    op->group = 0;
    op->defer_since = 0;
    return multi_send_group(op);
}

static bool multi_lost_before(struct multiop *op);

static enum px_wait_res multi_reply(struct px_wait_op *w, const struct pool_reply *r,
                                    uint64_t *repoll)
{
    struct multiop *op = multiop_of(w);
    unsigned i;

    if (!multi_reply_ok(r)) {
        px_args_reply_upstream(px_wait_req(w), -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (r->element[0]->integer != 1) {
        int64_t pttl = r->element[1]->integer;

        *repoll = pttl >= 0 ? (uint64_t)LP_MAX(pttl, 1) : pttl == -1 ? w->eng->cfg.watchdog_ms : 1;
        return PX_WAIT_CONTENDED;
    }
    for (i = 0; i < op->n; i++) {
        if (op->names[i].count <= 0) {
            multi_rollback(op, op->n);
            px_args_reply_upstream(px_wait_req(w), -EPROTO);
            return PX_WAIT_FINISHED;
        }
    }
    if (multi_lost_before(op)) {
        multi_rollback(op, op->n); /* every name back to what its holder was told */
        return PX_WAIT_FINISHED;
    }
    return PX_WAIT_GRANTED;
}

/* A grant where some name's earlier hold, which this re-entry was to add
 * to, is gone (hold.h, px_hold_lost_before): those holds are told lost,
 * the client is answered LOCKLOST naming the first, and the caller gives
 * every name back. */
static bool multi_lost_before(struct multiop *op)
{
    const struct multi_name *first = NULL;
    unsigned i;

    for (i = 0; i < op->n; i++) {
        struct multi_name *m = &op->names[i];

        if (!px_hold_lost_before(m->hold, (uint64_t)m->count))
            continue;
        px_hold_report_lost(m->hold, false, 0);
        if (!first)
            first = m;
    }
    if (first)
        px_reply_error(px_req_out(px_wait_req(&op->wait)),
                       "LOCKLOST the hold of '%.*s' this owner had was lost (expired or taken) "
                       "before this request; nothing is held now (acquire again for a fresh hold)",
                       (int)LP_MIN(first->nlen, 200u), first->name);
    return first != NULL;
}

static void multi_granted(struct px_wait_op *w)
{
    struct multiop *op = multiop_of(w);
    struct px_req *req = px_wait_req(w);
    unsigned i;

    w->eng->stats.acquired++;
    px_metrics_observe_wait(px_server_of(w->eng), req);
    for (i = 0; i < op->n; i++)
        px_hold_granted(op->names[i].hold, &px_hold_plain, &req->cl->caller,
                        (uint64_t)op->names[i].count, op->lease_ms, op->watchdog, w->sent_ms);
    px_reply_status(px_req_out(req), "OK");
}

/* As lock.c's lockop_undo, for every name: the holds settle back to the
 * counts clients were told. */
static void multi_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct multiop *op = multiop_of(w);
    uint64_t until = sched_loop_now_ms(w->eng->loop) + op->lease_ms;
    unsigned i;

    if (why == PX_UNDO_GONE && w->eng->cfg.on_disc != PX_DISCONNECT_RELEASE)
        return;
    for (i = 0; i < op->n; i++) {
        px_hold_settle(op->names[i].hold, why == PX_UNDO_UNKNOWN ? PX_JOB_NO_END : until);
        op->names[i].count = 0;
    }
}

static void multi_destroy(struct px_wait_op *w)
{
    struct multiop *op = multiop_of(w);
    unsigned i;

    sched_loop_timer_del(w->eng->loop, &op->defer);
    for (i = 0; i < op->n; i++)
        px_hold_put(op->names[i].hold);
    free(op);
}

static const struct px_wait_kind multi_wait_kind = {
    .name = "multilock",
    .wake = PX_WAKE_LOCK,
    .stat = PX_WAIT_STAT_LOCK,
    .channel = multi_channel,
    .moves = true,
    .send = multi_send,
    .reply = multi_reply,
    .granted = multi_granted,
    .undo = multi_undo,
    .destroy = multi_destroy,
};

/* Parses "[LEASE ms] [WAIT ms]" from argv[i]. */
static int multi_parse_options(struct px_req *req, int i, int64_t *lease, int64_t *wait)
{
    *lease = -1;
    *wait = -1;
    for (; i < req->argc; i += 2) {
        const struct px_arg *o = &req->argv[i];
        bool is_lease = px_args_is(o, "LEASE");

        if (i + 1 >= req->argc) {
            px_args_reply_no_value(req, o->p, o->len);
            return -EINVAL;
        }
        if (!is_lease && !px_args_is(o, "WAIT")) {
            px_args_reply_syntax(req, o);
            return -EINVAL;
        }
        if (is_lease ? px_args_parse_lease(req, i + 1, lease) < 0
                     : px_args_parse_ms(req, i + 1, "WAIT", 0, wait) < 0)
            return -EINVAL;
    }
    return 0;
}

static void multi_cmd_lock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    unsigned n = px__multi_count_names(req), i;
    int64_t lease, wait;
    struct multiop *op;

    if (px__multi_check_count(req, n) < 0 ||
        multi_parse_options(req, (int)n + 1, &lease, &wait) < 0)
        return px_req_done(req);
    op = calloc(1, sizeof(*op) + n * sizeof(op->names[0]));
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->n = n;
    if (px__multi_fill_names(req, op->names, n) < 0) {
        free(op);
        return px_req_done(req);
    }
    sched_timer_init(&op->defer, multi_on_defer);
    px_cmd_wait_init(&op->wait, &multi_wait_kind, req, wait);
    op->olen = px__multi_owner(req, op->owner);
    op->watchdog = lease < 0;
    op->lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)lease;
    op->wait.lease_ms = op->lease_ms;
    for (i = 0; i < n; i++) {
        struct multi_name *m = &op->names[i];

        m->hold =
            px_hold_use(srv->engine, &px_hold_plain, m->name, m->nlen, op->owner, op->olen, true);
        if (!m->hold) {
            multi_destroy(&op->wait);
            px_reply_error(px_req_out(req), "ERR out of memory");
            return px_req_done(req);
        }
    }
    px_cmd_wait_start(&op->wait);
}

static bool multi_may_block(const struct px_req *req)
{
    (void)req;
    return true;
}

/* The default --max-args lets the longest MULTILOCK through. */
_Static_assert(1 + PX_MULTI_MAX + 4 == PX_DEFAULT_MAX_ARGS,
               "PX_DEFAULT_MAX_ARGS must fit MULTILOCK with PX_MULTI_MAX names, LEASE and WAIT");

static const struct px_cmd multi_cmds[] = {
    {"MULTILOCK", 2, -1, multi_cmd_lock, multi_may_block, 1},
    {"MULTIUNLOCK", 2, -1, px__multi_cmd_unlock, multi_may_block, 1},
};
const struct px_cmd_set px_multilock_cmd_set = {multi_cmds, LP_ARRAY_SIZE(multi_cmds)};
