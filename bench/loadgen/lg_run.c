/* One target run: set-up, phases, holds, the exclusion check, statistics.
 *
 * Set-up. The clients connect to the target's endpoint (lockproxy, Redis or
 * twemproxy); the direct targets also open pub/sub connections to Redis.
 * Redisson targets get their scripts named first (lg_script.c); the
 * semaphore workload creates its semaphores. After the target, every key
 * the run may have left is deleted (lg_clean.c).
 *
 * Phases. CONNECT opens every connection (at most CONNECT_WINDOW connects
 * in flight, so listen backlogs never overflow); WARMUP starts every client
 * cycling; MEASURE resets the counters and the histogram and snapshots
 * Redis, proxy and bench CPU; at its end the snapshots are taken again and
 * the figures are final. DRAIN lets every client finish its cycle (so no
 * lock is left behind, and a target that cannot hand locks over shows up
 * as "stuck"), bounded by DRAIN_TIMEOUT_MS (plus --lease-ms for direct
 * rwlock, see drain_timeout_ms()). A client that is only waiting out a
 * PTTL or a poll delay (a direct waiter that missed its wake-up, as
 * Redisson's can) holds nothing: once every busy client is such a waiter
 * (checked each second), the drain ends and they are counted as parked,
 * not stuck. CLOSE closes every connection;
 * the loop stops when the last one is released.
 *
 * Holds (--hold-us). All holds have the same length, so the queue of
 * holding clients is sorted by its FIFO order. A hook releases the due ones
 * every loop iteration (microsecond precision whenever the loop is busy),
 * and a wheel timer for the head wakes an idle loop (1 ms tick).
 *
 * Exclusion check. lg_key.holders goes 0 -> 1 when a grant arrives; a
 * grant that finds it non-zero is a violation, and a re-entry must find
 * holders == 1 and itself as the owner. A release is only sent at the end
 * of the loop iteration that queued it, so the key stays held until then
 * (the end-of-iteration hook clears it just before the flush): otherwise,
 * with --hold-us 0, a grant and the release it allows would be handled in
 * the same callback and two simultaneous grants could never be seen. A
 * grant processed later may have been caused by that release, so it is
 * never counted against it: no false positives. The rwlock workload keeps
 * writers in holders and readers in readers (a write grant needs both at
 * 0, a read grant no writer); the semaphore workload counts permit holders
 * in holders, which a grant must find below --permits. */
#include "bench/loadgen/lg_run.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/loadgen/lg_cluster.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "common/util.h"
#include "sched/tls.h"

#define CONNECT_WINDOW     128u
#define CONNECT_TIMEOUT_MS 30000u
#define DRAIN_TIMEOUT_MS   15000u
#define PROGRESS_MS        1000u

/* Redisson's RLock acquire (RedissonLock.tryLockInnerAsync): nil when taken
 * or re-entered, else the holder's PTTL. KEYS[1] name; ARGV lease, owner. */
static const char acquire_lua[] = "if ((redis.call('exists', KEYS[1]) == 0) or "
                                  "(redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
                                  "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
                                  "redis.call('pexpire', KEYS[1], ARGV[1]); "
                                  "return nil; end; "
                                  "return redis.call('pttl', KEYS[1]);";

/* Redisson's RLock unlock (unlockInnerAsync, without the 3.24.1 unlock
 * latch, which only costs Redis more): nil not owner, 0 still held, 1
 * released + PUBLISH. KEYS name, channel; ARGV message (0), lease, owner. */
static const char unlock_lua[] =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;";

static volatile sig_atomic_t interrupted;

/* Ends the run: stops every timer and closes every connection started;
 * the loop stops once the last one is released. Idempotent. */
static void close_all(struct lg_run *r);
/* Every connection is up: every live client starts cycling. */
static void begin_warmup(struct lg_run *r);

void lg_run_interrupt(void)
{
    if (interrupted < 2)
        interrupted++;
}

bool lg_run_was_interrupted(void)
{
    return interrupted != 0;
}

/* ---- small services ---------------------------------------------------- */

size_t lg_run_key_name(const struct lg_run *r, unsigned key, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s:%s:%u", r->o->prefix, lg_target_name(r->target), key);

    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

bool lg_run_cycling(const struct lg_run *r)
{
    return r->phase == LG_PH_WARMUP || r->phase == LG_PH_MEASURE;
}

void lg_run_error(struct lg_run *r, const char *what, const char *msg, size_t len)
{
    struct lg_result *res = r->res;

    res->errors++;
    if (res->first_error[0] == '\0')
        snprintf(res->first_error, sizeof(res->first_error), "%s: %.*s", what,
                 msg ? (int)LP_MIN(len, 120u) : 0, msg ? msg : "");
}

/* Counts a violation and keeps a description of the first one. */
uint64_t lg_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void violation(struct lg_run *r, const struct lg_client *c, unsigned key, const char *what)
{
    const struct lg_key *k = &r->keys[key];
    char *out = r->res->first_violation;
    size_t cap = sizeof(r->res->first_violation);
    char name[128];

    r->res->violations++;
    if (out[0] != '\0')
        return;
    lg_run_key_name(r, key, name, sizeof(name));
    if (c->kind == LG_HOLD_EXCL)
        snprintf(out, cap, "%.64s: client %u %s while client %u held it (holders %u)", name, c->id,
                 what, k->owner, k->holders);
    else if (c->kind == LG_HOLD_PERMIT)
        snprintf(out, cap, "%.64s: client %u %s while %u clients held one of the %u", name, c->id,
                 what, k->holders, r->o->permits);
    else
        snprintf(out, cap, "%.64s: client %u %s while %u writers and %u readers held it", name,
                 c->id, what, k->holders, k->readers);
}

/* Checks and records a first hold of key by c. */
static void check_grant(struct lg_run *r, struct lg_client *c, unsigned key)
{
    struct lg_key *k = &r->keys[key];

    switch (c->kind) {
    case LG_HOLD_READ:
        if (k->holders != 0)
            violation(r, c, key, "was granted the read lock");
        k->readers++;
        break;
    case LG_HOLD_WRITE:
        if (k->holders != 0 || k->readers != 0)
            violation(r, c, key, "was granted the write lock");
        k->holders++;
        break;
    case LG_HOLD_PERMIT:
        if (k->holders >= r->o->permits)
            violation(r, c, key, "was granted a permit");
        k->holders++;
        break;
    default:
        if (k->holders != 0)
            violation(r, c, key, "was granted the lock");
        k->holders++;
        break;
    }
    k->owner = c->id;
}

void lg_run_granted(struct lg_client *c, unsigned key, unsigned depth)
{
    struct lg_run *r = c->run;
    struct lg_key *k = &r->keys[key];

    r->res->checked++;
    r->acq_all++;
    if (depth == 1)
        check_grant(r, c, key);
    else if (k->holders != 1 || k->owner != c->id)
        violation(r, c, key, "re-entered the lock");
    if (r->phase == LG_PH_MEASURE) {
        c->granted++;
        r->cnt.acquisitions++;
        r->cnt.reads += c->kind == LG_HOLD_READ;
        r->cnt.writes += c->kind == LG_HOLD_WRITE;
        lg_hist_record(r->res->hist, clock_mono_ns() - c->t0_ns);
    }
}

/* One hold of kind ends on k. */
static void unhold(struct lg_key *k, unsigned kind)
{
    unsigned *n = kind == LG_HOLD_READ ? &k->readers : &k->holders;

    if (*n > 0)
        (*n)--;
}

void lg_run_released(struct lg_client *c, unsigned key)
{
    unhold(&c->run->keys[key], c->kind);
}

void lg_run_releasing(struct lg_client *c, unsigned key)
{
    struct lg_run *r = c->run;

    if (r->nunheld == r->nclients) {
        lg_run_released(c, key);
        return;
    }
    r->unheld[r->nunheld].key = key;
    r->unheld[r->nunheld].kind = c->kind;
    r->nunheld++;
}

/* The iteration's releases are about to be flushed: their keys are free. */
static void unheld_run(struct lg_run *r)
{
    for (unsigned i = 0; i < r->nunheld; i++)
        unhold(&r->keys[r->unheld[i].key], r->unheld[i].kind);
    r->nunheld = 0;
}

void lg_run_client_idle(struct lg_client *c)
{
    struct lg_run *r = c->run;

    r->active--;
    if (r->active > 0)
        return;
    if (r->phase == LG_PH_DRAIN) {
        close_all(r);
    } else if (r->phase < LG_PH_DRAIN) {
        snprintf(r->res->error, sizeof(r->res->error), "every client lost its connection (%s)",
                 r->res->first_error);
        close_all(r);
    }
}

/* ---- holds ------------------------------------------------------------- */

static void hold_run(struct lg_run *r)
{
    uint64_t now = clock_mono_ns();
    struct list *n;

    while ((n = list_first(&r->hold_q))) {
        struct lg_client *c = list_entry(n, struct lg_client, node);

        if (c->due_ns > now)
            break;
        list_del_init(n);
        lg_client_release(c);
    }
    if (n && !sched_timer_is_pending(&r->hold_timer)) {
        struct lg_client *c = list_entry(n, struct lg_client, node);

        sched_loop_timer_add(r->loop, &r->hold_timer, (c->due_ns + 999999u) / 1000000u);
    }
}

static void hold_timer_cb(struct sched_timer *t)
{
    hold_run(LP_CONTAINER_OF(t, struct lg_run, hold_timer));
}

/* Runs after events and timers, right before the loop's flush. */
static void iter_hook_cb(struct sched_hook *h)
{
    struct lg_run *r = LP_CONTAINER_OF(h, struct lg_run, iter_hook);

    if (r->o->hold_us > 0)
        hold_run(r);
    if (r->sched)
        lg_rate_run(r);
    unheld_run(r);
}

void lg_run_hold(struct lg_client *c)
{
    struct lg_run *r = c->run;

    c->state = LG_CS_HOLD;
    c->due_ns = clock_mono_ns() + r->o->hold_us * 1000u;
    list_add_tail(&r->hold_q, &c->node);
    if (!sched_timer_is_pending(&r->hold_timer))
        sched_loop_timer_add(r->loop, &r->hold_timer, (c->due_ns + 999999u) / 1000000u);
}

/* ---- phases ------------------------------------------------------------ */

static void start_drain(struct lg_run *r);
static void end_drain(struct lg_run *r);
static unsigned busy_unparked(const struct lg_run *r);

/* SIGINT/SIGTERM: the first one stops new cycles (so no lock is left
 * behind), a second one closes at once. Returns true if the phase changed
 * (nothing to print for this tick). */
static bool check_interrupt(struct lg_run *r)
{
    if (!interrupted)
        return false;
    snprintf(r->res->error, sizeof(r->res->error), "interrupted");
    if (interrupted >= 2 || r->phase == LG_PH_CONNECT) {
        close_all(r);
        return true;
    }
    if (r->phase >= LG_PH_DRAIN)
        return false;
    start_drain(r);
    return true;
}

static void progress_cb(struct sched_timer *t)
{
    struct lg_run *r = LP_CONTAINER_OF(t, struct lg_run, progress_timer);
    double el;
    uint64_t d;

    if (check_interrupt(r))
        return;
    if (r->phase == LG_PH_DRAIN && busy_unparked(r) == 0) {
        end_drain(r);
        return;
    }
    el = (double)(clock_mono_ns() - r->t_phase_ns) / 1e9;
    d = r->acq_all - r->last_acq;
    r->last_acq = r->acq_all;
    if (r->phase == LG_PH_MEASURE)
        printf("[%s] measure %5.1f s %10.0f ops/s  (so far %.0f ops/s)\n",
               lg_target_name(r->target), el, (double)d * 1000.0 / PROGRESS_MS,
               el > 0 ? (double)r->cnt.acquisitions / el : 0.0);
    else if (r->phase == LG_PH_WARMUP)
        printf("[%s] warmup  %5.1f s %10.0f ops/s\n", lg_target_name(r->target), el,
               (double)d * 1000.0 / PROGRESS_MS);
    else if (r->phase == LG_PH_DRAIN)
        printf("[%s] drain   %5.1f s  %u clients still busy\n", lg_target_name(r->target), el,
               r->active);
    fflush(stdout);
    sched_loop_timer_in(r->loop, t, PROGRESS_MS);
}

/* How long the drain may take. A direct rwlock waiter whose retry was in
 * flight when a write unlock's "1" arrived has missed it (Redisson's
 * READ_UNLOCK_MESSAGE wakes the waiters present and leaves no permit), and
 * waits out the PTTL it got, up to --lease-ms, unless another message
 * comes: at the end of a run none may come, and that client is slow, not
 * stuck. */
static uint64_t drain_timeout_ms(const struct lg_run *r)
{
    if (r->redisson && !r->polling && r->o->workload == LG_WL_RWLOCK)
        return DRAIN_TIMEOUT_MS + r->o->lease_ms;
    return DRAIN_TIMEOUT_MS;
}

/* Clients still busy that are not just waiting out a timer while holding
 * nothing (parked: see the design block). */
static unsigned busy_unparked(const struct lg_run *r)
{
    unsigned n = 0;

    for (unsigned i = 0; i < r->nclients; i++) {
        const struct lg_client *c = &r->clients[i];
        bool parked = (c->state == LG_CS_LATCH || c->state == LG_CS_POLL) && c->depth == 0 &&
                      sched_timer_is_pending(&c->timer);

        n += c->state != LG_CS_IDLE && c->state != LG_CS_DEAD && !parked;
    }
    return n;
}

/* The drain is over: the busy clients that were only parked waiters are
 * counted so, the rest as stuck. */
static void end_drain(struct lg_run *r)
{
    unsigned unparked = busy_unparked(r);

    r->res->stuck = unparked;
    r->res->parked = r->active > unparked ? r->active - unparked : 0;
    close_all(r);
}

/* No new cycles; close once every client has finished its cycle. */
static void start_drain(struct lg_run *r)
{
    r->phase = LG_PH_DRAIN;
    r->t_phase_ns = clock_mono_ns();
    if (r->sched)
        lg_rate_drain(r);
    if (r->phase == LG_PH_CLOSE)
        return;
    if (r->active == 0) {
        close_all(r);
        return;
    }
    sched_loop_timer_in(r->loop, &r->progress_timer, PROGRESS_MS);
    sched_loop_timer_in(r->loop, &r->phase_timer, drain_timeout_ms(r));
}

/* The measured phase is over: the figures are final from here on. */
static void end_measure(struct lg_run *r)
{
    uint64_t now = clock_mono_ns();

    r->res->seconds = (double)(now - r->t_phase_ns) / 1e9;
    lg_figures_end(r);
    r->res->ran = true;
    start_drain(r);
}

/* Warm-up is over: snapshot, zero the counters, time the measurement. */
static void begin_measure(struct lg_run *r)
{
    lg_figures_begin(r);
    memset(&r->cnt, 0, sizeof(r->cnt));
    for (unsigned i = 0; i < r->nclients; i++)
        r->clients[i].granted = 0;
    lg_hist_reset(r->res->hist);
    r->phase = LG_PH_MEASURE;
    r->t_phase_ns = clock_mono_ns();
    r->last_acq = r->acq_all;
    sched_loop_timer_in(r->loop, &r->progress_timer, PROGRESS_MS);
    sched_loop_timer_in(r->loop, &r->phase_timer, (uint64_t)(r->o->duration_s * 1000.0));
}

/* The phase timer: connect timeout, end of warm-up, end of
 * measurement, or drain timeout (whoever is still busy is stuck). */
static void phase_cb(struct sched_timer *t)
{
    struct lg_run *r = LP_CONTAINER_OF(t, struct lg_run, phase_timer);

    switch (r->phase) {
    case LG_PH_CONNECT:
        snprintf(r->res->error, sizeof(r->res->error),
                 "connecting timed out (%u of %u connections up)", r->conns_up, r->conns_total);
        close_all(r);
        return;
    case LG_PH_WARMUP:
        begin_measure(r);
        return;
    case LG_PH_MEASURE:
        end_measure(r);
        return;
    case LG_PH_DRAIN:
        end_drain(r);
        return;
    default:
        return;
    }
}

static void begin_warmup(struct lg_run *r)
{
    sched_loop_timer_del(r->loop, &r->phase_timer);
    r->phase = LG_PH_WARMUP;
    r->t_phase_ns = clock_mono_ns();
    sched_loop_hook_add(r->loop, &r->iter_hook);
    sched_loop_timer_in(r->loop, &r->progress_timer, PROGRESS_MS);
    for (unsigned i = 0; i < r->nclients; i++)
        r->active += r->clients[i].state != LG_CS_DEAD;
    if (r->sched)
        lg_rate_begin(r);
    for (unsigned i = 0; i < r->nclients; i++) {
        if (r->clients[i].state != LG_CS_DEAD)
            lg_client_start(&r->clients[i]);
    }
    if (r->o->warmup_s > 0)
        sched_loop_timer_in(r->loop, &r->phase_timer, (uint64_t)(r->o->warmup_s * 1000.0));
    else
        begin_measure(r);
}

static void close_conn(struct sched_conn *c)
{
    sched_conn_close(c, false);
}

static void close_all(struct lg_run *r)
{
    if (r->phase == LG_PH_CLOSE)
        return;
    r->phase = LG_PH_CLOSE;
    sched_loop_timer_del(r->loop, &r->phase_timer);
    sched_loop_timer_del(r->loop, &r->progress_timer);
    sched_loop_timer_del(r->loop, &r->hold_timer);
    sched_loop_timer_del(r->loop, &r->rate_timer);
    sched_loop_hook_del(r->loop, &r->iter_hook);
    for (unsigned i = 0; i < r->conns_next; i++) {
        if (i < r->nclients) {
            struct lg_client *c = &r->clients[i];

            sched_loop_timer_del(r->loop, &c->timer);
            list_del_init(&c->node);
            close_conn(&c->conn);
        } else {
            close_conn(&r->subs[i - r->nclients].conn);
        }
    }
    if (r->conns_released == r->conns_next)
        sched_loop_stop(r->loop);
}

/* ---- connections ------------------------------------------------------- */

static void resolve_unix(const struct lg_endpoint *ep, struct lg_addr *a)
{
    struct sockaddr_un *sun = (struct sockaddr_un *)&a->ss;
    size_t n = strlen(ep->host);

    memset(&a->ss, 0, sizeof(a->ss));
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, ep->host, n + 1);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

int lg_run_resolve(const struct lg_endpoint *ep, struct lg_addr *a, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    int rc;

    if (ep->is_unix) {
        resolve_unix(ep, a);
        return 0;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(ep->host, ep->port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %.100s: %s", ep->name, gai_strerror(rc));
        return -EINVAL;
    }
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Where connection i goes: the clients to the target, the pub/sub
 * connections to Redis; with --cluster, a direct client and its pub/sub
 * connection (one per client) to the master of the client's key. */
static const struct lg_addr *conn_addr(struct lg_run *r, unsigned i)
{
    bool cl = i < r->nclients;
    struct lg_client *c = &r->clients[cl ? i : i - r->nclients];

    if (r->cluster && r->redisson) {
        unsigned m = lg_cluster_master_of(r, c->key);

        if (cl)
            c->master = m;
        return &r->cluster->addrs[m];
    }
    return cl ? &r->cmd_addr : &r->sub_addr;
}

/* Starts connects until CONNECT_WINDOW are in flight: clients first,
 * then the pub/sub connections. */
static void connect_more(struct lg_run *r)
{
    while (r->phase == LG_PH_CONNECT && r->conns_pending < CONNECT_WINDOW &&
           r->conns_next < r->conns_total) {
        unsigned i = r->conns_next;
        bool cl = i < r->nclients;
        const struct lg_addr *a = conn_addr(r, i);
        struct sched_conn *c = cl ? &r->clients[i].conn : &r->subs[i - r->nclients].conn;
        int rc = sched_conn_connect(r->loop, c, (const struct sockaddr *)&a->ss, a->len,
                                    cl ? &lg_client_ops : &lg_sub_ops);

        if (rc == 0 && cl && r->tls && (rc = sched_conn_start_tls(c, r->tls, r->cmd_ep->host)) < 0)
            sched_conn_close(c, false);
        if (rc < 0) {
            snprintf(r->res->error, sizeof(r->res->error), "connection %u: %s", i, strerror(-rc));
            close_all(r);
            return;
        }
        r->conns_next++;
        r->conns_pending++;
    }
}

void lg_run_conn_done(struct lg_run *r, int err)
{
    r->conns_pending--;
    if (r->phase != LG_PH_CONNECT)
        return;
    if (err < 0) {
        snprintf(r->res->error, sizeof(r->res->error), "connect to %.100s: %s", r->cmd_ep->name,
                 strerror(-err));
        close_all(r);
        return;
    }
    r->res->conns = ++r->conns_up;
    if (r->conns_up == r->conns_total)
        begin_warmup(r);
    else
        connect_more(r);
}

void lg_run_conn_failed(struct lg_run *r, const char *why)
{
    r->conns_pending--;
    if (r->phase != LG_PH_CONNECT)
        return;
    snprintf(r->res->error, sizeof(r->res->error), "%.200s", why);
    close_all(r);
}

void lg_run_conn_released(struct lg_run *r)
{
    r->conns_released++;
    if (r->phase == LG_PH_CLOSE && r->conns_released == r->conns_next)
        sched_loop_stop(r->loop);
}

/* ---- set-up and tear-down ---------------------------------------------- */

/* The owner prefix and the workload's scripts, named (and loaded on
 * Redis for the direct targets). */
static int load_scripts(struct lg_run *r)
{
    int rc;

    rc = util_uuid4(r->uuid);
    if (rc < 0)
        return rc;
    if (r->o->workload == LG_WL_RWLOCK) {
        lg_rw_scripts(r);
    } else if (r->o->workload == LG_WL_SEMAPHORE) {
        lg_sem_scripts(r);
    } else {
        r->scripts[LG_SCR_ACQ].lua = acquire_lua;
        r->scripts[LG_SCR_REL].lua = unlock_lua;
    }
    if (r->cluster && (rc = lg_cluster_scripts(r)) < 0)
        return rc;
    return lg_scripts_prepare(r);
}

/* Direct targets: one registry per client (its one key), or one shared
 * registry over every key. Returns 0 or -ENOMEM. */
static int alloc_subs(struct lg_run *r)
{
    bool shared = r->target == LG_TGT_DIRECT_SHARED;

    if (!r->redisson || r->polling || r->o->pipeline > 0)
        return 0;
    r->nsubs = shared ? 1 : r->nclients;
    r->subs = calloc(r->nsubs, sizeof(*r->subs));
    if (!r->subs)
        return -ENOMEM;
    for (unsigned i = 0; i < r->nsubs; i++) {
        unsigned first = shared ? 0 : i % r->nkeys;
        int rc = lg_sub_init(&r->subs[i], r, first, shared ? r->nkeys : 1);

        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Allocates the holder table, the clients and their requests. Returns 0
 * or -ENOMEM. */
static int run_setup(struct lg_run *r)
{
    int rc;

    r->nkeys = lg_opts_nkeys(r->o);
    r->keys = calloc(r->nkeys, sizeof(*r->keys));
    r->unheld = calloc(r->o->clients, sizeof(*r->unheld));
    r->snap0 = calloc(1, sizeof(*r->snap0));
    r->nclients = r->o->clients;
    r->clients = calloc(r->nclients, sizeof(*r->clients));
    if (!r->keys || !r->unheld || !r->snap0 || !r->clients)
        return -ENOMEM;
    rc = alloc_subs(r);
    for (unsigned i = 0; i < r->nclients && rc == 0; i++)
        rc = lg_client_init(&r->clients[i], r, i);
    if (rc == 0)
        rc = lg_rate_init(r);
    if (rc < 0)
        snprintf(r->res->error, sizeof(r->res->error), "out of memory");
    r->conns_total = r->nclients + r->nsubs;
    return rc;
}

static void run_teardown(struct lg_run *r)
{
    for (unsigned i = 0; r->clients && i < r->nclients; i++)
        lg_client_deinit(&r->clients[i]);
    for (unsigned i = 0; r->subs && i < r->nsubs; i++)
        lg_sub_deinit(&r->subs[i]);
    lg_rate_deinit(r);
    free(r->clients);
    free(r->subs);
    free(r->keys);
    free(r->unheld);
    free(r->snap0);
}

static void run_init(struct lg_run *r, struct sched_loop *l, const struct lg_opts *o,
                     enum lg_target t, struct lg_result *res)
{
    memset(r, 0, sizeof(*r));
    r->loop = l;
    r->o = o;
    r->res = res;
    r->target = t;
    r->redisson = lg_target_redisson(t);
    r->polling = t == LG_TGT_TWEMPROXY;
    r->cmd_ep = lg_target_endpoint(o, t);
    r->sub_ep = t == LG_TGT_PASSTHROUGH ? r->cmd_ep : &o->redis;
    r->acq_per_cycle = o->workload == LG_WL_REENTRANT ? 2 : 1;
    r->chan_prefix = o->workload == LG_WL_RWLOCK      ? "redisson_rwlock:{"
                     : o->workload == LG_WL_SEMAPHORE ? "redisson_sc:{"
                                                      : "redisson_lock__channel:{";
    list_init(&r->hold_q);
    sched_timer_init(&r->hold_timer, hold_timer_cb);
    sched_timer_init(&r->phase_timer, phase_cb);
    sched_timer_init(&r->progress_timer, progress_cb);
    sched_timer_init(&r->rate_timer, lg_rate_timer_cb);
    list_init(&r->iter_hook.node);
    r->iter_hook.fn = iter_hook_cb;
}

static int resolve_all(struct lg_run *r)
{
    char *err = r->res->error;
    size_t len = sizeof(r->res->error);
    if (lg_run_resolve(r->cmd_ep, &r->cmd_addr, err, len) < 0)
        return -EINVAL;
    if (!r->redisson || r->polling)
        return 0;
    return lg_run_resolve(r->sub_ep, &r->sub_addr, err, len);
}

/* The proxy target with --tls-ca-cert-file: a client context that
 * verifies the proxy's certificate (chain and host). */
static int tls_setup(struct lg_run *r)
{
    struct sched_tls_opts so = {
        .role = SCHED_TLS_CLIENT, .ca_file = r->o->tls_ca, .verify = SCHED_TLS_VERIFY_REQUIRED};
    char why[256];

    if (r->target != LG_TGT_PROXY || !r->o->tls_ca || r->cmd_ep->is_unix)
        return 0;
    if (sched_tls_ctx_create(&r->tls, &so, why, sizeof(why)) == 0)
        return 0;
    snprintf(r->res->error, sizeof(r->res->error), "TLS: %.200s", why);
    return -EINVAL;
}

int lg_run_target(struct sched_loop *l, const struct lg_opts *o, enum lg_target t,
                  struct lg_result *res)
{
    struct lg_run *r = malloc(sizeof(*r));
    int rc;

    if (!r)
        return -ENOMEM;
    run_init(r, l, o, t, res);
    rc = resolve_all(r);
    if (rc == 0 && o->cluster)
        rc = lg_cluster_open(r);
    if (rc == 0)
        rc = tls_setup(r);
    if (rc == 0 && r->redisson)
        rc = load_scripts(r);
    if (rc == 0)
        rc = run_setup(r);
    if (rc == 0 && o->workload == LG_WL_SEMAPHORE)
        rc = lg_sem_create(r);
    if (rc == 0) {
        sched_loop_timer_in(l, &r->phase_timer, CONNECT_TIMEOUT_MS);
        connect_more(r);
        if (r->phase != LG_PH_CLOSE || r->conns_released < r->conns_next)
            rc = sched_loop_run(l);
    }
    lg_clean_keys(r);
    run_teardown(r);
    lg_cluster_close(r);
    sched_tls_ctx_put(r->tls);
    free(r);
    return rc;
}
