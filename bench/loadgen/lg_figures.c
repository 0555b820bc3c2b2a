/* The figures of a target's measured phase: what is read at its start
 * (Redis's INFO, the proxy's and the bench's CPU, the machine's busy
 * time) and at its end (the same again, the counters, fairness), into the
 * run's result. INFO is read on short blocking connections (lg_stats.c)
 * at the two phase boundaries only. The Redis figures are read only when
 * the bench may (o->redis_stats), and Redis's CPU counts in the machine's
 * busy time only when it runs here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/loadgen/lg_cluster.h"
#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_stats.h"
#include "common/compiler.h"

/* INFO of the one Redis, or summed over every master with --cluster. */
static int redis_snapshot(const struct lg_run *r, struct lg_redis_snap *out)
{
    char *err = r->res->redis_error;
    size_t cap = sizeof(r->res->redis_error);

    if (r->cluster)
        return lg_cluster_snapshot(r, out, err, cap);
    return lg_redis_snapshot(&r->o->redis, out, err, cap);
}

void lg_figures_begin(struct lg_run *r)
{
    struct lg_result *res = r->res;
    int pid = lg_target_pid(r->o, r->target);

    res->redis_local = lg_endpoint_is_local(&r->o->redis);
    if (r->o->redis_stats)
        res->redis_ok = redis_snapshot(r, r->snap0) == 0;
    else
        snprintf(res->redis_error, sizeof(res->redis_error),
                 "omitted: give --redis HOST:PORT (the Redis behind the target) for them");
    res->proxy_cpu_ok = pid > 0 && lg_proc_cpu(pid, &r->proxy_cpu0, &r->proxy_sys0) == 0;
    r->bench_cpu0 = lg_self_cpu();
    res->sys_ok = lg_sys_busy(&r->sys_busy0) == 0;
}

/* Redis CPU, command totals and the per-command deltas (without the
 * bench's own INFO and AUTH) between the two snapshots. */
static void redis_figures(struct lg_run *r, const struct lg_redis_snap *end)
{
    struct lg_result *res = r->res;

    res->redis_cpu_s = end->cpu_s - r->snap0->cpu_s;
    res->redis_sys_s = end->cpu_sys_s - r->snap0->cpu_sys_s;
    res->redis_reads = end->reads - r->snap0->reads;
    res->redis_clients = end->clients;
    res->redis_pubsub_conns = end->pubsub_conns;
    res->redis_pubsub_chans = end->pubsub_chans;
    lg_redis_delta(r->snap0, end, &res->redis_client_cmds, &res->redis_all_calls);
    res->ndelta = 0;
    for (unsigned i = 0; i < end->n; i++) {
        uint64_t d = end->cmd[i].calls - lg_redis_calls(r->snap0, end->cmd[i].name);

        if (d == 0 || lg_cmd_is_bench_own(end->cmd[i].name))
            continue;
        res->delta[res->ndelta] = end->cmd[i];
        res->delta[res->ndelta].calls = d;
        res->ndelta++;
    }
}

/* Takes the end-of-measurement figures; a figure whose start or end
 * could not be read is reported n/a. */
static void snapshot_end(struct lg_run *r)
{
    struct lg_result *res = r->res;
    struct lg_redis_snap *end = malloc(sizeof(*end));
    double cpu, sys;

    res->bench_cpu_s = lg_self_cpu() - r->bench_cpu0;
    if (res->proxy_cpu_ok && lg_proc_cpu(lg_target_pid(r->o, r->target), &cpu, &sys) == 0) {
        res->proxy_cpu_s = cpu - r->proxy_cpu0;
        res->proxy_sys_s = sys - r->proxy_sys0;
    } else {
        res->proxy_cpu_ok = false;
    }
    if (res->sys_ok && lg_sys_busy(&cpu) == 0)
        res->sys_busy_s = cpu - r->sys_busy0;
    else
        res->sys_ok = false;
    if (res->redis_ok && end && redis_snapshot(r, end) == 0)
        redis_figures(r, end);
    else
        res->redis_ok = false;
    free(end);
}

/* Freezes the measured-phase counters into the result. */
static void copy_counters(struct lg_run *r)
{
    struct lg_result *res = r->res;

    res->acquisitions = r->cnt.acquisitions;
    res->attempts = r->cnt.attempts;
    res->waits = r->cnt.waits;
    res->subscribes = r->cnt.subscribes;
    res->unsubscribes = r->cnt.unsubscribes;
    res->messages = r->cnt.messages;
    res->reads = r->cnt.reads;
    res->writes = r->cnt.writes;
    res->latch_timeouts = r->cnt.latch_timeouts;
    res->polls = r->cnt.polls;
    res->noscripts = r->cnt.noscripts;
    if (r->o->rate > 0) {
        res->rate_asked = r->o->rate;
        res->rate_achieved =
            res->seconds > 0 ? (double)res->acquisitions / r->acq_per_cycle / res->seconds : 0.0;
    }
}

/* How evenly the grants were spread over the clients: an unfair lock can
 * show good percentiles because the clients that barge in generate most
 * of the samples while others starve. */
static void fairness(struct lg_run *r)
{
    struct lg_result *res = r->res;
    double sum = 0, sq = 0;

    res->fair_min = UINT64_MAX;
    for (unsigned i = 0; i < r->nclients; i++) {
        uint64_t g = r->clients[i].granted;

        res->fair_min = LP_MIN(res->fair_min, g);
        res->fair_max = LP_MAX(res->fair_max, g);
        res->starved += g == 0;
        sum += (double)g;
        sq += (double)g * (double)g;
    }
    res->fair_jain = sq > 0 ? sum * sum / ((double)r->nclients * sq) : 0.0;
}

void lg_figures_end(struct lg_run *r)
{
    copy_counters(r);
    fairness(r);
    snapshot_end(r);
}
