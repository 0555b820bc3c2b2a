/* What the semaphore modules share: semaphore.c (the scripts, keys,
 * argument rules, INFO and the command table), sem.c (SEM.*, Redisson's
 * RSemaphore) and psem.c (PSEM.*, RPermitExpirableSemaphore). Private to
 * those files. */
#ifndef LP_PROXY_LOCKS_SEM_INT_H
#define LP_PROXY_LOCKS_SEM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/sem.h"
#include "pool/reply.h"
#include "proxy/cmds/call.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_caller;
struct lk_engine;
struct px_req;
struct px_server;

#define PX__PSEM_SENTINEL "922337203685477" /* score of a permit without lease */
/* What an acquire command asks for. */
struct px__sem_acquire_args {
    int64_t permits;  /* how many (SEM) */
    int64_t wait_ms;  /* WAIT, or -1 (forever) */
    int64_t lease_ms; /* LEASE (PSEM), or -1 */
    bool keep;        /* KEEP */
};

/* Parses "name [n] [WAIT ms] [LEASE ms] [KEEP]" with the parts the command
 * takes. Replies and returns -EINVAL on bad input. */
int px__sem_parse_acquire(struct px_req *req, bool count_ok, bool wait_ok, bool lease_ok,
                          struct px__sem_acquire_args *a);

/* Runs a SEM (psem false: keys {name, chan}, or the first nkeys of them)
 * or PSEM (psem true: keys {name, zset, chan}; nkeys 0) script with at
 * most two arguments, its reply written by fmt. */
void px__sem_simple(struct px_req *req, enum px__sem_script s, bool psem, int nkeys, const char *a1,
                    size_t l1, const char *a2, size_t l2, px_call_reply_fn *fmt);

/* Replies -NOTINIT for req's semaphore. */
void px__sem_reply_notinit(struct px_req *req);

/* may_block of the acquire commands: false for WAIT 0. */
bool px__sem_may_block(const struct px_req *req);

/* Figures for INFO "sync": struct px__sem_stats, srv->engine->sem_stats
 * (engine/engine.h). */

/* SEM.* handlers (sem.c). */
void px__sem_cmd_trysetpermits(struct px_req *req);
void px__sem_cmd_addpermits(struct px_req *req);
void px__sem_cmd_acquire(struct px_req *req);
void px__sem_cmd_tryacquire(struct px_req *req);
void px__sem_cmd_release(struct px_req *req);
void px__sem_cmd_available(struct px_req *req);
void px__sem_cmd_drain(struct px_req *req);

/* PSEM.* handlers (psem.c). */
void px__psem_cmd_trysetpermits(struct px_req *req);
void px__psem_cmd_acquire(struct px_req *req);
void px__psem_cmd_tryacquire(struct px_req *req);
void px__psem_cmd_release(struct px_req *req);
void px__psem_cmd_available(struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
