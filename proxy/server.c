/* The server object: wiring of loop, pool, listener, lock tables and
 * metrics, the listening sockets, signal flags applied from a loop hook,
 * and the orderly stop (stop accepting, close clients so their locks are
 * released, let those releases reach Redis, then close the pool). */
#include "proxy/server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "engine/hold.h"
#include "engine/jobs.h"
#include "engine/redlock.h"
#include "engine/scripts.h"
#include "pool/pool.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/climem.h"
#include "proxy/cmd.h"
#include "proxy/cmds/redlock.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/config.h"
#include "proxy/fwd.h"
#include "proxy/http.h"
#include "proxy/metrics.h"
#include "proxy/protect.h"
#include "proxy/push.h"
#include "proxy/ready.h"
#include "proxy/subs.h"

#define PX_DRAIN_MS        2000u  /* how long the stop waits for requests in flight and closes */
#define PX_STOP_RELEASE_MS 10000u /* and for releases Redis has not confirmed yet */
#define PX_SETTLE_MS       2000u  /* how long start-up waits for the first upstream attempt */

static void on_accept(struct sched_listener *ls, int fd)
{
    struct px_listener *l = LP_CONTAINER_OF(ls, struct px_listener, ls);

    if (px_protect_refuse(l->srv, fd, l->tls))
        return;
    px_client_accept(l->srv, fd, l->tls ? l->srv->tls.cur.server : NULL);
}

void px_server_fit_nofile(unsigned max_clients)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_clients + 256;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
        log_msg(LOG_LVL_WARN, "open file limit is %llu; fewer than %u clients may connect",
                (unsigned long long)rl.rlim_cur, max_clients);
}

/* perm (e.g. 0660) replaces the mode bind() gave the socket (0777 less
 * the umask: 0700 under systemd's UMask=0077, which locks the application
 * out); it is set before listen(), so nobody connects in between. */
static int listen_unix(const char *path, unsigned perm)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc;

    if (fd < 0)
        return -errno;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path); /* a stale socket from an earlier run */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = -errno;
        goto err_close;
    }
    if ((perm && chmod(path, perm) < 0) || listen(fd, 4096) < 0) {
        rc = -errno;
        goto err_unlink;
    }
    return fd;
err_unlink:
    unlink(path);
err_close:
    close(fd);
    return rc;
}

static int listen_tcp(const char *host, int port)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    char portstr[16];
    int fd, one = 1, rc;

    snprintf(portstr, sizeof(portstr), "%d", port);
    if (getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res) != 0)
        return -EADDRNOTAVAIL;
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
        rc = -errno;
        close(fd);
        goto out;
    }
    rc = fd;
out:
    freeaddrinfo(res);
    return rc;
}

int px_server_listen_fd(const struct px_addr *a, unsigned perm)
{
    int fd = a->path[0] ? listen_unix(a->path, perm) : listen_tcp(a->host, a->port);

    if (fd < 0) {
        if (a->path[0])
            log_msg(LOG_LVL_ERROR, "cannot listen on unix://%s: %s", a->path, strerror(-fd));
        else
            log_msg(LOG_LVL_ERROR, "cannot listen on %s%s:%d: %s", a->tls ? "tls://" : "", a->host,
                    a->port, strerror(-fd));
    }
    return fd;
}

/* Binds every client socket now (so a busy port fails start-up);
 * accepting starts in px_server_run once the upstream settled. */
static int server_listen(struct px_server *srv)
{
    unsigned i;
    int fd;

    for (i = 0; i < srv->opts.nlisten; i++) {
        fd = px_server_listen_fd(&srv->opts.listen[i], srv->opts.unix_perm);
        if (fd < 0)
            return fd;
        srv->listeners[i].srv = srv;
        srv->listeners[i].fd = fd;
        srv->listeners[i].tls = srv->opts.listen[i].tls;
        srv->nlisteners = i + 1;
    }
    return 0;
}

static void server_close_listen_fds(struct px_server *srv)
{
    unsigned i;

    for (i = 0; i < srv->nlisteners; i++) {
        if (srv->listeners[i].fd >= 0)
            close(srv->listeners[i].fd);
        srv->listeners[i].fd = -1;
    }
}

/* The TLS contexts of the options, installed before the pool connects. */
static int server_tls(struct px_server *srv)
{
    struct px_tls t;
    char msg[512];
    int rc = px_tls_build(srv, &srv->opts, px_tls_wanted(&srv->opts), srv->opts.upstream.tls, &t,
                          msg, sizeof(msg));

    if (rc < 0) {
        log_msg(LOG_LVL_ERROR, "%s", msg);
        return rc;
    }
    px_tls_install(srv, &t);
    return 0;
}

/* Applies what signal handlers asked for (they only set flags). */
static void signal_hook(struct sched_hook *hook)
{
    struct px_server *srv = LP_CONTAINER_OF(hook, struct px_server, signal_hook);

    px_ready_poll(srv);
    if (!srv->reload)
        return;
    srv->reload = 0;
    px_config_reload(srv);
}

/* Metrics, their HTTP listener and the signal hook. */
static int server_extras(struct px_server *srv)
{
    int rc = px_metrics_create(srv);

    if (rc < 0)
        return rc;
    rc = px_http_start(srv);
    if (rc < 0)
        return rc;
    srv->signal_hook.fn = signal_hook;
    sched_loop_hook_add(srv->loop, &srv->signal_hook);
    px_climem_start(srv);
    sched_loop_set_latency_threshold(srv->loop, srv->opts.latency_threshold_ms);
    return 0;
}

/* A Redis Cluster upstream (redis-cluster://): its seeds and pub/sub mode.
 * Any upstream reports master changes to the lock modules, which
 * re-verify the holds of the slots that changed (a failover may have lost
 * them). */
static void server_pool_cluster(struct px_server *srv, struct pool_opts *po)
{
    const struct px_addr *u = &srv->opts.upstream;

    po->on_topology = px_locks_on_topology;
    po->topology_arg = srv->engine;
    if (!u->cluster)
        return;
    po->cluster_seeds = u->seeds;
    po->pubsub_mode = (enum pool_pubsub_mode)srv->opts.cluster_pubsub;
}

static int server_pool(struct px_server *srv)
{
    const struct px_addr *u = &srv->opts.upstream;
    const struct pool_script *scripts;
    struct pool_opts po;
    size_t nscripts;
    int rc;

    pool_opts_default(&po);
    po.host = u->path[0] ? NULL : u->host;
    po.port = u->port;
    po.unix_path = u->path[0] ? u->path : NULL;
    po.user = u->user[0] ? u->user : NULL;
    po.password = u->password[0] ? u->password : NULL;
    po.db = u->db;
    if (u->sentinels[0]) {
        po.sentinels = u->sentinels;
        po.sentinel_master = u->master_name;
        po.sentinel_user = srv->opts.sentinel_user[0] ? srv->opts.sentinel_user : NULL;
        po.sentinel_password = srv->opts.sentinel_password[0] ? srv->opts.sentinel_password : NULL;
    }
    po.size = srv->opts.pool_size;
    po.batch_max = srv->opts.script_batch;
    po.request_timeout_ms = srv->opts.upstream_timeout_ms;
    po.on_eval = px_metrics_on_eval;
    po.eval_arg = srv;
    server_pool_cluster(srv, &po);
    nscripts = px_scripts_build(srv->engine, &scripts);
    rc = pool_create(&srv->pool, srv->loop, &po, scripts, nscripts);
    if (rc < 0)
        return rc;
    rc = server_tls(srv);
    if (rc < 0)
        return rc;
    return pool_start(srv->pool);
}

static int server_loop(struct px_server *srv)
{
    struct sched_loop_opts lo = {
        .io = srv->opts.io, .max_conns = srv->opts.max_clients + 64, .tick_ms = 4};
    int rc = sched_loop_create(&srv->loop, &lo);

    if (rc < 0)
        log_msg(LOG_LVL_ERROR, "cannot start the event loop (%s): %s",
                srv->opts.io == SCHED_IO_URING ? "io_uring" : "auto", strerror(-rc));
    return rc;
}

_Static_assert(sizeof(((struct px_server *)0)->uuid) == LK_UUID_LEN + 1,
               "util_uuid4's 36 characters and NUL (the engine's owner prefix)");
/* The longest owner field, a user token's with ":write", fits untruncated:
 * truncation would make two long user names one owner. */
_Static_assert(36 + 1 + PX_USER_NAME_MAX + 1 + PX_OWNER_TOKEN_MAX + sizeof(":write") <=
                   PX_OWNER_MAX,
               "owner field capacity");

/* The engine's hooks that need the front end's types (struct lk_front). */
static void server_hold_end(struct lk_engine *eng, uint64_t held_ms)
{
    px_metrics_hold_end(eng->owner, held_ms);
}

static void server_lease_lost(struct lk_caller *c, const char *kind, const char *name, size_t nlen)
{
    px_push_lease_lost(LP_CONTAINER_OF(c, struct px_client, caller), kind, name, nlen);
}

static int server_sub_listen(struct lk_engine *eng, struct px_sub_lsn *l, const char *name,
                             size_t len, enum pool_sub_kind kind, px_sub_lsn_fn *cb)
{
    return px_subs_listen(eng->owner, l, name, len, kind, cb);
}

/* One RedLock master's pool options (its strings stay in srv->opts). */
static void server_redlock_opts(const struct px_server *srv, const struct px_addr *u,
                                struct pool_opts *po)
{
    pool_opts_default(po);
    po->host = u->host;
    po->port = u->port;
    po->user = u->user[0] ? u->user : NULL;
    po->password = u->password[0] ? u->password : NULL;
    po->db = u->db;
    po->size = srv->opts.pool_size;
    po->batch_max = srv->opts.script_batch;
    po->request_timeout_ms = srv->opts.upstream_timeout_ms;
}

void px_server_engine_config(struct px_server *srv)
{
    const struct px_opts *o = &srv->opts;
    struct lk_config *c = &srv->engine->cfg;
    unsigned i;

    c->watchdog_ms = o->watchdog_ms;
    c->upstream_timeout_ms = o->upstream_timeout_ms;
    c->sync_replicas = o->sync_replicas;
    c->sync_timeout_ms = o->sync_timeout_ms;
    c->on_disc = o->on_disc;
    c->linger_ms = o->linger_ms;
    c->cluster_pubsub = o->cluster_pubsub;
    c->slots_move = o->upstream.cluster || o->upstream.sentinels[0] != '\0';
    c->nredlock = o->nredlock;
    for (i = 0; i < o->nredlock; i++)
        server_redlock_opts(srv, &o->redlock[i], &c->redlock[i]);
}

int px_server_create(struct px_server **out, const struct px_opts *opts)
{
    struct px_server *srv = calloc(1, sizeof(*srv));
    int rc = -ENOMEM;

    if (!srv)
        return rc;
    srv->opts = *opts;
    srv->opts.auth = opts->auth ? px_auth_get(opts->auth) : NULL;
    list_init(&srv->clients);
    srv->engine = px_engine_alloc(srv);
    if (!srv->engine)
        goto err_free;
    px_cmd_register_scripts(srv->engine);
    srv->engine->front = (struct lk_front){.wait_finish = px_wait_finish_resp,
                                           .hold_end = server_hold_end,
                                           .lease_lost = server_lease_lost,
                                           .caller_get = px_client_caller_get,
                                           .caller_put = px_client_caller_put,
                                           .caller_find = px_client_caller_find,
                                           .sub_listen = server_sub_listen,
                                           .sub_unlisten = px_subs_unlisten};
    srv->engine->uuid = srv->uuid;
    px_server_fit_nofile(opts->max_clients);
    rc = util_uuid4(srv->uuid);
    if (rc < 0)
        goto err_free;
    rc = server_loop(srv);
    if (rc < 0)
        goto err_free;
    srv->start_ms = sched_loop_now_ms(srv->loop);
    rc = server_pool(srv);
    srv->engine->loop = srv->loop;
    srv->engine->pool = srv->pool;
    px_server_engine_config(srv);
    if (rc == 0)
        rc = px_redlock_start(srv->engine);
    if (rc < 0)
        goto err_loop;
    if ((rc = px_cmd_init()) < 0 || (rc = px_subs_init(srv)) < 0 ||
        (rc = px_locks_init(srv->engine)) < 0 || (rc = px_fwd_create(srv)) < 0)
        goto err_loop;
    rc = server_listen(srv);
    if (rc < 0)
        goto err_loop;
    rc = server_extras(srv);
    if (rc < 0)
        goto err_loop;
    *out = srv;
    return 0;
err_loop:
    /* The process exits on this path; the loop's resources go with it. */
    server_close_listen_fds(srv);
    px_tls_release(&srv->tls.cur);
    log_msg(LOG_LVL_ERROR, "startup failed: %s", strerror(-rc));
    sched_loop_destroy(srv->loop);
err_free:
    px_auth_put(srv->opts.auth);
    px_engine_free(srv->engine);
    free(srv);
    return rc;
}

/* Lets the releases sent for closing clients reach Redis, bounded: the
 * requests in flight and the closes get PX_DRAIN_MS; releases Redis has
 * not confirmed (retried jobs, redlock give-backs: Redis down, stalled or
 * cut off at the stop) are sent again, with their back-off, for up to
 * PX_STOP_RELEASE_MS, so a Redis that is back within that time gets every
 * release before the proxy exits (issue 22). Those still unconfirmed then
 * are dropped: their locks expire at lease end. */
static void server_drain(struct px_server *srv)
{
    uint64_t start = clock_mono_ms(), until = start + PX_DRAIN_MS, now;
    struct pool_stats st;
    bool busy, releases;

    do {
        sched_loop_run_once(srv->loop, 10);
        pool_get_stats(srv->pool, &st);
        now = clock_mono_ms();
        busy = st.inflight > 0 || srv->nclients > 0;
        releases = px_jobs_busy(srv->engine) || px_redlock_busy(srv->engine) ||
                   px_locks_releasing(srv->engine);
    } while ((busy && now < until) || (releases && now < start + PX_STOP_RELEASE_MS));
    until = LP_MAX(until, now);
    pool_stop(srv->pool);
    px_redlock_stop(srv->engine);
    while ((!pool_is_stopped(srv->pool) || !px_redlock_stopped(srv->engine)) &&
           clock_mono_ms() < until + PX_DRAIN_MS)
        sched_loop_run_once(srv->loop, 10);
}

/* True while a node of the map is still connecting (no ready command
 * connection, an attempt or handshake under way). */
static bool server_node_connecting(struct px_server *srv)
{
    size_t i, n = pool_get_node_stats(srv->pool, NULL, 0);
    struct pool_node_stats *nodes = n ? calloc(n, sizeof(*nodes)) : NULL;
    bool connecting = false;

    if (!nodes)
        return false;
    n = LP_MIN(n, pool_get_node_stats(srv->pool, nodes, n));
    for (i = 0; i < n && !connecting; i++)
        connecting = strcmp(nodes[i].state, "connecting") == 0;
    free(nodes);
    return connecting;
}

/* Waits (bounded) for the first upstream connection attempt to settle,
 * then starts accepting: clients connecting at start-up see a ready proxy
 * (or, if Redis is down, the UPSTREAM errors of an outage), not a window
 * of spurious errors while the pool is still connecting. A cluster is
 * "degraded" as soon as one master's connection is ready: the wait goes
 * on while any other master is still on its first attempt, else the
 * first clients get "UPSTREAM ... (not connected)" for that master's
 * slots. */
static int server_accept_when_settled(struct px_server *srv)
{
    uint64_t until = clock_mono_ms() + PX_SETTLE_MS;
    struct pool_stats st;
    unsigned i;
    int rc;

    do {
        sched_loop_run_once(srv->loop, 10);
        pool_get_stats(srv->pool, &st);
    } while ((strcmp(st.state, "connecting") == 0 ||
              (strcmp(st.state, "degraded") == 0 && server_node_connecting(srv)) ||
              px_redlock_connecting(srv->engine)) &&
             clock_mono_ms() < until);
    for (i = 0; i < srv->nlisteners; i++) {
        struct px_listener *l = &srv->listeners[i];

        rc = sched_listener_start(srv->loop, &l->ls, l->fd, on_accept);
        l->fd = -1;
        if (rc < 0)
            return rc;
        l->accepting = true;
    }
    return 0;
}

static void server_stop_listeners(struct px_server *srv)
{
    unsigned i;

    for (i = 0; i < srv->nlisteners; i++) {
        if (srv->listeners[i].accepting)
            sched_listener_stop(&srv->listeners[i].ls);
        srv->listeners[i].accepting = false;
    }
}

int px_server_run(struct px_server *srv)
{
    int rc = server_accept_when_settled(srv);

    if (rc < 0)
        return rc;
    px_protect_check_listeners(srv);
    px_ready_start(srv);
    rc = sched_loop_run(srv->loop);
    px_ready_stopping(srv);
    log_msg(LOG_LVL_INFO, "stopping: releasing the locks of %u connected clients", srv->nclients);
    server_stop_listeners(srv);
    px_http_stop(srv);
    px_client_close_all(srv);
    server_drain(srv);
    return rc;
}

void px_server_stop(struct px_server *srv)
{
    sched_loop_stop(srv->loop);
}

void px_server_request_reload(struct px_server *srv)
{
    srv->reload = 1;
}

void px_server_destroy(struct px_server *srv)
{
    unsigned j;
    int i;

    px_http_stop(srv);
    for (i = 0; i < 100 && (!list_empty(&srv->clients) || !px_http_is_idle(srv)); i++)
        sched_loop_run_once(srv->loop, 10);
    sched_loop_hook_del(srv->loop, &srv->signal_hook);
    px_climem_stop(srv);
    px_http_destroy(srv);
    px_locks_deinit(srv->engine);
    px_subs_deinit(srv);
    px_cmd_deinit();
    px_fwd_destroy(srv);
    px_metrics_destroy(srv);
    if (pool_is_stopped(srv->pool))
        pool_destroy(srv->pool);
    px_redlock_destroy(srv->engine);
    server_stop_listeners(srv);
    sched_loop_destroy(srv->loop);
    server_close_listen_fds(srv);
    for (j = 0; j < srv->opts.nlisten; j++) {
        if (srv->opts.listen[j].path[0])
            unlink(srv->opts.listen[j].path);
    }
    px_tls_release(&srv->tls.cur);
    px_auth_put(srv->opts.auth);
    px_engine_free(srv->engine);
    free(srv);
}
