/* Option parsing and the --help text of lockproxy-bench. Every value is
 * checked here, so the rest of the program can trust struct lg_opts. */
#include "bench/loadgen/lg_opts.h"

#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

#define LG_MAX_CLIENTS 100000u
#define LG_MAX_PIPE    1024u
#define LG_MAX_IDLE    1000000u
#define LG_MAX_RATE    10000000.0

static const char help_text[] =
    "Usage: lockproxy-bench [options] [WORKLOAD]\n"
    "\n"
    "Load generator for lockproxy. Each of --clients connections repeatedly\n"
    "acquires a lock, holds it for --hold-us, and releases it, with one request\n"
    "in flight: closed loop (the next cycle starts when the last one ends: the\n"
    "throughput measure), or open loop with --rate (cycles start on a fixed\n"
    "schedule: the latency measure). The same workload runs against every\n"
    "target in --targets, one after the other, and the results are compared.\n"
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
    "  twemproxy      the same scripts (EVALSHA, with the SHA-1 computed by the\n"
    "                 bench; on NOSCRIPT the request is sent once as EVAL, which\n"
    "                 loads the script: twemproxy refuses SCRIPT LOAD) sent\n"
    "                 through twemproxy (nutcracker) at --twemproxy, which routes\n"
    "                 them by their first key. twemproxy refuses SUBSCRIBE, and a\n"
    "                 client behind it knows no Redis address (with several\n"
    "                 servers it could not tell which one to subscribe on), so a\n"
    "                 waiting client polls, as polling Redis locks do (redis-py's\n"
    "                 Lock, Redlock, redsync): after a refused acquire it retries\n"
    "                 after --poll-ms (drawn uniformly from 0.5x to 1.5x, never\n"
    "                 later than the holder's PTTL); a semaphore retries after\n"
    "                 --poll-ms likewise.\n"
    "  passthrough    direct's client (RLock scripts, its own pub/sub connection per\n"
    "                 bench connection) pointed at --proxy: lockproxy's pass-through\n"
    "                 mode forwards SCRIPT LOAD/EVALSHA over its pool and shares one\n"
    "                 upstream subscription per channel. Lock workloads only.\n"
    "\n"
    "Where (the defaults are a local test set-up):\n"
    "  --proxy HOST:PORT  lockproxy (default 127.0.0.1:7379); unix:PATH for a Unix\n"
    "                     domain socket (lockproxy --listen unix:///PATH)\n"
    "  --redis HOST:PORT  Redis for the direct targets and for the Redis figures\n"
    "                     of every target (default 127.0.0.1:6379); or unix:PATH\n"
    "  --twemproxy HOST:PORT  twemproxy (default 127.0.0.1:22121); or unix:PATH\n"
    "  --cluster          --redis is a seed node of a Redis Cluster: the bench reads\n"
    "                     CLUSTER SLOTS once; each direct client (and its pub/sub\n"
    "                     connection) goes to the master of its key's slot, the\n"
    "                     scripts SPUBLISH and waiters SSUBSCRIBE (Redisson's\n"
    "                     sharded mode), the scripts are loaded on every master,\n"
    "                     and the Redis figures (CPU, commands) are summed over\n"
    "                     every master. The proxy target goes to --proxy (a\n"
    "                     lockproxy with --upstream redis-cluster://...). Proxy and\n"
    "                     direct only; uncontended, contended, reentrant. A direct\n"
    "                     client answered MOVED moves to the new owner (slot map\n"
    "                     updated), ASK to the target (with ASKING), TRYAGAIN\n"
    "                     retries after 10 ms: counted as redirects, not errors\n"
    "  --target HOST:PORT the address of the one target in --targets (default\n"
    "                     --targets proxy): load-test a running deployment, e.g.\n"
    "                     --target lockproxy.staging:7379. Without --redis, the\n"
    "                     Redis figures (CPU, commands) are omitted, with a note:\n"
    "                     give the Redis behind the target with --redis to get them\n"
    "                     (it must answer INFO; they count every client of that\n"
    "                     Redis, so they are exact only on an otherwise idle one).\n"
    "                     For direct targets --target is the Redis itself\n"
    "  --user U           AUTH user for the endpoints the clients connect to\n"
    "  --password P       AUTH password for them (AUTH P, or AUTH U P with --user);\n"
    "                     LP_BENCH_PASSWORD in the environment does the same without\n"
    "                     showing it in ps\n"
    "  --redis-user U, --redis-password P  AUTH for --redis when it is only read\n"
    "                     for figures (default: none; a direct target's Redis uses\n"
    "                     --user and --password)\n"
    "  --tls              refused for now: TLS comes with the TLS work on the event\n"
    "                     loop (it will be a flag of each endpoint)\n"
    "  --tls-ca-cert-file FILE\n"
    "                     the proxy target's clients speak TLS to --proxy (a\n"
    "                     lockproxy tls:// listener with --tls-auth-clients no),\n"
    "                     verifying its certificate with FILE and its host\n"
    "  --proxy-pid PID    lockproxy's pid, to report its CPU time (/proc/PID/stat);\n"
    "                     without it proxy CPU is n/a (local proxies only)\n"
    "  --twemproxy-pid PID  the same for twemproxy\n"
    "\n"
    "Keys. Every key is <prefix>:<target>:<n>; the default prefix is\n"
    "lgbench:<8 random hex digits>, new for each run, so a run never touches\n"
    "keys it did not create. At the end of each target the bench deletes every\n"
    "key it may have left (semaphores; lock keys of clients that did not\n"
    "finish) through the target's own path when it allows DEL (Redis,\n"
    "twemproxy), or through --redis; through lockproxy alone, locks are\n"
    "released by UNLOCK or when the connection closes, and the semaphore\n"
    "workload needs --redis (lockproxy has no command that deletes a\n"
    "semaphore). The report says how many keys were deleted. If the bench is\n"
    "killed (SIGKILL), lock keys expire after --lease-ms (lockproxy: on\n"
    "disconnect), but semaphores stay: delete <prefix>:* by hand.\n"
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
    "  --rate N           open loop: N cycles per second over all clients, each\n"
    "                     client on its own fixed schedule (every clients/N s,\n"
    "                     staggered). Latency is measured from the scheduled start,\n"
    "                     not from the send, so a slow reply delays the next cycle\n"
    "                     and that delay is counted (no coordinated omission, as in\n"
    "                     wrk2). A client whose cycle overruns its slot starts the\n"
    "                     next one at once. The report gives the asked and achieved\n"
    "                     rates and marks a run that fell short (RATE SHORT: below\n"
    "                     95 %); the bench's own lateness in sending is shown as\n"
    "                     'send lag' (up to the 1 ms timer tick when it is idle)\n"
    "  --duration S       measured seconds per target (default 10; decimals ok)\n"
    "  --warmup S         unmeasured seconds before that (default 2)\n"
    "  --targets LIST     proxy,direct,direct-shared,twemproxy,passthrough\n"
    "                     (default proxy,direct)\n"
    "  --poll-ms MS       twemproxy: mean retry delay of a waiting client (default\n"
    "                     100, redis-py Lock's sleep)\n"
    "  --direct-shared-sub  make 'direct' behave as 'direct-shared'\n"
    "  --pipeline N       Redis-bound ceiling test (uncontended only; proxy and\n"
    "                     direct): each connection sends N TRYLOCK/UNLOCK pairs on\n"
    "                     N keys of its own per round trip (direct: N acquire/unlock\n"
    "                     EVALSHA pairs)\n"
    "  --lease-ms MS      lease for the Redisson lock scripts (default 30000,\n"
    "                     Redisson's lockWatchdogTimeout; semaphores have none)\n"
    "  --io MODE          auto, epoll or uring: the bench's own event loop\n"
    "  --prefix P         key prefix (default lgbench:<random>, see Keys)\n"
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
    "                     and writes. With --rate: the achieved rate\n"
    "  latency            acquisition latency, request sent (--rate: scheduled) to\n"
    "                     lock granted, including waiting for other holders;\n"
    "                     p50/p90/p99/p99.9/max from log-linear buckets (< 1% error)\n"
    "  Redis CPU/acq      Redis's CPU time (INFO cpu: used_cpu_sys + used_cpu_user\n"
    "                     delta) per acquisition, in microseconds: what one lock\n"
    "                     operation costs the one Redis thread every client shares\n"
    "  Redis cmds/acq     commands clients sent to Redis per acquisition, from the\n"
    "                     INFO commandstats delta, counting top-level commands only\n"
    "                     (EVALSHA, SUBSCRIBE, UNSUBSCRIBE, ...). The commands that\n"
    "                     scripts run (HEXISTS, HINCRBY, PEXPIRE, PUBLISH, HSET, GET,\n"
    "                     SET, INCRBY, ...) are\n"
    "                     reported separately as 'calls incl. scripts'. Counts all\n"
    "                     clients of that Redis, so keep it otherwise idle.\n"
    "  Redis cmds/read    the same commands per read Redis made from a client socket\n"
    "                     (INFO stats total_reads_processed): how well the target\n"
    "                     batches (a proxy's pipeline, or 1 for one request each)\n"
    "  Redis scripts/s    EVALSHA + EVAL calls per second (INFO commandstats)\n"
    "  Redis CPU          INFO cpu used_cpu_sys + used_cpu_user delta\n"
    "  proxy CPU          utime + stime delta of --proxy-pid (proxy target) or\n"
    "                     --twemproxy-pid (twemproxy target)\n"
    "  bench CPU          this process's own CPU time\n"
    "  other CPU          the machine's busy CPU time (/proc/stat) minus Redis (when\n"
    "                     local), the proxy and the bench: what other processes\n"
    "                     took. Every figure here is CPU-bound on a small machine,\n"
    "                     so distrust a run where this is not near 0\n"
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
    "Output: a progress line per second, a table per target, the proxy/other\n"
    "ratios, and optionally --json and --svg (open the SVG in a browser).\n"
    "At the end of each target the clients finish their cycles (the drain), so\n"
    "no lock is left behind. A client that is only waiting out a PTTL or a poll\n"
    "delay holds nothing: once only such clients are left they are closed and\n"
    "reported as parked; a client still holding or with a request in flight\n"
    "when the drain's limit runs out is STUCK.\n"
    "Ctrl-C stops new cycles and lets the current ones finish, so no lock is\n"
    "left behind; a second Ctrl-C closes the connections at once.\n"
    "Exit status: 0 if every target ran and granted locks, without violations\n"
    "or stuck clients (idle mode: every connection answered and the RSS could\n"
    "be read), 1 otherwise, 2 on bad options.\n";

const char *lg_workload_name(enum lg_workload w)
{
    static const char *const names[] = {"uncontended", "contended", "reentrant", "rwlock",
                                        "semaphore"};

    return names[w];
}

const char *lg_target_name(enum lg_target t)
{
    static const char *const names[] = {"proxy", "direct", "direct-shared", "twemproxy",
                                        "passthrough"};

    return names[t];
}

const struct lg_endpoint *lg_target_endpoint(const struct lg_opts *o, enum lg_target t)
{
    if (t == LG_TGT_PROXY || t == LG_TGT_PASSTHROUGH)
        return &o->proxy;
    if (t == LG_TGT_TWEMPROXY)
        return &o->twemproxy;
    return &o->redis;
}

bool lg_target_redisson(enum lg_target t)
{
    return t != LG_TGT_PROXY;
}

int lg_target_pid(const struct lg_opts *o, enum lg_target t)
{
    if (t == LG_TGT_PROXY || t == LG_TGT_PASSTHROUGH)
        return o->proxy_pid;
    if (t == LG_TGT_TWEMPROXY)
        return o->twemproxy_pid;
    return 0;
}

bool lg_endpoint_is_local(const struct lg_endpoint *ep)
{
    return ep->is_unix || strcmp(ep->host, "localhost") == 0 || strncmp(ep->host, "127.", 4) == 0 ||
           strcmp(ep->host, "::1") == 0 || strcmp(ep->host, "[::1]") == 0;
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

/* What the command line gives beyond struct lg_opts, resolved by check(). */
struct cli_extra {
    struct lg_endpoint target; /* --target */
    bool targets_set;          /* --targets was given */
    char user[128];            /* --user */
    char pass[256];            /* --password (or LP_BENCH_PASSWORD) */
    char redis_user[128];      /* --redis-user */
    char redis_pass[256];      /* --redis-password */
};

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

static int parse_rate(const char *opt, const char *s, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > LG_MAX_RATE)
        return bad(opt, s, "not a rate in ops/s in range (0, 1e7]");
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
    ep->set = true;
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
    ep->set = true;
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
    for (int t = LG_TGT_PROXY; t < LG_NTARGET_KINDS; t++) {
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
            return bad("--targets", s,
                       "expected proxy, direct, direct-shared, twemproxy or passthrough");
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

/* lgbench:<8 hex digits of a random UUID>: a new key space per run. */
static void default_prefix(struct lg_opts *o)
{
    char uuid[37];

    if (util_uuid4(uuid) < 0)
        snprintf(uuid, sizeof(uuid), "%08x", (unsigned)getpid());
    snprintf(o->prefix, sizeof(o->prefix), "lgbench:%.8s", uuid);
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
    o->poll_ms = 100;
    o->idle_settle_s = 1.0;
    (void)parse_endpoint("--proxy", "127.0.0.1:7379", &o->proxy);
    (void)parse_endpoint("--redis", "127.0.0.1:6379", &o->redis);
    (void)parse_endpoint("--twemproxy", "127.0.0.1:22121", &o->twemproxy);
    o->proxy.set = o->redis.set = o->twemproxy.set = false;
    default_prefix(o);
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
    if (strcmp(opt, "--poll-ms") == 0)
        return parse_uint(opt, val, 1, 60000, &o->poll_ms);
    if (strcmp(opt, "--twemproxy-pid") == 0) {
        rc = parse_uint(opt, val, 1, 0x7fffffff, &u);
        o->twemproxy_pid = (int)u;
        return rc;
    }
    if (strcmp(opt, "--rate") == 0)
        return parse_rate(opt, val, &o->rate);
    return 1;
}

/* --user, --password, --redis-user, --redis-password. Returns 1 if opt is
 * not one of them. */
static int parse_cred(const char *opt, const char *val, struct cli_extra *cli)
{
    struct {
        const char *name; /* option */
        char *dst;        /* where it goes */
        size_t cap;       /* its size */
    } creds[] = {
        {"--user", cli->user, sizeof(cli->user)},
        {"--password", cli->pass, sizeof(cli->pass)},
        {"--redis-user", cli->redis_user, sizeof(cli->redis_user)},
        {"--redis-password", cli->redis_pass, sizeof(cli->redis_pass)},
    };

    for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
        if (strcmp(opt, creds[i].name) != 0)
            continue;
        if (val[0] == '\0' || strlen(val) >= creds[i].cap)
            return bad(opt, "...", "empty or too long");
        snprintf(creds[i].dst, creds[i].cap, "%s", val);
        return 0;
    }
    return 1;
}

/* Options that take a string. Returns 1 if opt is not one of them. */
static int parse_valued(struct lg_opts *o, struct cli_extra *cli, const char *opt, const char *val)
{
    int rc = parse_numeric(o, opt, val);

    if (rc != 1)
        return rc;
    if (strcmp(opt, "--workload") == 0)
        return parse_workload(val, &o->workload);
    if (strcmp(opt, "--proxy") == 0)
        return parse_endpoint(opt, val, &o->proxy);
    if (strcmp(opt, "--redis") == 0)
        return parse_endpoint(opt, val, &o->redis);
    if (strcmp(opt, "--twemproxy") == 0)
        return parse_endpoint(opt, val, &o->twemproxy);
    if (strcmp(opt, "--target") == 0) {
        o->target_set = true;
        return parse_endpoint(opt, val, &cli->target);
    }
    if (strcmp(opt, "--targets") == 0) {
        cli->targets_set = true;
        return parse_targets(val, o);
    }
    rc = parse_cred(opt, val, cli);
    if (rc != 1)
        return rc;
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

static bool runs_kind(const struct lg_opts *o, enum lg_target t)
{
    for (unsigned i = 0; i < o->ntargets; i++) {
        if (o->targets[i] == t)
            return true;
    }
    return false;
}

static bool runs_direct(const struct lg_opts *o)
{
    return runs_kind(o, LG_TGT_DIRECT) || runs_kind(o, LG_TGT_DIRECT_SHARED);
}

static int fail(const char *why)
{
    fprintf(stderr, "lockproxy-bench: %s (see --help)\n", why);
    return -EINVAL;
}

/* --target: the address of the one target kind. */
static int apply_target(struct lg_opts *o, const struct cli_extra *cli)
{
    struct lg_endpoint *ep;

    if (!o->target_set)
        return 0;
    if (!cli->targets_set) {
        o->targets[0] = LG_TGT_PROXY;
        o->ntargets = 1;
    }
    if (o->ntargets != 1)
        return fail("--target needs exactly one target in --targets");
    ep = (struct lg_endpoint *)lg_target_endpoint(o, o->targets[0]);
    if (ep == &o->redis && o->redis.set && strcmp(o->redis.name, cli->target.name) != 0)
        return fail("a direct target's --target is its Redis: --redis must be the same or absent");
    if (ep->set && ep != &o->redis)
        return fail("--target and the target's own address option are both given");
    *ep = cli->target;
    return 0;
}

static void set_cred(struct lg_endpoint *ep, const char *user, const char *pass)
{
    snprintf(ep->user, sizeof(ep->user), "%s", user);
    snprintf(ep->pass, sizeof(ep->pass), "%s", pass);
}

/* Credentials: --user/--password for what the clients connect to,
 * --redis-user/--redis-password for a Redis read only for figures. */
static int apply_creds(struct lg_opts *o, struct cli_extra *cli)
{
    const char *env = getenv("LP_BENCH_PASSWORD");

    if (cli->pass[0] == '\0' && env && env[0])
        snprintf(cli->pass, sizeof(cli->pass), "%s", env);
    if (cli->user[0] && !cli->pass[0])
        return fail("--user needs --password (or LP_BENCH_PASSWORD)");
    if (cli->redis_user[0] && !cli->redis_pass[0])
        return fail("--redis-user needs --redis-password");
    set_cred(&o->proxy, cli->user, cli->pass);
    set_cred(&o->twemproxy, cli->user, cli->pass);
    if (runs_direct(o) && (cli->redis_pass[0]))
        return fail("a direct target's Redis takes --user/--password, not --redis-*");
    if (runs_direct(o))
        set_cred(&o->redis, cli->user, cli->pass);
    else
        set_cred(&o->redis, cli->redis_user, cli->redis_pass);
    return 0;
}

/* Whether to read Redis's INFO; the semaphore workload through lockproxy
 * needs Redis to set up and delete its semaphores. */
static int decide_redis_stats(struct lg_opts *o)
{
    o->redis_stats = runs_direct(o) || o->redis.set || !o->target_set;
    if (!o->redis_stats && o->workload == LG_WL_SEMAPHORE && runs_kind(o, LG_TGT_PROXY))
        return fail("the semaphore workload through lockproxy needs --redis (to create and "
                    "delete its semaphores: lockproxy has no command that deletes one)");
    return 0;
}

/* --cluster: the lock workloads, proxy and direct, one request per client
 * (a client's requests all go to the master of its one key). */
static int check_cluster(const struct lg_opts *o)
{
    if (runs_kind(o, LG_TGT_DIRECT_SHARED) || runs_kind(o, LG_TGT_TWEMPROXY) ||
        o->direct_shared_sub)
        return fail("--cluster runs the proxy and direct targets only");
    if (o->workload != LG_WL_UNCONTENDED && o->workload != LG_WL_CONTENDED &&
        o->workload != LG_WL_REENTRANT)
        return fail("--cluster runs the uncontended, contended and reentrant workloads");
    if (o->pipeline > 0 || o->idle > 0)
        return fail("--cluster does not take --pipeline or --idle");
    if (!o->redis_stats || o->redis.is_unix)
        return fail("--cluster needs --redis HOST:PORT, a seed node of the cluster");
    return 0;
}

/* Cross-option rules, checked once everything is parsed. */
static int check(struct lg_opts *o, struct cli_extra *cli)
{
    int rc;

    rc = apply_target(o, cli);
    if (rc == 0)
        rc = apply_creds(o, cli);
    if (rc == 0)
        rc = decide_redis_stats(o);
    if (rc < 0)
        return rc;
    if (o->rate > 0 && (o->pipeline > 0 || o->idle > 0))
        return fail("--rate is for the closed-loop workloads, not --pipeline or --idle");
    if (o->pipeline > 0 && runs_kind(o, LG_TGT_TWEMPROXY))
        return fail("--pipeline runs the proxy and direct targets only");
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
    if (o->cluster && (rc = check_cluster(o)) < 0)
        return rc;
    if (runs_kind(o, LG_TGT_PASSTHROUGH) &&
        (o->pipeline > 0 || o->idle > 0 || o->cluster || o->workload == LG_WL_RWLOCK ||
         o->workload == LG_WL_SEMAPHORE))
        return fail("passthrough runs the uncontended, contended and reentrant workloads "
                    "without --pipeline, --idle or --cluster");
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
    struct cli_extra cli;

    memset(&cli, 0, sizeof(cli));
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(help_text, stdout);
            return 1;
        }
        if (strcmp(a, "--cluster") == 0) {
            o->cluster = true;
            continue;
        }
        if (strcmp(a, "--direct-shared-sub") == 0) {
            o->direct_shared_sub = true;
            continue;
        }
        if (strcmp(a, "--tls") == 0) {
            fprintf(stderr, "lockproxy-bench: --tls is not supported yet: TLS comes with the TLS "
                            "work on the event loop\n");
            return -EINVAL;
        }
        if (a[0] != '-') {
            if (parse_workload(a, &o->workload) < 0)
                return -EINVAL;
            continue;
        }
        if (i + 1 >= argc)
            return bad(a, "", "missing value, or unknown option");
        rc = parse_valued(o, &cli, a, argv[i + 1]);
        if (rc == 1)
            return bad("option", a, "unknown");
        if (rc < 0)
            return rc;
        i++;
    }
    return check(o, &cli);
}
