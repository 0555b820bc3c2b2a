/* The lock engine alone (lp_engine), for tests/unit/engine: a real loop
 * whose clock is the fixture's (common/clock.h's seam), the simulator's
 * fake pool (fake_pool.h) whose Redis model (fake_redis.h) runs the
 * engine's own Lua scripts, and front-end hooks (struct lk_front) that
 * record what the engine tells them. Subscriptions go through the fake
 * pool, so a script's PUBLISH reaches the waitsets (fx_pump delivers it
 * unless fx.hold_msgs). Two connections (callers) exist: fx.callers[0]
 * (id 7) and fx.callers[1] (id 8). */
#ifndef LP_TESTS_SUPPORT_ENGINE_FIXTURE_H
#define LP_TESTS_SUPPORT_ENGINE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/wait.h"
#include "tests/support/fake_pool.h"
#include "tests/support/fake_redis.h"

#define FX_WATCHDOG_MS 3000u
#define FX_UUID        "00000000-0000-4000-8000-000000000001"
#define FX_CALLERS     2u
#define FX_SUBS        16u

struct fx_sub; /* a listener's subscription in the fake pool (engine_fixture.c) */

struct fx {
    struct fake_redis *redis;
    struct sched_loop *loop;
    struct pool *pool;
    struct lk_engine *eng;
    struct lk_caller callers[FX_CALLERS]; /* the connections */
    int refs;                             /* caller_get - caller_put, all callers */
    unsigned lost[FX_CALLERS];            /* lease_lost calls per caller */
    char lost_name[64];                   /* the last one's name */
    unsigned hold_ends;                   /* hold_end calls (a HELD hold left HELD) */
    unsigned finished;                    /* wait_finish calls */
    enum lk_end end;                      /* the last one's */
    unsigned granted;                     /* test wait kind: granted calls */
    unsigned undone;                      /* test wait kind: undo calls */
    bool hold_msgs;                       /* fx_pump leaves pub/sub messages queued */
    struct fx_sub *subs[FX_SUBS];         /* live listeners */
};

extern struct fx fx;

/* The test's clock (monotonic ms). */
uint64_t fx_now_ms(void);

/* Sets everything up (on_disconnect release, watchdog FX_WATCHDOG_MS). */
void fx_start(void);
/* The connections go (if they have not), what they left is settled, and
 * everything is torn down as the server does; no reference to a
 * connection may be left. */
void fx_stop(void);
/* Redis runs and answers everything queued, messages are delivered
 * (unless fx.hold_msgs), and the loop runs what came due, until nothing
 * moves. */
void fx_pump(void);
/* Time goes by in steps of 10 ms, Redis answering as it goes. */
void fx_advance(uint64_t ms);
/* Time jumps by ms and the loop runs what came due, Redis answering
 * nothing (a reply that takes that long). */
void fx_skip(uint64_t ms);
/* Connection i closes (px_locks_client_gone) and what it left is pumped. */
void fx_close(unsigned i);
/* Delivers msg on channel to its listeners, as a hub would. */
void fx_publish(const char *channel, const char *msg);

/* The owner field of connection id (token NULL) or of an OWNER token. */
size_t fx_owner(uint64_t id, char *out);
size_t fx_owner_token(const char *token, char *out);

/* Runs Redisson's acquire of name for owner with lease_ms in the model:
 * true when granted, false when held by another. */
bool fx_acquire(const char *name, const char *owner, size_t olen, uint64_t lease_ms);
/* Runs the unlock script for owner: its reply (nil -1, 0 kept, 1 released). */
long long fx_unlock(const char *name, const char *owner, size_t olen, uint64_t lease_ms);
/* The owner's count in Redis (0: absent). */
long long fx_count(const char *name, const char *owner);

/* Connection i acquires name as owner (a watchdog lease, or a fixed one of
 * lease_ms when not watchdog), in Redis and in the ledger, as LOCK does:
 * the hold (a reference dropped: the table owns it). */
struct px_hold *fx_grant(unsigned i, const char *name, const char *owner, size_t olen,
                         bool watchdog, uint64_t lease_ms);

/* The test wait kind: Redisson's acquire, a watchdog lease, granted
 * counted in fx.granted, undo (a grant nobody may use) by the unlock. */
struct fx_waiter {
    struct px_wait_op op;
    char owner[PX_OWNER_MAX];
    size_t olen;
    const char *name;
};

/* Connection i starts waiting for name (wait_ms as WAIT; < 0 forever):
 * the op (valid until fx.finished moves). */
struct fx_waiter *fx_wait(unsigned i, const char *name, int64_t wait_ms);

#endif
