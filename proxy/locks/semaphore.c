/* Semaphores over Redisson's layouts (SEM.*: RSemaphore, spec section 6;
 * PSEM.*: RPermitExpirableSemaphore, section 7). Blocking acquires run on
 * px_syncop (sync.c), shared with the count-down latch.
 *
 * Design.
 *
 * Permits taken through the proxy are tracked per connection (who frees
 * what: the tracking entries are owned by this module, linked on the
 * connection's owned list and in one of two module tables):
 *   sem_held   (connection id, name) -> permits taken and not released by
 *              that connection; SEM.RELEASE on the same connection lowers
 *              it (never below 0: releasing more than you took is allowed,
 *              as in Redisson, but only tracked permits are returned);
 *   psem_held  (name, permit id) -> the connection that took it; dropped by
 *              PSEM.RELEASE from any connection, and at lease end.
 * When the connection closes, its entries are returned with the same
 * scripts a release uses (SEM: only if the key still exists, so a deleted
 * semaphore is not re-created) and freed. KEEP on an acquire skips the
 * tracking, as does a PSEM lease under --on-disconnect expire.
 *
 * Every script checks the types of its keys before writing (WRONGTYPE on
 * an RLock hash, a list, a non-integer string...), and every increase of a
 * count publishes the new count (decimal, > 0) on redisson_sc:{name}, so
 * Redisson's acquire() wakes. Rejected: one subscription per waiter
 * (Redisson's cost; pain point 1) and waiting without a re-check
 * (Redisson's acquire() hangs on a lost message; pain points 3, 18). */
#include "proxy/locks/semaphore.h"

#include <sys/random.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hmap.h"
#include "common/log.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/locks/lock.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define SEM_CHANNEL_PREFIX "redisson_sc:"
#define PSEM_SENTINEL      "922337203685477" /* score of a permit without lease */
#define PSEM_ID_LEN        16u               /* raw permit id bytes */
#define CHAN_CAP           (PX_NAME_MAX + 64u)

struct sync_stats {
    uint64_t sem_acquired;  /* permits taken by SEM.(TRY)ACQUIRE */
    uint64_t sem_returned;  /* permits returned for closed connections */
    int64_t sem_tracked;    /* permits tracked for connections now */
    uint64_t psem_acquired; /* permits taken by PSEM.(TRY)ACQUIRE */
    uint64_t psem_returned; /* permits returned for closed connections */
    int64_t psem_tracked;   /* permit ids tracked for connections now */
};

static struct sync_stats stats;

/* ---- scripts ---------------------------------------------------------------- */

enum sem_script {
    SEM_TRYSET = 0,     /* KEYS name, chan; ARGV n -> 1 | 0 */
    SEM_ADD = 1,        /* KEYS name, chan; ARGV delta -> new count */
    SEM_ACQUIRE = 2,    /* KEYS name; ARGV n -> {1,left} | {0,avail} | {-1,0} no key */
    SEM_RELEASE = 3,    /* KEYS name, chan; ARGV n, only-if-exists -> {1,new} | {0,0} */
    SEM_AVAILABLE = 4,  /* KEYS name -> count */
    SEM_DRAIN = 5,      /* KEYS name -> permits drained */
    PSEM_TRYSET = 6,    /* KEYS name, timeout, chan; ARGV n -> 1 | 0 */
    PSEM_ACQUIRE = 7,   /* ... ARGV now, expiry, id, sentinel -> {1,left} | {0,next} | {-1,0} */
    PSEM_RELEASE = 8,   /* ... ARGV id, now -> 1 | 0 expired | -1 unknown */
    PSEM_AVAILABLE = 9, /* ... ARGV now -> count */
    SEM_NSCRIPTS = 10,
};

#define SEM_CHECK PX_LUA_CHECK_COUNT("semaphore")

/* Also refuses a "{name}:timeout" that is not a ZSET. */
#define PSEM_CHECK                                                              \
    SEM_CHECK "local tt = redis.call('type', KEYS[2])['ok']; "                  \
              "if tt ~= 'none' and tt ~= 'zset' then return redis.error_reply(" \
              "'WRONGTYPE the permit set of the name holds a ' .. tt .. ', not a zset'); end; "

/* Lazy reclaim: permits whose lease ended (score <= now, ARGV[1]) go back. */
#define PSEM_RECLAIM                                                     \
    "local gone = redis.call('zremrangebyscore', KEYS[2], 0, ARGV[1]); " \
    "if gone > 0 then local v = redis.call('incrby', KEYS[1], gone); "   \
    "if v > 0 then redis.call('publish', KEYS[3], v); end; cur = tostring(v); end; "

static const char sem_tryset_lua[] = SEM_CHECK "if cur then return 0; end; "
                                               "redis.call('set', KEYS[1], ARGV[1]); "
                                               "redis.call('publish', KEYS[2], ARGV[1]); "
                                               "return 1;";

/* Redisson's addPermits: the count may go down (and below 0); only an
 * increase publishes, and only a positive count. */
static const char sem_add_lua[] =
    SEM_CHECK "local v = redis.call('incrby', KEYS[1], ARGV[1]); "
              "if tonumber(ARGV[1]) > 0 and v > 0 then redis.call('publish', KEYS[2], v); end; "
              "return v;";

static const char sem_acquire_lua[] =
    SEM_CHECK "if not cur then return {-1, 0}; end; "
              "if tonumber(cur) >= tonumber(ARGV[1]) then "
              "return {1, redis.call('decrby', KEYS[1], ARGV[1])}; end; "
              "return {0, tonumber(cur)};";

static const char sem_release_lua[] =
    SEM_CHECK "if ARGV[2] == '1' and not cur then return {0, 0}; end; "
              "local v = redis.call('incrby', KEYS[1], ARGV[1]); "
              "if v > 0 then redis.call('publish', KEYS[2], v); end; "
              "return {1, v};";

static const char sem_available_lua[] = SEM_CHECK "return tonumber(cur or '0');";

/* drainPermits: takes every available permit (DECRBY keeps a TTL). */
static const char sem_drain_lua[] = SEM_CHECK "local v = tonumber(cur or '0'); "
                                              "if v <= 0 then return 0; end; "
                                              "redis.call('decrby', KEYS[1], v); "
                                              "return v;";

static const char psem_tryset_lua[] = PSEM_CHECK "if cur then return 0; end; "
                                                 "redis.call('set', KEYS[1], ARGV[1]); "
                                                 "redis.call('publish', KEYS[3], ARGV[1]); "
                                                 "return 1;";

/* tryAcquire(1, lease): take one permit and record its id with its expiry
 * (the sentinel for none); the ZSET follows the count's TTL. Otherwise
 * report the earliest expiry (the time worth re-checking at). */
static const char psem_acquire_lua[] =
    PSEM_CHECK PSEM_RECLAIM "if not cur then return {-1, 0}; end; "
                            "if tonumber(cur) >= 1 then "
                            "local v = redis.call('decrby', KEYS[1], 1); "
                            "redis.call('zadd', KEYS[2], ARGV[2], ARGV[3]); "
                            "local ttl = redis.call('pttl', KEYS[1]); "
                            "if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; "
                            "return {1, v}; end; "
                            "local e = redis.call('zrange', KEYS[2], 0, 0, 'withscores'); "
                            "if e[2] and tonumber(e[2]) ~= tonumber(ARGV[4]) then "
                            "return {0, tonumber(e[2])}; end; "
                            "return {0, -1};";

/* release(id): unknown -> -1; else the permit (and any expired one) goes
 * back; 0 if it had expired before the release, else 1. */
static const char psem_release_lua[] =
    PSEM_CHECK "local s = redis.call('zscore', KEYS[2], ARGV[1]); "
               "if not s then return -1; end; "
               "redis.call('zrem', KEYS[2], ARGV[1]); "
               "local n = 1 + redis.call('zremrangebyscore', KEYS[2], 0, ARGV[2]); "
               "local v = redis.call('incrby', KEYS[1], n); "
               "if v > 0 then redis.call('publish', KEYS[3], v); end; "
               "if tonumber(s) <= tonumber(ARGV[2]) then return 0; end; "
               "return 1;";

static const char psem_available_lua[] = PSEM_CHECK PSEM_RECLAIM "return tonumber(cur or '0');";

static const struct pool_script sem_scripts[SEM_NSCRIPTS] = {
    {"sem_tryset", sem_tryset_lua},       {"sem_add", sem_add_lua},
    {"sem_acquire", sem_acquire_lua},     {"sem_release", sem_release_lua},
    {"sem_available", sem_available_lua}, {"sem_drain", sem_drain_lua},
    {"psem_tryset", psem_tryset_lua},     {"psem_acquire", psem_acquire_lua},
    {"psem_release", psem_release_lua},   {"psem_available", psem_available_lua},
};

static unsigned sem_script_base;
const struct px_script_set px_sem_script_set = {sem_scripts, SEM_NSCRIPTS, &sem_script_base};

static unsigned script_id(enum sem_script s)
{
    return sem_script_base + (unsigned)s;
}

/* ---- keys and channels -------------------------------------------------- */

/* The name, the channel and (PSEM) the permit set, as script keys. */
struct sem_keys {
    const char *argv[8]; /* borrowed: keys then arguments (some point into chan/zset) */
    size_t lens[8];      /* their lengths */
    char chan[CHAN_CAP]; /* owned: redisson_sc:{name} */
    char zset[CHAN_CAP]; /* owned: {name}:timeout */
};

static size_t sem_channel(const char *name, size_t len, char *out, size_t cap)
{
    return px_channel_name(out, cap, SEM_CHANNEL_PREFIX, name, len);
}

static size_t sem_op_channel(const struct px_syncop *op, char *out, size_t cap)
{
    return sem_channel(op->req->argv[1].p, op->req->argv[1].len, out, cap);
}

/* Fills keys for name: {name, chan} (2) or, with psem, {name, zset, chan}
 * (3). Returns the key count. */
static int sem_keys_fill(struct sem_keys *k, const char *name, size_t len, bool psem)
{
    size_t zlen;

    k->argv[0] = name;
    k->lens[0] = len;
    k->argv[psem ? 2 : 1] = k->chan;
    k->lens[psem ? 2 : 1] = sem_channel(name, len, k->chan, sizeof(k->chan));
    if (!psem)
        return 2;
    zlen = px_channel_name(k->zset, sizeof(k->zset) - 8, "", name, len);
    memcpy(k->zset + zlen, ":timeout", 9);
    k->argv[1] = k->zset;
    k->lens[1] = zlen + 8;
    return 3;
}

static void keys_arg(struct sem_keys *k, int i, const char *p, size_t len)
{
    k->argv[i] = p;
    k->lens[i] = len;
}

/* ---- permit tracking ------------------------------------------------------ */

static struct hmap held_maps[2]; /* [0]: struct sem_held, [1]: struct psem_held */
static bool held_maps_ready;

static struct hmap *held_map(int which)
{
    if (!held_maps_ready) {
        if (hmap_init(&held_maps[0], 64) < 0)
            return NULL;
        if (hmap_init(&held_maps[1], 64) < 0) {
            hmap_deinit(&held_maps[0]);
            return NULL;
        }
        held_maps_ready = true;
    }
    return &held_maps[which];
}

/* Fire-and-forget return of permits: failures are only logged. */
static void return_on_reply(void *arg, const redisReply *r, int err)
{
    (void)arg;
    if (err < 0)
        log_msg(LOG_LVL_WARN, "returning semaphore permits failed: %s", strerror(-err));
    else if (r->type == REDIS_REPLY_ERROR)
        log_msg(LOG_LVL_WARN, "returning semaphore permits failed: %.*s", (int)r->len, r->str);
}

static void sem_send_return(struct px_server *srv, uint64_t hint, const char *name, size_t len,
                            int64_t permits)
{
    struct sem_keys k;
    char n[24];
    int nk = sem_keys_fill(&k, name, len, false);

    keys_arg(&k, nk, n, (size_t)snprintf(n, sizeof(n), "%lld", (long long)permits));
    keys_arg(&k, nk + 1, "1", 1);
    if (px_metrics_eval(srv, hint, script_id(SEM_RELEASE), nk, nk + 2, k.argv, k.lens,
                        return_on_reply, NULL) < 0)
        log_msg(LOG_LVL_WARN, "cannot return %lld semaphore permits: Redis unavailable",
                (long long)permits);
    else
        stats.sem_returned += (uint64_t)permits;
}

static void psem_send_return(struct px_server *srv, uint64_t hint, const char *name, size_t len,
                             const unsigned char *id)
{
    struct sem_keys k;
    char now[24];
    int nk = sem_keys_fill(&k, name, len, true);

    keys_arg(&k, nk, (const char *)id, PSEM_ID_LEN);
    keys_arg(&k, nk + 1, now,
             (size_t)snprintf(now, sizeof(now), "%llu", (unsigned long long)clock_wall_ms()));
    if (px_metrics_eval(srv, hint, script_id(PSEM_RELEASE), nk, nk + 2, k.argv, k.lens,
                        return_on_reply, NULL) < 0)
        log_msg(LOG_LVL_WARN, "cannot return a semaphore permit: Redis unavailable");
    else
        stats.psem_returned++;
}

struct sem_held {
    struct hmap_node node; /* in held_map(0), by (cl_id, name) */
    struct px_owned owned; /* in cl->owned: return the permits on close */
    struct px_server *srv; /* borrowed */
    uint64_t cl_id;        /* the connection that took the permits */
    int64_t permits;       /* taken and not released by that connection */
    size_t nlen;           /* name length */
    char name[];           /* owned: the semaphore name */
};

static uint64_t sem_held_hash(uint64_t cl_id, const char *name, size_t len)
{
    return hash_bytes(name, len) ^ (cl_id * 0x9e3779b97f4a7c15ull);
}

static struct sem_held *sem_held_find(uint64_t cl_id, const char *name, size_t len)
{
    struct hmap *m = held_map(0);
    struct hmap_node *n = m ? hmap_first(m, sem_held_hash(cl_id, name, len)) : NULL;

    for (; n; n = hmap_next(n)) {
        struct sem_held *h = LP_CONTAINER_OF(n, struct sem_held, node);

        if (h->cl_id == cl_id && h->nlen == len && memcmp(h->name, name, len) == 0)
            return h;
    }
    return NULL;
}

static void sem_held_free(struct sem_held *h)
{
    stats.sem_tracked -= h->permits;
    hmap_remove(held_map(0), &h->node);
    list_del_init(&h->owned.node);
    free(h);
}

static void sem_held_gone(struct px_owned *o, struct px_client *cl)
{
    struct sem_held *h = LP_CONTAINER_OF(o, struct sem_held, owned);

    if (h->permits > 0)
        sem_send_return(h->srv, cl->id, h->name, h->nlen, h->permits);
    sem_held_free(h);
}

/* cl took n permits of name. On -ENOMEM they are simply not tracked. */
static void sem_held_add(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_held *h = sem_held_find(cl->id, name, len);

    if (!h) {
        h = held_map(0) ? calloc(1, sizeof(*h) + len + 1) : NULL;
        if (!h)
            return;
        h->srv = cl->srv;
        h->cl_id = cl->id;
        h->nlen = len;
        memcpy(h->name, name, len);
        h->owned.gone = sem_held_gone;
        hmap_insert(held_map(0), &h->node, sem_held_hash(cl->id, name, len));
        px_client_own(cl, &h->owned);
    }
    h->permits += n;
    stats.sem_tracked += n;
}

/* cl releases n permits of name: fewer are tracked (never below 0). */
static void sem_held_sub(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_held *h = sem_held_find(cl->id, name, len);

    if (!h)
        return;
    if (n >= h->permits)
        return sem_held_free(h);
    h->permits -= n;
    stats.sem_tracked -= n;
}

struct psem_held {
    struct hmap_node node;         /* in held_map(1), by (name, id) */
    struct px_owned owned;         /* in cl->owned: return the permit on close */
    struct sched_timer lease_end;  /* leased permit: forget it once expired */
    struct px_server *srv;         /* borrowed */
    unsigned char id[PSEM_ID_LEN]; /* raw permit id */
    size_t nlen;                   /* name length */
    char name[];                   /* owned: the semaphore name */
};

static uint64_t psem_held_hash(const char *name, size_t len, const unsigned char *id)
{
    return hash_bytes(name, len) ^ hash_bytes(id, PSEM_ID_LEN);
}

static struct psem_held *psem_held_find(const char *name, size_t len, const unsigned char *id)
{
    struct hmap *m = held_map(1);
    struct hmap_node *n = m ? hmap_first(m, psem_held_hash(name, len, id)) : NULL;

    for (; n; n = hmap_next(n)) {
        struct psem_held *h = LP_CONTAINER_OF(n, struct psem_held, node);

        if (h->nlen == len && memcmp(h->name, name, len) == 0 &&
            memcmp(h->id, id, PSEM_ID_LEN) == 0)
            return h;
    }
    return NULL;
}

static void psem_held_free(struct psem_held *h)
{
    stats.psem_tracked--;
    sched_loop_timer_del(h->srv->loop, &h->lease_end);
    hmap_remove(held_map(1), &h->node);
    list_del_init(&h->owned.node);
    free(h);
}

static void psem_held_gone(struct px_owned *o, struct px_client *cl)
{
    struct psem_held *h = LP_CONTAINER_OF(o, struct psem_held, owned);

    psem_send_return(h->srv, cl->id, h->name, h->nlen, h->id);
    psem_held_free(h);
}

static void psem_held_on_lease_end(struct sched_timer *t)
{
    psem_held_free(LP_CONTAINER_OF(t, struct psem_held, lease_end));
}

/* cl took permit id of name (lease_ms < 0: no lease). */
static void psem_held_add(struct px_client *cl, const char *name, size_t len,
                          const unsigned char *id, int64_t lease_ms)
{
    struct psem_held *h = held_map(1) ? calloc(1, sizeof(*h) + len + 1) : NULL;

    if (!h)
        return;
    h->srv = cl->srv;
    memcpy(h->id, id, PSEM_ID_LEN);
    h->nlen = len;
    memcpy(h->name, name, len);
    h->owned.gone = psem_held_gone;
    sched_timer_init(&h->lease_end, psem_held_on_lease_end);
    if (lease_ms >= 0)
        sched_loop_timer_in(cl->srv->loop, &h->lease_end, (uint64_t)lease_ms);
    hmap_insert(held_map(1), &h->node, psem_held_hash(name, len, id));
    px_client_own(cl, &h->owned);
    stats.psem_tracked++;
}

/* ---- SEM.TRYSETPERMITS / ADDPERMITS / RELEASE / AVAILABLE / DRAIN ---------- */

/* Runs a SEM script with keys {name, chan} (or {name} when nkeys is 1) and
 * at most two arguments. */
static void sem_simple(struct px_req *req, enum sem_script s, int nkeys, const char *a1, size_t l1,
                       const char *a2, size_t l2, px_sync_reply_fn *fmt)
{
    struct sem_keys k;
    int nk = sem_keys_fill(&k, req->argv[1].p, req->argv[1].len, false);
    int argc;

    if (nkeys == 1)
        nk = 1;
    argc = nk;
    if (a1)
        keys_arg(&k, argc++, a1, l1);
    if (a2)
        keys_arg(&k, argc++, a2, l2);
    px_sync_call(req, script_id(s), nk, argc, k.argv, k.lens, fmt);
}

static void sem_cmd_trysetpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_args_check_name(req, "name") < 0 || px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    sem_simple(req, SEM_TRYSET, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL,
               0, px_sync_reply_int);
}

static void sem_cmd_addpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_args_check_name(req, "name") < 0 ||
        px_args_parse_count(req, 2, "permits", -(int64_t)PX_ARGS_MAX_COUNT, &n) < 0)
        return px_req_done(req);
    sem_simple(req, SEM_ADD, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL, 0,
               px_sync_reply_int);
}

/* {1, count} (or {0, 0}: the key was gone) -> the new count. */
static void sem_reply_release(struct px_req *req, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return px_sync_reply_upstream(req, -EPROTO);
    px_reply_int(px_req_out(req), r->element[1]->integer);
}

static void sem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    int64_t n = 1;
    char nbuf[24];

    if (px_args_check_name(req, "name") < 0 ||
        (req->argc > 2 && px_args_parse_count(req, 2, "permits", 1, &n) < 0))
        return px_req_done(req);
    sem_held_sub(req->cl, name->p, name->len, n);
    sem_simple(req, SEM_RELEASE, 2, nbuf,
               (size_t)snprintf(nbuf, sizeof(nbuf), "%lld", (long long)n), "0", 1,
               sem_reply_release);
}

static void sem_cmd_available(struct px_req *req)
{
    if (px_args_check_name(req, "name") < 0)
        return px_req_done(req);
    sem_simple(req, SEM_AVAILABLE, 1, NULL, 0, NULL, 0, px_sync_reply_int);
}

static void sem_cmd_drain(struct px_req *req)
{
    if (px_args_check_name(req, "name") < 0)
        return px_req_done(req);
    sem_simple(req, SEM_DRAIN, 1, NULL, 0, NULL, 0, px_sync_reply_int);
}

/* ---- SEM.ACQUIRE / SEM.TRYACQUIRE ---------------------------------------- */

struct semop {
    struct px_syncop sync; /* the wait */
    int64_t permits;       /* how many to take */
    bool keep;             /* KEEP: not returned on disconnect */
};

static void reply_notinit(struct px_req *req)
{
    px_reply_error(px_req_out(req),
                   "NOTINIT semaphore '%.*s' has no permits set (use TRYSETPERMITS first)",
                   (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p);
}

/* Reads a script's {status, value} pair. */
static bool pair_reply(const redisReply *r, long long *status, long long *value)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return false;
    *status = r->element[0]->integer;
    *value = r->element[1]->integer;
    return true;
}

static int semop_send(struct px_syncop *op)
{
    struct semop *s = LP_CONTAINER_OF(op, struct semop, sync);
    const struct px_arg *name = &op->req->argv[1];
    char n[24];
    const char *argv[2] = {name->p, n};
    size_t lens[2] = {name->len, 0};

    lens[1] = (size_t)snprintf(n, sizeof(n), "%lld", (long long)s->permits);
    return px_sync_eval(op, script_id(SEM_ACQUIRE), 1, 2, argv, lens);
}

static void semop_acquired(struct semop *s)
{
    struct px_req *req = s->sync.req;
    const struct px_arg *name = &req->argv[1];

    stats.sem_acquired += (uint64_t)s->permits;
    if (req->cl->closing) {
        if (!s->keep)
            sem_send_return(s->sync.srv, req->cl->id, name->p, name->len, s->permits);
        return;
    }
    if (!s->keep)
        sem_held_add(req->cl, name->p, name->len, s->permits);
    px_reply_status(px_req_out(req), "OK");
}

static enum px_sync_res semop_done(struct px_syncop *op, const redisReply *r, uint64_t *hint_ms)
{
    struct semop *s = LP_CONTAINER_OF(op, struct semop, sync);
    long long status, value;

    (void)hint_ms;
    if (!pair_reply(r, &status, &value)) {
        px_sync_reply_upstream(op->req, -EPROTO);
        return PX_SYNC_DONE;
    }
    if (status == 1) {
        semop_acquired(s);
        return PX_SYNC_DONE;
    }
    if (status < 0) {
        reply_notinit(op->req);
        return PX_SYNC_DONE;
    }
    return PX_SYNC_WAIT;
}

static void semop_destroy(struct px_syncop *op)
{
    free(LP_CONTAINER_OF(op, struct semop, sync));
}

static const struct px_sync_ops semop_ops = {
    PX_SYNC_SEM, PX_WAKE_COUNT, sem_op_channel, semop_send, semop_done, semop_destroy,
};

struct acquire_args {
    int64_t permits;  /* how many (SEM) */
    int64_t wait_ms;  /* WAIT, or -1 (forever) */
    int64_t lease_ms; /* LEASE (PSEM), or -1 */
    bool keep;        /* KEEP */
};

static bool is_keyword(const struct px_arg *a)
{
    return px_args_is(a, "WAIT") || px_args_is(a, "KEEP") || px_args_is(a, "LEASE");
}

/* One option at argv[*i] ("KEEP", or "WAIT ms" / "LEASE ms" when allowed).
 * Advances *i. Replies and returns -EINVAL on bad input. */
static int parse_option(struct px_req *req, int *i, bool wait_ok, bool lease_ok,
                        struct acquire_args *a)
{
    const struct px_arg *opt = &req->argv[*i];
    bool wait = wait_ok && px_args_is(opt, "WAIT");
    bool lease = lease_ok && px_args_is(opt, "LEASE");
    const char *keyword = wait ? "WAIT" : "LEASE";

    if (px_args_is(opt, "KEEP")) {
        a->keep = true;
        *i += 1;
        return 0;
    }
    if (!wait && !lease) {
        px_args_reply_syntax(req, opt);
        return -EINVAL;
    }
    if (*i + 1 >= req->argc) {
        px_args_reply_no_value(req, keyword, strlen(keyword));
        return -EINVAL;
    }
    *i += 2;
    if (wait)
        return px_args_parse_ms(req, *i - 1, keyword, 0, &a->wait_ms);
    return px_args_parse_ms(req, *i - 1, keyword, 1, &a->lease_ms);
}

/* "name [n] [WAIT ms] [LEASE ms] [KEEP]" with the parts the command takes. */
static int parse_acquire(struct px_req *req, bool count_ok, bool wait_ok, bool lease_ok,
                         struct acquire_args *a)
{
    int i = 2;

    a->permits = 1;
    a->wait_ms = -1;
    a->lease_ms = -1;
    a->keep = false;
    if (px_args_check_name(req, "name") < 0)
        return -EINVAL;
    if (count_ok && req->argc > 2 && !is_keyword(&req->argv[2])) {
        if (px_args_parse_count(req, 2, "permits", 1, &a->permits) < 0)
            return -EINVAL;
        i = 3;
    }
    while (i < req->argc) {
        if (parse_option(req, &i, wait_ok, lease_ok, a) < 0)
            return -EINVAL;
    }
    return 0;
}

static void sem_acquire_start(struct px_req *req, bool wait_ok)
{
    struct acquire_args a;
    struct semop *s;

    if (parse_acquire(req, true, wait_ok, false, &a) < 0)
        return px_req_done(req);
    s = calloc(1, sizeof(*s));
    if (!s) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    s->permits = a.permits;
    s->keep = a.keep;
    s->sync.ops = &semop_ops;
    px_sync_start(&s->sync, req, wait_ok ? a.wait_ms : 0);
}

static void sem_cmd_acquire(struct px_req *req)
{
    sem_acquire_start(req, true);
}

static void sem_cmd_tryacquire(struct px_req *req)
{
    sem_acquire_start(req, false);
}

static bool sync_may_block(const struct px_req *req)
{
    return !px_sync_wait_zero(req);
}

/* ---- PSEM.* ------------------------------------------------------------------ */

struct psemop {
    struct px_syncop sync;         /* the wait */
    int64_t lease_ms;              /* LEASE, or -1 */
    bool keep;                     /* KEEP: not returned on disconnect */
    unsigned char id[PSEM_ID_LEN]; /* the permit id this request asks for */
};

static void hex_encode(const unsigned char *id, char *out)
{
    static const char digits[] = "0123456789abcdef";
    unsigned i;

    for (i = 0; i < PSEM_ID_LEN; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * PSEM_ID_LEN] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_decode(const struct px_arg *a, unsigned char *id)
{
    unsigned i;

    if (a->len != 2 * PSEM_ID_LEN)
        return -EINVAL;
    for (i = 0; i < PSEM_ID_LEN; i++) {
        int hi = hex_digit(a->p[2 * i]), lo = hex_digit(a->p[2 * i + 1]);

        if (hi < 0 || lo < 0)
            return -EINVAL;
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static void psem_now(char *buf, size_t cap, size_t *len)
{
    *len = (size_t)snprintf(buf, cap, "%llu", (unsigned long long)clock_wall_ms());
}

static int psemop_send(struct px_syncop *op)
{
    struct psemop *p = LP_CONTAINER_OF(op, struct psemop, sync);
    const struct px_arg *name = &op->req->argv[1];
    uint64_t now = clock_wall_ms();
    struct sem_keys k;
    char nowb[24], exp[24];
    int nk = sem_keys_fill(&k, name->p, name->len, true);

    keys_arg(&k, nk, nowb, (size_t)snprintf(nowb, sizeof(nowb), "%llu", (unsigned long long)now));
    if (p->lease_ms < 0)
        keys_arg(&k, nk + 1, PSEM_SENTINEL, strlen(PSEM_SENTINEL));
    else
        keys_arg(&k, nk + 1, exp,
                 (size_t)snprintf(exp, sizeof(exp), "%llu",
                                  (unsigned long long)(now + (uint64_t)p->lease_ms)));
    keys_arg(&k, nk + 2, (const char *)p->id, PSEM_ID_LEN);
    keys_arg(&k, nk + 3, PSEM_SENTINEL, strlen(PSEM_SENTINEL));
    return px_sync_eval(op, script_id(PSEM_ACQUIRE), nk, nk + 4, k.argv, k.lens);
}

/* Whether a permit of p is returned when its connection closes. */
static bool psem_returnable(const struct psemop *p)
{
    return !p->keep && (p->lease_ms < 0 || p->sync.srv->opts.on_disc == PX_DISCONNECT_RELEASE);
}

static void psemop_acquired(struct psemop *p)
{
    struct px_req *req = p->sync.req;
    const struct px_arg *name = &req->argv[1];
    char hex[2 * PSEM_ID_LEN + 1];

    stats.psem_acquired++;
    if (req->cl->closing) {
        if (psem_returnable(p))
            psem_send_return(p->sync.srv, req->cl->id, name->p, name->len, p->id);
        return;
    }
    if (psem_returnable(p))
        psem_held_add(req->cl, name->p, name->len, p->id, p->lease_ms);
    hex_encode(p->id, hex);
    px_reply_bulk(px_req_out(req), hex, 2 * PSEM_ID_LEN);
}

static enum px_sync_res psemop_done(struct px_syncop *op, const redisReply *r, uint64_t *hint_ms)
{
    struct psemop *p = LP_CONTAINER_OF(op, struct psemop, sync);
    long long status, next;
    uint64_t now = clock_wall_ms();

    if (!pair_reply(r, &status, &next)) {
        px_sync_reply_upstream(op->req, -EPROTO);
        return PX_SYNC_DONE;
    }
    if (status == 1) {
        psemop_acquired(p);
        return PX_SYNC_DONE;
    }
    if (status < 0) {
        reply_notinit(op->req);
        return PX_SYNC_DONE;
    }
    /* A leased permit frees up at its expiry: nobody publishes then. */
    if (next > 0)
        *hint_ms = (uint64_t)next > now ? (uint64_t)next - now + 1 : 1;
    return PX_SYNC_WAIT;
}

static void psemop_destroy(struct px_syncop *op)
{
    free(LP_CONTAINER_OF(op, struct psemop, sync));
}

static const struct px_sync_ops psemop_ops = {
    PX_SYNC_PSEM, PX_WAKE_COUNT, sem_op_channel, psemop_send, psemop_done, psemop_destroy,
};

static void psem_acquire_start(struct px_req *req, bool wait_ok)
{
    struct acquire_args a;
    struct psemop *p;

    if (parse_acquire(req, false, wait_ok, true, &a) < 0)
        return px_req_done(req);
    p = calloc(1, sizeof(*p));
    if (!p || getrandom(p->id, PSEM_ID_LEN, 0) != (ssize_t)PSEM_ID_LEN) {
        free(p);
        px_reply_error(px_req_out(req), "ERR cannot create a permit id");
        return px_req_done(req);
    }
    p->lease_ms = a.lease_ms;
    p->keep = a.keep;
    p->sync.ops = &psemop_ops;
    px_sync_start(&p->sync, req, wait_ok ? a.wait_ms : 0);
}

static void psem_cmd_acquire(struct px_req *req)
{
    psem_acquire_start(req, true);
}

static void psem_cmd_tryacquire(struct px_req *req)
{
    psem_acquire_start(req, false);
}

/* Runs a PSEM script with keys {name, zset, chan} and up to two args. */
static void psem_simple(struct px_req *req, enum sem_script s, const char *a1, size_t l1,
                        const char *a2, size_t l2, px_sync_reply_fn *fmt)
{
    struct sem_keys k;
    int nk = sem_keys_fill(&k, req->argv[1].p, req->argv[1].len, true);
    int argc = nk;

    if (a1)
        keys_arg(&k, argc++, a1, l1);
    if (a2)
        keys_arg(&k, argc++, a2, l2);
    px_sync_call(req, script_id(s), nk, argc, k.argv, k.lens, fmt);
}

static void psem_cmd_trysetpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_args_check_name(req, "name") < 0 || px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    psem_simple(req, PSEM_TRYSET, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL,
                0, px_sync_reply_int);
}

static void psem_reply_release(struct px_req *req, const redisReply *r)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return px_sync_reply_upstream(req, -EPROTO);
    if (r->integer >= 0) {
        px_reply_int(px_req_out(req), r->integer);
        return;
    }
    px_reply_error(
        px_req_out(req), "NOPERMIT permit '%.*s' of '%.*s' was already released or does not exist",
        (int)req->argv[2].len, req->argv[2].p, (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p);
}

static void psem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    unsigned char id[PSEM_ID_LEN];
    struct psem_held *h;
    char now[24];
    size_t nlen;

    if (px_args_check_name(req, "name") < 0)
        return px_req_done(req);
    if (hex_decode(&req->argv[2], id) < 0) {
        px_args_reply_bad(req, "permit id", "32 hex characters", &req->argv[2]);
        return px_req_done(req);
    }
    h = psem_held_find(name->p, name->len, id);
    if (h)
        psem_held_free(h);
    psem_now(now, sizeof(now), &nlen);
    psem_simple(req, PSEM_RELEASE, (const char *)id, PSEM_ID_LEN, now, nlen, psem_reply_release);
}

static void psem_cmd_available(struct px_req *req)
{
    char now[24];
    size_t nlen;

    if (px_args_check_name(req, "name") < 0)
        return px_req_done(req);
    psem_now(now, sizeof(now), &nlen);
    psem_simple(req, PSEM_AVAILABLE, now, nlen, NULL, 0, px_sync_reply_int);
}

/* ---- tables and INFO -------------------------------------------------------- */

static const struct px_cmd sem_cmds[] = {
    {"SEM.TRYSETPERMITS", 3, 3, sem_cmd_trysetpermits, NULL, 1},
    {"SEM.ADDPERMITS", 3, 3, sem_cmd_addpermits, NULL, 1},
    {"SEM.ACQUIRE", 2, 6, sem_cmd_acquire, sync_may_block, 1},
    {"SEM.TRYACQUIRE", 2, 4, sem_cmd_tryacquire, NULL, 1},
    {"SEM.RELEASE", 2, 3, sem_cmd_release, NULL, 1},
    {"SEM.AVAILABLE", 2, 2, sem_cmd_available, NULL, 1},
    {"SEM.DRAIN", 2, 2, sem_cmd_drain, NULL, 1},
    {"PSEM.TRYSETPERMITS", 3, 3, psem_cmd_trysetpermits, NULL, 1},
    {"PSEM.ACQUIRE", 2, 7, psem_cmd_acquire, sync_may_block, 1},
    {"PSEM.TRYACQUIRE", 2, 5, psem_cmd_tryacquire, NULL, 1},
    {"PSEM.RELEASE", 3, 3, psem_cmd_release, NULL, 1},
    {"PSEM.AVAILABLE", 2, 2, psem_cmd_available, NULL, 1},
};
const struct px_cmd_set px_sem_cmd_set = {sem_cmds, LP_ARRAY_SIZE(sem_cmds)};

void px_sync_info(struct px_server *srv, struct buf *o)
{
    const struct sync_stats *s = &stats;

    (void)srv;
    buf_appendf(o,
                "# Sync\r\nsem_waiters:%llu\r\nsem_acquired:%llu\r\nsem_wait_timeouts:%llu\r\n"
                "sem_permits_tracked:%lld\r\nsem_permits_returned:%llu\r\n"
                "psem_waiters:%llu\r\npsem_acquired:%llu\r\npsem_wait_timeouts:%llu\r\n"
                "psem_permits_tracked:%lld\r\npsem_permits_returned:%llu\r\n"
                "latch_waiters:%llu\r\nlatch_wait_timeouts:%llu\r\n\r\n",
                (unsigned long long)px_sync_waiting_count[PX_SYNC_SEM],
                (unsigned long long)s->sem_acquired,
                (unsigned long long)px_sync_timeout_count[PX_SYNC_SEM], (long long)s->sem_tracked,
                (unsigned long long)s->sem_returned,
                (unsigned long long)px_sync_waiting_count[PX_SYNC_PSEM],
                (unsigned long long)s->psem_acquired,
                (unsigned long long)px_sync_timeout_count[PX_SYNC_PSEM], (long long)s->psem_tracked,
                (unsigned long long)s->psem_returned,
                (unsigned long long)px_sync_waiting_count[PX_SYNC_LATCH],
                (unsigned long long)px_sync_timeout_count[PX_SYNC_LATCH]);
}
