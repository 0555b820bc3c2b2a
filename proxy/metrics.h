/* Metrics: per-command counters by result, latency histograms (lock
 * acquisition wait, lock hold time, upstream round trip) and the
 * Prometheus text rendering of every figure the proxy keeps, plus the
 * INFO sections that show the same numbers over RESP (commandstats,
 * latencystats). The HTTP endpoint that serves them is http.c.
 *
 * Observation points are one-line calls from the modules that see the
 * event: client.c counts every answered command, lock modules call
 * px_metrics_observe_wait() on an acquire and px_metrics_hold_end()
 * when a hold ends, and the pool hands every upstream script's result,
 * with its round trip, to px_metrics_on_eval().
 * Everything runs on the loop thread; nothing here locks or logs. */
#ifndef LP_PROXY_METRICS_H
#define LP_PROXY_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;
struct px_cmd;
struct px_req;

/* Allocates srv->metrics. Returns 0 or -ENOMEM. */
int px_metrics_create(struct px_server *srv);

/* Frees srv->metrics (hold records and idle round-trip records). */
void px_metrics_destroy(struct px_server *srv);

/* Counts one answered command (cmd NULL: unknown command) by the result
 * its reply shows: an error ("-"), nil ("$-1", "*-1") or ok (anything
 * else). reply points at the start of the reply (len bytes, may be 0). */
void px_metrics_command(struct px_server *srv, const struct px_cmd *cmd, const char *reply,
                        size_t len);

/* A lock was acquired for req: observes the time since req was
 * dispatched (0 for a request that could not wait). */
void px_metrics_observe_wait(struct px_server *srv, const struct px_req *req);

/* A hold that began at loop time held_ms ended: the time since is
 * observed as hold time. (The holder keeps held_ms: a record per hold
 * here cost 64 bytes of every held lock.) */
void px_metrics_hold_end(struct px_server *srv, uint64_t held_ms);

/* pool_opts.on_eval of srv->pool (arg: srv): observes a script's round
 * trip (res->rtt_us) when Redis answered it. */
void px_metrics_on_eval(void *arg, const struct pool_result *res);

/* Appends every metric in the Prometheus text format (version 0.0.4). */
void px_metrics_write(struct px_server *srv, struct buf *out);

/* INFO sections "commandstats" and "latencystats". */
void px_metrics_info_commands(struct px_server *srv, struct buf *o);
void px_metrics_info_latency(struct px_server *srv, struct buf *o);

#ifdef __cplusplus
}
#endif

#endif
