/* Jobs that must reach Redis even though nobody waits for their reply:
 * the release of a closed connection's locks and permits, the roll-back
 * of an acquisition nobody may use (a late grant, an unknown outcome), a
 * fair waiter leaving its queue. A job that cannot be sent (Redis down, a
 * reconnect under way) or whose reply is lost waits in the server's queue
 * and is sent again, with back-off, until Redis answers or it has become
 * pointless (its `until`: the lease it would give back has ended anyway).
 *
 * Memory is bounded: at most PX_JOBS_MAX jobs wait at once; a job
 * submitted beyond that is dropped at once (counted, logged). A job is
 * embedded in its owner's structure (a hold, a permit entry), which must
 * stay allocated while the job is not IDLE. */
#ifndef LP_PROXY_LOCKS_JOBS_H
#define LP_PROXY_LOCKS_JOBS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/list.h"
#include "pool/pool.h"
#include "pool/reply.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_engine;
struct px_job;

#define PX_JOBS_MAX    65536u     /* jobs waiting for Redis at once */
#define PX_JOB_NO_END  UINT64_MAX /* a job that never becomes pointless */
#define PX_JOB_BACKOFF 20u        /* first retry delay (ms), doubling up to 1 s */

/* Where a job is. */
enum px_job_state {
    PX_JOB_IDLE = 0,     /* not submitted, or finished */
    PX_JOB_DUE = 1,      /* waiting in the queue to be sent */
    PX_JOB_INFLIGHT = 2, /* sent; its reply is pending */
};

/* What the counters file a job under. */
enum px_job_class {
    PX_JOB_RELEASE = 0,  /* a closed connection's lock or permits */
    PX_JOB_ROLLBACK = 1, /* an acquisition nobody may use, or a fair queue entry */
    PX_JOB_CLASSES = 2,
};

/* Why a job was given up. */
enum px_job_drop {
    PX_JOB_EXPIRED = 0, /* its `until` passed before Redis answered */
    PX_JOB_FULL = 1,    /* PX_JOBS_MAX jobs were waiting already */
    PX_JOB_UNKNOWN = 2, /* its reply was lost and sending it again could do harm */
    PX_JOB_STOPPED = 3, /* the proxy is shutting down */
};

struct px_job_ops {
    const char *what;        /* for logs: "release", "roll-back", ... */
    enum px_job_class group; /* counters */
    bool idempotent;         /* sending it twice is harmless (so a lost reply is retried) */
    /* May it be sent now? NULL: always. A job not ready stays DUE until
     * px_job_kick() or the next retry finds it ready. */
    bool (*ready)(const struct px_job *j);
    /* Sends it, as pool_eval with cb and arg. Returns 0 or -errno. */
    int (*send)(struct px_job *j, pool_reply_fn *cb, void *arg);
    /* Redis answered (r may be an error reply). The job is IDLE again on
     * entry; the owner may free it, or submit it again. */
    void (*done)(struct px_job *j, const struct pool_reply *r);
    /* Given up (why); IDLE on entry, as for done. */
    void (*dropped)(struct px_job *j, enum px_job_drop why);
};

struct px_job {
    struct list node;             /* in eng->jobs.due while DUE */
    const struct px_job_ops *ops; /* borrowed: static */
    struct lk_engine *eng;        /* borrowed */
    uint64_t until;               /* monotonic ms after which it is pointless, or PX_JOB_NO_END */
    enum px_job_state state;      /* see enum */
    unsigned failures;            /* sends refused, and replies lost, so far */
};

/* The engine's queue (embedded in struct lk_engine: eng->jobs). */
struct px_jobs {
    struct list due;                          /* struct px_job, oldest first */
    unsigned ndue;                            /* jobs in due */
    unsigned ninflight;                       /* jobs sent, reply pending */
    struct sched_timer timer;                 /* next retry */
    unsigned backoff_ms;                      /* current retry delay */
    uint64_t retried[PX_JOB_CLASSES];         /* jobs sent again, or sent late, after a failure */
    uint64_t dropped[PX_JOB_CLASSES];         /* jobs given up */
    uint64_t unknown_dropped[PX_JOB_CLASSES]; /* of those, because their outcome was unknown */
};

void px_job_init(struct px_job *j, struct lk_engine *eng, const struct px_job_ops *ops);

/* Submits an IDLE job: sends it now if it is ready and Redis is up,
 * else queues it (or drops it at once when the queue is full). */
void px_job_submit(struct px_job *j, uint64_t until);

/* Sends a DUE job now if it is ready (e.g. right before a request that
 * must follow it). No-op in other states. */
void px_job_kick(struct px_job *j);

/* Has the queue look at a DUE job (that may have become ready) as soon as
 * the loop runs its timers, rather than at the next retry. */
void px_job_soon(struct px_job *j);

/* A change of master (the pool's topology event): Redis takes requests
 * again where it refused them, so every DUE job is looked at as soon as
 * the loop runs its timers and the back-off starts again from 20 ms,
 * rather than waiting out a back-off grown to 1 s during the failover. */
void px_jobs_retry_now(struct lk_engine *eng);

/* Takes a DUE job out of the queue (IDLE, no callback). No-op otherwise. */
void px_job_cancel(struct px_job *j);

int px_jobs_init(struct lk_engine *eng);

/* Shutdown: every DUE job is dropped (PX_JOB_STOPPED). */
void px_jobs_deinit(struct lk_engine *eng);

/* True while jobs wait or are in flight (the stop drains them). */
bool px_jobs_busy(const struct lk_engine *eng);

#ifdef __cplusplus
}
#endif

#endif
