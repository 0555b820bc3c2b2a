/* TLS test helpers; see tls_util.h. */
#include "tls_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define TU_TIMEOUT_MS 10000
#define REDIS_BIN     "/usr/bin/redis-server"

struct tu_conn {
    int fd;          /* owned: the socket */
    SSL_CTX *ctx;    /* owned */
    SSL *ssl;        /* owned */
    redisReader *rd; /* owned: reply parser */
    char err[256];   /* why it failed, "" while it has not */
};

static struct tc_certs certs;
static bool certs_made;

const struct tc_certs *tu_certs(void)
{
    char dir[PU_PATH_MAX];

    if (certs_made)
        return &certs;
    snprintf(dir, sizeof(dir), "%s/certs", pu_tmpdir());
    mkdir(dir, 0700);
    if (tc_make(dir, &certs) < 0)
        TEST_FAIL("cannot make the test certificates");
    certs_made = true;
    return &certs;
}

/* OpenSSL's words for the last error (queue emptied), or fallback. */
static void ssl_reason(char *out, size_t n, const SSL *ssl, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

    if (v != X509_V_OK)
        snprintf(out, n, "certificate verify failed: %s", X509_verify_cert_error_string(v));
    else if (e && ERR_reason_error_string(e))
        snprintf(out, n, "%s", ERR_reason_error_string(e));
    else
        snprintf(out, n, "%s", fallback);
    ERR_clear_error();
}

static int tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {TU_TIMEOUT_MS / 1000, 0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static SSL_CTX *client_ctx(const struct tu_opts *o, char *err, size_t n)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (!ctx)
        return NULL;
    SSL_CTX_set_verify(ctx, o->ca ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if ((o->ca && SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1) ||
        (o->cert && SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) ||
        (o->key && SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) != 1)) {
        ssl_reason(err, n, NULL, "cannot load the client files");
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void tu_close(struct tu_conn *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    if (c->rd)
        redisReaderFree(c->rd);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

struct tu_conn *tu_connect(int port, const struct tu_opts *o, char *err, size_t n)
{
    struct tu_conn *c = calloc(1, sizeof(*c));

    if (!c)
        TEST_FAIL("out of memory");
    c->rd = redisReaderCreate();
    c->fd = tcp_connect(port);
    if (c->fd < 0) {
        snprintf(err, n, "connect: %s", strerror(errno));
        goto fail;
    }
    c->ctx = client_ctx(o, err, n);
    c->ssl = c->ctx ? SSL_new(c->ctx) : NULL;
    if (!c->ssl)
        goto fail;
    if (o->name) {
        SSL_set_tlsext_host_name(c->ssl, o->name);
        SSL_set1_host(c->ssl, o->name);
    }
    SSL_set_fd(c->ssl, c->fd);
    ERR_clear_error();
    if (SSL_connect(c->ssl) != 1) {
        ssl_reason(err, n, c->ssl, "handshake failed (connection closed)");
        goto fail;
    }
    return c;
fail:
    tu_close(c);
    return NULL;
}

const char *tu_error(const struct tu_conn *c)
{
    return c->err;
}

int tu_fd(const struct tu_conn *c)
{
    return c->fd;
}

void tu_peer_cn(const struct tu_conn *c, char *buf, size_t n)
{
    X509 *x = SSL_get1_peer_certificate(c->ssl);

    buf[0] = '\0';
    if (!x)
        return;
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)n);
    X509_free(x);
}

static int vsend(struct tu_conn *c, const char *fmt, va_list ap)
{
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, fmt, ap), w;

    if (len < 0)
        TEST_FAIL("cannot format \"%s\"", fmt);
    ERR_clear_error();
    w = SSL_write(c->ssl, cmd, len);
    free(cmd);
    if (w != len) {
        ssl_reason(c->err, sizeof(c->err), NULL, "write failed");
        return -1;
    }
    return 0;
}

int tu_send(struct tu_conn *c, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vsend(c, fmt, ap);
    va_end(ap);
    return rc;
}

redisReply *tu_recv(struct tu_conn *c, int ms, bool *closed)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    void *r = NULL;
    char buf[16384];
    int n, code;

    *closed = false;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (;;) {
        if (redisReaderGetReply(c->rd, &r) != REDIS_OK) {
            snprintf(c->err, sizeof(c->err), "protocol error in reply");
            *closed = true;
            return NULL;
        }
        if (r)
            return r;
        ERR_clear_error();
        n = SSL_read(c->ssl, buf, sizeof(buf));
        if (n > 0) {
            redisReaderFeed(c->rd, buf, (size_t)n);
            continue;
        }
        code = SSL_get_error(c->ssl, n);
        if (code == SSL_ERROR_WANT_READ ||
            (code == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))) {
            ERR_clear_error();
            return NULL;
        }
        ssl_reason(c->err, sizeof(c->err), NULL,
                   code == SSL_ERROR_ZERO_RETURN ? "closed by the server (close_notify)"
                                                 : "connection closed");
        *closed = true;
        return NULL;
    }
}

redisReply *tu_cmd(struct tu_conn *c, const char *fmt, ...)
{
    va_list ap;
    bool closed;
    redisReply *r;
    int rc;

    va_start(ap, fmt);
    rc = vsend(c, fmt, ap);
    va_end(ap);
    if (rc < 0)
        return NULL;
    r = tu_recv(c, TU_TIMEOUT_MS, &closed);
    if (!r && !closed)
        snprintf(c->err, sizeof(c->err), "no reply within %d ms", TU_TIMEOUT_MS);
    return r;
}

bool tu_ping(int port, const struct tu_opts *o, char *err, size_t n)
{
    struct tu_conn *c = tu_connect(port, o, err, n);
    redisReply *r;
    bool ok;

    if (!c)
        return false;
    r = tu_cmd(c, "PING");
    ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    if (!r)
        snprintf(err, n, "%s", tu_error(c));
    else if (!ok)
        snprintf(err, n, "unexpected reply to PING (type %d)", r->type);
    if (r)
        freeReplyObject(r);
    tu_close(c);
    return ok;
}

/* ---- TLS-only redis ------------------------------------------------------ */

void tu_redis_start(struct tu_redis *r, const struct tc_pair *cert, const char *auth)
{
    const struct tc_certs *c = tu_certs();
    const struct tu_opts ready = {.ca = NULL, .cert = c->client.cert, .key = c->client.key};
    char port[16], err[256] = "";
    long long deadline;

    if (access(REDIS_BIN, X_OK) != 0)
        TEST_SKIP("%s not found", REDIS_BIN);
    r->port = pu_free_port();
    snprintf(port, sizeof(port), "%d", r->port);
    snprintf(r->dir, sizeof(r->dir), "%s/redis-tls-%d", pu_tmpdir(), r->port);
    mkdir(r->dir, 0700);
    snprintf(r->log, sizeof(r->log), "%s/redis-tls-%d.log", pu_tmpdir(), r->port);
    {
        const char *argv[] = {REDIS_BIN,   "--port",
                              "0",         "--tls-port",
                              port,        "--bind",
                              "127.0.0.1", "--tls-cert-file",
                              cert->cert,  "--tls-key-file",
                              cert->key,   "--tls-ca-cert-file",
                              c->ca.cert,  "--tls-auth-clients",
                              auth,        "--save",
                              "",          "--appendonly",
                              "no",        "--dir",
                              r->dir,      "--daemonize",
                              "no",        NULL};

        r->pid = pu_spawn(argv, r->log);
    }
    deadline = pu_now_ms() + 10000;
    while (!tu_ping(r->port, &ready, err, sizeof(err))) {
        if (tu_file_has(r->log, "TLS") && tu_file_has(r->log, "not supported"))
            TEST_SKIP("redis-server was built without TLS");
        if (pu_now_ms() > deadline)
            TEST_FAIL("TLS redis-server on %d not ready: %s", r->port, err);
        pu_sleep_ms(20);
    }
}

void tu_redis_stop(struct tu_redis *r)
{
    pu_kill(r->pid);
    r->pid = 0;
}

struct tu_conn *tu_redis_client(const struct tu_redis *r)
{
    const struct tc_certs *c = tu_certs();
    const struct tu_opts o = {.ca = NULL, .cert = c->client.cert, .key = c->client.key};
    char err[256];
    struct tu_conn *conn = tu_connect(r->port, &o, err, sizeof(err));

    if (!conn)
        TEST_FAIL("cannot connect to the TLS redis: %s", err);
    return conn;
}

bool tu_file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long size;
    size_t n = 0;
    bool found = false;

    if (!f)
        return false;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)size + 1)) != NULL) {
        n = fread(buf, 1, (size_t)size, f);
        buf[n] = '\0';
        found = strstr(buf, needle) != NULL;
    }
    free(buf);
    fclose(f);
    return found;
}
