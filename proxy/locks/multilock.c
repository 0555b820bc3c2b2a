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
 * flight (it is deferred, MULTI_DEFER_MS at a time), and Redis never runs
 * a retry before the give-back it must follow. MULTIUNLOCK follows the
 * same rule, and both are barriers for the connection's later requests.
 *
 * Who frees what: the op owns its name array and its references to the
 * holds; the engine calls multi_destroy() once. */
#include "proxy/locks/multilock.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/locks/hold.h"
#include "proxy/locks/lock-int.h"
#include "proxy/locks/lua_scripts.h"
#include "proxy/locks/wait.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define MULTI_DEFER_MS  2u   /* re-check of a group waiting for settles */
#define MULTI_DEFER_MAX 5000 /* give up a group deferred this long (Redis down) */

/* ---- scripts ---------------------------------------------------------------- */

enum multi_script {
    MULTI_ACQUIRE = 0, /* KEYS names; ARGV lease, owner -> {1, counts...} | {0, pttl, i} */
    MULTI_UNLOCK = 1,  /* KEYS names, channels; ARGV owner, leases... -> {-1|0|1, ...} */
    MULTI_COUNT = 2,
};

static const struct px_lua *const multi_scripts[MULTI_COUNT] = {
    &px_lua_multi_acquire,
    &px_lua_multi_unlock,
};

static unsigned multi_script_base;
const struct px_script_set px_multilock_script_set = {multi_scripts, MULTI_COUNT,
                                                      &multi_script_base};

/* ---- names ----------------------------------------------------------------- */

/* One name of a command, with its pair's hold. */
struct multi_name {
    const char *name;     /* borrowed: request argument */
    size_t nlen;          /* name length */
    uint16_t slot;        /* cluster slot (0 on a single Redis) */
    struct px_hold *hold; /* reference, or NULL (MULTIUNLOCK of a pair never seen) */
    int64_t count;        /* the count this attempt's grant gave, 0: not taken by it */
    int result;           /* MULTIUNLOCK: -1 not held, 0 still held, 1 released */
};

static int multi_name_cmp(const void *pa, const void *pb)
{
    const struct multi_name *a = pa, *b = pb;
    int c;

    if (a->slot != b->slot)
        return a->slot < b->slot ? -1 : 1;
    c = memcmp(a->name, b->name, LP_MIN(a->nlen, b->nlen));
    if (c != 0)
        return c;
    return a->nlen < b->nlen ? -1 : a->nlen > b->nlen;
}

static bool is_option(const struct px_arg *a)
{
    return px_args_is(a, "LEASE") || px_args_is(a, "WAIT");
}

/* Checks one name as px_name_check() checks argv[1], plus the caller's ACL. */
static int multi_check_name(struct px_req *req, const struct px_arg *n)
{
    struct px_client *cl = req->cl;

    if (n->len == 0 || n->len > PX_NAME_MAX) {
        px_reply_error(px_req_out(req), "ERR lock name must be 1-%u bytes", PX_NAME_MAX);
        return -EINVAL;
    }
    if (!px_name_slot_ok(cl->srv, n->p, n->len, PX_NAME_PREFIXED)) {
        px_reply_error(px_req_out(req),
                       "ERR name '%.*s' cannot be used with Redis Cluster: its channel would "
                       "hash to another slot than the name (CROSSSLOT)",
                       (int)LP_MIN(n->len, 200u), n->p);
        return -EINVAL;
    }
    if (px_auth_required(cl->srv->opts.auth) && cl->user &&
        !px_user_may_access(cl->user, n->p, n->len)) {
        px_reply_error(px_req_out(req),
                       "NOPERM user '%s' has no permissions to access the '%.*s' lock",
                       cl->user->name, (int)LP_MIN(n->len, 200u), n->p);
        return -EINVAL;
    }
    return 0;
}

/* Fills names[] from argv[1..nnames], sorted, and refuses duplicates. */
static int multi_fill_names(struct px_req *req, struct multi_name *names, unsigned nnames)
{
    bool cluster = pool_is_cluster(req->cl->srv->pool);
    unsigned i;

    for (i = 0; i < nnames; i++) {
        const struct px_arg *n = &req->argv[1 + i];

        if (multi_check_name(req, n) < 0)
            return -EINVAL;
        names[i].name = n->p;
        names[i].nlen = n->len;
        names[i].slot = cluster ? pool_slot(n->p, n->len) : 0;
    }
    qsort(names, nnames, sizeof(*names), multi_name_cmp);
    for (i = 1; i < nnames; i++) {
        if (multi_name_cmp(&names[i - 1], &names[i]) == 0) {
            px_reply_error(px_req_out(req), "ERR lock name '%.*s' is given twice",
                           (int)LP_MIN(names[i].nlen, 200u), names[i].name);
            return -EINVAL;
        }
    }
    return 0;
}

/* How many leading arguments after the command are names. */
static unsigned multi_count_names(const struct px_req *req)
{
    int i = 1;

    while (i < req->argc && !is_option(&req->argv[i]))
        i++;
    return (unsigned)(i - 1);
}

/* Checks the name count; replies and returns -EINVAL when it is bad. */
static int multi_check_count(struct px_req *req, unsigned nnames)
{
    if (nnames == 0) {
        px_reply_error(px_req_out(req), "ERR wrong number of arguments for '%.*s' command",
                       (int)req->argv[0].len, req->argv[0].p);
        return -EINVAL;
    }
    if (nnames > PX_MULTI_MAX) {
        px_reply_error(px_req_out(req), "ERR at most %u lock names per command", PX_MULTI_MAX);
        return -EINVAL;
    }
    return 0;
}

/* The end (exclusive) of the group of one slot that starts at from. */
static unsigned multi_group_end(const struct multi_name *names, unsigned n, unsigned from)
{
    unsigned i = from + 1;

    while (i < n && names[i].slot == names[from].slot)
        i++;
    return i;
}

/* True when no settle of the names [from, to) is due or in flight (those
 * that are due are pushed). */
static bool multi_settles_idle(struct multi_name *names, unsigned from, unsigned to)
{
    bool idle = true;
    unsigned i;

    for (i = from; i < to; i++) {
        struct px_hold *h = names[i].hold;

        if (h && h->job.state != PX_JOB_IDLE) {
            px_job_kick(&h->job);
            idle = false;
        }
    }
    return idle;
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
    uint64_t until = sched_loop_now_ms(op->wait.srv->loop) + op->lease_ms;
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
    h = px_hold_use(op->wait.srv, &px_hold_plain, m->name, m->nlen, op->owner, op->olen, true);
    if (h) {
        px_hold_put(m->hold);
        m->hold = h;
    }
}

static void multi_on_group(void *arg, const redisReply *r, int err);

/* Sends the group at op->group now, or defers it while a settle of one of
 * its names is due or in flight. Returns 0 or -errno (nothing sent). */
static int multi_send_group(struct multiop *op)
{
    struct px_server *srv = op->wait.srv;
    unsigned from = op->group, to = multi_group_end(op->names, op->n, from), i, k = 0;
    const char *argv[PX_MULTI_MAX + 2];
    size_t lens[PX_MULTI_MAX + 2];
    char lease[24];
    int rc;

    for (i = from; i < to; i++)
        multi_refresh_hold(op, &op->names[i]);
    if (!multi_settles_idle(op->names, from, to)) {
        uint64_t now = sched_loop_now_ms(srv->loop);

        if (op->defer_since == 0)
            op->defer_since = now;
        if (now - op->defer_since > MULTI_DEFER_MAX)
            return -ETIMEDOUT;
        sched_loop_timer_in(srv->loop, &op->defer, MULTI_DEFER_MS);
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
    rc = px_script_eval(srv, px_route_hint(argv[0], lens[0]), multi_script_base + MULTI_ACQUIRE,
                        (int)(to - from), (int)k, argv, lens, multi_on_group, op);
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
        px_wait_on_reply(&op->wait, NULL, rc);
    }
}

static bool multi_reply_ok(const redisReply *r)
{
    size_t i;

    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return false;
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return false;
    }
    return true;
}

/* One group answered: record its grant and go on with the next group, or
 * report the outcome of the whole attempt to the engine. */
static void multi_on_group(void *arg, const redisReply *r, int err)
{
    struct multiop *op = arg;
    unsigned from = op->group, to = multi_group_end(op->names, op->n, from), i;
    int rc;

    for (i = from; i < to; i++)
        px_hold_end(op->names[i].hold);
    if (err < 0 || !multi_reply_ok(r)) {
        multi_rollback(op, from); /* the engine undoes this group (unknown) or nothing */
        return px_wait_on_reply(&op->wait, r, err);
    }
    if (r->element[0]->integer != 1) {
        if (r->elements == 3 && r->element[2]->integer >= 1 &&
            (unsigned)r->element[2]->integer <= to - from)
            op->blocked = from + (unsigned)r->element[2]->integer - 1;
        multi_rollback(op, from);
        return px_wait_on_reply(&op->wait, r, 0);
    }
    if (r->elements != 1 + (size_t)(to - from)) {
        multi_rollback(op, from);
        return px_wait_on_reply(&op->wait, r, 0); /* multi_reply answers -EPROTO */
    }
    for (i = from; i < to; i++)
        op->names[i].count = r->element[1 + i - from]->integer;
    if (to == op->n)
        return px_wait_on_reply(&op->wait, r, 0);
    op->group = to;
    rc = multi_send_group(op);
    if (rc < 0) {
        multi_rollback(op, to);
        px_wait_on_reply(&op->wait, NULL, rc);
    }
}

static int multi_send(struct px_wait_op *w)
{
    struct multiop *op = multiop_of(w);

    op->group = 0;
    op->defer_since = 0;
    return multi_send_group(op);
}

static enum px_wait_res multi_reply(struct px_wait_op *w, const redisReply *r, uint64_t *repoll)
{
    struct multiop *op = multiop_of(w);
    unsigned i;

    if (!multi_reply_ok(r)) {
        px_args_reply_upstream(w->req, -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (r->element[0]->integer != 1) {
        int64_t pttl = r->element[1]->integer;

        *repoll = pttl >= 0 ? (uint64_t)LP_MAX(pttl, 1) : pttl == -1 ? w->srv->opts.watchdog_ms : 1;
        return PX_WAIT_CONTENDED;
    }
    for (i = 0; i < op->n; i++) {
        if (op->names[i].count <= 0) {
            multi_rollback(op, op->n);
            px_args_reply_upstream(w->req, -EPROTO);
            return PX_WAIT_FINISHED;
        }
    }
    return PX_WAIT_GRANTED;
}

static void multi_granted(struct px_wait_op *w)
{
    struct multiop *op = multiop_of(w);
    struct px_req *req = w->req;
    unsigned i;

    w->srv->stats.acquired++;
    px_metrics_observe_wait(w->srv, req);
    for (i = 0; i < op->n; i++)
        px_hold_granted(op->names[i].hold, &px_hold_plain, req->cl, (uint64_t)op->names[i].count,
                        op->lease_ms, op->watchdog, w->sent_ms);
    px_reply_status(px_req_out(req), "OK");
}

/* As lock.c's lockop_undo, for every name: the holds settle back to the
 * counts clients were told. */
static void multi_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct multiop *op = multiop_of(w);
    uint64_t until = sched_loop_now_ms(w->srv->loop) + op->lease_ms;
    unsigned i;

    if (why == PX_UNDO_GONE && w->srv->opts.on_disc != PX_DISCONNECT_RELEASE)
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

    sched_loop_timer_del(w->srv->loop, &op->defer);
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
        if (px_args_parse_ms(req, i + 1, is_lease ? "LEASE" : "WAIT", 0, is_lease ? lease : wait) <
            0)
            return -EINVAL;
    }
    if (*lease == 0) {
        px_reply_error(px_req_out(req), "ERR LEASE must be at least 1 ms");
        return -EINVAL;
    }
    return 0;
}

/* The caller's owner field (the connection's, as LOCK without OWNER). */
static size_t multi_owner(struct px_req *req, char *out)
{
    struct px__lock_args a;
    size_t base;

    memset(&a, 0, sizeof(a));
    return px__lock_owner(req, &a, &px__lock_plain_kind, out, &base);
}

static void multi_cmd_lock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    unsigned n = multi_count_names(req), i;
    int64_t lease, wait;
    struct multiop *op;

    if (multi_check_count(req, n) < 0 || multi_parse_options(req, (int)n + 1, &lease, &wait) < 0)
        return px_req_done(req);
    op = calloc(1, sizeof(*op) + n * sizeof(op->names[0]));
    if (!op) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    op->n = n;
    if (multi_fill_names(req, op->names, n) < 0) {
        free(op);
        return px_req_done(req);
    }
    sched_timer_init(&op->defer, multi_on_defer);
    px_wait_init(&op->wait, &multi_wait_kind, req, wait);
    op->olen = multi_owner(req, op->owner);
    op->watchdog = lease < 0;
    op->lease_ms = op->watchdog ? srv->opts.watchdog_ms : (uint64_t)lease;
    op->wait.lease_ms = op->lease_ms;
    for (i = 0; i < n; i++) {
        struct multi_name *m = &op->names[i];

        m->hold = px_hold_use(srv, &px_hold_plain, m->name, m->nlen, op->owner, op->olen, true);
        if (!m->hold) {
            multi_destroy(&op->wait);
            px_reply_error(px_req_out(req), "ERR out of memory");
            return px_req_done(req);
        }
    }
    px_wait_start(&op->wait);
}

/* ---- MULTIUNLOCK ------------------------------------------------------------- */

struct multiunlock {
    struct px_req *req;       /* borrowed */
    struct sched_timer defer; /* a group waiting for settles of its names */
    uint64_t defer_since;     /* monotonic ms the group was first deferred, or 0 */
    uint64_t sent_ms;         /* monotonic ms the group in flight was sent */
    unsigned n;               /* names */
    unsigned group;           /* first name of the group in flight */
    int err;                  /* an upstream failure of a group, or 0 */
    size_t olen;              /* owner length */
    char owner[PX_OWNER_MAX]; /* owned: owner field */
    struct multi_name names[];
};

static void unlock_free(struct multiunlock *u)
{
    unsigned i;

    sched_loop_timer_del(u->req->cl->srv->loop, &u->defer);
    for (i = 0; i < u->n; i++)
        px_hold_put(u->names[i].hold);
    free(u);
}

/* The one reply: the first name not held (LOCKLOST when its lease was
 * lost, else NOTOWNER), else :1 when every hold is over, :0 otherwise. */
static void unlock_reply(struct multiunlock *u)
{
    struct px_req *req = u->req;
    bool all = true;
    unsigned i;

    if (u->err < 0)
        return px_args_reply_upstream(req, u->err);
    for (i = 0; i < u->n; i++) {
        const struct multi_name *m = &u->names[i];

        if (m->result == -2) {
            px_reply_error(px_req_out(req),
                           "LOCKLOST lease on '%.*s' was lost (expired or taken) before "
                           "MULTIUNLOCK; it was not held any more",
                           (int)LP_MIN(m->nlen, 200u), m->name);
            return;
        }
        if (m->result == -1) {
            px_reply_error(px_req_out(req), "NOTOWNER lock '%.*s' is not held by this owner",
                           (int)LP_MIN(m->nlen, 200u), m->name);
            return;
        }
        all = all && m->result == 1;
    }
    px_reply_int(px_req_out(req), all ? 1 : 0);
}

/* Applies one name's result to its hold. */
static void unlock_apply(struct multiunlock *u, struct multi_name *m, long long res)
{
    struct px_server *srv = u->req->cl->srv;

    if (res == 1) {
        srv->stats.released++;
        if (m->hold)
            px_hold_released(m->hold);
        m->result = 1;
    } else if (res == 0) {
        if (m->hold)
            px_hold_unlocked_one(m->hold, u->sent_ms);
        m->result = 0;
    } else {
        m->result = m->hold && px_hold_not_held(m->hold) ? -2 : -1;
    }
}

static int unlock_send_group(struct multiunlock *u);

static void unlock_finish(struct multiunlock *u)
{
    struct px_req *req = u->req;
    struct px_client *cl = req->cl;

    unlock_reply(u);
    req->op = NULL;
    unlock_free(u);
    px_req_done(req);
    px_client_put(cl);
}

/* Goes on with the next group, or answers. */
static void unlock_next(struct multiunlock *u, unsigned to)
{
    int rc;

    if (to == u->n || u->err < 0)
        return unlock_finish(u);
    u->group = to;
    rc = unlock_send_group(u);
    if (rc < 0) {
        u->err = rc;
        unlock_finish(u);
    }
}

static void unlock_on_group(void *arg, const redisReply *r, int err)
{
    struct multiunlock *u = arg;
    unsigned from = u->group, to = multi_group_end(u->names, u->n, from), i;

    for (i = from; i < to; i++) {
        if (!u->names[i].hold)
            continue;
        if (err < 0)
            px_hold_unlock_unknown(u->names[i].hold); /* did it run? the settle finds out */
    }
    if (err < 0) {
        u->err = err;
    } else if (r->type == REDIS_REPLY_ERROR) {
        px_args_reply_redis_error(u->req, r);
        u->err = 1; /* replied */
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != to - from) {
        u->err = -EPROTO;
    } else {
        for (i = from; i < to; i++) {
            const redisReply *e = r->element[i - from];

            unlock_apply(u, &u->names[i], e->type == REDIS_REPLY_INTEGER ? e->integer : -1);
        }
    }
    for (i = from; i < to; i++) {
        if (u->names[i].hold)
            px_hold_end(u->names[i].hold);
    }
    if (u->err > 0) { /* a Redis error reply was written */
        struct px_req *req = u->req;
        struct px_client *cl = req->cl;

        req->op = NULL;
        unlock_free(u);
        px_req_done(req);
        return px_client_put(cl);
    }
    unlock_next(u, to);
}

static void unlock_on_defer(struct sched_timer *t)
{
    struct multiunlock *u = LP_CONTAINER_OF(t, struct multiunlock, defer);
    int rc = unlock_send_group(u);

    if (rc < 0) {
        u->err = rc;
        unlock_finish(u);
    }
}

/* Sends the group at u->group (names, channels; owner, leases), or defers
 * it while a settle of one of its names is due or in flight. */
static int unlock_send_group(struct multiunlock *u)
{
    struct px_server *srv = u->req->cl->srv;
    unsigned from = u->group, to = multi_group_end(u->names, u->n, from), i, k, nk = to - from;
    const char *argv[4 * PX_MULTI_MAX + 2];
    size_t lens[4 * PX_MULTI_MAX + 2];
    char leases[PX_MULTI_MAX][24], *chans;
    int rc;

    if (!multi_settles_idle(u->names, from, to)) {
        uint64_t now = sched_loop_now_ms(srv->loop);

        if (u->defer_since == 0)
            u->defer_since = now;
        if (now - u->defer_since > MULTI_DEFER_MAX)
            return -ETIMEDOUT;
        sched_loop_timer_in(srv->loop, &u->defer, MULTI_DEFER_MS);
        return 0;
    }
    u->defer_since = 0;
    chans = malloc((size_t)nk * PX_CHANNEL_MAX);
    if (!chans)
        return -ENOMEM;
    for (i = from, k = 0; i < to; i++, k++) {
        const struct multi_name *m = &u->names[i];
        struct px_acq a = {.name = m->name, .nlen = m->nlen};
        const struct px_hold *h = m->hold;

        argv[k] = m->name;
        lens[k] = m->nlen;
        argv[nk + k] = chans + (size_t)k * PX_CHANNEL_MAX;
        lens[nk + k] =
            px__lock_plain_channel(&a, chans + (size_t)k * PX_CHANNEL_MAX, PX_CHANNEL_MAX);
        argv[2 * nk + 1 + k] = leases[k];
        lens[2 * nk + 1 + k] = util_u64_to_str(
            h && px_hold_is_held(h) ? h->lease_ms : srv->opts.watchdog_ms, leases[k]);
    }
    argv[2 * nk] = u->owner;
    lens[2 * nk] = u->olen;
    for (i = from; i < to; i++) {
        if (u->names[i].hold)
            px_hold_begin(u->names[i].hold);
    }
    u->sent_ms = sched_loop_now_ms(srv->loop);
    rc = px_script_eval(srv, px_route_hint(argv[0], lens[0]), multi_script_base + MULTI_UNLOCK,
                        (int)(2 * nk), (int)(3 * nk + 1), argv, lens, unlock_on_group, u);
    free(chans);
    if (rc < 0) {
        for (i = from; i < to; i++) {
            if (u->names[i].hold)
                px_hold_end(u->names[i].hold);
        }
    }
    return rc;
}

static void multi_cmd_unlock(struct px_req *req)
{
    struct px_server *srv = req->cl->srv;
    unsigned n = (unsigned)req->argc - 1, i;
    struct multiunlock *u;
    int rc;

    if (multi_check_count(req, n) < 0)
        return px_req_done(req);
    u = calloc(1, sizeof(*u) + n * sizeof(u->names[0]));
    if (!u) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    u->req = req;
    u->n = n;
    sched_timer_init(&u->defer, unlock_on_defer);
    if (multi_fill_names(req, u->names, n) < 0) {
        free(u);
        return px_req_done(req);
    }
    u->olen = multi_owner(req, u->owner);
    for (i = 0; i < n; i++) {
        struct multi_name *m = &u->names[i];

        m->hold = px_hold_use(srv, &px_hold_plain, m->name, m->nlen, u->owner, u->olen, false);
    }
    rc = unlock_send_group(u);
    if (rc < 0) {
        px_args_reply_upstream(req, rc);
        unlock_free(u);
        return px_req_done(req);
    }
    px_client_get(req->cl);
    req->op = u;
}

/* Both are barriers: the connection's later requests (an UNLOCK of one of
 * the names) go after them. */
static bool multi_may_block(const struct px_req *req)
{
    (void)req;
    return true;
}

static const struct px_cmd multi_cmds[] = {
    {"MULTILOCK", 2, -1, multi_cmd_lock, multi_may_block, 1},
    {"MULTIUNLOCK", 2, -1, multi_cmd_unlock, multi_may_block, 1},
};
const struct px_cmd_set px_multilock_cmd_set = {multi_cmds, LP_ARRAY_SIZE(multi_cmds)};
