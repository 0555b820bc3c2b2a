/* lockproxy-bench's rwlock and semaphore workloads, end to end: the built
 * load generator ($LP_BENCH_BIN) runs briefly against a real redis-server
 * and lockproxy on all three targets (proxy, direct, direct-shared), and
 * the figures of its --kv file must show real, clean work: every target
 * ran and granted acquisitions, with no error, no exclusion violation and
 * no stuck client, and (rwlock) both read and write locks were granted.
 * The bench checks exclusion itself at every grant (rwlock: a writer
 * alone, or readers only; semaphore: at most --permits holders), so these
 * are counts of real grants, not of requests sent. Afterwards Redis must
 * be empty: the bench deletes its semaphores, and every lock was released.
 * One io backend (epoll) is enough: the bench is under test here. */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

#define RUN_MS   120000
#define KV_BYTES 65536

static const char *const targets[] = {"proxy", "direct", "direct-shared"};

/* Path of lockproxy-bench ($LP_BENCH_BIN, set by ctest when it is built). */
static const char *bench_bin(void)
{
    const char *bin = getenv("LP_BENCH_BIN");

    if (!bin || !bin[0])
        TEST_SKIP("LP_BENCH_BIN is not set (lockproxy-bench is not built)");
    if (access(bin, X_OK) != 0)
        TEST_FAIL("LP_BENCH_BIN=%s is not executable", bin);
    return bin;
}

/* Reads the whole file at path into buf (NUL-terminated). */
static void read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t got;

    if (!f)
        TEST_FAIL("cannot open %s", path);
    got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
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

/* Runs the bench with workload and extra options (NULL-terminated) on
 * every target against e; fills kv with its --kv file. */
static void run_bench(struct pu_env *e, const char *workload, const char *const *extra, char *kv)
{
    char proxy[32], redis[32], pid[16], kv_path[PU_PATH_MAX], out[16384];
    const char *argv[40] = {bench_bin(), workload, "--clients",  "50",
                            "--keys",    "5",      "--duration", "1",
                            "--warmup",  "0.2",    "--targets",  "proxy,direct,direct-shared",
                            "--prefix",  "lgtest"};
    int i = 14, st;

    snprintf(proxy, sizeof(proxy), "127.0.0.1:%d", e->proxy.port);
    snprintf(redis, sizeof(redis), "127.0.0.1:%d", e->redis.port);
    snprintf(pid, sizeof(pid), "%d", (int)e->proxy.pid);
    snprintf(kv_path, sizeof(kv_path), "%.200s/%s.kv", pu_tmpdir(), workload);
    argv[i++] = "--proxy";
    argv[i++] = proxy;
    argv[i++] = "--redis";
    argv[i++] = redis;
    argv[i++] = "--proxy-pid";
    argv[i++] = pid;
    argv[i++] = "--kv";
    argv[i++] = kv_path;
    for (int j = 0; extra[j]; j++)
        argv[i++] = extra[j];
    argv[i] = NULL;
    st = pu_run_capture(argv, out, sizeof(out), RUN_MS);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy-bench %s: wait status 0x%x; output:\n%s", workload, st, out);
    read_file(kv_path, kv, KV_BYTES);
}

/* The figures every target must show. */
static void check_clean(const char *kv, const char *t)
{
    fprintf(stderr, "%s: %.0f acquisitions, %.0f ops/s\n", t, kv_get(kv, t, "acquisitions"),
            kv_get(kv, t, "ops_per_sec"));
    ASSERT_EQ(kv_get(kv, t, "ran"), 1);
    ASSERT_TRUE(kv_get(kv, t, "acquisitions") > 0);
    ASSERT_EQ(kv_get(kv, t, "errors"), 0);
    ASSERT_EQ(kv_get(kv, t, "violations"), 0);
    ASSERT_EQ(kv_get(kv, t, "stuck"), 0);
}

static void start_env(struct pu_env *e)
{
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_raise_nofile(4096);
    pu_env_start(e, "epoll", NULL);
}

/* Nothing left in Redis once the bench is done. */
static void stop_env(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e);

    PU_EVENTUALLY(pu_dbsize(rc) == 0, 3000);
    redisFree(rc);
    pu_env_stop(e);
}

TEST(bench_rwlock_all_targets)
{
    /* A short lease: a direct waiter that misses a write unlock's wake-up
     * (as Redisson's can) waits out at most 5 s of PTTL. */
    static const char *const extra[] = {"--write-pct", "20", "--lease-ms", "5000", NULL};
    static char kv[KV_BYTES];
    struct pu_env e;

    bench_bin();
    start_env(&e);
    run_bench(&e, "rwlock", extra, kv);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        const char *t = targets[i];
        double reads = kv_get(kv, t, "reads"), writes = kv_get(kv, t, "writes");

        check_clean(kv, t);
        fprintf(stderr, "%s: %.0f reads, %.0f writes\n", t, reads, writes);
        ASSERT_TRUE(reads > 0);
        ASSERT_TRUE(writes > 0);
        ASSERT_EQ(reads + writes, kv_get(kv, t, "acquisitions"));
    }
    stop_env(&e);
}

TEST(bench_semaphore_all_targets)
{
    static const char *const extra[] = {"--permits", "3", NULL};
    static char kv[KV_BYTES];
    struct pu_env e;

    bench_bin();
    start_env(&e);
    run_bench(&e, "semaphore", extra, kv);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
        check_clean(kv, targets[i]);
    stop_env(&e);
}

TEST_MAIN(TEST_CASE(bench_rwlock_all_targets), TEST_CASE(bench_semaphore_all_targets))
