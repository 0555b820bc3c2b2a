/* SEM.*: Redisson's RSemaphore (spec section 6): a STRING count at the raw
 * name, woken on redisson_sc:{name}.
 *
 * Permits taken through the proxy (not with KEEP) are tracked, so that
 * those of a connection that closes go back (Redisson leaks them), and
 * recorded in Redis beside the count, so that a failover cannot make
 * permits out of nothing: sem_track.c has the design. A semaphore has no
 * owner: anyone may release permits, also permits someone else took (as in
 * Redisson). A return goes only to a semaphore that still exists (a
 * deleted one is not re-created); it is a retried job (semaphore.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/jobs.h"
#include "engine/scripts.h"
#include "engine/sem_reap.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/call.h"
#include "proxy/cmds/sem-int.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- SEM.TRYSETPERMITS / ADDPERMITS / RELEASE / AVAILABLE / DRAIN ---------- */

/* Runs a SEM (psem false: keys {name, chan}, or the first nkeys of them)
 * or PSEM (psem true: keys {name, zset, chan}; nkeys 0) script with at
 * most two arguments (sem-int.h). */
void px__sem_simple(struct px_req *req, enum px__sem_script s, bool psem, int nkeys, const char *a1,
                    size_t l1, const char *a2, size_t l2, px_call_reply_fn *fmt)
{
    struct px__sem_keys k;
    int nk = px__sem_keys_fill(&k, req->argv[1].p, req->argv[1].len, psem);
    int argc;

    if (nkeys > 0 && nkeys < nk)
        nk = nkeys;
    argc = nk;
    if (a1)
        px__sem_keys_arg(&k, argc++, a1, l1);
    if (a2)
        px__sem_keys_arg(&k, argc++, a2, l2);
    px_call_script(req, px_route_hint(req->argv[1].p, req->argv[1].len),
                   px__sem_script(req->cl->srv->engine, s), nk, argc, k.argv, k.lens, fmt);
}

void px__sem_cmd_trysetpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    px__sem_simple(req, PX__SEM_TRYSET, false, 2, nb,
                   (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL, 0,
                   px_call_reply_int);
}

void px__sem_cmd_addpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        px_args_parse_count(req, 2, "permits", -(int64_t)PX_ARGS_MAX_COUNT, &n) < 0)
        return px_req_done(req);
    px__sem_simple(req, PX__SEM_ADD, false, 2, nb,
                   (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL, 0,
                   px_call_reply_int);
}

/* A release in flight (px_call_script_own's arg). */
struct sem_rel {
    struct px__sem_own own; /* what the script was told */
    int64_t n;              /* permits released */
    uint64_t seq;           /* its number (_sem_once.lua) */
};

/* ---- a release Redis did not answer, carried out by the proxy ---------------- */

/* A SEM.RELEASE that could not be sent, or whose reply was lost, is the
 * proxy's to carry out (issue 22): a retried job (jobs.h) that sends it
 * again, with back-off, until Redis answers, for PX__SEM_RETURN_WINDOW_MS
 * at most (a semaphore permit has no lease that would end it anyway).
 *
 * Adding permits is not idempotent: every release is numbered (one
 * counter per process, so a connection's numbers grow in the order it
 * sends), and the script records, per connection, the last number it
 * ran (_sem_once.lua); a number at or below it ran already and adds
 * nothing. That holds as long as a connection's releases of one name run
 * in number order: while one of them is carried out, the connection's
 * later releases of that name are carried out too (not sent directly,
 * answered +INHAND), each job sent only once the one before it is done
 * (carry_ready). The caller's own permits come off its record in the same
 * script, so a close that returns the record meanwhile returns none of
 * them twice. Known gap: while an upstream connection reconnects a later
 * release may overtake one whose reply is still pending (README, Order);
 * if that earlier one had not run, the numbering then skips it. */
struct sem_carry {
    struct px_job job; /* the retried release */
    struct list node;  /* in engine->sem_carries, oldest (lowest number) first */
    uint64_t conn;     /* the releasing connection (its ledger field) */
    uint64_t seq;      /* the release's number */
    int64_t n;         /* permits released */
    int64_t own;       /* of n, the connection's own as the proxy counted them */
    size_t nlen;       /* name length */
    char name[];       /* owned: the semaphore name */
};

static bool carry_same(const struct sem_carry *c, uint64_t conn, const char *name, size_t len)
{
    return c->conn == conn && c->nlen == len && memcmp(c->name, name, len) == 0;
}

/* The oldest pending carried-out release of (conn, name) (in
 * eng->sem_carries), or NULL. */
static struct sem_carry *carry_first(const struct lk_engine *eng, uint64_t conn, const char *name,
                                     size_t len)
{
    const struct list *n;

    for (n = eng->sem_carries.next; n != &eng->sem_carries; n = n->next) {
        struct sem_carry *c = LP_CONTAINER_OF(n, struct sem_carry, node);

        if (carry_same(c, conn, name, len))
            return c;
    }
    return NULL;
}

/* Sent only once the ones before it of the same connection and name are
 * done (so they run in number order). */
static bool carry_ready(const struct px_job *j)
{
    const struct sem_carry *c = LP_CONTAINER_OF(j, struct sem_carry, job);

    return carry_first(j->eng, c->conn, c->name, c->nlen) == c;
}

static int carry_send(struct px_job *j, pool_reply_fn *cb, void *arg);
static void carry_done(struct px_job *j, const struct pool_reply *r);
static void carry_dropped(struct px_job *j, enum px_job_drop why);

static const struct px_job_ops sem_carry_ops = {
    .what = "SEM.RELEASE carried out after Redis did not answer it",
    .group = PX_JOB_RELEASE,
    .idempotent = true, /* numbered: a resend that ran adds nothing */
    .ready = carry_ready,
    .send = carry_send,
    .done = carry_done,
    .dropped = carry_dropped,
};

/* Fills k (and the buffers) with a numbered release of n permits of name
 * by connection conn, own of them its own; returns the argument count. */
struct rel_bufs {
    char done[PX__SEM_LEDGER_MAX + 16], nb[24], conn[24], own[24], seq[24];
};

static int release_keys(struct px__sem_keys *k, struct rel_bufs *b, struct px_server *srv,
                        const char *name, size_t len, uint64_t conn, int64_t n, int64_t own,
                        uint64_t seq)
{
    size_t dlen = px_channel_name(b->done, PX_CHANNEL_MAX, "", name, len);

    dlen += (size_t)snprintf(b->done + dlen, sizeof(b->done) - dlen, ":lp-released:%s", srv->uuid);
    px__sem_keys_fill(k, name, len, false);
    px__sem_keys_ledger(k, 2, srv->engine, name, len);
    px__sem_keys_arg(k, 3, b->done, dlen);
    px__sem_keys_arg(k, 4, b->nb, (size_t)snprintf(b->nb, sizeof(b->nb), "%lld", (long long)n));
    px__sem_keys_arg(k, 5, "0", 1);
    px__sem_keys_arg(k, 6, b->conn,
                     (size_t)snprintf(b->conn, sizeof(b->conn), "%llu", (unsigned long long)conn));
    px__sem_keys_arg(k, 7, b->own,
                     (size_t)snprintf(b->own, sizeof(b->own), "%lld", (long long)own));
    px__sem_keys_arg(k, 8, b->seq,
                     (size_t)snprintf(b->seq, sizeof(b->seq), "%llu", (unsigned long long)seq));
    return 9;
}

static int carry_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct sem_carry *c = LP_CONTAINER_OF(j, struct sem_carry, job);
    struct px__sem_keys k;
    struct rel_bufs b;
    int argc =
        release_keys(&k, &b, px_server_of(j->eng), c->name, c->nlen, c->conn, c->n, c->own, c->seq);

    return px_script_eval(j->eng, px_route_hint(c->name, c->nlen),
                          px__sem_script(j->eng, PX__SEM_RELEASE), 4, argc, k.argv, k.lens, cb,
                          arg);
}

/* The next pending one of the same connection and name may go now. */
static void carry_finish(struct sem_carry *c)
{
    struct sem_carry *next;

    list_del_init(&c->node);
    next = carry_first(c->job.eng, c->conn, c->name, c->nlen);
    if (next)
        px_job_soon(&next->job);
    free(c);
}

/* {1, count, lost, left}, {3, count, 0, 0} (it had run), or an error. */
static void carry_done(struct px_job *j, const struct pool_reply *r)
{
    struct sem_carry *c = LP_CONTAINER_OF(j, struct sem_carry, job);
    long long v[4];
    size_t n;

    if (r->type == POOL_REPLY_ERROR)
        log_msg(LOG_LVL_WARN, "releasing %lld permits of '%.*s' (carried out) failed: %.*s",
                (long long)c->n, (int)LP_MIN(c->nlen, 200u), c->name, (int)LP_MIN(r->len, 200u),
                r->str);
    else if (px_shape_ints(r, 4, 4, v, &n) && v[0] == 1 && v[2] > 0)
        j->eng->sem_stats.sem_lost += (uint64_t)v[2];
    carry_finish(c);
}

static void carry_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    carry_finish(LP_CONTAINER_OF(j, struct sem_carry, job));
}

/* Queues req's release (x) as a carried-out one; false on -ENOMEM. */
static bool carry_submit(struct px_req *req, const struct sem_rel *x)
{
    const struct px_arg *name = &req->argv[1];
    struct px_server *srv = req->cl->srv;
    struct sem_carry *c = calloc(1, sizeof(*c) + name->len + 1);

    if (!c)
        return false;
    c->conn = req->cl->id;
    c->seq = x->seq;
    c->n = x->n;
    c->own = x->own.own;
    c->nlen = name->len;
    memcpy(c->name, name->p, name->len);
    list_add_tail(&srv->engine->sem_carries, &c->node);
    px_job_init(&c->job, srv->engine, &sem_carry_ops);
    px_job_submit(&c->job, sched_loop_now_ms(srv->loop) + PX__SEM_RETURN_WINDOW_MS);
    srv->engine->stats.unlocks_in_hand++;
    return true;
}

/* ---- SEM.RELEASE ------------------------------------------------------------------ */

static void release_lost_reply(struct px_req *req, long long lost, long long count)
{
    const struct px_arg *name = &req->argv[1];
    uint64_t quiet;

    req->cl->srv->engine->sem_stats.sem_lost += (uint64_t)lost;
    if (px_ratelog_allow(&req->cl->srv->engine->sem_lost_log, sched_loop_now_ms(req->cl->srv->loop),
                         &quiet))
        log_msg(LOG_LVL_WARN,
                "%lld permits of '%.*s' connection %llu held were not recorded by Redis (a "
                "failover or a restart lost them); told at its SEM.RELEASE (%llu similar not "
                "logged)",
                lost, (int)LP_MIN(name->len, 200u), name->p, (unsigned long long)req->cl->id,
                (unsigned long long)quiet);
    px_reply_error(px_req_out(req),
                   "LOCKLOST %lld permit(s) this connection held of '%.*s' were lost: Redis no "
                   "longer records them (a failover to a replica that missed them, or a restart "
                   "without persistence), so they were free already and were not added again; "
                   "the count is %lld",
                   lost, (int)LP_MIN(name->len, 200u), name->p, count);
}

/* {1, count, lost, left} (or {0, 0, 0, 0}: the key was gone) -> the new
 * count, or LOCKLOST when own permits were lost (sem_track.c); Redis
 * errors are answered already. Not sent, or its reply lost: carried out
 * by the proxy (+INHAND). The tracking follows what Redis did (a
 * carried-out release: maybe applied, so the record says what goes back
 * at close). */
static void release_done(struct px_req *req, void *arg, const struct pool_reply *r, int err)
{
    struct sem_rel *x = arg;
    const struct px_arg *name = &req->argv[1];
    enum px__sem_outcome out = PX__SEM_NOT_APPLIED;
    long long v[4] = {0, 0, 0, 0};
    size_t n;

    if (!r && err != -ENOMEM && carry_submit(req, x)) {
        out = PX__SEM_MAYBE_APPLIED;
        px_reply_status(px_req_out(req), "INHAND");
    } else if (!r && err != -ENOMEM) {
        out = err == -ENOTCONN ? PX__SEM_NOT_APPLIED : PX__SEM_MAYBE_APPLIED;
        px_wait_reply_upstream(req, err);
    } else if (r && r->type != POOL_REPLY_ERROR && !px_shape_ints(r, 4, 4, v, &n)) {
        out = PX__SEM_MAYBE_APPLIED;
        px_wait_reply_upstream(req, -EPROTO);
    } else if (r && r->type != POOL_REPLY_ERROR) {
        out = PX__SEM_APPLIED; /* {3, count, ..}: its resend ran first */
        if (v[2] > 0)
            release_lost_reply(req, v[2], v[1]);
        else
            px_reply_int(px_req_out(req), v[1]);
    }
    px__sem_release_end(&req->cl->caller, name->p, name->len, x->n, &x->own, out, v[3]);
    free(x);
}

void px__sem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    struct px_server *srv = req->cl->srv;
    struct px__sem_keys k;
    struct rel_bufs b;
    struct sem_rel *x;
    int64_t n = 1;
    int argc;

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        (req->argc > 2 && px_args_parse_count(req, 2, "permits", 1, &n) < 0))
        return px_req_done(req);
    if (!(x = calloc(1, sizeof(*x)))) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    x->n = n;
    x->seq = ++req->cl->srv->engine->sem_release_seq;
    px__sem_release_begin(&req->cl->caller, name->p, name->len, n, &x->own);
    if (carry_first(req->cl->srv->engine, req->cl->id, name->p, name->len)) {
        /* An earlier release of this connection is carried out: this one
         * goes behind it, so the two run in number order. */
        release_done(req, x, NULL, -ENOTCONN);
        return px_req_done(req);
    }
    argc = release_keys(&k, &b, srv, name->p, name->len, req->cl->id, n, x->own.own, x->seq);
    px_call_script_own(req, px_route_hint(name->p, name->len),
                       px__sem_script(req->cl->srv->engine, PX__SEM_RELEASE), 4, argc, k.argv,
                       k.lens, release_done, x);
}

void px__sem_cmd_available(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    px__sem_simple(req, PX__SEM_AVAILABLE, false, 1, NULL, 0, NULL, 0, px_call_reply_int);
}

void px__sem_cmd_drain(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    px__sem_simple(req, PX__SEM_DRAIN, false, 1, NULL, 0, NULL, 0, px_call_reply_int);
}

/* ---- SEM.ACQUIRE / SEM.TRYACQUIRE ---------------------------------------- */

/* An acquire in progress (req->op). */
struct semop {
    struct px_wait_op wait; /* the engine's part */
    int64_t permits;        /* how many to take */
    uint64_t conn;          /* the taking connection's id (its ledger field) */
    bool keep;              /* KEEP: not returned on disconnect, not in the ledger */
};

static struct semop *semop_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct semop, wait);
}

static size_t semop_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    return px__sem_channel(px_wait_req(w)->argv[1].p, px_wait_req(w)->argv[1].len, out, cap);
}

static int semop_send(struct px_wait_op *w)
{
    struct semop *s = semop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];
    struct px__sem_keys k;
    char n[24], conn[24];
    size_t nlen = (size_t)snprintf(n, sizeof(n), "%lld", (long long)s->permits);
    uint64_t hint = px_route_hint(name->p, name->len);

    px__sem_keys_arg(&k, 0, name->p, name->len);
    if (s->keep) {
        px__sem_keys_arg(&k, 1, n, nlen);
        return px_wait_eval(w, hint, px__sem_script(w->eng, PX__SEM_ACQUIRE), 1, 2, k.argv, k.lens);
    }
    px_sem_reap_register(w->eng, name->p, name->len); /* before its first ledger entry */
    px__sem_keys_ledger(&k, 1, w->eng, name->p, name->len);
    px__sem_keys_arg(&k, 2, n, nlen);
    px__sem_keys_arg(&k, 3, conn,
                     (size_t)snprintf(conn, sizeof(conn), "%llu", (unsigned long long)s->conn));
    return px_wait_eval(w, hint, px__sem_script(w->eng, PX__SEM_ACQUIRE), 2, 4, k.argv, k.lens);
}

static enum px_wait_res semop_reply(struct px_wait_op *w, const struct pool_reply *r,
                                    uint64_t *repoll)
{
    long long status, value;

    (void)repoll;
    if (!px__sem_pair_reply(r, &status, &value)) {
        px_wait_reply_upstream(px_wait_req(w), -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (status < 0) {
        px__sem_reply_notinit(px_wait_req(w));
        return PX_WAIT_FINISHED;
    }
    if (status == 1)
        w->eng->sem_stats.sem_acquired += (uint64_t)semop_of(w)->permits;
    return status == 1 ? PX_WAIT_GRANTED : PX_WAIT_CONTENDED;
}

static void semop_granted(struct px_wait_op *w)
{
    struct semop *s = semop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];

    if (!s->keep)
        px__sem_track_add(&px_wait_req(w)->cl->caller, name->p, name->len, s->permits, false);
    px_reply_status(px_req_out(px_wait_req(w)), "OK");
}

/* Permits have no lease (never LATE). A grant for a closed connection goes
 * back (what the ledger records for it). An unknown outcome, or a grant
 * fewer replicas than --sync-replicas acknowledged, is not given back at
 * once (the count has no owner: the master that applied it may be
 * replaced by a replica that never saw it, and a blind return would add
 * permits nobody took; the Sentinel torture run saw 7 of 3): the taker
 * turns unsure, and what the ledger of the master then records goes back
 * when the connection closes (a SEM.RELEASE by the client does not take
 * them off the record: see the known gaps in sem_track.c). Counted and
 * logged. */
static void semop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct semop *s = semop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];
    uint64_t quiet;

    if (why == PX_UNDO_GONE && !s->keep)
        px__sem_return_taken(w->eng, name->p, name->len, s->conn, 0, 0);
    if (why != PX_UNDO_UNKNOWN && why != PX_UNDO_UNREPLICATED)
        return;
    w->eng->sem_stats.sem_unknown++;
    if (!s->keep && px_wait_req(w)->cl->closing)
        px__sem_return_taken(w->eng, name->p, name->len, s->conn, 0, 0);
    else if (!s->keep)
        px__sem_track_add(&px_wait_req(w)->cl->caller, name->p, name->len, 0, true);
    if (px_ratelog_allow(&w->eng->sem_unknown_log, sched_loop_now_ms(w->eng->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "SEM.ACQUIRE of %lld permits of '%.*s': %s; if Redis applied it, the permits "
                "stay taken until released or (not KEEP) the connection closes (%llu similar "
                "not logged)",
                (long long)s->permits, (int)LP_MIN(name->len, 200u), name->p,
                why == PX_UNDO_UNKNOWN ? "outcome unknown" : "not replicated, refused",
                (unsigned long long)quiet);
}

static void semop_destroy(struct px_wait_op *w)
{
    free(semop_of(w));
}

static const struct px_wait_kind semop_kind = {
    .name = "semaphore",
    .wake = PX_WAKE_COUNT,
    .stat = PX_WAIT_STAT_SEM,
    .channel = semop_channel,
    .queue_behind = NULL,
    .send = semop_send,
    .attempt_done = NULL,
    .reply = semop_reply,
    .granted = semop_granted,
    .undo = semop_undo,
    .give_up = NULL,
    .destroy = semop_destroy,
};

static void sem_acquire_start(struct px_req *req, bool wait_ok)
{
    struct px__sem_acquire_args a;
    struct semop *s;

    if (px__sem_parse_acquire(req, true, wait_ok, false, &a) < 0)
        return px_req_done(req);
    s = calloc(1, sizeof(*s));
    if (!s) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    s->permits = a.permits;
    s->conn = req->cl->id;
    s->keep = a.keep;
    px_cmd_wait_init(&s->wait, &semop_kind, req, wait_ok ? a.wait_ms : 0);
    px_cmd_wait_start(&s->wait);
}

void px__sem_cmd_acquire(struct px_req *req)
{
    sem_acquire_start(req, true);
}

void px__sem_cmd_tryacquire(struct px_req *req)
{
    sem_acquire_start(req, false);
}
