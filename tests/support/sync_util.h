/* Helpers for the integration tests of waiting and waking: what Redis
 * pub/sub shows (subscriber counts, the messages a command publishes),
 * replies to blocking commands sent earlier, and the multi-client harness
 * behind the mutual-exclusion and counting checks. Built on proxy_util.h;
 * same process rules: the su_expect_* / su_recv_* / su_next_* functions
 * assert, so only the main thread may call them, while su_cmd_ok, the
 * su_excl_* functions and su_atomic_max are for worker threads (they count
 * problems instead of failing). */
#ifndef LP_TESTS_INTEGRATION_SYNC_UTIL_H
#define LP_TESTS_INTEGRATION_SYNC_UTIL_H

#include <stdatomic.h>
#include <stdbool.h>

#include <hiredis/hiredis.h>

#include "proxy_util.h"

#define SU_OK -1 /* su_cmd_ok's want: the reply must be +OK */

/* Redisson's RLock acquire and unlock scripts (section 2 of the protocol
 * notes), for tests that play a Redisson client. Acquire: KEYS name; ARGV
 * lease, owner -> nil or the holder's PTTL. Unlock: KEYS name, channel;
 * ARGV message, lease, owner -> nil (not owner), 0 (still held) or 1
 * (released, published). */
extern const char su_rlock_acquire_lua[];
extern const char su_rlock_unlock_lua[];

/* ---- pub/sub and replies of commands sent earlier (main thread) ---- */

/* Subscribers of channel on Redis (all clients, the proxy included), from
 * PUBSUB NUMSUB on a direct connection; fails the test on a malformed
 * reply. */
long long su_numsub(redisContext *rc, const char *chan);

/* Waits up to 3 s for the next message on a pu_psubscribe() connection
 * and checks its channel and payload; fails the test otherwise. */
void su_expect_msg(redisContext *sub, const char *chan, const char *payload);

/* Fails the test if a message arrives on sub within ms. */
void su_expect_no_msg(redisContext *sub, int ms);

/* The reply to a command sent earlier on c must come within ms and be
 * +OK; fails the test otherwise. */
void su_expect_ok_within(redisContext *c, int ms);

/* su_expect_ok_within, then returns the ms from since (pu_now_ms()) to
 * now: how long the waiter took to be granted. */
long long su_recv_ok_within(redisContext *c, long long since, int ms);

/* Among the n waiters w whose done[i] is false (each with a lock command
 * sent earlier), the one whose reply arrives within ms, which must be +OK:
 * its index, or -1 if none. Fails the test if two have a reply (two
 * waiters granted at once). Borrows w and done. */
int su_next_granted(redisContext **w, const bool *done, int n, int ms);

/* ---- worker threads ---- */

/* Runs a command (hiredis format) on a worker's connection; true if the
 * reply is +OK (want SU_OK) or the integer want. Never fails the test. */
bool su_cmd_ok(redisContext *c, long long want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Raises *max to v unless it is already at least v. */
void su_atomic_max(atomic_int *max, int v);

/* A critical section that clients share: who is inside, whether two ever
 * were at once, and a counter only the lock under test protects (a lost
 * update leaves it short). Zero it before use. */
struct su_excl {
    atomic_int inside;     /* clients inside now */
    atomic_int violations; /* times a client found another inside */
    volatile long counter; /* read-modify-written inside, without atomics */
};

/* Enters x; counts a violation when another client is already inside. */
void su_excl_enter(struct su_excl *x);

/* Increments x->counter non-atomically, yielding and sleeping hold_us in
 * between (so a second client inside would lose an update), then leaves. */
void su_excl_leave(struct su_excl *x, int hold_us);

/* One round of client number i on its own connection c; false after a
 * failed command (the client stops). */
typedef bool su_round_fn(void *arg, int i, redisContext *c);

/* Concurrent clients for su_clients_run. */
struct su_clients {
    const int *ports;   /* borrowed: client i connects to ports[i % nports] */
    int nports;         /* at least 1 */
    int clients;        /* threads, one connection each */
    int rounds;         /* rounds per client */
    su_round_fn *round; /* borrowed: called from the client threads */
    void *arg;          /* borrowed: round's first argument */
};

/* Starts spec->clients threads; each connects (60 s command timeout),
 * waits until every client has tried to connect, then runs its rounds,
 * stopping at the first that fails. Joins them all; returns how many
 * clients failed (could not connect, or a round returned false). Fails the
 * test only if a thread cannot be created. Main thread only. */
int su_clients_run(const struct su_clients *spec);

/* Mutual-exclusion check: threads clients (each its own connection to
 * 127.0.0.1:port) loop iters times over LOCK name; read-modify-write of a
 * shared counter with a yield inside; UNLOCK name (expects :1). Fails the
 * test if a client sees another inside, a command fails, or the counter is
 * not threads * iters. Main thread only. */
void su_mutex_check(int port, const char *name, int threads, int iters);

#endif
