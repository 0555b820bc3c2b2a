/* Connection primitives behind the proxy's client limits, on both io
 * backends: a paused connection stops reading its socket (the peer's
 * writes block once the kernel buffers are full, and the loop holds back
 * at most what was already on its way), and everything arrives in order
 * after resume; sched_conn_keepalive() sets Redis's keepalive options on a
 * TCP socket and leaves other sockets alone. Loopback TCP; nothing sleeps. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "harness.h"
#include "sched/loop.h"

#define RUN_MAX_MS   15000
#define HELD_MAX     (8u << 20) /* generous: what one iteration can take in */
#define WRITE_MAX    (256u << 20)
#define PATTERN_SPAN 251u

typedef void scenario_fn(struct sched_loop *l);

static void run_both(scenario_fn *fn)
{
    static const enum sched_io ios[] = {SCHED_IO_EPOLL, SCHED_IO_URING};

    for (size_t i = 0; i < LP_ARRAY_SIZE(ios); i++) {
        struct sched_loop_opts o = {.io = ios[i], .max_conns = 64, .tick_ms = 0};
        struct sched_loop *l = NULL;
        int rc = sched_loop_create(&l, &o);

        if (ios[i] == SCHED_IO_URING && (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL)) {
            fprintf(stderr, "io_uring unavailable here (%s): io_uring half skipped\n",
                    strerror(-rc));
            continue;
        }
        ASSERT_OK(rc);
        fprintf(stderr, "-- backend %s\n", sched_loop_backend(l));
        fn(l);
        sched_loop_destroy(l);
    }
}

/* A connected loopback TCP pair: *a accepted (non-blocking), *b connected. */
static void tcp_pair(int *a, int *b)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ASSERT_TRUE(ls >= 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0);
    ASSERT_OK(listen(ls, 4) < 0 ? -errno : 0);
    ASSERT_OK(getsockname(ls, (struct sockaddr *)&sa, &len));
    *b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(*b >= 0);
    ASSERT_OK(connect(*b, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0);
    *a = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    ASSERT_TRUE(*a >= 0);
    close(ls);
}

static char pattern(size_t k)
{
    return (char)('A' + k % PATTERN_SPAN % 26);
}

/* ---- a recording connection ---------------------------------------------- */

struct rconn {
    struct sched_conn c; /* under test */
    struct buf in;       /* bytes received */
    bool paused;         /* the test paused it */
    bool pause_on_data;  /* on_data pauses it */
    int hangups;         /* on_hangup calls */
    int hangup_err;      /* err of the last one */
    bool released;       /* on_release came */
};

static void r_on_data(struct sched_conn *c, const char *p, size_t n)
{
    struct rconn *r = LP_CONTAINER_OF(c, struct rconn, c);

    ASSERT_TRUE(!r->paused);
    ASSERT_OK(buf_append(&r->in, p, n));
    if (r->pause_on_data) {
        r->paused = true;
        sched_conn_pause(c, true);
    }
}

static void r_on_hangup(struct sched_conn *c, int err)
{
    struct rconn *r = LP_CONTAINER_OF(c, struct rconn, c);

    r->hangups++;
    r->hangup_err = err;
}

static void r_on_release(struct sched_conn *c)
{
    LP_CONTAINER_OF(c, struct rconn, c)->released = true;
}

static const struct sched_conn_ops r_ops = {
    .on_data = r_on_data,
    .on_hangup = r_on_hangup,
    .on_release = r_on_release,
};

static void run_until(struct sched_loop *l, bool (*cond)(struct rconn *), struct rconn *r)
{
    uint64_t deadline = clock_mono_ms() + RUN_MAX_MS;

    while (!cond(r) && clock_mono_ms() < deadline)
        ASSERT_OK(sched_loop_run_once(l, 5));
    if (!cond(r))
        TEST_FAIL("condition not reached in %d ms", RUN_MAX_MS);
}

static bool got_data(struct rconn *r)
{
    return buf_size(&r->in) > 0;
}

static bool released(struct rconn *r)
{
    return r->released;
}

/* ---- pause stops reading the socket --------------------------------------- */

/* Writes the pattern on fd until the kernel takes no more (the reader is
 * paused), running the loop in between so it could read if it wanted.
 * Returns the bytes written. */
static size_t write_until_blocked(struct sched_loop *l, int fd, size_t off)
{
    char chunk[65536];
    int idle = 0;

    while (idle < 20 && off < WRITE_MAX) {
        ssize_t w;

        for (size_t i = 0; i < sizeof(chunk); i++)
            chunk[i] = pattern(off + i);
        w = send(fd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            idle = 0;
        } else {
            ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK);
            idle++;
        }
        ASSERT_OK(sched_loop_run_once(l, 1));
    }
    return off;
}

static void pause_backpressure(struct sched_loop *l)
{
    struct rconn r;
    size_t sent, got_before, i;
    int a, b;

    memset(&r, 0, sizeof(r));
    buf_init(&r.in);
    tcp_pair(&a, &b);
    ASSERT_OK(sched_conn_attach(l, &r.c, a, &r_ops));
    r.pause_on_data = true;
    sent = write_until_blocked(l, b, 0);
    run_until(l, got_data, &r);
    got_before = buf_size(&r.in);
    /* The writer blocked long before WRITE_MAX: the kernel buffers filled
     * because nobody read them, and the loop held back little. */
    if (sent >= WRITE_MAX)
        TEST_FAIL("a paused connection took %zu bytes", sent);
    if (buf_size(&r.c.held) > HELD_MAX)
        TEST_FAIL("a paused connection holds %zu bytes", buf_size(&r.c.held));
    fprintf(stderr, "writer blocked after %zu bytes; delivered %zu, held %zu\n", sent, got_before,
            buf_size(&r.c.held));
    /* Resume: everything arrives, in order. */
    r.pause_on_data = false;
    r.paused = false;
    sched_conn_pause(&r.c, false);
    for (uint64_t end = clock_mono_ms() + RUN_MAX_MS;
         buf_size(&r.in) < sent && clock_mono_ms() < end;)
        ASSERT_OK(sched_loop_run_once(l, 5));
    ASSERT_EQ(buf_size(&r.in), sent);
    for (i = 0; i < sent; i++) {
        if (buf_head(&r.in)[i] != pattern(i))
            TEST_FAIL("byte %zu differs", i);
    }
    close(b);
    sched_conn_close(&r.c, false);
    run_until(l, released, &r);
    buf_deinit(&r.in);
}

TEST(conn_pause_stops_socket_reads)
{
    run_both(pause_backpressure);
}

/* ---- a paused connection still learns that its peer is gone --------------- */

static bool hung_up(struct rconn *r)
{
    return r->hangups > 0;
}

static void reset_peer(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    ASSERT_OK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
    close(fd); /* sends a reset */
}

/* A reset (what keepalive or TCP_USER_TIMEOUT also end in: an error on
 * the socket) reaches a paused connection at once, while an orderly EOF
 * still waits for resume, behind the unread input. */
static void paused_error(struct sched_loop *l)
{
    struct rconn r, e;
    int a, b, c, d;

    memset(&r, 0, sizeof(r));
    memset(&e, 0, sizeof(e));
    buf_init(&e.in);
    tcp_pair(&a, &b);
    ASSERT_OK(sched_conn_attach(l, &r.c, a, &r_ops));
    r.paused = true;
    sched_conn_pause(&r.c, true);
    for (int i = 0; i < 5; i++)
        ASSERT_OK(sched_loop_run_once(l, 1));
    reset_peer(b);
    run_until(l, hung_up, &r);
    ASSERT_EQ(r.hangup_err, -ECONNRESET);
    sched_conn_close(&r.c, false);
    run_until(l, released, &r);

    tcp_pair(&c, &d);
    ASSERT_OK(sched_conn_attach(l, &e.c, c, &r_ops));
    e.paused = true;
    sched_conn_pause(&e.c, true);
    ASSERT_EQ(send(d, "tail", 4, MSG_NOSIGNAL), 4);
    close(d);
    for (int i = 0; i < 20; i++)
        ASSERT_OK(sched_loop_run_once(l, 1));
    ASSERT_EQ(e.hangups, 0);
    e.paused = false;
    sched_conn_pause(&e.c, false);
    run_until(l, hung_up, &e);
    ASSERT_EQ(e.hangup_err, 0);
    ASSERT_EQ(buf_size(&e.in), 4);
    sched_conn_close(&e.c, false);
    run_until(l, released, &e);
    buf_deinit(&e.in);
}

TEST(conn_paused_sees_peer_reset)
{
    run_both(paused_error);
}

/* ---- keepalive ------------------------------------------------------------- */

static int sockopt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);

    ASSERT_OK(getsockopt(fd, level, name, &v, &len) < 0 ? -errno : 0);
    return v;
}

static void keepalive(struct sched_loop *l)
{
    struct rconn r, u;
    int a, b, sv[2];

    memset(&r, 0, sizeof(r));
    memset(&u, 0, sizeof(u));
    tcp_pair(&a, &b);
    ASSERT_OK(sched_conn_attach(l, &r.c, a, &r_ops));
    ASSERT_EQ(sockopt(a, SOL_SOCKET, SO_KEEPALIVE), 0);
    ASSERT_OK(sched_conn_keepalive(&r.c, 0)); /* 0: left alone */
    ASSERT_EQ(sockopt(a, SOL_SOCKET, SO_KEEPALIVE), 0);
    ASSERT_OK(sched_conn_keepalive(&r.c, 300));
    ASSERT_EQ(sockopt(a, SOL_SOCKET, SO_KEEPALIVE), 1);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_KEEPIDLE), 300);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_KEEPINTVL), 100);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_KEEPCNT), 3);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_USER_TIMEOUT), 600000);
    ASSERT_OK(sched_conn_keepalive(&r.c, 1)); /* the interval is at least 1 s */
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_KEEPIDLE), 1);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_KEEPINTVL), 1);
    ASSERT_EQ(sockopt(a, IPPROTO_TCP, TCP_USER_TIMEOUT), 4000);
    /* A Unix socket has no TCP keepalive: nothing to do, no error. */
    ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv));
    ASSERT_OK(sched_conn_attach(l, &u.c, sv[0], &r_ops));
    ASSERT_OK(sched_conn_keepalive(&u.c, 300));
    close(sv[1]);
    close(b);
    sched_conn_close(&u.c, false);
    sched_conn_close(&r.c, false);
    run_until(l, released, &r);
    run_until(l, released, &u);
}

TEST(conn_keepalive_options)
{
    run_both(keepalive);
}

TEST_MAIN(TEST_CASE(conn_pause_stops_socket_reads), TEST_CASE(conn_paused_sees_peer_reset),
          TEST_CASE(conn_keepalive_options))
