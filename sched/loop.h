/* The event loop: one per thread, io_uring (liburing) or epoll behind one
 * API. It drives stream connections (sched_conn), listening sockets, the
 * timing wheel, and per-iteration hooks.
 *
 * One iteration: wait for completions or readiness (bounded by the next
 * timer), dispatch them (on_data, on_hangup, accept callbacks), run expired
 * timers, run hooks, then flush every connection that has new output: one
 * send per connection per iteration ("natural batching"). */
#ifndef LP_SCHED_LOOP_H
#define LP_SCHED_LOOP_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/conn-t.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_loop;
struct sched_accept_state;

enum sched_io {
    SCHED_IO_AUTO = 0,  /* io_uring if the kernel allows it, else epoll */
    SCHED_IO_URING = 1, /* io_uring or fail */
    SCHED_IO_EPOLL = 2, /* epoll */
};

struct sched_loop_opts {
    enum sched_io io;   /* backend choice */
    unsigned max_conns; /* sizing hint for rings and tables */
    unsigned tick_ms;   /* timing wheel granularity (default 4) */
};

/* Returns 0 and *out, -ENOMEM, or -errno from the backend (e.g. -ENOSYS or
 * -EPERM when io_uring is requested but blocked). */
int sched_loop_create(struct sched_loop **out, const struct sched_loop_opts *opts);

/* Frees the loop. Connections must have been released first. */
void sched_loop_destroy(struct sched_loop *l);

/* "io_uring" or "epoll". */
const char *sched_loop_backend(const struct sched_loop *l);

/* True when a finished send ends the loop's wait by itself (an io_uring
 * kernel without silent sends, see loop_uring.c), so each send costs one
 * more iteration; false when only input and timers wake the loop. */
bool sched_loop_sends_wake(const struct sched_loop *l);

/* Runs iterations until sched_loop_stop(). Returns 0 or -errno on a fatal
 * backend error. */
int sched_loop_run(struct sched_loop *l);

/* Runs one iteration, waiting at most timeout_ms (-1: until an event or
 * timer). For tests. Returns 0 or -errno. */
int sched_loop_run_once(struct sched_loop *l, int timeout_ms);

/* Makes sched_loop_run() return after the current iteration.
 * Async-signal-safe. */
void sched_loop_stop(struct sched_loop *l);

/* Monotonic ms, refreshed once per iteration. */
uint64_t sched_loop_now_ms(const struct sched_loop *l);

/* Loop latency (Redis's latency monitor is the model): the work of an
 * iteration is the time from the end of its wait for events to its end
 * (dispatch, timers, hooks, flush, releases), not the time it blocks. An
 * iteration working longer than the threshold is slow; a timer that runs
 * more than the threshold after its deadline is late (a loop that did not
 * run at all, e.g. stopped or starved of CPU, shows only there). Each
 * slow iteration or late timer logs a warn line, at most one a second
 * (with how many were not logged). */
struct sched_loop_latency {
    uint64_t iterations;   /* since creation */
    uint64_t max_work_us;  /* the longest work of one iteration */
    uint64_t slow;         /* iterations whose work passed the threshold */
    uint64_t late_timers;  /* timer expiries later than the threshold */
    uint64_t max_late_ms;  /* the latest timer expiry, ms after its deadline */
    uint64_t threshold_ms; /* the threshold, 0: off (nothing slow or late) */
};

void sched_loop_set_latency_threshold(struct sched_loop *l, unsigned ms);
void sched_loop_latency(const struct sched_loop *l, struct sched_loop_latency *out);

/* Timers on the loop's wheel. add re-arms a pending timer. */
void sched_loop_timer_add(struct sched_loop *l, struct sched_timer *t, uint64_t expires_ms);
void sched_loop_timer_in(struct sched_loop *l, struct sched_timer *t, uint64_t delay_ms);
void sched_loop_timer_del(struct sched_loop *l, struct sched_timer *t);

/* Per-iteration hook: runs after events and timers, before the flush. */
struct sched_hook {
    struct list node;                    /* in the loop's hook list */
    void (*fn)(struct sched_hook *hook); /* borrowed: called every iteration */
};
void sched_loop_hook_add(struct sched_loop *l, struct sched_hook *h);
void sched_loop_hook_del(struct sched_loop *l, struct sched_hook *h);

/* Listening socket: accepted sockets are handed to on_accept as plain,
 * non-blocking fds that the callee owns. */
struct sched_listener {
    struct sched_loop *loop;                              /* borrowed */
    int fd;                                               /* owned: listening socket */
    unsigned flags;                                       /* backend state */
    void (*on_accept)(struct sched_listener *ls, int fd); /* borrowed */
    uint64_t accepted;                                    /* total accepted */
    struct sched_accept_state *acc;                       /* owned by the loop: accept state */
};

/* Starts accepting on a bound, listening socket (ownership of fd passes to
 * the listener; the loop makes it non-blocking). Returns 0 or -errno (then
 * fd is closed). */
int sched_listener_start(struct sched_loop *l, struct sched_listener *ls, int fd,
                         void (*on_accept)(struct sched_listener *ls, int fd));

/* Stops accepting and closes the socket (synchronous). */
void sched_listener_stop(struct sched_listener *ls);

/* Adopts a connected socket (ownership passes to c) and starts receiving.
 * Returns 0 or -errno (then fd is closed and c needs no close). */
int sched_conn_attach(struct sched_loop *l, struct sched_conn *c, int fd,
                      const struct sched_conn_ops *ops);

/* Turns on TCP keepalive on c's socket, as Redis's anetKeepAlive does: the
 * first probe after idle_s seconds without traffic, then one every
 * idle_s / 3 seconds (at least 1); after 3 unanswered probes the socket
 * fails with ETIMEDOUT (on_hangup). TCP_USER_TIMEOUT is set to the same
 * total, so data the peer never acknowledges fails it as soon. A no-op on
 * sockets other than TCP, and with idle_s 0. Returns 0 or -errno. */
int sched_conn_keepalive(struct sched_conn *c, unsigned idle_s);

/* Starts a non-blocking connect; ops->on_connect (required here) reports
 * the result, always from the loop, even when connect(2) fails at once.
 * Returns 0 or -errno (then nothing is in flight and c needs no close). */
int sched_conn_connect(struct sched_loop *l, struct sched_conn *c, const struct sockaddr *sa,
                       socklen_t salen, const struct sched_conn_ops *ops);

/* Appends bytes to the output (sent at the end of this iteration).
 * Returns 0 or -ENOMEM. Ignored (returns -EPIPE) once closing. */
int sched_conn_write(struct sched_conn *c, const void *p, size_t n);

/* For formatting straight into the output: append to the returned buffer,
 * then call sched_conn_mark_dirty(). */
static inline struct buf *sched_conn_wbuf(struct sched_conn *c)
{
    return &c->out;
}
void sched_conn_mark_dirty(struct sched_conn *c);

/* Bytes queued or in flight, for back-pressure decisions. */
static inline size_t sched_conn_pending_out(const struct sched_conn *c)
{
    return buf_size(&c->out) + buf_size(&c->sending);
}

/* Stops (true) or resumes (false) receiving. While paused, on_data is not
 * called and the socket is not read, so the peer's writes block once the
 * kernel's buffers are full (back-pressure); bytes already on their way
 * are kept and delivered after resume. A socket error (reset, keepalive or
 * user timeout) still ends a paused connection (on_hangup); an orderly EOF
 * waits for resume, behind the unread input. */
void sched_conn_pause(struct sched_conn *c, bool pause);

/* Closes the connection. With flush, queued output is sent first (bounded
 * by the peer reading it). on_release follows once nothing is in flight,
 * never from inside this call. No other callbacks follow. Idempotent. */
void sched_conn_close(struct sched_conn *c, bool flush);

/* Makes the coming sched_conn_close() drop what the kernel has not sent
 * yet (SO_LINGER 0: a reset instead of a FIN behind the queued bytes).
 * Without it a closed TCP socket keeps retransmitting its queue, and at
 * the end of a partition the peer would still get, and run, requests its
 * sender gave up on. 0 or -errno; call before sched_conn_close(). */
int sched_conn_discard_unsent(struct sched_conn *c);

static inline bool sched_conn_is_closing(const struct sched_conn *c)
{
    return (c->flags & SCHED_CONN_CLOSING) != 0;
}

#ifdef __cplusplus
}
#endif

#endif
