/* MULTI/EXEC/DISCARD with Redis's semantics, per connection.
 *
 * After MULTI, every command that passes the checks a command passes
 * before it runs (auth and name patterns, known command, arity) is queued
 * and answered +QUEUED; one that fails them is answered with its error and
 * marks the transaction, so EXEC answers EXECABORT and runs none of it.
 * EXEC answers an array of the queued commands' replies, in order: it
 * writes the array's header and puts the queued requests back at the head
 * of the connection's input queue, where they run as ordinary requests
 * (one by one, in order, replies written in order, forming the array's
 * elements) except that none may wait: a LOCK, FAIRLOCK, RLOCK, WLOCK,
 * SEM.ACQUIRE, PSEM.ACQUIRE or LATCH.AWAIT runs as with WAIT 0 (one
 * attempt, nil if not granted), as Redis runs BLPOP inside MULTI. Errors a
 * command finds when it runs (a bad option) are elements of the array.
 *
 * Not atomic across names: the queued commands run in order on this
 * proxy, each as it would alone, with nothing else of this connection in
 * between; other connections' commands may run between them, and a
 * command that failed does not undo the others (neither does Redis).
 *
 * Memory: a transaction queues at most --max-pipeline commands (each at
 * most --max-request-bytes), and none that would take the memory held for
 * all clients past --max-client-memory (-OOM; climem.h); one more is
 * refused and marks it. Queued
 * requests are outside the connection's pipeline count until EXEC. */
#ifndef LP_PROXY_MULTI_H
#define LP_PROXY_MULTI_H

#include <stdbool.h>

#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_req;

struct px_multi {
    bool active;       /* between MULTI and EXEC or DISCARD */
    bool dirty;        /* a command was refused while queueing: EXEC aborts */
    unsigned n;        /* requests in queue */
    size_t bytes;      /* memory they hold (climem.h) */
    struct list queue; /* owned: struct px_req queued since MULTI, in order */
};

/* MULTI, EXEC, DISCARD, and WATCH (refused) and UNWATCH (a no-op); cmd.c
 * lists the set. */
extern const struct px_cmd_set px_multi_cmd_set;

void px_multi_init(struct px_multi *m);

/* For px_cmd_dispatch, once req passed the checks: true when req was taken
 * by an open transaction (queued, or refused), false when it runs now. */
bool px_multi_intercept(struct px_req *req);

/* req was answered with an error by the checks before it could run or be
 * queued (or by the parser): marks an open transaction, completes req. */
void px_multi_reject(struct px_req *req);

/* The connection is closing: frees an open transaction's queue. */
void px_multi_client_gone(struct px_client *cl);

/* req, one of an EXEC's commands if in_exec, left the connection (its
 * reply written, or dropped): counts down the EXEC's unsent elements. */
void px_multi_req_gone(struct px_client *cl, const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
