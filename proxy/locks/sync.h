/* px_syncop, the blocking-command machinery that SEM.ACQUIRE, PSEM.ACQUIRE
 * and LATCH.AWAIT share: try a script; if it cannot succeed yet, join the
 * channel's waitset (one upstream subscription per channel for the whole
 * proxy), retry once subscribed, then sleep until a wake-up, a periodic
 * safety re-check (these objects have no lease to poll at), or the WAIT
 * deadline. Also the reply helpers of those commands (their argument
 * checks are in args.h). */
#ifndef LP_PROXY_LOCKS_SYNC_H
#define LP_PROXY_LOCKS_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "proxy/client.h"
#include "proxy/locks/waitset.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;
struct px_server;

#define PX_SYNC_RECHECK_MS 2000u      /* waiters re-check this often without a message */
#define PX_SYNC_FOREVER    UINT64_MAX /* deadline of a wait without WAIT */

/* Which command family a px_syncop serves (INFO counters). */
enum px_sync_kind {
    PX_SYNC_SEM = 0,   /* SEM.ACQUIRE / SEM.TRYACQUIRE */
    PX_SYNC_PSEM = 1,  /* PSEM.ACQUIRE */
    PX_SYNC_LATCH = 2, /* LATCH.AWAIT */
    PX_SYNC_KINDS = 3,
};

/* What an attempt's reply means. */
enum px_sync_res {
    PX_SYNC_DONE = 0, /* the reply is written: the command is over */
    PX_SYNC_WAIT = 1, /* not yet: wait (unless WAIT has run out) and retry */
};

struct px_syncop;

/* The per-command part of a blocking command (a static table). */
struct px_sync_ops {
    enum px_sync_kind kind; /* INFO counters */
    enum px_wake_mode wake; /* how the channel's messages wake waiters */
    /* Writes the wake channel; returns its length (0: too long). */
    size_t (*channel)(const struct px_syncop *op, char *out, size_t cap);
    /* Sends one attempt with px_sync_eval(). Returns 0 or -errno. */
    int (*send)(struct px_syncop *op);
    /* Interprets an attempt's reply (never an error reply). DONE: the
     * reply to the client is written (if the client is closing, undo what
     * the attempt took). WAIT: *retry_ms may shorten the next re-check. */
    enum px_sync_res (*done)(struct px_syncop *op, const redisReply *r, uint64_t *retry_ms);
    /* Frees the structure that embeds op. */
    void (*destroy)(struct px_syncop *op);
};

/* One blocking command in progress. Embedded by the command's own state;
 * px_syncop owns nothing but its memberships. */
struct px_syncop {
    const struct px_sync_ops *ops; /* borrowed: static table */
    struct px_req *req;            /* borrowed: the request being answered */
    struct px_server *srv;         /* borrowed */
    struct px_waitset *set;        /* borrowed: joined waitset, or NULL */
    struct px_wait wait;           /* membership in set; wait.busy: attempt in flight */
    struct px_owned owned;         /* in cl->owned: the wait ends if the connection closes */
    struct sched_timer timer;      /* re-check / deadline while asleep */
    uint64_t deadline;             /* monotonic ms, PX_SYNC_FOREVER, or 0 (one attempt) */
    struct px_wait_snap snap;      /* the channel's waitset when the first attempt was sent */
};

/* Starts op for req (op->ops must be set): wait_ms < 0 waits forever, 0
 * makes one attempt. op is destroyed through ops->destroy when req is
 * done; an UPSTREAM error is replied when Redis cannot be reached. */
void px_sync_start(struct px_syncop *op, struct px_req *req, int64_t wait_ms);

/* EVALSHA for an attempt of op (argv borrowed for the call). */
int px_sync_eval(struct px_syncop *op, unsigned script, int numkeys, int argc,
                 const char *const *argv, const size_t *lens);

/* Writes the error reply for a failed upstream request (err < 0): as
 * px_args_reply_upstream(), except that -ENOMEM replies "-ERR out of
 * memory". */
void px_sync_reply_upstream(struct px_req *req, int err);

/* Formats a non-error script reply for a simple command. */
typedef void px_sync_reply_fn(struct px_req *req, const redisReply *r);

/* Runs script for req and finishes req with fmt(r); errors (upstream,
 * Redis error replies) are replied without calling fmt. */
void px_sync_call(struct px_req *req, unsigned script, int numkeys, int argc,
                  const char *const *argv, const size_t *lens, px_sync_reply_fn *fmt);

/* fmt for scripts that return an integer: the integer, as is. */
void px_sync_reply_int(struct px_req *req, const redisReply *r);

/* True when argv has "WAIT 0" (a single attempt, so not a barrier). */
bool px_sync_wait_zero(const struct px_req *req);

/* Waits in progress and waits timed out, per kind (for INFO). */
extern uint64_t px_sync_waiting_count[PX_SYNC_KINDS];
extern uint64_t px_sync_timeout_count[PX_SYNC_KINDS];

#ifdef __cplusplus
}
#endif

#endif
