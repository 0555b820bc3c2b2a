/* The semaphore workload: each cycle takes one permit of the client's
 * semaphore (client i -> key i % --keys), holds it, and returns it.
 *
 * Requests. proxy: SEM.ACQUIRE key (blocks in the proxy) / SEM.RELEASE
 * key. direct: Redisson's RSemaphore scripts (spec section 6): tryAcquire
 * (GET; DECRBY 1 when at least 1 is left; replies 1 or 0) and release
 * (INCRBY 1, then PUBLISH the new count on redisson_sc:{key}), with PUBLISH
 * written in (Redisson passes the command name). A tryAcquire that gets 0
 * waits as Redisson's acquire() does, through lg_sub.c: subscribe to
 * redisson_sc:{key}, retry once subscribed, then retry on wake-ups (a
 * message N gives min(waiters on the subscription, N) of them, as
 * SemaphorePubSub releases its latch). Redisson then waits for a message
 * with no time limit; the bench re-checks after LG_SEM_RECHECK_MS without
 * one, so a lost message cannot hang a client (the report counts these
 * re-checks as latch timeouts).
 *
 * Set-up. Before a target runs, every one of its keys is deleted and set
 * to --permits through the target's own path (proxy: SEM.TRYSETPERMITS,
 * after a DEL on --redis; direct and twemproxy: DEL and Redisson's
 * trySetPermits script on the target's endpoint, which twemproxy routes by
 * the first key), on short blocking connections; lg_clean.c deletes them
 * again when the target is done. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_stats.h"
#include "common/buf.h"

#define SETUP_TIMEOUT_S 5

/* RedissonSemaphore.tryAcquireAsync0: 1 taken, 0 not. KEYS name; ARGV n. */
static const char try_acquire_lua[] =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "local val = redis.call('decrby', KEYS[1], ARGV[1]); "
    "return 1; end; "
    "return 0;";

/* RedissonSemaphore.releaseAsync: no reply. KEYS name, channel; ARGV n. */
static const char release_lua[] = "local value = redis.call('incrby', KEYS[1], ARGV[1]); "
                                  "redis.call('publish', KEYS[2], value); ";

/* RedissonSemaphore.trySetPermitsAsync: 1 set, 0 already there. KEYS
 * name, channel; ARGV n. */
static const char try_set_permits_lua[] = "local value = redis.call('get', KEYS[1]); "
                                          "if (value == false) then "
                                          "redis.call('set', KEYS[1], ARGV[1]); "
                                          "redis.call('publish', KEYS[2], ARGV[1]); "
                                          "return 1; end; "
                                          "return 0;";

int lg_sem_build_requests(struct lg_client *c)
{
    const struct lg_run *r = c->run;
    char name[128], chan[160];
    struct buf b;
    int rc;

    lg_run_key_name(r, c->key, name, sizeof(name));
    snprintf(chan, sizeof(chan), "redisson_sc:{%s}", name);
    buf_init(&b);
    if (r->redisson) {
        const char *acq[] = {"EVALSHA", r->scripts[LG_SCR_ACQ].sha, "1", name, "1"};
        const char *rel[] = {"EVALSHA", r->scripts[LG_SCR_REL].sha, "2", name, chan, "1"};

        rc = lg_resp_append(&b, 5, acq);
        lg_buf_take(&b, &c->acq_cmd, &c->acq_len);
        if (rc == 0)
            rc = lg_resp_append(&b, 6, rel);
    } else {
        const char *acq[] = {"SEM.ACQUIRE", name};
        const char *rel[] = {"SEM.RELEASE", name};

        rc = lg_resp_append(&b, 2, acq);
        lg_buf_take(&b, &c->acq_cmd, &c->acq_len);
        if (rc == 0)
            rc = lg_resp_append(&b, 2, rel);
    }
    lg_buf_take(&b, &c->rel_cmd, &c->rel_len);
    return rc;
}

void lg_sem_scripts(struct lg_run *r)
{
    r->scripts[LG_SCR_ACQ].lua = try_acquire_lua;
    r->scripts[LG_SCR_REL].lua = release_lua;
}

/* Checks that rep (consumed) is the integer want; else describes it in
 * r's error. Returns 0 or -EPROTO. */
static int expect_int(struct lg_run *r, redisContext *ctx, redisReply *rep, long long want,
                      const char *what)
{
    char *err = r->res->error;
    size_t cap = sizeof(r->res->error);
    int rc = 0;

    if (!rep) {
        snprintf(err, cap, "%s: %s", what, ctx->errstr);
        return -EPROTO;
    }
    if (rep->type != REDIS_REPLY_INTEGER || rep->integer != want) {
        snprintf(err, cap, "%s: expected :%lld, got %s", what, want,
                 rep->type == REDIS_REPLY_ERROR     ? rep->str
                 : rep->type == REDIS_REPLY_INTEGER ? "another integer"
                                                    : "another reply type");
        rc = -EPROTO;
    }
    freeReplyObject(rep);
    return rc;
}

/* DEL of key (1 deleted or 0 absent are both fine). */
static int del_key(struct lg_run *r, redisContext *redis, const char *name)
{
    redisReply *rep = redisCommand(redis, "DEL %s", name);

    if (!rep) {
        snprintf(r->res->error, sizeof(r->res->error), "DEL %.100s: %s", name, redis->errstr);
        return -EPROTO;
    }
    freeReplyObject(rep);
    return 0;
}

/* Deletes key and sets it to --permits through the target's path. */
static int create_one(struct lg_run *r, redisContext *redis, redisContext *proxy, unsigned key)
{
    unsigned p = r->o->permits;
    char name[128], chan[160];
    redisReply *rep;
    int rc;

    lg_run_key_name(r, key, name, sizeof(name));
    snprintf(chan, sizeof(chan), "redisson_sc:{%s}", name);
    rc = del_key(r, redis, name);
    if (rc < 0)
        return rc;
    if (proxy) {
        rep = redisCommand(proxy, "SEM.TRYSETPERMITS %s %u", name, p);
        return expect_int(r, proxy, rep, 1, "SEM.TRYSETPERMITS");
    }
    rep = redisCommand(redis, "EVAL %s 2 %s %s %u", try_set_permits_lua, name, chan, p);
    return expect_int(r, redis, rep, 1, "trySetPermits script");
}

int lg_sem_create(struct lg_run *r)
{
    const struct lg_endpoint *store = r->redisson ? r->cmd_ep : &r->o->redis;
    char *err = r->res->error;
    size_t cap = sizeof(r->res->error);
    redisContext *redis, *proxy = NULL;
    int rc = 0;

    redis = lg_redis_connect(store, SETUP_TIMEOUT_S, err, cap);
    if (!redis)
        return -ECONNREFUSED;
    if (!r->redisson) {
        proxy = lg_redis_connect(&r->o->proxy, SETUP_TIMEOUT_S, err, cap);
        if (!proxy) {
            rc = -ECONNREFUSED;
            goto out_redis;
        }
    }
    r->sems_set = true;
    for (unsigned k = 0; k < r->nkeys && rc == 0; k++)
        rc = create_one(r, redis, proxy, k);
    if (proxy)
        redisFree(proxy);
out_redis:
    redisFree(redis);
    return rc;
}
