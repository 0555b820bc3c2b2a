/* lockproxy-bench end to end: the built load generator ($LP_BENCH_BIN) runs
 * briefly against a real redis-server, lockproxy and (where installed)
 * twemproxy, and the figures of its --kv file must show real, clean work:
 * every target ran and granted acquisitions, with no error, no exclusion
 * violation and no stuck client. The bench checks exclusion itself at every
 * grant (rwlock: a writer alone, or readers only; semaphore: at most
 * --permits holders), so these are counts of real grants, not of requests
 * sent. Afterwards Redis must be empty: the bench deletes what it created.
 *
 * Cases: the rwlock and semaphore workloads on proxy, direct and
 * direct-shared; the twemproxy target (Redisson's scripts through
 * nutcracker: the NOSCRIPT -> EVAL fallback, polling waiters, semaphores
 * created and deleted through twemproxy), skipped only when nutcracker is
 * not installed; the open loop (--rate: achieved rate near the asked one,
 * and a rate nobody can reach marked short); and a running deployment
 * reached with --target and AUTH (Redis figures only with --redis); and
 * the passthrough target (Redisson-style clients through lockproxy's
 * pass-through mode) against direct on one contended name: through the
 * proxy Redis sees the pool's connections and one subscription, directly
 * one connection per client and a subscriber per waiter.
 * One io backend (epoll) is enough: the bench is under test here. */
#include <sys/wait.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

#define RUN_MS      120000
#define KV_BYTES    65536
#define OUT_BYTES   16384
#define MAX_ARGS    64
#define CLIENTS     50
#define CLIENTS_S   "50"
#define NC_START_MS 10000

static const char *const all_direct[] = {"proxy", "direct", "direct-shared"};

/* A lockproxy-bench command line being built. */
struct bench_cmd {
    const char *argv[MAX_ARGS]; /* borrowed strings (static or in bufs) */
    int n;                      /* entries used */
    char bufs[8][64];           /* formatted values */
    int nbufs;                  /* bufs used */
    char kv_path[PU_PATH_MAX];  /* --kv file */
};

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

static void arg(struct bench_cmd *b, const char *a)
{
    if (b->n >= MAX_ARGS - 1)
        TEST_FAIL("too many bench arguments");
    b->argv[b->n++] = a;
}

/* Adds "opt value" with value formatted. */
__attribute__((format(printf, 3, 4))) static void argf(struct bench_cmd *b, const char *opt,
                                                       const char *fmt, ...)
{
    char *buf = b->bufs[b->nbufs++];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(b->bufs[0]), fmt, ap);
    va_end(ap);
    arg(b, opt);
    arg(b, buf);
}

/* The common part: workload, 50 clients on 5 keys, 1 s measured, --kv. */
static void cmd_init(struct bench_cmd *b, const char *workload, const char *name)
{
    static const char *const common[] = {"--clients",  CLIENTS_S, "--keys",   "5",
                                         "--duration", "1",       "--warmup", "0.2"};

    memset(b, 0, sizeof(*b));
    arg(b, bench_bin());
    arg(b, workload);
    for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
        arg(b, common[i]);
    snprintf(b->kv_path, sizeof(b->kv_path), "%.200s/%s.kv", pu_tmpdir(), name);
    arg(b, "--kv");
    arg(b, b->kv_path);
}

/* Replaces the value of an option cmd_init() set. */
static void cmd_set(struct bench_cmd *b, const char *opt, const char *val)
{
    for (int i = 0; i + 1 < b->n; i++) {
        if (strcmp(b->argv[i], opt) == 0) {
            b->argv[i + 1] = val;
            return;
        }
    }
    TEST_FAIL("no %s to replace", opt);
}

/* --proxy, --redis and --proxy-pid of e. */
static void cmd_env(struct bench_cmd *b, const struct pu_env *e)
{
    argf(b, "--proxy", "127.0.0.1:%d", e->proxy.port);
    argf(b, "--redis", "127.0.0.1:%d", e->redis.port);
    argf(b, "--proxy-pid", "%d", (int)e->proxy.pid);
}

/* Runs the command; returns its wait status, with the output in out. */
static int cmd_run(struct bench_cmd *b, char *out, size_t n)
{
    b->argv[b->n] = NULL;
    unlink(b->kv_path);
    return pu_run_capture(b->argv, out, n, RUN_MS);
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

/* Runs the command, which must succeed; fills kv with its --kv file. */
static void cmd_run_ok(struct bench_cmd *b, char *kv)
{
    static char out[OUT_BYTES];
    int st = cmd_run(b, out, sizeof(out));

    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy-bench %s: wait status 0x%x; output:\n%s", b->argv[1], st, out);
    read_file(b->kv_path, kv, KV_BYTES);
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

/* Redis figures were read: Redis spent CPU on every acquisition. */
static void check_redis_cpu(const char *kv, const char *t)
{
    double us = kv_get(kv, t, "redis_cpu_us_per_acq");

    fprintf(stderr, "%s: %.2f us of Redis CPU per acquisition\n", t, us);
    ASSERT_EQ(kv_get(kv, t, "redis_ok"), 1);
    ASSERT_TRUE(us > 0);
}

static void start_env(struct pu_env *e)
{
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_raise_nofile(4096);
    pu_env_start(e, "epoll", NULL);
}

/* Nothing left in Redis once the bench is done. */
static void check_redis_empty(int port)
{
    redisContext *rc = pu_connect(port);

    PU_EVENTUALLY(pu_dbsize(rc) == 0, 3000);
    redisFree(rc);
}

static void stop_env(struct pu_env *e)
{
    check_redis_empty(e->redis.port);
    pu_env_stop(e);
}

TEST(bench_rwlock_all_targets)
{
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;

    bench_bin();
    start_env(&e);
    cmd_init(&b, "rwlock", "rwlock");
    cmd_env(&b, &e);
    /* A short lease: a direct waiter that misses a write unlock's wake-up
     * (as Redisson's can) waits out at most 5 s of PTTL. */
    arg(&b, "--write-pct");
    arg(&b, "20");
    arg(&b, "--lease-ms");
    arg(&b, "5000");
    arg(&b, "--targets");
    arg(&b, "proxy,direct,direct-shared");
    cmd_run_ok(&b, kv);
    for (size_t i = 0; i < sizeof(all_direct) / sizeof(all_direct[0]); i++) {
        const char *t = all_direct[i];
        double reads = kv_get(kv, t, "reads"), writes = kv_get(kv, t, "writes");

        check_clean(kv, t);
        fprintf(stderr, "%s: %.0f reads, %.0f writes\n", t, reads, writes);
        ASSERT_TRUE(reads > 0);
        ASSERT_TRUE(writes > 0);
        ASSERT_EQ(reads + writes, kv_get(kv, t, "acquisitions"));
    }
    stop_env(&e);
}

/* Every run reports the proxy's CPU per acquisition next to Redis's, with
 * their kernel shares, and the proxy's against Redis's when Redis serves
 * the same clients directly (issue 23): in the report and in --kv. */
TEST(bench_cpu_per_acq)
{
    static char kv[KV_BYTES], out[OUT_BYTES];
    struct bench_cmd b;
    struct pu_env e;
    double acq, cpu, us;
    int st;

    bench_bin();
    start_env(&e);
    cmd_init(&b, "uncontended", "cpu");
    cmd_env(&b, &e);
    arg(&b, "--targets");
    arg(&b, "proxy,direct");
    st = cmd_run(&b, out, sizeof(out));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("lockproxy-bench: wait status 0x%x; output:\n%s", st, out);
    read_file(b.kv_path, kv, KV_BYTES);
    check_clean(kv, "proxy");
    acq = kv_get(kv, "proxy", "acquisitions");
    cpu = kv_get(kv, "proxy", "proxy_cpu_s");
    us = kv_get(kv, "proxy", "proxy_cpu_us_per_acq");
    fprintf(stderr, "proxy: %.2f us of proxy CPU per acquisition\n", us);
    ASSERT_TRUE(us > 0);
    ASSERT_TRUE(us > 0.999e6 * cpu / acq && us < 1.001e6 * cpu / acq);
    ASSERT_TRUE(kv_get(kv, "proxy", "proxy_sys_s") <= cpu);
    ASSERT_TRUE(kv_get(kv, "proxy", "redis_sys_s") <= kv_get(kv, "proxy", "redis_cpu_s"));
    ASSERT_TRUE(kv_get(kv, "direct", "redis_sys_s") <= kv_get(kv, "direct", "redis_cpu_s"));
    if (!strstr(out, "CPU per acq       proxy ") || !strstr(out, "proxy / Redis "))
        TEST_FAIL("no proxy-vs-Redis CPU line in the proxy target's report:\n%s", out);
    if (!strstr(out, "proxy CPU per acq / Redis CPU per acq serving direct: "))
        TEST_FAIL("no proxy-vs-direct-Redis CPU line in the summary:\n%s", out);
    stop_env(&e);
}

TEST(bench_semaphore_all_targets)
{
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;

    bench_bin();
    start_env(&e);
    cmd_init(&b, "semaphore", "semaphore");
    cmd_env(&b, &e);
    arg(&b, "--permits");
    arg(&b, "3");
    arg(&b, "--targets");
    arg(&b, "proxy,direct,direct-shared");
    cmd_run_ok(&b, kv);
    for (size_t i = 0; i < sizeof(all_direct) / sizeof(all_direct[0]); i++) {
        check_clean(kv, all_direct[i]);
        check_redis_cpu(kv, all_direct[i]);
        /* The 5 semaphores, which have no expiry, and nothing else. */
        ASSERT_EQ(kv_get(kv, all_direct[i], "keys_deleted"), 5);
    }
    stop_env(&e);
}

/* ---- twemproxy --------------------------------------------------------- */

/* A nutcracker child in front of a Redis. */
struct twem {
    pid_t pid; /* the process */
    int port;  /* its listen port */
};

static const char *nutcracker_bin(void)
{
    static const char *const paths[] = {"/usr/sbin/nutcracker", "/usr/bin/nutcracker",
                                        "/usr/local/sbin/nutcracker", "/usr/local/bin/nutcracker"};

    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    }
    TEST_SKIP("nutcracker (twemproxy) is not installed: scripts/deps.sh installs it");
}

/* Starts nutcracker with scripts/bench.sh's settings: one server, the
 * Redis on redis_port, two preconnected server connections. */
static void twem_start(struct twem *t, int redis_port)
{
    char conf[PU_PATH_MAX], log[PU_PATH_MAX], pidf[PU_PATH_MAX], stats[16];
    const char *argv[16];
    FILE *f;

    for (int attempt = 0; attempt < 3; attempt++) {
        t->port = pu_free_port();
        snprintf(conf, sizeof(conf), "%.200s/nutcracker-%d.yml", pu_tmpdir(), t->port);
        snprintf(log, sizeof(log), "%.200s/nutcracker-%d.log", pu_tmpdir(), t->port);
        snprintf(pidf, sizeof(pidf), "%.200s/nutcracker-%d.pid", pu_tmpdir(), t->port);
        snprintf(stats, sizeof(stats), "%d", pu_free_port());
        f = fopen(conf, "w");
        if (!f)
            TEST_FAIL("cannot write %s", conf);
        fprintf(f,
                "bench:\n  listen: 127.0.0.1:%d\n  redis: true\n  hash: fnv1a_64\n"
                "  distribution: ketama\n  preconnect: true\n  server_connections: 2\n"
                "  auto_eject_hosts: false\n  servers:\n    - 127.0.0.1:%d:1\n",
                t->port, redis_port);
        fclose(f);
        argv[0] = nutcracker_bin();
        argv[1] = "-c";
        argv[2] = conf;
        argv[3] = "-s";
        argv[4] = stats;
        argv[5] = "-a";
        argv[6] = "127.0.0.1";
        argv[7] = "-o";
        argv[8] = log;
        argv[9] = "-p";
        argv[10] = pidf;
        argv[11] = NULL;
        t->pid = pu_spawn_server(argv, log, t->port, NC_START_MS);
        if (t->pid > 0)
            return;
    }
    TEST_FAIL("nutcracker did not start (see its log)");
}

static void cmd_twem(struct bench_cmd *b, const struct twem *t)
{
    argf(b, "--twemproxy", "127.0.0.1:%d", t->port);
    argf(b, "--twemproxy-pid", "%d", (int)t->pid);
}

/* Contended locks through twemproxy, next to the proxy: waiters must poll
 * (the holder keeps the lock 1 ms), and with no warm-up the measurement
 * starts on a Redis without the scripts, so the first EVALSHAs get
 * NOSCRIPT and fall back to EVAL, at most once per client and script:
 * after that the EVALSHA names computed by the bench must be Redis's. */
TEST(bench_twemproxy_lock)
{
    static const char *const targets[] = {"twemproxy", "proxy"};
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;
    struct twem t;
    double noscripts;

    bench_bin();
    nutcracker_bin();
    start_env(&e);
    twem_start(&t, e.redis.port);
    cmd_init(&b, "contended", "twem-lock");
    cmd_env(&b, &e);
    cmd_twem(&b, &t);
    cmd_set(&b, "--warmup", "0");
    arg(&b, "--hold-us");
    arg(&b, "1000");
    arg(&b, "--targets");
    arg(&b, "twemproxy,proxy");
    cmd_run_ok(&b, kv);
    for (size_t i = 0; i < 2; i++) {
        check_clean(kv, targets[i]);
        check_redis_cpu(kv, targets[i]);
        ASSERT_EQ(kv_get(kv, targets[i], "keys_deleted"), 0);
    }
    noscripts = kv_get(kv, "twemproxy", "noscripts");
    fprintf(stderr, "twemproxy: %.0f polls, %.0f NOSCRIPT fallbacks\n",
            kv_get(kv, "twemproxy", "polls"), noscripts);
    ASSERT_TRUE(kv_get(kv, "twemproxy", "polls") > 0);
    ASSERT_TRUE(noscripts > 0);
    ASSERT_TRUE(noscripts <= 2 * CLIENTS);
    ASSERT_TRUE(kv_get(kv, "twemproxy", "proxy_cpu_s") > 0);
    check_redis_empty(e.redis.port);
    pu_kill_server(t.pid);
    pu_env_stop(&e);
}

/* Semaphores through twemproxy: created with the trySetPermits script and
 * deleted with DEL, both through twemproxy. */
TEST(bench_twemproxy_semaphore)
{
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;
    struct twem t;

    bench_bin();
    nutcracker_bin();
    start_env(&e);
    twem_start(&t, e.redis.port);
    cmd_init(&b, "semaphore", "twem-sem");
    cmd_env(&b, &e);
    cmd_twem(&b, &t);
    arg(&b, "--permits");
    arg(&b, "2");
    arg(&b, "--targets");
    arg(&b, "twemproxy");
    cmd_run_ok(&b, kv);
    check_clean(kv, "twemproxy");
    ASSERT_TRUE(kv_get(kv, "twemproxy", "polls") > 0);
    ASSERT_EQ(kv_get(kv, "twemproxy", "keys_deleted"), 5);
    check_redis_empty(e.redis.port);
    pu_kill_server(t.pid);
    pu_env_stop(&e);
}

/* ---- open loop --------------------------------------------------------- */

/* --rate: a modest rate is achieved (within a factor: the machine may be
 * busy) and not marked short; a rate no target can reach is marked short.
 * Behaviour, not speed. */
TEST(bench_open_loop)
{
    static const char *const targets[] = {"proxy", "direct"};
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;

    bench_bin();
    start_env(&e);
    cmd_init(&b, "contended", "rate");
    cmd_env(&b, &e);
    cmd_set(&b, "--duration", "2");
    arg(&b, "--rate");
    arg(&b, "400");
    arg(&b, "--targets");
    arg(&b, "proxy,direct");
    cmd_run_ok(&b, kv);
    for (size_t i = 0; i < 2; i++) {
        double got = kv_get(kv, targets[i], "rate_achieved");

        check_clean(kv, targets[i]);
        fprintf(stderr, "%s: asked 400/s, achieved %.1f/s\n", targets[i], got);
        ASSERT_EQ(kv_get(kv, targets[i], "rate_asked"), 400);
        ASSERT_TRUE(got > 200 && got < 600);
        ASSERT_EQ(kv_get(kv, targets[i], "rate_short"), 0);
    }

    cmd_init(&b, "contended", "rate-short");
    cmd_env(&b, &e);
    arg(&b, "--rate");
    arg(&b, "5000000");
    arg(&b, "--targets");
    arg(&b, "proxy");
    cmd_run_ok(&b, kv);
    check_clean(kv, "proxy");
    fprintf(stderr, "proxy: asked 5e6/s, achieved %.1f/s\n", kv_get(kv, "proxy", "rate_achieved"));
    ASSERT_EQ(kv_get(kv, "proxy", "rate_short"), 1);
    ASSERT_TRUE(kv_get(kv, "proxy", "rate_achieved") < 5000000);
    stop_env(&e);
}

/* ---- a running deployment: --target and AUTH --------------------------- */

/* A lockproxy that wants a password, in front of a Redis that wants
 * another: --target with --password drives it; the Redis figures are
 * omitted without --redis and present with --redis and
 * --redis-password; a direct target takes its Redis's password; a wrong
 * password fails clearly. */
TEST(bench_target_auth)
{
    static const char *const redis_extra[] = {"--requirepass", "redis-pw", NULL};
    static char kv[KV_BYTES], out[OUT_BYTES];
    struct pu_redis redis;
    struct pu_proxy proxy;
    struct bench_cmd b;
    int st;

    bench_bin();
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_raise_nofile(4096);
    memset(&redis, 0, sizeof(redis));
    memcpy(redis.extra, redis_extra, sizeof(redis_extra));
    pu_redis_start(&redis);
    memset(&proxy, 0, sizeof(proxy));
    snprintf(proxy.upstream, sizeof(proxy.upstream), "redis://:redis-pw@127.0.0.1:%d", redis.port);
    proxy.extra[0] = "--requirepass";
    proxy.extra[1] = "proxy-pw";
    proxy.extra[2] = "--log-level";
    proxy.extra[3] = "warn";
    pu_proxy_start(&proxy);

    cmd_init(&b, "contended", "target");
    argf(&b, "--target", "127.0.0.1:%d", proxy.port);
    arg(&b, "--password");
    arg(&b, "proxy-pw");
    cmd_run_ok(&b, kv);
    check_clean(kv, "proxy");
    ASSERT_EQ(kv_get(kv, "proxy", "redis_ok"), 0);

    cmd_init(&b, "contended", "target-redis");
    argf(&b, "--target", "127.0.0.1:%d", proxy.port);
    arg(&b, "--password");
    arg(&b, "proxy-pw");
    argf(&b, "--redis", "127.0.0.1:%d", redis.port);
    arg(&b, "--redis-password");
    arg(&b, "redis-pw");
    cmd_run_ok(&b, kv);
    check_clean(kv, "proxy");
    check_redis_cpu(kv, "proxy");

    cmd_init(&b, "contended", "target-direct");
    arg(&b, "--targets");
    arg(&b, "direct-shared");
    argf(&b, "--target", "127.0.0.1:%d", redis.port);
    arg(&b, "--password");
    arg(&b, "redis-pw");
    cmd_run_ok(&b, kv);
    check_clean(kv, "direct-shared");
    check_redis_cpu(kv, "direct-shared");

    cmd_init(&b, "contended", "target-wrong");
    argf(&b, "--target", "127.0.0.1:%d", proxy.port);
    arg(&b, "--password");
    arg(&b, "not-it");
    st = cmd_run(&b, out, sizeof(out));
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    if (!strstr(out, "WRONGPASS"))
        TEST_FAIL("a refused AUTH is not reported:\n%s", out);

    pu_proxy_stop(&proxy);
    pu_redis_kill(&redis);
}

/* Issue 21: 50 Redisson-style clients (own command and pub/sub connection
 * each) on one name, direct and through the proxy (pool of 2). Figures
 * taken at the end of the measured phase, while every client is
 * connected. */
TEST(bench_passthrough_contended)
{
    static const char *const extra[] = {"--pool-size", "2", NULL};
    static char kv[KV_BYTES];
    struct bench_cmd b;
    struct pu_env e;

    bench_bin();
    setenv("LP_IT_LOG_LEVEL", "warn", 0);
    pu_raise_nofile(4096);
    pu_env_start(&e, "epoll", extra);
    cmd_init(&b, "contended", "passthrough");
    cmd_set(&b, "--keys", "1");
    cmd_env(&b, &e);
    arg(&b, "--targets");
    arg(&b, "direct,passthrough");
    cmd_run_ok(&b, kv);
    check_clean(kv, "direct");
    check_clean(kv, "passthrough");
    check_redis_cpu(kv, "direct");
    check_redis_cpu(kv, "passthrough");
    fprintf(stderr, "Redis connections: direct %.0f (%.0f subscribed), passthrough %.0f (%.0f)\n",
            kv_get(kv, "direct", "redis_clients"), kv_get(kv, "direct", "redis_pubsub_conns"),
            kv_get(kv, "passthrough", "redis_clients"),
            kv_get(kv, "passthrough", "redis_pubsub_conns"));
    /* Direct: every client's command connection, and its waiters each
     * subscribed on their own connection. */
    ASSERT_TRUE(kv_get(kv, "direct", "redis_clients") >= CLIENTS);
    ASSERT_TRUE(kv_get(kv, "direct", "redis_pubsub_conns") >= 2);
    /* Through the proxy: the pool, its pub/sub connection (and at most one
     * more of its own); one upstream subscription for the one name. */
    ASSERT_TRUE(kv_get(kv, "passthrough", "redis_clients") <= 4);
    ASSERT_TRUE(kv_get(kv, "passthrough", "redis_pubsub_conns") <= 1);
    ASSERT_TRUE(kv_get(kv, "passthrough", "redis_pubsub_channels") <= 1);
    ASSERT_EQ(kv_get(kv, "passthrough", "keys_deleted"), 0);
    stop_env(&e);
}

TEST_MAIN(TEST_CASE(bench_rwlock_all_targets), TEST_CASE(bench_cpu_per_acq),
          TEST_CASE(bench_semaphore_all_targets), TEST_CASE(bench_twemproxy_lock),
          TEST_CASE(bench_twemproxy_semaphore), TEST_CASE(bench_open_loop),
          TEST_CASE(bench_target_auth), TEST_CASE(bench_passthrough_contended))
