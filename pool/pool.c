/* The pool object: options, scripts, the upstream node and its command
 * connections, routing (key -> node, hint -> connection), the request
 * record free list, address resolution and stats. Connections live in
 * rconn.c, the channel table in pubsub.c.
 *
 * Routing is two-step so that a Cluster or Sentinel upstream changes only
 * this file: pool__route() maps a key to the node that owns it (today the
 * one master), then the caller's hint picks one of that node's connections
 * so that one client's requests stay ordered on one pipeline. */
#include "pool/pool.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/rconn.h"

/* Recycled request records kept beyond this are freed: a burst of
 * in-flight requests should not pin its memory forever. */
#define POOL_FREE_REQS_MAX 4096

void pool_opts_default(struct pool_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 6379;
    o->size = 2;
    o->connect_timeout_ms = 1000;
    o->request_timeout_ms = 3000;
    o->backoff_min_ms = 50;
    o->backoff_max_ms = 2000;
}

/* ---- creation ------------------------------------------------------------ */

/* Rejects options that could never work: no address, no connection, a
 * zero timeout or backoff (a zero backoff would reconnect in a busy loop),
 * a user without a password (AUTH needs both). */
static int opts_validate(const struct pool_opts *o, const struct pool_script *scripts,
                         size_t nscripts)
{
    size_t i;

    if (o->size < 1 || o->size > 1024 || o->db < 0)
        return -EINVAL;
    if (!o->unix_path && (!o->host || o->port <= 0 || o->port > 65535))
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

/* Deep copy; a unix path wins over host, which is then not kept. On
 * failure nothing is left allocated. */
static int opts_copy(struct pool_opts *dst, const struct pool_opts *src)
{
    int err;

    *dst = *src;
    err = dup_str(&dst->host, src->unix_path ? NULL : src->host);
    if (err == 0)
        err = dup_str(&dst->unix_path, src->unix_path);
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
    }
    return 0;
}

/* The single master and its opts.size idle command connections. */
static int node_init(struct pool *p)
{
    struct pool_node *n = &p->node;
    unsigned i;

    n->pool = p;
    n->nconns = p->opts.size;
    n->conns = calloc(n->nconns, sizeof(*n->conns));
    if (!n->conns)
        return -ENOMEM;
    for (i = 0; i < n->nconns; i++)
        pool__rconn_init(&n->conns[i], p, POOL__RCONN_CMD, i);
    return 0;
}

/* Everything that cannot fail. */
static void pool_init_rest(struct pool *p)
{
    const struct pool_opts *o = &p->opts;

    pool__rconn_init(&p->pubsub, p, POOL__RCONN_PUBSUB, 0);
    list_init(&p->chan_list);
    list_init(&p->free_reqs);
    p->rng = (clock_mono_ns() ^ (uint64_t)(uintptr_t)p) | 1;
    if (o->unix_path)
        snprintf(p->where, sizeof(p->where), "%s", o->unix_path);
    else
        snprintf(p->where, sizeof(p->where), "%s:%d", o->host, o->port);
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
    err = node_init(p);
    if (err < 0)
        goto err_scripts;
    err = hmap_init(&p->chans, 64);
    if (err < 0)
        goto err_node;
    pool_init_rest(p);
    *out = p;
    return 0;

err_node:
    free(p->node.conns);
err_scripts:
    free(p->scripts);
err_opts:
    opts_free(&p->opts);
err_free:
    free(p);
    return err;
}

/* ---- life cycle ------------------------------------------------------------ */

/* Resolves first so that a bad host fails here, synchronously; every
 * later connect failure is retried with backoff instead. */
int pool_start(struct pool *p)
{
    unsigned i;
    int err;

    if (p->started)
        return -EALREADY;
    if (p->stopping)
        return -ESHUTDOWN;
    err = pool__resolve(p);
    if (err < 0) {
        log_msg(LOG_LVL_ERROR, "pool: %s", p->last_error);
        return err;
    }
    p->started = true;
    log_msg(LOG_LVL_INFO, "pool: connecting to %s (%u command connections, 1 pub/sub)", p->where,
            p->node.nconns);
    for (i = 0; i < p->node.nconns; i++)
        pool__rconn_start(&p->node.conns[i]);
    pool__rconn_start(&p->pubsub);
    return 0;
}

/* stopping is set before any connection is closed: callbacks fired from
 * here may call pool_stop() again (a no-op) or submit, which is refused
 * with -ENOTCONN instead of landing on a connection about to be closed. */
void pool_stop(struct pool *p)
{
    unsigned i;

    if (p->stopping)
        return;
    p->stopping = true;
    log_msg(LOG_LVL_INFO, "pool: stopping (%s)", p->where);
    for (i = 0; i < p->node.nconns; i++)
        pool__rconn_stop(&p->node.conns[i]);
    pool__rconn_stop(&p->pubsub);
}

bool pool_is_stopped(const struct pool *p)
{
    unsigned i;

    if (!p->started)
        return true;
    if (!p->stopping || p->pubsub.state != POOL__RCONN_DISCONNECTED)
        return false;
    for (i = 0; i < p->node.nconns; i++) {
        if (p->node.conns[i].state != POOL__RCONN_DISCONNECTED)
            return false;
    }
    return true;
}

/* Frees the recycled request records (in-flight ones are gone by now). */
static void free_reqs(struct pool *p)
{
    struct list *pos, *tmp;

    list_for_each_safe(pos, tmp, &p->free_reqs)
    {
        list_del_init(pos);
        free(list_entry(pos, struct pool__req, node));
    }
}

void pool_destroy(struct pool *p)
{
    unsigned i;

    /* Connections are registered with the loop until released. */
    LP_BUG_ON(!pool_is_stopped(p));
    for (i = 0; i < p->node.nconns; i++)
        pool__rconn_deinit(&p->node.conns[i]);
    pool__rconn_deinit(&p->pubsub);
    pool__pubsub_deinit(p);
    free_reqs(p);
    free(p->node.conns);
    free(p->scripts);
    pool__tls_deinit(p);
    opts_free(&p->opts);
    free(p);
}

/* ---- routing and submission ------------------------------------------------ */

struct pool_node *pool__route(struct pool *p, const char *key, size_t len)
{
    /* One master today; a Cluster upstream would hash key to a slot here. */
    (void)key;
    (void)len;
    return &p->node;
}

/* The hinted connection, or the next ready one, or NULL. Falling back
 * keeps a client served while its connection reconnects. The price: when
 * the hinted connection comes back, that client's next request goes to it
 * and may overtake one still in flight on the fallback connection, so
 * per-hint order holds only while the hinted connection stays up (a client
 * that waits for each reply is never affected). */
static struct pool__rconn *node_pick(struct pool_node *n, uint64_t hint)
{
    unsigned first = (unsigned)(hint % n->nconns), i;

    for (i = 0; i < n->nconns; i++) {
        struct pool__rconn *rc = &n->conns[(first + i) % n->nconns];

        if (pool__rconn_is_ready(rc))
            return rc;
    }
    return NULL;
}

static size_t arg_len(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

bool pool_is_ready(const struct pool *p)
{
    unsigned i;

    for (i = 0; i < p->node.nconns; i++) {
        if (pool__rconn_is_ready(&p->node.conns[i]))
            return true;
    }
    return false;
}

/* argv[1] is the key for the commands the proxy sends (GET, PUBLISH...):
 * what a Cluster pool__route() would hash. lens may be NULL for
 * NUL-terminated arguments. */
int pool_command(struct pool *p, uint64_t hint, int argc, const char *const *argv,
                 const size_t *lens, pool_reply_fn *cb, void *arg)
{
    struct pool_node *node;
    struct pool__rconn *rc;

    if (argc < 1 || !argv || !cb)
        return -EINVAL;
    if (p->stopping)
        return -ENOTCONN;
    if (argc > 1)
        node = pool__route(p, argv[1], arg_len(argv, lens, 1));
    else
        node = pool__route(p, NULL, 0);
    rc = node_pick(node, hint);
    if (!rc)
        return -ENOTCONN;
    return pool__rconn_command(rc, argc, argv, lens, cb, arg);
}

/* The first key routes (scripts touch keys of one slot by contract). */
int pool_eval(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
              const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    struct pool_node *node;
    struct pool__rconn *rc;

    if (script >= p->nscripts || numkeys < 0 || argc < numkeys || !cb || (argc && !argv))
        return -EINVAL;
    if (p->stopping)
        return -ENOTCONN;
    if (numkeys > 0)
        node = pool__route(p, argv[0], arg_len(argv, lens, 0));
    else
        node = pool__route(p, NULL, 0);
    rc = node_pick(node, hint);
    if (!rc)
        return -ENOTCONN;
    return pool__rconn_eval(rc, script, numkeys, argc, argv, lens, cb, arg);
}

/* ---- request records ------------------------------------------------------- */

/* LIFO reuse keeps recently used (cache-warm) records in play; malloc only
 * when the free list is empty. */
struct pool__req *pool__req_get(struct pool *p)
{
    struct list *n = list_first(&p->free_reqs);
    struct pool__req *req;

    if (n) {
        list_del_init(n);
        p->nfree_reqs--;
        req = list_entry(n, struct pool__req, node);
    } else {
        req = malloc(sizeof(*req));
        if (!req)
            return NULL;
        list_init(&req->node);
    }
    req->cb = NULL;
    req->arg = NULL;
    req->sent_ms = 0;
    req->kind = POOL__REQ_CMD;
    req->script = 0;
    req->ntail = 0;
    req->retried = false;
    req->tail = NULL;
    req->tail_len = 0;
    return req;
}

/* A heap tail (long EVAL arguments) is freed at once; the record itself
 * is kept for reuse up to POOL_FREE_REQS_MAX. */
void pool__req_put(struct pool *p, struct pool__req *req)
{
    if (req->tail != req->inl)
        free(req->tail);
    req->tail = NULL;
    if (p->nfree_reqs >= POOL_FREE_REQS_MAX) {
        free(req);
        return;
    }
    p->nfree_reqs++;
    list_add_head(&p->free_reqs, &req->node);
}

/* ---- address, errors, randomness ------------------------------------------ */

static int resolve_unix(struct pool *p)
{
    struct sockaddr_un sun;
    size_t n = strlen(p->opts.unix_path);

    if (n >= sizeof(sun.sun_path)) {
        pool__set_error(p, "resolve: unix socket path too long");
        return -ENAMETOOLONG;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, p->opts.unix_path, n + 1);
    memcpy(&p->addr, &sun, sizeof(sun));
    p->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

/* getaddrinfo() has its own error space; map it to -errno. Any "no such
 * name" flavour becomes -EHOSTUNREACH. */
static int gai_errno(int rc, int saved_errno)
{
    if (rc == EAI_SYSTEM)
        return -saved_errno;
    if (rc == EAI_MEMORY)
        return -ENOMEM;
    if (rc == EAI_AGAIN)
        return -EAGAIN;
    return -EHOSTUNREACH;
}

/* Blocking getaddrinfo(), on the loop thread: it runs at pool_start() and
 * again only after a failed connect (the cached address is dropped then,
 * so a moved DNS name is followed). An IP literal never blocks. The first
 * address is used. */
static int resolve_tcp(struct pool *p)
{
    struct addrinfo hints, *res;
    char port[16];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%d", p->opts.port);
    rc = getaddrinfo(p->opts.host, port, &hints, &res);
    if (rc != 0) {
        int saved = errno;

        pool__set_error(p, "resolve %s: %s", p->opts.host,
                        rc == EAI_SYSTEM ? strerror(saved) : gai_strerror(rc));
        return gai_errno(rc, saved);
    }
    memcpy(&p->addr, res->ai_addr, res->ai_addrlen);
    p->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int pool__resolve(struct pool *p)
{
    if (p->addrlen)
        return 0;
    return p->opts.unix_path ? resolve_unix(p) : resolve_tcp(p);
}

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

/* ---- stats ----------------------------------------------------------------- */

/* "up" with a ready command connection; "connecting" while an attempt or
 * handshake is under way and none is ready; "down" otherwise (not started,
 * stopped, or every connection waiting out a backoff). */
static const char *pool_state(const struct pool *p, unsigned ready)
{
    unsigned i;

    if (ready)
        return "up";
    if (!p->started || p->stopping)
        return "down";
    for (i = 0; i < p->node.nconns; i++) {
        if (pool__rconn_is_connecting(&p->node.conns[i]))
            return "connecting";
    }
    return "down";
}

void pool_get_stats(const struct pool *p, struct pool_stats *st)
{
    unsigned i, ready = 0;

    for (i = 0; i < p->node.nconns; i++)
        ready += pool__rconn_is_ready(&p->node.conns[i]);
    memset(st, 0, sizeof(*st));
    st->conns = p->node.nconns;
    st->conns_ready = ready;
    st->pubsub_ready = pool__rconn_is_ready(&p->pubsub);
    st->channels = p->nsubs;
    st->requests = p->requests;
    st->inflight = p->inflight;
    st->reconnects = p->reconnects;
    st->errors = p->errors;
    st->batches = p->batches;
    st->noscript_retries = p->noscript_retries;
    st->state = pool_state(p, ready);
    st->last_error = p->last_error;
}
