/* Figures read from outside the event loop: Redis's INFO commandstats and
 * INFO cpu, a process's CPU time and memory from /proc, the machine's busy
 * CPU time and TCP memory, the bench's own CPU time, and SCRIPT LOAD. Redis is reached with
 * hiredis's blocking API on a short-lived connection; these calls happen only at phase boundaries,
 * never per request. */
#ifndef LP_BENCH_LOADGEN_LG_STATS_H
#define LP_BENCH_LOADGEN_LG_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_opts.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LG_MAX_CMDSTATS 96

struct lg_cmdstat {
    char name[48];  /* command name as in cmdstat_<name> (e.g. "evalsha", "script|load") */
    uint64_t calls; /* calls counter */
};

struct lg_redis_snap {
    bool ok;           /* the snapshot was read */
    double cpu_s;      /* used_cpu_sys + used_cpu_user */
    double cpu_sys_s;  /* used_cpu_sys alone (kernel time) */
    uint64_t reads;    /* total_reads_processed (INFO stats) */
    long clients;      /* connected_clients (INFO clients) less the bench's own; -1: n/a */
    long pubsub_conns; /* CLIENT LIST entries with sub, psub or ssub > 0; -1: n/a */
    long pubsub_chans; /* pubsub_channels (INFO stats) */
    unsigned n;        /* entries in cmd */
    struct lg_cmdstat cmd[LG_MAX_CMDSTATS]; /* per-command call counters */
};

/* A blocking hiredis connection to ep (TCP or Unix socket) with connect
 * and I/O timeouts of timeout_s, authenticated when ep has a password
 * (TLS would go here, see lg_opts.h). Returns the context (the caller frees it
 * with redisFree) or NULL with err set. */
redisContext *lg_redis_connect(const struct lg_endpoint *ep, int timeout_s, char *err,
                               size_t errlen);

/* Sends AUTH [user] password of ep on rc. Returns 0, or -errno with err
 * set (-EACCES: refused). lg_redis_connect() does it for every endpoint
 * with a password. */
int lg_redis_auth(redisContext *rc, const struct lg_endpoint *ep, char *err, size_t errlen);

/* Reads INFO commandstats, INFO cpu, INFO stats, INFO clients and CLIENT
 * LIST (counted, not kept) from ep. Returns 0 (out->ok set) or
 * -errno (-ECONNREFUSED, -EPROTO...); err gets a message on failure. */
int lg_redis_snapshot(const struct lg_endpoint *ep, struct lg_redis_snap *out, char *err,
                      size_t errlen);

/* Calls of name in s (0 if absent). */
uint64_t lg_redis_calls(const struct lg_redis_snap *s, const char *name);

/* True for commands that our Lua scripts run (so commandstats counts them
 * although no client sent them): exists, hexists, hincrby, pexpire, pttl,
 * del, publish, spublish, hget, hmget, type, and for the rwlock and semaphore scripts
 * hset, hdel, hlen, hkeys, get, set, incrby, decrby. */
bool lg_cmd_is_script_internal(const char *name);

/* True for the commands of the bench's own statistics connections (INFO,
 * CLIENT LIST, and the AUTH before it), left out of every figure. */
bool lg_cmd_is_bench_own(const char *name);

/* Delta of the commands clients sent (not script-internal, not the bench's
 * own INFO and AUTH) and of all calls, between a and b. */
void lg_redis_delta(const struct lg_redis_snap *a, const struct lg_redis_snap *b,
                    uint64_t *client_cmds, uint64_t *all_calls);

/* SCRIPT LOAD lua on ep; writes the 40-hex SHA1. Returns 0 or -errno. */
int lg_redis_script_load(const struct lg_endpoint *ep, const char *lua, char sha[41], char *err,
                         size_t errlen);

/* utime + stime of pid in seconds; *sys (may be NULL) gets stime alone.
 * Returns 0 or -errno. */
int lg_proc_cpu(int pid, double *out, double *sys);

/* This process's user + system CPU seconds. */
double lg_self_cpu(void);

/* Busy CPU seconds of the whole machine since boot, every CPU summed
 * (/proc/stat: user, nice, system, irq, softirq, steal). Returns 0 or
 * -errno. */
int lg_sys_busy(double *out);

/* A "Name:   123 kB" field of /proc/PID/status (e.g. "VmRSS"), in KiB.
 * Returns 0 or -errno (-ENOENT: no such process or field). */
int lg_proc_status_kib(int pid, const char *field, long *out);

/* System-wide TCP socket memory in pages (/proc/net/sockstat, "TCP: ...
 * mem N"). Returns 0 or -errno. */
int lg_tcp_mem_pages(long *out);

/* Copies the value of "field:value" from an INFO reply into out (at most
 * cap - 1 bytes, up to the end of the line). Returns 0 or -ENOENT. */
int lg_info_field(const char *info, const char *field, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
