/* TLS of the proxy: the contexts built from the options (tls:// listeners,
 * rediss:// upstream), their reload on SIGHUP, the INFO section and
 * metrics, and the rate-limited log of client handshake failures. The
 * sessions themselves are sched/tls.c's. */
#ifndef LP_PROXY_TLS_H
#define LP_PROXY_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "sched/tls.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_opts;
struct px_server;
struct sched_conn;

/* The contexts of one configuration. */
struct px_tls {
    struct sched_tls_ctx *server;   /* owned reference: tls:// listeners', NULL when none */
    struct sched_tls_ctx *upstream; /* owned reference: rediss:// upstream's, NULL when plain */
};

/* What the server keeps across reloads. */
struct px_tls_state {
    struct px_tls cur;               /* the contexts in use for new connections */
    struct sched_tls_stats clients;  /* handshakes on the tls:// listeners */
    struct sched_tls_stats upstream; /* handshakes with the upstream */
    uint64_t log_ms;                 /* when a client handshake failure was last logged */
    uint64_t log_quiet;              /* failures not logged since then */
};

/* Builds, from o's TLS settings, the listeners' context (when server) and
 * the upstream's (when upstream), reading every file now and counting
 * into srv's stats. Returns 0, or -EINVAL / -ENOMEM with the reason in
 * msg (then out holds nothing). */
int px_tls_build(struct px_server *srv, const struct px_opts *o, bool server, bool upstream,
                 struct px_tls *out, char *msg, size_t n);

/* True when o has a tls:// listener. */
bool px_tls_wanted(const struct px_opts *o);

/* Makes t the contexts of new connections (listeners and the pool; live
 * connections keep theirs) and takes its references. */
void px_tls_install(struct px_server *srv, struct px_tls *t);

/* Drops t's references. */
void px_tls_release(struct px_tls *t);

/* A client connection whose TLS layer failed it: logs the peer address
 * and OpenSSL's reason, at most one line a second (the count of lines
 * left out goes with the next). */
void px_tls_log_failure(struct px_server *srv, const struct sched_conn *c);

/* INFO section "tls". */
void px_tls_info(struct px_server *srv, struct buf *o);

/* Prometheus lines. */
void px_tls_metrics(struct px_server *srv, struct buf *o);

#ifdef __cplusplus
}
#endif

#endif
