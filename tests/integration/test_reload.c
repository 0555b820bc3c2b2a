/* Every setting the README lists as applied on reload (Configuration,
 * "Applied at once on reload"), from one table, both ways: the proxy
 * starts with value a, a SIGHUP with value b in the file must show b's
 * effect, and a second SIGHUP back to a must show a's again. Each effect
 * is observed from outside (a refused client, a closed connection, a log
 * line, a key left in Redis, ...), not read back from the options. The
 * certificate files are covered by tls_sighup_reloads_certificates
 * (test_tls.c); the upstream's TLS keys are not covered.
 * Issue 18 item 13: protected-mode was not applied by a reload. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"
#include "tls_util.h"

#include <net/if.h>

struct rl {
    struct pu_env e;
    redisContext *rc; /* straight to Redis */
    int wport;        /* the 0.0.0.0 listener */
    int tport;        /* the tls:// listener of the TLS rows */
    char ip[64];      /* this host's non-loopback address, "" for none */
    unsigned seq;     /* unique names */
};

/* ---- helpers ---------------------------------------------------------------- */

static size_t file_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    size_t n = 0;

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static void outside_ip(char *out, size_t n)
{
    struct ifaddrs *ifs, *i;

    out[0] = '\0';
    if (getifaddrs(&ifs) < 0)
        return;
    for (i = ifs; i && !out[0]; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) &&
            (i->ifa_flags & IFF_UP))
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
    }
    freeifaddrs(ifs);
}

/* A fresh proxy client; NULL if it cannot connect. */
static redisContext *client(struct rl *r)
{
    return pu_try_connect(r->e.proxy.port);
}

/* The reply to cmd on a fresh connection is an error containing needle
 * (NULL: any error, or the connection closed). */
static bool fresh_error(struct rl *r, const char *needle, const char *fmt, const char *arg)
{
    redisContext *c = client(r);
    redisReply *rep;
    bool hit;

    ASSERT_TRUE(c != NULL);
    rep = redisCommand(c, fmt, arg);
    hit = !rep || (rep->type == REDIS_REPLY_ERROR && (!needle || strstr(rep->str, needle)));
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return hit;
}

/* True if c is closed by the proxy within ms. */
static bool closed_within(redisContext *c, int ms)
{
    bool closed = false;
    redisReply *rep;

    pu_sleep_ms(ms);
    rep = redisCommand(c, "PING");
    closed = !rep || rep->type == REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    return closed;
}

static long long proxy_info(struct rl *r, const char *field)
{
    redisContext *c = client(r);
    long long v;

    ASSERT_TRUE(c != NULL);
    v = pu_info_int(c, field);
    redisFree(c);
    return v;
}

/* Sends `copies` ECHO requests of 60000 bytes on a socket that never
 * reads, as far as the proxy takes them within 3 s; returns the socket. */
static int flood_unread(struct rl *r, int copies)
{
    static const char head[] = "*2\r\n$4\r\nECHO\r\n$60000\r\n";
    static char req[60100];
    const size_t hlen = sizeof(head) - 1;
    int fd = pu_raw_connect(r->e.proxy.port);
    size_t len, off;
    long long deadline = pu_now_ms() + 3000;
    int i;

    memcpy(req, head, hlen);
    memset(req + hlen, 'x', 60000);
    memcpy(req + hlen + 60000, "\r\n", 2);
    len = hlen + 60000 + 2;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (i = 0; i < copies && pu_now_ms() < deadline; i++) {
        for (off = 0; off < len && pu_now_ms() < deadline;) {
            ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);

            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                return fd; /* closed by the proxy */
            else
                pu_sleep_ms(2);
        }
    }
    pu_sleep_ms(300);
    return fd;
}

/* ---- probes: true when the setting's value b is in effect ------------------- */

static bool log_level_debug(struct rl *r)
{
    size_t before = file_count(r->e.proxy.log_path, "protocol error");
    int fd = pu_raw_connect(r->e.proxy.port);

    pu_raw_send(fd, "*x\r\n", 4); /* logged at debug */
    pu_raw_wait_closed(fd, 2000);
    close(fd);
    pu_sleep_ms(200);
    return file_count(r->e.proxy.log_path, "protocol error") > before;
}

static bool protected_off(struct rl *r)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->wport)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char line[2048] = "";

    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(inet_pton(AF_INET, r->ip, &sin.sin_addr), 1);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
        TEST_FAIL("connect %s:%d: %s", r->ip, r->wport, strerror(errno));
    pu_raw_send(fd, "PING\r\n", 6);
    pu_raw_read_line(fd, line, sizeof(line), 3000);
    close(fd);
    if (strncmp(line, "+PONG", 5) != 0 && strncmp(line, "-DENIED", 7) != 0)
        TEST_FAIL("outside client: want +PONG or -DENIED, got '%s'", line);
    return line[0] == '+';
}

static bool protected_on(struct rl *r)
{
    return !protected_off(r);
}

static bool auth_on(struct rl *r)
{
    return fresh_error(r, "NOAUTH", "LOCK.INFO %s", "rp");
}

static bool user_exists(struct rl *r)
{
    redisContext *c = client(r);
    redisReply *rep;
    bool ok;

    ASSERT_TRUE(c != NULL);
    rep = redisCommand(c, "AUTH %s %s", "u", "p");
    ok = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0;
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return ok;
}

static bool max_clients_3(struct rl *r)
{
    redisContext *c[4];
    bool refused = false;
    int i;

    for (i = 0; i < 4; i++) {
        redisReply *rep;

        c[i] = client(r);
        rep = c[i] ? redisCommand(c[i], "PING") : NULL;
        refused |= !rep || rep->type == REDIS_REPLY_ERROR;
        if (rep)
            freeReplyObject(rep);
    }
    for (i = 0; i < 4; i++) {
        if (c[i])
            redisFree(c[i]);
    }
    pu_sleep_ms(100); /* the proxy sees the closes before the next probe */
    return refused;
}

static bool disconnect_expires(struct rl *r)
{
    redisContext *c = client(r);
    char name[32];
    bool left;

    snprintf(name, sizeof(name), "od%u", r->seq++);
    PU_OK(c, "LOCK %s", name);
    redisFree(c);
    pu_sleep_ms(300);
    left = pu_exists(r->rc, name);
    freeReplyObject(redisCommand(r->rc, "DEL %s", name));
    return left;
}

static bool linger_long(struct rl *r)
{
    redisContext *c1 = client(r), *c2 = client(r);
    long long before = proxy_info(r, "pubsub_channels");
    char name[32];

    snprintf(name, sizeof(name), "sl%u", r->seq++);
    PU_OK(c1, "LOCK %s", name);
    PU_NIL(c2, "LOCK %s WAIT %d", name, 100); /* subscribes to the name's channel */
    PU_INT(c1, 1, "UNLOCK %s", name);
    redisFree(c1);
    redisFree(c2);
    pu_sleep_ms(400);
    return proxy_info(r, "pubsub_channels") > before;
}

static bool request_bytes_small(struct rl *r)
{
    static char big[3001];

    memset(big, 'x', 3000);
    return fresh_error(r, "max-request-bytes", "ECHO %s", big);
}

static bool args_few(struct rl *r)
{
    return fresh_error(r, "max-args", "PING a b c d e f g h i %s", "j");
}

/* The bytes the kernel holds unread on the proxy's end of c (ss's
 * Recv-Q); skips the test when ss cannot tell. */
static long recv_queue(struct rl *r, redisContext *c)
{
    struct sockaddr_in me;
    socklen_t mlen = sizeof(me);
    char cmd[200], out[1024] = "";
    long q = -1;
    FILE *p;

    ASSERT_EQ(getsockname(c->fd, (struct sockaddr *)&me, &mlen), 0);
    snprintf(cmd, sizeof(cmd),
             "ss -tnH state established '( sport = :%d and dport = :%d )' 2>/dev/null",
             r->e.proxy.port, ntohs(me.sin_port));
    p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    if (fgets(out, sizeof(out), p) == NULL || sscanf(out, "%ld", &q) != 1)
        q = -1;
    pclose(p);
    if (q < 0)
        TEST_SKIP("ss shows no Recv-Q for the connection: '%s'", out);
    return q;
}

/* With max-pipeline 1, a request behind one that waits is not read: its
 * bytes stay in the kernel. */
static bool pipeline_one(struct rl *r)
{
    redisContext *c1 = client(r), *c2 = client(r);
    char name[32];
    bool one;

    snprintf(name, sizeof(name), "mp%u", r->seq++);
    PU_OK(c1, "LOCK %s", name);
    pu_send(c2, "LOCK %s WAIT 3000", name);
    pu_sleep_ms(100); /* taken: the connection has max-pipeline 1 request outstanding */
    pu_send(c2, "LOCK.INFO %s", "other");
    pu_sleep_ms(200);
    one = recv_queue(r, c2) > 0;
    PU_INT(c1, 1, "UNLOCK %s", name);
    PU_RECV(c2, PU_K_STATUS, 0, "OK");
    freeReplyObject(pu_recv(c2));
    PU_INT(c2, 1, "UNLOCK %s", name);
    redisFree(c1);
    redisFree(c2);
    return one;
}

static bool output_soft_on(struct rl *r)
{
    long long before = proxy_info(r, "client_output_pauses");
    int fd = flood_unread(r, 300);
    bool paused = proxy_info(r, "client_output_pauses") > before;

    close(fd);
    pu_sleep_ms(200);
    return paused;
}

static bool output_hard_small(struct rl *r)
{
    long long before = proxy_info(r, "client_output_buffer_limit_disconnections");
    int fd = flood_unread(r, 300);
    bool closed = proxy_info(r, "client_output_buffer_limit_disconnections") > before;

    close(fd);
    pu_sleep_ms(200);
    return closed;
}

static bool timeout_on(struct rl *r)
{
    redisContext *c = client(r);
    bool closed = closed_within(c, 2500);

    redisFree(c);
    return closed;
}

static bool auth_timeout_on(struct rl *r)
{
    return timeout_on(r); /* the client never authenticates */
}

static bool keepalive_on(struct rl *r)
{
    redisContext *c = client(r);
    char cmd[160], out[4096] = "";
    FILE *p;
    size_t n;

    snprintf(cmd, sizeof(cmd), "ss -tnoH state established '( sport = :%d )' 2>/dev/null",
             r->e.proxy.port);
    p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    redisFree(c);
    if (!strstr(out, "127.0.0.1"))
        TEST_SKIP("ss shows no connection here: %s", out);
    return strstr(out, "keepalive") != NULL;
}

/* A TLS client without a certificate is refused. */
static bool tls_client_cert_required(struct rl *r)
{
    const struct tu_opts o = {tu_certs()->ca.cert, NULL, NULL, "localhost"};
    char err[256];

    return !tu_ping(r->tport, &o, err, sizeof(err));
}

/* A TCP client that never starts its handshake is closed within 1 s. */
static bool tls_handshake_short(struct rl *r)
{
    int fd = pu_raw_connect(r->tport);
    bool closed = pu_raw_wait_closed(fd, 1000);

    close(fd);
    return closed;
}

/* A grant that waits for a replica this Redis does not have is refused. */
static bool sync_on(struct rl *r)
{
    redisContext *c = client(r);
    redisReply *rep;
    char name[32];
    bool refused;

    snprintf(name, sizeof(name), "sr%u", r->seq++);
    rep = pu_cmd(c, "LOCK %s WAIT 0", name);
    refused = rep->type == REDIS_REPLY_ERROR;
    freeReplyObject(rep);
    if (!refused)
        PU_INT(c, 1, "UNLOCK %s", name);
    redisFree(c);
    return refused;
}

static bool sync_timeout_long(struct rl *r)
{
    long long t0 = pu_now_ms();

    ASSERT_TRUE(sync_on(r)); /* refused either way: how long it waited tells */
    return pu_now_ms() - t0 >= 1000;
}

/* A command MULTI would queue past a tiny bound is refused. */
static bool climem_small(struct rl *r)
{
    redisContext *c = client(r);
    redisReply *rep;
    bool refused;

    PU_OK(c, "MULTI");
    rep = pu_cmd(c, "ECHO %s", "queued-past-the-bound");
    refused = pu_is_err(rep, "OOM");
    freeReplyObject(rep);
    freeReplyObject(pu_cmd(c, "DISCARD"));
    redisFree(c);
    return refused;
}

static bool latency_threshold_low(struct rl *r)
{
    redisContext *c = client(r);
    long long ms = pu_info_int(c, "latency_monitor_threshold_ms");

    redisFree(c);
    return ms == 1;
}

/* A forwarded command is refused as unknown (--passthrough off). */
static bool passthrough_off(struct rl *r)
{
    redisContext *c = client(r);
    redisReply *rep = pu_cmd(c, "GET %s", "pt-reload");
    bool off = pu_is_err(rep, "ERR unknown command");

    freeReplyObject(rep);
    redisFree(c);
    return off;
}

/* ---- the table -------------------------------------------------------------- */

struct reload_case {
    const char *key;
    const char *a, *b;         /* values; NULL: the key is not in the file */
    const char *base;          /* other lines the case needs */
    bool (*in_b)(struct rl *); /* b's effect is seen */
    bool outside;              /* needs a non-loopback address */
    bool tls;                  /* needs a tls:// listener (test certificates) */
};

static const struct reload_case cases[] = {
    {"log-level", "info", "debug", "", log_level_debug, false, false},
    {"passthrough", "on", "off", "", passthrough_off, false, false},
    {"protected-mode", "yes", "no", "", protected_off, true, false},
    {"protected-mode", "no", "yes", "", protected_on, true, false}, /* the other way first */
    {"requirepass", NULL, "pw", "", auth_on, false, false},
    {"user", NULL, "u on >p ~*", "", user_exists, false, false},
    {"max-clients", "10000", "3", "", max_clients_3, false, false},
    {"on-disconnect", "release", "expire", "", disconnect_expires, false, false},
    {"subscription-linger", "0", "60000", "", linger_long, false, false},
    {"max-request-bytes", "65536", "2048", "", request_bytes_small, false, false},
    {"max-args", "64", "8", "", args_few, false, false},
    {"max-pipeline", "1024", "1", "", pipeline_one, false, false},
    {"client-output-soft-limit", "0", "262144", "client-output-hard-limit 0\n", output_soft_on,
     false, false},
    {"client-output-hard-limit", "0", "1000000", "client-output-soft-limit 0\n", output_hard_small,
     false, false},
    {"timeout", "0", "1", "", timeout_on, false, false},
    {"auth-timeout", "0", "1", "requirepass pw\n", auth_timeout_on, false, false},
    {"tcp-keepalive", "0", "7", "", keepalive_on, false, false},
    {"max-client-memory", "1073741824", "1", "", climem_small, false, false},
    {"latency-monitor-threshold", "100", "1", "", latency_threshold_low, false, false},
    {"sync-replicas", "0", "1", "sync-timeout 100\n", sync_on, false, false},
    {"sync-timeout", "100", "1500", "sync-replicas 1\n", sync_timeout_long, false, false},
    {"tls-auth-clients", "no", "yes", "", tls_client_cert_required, false, true},
    {"tls-handshake-timeout", "10000", "300", "tls-auth-clients no\n", tls_handshake_short, false,
     true},
};

/* Reloadable keys whose reload this table does not drive: the certificate
 * files (tls_sighup_reloads_certificates in test_tls.c rotates them) and
 * the upstream's TLS keys (not checked by reload anywhere yet). */
static const char *const elsewhere[] = {"tls-cert-file", "tls-key-file", "tls-ca-cert-file",
                                        "upstream-tls-*"};

static bool in_table(const char *key)
{
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(cases[i].key, key) == 0)
            return true;
    }
    for (i = 0; i < sizeof(elsewhere) / sizeof(elsewhere[0]); i++) {
        if (strcmp(elsewhere[i], key) == 0)
            return true;
    }
    return false;
}

/* Reads the file at root/rel into buf (NUL-terminated); false if absent. */
static bool read_repo_file(const char *root, const char *rel, char *buf, size_t n)
{
    char path[PU_PATH_MAX + 64];
    FILE *f;
    size_t got;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (!(f = fopen(path, "r")))
        return false;
    got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return true;
}

/* The repository root: the first directory up from the working directory
 * (ctest runs in the build tree) with README.md and deploy/lockproxy.conf. */
static bool repo_root(char *root, size_t n)
{
    char dir[PU_PATH_MAX], probe[PU_PATH_MAX + 32];
    int up;

    if (!getcwd(dir, sizeof(dir)))
        return false;
    for (up = 0; up < 6; up++) {
        snprintf(probe, sizeof(probe), "%s/deploy/lockproxy.conf", dir);
        if (access(probe, R_OK) == 0) {
            snprintf(root, n, "%s", dir);
            return true;
        }
        if (!strrchr(dir, '/') || strrchr(dir, '/') == dir)
            return false;
        *strrchr(dir, '/') = '\0';
    }
    return false;
}

/* Every key of the README's "Applied at once on reload" cell has a row
 * (or is listed in elsewhere), and deploy/lockproxy.conf's reload
 * paragraph names it too. */
TEST(reload_table_covers_readme)
{
    static char readme[1 << 20], conf[1 << 16];
    char root[PU_PATH_MAX], key[64];
    const char *row, *end, *p;
    char *para;
    unsigned keys = 0;

    if (!repo_root(root, sizeof(root)) ||
        !read_repo_file(root, "README.md", readme, sizeof(readme)) ||
        !read_repo_file(root, "deploy/lockproxy.conf", conf, sizeof(conf)))
        TEST_SKIP("README.md and deploy/lockproxy.conf not found above the working directory");
    row = strstr(readme, "| Applied at once on reload |");
    ASSERT_TRUE(row != NULL);
    row = strstr(row, "\n| `"); /* past the separator row: the cell */
    ASSERT_TRUE(row != NULL);
    end = strstr(row + 3, " | "); /* the end of the first cell */
    ASSERT_TRUE(end != NULL);
    para = strstr(conf, "# Reload:");
    ASSERT_TRUE(para != NULL);
    if (strstr(para, "\n\n"))
        *strstr(para, "\n\n") = '\0'; /* the paragraph only */
    for (p = strchr(row, '`'); p && p < end; p = strchr(p + 1, '`')) {
        const char *q = strchr(p + 1, '`');
        size_t len = (size_t)(q - p - 1);

        ASSERT_TRUE(q != NULL && len < sizeof(key));
        memcpy(key, p + 1, len);
        key[len] = '\0';
        p = q;
        keys++;
        if (!in_table(key))
            TEST_FAIL("README lists '%s' as applied on reload; test_reload.c has no row for it",
                      key);
        if (strncmp(key, "tls-", 4) != 0 && strncmp(key, "upstream-tls-", 13) != 0 &&
            !strstr(para, key))
            TEST_FAIL("README lists '%s' as applied on reload; deploy/lockproxy.conf's reload "
                      "paragraph does not",
                      key);
    }
    ASSERT_TRUE(keys >= 17);
}

static void write_conf(const char *path, const struct reload_case *k, const char *value)
{
    char tls[1024] = "";

    if (k->tls) {
        const struct tc_certs *c = tu_certs();

        snprintf(tls, sizeof(tls), "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n",
                 c->server.cert, c->server.key, c->ca.cert);
    }
    if (value)
        ou_write_file(path, "%s%s%s %s\n", tls, k->base, k->key, value);
    else
        ou_write_file(path, "%s%s", tls, k->base);
}

/* SIGHUP, then waits for the reload's log line (the n-th). */
static void reload(struct rl *r, size_t n)
{
    kill(r->e.proxy.pid, SIGHUP);
    PU_EVENTUALLY(file_count(r->e.proxy.log_path, "config reloaded from") == n, 5000);
    ASSERT_EQ(file_count(r->e.proxy.log_path, "config reload failed"), 0);
}

static char failures[4096]; /* what every case got wrong, reported at the end */

/* The value in effect must be `want_b` (true: b); a miss is recorded. */
static void expect_effect(struct rl *r, const struct reload_case *k, bool want_b, const char *when)
{
    const char *want = want_b ? k->b : k->a, *got = want_b ? k->a : k->b;
    size_t len = strlen(failures);

    if (k->in_b(r) == want_b)
        return;
    snprintf(failures + len, sizeof(failures) - len,
             "\n  %s: %s the effect of '%s %s' is not seen (that of '%s %s' is)", k->key, when,
             k->key, want ? want : "(unset)", k->key, got ? got : "(unset)");
    fprintf(stderr, "MISS%s\n", failures + len);
}

static void run_case(struct rl *r, const struct reload_case *k, size_t idx)
{
    char conf[PU_PATH_MAX], log[64], listen[32], tlisten[48], name[48];
    const char *extra[] = {"--config", conf, "--listen", listen, "--listen", tlisten, NULL};

    fprintf(stderr, "-- %s: %s -> %s -> %s\n", k->key, k->a ? k->a : "(unset)",
            k->b ? k->b : "(unset)", k->a ? k->a : "(unset)");
    snprintf(name, sizeof(name), "reload-%zu.conf", idx);
    ou_path(conf, sizeof(conf), name);
    snprintf(log, sizeof(log), "reload-%zu.log", idx);
    r->wport = pu_free_port();
    snprintf(listen, sizeof(listen), "0.0.0.0:%d", r->wport);
    r->tport = pu_free_port();
    snprintf(tlisten, sizeof(tlisten), "tls://127.0.0.1:%d", r->tport);
    if (!k->tls)
        extra[4] = NULL; /* no tls:// listener without certificates */
    write_conf(conf, k, k->a);
    memset(&r->e.proxy, 0, sizeof(r->e.proxy));
    ou_path(r->e.proxy.log_path, sizeof(r->e.proxy.log_path), log);
    ou_env_start(&r->e, "epoll", extra);
    expect_effect(r, k, false, "at start,");
    write_conf(conf, k, k->b);
    reload(r, 1);
    expect_effect(r, k, true, "after a reload,");
    write_conf(conf, k, k->a);
    reload(r, 2);
    expect_effect(r, k, false, "after a reload back,");
    pu_proxy_stop(&r->e.proxy);
}

TEST(reload_every_reloadable_setting)
{
    static struct rl r;
    size_t i;

    memset(&r, 0, sizeof(r));
    outside_ip(r.ip, sizeof(r.ip));
    pu_redis_start(&r.e.redis);
    r.rc = pu_redis_client(&r.e);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].outside && !r.ip[0]) {
            fprintf(stderr, "SKIP (%s): no non-loopback IPv4 address here\n", cases[i].key);
            continue;
        }
        run_case(&r, &cases[i], i);
    }
    redisFree(r.rc);
    pu_redis_kill(&r.e.redis);
    if (failures[0])
        TEST_FAIL("settings the README calls reloadable that a reload did not apply:%s", failures);
}

TEST_MAIN(TEST_CASE(reload_every_reloadable_setting), TEST_CASE(reload_table_covers_readme))
