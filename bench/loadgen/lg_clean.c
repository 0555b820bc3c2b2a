/* The clean-up after each target: a run against someone's deployment must
 * leave no key behind.
 *
 * Every key of a run is named from its prefix (lgbench:<random> by default,
 * new each run), so the bench knows every name it may have created: the
 * lock, read-write lock or semaphore names <prefix>:<target>:<n>, and for
 * the Redisson read locks each client's {name}:<uuid>:<id>:rwlock_timeout:1
 * (the workload never holds a read lock twice). After a clean drain only the
 * semaphores are left (by design: they have no expiry); a client that did
 * not finish its cycle may leave a lock. The names are deleted with DEL,
 * 64 per command, pipelined, on:
 *   - the target's endpoint for the Redisson targets (Redis, or twemproxy,
 *     which splits a multi-key DEL by server);
 *   - --redis for the proxy and passthrough targets, when the bench may use it (the lock
 *     owner keys of lockproxy's read locks carry the proxy's uuid, and
 *     lockproxy deletes them itself on unlock or disconnect);
 *   - with --cluster, the master of each key's slot (lg_cluster.c).
 * Through lockproxy alone nothing is deleted: its locks are released by
 * UNLOCK or when the connection closes (lg_opts.c refuses the semaphore
 * workload there, since nothing could delete the semaphores). The count of
 * deleted keys goes into the result. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_cluster.h"
#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_stats.h"

#define CLEAN_TIMEOUT_S 10
#define DEL_BATCH       64
#define NAME_MAX_LEN    288

/* A batch of names for one DEL. */
struct del_batch {
    char names[DEL_BATCH][NAME_MAX_LEN]; /* the keys */
    const char *argv[DEL_BATCH + 1];     /* "DEL" and the names */
    size_t argvlen[DEL_BATCH + 1];       /* their lengths */
    unsigned n;                          /* names in the batch */
    unsigned sent;                       /* DEL commands appended, not read */
};

struct clean {
    struct lg_run *r;        /* borrowed: the run */
    redisContext *ctx;       /* owned: the connection that deletes */
    struct del_batch *batch; /* owned: the batch being filled */
    uint64_t deleted;        /* keys deleted so far */
    char error[160];         /* the first failure */
};

/* Reads the replies of every DEL sent so far. */
static int drain_replies(struct clean *cl)
{
    while (cl->batch->sent > 0) {
        redisReply *rep;

        if (redisGetReply(cl->ctx, (void **)&rep) != REDIS_OK) {
            snprintf(cl->error, sizeof(cl->error), "DEL: %.120s", cl->ctx->errstr);
            return -EIO;
        }
        cl->batch->sent--;
        if (rep->type == REDIS_REPLY_INTEGER)
            cl->deleted += (uint64_t)rep->integer;
        else if (cl->error[0] == '\0')
            snprintf(cl->error, sizeof(cl->error), "DEL: %.120s",
                     rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        freeReplyObject(rep);
    }
    return 0;
}

/* Sends the batch's DEL; reads the replies every 16 commands. */
static int flush_batch(struct clean *cl)
{
    struct del_batch *b = cl->batch;

    if (b->n == 0)
        return 0;
    b->argv[0] = "DEL";
    b->argvlen[0] = 3;
    for (unsigned i = 0; i < b->n; i++) {
        b->argv[i + 1] = b->names[i];
        b->argvlen[i + 1] = strlen(b->names[i]);
    }
    if (redisAppendCommandArgv(cl->ctx, (int)b->n + 1, b->argv, b->argvlen) != REDIS_OK)
        return -ENOMEM;
    b->n = 0;
    b->sent++;
    return b->sent >= 16 ? drain_replies(cl) : 0;
}

static int add_name(struct clean *cl, const char *fmt_name)
{
    snprintf(cl->batch->names[cl->batch->n++], NAME_MAX_LEN, "%s", fmt_name);
    return cl->batch->n == DEL_BATCH ? flush_batch(cl) : 0;
}

/* Every name the run may have created. */
static int add_all(struct clean *cl)
{
    struct lg_run *r = cl->r;
    char name[128], aux[NAME_MAX_LEN];
    int rc = 0;

    for (unsigned k = 0; k < r->nkeys && rc == 0; k++) {
        lg_run_key_name(r, k, name, sizeof(name));
        rc = add_name(cl, name);
    }
    if (!r->redisson || r->o->workload != LG_WL_RWLOCK)
        return rc;
    for (unsigned i = 0; i < r->nclients && rc == 0; i++) {
        lg_run_key_name(r, r->clients[i].key, name, sizeof(name));
        snprintf(aux, sizeof(aux), "{%s}:%s:%u:rwlock_timeout:1", name, r->uuid, i);
        rc = add_name(cl, aux);
    }
    return rc;
}

/* Where to delete, or NULL (with the reason in note). */
static const struct lg_endpoint *clean_endpoint(const struct lg_run *r, char *note, size_t cap)
{
    if (r->redisson && r->target != LG_TGT_PASSTHROUGH)
        return r->cmd_ep;
    if (r->o->redis_stats) /* proxy, passthrough: a multi-key DEL goes to Redis */
        return &r->o->redis;
    snprintf(note, cap,
             "through lockproxy only: its locks are released by UNLOCK or on "
             "disconnect (nothing to delete)");
    return NULL;
}

void lg_clean_keys(struct lg_run *r)
{
    struct lg_result *res = r->res;
    const struct lg_endpoint *ep;
    struct clean cl;
    int rc;

    if (r->conns_next == 0 && !r->sems_set)
        return;
    ep = clean_endpoint(r, res->clean_note, sizeof(res->clean_note));
    if (!ep)
        return;
    if (r->cluster) {
        lg_cluster_clean(r);
        return;
    }
    memset(&cl, 0, sizeof(cl));
    cl.r = r;
    cl.batch = calloc(1, sizeof(*cl.batch));
    cl.ctx = cl.batch ? lg_redis_connect(ep, CLEAN_TIMEOUT_S, cl.error, sizeof(cl.error)) : NULL;
    rc = cl.ctx ? add_all(&cl) : -ECONNREFUSED;
    if (rc == 0)
        rc = flush_batch(&cl);
    if (rc == 0)
        rc = drain_replies(&cl);
    if (rc == 0 && cl.error[0] == '\0') {
        res->cleaned = true;
        res->keys_deleted = cl.deleted;
        snprintf(res->clean_note, sizeof(res->clean_note), "%llu keys deleted on %.100s",
                 (unsigned long long)cl.deleted, ep->name);
    } else {
        snprintf(res->clean_note, sizeof(res->clean_note), "FAILED on %.40s: %.90s", ep->name,
                 cl.error[0] ? cl.error : "out of memory");
    }
    if (cl.ctx)
        redisFree(cl.ctx);
    free(cl.batch);
}
