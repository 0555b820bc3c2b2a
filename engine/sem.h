/* The engine's half of the semaphores (SEM.*, PSEM.*; the commands are
 * proxy/cmds/sem.c, psem.c and semaphore.c): their scripts' pool ids,
 * keys and channel, the reply shapes, the retried returns of closed
 * connections' permits (sem.c), the takers' tracking (sem_track.c) and
 * the dead proxies' reaper (sem_reap.c). */
#ifndef LP_ENGINE_SEM_H
#define LP_ENGINE_SEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lk_caller;
struct lk_engine;
struct pool_topology_event;

#define PX__PSEM_ID_LEN          16u    /* raw permit id bytes */
#define PX__SEM_RETURN_WINDOW_MS 60000u /* a SEM return is resent this long at most */
#define PX__SEM_LEDGER_MAX       (PX_CHANNEL_MAX + 64) /* {name}:lp-permits:<uuid> capacity */

/* The semaphore scripts (one set for SEM and PSEM). */
enum px__sem_script {
    PX__SEM_TRYSET = 0,     /* KEYS name, chan; ARGV n -> 1 | 0 */
    PX__SEM_ADD = 1,        /* KEYS name, chan; ARGV delta -> new count */
    PX__SEM_ACQUIRE = 2,    /* KEYS name [ledger]; ARGV n [conn] -> {1,left} | {0,avail} | {-1,0} */
    PX__SEM_RELEASE = 3,    /* KEYS name, chan, ledger, done; ARGV n, only-if-exists, conn,
                               own, number -> {1,new,lost,left} | {0,0,0,0} | {3,count,0,0}
                               (that number or a later one of conn ran already: sem.c) */
    PX__SEM_AVAILABLE = 4,  /* KEYS name -> count */
    PX__SEM_DRAIN = 5,      /* KEYS name -> permits drained */
    PX__PSEM_TRYSET = 6,    /* KEYS name, timeout, chan; ARGV n -> 1 | 0 */
    PX__PSEM_ACQUIRE = 7,   /* ... ARGV now, expiry, id, sentinel -> {1,left} | {0,next} | {-1,0} */
    PX__PSEM_RELEASE = 8,   /* ... ARGV id, now -> 1 | 0 expired | -1 unknown */
    PX__PSEM_AVAILABLE = 9, /* ... ARGV now -> count */
    PX__SEM_RETURN = 10,    /* KEYS name, chan, ledger; ARGV conn, released for it
                               -> {1,new,returned} | {0,0,0} | {2,0,0} */
    PX__SEM_LEDGER = 11,    /* KEYS ledger -> {conn, permits, ...} */
    PX__SEM_ALIVE = 12,    /* KEYS live, all, reaped; ARGV uuid, ttl -> 1 reaped | 0 (sem_reap.c) */
    PX__SEM_REGISTER = 13, /* KEYS sems, all, live; ARGV name, uuid, ttl -> 1 | 0 */
    PX__SEM_REAP_FIND = 14, /* KEYS all; ARGV prefix, uuid, max -> {uuid, {names}} | {} */
    PX__SEM_REAP = 15,      /* KEYS name, chan, ledger -> permits given back */
    PX__SEM_REAP_DONE = 16, /* KEYS sems; ARGV name -> 1 | 0 */
    PX__SEM_NSCRIPTS = 17,
};

/* Pool id of a semaphore script. */
unsigned px__sem_script(const struct lk_engine *eng, enum px__sem_script s);

/* The name, the channel and (PSEM) the permit set, as script keys, then
 * the script's arguments. */
struct px__sem_keys {
    const char *argv[10];            /* borrowed: keys then arguments (some point into chan/zset) */
    size_t lens[10];                 /* their lengths */
    char chan[PX_CHANNEL_MAX];       /* owned: redisson_sc:{name} */
    char zset[PX_CHANNEL_MAX];       /* owned: {name}:timeout */
    char ledger[PX__SEM_LEDGER_MAX]; /* owned: {name}:lp-permits:<uuid> (SEM) */
};

/* Writes redisson_sc:{name}; returns its length. */
size_t px__sem_channel(const char *name, size_t len, char *out, size_t cap);

/* Fills k for name: keys {name, chan} (returns 2) or, with psem, {name,
 * zset, chan} (returns 3). */
int px__sem_keys_fill(struct px__sem_keys *k, const char *name, size_t len, bool psem);

/* Sets key i of k to the ledger of eng's SEM permits of name: a hash
 * {name}:lp-permits:<proxy uuid>, connection id -> permits that connection
 * took through this proxy (not with KEEP), written by the acquire, release
 * and return scripts together with the count. */
void px__sem_keys_ledger(struct px__sem_keys *k, int i, const struct lk_engine *eng,
                         const char *name, size_t len);

/* Sets argument i of k. */
void px__sem_keys_arg(struct px__sem_keys *k, int i, const char *p, size_t len);

/* Reads a script's {status, value} pair. */
bool px__sem_pair_reply(const struct pool_reply *r, long long *status, long long *value);

/* Reads a script's {status, value, third} triple. */
bool px__sem_triple_reply(const struct pool_reply *r, long long v[3]);

/* Gives back the permit id of a PSEM a closed connection took. A retried
 * job (jobs.h): sent again until Redis answers or until passes (the
 * permit's lease end, or PX_JOB_NO_END). rollback: it undoes an
 * acquisition no client was told of (counted as rolled back when Redis had
 * it), not a closed connection's permit. */
void px__sem_return(struct lk_engine *eng, const char *name, size_t nlen, const unsigned char *id,
                    uint64_t until, bool rollback);

/* Gives back the SEM permits connection conn took of name: what the
 * ledger (px__sem_keys_ledger) of the master at the time records for it
 * (exact > 0: at most that many), less forgiven (permits other
 * connections released for it). The same script clears what it gives
 * back, so resending is harmless: a retried job, for
 * PX__SEM_RETURN_WINDOW_MS at most. */
void px__sem_return_taken(struct lk_engine *eng, const char *name, size_t nlen, uint64_t conn,
                          int64_t forgiven, int64_t exact);

/* SEM permit tracking (sem_track.c). */

/* What a release by one connection tells the release script about its
 * own record (sem_release.lua). */
struct px__sem_own {
    bool taker;  /* the connection has a record of this semaphore */
    int64_t own; /* of the n released, permits it took as the proxy counts */
};

/* How a release ended. */
enum px__sem_outcome {
    PX__SEM_APPLIED = 0,       /* Redis ran it */
    PX__SEM_NOT_APPLIED = 1,   /* never sent, or refused before it wrote */
    PX__SEM_MAYBE_APPLIED = 2, /* its reply was lost */
};

/* cl took n permits of name; unsure: it may have taken more (an outcome
 * never learnt). On -ENOMEM they are simply not tracked. */
void px__sem_track_add(struct lk_caller *cl, const char *name, size_t len, int64_t n, bool unsure);

/* cl sends a release of n permits of name: fills *o (its own among them
 * are releasing until px__sem_release_end). */
void px__sem_release_begin(struct lk_caller *cl, const char *name, size_t len, int64_t n,
                           struct px__sem_own *o);

/* The release ended (out; left: what cl's record still has, when
 * applied): n come off the tracking, cl's own first, then other takers',
 * oldest first. */
void px__sem_release_end(struct lk_caller *cl, const char *name, size_t len, int64_t n,
                         const struct px__sem_own *o, enum px__sem_outcome out, long long left);

/* After a change of slot owners: the SEM permit records of the moved
 * slots are checked on their new master (sem_track.c). */
void px_sem_on_topology(struct lk_engine *eng, const struct pool_topology_event *ev);

#ifdef __cplusplus
}
#endif

#endif
