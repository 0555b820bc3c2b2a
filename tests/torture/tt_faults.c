/* Torture suite: fault schedule and injectors (see tt_faults.h).
 *
 * How each fault is made:
 *   redis-kill         SIGKILL the lock Redis, wait `param` ms, restart it
 *                      on its port and dir (it reloads its AOF);
 *   redis-sleep        DEBUG SLEEP param/1000 on an admin connection;
 *   kill-cmd-conn      CLIENT KILL ID of one random normal connection (a
 *                      proxy's pipelined command connection);
 *   kill-pubsub-conn   CLIENT KILL TYPE pubsub (every proxy's subscriber);
 *   proxy-stop         SIGSTOP a proxy for param ms (> the watchdog lease),
 *                      SIGCONT;
 *   proxy-kill         SIGKILL a proxy, restart it on its port after param ms;
 *   client-stop        SIGSTOP a client that is waiting for a grant, for
 *                      param ms, SIGCONT (Kleppmann's pause during acquire);
 *   client-stop-lease  ask a client to stop itself (SIGSTOP) holding a lock
 *                      taken with LEASE 1000; SIGCONT param ms after its
 *                      lease ran out (pause while holding);
 *   client-reset       SIGUSR1 to a waiting client, or ask one to reset
 *                      while holding: the client closes its proxy socket
 *                      with SO_LINGER 0 (RST);
 *   partition          (--partitions) the fault relay between P0 and the lock
 *                      Redis pauses both directions for param ms (half to
 *                      twice the watchdog lease, plus up to 1 s: holds of P0
 *                      may lose their lease, P1's clients take the names),
 *                      then heals: variant 0 lets the paused bytes flow,
 *                      1 resets every relayed connection first, 2 also
 *                      refuses P0's new connections during the cut; 3
 *                      cuts in the kernel instead (iptables DROP both ways
 *                      on the relay's port: P0's unacknowledged bytes are
 *                      retransmitted at the heal; the relay's pause where
 *                      iptables cannot be used);
 *   slow-reader        a forked process that floods a proxy with requests
 *                      for 2 s without reading a byte, then resets: ECHO
 *                      of 1 KB (replies pile up), PINGs queued behind a
 *                      LOCK that waits, or LOCK.INFO (each one a script
 *                      sent upstream, so requests pile up in flight).
 * With --cluster (the lock Redis is a 6-node Redis Cluster, cluster_util):
 *   slot-migrate       move the slot of a random workload name (its keys
 *                      held and contended) to another master: IMPORTING /
 *                      MIGRATING, MIGRATE key by key under load (the
 *                      proxies see ASK and TRYAGAIN), SETSLOT NODE;
 *   cluster-failover   CLUSTER FAILOVER on the replica of a random
 *                      workload name's master (graceful: nothing lost);
 *   master-kill        kill -9 a random workload name's master, wait for
 *                      its replica to take over, then start the killed
 *                      node again: it rejoins as a replica. Replication is
 *                      asynchronous: a grant the replica had not received
 *                      is lost (see tt_check.c, failover-lost).
 * With --sentinel (1 master, 2 replicas, 3 sentinels, sentinel_util):
 *   sentinel-failover  SENTINEL FAILOVER; healed when every sentinel names
 *                      the new master and it says ROLE master;
 *   sentinel-kill      kill -9 the master; healed when the sentinels
 *                      promoted a replica (down-after-milliseconds 1000
 *                      plus the election); the killed node is started
 *                      again (empty) and the sentinels make it a replica. */
#include "tt_faults.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/pool.h"

#define SLOW_READER_MS    2000
#define SLOW_READER_CAP   (256ll << 20) /* bytes sent at most */
#define FIND_CLIENT_MS    4000          /* looking for a client in the wanted state */
#define STOP_HOLD_WAIT_MS 12000         /* for a client to stop itself holding */

/* ---- schedule -------------------------------------------------------------------- */

static void shuffle(struct tt_rng *rng, int *a, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = tt_rng_range(rng, 0, i), t = a[i];

        a[i] = a[j];
        a[j] = t;
    }
}

static int param_for(const struct tt_config *cfg, struct tt_rng *rng, enum tt_fault_kind k, int nth)
{
    switch (k) {
    case TT_F_REDIS_KILL:
        return tt_rng_range(rng, 200, 1500);
    case TT_F_REDIS_SLEEP: /* the first one outlasts the upstream timeout */
        return nth == 0 ? cfg->upstream_timeout_ms + 500 : tt_rng_range(rng, 300, 4000);
    case TT_F_PROXY_STOP:
        return cfg->watchdog_ms + tt_rng_range(rng, 500, 1500);
    case TT_F_PROXY_KILL:
        return tt_rng_range(rng, 200, 1000);
    case TT_F_CLIENT_STOP:
        return tt_rng_range(rng, 500, 2500);
    case TT_F_CLIENT_STOP_LEASE:
        return tt_rng_range(rng, 300, 1000);
    case TT_F_PARTITION:
        return tt_rng_range(rng, cfg->watchdog_ms / 2, 2 * cfg->watchdog_ms + 1000);
    default:
        return 0;
    }
}

int tt_faults_plan(const struct tt_config *cfg, struct tt_rng *rng, long long phase_ms,
                   struct tt_planned *out, int max)
{
    int kinds[TT_F_COUNT + 12], nk = 0, n = 0, nth[TT_F_COUNT] = {0};
    /* The short run ends with a quiet stretch, where the liveness checks
     * (tt_live.c) can judge idle locks without a fault near. */
    long long warm = 3000, tail = cfg->long_run ? 6000 : 12000, t = warm;

    for (int k = 0; k < TT_F_COUNT; k++) {
        if (cfg->faults & (1u << k))
            kinds[nk++] = k;
    }
    if (nk == 0 || phase_ms <= warm + tail)
        return 0;
    if (cfg->faults & (1u << TT_F_CLIENT_RESET))
        kinds[nk++] = TT_F_CLIENT_RESET; /* both variants */
    for (int k = TT_F_SLOT_MIGRATE; k <= TT_F_SENTINEL_KILL; k++) {
        if (cfg->faults & (1u << k))
            kinds[nk++] = k; /* twice each: the faults move state, a second run meets that */
    }
    if (cfg->faults & (1u << TT_F_SLOW_READER)) {
        kinds[nk++] = TT_F_SLOW_READER; /* all three variants */
        kinds[nk++] = TT_F_SLOW_READER;
    }
    if (cfg->faults & (1u << TT_F_PARTITION)) {
        for (int v = 1; v < TT_PARTITION_VARIANTS; v++)
            kinds[nk++] = TT_F_PARTITION; /* every variant */
    }
    do {
        shuffle(rng, kinds, nk);
        for (int i = 0; i < nk && n < max; i++) {
            struct tt_planned *p = &out[n++];

            p->kind = (enum tt_fault_kind)kinds[i];
            p->param = param_for(cfg, rng, p->kind, nth[p->kind]);
            p->target = nth[p->kind]++;
            if (cfg->long_run) {
                p->at_ms = t;
                t += tt_rng_range(rng, 4000, 16000);
            } else {
                p->at_ms = warm + (phase_ms - warm - tail) * i / nk;
            }
        }
    } while (cfg->long_run && t < phase_ms - tail && n < max);
    return n;
}

/* ---- helpers -------------------------------------------------------------------- */

static void note(struct tt_fault *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct tt_fault *f, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(f->note, sizeof(f->note), fmt, ap);
    va_end(ap);
}

/* A random workload client in state st (polls up to ms); -1 if none. */
static int find_client(struct tt_env *e, struct tt_rng *rng, int st, int ms)
{
    long long deadline = pu_now_ms() + ms;
    int n = e->cfg->clients;

    do {
        int start = tt_rng_range(rng, 0, n - 1);

        for (int i = 0; i < n; i++) {
            int c = (start + i) % n;

            if (e->pid[c] > 0 && atomic_load(&e->shm->slot[c].state) == st)
                return c;
        }
        pu_sleep_ms(2);
    } while (pu_now_ms() < deadline);
    return -1;
}

/* ---- cluster faults ----------------------------------------------------------------- */

/* The workload names whose slot is slot (slot >= 0), or owned by master m. */
static unsigned names_on(struct tt_env *e, int slot, int m)
{
    unsigned mask = 0;

    for (int i = 0; i < TT_WORKLOAD_NAMES; i++) {
        const char *n = tt_workload_names[i];

        if ((slot >= 0 && pool_slot(n, strlen(n)) == slot) || (slot < 0 && tt_env_owner(e, n) == m))
            mask |= 1u << i;
    }
    return mask;
}

static void slot_migrate(struct tt_env *e, struct tt_rng *rng, struct tt_fault *f)
{
    const char *name = tt_workload_names[tt_rng_range(rng, 0, TT_WORKLOAD_NAMES - 1)];
    int slot = pool_slot(name, strlen(name)), from = tt_env_owner(e, name);
    int to = rcluster_other_master(e->cluster, from);

    if (from < 0 || to < 0)
        return note(f, "no master for %s", name);
    f->names = names_on(e, slot, -1);
    f->start_us = tt_now_us();
    rcluster_migrate(e->cluster, slot, to);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "slot %d (%s) from node %d to node %d", slot, name, from, to);
}

static void cluster_failover(struct tt_env *e, struct tt_rng *rng, struct tt_fault *f)
{
    const char *name = tt_workload_names[tt_rng_range(rng, 0, TT_WORKLOAD_NAMES - 1)];
    int m = tt_env_owner(e, name), r = m >= 0 ? rcluster_replica_of(e->cluster, m) : -1;

    if (r < 0)
        return note(f, "no replica for the master of %s", name);
    f->names = names_on(e, -1, m);
    f->start_us = tt_now_us();
    rcluster_failover(e->cluster, r);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "node %d took over from node %d (master of %s)", r, m, name);
}

static void master_kill(struct tt_env *e, struct tt_rng *rng, struct tt_fault *f)
{
    const char *name = tt_workload_names[tt_rng_range(rng, 0, TT_WORKLOAD_NAMES - 1)];
    int m = tt_env_owner(e, name), r = m >= 0 ? rcluster_replica_of(e->cluster, m) : -1;
    long long up_us;

    if (r < 0)
        return note(f, "no replica for the master of %s", name);
    f->names = names_on(e, -1, m);
    f->start_us = tt_now_us();
    rcluster_kill_master(e->cluster, m);
    f->end_us = tt_now_us(); /* the replica serves the slots */
    rcluster_restart_replica(e->cluster, m);
    up_us = tt_now_us();
    f->triggered = true;
    note(f,
         "node %d (master of %s) killed, node %d took over in %.2f s; back as a replica "
         "in %.2f s",
         m, name, r, (double)(f->end_us - f->start_us) / 1e6, (double)(up_us - f->end_us) / 1e6);
}

/* ---- Sentinel faults ----------------------------------------------------------------- */

/* Every workload name lives on the one master. */
static unsigned all_names(void)
{
    return (1u << TT_WORKLOAD_NAMES) - 1;
}

/* Waits (bounded) until every running proxy uses node nm as its master
 * and has a connection to it ready (INFO names the new master as soon as
 * the switch starts): the fault is healed for clients then. */
static void proxies_follow(struct tt_env *e, int nm)
{
    char want[32], v[64];
    long long dl = pu_now_ms() + 15000;

    snprintf(want, sizeof(want), "127.0.0.1:%d", e->sentinel->node[nm].port);
    for (int i = 0; i < e->nproxies; i++) {
        while (pu_now_ms() < dl && e->proxy[i].pid > 0) {
            redisContext *c = pu_try_connect(e->proxy[i].port);
            bool ok = c && pu_info_str(c, "sentinel_master", v, sizeof(v)) &&
                      strcmp(v, want) == 0 && pu_info_str(c, "upstream_state", v, sizeof(v)) &&
                      strcmp(v, "up") == 0;

            if (c)
                redisFree(c);
            if (ok)
                break;
            pu_sleep_ms(10);
        }
    }
}

/* Healed when every proxy follows the new master; the note says when the
 * sentinels agreed and when the proxies followed. */
static void sentinel_failover(struct tt_env *e, struct tt_fault *f)
{
    int m = rsentinel_wait_master(e->sentinel, -1), nm;
    long long agreed;

    f->names = all_names();
    f->start_us = tt_now_us();
    /* Sentinel may refuse or abort a failover (a replica it judges not
     * good enough yet, right after another failover): asked again. */
    for (int i = 0; i < 4 && (nm = rsentinel_try_failover(e->sentinel, 8000)) < 0; i++)
        ;
    if (nm < 0) {
        f->end_us = tt_now_us();
        return note(f, "the sentinels did not fail over from node %d (4 tries)", m);
    }
    agreed = tt_now_us();
    proxies_follow(e, nm);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "node %d took over from node %d: sentinels agreed in %.2f s, proxies in %.2f s", nm, m,
         (double)(agreed - f->start_us) / 1e6, (double)(f->end_us - f->start_us) / 1e6);
}

/* The restarted node is a replica of the master, linked (bounded). */
static bool rejoined(struct tt_env *e, int i)
{
    redisReply *r = rsentinel_cmd(e->sentinel, i, "INFO replication");
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");

    if (r)
        freeReplyObject(r);
    return ok;
}

static void sentinel_kill(struct tt_env *e, struct tt_fault *f)
{
    int m = rsentinel_wait_master(e->sentinel, -1), nm;
    long long dl;

    f->names = all_names();
    f->start_us = tt_now_us();
    nm = rsentinel_kill_master(e->sentinel);
    proxies_follow(e, nm);
    f->end_us = tt_now_us();
    f->triggered = true;
    rsentinel_start_node(e->sentinel, m);
    dl = pu_now_ms() + 20000;
    while (!rejoined(e, m) && pu_now_ms() < dl)
        pu_sleep_ms(50);
    note(f, "node %d killed, node %d serves the proxies after %.2f s; node %d %s in %.2f s", m, nm,
         (double)(f->end_us - f->start_us) / 1e6, m,
         rejoined(e, m) ? "back as a replica" : "NOT back as a replica",
         (double)(tt_now_us() - f->end_us) / 1e6);
}

/* ---- Redis faults ------------------------------------------------------------------ */

static void redis_kill(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    f->start_us = tt_now_us();
    pu_redis_kill(&e->lock);
    tt_env_admin_drop(e);
    pu_sleep_ms(pl->param);
    pu_redis_restart(&e->lock);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "down %d ms, restarted from its AOF", pl->param);
}

static void redis_sleep(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    redisContext *c = tt_env_admin(e);
    redisReply *r = NULL;
    int done = 0;

    if (!c)
        return note(f, "no admin connection");
    pu_set_timeout(c, pl->param + 15000);
    redisAppendCommand(c, "DEBUG SLEEP %.3f", pl->param / 1000.0);
    while (!done && redisBufferWrite(c, &done) == REDIS_OK)
        ;
    f->start_us = tt_now_us();
    if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type == REDIS_REPLY_ERROR) {
        note(f, "DEBUG SLEEP failed: %s", r ? r->str : c->errstr);
        tt_env_admin_drop(e);
    } else {
        f->triggered = true;
        note(f, "DEBUG SLEEP %.3f", pl->param / 1000.0);
    }
    f->end_us = tt_now_us();
    if (r)
        freeReplyObject(r);
}

/* Ids of the normal (non-pub/sub) connections other than ours. */
static int command_conns(redisContext *c, long long *ids, int max)
{
    redisReply *me = redisCommand(c, "CLIENT ID"), *r;
    long long my = me && me->type == REDIS_REPLY_INTEGER ? me->integer : -1;
    int n = 0;

    if (me)
        freeReplyObject(me);
    r = redisCommand(c, "CLIENT LIST TYPE normal");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r)
            freeReplyObject(r);
        return 0;
    }
    for (const char *p = r->str; p && *p && n < max;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        long long id;

        if (sscanf(p, "id=%lld", &id) == 1 && id != my)
            ids[n++] = id;
    }
    freeReplyObject(r);
    return n;
}

static void kill_cmd_conn(struct tt_env *e, struct tt_rng *rng, struct tt_fault *f)
{
    redisContext *c = tt_env_admin(e);
    long long ids[64], id;
    redisReply *r;
    int n;

    f->start_us = f->end_us = tt_now_us();
    if (!c)
        return note(f, "no admin connection");
    n = command_conns(c, ids, 64);
    if (n == 0)
        return note(f, "no proxy command connection found");
    id = ids[tt_rng_range(rng, 0, n - 1)];
    r = redisCommand(c, "CLIENT KILL ID %lld", id);
    f->triggered = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    note(f, "CLIENT KILL ID %lld (one of %d command connections)", id, n);
    if (r)
        freeReplyObject(r);
}

/* Right after a Redis restart the proxies may not have resubscribed yet:
 * tried again for up to FIND_CLIENT_MS until a subscriber is there. */
static void kill_pubsub_conn(struct tt_env *e, struct tt_fault *f)
{
    long long deadline = pu_now_ms() + FIND_CLIENT_MS, killed = -1;
    redisContext *c;
    redisReply *r;

    f->start_us = f->end_us = tt_now_us();
    do {
        c = tt_env_admin(e);
        if (!c)
            return note(f, "no admin connection");
        r = redisCommand(c, "CLIENT KILL TYPE pubsub");
        killed = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        if (r)
            freeReplyObject(r);
        else
            tt_env_admin_drop(e);
        if (killed > 0)
            break;
        pu_sleep_ms(50);
    } while (pu_now_ms() < deadline);
    f->start_us = f->end_us = tt_now_us();
    f->triggered = killed > 0;
    note(f, "CLIENT KILL TYPE pubsub: %lld killed", killed);
}

/* ---- proxy faults -------------------------------------------------------------------- */

static void proxy_stop(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    struct pu_proxy *p = &e->proxy[f->target];

    if (p->pid <= 0)
        return note(f, "P%d is not running", f->target);
    kill(p->pid, SIGSTOP);
    f->start_us = tt_now_us();
    pu_sleep_ms(pl->param);
    kill(p->pid, SIGCONT);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "P%d stopped %d ms", f->target, pl->param);
}

static void proxy_kill(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    f->start_us = tt_now_us();
    tt_env_proxy_kill(e, f->target);
    pu_sleep_ms(pl->param);
    tt_env_proxy_start(e, f->target);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "P%d killed, restarted after %d ms", f->target, pl->param);
}

/* ---- client faults -------------------------------------------------------------------- */

static void client_stop(struct tt_env *e, const struct tt_planned *pl, struct tt_rng *rng,
                        struct tt_fault *f)
{
    int c = find_client(e, rng, TT_ST_WAITING, FIND_CLIENT_MS);

    if (c < 0)
        return note(f, "no waiting client found");
    kill(e->pid[c], SIGSTOP);
    f->target = e->ccfg[c].id;
    f->start_us = tt_now_us();
    pu_sleep_ms(pl->param);
    kill(e->pid[c], SIGCONT);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "client %d stopped %d ms while waiting", f->target, pl->param);
}

#define STOP_HOLD_ASKED 3 /* clients asked at once */

/* SIGCONT to pid once it is stopped (state T in /proc), within 1 s: a
 * client marks itself stopped just before it raises SIGSTOP, and a
 * SIGCONT sent in between would be lost. */
static void resume_when_stopped(pid_t pid)
{
    char path[64], buf[256], *p;
    long long deadline = pu_now_ms() + 1000;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    while (pu_now_ms() < deadline) {
        FILE *fp = fopen(path, "r");
        size_t n = fp ? fread(buf, 1, sizeof(buf) - 1, fp) : 0;

        if (fp)
            fclose(fp);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        if (!p || (p[1] == ' ' && (p[2] == 'T' || p[2] == 't')))
            break;
        pu_sleep_ms(1);
    }
    kill(pid, SIGCONT);
}

/* Asks STOP_HOLD_ASKED clients at once to stop themselves holding a LEASE'd
 * lock (one may wait long for a contended name, or be busy in a long
 * hold): the first that stops is the fault's, any other that stopped
 * meanwhile is resumed at once (a pause of a few ms, well within its
 * lease). Returns that client, or -1 when none stopped in time. */
static int ask_stop_hold(struct tt_env *e, struct tt_rng *rng)
{
    long long deadline = pu_now_ms() + STOP_HOLD_WAIT_MS;
    int asked[STOP_HOLD_ASKED], n = 0, got = -1;

    while (n < STOP_HOLD_ASKED && n < e->cfg->clients) {
        int c = tt_rng_range(rng, 0, e->cfg->clients - 1), k;

        for (k = 0; k < n && asked[k] != c; k++)
            ;
        if (k == n)
            asked[n++] = c;
    }
    for (int k = 0; k < n; k++)
        atomic_store(&e->shm->slot[asked[k]].want, TT_WANT_STOP_HOLD);
    while (got < 0 && pu_now_ms() < deadline) {
        for (int k = 0; k < n && got < 0; k++)
            if (atomic_load(&e->shm->slot[asked[k]].self_stopped))
                got = asked[k];
        if (got < 0)
            pu_sleep_ms(2);
    }
    for (int k = 0; k < n; k++)
        atomic_store(&e->shm->slot[asked[k]].want, TT_WANT_NONE);
    pu_sleep_ms(200); /* one may have been about to stop */
    for (int k = 0; k < n; k++) {
        if (!atomic_load(&e->shm->slot[asked[k]].self_stopped))
            continue;
        if (got < 0)
            got = asked[k];
        else if (asked[k] != got)
            resume_when_stopped(e->pid[asked[k]]);
    }
    return got;
}

static void client_stop_lease(struct tt_env *e, const struct tt_planned *pl, struct tt_rng *rng,
                              struct tt_fault *f)
{
    int c = ask_stop_hold(e, rng);
    struct tt_slot *s;
    long long resume;

    if (c < 0)
        return note(f, "no client took a LEASE'd lock in time (%d asked)", STOP_HOLD_ASKED);
    s = &e->shm->slot[c];
    f->target = e->ccfg[c].id;
    f->start_us = atomic_load(&s->stopped_us);
    resume = f->start_us + ((long long)atomic_load(&s->stop_lease_ms) + pl->param) * 1000;
    tt_sleep_us(resume - tt_now_us());
    kill(e->pid[c], SIGCONT);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "client %d stopped holding a LEASE %d lock, resumed %d ms past the lease", f->target,
         atomic_load(&s->stop_lease_ms), pl->param);
}

static void client_reset(struct tt_env *e, const struct tt_planned *pl, struct tt_rng *rng,
                         struct tt_fault *f)
{
    long long deadline = pu_now_ms() + FIND_CLIENT_MS;
    int c;

    if (pl->target % 2 == 0) {
        c = find_client(e, rng, TT_ST_WAITING, FIND_CLIENT_MS);
        if (c < 0)
            return note(f, "no waiting client found");
        kill(e->pid[c], SIGUSR1);
        note(f, "client %d reset its connection while waiting", e->ccfg[c].id);
        f->triggered = true;
    } else {
        c = tt_rng_range(rng, 0, e->cfg->clients - 1);
        atomic_store(&e->shm->slot[c].want, TT_WANT_RESET_HOLD);
        while (atomic_load(&e->shm->slot[c].want) != TT_WANT_NONE && pu_now_ms() < deadline)
            pu_sleep_ms(2);
        f->triggered = atomic_exchange(&e->shm->slot[c].want, TT_WANT_NONE) == TT_WANT_NONE;
        note(f, "client %d %s its connection while holding", e->ccfg[c].id,
             f->triggered ? "reset" : "did not reset");
    }
    f->target = e->ccfg[c].id;
    f->start_us = f->end_us = tt_now_us();
}

/* ---- partition ---------------------------------------------------------------------- */

/* iptables DROP, both ways, of loopback TCP on port (the relay's: P0's
 * side of the cut), added (on) or deleted. A cut in the kernel: P0's
 * unacknowledged bytes stay in its socket and are retransmitted at the
 * heal, as over a real network. False when iptables cannot be used here
 * (not installed, not root): nothing is left in place then. */
static bool kernel_cut(int port, bool on)
{
    static const char *const dir[2] = {"--dport", "--sport"};
    char cmd[200];
    int rc, i;

    for (i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd),
                 "iptables -w %s OUTPUT -o lo -p tcp %s %d -j DROP >/dev/null 2>&1",
                 on ? "-I" : "-D", dir[i], port);
        rc = system(cmd);
        if (on && (rc == -1 || WEXITSTATUS(rc) != 0)) {
            if (i == 1)
                kernel_cut(port, false);
            return false;
        }
    }
    return true;
}

static void partition(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    static const char *const heal[TT_PARTITION_VARIANTS] = {
        "healed", "healed with a reset", "new connections refused, healed",
        "in the kernel (iptables DROP), healed"};
    int variant = pl->target % TT_PARTITION_VARIANTS;
    bool kernel = false;

    f->target = 0;
    if (!e->relay)
        return note(f, "no relay (P0 talks to Redis directly)");
    if (variant == 3)
        kernel = kernel_cut(relay_port(e->relay), true);
    if (!kernel)
        relay_partition(e->relay, variant == 2);
    f->start_us = tt_now_us();
    pu_sleep_ms(pl->param);
    if (kernel)
        kernel_cut(relay_port(e->relay), false);
    else
        relay_heal(e->relay, variant == 1);
    f->end_us = tt_now_us();
    f->triggered = true;
    note(f, "P0 cut from Redis %d ms, %s", pl->param, heal[variant == 3 && !kernel ? 0 : variant]);
}

/* ---- slow reader -------------------------------------------------------------------- */

static int connect_small_rcvbuf(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void reset_close(int fd)
{
    struct linger lg = {1, 0};

    if (fd < 0)
        return;
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* The barrier variant: a second connection holds tt:slow:0, so the flood
 * queues behind a LOCK that waits. Returns that connection. */
static int hold_barrier(int port, int fd)
{
    static const char lock[] = "*2\r\n$4\r\nLOCK\r\n$9\r\ntt:slow:0\r\n";
    static const char wait[] =
        "*4\r\n$4\r\nLOCK\r\n$9\r\ntt:slow:0\r\n$4\r\nWAIT\r\n$5\r\n20000\r\n";
    int holder = connect_small_rcvbuf(port);
    char buf[64];

    if (holder < 0 || write(holder, lock, sizeof(lock) - 1) < 0 || read(holder, buf, 5) <= 0 ||
        write(fd, wait, sizeof(wait) - 1) < 0)
        _exit(4);
    return holder;
}

static const char *const flood_names[] = {
    "ECHO 1KB",
    "PING-behind-a-waiting-LOCK",
    "LOCK.INFO",
};

static size_t fill_flood(char *buf, size_t cap, int variant)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    static const char info[] = "*2\r\n$9\r\nLOCK.INFO\r\n$9\r\ntt:slow:1\r\n";
    char echo[1100];
    size_t n = 0, len;
    const char *unit;

    if (variant == 0) {
        len = (size_t)snprintf(echo, sizeof(echo), "*2\r\n$4\r\nECHO\r\n$1000\r\n");
        memset(echo + len, 'x', 1000);
        memcpy(echo + len + 1000, "\r\n", 2);
        len += 1002;
        unit = echo;
    } else if (variant == 1) {
        len = sizeof(ping) - 1;
        unit = ping;
    } else {
        len = sizeof(info) - 1;
        unit = info;
    }
    while (n + len <= cap) {
        memcpy(buf + n, unit, len);
        n += len;
    }
    return n;
}

static void slow_reader_main(int port, int variant, _Atomic long long *sent_out)
{
    static char buf[64 * 1024];
    long long deadline = pu_now_ms() + SLOW_READER_MS, sent = 0;
    int fd, holder = -1;
    size_t len;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    fd = connect_small_rcvbuf(port);
    if (fd < 0)
        _exit(4);
    if (variant == 1)
        holder = hold_barrier(port, fd);
    len = fill_flood(buf, sizeof(buf), variant);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (pu_now_ms() < deadline && sent < SLOW_READER_CAP) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        struct pollfd p = {.fd = fd, .events = POLLOUT};

        if (w > 0) {
            sent += w;
            atomic_store(sent_out, sent);
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            break; /* the proxy closed on us: fine */
        } else {
            poll(&p, 1, 20);
        }
    }
    reset_close(fd);
    reset_close(holder);
    _exit(0);
}

static void slow_reader(struct tt_env *e, const struct tt_planned *pl, struct tt_fault *f)
{
    _Atomic long long *sent = &e->shm->slot[TT_SLOT_AUX].ops;
    int variant = pl->target % 3, st = 0;
    long long peak = 0, deadline;
    pid_t pid;

    f->target = pl->target % e->nproxies;
    atomic_store(sent, 0);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        TEST_FAIL("fork: %s", strerror(errno));
    if (pid == 0)
        slow_reader_main(e->proxy[f->target].port, variant, sent);
    f->start_us = tt_now_us();
    deadline = pu_now_ms() + SLOW_READER_MS + 10000;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        long long rss = tt_env_proxy_rss_kb(e, f->target);

        if (rss > peak)
            peak = rss;
        if (pu_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        pu_sleep_ms(50);
    }
    f->end_us = tt_now_us();
    f->param = (int)(atomic_load(sent) >> 10);
    f->triggered = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    note(f, "P%d: %s flood, %lld KB sent unread, proxy RSS peak %lld KB", f->target,
         flood_names[variant], atomic_load(sent) >> 10, peak);
}

/* ---- entry -------------------------------------------------------------------------------- */

void tt_fault_inject(struct tt_env *e, const struct tt_planned *pl, struct tt_rng *rng,
                     struct tt_fault *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = pl->kind;
    out->param = pl->param;
    out->target = pl->target % e->nproxies;
    switch (pl->kind) {
    case TT_F_REDIS_KILL:
        redis_kill(e, pl, out);
        break;
    case TT_F_REDIS_SLEEP:
        redis_sleep(e, pl, out);
        break;
    case TT_F_KILL_CMD_CONN:
        kill_cmd_conn(e, rng, out);
        break;
    case TT_F_KILL_PUBSUB_CONN:
        kill_pubsub_conn(e, out);
        break;
    case TT_F_PROXY_STOP:
        proxy_stop(e, pl, out);
        break;
    case TT_F_PROXY_KILL:
        proxy_kill(e, pl, out);
        break;
    case TT_F_CLIENT_STOP:
        client_stop(e, pl, rng, out);
        break;
    case TT_F_CLIENT_STOP_LEASE:
        client_stop_lease(e, pl, rng, out);
        break;
    case TT_F_CLIENT_RESET:
        client_reset(e, pl, rng, out);
        break;
    case TT_F_SLOW_READER:
        slow_reader(e, pl, out);
        break;
    case TT_F_PARTITION:
        partition(e, pl, out);
        break;
    case TT_F_SLOT_MIGRATE:
        slot_migrate(e, rng, out);
        break;
    case TT_F_CLUSTER_FAILOVER:
        cluster_failover(e, rng, out);
        break;
    case TT_F_MASTER_KILL:
        master_kill(e, rng, out);
        break;
    case TT_F_SENTINEL_FAILOVER:
        sentinel_failover(e, out);
        break;
    case TT_F_SENTINEL_KILL:
        sentinel_kill(e, out);
        break;
    default:
        break;
    }
    if (!out->triggered && out->start_us == 0)
        out->start_us = out->end_us = tt_now_us();
}
