/* lockproxy-bench --cluster end to end: the built load generator
 * ($LP_BENCH_BIN) runs briefly against a real Redis Cluster (cluster_util:
 * 3 masters, 3 replicas) and a lockproxy with a redis-cluster:// upstream,
 * targets proxy and direct, uncontended (each client its own key, spread
 * over the slots) and contended (5 hot keys). Its --kv figures must show
 * real, clean work: every target ran and granted locks, with no error (a
 * direct client sent to the wrong master would get MOVED, an error), no
 * exclusion violation, no stuck client; the Redis figures summed over the 3
 * masters. Each master's own INFO commandstats must show EVALSHA calls (the
 * direct clients' and the proxy's work spread over every master), and their
 * sum must cover what the bench reports. Afterwards every master is empty.
 * No timing assertion: the figures' size is for BENCHMARKS.md. Skips when
 * LP_BENCH_BIN is unset or redis-server / redis-cli are missing. */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "cluster_util.h"
#include "harness.h"
#include "proxy_util.h"

#define RUN_MS    120000
#define KV_BYTES  65536
#define OUT_BYTES 16384
#define MASTERS   3

static const char *const targets[] = {"proxy", "direct"};

/* The cluster and the proxy in front of it. */
struct bcx {
    struct rcluster c;  /* the cluster */
    struct pu_proxy p;  /* lockproxy --upstream redis-cluster://... */
    char seed[32];      /* "127.0.0.1:port" of a master, for --redis */
    char proxy[32];     /* "127.0.0.1:port" of the proxy */
    char proxy_pid[16]; /* its pid, for --proxy-pid */
};

static const char *bench_bin(void)
{
    const char *bin = getenv("LP_BENCH_BIN");

    if (!bin || !bin[0])
        TEST_SKIP("LP_BENCH_BIN is not set (lockproxy-bench is not built)");
    if (access(bin, X_OK) != 0)
        TEST_FAIL("LP_BENCH_BIN=%s is not executable", bin);
    return bin;
}

static bool info_is(redisContext *c, const char *field, const char *want)
{
    char v[64];

    return pu_info_str(c, field, v, sizeof(v)) && strcmp(v, want) == 0;
}

/* Starts the cluster and a proxy on it that serves every slot. */
static void bcx_start(struct bcx *x)
{
    char a[32], b[32];
    redisContext *c;
    int m = 0;

    memset(x, 0, sizeof(*x));
    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_raise_nofile(4096);
    rcluster_start(&x->c);
    while (!rcluster_is_master(&x->c, m))
        m++;
    rcluster_addr(&x->c, m, x->seed, sizeof(x->seed));
    snprintf(x->p.upstream, sizeof(x->p.upstream), "redis-cluster://%s,%s",
             rcluster_addr(&x->c, 0, a, sizeof(a)), rcluster_addr(&x->c, 5, b, sizeof(b)));
    x->p.extra[0] = "--io";
    x->p.extra[1] = "epoll";
    x->p.extra[2] = NULL;
    pu_proxy_start(&x->p);
    c = pu_connect(x->p.port);
    PU_EVENTUALLY(info_is(c, "cluster_slots_served", "16384") &&
                      info_is(c, "cluster_nodes_ready", "3"),
                  15000);
    redisFree(c);
    snprintf(x->proxy, sizeof(x->proxy), "127.0.0.1:%d", x->p.port);
    snprintf(x->proxy_pid, sizeof(x->proxy_pid), "%d", (int)x->p.pid);
}

/* EVALSHA calls of every master (commandstats), in master order; returns
 * the number of masters. */
static int master_evalsha(const struct bcx *x, long long calls[RCLUSTER_NODES])
{
    int n = 0;

    for (int i = 0; i < RCLUSTER_NODES; i++) {
        redisReply *r;
        const char *p;

        if (!rcluster_is_master(&x->c, i))
            continue;
        r = rcluster_cmd(&x->c, i, "INFO commandstats");
        ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
        p = strstr(r->str, "cmdstat_evalsha:calls=");
        calls[n++] = p ? atoll(p + strlen("cmdstat_evalsha:calls=")) : 0;
        freeReplyObject(r);
    }
    return n;
}

/* The value of "<target> <key> <value>" in kv; fails if absent. */
static double kv_get(const char *kv, const char *target, const char *key)
{
    char want[128];
    const char *p = kv;
    size_t n;

    n = (size_t)snprintf(want, sizeof(want), "%s %s ", target, key);
    while ((p = strstr(p, want)) != NULL) {
        if (p == kv || p[-1] == '\n')
            return strtod(p + n, NULL);
        p += n;
    }
    TEST_FAIL("no figure '%s %s' in the bench's --kv output:\n%s", target, key, kv);
}

/* Runs the bench on workload wl with both targets; fills kv. */
static void run_bench(const struct bcx *x, const char *wl, char *kv)
{
    static char out[OUT_BYTES];
    char kv_path[PU_PATH_MAX];
    const char *argv[] = {bench_bin(),
                          wl,
                          "--cluster",
                          "--redis",
                          x->seed,
                          "--proxy",
                          x->proxy,
                          "--proxy-pid",
                          x->proxy_pid,
                          "--targets",
                          "proxy,direct",
                          "--clients",
                          "50",
                          "--keys",
                          "5",
                          "--duration",
                          "1",
                          "--warmup",
                          "0.2",
                          "--lease-ms",
                          "5000",
                          "--io",
                          "epoll",
                          "--kv",
                          kv_path,
                          NULL};
    FILE *f;
    size_t got;
    int st;

    snprintf(kv_path, sizeof(kv_path), "%.200s/cluster-%s.kv", pu_tmpdir(), wl);
    unlink(kv_path);
    st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy-bench %s --cluster: wait status 0x%x; output:\n%s", wl, st, out);
    f = fopen(kv_path, "r");
    if (!f)
        TEST_FAIL("no --kv file %s; output:\n%s", kv_path, out);
    got = fread(kv, 1, KV_BYTES - 1, f);
    kv[got] = '\0';
    fclose(f);
}

/* The figures every target must show, Redis's summed over 3 masters. */
static void check_target(const char *kv, const char *t)
{
    fprintf(stderr, "%s: %.0f acquisitions, %.0f ops/s, %.2f us Redis CPU/acq over %.0f masters\n",
            t, kv_get(kv, t, "acquisitions"), kv_get(kv, t, "ops_per_sec"),
            kv_get(kv, t, "redis_cpu_us_per_acq"), kv_get(kv, t, "redis_masters"));
    ASSERT_EQ(kv_get(kv, t, "ran"), 1);
    ASSERT_TRUE(kv_get(kv, t, "acquisitions") > 0);
    ASSERT_EQ(kv_get(kv, t, "errors"), 0);
    ASSERT_EQ(kv_get(kv, t, "violations"), 0);
    ASSERT_EQ(kv_get(kv, t, "stuck"), 0);
    ASSERT_EQ(kv_get(kv, t, "redis_ok"), 1);
    ASSERT_EQ(kv_get(kv, t, "redis_masters"), MASTERS);
    ASSERT_TRUE(kv_get(kv, t, "redis_cpu_us_per_acq") > 0);
    ASSERT_TRUE(kv_get(kv, t, "cmd.evalsha") > 0);
}

/* One workload: both targets clean, every master did EVALSHA work, and
 * the per-master deltas cover the bench's summed figure. */
static void check_workload(const struct bcx *x, const char *wl)
{
    static char kv[KV_BYTES];
    long long before[RCLUSTER_NODES], after[RCLUSTER_NODES], sum = 0;
    int n;

    ASSERT_EQ(master_evalsha(x, before), MASTERS);
    run_bench(x, wl, kv);
    n = master_evalsha(x, after);
    ASSERT_EQ(n, MASTERS);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
        check_target(kv, targets[i]);
    for (int m = 0; m < n; m++) {
        fprintf(stderr, "%s: master %d: %lld EVALSHA\n", wl, m, after[m] - before[m]);
        if (strcmp(wl, "uncontended") == 0)
            ASSERT_TRUE(after[m] > before[m]);
        sum += after[m] - before[m];
    }
    ASSERT_TRUE((double)sum >=
                kv_get(kv, "proxy", "cmd.evalsha") + kv_get(kv, "direct", "cmd.evalsha"));
}

/* Nothing left on any master. */
static void check_empty(const struct bcx *x)
{
    for (int i = 0; i < RCLUSTER_NODES; i++) {
        if (rcluster_is_master(&x->c, i))
            PU_EVENTUALLY(rcluster_int(&x->c, i, "DBSIZE") == 0, 3000);
    }
}

TEST(bench_cluster_proxy_vs_direct)
{
    struct bcx *x = calloc(1, sizeof(*x));

    ASSERT_TRUE(x != NULL);
    bench_bin();
    bcx_start(x);
    check_workload(x, "uncontended");
    check_workload(x, "contended");
    check_empty(x);
    pu_proxy_assert_alive(&x->p);
    pu_proxy_stop(&x->p);
    rcluster_cleanup(&x->c);
    free(x);
}

/* A seed that is not a cluster node: a clear error, no run. */
TEST(bench_cluster_refuses_plain_redis)
{
    static char out[OUT_BYTES];
    struct pu_env e;
    char seed[32];
    int st;

    bench_bin();
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_env_start(&e, "epoll", NULL);
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", e.redis.port);
    {
        const char *argv[] = {bench_bin(), "--cluster", "--redis", seed,         "--targets",
                              "direct",    "--clients", "2",       "--duration", "0.2",
                              "--warmup",  "0",         NULL};

        st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    }
    fprintf(stderr, "%s", out);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    ASSERT_TRUE(strstr(out, "CLUSTER SLOTS") != NULL);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(bench_cluster_proxy_vs_direct), TEST_CASE(bench_cluster_refuses_plain_redis))
