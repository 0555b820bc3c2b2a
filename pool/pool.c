/* The pool object: options, scripts, life cycle, routing (key -> node,
 * hint -> connection), submission, the request record free list and
 * stats. Request records live in req.c, a node and its connections in
 * node.c and rconn.c, the
 * channel table in pubsub.c, a cluster's topology in cluster.c and its
 * redirects in redirect.c, a Sentinel upstream's specifics in sentinel.c
 * (on top of cluster.c's node table).
 *
 * Routing is two-step: route() maps a request to the node that owns its
 * key, then the caller's hint picks one of that node's connections so
 * that one client's requests stay ordered on one pipeline. A single node
 * owns every key and the first step costs nothing: no slot is computed,
 * no command is kept for a re-send (single-node requests are never
 * re-sent elsewhere). A cluster computes the key's slot, indexes the slot
 * map, and keeps the formatted command in the request for MOVED/ASK. A
 * Sentinel master owns every slot: its requests use slot 0 (no CRC16)
 * and keep their command for a re-send after READONLY. */
#include "pool/pool.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/rconn.h"
#include "sched/loop.h"

void pool_opts_default(struct pool_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 6379;
    o->size = 2;
    o->connect_timeout_ms = 1000;
    o->request_timeout_ms = 3000;
    o->batch_max = 32;
    o->backoff_min_ms = 50;
    o->backoff_max_ms = 2000;
    o->pubsub_mode = POOL_PUBSUB_AUTO;
    o->cluster_refresh_ms = 1000;
}

/* ---- creation ------------------------------------------------------------ */

/* A cluster has only database 0 and needs a refresh period; sharded
 * pub/sub exists only in a cluster. A Sentinel upstream needs a master
 * name and a re-ask period, and is no cluster. */
static int opts_validate_upstream(const struct pool_opts *o)
{
    if (o->pubsub_mode != POOL_PUBSUB_AUTO && o->pubsub_mode != POOL_PUBSUB_SHARDED &&
        o->pubsub_mode != POOL_PUBSUB_CLASSIC)
        return -EINVAL;
    if (o->cluster_seeds && o->sentinels)
        return -EINVAL;
    if (o->cluster_seeds)
        return o->db == 0 && o->cluster_refresh_ms > 0 && o->cluster_seeds[0] ? 0 : -EINVAL;
    if (o->pubsub_mode == POOL_PUBSUB_SHARDED)
        return -EINVAL;
    if (o->sentinel_user && !o->sentinel_password)
        return -EINVAL;
    if (o->sentinels)
        return o->sentinels[0] && o->sentinel_master && o->sentinel_master[0] &&
                       o->cluster_refresh_ms > 0
                   ? 0
                   : -EINVAL;
    if (!o->unix_path && (!o->host || o->port <= 0 || o->port > 65535))
        return -EINVAL;
    return 0;
}

/* Rejects options that could never work: no address, no connection, a
 * zero timeout or backoff (a zero backoff would reconnect in a busy loop),
 * a user without a password (AUTH needs both). */
static int opts_validate(const struct pool_opts *o, const struct pool_script *scripts,
                         size_t nscripts)
{
    size_t i;

    if (o->size < 1 || o->size > 1024 || o->db < 0 || opts_validate_upstream(o) < 0)
        return -EINVAL;
    if (!o->connect_timeout_ms || !o->request_timeout_ms || !o->backoff_min_ms)
        return -EINVAL;
    if (o->backoff_max_ms < o->backoff_min_ms || (o->user && !o->password))
        return -EINVAL;
    if (nscripts && !scripts)
        return -EINVAL;
    for (i = 0; i < nscripts; i++) {
        if (!scripts[i].text)
            return -EINVAL;
    }
    return 0;
}

/* The copied options keep the public struct's const char * fields but own
 * their strings (strdup'd by opts_copy). */
static void free_str(const char *s)
{
    free((char *)s);
}

static void opts_free(struct pool_opts *o)
{
    free_str(o->host);
    free_str(o->unix_path);
    free_str(o->user);
    free_str(o->password);
    free_str(o->cluster_seeds);
    free_str(o->sentinels);
    free_str(o->sentinel_master);
    free_str(o->sentinel_user);
    free_str(o->sentinel_password);
}

/* Duplicates s into *dst (NULL stays NULL). */
static int dup_str(const char **dst, const char *s)
{
    *dst = NULL;
    if (!s)
        return 0;
    *dst = strdup(s);
    return *dst ? 0 : -ENOMEM;
}

/* The Sentinel strings (NULL unless sentinels is set). */
static int opts_copy_sentinel(struct pool_opts *dst, const struct pool_opts *src)
{
    int err;

    if (!src->sentinels)
        return 0;
    err = dup_str(&dst->sentinels, src->sentinels);
    if (err == 0)
        err = dup_str(&dst->sentinel_master, src->sentinel_master);
    if (err == 0)
        err = dup_str(&dst->sentinel_user, src->sentinel_user);
    if (err == 0)
        err = dup_str(&dst->sentinel_password, src->sentinel_password);
    return err;
}

/* Deep copy; seeds or sentinels win over a unix path, which wins over
 * host; what is not used is not kept. On failure nothing is left
 * allocated. */
static int opts_copy(struct pool_opts *dst, const struct pool_opts *src)
{
    bool managed = src->cluster_seeds != NULL || src->sentinels != NULL;
    int err;

    *dst = *src;
    dst->unix_path = dst->user = dst->password = dst->cluster_seeds = NULL;
    dst->sentinels = dst->sentinel_master = dst->sentinel_user = dst->sentinel_password = NULL;
    err = dup_str(&dst->host, managed || src->unix_path ? NULL : src->host);
    if (err == 0)
        err = dup_str(&dst->unix_path, managed ? NULL : src->unix_path);
    if (err == 0)
        err = dup_str(&dst->cluster_seeds, src->cluster_seeds);
    if (err == 0)
        err = opts_copy_sentinel(dst, src);
    if (err == 0)
        err = dup_str(&dst->user, src->user);
    if (err == 0)
        err = dup_str(&dst->password, src->password);
    if (err < 0)
        opts_free(dst);
    return err;
}

/* Script texts stay borrowed (pool.h); their lengths are taken once for
 * SCRIPT LOAD and for the EVAL of a NOSCRIPT retry. The SHA1s arrive with
 * the first handshake. */
static int scripts_init(struct pool *p, const struct pool_script *scripts, size_t n)
{
    size_t i;

    p->nscripts = n;
    if (n == 0)
        return 0;
    p->scripts = calloc(n, sizeof(*p->scripts));
    if (!p->scripts)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        p->scripts[i].name = scripts[i].name;
        p->scripts[i].text = scripts[i].text;
        p->scripts[i].text_len = strlen(scripts[i].text);
        pool__script_set_sha(&p->scripts[i], "", 0);
        if (scripts[i].runner)
            p->runner = (unsigned)i + 1;
        if (scripts[i].batch_op)
            pool__batch_op_init(&p->scripts[i], scripts[i].batch_op, scripts[i].batch_keys,
                                scripts[i].batch_args);
    }
    return 0;
}

static void pool_on_restarted(struct sched_timer *t);

/* Everything that cannot fail. */
static void pool_init_rest(struct pool *p)
{
    sched_timer_init(&p->restarted, pool_on_restarted);
    list_init(&p->nodes);
    list_init(&p->homeless);
    list_init(&p->free_reqs);
    p->rng = (clock_mono_ns() ^ (uint64_t)(uintptr_t)p) | 1;
    p->kind = p->opts.cluster_seeds ? POOL__UP_CLUSTER
              : p->opts.sentinels   ? POOL__UP_SENTINEL
                                    : POOL__UP_SINGLE;
    p->sharded = p->opts.pubsub_mode == POOL_PUBSUB_SHARDED;
    p->pubsub_known = p->kind != POOL__UP_CLUSTER || p->opts.pubsub_mode != POOL_PUBSUB_AUTO;
}

/* The single master (a plain pool) or the cluster (sentinel) state, whose
 * nodes come with the first topology (the first answer). */
static int pool_init_upstream(struct pool *p)
{
    const struct pool_opts *o = &p->opts;

    if (p->kind != POOL__UP_SINGLE)
        return pool__cluster_create(p);
    p->single = pool__node_create(p, o->host, o->port, o->unix_path);
    return p->single ? 0 : -ENOMEM;
}

/* A single node restarted (pool__node_run_id): every slot "changed". */
static void pool_on_restarted(struct sched_timer *t)
{
    struct pool *p = LP_CONTAINER_OF(t, struct pool, restarted);
    struct pool_topology_event ev;
    uint8_t all[POOL_SLOT_BITMAP_SIZE];

    if (p->stopping || !p->opts.on_topology)
        return;
    memset(all, 0xff, sizeof(all));
    ev.initial = false;
    ev.nchanged = POOL_SLOTS;
    ev.slots = all;
    ev.masters = 1;
    ev.slots_served = POOL_SLOTS;
    p->opts.on_topology(p->opts.topology_arg, &ev);
}

/* Frees whatever pool_init_upstream() made (nothing is running yet). */
static void pool_deinit_upstream(struct pool *p)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->nodes)
    {
        pool__node_destroy(list_entry(pos, struct pool_node, link));
    }
    if (p->cl)
        pool__cluster_destroy(p);
}

int pool_create(struct pool **out, struct sched_loop *loop, const struct pool_opts *opts,
                const struct pool_script *scripts, size_t nscripts)
{
    struct pool *p;
    int err;

    *out = NULL;
    if (!loop || !opts)
        return -EINVAL;
    err = opts_validate(opts, scripts, nscripts);
    if (err < 0)
        return err;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    err = opts_copy(&p->opts, opts);
    if (err < 0)
        goto err_free;
    err = scripts_init(p, scripts, nscripts);
    if (err < 0)
        goto err_opts;
    pool_init_rest(p);
    err = pool_init_upstream(p);
    if (err < 0)
        goto err_upstream;
    err = hmap_init(&p->chans, 64);
    if (err < 0)
        goto err_upstream;
    *out = p;
    return 0;

err_upstream:
    pool_deinit_upstream(p);
    free(p->scripts);
err_opts:
    opts_free(&p->opts);
err_free:
    free(p);
    return err;
}

/* ---- life cycle ------------------------------------------------------------ */

/* A single node resolves first, blocking (start-up only), so that a bad
 * host fails here, synchronously; every later connect failure is retried
 * with backoff, and later lookups never block the loop (addr.c). A
 * cluster resolves its seeds the same way. */
static int pool_start_single(struct pool *p)
{
    struct pool_node *n = p->single;
    char msg[160];
    int err = pool__addr_resolve_now(&n->addr, msg, sizeof(msg));

    if (err < 0) {
        pool__set_error(p, "%s", msg);
        log_msg(LOG_LVL_ERROR, "pool: %s", p->last_error);
        return err;
    }
    p->started = true;
    log_msg(LOG_LVL_INFO, "pool: connecting to %s (%u command connections, 1 pub/sub)",
            n->addr.where, n->nconns);
    pool__node_start(n);
    return 0;
}

int pool_start(struct pool *p)
{
    int err;

    if (p->started)
        return -EALREADY;
    if (p->stopping)
        return -ESHUTDOWN;
    if (!p->cl)
        return pool_start_single(p);
    err = pool__cluster_start(p);
    if (err == 0)
        p->started = true;
    return err;
}

/* stopping is set before any connection is closed: callbacks fired from
 * here may call pool_stop() again (a no-op) or submit, which is refused
 * with -ENOTCONN instead of landing on a connection about to be closed. */
void pool_stop(struct pool *p)
{
    struct list *pos;

    if (p->stopping)
        return;
    p->stopping = true;
    log_msg(LOG_LVL_INFO, "pool: stopping (%s)",
            p->kind == POOL__UP_CLUSTER    ? p->opts.cluster_seeds
            : p->kind == POOL__UP_SENTINEL ? p->opts.sentinels
                                           : p->single->addr.where);
    sched_loop_timer_del(p->loop, &p->restarted);
    if (p->cl)
        pool__cluster_stop(p);
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next)
        pool__node_stop(list_entry(pos, struct pool_node, link));
}

bool pool_is_stopped(const struct pool *p)
{
    const struct list *pos;

    if (!p->started)
        return true;
    if (!p->stopping || (p->cl && !pool__cluster_is_stopped(p)))
        return false;
    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        if (!pool__node_is_idle(list_entry(pos, struct pool_node, link)))
            return false;
    }
    return true;
}

void pool_destroy(struct pool *p)
{
    /* Connections are registered with the loop until released. */
    LP_BUG_ON(!pool_is_stopped(p));
    pool__pubsub_deinit(p);
    pool_deinit_upstream(p);
    pool__req_free_all(p);
    free(p->scripts);
    pool__tls_deinit(p);
    opts_free(&p->opts);
    free(p);
}

/* ---- routing and submission ------------------------------------------------ */

bool pool_is_cluster(const struct pool *p)
{
    return p->kind == POOL__UP_CLUSTER;
}

bool pool_is_sentinel(const struct pool *p)
{
    return p->kind == POOL__UP_SENTINEL;
}

const char *pool_slot_owner(const struct pool *p, unsigned slot)
{
    const struct pool_node *n;

    if (slot >= POOL_SLOTS)
        return NULL;
    n = p->cl ? pool__cluster_owner(p, (int)slot) : p->single;
    return n ? n->addr.where : NULL;
}

bool pool_pubsub_sharded(const struct pool *p)
{
    return p->sharded;
}

bool pool_pubsub_known(const struct pool *p)
{
    return p->pubsub_known;
}

static size_t arg_len(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

/* The routing slot of argv[i]: its hash slot in a cluster, 0 for a
 * Sentinel master (which owns them all), -1 for a single node. */
static int key_slot(const struct pool *p, const char *const *argv, const size_t *lens, int i)
{
    if (p->kind == POOL__UP_CLUSTER)
        return pool_slot(argv[i], arg_len(argv, lens, i));
    return p->kind == POOL__UP_SENTINEL ? 0 : -1;
}

bool pool_is_ready(const struct pool *p)
{
    const struct list *pos;

    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        const struct pool_node *n = list_entry(pos, struct pool_node, link);

        if (n->state == POOL__NODE_ACTIVE && pool__node_is_up(n))
            return true;
    }
    return false;
}

/* A ready connection of the node that serves slot (-1: any node; a
 * single node serves all), or NULL. No slot is computed for a single
 * node: its callers pass -1. */
static struct pool__rconn *route(struct pool *p, int slot, uint64_t hint)
{
    struct pool_node *n;

    if (!p->cl)
        n = p->single;
    else if (slot < 0)
        n = pool__cluster_any(p, hint);
    else
        n = pool__cluster_owner(p, slot);
    return n ? pool__node_pick(n, hint) : NULL;
}

/* A request record for a caller; a cluster request also keeps what a
 * re-send needs (its slot, hint and age). */
static struct pool__req *req_new(struct pool *p, int slot, uint64_t hint, pool_reply_fn *cb,
                                 void *arg)
{
    struct pool__req *req = pool__req_get(p);

    if (!req)
        return NULL;
    req->cb = cb;
    req->arg = arg;
    if (p->cl) {
        req->slot = slot;
        req->hint = hint;
        req->born_ms = sched_loop_now_ms(p->loop);
    }
    return req;
}

static int command_at(struct pool *p, uint64_t hint, int slot, int argc, const char *const *argv,
                      const size_t *lens, pool_reply_fn *cb, void *arg)
{
    struct pool__rconn *rc;
    struct pool__req *req;

    if (p->stopping)
        return -ENOTCONN;
    rc = route(p, slot, hint);
    if (!rc)
        return -ENOTCONN;
    req = req_new(p, slot, hint, cb, arg);
    if (!req)
        return -ENOMEM;
    return pool__rconn_command(rc, req, argc, argv, lens, p->cl != NULL);
}

/* argv[1] is the key for the commands the proxy sends (GET, PUBLISH...):
 * what a cluster routes by. lens may be NULL for NUL-terminated
 * arguments. */
int pool_command(struct pool *p, uint64_t hint, int argc, const char *const *argv,
                 const size_t *lens, pool_reply_fn *cb, void *arg)
{
    int slot = -1;

    if (argc < 1 || !argv || !cb)
        return -EINVAL;
    if (argc > 1)
        slot = key_slot(p, argv, lens, 1);
    return command_at(p, hint, slot, argc, argv, lens, cb, arg);
}

int pool_command_slot(struct pool *p, uint64_t hint, int slot, int argc, const char *const *argv,
                      const size_t *lens, pool_reply_fn *cb, void *arg)
{
    if (argc < 1 || !argv || !cb || slot < -1 || slot >= POOL_SLOTS)
        return -EINVAL;
    return command_at(p, hint, p->cl ? slot : -1, argc, argv, lens, cb, arg);
}

/* The first key routes (scripts touch keys of one slot by contract). */
static int eval_at(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, struct pool_wait *w,
                   pool_reply_fn *cb, void *arg)
{
    struct pool__rconn *rc;
    struct pool__req *req;
    int slot = -1;

    if (script >= p->nscripts || numkeys < 0 || argc < numkeys || !cb || (argc && !argv))
        return -EINVAL;
    if (w && (w->replicas == 0 || w->timeout_ms == 0))
        return -EINVAL;
    if (p->stopping)
        return -ENOTCONN;
    if (numkeys > 0)
        slot = key_slot(p, argv, lens, 0);
    rc = route(p, slot, hint);
    if (!rc)
        return -ENOTCONN;
    req = req_new(p, slot, hint, cb, arg);
    if (!req)
        return -ENOMEM;
    req->start_ns = clock_mono_ns();
    req->wait = w;
    return pool__rconn_eval(rc, req, script, numkeys, argc, argv, lens);
}

int pool_eval(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
              const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    return eval_at(p, hint, script, numkeys, argc, argv, lens, NULL, cb, arg);
}

int pool_eval_wait(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, struct pool_wait *w,
                   pool_reply_fn *cb, void *arg)
{
    if (!w)
        return -EINVAL;
    return eval_at(p, hint, script, numkeys, argc, argv, lens, w, cb, arg);
}

/* ---- errors, randomness ------------------------------------------------------ */

void pool__set_error(struct pool *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(p->last_error, sizeof(p->last_error), fmt, ap);
    va_end(ap);
}

/* xorshift64* (Vigna): plenty for jitter, no shared state. */
uint64_t pool__rand(struct pool *p, uint64_t n)
{
    uint64_t x = p->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->rng = x;
    return n ? (x * 0x2545F4914F6CDD1Dull) % (n + 1) : 0;
}

uint64_t pool__backoff_ms(struct pool *p, unsigned attempt)
{
    const struct pool_opts *o = &p->opts;
    uint64_t d = o->backoff_min_ms;
    unsigned i;

    for (i = 0; i < attempt && d < o->backoff_max_ms; i++)
        d *= 2;
    d = LP_MIN(d, (uint64_t)o->backoff_max_ms);
    return d - pool__rand(p, d / 2);
}

/* ---- stats ----------------------------------------------------------------- */

/* A single node: "up" with a ready command connection; "connecting"
 * while an attempt or handshake is under way and none is ready; "down"
 * otherwise (not started, stopped, or every connection waiting out a
 * backoff). */
static const char *single_state(const struct pool *p, unsigned ready)
{
    if (ready)
        return "up";
    if (!p->started || p->stopping)
        return "down";
    return pool__node_is_connecting(p->single) ? "connecting" : "down";
}

/* Sums over the active nodes (the single node of a plain pool). */
static void stats_nodes(const struct pool *p, struct pool_stats *st)
{
    const struct list *pos;
    bool pubsub_all = true;
    unsigned i;

    for (pos = p->nodes.next; pos != &p->nodes; pos = pos->next) {
        const struct pool_node *n = list_entry(pos, struct pool_node, link);
        bool up = false;

        if (n->state != POOL__NODE_ACTIVE)
            continue;
        st->nodes++;
        st->conns += n->nconns;
        for (i = 0; i < n->nconns; i++) {
            bool ready = pool__rconn_is_ready(&n->conns[i]);

            st->conns_ready += ready;
            up = up || ready;
        }
        st->nodes_ready += up;
        pubsub_all = pubsub_all && pool__rconn_is_ready(&n->pubsub);
    }
    st->pubsub_ready = st->nodes > 0 && pubsub_all;
}

void pool_get_stats(const struct pool *p, struct pool_stats *st)
{
    memset(st, 0, sizeof(*st));
    stats_nodes(p, st);
    st->channels = p->nsubs;
    st->requests = p->requests;
    st->inflight = p->inflight;
    st->reconnects = p->reconnects;
    st->restarts = p->restarts;
    st->errors = p->errors;
    st->batches = p->batches;
    st->noscript_retries = p->noscript_retries;
    st->script_batches = p->script_batches;
    st->batched = p->batched;
    st->moved = p->moved;
    st->ask = p->ask;
    st->tryagain = p->tryagain;
    st->last_error = p->last_error;
    st->upstream_is_cluster = p->upstream_is_cluster;
    st->pubsub_mode = !p->pubsub_known ? "" : p->sharded ? "sharded" : "classic";
    if (p->cl) {
        pool__cluster_stats(p, st);
    } else {
        st->slots_served = POOL_SLOTS;
        st->state = single_state(p, st->conns_ready);
    }
}
