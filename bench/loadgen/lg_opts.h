/* Command-line options of lockproxy-bench, the load generator: what to run
 * (workload, targets, or the idle-memory mode), where (the endpoints and
 * their credentials), how hard (clients, keys, hold time, pipeline depth,
 * or a fixed arrival rate), for how long, and where the results go.
 *
 * Connections. The bench connects in three places: lg_run.c's
 * connect_more() (the clients and pub/sub connections, on the event loop),
 * lg_stats.c's lg_redis_connect() (blocking: INFO, SCRIPT LOAD, set-up and
 * clean-up) and lg_idle.c (through lg_redis_connect too). TLS belongs in
 * struct lg_endpoint (a flag, like is_unix) and in those two connect
 * functions once the event loop has TLS; until then --tls is refused. */
#ifndef LP_BENCH_LOADGEN_LG_OPTS_H
#define LP_BENCH_LOADGEN_LG_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

enum lg_workload {
    LG_WL_UNCONTENDED = 0, /* each client its own key */
    LG_WL_CONTENDED = 1,   /* clients spread over --keys hot keys */
    LG_WL_REENTRANT = 2,   /* acquire twice, release twice */
    LG_WL_RWLOCK = 3,      /* read-mostly: read or write lock on --keys keys */
    LG_WL_SEMAPHORE = 4,   /* one permit of --keys semaphores of --permits each */
};

enum lg_target {
    LG_TGT_PROXY = 0,         /* LOCK/UNLOCK (RLOCK.., SEM.ACQUIRE..) through lockproxy */
    LG_TGT_DIRECT = 1,        /* Redisson-style scripts straight to Redis */
    LG_TGT_DIRECT_SHARED = 2, /* direct, one subscription per key for all clients */
    LG_TGT_TWEMPROXY = 3,     /* Redisson's scripts through twemproxy, waiting by polling */
    LG_TGT_PASSTHROUGH = 4,   /* direct's protocol through lockproxy's pass-through mode */
};

#define LG_NTARGET_KINDS 5
#define LG_MAX_TARGETS   4

struct lg_endpoint {
    char host[256]; /* name or address, or the socket path when is_unix */
    char port[8];   /* decimal port ("" when is_unix) */
    bool is_unix;   /* a Unix domain socket */
    char name[272]; /* for messages: "HOST:PORT" or "unix:PATH" */
    bool set;       /* given on the command line (or by --target) */
    char user[128]; /* AUTH user ("" for AUTH password alone) */
    char pass[256]; /* AUTH password, "" for no AUTH */
};

struct lg_opts {
    enum lg_workload workload;              /* what each client does */
    unsigned clients;                       /* connections (one client each) */
    unsigned keys;                          /* hot keys (not uncontended; reentrant if set) */
    bool keys_set;                          /* --keys was given */
    unsigned write_pct;                     /* rwlock: % of cycles that take the write lock */
    unsigned permits;                       /* semaphore: permits per semaphore */
    unsigned pipeline;                      /* 0: closed loop; N: N TRYLOCK/UNLOCK pairs */
    uint64_t hold_us;                       /* time between acquire and release */
    double duration_s;                      /* measured phase */
    double warmup_s;                        /* unmeasured phase before it */
    enum lg_target targets[LG_MAX_TARGETS]; /* run in this order */
    unsigned ntargets;                      /* entries in targets */
    enum sched_io io;                       /* event loop backend */
    double rate;                            /* open loop: ops/s over all clients, 0: closed */
    unsigned poll_ms;                       /* twemproxy: mean retry delay while taken */
    struct lg_endpoint proxy;               /* lockproxy address */
    struct lg_endpoint redis;               /* Redis address (direct, statistics) */
    struct lg_endpoint twemproxy;           /* twemproxy (nutcracker) address */
    bool redis_stats;                       /* read INFO from redis (see lg_opts_parse) */
    bool target_set;                        /* --target named the one target's address */
    int proxy_pid;                          /* lockproxy pid for CPU figures, 0: n/a */
    int twemproxy_pid;                      /* nutcracker pid for CPU figures, 0: n/a */
    bool direct_shared_sub;                 /* "direct" shares subscriptions per key */
    bool cluster;                           /* --redis is a seed of a Redis Cluster */
    unsigned lease_ms;                      /* direct: lease passed to the scripts */
    const char *json_path;                  /* borrowed from argv: JSON output or NULL */
    const char *svg_path;                   /* borrowed from argv: SVG output or NULL */
    const char *kv_path;                    /* borrowed from argv: key/value output or NULL */
    const char *tls_ca;                     /* borrowed from argv: TLS to the proxy, or NULL */
    unsigned idle;                          /* idle mode: connections to hold open, 0: off */
    double idle_settle_s;                   /* idle mode: wait before reading the RSS */
    char prefix[64];                        /* key name prefix */
};

/* Fills o from argv (and LP_BENCH_PASSWORD for --password). Returns 0 to
 * run, 1 when --help was printed (exit 0), or -EINVAL after printing the
 * reason to stderr. o->redis_stats is true when Redis's INFO is to be read:
 * a direct target runs on it, --redis was given, or no --target was (the
 * local defaults); with --target alone the Redis figures are omitted. */
int lg_opts_parse(struct lg_opts *o, int argc, char **argv);

/* Keys the workload uses (holder table size). */
unsigned lg_opts_nkeys(const struct lg_opts *o);

const char *lg_workload_name(enum lg_workload w);
const char *lg_target_name(enum lg_target t);

/* The endpoint target t's clients connect to. */
const struct lg_endpoint *lg_target_endpoint(const struct lg_opts *o, enum lg_target t);

/* True for the targets whose clients run Redisson's scripts themselves
 * (direct, direct-shared, twemproxy). */
bool lg_target_redisson(enum lg_target t);

/* pid of target t's proxy process for CPU figures (0: none or unknown). */
int lg_target_pid(const struct lg_opts *o, enum lg_target t);

/* True when ep is on this machine (loopback or a Unix socket): its
 * process's CPU time is part of this machine's busy time. */
bool lg_endpoint_is_local(const struct lg_endpoint *ep);

#ifdef __cplusplus
}
#endif

#endif
