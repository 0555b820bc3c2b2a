/* Presenting results: the per-target table and the comparison on stdout,
 * the JSON file, the key/value file for scripts, and the SVG chart. */
#ifndef LP_BENCH_LOADGEN_LG_REPORT_H
#define LP_BENCH_LOADGEN_LG_REPORT_H

#include <stdbool.h>

#include "bench/loadgen/lg_opts.h"
#include "bench/loadgen/lg_result.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Completed acquire+release pairs per second (0 if it did not run). */
double lg_result_ops(const struct lg_result *res);

/* Latency at percentile pct in microseconds. */
double lg_result_lat_us(const struct lg_result *res, double pct);

/* True when the run was clean: no violation and nothing stuck. */
bool lg_result_exclusive(const struct lg_result *res);

/* Scripts Redis ran per second in the measured phase (EVALSHA + EVAL
 * calls from INFO commandstats), 0 if the Redis figures are n/a. */
double lg_result_scripts_per_sec(const struct lg_result *res);

/* CPU seconds the machine spent outside Redis (when it is local), the
 * bench and (proxy and twemproxy targets, with a pid) the proxy during the
 * measured phase: other processes, and kernel work charged to no process.
 * False when the machine's busy time could not be read. */
bool lg_result_other_cpu(const struct lg_result *res, double *out);

/* Redis CPU microseconds per acquisition (0 if the Redis figures are
 * n/a): what one lock operation costs the Redis thread all clients share. */
double lg_result_redis_us_per_acq(const struct lg_result *res);

/* The proxy's (or twemproxy's) CPU per acquisition, microseconds; 0 when
 * not measured. */
double lg_result_proxy_us_per_acq(const struct lg_result *res);

/* --rate: a run is short when it achieved less than this share of the
 * asked rate. */
#define LG_RATE_SHORT 0.95

/* True for an open-loop run that fell short of its rate. */
bool lg_result_rate_short(const struct lg_result *res);

/* Prints the table of one target to stdout. */
void lg_report_target(const struct lg_opts *o, const struct lg_result *res);

/* Prints the side-by-side summary and the proxy/direct ratios. */
void lg_report_summary(const struct lg_opts *o, const struct lg_result *res, unsigned n);

/* Writes every figure to path as JSON. Returns 0 or -errno. */
int lg_report_json(const char *path, const struct lg_opts *o, const struct lg_result *res,
                   unsigned n);

/* Writes every figure to path as "<target> <key> <value>" lines (one
 * figure per line, no spaces in keys or values), for shell scripts; the
 * workload of o adds its own figures (rwlock: reads, writes). Returns 0 or
 * -errno. */
int lg_report_kv(const char *path, const struct lg_opts *o, const struct lg_result *res,
                 unsigned n);

/* Writes the chart to path as a standalone SVG. Returns 0 or -errno. */
int lg_svg_write(const char *path, const struct lg_opts *o, const struct lg_result *res,
                 unsigned n);

#ifdef __cplusplus
}
#endif

#endif
