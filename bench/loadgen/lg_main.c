/* lockproxy-bench: load generator comparing lockproxy with Redisson-style
 * clients talking to Redis directly or through twemproxy, on the same
 * workload, closed loop or at a fixed rate (--rate). main() parses
 * the options, prepares the process (file descriptor limit, signals), runs
 * every target on one event loop (or the idle-memory mode, lg_idle.c), and
 * prints and writes the results. See --help (lg_opts.c) for what is
 * measured and how. */
#include <sys/resource.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/loadgen/lg_idle.h"
#include "bench/loadgen/lg_opts.h"
#include "bench/loadgen/lg_report.h"
#include "bench/loadgen/lg_run.h"
#include "common/log.h"
#include "sched/loop.h"

#define FD_SLACK 64u

/* Connections one target may open: the clients, plus a pub/sub connection
 * per client for "direct" (closed-loop mode). */
static unsigned max_conns(const struct lg_opts *o)
{
    unsigned per = 1;

    for (unsigned i = 0; i < o->ntargets; i++) {
        if (o->targets[i] == LG_TGT_DIRECT && o->pipeline == 0)
            per = 2;
    }
    return o->clients * per + 1;
}

/* Raises RLIMIT_NOFILE to need (the hard limit too, if allowed). Returns
 * 0 or -errno after explaining on stderr. */
static int raise_nofile(unsigned need)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    if (rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max < need) {
        struct rlimit hard = {need, need};

        if (setrlimit(RLIMIT_NOFILE, &hard) == 0)
            return 0;
        fprintf(stderr,
                "lockproxy-bench: need %u file descriptors, the hard limit is %llu "
                "(raise it, e.g. ulimit -Hn, or use fewer --clients)\n",
                need, (unsigned long long)rl.rlim_max);
        return -EMFILE;
    }
    rl.rlim_cur = need;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0 ? 0 : -errno;
}

static void on_signal(int sig)
{
    (void)sig;
    lg_run_interrupt();
}

static void setup_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Where each target's clients go, and where the Redis figures come from. */
static void print_endpoints(const struct lg_opts *o, const char *backend)
{
    printf("  endpoints:");
    for (unsigned i = 0; i < o->ntargets; i++)
        printf("%s %s %s%s", i ? "," : "", lg_target_name(o->targets[i]),
               lg_target_endpoint(o, o->targets[i])->name,
               lg_target_endpoint(o, o->targets[i])->pass[0] ? " (AUTH)" : "");
    printf("; bench event loop: %s (single thread)\n", backend);
    if (o->cluster)
        printf("  Redis Cluster (seed %s): direct clients go to the master of their key's "
               "slot; Redis figures summed over INFO of every master\n",
               o->redis.name);
    else if (o->redis_stats)
        printf("  Redis figures from INFO of %s\n", o->redis.name);
    else
        printf("  Redis figures omitted: give --redis HOST:PORT (the Redis behind the target) "
               "for Redis CPU and commands\n");
    printf("  keys: %s:<target>:<n> (deleted at the end of each target)\n", o->prefix);
}

static void print_banner(const struct lg_opts *o, const char *backend)
{
    printf("lockproxy-bench: workload %s, %u clients, %u keys, hold %llu us, warmup %.1f s, "
           "duration %.1f s%s%s\n",
           lg_workload_name(o->workload), o->clients, lg_opts_nkeys(o),
           (unsigned long long)o->hold_us, o->warmup_s, o->duration_s,
           o->pipeline ? ", pipeline " : "", o->pipeline ? "on" : "");
    if (o->pipeline)
        printf("  pipelined: %u TRYLOCK/UNLOCK pairs per connection per round trip\n", o->pipeline);
    if (o->rate > 0)
        printf("  open loop: %.0f cycles/s over all clients (one every %.3f ms per client); "
               "latency from the scheduled start\n",
               o->rate, (double)o->clients / o->rate * 1000.0);
    else
        printf("  closed loop: each client starts its next cycle when the last one ends\n");
    print_endpoints(o, backend);
    for (unsigned i = 0; i < o->ntargets; i++) {
        if (o->targets[i] == LG_TGT_DIRECT && o->pipeline == 0)
            printf("  direct: each bench connection models a separate client process "
                   "(Redisson shares subscriptions per lock name only within one JVM); "
                   "see direct-shared for one shared JVM\n");
        if (o->targets[i] == LG_TGT_TWEMPROXY)
            printf("  twemproxy: no pub/sub through twemproxy, so a waiting client polls every "
                   "%u ms (0.5x-1.5x, at most the holder's PTTL)\n",
                   o->poll_ms);
    }
    fflush(stdout);
}

/* Runs the targets in order on one loop, printing each table as it
 * completes. Returns how many targets were attempted. */
static int run_all(struct sched_loop *l, const struct lg_opts *o, struct lg_result *res)
{
    unsigned n = 0;

    for (unsigned i = 0; i < o->ntargets && !lg_run_was_interrupted(); i++, n++) {
        struct lg_result *r = &res[i];

        r->target = o->targets[i];
        r->backend = sched_loop_backend(l);
        printf("\n[%s] starting: %u clients\n", lg_target_name(r->target), o->clients);
        fflush(stdout);
        if (lg_run_target(l, o, r->target, r) < 0 && r->error[0] == '\0')
            snprintf(r->error, sizeof(r->error), "could not start");
        lg_report_target(o, r);
        fflush(stdout);
    }
    return (int)n;
}

static int write_outputs(const struct lg_opts *o, const struct lg_result *res, unsigned n)
{
    int rc = 0, e;

    if (o->json_path) {
        e = lg_report_json(o->json_path, o, res, n);
        if (e < 0)
            fprintf(stderr, "lockproxy-bench: %s: %s\n", o->json_path, strerror(-e));
        else
            printf("JSON written to %s\n", o->json_path);
        rc = rc ? rc : e;
    }
    if (o->kv_path) {
        e = lg_report_kv(o->kv_path, o, res, n);
        if (e < 0)
            fprintf(stderr, "lockproxy-bench: %s: %s\n", o->kv_path, strerror(-e));
        rc = rc ? rc : e;
    }
    if (o->svg_path) {
        e = lg_svg_write(o->svg_path, o, res, n);
        if (e < 0)
            fprintf(stderr, "lockproxy-bench: %s: %s\n", o->svg_path, strerror(-e));
        else
            printf("SVG chart written to %s\n", o->svg_path);
        rc = rc ? rc : e;
    }
    return rc;
}

/* 0 when every target ran cleanly, granted something, and the outputs
 * were written. */
static int exit_status(const struct lg_result *res, unsigned n, int out_rc)
{
    int status = out_rc < 0 ? 1 : 0;

    for (unsigned i = 0; i < n; i++) {
        if (!res[i].ran || !lg_result_exclusive(&res[i]) || res[i].stuck > 0 ||
            res[i].acquisitions == 0)
            status = 1;
    }
    return status;
}

static int bench_main(const struct lg_opts *o)
{
    struct sched_loop_opts lo = {o->io, max_conns(o) + FD_SLACK, 1};
    struct lg_result res[LG_MAX_TARGETS];
    struct sched_loop *l;
    int rc, n, status;

    rc = sched_loop_create(&l, &lo);
    if (rc < 0) {
        fprintf(stderr, "lockproxy-bench: cannot create the event loop: %s\n", strerror(-rc));
        return 1;
    }
    memset(res, 0, sizeof(res));
    for (unsigned i = 0; i < o->ntargets; i++) {
        res[i].hist = malloc(sizeof(*res[i].hist));
        res[i].lag = malloc(sizeof(*res[i].lag));
        if (!res[i].hist || !res[i].lag) {
            fprintf(stderr, "lockproxy-bench: out of memory\n");
            return 1;
        }
        lg_hist_reset(res[i].hist);
        lg_hist_reset(res[i].lag);
    }
    print_banner(o, sched_loop_backend(l));
    n = run_all(l, o, res);
    lg_report_summary(o, res, (unsigned)n);
    status = exit_status(res, (unsigned)n, write_outputs(o, res, (unsigned)n));
    for (unsigned i = 0; i < o->ntargets; i++) {
        free(res[i].hist);
        free(res[i].lag);
    }
    sched_loop_destroy(l);
    return status;
}

int main(int argc, char **argv)
{
    struct lg_opts o;
    int rc = lg_opts_parse(&o, argc, argv);

    if (rc == 1)
        return 0;
    if (rc < 0)
        return 2;
    log_set_level(LOG_LVL_WARN);
    if (raise_nofile((o.idle ? o.idle : max_conns(&o)) + FD_SLACK) < 0)
        return 1;
    setup_signals();
    if (o.idle)
        return lg_idle_main(&o);
    return bench_main(&o);
}
