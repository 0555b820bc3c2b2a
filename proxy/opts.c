/* Command-line parsing for lockproxy; see opts.h. */
#include "proxy/opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

static const char usage_text[] =
    "Usage: lockproxy [options]\n"
    "\n"
    "A distributed-lock proxy in front of Redis, compatible with Redisson's\n"
    "lock layout. Clients speak RESP (redis-cli, redis-py, Jedis...) and send\n"
    "LOCK, TRYLOCK, UNLOCK, FORCEUNLOCK, LOCK.INFO.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR              client address, HOST:PORT or unix:///path\n"
    "                             (default 127.0.0.1:7379)\n"
    "  --upstream URL             Redis: redis://[user:password@]HOST:PORT[/db]\n"
    "                             or unix:///path (default redis://127.0.0.1:6379)\n"
    "  --pool-size N              pipelined upstream connections (default 2)\n"
    "  --lock-watchdog-timeout MS lease of locks taken without LEASE, renewed\n"
    "                             every MS/3 while the connection lives (default 30000)\n"
    "  --on-disconnect MODE       release: free a closed connection's locks at once\n"
    "                             expire: let them expire at lease end (default release)\n"
    "  --io MODE                  auto, uring or epoll (default auto: io_uring when\n"
    "                             the kernel allows it, epoll otherwise)\n"
    "  --max-clients N            client connections at once (default 10000)\n"
    "  --upstream-timeout MS      fail requests Redis has not answered in MS\n"
    "                             (default 3000)\n"
    "  --subscription-linger MS   keep an idle lock channel subscribed for MS\n"
    "                             (default 10000)\n"
    "  --max-request-bytes N      largest client request (default 65536)\n"
    "  --max-args N               most arguments per request (default 64)\n"
    "  --log-level LEVEL          error, warn, info or debug (default info)\n"
    "  --help                     print this help and exit\n"
    "  --version                  print the version and exit\n";

void px_opts_default(struct px_opts *o)
{
    memset(o, 0, sizeof(*o));
    px_addr_parse("127.0.0.1:7379", &o->listen);
    px_addr_parse("redis://127.0.0.1:6379", &o->upstream);
    o->pool_size = 2;
    o->watchdog_ms = 30000;
    o->on_disc = PX_DISCONNECT_RELEASE;
    o->io = SCHED_IO_AUTO;
    o->max_clients = 10000;
    o->log_level = LOG_LVL_INFO;
    o->upstream_timeout_ms = 3000;
    o->linger_ms = 10000;
    o->max_request_bytes = 65536;
    o->max_args = 64;
    o->max_pipeline = 1024;
}

/* Splits "user:password@" off s into a; returns the rest. */
static const char *parse_userinfo(const char *s, struct px_addr *a)
{
    const char *at = strrchr(s, '@'), *colon;

    if (!at)
        return s;
    colon = memchr(s, ':', (size_t)(at - s));
    if (colon) {
        snprintf(a->user, sizeof(a->user), "%.*s", (int)(colon - s), s);
        snprintf(a->password, sizeof(a->password), "%.*s", (int)(at - colon - 1), colon + 1);
    } else {
        snprintf(a->password, sizeof(a->password), "%.*s", (int)(at - s), s);
    }
    return at + 1;
}

/* Parses "host:port[/db]" (host may be [v6]). */
static int parse_hostport(const char *s, struct px_addr *a)
{
    const char *colon, *slash = strchr(s, '/'), *end;
    int64_t v;

    end = slash ? slash : s + strlen(s);
    colon = end;
    while (colon > s && *colon != ':')
        colon--;
    if (*colon != ':' || colon == s)
        return -EINVAL;
    if (util_parse_i64(colon + 1, (size_t)(end - colon - 1), &v) < 0 || v < 1 || v > 65535)
        return -EINVAL;
    a->port = (int)v;
    if (s[0] == '[' && colon[-1] == ']')
        snprintf(a->host, sizeof(a->host), "%.*s", (int)(colon - s - 2), s + 1);
    else
        snprintf(a->host, sizeof(a->host), "%.*s", (int)(colon - s), s);
    if (slash && slash[1]) {
        if (util_parse_i64(slash + 1, strlen(slash + 1), &v) < 0 || v < 0 || v > 1000000)
            return -EINVAL;
        a->db = (int)v;
    }
    return 0;
}

int px_addr_parse(const char *s, struct px_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (strncmp(s, "unix://", 7) == 0) {
        if (s[7] != '/' || strlen(s + 7) >= sizeof(out->path))
            return -EINVAL;
        snprintf(out->path, sizeof(out->path), "%s", s + 7);
        return 0;
    }
    if (strncmp(s, "redis://", 8) == 0)
        s = parse_userinfo(s + 8, out);
    return parse_hostport(s, out);
}

/* Parses a non-negative integer flag value within [min, max]. */
static int parse_num(const char *flag, const char *v, int64_t min, int64_t max, int64_t *out,
                     FILE *err)
{
    if (util_parse_i64(v, strlen(v), out) < 0 || *out < min || *out > max) {
        fprintf(err, "lockproxy: %s needs a number from %lld to %lld, got '%s'\n", flag,
                (long long)min, (long long)max, v);
        return -EINVAL;
    }
    return 0;
}

static int parse_enum(const char *flag, const char *v, const char *const *names, int n, int *out,
                      FILE *err)
{
    int i;

    for (i = 0; i < n; i++) {
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    fprintf(err, "lockproxy: %s: unknown value '%s'\n", flag, v);
    return -EINVAL;
}

static int parse_addr_flag(const char *flag, const char *v, struct px_addr *a, FILE *err)
{
    if (px_addr_parse(v, a) < 0) {
        fprintf(err, "lockproxy: %s: cannot parse address '%s'\n", flag, v);
        return -EINVAL;
    }
    return 0;
}

/* Applies one "--flag value" pair. Returns 0 or -EINVAL (message printed). */
static int apply_flag(struct px_opts *o, const char *f, const char *v, FILE *err)
{
    static const char *const disc[] = {"release", "expire"};
    static const char *const io[] = {"auto", "uring", "epoll"};
    static const char *const lv[] = {"error", "warn", "info", "debug"};
    int64_t n = 0;
    int e = 0, rc = -EINVAL;

    if (strcmp(f, "--listen") == 0)
        return parse_addr_flag(f, v, &o->listen, err);
    if (strcmp(f, "--upstream") == 0)
        return parse_addr_flag(f, v, &o->upstream, err);
    if (strcmp(f, "--on-disconnect") == 0) {
        rc = parse_enum(f, v, disc, 2, &e, err);
        o->on_disc = (enum px_on_disconnect)e;
    } else if (strcmp(f, "--io") == 0) {
        rc = parse_enum(f, v, io, 3, &e, err);
        o->io = (enum sched_io)e;
    } else if (strcmp(f, "--log-level") == 0) {
        rc = parse_enum(f, v, lv, 4, &e, err);
        o->log_level = (enum log_level)e;
    } else if (strcmp(f, "--pool-size") == 0) {
        rc = parse_num(f, v, 1, 64, &n, err);
        o->pool_size = (unsigned)n;
    } else if (strcmp(f, "--lock-watchdog-timeout") == 0) {
        rc = parse_num(f, v, 30, 86400000, &n, err);
        o->watchdog_ms = (uint64_t)n;
    } else if (strcmp(f, "--max-clients") == 0) {
        rc = parse_num(f, v, 1, 1000000, &n, err);
        o->max_clients = (unsigned)n;
    } else if (strcmp(f, "--upstream-timeout") == 0) {
        rc = parse_num(f, v, 10, 3600000, &n, err);
        o->upstream_timeout_ms = (unsigned)n;
    } else if (strcmp(f, "--subscription-linger") == 0) {
        rc = parse_num(f, v, 0, 3600000, &n, err);
        o->linger_ms = (uint64_t)n;
    } else if (strcmp(f, "--max-request-bytes") == 0) {
        rc = parse_num(f, v, 1024, 512 * 1024 * 1024, &n, err);
        o->max_request_bytes = (size_t)n;
    } else if (strcmp(f, "--max-args") == 0) {
        rc = parse_num(f, v, 4, 1024 * 1024, &n, err);
        o->max_args = (unsigned)n;
    } else {
        fprintf(err, "lockproxy: unknown option '%s' (see --help)\n", f);
    }
    return rc;
}

int px_opts_parse(struct px_opts *o, int argc, char **argv, FILE *out, FILE *err)
{
    int i, rc;

    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *eq = strchr(f, '=');
        char name[64];

        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            fputs(usage_text, out);
            return 1;
        }
        if (strcmp(f, "--version") == 0) {
            fprintf(out, "lockproxy %s\n", LP_VERSION);
            return 1;
        }
        if (eq && (size_t)(eq - f) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - f), f);
            rc = apply_flag(o, name, eq + 1, err);
        } else if (i + 1 < argc && strncmp(f, "--", 2) == 0) {
            rc = apply_flag(o, f, argv[++i], err);
        } else {
            fprintf(err, "lockproxy: '%s' needs a value or is unknown (see --help)\n", f);
            rc = -EINVAL;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}
