/* The engine's half of the semaphores; see sem.h. */
#include "engine/sem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/jobs.h"
#include "engine/scripts.h"
#include "engine/shape.h"
#include "engine/wait.h"
#include "sched/loop.h"

#define SEM_CHANNEL_PREFIX "redisson_sc:"

unsigned px__sem_script(const struct lk_engine *eng, enum px__sem_script s)
{
    return eng->script_bases[LK_SCRIPTS_SEM] + (unsigned)s;
}

/* ---- keys and channels -------------------------------------------------- */

size_t px__sem_channel(const char *name, size_t len, char *out, size_t cap)
{
    return px_channel_name(out, cap, SEM_CHANNEL_PREFIX, name, len);
}

int px__sem_keys_fill(struct px__sem_keys *k, const char *name, size_t len, bool psem)
{
    size_t zlen;

    k->argv[0] = name;
    k->lens[0] = len;
    k->argv[psem ? 2 : 1] = k->chan;
    k->lens[psem ? 2 : 1] = px__sem_channel(name, len, k->chan, sizeof(k->chan));
    if (!psem)
        return 2;
    zlen = px_channel_name(k->zset, sizeof(k->zset) - 8, "", name, len);
    memcpy(k->zset + zlen, ":timeout", 9);
    k->argv[1] = k->zset;
    k->lens[1] = zlen + 8;
    return 3;
}

void px__sem_keys_arg(struct px__sem_keys *k, int i, const char *p, size_t len)
{
    k->argv[i] = p;
    k->lens[i] = len;
}

void px__sem_keys_ledger(struct px__sem_keys *k, int i, const struct lk_engine *eng,
                         const char *name, size_t len)
{
    size_t n = px_channel_name(k->ledger, PX_CHANNEL_MAX, "", name, len);

    n += (size_t)snprintf(k->ledger + n, sizeof(k->ledger) - n, ":lp-permits:%s", eng->uuid);
    px__sem_keys_arg(k, i, k->ledger, n);
}

/* ---- returns for closed connections ------------------------------------------ */

struct sem_return {
    struct px_job job;                 /* the retried return */
    bool psem;                         /* a PSEM permit id, not SEM permits */
    bool rollback;                     /* PSEM: undoes an unconfirmed acquisition */
    uint64_t conn;                     /* SEM: the connection whose record goes back */
    int64_t forgiven;                  /* SEM: permits others released for it */
    int64_t exact;                     /* SEM: at most this many (0: its whole record) */
    unsigned char id[PX__PSEM_ID_LEN]; /* PSEM: the permit id */
    size_t nlen;                       /* name length */
    char name[];                       /* owned: the semaphore name */
};

static int return_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct sem_return *t = LP_CONTAINER_OF(j, struct sem_return, job);
    struct px__sem_keys k;
    char a1[24], a2[24], a3[24];
    int nk = px__sem_keys_fill(&k, t->name, t->nlen, t->psem);
    uint64_t hint = px_route_hint(t->name, t->nlen);

    if (t->psem) {
        px__sem_keys_arg(&k, nk, (const char *)t->id, PX__PSEM_ID_LEN);
        px__sem_keys_arg(
            &k, nk + 1, a2,
            (size_t)snprintf(a2, sizeof(a2), "%llu", (unsigned long long)clock_wall_ms()));
        return px_script_eval(j->eng, hint, px__sem_script(j->eng, PX__PSEM_RELEASE), nk, nk + 2,
                              k.argv, k.lens, cb, arg);
    }
    px__sem_keys_ledger(&k, 2, j->eng, t->name, t->nlen);
    px__sem_keys_arg(&k, 3, a1,
                     (size_t)snprintf(a1, sizeof(a1), "%llu", (unsigned long long)t->conn));
    px__sem_keys_arg(&k, 4, a2, (size_t)snprintf(a2, sizeof(a2), "%lld", (long long)t->forgiven));
    px__sem_keys_arg(&k, 5, a3, (size_t)snprintf(a3, sizeof(a3), "%lld", (long long)t->exact));
    return px_script_eval(j->eng, hint, px__sem_script(j->eng, PX__SEM_RETURN), 3, 6, k.argv,
                          k.lens, cb, arg);
}

/* SEM: {1, count, returned}, {0, 0, 0} the semaphore is gone, {2, 0, 0}
 * nothing recorded to return (returned by an earlier send whose reply was
 * lost, or lost with a failover); PSEM: 1 or 0 (it had expired) returned,
 * -1 unknown (reclaimed already). */
static void return_done(struct px_job *j, const struct pool_reply *r)
{
    struct sem_return *t = LP_CONTAINER_OF(j, struct sem_return, job);
    long long v[3];

    if (r->type == POOL_REPLY_ERROR)
        log_msg(LOG_LVL_WARN, "returning permits of '%.*s' failed: %.*s",
                (int)LP_MIN(t->nlen, 200u), t->name, (int)LP_MIN(r->len, 200u), r->str);
    else if (t->psem && r->type == POOL_REPLY_INTEGER && r->integer >= 0 && t->rollback)
        j->eng->stats.rolled_back++;
    else if (t->psem && r->type == POOL_REPLY_INTEGER && r->integer >= 0)
        j->eng->sem_stats.psem_returned++;
    else if (!t->psem && px__sem_triple_reply(r, v) && v[0] == 1 && v[2] > 0 && t->exact > 0) {
        j->eng->sem_stats.sem_restored += (uint64_t)v[2];
        log_msg(LOG_LVL_WARN,
                "gave back %lld permits of '%.*s' the new master recorded for connection %llu, "
                "closed (a release or a return the topology change lost)",
                v[2], (int)LP_MIN(t->nlen, 200u), t->name, (unsigned long long)t->conn);
    } else if (!t->psem && px__sem_triple_reply(r, v) && v[0] == 1 && v[2] > 0)
        j->eng->sem_stats.sem_returned += (uint64_t)v[2];
    free(t);
}

static void return_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    free(LP_CONTAINER_OF(j, struct sem_return, job));
}

static const struct px_job_ops sem_return_ops = {
    .what = "return of a closed connection's semaphore permits",
    .group = PX_JOB_RELEASE,
    .idempotent = true, /* the script clears the record it returns */
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static const struct px_job_ops psem_return_ops = {
    .what = "return of a closed connection's semaphore permit",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static const struct px_job_ops psem_rollback_ops = {
    .what = "roll-back of an unconfirmed semaphore permit",
    .group = PX_JOB_ROLLBACK,
    .idempotent = true,
    .ready = NULL,
    .send = return_send,
    .done = return_done,
    .dropped = return_dropped,
};

static struct sem_return *return_new(const char *name, size_t nlen)
{
    struct sem_return *t = calloc(1, sizeof(*t) + nlen + 1);

    if (!t) {
        log_msg(LOG_LVL_WARN, "cannot return permits of '%.*s': out of memory",
                (int)LP_MIN(nlen, 200u), name);
        return NULL;
    }
    t->nlen = nlen;
    memcpy(t->name, name, nlen);
    return t;
}

void px__sem_return(struct lk_engine *eng, const char *name, size_t nlen, const unsigned char *id,
                    uint64_t until, bool rollback)
{
    struct sem_return *t = return_new(name, nlen);

    if (!t)
        return;
    t->psem = true;
    t->rollback = rollback;
    memcpy(t->id, id, PX__PSEM_ID_LEN);
    px_job_init(&t->job, eng, rollback ? &psem_rollback_ops : &psem_return_ops);
    px_job_submit(&t->job, until);
}

void px__sem_return_taken(struct lk_engine *eng, const char *name, size_t nlen, uint64_t conn,
                          int64_t forgiven, int64_t exact)
{
    struct sem_return *t = return_new(name, nlen);

    if (!t)
        return;
    t->conn = conn;
    t->forgiven = forgiven;
    t->exact = exact;
    px_job_init(&t->job, eng, &sem_return_ops);
    px_job_submit(&t->job, sched_loop_now_ms(eng->loop) + PX__SEM_RETURN_WINDOW_MS);
}

bool px__sem_pair_reply(const struct pool_reply *r, long long *status, long long *value)
{
    long long v[2];
    size_t n;

    if (!px_shape_ints(r, 2, 2, v, &n))
        return false;
    *status = v[0];
    *value = v[1];
    return true;
}

bool px__sem_triple_reply(const struct pool_reply *r, long long v[3])
{
    size_t n;

    return px_shape_ints(r, 3, 3, v, &n);
}
