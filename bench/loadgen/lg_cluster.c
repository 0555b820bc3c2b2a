/* Cluster mode: the slot map, the per-master statistics and clean-up (see
 * lg_cluster.h). Everything here runs outside the event loop, on short
 * blocking hiredis connections, before or after the measured phase. */
#include "bench/loadgen/lg_cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "pool/pool.h"

#define CLUSTER_TIMEOUT_S 10

/* Index of the master host:port, added if new; -ENOSPC when full. */
static int master_index(struct lg_cluster *cl, const struct lg_endpoint *seed, const char *host,
                        long long port)
{
    struct lg_endpoint *ep;

    for (unsigned i = 0; i < cl->nmasters; i++) {
        if (strcmp(cl->masters[i].host, host) == 0 && atoll(cl->masters[i].port) == port)
            return (int)i;
    }
    if (cl->nmasters == LG_CLUSTER_MAX_MASTERS)
        return -ENOSPC;
    ep = &cl->masters[cl->nmasters];
    *ep = *seed;
    snprintf(ep->host, sizeof(ep->host), "%s", host[0] ? host : seed->host);
    snprintf(ep->port, sizeof(ep->port), "%lld", port);
    snprintf(ep->name, sizeof(ep->name), "%s:%lld", host[0] ? host : seed->host, port);
    ep->is_unix = false;
    return (int)cl->nmasters++;
}

/* One CLUSTER SLOTS entry: [start, end, [host, port, id...], replicas...]. */
static int add_range(struct lg_cluster *cl, const struct lg_endpoint *seed, const redisReply *e,
                     bool *seen)
{
    const redisReply *m;
    long long lo, hi;
    int idx;

    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER)
        return -EPROTO;
    lo = e->element[0]->integer;
    hi = e->element[1]->integer;
    m = e->element[2];
    if (lo < 0 || hi >= LG_CLUSTER_SLOTS || lo > hi || m->type != REDIS_REPLY_ARRAY ||
        m->elements < 2 || m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_INTEGER)
        return -EPROTO;
    idx = master_index(cl, seed, m->element[0]->str, m->element[1]->integer);
    if (idx < 0)
        return idx;
    for (long long s = lo; s <= hi; s++) {
        cl->owner[s] = (uint8_t)idx;
        seen[s] = true;
    }
    return 0;
}

/* Fills cl from CLUSTER SLOTS on the seed. */
static int read_slots(struct lg_cluster *cl, const struct lg_endpoint *seed, char *err,
                      size_t errlen)
{
    static bool seen[LG_CLUSTER_SLOTS];
    redisContext *rc = lg_redis_connect(seed, CLUSTER_TIMEOUT_S, err, errlen);
    redisReply *rep = rc ? redisCommand(rc, "CLUSTER SLOTS") : NULL;
    int ret = rep ? 0 : -ECONNREFUSED;

    memset(seen, 0, sizeof(seen));
    if (rc && !rep)
        snprintf(err, errlen, "CLUSTER SLOTS on %.100s: %.100s", seed->name, rc->errstr);
    if (rep && rep->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "CLUSTER SLOTS on %.100s: %.100s (is it a cluster node?)", seed->name,
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        ret = -EPROTO;
    }
    for (size_t i = 0; ret == 0 && i < rep->elements; i++)
        ret = add_range(cl, seed, rep->element[i], seen);
    if (ret == -EPROTO && !err[0])
        snprintf(err, errlen, "CLUSTER SLOTS on %.100s: malformed reply", seed->name);
    if (ret == -ENOSPC)
        snprintf(err, errlen, "more than %u masters", LG_CLUSTER_MAX_MASTERS);
    for (unsigned s = 0; ret == 0 && s < LG_CLUSTER_SLOTS; s++) {
        if (!seen[s]) {
            snprintf(err, errlen, "slot %u has no master (cluster not ready?)", s);
            ret = -EPROTO;
        }
    }
    freeReplyObject(rep);
    if (rc)
        redisFree(rc);
    return ret;
}

int lg_cluster_open(struct lg_run *r)
{
    char *err = r->res->error;
    size_t cap = sizeof(r->res->error);
    struct lg_cluster *cl = calloc(1, sizeof(*cl));
    int rc;

    if (!cl)
        return -ENOMEM;
    r->cluster = cl;
    err[0] = '\0';
    rc = read_slots(cl, &r->o->redis, err, cap);
    for (unsigned i = 0; rc == 0 && i < cl->nmasters; i++)
        rc = lg_run_resolve(&cl->masters[i], &cl->addrs[i], err, cap);
    r->res->redis_nodes = cl->nmasters;
    cl->nstat = cl->nmasters;
    return rc;
}

void lg_cluster_close(struct lg_run *r)
{
    if (!r->cluster)
        return;
    for (unsigned i = 0; i < LG_NSCRIPTS; i++)
        free(r->cluster->lua[i]);
    free(r->cluster);
    r->cluster = NULL;
}

/* A copy of lua with every "'publish'" turned into "'spublish'". */
static char *spublish_variant(const char *lua)
{
    static const char from[] = "'publish'";
    size_t n = 0;
    const char *p;
    char *out, *q;

    for (p = lua; (p = strstr(p, from)) != NULL; p += sizeof(from) - 1)
        n++;
    out = malloc(strlen(lua) + n + 1);
    if (!out)
        return NULL;
    q = out;
    for (p = lua;;) {
        const char *hit = strstr(p, from);
        size_t k = hit ? (size_t)(hit - p) : strlen(p);

        memcpy(q, p, k);
        q += k;
        if (!hit)
            break;
        memcpy(q, "'spublish'", 10);
        q += 10;
        p = hit + sizeof(from) - 1;
    }
    *q = '\0';
    return out;
}

int lg_cluster_scripts(struct lg_run *r)
{
    for (unsigned i = 0; i < LG_NSCRIPTS; i++) {
        if (!r->scripts[i].lua)
            continue;
        r->cluster->lua[i] = spublish_variant(r->scripts[i].lua);
        if (!r->cluster->lua[i])
            return -ENOMEM;
        r->scripts[i].lua = r->cluster->lua[i];
    }
    return 0;
}

int lg_cluster_node(struct lg_run *r, const char *host, const char *port, unsigned *idx)
{
    struct lg_cluster *cl = r->cluster;
    unsigned before = cl->nmasters;
    char err[160];
    int i = master_index(cl, &r->o->redis, host, atoll(port));

    if (i < 0)
        return i;
    if (cl->nmasters > before &&
        lg_run_resolve(&cl->masters[i], &cl->addrs[i], err, sizeof(err)) < 0) {
        cl->nmasters--;
        return -EINVAL;
    }
    *idx = (unsigned)i;
    return 0;
}

void lg_cluster_set_owner(struct lg_run *r, unsigned slot, unsigned idx)
{
    if (slot < LG_CLUSTER_SLOTS)
        r->cluster->owner[slot] = (uint8_t)idx;
}

unsigned lg_cluster_master_of(const struct lg_run *r, unsigned key)
{
    char name[128];
    size_t n = lg_run_key_name(r, key, name, sizeof(name));

    return r->cluster->owner[pool_slot(name, n)];
}

/* Adds one master's figures to the sum. */
static void snap_add(struct lg_redis_snap *sum, const struct lg_redis_snap *one)
{
    sum->cpu_s += one->cpu_s;
    sum->cpu_sys_s += one->cpu_sys_s;
    sum->clients = sum->clients < 0 || one->clients < 0 ? -1 : sum->clients + one->clients;
    sum->pubsub_conns =
        sum->pubsub_conns < 0 || one->pubsub_conns < 0 ? -1 : sum->pubsub_conns + one->pubsub_conns;
    sum->pubsub_chans += one->pubsub_chans;
    for (unsigned i = 0; i < one->n; i++) {
        unsigned j = 0;

        while (j < sum->n && strcmp(sum->cmd[j].name, one->cmd[i].name) != 0)
            j++;
        if (j == sum->n) {
            if (sum->n == LG_MAX_CMDSTATS)
                continue;
            sum->cmd[j] = one->cmd[i];
            sum->n++;
            continue;
        }
        sum->cmd[j].calls += one->cmd[i].calls;
    }
}

int lg_cluster_snapshot(const struct lg_run *r, struct lg_redis_snap *out, char *err, size_t errlen)
{
    struct lg_redis_snap *one = malloc(sizeof(*one));
    int rc = one ? 0 : -ENOMEM;

    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; rc == 0 && i < r->cluster->nstat; i++) {
        rc = lg_redis_snapshot(&r->cluster->masters[i], one, err, errlen);
        if (rc == 0)
            snap_add(out, one);
    }
    free(one);
    out->ok = rc == 0;
    return rc;
}

/* Reads the DEL replies pending on ctx; adds the deleted counts. */
static int read_dels(redisContext *ctx, unsigned pending, uint64_t *deleted, char *err,
                     size_t errlen)
{
    int ret = 0;

    while (pending-- > 0) {
        redisReply *rep;

        if (redisGetReply(ctx, (void **)&rep) != REDIS_OK) {
            snprintf(err, errlen, "DEL: %.120s", ctx->errstr);
            return -EIO;
        }
        if (rep->type == REDIS_REPLY_INTEGER) {
            *deleted += (uint64_t)rep->integer;
        } else if (ret == 0) {
            snprintf(err, errlen, "DEL: %.120s",
                     rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
            ret = -EPROTO;
        }
        freeReplyObject(rep);
    }
    return ret;
}

/* DEL of every key of the run owned by master m, pipelined. */
static int clean_master(struct lg_run *r, unsigned m, uint64_t *deleted, char *err, size_t errlen)
{
    redisContext *ctx = lg_redis_connect(&r->cluster->masters[m], CLUSTER_TIMEOUT_S, err, errlen);
    unsigned pending = 0;
    int rc = ctx ? 0 : -ECONNREFUSED;

    for (unsigned k = 0; rc == 0 && k < r->nkeys; k++) {
        char name[128];

        if (lg_cluster_master_of(r, k) != m)
            continue;
        lg_run_key_name(r, k, name, sizeof(name));
        if (redisAppendCommand(ctx, "DEL %s", name) != REDIS_OK)
            rc = -ENOMEM;
        else if (++pending == 256) {
            rc = read_dels(ctx, pending, deleted, err, errlen);
            pending = 0;
        }
    }
    if (rc == 0)
        rc = read_dels(ctx, pending, deleted, err, errlen);
    if (ctx)
        redisFree(ctx);
    return rc;
}

void lg_cluster_clean(struct lg_run *r)
{
    struct lg_result *res = r->res;
    uint64_t deleted = 0;
    char err[160] = "";
    int rc = 0;

    for (unsigned m = 0; rc == 0 && m < r->cluster->nmasters; m++)
        rc = clean_master(r, m, &deleted, err, sizeof(err));
    if (rc == 0) {
        res->cleaned = true;
        res->keys_deleted = deleted;
        snprintf(res->clean_note, sizeof(res->clean_note),
                 "%llu keys deleted on the %u masters of the cluster", (unsigned long long)deleted,
                 r->cluster->nmasters);
    } else {
        snprintf(res->clean_note, sizeof(res->clean_note), "FAILED on the cluster: %.120s", err);
    }
}
