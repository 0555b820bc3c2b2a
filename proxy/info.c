/* INFO sections; see info.h. The counters' lines come from the stats
 * tables (proxy/stats.def, proxy/locks/stats.def, rendered by stats.c);
 * only text fields are written here. */
#include "proxy/info.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

#include "engine/redlock.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/cmds/redlock.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/fwd.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "proxy/stats.h"
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

/* "# Name", the lines of group g, and the blank line. */
static void info_group(struct px_server *srv, struct buf *o, const char *title,
                       enum px_stats_group g)
{
    struct px_stats_view v;

    px_stats_view(srv, g, &v);
    buf_appendf(o, "# %s\r\n", title);
    px_stats_write_info(o, &v);
    buf_appendf(o, "\r\n");
}

static void info_clients(struct px_server *srv, struct buf *o)
{
    info_group(srv, o, "Clients", PX_STATS_G_CLIENTS);
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
    info_group(srv, o, "Locks", PX_STATS_G_LOCKS);
}

static void info_upstream(struct px_server *srv, struct buf *o)
{
    struct px_stats_view v;
    struct pool_stats st;

    pool_get_stats(srv->pool, &st);
    px_stats_view(srv, PX_STATS_G_UPSTREAM, &v);
    buf_appendf(o, "# Upstream\r\nupstream_state:%s\r\n", st.state);
    px_stats_write_info(o, &v);
    buf_appendf(o, "upstream_last_error:%s\r\n\r\n", st.last_error ? st.last_error : "");
}

/* Only for a redis-sentinel:// upstream: which master, through which
 * sentinel, and how it has been followed. */
static void info_sentinel(struct px_server *srv, struct buf *o)
{
    struct px_stats_view v;
    struct pool_stats st;

    if (!pool_is_sentinel(srv->pool))
        return;
    pool_get_stats(srv->pool, &st);
    px_stats_view(srv, PX_STATS_G_SENTINEL, &v);
    buf_appendf(o,
                "# Sentinel\r\nsentinel_master_name:%s\r\nsentinel_master:%s\r\n"
                "sentinel_current:%s\r\n",
                st.master_name, st.master_addr, st.sentinel_addr);
    px_stats_write_info(o, &v);
    buf_appendf(o, "\r\n");
}

/* Pass-through pub/sub (subs.h). */
static void info_redlock(struct px_server *srv, struct buf *o)
{
    px_redlock_info(srv->engine, o);
}

static void info_pubsub(struct px_server *srv, struct buf *o)
{
    info_group(srv, o, "Pubsub", PX_STATS_G_PUBSUB);
}

static void info_stats(struct px_server *srv, struct buf *o)
{
    info_group(srv, o, "Stats", PX_STATS_G_STATS);
}

static void info_latency(struct px_server *srv, struct buf *o)
{
    info_group(srv, o, "Latency", PX_STATS_G_LATENCY);
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
    {"redlock", info_redlock},
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
