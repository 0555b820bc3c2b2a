/* lockproxy-torture: drives clients through one or two lockproxies against
 * real redis-servers, injects faults on a seeded schedule, and checks the
 * recorded history (see tt.h for the design, tt_check.h for the rules).
 *
 * A run: start the servers; the timed scenarios (two proxies); the
 * semaphore; fork the workload clients; the fault phase; stop the clients;
 * the end checks; the history checks; a summary on stdout (violations with
 * their op records) and a JSON file. Exit 0 when every check passed, 1 on
 * any violation, 2 on a usage error, 77 when the io backend cannot run
 * here. --negative-control runs LEASEs shorter than the holds and fails
 * unless the checker sees what that must cause. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tt.h"
#include "tt_check.h"
#include "tt_end.h"
#include "tt_env.h"
#include "tt_faults.h"
#include "tt_report.h"
#include "tt_scenario.h"

#define MAX_FAULTS      (TT_MAX_PLANNED + 16)
#define MAX_LEASE_MS    4500 /* longest LEASE of the workload (tt_client.c) */
#define CLIENT_STOP_MS  40000
#define FIFO_MARGIN_MS  500
#define FAULT_SETTLE_MS 2000
#define IDLE_GAP_MS     1000
#define RECOVERY_BOUND_MS                                                  \
    5000 /* cluster faults: a new acquire is served within this of healing \
          */
#ifdef TT_SANITIZED
#define DEFAULT_RSS_MB 400 /* the proxy's ASan quarantine (256 MB) is in its RSS */
#else
#define DEFAULT_RSS_MB 100
#endif

struct run {
    struct tt_config cfg;
    struct tt_env env;
    struct tt_report rep;
    struct tt_fault faults[MAX_FAULTS];
    int nfaults;
    struct tt_planned plan[TT_MAX_PLANNED];
    struct tt_scenario_result scen;
    long long t_start_us;
};

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: lockproxy-torture [options]\n"
        "  --short               preset: 24 clients, 2 proxies, 50 s, each fault once (default)\n"
        "  --long                preset: 24 clients, 2 proxies, 20 min, faults in cycles\n"
        "  --cluster             the lock Redis is a 6-node Redis Cluster (3 masters, 3\n"
        "                        replicas); preset: 16 clients, 2 proxies, 45 s, cluster\n"
        "                        faults (slot-migrate, cluster-failover, master-kill) twice\n"
        "                        each, no timed scenarios; combines with --long\n"
        "  --sentinel            the lock Redis is a master with 2 replicas and 3 sentinels\n"
        "                        (redis-sentinel://); preset: 16 clients, 2 proxies, 50 s,\n"
        "                        sentinel-failover and sentinel-kill twice each, no timed\n"
        "                        scenarios; combines with --long and --sync-replicas\n"
        "  --sync-replicas N     run the proxies with --sync-replicas N (--sync-timeout 500)\n"
        "  --report-only LIST    checks (e.g. stuck-hold,fifo) whose violations are printed\n"
        "                        but do not fail the run (known, documented failures)\n"
        "  --duration S          length of the fault phase\n"
        "  --clients N           workload clients (1-%d)\n"
        "  --proxies N           1 or 2 (the timed scenarios need 2)\n"
        "  --seed N              seed of the workload and the fault schedule\n"
        "  --io uring|epoll      io backend of the proxies\n"
        "  --faults LIST         comma-separated fault kinds, 'all' or 'none'\n"
        "  --no-scenarios        skip the timed scenarios\n"
        "  --negative-control    LEASE shorter than the hold, no faults: must show overlaps\n"
        "                        past the deadline and lost unfenced updates\n"
        "  --json FILE           write the machine-readable summary to FILE\n"
        "  --log-dir DIR         keep the client op logs in DIR (a new directory)\n"
        "  --rss-limit-mb N      proxy peak RSS bound (default %d)\n"
        "  --proxy-bin PATH      the lockproxy binary (default $LP_PROXY_BIN)\n"
        "  --partitions          P0 reaches Redis through a userspace fault relay; adds the\n"
        "                        partition fault (P0 cut from Redis around the lease)\n"
        "  --relock-workload     clients also re-lock at once after a loss, re-enter a held\n"
        "                        lock, share OWNER tokens across connections and run\n"
        "                        MULTILOCK; untold overlaps (nobody told LOCKLOST) fail\n"
        "                        the run. LP_TORTURE_PARTITIONS=1 turns both on (single\n"
        "                        Redis only; issue 18)\n"
        "  --relock-kinds LIST   the workload's kinds: reenter,shared,multi (default all)\n"
        "  --self-test           check the checker on synthetic histories\n"
        "fault kinds:",
        TT_MAX_CLIENTS, DEFAULT_RSS_MB);
    for (int k = 0; k < TT_F_COUNT; k++)
        fprintf(f, " %s", tt_fault_name((enum tt_fault_kind)k));
    fprintf(f, "\n");
}

static unsigned parse_faults(const char *list)
{
    char buf[512], *save = NULL;
    unsigned mask = 0;

    if (strcmp(list, "all") == 0)
        return (1u << TT_F_COUNT) - 1;
    if (strcmp(list, "none") == 0)
        return 0;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = tt_fault_parse(t);

        if (k < 0) {
            fprintf(stderr, "unknown fault kind '%s'\n", t);
            usage(stderr);
            exit(2);
        }
        mask |= 1u << k;
    }
    return mask;
}

static unsigned parse_kinds(const char *list)
{
    char buf[128], *save = NULL;
    unsigned mask = 0;

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "reenter") == 0)
            mask |= TT_K_REENTER;
        else if (strcmp(t, "shared") == 0)
            mask |= TT_K_SHARED;
        else if (strcmp(t, "multi") == 0)
            mask |= TT_K_MULTI;
        else {
            fprintf(stderr, "unknown --relock-kinds kind '%s' (reenter, shared, multi)\n", t);
            exit(2);
        }
    }
    return mask;
}

static void defaults(struct tt_config *c)
{
    memset(c, 0, sizeof(*c));
    c->duration_s = 50;
    c->clients = 24;
    c->proxies = 2;
    c->seed = 1;
    c->io = "epoll";
    c->faults = TT_F_SINGLE_MASK & ~(1u << TT_F_PARTITION);
    c->scenarios = true;
    c->rss_limit_mb = DEFAULT_RSS_MB;
    c->watchdog_ms = 1500;
    c->upstream_timeout_ms = 3000;
    c->linger_ms = 1000;
    c->sem_permits = 3;
    c->sync_timeout_ms = 500;
    c->relock_kinds = TT_K_ALL;
}

static const char *need(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s needs a value\n", argv[*i]);
        exit(2);
    }
    return argv[++*i];
}

/* Presets first, then the other flags override them. */
static bool parse_args(int argc, char **argv, struct tt_config *c)
{
    bool self_test = false, faults_given = false;
    const char *env = getenv("LP_TORTURE_PARTITIONS");
    unsigned mode_mask;

    defaults(c);
    for (int i = 1; i < argc; i++) { /* --cluster's preset, then --long's duration */
        if (strcmp(argv[i], "--cluster") == 0)
            c->duration_s = 45;
        if (strcmp(argv[i], "--sentinel") == 0)
            c->duration_s = 50;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--long") == 0) {
            c->duration_s = 1200;
            c->long_run = true;
        } else if (strcmp(argv[i], "--cluster") == 0) {
            c->cluster = true;
            c->clients = 16;
            c->faults = TT_F_CLUSTER_MASK;
            c->scenarios = false;
        } else if (strcmp(argv[i], "--sentinel") == 0) {
            c->sentinel = true;
            c->clients = 16;
            c->faults = TT_F_SENTINEL_MASK;
            c->scenarios = false;
        } else if (strcmp(argv[i], "--negative-control") == 0) {
            c->negative = true;
            c->duration_s = 15;
            c->clients = 8;
            c->faults = 0;
            c->scenarios = false;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--short") == 0 || strcmp(a, "--long") == 0 ||
            strcmp(a, "--negative-control") == 0 || strcmp(a, "--cluster") == 0 ||
            strcmp(a, "--sentinel") == 0)
            continue;
        else if (strcmp(a, "--sync-replicas") == 0)
            c->sync_replicas = atoi(need(argc, argv, &i));
        else if (strcmp(a, "--report-only") == 0)
            c->report_only = need(argc, argv, &i);
        else if (strcmp(a, "--duration") == 0)
            c->duration_s = atoi(need(argc, argv, &i));
        else if (strcmp(a, "--clients") == 0)
            c->clients = atoi(need(argc, argv, &i));
        else if (strcmp(a, "--proxies") == 0)
            c->proxies = atoi(need(argc, argv, &i));
        else if (strcmp(a, "--seed") == 0)
            c->seed = (unsigned)strtoul(need(argc, argv, &i), NULL, 10);
        else if (strcmp(a, "--io") == 0)
            c->io = need(argc, argv, &i);
        else if (strcmp(a, "--faults") == 0)
            c->faults = parse_faults(need(argc, argv, &i)), faults_given = true;
        else if (strcmp(a, "--partitions") == 0)
            c->partitions = true;
        else if (strcmp(a, "--relock-workload") == 0)
            c->relock = true;
        else if (strcmp(a, "--relock-kinds") == 0)
            c->relock_kinds = parse_kinds(need(argc, argv, &i));
        else if (strcmp(a, "--no-scenarios") == 0)
            c->scenarios = false;
        else if (strcmp(a, "--json") == 0)
            c->json_path = need(argc, argv, &i);
        else if (strcmp(a, "--log-dir") == 0)
            c->log_dir = need(argc, argv, &i);
        else if (strcmp(a, "--rss-limit-mb") == 0)
            c->rss_limit_mb = atoi(need(argc, argv, &i));
        else if (strcmp(a, "--proxy-bin") == 0)
            setenv("LP_PROXY_BIN", need(argc, argv, &i), 1);
        else if (strcmp(a, "--self-test") == 0)
            self_test = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "unknown option '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    mode_mask = c->cluster    ? TT_F_CLUSTER_MASK
                : c->sentinel ? TT_F_SENTINEL_MASK
                              : TT_F_SINGLE_MASK;
    if (c->faults == (1u << TT_F_COUNT) - 1) /* "all": all of this mode */
        c->faults = mode_mask & ~(1u << TT_F_PARTITION);
    /* The issue-18 classes: off by default until the engine fixes land;
     * they need a single Redis (the relay fronts one). */
    if (env && strcmp(env, "1") == 0 && !c->cluster && !c->sentinel && !c->negative)
        c->partitions = c->relock = true;
    if (c->partitions && !faults_given)
        c->faults |= 1u << TT_F_PARTITION;
    if (c->faults & (1u << TT_F_PARTITION))
        c->partitions = true;
    if ((c->partitions || c->relock) && (c->cluster || c->sentinel || c->negative)) {
        fprintf(stderr, "--partitions and --relock-workload need a single Redis and faults\n");
        exit(2);
    }
    if ((c->faults & ~mode_mask) || (c->cluster && c->sentinel)) {
        fprintf(stderr, "%s\n",
                c->cluster    ? "--cluster takes only the cluster fault kinds"
                : c->sentinel ? "--sentinel takes only the sentinel fault kinds"
                              : "the cluster (sentinel) fault kinds need --cluster (--sentinel)");
        exit(2);
    }
    if ((c->cluster || c->sentinel) && c->scenarios) {
        fprintf(stderr, "--cluster and --sentinel run no timed scenarios (they fault a single "
                        "Redis)\n");
        c->scenarios = false;
    }
    if (c->sync_replicas < 0 || c->sync_replicas > 2) {
        fprintf(stderr, "bad --sync-replicas (0-2)\n");
        exit(2);
    }
    if (c->clients < 1 || c->clients > TT_MAX_CLIENTS || c->proxies < 1 ||
        c->proxies > TT_MAX_PROXIES || c->duration_s < 5 ||
        (strcmp(c->io, "uring") != 0 && strcmp(c->io, "epoll") != 0)) {
        fprintf(stderr, "bad --clients, --proxies, --duration or --io\n");
        exit(2);
    }
    return self_test;
}

static double since_s(const struct run *r)
{
    return (double)(tt_now_us() - r->t_start_us) / 1e6;
}

/* A proxy on a cluster serves requests once it knows every slot's master;
 * on Sentinel, once it is connected to the master. */
static void wait_cluster_map(struct run *r)
{
    for (int i = 0; i < r->env.nproxies && (r->cfg.cluster || r->cfg.sentinel); i++) {
        redisContext *c = pu_connect(r->env.proxy[i].port);
        const char *field = r->cfg.cluster ? "cluster_slots_served" : "upstream_state";
        const char *want = r->cfg.cluster ? "16384" : "up";
        char v[32];

        PU_EVENTUALLY(pu_info_str(c, field, v, sizeof(v)) && strcmp(v, want) == 0, 15000);
        redisFree(c);
    }
}

static void init_semaphore(struct run *r)
{
    redisContext *c;

    wait_cluster_map(r);
    c = pu_connect(r->env.proxy[0].port);

    PU_INT(c, 1, "SEM.TRYSETPERMITS %s %d", TT_SEM_NAME, r->cfg.sem_permits);
    redisFree(c);
}

static void fork_workload(struct run *r)
{
    for (int i = 0; i < r->cfg.clients; i++) {
        struct tt_client_cfg *cc = &r->env.ccfg[i];

        memset(cc, 0, sizeof(*cc));
        cc->id = i;
        cc->proxy = i % r->cfg.proxies;
        cc->proxy_port = r->env.proxy[cc->proxy].port;
        cc->resource_port = r->env.res.port;
        cc->seed = r->cfg.seed;
        cc->negative = r->cfg.negative;
        cc->relock = r->cfg.relock;
        cc->relock_kinds = r->cfg.relock_kinds;
        tt_env_fork_client(&r->env, i);
    }
}

/* Sleeps until t (monotonic ms), watching the proxies meanwhile. */
static void idle_until(struct run *r, long long t)
{
    while (pu_now_ms() < t) {
        tt_env_watch(&r->env);
        pu_sleep_ms(100);
    }
}

static void fault_phase(struct run *r)
{
    struct tt_rng rng;
    long long t0 = pu_now_ms(), end = t0 + (long long)r->cfg.duration_s * 1000;
    int n;

    tt_rng_seed(&rng, r->cfg.seed ^ 0xfa017ull);
    n = tt_faults_plan(&r->cfg, &rng, end - t0, r->plan, TT_MAX_PLANNED);
    for (int i = 0; i < n && r->nfaults < MAX_FAULTS; i++) {
        struct tt_fault *f;

        idle_until(r, t0 + r->plan[i].at_ms);
        if (r->cfg.long_run && pu_now_ms() > end - 4000)
            break;
        f = &r->faults[r->nfaults++];
        tt_fault_inject(&r->env, &r->plan[i], &rng, f);
        /* No target at that moment (no client holding a LEASE lock, the
         * connections reconnecting): try again a little later, before the
         * next fault is due, so a short run covers every kind it chose. */
        for (int tries = 0; !f->triggered && tries < 8 &&
                            (i + 1 >= n || pu_now_ms() + 250 < t0 + r->plan[i + 1].at_ms);
             tries++) {
            idle_until(r, pu_now_ms() + 250);
            tt_fault_inject(&r->env, &r->plan[i], &rng, f);
        }
        printf("[%7.2fs] %-17s %s%s\n", since_s(r), tt_fault_name(f->kind), f->note,
               f->triggered ? "" : " (NOT INJECTED)");
        fflush(stdout);
        tt_env_watch(&r->env);
    }
    idle_until(r, end);
}

/* Short runs must exercise every selected fault kind. */
static void check_coverage(struct run *r)
{
    for (int k = 0; k < TT_F_COUNT && !r->cfg.long_run; k++) {
        bool hit = false;

        if (!(r->cfg.faults & (1u << k)))
            continue;
        for (int i = 0; i < r->nfaults; i++)
            hit = hit || (r->faults[i].kind == (enum tt_fault_kind)k && r->faults[i].triggered);
        if (!hit)
            tt_report_add(&r->rep, "coverage", "",
                          "fault kind %s was selected but never injected (no target found)",
                          tt_fault_name((enum tt_fault_kind)k));
    }
}

/* The negative control also re-checks its history blind (every overlap
 * classed silent), which must find silent overlaps: the overlap detector
 * itself sees them, and only the LEASE deadlines excuse them. */
static void check_blind(struct run *r, const struct tt_history *h, struct tt_check_params p)
{
    struct tt_report blind;

    memset(&blind, 0, sizeof(blind));
    p.blind = true;
    tt_check_run(h, &p, &blind);
    r->rep.blind_silent = blind.overlaps[TT_OV_SILENT];
    if (r->rep.blind_silent == 0)
        tt_report_add(&r->rep, "negative-control", "",
                      "re-checked blind (no deadline, nobody told), the history shows no overlap "
                      "at all: the overlap detector does not see them");
    tt_report_free(&blind);
}

static void check_history(struct run *r)
{
    struct tt_check_params p = {
        .sem_permits = r->cfg.sem_permits,
        .bound_us = ((long long)r->cfg.upstream_timeout_ms + 2000) * 1000,
        .fifo_margin_us = FIFO_MARGIN_MS * 1000ll,
        .fault_settle_us = FAULT_SETTLE_MS * 1000ll,
        .idle_gap_us = IDLE_GAP_MS * 1000ll,
        .live_settle_us = (MAX_LEASE_MS + 1000) * 1000ll,
        .watchdog_us = r->cfg.watchdog_ms * 1000ll,
        .recovery_bound_us = RECOVERY_BOUND_MS * 1000ll,
        .strict_untold = r->cfg.partitions || r->cfg.relock,
        .faults = r->faults,
        .nfaults = r->nfaults,
    };
    struct tt_history *h = tt_history_load(r->env.log_dir, r->t_start_us);

    if (!h)
        TEST_FAIL("cannot read the client logs in %s", r->env.log_dir);
    tt_check_run(h, &p, &r->rep);
    if (r->cfg.negative)
        check_blind(r, h, p);
    tt_history_free(h);
}

/* The semaphore must end with its permits, less at most what the faults
 * may have leaked (tt_check.c: permits of a killed proxy, acquires with an
 * unknown outcome), and never more. */
static void check_permits_end(struct run *r)
{
    long long n = r->cfg.sem_permits, have = r->rep.sem_count_end;

    if (have > n)
        tt_report_add(&r->rep, "permits", TT_SEM_NAME,
                      "semaphore %s ends with %lld permits, more than the %lld it was given: a "
                      "permit was returned twice, so more holders than permits were possible",
                      TT_SEM_NAME, have, n);
    else if (n - have > r->rep.sem_leak_bound)
        tt_report_add(&r->rep, "permits", TT_SEM_NAME,
                      "semaphore %s ends with %lld of %lld permits: %lld leaked, but the faults "
                      "of this run explain at most %lld (permits held through a killed proxy, "
                      "acquires with an unknown outcome)",
                      TT_SEM_NAME, have, n, n - have, r->rep.sem_leak_bound);
}

/* The negative control must show what a lease shorter than the hold
 * causes, or the checker is blind. */
static void check_negative(struct run *r)
{
    const struct tt_report *p = &r->rep;
    long long seen = p->overlaps[TT_OV_PAST_DEADLINE] + p->overlaps[TT_OV_TOLD_LOST];

    if (seen == 0)
        tt_report_add(&r->rep, "negative-control", "",
                      "no overlap past a LEASE deadline was seen although every LEASE was "
                      "shorter than its hold: the checker does not see overlaps");
    if (p->unfenced_lost == 0)
        tt_report_add(&r->rep, "negative-control", "",
                      "no unfenced update was lost although every LEASE was shorter than its "
                      "hold: the resource check does not see lost updates");
    if (p->fenced_rejected == 0)
        tt_report_add(&r->rep, "negative-control", "",
                      "the fenced resource never refused a stale token although every LEASE "
                      "was shorter than its hold");
}

static int run(struct run *r)
{
    int stuck, settle;

    r->t_start_us = tt_now_us();
    tt_env_start(&r->env, &r->cfg, &r->rep);
    tt_report_header(&r->cfg, stdout);
    if (r->cfg.scenarios)
        tt_scenarios_run(&r->env, r->faults, &r->nfaults);
    init_semaphore(r);
    fork_workload(r);
    fault_phase(r);
    stuck = tt_env_stop_clients(&r->env, CLIENT_STOP_MS);
    if (stuck)
        tt_report_add(&r->rep, "stuck-client", "",
                      "%d client(s) did not finish their operation within %d ms of the end and "
                      "were killed (see the unanswered ops)",
                      stuck, CLIENT_STOP_MS);
    settle = MAX_LEASE_MS + r->cfg.watchdog_ms + r->cfg.linger_ms + 3000;
    tt_end_checks(&r->env, &r->rep, settle);
    check_history(r);
    check_permits_end(r);
    check_coverage(r);
    if (r->cfg.scenarios)
        tt_scenarios_expect(&r->env, &r->rep, &r->scen);
    if (r->cfg.negative)
        check_negative(r);
    tt_env_stop(&r->env);
    tt_report_print(&r->cfg, &r->rep, r->faults, r->nfaults, &r->scen, stdout);
    if (r->cfg.json_path)
        tt_report_json(&r->cfg, &r->rep, r->faults, r->nfaults, &r->scen, r->t_start_us,
                       r->cfg.json_path);
    return tt_report_failing(&r->cfg, &r->rep) == 0 ? 0 : 1;
}

/* Without $LP_PROXY_BIN or --proxy-bin: the lockproxy of the same build
 * tree (build/tests/torture/lockproxy-torture -> build/lockproxy). */
static void default_proxy_bin(void)
{
    char exe[PATH_MAX], bin[PATH_MAX + 32];
    ssize_t n;
    char *slash;

    if (getenv("LP_PROXY_BIN"))
        return;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(bin, sizeof(bin), "%s/../../lockproxy", exe);
    setenv("LP_PROXY_BIN", bin, 0);
}

int main(int argc, char **argv)
{
    static struct run r;
    int rc;

    if (parse_args(argc, argv, &r.cfg))
        return tt_selftest_run();
    setvbuf(stdout, NULL, _IOLBF, 0);
    default_proxy_bin();
    if (strcmp(r.cfg.io, "uring") == 0 && !pu_uring_available())
        TEST_SKIP("io_uring_setup is not permitted here");
    pu_raise_nofile(4096);
    rc = run(&r);
    tt_report_free(&r.rep);
    return rc;
}
