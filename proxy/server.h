/* The proxy server object: one per process. It owns the event loop, the
 * upstream pool, the listener, the client list and the lock engine, the
 * metrics and their HTTP listener, and keeps the figures INFO reports.
 * Signal handlers only set flags here; a loop hook applies them. */
#ifndef LP_PROXY_SERVER_H
#define LP_PROXY_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "engine/engine.h"
#include "proxy/opts.h"
#include "proxy/request.h"
#include "proxy/stats.def"
#include "proxy/tls.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct lk_engine;
struct px_fwd;
struct px_subs;
struct px_metrics;
struct px_http;

/* The front end's counters INFO and /metrics show, one uint64_t field
 * per S() row of proxy/stats.def's tables (INFO field, Prometheus family
 * and meaning there); the engine's are srv->engine->stats (struct
 * lk_stats, engine/stats.def). */
#define PX_STATS_FIELD(field, info, prom, kind, help) uint64_t field;
#define PX_STATS_NOFIELD(info, prom, kind, help, value)
struct px_stats {
    PX_STATS_CLIENTS(PX_STATS_FIELD, PX_STATS_NOFIELD)
    PX_STATS_STATS(PX_STATS_FIELD, PX_STATS_NOFIELD)
};

/* One --listen address. */
struct px_listener {
    struct sched_listener ls; /* accepting socket */
    struct px_server *srv;    /* borrowed: the server */
    int fd;                   /* owned: bound socket until accepting starts, else -1 */
    bool tls;                 /* tls://: connections start TLS with srv->tls.cur.server */
    bool accepting;           /* ls was started (and not yet stopped) */
};

struct px_server {
    struct px_opts opts;                         /* configuration (copied) */
    struct sched_loop *loop;                     /* owned: the event loop */
    struct pool *pool;                           /* owned: upstream Redis */
    struct px_listener listeners[PX_LISTEN_MAX]; /* one per opts.listen[] */
    unsigned nlisteners;                         /* opts.nlisten once bound */
    struct px_tls_state tls;                     /* TLS contexts in use and counters */
    char uuid[37];                               /* this process's owner prefix */
    struct list clients;                         /* struct px_client, by client_node */
    unsigned nclients;                           /* connected clients */
    unsigned nclients_out_paused; /* clients whose reading waits for their replies to go */
    uint64_t next_client_id;      /* CLIENT ID of the next connection */
    struct lk_engine *engine;     /* owned: every lock's state (engine/engine.h) */
    uint64_t start_ms;            /* monotonic start time */
    unsigned ready; /* ready.c: 0 starting, 1 waiting for the upstream, 2 "ready" announced */
    struct sched_timer sdwd;         /* ready.c: WATCHDOG=1 to systemd every sdwd_ms */
    uint64_t sdwd_ms;                /* half of $WATCHDOG_USEC, 0: no systemd watchdog */
    struct px_stats stats;           /* counters for INFO */
    struct px_metrics *metrics;      /* owned: histograms and per-command counters */
    struct px_http *http;            /* owned: the --metrics HTTP listener, or NULL */
    struct sched_hook signal_hook;   /* applies flags set by signal handlers */
    volatile sig_atomic_t reload;    /* SIGHUP seen, reload not yet done */
    struct px_ratelog protect_log;   /* protected-mode refusals logged (protect.c) */
    uint64_t auth_log_ms;            /* when an auth failure was last logged */
    uint64_t auth_log_quiet;         /* auth failures not logged since then */
    uint64_t limit_log_ms;           /* when an output-limit close was last logged */
    uint64_t limit_log_quiet;        /* output-limit closes not logged since then */
    size_t client_mem;               /* bytes held for clients (climem.h) */
    struct sched_timer climem_timer; /* climem.c: gives unused memory back */
    struct px_ratelog climem_log;    /* --max-client-memory refusals logged */

    struct px_fwd *fwd;   /* owned: pass-through state (fwd.h), or NULL */
    struct px_subs *subs; /* owned: shared subscriptions' hubs (subs.c) */
};

/* The server whose engine eng is (the engine's owner). */
static inline struct px_server *px_server_of(const struct lk_engine *eng)
{
    return (struct px_server *)eng->owner;
}

/* Copies into the engine the options it reads (struct lk_config): at
 * start-up and after a config reload. */
void px_server_engine_config(struct px_server *srv);

/* Creates the loop, the pool, the listening socket and the metrics
 * listener. opts is copied (its auth gets one more reference). Returns 0
 * or -errno (a message has been logged). */
int px_server_create(struct px_server **out, const struct px_opts *opts);

/* Runs until stopped. Returns 0 or -errno. */
int px_server_run(struct px_server *srv);

/* Async-signal-safe stop request. */
void px_server_stop(struct px_server *srv);

/* Async-signal-safe reload request (SIGHUP): the loop re-reads the
 * configuration at its next iteration (px_config_reload). */
void px_server_request_reload(struct px_server *srv);

/* Opens a listening socket on a (TCP host:port or unix path; a unix
 * socket gets mode perm unless it is 0; a.tls is not looked at). Returns
 * the non-blocking fd or -errno (a message has been logged). */
int px_server_listen_fd(const struct px_addr *a, unsigned perm);

/* Raises RLIMIT_NOFILE so max_clients connections fit (best effort; logs
 * a warning when the hard limit is lower). */
void px_server_fit_nofile(unsigned max_clients);

void px_server_destroy(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
