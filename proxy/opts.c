/* Settings, flags and --help for lockproxy; see opts.h. One table (keys[])
 * lists every setting once: its flag / config-file name, how its value is
 * parsed and where it is stored, and whether a reload may change it. */
#include "proxy/opts.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "proxy/auth.h"
#include "proxy/config.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

static const char usage_text[] =
    "Usage: lockproxy [options]\n"
    "\n"
    "A distributed-lock proxy in front of Redis, compatible with Redisson's\n"
    "layouts. Clients speak RESP (redis-cli, redis-py, Jedis...) and send\n"
    "LOCK/TRYLOCK/UNLOCK/FORCEUNLOCK/LOCK.INFO/LOCK.LIST,\n"
    "RLOCK/WLOCK/RUNLOCK/WUNLOCK, FAIRLOCK/FAIRUNLOCK, MULTILOCK/MULTIUNLOCK,\n"
    "REDLOCK/REDUNLOCK, SEM.*, PSEM.* and LATCH.* (see the README).\n"
    "\n"
    "Options:\n"
    "  --listen ADDR              client address, HOST:PORT, tls://HOST:PORT or\n"
    "                             unix:///path; repeatable (default 127.0.0.1:7379)\n"
    "  --upstream URL             Redis: redis://[user:password@]HOST:PORT[/db],\n"
    "                             rediss://... for TLS, or unix:///path\n"
    "                             (default redis://127.0.0.1:6379); a Redis Cluster:\n"
    "                             redis-cluster://[user:password@]HOST:PORT[,HOST:PORT\n"
    "                             ...] (seed nodes; rediss-cluster:// for TLS)\n"
    "                             a Sentinel-monitored master: redis-sentinel://\n"
    "                             [user:password@]HOST:PORT[,HOST:PORT...]/NAME[/db]\n"
    "                             (credentials and db: the master's; no TLS:\n"
    "                             rediss-sentinel:// is refused)\n"
    "  --redlock-upstream URL     an independent master for REDLOCK, redis://[user:\n"
    "                             password@]HOST:PORT[/db]; give it 3, 5, 7 or 9\n"
    "                             times (an odd number); REDLOCK needs a majority\n"
    "  --sentinel-user NAME       AUTH user for the sentinels (default none)\n"
    "  --sentinel-password PASS   AUTH password for the sentinels (default none)\n"
    "  --pool-size N              pipelined upstream connections (default 2)\n"
    "  --script-batch N           lock/unlock scripts run per Redis script call when\n"
    "                             they meet on a connection (default 32; 1 = one\n"
    "                             call each; not with a Redis Cluster)\n"
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
    "  --max-args N               most arguments per request (default 69)\n"
    "  --max-pipeline N           requests one connection may have outstanding;\n"
    "                             it is not read past that (default 1024)\n"
    "  --client-output-soft-limit BYTES\n"
    "                             stop reading a connection while more than BYTES\n"
    "                             of its replies are unsent (default 262144, 0 off)\n"
    "  --client-output-hard-limit BYTES\n"
    "                             close a connection (releasing its locks) with\n"
    "                             more than BYTES of replies unsent\n"
    "                             (default 16777216, 0 off)\n"
    "  --max-client-memory BYTES  memory held for all clients together (MULTI\n"
    "                             queues, input, unsent replies); a command MULTI\n"
    "                             would queue past it is refused with -OOM\n"
    "                             (default 1073741824, 0 off)\n"
    "  --latency-monitor-threshold MS\n"
    "                             count (INFO latency) and log loop iterations\n"
    "                             that work longer than MS, and timers that fire\n"
    "                             later than MS (default 100, 0 off)\n"
    "  --timeout SECONDS          close a connection idle that long; one that\n"
    "                             holds or waits for a lock is never idle\n"
    "                             (default 0: off)\n"
    "  --auth-timeout SECONDS     close a connection not authenticated within\n"
    "                             SECONDS, when auth is on (default 10, 0 off)\n"
    "  --tcp-keepalive SECONDS    TCP keepalive on client connections: a peer\n"
    "                             that vanished is dropped (its locks released)\n"
    "                             after about twice SECONDS (default 300, 0 off)\n"
    "  --unixsocketperm MODE      octal mode of the unix:// sockets it creates,\n"
    "                             e.g. 660 (default: as the umask leaves it)\n"
    "  --protected-mode yes|no    yes: without requirepass or users, accept only\n"
    "                             loopback and Unix socket clients (others get\n"
    "                             -DENIED, as Redis's protected mode) (default yes)\n"
    "  --passthrough on|off       on: also forward ordinary Redis commands (GET,\n"
    "                             SET, HSET, EVAL, EVALSHA...) to the upstream\n"
    "                             through the pool, and share one upstream\n"
    "                             subscription per channel among SUBSCRIBE clients\n"
    "                             and lock waiters, so Redisson- or redis-py-style\n"
    "                             lock clients work unchanged (default on)\n"
    "  --log-level LEVEL          error, warn, info or debug (default info)\n"
    "  --config FILE              read settings from FILE first: \"key value\" lines\n"
    "                             whose keys are these flag names; flags override\n"
    "                             it; SIGHUP re-reads it\n"
    "  --requirepass PASSWORD     clients must AUTH PASSWORD first (user \"default\")\n"
    "  --user \"NAME RULES\"        an ACL user, e.g. \"app on >secret ~orders:*\";\n"
    "                             repeatable; clients AUTH NAME PASSWORD\n"
    "  --metrics HOST:PORT        serve Prometheus /metrics, /healthz and /livez over\n"
    "                             HTTP on HOST:PORT (default off)\n"
    "  --sync-replicas N          grant a lock only once N replicas acknowledged\n"
    "                             it (WAIT after every script that changes lock\n"
    "                             state); else undo it and answer NOREPLICAS\n"
    "                             (default 0: off; see the README's Guarantees)\n"
    "  --sync-timeout MS          how long WAIT waits for the replicas; below\n"
    "                             --upstream-timeout (default 1000)\n"
    "  --cluster-pubsub MODE      Redis Cluster pub/sub: auto (sharded on Redis 7+,\n"
    "                             as Redisson's shardedSubscriptionMode), sharded\n"
    "                             (SSUBSCRIBE/SPUBLISH) or classic (SUBSCRIBE/\n"
    "                             PUBLISH); match your Redisson fleet (default\n"
    "                             auto; sharded waiters also hear classic PUBLISH)\n"
    "  --help                     print this help and exit\n"
    "Every setting may also come from the environment: LOCKPROXY_<NAME>, the\n"
    "flag's name in upper case with '_' for '-' (LOCKPROXY_UPSTREAM,\n"
    "LOCKPROXY_REQUIREPASS, ...); it overrides the config file, flags override it.\n"
    "  --version                  print the version and exit\n"
    "\n"
    "TLS (see the README; SIGHUP re-reads the certificate files):\n"
    "  --tls-cert-file FILE       certificate chain (PEM) of the tls:// listeners\n"
    "  --tls-key-file FILE        its private key (default: in the certificate file)\n"
    "  --tls-ca-cert-file FILE    CAs that sign client certificates\n"
    "  --tls-auth-clients MODE    yes: require a client certificate signed by the\n"
    "                             CA; optional: verify one if sent; no: do not ask\n"
    "                             (default yes)\n"
    "  --tls-handshake-timeout MS close a client whose TLS handshake is not done\n"
    "                             within MS (default 10000)\n"
    "  --upstream-tls-ca-cert-file FILE\n"
    "                             CAs that sign the rediss:// server's certificate\n"
    "                             (default: the system's CA store)\n"
    "  --upstream-tls-cert-file FILE, --upstream-tls-key-file FILE\n"
    "                             client certificate and key for the upstream\n"
    "  --upstream-tls-server-name NAME\n"
    "                             name the upstream certificate must carry, also\n"
    "                             sent as SNI (default: the URL's host)\n";

void px_opts_default(struct px_opts *o)
{
    memset(o, 0, sizeof(*o));
    px_addr_parse("127.0.0.1:7379", &o->listen[0]);
    o->nlisten = 1;
    px_addr_parse("redis://127.0.0.1:6379", &o->upstream);
    o->pool_size = 2;
    o->script_batch = 32;
    o->watchdog_ms = 30000;
    o->on_disc = PX_DISCONNECT_RELEASE;
    o->io = SCHED_IO_AUTO;
    o->max_clients = 10000;
    o->log_level = LOG_LVL_INFO;
    o->upstream_timeout_ms = 3000;
    o->linger_ms = 10000;
    o->max_request_bytes = 65536;
    o->max_args = PX_DEFAULT_MAX_ARGS;
    o->max_pipeline = 1024;
    o->out_soft = 256 * 1024;
    o->out_hard = 16 * 1024 * 1024;
    o->max_client_memory = 1024 * 1024 * 1024;
    o->latency_threshold_ms = 100;
    o->timeout_s = 0;
    o->auth_timeout_s = 10;
    o->keepalive_s = 300;
    o->unix_perm = 0;
    o->protected_mode = 1;
    o->passthrough = 1;
    o->tls_auth_clients = PX_TLS_AUTH_YES;
    o->tls_handshake_timeout_ms = 10000;
    o->sync_replicas = 0;
    o->sync_timeout_ms = 1000;
}

void px_opts_deinit(struct px_opts *o)
{
    px_auth_put(o->auth);
    o->auth = NULL;
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

/* Parses the database number after a '/' (slash), if any. */
static int parse_db(const char *slash, struct px_addr *a)
{
    int64_t v;

    if (!slash || !slash[1])
        return 0;
    if (util_parse_i64(slash + 1, strlen(slash + 1), &v) < 0 || v < 0 || v > 1000000)
        return -EINVAL;
    a->db = (int)v;
    return 0;
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
    return parse_db(slash, a);
}

/* A master name: 1..127 printable bytes, none of blank / @ , " \ (so it
 * survives the URL, logs and a Prometheus label as is). */
static bool master_name_ok(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n >= PX_MASTER_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        if (s[i] <= ' ' || s[i] >= 0x7f || strchr("/@,\"\\", s[i]))
            return false;
    }
    return true;
}

/* "host:port[,host:port...]/name[/db]" after redis-sentinel:// and the
 * credentials: each sentinel is checked like a host:port and the list is
 * kept as given. */
static int parse_sentinels(const char *s, struct px_addr *a)
{
    const char *slash = strchr(s, '/'), *name, *end, *p;
    struct px_addr one;

    if (!slash || slash == s || (size_t)(slash - s) >= sizeof(a->sentinels))
        return -EINVAL;
    for (p = s;; p = end + 1) {
        char hp[300];

        end = memchr(p, ',', (size_t)(slash - p));
        end = end ? end : slash;
        if (end == p || (size_t)(end - p) >= sizeof(hp))
            return -EINVAL;
        snprintf(hp, sizeof(hp), "%.*s", (int)(end - p), p);
        memset(&one, 0, sizeof(one));
        if (parse_hostport(hp, &one) < 0 || !one.host[0])
            return -EINVAL;
        if (end == slash)
            break;
    }
    name = slash + 1;
    end = strchr(name, '/');
    if (!master_name_ok(name, end ? (size_t)(end - name) : strlen(name)))
        return -EINVAL;
    snprintf(a->sentinels, sizeof(a->sentinels), "%.*s", (int)(slash - s), s);
    snprintf(a->master_name, sizeof(a->master_name), "%.*s",
             (int)(end ? (size_t)(end - name) : strlen(name)), name);
    return parse_db(end, a);
}

/* Parses the seeds of "redis-cluster://" (s is past it, and past the
 * user info): "host:port[,host:port...]", each as parse_hostport takes it
 * but without a /db (a cluster has only database 0). */
static int parse_cluster_seeds(const char *s, struct px_addr *a)
{
    struct px_addr seed;
    const char *p = s;
    size_t len = strlen(s);

    if (len == 0 || len >= sizeof(a->seeds) || strchr(s, '/'))
        return -EINVAL;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char one[300];

        if (n == 0 || n >= sizeof(one))
            return -EINVAL;
        memcpy(one, p, n);
        one[n] = '\0';
        memset(&seed, 0, sizeof(seed));
        if (parse_hostport(one, &seed) < 0)
            return -EINVAL;
        if (p == s) {
            memcpy(a->host, seed.host, sizeof(a->host));
            a->port = seed.port;
        }
        p += n + (comma ? 1 : 0);
        if (comma && !*p)
            return -EINVAL;
    }
    a->cluster = true;
    memcpy(a->seeds, s, len + 1);
    return 0;
}

int px_addr_parse(const char *s, struct px_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (strncmp(s, "redis-cluster://", 16) == 0)
        return parse_cluster_seeds(parse_userinfo(s + 16, out), out);
    if (strncmp(s, "rediss-cluster://", 17) == 0) {
        out->tls = true;
        return parse_cluster_seeds(parse_userinfo(s + 17, out), out);
    }
    if (strncmp(s, "unix://", 7) == 0) {
        if (s[7] != '/' || strlen(s + 7) >= sizeof(out->path))
            return -EINVAL;
        snprintf(out->path, sizeof(out->path), "%s", s + 7);
        return 0;
    }
    if (strncmp(s, "redis-sentinel://", 17) == 0)
        return parse_sentinels(parse_userinfo(s + 17, out), out);
    if (strncmp(s, "rediss-sentinel://", 18) == 0) {
        out->tls = true;
        return parse_sentinels(parse_userinfo(s + 18, out), out);
    }
    if (strncmp(s, "redis://", 8) == 0) {
        s = parse_userinfo(s + 8, out);
    } else if (strncmp(s, "rediss://", 9) == 0) {
        out->tls = true;
        s = parse_userinfo(s + 9, out);
    } else if (strncmp(s, "tls://", 6) == 0) {
        out->tls = true;
        s += 6;
    }
    return parse_hostport(s, out);
}

/* ---- the settings table --------------------------------------------------- */

enum opt_kind {
    OPT_ADDR = 0,     /* struct px_addr */
    OPT_NUM = 1,      /* unsigned integer field of width bytes, in [min, max] */
    OPT_ENUM = 2,     /* int-sized enum, index into names */
    OPT_METRICS = 3,  /* struct px_addr, or "off" / "" */
    OPT_PASS = 4,     /* requirepass */
    OPT_USER = 5,     /* user NAME rules... */
    OPT_CONFIG = 6,   /* --config path (command line only) */
    OPT_MODE = 7,     /* unsigned file mode, octal, 0 .. 0777 */
    OPT_LISTEN = 8,   /* one more --listen address (a new layer replaces the list) */
    OPT_STR = 9,      /* char array field of width bytes: a path or a name */
    OPT_REDLOCK = 10, /* one more --redlock-upstream master */
};

struct opt_key {
    const char *name;         /* flag name without "--", also the config key */
    enum opt_kind kind;       /* how the value is parsed */
    size_t off;               /* offsetof the field in struct px_opts */
    size_t width;             /* OPT_NUM: field size in bytes */
    int64_t min, max;         /* OPT_NUM: accepted range */
    const char *const *names; /* OPT_ENUM: values, by enum value */
    bool reload;              /* a reload may change it */
};

static const char *const disc_names[] = {"release", "expire", NULL};
static const char *const io_names[] = {"auto", "uring", "epoll", NULL};
static const char *const level_names[] = {"error", "warn", "info", "debug", NULL};
static const char *const pubsub_names[] = {"auto", "sharded", "classic", NULL}; /* pool.h order */
static const char *const tls_auth_names[] = {"no", "optional", "yes", NULL};
static const char *const yes_no_names[] = {"no", "yes", NULL};
static const char *const on_off_names[] = {"off", "on", NULL};

#define NUM(field)   offsetof(struct px_opts, field), sizeof(((struct px_opts *)0)->field)
#define FIELD(field) offsetof(struct px_opts, field), 0
#define STR(field)   offsetof(struct px_opts, field), sizeof(((struct px_opts *)0)->field)

static const struct opt_key keys[] = {
    {"listen", OPT_LISTEN, FIELD(listen), 0, 0, NULL, false},
    {"upstream", OPT_ADDR, FIELD(upstream), 0, 0, NULL, false},
    {"redlock-upstream", OPT_REDLOCK, FIELD(redlock), 0, 0, NULL, false},
    {"sentinel-user", OPT_STR, STR(sentinel_user), 0, 0, NULL, false},
    {"sentinel-password", OPT_STR, STR(sentinel_password), 0, 0, NULL, false},
    {"pool-size", OPT_NUM, NUM(pool_size), 1, 64, NULL, false},
    {"script-batch", OPT_NUM, NUM(script_batch), 1, 1024, NULL, false},
    {"lock-watchdog-timeout", OPT_NUM, NUM(watchdog_ms), 30, 86400000, NULL, false},
    {"on-disconnect", OPT_ENUM, FIELD(on_disc), 0, 0, disc_names, true},
    {"io", OPT_ENUM, FIELD(io), 0, 0, io_names, false},
    {"max-clients", OPT_NUM, NUM(max_clients), 1, 1000000, NULL, true},
    {"upstream-timeout", OPT_NUM, NUM(upstream_timeout_ms), 10, 3600000, NULL, false},
    {"subscription-linger", OPT_NUM, NUM(linger_ms), 0, 3600000, NULL, true},
    {"max-request-bytes", OPT_NUM, NUM(max_request_bytes), 1024, 512 * 1024 * 1024, NULL, true},
    {"max-args", OPT_NUM, NUM(max_args), 4, 1024 * 1024, NULL, true},
    {"max-pipeline", OPT_NUM, NUM(max_pipeline), 1, 1000000, NULL, true},
    {"client-output-soft-limit", OPT_NUM, NUM(out_soft), 0, 1ll << 40, NULL, true},
    {"client-output-hard-limit", OPT_NUM, NUM(out_hard), 0, 1ll << 40, NULL, true},
    {"max-client-memory", OPT_NUM, NUM(max_client_memory), 0, 1ll << 50, NULL, true},
    {"latency-monitor-threshold", OPT_NUM, NUM(latency_threshold_ms), 0, 3600000, NULL, true},
    {"timeout", OPT_NUM, NUM(timeout_s), 0, 31536000, NULL, true},
    {"auth-timeout", OPT_NUM, NUM(auth_timeout_s), 0, 86400, NULL, true},
    {"tcp-keepalive", OPT_NUM, NUM(keepalive_s), 0, 32767, NULL, true},
    {"unixsocketperm", OPT_MODE, NUM(unix_perm), 0, 0777, NULL, false},
    {"protected-mode", OPT_ENUM, FIELD(protected_mode), 0, 0, yes_no_names, true},
    {"passthrough", OPT_ENUM, FIELD(passthrough), 0, 0, on_off_names, true},
    {"log-level", OPT_ENUM, FIELD(log_level), 0, 0, level_names, true},
    {"metrics", OPT_METRICS, FIELD(metrics), 0, 0, NULL, false},
    {"cluster-pubsub", OPT_ENUM, FIELD(cluster_pubsub), 0, 0, pubsub_names, false},
    {"sync-replicas", OPT_NUM, NUM(sync_replicas), 0, 1000, NULL, true},
    {"sync-timeout", OPT_NUM, NUM(sync_timeout_ms), 1, 3600000, NULL, true},
    {"requirepass", OPT_PASS, FIELD(auth), 0, 0, NULL, true},
    {"user", OPT_USER, FIELD(auth), 0, 0, NULL, true},
    {"config", OPT_CONFIG, FIELD(config), 0, 0, NULL, false},
    {"tls-cert-file", OPT_STR, STR(tls_cert_file), 0, 0, NULL, true},
    {"tls-key-file", OPT_STR, STR(tls_key_file), 0, 0, NULL, true},
    {"tls-ca-cert-file", OPT_STR, STR(tls_ca_cert_file), 0, 0, NULL, true},
    {"tls-auth-clients", OPT_ENUM, FIELD(tls_auth_clients), 0, 0, tls_auth_names, true},
    {"tls-handshake-timeout", OPT_NUM, NUM(tls_handshake_timeout_ms), 10, 3600000, NULL, true},
    {"upstream-tls-cert-file", OPT_STR, STR(up_tls_cert_file), 0, 0, NULL, true},
    {"upstream-tls-key-file", OPT_STR, STR(up_tls_key_file), 0, 0, NULL, true},
    {"upstream-tls-ca-cert-file", OPT_STR, STR(up_tls_ca_cert_file), 0, 0, NULL, true},
    {"upstream-tls-server-name", OPT_STR, STR(up_tls_server_name), 0, 0, NULL, true},
};

static const struct opt_key *key_find(const char *name)
{
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(keys); i++) {
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    }
    return NULL;
}

/* Edit distance of a and b, capped at cap + 1 (names are short). */
static size_t edit_distance(const char *a, const char *b, size_t cap)
{
    size_t la = strlen(a), lb = strlen(b), row[72], i, j;

    if (la >= LP_ARRAY_SIZE(row) || lb >= LP_ARRAY_SIZE(row))
        return cap + 1;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

            best = LP_MIN(best, up + 1);
            best = LP_MIN(best, row[j - 1] + 1);
            row[j] = best;
            diag = up;
        }
    }
    return LP_MIN(row[lb], cap + 1);
}

/* The key an unknown name most likely meant, in this order: a key the name
 * extends with "-..." ("io-backend": io), a key that contains the name
 * ("watchdog-timeout": lock-watchdog-timeout), the nearest key within two
 * edits ("max-arg": max-args). NULL when none is close. */
const char *px_opts_key_suggest(const char *name)
{
    const char *best = NULL;
    size_t i, len = strlen(name), dist = 3, d;

    for (i = 0; i < LP_ARRAY_SIZE(keys); i++) {
        size_t kl = strlen(keys[i].name);

        if (kl < len && strncmp(name, keys[i].name, kl) == 0 && name[kl] == '-' &&
            (!best || kl > strlen(best)))
            best = keys[i].name;
    }
    for (i = 0; !best && len >= 4 && i < LP_ARRAY_SIZE(keys); i++) {
        if (strstr(keys[i].name, name))
            best = keys[i].name;
    }
    for (i = 0; !best && i < LP_ARRAY_SIZE(keys); i++) {
        d = edit_distance(name, keys[i].name, 2);
        if (d < dist) {
            dist = d;
            best = keys[i].name;
        }
    }
    return best;
}

bool px_opts_key_reloadable(const char *key)
{
    const struct opt_key *k = key_find(key);

    return k && k->reload;
}

static int set_num(struct px_opts *o, const struct opt_key *k, const char *v, char *why, size_t n)
{
    int64_t x;
    uint32_t x32;
    uint64_t x64;

    if (util_parse_i64(v, strlen(v), &x) < 0 || x < k->min || x > k->max) {
        snprintf(why, n, "needs a number from %lld to %lld, got '%.64s'", (long long)k->min,
                 (long long)k->max, v);
        return -EINVAL;
    }
    x32 = (uint32_t)x;
    x64 = (uint64_t)x;
    if (k->width == sizeof(x32))
        memcpy((char *)o + k->off, &x32, sizeof(x32));
    else
        memcpy((char *)o + k->off, &x64, sizeof(x64));
    return 0;
}

/* An octal mode such as 660 or 0770. */
static int set_mode(struct px_opts *o, const struct opt_key *k, const char *v, char *why, size_t n)
{
    unsigned mode = 0;
    size_t i, len = strlen(v);

    for (i = 0; i < len && v[i] >= '0' && v[i] <= '7'; i++)
        mode = mode * 8 + (unsigned)(v[i] - '0');
    if (len == 0 || i < len || len > 4 || mode > (unsigned)k->max) {
        snprintf(why, n, "needs an octal mode from 0 to 777 (e.g. 660), got '%.64s'", v);
        return -EINVAL;
    }
    memcpy((char *)o + k->off, &mode, sizeof(mode));
    return 0;
}

static int set_enum(struct px_opts *o, const struct opt_key *k, const char *v, char *why, size_t n)
{
    int i, at;

    for (i = 0; k->names[i]; i++) {
        if (strcmp(v, k->names[i]) == 0) {
            memcpy((char *)o + k->off, &i, sizeof(i));
            return 0;
        }
    }
    /* Name every valid value, so the error says what to write instead. */
    at = snprintf(why, n, "unknown value '%.64s' (one of:", v);
    for (i = 0; k->names[i] && at > 0 && (size_t)at < n; i++)
        at += snprintf(why + at, n - (size_t)at, "%s %s", i ? "," : "", k->names[i]);
    if (at > 0 && (size_t)at < n)
        snprintf(why + at, n - (size_t)at, ")");
    return -EINVAL;
}

/* Which address forms a key takes: --listen no redis URL, --upstream no
 * tls://, --metrics neither (nor TLS). */
static bool addr_form_ok(const struct opt_key *k, const char *v)
{
    bool url = strncmp(v, "redis", 5) == 0 && strstr(v, "://") != NULL;

    if (k->kind == OPT_LISTEN)
        return !url;
    if (k->kind == OPT_METRICS)
        return !url && strncmp(v, "tls://", 6) != 0;
    return strncmp(v, "tls://", 6) != 0;
}

/* The URL forms, by scheme, as errors show them. */
static const struct {
    const char *scheme; /* prefix, with "://" */
    const char *form;   /* what follows it */
} url_forms[] = {
    {"redis://", "[user:password@]HOST:PORT[/db]"},
    {"rediss://", "[user:password@]HOST:PORT[/db]"},
    {"redis-cluster://", "[user:password@]HOST:PORT[,HOST:PORT...]"},
    {"rediss-cluster://", "[user:password@]HOST:PORT[,HOST:PORT...]"},
    {"redis-sentinel://", "[user:password@]HOST:PORT[,HOST:PORT...]/NAME[/db]"},
    {"rediss-sentinel://", "[user:password@]HOST:PORT[,HOST:PORT...]/NAME[/db]"},
    {"unix://", "/path"},
    {"tls://", "HOST:PORT"},
};

/* What is wrong with the "host:port[/...]" part p of an address. */
static const char *hostport_why(const char *p)
{
    const char *end = p + strcspn(p, "/,"), *colon = end;
    int64_t v;

    if (end == p)
        return "no HOST:PORT";
    while (colon > p && *colon != ':')
        colon--;
    if (*colon != ':')
        return "no :PORT after the host";
    if (colon == p)
        return "no HOST before :PORT";
    if (util_parse_i64(colon + 1, (size_t)(end - colon - 1), &v) < 0 || v < 1 || v > 65535)
        return "the port must be a number from 1 to 65535";
    return *end == '/' ? "a bad /db or /NAME after HOST:PORT" : "a bad HOST:PORT in the list";
}

/* Explains why address v was refused for key k, into why. */
static void addr_why(const struct opt_key *k, const char *v, char *why, size_t n)
{
    const char *sep = strstr(v, "://"), *rest;
    const char *forms = k->kind == OPT_LISTEN ? "HOST:PORT, tls://HOST:PORT or unix:///path"
                        : k->kind == OPT_ADDR ? "redis://, rediss:// (TLS), redis[s]-cluster://, "
                                                "redis[s]-sentinel:// or unix:///path"
                                              : "HOST:PORT or unix:///path";
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(url_forms); i++) {
        if (strncmp(v, url_forms[i].scheme, strlen(url_forms[i].scheme)) == 0)
            break;
    }

    if (sep && i == LP_ARRAY_SIZE(url_forms)) {
        snprintf(why, n, "unknown scheme in '%.200s' (%s)", v, forms);
        return;
    }
    if (i < LP_ARRAY_SIZE(url_forms) && !addr_form_ok(k, v)) {
        snprintf(why, n, "%s is not for --%s, got '%.200s' (%s)", url_forms[i].scheme, k->name, v,
                 forms);
        return;
    }
    if (i == LP_ARRAY_SIZE(url_forms)) {
        snprintf(why, n, "cannot parse address '%.200s': %s (HOST:PORT%s)", v, hostport_why(v),
                 k->kind == OPT_LISTEN ? ", tls://HOST:PORT or unix:///path" : "");
        return;
    }
    rest = v + strlen(url_forms[i].scheme);
    if (strrchr(rest, '@'))
        rest = strrchr(rest, '@') + 1;
    snprintf(why, n, "cannot parse address '%.200s': %s (expected %s%s)", v,
             strcmp(url_forms[i].scheme, "unix://") == 0 ? "a path must start with /"
             : strstr(url_forms[i].scheme, "sentinel") && !strchr(rest, '/')
                 ? "no /NAME (the master's name) after the sentinels"
                 : hostport_why(rest),
             url_forms[i].scheme, url_forms[i].form);
}

static int set_addr(struct px_opts *o, const struct opt_key *k, const char *v, char *why, size_t n)
{
    struct px_addr *a = (struct px_addr *)((char *)o + k->off), parsed;

    if (k->kind == OPT_METRICS && (v[0] == '\0' || strcmp(v, "off") == 0)) {
        memset(a, 0, sizeof(*a));
        return 0;
    }
    if (px_addr_parse(v, &parsed) < 0 || !addr_form_ok(k, v)) {
        addr_why(k, v, why, n);
        return -EINVAL;
    }
    if (parsed.sentinels[0] && parsed.tls) {
        snprintf(why, n,
                 "rediss-sentinel:// (TLS to Redis Sentinel) is not supported: it would take TLS "
                 "to the sentinels and to every node they may name, which is untested; use "
                 "redis-sentinel:// on a trusted network, or rediss:// to a single master");
        return -EINVAL;
    }
    if ((parsed.cluster || parsed.sentinels[0]) && k->kind != OPT_ADDR) {
        snprintf(why, n, "%s is for --upstream only, got '%.200s'",
                 parsed.cluster ? "redis-cluster://" : "redis-sentinel://", v);
        return -EINVAL;
    }
    if (k->kind == OPT_REDLOCK) {
        if (parsed.tls || parsed.path[0] || o->nredlock >= PX_REDLOCK_MAX) {
            snprintf(why, n, "%s",
                     o->nredlock >= PX_REDLOCK_MAX
                         ? "too many masters"
                         : "takes redis://[user:password@]HOST:PORT[/db] only");
            return -EINVAL;
        }
        o->redlock[o->nredlock++] = parsed;
        return 0;
    }
    if (k->kind != OPT_LISTEN) {
        *a = parsed;
        return 0;
    }
    if (o->listen_layer != o->layer) { /* the file's list replaces the defaults, flags the file's */
        o->listen_layer = o->layer;
        o->nlisten = 0;
    }
    if (o->nlisten >= PX_LISTEN_MAX) {
        snprintf(why, n, "at most %u listen addresses", PX_LISTEN_MAX);
        return -EINVAL;
    }
    o->listen[o->nlisten++] = parsed;
    return 0;
}

/* A string setting; the whole field is rewritten, so equal values
 * compare equal (px_opts_diff_restart). */
static int set_str(struct px_opts *o, const struct opt_key *k, const char *v, char *why, size_t n)
{
    char *field = (char *)o + k->off;

    if (strlen(v) >= k->width) {
        snprintf(why, n, "longer than %zu bytes", k->width - 1);
        return -EINVAL;
    }
    memset(field, 0, k->width);
    memcpy(field, v, strlen(v));
    return 0;
}

/* requirepass and user edit o->auth, created on first use. */
static int set_auth(struct px_opts *o, const struct opt_key *k, int nvals, const char *const *vals,
                    char *why, size_t n)
{
    int rc;

    if (!o->auth && !(o->auth = px_auth_create()))
        return -ENOMEM;
    if (k->kind == OPT_PASS)
        rc = px_auth_set_requirepass(o->auth, vals[0]);
    else
        rc = px_auth_set_user(o->auth, nvals, vals, why, n);
    if (rc == -ENOMEM)
        snprintf(why, n, "out of memory");
    return rc;
}

int px_opts_set(struct px_opts *o, const char *key, int nvals, const char *const *vals, char *why,
                size_t n)
{
    const struct opt_key *k = key_find(key);

    if (!k) {
        snprintf(why, n, "unknown setting");
        return -ENOENT;
    }
    if (k->kind == OPT_USER)
        return set_auth(o, k, nvals, vals, why, n);
    if (nvals != 1) {
        snprintf(why, n, "needs exactly one value");
        return -EINVAL;
    }
    switch (k->kind) {
    case OPT_ADDR:
    case OPT_METRICS:
    case OPT_LISTEN:
    case OPT_REDLOCK:
        return set_addr(o, k, vals[0], why, n);
    case OPT_STR:
        return set_str(o, k, vals[0], why, n);
    case OPT_NUM:
        return set_num(o, k, vals[0], why, n);
    case OPT_ENUM:
        return set_enum(o, k, vals[0], why, n);
    case OPT_MODE:
        return set_mode(o, k, vals[0], why, n);
    case OPT_PASS:
        return set_auth(o, k, 1, vals, why, n);
    case OPT_CONFIG:
        if (strlen(vals[0]) >= sizeof(o->config)) {
            snprintf(why, n, "path too long");
            return -EINVAL;
        }
        snprintf(o->config, sizeof(o->config), "%s", vals[0]);
        return 0;
    case OPT_USER:
        break;
    }
    return -EINVAL;
}

/* ---- flags ----------------------------------------------------------------- */

/* Splits a --user value into its rules (in copy). Returns the count or
 * -EINVAL. */
static int split_user(char *copy, char **tok, char *why, size_t n)
{
    int ntok = px_config_split(copy, tok, PX_CONFIG_MAX_ARGS);

    if (ntok < 0)
        snprintf(why, n, "unbalanced quotes or too many rules");
    return ntok;
}

/* "unknown option '--name'", with the flag it most likely meant. */
static void unknown_flag(const char *name, char *msg, size_t n)
{
    const char *near = px_opts_key_suggest(name);

    if (near)
        snprintf(msg, n, "unknown option '--%.64s' (did you mean --%s? see --help)", name, near);
    else
        snprintf(msg, n, "unknown option '--%.64s' (see --help)", name);
}

/* Applies "--name value". */
static int apply_flag(struct px_opts *o, const char *name, const char *v, char *msg, size_t n)
{
    char why[256] = "", *copy = NULL, *tok[PX_CONFIG_MAX_ARGS];
    const char *const *vals = &v;
    int rc = 1;

    if (strcmp(name, "user") == 0) {
        copy = strdup(v);
        if (!copy)
            return -ENOMEM;
        rc = split_user(copy, tok, why, sizeof(why));
        vals = (const char *const *)tok;
    }
    if (rc >= 0)
        rc = px_opts_set(o, name, rc, vals, why, sizeof(why));
    if (rc == -ENOENT)
        unknown_flag(name, msg, n);
    else if (rc < 0)
        snprintf(msg, n, "--%s: %s", name, why);
    free(copy);
    return rc < 0 ? (rc == -ENOMEM ? rc : -EINVAL) : 0;
}

/* Why argument f (not "--name=value", and last or without a value) was
 * refused: an unknown flag, a known one without its value, or no flag. */
static void flag_error(const char *f, char *msg, size_t n)
{
    if (strncmp(f, "--", 2) != 0)
        snprintf(msg, n, "unexpected argument '%.100s' (options start with --; see --help)", f);
    else if (strlen(f) < 64 && key_find(f + 2))
        snprintf(msg, n, "option '%.100s' needs a value (see --help)", f);
    else
        unknown_flag(f + 2, msg, n);
}

/* LOCKPROXY_<KEY> for key ("max-clients": LOCKPROXY_MAX_CLIENTS). */
static void env_name(const char *key, char *out, size_t n)
{
    size_t i, at = (size_t)snprintf(out, n, "LOCKPROXY_");

    for (i = 0; key[i] && at + 1 < n; i++, at++)
        out[at] = key[i] == '-' ? '_' : (char)toupper((unsigned char)key[i]);
    out[at] = '\0';
}

int px_opts_parse_env(struct px_opts *o, char *msg, size_t n)
{
    char name[64], inner[400];
    const char *v;
    size_t i;
    int rc;

    o->layer = 3;
    for (i = 0; i < LP_ARRAY_SIZE(keys); i++) {
        if (keys[i].kind == OPT_CONFIG)
            continue;
        env_name(keys[i].name, name, sizeof(name));
        v = getenv(name);
        if (!v)
            continue;
        rc = apply_flag(o, keys[i].name, v, inner, sizeof(inner));
        if (rc < 0) {
            snprintf(msg, n, "%s: %s", name, inner);
            return rc;
        }
    }
    return 0;
}

int px_opts_parse_flags(struct px_opts *o, int argc, char **argv, char *msg, size_t n)
{
    int i, rc;

    o->layer = 2;
    for (i = 1; i < argc; i++) {
        const char *f = argv[i], *eq = strchr(f, '=');
        char name[64];

        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0 || strcmp(f, "--version") == 0)
            return 1;
        if (strncmp(f, "--", 2) == 0 && eq && (size_t)(eq - f) < sizeof(name)) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - f - 2), f + 2);
            rc = apply_flag(o, name, eq + 1, msg, n);
        } else if (i + 1 < argc && strncmp(f, "--", 2) == 0 && strlen(f) < sizeof(name)) {
            rc = apply_flag(o, f + 2, argv[++i], msg, n);
        } else {
            flag_error(f, msg, n);
            rc = -EINVAL;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

void px_opts_usage(FILE *out, bool help)
{
    if (help)
        fputs(usage_text, out);
    else
        fprintf(out, "lockproxy %s\n", LP_VERSION);
}

int px_opts_parse(struct px_opts *o, int argc, char **argv, FILE *out, FILE *err)
{
    char msg[512];
    int rc = px_opts_parse_flags(o, argc, argv, msg, sizeof(msg));

    if (rc < 0)
        fprintf(err, "lockproxy: %s\n", msg);
    else if (rc == 1)
        px_opts_usage(out, px_opts_wants_help(argc, argv) == 1);
    return rc;
}

int px_opts_wants_help(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
        if (strcmp(argv[i], "--version") == 0)
            return 2;
    }
    return 0;
}

/* True when field k holds the same value in a and b. */
static bool key_same(const struct opt_key *k, const struct px_opts *a, const struct px_opts *b)
{
    const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;

    switch (k->kind) {
    case OPT_LISTEN:
        return a->nlisten == b->nlisten &&
               memcmp(a->listen, b->listen, a->nlisten * sizeof(a->listen[0])) == 0;
    case OPT_REDLOCK:
        return a->nredlock == b->nredlock &&
               memcmp(a->redlock, b->redlock, a->nredlock * sizeof(a->redlock[0])) == 0;
    case OPT_STR:
        return strcmp(pa, pb) == 0;
    case OPT_NUM:
    case OPT_MODE:
        return memcmp(pa, pb, k->width) == 0;
    case OPT_ENUM:
        return memcmp(pa, pb, sizeof(int)) == 0;
    default:
        return memcmp(pa, pb, sizeof(struct px_addr)) == 0;
    }
}

size_t px_opts_diff_restart(const struct px_opts *a, const struct px_opts *b, const char **out,
                            size_t max)
{
    size_t i, n = 0;

    for (i = 0; i < LP_ARRAY_SIZE(keys) && n < max; i++) {
        const struct opt_key *k = &keys[i];

        if (k->reload || k->kind == OPT_CONFIG || k->kind == OPT_PASS || k->kind == OPT_USER)
            continue;
        if (!key_same(k, a, b))
            out[n++] = k->name;
    }
    return n;
}

int px_opts_check(const struct px_opts *o, char *msg, size_t n)
{
    bool tls = false;
    unsigned i;

    for (i = 0; i < o->nlisten; i++)
        tls = tls || o->listen[i].tls;
    if (tls && !o->tls_cert_file[0]) {
        snprintf(msg, n, "a tls:// listener needs --tls-cert-file");
        return -EINVAL;
    }
    if (tls && o->tls_auth_clients != PX_TLS_AUTH_NO && !o->tls_ca_cert_file[0]) {
        snprintf(msg, n,
                 "--tls-auth-clients %s needs --tls-ca-cert-file (or --tls-auth-clients no)",
                 tls_auth_names[o->tls_auth_clients]);
        return -EINVAL;
    }
    if (o->up_tls_key_file[0] && !o->up_tls_cert_file[0]) {
        snprintf(msg, n, "--upstream-tls-key-file needs --upstream-tls-cert-file");
        return -EINVAL;
    }
    if (o->nredlock > 0 && (o->nredlock < 3 || o->nredlock % 2 == 0)) {
        snprintf(msg, n,
                 "--redlock-upstream needs an odd number of independent masters, 3 or more "
                 "(got %u): a majority of an even number tolerates no more failures",
                 o->nredlock);
        return -EINVAL;
    }
    if (o->tls_key_file[0] && !o->tls_cert_file[0]) {
        snprintf(msg, n, "--tls-key-file needs --tls-cert-file");
        return -EINVAL;
    }
    if (o->sync_replicas > 0 && o->sync_timeout_ms >= o->upstream_timeout_ms) {
        snprintf(msg, n,
                 "--sync-timeout %u must be below --upstream-timeout %u (WAIT holds the "
                 "upstream connection for up to --sync-timeout)",
                 o->sync_timeout_ms, o->upstream_timeout_ms);
        return -EINVAL;
    }
    return 0;
}
