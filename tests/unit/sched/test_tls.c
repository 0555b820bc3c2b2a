/* TLS transform tests (sched/tls.c): a TLS server and a TLS client on one
 * loop over loopback TCP, on epoll and then io_uring (skipped where
 * io_uring is refused), with throw-away certificates (tests/support/tls_certs.c).
 * Covers the round trip of small and large payloads, close_notify, pause
 * and resume, every verification failure with its reason (expired, wrong
 * host, unknown CA, client certificate missing or from another CA), the
 * handshake deadline, a probe that never speaks, and garbage before and
 * after the handshake. Nothing sleeps: the loop runs until a condition
 * holds, with caps as safety nets. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/compiler.h"
#include "harness.h"
#include "loop_fixture.h"
#include "sched/loop.h"
#include "sched/tls.h"
#include "tls_certs.h"

#define RUN_MAX_MS 15000

static struct tc_certs certs;
static char cert_dir[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void certs_cleanup(void)
{
    if (cert_dir[0])
        nftw(cert_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void certs_init(void)
{
    if (cert_dir[0])
        return;
    snprintf(cert_dir, sizeof(cert_dir), "/tmp/lp-tls-unit-%d-XXXXXX", (int)getpid());
    ASSERT_NOTNULL(mkdtemp(cert_dir));
    atexit(certs_cleanup);
    ASSERT_OK(tc_make(cert_dir, &certs));
}

/* ---- peers ------------------------------------------------------------- */

struct peer {
    struct sched_conn c; /* the connection under test */
    struct buf in;       /* plaintext received */
    bool echo;           /* server: write back what arrives */
    bool connected;      /* on_connect(0) came */
    int connects;        /* on_connect calls */
    int connect_err;     /* its err */
    int hangups;         /* on_hangup calls */
    int hangup_err;      /* its err */
    bool released;       /* on_release came */
    char tls_err[192];   /* sched_conn_tls_error() when it failed, else "" */
};

static struct peer *peer_of(struct sched_conn *c)
{
    return LP_CONTAINER_OF(c, struct peer, c);
}

static void note_error(struct peer *p)
{
    const char *e = sched_conn_tls_error(&p->c);

    snprintf(p->tls_err, sizeof(p->tls_err), "%s", e ? e : "");
}

static void peer_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct peer *p = peer_of(c);

    ASSERT_OK(buf_append(&p->in, data, len));
    if (p->echo)
        ASSERT_OK(sched_conn_write(c, data, len));
}

static void peer_on_hangup(struct sched_conn *c, int err)
{
    struct peer *p = peer_of(c);

    p->hangups++;
    p->hangup_err = err;
    note_error(p);
    sched_conn_close(c, false);
}

static void peer_on_connect(struct sched_conn *c, int err)
{
    struct peer *p = peer_of(c);

    p->connects++;
    p->connect_err = err;
    if (err == 0) {
        p->connected = true;
        ASSERT_TRUE(sched_conn_tls_established(c));
        return;
    }
    note_error(p);
    sched_conn_close(c, false);
}

static void peer_on_release(struct sched_conn *c)
{
    struct peer *p = peer_of(c);

    p->released = true;
    buf_deinit(&p->in);
}

static const struct sched_conn_ops peer_ops = {
    .on_data = peer_on_data,
    .on_hangup = peer_on_hangup,
    .on_connect = peer_on_connect,
    .on_drain = NULL,
    .on_release = peer_on_release,
};

/* ---- a TLS server: one listener, the last accepted connection ------------ */

struct server {
    struct sched_listener ls;
    struct sched_tls_ctx *ctx;
    struct sched_tls_stats stats;
    struct peer peer; /* the accepted connection (one at a time) */
    int accepted;
    uint16_t port;
};

static void server_on_accept(struct sched_listener *ls, int fd)
{
    struct server *s = LP_CONTAINER_OF(ls, struct server, ls);

    ASSERT_TRUE(s->accepted == 0 || s->peer.released);
    memset(&s->peer, 0, sizeof(s->peer));
    s->peer.echo = true;
    s->accepted++;
    ASSERT_OK(sched_conn_attach(ls->loop, &s->peer.c, fd, &peer_ops));
    ASSERT_OK(sched_conn_start_tls(&s->peer.c, s->ctx, NULL));
}

static int tcp_listen(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ASSERT_TRUE(fd >= 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0);
    ASSERT_OK(listen(fd, 64) < 0 ? -errno : 0);
    ASSERT_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
    *port = ntohs(sa.sin_port);
    return fd;
}

static void server_start(struct sched_loop *l, struct server *s, const struct tc_pair *cert,
                         enum sched_tls_verify verify, unsigned timeout_ms)
{
    struct sched_tls_opts o = {.role = SCHED_TLS_SERVER,
                               .cert_file = cert->cert,
                               .key_file = cert->key,
                               .ca_file = certs.ca.cert,
                               .verify = verify,
                               .handshake_timeout_ms = timeout_ms,
                               .stats = &s->stats};
    char err[256] = "";
    int fd;

    memset(s, 0, sizeof(*s));
    if (sched_tls_ctx_create(&s->ctx, &o, err, sizeof(err)) < 0)
        TEST_FAIL("server context: %s", err);
    fd = tcp_listen(&s->port);
    ASSERT_OK(sched_listener_start(l, &s->ls, fd, server_on_accept));
}

static void server_stop(struct server *s)
{
    sched_listener_stop(&s->ls);
    sched_tls_ctx_put(s->ctx);
}

/* ---- running ----------------------------------------------------------- */

static void run_until(struct sched_loop *l, lf_cond *cond, void *arg, const char *what)
{
    if (!lf_run_until(l, cond, arg, RUN_MAX_MS))
        TEST_FAIL("timed out waiting for %s", what);
}

static bool is_released(void *arg)
{
    return ((struct peer *)arg)->released;
}

static bool accepted_one(void *arg)
{
    return ((struct server *)arg)->accepted > 0;
}

/* Waits for the server side of the connection made since accepted was
 * reset to be accepted and released. */
static void wait_server_released(struct sched_loop *l, struct server *s)
{
    run_until(l, accepted_one, s, "accept");
    run_until(l, is_released, &s->peer, "server release");
}

static bool has_connects(void *arg)
{
    return ((struct peer *)arg)->connects > 0;
}

struct want_bytes {
    struct peer *p;
    size_t n;
};

static bool has_bytes(void *arg)
{
    struct want_bytes *w = arg;

    return buf_size(&w->p->in) >= w->n;
}

static struct sched_tls_ctx *client_ctx(const char *ca, const struct tc_pair *cert)
{
    struct sched_tls_opts o = {.role = SCHED_TLS_CLIENT,
                               .cert_file = cert ? cert->cert : NULL,
                               .key_file = cert ? cert->key : NULL,
                               .ca_file = ca,
                               .verify = SCHED_TLS_VERIFY_REQUIRED};
    struct sched_tls_ctx *ctx;
    char err[256] = "";

    if (sched_tls_ctx_create(&ctx, &o, err, sizeof(err)) < 0)
        TEST_FAIL("client context: %s", err);
    return ctx;
}

/* Connects p to the server with ctx, checking server_name. */
static void client_connect(struct sched_loop *l, struct peer *p, struct server *s,
                           struct sched_tls_ctx *ctx, const char *server_name)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(s->port)};

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(p, 0, sizeof(*p));
    s->accepted = 0;
    ASSERT_OK(sched_conn_connect(l, &p->c, (struct sockaddr *)&sa, sizeof(sa), &peer_ops));
    ASSERT_OK(sched_conn_start_tls(&p->c, ctx, server_name));
}

static void run_both(void (*fn)(struct sched_loop *l))
{
    static const enum sched_io ios[] = {SCHED_IO_EPOLL, SCHED_IO_URING};
    size_t i;

    certs_init();
    for (i = 0; i < LP_ARRAY_SIZE(ios); i++) {
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

/* A client of s that expects the handshake to fail with a reason holding
 * want (client side: the reason of on_connect's error). */
static void expect_client_failure(struct sched_loop *l, struct server *s, struct sched_tls_ctx *ctx,
                                  const char *name, const char *want)
{
    struct peer cl;

    client_connect(l, &cl, s, ctx, name);
    run_until(l, has_connects, &cl, "on_connect");
    ASSERT_EQ(cl.connect_err, -EPROTO);
    if (!strstr(cl.tls_err, want))
        TEST_FAIL("client reason \"%s\" lacks \"%s\"", cl.tls_err, want);
    run_until(l, is_released, &cl, "client release");
    wait_server_released(l, s);
}

/* ---- scenarios --------------------------------------------------------- */

static char pattern(size_t k)
{
    return (char)('a' + (k % 23 + (k / 4096) % 3));
}

static void sc_echo(struct sched_loop *l)
{
    struct sched_tls_ctx *ctx = client_ctx(certs.ca.cert, NULL);
    struct server s;
    struct peer cl;
    struct want_bytes w = {&cl, 0};
    size_t big = 1 << 20, i;
    char *payload = malloc(big);
    char cipher[96];

    ASSERT_NOTNULL(payload);
    for (i = 0; i < big; i++)
        payload[i] = pattern(i);
    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 5000);
    client_connect(l, &cl, &s, ctx, "localhost");
    ASSERT_OK(sched_conn_write(&cl.c, "early ", 6)); /* queued before the handshake */
    run_until(l, has_connects, &cl, "on_connect");
    ASSERT_EQ(cl.connect_err, 0);
    ASSERT_NOTNULL(sched_conn_tls_cipher(&cl.c, cipher, sizeof(cipher)));
    fprintf(stderr, "negotiated %s\n", cipher);
    ASSERT_OK(sched_conn_write(&cl.c, "hello", 5));
    w.n = 11;
    run_until(l, has_bytes, &w, "echo");
    ASSERT_TRUE(memcmp(buf_head(&cl.in), "early hello", 11) == 0);
    /* A large payload: many records, short sends, both directions. */
    ASSERT_OK(sched_conn_write(&cl.c, payload, big));
    w.n = 11 + big;
    run_until(l, has_bytes, &w, "large echo");
    ASSERT_TRUE(memcmp(buf_head(&cl.in) + 11, payload, big) == 0);
    ASSERT_EQ(s.stats.handshakes, 1);
    ASSERT_EQ(s.stats.handshake_failures, 0);
    /* close with flush sends close_notify: an orderly EOF for the server. */
    sched_conn_close(&cl.c, true);
    wait_server_released(l, &s);
    ASSERT_EQ(s.peer.hangups, 1);
    ASSERT_EQ(s.peer.hangup_err, 0);
    ASSERT_STREQ(s.peer.tls_err, "");
    run_until(l, is_released, &cl, "client release");
    server_stop(&s);
    sched_tls_ctx_put(ctx);
    free(payload);
}

TEST(tls_echo_and_close_notify)
{
    run_both(sc_echo);
}

static void sc_server_cert_failures(struct sched_loop *l)
{
    struct sched_tls_ctx *ctx = client_ctx(certs.ca.cert, NULL);
    struct sched_tls_ctx *other = client_ctx(certs.other_ca.cert, NULL);
    struct server s;

    server_start(l, &s, &certs.expired, SCHED_TLS_VERIFY_NONE, 5000);
    expect_client_failure(l, &s, ctx, "localhost", "certificate has expired");
    /* The server learns of it from the client's alert. */
    ASSERT_EQ(s.peer.hangup_err, -EPROTO);
    if (!strstr(s.peer.tls_err, "certificate expired"))
        TEST_FAIL("server reason \"%s\"", s.peer.tls_err);
    ASSERT_EQ(s.stats.handshake_failures, 1);
    server_stop(&s);

    server_start(l, &s, &certs.wrong_host, SCHED_TLS_VERIFY_NONE, 5000);
    expect_client_failure(l, &s, ctx, "localhost", "hostname mismatch");
    server_stop(&s);

    /* An IP address is checked against the certificate's IP addresses. */
    server_start(l, &s, &certs.wrong_host, SCHED_TLS_VERIFY_NONE, 5000);
    expect_client_failure(l, &s, ctx, "127.0.0.1", "IP address mismatch");
    server_stop(&s);

    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 5000);
    /* The server sends its chain up to its CA: "self-signed certificate in
     * certificate chain" here, "unable to get local issuer certificate"
     * with the leaf alone. */
    expect_client_failure(l, &s, other, "localhost", "certificate verify failed");
    server_stop(&s);

    sched_tls_ctx_put(ctx);
    sched_tls_ctx_put(other);
}

TEST(tls_server_certificate_failures)
{
    run_both(sc_server_cert_failures);
}

/* TLS 1.3: the client's handshake is over before the server checks the
 * client's certificate, so the client learns of the refusal from the
 * server's alert, as an error on the open connection. */
static void expect_refused_client(struct sched_loop *l, struct server *s, struct sched_tls_ctx *ctx,
                                  const char *server_want)
{
    struct peer cl;

    client_connect(l, &cl, s, ctx, "localhost");
    ASSERT_OK(sched_conn_write(&cl.c, "x", 1));
    wait_server_released(l, s);
    ASSERT_EQ(s->peer.hangup_err, -EPROTO);
    if (!strstr(s->peer.tls_err, server_want))
        TEST_FAIL("server reason \"%s\" lacks \"%s\"", s->peer.tls_err, server_want);
    ASSERT_EQ(buf_size(&s->peer.in), 0);
    run_until(l, is_released, &cl, "client release");
    ASSERT_TRUE(cl.hangups + (cl.connects > 0 && cl.connect_err < 0) == 1);
    ASSERT_TRUE(cl.tls_err[0] != '\0');
    fprintf(stderr, "client saw: %s\n", cl.tls_err);
}

static void sc_client_cert(struct sched_loop *l)
{
    struct sched_tls_ctx *none = client_ctx(certs.ca.cert, NULL);
    struct sched_tls_ctx *good = client_ctx(certs.ca.cert, &certs.client);
    struct sched_tls_ctx *other = client_ctx(certs.ca.cert, &certs.other_client);
    struct sched_tls_ctx *expired = client_ctx(certs.ca.cert, &certs.client_expired);
    struct want_bytes w;
    struct server s;
    struct peer cl;

    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_REQUIRED, 5000);
    expect_refused_client(l, &s, none, "peer did not return a certificate");
    expect_refused_client(l, &s, other, "certificate verify failed");
    expect_refused_client(l, &s, expired, "certificate verify failed: certificate has expired");
    client_connect(l, &cl, &s, good, "localhost");
    ASSERT_OK(sched_conn_write(&cl.c, "ok", 2));
    w = (struct want_bytes){&cl, 2};
    run_until(l, has_bytes, &w, "echo with a client certificate");
    sched_conn_close(&cl.c, false);
    wait_server_released(l, &s);
    run_until(l, is_released, &cl, "client release");
    server_stop(&s);

    /* optional: no certificate is fine, a bad one is not. */
    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_OPTIONAL, 5000);
    client_connect(l, &cl, &s, none, "localhost");
    ASSERT_OK(sched_conn_write(&cl.c, "ok", 2));
    run_until(l, has_bytes, &w, "echo without a client certificate");
    sched_conn_close(&cl.c, false);
    wait_server_released(l, &s);
    run_until(l, is_released, &cl, "client release");
    expect_refused_client(l, &s, other, "certificate verify failed");
    server_stop(&s);

    sched_tls_ctx_put(none);
    sched_tls_ctx_put(good);
    sched_tls_ctx_put(other);
    sched_tls_ctx_put(expired);
}

TEST(tls_client_certificates)
{
    run_both(sc_client_cert);
}

/* ---- raw peers: probes, silence, garbage ------------------------------- */

static int raw_connect(uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_TRUE(fd >= 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
        TEST_FAIL("connect: %s", strerror(errno));
    return fd;
}

static void sc_deadline_and_probe(struct sched_loop *l)
{
    struct server s;
    int fd;

    /* Silence: closed at the deadline, with a reason, counted. */
    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 100);
    fd = raw_connect(s.port);
    run_until(l, is_released, &s.peer, "deadline");
    ASSERT_EQ(s.peer.hangup_err, -ETIMEDOUT);
    ASSERT_STREQ(s.peer.tls_err, "handshake not finished within 100 ms");
    ASSERT_EQ(s.stats.handshake_failures, 1);
    close(fd);
    /* A probe that connects and closes without a byte: a plain EOF. */
    s.accepted = 0;
    fd = raw_connect(s.port);
    run_until(l, accepted_one, &s, "accept");
    close(fd);
    wait_server_released(l, &s);
    ASSERT_EQ(s.peer.hangup_err, 0);
    ASSERT_STREQ(s.peer.tls_err, "");
    ASSERT_EQ(s.stats.handshake_failures, 1);
    server_stop(&s);
}

TEST(tls_handshake_deadline_and_silent_probe)
{
    run_both(sc_deadline_and_probe);
}

/* Plaintext RESP to a TLS port: a clear reason, the socket closed. */
static void sc_garbage_before(struct sched_loop *l)
{
    static const char junk[] = "*1\r\n$4\r\nPING\r\n";
    struct server s;
    char buf[256];
    int fd;

    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 5000);
    fd = raw_connect(s.port);
    run_until(l, accepted_one, &s, "accept");
    ASSERT_EQ(send(fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(junk) - 1);
    run_until(l, is_released, &s.peer, "release");
    ASSERT_EQ(s.peer.hangup_err, -EPROTO);
    fprintf(stderr, "server saw: %s\n", s.peer.tls_err);
    ASSERT_TRUE(s.peer.tls_err[0] != '\0');
    ASSERT_EQ(buf_size(&s.peer.in), 0);
    /* Whatever came back (an alert) is not RESP, and the socket is closed. */
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n == 0 || (n < 0 && errno == ECONNRESET))
            break;
        if (n < 0 && errno == EAGAIN) {
            ASSERT_OK(sched_loop_run_once(l, 5));
            continue;
        }
        ASSERT_TRUE(n > 0 && buf[0] != '+' && buf[0] != '-');
    }
    close(fd);
    server_stop(&s);
}

TEST(tls_garbage_before_handshake)
{
    run_both(sc_garbage_before);
}

/* Bytes injected under an established session: the record fails to
 * decrypt, the server ends the connection with a reason. */
static void sc_garbage_after(struct sched_loop *l)
{
    struct sched_tls_ctx *ctx = client_ctx(certs.ca.cert, NULL);
    static const char junk[] = "\x17\x03\x03\x00\x20garbage-garbage-garbage-garbage!";
    struct want_bytes w;
    struct server s;
    struct peer cl;

    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 5000);
    client_connect(l, &cl, &s, ctx, "localhost");
    ASSERT_OK(sched_conn_write(&cl.c, "hi", 2));
    w = (struct want_bytes){&cl, 2};
    run_until(l, has_bytes, &w, "echo");
    ASSERT_EQ(send(cl.c.fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(junk) - 1);
    wait_server_released(l, &s);
    ASSERT_EQ(s.peer.hangup_err, -EPROTO);
    fprintf(stderr, "server saw: %s\n", s.peer.tls_err);
    ASSERT_TRUE(s.peer.tls_err[0] != '\0');
    ASSERT_EQ(s.stats.handshake_failures, 0); /* not a handshake failure */
    run_until(l, is_released, &cl, "client release");
    server_stop(&s);
    sched_tls_ctx_put(ctx);
}

TEST(tls_garbage_after_handshake)
{
    run_both(sc_garbage_after);
}

/* A paused TLS connection keeps what was decrypted and delivers it, in
 * order, after resume. */
static void sc_pause(struct sched_loop *l)
{
    struct sched_tls_ctx *ctx = client_ctx(certs.ca.cert, NULL);
    size_t n = 256 * 1024, i;
    char *payload = malloc(n);
    struct want_bytes w;
    struct server s;
    struct peer cl;

    ASSERT_NOTNULL(payload);
    for (i = 0; i < n; i++)
        payload[i] = pattern(i);
    server_start(l, &s, &certs.server, SCHED_TLS_VERIFY_NONE, 5000);
    client_connect(l, &cl, &s, ctx, "localhost");
    run_until(l, has_connects, &cl, "on_connect");
    run_until(l, accepted_one, &s, "accept");
    s.peer.echo = false;
    ASSERT_OK(sched_conn_write(&cl.c, "a", 1));
    w = (struct want_bytes){&s.peer, 1};
    run_until(l, has_bytes, &w, "first byte");
    sched_conn_pause(&s.peer.c, true);
    ASSERT_OK(sched_conn_write(&cl.c, payload, n));
    for (i = 0; i < 200; i++)
        ASSERT_OK(sched_loop_run_once(l, 1));
    ASSERT_TRUE(buf_size(&s.peer.in) < 1 + n);
    sched_conn_pause(&s.peer.c, false);
    w.n = 1 + n;
    run_until(l, has_bytes, &w, "payload after resume");
    ASSERT_TRUE(memcmp(buf_head(&s.peer.in) + 1, payload, n) == 0);
    sched_conn_close(&cl.c, false);
    wait_server_released(l, &s);
    run_until(l, is_released, &cl, "client release");
    server_stop(&s);
    sched_tls_ctx_put(ctx);
    free(payload);
}

TEST(tls_pause_resume)
{
    run_both(sc_pause);
}

/* Bad files: clear reasons, no context. */
TEST(tls_context_errors)
{
    struct sched_tls_opts o = {.role = SCHED_TLS_SERVER};
    struct sched_tls_ctx *ctx = NULL;
    char err[256];

    certs_init();
    ASSERT_EQ(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "needs a certificate") != NULL);
    o.cert_file = "/nonexistent/cert.pem";
    ASSERT_EQ(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)), -EINVAL);
    ASSERT_STREQ(err, "cannot read certificate file /nonexistent/cert.pem: No such file or "
                      "directory");
    o.cert_file = certs.server.cert;
    o.key_file = certs.client.key;
    ASSERT_EQ(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "does not match") != NULL);
    o.key_file = certs.server.key;
    o.verify = SCHED_TLS_VERIFY_REQUIRED;
    ASSERT_EQ(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)), -EINVAL);
    ASSERT_TRUE(strstr(err, "needs a CA file") != NULL);
    o.ca_file = certs.server.key; /* not a certificate */
    ASSERT_EQ(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)), -EINVAL);
    fprintf(stderr, "bad CA: %s\n", err);
    ASSERT_TRUE(strstr(err, "CA file") != NULL);
    o.ca_file = certs.ca.cert;
    ASSERT_OK(sched_tls_ctx_create(&ctx, &o, err, sizeof(err)));
    ASSERT_NOTNULL(ctx);
    sched_tls_ctx_put(ctx);
}

TEST_MAIN(TEST_CASE(tls_echo_and_close_notify), TEST_CASE(tls_server_certificate_failures),
          TEST_CASE(tls_client_certificates), TEST_CASE(tls_handshake_deadline_and_silent_probe),
          TEST_CASE(tls_garbage_before_handshake), TEST_CASE(tls_garbage_after_handshake),
          TEST_CASE(tls_pause_resume), TEST_CASE(tls_context_errors))
