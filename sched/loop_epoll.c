/* epoll backend of the event loop (see the design block in loop.c).
 *
 * Level-triggered. A connection is registered with EPOLLIN|EPOLLRDHUP while
 * it wants input (sched__conn_wants_input), with EPOLLOUT while a send hit
 * EAGAIN (WANT_OUT) or a connect is pending, and with no event at all
 * (EPOLLERR, which is always reported anyway) while it is paused, so that
 * a socket error still reaches it (sched__conn_wants_errors); with none of
 * these it is removed from the set, so EPOLLHUP/EPOLLERR cannot spin on a
 * connection nobody handles (a clean EPOLLHUP of a paused one ends its
 * watch: UNWATCH). The registered state is mirrored in the flags
 * (RECV_ARMED = EPOLLIN, SCHED__CONN_EP_OUT = EPOLLOUT, SCHED__CONN_WATCH =
 * EPOLLERR) and reconciled by ep_sync() after every event and owner call
 * that may change it.
 *
 * Reads go into one 16 KiB loop-wide buffer, at most EP_READ_CAP reads per
 * connection per iteration (fairness: level triggering reports the rest
 * again). Sends use the same double buffer as io_uring: `out` is swapped
 * into `sending` and written with send(MSG_NOSIGNAL) until EAGAIN, and a
 * drained buffer is freed.
 *
 * epoll_event.data.ptr is the connection or accept state, with the kind in
 * the low bits. A connection closed earlier in the same batch is still
 * valid memory (released at the end of the iteration) and is skipped by
 * its FINAL flag; a stopped listener's accept state has ls == NULL. */
#include <sys/epoll.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/compiler.h"
#include "sched/loop-int.h"

#define EP_MAX_EVENTS 256
#define EP_RBUF_SIZE  16384
#define EP_READ_CAP   4
#define EP_ACCEPT_CAP 256
#define EP_IN_EVENTS  (EPOLLIN | EPOLLRDHUP)

enum ep_tag {
    EP_TAG_CONN = 1,   /* data.ptr is a struct sched_conn */
    EP_TAG_ACCEPT = 2, /* data.ptr is a struct sched_accept_state */
    EP_TAG_MASK = 7,   /* low bits of the 8-aligned pointers */
};

struct epoll_io {
    int epfd;                             /* owned: the epoll instance */
    int nev;                              /* events collected by the last wait */
    struct epoll_event ev[EP_MAX_EVENTS]; /* events of the last wait */
    char rbuf[EP_RBUF_SIZE];              /* shared read buffer, borrowed by on_data */
};

static struct epoll_io *ep_io(const struct sched_loop *l)
{
    return l->io;
}

static void *ep_tag(void *p, enum ep_tag tag)
{
    return (void *)((uintptr_t)p | (uintptr_t)tag);
}

/* ---- lifecycle ---------------------------------------------------------- */

static int ep_init(struct sched_loop *l)
{
    struct epoll_io *e = calloc(1, sizeof(*e));
    int rc;

    if (!e)
        return -ENOMEM;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (e->epfd < 0) {
        rc = -errno;
        free(e);
        return rc;
    }
    l->io = e;
    return 0;
}

static void ep_deinit(struct sched_loop *l)
{
    struct epoll_io *e = ep_io(l);

    close(e->epfd);
    free(e);
    l->io = NULL;
}

static int ep_wait(struct sched_loop *l, int timeout_ms)
{
    struct epoll_io *e = ep_io(l);
    int n = epoll_wait(e->epfd, e->ev, EP_MAX_EVENTS, timeout_ms);

    if (n < 0) {
        e->nev = 0;
        return errno == EINTR ? 0 : -errno;
    }
    e->nev = n;
    return 0;
}

/* ---- registration ------------------------------------------------------ */

static int ep_ctl(struct sched_loop *l, int op, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};

    if (epoll_ctl(ep_io(l)->epfd, op, fd, &ev) < 0)
        return -errno;
    return 0;
}

static uint32_t ep_conn_want(const struct sched_conn *c)
{
    uint32_t want = 0;

    if (c->flags & SCHED__CONN_POLL_ARMED)
        return EPOLLOUT;
    if (sched__conn_wants_input(c))
        want |= EP_IN_EVENTS;
    if (c->flags & SCHED_CONN_WANT_OUT)
        want |= EPOLLOUT;
    if (sched__conn_wants_errors(c))
        want |= EPOLLERR;
    return want;
}

static uint32_t ep_conn_have(const struct sched_conn *c)
{
    return ((c->flags & SCHED_CONN_RECV_ARMED) ? EP_IN_EVENTS : 0) |
           ((c->flags & SCHED__CONN_EP_OUT) ? EPOLLOUT : 0) |
           ((c->flags & SCHED__CONN_WATCH) ? EPOLLERR : 0);
}

/* The usual state, an open connection that reads and has nothing else to
 * register: ep_conn_want() and ep_conn_have() are both EP_IN_EVENTS. One
 * mask test instead of both, as ep_sync() runs after every event and flush. */
static bool ep_conn_steady(const struct sched_conn *c)
{
    unsigned other = SCHED_CONN_CONNECTING | SCHED_CONN_CLOSING | SCHED_CONN_PAUSED |
                     SCHED_CONN_WANT_OUT | SCHED__CONN_EOF | SCHED__CONN_FINAL |
                     SCHED__CONN_POLL_ARMED | SCHED__CONN_EP_OUT | SCHED__CONN_WATCH;

    return c->fd >= 0 && (c->flags & (other | SCHED_CONN_RECV_ARMED)) == SCHED_CONN_RECV_ARMED;
}

/* Makes the registration match the connection state. */
static int ep_sync(struct sched_conn *c)
{
    uint32_t want, have;
    int op, rc;

    if (ep_conn_steady(c) || c->fd < 0 || (c->flags & SCHED__CONN_FINAL))
        return 0;
    want = ep_conn_want(c);
    have = ep_conn_have(c);
    if (want == have)
        return 0;
    op = have == 0 ? EPOLL_CTL_ADD : want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    rc = ep_ctl(c->loop, op, c->fd, want, ep_tag(c, EP_TAG_CONN));
    if (rc < 0)
        return rc;
    c->flags &= ~(SCHED_CONN_RECV_ARMED | SCHED__CONN_EP_OUT | SCHED__CONN_WATCH);
    if (want & EPOLLIN)
        c->flags |= SCHED_CONN_RECV_ARMED;
    if (want & EPOLLOUT)
        c->flags |= SCHED__CONN_EP_OUT;
    if (want & EPOLLERR)
        c->flags |= SCHED__CONN_WATCH;
    return 0;
}

/* ep_sync() after an event: a failed registration is an I/O error. */
static void ep_sync_or_hangup(struct sched_conn *c)
{
    int rc = ep_sync(c);

    if (rc < 0)
        sched__conn_hangup(c, rc);
}

/* ---- connections ------------------------------------------------------- */

static bool ep_conn_gone(const struct sched_conn *c)
{
    return c->fd < 0 || (c->flags & SCHED__CONN_FINAL);
}

/* Reads until EAGAIN, a short read, or the fairness cap. */
static void ep_read(struct epoll_io *e, struct sched_conn *c)
{
    ssize_t n;
    int i;

    for (i = 0; i < EP_READ_CAP && sched__conn_wants_input(c); i++) {
        n = recv(c->fd, e->rbuf, sizeof(e->rbuf), 0);
        if (n > 0) {
            sched__conn_recv(c, e->rbuf, (size_t)n);
            if ((size_t)n < sizeof(e->rbuf))
                return;
            continue;
        }
        if (n == 0) {
            sched__conn_hangup(c, 0);
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            sched__conn_hangup(c, -errno);
        return;
    }
}

/* Sends `sending`, then `out`, until done or EAGAIN (then WANT_OUT). */
static void ep_send(struct sched_conn *c)
{
    bool sent = false;
    ssize_t n;

    for (;;) {
        if (buf_size(&c->sending) == 0) {
            buf_trim(&c->sending, 0); /* an idle connection keeps no output storage */
            if (!sched__conn_refill(c))
                break;
        }
        n = send(c->fd, buf_head(&c->sending), buf_size(&c->sending), MSG_NOSIGNAL);
        if (n >= 0) {
            buf_consume(&c->sending, (size_t)n);
            c->bytes_out += (uint64_t)n;
            sent = true;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            c->flags |= SCHED_CONN_WANT_OUT;
        else
            sched__conn_hangup(c, -errno);
        return;
    }
    if (sent || (c->flags & SCHED_CONN_FLUSH_CLOSE))
        sched__conn_drained(c);
}

static void ep_conn_flush(struct sched_conn *c)
{
    unsigned busy = SCHED_CONN_CONNECTING | SCHED_CONN_WANT_OUT | SCHED__CONN_BROKEN;

    if (ep_conn_gone(c) || (c->flags & busy))
        return;
    ep_send(c);
    ep_sync_or_hangup(c);
}

static void ep_connect_done(struct sched_conn *c)
{
    c->flags &= ~SCHED__CONN_POLL_ARMED;
    sched__conn_connected(c, sched__socket_error(c->fd));
}

static void ep_conn_event(struct epoll_io *e, struct sched_conn *c, uint32_t ev)
{
    if (ep_conn_gone(c))
        return;
    if (c->flags & SCHED__CONN_POLL_ARMED) {
        ep_connect_done(c);
    } else {
        if ((c->flags & SCHED_CONN_WANT_OUT) && (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
            c->flags &= ~SCHED_CONN_WANT_OUT;
            ep_send(c);
        }
        if ((c->flags & SCHED_CONN_RECV_ARMED) && (ev & (EP_IN_EVENTS | EPOLLERR | EPOLLHUP)))
            ep_read(e, c);
        else if ((c->flags & SCHED__CONN_WATCH) && (ev & (EPOLLERR | EPOLLHUP)))
            sched__conn_watch_event(c);
    }
    ep_sync_or_hangup(c);
}

static int ep_conn_start(struct sched_conn *c)
{
    return ep_sync(c);
}

static int ep_conn_connect(struct sched_conn *c)
{
    c->flags |= SCHED__CONN_POLL_ARMED;
    return ep_sync(c);
}

/* Runs inside sched_conn_pause(): a registration failure is reported from
 * the loop, not from inside the owner's call. */
static void ep_conn_pause(struct sched_conn *c)
{
    int rc = ep_sync(c);

    if (rc < 0)
        sched__conn_fail_later(c, rc);
}

static void ep_conn_close(struct sched_conn *c)
{
    if (c->fd >= 0 && ep_conn_have(c) != 0)
        (void)ep_ctl(c->loop, EPOLL_CTL_DEL, c->fd, 0, NULL);
    c->flags &= ~(SCHED_CONN_RECV_ARMED | SCHED__CONN_EP_OUT | SCHED_CONN_WANT_OUT |
                  SCHED__CONN_POLL_ARMED | SCHED__CONN_WATCH);
}

/* ---- listeners --------------------------------------------------------- */

static int ep_accept_arm(struct sched_accept_state *a)
{
    int rc = ep_ctl(a->loop, EPOLL_CTL_ADD, a->ls->fd, EPOLLIN, ep_tag(a, EP_TAG_ACCEPT));

    if (rc == 0)
        a->armed = true;
    return rc;
}

static void ep_accept_stop(struct sched_accept_state *a)
{
    if (a->armed)
        (void)ep_ctl(a->loop, EPOLL_CTL_DEL, a->ls->fd, 0, NULL);
    a->armed = false;
}

static void ep_accept(struct sched_accept_state *a)
{
    int i, fd, err;

    for (i = 0; i < EP_ACCEPT_CAP && a->ls; i++) {
        fd = accept4(a->ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            a->ls->accepted++;
            a->ls->on_accept(a->ls, fd);
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        if (sched__accept_err_transient(-errno))
            continue;
        err = -errno;
        (void)ep_ctl(a->loop, EPOLL_CTL_DEL, a->ls->fd, 0, NULL);
        a->armed = false;
        sched__accept_backoff(a, err);
        return;
    }
}

/* Sends are plain send(2) calls: they post no event. */
static bool ep_sends_wake(const struct sched_loop *l)
{
    (void)l;
    return false;
}

/* ---- dispatch ---------------------------------------------------------- */

static void ep_dispatch(struct sched_loop *l)
{
    struct epoll_io *e = ep_io(l);
    int i;

    for (i = 0; i < e->nev; i++) {
        uintptr_t p = (uintptr_t)e->ev[i].data.ptr;
        void *obj = (void *)(p & ~(uintptr_t)EP_TAG_MASK);

        if ((p & EP_TAG_MASK) == EP_TAG_CONN)
            ep_conn_event(e, obj, e->ev[i].events);
        else if (((struct sched_accept_state *)obj)->ls)
            ep_accept(obj);
    }
    e->nev = 0;
}

const struct sched__backend sched__epoll_backend = {
    .name = "epoll",
    .init = ep_init,
    .deinit = ep_deinit,
    .wait = ep_wait,
    .dispatch = ep_dispatch,
    .accept_arm = ep_accept_arm,
    .accept_stop = ep_accept_stop,
    .conn_start = ep_conn_start,
    .conn_connect = ep_conn_connect,
    .conn_flush = ep_conn_flush,
    .conn_pause = ep_conn_pause,
    .conn_close = ep_conn_close,
    .sends_wake = ep_sends_wake,
};
