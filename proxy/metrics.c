/* Metrics registry and rendering; see metrics.h.
 *
 * DESIGN
 *
 * Storage. Plain counters that other modules already keep (srv->stats,
 * pool_get_stats(), srv->nclients...) are not duplicated: rendering reads
 * them, and the counters' families come from the stats tables
 * (proxy/stats.def, proxy/locks/stats.def through stats.c), which also
 * give INFO its lines. This file adds only what nobody else keeps:
 *   - per-command counters by result, in a fixed open-addressing table
 *     keyed by the command's table entry (static storage, so the pointer
 *     is a stable key; the set of commands is closed, so the label set is
 *     bounded: an unknown command counts as cmd="unknown");
 *   - three histograms with fixed bucket bounds (microseconds inside,
 *     seconds in the output, as Prometheus expects);
 *   - hold start times, in a hash keyed by the hold's address, because a
 *     hold (hold.c) has no field for it.
 * The upstream round trip of a script is timed by the pool (the result's
 * rtt_us), which hands every script's result to px_metrics_on_eval()
 * before its callback (pool_opts.on_eval, set by server.c).
 *
 * Cost per request: one table probe and three increments; per upstream
 * script, one histogram insert. Rendering walks everything once per
 * scrape.
 *
 * Invariants: a hold record exists from begin to end of the same hold; a
 * hold that never ends before shutdown is freed by px_metrics_destroy().
 *
 * Rejected: per-request timestamps in struct px_req (owned by another
 * module and on the hot path for everyone); wrapping each script's
 * callback in a timing record (it was so once: an allocation and a
 * detour through this file both ways on every script); wrapping pool
 * callbacks at link time (--wrap) or with a macro (hidden control flow); a histogram of
 * pipeline batch sizes (batches form inside pool/, which reports only the
 * totals, exported as counters: batch size = rate(requests) /
 * rate(batches)). */
#include "proxy/metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/fwd.h"
#include "proxy/request.h"
#include "proxy/server.h"
#include "proxy/stats.h"
#include "proxy/subs.h"
#include "proxy/tls.h"
#include "proxy/upstream_nodes.h"
#include "sched/loop.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

#define CMD_SLOTS   256u /* > the number of commands; power of two */
#define HIST_BOUNDS 16u  /* most finite bucket bounds of a histogram */

enum px_result {
    PX_RESULT_OK = 0,    /* any non-error, non-nil reply */
    PX_RESULT_NIL = 1,   /* nil bulk or array */
    PX_RESULT_ERROR = 2, /* error reply */
    PX_RESULT_COUNT = 3, /* number of results */
};

static const char *const result_names[PX_RESULT_COUNT] = {"ok", "nil", "error"};

struct cmd_stat {
    const struct px_cmd *cmd;    /* borrowed: static table entry, NULL: free slot */
    uint64_t n[PX_RESULT_COUNT]; /* answered commands by result */
};

struct hist {
    const uint64_t *bounds;           /* borrowed: ascending upper bounds, microseconds */
    unsigned nbounds;                 /* finite bounds (the +Inf bucket follows) */
    uint64_t counts[HIST_BOUNDS + 1]; /* observations per bucket (not cumulative) */
    uint64_t count;                   /* observations */
    uint64_t sum_us;                  /* sum of observations, microseconds */
};

struct px_metrics {
    struct cmd_stat cmds[CMD_SLOTS]; /* per-command counters, open addressing */
    struct cmd_stat unknown;         /* unknown commands (and a full table) */
    struct hist wait;                /* lock acquisition wait */
    struct hist hold;                /* lock hold time */
    struct hist upstream;            /* upstream script round trip */
};

/* Bucket bounds, microseconds. Waits and holds span ms to an hour;
 * upstream round trips sub-ms to seconds. */
static const uint64_t wait_bounds[] = {1000,    5000,    10000,    50000,    100000,  500000,
                                       1000000, 5000000, 10000000, 30000000, 60000000};
static const uint64_t hold_bounds[] = {10000,     100000,    500000,    1000000,
                                       5000000,   10000000,  30000000,  60000000,
                                       300000000, 900000000, 3600000000};
static const uint64_t upstream_bounds[] = {100,    250,    500,     1000,    2500,
                                           5000,   10000,  25000,   50000,   100000,
                                           250000, 500000, 1000000, 2500000, 5000000};

static void hist_init(struct hist *h, const uint64_t *bounds, unsigned n)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->nbounds = n;
}

static void hist_add(struct hist *h, uint64_t us)
{
    unsigned i = 0;

    while (i < h->nbounds && us > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum_us += us;
}

int px_metrics_create(struct px_server *srv)
{
    struct px_metrics *m = calloc(1, sizeof(*m));

    if (!m)
        return -ENOMEM;
    hist_init(&m->wait, wait_bounds, LP_ARRAY_SIZE(wait_bounds));
    hist_init(&m->hold, hold_bounds, LP_ARRAY_SIZE(hold_bounds));
    hist_init(&m->upstream, upstream_bounds, LP_ARRAY_SIZE(upstream_bounds));
    srv->metrics = m;
    return 0;
}

void px_metrics_destroy(struct px_server *srv)
{
    free(srv->metrics);
    srv->metrics = NULL;
}

/* ---- observations ----------------------------------------------------------- */

static struct cmd_stat *cmd_slot(struct px_metrics *m, const struct px_cmd *cmd)
{
    uint64_t h = (uint64_t)(uintptr_t)cmd * 0x9e3779b97f4a7c15ull;
    unsigned i, k;

    if (!cmd)
        return &m->unknown;
    for (i = 0; i < CMD_SLOTS; i++) {
        k = (unsigned)((h >> 32) + i) & (CMD_SLOTS - 1);
        if (m->cmds[k].cmd == cmd)
            return &m->cmds[k];
        if (!m->cmds[k].cmd) {
            m->cmds[k].cmd = cmd;
            return &m->cmds[k];
        }
    }
    return &m->unknown;
}

static enum px_result reply_result(const char *reply, size_t len)
{
    if (len > 0 && reply[0] == '-')
        return PX_RESULT_ERROR;
    if (len >= 3 && (reply[0] == '$' || reply[0] == '*') && reply[1] == '-' && reply[2] == '1')
        return PX_RESULT_NIL;
    return PX_RESULT_OK;
}

void px_metrics_command(struct px_server *srv, const struct px_cmd *cmd, const char *reply,
                        size_t len)
{
    cmd_slot(srv->metrics, cmd)->n[reply_result(reply, len)]++;
}

void px_metrics_observe_wait(struct px_server *srv, const struct px_req *req)
{
    const struct px_client *cl = req->cl;
    uint64_t now = sched_loop_now_ms(srv->loop), waited = 0;

    if (cl->barrier == req && now > cl->barrier_ms)
        waited = now - cl->barrier_ms;
    hist_add(&srv->metrics->wait, waited * 1000);
}

void px_metrics_hold_end(struct px_server *srv, uint64_t held_ms)
{
    uint64_t now = sched_loop_now_ms(srv->loop);

    hist_add(&srv->metrics->hold, (now > held_ms ? now - held_ms : 0) * 1000);
}

void px_metrics_on_eval(void *arg, const struct pool_result *res)
{
    struct px_server *srv = arg;

    if (res->err == 0 && srv->metrics) /* none yet, or none left at shutdown */
        hist_add(&srv->metrics->upstream, res->rtt_us);
}

/* ---- Prometheus text ------------------------------------------------------------ */

/* Group g's families (stats.h). */
static void write_group(struct px_server *srv, struct buf *o, enum px_stats_group g)
{
    struct px_stats_view v;

    px_stats_view(srv, g, &v);
    px_stats_write_prom(o, &v);
}

static void write_hist(struct buf *o, const char *name, const char *help, const struct hist *h)
{
    uint64_t cum = 0;
    unsigned i;

    buf_appendf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (i = 0; i < h->nbounds; i++) {
        cum += h->counts[i];
        buf_appendf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)h->bounds[i] / 1e6,
                    (unsigned long long)cum);
    }
    buf_appendf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                (unsigned long long)h->count, name, (double)h->sum_us / 1e6, name,
                (unsigned long long)h->count);
}

static void write_commands(struct px_metrics *m, struct buf *o)
{
    unsigned i, r;

    buf_appendf(o, "# HELP lockproxy_commands_total Commands answered, by command and result "
                   "(ok, nil, error).\n# TYPE lockproxy_commands_total counter\n");
    for (i = 0; i <= CMD_SLOTS; i++) {
        const struct cmd_stat *s = i < CMD_SLOTS ? &m->cmds[i] : &m->unknown;

        if (i < CMD_SLOTS && !s->cmd)
            continue;
        for (r = 0; r < PX_RESULT_COUNT; r++)
            buf_appendf(o, "lockproxy_commands_total{cmd=\"%s\",result=\"%s\"} %llu\n",
                        s->cmd ? s->cmd->name : "unknown", result_names[r],
                        (unsigned long long)s->n[r]);
    }
}

/* The process, the clients, the event loop; INFO's server, clients,
 * stats and latency sections. */
static void write_process(struct px_server *srv, struct buf *o)
{
    buf_appendf(o,
                "# HELP lockproxy_build_info Version and io backend.\n"
                "# TYPE lockproxy_build_info gauge\n"
                "lockproxy_build_info{version=\"%s\",io_backend=\"%s\"} 1\n"
                "# HELP lockproxy_uptime_seconds Seconds since the proxy started.\n"
                "# TYPE lockproxy_uptime_seconds gauge\nlockproxy_uptime_seconds %llu\n",
                LP_VERSION, sched_loop_backend(srv->loop),
                (unsigned long long)((sched_loop_now_ms(srv->loop) - srv->start_ms) / 1000));
    write_group(srv, o, PX_STATS_G_CLIENTS);
    write_group(srv, o, PX_STATS_G_STATS);
    write_group(srv, o, PX_STATS_G_LATENCY);
}

/* Only for a redis-sentinel:// upstream. */
static void write_sentinel(struct px_server *srv, struct buf *o)
{
    struct pool_stats st;

    if (!pool_is_sentinel(srv->pool))
        return;
    pool_get_stats(srv->pool, &st);
    write_group(srv, o, PX_STATS_G_SENTINEL);
    /* Names and addresses need no escaping: opts.c admits no quote or
     * backslash in a master name; an address is host:port. */
    buf_appendf(o,
                "# HELP lockproxy_sentinel_master_info The master in use (addr \"\" while none).\n"
                "# TYPE lockproxy_sentinel_master_info gauge\n"
                "lockproxy_sentinel_master_info{name=\"%s\",addr=\"%s\",sentinel=\"%s\"} 1\n",
                st.master_name, st.master_addr, st.sentinel_addr);
}

void px_metrics_write(struct px_server *srv, struct buf *out)
{
    struct px_metrics *m = srv->metrics;

    write_process(srv, out);
    write_commands(m, out);
    write_group(srv, out, PX_STATS_G_LOCKS);
    write_hist(out, "lockproxy_lock_wait_seconds",
               "Time from a lock request's dispatch to its acquisition.", &m->wait);
    write_hist(out, "lockproxy_lock_hold_seconds", "Time a lock was held through this proxy.",
               &m->hold);
    write_group(srv, out, PX_STATS_G_UPSTREAM);
    write_group(srv, out, PX_STATS_G_PUBSUB);
    px_upstream_nodes_metrics(srv, out);
    px_tls_metrics(srv, out);
    write_sentinel(srv, out);
    write_group(srv, out, PX_STATS_G_PASSTHROUGH);
    write_hist(out, "lockproxy_upstream_latency_seconds",
               "Time from submitting a script to Redis to its reply.", &m->upstream);
}

/* ---- INFO ---------------------------------------------------------------------- */

void px_metrics_info_commands(struct px_server *srv, struct buf *o)
{
    struct px_metrics *m = srv->metrics;
    unsigned i;
    size_t k;

    buf_appendf(o, "# Commandstats\r\n");
    for (i = 0; i <= CMD_SLOTS; i++) {
        const struct cmd_stat *s = i < CMD_SLOTS ? &m->cmds[i] : &m->unknown;
        const char *name = s->cmd ? s->cmd->name : "unknown";
        char lower[40];

        if ((i < CMD_SLOTS && !s->cmd) || s->n[0] + s->n[1] + s->n[2] == 0)
            continue;
        for (k = 0; name[k] && k + 1 < sizeof(lower); k++)
            lower[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
        lower[k] = '\0';
        buf_appendf(o, "cmdstat_%s:calls=%llu,ok=%llu,nil=%llu,errors=%llu\r\n", lower,
                    (unsigned long long)(s->n[0] + s->n[1] + s->n[2]), (unsigned long long)s->n[0],
                    (unsigned long long)s->n[1], (unsigned long long)s->n[2]);
    }
    buf_appendf(o, "\r\n");
}

/* Upper bound (ms) of the bucket holding quantile q, or -1 for +Inf. */
static double hist_quantile_ms(const struct hist *h, double q)
{
    uint64_t want = (uint64_t)(q * (double)h->count + 0.5), cum = 0;
    unsigned i;

    if (want == 0)
        want = 1;
    for (i = 0; i < h->nbounds; i++) {
        cum += h->counts[i];
        if (cum >= want)
            return (double)h->bounds[i] / 1000.0;
    }
    return -1;
}

static void info_hist(struct buf *o, const char *name, const struct hist *h)
{
    static const double qs[] = {0.5, 0.9, 0.99};
    static const char *const qn[] = {"p50", "p90", "p99"};
    size_t i;

    buf_appendf(o, "%s:count=%llu,sum_ms=%.3f", name, (unsigned long long)h->count,
                (double)h->sum_us / 1000.0);
    for (i = 0; i < LP_ARRAY_SIZE(qs) && h->count > 0; i++) {
        double v = hist_quantile_ms(h, qs[i]);

        if (v < 0)
            buf_appendf(o, ",%s_ms=inf", qn[i]);
        else
            buf_appendf(o, ",%s_ms=%g", qn[i], v);
    }
    buf_appendf(o, "\r\n");
}

void px_metrics_info_latency(struct px_server *srv, struct buf *o)
{
    struct px_metrics *m = srv->metrics;

    buf_appendf(o, "# Latencystats\r\n");
    info_hist(o, "lock_wait", &m->wait);
    info_hist(o, "lock_hold", &m->hold);
    info_hist(o, "upstream_latency", &m->upstream);
    buf_appendf(o, "\r\n");
}
