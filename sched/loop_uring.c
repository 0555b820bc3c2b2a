/* io_uring backend of the event loop (see the design block in loop.c).
 *
 * Ring: SINGLE_ISSUER | DEFER_TASKRUN | SUBMIT_ALL | CQSIZE (CQ = 8 x SQ),
 * falling back to COOP_TASKRUN | TASKRUN_FLAG on -EINVAL. SINGLE_ISSUER
 * (6.0) is kept in the fallback on purpose: multishot recv is 6.0 too, so a
 * kernel that refuses both flag sets lacks it and AUTO then picks epoll.
 * The ring fd is registered. SQEs are submitted by the wait of the next
 * iteration (io_uring_submit_and_wait_timeout with the wheel's deadline);
 * a zero wait uses io_uring_submit_and_get_events, which also runs the
 * deferred task work (without it DEFER_TASKRUN would post nothing).
 *
 * Receive: one multishot recv per connection, all drawing from one shared
 * provided-buffer ring registered by hand (liburing 2.3 has no
 * io_uring_setup_buf_ring). Buffers go back to the ring right after
 * on_data returns (or after copying into c->held when paused), published
 * with one io_uring_buf_ring_advance per CQE batch; 2.3's
 * io_uring_buf_ring_cq_advance is not used, it lacks the release store.
 * The ring starts with URING_BUF_START buffers handed to the kernel and
 * gets more (as many again, up to nbufs) each time a recv finds it empty:
 * the buffers a FIFO ring cycles through all become resident, so only as
 * many are handed out as the inflow of one iteration has needed, not one
 * per connection (10,000 idle connections touch 64 KiB, not 4 MiB).
 * The recv is re-armed on a CQE without F_MORE (e.g. -ENOBUFS), unless the
 * connection is paused, closing or at EOF. Pause cancels the recv; CQEs
 * already posted go to c->held (their buffers go back to the ring at once,
 * so a paused connection pins none) and are delivered from the ready list
 * after resume, which re-arms. While paused, a one-shot poll with an empty
 * mask watches the socket (the kernel always adds ERR, HUP and RDHUP): an
 * error is delivered (on_hangup), a clean hang-up ends the watch until
 * resume (sched__conn_watch_event); resume cancels it. It shares the
 * UOP_POLL tag with the connect poll (never both: a connecting socket
 * cannot be paused-open), told apart by SCHED__CONN_WATCH.
 *
 * Send: at most one send of `sending` in flight (ordering); a short send
 * resubmits the tail; a completed send frees the drained buffer (an idle
 * connection keeps no output storage; a malloc per reply is noise next to
 * its send) and swaps in `out` if it has data.
 *
 * Silent sends. A send's own CQE would end the wait that submitted it at
 * once (min_complete 1), costing one io_uring_enter and one loop iteration
 * per send: at one client, 4 enters per request instead of 2. So, where the
 * kernel allows it (uring_silent_probe at init), a send goes out with
 * MSG_DONTWAIT | MSG_WAITALL and IOSQE_CQE_SKIP_SUCCESS: DONTWAIT makes the
 * kernel issue it inline, inside the io_uring_enter that submits it, and
 * fail it rather than wait for room; WAITALL makes a short send a failure;
 * a failure always posts its CQE (res: the bytes sent, or -EAGAIN). So
 * once the SQ is consumed (io_uring_sq_ready 0) a silent send without a
 * CQE has sent everything: queued sends move to silent_out after the
 * enter, and dispatch completes those without a CQE among the posted ones
 * before handling the CQEs (unless CQEs overflowed: then the next wait
 * does not block and the next dispatch does it). A failed silent send is
 * followed by a plain send of the rest, which waits for room and posts its
 * CQE. A completion that sets something off at once (uring_send_urgent:
 * on_drain of a paused owner, more output, a flushing close) makes the
 * submitting wait non-blocking; any other waits for the loop's next
 * wake-up (the request's reply, the client's next request).
 *
 * Connect: the socket is connected with a non-blocking connect(2) in
 * loop.c (the address is copied by the syscall, so the caller's sockaddr
 * need not outlive the call), then a POLLOUT poll and SO_ERROR.
 *
 * user_data: the conn or accept state pointer (8-aligned) with the
 * operation in the low 3 bits. Close cancels each operation by its exact
 * user_data; the fd is closed by loop.c when inflight reaches 0.
 *
 * Accept: one multishot accept per listener on plain fds (not direct
 * descriptors: owners hand them to sched_conn_attach and setsockopt). */
#include <sys/mman.h>
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <liburing.h>

#include "common/compiler.h"
#include "common/log.h"
#include "sched/loop-int.h"

#define URING_CQ_FACTOR 8u
#define URING_BGID      0
/* Small buffers: lock commands and replies are 100-200 bytes; the size also
 * caps one completion, which keeps one busy socket from hogging a batch.
 * The ring has room for one buffer per client up to 4096 (4 MiB): enough
 * for one iteration's inflow, and bounded because every buffer the ring
 * cycles through ends up resident (8192 x 2 KiB buffers added 16 MiB of
 * RSS at 10k idle clients; running short only costs an ENOBUFS re-arm).
 * Only URING_BUF_START of them are handed out at first, more as recvs
 * find the ring empty (uring_bufs_grow). */
#define URING_BUF_SIZE 1024u
/* Buffers handed to the kernel at first (see the design block). */
#define URING_BUF_START 64u
#define URING_SEND_MAX  (1u << 30)
#define URING_BATCH     64u
/* Silent sends: issued inline, failed (CQE posted) rather than queued for
 * room, short ones failed too. */
#define URING_SILENT_MSG   (MSG_NOSIGNAL | MSG_DONTWAIT | MSG_WAITALL)
#define URING_PROBE_SNDBUF 4096

enum uring_op {
    UOP_RECV = 1,    /* conn: multishot recv */
    UOP_SEND = 2,    /* conn: send of `sending` */
    UOP_POLL = 3,    /* conn: POLLOUT while connecting */
    UOP_CANCEL = 4,  /* conn: cancel of one of the above */
    UOP_ACCEPT = 5,  /* accept state: multishot accept */
    UOP_ACANCEL = 6, /* accept state: cancel of the accept */
    UOP_MASK = 7,    /* low bits of the 8-aligned pointers */
};

struct uring_io {
    struct io_uring ring;         /* the ring */
    struct io_uring_buf_ring *br; /* owned (mmap): provided-buffer ring */
    size_t br_bytes;              /* size of the br mapping */
    char *bufs;                   /* owned (mmap): nbufs * URING_BUF_SIZE bytes */
    size_t bufs_bytes;            /* size of the bufs mapping */
    unsigned nbufs;               /* buffer ring entries, a power of two */
    unsigned nprovided;           /* buffers 0..nprovided-1 are handed to the ring */
    int br_mask;                  /* io_uring_buf_ring_mask(nbufs) */
    int br_pending;               /* buffers added since the last advance */
    uint64_t enobufs;             /* recvs stopped by an empty buffer ring */
    bool silent;                  /* sends skip their success CQE (uring_silent_probe) */
    struct list silent_queued;    /* sched_conn.send_node: silent sends not yet submitted */
    struct list silent_out;       /* sched_conn.send_node: submitted, done unless a CQE says */
};

static struct uring_io *uring_io(const struct sched_loop *l)
{
    return l->io;
}

static uint64_t uring_ud(const void *obj, enum uring_op op)
{
    return (uint64_t)(uintptr_t)obj | (uint64_t)op;
}

/* ---- provided buffers -------------------------------------------------- */

static void uring_bufs_commit(struct uring_io *u)
{
    if (u->br_pending == 0)
        return;
    io_uring_buf_ring_advance(u->br, u->br_pending);
    u->br_pending = 0;
}

static void uring_buf_recycle(struct uring_io *u, unsigned bid)
{
    io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * URING_BUF_SIZE, URING_BUF_SIZE,
                          (unsigned short)bid, u->br_mask, u->br_pending++);
}

static int uring_bufs_map(struct uring_io *u, unsigned nbufs)
{
    int prot = PROT_READ | PROT_WRITE, flags = MAP_ANONYMOUS | MAP_PRIVATE;
    int rc;

    u->nbufs = nbufs;
    u->br_bytes = nbufs * sizeof(struct io_uring_buf);
    u->br = mmap(NULL, u->br_bytes, prot, flags, -1, 0);
    if (u->br == MAP_FAILED)
        return -errno;
    u->bufs_bytes = (size_t)nbufs * URING_BUF_SIZE;
    u->bufs = mmap(NULL, u->bufs_bytes, prot, flags, -1, 0);
    if (u->bufs == MAP_FAILED) {
        rc = -errno;
        goto err_unmap_ring;
    }
    return 0;
err_unmap_ring:
    munmap(u->br, u->br_bytes);
    return rc;
}

static void uring_bufs_unmap(struct uring_io *u)
{
    munmap(u->bufs, u->bufs_bytes);
    munmap(u->br, u->br_bytes);
}

/* By hand, as liburing 2.4's io_uring_setup_buf_ring does. */
static int uring_bufs_init(struct uring_io *u, unsigned nbufs)
{
    struct io_uring_buf_reg reg;
    unsigned i;
    int rc;

    rc = uring_bufs_map(u, nbufs);
    if (rc < 0)
        return rc;
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uint64_t)(uintptr_t)u->br;
    reg.ring_entries = nbufs;
    reg.bgid = URING_BGID;
    rc = io_uring_register_buf_ring(&u->ring, &reg, 0);
    if (rc < 0) {
        uring_bufs_unmap(u);
        return rc;
    }
    io_uring_buf_ring_init(u->br);
    u->br_mask = io_uring_buf_ring_mask(nbufs);
    u->nprovided = nbufs < URING_BUF_START ? nbufs : URING_BUF_START;
    for (i = 0; i < u->nprovided; i++)
        uring_buf_recycle(u, i);
    uring_bufs_commit(u);
    return 0;
}

/* A recv found the ring empty: hands as many buffers again to it (up to
 * nbufs); the batch's commit publishes them before the re-armed recv is
 * submitted. */
static void uring_bufs_grow(struct uring_io *u)
{
    unsigned n = u->nprovided, add = n;

    if (add > u->nbufs - n)
        add = u->nbufs - n;
    for (; add > 0; add--)
        uring_buf_recycle(u, u->nprovided++);
}

/* ---- silent-send probe ------------------------------------------------- */

/* Submits one silent send of len bytes of buf on fd (user_data 0: ignored
 * by uring_cqe if it ever completes later) and reaps what the submit
 * posted: 1 and its result in *res, or 0 when no CQE came. */
static int uring_probe_send(struct uring_io *u, int fd, const char *buf, size_t len, int *res)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    struct io_uring_cqe *cqe;

    if (!sqe)
        return -EBUSY;
    io_uring_prep_send(sqe, fd, buf, len, URING_SILENT_MSG);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, 0);
    if (io_uring_submit_and_get_events(&u->ring) < 0)
        return -EIO;
    if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
        return 0;
    *res = cqe->res;
    io_uring_cqe_seen(&u->ring, cqe);
    return 1;
}

/* True when the kernel skips a send's success CQE (IORING_FEAT_CQE_SKIP)
 * and completes a MSG_DONTWAIT | MSG_WAITALL send inside the submitting
 * enter, reporting a short one with the bytes it sent: on a socketpair
 * with a small send buffer, 1 byte must post nothing and 64 KiB must post
 * one CQE with 0 < res < 64 KiB at once. A kernel that queued the send
 * for room instead fails the check (the send completes when the pair is
 * closed; its buffer is static, so it may). */
static bool uring_silent_probe(struct uring_io *u)
{
    static char big[1u << 16];
    int sv[2], snd = URING_PROBE_SNDBUF, res = 0;
    bool ok = false;

    if (!(u->ring.features & IORING_FEAT_CQE_SKIP))
        return false;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return false;
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
    if (uring_probe_send(u, sv[0], big, 1, &res) == 0 &&
        uring_probe_send(u, sv[0], big, sizeof(big), &res) == 1)
        ok = res > 0 && (size_t)res < sizeof(big);
    close(sv[0]);
    close(sv[1]);
    return ok;
}

/* ---- lifecycle --------------------------------------------------------- */

static unsigned pow2_clamp(unsigned v, unsigned lo, unsigned hi)
{
    unsigned n = lo;

    while (n < v && n < hi)
        n *= 2;
    return n;
}

static int uring_ring_init(struct uring_io *u, unsigned sq)
{
    struct io_uring_params p;
    int rc;

    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
              IORING_SETUP_CQSIZE;
    p.cq_entries = sq * URING_CQ_FACTOR;
    rc = io_uring_queue_init_params(sq, &u->ring, &p);
    if (rc != -EINVAL)
        return rc;
    memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
              IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE;
    p.cq_entries = sq * URING_CQ_FACTOR;
    return io_uring_queue_init_params(sq, &u->ring, &p);
}

static int uring_init(struct sched_loop *l)
{
    struct uring_io *u = calloc(1, sizeof(*u));
    int rc;

    if (!u)
        return -ENOMEM;
    rc = uring_ring_init(u, pow2_clamp(l->max_conns, 64, 4096));
    if (rc < 0)
        goto err_free;
    /* Optional: only saves the fd lookup on each io_uring_enter. */
    (void)io_uring_register_ring_fd(&u->ring);
    rc = uring_bufs_init(u, pow2_clamp(l->max_conns, 512, 4096));
    if (rc < 0)
        goto err_exit;
    list_init(&u->silent_queued);
    list_init(&u->silent_out);
    u->silent = uring_silent_probe(u);
    log_msg(LOG_LVL_DEBUG, "io_uring: silent sends %s", u->silent ? "on" : "off");
    l->io = u;
    return 0;
err_exit:
    io_uring_queue_exit(&u->ring);
err_free:
    free(u);
    return rc;
}

static void uring_deinit(struct sched_loop *l)
{
    struct uring_io *u = uring_io(l);

    io_uring_queue_exit(&u->ring);
    uring_bufs_unmap(u);
    if (u->enobufs)
        log_msg(LOG_LVL_DEBUG,
                "io_uring: %llu recvs hit an empty buffer ring (%u of %u buffers used)",
                (unsigned long long)u->enobufs, u->nprovided, u->nbufs);
    free(u);
    l->io = NULL;
}

/* ---- submission -------------------------------------------------------- */

/* A free SQE, submitting the queue if it is full. NULL (and l->fatal set)
 * only if the kernel refuses to take submissions. */
static struct io_uring_sqe *uring_sqe(struct sched_loop *l)
{
    struct uring_io *u = uring_io(l);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    int tries, rc = 0;

    for (tries = 0; !sqe && tries < 4; tries++) {
        uring_bufs_commit(u);
        rc = io_uring_submit(&u->ring);
        if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
            break;
        sqe = io_uring_get_sqe(&u->ring);
    }
    if (!sqe && l->fatal == 0) {
        l->fatal = rc < 0 ? rc : -EBUSY;
        log_msg(LOG_LVL_ERROR, "io_uring: no free SQE: %s", strerror(-l->fatal));
    }
    return sqe;
}

/* Queues a cancel of obj's operation op, tagged cancel_op. */
static bool uring_cancel(struct sched_loop *l, const void *obj, enum uring_op op,
                         enum uring_op cancel_op)
{
    struct io_uring_sqe *sqe = uring_sqe(l);

    if (!sqe)
        return false;
    io_uring_prep_cancel64(sqe, uring_ud(obj, op), 0);
    io_uring_sqe_set_data64(sqe, uring_ud(obj, cancel_op));
    return true;
}

/* Whether completing c's silent send sets something off at once, so the
 * wait that submits it must not block: on_drain for a paused owner (the
 * client paused on unsent replies resumes there), the next send (`out`
 * filled meanwhile, TLS records waiting), a flushing close, the release.
 * Otherwise the completion waits for whatever wakes the loop next. */
static bool uring_send_urgent(const struct sched_conn *c)
{
    return (c->flags & (SCHED_CONN_PAUSED | SCHED_CONN_CLOSING)) || buf_size(&c->out) > 0 ||
           (c->tls && sched__tls_pending(c));
}

/* A silent send is out that must complete before the loop blocks: one
 * held back by a CQ overflow, or an urgent one. */
static bool uring_silent_pressing(const struct uring_io *u)
{
    const struct list *n;

    if (!list_empty(&u->silent_out))
        return true;
    for (n = u->silent_queued.next; n != &u->silent_queued; n = n->next) {
        if (uring_send_urgent(list_entry(n, struct sched_conn, send_node)))
            return true;
    }
    return false;
}

static int uring_wait(struct sched_loop *l, int timeout_ms)
{
    struct uring_io *u = uring_io(l);
    struct __kernel_timespec ts, *tsp = NULL;
    struct io_uring_cqe *cqe;
    int rc;

    uring_bufs_commit(u);
    if (timeout_ms == 0 || uring_silent_pressing(u)) {
        rc = io_uring_submit_and_get_events(&u->ring);
    } else {
        if (timeout_ms > 0) {
            ts.tv_sec = timeout_ms / 1000;
            ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
            tsp = &ts;
        }
        rc = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, tsp, NULL);
    }
    if (io_uring_sq_ready(&u->ring) == 0)
        list_splice_tail_init(&u->silent_out, &u->silent_queued);
    /* Timeouts, signals and a transiently busy ring are not failures. */
    if (rc >= 0 || rc == -ETIME || rc == -EINTR || rc == -EAGAIN || rc == -EBUSY)
        return 0;
    return rc;
}

/* ---- connections ------------------------------------------------------- */

static int uring_recv_arm(struct sched_conn *c)
{
    struct io_uring_sqe *sqe;

    if (!sched__conn_wants_input(c) || (c->flags & SCHED_CONN_RECV_ARMED))
        return 0;
    sqe = uring_sqe(c->loop);
    if (!sqe)
        return c->loop->fatal;
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = URING_BGID;
    io_uring_sqe_set_data64(sqe, uring_ud(c, UOP_RECV));
    c->flags |= SCHED_CONN_RECV_ARMED;
    c->inflight++;
    return 0;
}

/* The length of the send of `sending` (the same while it is in flight). */
static size_t uring_send_len(const struct sched_conn *c)
{
    return LP_MIN(buf_size(&c->sending), URING_SEND_MAX);
}

/* Sends `sending`: silently when the kernel allows it and `silent` (not
 * after a failed silent send: that one waits for room). */
static void uring_send(struct sched_conn *c, bool silent)
{
    struct uring_io *u = uring_io(c->loop);
    struct io_uring_sqe *sqe = uring_sqe(c->loop);

    if (!sqe)
        return;
    if (silent && u->silent) {
        io_uring_prep_send(sqe, c->fd, buf_head(&c->sending), uring_send_len(c), URING_SILENT_MSG);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
        list_add_tail(&u->silent_queued, &c->send_node);
    } else {
        io_uring_prep_send(sqe, c->fd, buf_head(&c->sending), uring_send_len(c), MSG_NOSIGNAL);
    }
    io_uring_sqe_set_data64(sqe, uring_ud(c, UOP_SEND));
    c->flags |= SCHED_CONN_SENDING;
    c->inflight++;
}

static void uring_conn_flush(struct sched_conn *c)
{
    unsigned busy =
        SCHED_CONN_SENDING | SCHED_CONN_CONNECTING | SCHED__CONN_BROKEN | SCHED__CONN_FINAL;

    if (c->fd < 0 || (c->flags & busy))
        return;
    if (buf_size(&c->sending) == 0 && !sched__conn_refill(c)) {
        if (c->flags & SCHED_CONN_FLUSH_CLOSE)
            sched__conn_drained(c);
        return;
    }
    uring_send(c, true);
}

static int uring_conn_connect(struct sched_conn *c)
{
    struct io_uring_sqe *sqe = uring_sqe(c->loop);

    if (!sqe)
        return c->loop->fatal;
    io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
    io_uring_sqe_set_data64(sqe, uring_ud(c, UOP_POLL));
    c->flags |= SCHED__CONN_POLL_ARMED;
    c->inflight++;
    return 0;
}

static void uring_recv_cancel(struct sched_conn *c)
{
    if (!(c->flags & SCHED_CONN_RECV_ARMED) || (c->flags & SCHED__CONN_RECV_CANCEL))
        return;
    if (uring_cancel(c->loop, c, UOP_RECV, UOP_CANCEL)) {
        c->flags |= SCHED__CONN_RECV_CANCEL;
        c->inflight++;
    }
}

/* Arms the error watch of a paused connection (one poll at a time). */
static void uring_watch_arm(struct sched_conn *c)
{
    struct io_uring_sqe *sqe;

    if (!sched__conn_wants_errors(c) || (c->flags & SCHED__CONN_WATCH))
        return;
    sqe = uring_sqe(c->loop);
    if (!sqe)
        return;
    io_uring_prep_poll_add(sqe, c->fd, 0);
    io_uring_sqe_set_data64(sqe, uring_ud(c, UOP_POLL));
    c->flags |= SCHED__CONN_WATCH;
    c->inflight++;
}

static void uring_watch_cancel(struct sched_conn *c)
{
    if (!(c->flags & SCHED__CONN_WATCH) || (c->flags & SCHED__CONN_WATCH_CANCEL))
        return;
    if (uring_cancel(c->loop, c, UOP_POLL, UOP_CANCEL)) {
        c->flags |= SCHED__CONN_WATCH_CANCEL;
        c->inflight++;
    }
}

static void uring_conn_pause(struct sched_conn *c)
{
    if (c->flags & SCHED_CONN_PAUSED) {
        uring_recv_cancel(c);
        uring_watch_arm(c);
    } else {
        uring_watch_cancel(c);
        (void)uring_recv_arm(c);
    }
}

static void uring_conn_close(struct sched_conn *c)
{
    uring_recv_cancel(c);
    uring_watch_cancel(c);
    /* A silent send is done once submitted: nothing to cancel. */
    if ((c->flags & SCHED_CONN_SENDING) && !list_is_linked(&c->send_node) &&
        uring_cancel(c->loop, c, UOP_SEND, UOP_CANCEL))
        c->inflight++;
    if ((c->flags & SCHED__CONN_POLL_ARMED) && uring_cancel(c->loop, c, UOP_POLL, UOP_CANCEL))
        c->inflight++;
}

/* ---- connection completions -------------------------------------------- */

static void uring_recv_done(struct sched_loop *l, struct sched_conn *c, int res, unsigned flags)
{
    struct uring_io *u = uring_io(l);
    bool more = flags & IORING_CQE_F_MORE;

    if (!more) {
        c->flags &= ~(SCHED_CONN_RECV_ARMED | SCHED__CONN_RECV_CANCEL);
        c->inflight--;
    }
    if (flags & IORING_CQE_F_BUFFER) {
        unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;

        if (res > 0)
            sched__conn_recv(c, u->bufs + (size_t)bid * URING_BUF_SIZE, (size_t)res);
        uring_buf_recycle(u, bid);
    }
    if (res == -ENOBUFS) {
        u->enobufs++;
        uring_bufs_grow(u);
    }
    if (res == 0 || (res < 0 && res != -ENOBUFS && res != -ECANCELED))
        sched__conn_hangup(c, res);
    else if (!more)
        (void)uring_recv_arm(c);
    sched__conn_maybe_release(c);
}

/* A send ended: its CQE, or a silent send's implied success. */
static void uring_send_done(struct sched_conn *c, int res)
{
    bool short_send;

    list_del_init(&c->send_node);
    c->flags &= ~SCHED_CONN_SENDING;
    c->inflight--;
    if (c->flags & SCHED__CONN_FINAL) {
        sched__conn_maybe_release(c);
        return;
    }
    if (res == -EAGAIN)
        res = 0; /* a silent send found the socket full: send again, waiting for room */
    if (res < 0) {
        sched__conn_hangup(c, res);
        return;
    }
    c->bytes_out += (uint64_t)res;
    buf_consume(&c->sending, (size_t)res);
    if (c->flags & SCHED__CONN_BROKEN) {
        buf_reset(&c->sending);
        return;
    }
    short_send = buf_size(&c->sending) > 0;
    if (!short_send) {
        buf_trim(&c->sending, 0); /* an idle connection keeps no output storage */
        (void)sched__conn_refill(c);
    }
    if (buf_size(&c->sending) > 0)
        uring_send(c, !short_send);
    else
        sched__conn_drained(c);
}

/* Completes the submitted silent sends that posted no CQE: each sent all
 * of its bytes. Runs before the CQEs are handled (a send is over before
 * the reply it caused arrives; TLS sends an alert only on an idle
 * connection), so the posted CQEs are scanned first and a send that
 * failed is left to its CQE. With overflowed CQEs not in sight, nothing
 * is completed (the next wait does not block). */
static void uring_silent_settle(struct uring_io *u)
{
    struct list todo, *n;
    struct io_uring_cqe *cqe;
    unsigned head;

    if (list_empty(&u->silent_out) || io_uring_cq_has_overflow(&u->ring))
        return;
    io_uring_for_each_cqe(&u->ring, head, cqe)
    {
        if ((cqe->user_data & UOP_MASK) == UOP_SEND) {
            struct sched_conn *c = (void *)(uintptr_t)(cqe->user_data & ~(uint64_t)UOP_MASK);

            list_del_init(&c->send_node);
        }
    }
    list_init(&todo);
    list_splice_tail_init(&todo, &u->silent_out);
    while ((n = list_first(&todo))) {
        struct sched_conn *c = list_entry(n, struct sched_conn, send_node);

        uring_send_done(c, (int)uring_send_len(c));
    }
}

/* The watch poll ended: fired (res: the events), or cancelled. */
static void uring_watch_done(struct sched_conn *c, int res)
{
    c->flags &= ~(SCHED__CONN_WATCH | SCHED__CONN_WATCH_CANCEL);
    c->inflight--;
    if (res > 0)
        sched__conn_watch_event(c);
    uring_watch_arm(c); /* still paused after a cancel raced a resume and a pause */
    sched__conn_maybe_release(c);
}

static void uring_poll_done(struct sched_conn *c, int res)
{
    if (c->flags & SCHED__CONN_WATCH)
        return uring_watch_done(c, res);
    c->flags &= ~SCHED__CONN_POLL_ARMED;
    c->inflight--;
    if (!(c->flags & SCHED__CONN_FINAL))
        sched__conn_connected(c, res < 0 ? res : sched__socket_error(c->fd));
    sched__conn_maybe_release(c);
}

/* ---- listeners --------------------------------------------------------- */

static int uring_accept_arm(struct sched_accept_state *a)
{
    struct io_uring_sqe *sqe = uring_sqe(a->loop);

    if (!sqe)
        return a->loop->fatal;
    io_uring_prep_multishot_accept(sqe, a->ls->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, uring_ud(a, UOP_ACCEPT));
    a->armed = true;
    a->inflight++;
    return 0;
}

/* Submits the cancel at once and runs the task work that completes it, so
 * the listening socket is really closed when sched_listener_stop returns. */
static void uring_accept_stop(struct sched_accept_state *a)
{
    struct uring_io *u = uring_io(a->loop);

    if (a->armed && uring_cancel(a->loop, a, UOP_ACCEPT, UOP_ACANCEL))
        a->inflight++;
    uring_bufs_commit(u);
    (void)io_uring_submit_and_get_events(&u->ring);
}

static void uring_accept_done(struct sched_accept_state *a, int res, unsigned flags)
{
    bool more = flags & IORING_CQE_F_MORE;
    int rc;

    if (!more) {
        a->armed = false;
        a->inflight--;
    }
    if (res >= 0 && !a->ls) {
        close(res);
    } else if (res >= 0) {
        a->ls->accepted++;
        a->ls->on_accept(a->ls, res);
    } else if (a->ls && res != -ECANCELED && !sched__accept_err_transient(res)) {
        sched__accept_backoff(a, res);
        return;
    }
    if (!more && a->ls) {
        rc = uring_accept_arm(a);
        if (rc < 0)
            sched__accept_backoff(a, rc);
    }
}

static bool uring_sends_wake(const struct sched_loop *l)
{
    return !uring_io(l)->silent;
}

/* ---- dispatch ---------------------------------------------------------- */

static void uring_cqe(struct sched_loop *l, uint64_t ud, int res, unsigned flags)
{
    void *obj = (void *)(uintptr_t)(ud & ~(uint64_t)UOP_MASK);
    struct sched_conn *c = obj;
    struct sched_accept_state *a = obj;

    switch (ud & UOP_MASK) {
    case UOP_RECV:
        uring_recv_done(l, c, res, flags);
        break;
    case UOP_SEND:
        uring_send_done(c, res);
        break;
    case UOP_POLL:
        uring_poll_done(c, res);
        break;
    case UOP_CANCEL:
        c->inflight--;
        sched__conn_maybe_release(c);
        break;
    case UOP_ACCEPT:
        uring_accept_done(a, res, flags);
        break;
    case UOP_ACANCEL:
        a->inflight--;
        break;
    default:
        /* LIBURING_UDATA_TIMEOUT (all ones) from liburing's own timeouts. */
        break;
    }
}

/* Could io_uring_peek_batch_cqe() find anything? CQEs are posted, or (what
 * it checks itself before entering the kernel) overflowed CQEs or task
 * work wait. Inline, so most iterations, whose one batch was the last,
 * skip the library call that would find nothing. */
static bool uring_cq_pending(const struct io_uring *ring)
{
    unsigned kernel_side = IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN;

    return io_uring_cq_ready(ring) > 0 || (IO_URING_READ_ONCE(*ring->sq.kflags) & kernel_side);
}

/* Handles the posted CQEs in batches; a batch's buffers go back to the ring
 * before the next batch. Bounded by the CQ size per iteration. */
static void uring_dispatch(struct sched_loop *l)
{
    struct uring_io *u = uring_io(l);
    struct io_uring_cqe *cqes[URING_BATCH];
    unsigned n, i, total = 0;

    uring_silent_settle(u);
    while (total < u->ring.cq.ring_entries && uring_cq_pending(&u->ring) &&
           (n = io_uring_peek_batch_cqe(&u->ring, cqes, URING_BATCH)) > 0) {
        for (i = 0; i < n; i++)
            uring_cqe(l, cqes[i]->user_data, cqes[i]->res, cqes[i]->flags);
        io_uring_cq_advance(&u->ring, n);
        uring_bufs_commit(u);
        total += n;
    }
    uring_silent_settle(u); /* those held back by an overflow, if it cleared */
}

const struct sched__backend sched__uring_backend = {
    .name = "io_uring",
    .init = uring_init,
    .deinit = uring_deinit,
    .wait = uring_wait,
    .dispatch = uring_dispatch,
    .accept_arm = uring_accept_arm,
    .accept_stop = uring_accept_stop,
    .conn_start = uring_recv_arm,
    .conn_connect = uring_conn_connect,
    .conn_flush = uring_conn_flush,
    .conn_pause = uring_conn_pause,
    .conn_close = uring_conn_close,
    .sends_wake = uring_sends_wake,
};
