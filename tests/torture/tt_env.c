/* Torture suite: servers and client processes of a run (see tt_env.h). */
#include "tt_env.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/pool.h"

static struct tt_env *g_env; /* for the exit handler */

static void kill_clients(int status, void *arg)
{
    (void)status;
    (void)arg;
    if (!g_env)
        return;
    for (int i = 0; i < TT_MAX_FORKED; i++) {
        if (g_env->pid[i] > 0) {
            kill(g_env->pid[i], SIGCONT);
            kill(g_env->pid[i], SIGKILL);
            waitpid(g_env->pid[i], NULL, 0);
            g_env->pid[i] = 0;
        }
    }
}

const char *tt_env_dir(void)
{
    return pu_tmpdir();
}

static void start_cluster(struct tt_env *e)
{
    e->cluster = calloc(1, sizeof(*e->cluster));
    if (!e->cluster)
        TEST_FAIL("out of memory");
    if (!rcluster_available())
        TEST_SKIP("%s or %s not installed", PREDIS_BIN, RCLUSTER_CLI);
    rcluster_start(e->cluster);
    pu_redis_start(&e->res);
}

/* 1 master, 2 replicas, 3 sentinels (down-after-milliseconds 1000). */
static void start_sentinel(struct tt_env *e)
{
    e->sentinel = calloc(1, sizeof(*e->sentinel));
    if (!e->sentinel)
        TEST_FAIL("out of memory");
    if (!rsentinel_available())
        TEST_SKIP("%s not installed", PREDIS_BIN);
    rsentinel_start(e->sentinel, NULL, NULL);
    rsentinel_wait_master(e->sentinel, -1);
    pu_redis_start(&e->res);
}

redisContext *tt_env_sentinel_master(struct tt_env *e)
{
    int m = rsentinel_wait_master(e->sentinel, -1);

    return pu_try_connect(e->sentinel->node[m].port);
}

int tt_env_owner(struct tt_env *e, const char *name)
{
    return e->cluster ? rcluster_owner(e->cluster, pool_slot(name, strlen(name))) : -1;
}

static void start_redis(struct tt_env *e)
{
    const char **a = e->lock.extra;
    int i = 0;

    if (e->cfg->cluster)
        return start_cluster(e);
    if (e->cfg->sentinel)
        return start_sentinel(e);
    /* AOF with appendfsync always: Redis writes and fsyncs the AOF before
     * it sends the replies, so a kill -9 loses nothing it acknowledged.
     * (With everysec a slow fsync can postpone the write past the reply,
     * and a restarted semaphore can come back with a permit too many.) */
    a[i++] = "--enable-debug-command";
    a[i++] = "yes";
    a[i++] = "--appendonly";
    a[i++] = "yes";
    a[i++] = "--appendfsync";
    a[i++] = "always";
    a[i] = NULL;
    pu_redis_start(&e->lock);
    pu_redis_start(&e->res);
}

static void proxy_args(struct tt_env *e, int i)
{
    const struct tt_config *c = e->cfg;
    const char *level = getenv("LP_IT_LOG_LEVEL");
    const char **a = e->proxy[i].extra;
    int n = 0;

    snprintf(e->numbuf[0], sizeof(e->numbuf[0]), "%d", c->watchdog_ms);
    snprintf(e->numbuf[1], sizeof(e->numbuf[1]), "%d", c->upstream_timeout_ms);
    snprintf(e->numbuf[2], sizeof(e->numbuf[2]), "%d", c->linger_ms);
    a[n++] = "--io";
    a[n++] = c->io;
    a[n++] = "--log-level";
    a[n++] = level && level[0] ? level : "info";
    a[n++] = "--lock-watchdog-timeout";
    a[n++] = e->numbuf[0];
    a[n++] = "--upstream-timeout";
    a[n++] = e->numbuf[1];
    a[n++] = "--subscription-linger";
    a[n++] = e->numbuf[2];
    if (c->sync_replicas > 0) {
        snprintf(e->numbuf[3], sizeof(e->numbuf[3]), "%d", c->sync_replicas);
        snprintf(e->numbuf[4], sizeof(e->numbuf[4]), "%d", c->sync_timeout_ms);
        a[n++] = "--sync-replicas";
        a[n++] = e->numbuf[3];
        a[n++] = "--sync-timeout";
        a[n++] = e->numbuf[4];
    }
    a[n] = NULL;
    if (e->sentinel)
        snprintf(e->proxy[i].upstream, sizeof(e->proxy[i].upstream), "redis-sentinel://%s/%s",
                 e->sentinel->list, RSENT_NAME);
    else if (e->cluster)
        snprintf(e->proxy[i].upstream, sizeof(e->proxy[i].upstream),
                 "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", e->cluster->node[0].port,
                 e->cluster->node[3].port);
    else
        snprintf(e->proxy[i].upstream, sizeof(e->proxy[i].upstream), "redis://127.0.0.1:%d",
                 i == 0 && e->relay ? relay_port(e->relay) : e->lock.port);
}

void tt_env_start(struct tt_env *e, const struct tt_config *cfg, struct tt_report *report)
{
    memset(e, 0, sizeof(*e));
    e->cfg = cfg;
    e->report = report;
    e->nproxies = cfg->proxies;
    if (cfg->log_dir)
        snprintf(e->log_dir, sizeof(e->log_dir), "%s", cfg->log_dir);
    else
        snprintf(e->log_dir, sizeof(e->log_dir), "%s/logs", pu_tmpdir());
    if (mkdir(e->log_dir, 0700) != 0 && errno != EEXIST)
        TEST_FAIL("mkdir %s: %s", e->log_dir, strerror(errno));
    e->shm = mmap(NULL, sizeof(*e->shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (e->shm == MAP_FAILED)
        TEST_FAIL("mmap: %s", strerror(errno));
    memset(e->shm, 0, sizeof(*e->shm));
    g_env = e;
    on_exit(kill_clients, NULL);
    start_redis(e);
    if (cfg->partitions && !e->cluster && !e->sentinel) {
        /* P0 reaches the lock Redis through the fault relay (partitions);
         * its thread lives in this process, and the forked clients close
         * their copies of its sockets (relay_util.h). */
        e->relay = relay_start(e->lock.port);
        if (!e->relay)
            TEST_FAIL("relay_start: %s", strerror(errno));
    }
    for (int i = 0; i < e->nproxies; i++) {
        proxy_args(e, i);
        pu_proxy_start(&e->proxy[i]);
    }
}

void tt_env_stop(struct tt_env *e)
{
    tt_env_admin_drop(e);
    for (int i = 0; i < e->nproxies; i++)
        pu_proxy_stop(&e->proxy[i]);
    relay_stop(e->relay);
    e->relay = NULL;
    pu_redis_kill(&e->lock);
    pu_redis_kill(&e->res);
    if (e->cluster)
        rcluster_cleanup(e->cluster);
    free(e->cluster);
    e->cluster = NULL;
    if (e->sentinel)
        rsentinel_cleanup(e->sentinel);
    free(e->sentinel);
    e->sentinel = NULL;
    munmap(e->shm, sizeof(*e->shm));
    e->shm = NULL;
    g_env = NULL;
}

redisContext *tt_env_admin(struct tt_env *e)
{
    if (e->admin && e->admin->err)
        tt_env_admin_drop(e);
    if (!e->admin && e->lock.pid > 0)
        e->admin = pu_try_connect(e->lock.port);
    return e->admin;
}

void tt_env_admin_drop(struct tt_env *e)
{
    if (e->admin)
        redisFree(e->admin);
    e->admin = NULL;
}

void tt_env_proxy_kill(struct tt_env *e, int i)
{
    struct pu_proxy *p = &e->proxy[i];

    if (p->pid <= 0)
        return;
    kill(p->pid, SIGCONT);
    kill(p->pid, SIGKILL);
    while (pu_proxy_alive(p))
        pu_sleep_ms(2);
}

void tt_env_proxy_start(struct tt_env *e, int i)
{
    if (pu_proxy_try_start(&e->proxy[i]) != 0)
        TEST_FAIL("lockproxy %d did not restart on port %d", i, e->proxy[i].port);
}

void tt_env_fork_client(struct tt_env *e, int slot)
{
    struct tt_client_cfg *cc = &e->ccfg[slot];
    pid_t pid;

    cc->shm = e->shm;
    cc->slot = &e->shm->slot[slot];
    snprintf(cc->log_path, sizeof(cc->log_path), "%s/client-%d.log", e->log_dir, cc->id);
    snprintf(cc->log_path2, sizeof(cc->log_path2), "%s/client-%d.log", e->log_dir,
             TT_SHARED_CLIENT + cc->id);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        TEST_FAIL("fork: %s", strerror(errno));
    if (pid == 0)
        tt_client_main(cc);
    e->pid[slot] = pid;
    atomic_store(&cc->slot->pid, pid);
}

static bool reap_slot(struct tt_env *e, int slot)
{
    int st;

    if (e->pid[slot] <= 0)
        return true;
    if (waitpid(e->pid[slot], &st, WNOHANG) != e->pid[slot])
        return false;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        tt_report_add(e->report, "client-crash", "",
                      "client %d (slot %d) ended with wait status 0x%x: a harness error, see "
                      "stderr",
                      e->ccfg[slot].id, slot, st);
    e->pid[slot] = 0;
    return true;
}

void tt_env_wait_clients(struct tt_env *e, int from, int to, int ms)
{
    long long deadline = pu_now_ms() + ms;

    for (;;) {
        bool all = true;

        for (int i = from; i < to; i++)
            all = reap_slot(e, i) && all;
        if (all || pu_now_ms() > deadline)
            break;
        pu_sleep_ms(10);
    }
    for (int i = from; i < to; i++) {
        if (e->pid[i] > 0) {
            kill(e->pid[i], SIGCONT);
            kill(e->pid[i], SIGKILL);
            waitpid(e->pid[i], NULL, 0);
            e->pid[i] = 0;
            e->killed[i] = true;
        }
    }
}

int tt_env_stop_clients(struct tt_env *e, int ms)
{
    int killed = 0;

    atomic_store(&e->shm->stop, 1);
    for (int i = 0; i < TT_MAX_FORKED; i++) {
        if (e->pid[i] > 0)
            kill(e->pid[i], SIGCONT);
    }
    tt_env_wait_clients(e, 0, TT_MAX_FORKED, ms);
    for (int i = 0; i < TT_MAX_FORKED; i++)
        killed += e->killed[i];
    return killed;
}

static long long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    long long v = -1;
    size_t flen = strlen(field);
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            v = atoll(line + flen + 1);
            break;
        }
    }
    fclose(f);
    return v;
}

long long tt_env_proxy_rss_kb(struct tt_env *e, int i)
{
    return e->proxy[i].pid > 0 ? status_kb(e->proxy[i].pid, "VmRSS") : -1;
}

void tt_env_watch(struct tt_env *e)
{
    for (int i = 0; i < e->nproxies; i++) {
        struct pu_proxy *p = &e->proxy[i];
        long long hwm;

        if (p->pid > 0 && !pu_proxy_alive(p)) {
            tt_report_add(e->report, "proxy-crash", "",
                          "lockproxy P%d ended on its own (wait status 0x%x); see its log %s", i,
                          p->wstatus, p->log_path);
            tt_env_proxy_start(e, i);
        }
        hwm = p->pid > 0 ? status_kb(p->pid, "VmHWM") : -1;
        if (hwm > e->rss_peak_kb[i])
            e->rss_peak_kb[i] = hwm;
    }
}
