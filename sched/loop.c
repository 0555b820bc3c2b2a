/* Event loop, backend-independent part: creation and backend selection, the
 * iteration, timers, hooks, the flush, ready and release lists, and the
 * connection state machine that both backends drive. The contract is in
 * loop.h; the I/O lives in loop_uring.c and loop_epoll.c.
 *
 * DESIGN BLOCK
 *
 * Iteration (loop_iterate): refresh now_ms; wait, for 0 ms if work is
 * pending (dirty, ready or release list non-empty, stop requested), else
 * until the wheel's next deadline (or the caller's bound); refresh now_ms;
 * dispatch completions/readiness; deliver deferred events (ready list); run
 * the wheel; run hooks; flush the dirty list (at most one new send per
 * connection); deliver on_release (release list). A connection dirtied by a
 * callback during the flush is flushed on the next iteration, which then
 * does not wait. Submissions prepared anywhere in an iteration go to the
 * kernel with the next wait (io_uring: one io_uring_enter per iteration).
 *
 * Connection states (flags in conn-t.h plus private ones in loop-int.h):
 *
 *   attach ----------------------------> OPEN (receiving unless PAUSED)
 *   connect -> CONNECTING --ok--------> OPEN, on_connect(0)
 *                         --error-----> EOF|BROKEN|HUNGUP, on_connect(err)
 *   OPEN --EOF/error--> EOF (+BROKEN on error), on_hangup once
 *   any --close(flush) with output--> CLOSING|FLUSH_CLOSE --drained/error-+
 *   any --close(!flush)------------------------------------------------- +
 *                                                                        v
 *       FINAL: backend cancels/unregisters all I/O (fd still open)
 *       --inflight == 0--> fd closed, on release list --end of iteration-->
 *       RELEASED: buffers freed, on_release
 *
 * Invariants.
 * - DIRTY <=> on l->dirty; a ready_node is linked iff READY_CONN,
 *   HUP_PENDING or held input waits for delivery; close_node is linked iff
 *   FINAL, inflight == 0, fd == -1 and on_release not yet delivered.
 * - The fd is closed only when no operation of c is in flight or queued in
 *   the SQ, so a stale SQE can never hit a reused fd number.
 * - io_uring: at most one send (`sending`), one recv, one connect poll per
 *   connection, each tagged in user_data; inflight counts them plus cancels.
 *   `sending` is never touched while SENDING (the kernel reads it).
 * - on_hangup: at most once, never after close; an orderly EOF is held back
 *   until held input was delivered and the connection is not paused; an
 *   error is delivered at once (held input is dropped). on_data: never
 *   after close, EOF, or while paused.
 * - Paused: the socket is not read (the kernel's buffers fill and the peer
 *   blocks: back-pressure), but its errors are watched (WATCH: an io_uring
 *   poll, an epoll registration without events), so a peer that vanished
 *   (reset, keepalive or user timeout) is reported at once. A clean
 *   hang-up seen by the watch only ends the watch (UNWATCH) until resume.
 *
 * Who frees what. The owner owns struct sched_conn and frees it in
 * on_release; the loop deinits out, sending and held just before that
 * call. Accept state (struct sched_accept_state) is loop-owned: freed at
 * the end of the iteration in which its listener was stopped and its last
 * io_uring operation completed, or in sched_loop_destroy().
 *
 * TLS (tls.c) is a transform on this machine, not a state of it: the
 * backends hand received bytes to sched__conn_recv() and fill `sending`
 * with sched__conn_refill(); both test c->tls once and are the plain
 * delivery and swap otherwise. A client session defers on_connect to the
 * end of its handshake; an EOF or error during a handshake becomes the
 * session's failure (sched__tls_hangup).
 *
 * Re-entrancy. Every callback may write, pause, close any connection, add
 * or delete timers and hooks, stop listeners. on_release is the only place
 * where c may be freed; no callback ever runs inside an API call made by
 * the owner (close, pause, write, attach, connect, listener_stop).
 *
 * Rejected alternatives.
 * - Freeing or calling on_release from sched_conn_close(): the kernel may
 *   still write into the conn's buffers, and the caller's stack may still
 *   use c (Redis freeClientAsync, libuv uv_close).
 * - Closing the fd at close time: an SQE queued but not yet submitted would
 *   then run on whatever socket reuses the number.
 * - Direct descriptors for accepted sockets: the fds are handed to owners
 *   and must also work with setsockopt and the epoll backend.
 * - Edge-triggered epoll: level-triggered makes the per-iteration read cap
 *   and pause trivial (unread data is simply reported again).
 * - Delivering held input from sched_conn_pause(false): that would call
 *   on_data from inside an owner call; it goes through the ready list. */
#include "sched/loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "sched/loop-int.h"
#include "sched/tls.h"
#include "sched/wheel.h"

#define LOOP_WHEEL_SLOTS     4096u
#define LOOP_TICK_MS_DEFAULT 4u
#define LOOP_MAX_CONNS_DEF   1024u
/* sched_loop_run() never blocks longer than this: a signal that lands
 * between the stop check and the wait is then noticed within a second. */
#define LOOP_RUN_MAX_WAIT_MS 1000
#define ACCEPT_RETRY_MS      100u

_Static_assert(_Alignof(struct sched_conn) >= 8, "user_data tags need 8-aligned conns");
_Static_assert(_Alignof(struct sched_accept_state) >= 8, "user_data tags need 8 alignment");

static void conn_finalize(struct sched_conn *c);

/* ---- creation ---------------------------------------------------------- */

/* Logs the AUTO fallback once per process, not once per loop. */
static void loop_log_fallback(int err)
{
    static atomic_flag logged = ATOMIC_FLAG_INIT;

    if (!atomic_flag_test_and_set(&logged))
        log_msg(LOG_LVL_INFO, "io_uring unavailable (%s), using epoll", strerror(-err));
}

static int loop_backend_init(struct sched_loop *l, enum sched_io io)
{
    int rc;

    switch (io) {
    case SCHED_IO_URING:
        l->be = &sched__uring_backend;
        return l->be->init(l);
    case SCHED_IO_EPOLL:
        l->be = &sched__epoll_backend;
        return l->be->init(l);
    case SCHED_IO_AUTO:
        l->be = &sched__uring_backend;
        rc = l->be->init(l);
        if (rc == 0)
            return 0;
        loop_log_fallback(rc);
        l->be = &sched__epoll_backend;
        return l->be->init(l);
    }
    return -EINVAL;
}

int sched_loop_create(struct sched_loop **out, const struct sched_loop_opts *opts)
{
    static const struct sched_loop_opts defaults = {SCHED_IO_AUTO, 0, 0};
    struct sched_loop *l;
    int rc;

    if (!opts)
        opts = &defaults;
    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    list_init(&l->hooks);
    list_init(&l->dirty);
    list_init(&l->ready);
    list_init(&l->release);
    list_init(&l->acceptors);
    list_init(&l->dead_acceptors);
    l->max_conns = opts->max_conns ? opts->max_conns : LOOP_MAX_CONNS_DEF;
    l->now_ms = clock_mono_ms();
    rc = sched_wheel_init(&l->wheel, l->now_ms,
                          opts->tick_ms ? opts->tick_ms : LOOP_TICK_MS_DEFAULT, LOOP_WHEEL_SLOTS);
    if (rc < 0)
        goto err_free;
    rc = loop_backend_init(l, opts->io);
    if (rc < 0)
        goto err_wheel;
    *out = l;
    return 0;
err_wheel:
    sched_wheel_deinit(&l->wheel);
err_free:
    free(l);
    return rc;
}

/* Frees every accept state on head; live ones still own their listener's fd. */
static void loop_free_acceptors(struct list *head)
{
    struct list *n;

    while ((n = list_first(head))) {
        struct sched_accept_state *a = list_entry(n, struct sched_accept_state, node);

        list_del_init(n);
        if (a->ls) {
            close(a->ls->fd);
            a->ls->fd = -1;
            a->ls->acc = NULL;
        }
        free(a);
    }
}

void sched_loop_destroy(struct sched_loop *l)
{
    l->be->deinit(l);
    loop_free_acceptors(&l->acceptors);
    loop_free_acceptors(&l->dead_acceptors);
    sched_wheel_deinit(&l->wheel);
    free(l);
}

const char *sched_loop_backend(const struct sched_loop *l)
{
    return l->be->name;
}

bool sched_loop_sends_wake(const struct sched_loop *l)
{
    return l->be->sends_wake(l);
}

/* ---- iteration --------------------------------------------------------- */

static bool loop_has_pending_work(const struct sched_loop *l)
{
    return !list_empty(&l->dirty) || !list_empty(&l->ready) || !list_empty(&l->release) || l->stop;
}

/* The wait bound: 0 with pending work, else the sooner of the next timer
 * and max_wait (-1: no bound). */
static int loop_timeout(struct sched_loop *l, int max_wait)
{
    int64_t t;

    if (loop_has_pending_work(l))
        return 0;
    t = sched_wheel_timeout_ms(&l->wheel, l->now_ms);
    if (t > INT_MAX)
        t = INT_MAX;
    if (max_wait >= 0 && (t < 0 || t > max_wait))
        t = max_wait;
    return (int)t;
}

/* Delivers deferred connect results, held input and held-back hangups. */
static void loop_run_ready(struct sched_loop *l)
{
    struct list todo, *n;

    list_init(&todo);
    list_splice_tail_init(&todo, &l->ready);
    while ((n = list_first(&todo))) {
        struct sched_conn *c = list_entry(n, struct sched_conn, ready_node);

        list_del_init(n);
        if (c->flags & SCHED__CONN_READY_CONN) {
            c->flags &= ~SCHED__CONN_READY_CONN;
            sched__conn_connected(c, c->err);
            continue;
        }
        if (c->flags & SCHED_CONN_CLOSING)
            continue;
        if (!(c->flags & SCHED_CONN_PAUSED) && buf_size(&c->held) > 0) {
            struct buf in = c->held;

            buf_init(&c->held);
            c->ops->on_data(c, buf_head(&in), buf_size(&in));
            buf_deinit(&in);
        }
        /* An error is reported even while paused; an EOF waits for resume. */
        if ((c->flags & SCHED__CONN_HUP_PENDING) && (c->err < 0 || !(c->flags & SCHED_CONN_PAUSED)))
            sched__conn_hangup(c, c->err);
    }
}

/* Runs every hook once; hooks added meanwhile run from the next iteration. */
static void loop_run_hooks(struct sched_loop *l)
{
    struct list todo, *n;

    list_init(&todo);
    list_splice_tail_init(&todo, &l->hooks);
    while ((n = list_first(&todo))) {
        struct sched_hook *h = list_entry(n, struct sched_hook, node);

        list_del_init(n);
        list_add_tail(&l->hooks, n);
        h->fn(h);
    }
}

/* One flush per dirty connection; those dirtied meanwhile wait for the next
 * iteration (which then does not block). */
static void loop_flush(struct sched_loop *l)
{
    struct list todo, *n;

    list_init(&todo);
    list_splice_tail_init(&todo, &l->dirty);
    while ((n = list_first(&todo))) {
        struct sched_conn *c = list_entry(n, struct sched_conn, dirty_node);

        list_del_init(n);
        c->flags &= ~SCHED_CONN_DIRTY;
        if (c->ops->on_flush)
            c->ops->on_flush(c);
        l->be->conn_flush(c);
    }
}

static void loop_release(struct sched_loop *l)
{
    struct list *n;

    while ((n = list_first(&l->release))) {
        struct sched_conn *c = list_entry(n, struct sched_conn, close_node);

        list_del_init(n);
        c->flags |= SCHED_CONN_RELEASED;
        sched__tls_free(c);
        buf_deinit(&c->out);
        buf_deinit(&c->sending);
        buf_deinit(&c->held);
        c->ops->on_release(c);
    }
    n = l->dead_acceptors.next;
    while (n != &l->dead_acceptors) {
        struct sched_accept_state *a = list_entry(n, struct sched_accept_state, node);

        n = n->next;
        if (a->inflight == 0) {
            list_del_init(&a->node);
            free(a);
        }
    }
}

/* ---- latency ------------------------------------------------------------ */

#define LAT_LOG_EVERY_MS 1000u /* at most one latency line a second */

void sched_loop_set_latency_threshold(struct sched_loop *l, unsigned ms)
{
    l->lat_threshold_us = (uint64_t)ms * 1000u;
    l->lat.threshold_ms = ms;
    l->wheel.late_ms = ms;
}

void sched_loop_latency(const struct sched_loop *l, struct sched_loop_latency *out)
{
    *out = l->lat;
    out->late_timers = l->wheel.late;
    out->max_late_ms = l->wheel.late_max_ms;
}

static uint64_t loop_tv_ms(const struct timeval *tv)
{
    return (uint64_t)tv->tv_sec * 1000u + (uint64_t)tv->tv_usec / 1000u;
}

/* The loop thread's time spent runnable but waiting for a CPU, in ns
 * (/proc/thread-self/schedstat, second field), or 0 where there is none. */
static uint64_t loop_run_delay_ns(void)
{
    unsigned long long on_cpu = 0, delay = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "re");

    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &on_cpu, &delay) != 2)
        delay = 0;
    fclose(f);
    return delay;
}

/* Where the time since the last latency line went, read only when a line
 * is logged (never on the hot path): CPU used, time spent waiting for a
 * CPU, major page faults, blocking waits and preemptions. A stall with
 * little CPU and a long wait for a CPU was the scheduler (or the host
 * stalling a vCPU); with major faults, paging; with neither, a blocking
 * call or a stopped process. */
static void loop_usage_since(struct sched_loop *l, char *out, size_t n)
{
    struct rusage ru;
    const struct rusage *o = &l->lat_ru;
    uint64_t delay_ns = loop_run_delay_ns();

    if (getrusage(RUSAGE_SELF, &ru) < 0) {
        snprintf(out, n, "no usage figures");
        return;
    }
    snprintf(out, n,
             "since the previous line or the start: %llu ms CPU, %llu ms waiting for a CPU, "
             "%ld major faults, %ld waits, %ld preemptions",
             (unsigned long long)(loop_tv_ms(&ru.ru_utime) + loop_tv_ms(&ru.ru_stime) -
                                  loop_tv_ms(&o->ru_utime) - loop_tv_ms(&o->ru_stime)),
             (unsigned long long)((delay_ns - l->lat_run_delay_ns) / 1000000u),
             ru.ru_majflt - o->ru_majflt, ru.ru_nvcsw - o->ru_nvcsw, ru.ru_nivcsw - o->ru_nivcsw);
    l->lat_ru = ru;
    l->lat_run_delay_ns = delay_ns;
}

/* An iteration worked work_us: counts it, and logs what passed the
 * threshold since the last line (at most a line a second). */
static void loop_note_work(struct sched_loop *l, uint64_t work_us)
{
    char usage[160];
    uint64_t slow, late;

    l->lat.iterations++;
    if (work_us > l->lat.max_work_us)
        l->lat.max_work_us = work_us;
    if (l->lat_threshold_us == 0)
        return;
    if (work_us > l->lat_threshold_us)
        l->lat.slow++;
    slow = l->lat.slow - l->lat_logged_slow;
    late = l->wheel.late - l->lat_logged_late;
    if ((slow == 0 && late == 0) ||
        (l->lat_log_ms != 0 && l->now_ms - l->lat_log_ms < LAT_LOG_EVERY_MS))
        return;
    loop_usage_since(l, usage, sizeof(usage));
    log_msg(LOG_LVL_WARN,
            "event loop latency over --latency-monitor-threshold %llu ms: %llu iteration(s) "
            "worked longer (this one %llu ms, longest %llu ms), %llu timer(s) fired late "
            "(latest %llu ms after its deadline); %s",
            (unsigned long long)l->lat.threshold_ms, (unsigned long long)slow,
            (unsigned long long)(work_us / 1000u), (unsigned long long)(l->lat.max_work_us / 1000u),
            (unsigned long long)late, (unsigned long long)l->wheel.late_max_ms, usage);
    l->lat_log_ms = l->now_ms;
    l->lat_logged_slow = l->lat.slow;
    l->lat_logged_late = l->wheel.late;
}

static int loop_iterate(struct sched_loop *l, int max_wait)
{
    uint64_t woke_ns;
    int rc;

    l->now_ms = clock_mono_ms();
    rc = l->be->wait(l, loop_timeout(l, max_wait));
    if (rc < 0)
        return rc;
    woke_ns = clock_mono_ns();
    l->now_ms = woke_ns / 1000000u;
    l->be->dispatch(l);
    loop_run_ready(l);
    sched_wheel_run(&l->wheel, l->now_ms);
    loop_run_hooks(l);
    loop_flush(l);
    loop_release(l);
    loop_note_work(l, (clock_mono_ns() - woke_ns) / 1000u);
    return l->fatal;
}

int sched_loop_run(struct sched_loop *l)
{
    int rc = 0;

    while (!l->stop && rc == 0)
        rc = loop_iterate(l, LOOP_RUN_MAX_WAIT_MS);
    l->stop = 0;
    return rc;
}

int sched_loop_run_once(struct sched_loop *l, int timeout_ms)
{
    return loop_iterate(l, timeout_ms);
}

void sched_loop_stop(struct sched_loop *l)
{
    l->stop = 1;
}

uint64_t sched_loop_now_ms(const struct sched_loop *l)
{
    return l->now_ms;
}

/* ---- timers and hooks -------------------------------------------------- */

void sched_loop_timer_add(struct sched_loop *l, struct sched_timer *t, uint64_t expires_ms)
{
    sched_wheel_add(&l->wheel, t, expires_ms);
}

void sched_loop_timer_in(struct sched_loop *l, struct sched_timer *t, uint64_t delay_ms)
{
    sched_wheel_add(&l->wheel, t, l->now_ms + delay_ms);
}

void sched_loop_timer_del(struct sched_loop *l, struct sched_timer *t)
{
    sched_wheel_del(&l->wheel, t);
}

void sched_loop_hook_add(struct sched_loop *l, struct sched_hook *h)
{
    list_add_tail(&l->hooks, &h->node);
}

void sched_loop_hook_del(struct sched_loop *l, struct sched_hook *h)
{
    (void)l;
    list_del_init(&h->node);
}

/* ---- listeners --------------------------------------------------------- */

static void accept_retry_cb(struct sched_timer *t)
{
    struct sched_accept_state *a = LP_CONTAINER_OF(t, struct sched_accept_state, retry);
    int rc;

    if (!a->ls || a->armed)
        return;
    rc = a->loop->be->accept_arm(a);
    if (rc < 0)
        sched__accept_backoff(a, rc);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int sched_listener_start(struct sched_loop *l, struct sched_listener *ls, int fd,
                         void (*on_accept)(struct sched_listener *ls, int fd))
{
    struct sched_accept_state *a;
    int rc;

    ls->loop = l;
    ls->fd = fd;
    ls->flags = 0;
    ls->on_accept = on_accept;
    ls->accepted = 0;
    ls->acc = NULL;
    rc = set_nonblock(fd);
    if (rc < 0)
        goto err_close;
    a = calloc(1, sizeof(*a));
    rc = -ENOMEM;
    if (!a)
        goto err_close;
    a->loop = l;
    a->ls = ls;
    list_init(&a->node);
    sched_timer_init(&a->retry, accept_retry_cb);
    rc = l->be->accept_arm(a);
    if (rc < 0)
        goto err_free;
    ls->acc = a;
    list_add_tail(&l->acceptors, &a->node);
    return 0;
err_free:
    free(a);
err_close:
    close(fd);
    ls->fd = -1;
    return rc;
}

void sched_listener_stop(struct sched_listener *ls)
{
    struct sched_accept_state *a = ls->acc;
    struct sched_loop *l = ls->loop;

    if (!a)
        return;
    l->be->accept_stop(a);
    ls->acc = NULL;
    a->ls = NULL;
    sched_wheel_del(&l->wheel, &a->retry);
    close(ls->fd);
    ls->fd = -1;
    list_del_init(&a->node);
    list_add_tail(&l->dead_acceptors, &a->node);
}

bool sched__accept_err_transient(int err)
{
    switch (-err) {
    case EAGAIN:
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
        return true;
    default:
        return false;
    }
}

void sched__accept_backoff(struct sched_accept_state *a, int err)
{
    if (!a->ls)
        return;
    if (!a->warned) {
        a->warned = true;
        log_msg(LOG_LVL_WARN, "accept on fd %d: %s; pausing accepts for %u ms", a->ls->fd,
                strerror(-err), ACCEPT_RETRY_MS);
    }
    sched_loop_timer_in(a->loop, &a->retry, ACCEPT_RETRY_MS);
}

/* ---- connections: setup ------------------------------------------------ */

static void conn_init(struct sched_loop *l, struct sched_conn *c, int fd,
                      const struct sched_conn_ops *ops)
{
    c->loop = l;
    c->ops = ops;
    c->fd = fd;
    c->flags = 0;
    c->inflight = 0;
    c->err = 0;
    buf_init(&c->out);
    buf_init(&c->sending);
    buf_init(&c->held);
    list_init(&c->dirty_node);
    list_init(&c->close_node);
    list_init(&c->ready_node);
    list_init(&c->send_node);
    c->bytes_in = 0;
    c->bytes_out = 0;
    c->tls = NULL;
}

/* Request/response traffic: the loop batches per iteration, so Nagle would
 * only add delay. Fails harmlessly on non-TCP sockets. */
static void conn_set_nodelay(int fd)
{
    int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Redis's anetKeepAlive: probes every idle / 3 s after idle s, three of
 * them; TCP_USER_TIMEOUT makes unacknowledged data fail in the same time
 * (else retransmissions go on for about 15 minutes, tcp_retries2). */
int sched_conn_keepalive(struct sched_conn *c, unsigned idle_s)
{
    int one = 1, idle = (int)idle_s, intvl = idle / 3 > 0 ? idle / 3 : 1, cnt = 3;
    unsigned user_ms = (idle_s + (unsigned)(intvl * cnt)) * 1000u;
    int domain = 0;
    socklen_t len = sizeof(domain);

    if (idle_s == 0 || getsockopt(c->fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
        return 0;
    if (domain != AF_INET && domain != AF_INET6)
        return 0;
    if (setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) < 0)
        return -errno;
    return 0;
}

int sched_conn_attach(struct sched_loop *l, struct sched_conn *c, int fd,
                      const struct sched_conn_ops *ops)
{
    int rc;

    conn_init(l, c, fd, ops);
    conn_set_nodelay(fd);
    rc = l->be->conn_start(c);
    if (rc < 0) {
        close(fd);
        c->fd = -1;
    }
    return rc;
}

int sched_conn_connect(struct sched_loop *l, struct sched_conn *c, const struct sockaddr *sa,
                       socklen_t salen, const struct sched_conn_ops *ops)
{
    int fd, rc;

    if (!ops->on_connect)
        return -EINVAL;
    fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    conn_init(l, c, fd, ops);
    c->flags = SCHED_CONN_CONNECTING;
    conn_set_nodelay(fd);
    if (connect(fd, sa, salen) == 0 || errno == EINPROGRESS || errno == EINTR) {
        rc = l->be->conn_connect(c);
        if (rc < 0) {
            close(fd);
            c->fd = -1;
        }
        return rc;
    }
    /* Failed at once (e.g. ECONNREFUSED on loopback): still reported
     * through on_connect, from the loop, like an asynchronous failure. */
    c->err = -errno;
    c->flags |= SCHED__CONN_READY_CONN;
    list_add_tail(&l->ready, &c->ready_node);
    return 0;
}

int sched__socket_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return -errno;
    return -err;
}

/* ---- connections: events from the backends ---------------------------- */

bool sched__conn_wants_input(const struct sched_conn *c)
{
    unsigned busy = SCHED_CONN_PAUSED | SCHED_CONN_CONNECTING | SCHED__CONN_EOF | SCHED__CONN_FINAL;

    if (c->fd < 0 || (c->flags & busy))
        return false;
    return !(c->flags & SCHED_CONN_CLOSING) || (c->flags & SCHED_CONN_FLUSH_CLOSE);
}

bool sched__conn_wants_errors(const struct sched_conn *c)
{
    unsigned off = SCHED_CONN_CONNECTING | SCHED_CONN_CLOSING | SCHED__CONN_EOF |
                   SCHED__CONN_FINAL | SCHED__CONN_UNWATCH;

    return c->fd >= 0 && (c->flags & SCHED_CONN_PAUSED) && !(c->flags & off);
}

void sched__conn_watch_event(struct sched_conn *c)
{
    int err;

    if (!sched__conn_wants_errors(c))
        return;
    err = sched__socket_error(c->fd);
    if (err < 0)
        sched__conn_hangup(c, err);
    else
        c->flags |= SCHED__CONN_UNWATCH;
}

static void conn_ready(struct sched_conn *c)
{
    if (!list_is_linked(&c->ready_node))
        list_add_tail(&c->loop->ready, &c->ready_node);
}

void sched__conn_data(struct sched_conn *c, const char *p, size_t n)
{
    if (c->flags & (SCHED_CONN_CLOSING | SCHED__CONN_EOF))
        return;
    c->bytes_in += n;
    if (!(c->flags & SCHED_CONN_PAUSED) && buf_size(&c->held) == 0) {
        c->ops->on_data(c, p, n);
        return;
    }
    if (buf_append(&c->held, p, n) < 0) {
        sched__conn_hangup(c, -ENOMEM);
        return;
    }
    if (!(c->flags & SCHED_CONN_PAUSED))
        conn_ready(c);
}

/* The peer is gone: drop the output (the kernel keeps `sending` while a
 * send is in flight; its completion drops it). */
static void conn_break(struct sched_conn *c)
{
    c->flags |= SCHED__CONN_BROKEN;
    buf_reset(&c->out);
    if (!(c->flags & SCHED_CONN_SENDING))
        buf_reset(&c->sending);
}

void sched__conn_hangup(struct sched_conn *c, int err)
{
    if (LP_UNLIKELY(c->tls != NULL) && sched__tls_hangup(c, err))
        return;
    c->flags |= SCHED__CONN_EOF;
    if (err < 0)
        conn_break(c);
    if (c->flags & SCHED_CONN_CLOSING) {
        if ((c->flags & SCHED_CONN_FLUSH_CLOSE) && err < 0)
            conn_finalize(c);
        return;
    }
    if (c->flags & SCHED_CONN_HUNGUP)
        return;
    if (err == 0 && ((c->flags & SCHED_CONN_PAUSED) || buf_size(&c->held) > 0)) {
        if (!(c->flags & SCHED__CONN_HUP_PENDING))
            c->err = 0;
        c->flags |= SCHED__CONN_HUP_PENDING;
        if (!(c->flags & SCHED_CONN_PAUSED))
            conn_ready(c);
        return;
    }
    c->flags &= ~SCHED__CONN_HUP_PENDING;
    c->flags |= SCHED_CONN_HUNGUP;
    buf_deinit(&c->held);
    c->ops->on_hangup(c, err);
}

void sched__conn_fail_later(struct sched_conn *c, int err)
{
    if (c->flags & (SCHED_CONN_CLOSING | SCHED_CONN_HUNGUP))
        return;
    conn_break(c);
    c->flags |= SCHED__CONN_EOF | SCHED__CONN_HUP_PENDING;
    c->err = err;
    conn_ready(c);
}

void sched__conn_drained(struct sched_conn *c)
{
    if (c->flags & SCHED_CONN_FLUSH_CLOSE) {
        conn_finalize(c);
        return;
    }
    if (!(c->flags & SCHED_CONN_CLOSING) && c->ops->on_drain)
        c->ops->on_drain(c);
}

void sched__conn_connected(struct sched_conn *c, int err)
{
    c->flags &= ~SCHED_CONN_CONNECTING;
    if (err == 0)
        err = c->loop->be->conn_start(c);
    if (err < 0) {
        /* on_connect(err) stands in for on_hangup. */
        c->flags |= SCHED__CONN_EOF | SCHED_CONN_HUNGUP;
        conn_break(c);
        c->ops->on_connect(c, err);
        return;
    }
    if (sched_conn_pending_out(c) > 0)
        sched_conn_mark_dirty(c);
    if (c->tls) {
        sched__tls_connected(c); /* on_connect follows the handshake */
        return;
    }
    if (c->ops->on_connect)
        c->ops->on_connect(c, 0);
}

void sched__conn_maybe_release(struct sched_conn *c)
{
    if (!(c->flags & SCHED__CONN_FINAL) || c->inflight > 0)
        return;
    if ((c->flags & SCHED_CONN_RELEASED) || list_is_linked(&c->close_node))
        return;
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    list_add_tail(&c->loop->release, &c->close_node);
}

/* ---- connections: owner API -------------------------------------------- */

void sched_conn_mark_dirty(struct sched_conn *c)
{
    unsigned closed = SCHED_CONN_DIRTY | SCHED__CONN_FINAL | SCHED_CONN_RELEASED;

    if (c->flags & closed)
        return;
    c->flags |= SCHED_CONN_DIRTY;
    list_add_tail(&c->loop->dirty, &c->dirty_node);
}

int sched_conn_write(struct sched_conn *c, const void *p, size_t n)
{
    int rc;

    if (c->flags & (SCHED_CONN_CLOSING | SCHED__CONN_BROKEN))
        return -EPIPE;
    rc = buf_append(&c->out, p, n);
    if (rc < 0)
        return rc;
    sched_conn_mark_dirty(c);
    return 0;
}

void sched_conn_pause(struct sched_conn *c, bool pause)
{
    if (c->flags & SCHED_CONN_CLOSING)
        return;
    if (pause == !!(c->flags & SCHED_CONN_PAUSED))
        return;
    if (pause) {
        c->flags |= SCHED_CONN_PAUSED;
    } else {
        c->flags &= ~(SCHED_CONN_PAUSED | SCHED__CONN_UNWATCH);
        if (buf_size(&c->held) > 0 || (c->flags & SCHED__CONN_HUP_PENDING))
            conn_ready(c);
    }
    c->loop->be->conn_pause(c);
}

/* Ends all I/O: the backend cancels what is in flight; the fd is closed and
 * on_release queued once the last completion is in. */
static void conn_finalize(struct sched_conn *c)
{
    c->flags &= ~(SCHED_CONN_FLUSH_CLOSE | SCHED_CONN_DIRTY);
    c->flags |= SCHED__CONN_FINAL;
    list_del_init(&c->dirty_node);
    c->loop->be->conn_close(c);
    sched__conn_maybe_release(c);
}

int sched_conn_discard_unsent(struct sched_conn *c)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    if (c->fd < 0 || (c->flags & SCHED_CONN_CLOSING))
        return -EBADF;
    if (setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
        return -errno;
    return 0;
}

void sched_conn_close(struct sched_conn *c, bool flush)
{
    unsigned no_flush = SCHED_CONN_CONNECTING | SCHED__CONN_BROKEN;

    if (c->flags & (SCHED__CONN_FINAL | SCHED_CONN_RELEASED))
        return;
    if (c->flags & SCHED_CONN_CLOSING) {
        if (!flush)
            conn_finalize(c);
        return;
    }
    c->flags |= SCHED_CONN_CLOSING;
    c->flags &= ~(SCHED__CONN_READY_CONN | SCHED__CONN_HUP_PENDING);
    list_del_init(&c->ready_node);
    buf_deinit(&c->held);
    if (flush && c->tls && !(c->flags & no_flush))
        sched__tls_close_notify(c);
    if (flush && !(c->flags & no_flush) &&
        (sched_conn_pending_out(c) > 0 || (c->tls && sched__tls_pending(c)))) {
        c->flags |= SCHED_CONN_FLUSH_CLOSE;
        sched_conn_mark_dirty(c);
        return;
    }
    conn_finalize(c);
}
