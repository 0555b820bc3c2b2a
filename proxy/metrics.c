/* Metrics registry and rendering; see metrics.h.
 *
 * DESIGN
 *
 * Storage. Plain counters that other modules already keep (srv->stats,
 * pool_get_stats(), srv->nclients...) are not duplicated: rendering reads
 * them. This file adds only what nobody else keeps:
 *   - per-command counters by result, in a fixed open-addressing table
 *     keyed by the command's table entry (static storage, so the pointer
 *     is a stable key; the set of commands is closed, so the label set is
 *     bounded: an unknown command counts as cmd="unknown");
 *   - three histograms with fixed bucket bounds (microseconds inside,
 *     seconds in the output, as Prometheus expects);
 *   - hold start times, in a hash keyed by the hold's address, because a
 *     hold (hold.c) has no field for it;
 *   - one small record per upstream script in flight, carrying the
 *     caller's callback and the submit time (px_metrics_eval).
 * Records come from free lists and are returned there, so steady traffic
 * does not allocate.
 *
 * Cost per request: one table probe and three increments; per upstream
 * script, two clock reads. Rendering walks everything once per scrape.
 *
 * Invariants: a round-trip record is in exactly one place: the free list
 * or the pool (as the callback argument); the pool's contract (exactly one
 * callback, or a failed submit) returns it. A hold record exists from
 * begin to end of the same hold; a hold that never ends before shutdown
 * is freed by px_metrics_destroy().
 *
 * Rejected: per-request timestamps in struct px_req (owned by another
 * module and on the hot path for everyone); wrapping pool callbacks at
 * link time (--wrap) or with a macro (hidden control flow); a histogram of
 * pipeline batch sizes (batches form inside pool/, which reports only the
 * totals, exported as counters: batch size = rate(requests) /
 * rate(batches)). */
#include "proxy/metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/fwd.h"
#include "proxy/request.h"
#include "proxy/server.h"
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

struct rtt_rec {
    struct px_metrics *m; /* borrowed: owner */
    pool_reply_fn *cb;    /* borrowed: the caller's callback */
    void *arg;            /* borrowed: the caller's argument */
    uint64_t start_ns;    /* monotonic submit time */
    struct rtt_rec *next; /* in m->free_rtts while unused */
};

struct px_metrics {
    struct cmd_stat cmds[CMD_SLOTS]; /* per-command counters, open addressing */
    struct cmd_stat unknown;         /* unknown commands (and a full table) */
    struct hist wait;                /* lock acquisition wait */
    struct hist hold;                /* lock hold time */
    struct hist upstream;            /* upstream script round trip */
    struct rtt_rec *free_rtts;       /* owned: unused round-trip records */
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
    struct px_metrics *m = srv->metrics;
    while (m->free_rtts) {
        struct rtt_rec *r = m->free_rtts;

        m->free_rtts = r->next;
        free(r);
    }
    free(m);
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

static void rtt_put(struct px_metrics *m, struct rtt_rec *r)
{
    r->next = m->free_rtts;
    m->free_rtts = r;
}

static void rtt_on_reply(void *arg, const redisReply *reply, int err)
{
    struct rtt_rec *r = arg;
    pool_reply_fn *cb = r->cb;
    void *cb_arg = r->arg;

    if (err == 0)
        hist_add(&r->m->upstream, (clock_mono_ns() - r->start_ns) / 1000);
    rtt_put(r->m, r);
    cb(cb_arg, reply, err);
}

/* pool_eval(), or pool_eval_wait() when w is set. */
static int metrics_pool_eval(struct px_server *srv, uint64_t hint, unsigned script, int numkeys,
                             int argc, const char *const *argv, const size_t *lens,
                             struct pool_wait *w, pool_reply_fn *cb, void *arg)
{
    if (w)
        return pool_eval_wait(srv->pool, hint, script, numkeys, argc, argv, lens, w, cb, arg);
    return pool_eval(srv->pool, hint, script, numkeys, argc, argv, lens, cb, arg);
}

int px_metrics_eval(struct px_server *srv, uint64_t hint, unsigned script, int numkeys, int argc,
                    const char *const *argv, const size_t *lens, struct pool_wait *w,
                    pool_reply_fn *cb, void *arg)
{
    struct px_metrics *m = srv->metrics;
    struct rtt_rec *r = m->free_rtts;
    int rc;

    if (r)
        m->free_rtts = r->next;
    else if (!(r = malloc(sizeof(*r))))
        return metrics_pool_eval(srv, hint, script, numkeys, argc, argv, lens, w, cb, arg);
    r->m = m;
    r->cb = cb;
    r->arg = arg;
    r->start_ns = clock_mono_ns();
    rc = metrics_pool_eval(srv, hint, script, numkeys, argc, argv, lens, w, rtt_on_reply, r);
    if (rc < 0)
        rtt_put(m, r);
    return rc;
}

/* ---- Prometheus text ------------------------------------------------------------ */

struct metric {
    const char *name; /* full metric name */
    const char *type; /* "counter" or "gauge" */
    const char *help; /* HELP text */
    uint64_t value;   /* current value */
};

static void write_metrics(struct buf *o, const struct metric *ms, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        buf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", ms[i].name, ms[i].help, ms[i].name,
                    ms[i].type, ms[i].name, (unsigned long long)ms[i].value);
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

static struct sched_loop_latency loop_latency(const struct px_server *srv)
{
    struct sched_loop_latency lat;

    sched_loop_latency(srv->loop, &lat);
    return lat;
}

static void write_process(struct px_server *srv, struct buf *o)
{
    const struct px_stats *s = &srv->stats;
    const struct sched_loop_latency lat = loop_latency(srv);
    const struct metric ms[] = {
        {"lockproxy_uptime_seconds", "gauge", "Seconds since the proxy started.",
         (sched_loop_now_ms(srv->loop) - srv->start_ms) / 1000},
        {"lockproxy_client_connections", "gauge", "Client connections open now.", srv->nclients},
        {"lockproxy_client_connections_total", "counter", "Client connections accepted.",
         s->connections},
        {"lockproxy_client_connections_rejected_total", "counter",
         "Client connections refused over --max-clients.", s->rejected},
        {"lockproxy_client_output_paused", "gauge",
         "Client connections not read until their unsent replies are sent.",
         srv->nclients_out_paused},
        {"lockproxy_client_output_pauses_total", "counter",
         "Times a client's reading paused at --client-output-soft-limit.", s->output_pauses},
        {"lockproxy_client_output_limit_closes_total", "counter",
         "Client connections closed past --client-output-hard-limit.", s->output_closes},
        {"lockproxy_client_memory_bytes", "gauge",
         "Memory held for clients: MULTI queues, input, unsent replies.", srv->client_mem},
        {"lockproxy_client_memory_limit_bytes", "gauge", "--max-client-memory (0: off).",
         srv->opts.max_client_memory},
        {"lockproxy_client_memory_refusals_total", "counter",
         "Commands refused (-OOM) over --max-client-memory.", s->climem_refusals},
        {"lockproxy_client_idle_timeouts_total", "counter",
         "Client connections closed idle by --timeout.", s->idle_closes},
        {"lockproxy_client_auth_timeouts_total", "counter",
         "Client connections closed without AUTH by --auth-timeout.", s->auth_closes},
        {"lockproxy_protocol_errors_total", "counter",
         "Client connections closed on a protocol error.", s->proto_errs},
        {"lockproxy_auth_failures_total", "counter", "Failed AUTH attempts.", s->auth_failures},
        {"lockproxy_config_reloads_total", "counter", "Configuration reloads applied.", s->reloads},
        {"lockproxy_config_reload_errors_total", "counter",
         "Configuration reloads refused (bad file).", s->reload_errors},
        {"lockproxy_loop_iterations_total", "counter", "Event loop iterations.", lat.iterations},
        {"lockproxy_loop_max_work_microseconds", "gauge",
         "The longest work of one event loop iteration (not its wait for events).",
         lat.max_work_us},
        {"lockproxy_loop_slow_iterations_total", "counter",
         "Event loop iterations that worked longer than --latency-monitor-threshold.", lat.slow},
        {"lockproxy_loop_late_timers_total", "counter",
         "Timers that ran more than --latency-monitor-threshold after their deadline.",
         lat.late_timers},
        {"lockproxy_loop_max_timer_late_milliseconds", "gauge",
         "The latest timer run, ms after its deadline.", lat.max_late_ms},
    };

    buf_appendf(o,
                "# HELP lockproxy_build_info Version and io backend.\n"
                "# TYPE lockproxy_build_info gauge\n"
                "lockproxy_build_info{version=\"%s\",io_backend=\"%s\"} 1\n",
                LP_VERSION, sched_loop_backend(srv->loop));
    write_metrics(o, ms, LP_ARRAY_SIZE(ms));
}

static void write_locks(struct px_server *srv, struct buf *o)
{
    const struct lk_stats *s = &srv->engine->stats;
    const struct metric ms[] = {
        {"lockproxy_locks_held", "gauge", "Locks held through this proxy (holds tracked).",
         srv->engine->nholds},
        {"lockproxy_lock_waiters", "gauge", "Lock requests waiting now.", srv->engine->nwaiters},
        {"lockproxy_wait_channels", "gauge", "Lock channels with shared wait state.",
         srv->engine->locks.count},
        {"lockproxy_locks_acquired_total", "counter", "Successful lock acquisitions.", s->acquired},
        {"lockproxy_locks_released_total", "counter", "Full releases through UNLOCK.", s->released},
        {"lockproxy_lock_wait_timeouts_total", "counter", "Lock requests whose WAIT ran out.",
         s->timeouts},
        {"lockproxy_renewals_total", "counter", "Watchdog renewals that extended a lease.",
         s->renewals},
        {"lockproxy_renewal_batches_total", "counter", "Watchdog renewal scripts sent.",
         s->renew_batches},
        {"lockproxy_leases_lost_total", "counter",
         "Holds found lost (expired or taken over) before their release.", s->leases_lost},
        {"lockproxy_disconnect_releases_total", "counter",
         "Locks released because their connection closed.", s->disc_releases},
        {"lockproxy_wakeups_total", "counter", "Wake-up messages received.", s->wakeups},
        {"lockproxy_unlocks_in_hand_total", "counter",
         "UNLOCKs Redis did not answer, carried out by the proxy (retried until confirmed).",
         s->unlocks_in_hand},
        {"lockproxy_late_grants_refused_total", "counter",
         "Grants refused because too little of their lease was left when the reply came.",
         s->late_grants},
        {"lockproxy_unknown_outcomes_total", "counter",
         "Acquires answered 'outcome unknown' (the reply from Redis was lost).", s->unknown_acqs},
        {"lockproxy_unknown_outcomes_rolled_back_total", "counter",
         "Acquisitions found applied that no client was told of, undone.", s->rolled_back},
        {"lockproxy_disconnect_releases_retried_total", "counter",
         "Releases and permit returns of closed connections sent again after a failure.",
         srv->engine->jobs.retried[PX_JOB_RELEASE]},
        {"lockproxy_disconnect_releases_dropped_total", "counter",
         "Releases and permit returns of closed connections given up.",
         srv->engine->jobs.dropped[PX_JOB_RELEASE]},
        {"lockproxy_rollbacks_retried_total", "counter",
         "Roll-backs (and fair queue exits) sent again after a failure.",
         srv->engine->jobs.retried[PX_JOB_ROLLBACK]},
        {"lockproxy_rollbacks_dropped_total", "counter", "Roll-backs given up.",
         srv->engine->jobs.dropped[PX_JOB_ROLLBACK]},
        {"lockproxy_sync_writes_total", "counter",
         "Writes sent with WAIT (--sync-replicas) and answered.", s->sync_writes},
        {"lockproxy_sync_unreplicated_writes_total", "counter",
         "Writes fewer replicas than --sync-replicas acknowledged within --sync-timeout.",
         s->sync_short},
        {"lockproxy_sync_grants_refused_total", "counter",
         "Grants undone and answered NOREPLICAS: not replicated to --sync-replicas replicas.",
         s->sync_refused},
        {"lockproxy_releases_replayed_total", "counter",
         "Confirmed releases re-sent to a new master after a failover.", srv->engine->replays.sent},
        {"lockproxy_ghost_holds_removed_total", "counter",
         "Of those, holds the new master still had (releases the failover lost).",
         srv->engine->replays.found},
        {"lockproxy_releases_replay_dropped_total", "counter",
         "Releases forgotten before their lease ended (over the bound).",
         srv->engine->replays.dropped},
        {"lockproxy_cleanup_pending", "gauge",
         "Releases, returns and roll-backs waiting for Redis or in flight.",
         srv->engine->jobs.ndue + srv->engine->jobs.ninflight},
    };

    write_metrics(o, ms, LP_ARRAY_SIZE(ms));
}

/* Pass-through pub/sub (subs.h). */
static void write_subs(struct px_server *srv, struct buf *o)
{
    struct px_subs_stats st;

    px_subs_get_stats(srv, &st);
    {
        const struct metric ms[] = {
            {"lockproxy_passthrough_channels", "gauge",
             "Channels, patterns and shard channels clients subscribe to through the proxy "
             "(one upstream subscription each).",
             st.channels},
            {"lockproxy_passthrough_subscribers", "gauge",
             "Client subscriptions riding those (the sum over channels of their subscribers).",
             st.subscribers},
            {"lockproxy_shared_subscriptions", "gauge",
             "Upstream subscriptions shared by clients and lock waiters.", st.hubs},
            {"lockproxy_passthrough_messages_delivered_total", "counter",
             "Pub/sub messages written to subscribed clients.", st.delivered},
            {"lockproxy_passthrough_publishes_total", "counter", "PUBLISH and SPUBLISH forwarded.",
             st.published},
            {"lockproxy_passthrough_subscribers_dropped_total", "counter",
             "Subscribed clients closed: a message would pass their output bounds.", st.dropped},
        };

        write_metrics(o, ms, LP_ARRAY_SIZE(ms));
    }
}

static void write_upstream(struct px_server *srv, struct buf *o)
{
    struct pool_stats st;

    pool_get_stats(srv->pool, &st);
    {
        const struct metric ms[] = {
            {"lockproxy_upstream_up", "gauge", "1 while a command connection to Redis is ready.",
             pool_is_ready(srv->pool)},
            {"lockproxy_upstream_connections", "gauge", "Command connections configured.",
             st.conns},
            {"lockproxy_upstream_connections_ready", "gauge", "Command connections ready.",
             st.conns_ready},
            {"lockproxy_pubsub_up", "gauge", "1 while the pub/sub connection is ready.",
             st.pubsub_ready},
            {"lockproxy_subscriptions", "gauge", "Channels subscribed upstream.", st.channels},
            {"lockproxy_upstream_requests_total", "counter", "Requests sent to Redis.",
             st.requests},
            {"lockproxy_upstream_batches_total", "counter",
             "Pipelined writes to Redis (requests_total / batches_total = batch size).",
             st.batches},
            {"lockproxy_upstream_script_batches_total", "counter",
             "Batch runner calls (--script-batch): several lock scripts in one call.",
             st.script_batches},
            {"lockproxy_upstream_batched_scripts_total", "counter",
             "Lock scripts that went out in batch runner calls.", st.batched},
            {"lockproxy_upstream_inflight", "gauge", "Requests awaiting a reply.", st.inflight},
            {"lockproxy_upstream_reconnects_total", "counter", "Reconnects after a loss.",
             st.reconnects},
            {"lockproxy_upstream_restarts_total", "counter",
             "Masters found restarted (a new run_id); their holds were checked at once.",
             st.restarts},
            {"lockproxy_upstream_errors_total", "counter",
             "Requests failed by connection loss or timeout.", st.errors},
            {"lockproxy_upstream_error_replies_total", "counter",
             "Client requests answered with an UPSTREAM error.", srv->stats.upstream_errs},
        };

        write_metrics(o, ms, LP_ARRAY_SIZE(ms));
    }
}

/* Only for a redis-sentinel:// upstream. */
static void write_sentinel(struct px_server *srv, struct buf *o)
{
    struct pool_stats st;

    if (!pool_is_sentinel(srv->pool))
        return;
    pool_get_stats(srv->pool, &st);
    {
        const struct metric ms[] = {
            {"lockproxy_sentinel_connected", "gauge",
             "1 while a sentinel answers the master queries.", st.sentinel_connected},
            {"lockproxy_sentinel_subscribed", "gauge",
             "1 while the +switch-master/+promoted-slave subscription is up.",
             st.sentinel_subscribed},
            {"lockproxy_sentinel_master_known", "gauge",
             "1 while a master named by the sentinels is in use.", st.master_addr[0] != '\0'},
            {"lockproxy_sentinel_failures_total", "counter",
             "Sentinels given up on (connect, error, unknown master name).", st.sentinel_failures},
            {"lockproxy_sentinel_master_switches_total", "counter",
             "Times the sentinels named a different master.", st.master_switches},
            {"lockproxy_sentinel_switch_events_total", "counter",
             "+switch-master/+promoted-slave messages for this master.", st.switch_events},
            {"lockproxy_sentinel_readonly_replies_total", "counter",
             "READONLY replies from a demoted master (never passed to clients).", st.readonly},
            {"lockproxy_sentinel_role_mismatches_total", "counter",
             "Master connections refused because ROLE was not master.", st.role_mismatches},
        };

        write_metrics(o, ms, LP_ARRAY_SIZE(ms));
    }
    /* Names and addresses need no escaping: opts.c admits no quote or
     * backslash in a master name; an address is host:port. */
    buf_appendf(o,
                "# HELP lockproxy_sentinel_master_info The master in use (addr \"\" while none).\n"
                "# TYPE lockproxy_sentinel_master_info gauge\n"
                "lockproxy_sentinel_master_info{name=\"%s\",addr=\"%s\",sentinel=\"%s\"} 1\n",
                st.master_name, st.master_addr, st.sentinel_addr);
}

/* Pass-through (fwd.h). */
static void write_passthrough(struct px_server *srv, struct buf *o)
{
    struct px_fwd_stats st;

    px_fwd_get_stats(srv, &st);
    {
        const struct metric ms[] = {
            {"lockproxy_passthrough_enabled", "gauge", "--passthrough (1 on, 0 off).",
             srv->opts.passthrough ? 1u : 0u},
            {"lockproxy_forwarded_commands_total", "counter",
             "Ordinary Redis commands forwarded upstream (pass-through).", st.forwarded},
            {"lockproxy_forwarded_errors_total", "counter",
             "Forwarded commands answered with an error (Redis's or UPSTREAM).", st.errors},
            {"lockproxy_forwarded_refused_total", "counter",
             "Commands refused by pass-through before reaching Redis (unknown, blocking, "
             "server-wide, arity, key patterns, CROSSSLOT, MULTI).",
             st.refused},
            {"lockproxy_forwarded_noscript_retries_total", "counter",
             "EVALSHA retried as EVAL with the kept text after NOSCRIPT.", st.noscript_retries},
            {"lockproxy_forwarded_scripts", "gauge", "Client script texts kept by SHA1.",
             st.scripts},
            {"lockproxy_forwarded_script_bytes", "gauge", "Memory of the kept script texts.",
             st.script_bytes},
        };

        write_metrics(o, ms, LP_ARRAY_SIZE(ms));
    }
}

void px_metrics_write(struct px_server *srv, struct buf *out)
{
    struct px_metrics *m = srv->metrics;

    write_process(srv, out);
    write_commands(m, out);
    write_locks(srv, out);
    write_hist(out, "lockproxy_lock_wait_seconds",
               "Time from a lock request's dispatch to its acquisition.", &m->wait);
    write_hist(out, "lockproxy_lock_hold_seconds", "Time a lock was held through this proxy.",
               &m->hold);
    write_upstream(srv, out);
    write_subs(srv, out);
    px_upstream_nodes_metrics(srv, out);
    px_tls_metrics(srv, out);
    write_sentinel(srv, out);
    write_passthrough(srv, out);
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
