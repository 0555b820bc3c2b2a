/* Replicated writes (--sync-replicas N, --sync-timeout MS).
 *
 * Every script that writes (lock state: acquires, renewals, releases of
 * every kind, semaphores, latches) goes out with "WAIT N MS" right behind
 * it on the same upstream connection (pool_eval_wait), and its reply
 * reaches the caller only once WAIT answered, with the replicas WAIT
 * counted in the result (res->acks; pool_result_short(res) says whether
 * fewer than N acknowledged the write); the wait engine then refuses a
 * grant (undoes it and answers NOREPLICAS: wait.c). Every short write is counted here and logged
 * (rate-limited), whatever the script: a renewal or a release that did
 * not reach N replicas is not undone (the master has applied it; a
 * renewal not replicated leaves the replica's copy of the lease shorter,
 * which matters only if that replica is promoted, and then the hold is
 * re-verified at once: watchdog.c).
 *
 * WAIT is not consensus: it says the replicas received the write, not
 * that a failover will pick one of them, nor that a write it did not
 * count as replicated was not applied somewhere (README, Guarantees).
 *
 * The outcome travels in the callback's own result record (struct
 * pool_result), so a callback that hands its outcome on (a hand-off, a
 * multi-lock group) hands the replication on with it. */
#ifndef LP_PROXY_LOCKS_REPL_H
#define LP_PROXY_LOCKS_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;

/* EVALSHA of script (named name, for logs) followed by WAIT with
 * eng->cfg.sync_replicas and sync_timeout_ms. Same contract as
 * pool_eval; cb runs after WAIT answered, res->acks and res->replicas
 * set. */
int px_repl_eval(struct lk_engine *eng, uint64_t hint, unsigned script, const char *name,
                 int numkeys, int argc, const char *const *argv, const size_t *lens,
                 pool_reply_fn *cb, void *arg);

#ifdef __cplusplus
}
#endif

#endif
