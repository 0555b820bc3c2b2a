/* A fake of pool/pool.h for the simulator (tests/sim): it replaces lp_pool
 * at link time (every pool_* function the proxy calls, except the pure
 * slot functions, which come from lp_pool's slot.c). Requests are queued
 * per connection (hint % size, FIFO as the real pool) and nothing happens
 * until the simulator says so: fp_execute() runs the head request of a
 * connection in the Redis model (fake_redis.h, the proxy's real Lua
 * scripts), fp_deliver() hands its reply to the caller, fp_fail() fails a
 * connection's requests (reset or timeout, executed or not), fp_down() /
 * fp_up() drop and restore the upstream (submits fail fast with -ENOTCONN
 * meanwhile; subscriptions get LOST, then READY; a restarted or
 * failed-over master is reported through on_topology, as the real pool
 * does after a new run_id or a Sentinel switch). PUBLISH from a script is
 * queued and delivered by fp_deliver_msg(). Callbacks only come from these
 * calls, never from inside a pool_* call: the real pool's contract. */
#ifndef LP_TESTS_SUPPORT_FAKE_POOL_H
#define LP_TESTS_SUPPORT_FAKE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"
#include "tests/support/fake_redis.h"

/* Returns the time scripts run at (the simulator's clock). */
typedef uint64_t fp_now_fn(void);

/* Set before the proxy creates its pool: the clock, and the Redis model
 * the pool talks to (not owned; it outlives pools). */
void fp_configure(fp_now_fn *now, struct fake_redis *redis);

/* Called at every request submitted (its connection, a description). */
typedef void fp_trace_fn(unsigned conn, const char *what);
void fp_set_trace(fp_trace_fn *fn);

/* The pool the proxy created last (NULL before). */
struct pool *fp_pool(void);

unsigned fp_nconns(const struct pool *p);
/* Requests on conn: all of them, and those Redis has not run yet. */
unsigned fp_queued(const struct pool *p, unsigned conn);
unsigned fp_unexecuted(const struct pool *p, unsigned conn);
/* Send time of conn's oldest request; false when none. */
bool fp_oldest(const struct pool *p, unsigned conn, uint64_t *sent_ms);
/* Runs conn's first request Redis has not run; false when none. */
bool fp_execute(struct pool *p, unsigned conn);
/* Describes (script name and arguments) the request fp_execute() would
 * run next on conn, into buf; returns its length (0: none). */
size_t fp_describe_next(const struct pool *p, unsigned conn, char *buf, size_t n);
/* Delivers conn's head request when Redis ran it; false otherwise. */
bool fp_deliver(struct pool *p, unsigned conn);
/* Fails every request of conn with err (-ECONNRESET, -ETIMEDOUT). */
void fp_fail(struct pool *p, unsigned conn, int err);

bool fp_is_up(const struct pool *p);
/* The upstream is lost: every request fails -ECONNRESET, subscriptions
 * LOST, submits -ENOTCONN until fp_up(). */
void fp_down(struct pool *p);
/* Back up: subscriptions READY; restarted: the master's run_id changed
 * (a restart, a failover), so on_topology reports every slot changed. */
void fp_up(struct pool *p, bool restarted);

/* Pub/sub messages queued (published, not delivered). */
size_t fp_msgs(const struct pool *p);
/* Delivers message i of the queue (0: the oldest); false when none. */
bool fp_deliver_msg(struct pool *p, size_t i);

/* Counters for the simulator's report. */
struct fp_counts {
    uint64_t submitted, executed, delivered, failed, refused, published;
};
void fp_counts(const struct pool *p, struct fp_counts *out);

#endif
