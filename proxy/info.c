/* INFO sections; see info.h. */
#include "proxy/info.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/cmds/redlock.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/fwd.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "proxy/subs.h"
#include "proxy/tls.h"
#include "proxy/upstream_nodes.h"
#include "sched/loop.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

static bool want(const char *section, const char *name)
{
    return !section || strcasecmp(section, "all") == 0 || strcasecmp(section, "default") == 0 ||
           strcasecmp(section, "everything") == 0 || strcasecmp(section, name) == 0;
}

static void info_server(struct px_server *srv, struct buf *o)
{
    uint64_t up = (sched_loop_now_ms(srv->loop) - srv->start_ms) / 1000;

    buf_appendf(o,
                "# Server\r\nlockproxy_version:%s\r\nredis_version:7.0.0\r\n"
                "proxy_uuid:%s\r\nio_backend:%s\r\nuptime_in_seconds:%llu\r\n"
                "lock_watchdog_timeout_ms:%llu\r\non_disconnect:%s\r\n\r\n",
                LP_VERSION, srv->uuid, sched_loop_backend(srv->loop), (unsigned long long)up,
                (unsigned long long)srv->opts.watchdog_ms,
                srv->opts.on_disc == PX_DISCONNECT_RELEASE ? "release" : "expire");
}

/* Clients with a waiting command (Redis's blocked_clients). */
static unsigned blocked_clients(struct px_server *srv)
{
    struct list *n;
    unsigned b = 0;

    for (n = srv->clients.next; n != &srv->clients; n = n->next)
        b += list_entry(n, struct px_client, client_node)->barrier != NULL;
    return b;
}

static void info_clients(struct px_server *srv, struct buf *o)
{
    buf_appendf(o,
                "# Clients\r\nconnected_clients:%u\r\nblocked_clients:%u\r\nmax_clients:%u\r\n"
                "total_connections_received:%llu\r\nrejected_connections:%llu\r\n"
                "clients_output_paused:%u\r\nclient_memory:%zu\r\nmax_client_memory:%zu\r\n"
                "client_memory_refusals:%llu\r\n\r\n",
                srv->nclients, blocked_clients(srv), srv->opts.max_clients,
                (unsigned long long)srv->stats.connections, (unsigned long long)srv->stats.rejected,
                srv->nclients_out_paused, srv->client_mem, srv->opts.max_client_memory,
                (unsigned long long)srv->stats.climem_refusals);
}

/* jemalloc's control interface when jemalloc is the allocator (it is,
 * except under the sanitizers): weak, so the proxy library links without
 * it. */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

/* Resident set size in bytes (0 if /proc cannot tell). */
static uint64_t rss_bytes(void)
{
    unsigned long long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (!f)
        return 0;
    if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Bytes allocated: jemalloc's stats.allocated, else the RSS. */
static uint64_t used_bytes(uint64_t rss)
{
    uint64_t epoch = 1;
    size_t allocated = 0, len = sizeof(allocated), elen = sizeof(epoch);

    if (mallctl && mallctl("epoch", &epoch, &elen, &epoch, elen) == 0 &&
        mallctl("stats.allocated", &allocated, &len, NULL, 0) == 0 && allocated > 0)
        return allocated;
    return rss;
}

/* As Redis's bytesToHuman: B, K, M, G with two decimals. */
static void human(uint64_t n, char *out, size_t cap)
{
    static const char units[] = "KMGTP";
    double d = (double)n;
    int u = -1;

    while (d >= 1024 && u + 1 < (int)sizeof(units) - 1) {
        d /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(out, cap, "%lluB", (unsigned long long)n);
    else
        snprintf(out, cap, "%.2f%c", d, units[u]);
}

/* What redis-cli --stat and dashboards read (used_memory). */
static void info_memory(struct px_server *srv, struct buf *o)
{
    uint64_t rss = rss_bytes(), used = used_bytes(rss);
    char h1[32], h2[32];

    (void)srv;
    human(used, h1, sizeof(h1));
    human(rss, h2, sizeof(h2));
    buf_appendf(o,
                "# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\n"
                "used_memory_rss:%llu\r\nused_memory_rss_human:%s\r\nmem_allocator:%s\r\n\r\n",
                (unsigned long long)used, h1, (unsigned long long)rss, h2,
                mallctl ? "jemalloc" : "libc");
}

static void info_locks(struct px_server *srv, struct buf *o)
{
    const struct lk_stats *s = &srv->engine->stats;
    const struct px_jobs *j = &srv->engine->jobs;

    buf_appendf(o,
                "# Locks\r\nlocks_held:%u\r\nlock_waiters:%u\r\nwait_channels:%zu\r\n"
                "locks_acquired:%llu\r\nlocks_released:%llu\r\nlock_wait_timeouts:%llu\r\n"
                "watchdog_renewals:%llu\r\nwatchdog_batches:%llu\r\nleases_lost:%llu\r\n"
                "disconnect_releases:%llu\r\nwakeup_messages:%llu\r\nunlocks_in_hand:%llu\r\n",
                srv->engine->nholds, srv->engine->nwaiters, srv->engine->locks.count,
                (unsigned long long)s->acquired, (unsigned long long)s->released,
                (unsigned long long)s->timeouts, (unsigned long long)s->renewals,
                (unsigned long long)s->renew_batches, (unsigned long long)s->leases_lost,
                (unsigned long long)s->disc_releases, (unsigned long long)s->wakeups,
                (unsigned long long)s->unlocks_in_hand);
    buf_appendf(o,
                "late_grants_refused:%llu\r\nunknown_outcomes:%llu\r\n"
                "unknown_outcomes_rolled_back:%llu\r\ndisconnect_releases_retried:%llu\r\n"
                "disconnect_releases_dropped:%llu\r\nrollbacks_retried:%llu\r\n"
                "rollbacks_dropped:%llu\r\ncleanup_pending:%u\r\nreleases_replayed:%llu\r\n"
                "ghost_holds_removed:%llu\r\nreleases_replay_dropped:%llu\r\n",
                (unsigned long long)s->late_grants, (unsigned long long)s->unknown_acqs,
                (unsigned long long)s->rolled_back, (unsigned long long)j->retried[PX_JOB_RELEASE],
                (unsigned long long)j->dropped[PX_JOB_RELEASE],
                (unsigned long long)j->retried[PX_JOB_ROLLBACK],
                (unsigned long long)j->dropped[PX_JOB_ROLLBACK], j->ndue + j->ninflight,
                (unsigned long long)srv->engine->replays.sent,
                (unsigned long long)srv->engine->replays.found,
                (unsigned long long)srv->engine->replays.dropped);
    buf_appendf(o,
                "sync_replicas:%u\r\nsync_timeout_ms:%u\r\nsync_writes:%llu\r\n"
                "sync_writes_unreplicated:%llu\r\nsync_grants_refused:%llu\r\n\r\n",
                srv->opts.sync_replicas, srv->opts.sync_timeout_ms,
                (unsigned long long)s->sync_writes, (unsigned long long)s->sync_short,
                (unsigned long long)s->sync_refused);
}

static void info_upstream(struct px_server *srv, struct buf *o)
{
    struct pool_stats st;

    pool_get_stats(srv->pool, &st);
    buf_appendf(o,
                "# Upstream\r\nupstream_state:%s\r\nupstream_conns:%u\r\n"
                "upstream_conns_ready:%u\r\npubsub_ready:%d\r\npubsub_channels:%llu\r\n"
                "upstream_requests:%llu\r\nupstream_inflight:%llu\r\n"
                "upstream_batches:%llu\r\nupstream_reconnects:%llu\r\nupstream_restarts:%llu\r\n"
                "upstream_errors:%llu\r\nupstream_noscript_retries:%llu\r\n"
                "upstream_script_batches:%llu\r\nupstream_batched_scripts:%llu\r\n"
                "upstream_last_error:%s\r\n\r\n",
                st.state, st.conns, st.conns_ready, st.pubsub_ready ? 1 : 0,
                (unsigned long long)st.channels, (unsigned long long)st.requests,
                (unsigned long long)st.inflight, (unsigned long long)st.batches,
                (unsigned long long)st.reconnects, (unsigned long long)st.restarts,
                (unsigned long long)st.errors, (unsigned long long)st.noscript_retries,
                (unsigned long long)st.script_batches, (unsigned long long)st.batched,
                st.last_error ? st.last_error : "");
}

/* Only for a redis-sentinel:// upstream: which master, through which
 * sentinel, and how it has been followed. */
static void info_sentinel(struct px_server *srv, struct buf *o)
{
    struct pool_stats st;

    if (!pool_is_sentinel(srv->pool))
        return;
    pool_get_stats(srv->pool, &st);
    buf_appendf(o,
                "# Sentinel\r\nsentinel_master_name:%s\r\nsentinel_master:%s\r\n"
                "sentinel_current:%s\r\nsentinels:%u\r\nsentinel_connected:%d\r\n"
                "sentinel_subscribed:%d\r\nsentinel_answers:%llu\r\nsentinel_failures:%llu\r\n"
                "sentinel_master_switches:%llu\r\nsentinel_switch_events:%llu\r\n"
                "sentinel_readonly_replies:%llu\r\nsentinel_role_mismatches:%llu\r\n\r\n",
                st.master_name, st.master_addr, st.sentinel_addr, st.sentinels,
                st.sentinel_connected ? 1 : 0, st.sentinel_subscribed ? 1 : 0,
                (unsigned long long)st.sentinel_answers, (unsigned long long)st.sentinel_failures,
                (unsigned long long)st.master_switches, (unsigned long long)st.switch_events,
                (unsigned long long)st.readonly, (unsigned long long)st.role_mismatches);
}

/* Pass-through pub/sub (subs.h). */
static void info_pubsub(struct px_server *srv, struct buf *o)
{
    struct px_subs_stats st;

    px_subs_get_stats(srv, &st);
    buf_appendf(o,
                "# Pubsub\r\npassthrough_channels:%llu\r\npassthrough_subscribers:%llu\r\n"
                "shared_subscriptions:%llu\r\npassthrough_messages_delivered:%llu\r\n"
                "passthrough_publishes:%llu\r\npassthrough_subscribers_dropped:%llu\r\n\r\n",
                (unsigned long long)st.channels, (unsigned long long)st.subscribers,
                (unsigned long long)st.hubs, (unsigned long long)st.delivered,
                (unsigned long long)st.published, (unsigned long long)st.dropped);
}

static void info_stats(struct px_server *srv, struct buf *o)
{
    const struct px_stats *s = &srv->stats;

    buf_appendf(o,
                "# Stats\r\ntotal_commands_processed:%llu\r\nupstream_error_replies:%llu\r\n"
                "protocol_errors:%llu\r\nauth_failures:%llu\r\nconfig_reloads:%llu\r\n"
                "config_reload_errors:%llu\r\nclient_output_pauses:%llu\r\n"
                "client_output_buffer_limit_disconnections:%llu\r\nclient_idle_timeouts:%llu\r\n"
                "client_auth_timeouts:%llu\r\nprotected_mode_refusals:%llu\r\n\r\n",
                (unsigned long long)s->commands, (unsigned long long)s->upstream_errs,
                (unsigned long long)s->proto_errs, (unsigned long long)s->auth_failures,
                (unsigned long long)s->reloads, (unsigned long long)s->reload_errors,
                (unsigned long long)s->output_pauses, (unsigned long long)s->output_closes,
                (unsigned long long)s->idle_closes, (unsigned long long)s->auth_closes,
                (unsigned long long)s->protected_refusals);
}

/* The event loop's latency (sched_loop_latency()). */
static void info_latency(struct px_server *srv, struct buf *o)
{
    struct sched_loop_latency lat;

    sched_loop_latency(srv->loop, &lat);
    buf_appendf(o,
                "# Latency\r\nlatency_monitor_threshold_ms:%llu\r\nloop_iterations:%llu\r\n"
                "loop_max_work_us:%llu\r\nloop_slow_iterations:%llu\r\n"
                "loop_late_timers:%llu\r\nloop_max_timer_late_ms:%llu\r\n\r\n",
                (unsigned long long)lat.threshold_ms, (unsigned long long)lat.iterations,
                (unsigned long long)lat.max_work_us, (unsigned long long)lat.slow,
                (unsigned long long)lat.late_timers, (unsigned long long)lat.max_late_ms);
}

struct info_section {
    const char *name;                                    /* lower-case section name */
    void (*write)(struct px_server *srv, struct buf *o); /* appends "# Name" and lines */
};

/* In output order; one line per module that reports its own section. */
static const struct info_section sections[] = {
    {"server", info_server},
    {"clients", info_clients},
    {"memory", info_memory},
    {"locks", info_locks},
    {"upstream", info_upstream},
    {"cluster", px_upstream_nodes_info},
    {"sentinel", info_sentinel},
    {"redlock", px_redlock_info},
    {"pubsub", info_pubsub},
    {"stats", info_stats},
    {"latency", info_latency},
    {"sync", px_sync_info},
    {"tls", px_tls_info},
    {"passthrough", px_fwd_info},
    {"commandstats", px_metrics_info_commands},
    {"latencystats", px_metrics_info_latency},
};

void px_info_write(struct px_server *srv, const char *section, struct buf *out)
{
    size_t i;

    for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        if (want(section, sections[i].name))
            sections[i].write(srv, out);
    }
}
