/* The --metrics HTTP endpoint: a tiny HTTP/1.1 server on the proxy's own
 * event loop, serving
 *   GET /metrics  Prometheus text (px_metrics_write)
 *   GET /healthz  200 "ok" while Redis is reachable, else 503 (readiness)
 *   GET /livez    200 "ok" while the event loop runs (liveness)
 * One request per connection, answered then closed. */
#ifndef LP_PROXY_HTTP_H
#define LP_PROXY_HTTP_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* Starts listening on srv->opts.metrics when set (srv->http stays NULL
 * otherwise). Returns 0 or -errno (a message has been logged). */
int px_http_start(struct px_server *srv);

/* Stops listening and closes every HTTP connection (their memory goes at
 * release). Idempotent; no-op without a listener. */
void px_http_stop(struct px_server *srv);

/* True when no HTTP connection is left (or there is no listener). */
bool px_http_is_idle(const struct px_server *srv);

/* Frees the endpoint once idle. */
void px_http_destroy(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
