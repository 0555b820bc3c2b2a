/* Out-of-loop figures: Redis INFO parsing, /proc/PID/stat, getrusage, and
 * SCRIPT LOAD, all through hiredis's blocking API on a fresh connection
 * (see lg_stats.h for why blocking is fine here). */
#include "bench/loadgen/lg_stats.h"

#include <sys/resource.h>
#include <sys/time.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#define CONNECT_TIMEOUT_S 3

redisContext *lg_redis_connect(const struct lg_endpoint *ep, int timeout_s, char *err,
                               size_t errlen)
{
    struct timeval tv = {timeout_s, 0};
    redisContext *rc = ep->is_unix ? redisConnectUnixWithTimeout(ep->host, tv)
                                   : redisConnectWithTimeout(ep->host, atoi(ep->port), tv);

    if (!rc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (rc->err) {
        snprintf(err, errlen, "%s: %s", ep->name, rc->errstr);
        redisFree(rc);
        return NULL;
    }
    (void)redisSetTimeout(rc, tv);
    if (ep->pass[0] && lg_redis_auth(rc, ep, err, errlen) < 0) {
        redisFree(rc);
        return NULL;
    }
    return rc;
}

int lg_redis_auth(redisContext *rc, const struct lg_endpoint *ep, char *err, size_t errlen)
{
    redisReply *r = ep->user[0] ? redisCommand(rc, "AUTH %s %s", ep->user, ep->pass)
                                : redisCommand(rc, "AUTH %s", ep->pass);
    int ret = 0;

    if (!r) {
        snprintf(err, errlen, "%s: AUTH: %s", ep->name, rc->errstr);
        return -EPROTO;
    }
    if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0) {
        snprintf(err, errlen, "%s: AUTH: %.100s", ep->name,
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        ret = -EACCES;
    }
    freeReplyObject(r);
    return ret;
}

static redisContext *connect_ep(const struct lg_endpoint *ep, char *err, size_t errlen)
{
    return lg_redis_connect(ep, CONNECT_TIMEOUT_S, err, errlen);
}

/* Runs a command that answers with a bulk string; returns a malloc'd copy
 * or NULL (err set). */
static char *command_str(redisContext *rc, const char *cmd, char *err, size_t errlen)
{
    redisReply *r = redisCommand(rc, cmd);
    char *s = NULL;

    if (!r) {
        /* A long message is cut short (the return value is looked at, so
         * gcc's Release -Wformat-truncation accepts that). */
        if (snprintf(err, errlen, "%s: %s", cmd, rc->errstr) < 0)
            err[0] = '\0';
        return NULL;
    }
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        s = strdup(r->str);
    else
        snprintf(err, errlen, "%s: unexpected reply: %s", cmd,
                 r->type == REDIS_REPLY_ERROR ? r->str : "(not a string)");
    freeReplyObject(r);
    return s;
}

/* "cmdstat_<name>:calls=N,..." lines. */
static void parse_cmdstats(const char *info, struct lg_redis_snap *out)
{
    const char *p = info;

    while ((p = strstr(p, "cmdstat_")) != NULL) {
        const char *name = p + strlen("cmdstat_");
        const char *colon = strchr(name, ':');
        size_t n;

        p = name;
        if (!colon || strncmp(colon, ":calls=", 7) != 0 || out->n == LG_MAX_CMDSTATS)
            continue;
        n = (size_t)(colon - name);
        if (n >= sizeof(out->cmd[0].name))
            continue;
        memcpy(out->cmd[out->n].name, name, n);
        out->cmd[out->n].name[n] = '\0';
        out->cmd[out->n].calls = strtoull(colon + 7, NULL, 10);
        out->n++;
    }
}

static double info_double(const char *info, const char *field)
{
    const char *p = strstr(info, field);

    return p ? strtod(p + strlen(field), NULL) : 0.0;
}

/* Connections of a CLIENT LIST reply in subscribed mode (any of sub=,
 * psub=, ssub= above 0). */
static long count_subscribed(const char *list)
{
    static const char *const fields[] = {" sub=", " psub=", " ssub="};
    long n = 0;

    for (const char *line = list; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        bool sub = false;

        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && !sub; i++) {
            const char *f = memmem(line, len, fields[i], strlen(fields[i]));

            sub = f && f[strlen(fields[i])] != '0';
        }
        n += sub;
        line = eol ? eol + 1 : NULL;
    }
    return n;
}

/* Connections and pub/sub state: connected_clients, pubsub_channels and
 * the subscribed connections; -1 for what Redis refused (a --redis user
 * without CLIENT LIST keeps every other figure). */
static void snapshot_clients(redisContext *rc, const char *misc, struct lg_redis_snap *out)
{
    char ignored[128];
    char *clients = command_str(rc, "INFO clients", ignored, sizeof(ignored));
    char *list = command_str(rc, "CLIENT LIST", ignored, sizeof(ignored));

    out->clients = clients ? (long)info_double(clients, "connected_clients:") - 1 : -1;
    out->pubsub_chans = (long)info_double(misc, "pubsub_channels:");
    out->pubsub_conns = list ? count_subscribed(list) : -1;
    free(clients);
    free(list);
}

int lg_redis_snapshot(const struct lg_endpoint *ep, struct lg_redis_snap *out, char *err,
                      size_t errlen)
{
    redisContext *rc;
    char *stats, *cpu, *misc;

    memset(out, 0, sizeof(*out));
    rc = connect_ep(ep, err, errlen);
    if (!rc)
        return -ECONNREFUSED;
    stats = command_str(rc, "INFO commandstats", err, errlen);
    cpu = stats ? command_str(rc, "INFO cpu", err, errlen) : NULL;
    misc = cpu ? command_str(rc, "INFO stats", err, errlen) : NULL;
    if (stats && cpu && misc) {
        snapshot_clients(rc, misc, out);
        parse_cmdstats(stats, out);
        out->cpu_sys_s = info_double(cpu, "used_cpu_sys:");
        out->cpu_s = out->cpu_sys_s + info_double(cpu, "used_cpu_user:");
        out->reads = (uint64_t)info_double(misc, "total_reads_processed:");
        out->ok = true;
    }
    free(stats);
    free(cpu);
    free(misc);
    redisFree(rc);
    return out->ok ? 0 : -EPROTO;
}

uint64_t lg_redis_calls(const struct lg_redis_snap *s, const char *name)
{
    for (unsigned i = 0; i < s->n; i++) {
        if (strcmp(s->cmd[i].name, name) == 0)
            return s->cmd[i].calls;
    }
    return 0;
}

bool lg_cmd_is_script_internal(const char *name)
{
    static const char *const inner[] = {"exists", "hexists", "hincrby", "pexpire", "pttl",
                                        "del",    "publish", "hget",    "hmget",   "spublish",
                                        "type",   "hset",    "hdel",    "hlen",    "hkeys",
                                        "get",    "set",     "incrby",  "decrby"};

    for (size_t i = 0; i < sizeof(inner) / sizeof(inner[0]); i++) {
        if (strcmp(name, inner[i]) == 0)
            return true;
    }
    return false;
}

bool lg_cmd_is_bench_own(const char *name)
{
    return strcmp(name, "info") == 0 || strcmp(name, "auth") == 0 ||
           strcmp(name, "client|list") == 0;
}

void lg_redis_delta(const struct lg_redis_snap *a, const struct lg_redis_snap *b,
                    uint64_t *client_cmds, uint64_t *all_calls)
{
    *client_cmds = 0;
    *all_calls = 0;
    for (unsigned i = 0; i < b->n; i++) {
        const char *name = b->cmd[i].name;
        uint64_t before = lg_redis_calls(a, name);
        uint64_t d = b->cmd[i].calls >= before ? b->cmd[i].calls - before : 0;

        if (lg_cmd_is_bench_own(name))
            continue;
        *all_calls += d;
        if (!lg_cmd_is_script_internal(name))
            *client_cmds += d;
    }
}

int lg_redis_script_load(const struct lg_endpoint *ep, const char *lua, char sha[41], char *err,
                         size_t errlen)
{
    redisContext *rc = connect_ep(ep, err, errlen);
    redisReply *r;
    int ret = -EPROTO;

    if (!rc)
        return -ECONNREFUSED;
    r = redisCommand(rc, "SCRIPT LOAD %s", lua);
    if (!r) {
        snprintf(err, errlen, "SCRIPT LOAD: %s", rc->errstr);
    } else if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 40);
        sha[40] = '\0';
        ret = 0;
    } else {
        snprintf(err, errlen, "SCRIPT LOAD: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    freeReplyObject(r);
    redisFree(rc);
    return ret;
}

int lg_proc_cpu(int pid, double *out, double *sys)
{
    char path[64], buf[1024];
    unsigned long long ut, st;
    const char *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f)
        return -errno;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces: fields restart after
     * the last ')'. utime and stime are fields 14 and 15. */
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -EPROTO;
    *out = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    if (sys)
        *sys = (double)st / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

double lg_self_cpu(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) < 0)
        return 0.0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int lg_sys_busy(double *out)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    int n;

    if (!f)
        return -errno;
    /* cpu  user nice system idle iowait irq softirq steal ... */
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 7)
        return -EPROTO;
    *out = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

int lg_proc_status_kib(int pid, const char *field, long *out)
{
    char path[64], line[256];
    size_t flen = strlen(field);
    int rc = -ENOENT;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    f = fopen(path, "r");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
            *out = strtol(line + flen + 1, NULL, 10);
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

int lg_tcp_mem_pages(long *out)
{
    char line[256];
    int rc = -ENOENT;
    FILE *f = fopen("/proc/net/sockstat", "r");

    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        const char *mem = strstr(line, " mem ");

        if (strncmp(line, "TCP:", 4) == 0 && mem) {
            *out = strtol(mem + 5, NULL, 10);
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

int lg_info_field(const char *info, const char *field, char *out, size_t cap)
{
    size_t flen = strlen(field);
    const char *p = info;

    while ((p = strstr(p, field)) != NULL) {
        bool at_line_start = p == info || p[-1] == '\n';

        if (at_line_start && p[flen] == ':') {
            size_t n = strcspn(p + flen + 1, "\r\n");

            n = n < cap - 1 ? n : cap - 1;
            memcpy(out, p + flen + 1, n);
            out[n] = '\0';
            return 0;
        }
        p += flen;
    }
    return -ENOENT;
}
