/* Torture suite: the end-of-run checks, after every client exited.
 *
 * Leftovers: the lock Redis must come back to holding only the semaphore
 * (its count is judged with the history, see torture.c) and the fencing
 * counters
 * (redisson_lock_token:*, which never expire by design): no lock hash,
 * read-write timeout key, fair queue or timeout ZSET. Each proxy must come
 * back to no holds, no waiters of any kind, no wait channels, no pub/sub
 * subscriptions and one client (the checker's). Both are polled until the
 * longest LEASE, the watchdog lease and the subscription linger have run
 * out (a lock taken by an acquire whose reply was lost stays until its
 * lease ends, as documented), then reported.
 *
 * Resource: per lock name, writes counted by the resource scripts minus the
 * final value = lost updates (unfenced: allowed and counted; fenced: a
 * violation). Proxy memory: the peak RSS (VmHWM, and samples while a slow
 * reader ran) must stay under the bound. */
#include "tt_end.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DESC_MAX 2048

static const char *const proxy_fields[] = {
    "locks_held",  "lock_waiters", "wait_channels", "pubsub_channels",
    "sem_waiters", "psem_waiters", "latch_waiters",
};

static void append(char *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void append(char *d, const char *fmt, ...)
{
    size_t len = strlen(d);
    va_list ap;

    if (len + 1 >= DESC_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(d + len, DESC_MAX - len, fmt, ap);
    va_end(ap);
}

static long long get_int(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "GET %s", key);
    long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;

    if (r)
        freeReplyObject(r);
    return v;
}

/* Describes one leftover key of the lock Redis into d. */
static void describe_key(redisContext *c, const char *key, char *d)
{
    redisReply *t = redisCommand(c, "TYPE %s", key), *p = redisCommand(c, "PTTL %s", key);

    append(d, "\n    key %s (%s, pttl %lld ms)", key,
           t && t->type == REDIS_REPLY_STATUS ? t->str : "?",
           p && p->type == REDIS_REPLY_INTEGER ? p->integer : -3);
    if (t)
        freeReplyObject(t);
    if (p)
        freeReplyObject(p);
}

/* The proxy_uuid of every running proxy (check_leftovers fills it). */
static char live_uuids[TT_MAX_PROXIES][40];
static int nlive_uuids;

/* A semaphore permit ledger ({name}:lp-permits:<uuid>) of a proxy that is
 * gone (killed and restarted: a new uuid): what its clients held stays
 * taken, as the README says, and is among the leaks the faults explain. */
static bool dead_proxy_ledger(const char *k)
{
    const char *pre = "{" TT_SEM_NAME "}:lp-permits:";

    if (strncmp(k, pre, strlen(pre)) != 0)
        return false;
    for (int i = 0; i < nlive_uuids; i++) {
        if (strcmp(k + strlen(pre), live_uuids[i]) == 0)
            return false;
    }
    return true;
}

static void live_uuids_read(struct tt_env *e)
{
    nlive_uuids = 0;
    for (int i = 0; i < e->nproxies && nlive_uuids < TT_MAX_PROXIES; i++) {
        redisContext *c = e->proxy[i].pid > 0 ? pu_try_connect(e->proxy[i].port) : NULL;

        if (c && pu_info_str(c, "proxy_uuid", live_uuids[nlive_uuids], sizeof(live_uuids[0])))
            nlive_uuids++;
        if (c)
            redisFree(c);
    }
}

/* Adds the keys of one Redis (c) that may not stay to d and *count. */
static bool node_keys_clean(redisContext *c, char *d, long long *count)
{
    char cursor[32] = "0";
    bool clean = true;

    do {
        redisReply *r = redisCommand(c, "SCAN %s COUNT 1000", cursor);

        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            append(d, "\n    SCAN failed");
            if (r)
                freeReplyObject(r);
            return false;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const char *k = r->element[1]->element[i]->str;

            if (strncmp(k, "redisson_lock_token:", 20) == 0)
                continue;
            if (strncmp(k, "{lp-proxies}:", 13) == 0)
                continue; /* the proxies' registry (engine/sem_reap.h) */
            if (strcmp(k, TT_SEM_NAME) == 0)
                continue; /* its count is judged against the history (torture.c) */
            if (dead_proxy_ledger(k))
                continue;
            if (strstr(k, "}:lp-released:"))
                continue; /* SEM.RELEASE numbering (proxy/cmds/sem.c): expires in 120 s */
            clean = false;
            if ((*count)++ < 12)
                describe_key(c, k, d);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return clean;
}

/* --cluster: every master's keys; the semaphore on its owner. */
static bool cluster_keys_clean(struct tt_env *e, char *d, long long *count, long long *sem)
{
    bool clean = true;

    for (int i = 0; i < RCLUSTER_NODES; i++) {
        redisContext *c;

        if (!rcluster_is_master(e->cluster, i) || !(c = rcluster_connect(e->cluster, i)))
            continue;
        if (i == tt_env_owner(e, TT_SEM_NAME))
            *sem = get_int(c, TT_SEM_NAME);
        clean = node_keys_clean(c, d, count) && clean;
        redisFree(c);
    }
    return clean;
}

/* True when the lock Redis holds only what may stay; d lists the rest. */
static bool keys_clean(struct tt_env *e, char *d, long long *count, long long *sem)
{
    redisContext *c;

    *count = 0;
    if (e->cluster)
        return cluster_keys_clean(e, d, count, sem);
    if (e->sentinel) {
        bool clean;

        c = tt_env_sentinel_master(e);
        if (!c) {
            append(d, "\n    the master is unreachable");
            return false;
        }
        *sem = get_int(c, TT_SEM_NAME);
        clean = node_keys_clean(c, d, count);
        redisFree(c);
        return clean;
    }
    c = tt_env_admin(e);
    if (!c) {
        append(d, "\n    lock Redis unreachable");
        return false;
    }
    *sem = get_int(c, TT_SEM_NAME);
    return node_keys_clean(c, d, count);
}

/* True when proxy i has nothing left but our own connection. */
static bool proxy_clean(struct tt_env *e, int i, char *d)
{
    redisContext *c = e->proxy[i].pid > 0 ? pu_try_connect(e->proxy[i].port) : NULL;
    bool clean = true;
    char v[64];

    if (!c) {
        append(d, "\n    P%d unreachable", i);
        return false;
    }
    for (size_t k = 0; k < sizeof(proxy_fields) / sizeof(proxy_fields[0]); k++) {
        if (pu_info_str(c, proxy_fields[k], v, sizeof(v)) && atoll(v) != 0) {
            append(d, "\n    P%d %s:%s", i, proxy_fields[k], v);
            clean = false;
        }
    }
    if (pu_info_str(c, "connected_clients", v, sizeof(v)) && atoll(v) != 1) {
        append(d, "\n    P%d connected_clients:%s (only the checker's should be left)", i, v);
        clean = false;
    }
    redisFree(c);
    return clean;
}

static void check_leftovers(struct tt_env *e, struct tt_report *r, int settle_ms)
{
    long long deadline = pu_now_ms() + settle_ms;
    char keys[DESC_MAX], procs[DESC_MAX];
    bool kc, pc;

    live_uuids_read(e);
    for (;;) {
        keys[0] = procs[0] = '\0';
        kc = keys_clean(e, keys, &r->leftover_keys, &r->sem_count_end);
        pc = true;
        for (int i = 0; i < e->nproxies; i++)
            pc = proxy_clean(e, i, procs) && pc;
        if ((kc && pc) || pu_now_ms() > deadline)
            break;
        pu_sleep_ms(250);
    }
    if (!kc)
        tt_report_add(r, "leftover", "",
                      "the lock Redis still holds state %d ms after the clients stopped:%s",
                      settle_ms, keys);
    if (!pc)
        tt_report_add(r, "leftover", "",
                      "a proxy still tracks state %d ms after the clients stopped:%s", settle_ms,
                      procs);
}

/* Lost updates of every name with a resource (keys uw:<name>, fw:<name>). */
static void check_resource(struct tt_env *e, struct tt_report *r)
{
    redisContext *c = pu_connect(e->res.port);
    redisReply *keys = redisCommand(c, "KEYS *w:*");
    char k[TT_NAME_MAX + 8];

    for (size_t i = 0; keys && keys->type == REDIS_REPLY_ARRAY && i < keys->elements; i++) {
        const char *key = keys->element[i]->str, *name = strchr(key, ':') + 1;
        bool fenced = key[0] == 'f';
        long long writes = get_int(c, key), val, lost;

        snprintf(k, sizeof(k), "%c:%s", fenced ? 'f' : 'u', name);
        val = get_int(c, k);
        lost = writes - val;
        if (fenced) {
            snprintf(k, sizeof(k), "frej:%s", name);
            r->fenced_writes += writes;
            r->fenced_lost += lost;
            r->fenced_rejected += get_int(c, k);
        } else {
            r->unfenced_writes += writes;
            r->unfenced_lost += lost;
        }
        if (fenced && lost != 0)
            tt_report_add(r, "lost-update", name,
                          "the fenced resource of %s lost %lld of %lld accepted writes (final "
                          "value %lld): a stale token got through",
                          name, lost, writes, val);
    }
    if (keys)
        freeReplyObject(keys);
    redisFree(c);
}

static void check_memory(struct tt_env *e, struct tt_report *r)
{
    long long limit = (long long)e->cfg->rss_limit_mb * 1024;

    tt_env_watch(e);
    for (int i = 0; i < e->nproxies; i++) {
        r->rss_peak_kb[i] = e->rss_peak_kb[i];
        r->rss_end_kb[i] = tt_env_proxy_rss_kb(e, i);
        if (r->rss_peak_kb[i] > limit)
            tt_report_add(r, "memory", "",
                          "lockproxy P%d peak RSS %lld KB is over the %d MB bound (a client's "
                          "unread replies or queued requests are not limited)",
                          i, r->rss_peak_kb[i], e->cfg->rss_limit_mb);
    }
}

void tt_end_checks(struct tt_env *e, struct tt_report *r, int settle_ms)
{
    check_memory(e, r);
    check_leftovers(e, r, settle_ms);
    check_resource(e, r);
}
