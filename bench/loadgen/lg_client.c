/* The per-client request state machines, one request in flight per client.
 *
 * Cycle (proxy):   LOCK key -> +OK [-> LOCK key -> +OK] -> hold ->
 *                  UNLOCK key -> :0/:1 [-> UNLOCK key -> :1] -> next cycle.
 * Cycle (direct):  EVALSHA acquire -> nil (granted) or the holder's PTTL.
 *                  On a PTTL: join the key's subscription (lg_sub.c), retry
 *                  once it is confirmed, and on every further PTTL wait for
 *                  a message or the PTTL, then retry. Once granted, leave
 *                  the subscription (UNSUBSCRIBE goes out without waiting,
 *                  as Redisson does it asynchronously), hold, EVALSHA unlock.
 * Cycle (twemproxy): the direct cycle without pub/sub: on a PTTL, wait a
 *                  poll delay (--poll-ms, jittered, at most the PTTL) and
 *                  retry, until granted.
 * Batch (--pipeline N): N (TRYLOCK|acquire, UNLOCK|unlock) pairs on the
 *                  client's N keys in one write; the next batch goes out when
 *                  all 2N replies are in.
 *
 * A new connection first sends AUTH (with a password) or PING
 * (LG_CS_GREET) and counts as connected once it is answered. With --rate a cycle starts
 * when the schedule says (lg_rate.c), not when the last one ended. An
 * EVALSHA answered NOSCRIPT is sent once more as EVAL (lg_script.c), in
 * the same state.
 *
 * The rwlock and semaphore workloads run the same machine with other
 * requests (lg_rw.c, lg_sem.c): an rwlock client draws read or write at the
 * start of each cycle (c->kind) and sends that lock's pair.
 *
 * Every request is pre-formatted once per client (its key and owner never
 * change), so a cycle costs a memcpy per request, not formatting.
 *
 * Reply conventions: proxy LOCK/TRYLOCK/RLOCK/WLOCK/SEM.ACQUIRE -> +OK
 * (granted) or nil (TRYLOCK refused); UNLOCK/RUNLOCK/WUNLOCK -> :1
 * released, :0 still held; SEM.RELEASE -> the count after it (1 to
 * --permits). Direct lock acquire -> nil (granted) or an integer PTTL;
 * unlock -> 1 released, 0 still held, nil not the owner; but a read unlock
 * -> 1 (lock gone) or 0 (other readers left). Direct semaphore tryAcquire
 * -> 1 (granted) or 0 (wait: re-checked after LG_SEM_RECHECK_MS at the
 * latest); release -> nil. Anything else is counted as an error: an
 * acquire error starts the cycle over after a short back-off (releasing
 * any hold first), a release error ends the cycle. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_run.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/compiler.h"

#define BACKOFF_MS 10u

enum acq_outcome {
    ACQ_GRANTED = 0, /* lock granted (or re-entered) */
    ACQ_HELD = 1,    /* direct: held by another owner, PTTL returned */
    ACQ_REFUSED = 2, /* proxy TRYLOCK: nil */
    ACQ_ERROR = 3,   /* anything else */
};

/* ---- request formatting ------------------------------------------------ */

int lg_resp_append(struct buf *b, unsigned argc, const char *const *argv)
{
    int rc = buf_appendf(b, "*%u\r\n", argc);

    for (unsigned i = 0; i < argc && rc == 0; i++)
        rc = buf_appendf(b, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    return rc;
}

/* Appends the acquire (or, with release, the release) of key for c. */
static int format_request(struct lg_client *c, struct buf *b, unsigned key, bool release)
{
    const struct lg_run *r = c->run;
    char name[128], chan[160], owner[64], lease[16];

    lg_run_key_name(r, key, name, sizeof(name));
    if (!r->redisson) {
        const char *lock = r->o->pipeline ? "TRYLOCK" : "LOCK";
        const char *argv[] = {release ? "UNLOCK" : lock, name};

        return lg_resp_append(b, 2, argv);
    }
    snprintf(owner, sizeof(owner), "%s:%u", r->uuid, c->id);
    snprintf(lease, sizeof(lease), "%u", r->o->lease_ms);
    if (!release) {
        const char *argv[] = {"EVALSHA", r->scripts[LG_SCR_ACQ].sha, "1", name, lease, owner};

        return lg_resp_append(b, 6, argv);
    }
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", name);
    {
        const char *argv[] = {"EVALSHA", r->scripts[LG_SCR_REL].sha, "2", name, chan, "0", lease,
                              owner};

        return lg_resp_append(b, 8, argv);
    }
}

void lg_buf_take(struct buf *b, char **out, size_t *len)
{
    *out = b->data;
    *len = b->len;
    buf_init(b);
}

/* Formats c's acquire and release once (or the whole batch with
 * --pipeline). Returns 0 or -ENOMEM. */
static int build_requests(struct lg_client *c)
{
    unsigned n = c->run->o->pipeline;
    struct buf b;
    int rc = 0;

    if (c->run->o->workload == LG_WL_RWLOCK)
        return lg_rw_build_requests(c);
    if (c->run->o->workload == LG_WL_SEMAPHORE)
        return lg_sem_build_requests(c);
    buf_init(&b);
    if (n > 0) {
        for (unsigned i = 0; i < n && rc == 0; i++) {
            rc = format_request(c, &b, c->key + i, false);
            if (rc == 0)
                rc = format_request(c, &b, c->key + i, true);
        }
        lg_buf_take(&b, &c->acq_cmd, &c->acq_len);
        return rc;
    }
    rc = format_request(c, &b, c->key, false);
    lg_buf_take(&b, &c->acq_cmd, &c->acq_len);
    if (rc == 0)
        rc = format_request(c, &b, c->key, true);
    lg_buf_take(&b, &c->rel_cmd, &c->rel_len);
    return rc;
}

/* ---- cycle steps ------------------------------------------------------- */

void lg_client_send(struct lg_client *c, const char *p, size_t n)
{
    c->inflight = p;
    c->inflight_len = n;
    if (sched_conn_write(&c->conn, p, n) < 0)
        lg_run_error(c->run, "write failed", NULL, 0);
}

/* Queues the acquire of the cycle's lock; it goes out with the loop's
 * flush. */
static void send_acquire(struct lg_client *c, unsigned state)
{
    c->state = state;
    c->run->cnt.attempts++;
    if (c->kind == LG_HOLD_WRITE)
        lg_client_send(c, c->wacq.cmd, c->wacq.len);
    else
        lg_client_send(c, c->acq_cmd, c->acq_len);
}

/* Queues N acquire/release pairs; latency is timed from here. */
static void send_batch(struct lg_client *c)
{
    c->state = LG_CS_BATCH;
    c->pending = 2 * c->run->o->pipeline;
    c->t0_ns = clock_mono_ns();
    c->run->cnt.attempts += c->run->o->pipeline;
    lg_client_send(c, c->acq_cmd, c->acq_len);
}

void lg_client_begin_cycle(struct lg_client *c)
{
    c->depth = 0;
    if (c->run->o->workload == LG_WL_RWLOCK)
        lg_rw_pick(c);
    send_acquire(c, LG_CS_ACQ);
}

void lg_client_start(struct lg_client *c)
{
    if (!lg_run_cycling(c->run)) {
        c->state = LG_CS_IDLE;
        lg_run_client_idle(c);
        return;
    }
    if (c->run->o->pipeline > 0) {
        c->depth = 0;
        send_batch(c);
        return;
    }
    if (c->run->o->rate > 0) {
        lg_rate_schedule(c);
        return;
    }
    c->t0_ns = clock_mono_ns();
    lg_client_begin_cycle(c);
}

void lg_client_release(struct lg_client *c)
{
    if (c->depth == 1)
        lg_run_releasing(c, c->key);
    c->state = LG_CS_REL;
    if (c->kind == LG_HOLD_WRITE)
        lg_client_send(c, c->wrel.cmd, c->wrel.len);
    else
        lg_client_send(c, c->rel_cmd, c->rel_len);
}

void lg_client_retry(struct lg_client *c)
{
    send_acquire(c, LG_CS_RETRY);
}

/* After an error: start over a little later rather than spin. */
static void backoff(struct lg_client *c)
{
    c->state = LG_CS_BACKOFF;
    sched_loop_timer_in(c->run->loop, &c->timer, BACKOFF_MS);
}

/* twemproxy: the lock (or every permit) is taken; retry after a poll
 * delay drawn uniformly from [0.5, 1.5) x --poll-ms, but no later than
 * the holder's PTTL (-1: no expiry; a semaphore passes its re-check). */
static void poll_wait(struct lg_client *c, long long pttl)
{
    uint64_t mean_us = (uint64_t)c->run->o->poll_ms * 1000u;
    uint64_t us = mean_us / 2 + lg_rng_next(&c->jitter) % (mean_us > 0 ? mean_us : 1);
    uint64_t ms = (us + 999u) / 1000u;

    if (pttl >= 0 && (uint64_t)pttl < ms)
        ms = (uint64_t)pttl;
    c->state = LG_CS_POLL;
    sched_loop_timer_in(c->run->loop, &c->timer, ms > 0 ? ms : 1);
}

/* The PTTL ran out while waiting for a message (retry, as Redisson's
 * tryAcquire(ttl) does), a poll delay is over, or the back-off is. */
static void on_timer(struct sched_timer *t)
{
    struct lg_client *c = LP_CONTAINER_OF(t, struct lg_client, timer);

    if (c->state == LG_CS_LATCH) {
        c->run->cnt.latch_timeouts++;
        lg_sub_cancel(c);
        lg_client_retry(c);
    } else if (c->state == LG_CS_POLL) {
        c->run->cnt.polls++;
        lg_client_retry(c);
    } else if (c->state == LG_CS_BACKOFF) {
        lg_client_start(c);
    } else if (c->state == LG_CS_AGAIN) {
        lg_redirect_again(c);
    }
}

/* ---- replies ----------------------------------------------------------- */

static void reply_error(struct lg_client *c, const char *what, const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS)
        lg_run_error(c->run, what, rep->str, rep->len);
    else
        lg_run_error(c->run, what, "unexpected reply type", strlen("unexpected reply type"));
}

/* Direct semaphore tryAcquire: 1 taken, 0 not (no PTTL: the wait is
 * re-checked after LG_SEM_RECHECK_MS). */
static enum acq_outcome classify_sem_acquire(const redisReply *rep, long long *pttl)
{
    if (rep->type != REDIS_REPLY_INTEGER || (rep->integer != 0 && rep->integer != 1))
        return ACQ_ERROR;
    *pttl = LG_SEM_RECHECK_MS;
    return rep->integer == 1 ? ACQ_GRANTED : ACQ_HELD;
}

/* What an acquire reply means for this target; *pttl is set for
 * ACQ_HELD. */
static enum acq_outcome classify_acquire(const struct lg_client *c, const redisReply *rep,
                                         long long *pttl)
{
    if (!c->run->redisson) {
        if (rep->type == REDIS_REPLY_STATUS && rep->len == 2 && memcmp(rep->str, "OK", 2) == 0)
            return ACQ_GRANTED;
        return rep->type == REDIS_REPLY_NIL ? ACQ_REFUSED : ACQ_ERROR;
    }
    if (c->kind == LG_HOLD_PERMIT)
        return classify_sem_acquire(rep, pttl);
    if (rep->type == REDIS_REPLY_NIL)
        return ACQ_GRANTED;
    if (rep->type == REDIS_REPLY_INTEGER) {
        *pttl = rep->integer;
        return ACQ_HELD;
    }
    return ACQ_ERROR;
}

/* Lock release replies are integers on both targets: 1 released, 0 still
 * held; but Redisson's read unlock answers 0 while other readers remain.
 * A semaphore release answers the new count (proxy) or nil (Redisson's
 * script returns nothing). */
static bool release_ok(const struct lg_client *c, const redisReply *rep, unsigned depth_after)
{
    const struct lg_run *r = c->run;

    if (c->kind == LG_HOLD_PERMIT && r->redisson)
        return rep->type == REDIS_REPLY_NIL;
    if (rep->type != REDIS_REPLY_INTEGER)
        return false;
    if (c->kind == LG_HOLD_PERMIT)
        return rep->integer >= 1 && rep->integer <= (long long)r->o->permits;
    if (c->kind == LG_HOLD_READ && r->redisson)
        return rep->integer == 0 || rep->integer == 1;
    return rep->integer == (depth_after == 0 ? 1 : 0);
}

/* One more hold: re-enter, hold, or release. */
static void granted(struct lg_client *c)
{
    c->depth++;
    lg_run_granted(c, c->key, c->depth);
    if (c->depth < c->run->acq_per_cycle) {
        c->t0_ns = clock_mono_ns();
        send_acquire(c, LG_CS_ACQ);
    } else if (c->run->o->hold_us > 0) {
        lg_run_hold(c);
    } else {
        lg_client_release(c);
    }
}

/* Gives back what c has (subscription reference, holds) and starts over. */
static void acquire_failed(struct lg_client *c)
{
    if (c->sub_ref)
        lg_sub_leave(c);
    if (c->depth > 0)
        lg_client_release(c);
    else
        backoff(c);
}

/* A first attempt that finds the lock held joins the subscription; a
 * retry that finds it held waits on the latch (direct targets only: the
 * proxy's LOCK waits by itself). */
static void on_acquire_reply(struct lg_client *c, const redisReply *rep)
{
    long long pttl = 0;

    switch (classify_acquire(c, rep, &pttl)) {
    case ACQ_GRANTED:
        if (c->sub_ref)
            lg_sub_leave(c);
        granted(c);
        return;
    case ACQ_HELD:
        if (c->depth == 0 && c->run->polling) {
            poll_wait(c, pttl);
        } else if (c->depth > 0 || !c->sub) {
            lg_run_error(c->run, "acquire", "re-entry refused", strlen("re-entry refused"));
            acquire_failed(c);
        } else if (c->state == LG_CS_ACQ) {
            lg_sub_join(c, pttl);
        } else {
            lg_sub_wait(c, pttl);
        }
        return;
    case ACQ_REFUSED:
    case ACQ_ERROR:
        reply_error(c, "acquire", rep);
        acquire_failed(c);
        return;
    }
}

/* Reentrant cycles release twice; the last release ends the cycle. */
static void on_release_reply(struct lg_client *c, const redisReply *rep)
{
    c->depth--;
    if (!release_ok(c, rep, c->depth)) {
        reply_error(c, "release", rep);
        c->depth = 0;
        backoff(c);
        return;
    }
    if (c->depth > 0)
        lg_client_release(c);
    else
        lg_client_start(c);
}

/* Replies alternate: acquire of key + i, then its release. */
static void on_batch_reply(struct lg_client *c, const redisReply *rep)
{
    unsigned idx = 2 * c->run->o->pipeline - c->pending;
    unsigned key = c->key + idx / 2;
    long long pttl = 0;

    if (idx % 2 == 0) {
        if (classify_acquire(c, rep, &pttl) == ACQ_GRANTED)
            lg_run_granted(c, key, 1);
        else
            reply_error(c, "trylock", rep);
    } else {
        if (release_ok(c, rep, 0))
            lg_run_released(c, key);
        else
            reply_error(c, "unlock", rep);
    }
    if (--c->pending == 0)
        lg_client_start(c);
}

static bool is_noscript(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && rep->len >= 8 && memcmp(rep->str, "NOSCRIPT", 8) == 0;
}

const char *lg_greet_error(const redisReply *rep)
{
    if (rep->type == REDIS_REPLY_STATUS &&
        (strcmp(rep->str, "OK") == 0 || strcmp(rep->str, "PONG") == 0))
        return NULL;
    return rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply";
}

/* The reply to the greeting of a new connection: connected, or the run
 * fails. */
static void on_greet_reply(struct lg_client *c, const redisReply *rep)
{
    const char *err = lg_greet_error(rep);
    char why[200];

    if (c->moving) {
        lg_redirect_greeted(c, err);
        return;
    }
    c->state = LG_CS_IDLE;
    if (!err) {
        lg_run_conn_done(c->run, 0);
        return;
    }
    snprintf(why, sizeof(why), "%.60s: %s: %.120s", c->run->cmd_ep->name,
             c->run->cmd_ep->pass[0] ? "AUTH" : "PING", err);
    lg_run_conn_failed(c->run, why);
}

/* Dispatches a reply by what c has in flight. */
static void on_reply(struct lg_client *c, const redisReply *rep)
{
    if (c->state == LG_CS_GREET || c->state == LG_CS_MOVE) {
        on_greet_reply(c, rep);
        return;
    }
    if (c->asking) {
        c->asking = false;
        if (rep->type == REDIS_REPLY_STATUS)
            return;
    }
    if (is_noscript(rep) && c->run->redisson && lg_scripts_resend_eval(c) == 0)
        return;
    if (c->run->cluster && rep->type == REDIS_REPLY_ERROR && lg_redirect_reply(c, rep))
        return;
    switch (c->state) {
    case LG_CS_ACQ:
    case LG_CS_RETRY:
        on_acquire_reply(c, rep);
        return;
    case LG_CS_REL:
        on_release_reply(c, rep);
        return;
    case LG_CS_BATCH:
        on_batch_reply(c, rep);
        return;
    default:
        reply_error(c, "reply while no request was in flight", rep);
        return;
    }
}

/* ---- connection callbacks ---------------------------------------------- */

void lg_client_die(struct lg_client *c, const char *why)
{
    unsigned was = c->state;

    if (was == LG_CS_DEAD)
        return;
    c->state = LG_CS_DEAD;
    lg_rate_cancel(c);
    lg_sub_cancel(c);
    if (c->sub_ref)
        lg_sub_leave(c);
    list_del_init(&c->node);
    sched_loop_timer_del(c->run->loop, &c->timer);
    if (c->depth > 0)
        lg_run_released(c, c->key);
    c->depth = 0;
    if (was == LG_CS_GREET) {
        sched_conn_close(&c->conn, false);
        lg_run_conn_failed(c->run, why ? why : "closed before answering");
        return;
    }
    if (why)
        lg_run_error(c->run, "connection", why, strlen(why));
    if (was != LG_CS_IDLE)
        lg_run_client_idle(c);
    sched_conn_close(&c->conn, false);
}

/* Feeds the reader (it copies the bytes) and handles every complete
 * reply; stops if a reply ended the connection. */
static void client_on_data(struct sched_conn *conn, const char *data, size_t len)
{
    struct lg_client *c = LP_CONTAINER_OF(conn, struct lg_client, conn);
    void *rep;

    if (redisReaderFeed(c->rd, data, len) != REDIS_OK) {
        lg_client_die(c, "reply buffer: out of memory");
        return;
    }
    for (;;) {
        if (redisReaderGetReply(c->rd, &rep) != REDIS_OK) {
            lg_client_die(c, c->rd->errstr);
            return;
        }
        if (!rep)
            return;
        on_reply(c, rep);
        freeReplyObject(rep);
        if (c->state == LG_CS_DEAD)
            return;
    }
}

/* Expected while closing; otherwise the target lost a client. */
static void client_on_hangup(struct sched_conn *conn, int err)
{
    struct lg_client *c = LP_CONTAINER_OF(conn, struct lg_client, conn);
    char why[96];

    if (c->run->phase == LG_PH_CLOSE) {
        sched_conn_close(conn, false);
        return;
    }
    snprintf(why, sizeof(why), "closed by peer%s%s", err ? ": " : "", err ? strerror(-err) : "");
    lg_client_die(c, why);
}

int lg_greet_send(struct sched_conn *conn, const struct lg_endpoint *ep)
{
    const char *with_user[] = {"AUTH", ep->user, ep->pass};
    const char *alone[] = {"AUTH", ep->pass};
    const char *ping[] = {"PING"};
    struct buf *b = sched_conn_wbuf(conn);
    int rc = !ep->pass[0]  ? lg_resp_append(b, 1, ping)
             : ep->user[0] ? lg_resp_append(b, 3, with_user)
                           : lg_resp_append(b, 2, alone);

    if (rc == 0)
        sched_conn_mark_dirty(conn);
    return rc;
}

static void client_on_connect(struct sched_conn *conn, int err)
{
    struct lg_client *c = LP_CONTAINER_OF(conn, struct lg_client, conn);

    if (err == 0) {
        c->state = c->moving ? LG_CS_MOVE : LG_CS_GREET;
        err = lg_greet_send(conn, c->run->cmd_ep);
        if (err == 0)
            return;
    }
    if (err < 0)
        sched_conn_close(conn, false);
    if (c->moving)
        lg_redirect_connect_failed(c, err);
    else
        lg_run_conn_done(c->run, err);
}

static void client_on_release(struct sched_conn *conn)
{
    struct lg_client *c = LP_CONTAINER_OF(conn, struct lg_client, conn);

    if (c->moving && lg_redirect_released(c))
        return;
    lg_run_conn_released(c->run);
}

const struct sched_conn_ops lg_client_ops = {
    .on_data = client_on_data,
    .on_hangup = client_on_hangup,
    .on_connect = client_on_connect,
    .on_release = client_on_release,
};

/* ---- set-up ------------------------------------------------------------ */

int lg_client_init(struct lg_client *c, struct lg_run *r, unsigned id)
{
    unsigned n = r->o->pipeline;

    memset(c, 0, sizeof(*c));
    c->run = r;
    c->id = id;
    c->key = n > 0 ? id * n : id % r->nkeys;
    c->state = LG_CS_IDLE;
    c->kind = r->o->workload == LG_WL_SEMAPHORE ? LG_HOLD_PERMIT : LG_HOLD_EXCL;
    c->rng = id;
    c->jitter = 0x6a09e667f3bcc909ull ^ id;
    sched_timer_init(&c->timer, on_timer);
    list_init(&c->node);
    if (r->nsubs > 0)
        c->sub = r->nsubs == 1 ? &r->subs[0] : &r->subs[id];
    c->rd = redisReaderCreate();
    if (!c->rd)
        return -ENOMEM;
    return build_requests(c);
}

void lg_client_deinit(struct lg_client *c)
{
    redisReaderFree(c->rd);
    c->rd = NULL;
    free(c->acq_cmd);
    c->acq_cmd = NULL;
    free(c->rel_cmd);
    c->rel_cmd = NULL;
    free(c->wacq.cmd);
    c->wacq.cmd = NULL;
    free(c->wrel.cmd);
    c->wrel.cmd = NULL;
}
