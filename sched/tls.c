/* TLS for loop connections: OpenSSL sessions over a custom memory BIO,
 * driven by the connection state machine of loop.c (see tls.h for the
 * contract).
 *
 * DESIGN BLOCK
 *
 * Data path. The backends are unchanged: they receive ciphertext into
 * their buffers (the io_uring provided-buffer ring, or epoll's loop-wide
 * buffer) and send whatever is in c->sending. Two hooks of loop-int.h make
 * the transform, each taken only when c->tls is set (one well-predicted
 * branch per completion on the plain path, no extra copy there):
 *   - sched__conn_recv() -> sched__tls_recv(): the received bytes are the
 *     BIO's input for the duration of the call (no copy into a memory BIO);
 *     SSL_do_handshake() / SSL_read() run until OpenSSL wants more, and
 *     each plaintext chunk goes to sched__conn_data(), which delivers it or
 *     holds it while the owner is paused, exactly as plain input.
 *   - sched__conn_refill() -> sched__tls_refill(): where a plain connection
 *     swaps `out` into the empty `sending`, a TLS one seals `out` with
 *     SSL_write() (the BIO appends the records to wq) and swaps wq in. wq
 *     also collects what OpenSSL writes on its own (handshake flights,
 *     alerts, session tickets, key updates) while a send may be in flight,
 *     which is why records never go straight into `sending`.
 * So the double buffering, the one-send-in-flight rule and pausing keep
 * their meaning: `out` and `held` hold plaintext, `sending` ciphertext.
 *
 * States (enum sched_tls_state):
 *
 *   start_tls --> HANDSHAKE --SSL_do_handshake() == 1--> OPEN
 *   HANDSHAKE --bad handshake, deadline, EOF or socket error--> FAILED
 *   OPEN --undecryptable record, SSL_write() error--> FAILED
 *
 * Client side: sched__conn_connected() starts the handshake instead of
 * calling on_connect; on_connect(0) follows OPEN, on_connect(err) FAILED
 * (and stands in for on_hangup, as for a failed TCP connect). Owner output
 * written before OPEN stays in `out` until then. A server-side handshake
 * has a deadline (the context's handshake_timeout_ms, a wheel timer).
 *
 * Failures record OpenSSL's reason in err, send whatever alert OpenSSL
 * queued with one best-effort non-blocking send(2) (only when nothing is in
 * flight, so the byte order on the wire holds; the peer then reports "bad
 * certificate" instead of a bare reset), and end the connection with
 * -EPROTO (-ETIMEDOUT for the deadline) through the normal paths. A peer
 * that closes before sending a single byte (a TCP health probe) is not a
 * TLS failure: it is an ordinary EOF and counts nowhere.
 *
 * close(flush) of an OPEN connection seals the rest of `out` and queues a
 * close_notify behind it; close without flush sends nothing more.
 *
 * Who frees what: the session (SSL, which owns its BIO; wq; the context
 * reference) belongs to the connection and is freed by loop.c right
 * before on_release (sched__tls_free). A context is freed with its last
 * reference, so a reload may drop its reference while connections live on.
 *
 * Kernel TLS was considered: after the handshake, OpenSSL can hand the
 * keys to the kernel (SSL_OP_ENABLE_KTLS), and plain send/recv then carry
 * records, so the io_uring path would stay zero-transform. It needs the
 * "tls" ULP (CONFIG_TLS): the build and benchmark machine lists only
 * "mptcp" in /proc/sys/net/ipv4/tcp_available_ulp and cannot load modules,
 * so kTLS could be neither used nor tested there, and no untested kTLS
 * code is shipped. Where it is available it would save the user-space
 * AES-GCM pass and one copy per direction; see BENCHMARKS.md for what TLS
 * costs as it is. */
#include "sched/tls.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "common/log.h"
#include "sched/loop-int.h"
#include "sched/loop.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* Plaintext decrypted per SSL_read(): one full record. */
#define TLS_PLAIN_CHUNK 16384
/* Largest slice handed to one SSL_write(). */
#define TLS_WRITE_MAX (1u << 30)

enum sched_tls_state {
    SCHED_TLS_HANDSHAKE = 0, /* handshake under way: input feeds it, owner output waits */
    SCHED_TLS_OPEN = 1,      /* established: records both ways */
    SCHED_TLS_FAILED = 2,    /* failed (err says why, or a silent probe): no more TLS work */
};

struct sched_tls_ctx {
    SSL_CTX *ssl;                  /* owned: OpenSSL's context */
    enum sched_tls_role role;      /* server or client */
    unsigned handshake_timeout_ms; /* server handshake deadline, 0: none */
    struct sched_tls_stats *stats; /* borrowed, may be NULL */
    atomic_uint refs;              /* references: the creator's and one per session */
};

struct sched_tls {
    SSL *ssl;                    /* owned: the session; owns its BIO */
    struct sched_tls_ctx *ctx;   /* owned reference */
    struct sched_conn *conn;     /* borrowed: the connection this belongs to */
    enum sched_tls_state state;  /* see the design block */
    bool connect_pending;        /* client: on_connect waits for the handshake */
    const char *in;              /* borrowed: ciphertext being fed, during sched__tls_recv */
    size_t in_len;               /* bytes left at in */
    uint64_t rx;                 /* ciphertext bytes received */
    struct buf wq;               /* owned: records waiting for `sending` */
    struct sched_timer deadline; /* server: handshake deadline */
    char err[192];               /* why the TLS layer failed the connection, "" if it did not */
    char peer[64];               /* the peer's "ip:port", taken when TLS started ("?": unknown) */
};

/* ---- the BIO: reads the bytes being fed, writes to wq ------------------ */

static BIO_METHOD *tls_bio_method_ptr;
static pthread_once_t tls_bio_once = PTHREAD_ONCE_INIT;

static int tls_bio_read(BIO *b, char *out, int len)
{
    struct sched_tls *t = BIO_get_data(b);
    size_t n;

    BIO_clear_retry_flags(b);
    if (!t || t->in_len == 0 || len <= 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    n = LP_MIN(t->in_len, (size_t)len);
    memcpy(out, t->in, n);
    t->in += n;
    t->in_len -= n;
    return (int)n;
}

static int tls_bio_write(BIO *b, const char *p, int len)
{
    struct sched_tls *t = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (!t || len < 0 || buf_append(&t->wq, p, (size_t)len) < 0)
        return -1;
    return len;
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int tls_bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void tls_bio_method_init(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lockproxy-conn");

    if (!m)
        return;
    if (!BIO_meth_set_write(m, tls_bio_write) || !BIO_meth_set_read(m, tls_bio_read) ||
        !BIO_meth_set_ctrl(m, tls_bio_ctrl) || !BIO_meth_set_create(m, tls_bio_create)) {
        BIO_meth_free(m);
        return;
    }
    tls_bio_method_ptr = m;
}

static BIO_METHOD *tls_bio_method(void)
{
    pthread_once(&tls_bio_once, tls_bio_method_init);
    return tls_bio_method_ptr;
}

/* ---- reasons ------------------------------------------------------------ */

/* OpenSSL's words for the last error of the thread's queue (emptied). */
static void tls_ssl_reason(char *out, size_t n, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;

    if (r)
        snprintf(out, n, "%s", r);
    else if (e)
        snprintf(out, n, "OpenSSL error 0x%lx", e);
    else
        snprintf(out, n, "%s", fallback);
    ERR_clear_error();
}

/* The reason of a failed session call that returned SSL_get_error() code. */
static void tls_session_reason(struct sched_tls *t, int code)
{
    long v = SSL_get_verify_result(t->ssl);
    char why[128];

    tls_ssl_reason(why, sizeof(why), code == SSL_ERROR_SYSCALL ? "I/O error" : "TLS error");
    if (v != X509_V_OK)
        snprintf(t->err, sizeof(t->err), "certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
    else
        snprintf(t->err, sizeof(t->err), "%s", why);
}

/* ---- failure and success ------------------------------------------------ */

/* One non-blocking send of the alert OpenSSL queued, if the socket is
 * idle (else the byte order could break); the connection is ending. */
static void tls_send_alert(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    if (buf_size(&t->wq) > 0 && c->fd >= 0 && !(c->flags & SCHED_CONN_SENDING) &&
        buf_size(&c->sending) == 0)
        (void)send(c->fd, buf_head(&t->wq), buf_size(&t->wq), MSG_NOSIGNAL | MSG_DONTWAIT);
    buf_deinit(&t->wq);
}

/* Ends c for a TLS reason already in t->err. */
static void tls_fail(struct sched_conn *c, int err)
{
    struct sched_tls *t = c->tls;
    /* A TLS 1.3 client's handshake is over before the server has checked
     * its certificate: a refusal then arrives as an alert on the open
     * session, before any data, and counts as the handshake's failure. */
    bool handshake =
        t->state == SCHED_TLS_HANDSHAKE || (t->ctx->role == SCHED_TLS_CLIENT && c->bytes_in == 0);

    t->state = SCHED_TLS_FAILED;
    sched_loop_timer_del(c->loop, &t->deadline);
    if (handshake && t->ctx->stats)
        t->ctx->stats->handshake_failures++;
    tls_send_alert(c);
    if (t->connect_pending && !(c->flags & SCHED_CONN_CLOSING)) {
        t->connect_pending = false;
        sched__conn_connected(c, err); /* on_connect(err) stands in for on_hangup */
        return;
    }
    sched__conn_hangup(c, err);
}

static void tls_established(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    t->state = SCHED_TLS_OPEN;
    sched_loop_timer_del(c->loop, &t->deadline);
    if (t->ctx->stats)
        t->ctx->stats->handshakes++;
    if (buf_size(&c->out) > 0)
        sched_conn_mark_dirty(c);
    if (t->connect_pending && !(c->flags & SCHED_CONN_CLOSING)) {
        t->connect_pending = false;
        c->ops->on_connect(c, 0);
    }
}

static void tls_handshake(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;
    int r = SSL_do_handshake(t->ssl), code;

    if (r == 1) {
        tls_established(c);
        return;
    }
    code = SSL_get_error(t->ssl, r);
    if (code == SSL_ERROR_WANT_READ)
        return;
    tls_session_reason(t, code);
    tls_fail(c, -EPROTO);
}

/* Decrypts until OpenSSL needs more input; plaintext goes the plain way. */
static void tls_read(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;
    char plain[TLS_PLAIN_CHUNK];
    int n, code;

    while (t->state == SCHED_TLS_OPEN && !(c->flags & (SCHED_CONN_CLOSING | SCHED__CONN_EOF))) {
        n = SSL_read(t->ssl, plain, sizeof(plain));
        if (n > 0) {
            sched__conn_data(c, plain, (size_t)n);
            continue;
        }
        code = SSL_get_error(t->ssl, n);
        if (code == SSL_ERROR_WANT_READ)
            return;
        if (code == SSL_ERROR_ZERO_RETURN) { /* close_notify: an orderly EOF */
            ERR_clear_error();
            sched__conn_hangup(c, 0);
            return;
        }
        tls_session_reason(t, code);
        tls_fail(c, -EPROTO);
        return;
    }
}

/* Output OpenSSL produced on its own goes out with this iteration's flush. */
static void tls_kick(struct sched_conn *c)
{
    if (buf_size(&c->tls->wq) > 0)
        sched_conn_mark_dirty(c);
}

static void tls_deadline_cb(struct sched_timer *tm)
{
    struct sched_tls *t = LP_CONTAINER_OF(tm, struct sched_tls, deadline);
    struct sched_conn *c = t->conn;

    if (t->state != SCHED_TLS_HANDSHAKE || (c->flags & (SCHED_CONN_CLOSING | SCHED__CONN_EOF)))
        return;
    snprintf(t->err, sizeof(t->err), "handshake not finished within %u ms",
             t->ctx->handshake_timeout_ms);
    tls_fail(c, -ETIMEDOUT);
}

/* ---- hooks called by loop.c ---------------------------------------------- */

void sched__tls_recv(struct sched_conn *c, const char *p, size_t n)
{
    struct sched_tls *t = c->tls;

    if ((c->flags & (SCHED__CONN_EOF | SCHED__CONN_FINAL)) || t->state == SCHED_TLS_FAILED)
        return;
    t->in = p;
    t->in_len = n;
    t->rx += n;
    ERR_clear_error();
    if (t->state == SCHED_TLS_HANDSHAKE)
        tls_handshake(c);
    tls_read(c);
    t->in = NULL;
    t->in_len = 0;
    if (t->state != SCHED_TLS_FAILED)
        tls_kick(c);
}

/* Seals all of `out` into wq; a failure ends c from the loop. */
static void tls_seal(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;
    int n;

    ERR_clear_error();
    while (buf_size(&c->out) > 0) {
        n = SSL_write(t->ssl, buf_head(&c->out), (int)LP_MIN(buf_size(&c->out), TLS_WRITE_MAX));
        if (n <= 0) {
            tls_session_reason(t, SSL_get_error(t->ssl, n));
            t->state = SCHED_TLS_FAILED;
            buf_reset(&c->out);
            buf_deinit(&t->wq);
            sched__conn_fail_later(c, -EPROTO);
            return;
        }
        buf_consume(&c->out, (size_t)n);
    }
    buf_trim(&c->out, 0); /* an idle connection keeps no output storage */
}

bool sched__tls_refill(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    if (t->state == SCHED_TLS_OPEN && buf_size(&c->out) > 0)
        tls_seal(c);
    if (buf_size(&t->wq) == 0)
        return false;
    buf_swap(&t->wq, &c->sending);
    return true;
}

bool sched__tls_pending(const struct sched_conn *c)
{
    return buf_size(&c->tls->wq) > 0;
}

void sched__tls_connected(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    ERR_clear_error();
    tls_handshake(c);
    if (t->state != SCHED_TLS_FAILED)
        tls_kick(c);
}

bool sched__tls_hangup(struct sched_conn *c, int err)
{
    struct sched_tls *t = c->tls;

    if (t->state != SCHED_TLS_HANDSHAKE || (c->flags & SCHED_CONN_CLOSING))
        return false;
    if (err == 0 && t->rx == 0 && !t->connect_pending) {
        t->state = SCHED_TLS_FAILED; /* a probe that never spoke: a plain EOF */
        sched_loop_timer_del(c->loop, &t->deadline);
        return false;
    }
    if (err < 0)
        snprintf(t->err, sizeof(t->err), "%s during the handshake", strerror(-err));
    else
        snprintf(t->err, sizeof(t->err), "peer closed the connection during the handshake");
    tls_fail(c, err < 0 ? err : -ECONNRESET);
    return true;
}

void sched__tls_close_notify(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    if (t->state != SCHED_TLS_OPEN)
        return;
    tls_seal(c);
    if (t->state == SCHED_TLS_OPEN) {
        ERR_clear_error();
        (void)SSL_shutdown(t->ssl); /* queues close_notify in wq */
        ERR_clear_error();
    }
}

void sched__tls_free(struct sched_conn *c)
{
    struct sched_tls *t = c->tls;

    if (!t)
        return;
    sched_loop_timer_del(c->loop, &t->deadline);
    SSL_free(t->ssl);
    sched_tls_ctx_put(t->ctx);
    buf_deinit(&t->wq);
    free(t);
    c->tls = NULL;
}

/* ---- sessions ------------------------------------------------------------ */

/* The peer's address, kept for failure reports: once the peer has reset
 * the connection, getpeername() no longer knows it. */
static void tls_note_peer(struct sched_tls *t, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN];

    snprintf(t->peer, sizeof(t->peer), "?");
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

        if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)))
            snprintf(t->peer, sizeof(t->peer), "%s:%u", ip, (unsigned)ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

        if (inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip)))
            snprintf(t->peer, sizeof(t->peer), "[%s]:%u", ip, (unsigned)ntohs(in6->sin6_port));
    }
}

static bool is_ip_literal(const char *s)
{
    unsigned char a[16];

    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* The name the server's certificate must carry; also SNI for DNS names. */
static int tls_set_peer_name(SSL *ssl, const char *name)
{
    if (!name || !name[0])
        return 0;
    if (is_ip_literal(name))
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -EINVAL;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl, name) != 1 || SSL_set_tlsext_host_name(ssl, name) != 1)
        return -EINVAL;
    return 0;
}

static int tls_session_new(struct sched_tls *t, const char *server_name)
{
    BIO *bio;

    t->ssl = SSL_new(t->ctx->ssl);
    if (!t->ssl)
        return -ENOMEM;
    bio = tls_bio_method() ? BIO_new(tls_bio_method()) : NULL;
    if (!bio)
        return -ENOMEM;
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio);
    if (t->ctx->role == SCHED_TLS_SERVER) {
        SSL_set_accept_state(t->ssl);
        return 0;
    }
    SSL_set_connect_state(t->ssl);
    return tls_set_peer_name(t->ssl, server_name);
}

int sched_conn_start_tls(struct sched_conn *c, struct sched_tls_ctx *ctx, const char *server_name)
{
    bool client = ctx && ctx->role == SCHED_TLS_CLIENT;
    struct sched_tls *t;
    int rc;

    if (!ctx || c->tls || (server_name && !client))
        return -EINVAL;
    if (client && (!(c->flags & SCHED_CONN_CONNECTING) || !c->ops->on_connect))
        return -EINVAL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->ctx = sched_tls_ctx_get(ctx);
    t->conn = c;
    t->state = SCHED_TLS_HANDSHAKE;
    t->connect_pending = client;
    buf_init(&t->wq);
    sched_timer_init(&t->deadline, tls_deadline_cb);
    ERR_clear_error();
    rc = tls_session_new(t, server_name);
    if (rc < 0) {
        ERR_clear_error();
        SSL_free(t->ssl);
        sched_tls_ctx_put(t->ctx);
        free(t);
        return rc;
    }
    c->tls = t;
    if (!client)
        tls_note_peer(t, c->fd);
    if (!client && ctx->handshake_timeout_ms > 0)
        sched_loop_timer_in(c->loop, &t->deadline, ctx->handshake_timeout_ms);
    return 0;
}

bool sched_conn_tls_established(const struct sched_conn *c)
{
    return c->tls && c->tls->state == SCHED_TLS_OPEN;
}

const char *sched_conn_tls_error(const struct sched_conn *c)
{
    return c->tls && c->tls->err[0] ? c->tls->err : NULL;
}

const char *sched_conn_tls_peer(const struct sched_conn *c)
{
    return c->tls && c->tls->peer[0] ? c->tls->peer : "?";
}

const char *sched_conn_tls_cipher(const struct sched_conn *c, char *buf, size_t n)
{
    if (!sched_conn_tls_established(c))
        return NULL;
    snprintf(buf, n, "%s %s", SSL_get_version(c->tls->ssl), SSL_get_cipher_name(c->tls->ssl));
    return buf;
}

/* ---- contexts ------------------------------------------------------------ */

/* "cannot read <what> <path>: <errno text>" unless path is readable, so a
 * typo is not reported in OpenSSL's words ("no start line"). */
static int tls_check_file(const char *what, const char *path, char *err, size_t n)
{
    FILE *f = fopen(path, "r");

    if (!f) {
        snprintf(err, n, "cannot read %s %s: %s", what, path, strerror(errno));
        return -EINVAL;
    }
    fclose(f);
    return 0;
}

static int tls_load_fail(const char *what, const char *path, char *err, size_t n)
{
    char why[128];

    tls_ssl_reason(why, sizeof(why), "unknown error");
    snprintf(err, n, "%s %s: %s", what, path, why);
    return -EINVAL;
}

/* Warns about a certificate that is expired or not yet valid: it is still
 * loaded (a reload may be on its way), but every peer will refuse it. */
static void tls_warn_validity(SSL_CTX *s, const char *path)
{
    X509 *x = SSL_CTX_get0_certificate(s);

    if (!x)
        return;
    if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
        log_msg(LOG_LVL_WARN, "TLS certificate %s has expired; peers will refuse it", path);
    else if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0)
        log_msg(LOG_LVL_WARN, "TLS certificate %s is not valid yet; peers will refuse it", path);
}

static int tls_load_cert(SSL_CTX *s, const struct sched_tls_opts *o, char *err, size_t n)
{
    const char *key = o->key_file ? o->key_file : o->cert_file;
    int rc;

    if ((rc = tls_check_file("certificate file", o->cert_file, err, n)) < 0 ||
        (rc = tls_check_file("key file", key, err, n)) < 0)
        return rc;
    if (SSL_CTX_use_certificate_chain_file(s, o->cert_file) != 1)
        return tls_load_fail("certificate file", o->cert_file, err, n);
    if (SSL_CTX_use_PrivateKey_file(s, key, SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
        return tls_load_fail("key file", key, err, n);
    if (ERR_peek_last_error() != 0 || SSL_CTX_check_private_key(s) != 1) {
        ERR_clear_error();
        snprintf(err, n, "key file %s does not match certificate file %s", key, o->cert_file);
        return -EINVAL;
    }
    tls_warn_validity(s, o->cert_file);
    return 0;
}

/* The CAs peers are checked against; a server also names them in its
 * certificate request, so clients pick a matching certificate. */
static int tls_load_ca(SSL_CTX *s, const struct sched_tls_opts *o, char *err, size_t n)
{
    STACK_OF(X509_NAME) * names;
    int rc;

    if (!o->ca_file) {
        if (o->role == SCHED_TLS_CLIENT && SSL_CTX_set_default_verify_paths(s) == 1)
            return 0;
        if (o->role == SCHED_TLS_CLIENT)
            return tls_load_fail("system CA store", "(default paths)", err, n);
        if (o->verify != SCHED_TLS_VERIFY_NONE) {
            snprintf(err, n, "verifying client certificates needs a CA file");
            return -EINVAL;
        }
        return 0;
    }
    if ((rc = tls_check_file("CA file", o->ca_file, err, n)) < 0)
        return rc;
    if (SSL_CTX_load_verify_locations(s, o->ca_file, NULL) != 1)
        return tls_load_fail("CA file", o->ca_file, err, n);
    if (o->role == SCHED_TLS_SERVER && o->verify != SCHED_TLS_VERIFY_NONE) {
        names = SSL_load_client_CA_file(o->ca_file);
        if (!names)
            return tls_load_fail("CA file", o->ca_file, err, n);
        SSL_CTX_set_client_CA_list(s, names);
    }
    return 0;
}

static int tls_verify_mode(const struct sched_tls_opts *o)
{
    switch (o->verify) {
    case SCHED_TLS_VERIFY_NONE:
        return SSL_VERIFY_NONE;
    case SCHED_TLS_VERIFY_OPTIONAL:
        return SSL_VERIFY_PEER;
    case SCHED_TLS_VERIFY_REQUIRED:
        return o->role == SCHED_TLS_SERVER ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                                           : SSL_VERIFY_PEER;
    }
    return SSL_VERIFY_PEER;
}

/* Everything but the files: protocol floor, modes, verification. */
static void tls_ctx_setup(SSL_CTX *s, const struct sched_tls_opts *o)
{
    static const unsigned char sid_ctx[] = "lockproxy";

    SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
    /* Idle sessions give their 16 KiB read and write buffers back: 10k idle
     * TLS clients would otherwise pin a few hundred MiB. */
    SSL_CTX_set_mode(s, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(s, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_verify(s, tls_verify_mode(o), NULL);
    if (o->role == SCHED_TLS_SERVER)
        SSL_CTX_set_session_id_context(s, sid_ctx, sizeof(sid_ctx) - 1);
}

int sched_tls_ctx_create(struct sched_tls_ctx **out, const struct sched_tls_opts *o, char *err,
                         size_t errlen)
{
    struct sched_tls_ctx *ctx;
    int rc = -EINVAL;

    *out = NULL;
    if (o->role == SCHED_TLS_SERVER && !o->cert_file) {
        snprintf(err, errlen, "a TLS server needs a certificate file");
        return -EINVAL;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return -ENOMEM;
    ERR_clear_error();
    ctx->ssl = SSL_CTX_new(o->role == SCHED_TLS_SERVER ? TLS_server_method() : TLS_client_method());
    if (!ctx->ssl) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto err_free;
    }
    tls_ctx_setup(ctx->ssl, o);
    if (o->cert_file && (rc = tls_load_cert(ctx->ssl, o, err, errlen)) < 0)
        goto err_ctx;
    if ((rc = tls_load_ca(ctx->ssl, o, err, errlen)) < 0)
        goto err_ctx;
    ctx->role = o->role;
    ctx->handshake_timeout_ms = o->handshake_timeout_ms;
    ctx->stats = o->stats;
    atomic_init(&ctx->refs, 1);
    *out = ctx;
    return 0;
err_ctx:
    SSL_CTX_free(ctx->ssl);
err_free:
    ERR_clear_error();
    free(ctx);
    return rc;
}

struct sched_tls_ctx *sched_tls_ctx_get(struct sched_tls_ctx *ctx)
{
    atomic_fetch_add(&ctx->refs, 1);
    return ctx;
}

void sched_tls_ctx_put(struct sched_tls_ctx *ctx)
{
    if (!ctx || atomic_fetch_sub(&ctx->refs, 1) != 1)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}
