/* TLS helpers for the integration tests: a blocking RESP client over
 * OpenSSL (Debian's hiredis 0.14 has no hiredis_ssl), a TLS-only
 * redis-server (--port 0 --tls-port P), and the throw-away certificates of
 * tls_certs.h made once per test process in its temp dir. */
#ifndef LP_TESTS_INTEGRATION_TLS_UTIL_H
#define LP_TESTS_INTEGRATION_TLS_UTIL_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "proxy_util.h"
#include "tls_certs.h"

/* How a test client connects. */
struct tu_opts {
    const char *ca;   /* CA file the server must chain to, NULL: no verification */
    const char *cert; /* client certificate, or NULL */
    const char *key;  /* its key */
    const char *name; /* server name to verify and send as SNI, or NULL */
};

struct tu_conn;

/* The test certificates (made on first use). */
const struct tc_certs *tu_certs(void);

/* Connects to 127.0.0.1:port and completes the handshake (10 s bound).
 * Returns the connection, or NULL with OpenSSL's reason in err. */
struct tu_conn *tu_connect(int port, const struct tu_opts *o, char *err, size_t n);

/* Sends one command (hiredis format) and waits up to 10 s for its reply.
 * Returns the reply (caller frees), or NULL when the connection failed,
 * with the reason in tu_error(). */
redisReply *tu_cmd(struct tu_conn *c, const char *fmt, ...);

/* Sends a command without waiting. Returns 0 or -1. */
int tu_send(struct tu_conn *c, const char *fmt, ...);

/* The next reply within ms, or NULL: *closed tells a failed connection
 * (reason in tu_error()) from a reply that did not come in time. */
redisReply *tu_recv(struct tu_conn *c, int ms, bool *closed);

/* Why the connection failed ("" while it has not). */
const char *tu_error(const struct tu_conn *c);

/* Common name of the server's certificate. */
void tu_peer_cn(const struct tu_conn *c, char *buf, size_t n);

/* The socket, for writing bytes under the session. */
int tu_fd(const struct tu_conn *c);

void tu_close(struct tu_conn *c);

/* Connects, sends PING and expects PONG: true, or false with the reason
 * (from the handshake or the first read) in err. */
bool tu_ping(int port, const struct tu_opts *o, char *err, size_t n);

/* A TLS-only redis-server. */
struct tu_redis {
    pid_t pid;             /* 0 when not running */
    int port;              /* its --tls-port */
    char dir[PU_PATH_MAX]; /* its --dir */
    char log[PU_PATH_MAX]; /* its output */
};

/* Starts redis-server --port 0 --tls-port P with cert (and the test CA for
 * clients) and tls-auth-clients auth ("no", "optional", "yes"), and waits
 * until it answers PING over TLS. Skips the test when redis-server has no
 * TLS. */
void tu_redis_start(struct tu_redis *r, const struct tc_pair *cert, const char *auth);

void tu_redis_stop(struct tu_redis *r);

/* A direct TLS client of r (with the test client certificate). */
struct tu_conn *tu_redis_client(const struct tu_redis *r);

/* True when the file at path holds needle (e.g. a proxy log line). */
bool tu_file_has(const char *path, const char *needle);

#endif
