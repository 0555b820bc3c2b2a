/* TLS for loop connections (OpenSSL, user space).
 *
 * A TLS connection is an ordinary sched_conn with a TLS session attached:
 * the backends move ciphertext exactly as they move plain bytes (io_uring
 * multishot recv and one send in flight, or epoll), and the session is a
 * transform between the socket's bytes and the connection's input and
 * output. The owner sees plaintext in on_data and writes plaintext with
 * sched_conn_write()/sched_conn_wbuf(), as for a plain connection.
 *
 * Use: build a context once (sched_tls_ctx_create: certificates, CA,
 * verification), then call sched_conn_start_tls() right after
 * sched_conn_attach() (server side: the peer's ClientHello is answered) or
 * right after sched_conn_connect() (client side: the handshake starts when
 * the TCP connection is up, and on_connect reports the end of the
 * handshake, not of the TCP connect). Contexts are reference counted, so a
 * reload can swap in a new one while live connections keep theirs.
 *
 * Failures: a handshake that fails, or a record that does not decrypt,
 * ends the connection with -EPROTO (a server-side handshake that outlives
 * the context's handshake timeout with -ETIMEDOUT) through on_hangup, or
 * through on_connect while a client handshake was pending;
 * sched_conn_tls_error() then says why, in OpenSSL's words ("certificate
 * verify failed: certificate has expired").
 *
 * Kernel TLS (handing the keys to the kernel after the handshake so that
 * plain send/recv carry the records) is not used: it needs the kernel's
 * "tls" ULP, absent from the kernels this was built and measured on (see
 * tls.c and the README's TLS section). */
#ifndef LP_SCHED_TLS_H
#define LP_SCHED_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/conn-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_tls_ctx;

enum sched_tls_role {
    SCHED_TLS_SERVER = 0, /* accepted connections: presents cert_file */
    SCHED_TLS_CLIENT = 1, /* outgoing connections: verifies the server */
};

/* Peer verification (Redis's tls-auth-clients for a server). */
enum sched_tls_verify {
    SCHED_TLS_VERIFY_NONE = 0,     /* server: no client certificate is asked for */
    SCHED_TLS_VERIFY_OPTIONAL = 1, /* server: one is asked for and checked if sent */
    SCHED_TLS_VERIFY_REQUIRED = 2, /* server: one signed by the CA is required;
                                      client: the server's chain and name must verify */
};

/* Handshake counters, kept by the owner so they outlive a context swap.
 * Counted for every connection of the contexts that point at them. */
struct sched_tls_stats {
    uint64_t handshakes;         /* handshakes completed */
    uint64_t handshake_failures; /* handshakes failed or timed out */
};

struct sched_tls_opts {
    enum sched_tls_role role;      /* server or client contexts */
    const char *cert_file;         /* PEM chain: required for a server, optional client cert */
    const char *key_file;          /* PEM private key of cert_file (NULL: in cert_file) */
    const char *ca_file;           /* PEM CAs for the peer; NULL: a client uses the system store */
    enum sched_tls_verify verify;  /* what is checked of the peer */
    unsigned handshake_timeout_ms; /* server: close a handshake not done by then; 0: none */
    struct sched_tls_stats *stats; /* borrowed, may be NULL: counters to bump */
};

/* Builds a context: loads and checks the files (the key must match the
 * certificate; an expired certificate is loaded, with a warning logged).
 * TLS 1.2 and 1.3 only. Returns 0 and *out (one reference), -EINVAL with
 * the reason (file and OpenSSL's words) in err, or -ENOMEM. */
int sched_tls_ctx_create(struct sched_tls_ctx **out, const struct sched_tls_opts *o, char *err,
                         size_t errlen);

/* Takes / drops a reference. Connections hold one each; put(NULL) is a no-op. */
struct sched_tls_ctx *sched_tls_ctx_get(struct sched_tls_ctx *ctx);
void sched_tls_ctx_put(struct sched_tls_ctx *ctx);

/* Makes c a TLS connection of ctx; call right after sched_conn_attach()
 * (server ctx) or sched_conn_connect() (client ctx), before the loop runs
 * again. server_name (client only, may be NULL) is the name the server's
 * certificate must carry: a DNS name (also sent as SNI) or an IP address
 * literal (checked against the certificate's IP addresses; no SNI).
 * Returns 0, -EINVAL (role mismatch, already TLS) or -ENOMEM; on failure c
 * is unchanged and the caller closes it. */
int sched_conn_start_tls(struct sched_conn *c, struct sched_tls_ctx *ctx, const char *server_name);

/* True when c carries TLS. */
static inline bool sched_conn_is_tls(const struct sched_conn *c)
{
    return c->tls != NULL;
}

/* True once c's handshake completed (false for a plain connection). */
bool sched_conn_tls_established(const struct sched_conn *c);

/* Why the TLS layer failed c ("certificate verify failed: certificate has
 * expired", "handshake not finished within 10000 ms", "peer closed the
 * connection during the handshake"), or NULL when it did not (a plain
 * connection, or a failure of the socket itself). Valid until on_release. */
const char *sched_conn_tls_error(const struct sched_conn *c);

/* The peer's address of an accepted TLS connection, "ip:port" or
 * "[ip6]:port", as it was when TLS started (still known after a reset);
 * "?" when unknown. */
const char *sched_conn_tls_peer(const struct sched_conn *c);

/* The negotiated protocol and cipher ("TLSv1.3 TLS_AES_256_GCM_SHA384"),
 * or NULL before the handshake completed. */
const char *sched_conn_tls_cipher(const struct sched_conn *c, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
