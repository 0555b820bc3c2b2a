/* Stream connection type embedded by client connections (proxy/) and Redis
 * connections (pool/). The event loop owns the I/O state; the embedding
 * object owns the memory and learns about events through sched_conn_ops.
 *
 * Output is double-buffered: callers append to `out`; once per loop
 * iteration the loop moves `out` into `sending` and hands `sending` to the
 * kernel (one send in flight per socket). `out` may grow freely while a send
 * is in flight because the kernel only ever sees `sending`. With TLS (tls.h)
 * `out` and the input are plaintext and `sending` holds the sealed records;
 * bytes_in counts plaintext received, bytes_out bytes sent on the socket. */
#ifndef LP_SCHED_CONN_T_H
#define LP_SCHED_CONN_T_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_loop;
struct sched_conn;
struct sched_tls;

struct sched_conn_ops {
    /* Bytes received; data is borrowed for the duration of the call. The
     * callback may write, close, or pause the connection. */
    void (*on_data)(struct sched_conn *c, const char *data, size_t len);
    /* Peer closed (err == 0) or an I/O error (-errno). Called at most once;
     * no on_data follows. The owner is expected to call sched_conn_close(). */
    void (*on_hangup)(struct sched_conn *c, int err);
    /* Outgoing connect finished: err is 0 or -errno (then on_hangup is not
     * called; the owner calls sched_conn_close()). May be NULL for accepted
     * connections. */
    void (*on_connect)(struct sched_conn *c, int err);
    /* Everything is sent (out and sending empty). May be NULL. On io_uring
     * it comes at once only while the connection is paused or has more
     * output; otherwise it may wait for the loop's next wake-up (silent
     * sends, loop_uring.c): pause to wait for it. */
    void (*on_drain)(struct sched_conn *c);
    /* The loop is about to send the connection's output (it is dirty): the
     * owner may finish what it gathered (pool/batch.c closes a batch of
     * scripts). May write to the output; may be NULL. */
    void (*on_flush)(struct sched_conn *c);
    /* After sched_conn_close(): no I/O remains in flight and the fd is
     * closed. The owner may now free the memory that embeds c. Required. */
    void (*on_release)(struct sched_conn *c);
};

enum sched_conn_flag {
    SCHED_CONN_CONNECTING = 1u << 0,  /* outgoing connect in progress */
    SCHED_CONN_CLOSING = 1u << 1,     /* sched_conn_close() was called */
    SCHED_CONN_FLUSH_CLOSE = 1u << 2, /* close once the output is sent */
    SCHED_CONN_RECV_ARMED = 1u << 3,  /* receive is armed (uring) / registered (epoll) */
    SCHED_CONN_SENDING = 1u << 4,     /* a send of `sending` is in flight */
    SCHED_CONN_PAUSED = 1u << 5,      /* owner asked to stop receiving */
    SCHED_CONN_HUNGUP = 1u << 6,      /* on_hangup was delivered */
    SCHED_CONN_DIRTY = 1u << 7,       /* on the loop's flush list */
    SCHED_CONN_WANT_OUT = 1u << 8,    /* epoll: waiting for EPOLLOUT */
    SCHED_CONN_RELEASED = 1u << 9,    /* on_release was delivered */
};

struct sched_conn {
    struct sched_loop *loop;          /* borrowed: the loop driving this connection */
    const struct sched_conn_ops *ops; /* borrowed: event callbacks */
    int fd;                           /* owned: socket, -1 once closed */
    unsigned flags;                   /* enum sched_conn_flag */
    unsigned inflight;                /* kernel operations in flight (uring) */
    int err;                          /* deferred connect or hangup result (0 or -errno) */
    struct buf out;                   /* owned: bytes queued by the owner */
    struct buf sending;               /* owned: bytes handed to the kernel */
    struct list dirty_node;           /* in loop flush list while DIRTY */
    struct list close_node;           /* in loop release list while closing */
    struct list ready_node;           /* in loop ready list while a deferred event waits */
    struct list send_node;            /* io_uring: in a silent-send list while one is out */
    struct buf held;                  /* owned: input received while paused (io_uring) */
    uint64_t bytes_in;                /* total bytes received */
    uint64_t bytes_out;               /* total bytes sent */
    struct sched_tls *tls;            /* owned: TLS session (tls.c), NULL for plain */
};

#ifdef __cplusplus
}
#endif

#endif
