/* The proxy server object: one per process. It owns the event loop, the
 * upstream pool, the listener, the client list and the lock tables, the
 * metrics and their HTTP listener, and keeps the figures INFO reports.
 * Signal handlers only set flags here; a loop hook applies them. */
#ifndef LP_PROXY_SERVER_H
#define LP_PROXY_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/hmap.h"
#include "common/list.h"
#include "proxy/locks/jobs.h"
#include "proxy/locks/locks.h"
#include "proxy/locks/replay.h"
#include "proxy/locks/sem_reap.h"
#include "proxy/locks/stats.def"
#include "proxy/opts.h"
#include "proxy/request.h"
#include "proxy/stats.def"
#include "proxy/tls.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct px_redlock;
struct px_fence;
struct px_metrics;
struct px_http;

/* The counters INFO and /metrics show, one uint64_t field per S() row of
 * the tables (proxy/stats.def, proxy/locks/stats.def: name, INFO field,
 * Prometheus family and meaning there). */
#define PX_STATS_FIELD(field, info, prom, kind, help) uint64_t field;
#define PX_STATS_NOFIELD(info, prom, kind, help, value)
struct px_stats {
    PX_STATS_CLIENTS(PX_STATS_FIELD, PX_STATS_NOFIELD)
    PX_STATS_STATS(PX_STATS_FIELD, PX_STATS_NOFIELD)
    PX_STATS_LOCKS(PX_STATS_FIELD, PX_STATS_NOFIELD)
    PX_STATS_TOPOLOGY(PX_STATS_FIELD, PX_STATS_NOFIELD)
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
    unsigned nclients_out_paused;    /* clients whose reading waits for their replies to go */
    uint64_t next_client_id;         /* CLIENT ID of the next connection */
    struct hmap locks;               /* struct px_waitset by channel: waiters, subscriptions */
    unsigned nwaiters;               /* LOCK calls currently waiting */
    struct hmap holds;               /* struct px_hold by (name, owner) */
    unsigned nholds;                 /* holds tracked */
    struct list renew_due;           /* struct px_hold whose renewal is due */
    struct sched_hook renew_hook;    /* sends renew_due in batches */
    struct list verify_retry;        /* struct px_hold: checks after a topology change to retry */
    struct sched_timer verify_timer; /* moves verify_retry to renew_due */
    struct px_jobs jobs;             /* upstream jobs retried until Redis answers (locks/jobs.c) */
    struct px_replays replays;       /* releases re-applied after a failover (locks/replay.c) */
    struct px_sem_reap sem_reap;     /* dead proxies' permits given back (locks/sem_reap.c) */
    uint64_t start_ms;               /* monotonic start time */
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

    struct px_redlock *redlock; /* owned: REDLOCK's masters (locks/redlock.c), or NULL */
    struct px_fence *fence;     /* owned: fencing-token floors (locks/fence.c), or NULL */
};

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
