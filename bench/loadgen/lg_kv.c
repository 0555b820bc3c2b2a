/* The key/value output of lockproxy-bench (--kv FILE): one figure per
 * line, "<target> <key> <value>", so shell scripts (scripts/bench.sh) can
 * pick figures with awk instead of parsing JSON. Keys and values never
 * contain blanks; a figure that is not available is written as "nan". */
#include <errno.h>
#include <stdio.h>

#include "bench/loadgen/lg_report.h"

static void kv_num(FILE *f, const char *target, const char *key, bool ok, double v)
{
    if (ok)
        fprintf(f, "%s %s %.6g\n", target, key, v);
    else
        fprintf(f, "%s %s nan\n", target, key);
}

static void kv_latency(FILE *f, const char *t, const struct lg_result *res)
{
    static const struct {
        const char *key; /* kv key */
        double pct;      /* percentile */
    } pcts[] = {{"p50_us", 50}, {"p90_us", 90}, {"p99_us", 99}, {"p999_us", 99.9}};

    for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++)
        kv_num(f, t, pcts[i].key, true, lg_result_lat_us(res, pcts[i].pct));
    kv_num(f, t, "max_us", true, (double)res->hist->max / 1000.0);
}

static void kv_redis(FILE *f, const char *t, const struct lg_result *res)
{
    double acq = res->acquisitions ? (double)res->acquisitions : 1.0;

    fprintf(f, "%s redis_ok %d\n", t, res->redis_ok ? 1 : 0);
    fprintf(f, "%s redis_masters %u\n", t, res->redis_nodes);
    kv_num(f, t, "redis_cmds_per_acq", res->redis_ok, (double)res->redis_client_cmds / acq);
    kv_num(f, t, "redis_calls_per_acq", res->redis_ok, (double)res->redis_all_calls / acq);
    kv_num(f, t, "redis_cpu_s", res->redis_ok, res->redis_cpu_s);
    kv_num(f, t, "redis_sys_s", res->redis_ok, res->redis_sys_s);
    kv_num(f, t, "redis_clients", res->redis_ok && res->redis_clients >= 0,
           (double)res->redis_clients);
    kv_num(f, t, "redis_pubsub_conns", res->redis_ok && res->redis_pubsub_conns >= 0,
           (double)res->redis_pubsub_conns);
    kv_num(f, t, "redis_pubsub_channels", res->redis_ok, (double)res->redis_pubsub_chans);
    kv_num(f, t, "redis_cpu_us_per_acq", res->redis_ok, lg_result_redis_us_per_acq(res));
    kv_num(f, t, "redis_cmds_per_read", res->redis_ok && res->redis_reads > 0,
           (double)res->redis_client_cmds / (double)(res->redis_reads ? res->redis_reads : 1));
    kv_num(f, t, "scripts_per_sec", res->redis_ok, lg_result_scripts_per_sec(res));
    for (unsigned i = 0; res->redis_ok && i < res->ndelta; i++)
        fprintf(f, "%s cmd.%s %llu\n", t, res->delta[i].name,
                (unsigned long long)res->delta[i].calls);
}

/* rwlock: the read/write split; rwlock and semaphore: latch timeouts. */
static void kv_workload(FILE *f, const char *t, const struct lg_opts *o,
                        const struct lg_result *res)
{
    if (o->workload == LG_WL_RWLOCK)
        fprintf(f, "%s reads %llu\n%s writes %llu\n", t, (unsigned long long)res->reads, t,
                (unsigned long long)res->writes);
    if (o->workload == LG_WL_RWLOCK || o->workload == LG_WL_SEMAPHORE)
        fprintf(f, "%s latch_timeouts %llu\n", t, (unsigned long long)res->latch_timeouts);
}

/* --rate, twemproxy's polls, NOSCRIPT fallbacks, the clean-up. */
static void kv_extra(FILE *f, const char *t, const struct lg_result *res)
{
    if (res->rate_asked > 0) {
        kv_num(f, t, "rate_asked", true, res->rate_asked);
        kv_num(f, t, "rate_achieved", true, res->rate_achieved);
        fprintf(f, "%s rate_short %d\n", t, lg_result_rate_short(res) ? 1 : 0);
        kv_num(f, t, "send_lag_p99_us", true, (double)lg_hist_percentile(res->lag, 99) / 1000);
    }
    fprintf(f, "%s polls %llu\n%s noscripts %llu\n", t, (unsigned long long)res->polls, t,
            (unsigned long long)res->noscripts);
    fprintf(f, "%s redirects %llu\n", t, (unsigned long long)res->redirects);
    kv_num(f, t, "keys_deleted", res->cleaned, (double)res->keys_deleted);
}

static void kv_target(FILE *f, const struct lg_opts *o, const struct lg_result *res)
{
    const char *t = lg_target_name(res->target);
    double other = 0;
    bool other_ok = lg_result_other_cpu(res, &other);

    fprintf(f, "%s ran %d\n", t, res->ran ? 1 : 0);
    if (!res->ran)
        return;
    kv_num(f, t, "seconds", true, res->seconds);
    fprintf(f, "%s acquisitions %llu\n", t, (unsigned long long)res->acquisitions);
    kv_num(f, t, "ops_per_sec", true, lg_result_ops(res));
    kv_workload(f, t, o, res);
    kv_extra(f, t, res);
    kv_latency(f, t, res);
    kv_redis(f, t, res);
    kv_num(f, t, "proxy_cpu_s", res->proxy_cpu_ok, res->proxy_cpu_s);
    kv_num(f, t, "proxy_sys_s", res->proxy_cpu_ok, res->proxy_sys_s);
    kv_num(f, t, "proxy_cpu_us_per_acq", res->proxy_cpu_ok && res->acquisitions > 0,
           lg_result_proxy_us_per_acq(res));
    kv_num(f, t, "bench_cpu_s", true, res->bench_cpu_s);
    kv_num(f, t, "other_cpu_s", other_ok, other);
    kv_num(f, t, "jain", true, res->fair_jain);
    fprintf(f, "%s errors %llu\n%s violations %llu\n%s stuck %u\n%s parked %u\n", t,
            (unsigned long long)res->errors, t, (unsigned long long)res->violations, t, res->stuck,
            t, res->parked);
}

int lg_report_kv(const char *path, const struct lg_opts *o, const struct lg_result *res, unsigned n)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -errno;
    for (unsigned i = 0; i < n; i++)
        kv_target(f, o, &res[i]);
    return fclose(f) == 0 ? 0 : -errno;
}
