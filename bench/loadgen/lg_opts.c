/* Option parsing and the --help text of lockproxy-bench. Every value is
 * checked here, so the rest of the program can trust struct lg_opts. */
#include "bench/loadgen/lg_opts.h"

#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LG_MAX_CLIENTS 100000u
#define LG_MAX_PIPE    1024u
#define LG_MAX_IDLE    1000000u

static const char help_text[] =
    "Usage: lockproxy-bench [options] [WORKLOAD]\n"
    "\n"
    "Closed-loop load generator for lockproxy. Each of --clients connections\n"
    "repeatedly acquires a lock, holds it for --hold-us, and releases it, with\n"
    "one request in flight. The same workload runs against every target in\n"
    "--targets, one after the other, and the results are compared.\n"
    "\n"
    "Workloads (positional, or --workload):\n"
    "  uncontended   each client locks its own key (default)\n"
    "  contended     clients spread over --keys hot keys (client i -> key i % K)\n"
    "  reentrant     acquire twice, release twice, on the client's own key\n"
    "                (or on --keys shared keys when --keys is given)\n"
    "  rwlock        read-mostly read-write lock: clients spread over --keys keys\n"
    "                (client i -> key i % K); each cycle takes the write lock with\n"
    "                probability --write-pct, else the read lock (a per-client\n"
    "                PRNG with a fixed seed, so every run and target makes the\n"
    "                same choices). Readers share a key; a writer excludes all\n"
    "  semaphore     clients spread over --keys semaphores of --permits permits\n"
    "                each; each cycle takes one permit, holds it, returns it.\n"
    "                Before each target the bench deletes every semaphore and sets\n"
    "                it to --permits (proxy: SEM.TRYSETPERMITS; direct: Redisson's\n"
    "                trySetPermits script), and deletes them at the end\n"
    "\n"
    "Targets (--targets, comma-separated, run in the given order):\n"
    "  proxy          LOCK key / UNLOCK key against --proxy (TRYLOCK/UNLOCK with\n"
    "                 --pipeline); rwlock: RLOCK/RUNLOCK or WLOCK/WUNLOCK key;\n"
    "                 semaphore: SEM.ACQUIRE key (blocks) / SEM.RELEASE key\n"
    "  direct         Redisson's RLock protocol straight against --redis: SCRIPT\n"
    "                 LOAD once; EVALSHA acquire (owner <uuid>:<conn id>, lease\n"
    "                 --lease-ms); when it returns the holder's PTTL, SUBSCRIBE\n"
    "                 redisson_lock__channel:{key}, retry once subscribed, then\n"
    "                 retry on every message or when the PTTL runs out;\n"
    "                 UNSUBSCRIBE (without waiting) once acquired; EVALSHA unlock\n"
    "                 (DEL + PUBLISH 0). Each bench connection models one client\n"
    "                 process (one JVM): it has its own command connection and its\n"
    "                 own pub/sub connection, so every waiter of a key subscribes\n"
    "                 and every release wakes all of them, as with N services.\n"
    "                 rwlock: Redisson's RReadWriteLock scripts (read owner\n"
    "                 <uuid>:<id>, write owner <uuid>:<id>:write, read holds'\n"
    "                 {key}:<uuid>:<id>:rwlock_timeout:<n> keys), waiting as above\n"
    "                 on redisson_rwlock:{key}. A \"0\" message (last read unlock)\n"
    "                 wakes one waiter; \"1\" (write unlock) wakes every waiter\n"
    "                 then waiting, as Redisson's LockPubSub: a waiter whose retry\n"
    "                 is in flight misses it and waits out its PTTL (up to\n"
    "                 --lease-ms) unless another message comes. The report counts\n"
    "                 these as latch timeouts; the drain allows for them.\n"
    "                 semaphore: Redisson's RSemaphore tryAcquire (GET, DECRBY 1\n"
    "                 if enough: replies 1 or 0) and release (INCRBY 1, PUBLISH\n"
    "                 the count on redisson_sc:{key}); on 0, subscribe, retry once\n"
    "                 subscribed, then retry on messages: a message N gives\n"
    "                 min(waiters on the subscription, N) wake-ups, as Redisson's\n"
    "                 SemaphorePubSub. Redisson waits for a message forever; the\n"
    "                 bench also re-checks after 1 s without one (latch timeouts\n"
    "                 in the report), so a lost message costs a second, never a\n"
    "                 hung client. Both: no unlock latch (as for RLock), no WAIT\n"
    "                 (single Redis).\n"
    "  direct-shared  the same, but subscriptions are shared per key by all bench\n"
    "                 connections (one pub/sub connection, reference-counted\n"
    "                 entries, one wake-up permit per message: Redisson's\n"
    "                 behaviour inside one JVM; rwlock \"1\" and semaphore\n"
    "                 messages as above). The most favourable baseline.\n"
    "\n"
    "Options:\n"
    "  --clients N        connections, one client each (default 1000)\n"
    "  --keys K           hot keys for contended, rwlock and semaphore (default 10)\n"
    "  --write-pct N      rwlock: percentage of cycles taking the write lock, 0-100\n"
    "                     (default 10)\n"
    "  --permits P        semaphore: permits per semaphore (default 10)\n"
    "  --hold-us US       hold each lock US microseconds (default 0); holds are\n"
    "                     at least US, rounded up to the 1 ms timer tick when the\n"
    "                     loop is otherwise idle\n"
    "  --duration S       measured seconds per target (default 10; decimals ok)\n"
    "  --warmup S         unmeasured seconds before that (default 2)\n"
    "  --targets LIST     proxy,direct,direct-shared (default proxy,direct)\n"
    "  --proxy HOST:PORT  lockproxy (default 127.0.0.1:7379); unix:PATH for a Unix\n"
    "                     domain socket (lockproxy --listen unix:///PATH)\n"
    "  --redis HOST:PORT  Redis for direct targets and for the Redis statistics\n"
    "                     of every target (default 127.0.0.1:6379); or unix:PATH\n"
    "  --tls-ca-cert-file FILE\n"
    "                     the proxy target's clients speak TLS to --proxy (a\n"
    "                     lockproxy tls:// listener with --tls-auth-clients no),\n"
    "                     verifying its certificate with FILE and its host\n"
    "  --proxy-pid PID    lockproxy's pid, to report its CPU time (/proc/PID/stat);\n"
    "                     without it proxy CPU is n/a\n"
    "  --direct-shared-sub  make 'direct' behave as 'direct-shared'\n"
    "  --pipeline N       Redis-bound ceiling test (uncontended only): each\n"
    "                     connection sends N TRYLOCK/UNLOCK pairs on N keys of its\n"
    "                     own per round trip (direct: N acquire/unlock EVALSHA pairs)\n"
    "  --lease-ms MS      lease for the direct lock scripts (default 30000,\n"
    "                     Redisson's lockWatchdogTimeout; semaphores have none)\n"
    "  --io MODE          auto, epoll or uring: the bench's own event loop\n"
    "  --prefix P         key prefix (default lgbench:<pid>); keys are\n"
    "                     P:<target>:<n>\n"
    "  --json FILE        write every figure as JSON\n"
    "  --svg FILE         write a chart (throughput bars, latency percentiles)\n"
    "  --kv FILE          write every figure as '<section> <key> <value>' lines, one\n"
    "                     per figure (section: the target, or 'idle'), for scripts\n"
    "  --help             this text\n"
    "\n"
    "Idle-memory mode (instead of a workload):\n"
    "  --idle N           open N connections to --proxy, one after the other, send\n"
    "                     one PING on each and read the reply; wait --idle-settle;\n"
    "                     report the proxy's VmRSS (/proc/PID/status of --proxy-pid,\n"
    "                     required) before, with the N connections open, and after\n"
    "                     closing them, and the RSS added per connection. Socket\n"
    "                     buffers are kernel memory, not RSS: the system-wide TCP\n"
    "                     memory of /proc/net/sockstat is shown next to it\n"
    "  --idle-settle S    seconds to wait before each RSS reading (default 1)\n"
    "\n"
    "Measured per target, over --duration after --warmup:\n"
    "  ops/s              completed acquire+release pairs per second (a reentrant\n"
    "                     cycle counts as two); rwlock also splits them into reads\n"
    "                     and writes\n"
    "  latency            acquisition latency, request sent to lock granted,\n"
    "                     including waiting for other holders; p50/p90/p99/p99.9/max\n"
    "                     from log-linear buckets (< 1% error)\n"
    "  Redis cmds/acq     commands clients sent to Redis per acquisition, from the\n"
    "                     INFO commandstats delta, counting top-level commands only\n"
    "                     (EVALSHA, SUBSCRIBE, UNSUBSCRIBE, ...). The commands that\n"
    "                     scripts run (HEXISTS, HINCRBY, PEXPIRE, PUBLISH, HSET, GET,\n"
    "                     SET, INCRBY, ...) are\n"
    "                     reported separately as 'calls incl. scripts'. Counts all\n"
    "                     clients of that Redis, so keep it otherwise idle.\n"
    "  Redis scripts/s    EVALSHA + EVAL calls per second (INFO commandstats)\n"
    "  Redis CPU          INFO cpu used_cpu_sys + used_cpu_user delta\n"
    "  proxy CPU          utime + stime delta of --proxy-pid (proxy target only)\n"
    "  bench CPU          this process's own CPU time\n"
    "  other CPU          the machine's busy CPU time (/proc/stat) minus Redis, the\n"
    "                     proxy and the bench: what other processes took. Every\n"
    "                     figure here is CPU-bound on a small machine, so distrust\n"
    "                     a run where this is not near 0\n"
    "  fairness           grants per client in the measured phase: min, max,\n"
    "                     Jain's index (1 = equal) and starved clients; an\n"
    "                     unfair lock can show low percentiles because the\n"
    "                     clients that barge in produce most of the samples\n"
    "  mutual exclusion   every key has an in-process holder counter that must go\n"
    "                     0 -> 1 when a grant arrives and is reset just before the\n"
    "                     release is sent; any other transition is a violation.\n"
    "                     rwlock: a write grant needs no writer and no reader, a\n"
    "                     read grant no writer; semaphore: a grant needs fewer than\n"
    "                     --permits holders\n"
    "\n"
    "Output: a progress line per second, a table per target, the proxy/direct\n"
    "ratios, and optionally --json and --svg (open the SVG in a browser).\n"
    "Ctrl-C stops new cycles and lets the current ones finish, so no lock is\n"
    "left behind; a second Ctrl-C closes the connections at once.\n"
    "Exit status: 0 if every target ran without violations or stuck clients\n"
    "(idle mode: every connection answered and the RSS could be read), 1\n"
    "otherwise, 2 on bad options.\n";

const char *lg_workload_name(enum lg_workload w)
{
    static const char *const names[] = {"uncontended", "contended", "reentrant", "rwlock",
                                        "semaphore"};

    return names[w];
}

const char *lg_target_name(enum lg_target t)
{
    static const char *const names[] = {"proxy", "direct", "direct-shared"};

    return names[t];
}

unsigned lg_opts_nkeys(const struct lg_opts *o)
{
    if (o->pipeline > 0)
        return o->clients * o->pipeline;
    if (o->workload == LG_WL_CONTENDED || o->workload == LG_WL_RWLOCK ||
        o->workload == LG_WL_SEMAPHORE || (o->workload == LG_WL_REENTRANT && o->keys_set))
        return o->keys;
    return o->clients;
}

static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "lockproxy-bench: %s '%s': %s (see --help)\n", opt, val, why);
    return -EINVAL;
}

static int parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
        return bad(opt, s, "not an integer in range");
    *out = (unsigned)v;
    return 0;
}

static int parse_secs(const char *opt, const char *s, double lo, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo) || v > 86400.0)
        return bad(opt, s, "not a number of seconds in range");
    *out = v;
    return 0;
}

/* "unix:PATH" or "unix://PATH": a Unix domain socket. */
static int parse_unix_endpoint(const char *opt, const char *s, struct lg_endpoint *ep)
{
    const char *path = s + strlen("unix:");
    struct sockaddr_un sun;

    if (strncmp(path, "//", 2) == 0)
        path += 2;
    if (path[0] == '\0' || strlen(path) >= sizeof(sun.sun_path))
        return bad(opt, s, "expected unix:PATH with a path of 1-107 bytes");
    snprintf(ep->host, sizeof(ep->host), "%s", path);
    ep->port[0] = '\0';
    ep->is_unix = true;
    snprintf(ep->name, sizeof(ep->name), "unix:%s", path);
    return 0;
}

static int parse_endpoint(const char *opt, const char *s, struct lg_endpoint *ep)
{
    const char *colon = strrchr(s, ':');
    size_t hlen;
    unsigned port;

    if (strncmp(s, "unix:", 5) == 0)
        return parse_unix_endpoint(opt, s, ep);
    if (!colon || colon == s)
        return bad(opt, s, "expected HOST:PORT");
    hlen = (size_t)(colon - s);
    if (hlen >= sizeof(ep->host))
        return bad(opt, s, "host name too long");
    if (parse_uint(opt, colon + 1, 1, 65535, &port) < 0)
        return -EINVAL;
    memcpy(ep->host, s, hlen);
    ep->host[hlen] = '\0';
    snprintf(ep->port, sizeof(ep->port), "%u", port);
    ep->is_unix = false;
    snprintf(ep->name, sizeof(ep->name), "%s:%s", ep->host, ep->port);
    return 0;
}

static int parse_workload(const char *s, enum lg_workload *out)
{
    for (int w = LG_WL_UNCONTENDED; w <= LG_WL_SEMAPHORE; w++) {
        if (strcmp(s, lg_workload_name((enum lg_workload)w)) == 0) {
            *out = (enum lg_workload)w;
            return 0;
        }
    }
    return bad("workload", s, "expected uncontended, contended, reentrant, rwlock or semaphore");
}

static int parse_target(const char *s, size_t n, enum lg_target *out)
{
    for (int t = LG_TGT_PROXY; t <= LG_TGT_DIRECT_SHARED; t++) {
        const char *name = lg_target_name((enum lg_target)t);

        if (strlen(name) == n && memcmp(s, name, n) == 0) {
            *out = (enum lg_target)t;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_targets(const char *s, struct lg_opts *o)
{
    const char *p = s;

    o->ntargets = 0;
    while (*p) {
        size_t n = strcspn(p, ",");

        if (o->ntargets == LG_MAX_TARGETS)
            return bad("--targets", s, "too many targets");
        if (parse_target(p, n, &o->targets[o->ntargets]) < 0)
            return bad("--targets", s, "expected proxy, direct or direct-shared");
        o->ntargets++;
        p += n;
        if (*p == ',')
            p++;
    }
    if (o->ntargets == 0)
        return bad("--targets", s, "empty list");
    return 0;
}

static int parse_io(const char *s, enum sched_io *out)
{
    if (strcmp(s, "auto") == 0)
        *out = SCHED_IO_AUTO;
    else if (strcmp(s, "epoll") == 0)
        *out = SCHED_IO_EPOLL;
    else if (strcmp(s, "uring") == 0 || strcmp(s, "io_uring") == 0)
        *out = SCHED_IO_URING;
    else
        return bad("--io", s, "expected auto, epoll or uring");
    return 0;
}

static void set_defaults(struct lg_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->workload = LG_WL_UNCONTENDED;
    o->clients = 1000;
    o->keys = 10;
    o->write_pct = 10;
    o->permits = 10;
    o->duration_s = 10.0;
    o->warmup_s = 2.0;
    o->targets[0] = LG_TGT_PROXY;
    o->targets[1] = LG_TGT_DIRECT;
    o->ntargets = 2;
    o->io = SCHED_IO_AUTO;
    o->lease_ms = 30000;
    o->idle_settle_s = 1.0;
    (void)parse_endpoint("--proxy", "127.0.0.1:7379", &o->proxy);
    (void)parse_endpoint("--redis", "127.0.0.1:6379", &o->redis);
    snprintf(o->prefix, sizeof(o->prefix), "lgbench:%d", (int)getpid());
}

/* Options that take a number. Returns 1 if opt is not one of them. */
static int parse_numeric(struct lg_opts *o, const char *opt, const char *val)
{
    unsigned u = 0;
    int rc;

    if (strcmp(opt, "--clients") == 0)
        return parse_uint(opt, val, 1, LG_MAX_CLIENTS, &o->clients);
    if (strcmp(opt, "--keys") == 0) {
        o->keys_set = true;
        return parse_uint(opt, val, 1, LG_MAX_CLIENTS, &o->keys);
    }
    if (strcmp(opt, "--write-pct") == 0)
        return parse_uint(opt, val, 0, 100, &o->write_pct);
    if (strcmp(opt, "--permits") == 0)
        return parse_uint(opt, val, 1, LG_MAX_CLIENTS, &o->permits);
    if (strcmp(opt, "--pipeline") == 0)
        return parse_uint(opt, val, 1, LG_MAX_PIPE, &o->pipeline);
    if (strcmp(opt, "--lease-ms") == 0)
        return parse_uint(opt, val, 100, 86400000u, &o->lease_ms);
    if (strcmp(opt, "--proxy-pid") == 0) {
        rc = parse_uint(opt, val, 1, 0x7fffffff, &u);
        o->proxy_pid = (int)u;
        return rc;
    }
    if (strcmp(opt, "--hold-us") == 0) {
        rc = parse_uint(opt, val, 0, 60000000u, &u);
        o->hold_us = u;
        return rc;
    }
    if (strcmp(opt, "--duration") == 0)
        return parse_secs(opt, val, 0.1, &o->duration_s);
    if (strcmp(opt, "--warmup") == 0)
        return parse_secs(opt, val, 0.0, &o->warmup_s);
    if (strcmp(opt, "--idle") == 0)
        return parse_uint(opt, val, 1, LG_MAX_IDLE, &o->idle);
    if (strcmp(opt, "--idle-settle") == 0)
        return parse_secs(opt, val, 0.0, &o->idle_settle_s);
    return 1;
}

/* Options that take a string. Returns 1 if opt is not one of them. */
static int parse_valued(struct lg_opts *o, const char *opt, const char *val)
{
    int rc = parse_numeric(o, opt, val);

    if (rc != 1)
        return rc;
    if (strcmp(opt, "--workload") == 0)
        return parse_workload(val, &o->workload);
    if (strcmp(opt, "--targets") == 0)
        return parse_targets(val, o);
    if (strcmp(opt, "--proxy") == 0)
        return parse_endpoint(opt, val, &o->proxy);
    if (strcmp(opt, "--redis") == 0)
        return parse_endpoint(opt, val, &o->redis);
    if (strcmp(opt, "--io") == 0)
        return parse_io(val, &o->io);
    if (strcmp(opt, "--json") == 0) {
        o->json_path = val;
        return 0;
    }
    if (strcmp(opt, "--svg") == 0) {
        o->svg_path = val;
        return 0;
    }
    if (strcmp(opt, "--kv") == 0) {
        o->kv_path = val;
        return 0;
    }
    if (strcmp(opt, "--tls-ca-cert-file") == 0) {
        o->tls_ca = val;
        return 0;
    }
    if (strcmp(opt, "--prefix") == 0) {
        if (strlen(val) == 0 || strlen(val) >= sizeof(o->prefix) || strchr(val, '{'))
            return bad(opt, val, "1-63 characters, no '{'");
        snprintf(o->prefix, sizeof(o->prefix), "%s", val);
        return 0;
    }
    return 1;
}

/* Cross-option rules, checked once everything is parsed. */
static int check(struct lg_opts *o)
{
    if (o->idle > 0 && o->proxy_pid == 0) {
        fprintf(stderr, "lockproxy-bench: --idle needs --proxy-pid (to read the proxy's RSS)\n");
        return -EINVAL;
    }
    if (o->pipeline > 0 && o->workload != LG_WL_UNCONTENDED) {
        fprintf(stderr, "lockproxy-bench: --pipeline needs the uncontended workload\n");
        return -EINVAL;
    }
    if (o->pipeline > 0 && (uint64_t)o->clients * o->pipeline > 10000000u) {
        fprintf(stderr, "lockproxy-bench: --clients x --pipeline is too large\n");
        return -EINVAL;
    }
    if (o->direct_shared_sub) {
        for (unsigned i = 0; i < o->ntargets; i++) {
            if (o->targets[i] == LG_TGT_DIRECT)
                o->targets[i] = LG_TGT_DIRECT_SHARED;
        }
    }
    return 0;
}

int lg_opts_parse(struct lg_opts *o, int argc, char **argv)
{
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help_text, stdout);
            return 1;
        }
        if (strcmp(a, "--direct-shared-sub") == 0) {
            o->direct_shared_sub = true;
            continue;
        }
        if (a[0] != '-') {
            if (parse_workload(a, &o->workload) < 0)
                return -EINVAL;
            continue;
        }
        if (i + 1 >= argc)
            return bad(a, "", "missing value, or unknown option");
        rc = parse_valued(o, a, argv[i + 1]);
        if (rc == 1)
            return bad("option", a, "unknown");
        if (rc < 0)
            return rc;
        i++;
    }
    return check(o);
}
