/* TLS of the proxy; see tls.h. A reload builds a whole new set of contexts
 * from the new options before anything is applied (config.c), so a bad
 * certificate file refuses the reload and the running contexts stay. */
#include "proxy/tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "pool/pool.h"
#include "proxy/opts.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define TLS_LOG_EVERY_MS 1000u /* at most one client handshake failure line a second */

static const char *opt_path(const char *s)
{
    return s[0] ? s : NULL;
}

bool px_tls_wanted(const struct px_opts *o)
{
    unsigned i;

    for (i = 0; i < o->nlisten; i++) {
        if (o->listen[i].tls)
            return true;
    }
    return false;
}

static int build_one(struct sched_tls_ctx **out, const struct sched_tls_opts *so, const char *what,
                     char *msg, size_t n)
{
    char why[384] = "";
    int rc = sched_tls_ctx_create(out, so, why, sizeof(why));

    if (rc < 0)
        snprintf(msg, n, "TLS (%s): %s", what, why);
    return rc;
}

int px_tls_build(struct px_server *srv, const struct px_opts *o, bool server_side,
                 bool upstream_side, struct px_tls *out, char *msg, size_t n)
{
    struct sched_tls_opts server = {
        .role = SCHED_TLS_SERVER,
        .cert_file = o->tls_cert_file,
        .key_file = opt_path(o->tls_key_file),
        .ca_file = opt_path(o->tls_ca_cert_file),
        .verify = (enum sched_tls_verify)o->tls_auth_clients,
        .handshake_timeout_ms = o->tls_handshake_timeout_ms,
        .stats = &srv->tls.clients,
    };
    struct sched_tls_opts upstream = {
        .role = SCHED_TLS_CLIENT,
        .cert_file = opt_path(o->up_tls_cert_file),
        .key_file = opt_path(o->up_tls_key_file),
        .ca_file = opt_path(o->up_tls_ca_cert_file),
        .verify = SCHED_TLS_VERIFY_REQUIRED,
        .stats = &srv->tls.upstream,
    };
    int rc;

    memset(out, 0, sizeof(*out));
    if (server_side) {
        rc = build_one(&out->server, &server, "listeners", msg, n);
        if (rc < 0)
            return rc;
    }
    if (upstream_side) {
        rc = build_one(&out->upstream, &upstream, "upstream", msg, n);
        if (rc < 0) {
            px_tls_release(out);
            return rc;
        }
    }
    return 0;
}

void px_tls_release(struct px_tls *t)
{
    sched_tls_ctx_put(t->server);
    sched_tls_ctx_put(t->upstream);
    t->server = NULL;
    t->upstream = NULL;
}

void px_tls_install(struct px_server *srv, struct px_tls *t)
{
    int rc;

    px_tls_release(&srv->tls.cur);
    srv->tls.cur = *t;
    memset(t, 0, sizeof(*t));
    rc = pool_set_tls(srv->pool, srv->tls.cur.upstream, srv->opts.up_tls_server_name);
    if (rc < 0)
        log_msg(LOG_LVL_ERROR, "upstream TLS settings not applied: %s", strerror(-rc));
}

void px_tls_log_failure(struct px_server *srv, const struct sched_conn *c)
{
    struct px_tls_state *t = &srv->tls;
    uint64_t now = sched_loop_now_ms(srv->loop);
    const char *why = sched_conn_tls_error(c);
    const char *peer = sched_conn_tls_peer(c);

    if (!why)
        return;
    if (t->log_ms != 0 && now - t->log_ms < TLS_LOG_EVERY_MS) {
        t->log_quiet++;
        return;
    }
    if (t->log_quiet > 0)
        log_msg(LOG_LVL_WARN,
                "TLS client %s: %s (and %llu more TLS client failures since the last "
                "report)",
                peer, why, (unsigned long long)t->log_quiet);
    else
        log_msg(LOG_LVL_WARN, "TLS client %s: %s", peer, why);
    t->log_ms = now;
    t->log_quiet = 0;
}

void px_tls_info(struct px_server *srv, struct buf *o)
{
    static const char *const auth[] = {"no", "optional", "yes"};
    const struct px_tls_state *t = &srv->tls;

    buf_appendf(o,
                "# TLS\r\ntls_listeners:%d\r\ntls_auth_clients:%s\r\ntls_handshakes:%llu\r\n"
                "tls_handshake_failures:%llu\r\nupstream_tls:%d\r\n"
                "upstream_tls_handshakes:%llu\r\nupstream_tls_handshake_failures:%llu\r\n\r\n",
                t->cur.server ? 1 : 0, auth[srv->opts.tls_auth_clients % 3],
                (unsigned long long)t->clients.handshakes,
                (unsigned long long)t->clients.handshake_failures, t->cur.upstream ? 1 : 0,
                (unsigned long long)t->upstream.handshakes,
                (unsigned long long)t->upstream.handshake_failures);
}

void px_tls_metrics(struct px_server *srv, struct buf *o)
{
    const struct px_tls_state *t = &srv->tls;

    buf_appendf(o,
                "# HELP lockproxy_tls_handshakes_total TLS handshakes completed (side client: "
                "the tls:// listeners; upstream: rediss://).\n"
                "# TYPE lockproxy_tls_handshakes_total counter\n"
                "lockproxy_tls_handshakes_total{side=\"client\"} %llu\n"
                "lockproxy_tls_handshakes_total{side=\"upstream\"} %llu\n"
                "# HELP lockproxy_tls_handshake_failures_total TLS handshakes failed or timed "
                "out.\n"
                "# TYPE lockproxy_tls_handshake_failures_total counter\n"
                "lockproxy_tls_handshake_failures_total{side=\"client\"} %llu\n"
                "lockproxy_tls_handshake_failures_total{side=\"upstream\"} %llu\n",
                (unsigned long long)t->clients.handshakes,
                (unsigned long long)t->upstream.handshakes,
                (unsigned long long)t->clients.handshake_failures,
                (unsigned long long)t->upstream.handshake_failures);
}
