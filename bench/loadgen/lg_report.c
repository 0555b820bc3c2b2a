/* Text and JSON output of lockproxy-bench. The text shows one table per
 * target, then a side-by-side summary with the proxy/direct ratios; the
 * JSON holds the same figures plus the per-command Redis call deltas and a
 * latency percentile curve, for scripts and later comparison. */
#include "bench/loadgen/lg_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Percentiles of the JSON latency curve. */
static const double curve_pcts[] = {0,  10,   25,   50,    75,    90,     95,
                                    99, 99.5, 99.9, 99.95, 99.99, 99.999, 100};

double lg_result_ops(const struct lg_result *res)
{
    return res->ran && res->seconds > 0 ? (double)res->acquisitions / res->seconds : 0.0;
}

double lg_result_lat_us(const struct lg_result *res, double pct)
{
    return (double)lg_hist_percentile(res->hist, pct) / 1000.0;
}

bool lg_result_exclusive(const struct lg_result *res)
{
    return res->violations == 0;
}

double lg_result_scripts_per_sec(const struct lg_result *res)
{
    uint64_t n = 0;

    if (!res->redis_ok || res->seconds <= 0)
        return 0.0;
    for (unsigned i = 0; i < res->ndelta; i++) {
        if (strcmp(res->delta[i].name, "evalsha") == 0 || strcmp(res->delta[i].name, "eval") == 0)
            n += res->delta[i].calls;
    }
    return (double)n / res->seconds;
}

bool lg_result_other_cpu(const struct lg_result *res, double *out)
{
    if (!res->sys_ok)
        return false;
    *out = res->sys_busy_s - res->bench_cpu_s - (res->proxy_cpu_ok ? res->proxy_cpu_s : 0.0) -
           (res->redis_ok && res->redis_local ? res->redis_cpu_s : 0.0);
    return true;
}

double lg_result_redis_us_per_acq(const struct lg_result *res)
{
    if (!res->redis_ok || res->acquisitions == 0)
        return 0.0;
    return 1e6 * res->redis_cpu_s / (double)res->acquisitions;
}

double lg_result_proxy_us_per_acq(const struct lg_result *res)
{
    if (!res->proxy_cpu_ok || res->acquisitions == 0)
        return 0.0;
    return 1e6 * res->proxy_cpu_s / (double)res->acquisitions;
}

bool lg_result_rate_short(const struct lg_result *res)
{
    return res->rate_asked > 0 && res->rate_achieved < LG_RATE_SHORT * res->rate_asked;
}

static double per_acq(const struct lg_result *res, uint64_t v)
{
    return res->acquisitions ? (double)v / (double)res->acquisitions : 0.0;
}

static const char *target_desc(enum lg_workload w, enum lg_target t)
{
    switch (t) {
    case LG_TGT_PROXY:
        if (w == LG_WL_RWLOCK)
            return "RLOCK/RUNLOCK, WLOCK/WUNLOCK through lockproxy";
        if (w == LG_WL_SEMAPHORE)
            return "SEM.ACQUIRE/SEM.RELEASE through lockproxy";
        return "LOCK/UNLOCK through lockproxy";
    case LG_TGT_DIRECT:
        return "Redisson protocol straight to Redis; each bench connection models its own "
               "client process (own pub/sub connection and subscriptions)";
    case LG_TGT_DIRECT_SHARED:
        return "Redisson protocol straight to Redis; one subscription per key shared by all "
               "bench connections (one JVM)";
    case LG_TGT_TWEMPROXY:
        return "Redisson's scripts through twemproxy; waiting clients poll (no pub/sub)";
    case LG_TGT_PASSTHROUGH:
        return "Redisson protocol through lockproxy's pass-through mode; each bench "
               "connection models its own client process (own pub/sub connection)";
    }
    return "";
}

/* ---- text -------------------------------------------------------------- */

static void print_exclusion(const struct lg_result *res)
{
    if (res->violations == 0)
        printf("  mutual exclusion: OK (%llu acquisitions)\n", (unsigned long long)res->checked);
    else
        printf("  mutual exclusion: VIOLATED: %llu of %llu acquisitions; first: %s\n",
               (unsigned long long)res->violations, (unsigned long long)res->checked,
               res->first_violation);
}

static void print_cpu(const char *label, bool ok, double s, double secs)
{
    if (!ok)
        printf("  %-17s n/a\n", label);
    else
        printf("  %-17s %.2f s  (%.0f %% of one core)\n", label, s,
               secs > 0 ? 100.0 * s / secs : 0.0);
}

static void print_redis(const struct lg_result *res)
{
    if (!res->redis_ok) {
        printf("  %-17s n/a (%s)\n", "Redis figures", res->redis_error);
        return;
    }
    printf("  %-17s %.2f  (", "Redis cmds/acq", per_acq(res, res->redis_client_cmds));
    for (unsigned i = 0, shown = 0; i < res->ndelta; i++) {
        if (lg_cmd_is_script_internal(res->delta[i].name))
            continue;
        printf("%s%s %.2f", shown++ ? ", " : "", res->delta[i].name,
               per_acq(res, res->delta[i].calls));
    }
    printf("); %.2f calls incl. scripts\n", per_acq(res, res->redis_all_calls));
    printf("  %-17s %.1f commands per read of a client socket (batching)\n", "Redis cmds/read",
           res->redis_reads ? (double)res->redis_client_cmds / (double)res->redis_reads : 0.0);
    printf("  %-17s %.0f scripts/s (EVALSHA + EVAL)\n", "Redis scripts",
           lg_result_scripts_per_sec(res));
    if (res->redis_clients >= 0 && res->redis_pubsub_conns >= 0)
        printf("  %-17s %ld connections, %ld of them subscribed, %ld channels (at the end of "
               "the measured phase)\n",
               "Redis clients", res->redis_clients, res->redis_pubsub_conns,
               res->redis_pubsub_chans);
    else
        printf("  %-17s n/a (INFO clients or CLIENT LIST refused)\n", "Redis clients");
    print_cpu("Redis CPU", true, res->redis_cpu_s, res->seconds);
    printf("  %-17s %.2f us of Redis CPU per acquisition", "Redis CPU/acq",
           lg_result_redis_us_per_acq(res));
    if (res->redis_nodes > 0)
        printf(" (summed over %u masters)", res->redis_nodes);
    printf("\n");
}

static double pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0.0;
}

/* The proxy's CPU per acquisition next to Redis's in the same phase, each
 * with its kernel share (issue 23: the proxy's cost per lock, in every
 * run). CPU times are tick-sampled (HZ): short runs are coarse. */
static void print_cpu_per_acq(const struct lg_result *res)
{
    double pus = lg_result_proxy_us_per_acq(res), rus = lg_result_redis_us_per_acq(res);

    if (!res->proxy_cpu_ok || !res->redis_ok || res->acquisitions == 0)
        return;
    printf("  %-17s proxy %.1f us (%.0f %% kernel), Redis %.1f us (%.0f %% kernel); "
           "proxy / Redis %.2fx\n",
           "CPU per acq", pus, pct(res->proxy_sys_s, res->proxy_cpu_s), rus,
           pct(res->redis_sys_s, res->redis_cpu_s), rus > 0 ? pus / rus : 0.0);
}

/* What else ran: a benchmark on a shared machine is only as good as this. */
static void print_other_cpu(const struct lg_result *res)
{
    double other;

    if (!lg_result_other_cpu(res, &other)) {
        printf("  %-17s n/a\n", "other CPU");
        return;
    }
    printf("  %-17s %.2f s  (%.0f %% of one core; other processes and unattributed kernel "
           "time, from /proc/stat)\n",
           "other CPU", other, res->seconds > 0 ? 100.0 * other / res->seconds : 0.0);
}

static void print_latency(const struct lg_result *res)
{
    printf("  %-17s p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  max %.3f ms\n",
           "acquire latency", lg_result_lat_us(res, 50) / 1000, lg_result_lat_us(res, 90) / 1000,
           lg_result_lat_us(res, 99) / 1000, lg_result_lat_us(res, 99.9) / 1000,
           (double)res->hist->max / 1e6);
}

static void print_direct(const struct lg_opts *o, const struct lg_result *res)
{
    if (res->target == LG_TGT_TWEMPROXY) {
        printf("  %-17s %.3f attempts/acq, %.3f polls/acq; NOSCRIPT -> EVAL %llu\n",
               "twemproxy client", per_acq(res, res->attempts), per_acq(res, res->polls),
               (unsigned long long)res->noscripts);
        return;
    }
    printf("  %-17s %.3f attempts/acq, %.3f waits/acq; SUBSCRIBE %llu, UNSUBSCRIBE %llu, "
           "messages received %llu",
           "direct protocol", per_acq(res, res->attempts), per_acq(res, res->waits),
           (unsigned long long)res->subscribes, (unsigned long long)res->unsubscribes,
           (unsigned long long)res->messages);
    if (o->workload == LG_WL_RWLOCK || o->workload == LG_WL_SEMAPHORE)
        printf("; latch timeouts %llu (%s)", (unsigned long long)res->latch_timeouts,
               o->workload == LG_WL_RWLOCK ? "waited out the PTTL" : "re-checks after 1 s");
    if (o->cluster)
        printf("; MOVED/ASK/TRYAGAIN followed %llu", (unsigned long long)res->redirects);
    printf("\n");
}

/* rwlock: how the grants split (the draw is per cycle, so a workload
 * whose writes wait longer completes fewer of them than --write-pct). */
static void print_rw_split(const struct lg_result *res)
{
    uint64_t n = res->reads + res->writes;

    printf("  %-17s %llu reads, %llu writes (%.1f %% writes)\n", "read/write",
           (unsigned long long)res->reads, (unsigned long long)res->writes,
           n ? 100.0 * (double)res->writes / (double)n : 0.0);
}

/* --rate: asked and achieved rates, and how late the bench itself sent. */
static void print_rate(const struct lg_result *res)
{
    printf("  %-17s asked %.0f/s, achieved %.0f/s (%.1f %%)%s\n", "open loop", res->rate_asked,
           res->rate_achieved, 100.0 * res->rate_achieved / res->rate_asked,
           lg_result_rate_short(res) ? "  RATE SHORT: the target did not keep up" : "");
    printf("  %-17s p50 %.3f ms  p99 %.3f ms  max %.3f ms (bench lateness, in the latency)\n",
           "send lag", (double)lg_hist_percentile(res->lag, 50) / 1e6,
           (double)lg_hist_percentile(res->lag, 99) / 1e6, (double)res->lag->max / 1e6);
}

void lg_report_target(const struct lg_opts *o, const struct lg_result *res)
{
    const struct lg_endpoint *ep = lg_target_endpoint(o, res->target);

    printf("\n== %s: %s (%s) ==\n", lg_target_name(res->target),
           target_desc(o->workload, res->target), ep->name);
    if (!res->ran) {
        printf("  did not run: %s\n", res->error[0] ? res->error : "unknown reason");
        return;
    }
    printf("  %-17s %.0f ops/s  (%llu acquire+release pairs in %.2f s; %u connections)\n",
           "throughput", lg_result_ops(res), (unsigned long long)res->acquisitions, res->seconds,
           res->conns);
    if (res->rate_asked > 0)
        print_rate(res);
    if (o->workload == LG_WL_RWLOCK)
        print_rw_split(res);
    print_latency(res);
    print_redis(res);
    if (res->target == LG_TGT_PROXY || res->target == LG_TGT_TWEMPROXY ||
        res->target == LG_TGT_PASSTHROUGH)
        print_cpu("proxy CPU", res->proxy_cpu_ok, res->proxy_cpu_s, res->seconds);
    print_cpu_per_acq(res);
    print_cpu("bench CPU", true, res->bench_cpu_s, res->seconds);
    print_other_cpu(res);
    printf("  %-17s grants per client min %llu, max %llu, Jain index %.3f, %u starved\n",
           "fairness", (unsigned long long)res->fair_min, (unsigned long long)res->fair_max,
           res->fair_jain, res->starved);
    if (res->target != LG_TGT_PROXY && o->pipeline == 0)
        print_direct(o, res);
    printf("  %-17s %llu%s%s\n", "errors", (unsigned long long)res->errors,
           res->errors ? "; first: " : "", res->errors ? res->first_error : "");
    if (res->stuck)
        printf("  %-17s %u clients did not finish their cycle at the end\n", "STUCK", res->stuck);
    if (res->parked)
        printf("  %-17s %u clients were still waiting out a PTTL or poll delay at the end "
               "(holding nothing): closed\n",
               "drain", res->parked);
    if (res->error[0])
        printf("  %-17s %s\n", "problem", res->error);
    if (res->clean_note[0])
        printf("  %-17s %s\n", "clean-up", res->clean_note);
    print_exclusion(res);
}

static void print_row(const struct lg_result *res)
{
    char rc[16] = "n/a", rus[16] = "n/a", pcpu[16] = "n/a";

    if (res->redis_ok) {
        snprintf(rc, sizeof(rc), "%.2f", per_acq(res, res->redis_client_cmds));
        snprintf(rus, sizeof(rus), "%.2f", lg_result_redis_us_per_acq(res));
    }
    if (res->proxy_cpu_ok)
        snprintf(pcpu, sizeof(pcpu), "%.2f", res->proxy_cpu_s);
    printf("%-14s %10.0f %8.3f %8.3f %9.3f %12s %9s %10s %10.2f %6.3f  %s%s\n",
           lg_target_name(res->target), lg_result_ops(res), lg_result_lat_us(res, 50) / 1000,
           lg_result_lat_us(res, 99) / 1000, lg_result_lat_us(res, 99.9) / 1000, rus, rc, pcpu,
           res->bench_cpu_s, res->fair_jain, res->violations ? "VIOLATED" : "OK",
           lg_result_rate_short(res) ? "  RATE SHORT" : "");
}

/* The proxy's CPU per acquisition against Redis's when it serves the same
 * clients itself (the direct targets): the same client socket work, so the
 * figure a sidecar is judged by (issue 23). */
static void print_cpu_ratios(const struct lg_result *res, unsigned n, const struct lg_result *px)
{
    double pus;

    if (!px || !px->proxy_cpu_ok || px->acquisitions == 0)
        return;
    pus = lg_result_proxy_us_per_acq(px);
    for (unsigned i = 0; i < n; i++) {
        const struct lg_result *d = &res[i];
        double rus = lg_result_redis_us_per_acq(d);

        if (d->target != LG_TGT_DIRECT && d->target != LG_TGT_DIRECT_SHARED)
            continue;
        if (!d->ran || !d->redis_ok || rus <= 0)
            continue;
        printf("proxy CPU per acq / Redis CPU per acq serving %s: %.1f / %.1f us = %.2fx "
               "(at or below 1: the proxy costs no more than Redis)\n",
               lg_target_name(d->target), pus, rus, pus / rus);
    }
}

/* proxy / each direct target that ran, for throughput and p99. */
static void print_ratios(const struct lg_result *res, unsigned n)
{
    const struct lg_result *px = NULL;

    for (unsigned i = 0; i < n; i++) {
        if (res[i].target == LG_TGT_PROXY && res[i].ran)
            px = &res[i];
    }
    for (unsigned i = 0; px && i < n; i++) {
        const struct lg_result *d = &res[i];
        double dp99 = lg_result_lat_us(d, 99);

        if (d->target == LG_TGT_PROXY || !d->ran || lg_result_ops(d) <= 0)
            continue;
        printf("proxy/%s: throughput %.2fx, p99 latency %.2fx (below 1 = proxy faster)\n",
               lg_target_name(d->target), lg_result_ops(px) / lg_result_ops(d),
               dp99 > 0 ? lg_result_lat_us(px, 99) / dp99 : 0.0);
    }
    print_cpu_ratios(res, n, px);
}

void lg_report_summary(const struct lg_opts *o, const struct lg_result *res, unsigned n)
{
    printf("\n== summary: %s, %u clients, %u keys, hold %llu us, %.1f s measured%s ==\n",
           lg_workload_name(o->workload), o->clients, lg_opts_nkeys(o),
           (unsigned long long)o->hold_us, o->duration_s, o->pipeline ? ", pipelined" : "");
    printf("%-14s %10s %8s %8s %9s %12s %9s %10s %10s %6s  %s\n", "target", "ops/s", "p50 ms",
           "p99 ms", "p99.9 ms", "Redis us/acq", "cmds/acq", "proxy CPU", "bench CPU", "Jain",
           "exclusion");
    for (unsigned i = 0; i < n; i++) {
        if (res[i].ran)
            print_row(&res[i]);
        else
            printf("%-14s did not run: %s\n", lg_target_name(res[i].target), res[i].error);
    }
    print_ratios(res, n);
}

/* ---- JSON -------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_opt_str(FILE *f, const char *s)
{
    if (s && s[0])
        json_str(f, s);
    else
        fputs("null", f);
}

static void json_config(FILE *f, const struct lg_opts *o)
{
    static const char *const io[] = {"auto", "uring", "epoll"};

    fprintf(f, "  \"config\": {\"workload\": \"%s\", \"clients\": %u, \"keys\": %u, ",
            lg_workload_name(o->workload), o->clients, lg_opts_nkeys(o));
    fprintf(f, "\"hold_us\": %llu, \"duration_s\": %.3f, \"warmup_s\": %.3f, \"pipeline\": %u, ",
            (unsigned long long)o->hold_us, o->duration_s, o->warmup_s, o->pipeline);
    fprintf(f, "\"io\": \"%s\", \"lease_ms\": %u, ", io[o->io], o->lease_ms);
    if (o->workload == LG_WL_RWLOCK)
        fprintf(f, "\"write_pct\": %u, ", o->write_pct);
    if (o->workload == LG_WL_SEMAPHORE)
        fprintf(f, "\"permits\": %u, ", o->permits);
    if (o->rate > 0)
        fprintf(f, "\"rate\": %.1f, ", o->rate);
    fprintf(f, "\"prefix\": ");
    json_str(f, o->prefix);
    fprintf(f, ", \"proxy\": ");
    json_str(f, o->proxy.name);
    fprintf(f, ", \"redis\": ");
    json_str(f, o->redis.name);
    fprintf(f, ", \"redis_stats\": %s, \"twemproxy\": ", o->redis_stats ? "true" : "false");
    json_str(f, o->twemproxy.name);
    fprintf(f, ", \"poll_ms\": %u, ", o->poll_ms);
    if (o->proxy_pid > 0)
        fprintf(f, "\"proxy_pid\": %d},\n", o->proxy_pid);
    else
        fprintf(f, "\"proxy_pid\": null},\n");
}

static void json_latency(FILE *f, const struct lg_result *res)
{
    const struct lg_hist *h = res->hist;

    fprintf(f, "      \"latency_us\": {\"samples\": %llu, \"min\": %.3f, \"mean\": %.3f, ",
            (unsigned long long)h->count, h->count ? (double)h->min / 1000 : 0.0,
            lg_hist_mean(h) / 1000);
    fprintf(f,
            "\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p99_9\": %.3f, \"p99_99\": %.3f, "
            "\"max\": %.3f},\n",
            lg_result_lat_us(res, 50), lg_result_lat_us(res, 90), lg_result_lat_us(res, 99),
            lg_result_lat_us(res, 99.9), lg_result_lat_us(res, 99.99), (double)h->max / 1000);
    fprintf(f, "      \"latency_curve_us\": [");
    for (size_t i = 0; i < sizeof(curve_pcts) / sizeof(curve_pcts[0]); i++)
        fprintf(f, "%s[%g, %.3f]", i ? ", " : "", curve_pcts[i],
                lg_result_lat_us(res, curve_pcts[i] > 0 ? curve_pcts[i] : 1e-9));
    fprintf(f, "],\n");
}

static void json_redis(FILE *f, const struct lg_result *res)
{
    if (!res->redis_ok) {
        fprintf(f, "      \"redis\": null, \"redis_note\": ");
        json_opt_str(f, res->redis_error);
        fprintf(f, ",\n");
        return;
    }
    fprintf(f, "      \"redis\": {\"cpu_s\": %.3f, \"client_cmds\": %llu, ", res->redis_cpu_s,
            (unsigned long long)res->redis_client_cmds);
    fprintf(f, "\"client_cmds_per_acq\": %.4f, \"all_calls\": %llu, \"all_calls_per_acq\": %.4f, ",
            per_acq(res, res->redis_client_cmds), (unsigned long long)res->redis_all_calls,
            per_acq(res, res->redis_all_calls));
    fprintf(f, "\"scripts_per_sec\": %.1f, \"cpu_us_per_acq\": %.3f, \"local\": %s, ",
            lg_result_scripts_per_sec(res), lg_result_redis_us_per_acq(res),
            res->redis_local ? "true" : "false");
    fprintf(f, "\"masters\": %u, ", res->redis_nodes);
    fprintf(f, "\"commands\": {");
    for (unsigned i = 0; i < res->ndelta; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, res->delta[i].name);
        fprintf(f, ": %llu", (unsigned long long)res->delta[i].calls);
    }
    fprintf(f, "}},\n");
}

static void json_other_cpu(FILE *f, const struct lg_result *res)
{
    double other;

    if (res->sys_ok)
        fprintf(f, "\"machine_busy_cpu_s\": %.3f, ", res->sys_busy_s);
    else
        fprintf(f, "\"machine_busy_cpu_s\": null, ");
    if (lg_result_other_cpu(res, &other))
        fprintf(f, "\"other_cpu_s\": %.3f, ", other);
    else
        fprintf(f, "\"other_cpu_s\": null, ");
}

/* rwlock: the read/write split; rwlock and semaphore: latch timeouts. */
static void json_workload(FILE *f, const struct lg_opts *o, const struct lg_result *res)
{
    if (o->workload == LG_WL_RWLOCK)
        fprintf(f, "      \"reads\": %llu, \"writes\": %llu,\n", (unsigned long long)res->reads,
                (unsigned long long)res->writes);
    if (o->workload == LG_WL_RWLOCK || o->workload == LG_WL_SEMAPHORE)
        fprintf(f, "      \"latch_timeouts\": %llu,\n", (unsigned long long)res->latch_timeouts);
}

/* --rate, twemproxy's polls, NOSCRIPT fallbacks, the clean-up. */
static void json_extra(FILE *f, const struct lg_result *res)
{
    if (res->rate_asked > 0)
        fprintf(f,
                "      \"open_loop\": {\"rate_asked\": %.1f, \"rate_achieved\": %.1f, "
                "\"short\": %s, \"send_lag_us\": {\"p50\": %.3f, \"p99\": %.3f, "
                "\"max\": %.3f}},\n",
                res->rate_asked, res->rate_achieved, lg_result_rate_short(res) ? "true" : "false",
                (double)lg_hist_percentile(res->lag, 50) / 1000,
                (double)lg_hist_percentile(res->lag, 99) / 1000, (double)res->lag->max / 1000);
    else
        fprintf(f, "      \"open_loop\": null,\n");
    fprintf(f, "      \"polls\": %llu, \"noscripts\": %llu, \"redirects\": %llu, ",
            (unsigned long long)res->polls, (unsigned long long)res->noscripts,
            (unsigned long long)res->redirects);
    fprintf(f, "\"cleanup\": {\"done\": %s, ", res->cleaned ? "true" : "false");
    fprintf(f, "\"keys_deleted\": %llu, \"note\": ", (unsigned long long)res->keys_deleted);
    json_opt_str(f, res->clean_note);
    fprintf(f, "},\n");
}

/* One element of "targets". */
static void json_target(FILE *f, const struct lg_opts *o, const struct lg_result *res, bool last)
{
    fprintf(f, "    {\"target\": \"%s\", \"ran\": %s, \"error\": ", lg_target_name(res->target),
            res->ran ? "true" : "false");
    json_opt_str(f, res->error);
    fprintf(f, ", \"bench_io\": ");
    json_opt_str(f, res->backend);
    fprintf(f, ", \"connections\": %u,\n", res->conns);
    fprintf(f, "      \"seconds\": %.4f, \"acquisitions\": %llu, \"ops_per_sec\": %.1f, ",
            res->seconds, (unsigned long long)res->acquisitions, lg_result_ops(res));
    fprintf(f,
            "\"attempts\": %llu, \"waits\": %llu, \"subscribes\": %llu, \"unsubscribes\": %llu, "
            "\"messages\": %llu,\n",
            (unsigned long long)res->attempts, (unsigned long long)res->waits,
            (unsigned long long)res->subscribes, (unsigned long long)res->unsubscribes,
            (unsigned long long)res->messages);
    json_workload(f, o, res);
    json_extra(f, res);
    json_latency(f, res);
    json_redis(f, res);
    if (res->proxy_cpu_ok)
        fprintf(f, "      \"proxy_cpu_s\": %.3f, ", res->proxy_cpu_s);
    else
        fprintf(f, "      \"proxy_cpu_s\": null, ");
    fprintf(f, "\"bench_cpu_s\": %.3f, ", res->bench_cpu_s);
    json_other_cpu(f, res);
    fprintf(f, "\"errors\": %llu, \"first_error\": ", (unsigned long long)res->errors);
    json_opt_str(f, res->first_error);
    fprintf(f, ", \"stuck_clients\": %u, \"parked_clients\": %u,\n", res->stuck, res->parked);
    fprintf(f,
            "      \"fairness\": {\"min_grants\": %llu, \"max_grants\": %llu, \"jain\": %.4f, "
            "\"starved_clients\": %u},\n",
            (unsigned long long)res->fair_min, (unsigned long long)res->fair_max, res->fair_jain,
            res->starved);
    fprintf(f,
            "      \"mutual_exclusion\": {\"ok\": %s, \"checked\": %llu, \"violations\": %llu, "
            "\"first\": ",
            res->violations ? "false" : "true", (unsigned long long)res->checked,
            (unsigned long long)res->violations);
    json_opt_str(f, res->first_violation);
    fprintf(f, "}}%s\n", last ? "" : ",");
}

static void json_ratios(FILE *f, const struct lg_result *res, unsigned n)
{
    const struct lg_result *px = NULL;
    bool first = true;

    for (unsigned i = 0; i < n; i++) {
        if (res[i].target == LG_TGT_PROXY && res[i].ran)
            px = &res[i];
    }
    fprintf(f, "  \"ratios\": {");
    for (unsigned i = 0; px && i < n; i++) {
        const struct lg_result *d = &res[i];
        double dp99 = lg_result_lat_us(d, 99);

        if (d->target == LG_TGT_PROXY || !d->ran || lg_result_ops(d) <= 0 || dp99 <= 0)
            continue;
        fprintf(f, "%s\"proxy/%s\": {\"throughput\": %.4f, \"p99\": %.4f}", first ? "" : ", ",
                lg_target_name(d->target), lg_result_ops(px) / lg_result_ops(d),
                lg_result_lat_us(px, 99) / dp99);
        first = false;
    }
    fprintf(f, "}\n");
}

int lg_report_json(const char *path, const struct lg_opts *o, const struct lg_result *res,
                   unsigned n)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -errno;
    fprintf(f, "{\n  \"tool\": \"lockproxy-bench\",\n");
    json_config(f, o);
    fprintf(f, "  \"targets\": [\n");
    for (unsigned i = 0; i < n; i++)
        json_target(f, o, &res[i], i + 1 == n);
    fprintf(f, "  ],\n");
    json_ratios(f, res, n);
    fprintf(f, "}\n");
    if (fclose(f) != 0)
        return -errno;
    return 0;
}
