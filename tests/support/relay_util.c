/* The userspace TCP fault relay (relay_util.h has the design). */
#include "relay_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RELAY_CHUNK      16384
#define RELAY_DELAY_MAX  60000
#define RELAY_CONNECT_MS 500 /* bound of a connect to the target */

/* Bytes read from one side, waiting to be written to the other. */
struct relay_chunk {
    struct relay_chunk *next;
    long long due_ms; /* not written before this (monotonic) */
    size_t len, off;  /* off: bytes of data already written */
    char data[];
};

/* One direction of a relayed connection: from -> to. */
struct relay_pipe {
    int from, to;
    struct relay_chunk *head, *tail;
    size_t queued; /* bytes in the chunks, unwritten */
    int chunks;    /* chunks queued */
    bool eof;      /* from sent FIN */
    bool shut;     /* the FIN was passed on (shutdown(to, SHUT_WR)) */
};

/* A relayed connection: fd[0] accepted (the client), fd[1] to the target.
 * p[RELAY_C2S] reads fd[0] and writes fd[1], p[RELAY_S2C] the reverse. */
struct relay_conn {
    bool used;
    int fd[2];
    struct relay_pipe p[2];
};

struct relay {
    pthread_t thread;
    pthread_mutex_t mu; /* held by the thread except in poll() */
    pthread_cond_t cv;  /* reset_done advanced */
    int lfd;
    int wake[2]; /* pipe: an API call changed something */
    int port;
    int target_port;
    /* settings (under mu) */
    enum relay_mode mode[2];
    int delay_ms[2];
    bool refuse;
    bool stopping;
    unsigned long long reset_req, reset_done; /* relay_reset_all generations */
    int reset_last;                           /* connections the last reset closed */
    /* state */
    struct relay_conn conn[RELAY_MAX_CONNS];
    struct relay_stats st;
    bool in_child; /* a fork's copy: no thread, sockets closed */
    struct relay *reg_next;
};

/* ---- registry of live relays, for the fork handlers ---------------------- */

static pthread_mutex_t relay_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t relay_reg_once = PTHREAD_ONCE_INIT;
static struct relay *relay_reg_head;

static void relay_close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Before a fork: wait for every relay thread to be in poll(), so the child
 * copies a consistent state. */
static void relay_atfork_prepare(void)
{
    pthread_mutex_lock(&relay_reg_mu);
    for (struct relay *r = relay_reg_head; r; r = r->reg_next)
        pthread_mutex_lock(&r->mu);
}

static void relay_atfork_parent(void)
{
    for (struct relay *r = relay_reg_head; r; r = r->reg_next)
        pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&relay_reg_mu);
}

/* In the child: drop its references to the relay's sockets (only close(),
 * async-signal-safe, as a child that execs next may need). */
static void relay_atfork_child(void)
{
    for (struct relay *r = relay_reg_head; r; r = r->reg_next) {
        r->in_child = true;
        relay_close_fd(&r->lfd);
        relay_close_fd(&r->wake[0]);
        relay_close_fd(&r->wake[1]);
        for (int i = 0; i < RELAY_MAX_CONNS; i++) {
            relay_close_fd(&r->conn[i].fd[0]);
            relay_close_fd(&r->conn[i].fd[1]);
        }
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&relay_reg_mu);
}

static void relay_reg_init(void)
{
    pthread_atfork(relay_atfork_prepare, relay_atfork_parent, relay_atfork_child);
}

static void relay_reg_add(struct relay *r)
{
    pthread_once(&relay_reg_once, relay_reg_init);
    pthread_mutex_lock(&relay_reg_mu);
    r->reg_next = relay_reg_head;
    relay_reg_head = r;
    pthread_mutex_unlock(&relay_reg_mu);
}

static void relay_reg_remove(struct relay *r)
{
    pthread_mutex_lock(&relay_reg_mu);
    for (struct relay **pp = &relay_reg_head; *pp; pp = &(*pp)->reg_next) {
        if (*pp == r) {
            *pp = r->reg_next;
            break;
        }
    }
    pthread_mutex_unlock(&relay_reg_mu);
}

/* ---- small helpers --------------------------------------------------------- */

static long long relay_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *relay_mode_name(enum relay_mode m)
{
    switch (m) {
    case RELAY_PASS:
        return "pass";
    case RELAY_PAUSE:
        return "pause";
    case RELAY_DELAY:
        return "delay";
    case RELAY_DROP:
        return "drop";
    }
    return "?";
}

static void relay_wake(struct relay *r)
{
    char b = 1;

    if (write(r->wake[1], &b, 1) < 0) {
        /* full pipe: the thread is woken already */
    }
}

static void relay_set_nodelay(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Close with RST (SO_LINGER 0) or a plain close. */
static void relay_close_sock(int *fd, bool rst)
{
    if (*fd < 0)
        return;
    if (rst) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};

        setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    relay_close_fd(fd);
}

static void relay_pipe_clear(struct relay *r, struct relay_pipe *p, int dir)
{
    struct relay_chunk *c = p->head, *n;

    for (; c; c = n) {
        n = c->next;
        free(c);
    }
    r->st.queued[dir] -= (long long)p->queued;
    p->head = p->tail = NULL;
    p->queued = 0;
    p->chunks = 0;
}

static void relay_conn_close(struct relay *r, struct relay_conn *c, bool rst)
{
    relay_pipe_clear(r, &c->p[RELAY_C2S], RELAY_C2S);
    relay_pipe_clear(r, &c->p[RELAY_S2C], RELAY_S2C);
    relay_close_sock(&c->fd[0], rst);
    relay_close_sock(&c->fd[1], rst);
    c->used = false;
    r->st.active--;
    if (rst)
        r->st.resets++;
}

/* ---- accepting ------------------------------------------------------------- */

/* A blocking connect to the target (loopback: it completes or is refused
 * at once; bounded by RELAY_CONNECT_MS should the target's accept queue be
 * full), then non-blocking. -errno on failure. */
static int relay_connect_target(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 0, .tv_usec = RELAY_CONNECT_MS * 1000};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err;

    if (fd < 0)
        return -errno;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* Linux bounds connect() by it */
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    relay_set_nodelay(fd);
    return fd;
}

static struct relay_conn *relay_conn_slot(struct relay *r)
{
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        if (!r->conn[i].used)
            return &r->conn[i];
    return NULL;
}

static void relay_accept_one(struct relay *r)
{
    int cfd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    struct relay_conn *c;
    int sfd;

    if (cfd < 0)
        return; /* EAGAIN, or the client gave up first */
    c = relay_conn_slot(r);
    if (r->refuse || !c || (sfd = relay_connect_target(r->target_port)) < 0) {
        relay_close_sock(&cfd, true);
        r->st.refused++;
        return;
    }
    relay_set_nodelay(cfd);
    memset(c, 0, sizeof(*c));
    c->used = true;
    c->fd[0] = cfd;
    c->fd[1] = sfd;
    c->p[RELAY_C2S].from = cfd;
    c->p[RELAY_C2S].to = sfd;
    c->p[RELAY_S2C].from = sfd;
    c->p[RELAY_S2C].to = cfd;
    r->st.accepted++;
    r->st.active++;
}

/* ---- forwarding ------------------------------------------------------------ */

static bool relay_pipe_wants_read(const struct relay *r, const struct relay_pipe *p, int dir)
{
    if (p->eof)
        return false;
    switch (r->mode[dir]) {
    case RELAY_PAUSE:
        return false;
    case RELAY_DROP:
        return true;
    default:
        return p->queued < RELAY_QUEUE_MAX && p->chunks < RELAY_CHUNKS_MAX;
    }
}

static bool relay_pipe_can_write(const struct relay *r, int dir)
{
    return r->mode[dir] == RELAY_PASS || r->mode[dir] == RELAY_DELAY;
}

/* Reads once from p->from. Returns false if the connection must be reset
 * (a read error). */
static bool relay_pipe_read(struct relay *r, struct relay_pipe *p, int dir, long long now)
{
    char buf[RELAY_CHUNK];
    struct relay_chunk *c;
    ssize_t n = read(p->from, buf, sizeof(buf));

    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0) {
        p->eof = true;
        return true;
    }
    if (r->mode[dir] == RELAY_DROP) {
        r->st.dropped[dir] += n;
        return true;
    }
    c = malloc(sizeof(*c) + (size_t)n);
    if (!c)
        return false;
    memcpy(c->data, buf, (size_t)n);
    c->next = NULL;
    c->len = (size_t)n;
    c->off = 0;
    c->due_ms = now + (r->mode[dir] == RELAY_DELAY ? r->delay_ms[dir] : 0);
    if (p->tail)
        p->tail->next = c;
    else
        p->head = c;
    p->tail = c;
    p->chunks++;
    p->queued += (size_t)n;
    r->st.queued[dir] += n;
    if ((long long)p->queued > r->st.queued_peak[dir])
        r->st.queued_peak[dir] = (long long)p->queued;
    if (p->chunks > r->st.chunks_peak[dir])
        r->st.chunks_peak[dir] = p->chunks;
    return true;
}

/* Writes every due chunk it can; passes a FIN on once the queue is empty.
 * Returns false if the connection must be reset (a write error). */
static bool relay_pipe_write(struct relay *r, struct relay_pipe *p, int dir, long long now)
{
    while (p->head && p->head->due_ms <= now) {
        struct relay_chunk *c = p->head;
        ssize_t n = send(p->to, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);

        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c->off += (size_t)n;
        p->queued -= (size_t)n;
        r->st.queued[dir] -= n;
        r->st.bytes[dir] += n;
        if (c->off < c->len)
            return true; /* the socket buffer is full */
        p->head = c->next;
        if (!p->head)
            p->tail = NULL;
        p->chunks--;
        free(c);
    }
    if (!p->head && p->eof && !p->shut) {
        shutdown(p->to, SHUT_WR);
        p->shut = true;
    }
    return true;
}

/* The poll events fd (side s of c) needs now; *due_ms lowers to the next
 * DELAY chunk that is not due yet. */
static short relay_events(const struct relay *r, const struct relay_conn *c, int s, long long now,
                          long long *due_ms)
{
    const struct relay_pipe *in = &c->p[s == 0 ? RELAY_C2S : RELAY_S2C];  /* reads fd[s] */
    const struct relay_pipe *out = &c->p[s == 0 ? RELAY_S2C : RELAY_C2S]; /* writes fd[s] */
    int din = s == 0 ? RELAY_C2S : RELAY_S2C, dout = 1 - din;
    short ev = 0;

    if (relay_pipe_wants_read(r, in, din))
        ev |= POLLIN;
    if (relay_pipe_can_write(r, dout) && out->head) {
        if (out->head->due_ms <= now)
            ev |= POLLOUT;
        else if (out->head->due_ms < *due_ms)
            *due_ms = out->head->due_ms;
    }
    return ev;
}

/* Services both directions of c after poll said something (or a timer
 * ran out); closes it when both FINs went through or on an error. */
static void relay_conn_service(struct relay *r, struct relay_conn *c, long long now)
{
    bool ok = true;

    for (int d = 0; d < 2 && ok; d++) {
        struct relay_pipe *p = &c->p[d];

        if (r->mode[d] == RELAY_DROP && p->head)
            relay_pipe_clear(r, p, d);
        if (relay_pipe_wants_read(r, p, d))
            ok = relay_pipe_read(r, p, d, now);
        if (ok && relay_pipe_can_write(r, d))
            ok = relay_pipe_write(r, p, d, now);
    }
    if (!ok)
        relay_conn_close(r, c, true);
    else if (c->p[0].shut && c->p[1].shut)
        relay_conn_close(r, c, false);
}

static int relay_reset_conns(struct relay *r)
{
    int n = 0;

    for (int i = 0; i < RELAY_MAX_CONNS; i++) {
        if (r->conn[i].used) {
            relay_conn_close(r, &r->conn[i], true);
            n++;
        }
    }
    return n;
}

/* ---- the thread -------------------------------------------------------------- */

/* pfd[0] the wake pipe, pfd[1] the listen socket, then two per connection
 * (idx maps them back); a socket with nothing to wait for is left out, so
 * a hang-up it reports cannot spin the loop. */
struct relay_pollset {
    struct pollfd pfd[2 + 2 * RELAY_MAX_CONNS];
    int idx[2 + 2 * RELAY_MAX_CONNS];
    int n;
    int timeout_ms;
};

static void relay_build_pollset(struct relay *r, struct relay_pollset *ps, long long now)
{
    long long due = now + 3600 * 1000LL;

    ps->pfd[0] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
    ps->pfd[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    ps->n = 2;
    for (int i = 0; i < RELAY_MAX_CONNS; i++) {
        if (!r->conn[i].used)
            continue;
        for (int s = 0; s < 2; s++) {
            short ev = relay_events(r, &r->conn[i], s, now, &due);

            if (!ev)
                continue;
            ps->pfd[ps->n] = (struct pollfd){.fd = r->conn[i].fd[s], .events = ev};
            ps->idx[ps->n++] = i;
        }
    }
    ps->timeout_ms = (int)(due - now);
}

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    struct relay_pollset *ps = malloc(sizeof(*ps));

    pthread_mutex_lock(&r->mu);
    while (ps && !r->stopping) {
        long long now = relay_now_ms();

        if (r->reset_done != r->reset_req) {
            r->reset_last = relay_reset_conns(r);
            r->reset_done = r->reset_req;
            pthread_cond_broadcast(&r->cv);
        }
        relay_build_pollset(r, ps, now);
        pthread_mutex_unlock(&r->mu);
        poll(ps->pfd, (nfds_t)ps->n, ps->timeout_ms);
        pthread_mutex_lock(&r->mu);
        if (ps->pfd[0].revents) {
            char buf[64];

            while (read(r->wake[0], buf, sizeof(buf)) > 0) {
            }
        }
        if (ps->pfd[1].revents & POLLIN)
            relay_accept_one(r);
        /* Every connection: a non-blocking read or write that finds
         * nothing costs one syscall, and this runs only when poll woke
         * (an event, a change, or a DELAY chunk came due). */
        now = relay_now_ms();
        for (int i = 0; i < RELAY_MAX_CONNS; i++)
            if (r->conn[i].used)
                relay_conn_service(r, &r->conn[i], now);
    }
    if (!ps) { /* no memory for the poll set: nothing relays, resets still answer */
        r->reset_done = r->reset_req;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    free(ps);
    return NULL;
}

/* ---- API --------------------------------------------------------------------- */

static int relay_listen(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int one = 1, err;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

struct relay *relay_start(int target_port)
{
    struct relay *r;
    int err;

    if (target_port <= 0 || target_port > 65535) {
        errno = EINVAL;
        return NULL;
    }
    r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->target_port = target_port;
    r->wake[0] = r->wake[1] = -1;
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        r->conn[i].fd[0] = r->conn[i].fd[1] = -1;
    r->lfd = relay_listen(&r->port);
    if (r->lfd < 0) {
        err = -r->lfd;
        goto fail_free;
    }
    if (pipe2(r->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
        err = errno;
        goto fail_listen;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    relay_reg_add(r);
    err = pthread_create(&r->thread, NULL, relay_main, r);
    if (err)
        goto fail_reg;
    return r;

fail_reg:
    relay_reg_remove(r);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    close(r->wake[0]);
    close(r->wake[1]);
fail_listen:
    close(r->lfd);
fail_free:
    free(r);
    errno = err;
    return NULL;
}

int relay_port(const struct relay *r)
{
    return r->port;
}

/* A direction set to PASS or a shorter DELAY: queued chunks come due no
 * later than the new setting says (FIFO order holds: the head is written
 * first whatever the due times). */
static void relay_redue(struct relay *r, int dir, long long due)
{
    for (int i = 0; i < RELAY_MAX_CONNS; i++) {
        if (!r->conn[i].used)
            continue;
        for (struct relay_chunk *c = r->conn[i].p[dir].head; c; c = c->next)
            if (c->due_ms > due)
                c->due_ms = due;
    }
}

int relay_set(struct relay *r, enum relay_dir dir, enum relay_mode mode, int delay_ms)
{
    if ((unsigned)dir > RELAY_BOTH || (unsigned)mode > RELAY_DROP || delay_ms < 0 ||
        delay_ms > RELAY_DELAY_MAX)
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    for (int d = 0; d < 2; d++) {
        if (dir == RELAY_BOTH || (int)dir == d) {
            r->mode[d] = mode;
            r->delay_ms[d] = mode == RELAY_DELAY ? delay_ms : 0;
            if (mode == RELAY_PASS || mode == RELAY_DELAY)
                relay_redue(r, d, relay_now_ms() + r->delay_ms[d]);
        }
    }
    relay_wake(r);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void relay_refuse(struct relay *r, bool on)
{
    pthread_mutex_lock(&r->mu);
    r->refuse = on;
    relay_wake(r);
    pthread_mutex_unlock(&r->mu);
}

void relay_partition(struct relay *r, bool refuse_new)
{
    pthread_mutex_lock(&r->mu);
    r->mode[RELAY_C2S] = r->mode[RELAY_S2C] = RELAY_PAUSE;
    r->refuse = refuse_new;
    relay_wake(r);
    pthread_mutex_unlock(&r->mu);
}

int relay_reset_all(struct relay *r)
{
    unsigned long long gen;
    int n;

    pthread_mutex_lock(&r->mu);
    gen = ++r->reset_req;
    relay_wake(r);
    while (r->reset_done < gen)
        pthread_cond_wait(&r->cv, &r->mu);
    n = r->reset_last;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void relay_heal(struct relay *r, bool with_reset)
{
    if (with_reset)
        relay_reset_all(r);
    pthread_mutex_lock(&r->mu);
    r->mode[RELAY_C2S] = r->mode[RELAY_S2C] = RELAY_PASS;
    r->delay_ms[RELAY_C2S] = r->delay_ms[RELAY_S2C] = 0;
    relay_redue(r, RELAY_C2S, relay_now_ms());
    relay_redue(r, RELAY_S2C, relay_now_ms());
    r->refuse = false;
    relay_wake(r);
    pthread_mutex_unlock(&r->mu);
}

void relay_stats(struct relay *r, struct relay_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}

void relay_stop(struct relay *r)
{
    if (!r)
        return;
    if (r->in_child) { /* a fork's copy: its sockets are closed already */
        relay_reg_remove(r);
        free(r);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    relay_wake(r);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    relay_reg_remove(r);
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        if (r->conn[i].used)
            relay_conn_close(r, &r->conn[i], false);
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
