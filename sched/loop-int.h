/* Event loop internals shared by loop.c (the backend-independent part) and
 * the two backends, loop_uring.c and loop_epoll.c: the loop structure, the
 * backend vtable, the private connection flags and the accept state.
 * Nothing outside sched/ (and its unit tests) includes this header. */
#ifndef LP_SCHED_LOOP_INT_H
#define LP_SCHED_LOOP_INT_H

#include <sys/resource.h>

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/compiler.h"
#include "common/list.h"
#include "sched/loop.h"
#include "sched/wheel-t.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Private connection flags, above the public enum sched_conn_flag. */
enum sched__conn_flag {
    SCHED__CONN_EOF = 1u << 16,          /* no more input: EOF, error, or on_hangup given */
    SCHED__CONN_BROKEN = 1u << 17,       /* I/O error: output is dropped, writes fail */
    SCHED__CONN_FINAL = 1u << 18,        /* closed: I/O cancelled, release when inflight is 0 */
    SCHED__CONN_POLL_ARMED = 1u << 19,   /* connect: waiting for the socket to be writable */
    SCHED__CONN_READY_CONN = 1u << 20,   /* ready list: on_connect(err) is due */
    SCHED__CONN_HUP_PENDING = 1u << 21,  /* ready list: on_hangup(c->err) is due */
    SCHED__CONN_RECV_CANCEL = 1u << 22,  /* io_uring: a cancel of the recv is in flight */
    SCHED__CONN_EP_OUT = 1u << 23,       /* epoll: EPOLLOUT is registered */
    SCHED__CONN_WATCH = 1u << 24,        /* paused: socket errors watched (poll / registration) */
    SCHED__CONN_WATCH_CANCEL = 1u << 25, /* io_uring: a cancel of the watch poll is in flight */
    SCHED__CONN_UNWATCH = 1u << 26,      /* paused: peer hung up cleanly; stop watching */
};

/* Accept state of one listener. Owned by the loop, not by the listener, so
 * that sched_listener_stop() is synchronous for the owner while io_uring
 * completions that point here are still on their way. */
struct sched_accept_state {
    struct sched_loop *loop;   /* borrowed: the loop */
    struct sched_listener *ls; /* borrowed: the listener, NULL once stopped */
    struct list node;          /* in loop->acceptors, or loop->dead_acceptors once stopped */
    struct sched_timer retry;  /* re-arms accepting after an fd-exhaustion back-off */
    unsigned inflight;         /* io_uring operations in flight (accept, cancel) */
    bool armed;                /* io_uring: accept in flight; epoll: fd registered */
    bool warned;               /* an accept error was logged (log once per listener) */
};

/* One backend. Every hook runs on the loop's thread. */
struct sched__backend {
    const char *name;                                  /* "io_uring" or "epoll" */
    int (*init)(struct sched_loop *l);                 /* sets l->io; 0 or -errno */
    void (*deinit)(struct sched_loop *l);              /* frees l->io */
    int (*wait)(struct sched_loop *l, int timeout_ms); /* submit and wait; 0 or fatal -errno */
    void (*dispatch)(struct sched_loop *l);            /* deliver what the wait collected */
    int (*accept_arm)(struct sched_accept_state *a);   /* start accepting; 0 or -errno */
    void (*accept_stop)(struct sched_accept_state *a); /* stop accepting; caller closes fd */
    int (*conn_start)(struct sched_conn *c);           /* start receiving; 0 or -errno */
    int (*conn_connect)(struct sched_conn *c);         /* wait for writability; 0 or -errno */
    void (*conn_flush)(struct sched_conn *c);          /* send out/sending if idle */
    void (*conn_pause)(struct sched_conn *c);          /* apply a PAUSED flag change */
    void (*conn_close)(struct sched_conn *c);          /* cancel or unregister all I/O */
    bool (*sends_wake)(const struct sched_loop *l);    /* see sched_loop_sends_wake() */
};

struct sched_loop {
    const struct sched__backend *be; /* borrowed: static backend vtable */
    void *io;                        /* owned: backend state (struct uring_io / epoll_io) */
    uint64_t now_ms;                 /* monotonic ms, refreshed after each wait */
    unsigned max_conns;              /* sizing hint from the options */
    int fatal;                       /* first unrecoverable backend error, or 0 */
    volatile sig_atomic_t stop;      /* set by sched_loop_stop(), also from signal handlers */
    struct sched_wheel wheel;        /* owned: the timers */
    struct list hooks;               /* struct sched_hook.node, in registration order */
    struct list dirty;               /* struct sched_conn.dirty_node: output to flush */
    struct list ready;               /* struct sched_conn.ready_node: deferred events */
    struct list release;             /* struct sched_conn.close_node: on_release due */
    struct list acceptors;           /* struct sched_accept_state.node: live listeners */
    struct list dead_acceptors;      /* struct sched_accept_state.node: stopped, draining */
    struct sched_loop_latency lat;   /* work per iteration (see sched_loop_latency()) */
    uint64_t lat_threshold_us;       /* iterations working longer are slow, 0: none are */
    uint64_t lat_log_ms;             /* when a slow iteration or late timer was last logged */
    uint64_t lat_logged_slow;        /* lat.slow at that line */
    uint64_t lat_logged_late;        /* late timers at that line */
    struct rusage lat_ru;            /* the process's usage at that line (0: none yet) */
    uint64_t lat_run_delay_ns;       /* the loop thread's wait for a CPU at that line */
};

extern const struct sched__backend sched__uring_backend;
extern const struct sched__backend sched__epoll_backend;

/* Backends report events through these; each may run owner callbacks, so
 * the caller must re-check c->flags afterwards. */

/* Received bytes: on_data, or kept in c->held while paused or behind held
 * bytes. Dropped once closing or after EOF. */
void sched__conn_data(struct sched_conn *c, const char *p, size_t n);

/* Input or output ended: err 0 is an orderly EOF, -errno an I/O error (then
 * the output is dropped). Delivers on_hangup at most once, never after
 * close; an EOF waits behind held input and pause, an error does not. */
void sched__conn_hangup(struct sched_conn *c, int err);

/* Like sched__conn_hangup(c, err < 0), but for a failure found inside an
 * owner call: on_hangup(err) follows from the loop (ready list). */
void sched__conn_fail_later(struct sched_conn *c, int err);

/* out and sending are empty and nothing is in flight: finishes a flushing
 * close, or calls on_drain. */
void sched__conn_drained(struct sched_conn *c);

/* The socket of a connecting c became writable (err from SO_ERROR) or the
 * wait failed (err < 0): starts receiving, then calls on_connect. */
void sched__conn_connected(struct sched_conn *c, int err);

/* Closes the fd and queues on_release once c is closed and inflight is 0. */
void sched__conn_maybe_release(struct sched_conn *c);

/* True when c should receive now (not paused, closed, connecting, at EOF). */
bool sched__conn_wants_input(const struct sched_conn *c);

/* True when c is paused but open, so its socket's errors must still be
 * watched (a peer that vanished releases what its owner holds). */
bool sched__conn_wants_errors(const struct sched_conn *c);

/* The watch of a paused c fired: a socket error is delivered (on_hangup),
 * a clean hang-up only stops the watch (the EOF waits for resume, behind
 * the unread input). */
void sched__conn_watch_event(struct sched_conn *c);

/* An accept failed with err: true if it is transient (retry at once). */
bool sched__accept_err_transient(int err);

/* Stops accepting for a while after a persistent accept error (EMFILE...);
 * the backend has already disarmed a. */
void sched__accept_backoff(struct sched_accept_state *a, int err);

/* 0, or the pending socket error of fd as -errno (SO_ERROR). */
int sched__socket_error(int fd);

/* ---- the TLS transform (tls.c), used only when c->tls is set ---------- */

/* Ciphertext received: decrypts, and feeds the plaintext to
 * sched__conn_data() (or drives the handshake). */
void sched__tls_recv(struct sched_conn *c, const char *p, size_t n);

/* `sending` is empty and idle: seals `out` (once established) and moves
 * the records into `sending`. False when there is nothing to send. */
bool sched__tls_refill(struct sched_conn *c);

/* Records are waiting for `sending` (handshake flights, alerts). */
bool sched__tls_pending(const struct sched_conn *c);

/* The TCP connect of a client session succeeded: starts the handshake
 * (on_connect follows its end). */
void sched__tls_connected(struct sched_conn *c);

/* EOF (0) or a socket error during the handshake: true when the TLS layer
 * took the event (it failed the session and told the owner). */
bool sched__tls_hangup(struct sched_conn *c, int err);

/* close(flush) of an established session: seals the rest of `out` and
 * queues a close_notify. */
void sched__tls_close_notify(struct sched_conn *c);

/* Frees the session (before on_release). No-op for a plain connection. */
void sched__tls_free(struct sched_conn *c);

/* What the backends call with received bytes: plain input goes straight
 * to the owner, a TLS connection's through its session. */
static inline void sched__conn_recv(struct sched_conn *c, const char *p, size_t n)
{
    if (LP_UNLIKELY(c->tls != NULL))
        sched__tls_recv(c, p, n);
    else
        sched__conn_data(c, p, n);
}

/* `sending` is empty and no send is in flight: moves the next bytes to
 * send into it (plain: swaps `out` in). False when there are none. */
static inline bool sched__conn_refill(struct sched_conn *c)
{
    if (LP_UNLIKELY(c->tls != NULL))
        return sched__tls_refill(c);
    if (buf_size(&c->out) == 0)
        return false;
    buf_swap(&c->out, &c->sending);
    return true;
}

#ifdef __cplusplus
}
#endif

#endif
