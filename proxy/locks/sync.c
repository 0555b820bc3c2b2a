/* px_syncop: the machinery of blocking commands over counting objects
 * (SEM.ACQUIRE, PSEM.ACQUIRE, LATCH.AWAIT), and the argument and reply
 * helpers those modules share.
 *
 * Design.
 *
 * px_syncop states (one op per blocking request):
 *   TRYING    an attempt script is in flight (wait.busy); the op holds a
 *             client reference, so its callback always runs;
 *   JOINING   first failed attempt: the op joins the channel's waitset
 *             (shared subscription) and retries at once if the
 *             subscription is confirmed, else when it is (READY); it
 *             sleeps at once instead when the set was ready before the
 *             first attempt was sent and saw no event since (nothing can
 *             have been missed: px_waitset_snap);
 *   ASLEEP    on the waitset's semaphore, with the timer armed for the
 *             earlier of the safety re-check (PX_SYNC_RECHECK_MS, or the
 *             next permit expiry for PSEM) and the WAIT deadline.
 * A wake-up or the timer moves ASLEEP to TRYING; the deadline ends the op
 * with nil. Invariants: an op is in exactly one state; px_req_done() runs
 * once, after which ops->destroy() has freed the op. The op sits on its
 * connection's owned list from start to finish: when the connection
 * closes, an asleep op ends at once (its reply is dropped); a trying op
 * ends in its callback, which gives back what the attempt took.
 *
 */
#include "proxy/locks/sync.h"

#include <errno.h>
#include <stdlib.h>

#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/locks/lock.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define CHAN_CAP (PX_NAME_MAX + 64u) /* wake channel buffer */

uint64_t px_sync_waiting_count[PX_SYNC_KINDS];
uint64_t px_sync_timeout_count[PX_SYNC_KINDS];

/* ---- replies and arguments ------------------------------------------------ */

void px_sync_reply_upstream(struct px_req *req, int err)
{
    if (err != -ENOMEM)
        return px_args_reply_upstream(req, err);
    req->cl->srv->stats.upstream_errs++;
    px_reply_error(px_req_out(req), "ERR out of memory");
}

bool px_sync_wait_zero(const struct px_req *req)
{
    int i;

    for (i = 2; i + 1 < req->argc; i++) {
        const struct px_arg *o = &req->argv[i], *v = &req->argv[i + 1];

        if (px_args_is(o, "WAIT") && v->len == 1 && v->p[0] == '0')
            return true;
    }
    return false;
}

/* ---- simple commands: one script, one reply ----------------------------- */

struct sync_call {
    struct px_req *req;    /* borrowed: the request being answered */
    px_sync_reply_fn *fmt; /* borrowed: formats the script's reply */
};

static void call_on_reply(void *arg, const redisReply *r, int err)
{
    struct sync_call *c = arg;
    struct px_req *req = c->req;
    struct px_client *cl = req->cl;

    if (err < 0)
        px_sync_reply_upstream(req, err);
    else if (r->type == REDIS_REPLY_ERROR)
        px_args_reply_redis_error(req, r);
    else
        c->fmt(req, r);
    req->op = NULL;
    free(c);
    px_req_done(req);
    px_client_put(cl);
}

void px_sync_call(struct px_req *req, unsigned script, int numkeys, int argc,
                  const char *const *argv, const size_t *lens, px_sync_reply_fn *fmt)
{
    struct sync_call *c = malloc(sizeof(*c));
    int rc;

    if (!c) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    c->req = req;
    c->fmt = fmt;
    rc = px_metrics_eval(req->cl->srv, req->cl->id, script, numkeys, argc, argv, lens,
                         call_on_reply, c);
    if (rc < 0) {
        free(c);
        px_sync_reply_upstream(req, rc);
        return px_req_done(req);
    }
    req->op = c;
    px_client_get(req->cl);
}

void px_sync_reply_int(struct px_req *req, const redisReply *r)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return px_sync_reply_upstream(req, -EPROTO);
    px_reply_int(px_req_out(req), r->integer);
}

/* ---- px_syncop: blocking commands ----------------------------------------- */

static void sync_try(struct px_syncop *op);

static void sync_finish(struct px_syncop *op)
{
    struct px_req *req = op->req;

    sched_loop_timer_del(op->srv->loop, &op->timer);
    if (op->set) {
        px_waitset_leave(op->set, &op->wait);
        px_sync_waiting_count[op->ops->kind]--;
    }
    list_del_init(&op->owned.node);
    req->op = NULL;
    op->ops->destroy(op);
    px_req_done(req);
}

static void sync_fail(struct px_syncop *op, int err)
{
    px_sync_reply_upstream(op->req, err);
    sync_finish(op);
}

static void sync_timeout(struct px_syncop *op)
{
    if (op->deadline != 0)
        px_sync_timeout_count[op->ops->kind]++;
    px_reply_nil(px_req_out(op->req));
    sync_finish(op);
}

static void sync_on_timer(struct sched_timer *t)
{
    struct px_syncop *op = LP_CONTAINER_OF(t, struct px_syncop, timer);

    px_waitset_wake_cancel(op->set, &op->wait);
    if (sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return sync_timeout(op);
    sync_try(op);
}

static void sync_on_wake(struct px_wait *w)
{
    struct px_syncop *op = LP_CONTAINER_OF(w, struct px_syncop, wait);

    sched_loop_timer_del(op->srv->loop, &op->timer);
    sync_try(op);
}

/* The connection closed: an asleep op ends now; a trying one in its
 * callback (which sees cl->closing). */
static void sync_on_gone(struct px_owned *o, struct px_client *cl)
{
    struct px_syncop *op = LP_CONTAINER_OF(o, struct px_syncop, owned);

    (void)cl;
    if (!op->wait.busy)
        sync_finish(op);
}

/* Time to the next re-check: the hint (if any, at least 1 ms), at most
 * PX_SYNC_RECHECK_MS, never past the deadline. */
static uint64_t sync_delay(const struct px_syncop *op, uint64_t hint_ms)
{
    uint64_t now = sched_loop_now_ms(op->srv->loop);
    uint64_t delay = PX_SYNC_RECHECK_MS;

    if (hint_ms > 0 && hint_ms < delay)
        delay = hint_ms;
    if (op->deadline != PX_SYNC_FOREVER && op->deadline - now < delay)
        delay = op->deadline - now;
    return delay;
}

static void sync_sleep(struct px_syncop *op, uint64_t hint_ms)
{
    if (px_waitset_sleep(op->set, &op->wait))
        return sync_try(op);
    sched_loop_timer_in(op->srv->loop, &op->timer, sync_delay(op, hint_ms));
}

/* An attempt could not succeed yet: wait, joining the channel first. */
static void sync_wait(struct px_syncop *op, uint64_t hint_ms)
{
    char chan[CHAN_CAP];
    size_t chlen;

    if (op->req->cl->closing)
        return sync_finish(op);
    if (op->deadline == 0 || sched_loop_now_ms(op->srv->loop) >= op->deadline)
        return sync_timeout(op);
    if (op->set)
        return sync_sleep(op, hint_ms);
    chlen = op->ops->channel(op, chan, sizeof(chan));
    if (chlen > 0)
        op->set = px_waitset_join_mode(op->srv, chan, chlen, &op->wait, op->ops->wake);
    if (!op->set)
        return sync_fail(op, -ENOMEM);
    px_sync_waiting_count[op->ops->kind]++;
    if (px_waitset_unchanged(op->set, &op->snap))
        return sync_sleep(op, hint_ms); /* subscribed all along, no event since: nothing missed */
    if (op->set->ready)
        return sync_try(op); /* subscribed before this retry: no wake-up can be missed */
    /* Otherwise READY triggers the retry; the timer covers a lost subscribe. */
    sched_loop_timer_in(op->srv->loop, &op->timer, sync_delay(op, hint_ms));
}

static void sync_on_reply(void *arg, const redisReply *r, int err)
{
    struct px_syncop *op = arg;
    struct px_client *cl = op->req->cl;
    uint64_t hint_ms = 0;

    op->wait.busy = false;
    if (err < 0) {
        sync_fail(op, err);
    } else if (r->type == REDIS_REPLY_ERROR) {
        px_args_reply_redis_error(op->req, r);
        sync_finish(op);
    } else if (op->ops->done(op, r, &hint_ms) == PX_SYNC_DONE) {
        sync_finish(op);
    } else {
        sync_wait(op, hint_ms);
    }
    px_client_put(cl);
}

int px_sync_eval(struct px_syncop *op, unsigned script, int numkeys, int argc,
                 const char *const *argv, const size_t *lens)
{
    return px_metrics_eval(op->srv, op->req->cl->id, script, numkeys, argc, argv, lens,
                           sync_on_reply, op);
}

static void sync_try(struct px_syncop *op)
{
    int rc = op->ops->send(op);

    if (rc < 0)
        return sync_fail(op, rc);
    op->wait.busy = true;
    px_client_get(op->req->cl);
}

/* Records the channel's waitset before the first attempt, so that a
 * failed attempt can sleep at once if nothing happened on it since. */
static void sync_snap(struct px_syncop *op)
{
    char chan[CHAN_CAP];
    size_t chlen = op->ops->channel(op, chan, sizeof(chan));

    px_waitset_snap(op->srv, chan, chlen, &op->snap);
}

void px_sync_start(struct px_syncop *op, struct px_req *req, int64_t wait_ms)
{
    struct px_server *srv = req->cl->srv;

    op->req = req;
    op->srv = srv;
    op->set = NULL;
    px_wait_init(&op->wait, sync_on_wake);
    list_init(&op->owned.node);
    op->owned.gone = sync_on_gone;
    sched_timer_init(&op->timer, sync_on_timer);
    if (wait_ms == 0)
        op->deadline = 0;
    else if (wait_ms < 0)
        op->deadline = PX_SYNC_FOREVER;
    else
        op->deadline = sched_loop_now_ms(srv->loop) + (uint64_t)wait_ms;
    op->snap.gen = 0;
    if (op->deadline != 0)
        sync_snap(op);
    req->op = op;
    px_client_own(req->cl, &op->owned);
    sync_try(op);
}
