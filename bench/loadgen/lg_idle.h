/* Idle-memory mode of lockproxy-bench (--idle N): what N idle client
 * connections add to the proxy's resident memory. */
#ifndef LP_BENCH_LOADGEN_LG_IDLE_H
#define LP_BENCH_LOADGEN_LG_IDLE_H

#include "bench/loadgen/lg_opts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens o->idle connections to o->proxy (a PING answered on each), waits
 * o->idle_settle_s, reads the RSS of o->proxy_pid before, while they are
 * open and after they are closed, prints the report and writes --json and
 * --kv. Returns the exit status: 0 when every connection answered and
 * every RSS reading worked, 1 otherwise. */
int lg_idle_main(const struct lg_opts *o);

#ifdef __cplusplus
}
#endif

#endif
