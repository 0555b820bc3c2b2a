/* The wait engine; see wait.h for the contract.
 *
 * DESIGN
 *
 * One op per waiting request. States (op->state) and transitions:
 *
 *   NEW ------ send -----------------------------> TRYING
 *   NEW ------ queue behind this proxy's waiters -> ASLEEP
 *   TRYING --- contended, set unchanged ---------> ASLEEP   (joined; nothing was missed)
 *   TRYING --- contended, set ready -------------> RETRYING (joined; retry at once)
 *   TRYING --- contended, set not ready ---------> JOINING  (joined; READY retries)
 *   JOINING -- READY, timer ---------------------> RETRYING
 *   ASLEEP --- wake-up, READY, timer ------------> RETRYING (timer past the deadline: DONE, nil)
 *   ASLEEP --- local hand-off (unlock.c) --------> GRANTING
 *   RETRYING, GRANTING -- wake-up, READY --------> WOKEN
 *   RETRYING, GRANTING, WOKEN -- contended ------> ASLEEP, or RETRYING at once if WOKEN
 *   in flight -- granted, finished, error -------> DONE
 *   in flight -- granted too late ---------------> undo; BACKOFF (WAIT left) or DONE
 *   BACKOFF --- timer ---------------------------> a new attempt (past the deadline: DONE)
 *   BACKOFF --- READY ---------------------------> BACKOFF (the attempt at the timer covers it)
 *   in flight -- granted, not replicated --------> undo; DONE (NOREPLICAS)
 *   JOINING, ASLEEP, BACKOFF -- connection closed -> DONE (reply dropped)
 *
 * "In flight" is TRYING, RETRYING, GRANTING and WOKEN: an attempt (or a
 * grant sent by someone else) whose reply is pending.
 *
 * Invariants:
 * - The finish (kind->finish, else engine->front.wait_finish) runs exactly
 *   once per op, when it reaches DONE: it writes the reply the end calls
 *   for (the engine writes none: command code speaks RESP), frees the op
 *   (kind->destroy) and ends the request.
 * - In flight, the op holds a client reference, so the reply always finds
 *   it. The connection closing never ends an op in flight; its reply does
 *   (and a grant that comes then is given back: kind->undo(GONE)).
 * - A member (JOINING onward) is queued on its set's semaphore exactly in
 *   ASLEEP, RETRYING and GRANTING. It stays queued while its attempt is in
 *   flight, so a wake-up that lands between the attempt's run in Redis and
 *   its reply is never lost, whatever the message ("1" wakes only queued
 *   members and keeps no permit; "0" or a count hands the permit over): it
 *   turns the op WOKEN, and a contended reply then retries at once instead
 *   of sleeping. READY reaches every member, in flight or not.
 *   Rejected: leaving the semaphore during the flight (what semaphores and
 *   latches used to do): it loses exactly that "1", and stored permits
 *   cannot stand in for it.
 * - A first attempt goes before joining. A contended op then retries once
 *   when its subscription is confirmed (closing the release-before-
 *   subscribe race), unless the set was ready when the attempt was sent and
 *   saw no event since (px_waitset_unchanged): then nothing can have been
 *   missed, and it sleeps at once (a contended acquisition costs about one
 *   script).
 * - Every sleep has a timer: the re-poll time the kind reported (for locks
 *   the holder's lease end: a missed message costs latency, never a hang),
 *   else PX_WAIT_RECHECK_MS, never past the WAIT deadline.
 * - Validity (Redlock's check, for every kind with a lease): a grant is
 *   used only if more than px_wait_margin_ms(lease) of the lease it asked
 *   for is left when the reply is handled, counted from when the attempt
 *   was sent: sent_ms is the loop's time at the send (no later than the
 *   write), and the check reads the clock afresh (a process that was
 *   stopped sees the time that passed). A late grant is undone
 *   (kind->undo(LATE): exactly this acquisition) and counted; a waiting
 *   command with WAIT left tries again after a back-off (BACKOFF:
 *   PX_WAIT_BACKOFF_MS, doubling per late grant of the op up to
 *   PX_WAIT_BACKOFF_MAX_MS, never past WAIT; the op leaves its set's queue
 *   meanwhile, so the give-back's own message wakes the next waiter, not
 *   it, and nothing cuts the back-off short), any other is
 *   answered as an unconfirmed outcome. Rejected: retrying at once, which
 *   with a lease Redis cannot answer within turned one client into a hot
 *   loop of acquires and give-backs (issue 18: 35,600 scripts/s). Kinds
 *   without a lease (lease_ms 0: SEM permits, latches) need no check: what they take does not run
 * out by itself, so a reply that comes late grants exactly what an early one would.
 * - Replication (--sync-replicas N, repl.h): a grant whose WAIT counted
 *   fewer than N replicas is undone (kind->undo(UNREPLICATED): exactly this
 *   acquisition, as for a late one), counted, logged, and answered
 *   NOREPLICAS at once, WAIT left or not: with replicas missing, another
 *   attempt would most likely cost another --sync-timeout for nothing.
 *   Only grants are checked: a contended attempt granted nothing.
 * - An op that ends without a grant calls kind->give_up (a fair lock's
 *   queue entry); one whose outcome is unknown first calls
 *   kind->undo(UNKNOWN), which makes the kind find out and roll back.
 *
 * Who frees what: the kind allocates the structure embedding the op and
 * frees it in destroy(), called once, in DONE. The op owns its set
 * membership (left in DONE) and its timer; sets belong to waitset.c. */
#include "engine/wait.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hmap.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "engine/repl.h"
#include "engine/scripts.h"
#include "sched/loop.h"

_Static_assert(PX_WAIT_STATS == LK_WAIT_STATS, "engine.h's LK_WAIT_STATS follows wait.h");

static void wait_try(struct px_wait_op *op);

/* ---- helpers --------------------------------------------------------------- */

uint64_t px_route_hint(const char *name, size_t nlen)
{
    return hash_bytes(name, nlen);
}

uint64_t px_wait_margin_ms(uint64_t lease_ms)
{
    return lease_ms / 100 + 2;
}

uint64_t px_wait_waiting(const struct lk_engine *eng, enum px_wait_stat stat)
{
    return eng->stats.waiting[stat];
}

uint64_t px_wait_timeouts(const struct lk_engine *eng, enum px_wait_stat stat)
{
    return eng->stats.wait_timeouts[stat];
}

bool px_wait_may_wait(const struct px_wait_op *op)
{
    return op->deadline != 0;
}

static uint64_t now_ms(const struct px_wait_op *op)
{
    return sched_loop_now_ms(op->eng->loop);
}

/* Time to the next re-check: repoll_ms, never past the deadline. */
static uint64_t wait_delay(const struct px_wait_op *op, uint64_t repoll_ms)
{
    uint64_t now = now_ms(op);

    if (op->deadline != PX_WAIT_FOREVER && op->deadline - now < repoll_ms)
        return op->deadline > now ? op->deadline - now : 0;
    return repoll_ms;
}

/* ---- the end ---------------------------------------------------------------- */

/* DONE: leaves everything, then the kind's finish writes the reply for
 * end, frees the op and ends the request. granted: the op got (and used
 * or undid) a grant, so waiting left nothing to give up. */
static void wait_end(struct px_wait_op *op, bool granted, enum lk_end end,
                     const struct lk_end_info *info)
{
    static const struct lk_end_info none = {NULL, 0, -1};
    lk_wait_finish_fn *finish = op->kind->finish ? op->kind->finish : op->eng->front.wait_finish;

    op->state = PX_WAIT_DONE;
    sched_loop_timer_del(op->eng->loop, &op->timer);
    if (op->set) {
        px_waitset_leave_passing_on(op->set, &op->member, granted);
        op->eng->stats.waiting[op->kind->stat]--;
    }
    list_del_init(&op->client_node);
    if (!granted && op->kind->give_up)
        op->kind->give_up(op);
    finish(op, end, info ? info : &none);
}

/* The kind wrote the reply (or it is dropped). */
static void wait_finish(struct px_wait_op *op, bool granted)
{
    wait_end(op, granted, LK_END_REPLIED, NULL);
}

static void wait_fail(struct px_wait_op *op, int err)
{
    struct lk_end_info info = {NULL, err, -1};

    wait_end(op, false, LK_END_UPSTREAM, &info);
}

/* Nothing granted within WAIT (or in the one attempt): nil. */
static void wait_timeout(struct px_wait_op *op)
{
    if (op->deadline != 0) {
        op->eng->stats.wait_timeouts[op->kind->stat]++;
        if (op->kind->stat == PX_WAIT_STAT_LOCK)
            op->eng->stats.timeouts++;
    }
    wait_end(op, false, LK_END_TIMEOUT, NULL);
}

/* ---- sleeping --------------------------------------------------------------- */

static void wait_reply_late(struct px_wait_op *op);

static void wait_on_timer(struct sched_timer *t)
{
    struct px_wait_op *op = LP_CONTAINER_OF(t, struct px_wait_op, timer);

    if (now_ms(op) >= op->deadline)
        return op->state == PX_WAIT_BACKOFF ? wait_reply_late(op) : wait_timeout(op);
    wait_try(op);
}

/* Woken by a message or READY (the set took m off its semaphore). */
static void wait_on_wake(struct px_waitset_member *m)
{
    struct px_wait_op *op = LP_CONTAINER_OF(m, struct px_wait_op, member);

    switch (op->state) {
    case PX_WAIT_RETRYING:
    case PX_WAIT_GRANTING:
    case PX_WAIT_WOKEN:
        op->state = PX_WAIT_WOKEN; /* the reply decides: retry at once if contended */
        return;
    case PX_WAIT_JOINING:
    case PX_WAIT_ASLEEP:
        sched_loop_timer_del(op->eng->loop, &op->timer);
        wait_try(op);
        return;
    case PX_WAIT_BACKOFF:
        return; /* the attempt when the timer fires re-checks */
    default:
        LP_BUG_ON(true); /* NEW, TRYING and DONE ops are not members */
    }
}

/* Sleeps (queued) until a wake-up or the timer; retries now if woken
 * while in flight or if a stored wake-up is waiting. */
static void wait_sleep(struct px_wait_op *op, uint64_t repoll_ms, bool woken)
{
    op->set->repoll_at = now_ms(op) + repoll_ms;
    if (woken)
        return wait_try(op);
    if (!px_waitset_is_queued(&op->member) && px_waitset_sleep(op->set, &op->member))
        return wait_try(op);
    op->state = PX_WAIT_ASLEEP;
    sched_loop_timer_in(op->eng->loop, &op->timer, wait_delay(op, repoll_ms));
}

/* Joins the set of the op's channel (one shared subscription per channel). */
static bool wait_join(struct px_wait_op *op, const char *chan, size_t chlen)
{
    op->set = px_waitset_join(op->eng, chan, chlen, &op->member, op->kind->wake);
    if (!op->set)
        return false;
    op->eng->stats.waiting[op->kind->stat]++;
    return true;
}

static bool wait_join_channel(struct px_wait_op *op)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen = op->kind->channel(op, chan, sizeof(chan));

    return chlen > 0 && wait_join(op, chan, chlen);
}

/* A kind whose channel changed since the op joined (a MULTILOCK blocked by
 * another of its names) leaves the old set; the op then joins the new
 * channel's set as a first contended attempt does. */
static void wait_follow_channel(struct px_wait_op *op)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen;

    if (!op->kind->moves)
        return;
    chlen = op->kind->channel(op, chan, sizeof(chan));
    if (chlen == op->set->chlen && memcmp(chan, op->set->channel, chlen) == 0)
        return;
    px_waitset_leave_passing_on(op->set, &op->member, false);
    op->eng->stats.waiting[op->kind->stat]--;
    op->set = NULL;
}

/* An attempt could not succeed yet. */
static void wait_contended(struct px_wait_op *op, uint64_t repoll_ms, bool woken)
{
    if (op->caller->closing)
        return wait_finish(op, false);
    if (op->deadline == 0 || now_ms(op) >= op->deadline)
        return wait_timeout(op);
    if (repoll_ms == 0)
        repoll_ms = PX_WAIT_RECHECK_MS;
    if (op->set)
        wait_follow_channel(op);
    if (op->set) {
        op->member.took_permit = false; /* spent on this name's contention: fair */
        return wait_sleep(op, repoll_ms, woken);
    }
    if (!wait_join_channel(op))
        return wait_fail(op, -ENOMEM);
    if (px_waitset_unchanged(op->set, &op->snap))
        return wait_sleep(op, repoll_ms, false); /* subscribed all along, no event since */
    if (op->set->ready)
        return wait_try(op); /* subscribed before this retry: no wake-up can be missed */
    /* READY triggers the retry; the timer covers a lost subscribe. */
    op->state = PX_WAIT_JOINING;
    sched_loop_timer_in(op->eng->loop, &op->timer, wait_delay(op, repoll_ms));
}

/* ---- attempts and grants ------------------------------------------------------ */

/* Sends one attempt; a member stays (or gets) queued meanwhile. */
static void wait_try(struct px_wait_op *op)
{
    int rc = op->kind->send(op);

    if (rc < 0)
        return wait_fail(op, rc);
    op->sent_ms = now_ms(op);
    op->eng->front.caller_get(op->caller);
    if (!op->set) {
        op->state = PX_WAIT_TRYING;
        return;
    }
    op->state = PX_WAIT_RETRYING;
    if (!px_waitset_is_queued(&op->member) && px_waitset_sleep(op->set, &op->member))
        op->state = PX_WAIT_WOKEN; /* a stored wake-up: use it once the reply is in */
}

/* How long ago (ms) the attempt in flight was sent, by a fresh clock. */
static uint64_t wait_age(const struct px_wait_op *op)
{
    uint64_t now = clock_mono_ms();

    return now > op->sent_ms ? now - op->sent_ms : 0;
}

static void wait_log_late(struct px_wait_op *op, uint64_t age)
{
    uint64_t quiet;

    if (!px_ratelog_allow(&op->eng->late_log, now_ms(op), &quiet))
        return;
    log_msg(LOG_LVL_WARN,
            "late grant refused: %s '%.*s' was granted %llu ms after the request was sent, "
            "with a %llu ms lease; given back (%llu similar not logged)",
            op->kind->name, (int)LP_MIN(op->nlen, 200u), op->name, (unsigned long long)age,
            (unsigned long long)op->lease_ms, (unsigned long long)quiet);
}

/* No attempt was granted in time: the last grant came too late. */
static void wait_reply_late(struct px_wait_op *op)
{
    wait_end(op, true, LK_END_LATE, NULL);
}

/* The back-off before the attempt after the n-th late grant (n >= 1). */
static uint64_t wait_backoff_ms(unsigned n)
{
    unsigned shift = LP_MIN(n - 1, 16u);

    return LP_MIN((uint64_t)PX_WAIT_BACKOFF_MS << shift, (uint64_t)PX_WAIT_BACKOFF_MAX_MS);
}

/* A grant with too little of its lease left: give it back; try again
 * after the back-off if the command may still wait, else answer as an
 * unconfirmed outcome. */
static void wait_late(struct px_wait_op *op, uint64_t age)
{
    op->eng->stats.late_grants++;
    wait_log_late(op, age);
    op->kind->undo(op, PX_UNDO_LATE);
    op->late_age = age;
    if (op->deadline == 0 || now_ms(op) >= op->deadline)
        return wait_reply_late(op);
    op->late++;
    op->state = PX_WAIT_BACKOFF;
    if (op->set)
        px_waitset_unqueue(op->set, &op->member); /* wake-ups go to the next ones meanwhile */
    sched_loop_timer_in(op->eng->loop, &op->timer, wait_delay(op, wait_backoff_ms(op->late)));
}

static void wait_log_unreplicated(struct px_wait_op *op, int acked)
{
    uint64_t quiet;

    if (!px_ratelog_allow(&op->eng->unrepl_log, now_ms(op), &quiet))
        return;
    log_msg(LOG_LVL_WARN,
            "grant refused: %s '%.*s' reached %d of %u replicas within %u ms; undone "
            "(%llu similar not logged)",
            op->kind->name, (int)LP_MIN(op->nlen, 200u), op->name, acked < 0 ? 0 : acked,
            op->eng->cfg.sync_replicas, op->eng->cfg.sync_timeout_ms, (unsigned long long)quiet);
}

/* A grant fewer replicas than --sync-replicas acknowledged: give it back
 * and say so. */
static void wait_unreplicated(struct px_wait_op *op, int acked)
{
    struct lk_end_info info = {NULL, 0, acked};

    op->eng->stats.sync_refused++;
    wait_log_unreplicated(op, acked);
    if (op->kind->undo)
        op->kind->undo(op, PX_UNDO_UNREPLICATED);
    wait_end(op, true, LK_END_UNREPLICATED, &info);
}

/* short_, acked: the attempt's replication (pool_result_short, res->acks). */
static void wait_granted(struct px_wait_op *op, bool short_, int acked)
{
    uint64_t age;

    if (op->caller->closing) {
        op->kind->undo(op, PX_UNDO_GONE);
        return wait_finish(op, true);
    }
    if (op->lease_ms > 0) {
        age = wait_age(op);
        if (age + px_wait_margin_ms(op->lease_ms) > op->lease_ms)
            return wait_late(op, age);
    }
    if (short_)
        return wait_unreplicated(op, acked);
    op->kind->granted(op);
    wait_finish(op, true);
}

static bool wait_in_flight(const struct px_wait_op *op)
{
    return op->state == PX_WAIT_TRYING || op->state == PX_WAIT_RETRYING ||
           op->state == PX_WAIT_GRANTING || op->state == PX_WAIT_WOKEN;
}

/* px_wait_on_reply(), and px_wait_on_outcome() when o is set. */
static void wait_on_result(struct px_wait_op *op, const struct pool_result *res,
                           const struct px_wait_outcome *o)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct lk_caller *cl = op->caller;
    struct lk_engine *eng = op->eng; /* op may be freed below */
    bool woken = op->state == PX_WAIT_WOKEN;
    bool short_ = pool_result_short(res);
    int acked = res->acks;
    uint64_t repoll_ms = 0;

    LP_BUG_ON(!wait_in_flight(op));
    if (op->kind->attempt_done)
        op->kind->attempt_done(op);
    if (err < 0) {
        if (op->kind->undo) {
            op->eng->stats.unknown_acqs++;
            op->kind->undo(op, PX_UNDO_UNKNOWN);
        }
        wait_fail(op, err);
    } else if (r && r->type == POOL_REPLY_ERROR) { /* r: NULL for an outcome of its own */
        struct lk_end_info info = {r, 0, -1};

        wait_end(op, false, LK_END_REDIS_ERROR, &info);
    } else {
        switch (o ? op->kind->outcome(op, o, &repoll_ms) : op->kind->reply(op, r, &repoll_ms)) {
        case PX_WAIT_GRANTED:
            wait_granted(op, short_, acked);
            break;
        case PX_WAIT_CONTENDED:
            wait_contended(op, repoll_ms, woken);
            break;
        case PX_WAIT_FINISHED:
            wait_finish(op, false);
            break;
        }
    }
    eng->front.caller_put(cl);
}

void px_wait_on_reply(void *arg, const struct pool_result *res)
{
    wait_on_result(arg, res, NULL);
}

void px_wait_on_outcome(struct px_wait_op *op, const struct pool_result *res,
                        const struct px_wait_outcome *o)
{
    LP_BUG_ON(!op->kind->outcome);
    wait_on_result(op, res, o);
}

int px_wait_eval(struct px_wait_op *op, uint64_t hint, unsigned script, int numkeys, int argc,
                 const char *const *argv, const size_t *lens)
{
    return px_script_eval(op->eng, hint, script, numkeys, argc, argv, lens, px_wait_on_reply, op);
}

/* ---- start ------------------------------------------------------------------- */

void px_wait_init(struct px_wait_op *op, const struct px_wait_kind *kind, struct lk_caller *caller,
                  void *front, const char *name, size_t nlen, int64_t wait_ms)
{
    struct lk_engine *eng = caller->eng;

    op->kind = kind;
    op->state = PX_WAIT_NEW;
    op->caller = caller;
    op->front = front;
    op->name = name;
    op->nlen = nlen;
    op->eng = eng;
    op->start_ms = sched_loop_now_ms(eng->loop);
    op->set = NULL;
    px_waitset_member_init(&op->member, wait_on_wake);
    list_init(&op->client_node);
    sched_timer_init(&op->timer, wait_on_timer);
    if (wait_ms == 0)
        op->deadline = 0;
    else if (wait_ms < 0)
        op->deadline = PX_WAIT_FOREVER;
    else
        op->deadline = sched_loop_now_ms(eng->loop) + (uint64_t)wait_ms;
    op->sent_ms = 0;
    op->lease_ms = 0;
    op->snap.gen = 0;
    op->snap.events = 0;
    op->late = 0;
    op->late_age = 0;
}

/* Before a first attempt that may wait: records the channel's set (so a
 * contended reply can tell whether a wake-up could have been missed) and,
 * where the kind allows it, sleeps behind this proxy's waiters of the
 * channel without a doomed attempt: until woken, or until the re-poll time
 * its members last saw. Returns true when the op is now asleep. */
static bool wait_queue_behind(struct px_wait_op *op)
{
    char chan[PX_CHANNEL_MAX];
    size_t chlen = op->kind->channel(op, chan, sizeof(chan));
    struct px_waitset *set;
    uint64_t now = now_ms(op);

    if (chlen == 0)
        return false;
    px_waitset_snap(op->eng, chan, chlen, &op->snap);
    if (!op->kind->queue_behind || !op->kind->queue_behind(op))
        return false;
    set = px_waitset_find(op->eng, chan, chlen);
    if (!set || !set->ready || set->nmembers == 0 || !wait_join(op, chan, chlen))
        return false;
    wait_sleep(op, set->repoll_at > now ? set->repoll_at - now : 1, false);
    return true;
}

void px_wait_start(struct px_wait_op *op)
{
    list_add_tail(&op->caller->locks.waits, &op->client_node);
    if (op->deadline != 0 && op->eng->locks.count > 0 && wait_queue_behind(op))
        return;
    wait_try(op);
}

/* ---- the local hand-off -------------------------------------------------------- */

struct px_wait_op *px_wait_grantee(struct px_waitset *set, const struct px_wait_kind *kind,
                                   bool (*eligible)(const struct px_wait_op *op))
{
    struct list *n;

    for (n = set->members.next; n != &set->members; n = n->next) {
        struct px_waitset_member *m = LP_CONTAINER_OF(n, struct px_waitset_member, node);
        struct px_wait_op *op = LP_CONTAINER_OF(m, struct px_wait_op, member);

        if (op->kind != kind || op->state != PX_WAIT_ASLEEP)
            continue; /* another kind, or its own attempt is in flight */
        return eligible(op) ? op : NULL;
    }
    return NULL;
}

void px_wait_grant_begin(struct px_wait_op *op, uint64_t sent_ms)
{
    LP_BUG_ON(op->state != PX_WAIT_ASLEEP);
    sched_loop_timer_del(op->eng->loop, &op->timer);
    op->state = PX_WAIT_GRANTING;
    op->sent_ms = sent_ms;
    op->eng->front.caller_get(op->caller);
}

/* ---- the connection ------------------------------------------------------------ */

void px_wait_client_gone(struct lk_caller *cl)
{
    struct list *n, *t;

    list_for_each_safe(n, t, &cl->locks.waits)
    {
        struct px_wait_op *op = LP_CONTAINER_OF(n, struct px_wait_op, client_node);

        if (op->state == PX_WAIT_JOINING || op->state == PX_WAIT_ASLEEP ||
            op->state == PX_WAIT_BACKOFF)
            wait_finish(op, false); /* not in flight: end the wait now */
    }
}
