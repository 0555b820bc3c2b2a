/* Helpers for the operations tests (config files, auth, metrics, signals):
 * temp config files, a proxy started without the INFO check that
 * pu_env_start does (which auth would refuse), authenticated clients, a
 * tiny HTTP client, and waiting for the proxy to exit. Built on
 * proxy_util.h; same process rules (main thread only). */
#ifndef LP_TESTS_INTEGRATION_OPS_UTIL_H
#define LP_TESTS_INTEGRATION_OPS_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "proxy_util.h"

#define OU_HTTP_MAX 262144 /* largest HTTP response read */

/* A path in the test temp dir: "<tmp>/<name>". */
void ou_path(char *buf, size_t n, const char *name);

/* Writes (replaces) the file at path with the formatted text. */
void ou_write_file(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Starts redis (unless e->redis.pid is already set) and the proxy with
 * --io backend and extra (NULL-terminated) and no --log-level, waiting
 * only for PING (allowed before AUTH). */
void ou_env_start(struct pu_env *e, const char *backend, const char *const *extra);

/* Connects to the proxy and runs AUTH (user NULL: AUTH password);
 * fails the test unless it answers +OK. */
/* Redis with DEBUG enabled (DEBUG SLEEP on demand), then the proxy with
 * --io backend, --log-level level ($LP_IT_LOG_LEVEL overrides it) and
 * extra. */
void ou_debug_env_start(struct pu_env *e, const char *backend, const char *level,
                        const char *const *extra);

/* Runs scenario on each io backend $LP_IT_BACKENDS selects (uring only
 * where io_uring_setup is permitted) in an ou_debug_env_start env, which
 * it stops after; skips the test when none can run. */
void ou_each_backend_debug(void (*scenario)(struct pu_env *e), const char *level,
                           const char *const *extra);

/* A second proxy on e's Redis, with e's proxy's flags. */
void ou_second_proxy(const struct pu_env *e, struct pu_proxy *p2);

redisContext *ou_client_auth(struct pu_env *e, const char *user, const char *pass);

/* One HTTP request (raw bytes) to 127.0.0.1:port; reads the response
 * until the server closes (or ms pass) into resp (NUL-terminated).
 * Returns the status code, 0 if no status line came, -1 if the connect
 * failed. */
int ou_http_raw(int port, const char *req, size_t len, char *resp, size_t n, int ms);

/* GET path; copies the body into body. Returns the status (as above). */
int ou_http_get(int port, const char *path, char *body, size_t n);

/* Waits up to ms for the proxy to exit on its own. Returns the wait
 * status, or -1 if it is still running. */
int ou_wait_exit(struct pu_proxy *p, int ms);

/* True if the file at path contains needle. */
bool ou_file_contains(const char *path, const char *needle);

/* The value of the Prometheus sample whose line starts with "name " or
 * "name{labels} " exactly as given in series (e.g.
 * "lockproxy_commands_total{cmd=\"LOCK\",result=\"ok\"}"); -1 if absent. */
double ou_metric(const char *text, const char *series);

#endif
