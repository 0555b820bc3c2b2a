/* TLS on both sides of the proxy, against a real TLS-only redis-server
 * (--port 0 --tls-port P) and real TLS clients (OpenSSL, redis-cli --tls):
 * a plain unix socket and a tls:// listener at once, LOCK/UNLOCK and a
 * blocking LOCK woken over TLS, tls-auth-clients yes/optional/no, wrong,
 * expired and unknown certificates on both sides with their reasons in
 * INFO and the log, SIGHUP certificate reload (a bad file keeps the old
 * one), the handshake deadline, garbage before and after the handshake,
 * and start-up errors. The scenarios that move traffic run on both io
 * backends. */
#include <sys/wait.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy_util.h"
#include "tls_util.h"

#define REDIS_CLI "/usr/bin/redis-cli"

/* One proxy with a unix socket and a tls:// listener. */
struct tenv {
    struct pu_proxy proxy;
    int tls_port;
    char tls_listen[64];
    char upstream[PU_PATH_MAX];
    const char *args[PU_MAX_ARGS];
    int nargs;
};

static void arg(struct tenv *e, const char *a)
{
    if (e->nargs + 1 >= PU_MAX_ARGS)
        TEST_FAIL("too many proxy arguments");
    e->args[e->nargs++] = a;
    e->args[e->nargs] = NULL;
}

/* The proxy with --io backend, a unix socket (its readiness check), a
 * tls:// listener with the test server certificate, upstream URL, and
 * extra arguments (NULL-terminated, may be NULL). */
static void proxy_start(struct tenv *e, const char *backend, const char *upstream,
                        const char *const *extra)
{
    const struct tc_certs *c = tu_certs();
    static int seq;

    memset(e, 0, sizeof(*e));
    e->tls_port = pu_free_port();
    snprintf(e->tls_listen, sizeof(e->tls_listen), "tls://127.0.0.1:%d", e->tls_port);
    snprintf(e->proxy.unix_path, sizeof(e->proxy.unix_path), "%s/lp-%d.sock", pu_tmpdir(), ++seq);
    snprintf(e->proxy.upstream, sizeof(e->proxy.upstream), "%s", upstream);
    arg(e, "--io");
    arg(e, backend);
    arg(e, "--log-level");
    arg(e, "debug");
    arg(e, "--listen");
    arg(e, e->tls_listen);
    arg(e, "--tls-cert-file");
    arg(e, c->server.cert);
    arg(e, "--tls-key-file");
    arg(e, c->server.key);
    arg(e, "--tls-ca-cert-file");
    arg(e, c->ca.cert);
    arg(e, "--upstream-tls-ca-cert-file");
    arg(e, c->ca.cert);
    for (int i = 0; extra && extra[i]; i++)
        arg(e, extra[i]);
    memcpy(e->proxy.extra, e->args, sizeof(e->proxy.extra));
    pu_proxy_start(&e->proxy);
}

static void proxy_stop(struct tenv *e)
{
    pu_proxy_assert_alive(&e->proxy);
    pu_proxy_stop(&e->proxy);
}

static redisContext *unix_client(struct tenv *e)
{
    return pu_connect_unix(e->proxy.unix_path);
}

/* A TLS client of the proxy that verifies it (CA, name localhost). */
static struct tu_conn *tls_client(struct tenv *e, const char *cert, const char *key)
{
    const struct tc_certs *c = tu_certs();
    struct tu_opts o = {.ca = c->ca.cert, .cert = cert, .key = key, .name = "localhost"};
    char err[256];
    struct tu_conn *conn = tu_connect(e->tls_port, &o, err, sizeof(err));

    if (!conn)
        TEST_FAIL("TLS connect to the proxy: %s", err);
    return conn;
}

static void expect_reply(redisReply *r, enum pu_kind kind, long long i, const char *s,
                         const struct tu_conn *c)
{
    if (!r)
        TEST_FAIL("no reply: %s", tu_error(c));
    PU_CHECK(r, kind, i, s);
    freeReplyObject(r);
}

static const char *each_backend(int i)
{
    const char *only = getenv("LP_IT_BACKENDS");
    const char *b = i == 0 ? "epoll" : i == 1 ? "uring" : NULL;

    if (!b || (only && !strstr(only, b)))
        return NULL;
    if (i == 1 && !pu_uring_available()) {
        fprintf(stderr, "io_uring unavailable here: uring half skipped\n");
        return NULL;
    }
    return b;
}

#define FOR_EACH_BACKEND(b)           \
    for (int bi_ = 0; bi_ < 2; bi_++) \
        for (const char *b = each_backend(bi_); b; b = NULL)

static void upstream_url(char *buf, size_t n, const char *scheme_host, int port)
{
    snprintf(buf, n, "%s:%d", scheme_host, port);
}

/* redis-cli with args; returns its output in out. */
static int run_cli(char *out, size_t n, const char *const *args)
{
    const char *argv[32];
    int i = 0;

    if (access(REDIS_CLI, X_OK) != 0)
        TEST_SKIP("%s not found", REDIS_CLI);
    argv[i++] = REDIS_CLI;
    for (int j = 0; args[j] && i < 31; j++)
        argv[i++] = args[j];
    argv[i] = NULL;
    return pu_run_capture(argv, out, n, 15000);
}

/* ---- TLS on both sides: traffic ------------------------------------------- */

static void both_sides(const char *backend)
{
    const struct tc_certs *c = tu_certs();
    const char *extra[] = {"--upstream-tls-cert-file",
                           c->client.cert,
                           "--upstream-tls-key-file",
                           c->client.key,
                           "--tls-auth-clients",
                           "no",
                           NULL};
    struct tu_redis redis = {0};
    struct tu_conn *a, *b, *direct;
    struct tenv e;
    redisContext *u;
    redisReply *r;
    char url[128], port[16], out[4096], big[60000];
    bool closed;

    /* The TLS-only Redis requires a client certificate: the proxy's. */
    tu_redis_start(&redis, &c->server, "yes");
    upstream_url(url, sizeof(url), "rediss://localhost", redis.port);
    proxy_start(&e, backend, url, extra);
    u = unix_client(&e);
    PU_OK(u, "LOCK plain-side");
    ASSERT_EQ(pu_info_int(u, "upstream_tls"), 1);
    ASSERT_EQ(pu_info_int(u, "tls_listeners"), 1);

    a = tls_client(&e, NULL, NULL);
    b = tls_client(&e, NULL, NULL);
    expect_reply(tu_cmd(a, "LOCK w"), PU_K_STATUS, 0, "OK", a);
    ASSERT_EQ(tu_send(b, "LOCK w"), 0);
    r = tu_recv(b, 300, &closed); /* blocked behind a */
    ASSERT_NULL(r);
    ASSERT_TRUE(!closed);
    expect_reply(tu_cmd(a, "UNLOCK w"), PU_K_INT, 1, NULL, a);
    r = tu_recv(b, 10000, &closed);
    expect_reply(r, PU_K_STATUS, 0, "OK", b); /* woken over TLS */
    /* The lock is in Redis, written over TLS. */
    direct = tu_redis_client(&redis);
    expect_reply(tu_cmd(direct, "HLEN w"), PU_K_INT, 1, NULL, direct);
    expect_reply(tu_cmd(b, "UNLOCK w"), PU_K_INT, 1, NULL, b);
    expect_reply(tu_cmd(direct, "EXISTS w"), PU_K_INT, 0, NULL, direct);
    /* A request over several TLS records, and a pipeline. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_reply(tu_cmd(a, "ECHO %s", big), PU_K_STR, 0, big, a);
    for (int i = 0; i < 500; i++)
        ASSERT_EQ(tu_send(a, "TRYLOCK p%d", i % 50), 0);
    for (int i = 0; i < 500; i++) {
        r = tu_recv(a, 10000, &closed);
        if (!r)
            TEST_FAIL("pipeline reply %d: %s", i, tu_error(a));
        ASSERT_TRUE(r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    /* redis-cli --tls against the proxy. */
    snprintf(port, sizeof(port), "%d", e.tls_port);
    {
        const char *args[] = {"--tls", "--cacert", c->ca.cert, "-h",       "localhost",
                              "-p",    port,       "LOCK",     "from-cli", NULL};

        ASSERT_EQ(run_cli(out, sizeof(out), args), 0);
        if (!strstr(out, "OK"))
            TEST_FAIL("redis-cli --tls LOCK: %s", out);
    }
    ASSERT_TRUE(pu_info_int(u, "tls_handshakes") >= 3);
    ASSERT_TRUE(pu_info_int(u, "upstream_tls_handshakes") >= 3); /* 2 command + pub/sub */
    ASSERT_EQ(pu_info_int(u, "tls_handshake_failures"), 0);
    tu_close(a);
    tu_close(b);
    tu_close(direct);
    redisFree(u);
    proxy_stop(&e);
    tu_redis_stop(&redis);
}

TEST(tls_both_sides)
{
    FOR_EACH_BACKEND(b)
    {
        fprintf(stderr, "-- backend %s\n", b);
        both_sides(b);
    }
}

/* ---- tls-auth-clients ----------------------------------------------------- */

/* PING over TLS with cert (may be NULL) works, or fails with want in the
 * reason. */
static void expect_ping(struct tenv *e, const struct tc_pair *cert, const char *want)
{
    const struct tc_certs *c = tu_certs();
    struct tu_opts o = {.ca = c->ca.cert,
                        .cert = cert ? cert->cert : NULL,
                        .key = cert ? cert->key : NULL,
                        .name = "localhost"};
    char err[256] = "";
    bool ok = tu_ping(e->tls_port, &o, err, sizeof(err));

    if (!want && !ok)
        TEST_FAIL("PING with %s failed: %s", cert ? cert->cert : "no certificate", err);
    if (want && ok)
        TEST_FAIL("PING with %s worked; expected \"%s\"", cert ? cert->cert : "no certificate",
                  want);
    if (want && !strstr(err, want))
        TEST_FAIL("PING with %s: \"%s\" lacks \"%s\"", cert ? cert->cert : "no certificate", err,
                  want);
}

static void auth_modes(const char *backend)
{
    const struct tc_certs *c = tu_certs();
    const char *yes[] = {"--tls-auth-clients", "yes", NULL};
    const char *optional[] = {"--tls-auth-clients", "optional", NULL};
    const char *no[] = {"--tls-auth-clients", "no", NULL};
    struct pu_redis redis = {0};
    struct tenv e;
    redisContext *u;
    char url[64];

    pu_redis_start(&redis);
    upstream_url(url, sizeof(url), "redis://127.0.0.1", redis.port);

    proxy_start(&e, backend, url, yes);
    expect_ping(&e, &c->client, NULL);
    expect_ping(&e, NULL, "certificate required");
    expect_ping(&e, &c->other_client, "unknown ca");
    expect_ping(&e, &c->client_expired, "certificate expired");
    u = unix_client(&e);
    PU_EVENTUALLY(pu_info_int(u, "tls_handshake_failures") == 3, 10000);
    ASSERT_TRUE(tu_file_has(e.proxy.log_path, "peer did not return a certificate"));
    redisFree(u);
    proxy_stop(&e);

    proxy_start(&e, backend, url, optional);
    expect_ping(&e, NULL, NULL);
    expect_ping(&e, &c->client, NULL);
    expect_ping(&e, &c->client_expired, "certificate expired");
    proxy_stop(&e);

    proxy_start(&e, backend, url, no);
    expect_ping(&e, NULL, NULL);
    expect_ping(&e, &c->client_expired, NULL); /* not asked for, so not sent */
    proxy_stop(&e);
    pu_redis_kill(&redis);
}

TEST(tls_auth_clients_modes)
{
    FOR_EACH_BACKEND(b)
    {
        fprintf(stderr, "-- backend %s\n", b);
        auth_modes(b);
    }
}

/* ---- upstream certificate errors ---------------------------------------- */

/* A proxy in front of a TLS Redis presenting cert, with upstream URL host
 * and extra flags: LOCK answers (want NULL) or fails with UPSTREAM while
 * INFO upstream_last_error and the log hold want. */
static void upstream_case(const char *backend, const struct tc_pair *cert, const char *redis_auth,
                          const char *host, const char *const *extra, const char *want)
{
    struct tu_redis redis = {0};
    struct tenv e;
    redisContext *u;
    char url[128], last[256] = "";
    long long deadline;

    tu_redis_start(&redis, cert, redis_auth);
    snprintf(url, sizeof(url), "rediss://%s:%d", host, redis.port);
    proxy_start(&e, backend, url, extra);
    u = unix_client(&e);
    if (!want) {
        PU_OK(u, "LOCK up");
        PU_INT(u, 1, "UNLOCK up");
        goto out;
    }
    deadline = pu_now_ms() + 10000;
    while (!pu_info_str(u, "upstream_last_error", last, sizeof(last)) || !strstr(last, want)) {
        if (pu_now_ms() > deadline)
            TEST_FAIL("upstream_last_error \"%s\" lacks \"%s\"", last, want);
        pu_sleep_ms(20);
    }
    fprintf(stderr, "upstream_last_error:%s\n", last);
    ASSERT_TRUE(strncmp(last, "TLS: ", 5) == 0);
    PU_ERR(u, "UPSTREAM", "LOCK up WAIT 0");
    ASSERT_TRUE(tu_file_has(e.proxy.log_path, want));
    ASSERT_TRUE(pu_info_int(u, "upstream_tls_handshake_failures") >= 1);
out:
    redisFree(u);
    proxy_stop(&e);
    tu_redis_stop(&redis);
}

static void upstream_errors(const char *backend)
{
    const struct tc_certs *c = tu_certs();
    const char *with_cert[] = {"--upstream-tls-cert-file", c->client.cert,
                               "--upstream-tls-key-file", c->client.key, NULL};
    const char *override[] = {"--upstream-tls-server-name", "wrong.example", NULL};

    upstream_case(backend, &c->expired, "no", "localhost", NULL,
                  "certificate verify failed: certificate has expired");
    upstream_case(backend, &c->wrong_host, "no", "localhost", NULL,
                  "certificate verify failed: hostname mismatch");
    upstream_case(backend, &c->other_server, "no", "localhost", NULL, "certificate verify failed");
    /* The server wants a client certificate and the proxy has none. */
    upstream_case(backend, &c->server, "yes", "localhost", NULL, "certificate required");
    /* What works: a client certificate; an IP URL checked against the
     * certificate's IP address; a server-name override. */
    upstream_case(backend, &c->server, "yes", "localhost", with_cert, NULL);
    upstream_case(backend, &c->server, "no", "127.0.0.1", NULL, NULL);
    upstream_case(backend, &c->wrong_host, "no", "127.0.0.1", override, NULL);
}

TEST(tls_upstream_certificate_errors)
{
    FOR_EACH_BACKEND(b)
    {
        fprintf(stderr, "-- backend %s\n", b);
        upstream_errors(b);
    }
}

/* ---- SIGHUP reload -------------------------------------------------------- */

static void cn_of_new_connection(struct tenv *e, char *cn, size_t n)
{
    struct tu_conn *t = tls_client(e, NULL, NULL);

    tu_peer_cn(t, cn, n);
    expect_reply(tu_cmd(t, "PING"), PU_K_STATUS, 0, "PONG", t);
    tu_close(t);
}

TEST(tls_sighup_reloads_certificates)
{
    const struct tc_certs *c = tu_certs();
    struct tc_pair live;
    const char *extra[] = {
        "--tls-auth-clients", "no", "--tls-cert-file", live.cert, "--tls-key-file", live.key, NULL};
    struct pu_redis redis = {0};
    struct tu_conn *old;
    struct tenv e;
    redisContext *u;
    char url[64], cn[128];
    FILE *f;

    snprintf(live.cert, sizeof(live.cert), "%.200s/live.pem", c->dir);
    snprintf(live.key, sizeof(live.key), "%.200s/live.key", c->dir);
    ASSERT_OK(tc_copy(c->server.cert, live.cert));
    ASSERT_OK(tc_copy(c->server.key, live.key));
    pu_redis_start(&redis);
    upstream_url(url, sizeof(url), "redis://127.0.0.1", redis.port);
    proxy_start(&e, "epoll", url, extra);
    u = unix_client(&e);
    old = tls_client(&e, NULL, NULL);
    tu_peer_cn(old, cn, sizeof(cn));
    ASSERT_STREQ(cn, "localhost");

    /* Rotation: new files at the same paths, then SIGHUP. */
    ASSERT_OK(tc_make_server(c, "rotated", &live));
    kill(e.proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(u, "config_reloads") == 1, 10000);
    cn_of_new_connection(&e, cn, sizeof(cn));
    ASSERT_STREQ(cn, "rotated");
    expect_reply(tu_cmd(old, "PING"), PU_K_STATUS, 0, "PONG", old); /* keeps its session */

    /* A broken file refuses the reload; the running certificate stays. */
    f = fopen(live.cert, "w");
    ASSERT_NOTNULL(f);
    fputs("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", f);
    fclose(f);
    kill(e.proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(u, "config_reload_errors") == 1, 10000);
    ASSERT_TRUE(tu_file_has(e.proxy.log_path, "config reload failed: TLS (listeners): "));
    cn_of_new_connection(&e, cn, sizeof(cn));
    ASSERT_STREQ(cn, "rotated");
    ASSERT_EQ(pu_info_int(u, "config_reloads"), 1);
    tu_close(old);
    redisFree(u);
    proxy_stop(&e);
    pu_redis_kill(&redis);
}

/* ---- robustness: deadline, garbage ------------------------------------------ */

static void garbage(const char *backend)
{
    const char *extra[] = {"--tls-auth-clients", "no", "--tls-handshake-timeout", "300", NULL};
    static const char plain[] = "*1\r\n$4\r\nPING\r\n";
    struct pu_redis redis = {0};
    struct tu_conn *t;
    struct tenv e;
    redisContext *u;
    char url[64], buf[4096];
    unsigned seed = 12345;
    bool closed;
    int fd;

    pu_redis_start(&redis);
    upstream_url(url, sizeof(url), "redis://127.0.0.1", redis.port);
    proxy_start(&e, backend, url, extra);
    u = unix_client(&e);

    /* Silence: closed at the handshake deadline. */
    fd = pu_raw_connect(e.tls_port);
    ASSERT_TRUE(pu_raw_wait_closed(fd, 10000));
    close(fd);
    PU_EVENTUALLY(tu_file_has(e.proxy.log_path, "handshake not finished within 300 ms"), 5000);

    /* Plain RESP to the TLS port: no RESP answer, the socket closed. */
    fd = pu_raw_connect(e.tls_port);
    ASSERT_TRUE(pu_raw_send(fd, plain, sizeof(plain) - 1));
    pu_raw_read_until(fd, buf, sizeof(buf), 10000, NULL);
    ASSERT_TRUE(strstr(buf, "PONG") == NULL);
    close(fd);

    /* Random bytes, before any handshake, on many connections. */
    for (int i = 0; i < 40; i++) {
        size_t n = 1 + (size_t)(rand_r(&seed) % sizeof(buf));

        for (size_t k = 0; k < n; k++)
            buf[k] = (char)rand_r(&seed);
        if (i % 2 == 0)
            buf[0] = 0x16; /* looks like a handshake record */
        fd = pu_raw_connect(e.tls_port);
        pu_raw_send(fd, buf, n);
        if (i % 3 == 0)
            ASSERT_TRUE(pu_raw_wait_closed(fd, 10000));
        close(fd);
    }

    /* Garbage under an established session. */
    t = tls_client(&e, NULL, NULL);
    expect_reply(tu_cmd(t, "PING"), PU_K_STATUS, 0, "PONG", t);
    expect_reply(tu_cmd(t, "LOCK g"), PU_K_STATUS, 0, "OK", t);
    ASSERT_TRUE(pu_raw_send(tu_fd(t), "\x17\x03\x03\x00\x10garbagegarbage!!", 21));
    ASSERT_NULL(tu_recv(t, 10000, &closed));
    ASSERT_TRUE(closed);
    tu_close(t);
    /* Its lock went with it, and the proxy serves on. */
    PU_EVENTUALLY(pu_info_int(u, "locks_held") == 0, 10000);
    t = tls_client(&e, NULL, NULL);
    expect_reply(tu_cmd(t, "LOCK g WAIT 5000"), PU_K_STATUS, 0, "OK", t);
    tu_close(t);
    PU_STR(u, "PONG", "PING");
    ASSERT_TRUE(pu_info_int(u, "tls_handshake_failures") >= 2);
    redisFree(u);
    proxy_stop(&e);
    pu_redis_kill(&redis);
}

TEST(tls_deadline_and_garbage)
{
    FOR_EACH_BACKEND(b)
    {
        fprintf(stderr, "-- backend %s\n", b);
        garbage(b);
    }
}

/* ---- what clients see of a bad proxy certificate ------------------------------ */

TEST(tls_clients_see_certificate_errors)
{
    const struct tc_certs *c = tu_certs();
    const char *expired[] = {
        "--tls-auth-clients", "no", "--tls-cert-file", c->expired.cert, "--tls-key-file",
        c->expired.key,       NULL};
    struct pu_redis redis = {0};
    struct tenv e;
    redisContext *u;
    char url[64], port[16], out[4096];

    pu_redis_start(&redis);
    upstream_url(url, sizeof(url), "redis://127.0.0.1", redis.port);
    proxy_start(&e, "epoll", url, expired);
    snprintf(port, sizeof(port), "%d", e.tls_port);
    {
        const char *args[] = {"--tls", "--cacert", c->ca.cert, "-h", "localhost",
                              "-p",    port,       "PING",     NULL};

        run_cli(out, sizeof(out), args);
        fprintf(stderr, "redis-cli: %s\n", out);
        ASSERT_TRUE(strstr(out, "PONG") == NULL);
        ASSERT_TRUE(strstr(out, "certificate verify failed") != NULL);
    }
    {
        const char *args[] = {"--tls", "--cacert", c->other_ca.cert, "-h", "localhost",
                              "-p",    port,       "PING",           NULL};

        run_cli(out, sizeof(out), args);
        ASSERT_TRUE(strstr(out, "certificate verify failed") != NULL);
    }
    /* The proxy learns why from the clients' alerts. */
    u = unix_client(&e);
    /* (redis-cli may try to connect twice per run) */
    PU_EVENTUALLY(pu_info_int(u, "tls_handshake_failures") >= 2, 10000);
    ASSERT_EQ(pu_info_int(u, "tls_handshakes"), 0);
    ASSERT_TRUE(tu_file_has(e.proxy.log_path, "certificate expired"));
    redisFree(u);
    proxy_stop(&e);
    pu_redis_kill(&redis);
}

/* ---- start-up errors --------------------------------------------------------- */

static void expect_startup_error(const char *const *flags, int code, const char *want)
{
    const char *argv[24];
    char out[4096];
    int i = 0, st;

    argv[i++] = pu_proxy_bin();
    for (int j = 0; flags[j] && i < 23; j++)
        argv[i++] = flags[j];
    argv[i] = NULL;
    st = pu_run_capture(argv, out, sizeof(out), 15000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != code || !strstr(out, want))
        TEST_FAIL("exit status 0x%x (want %d), output \"%s\" (want \"%s\")", st, code, out, want);
}

TEST(tls_startup_errors)
{
    const struct tc_certs *c = tu_certs();
    char listen[64];
    const char *no_cert[] = {"--listen", listen, "--tls-auth-clients", "no", NULL};
    const char *no_ca[] = {"--listen", listen, "--tls-cert-file", c->server.cert, NULL};
    const char *missing[] = {
        "--listen", listen, "--tls-cert-file", "/nonexistent/server.pem", "--tls-auth-clients",
        "no",       NULL};
    const char *mismatch[] = {"--listen",
                              listen,
                              "--tls-cert-file",
                              c->server.cert,
                              "--tls-key-file",
                              c->client.key,
                              "--tls-auth-clients",
                              "no",
                              NULL};
    const char *up_ca[] = {"--listen",
                           listen,
                           "--upstream",
                           "rediss://127.0.0.1:1",
                           "--upstream-tls-ca-cert-file",
                           "/nonexistent/ca.pem",
                           NULL};
    const char *bad_url[] = {"--upstream", "tls://127.0.0.1:1", NULL};

    snprintf(listen, sizeof(listen), "tls://127.0.0.1:%d", pu_free_port());
    expect_startup_error(no_cert, 2, "a tls:// listener needs --tls-cert-file");
    expect_startup_error(no_ca, 2, "--tls-auth-clients yes needs --tls-ca-cert-file");
    expect_startup_error(missing, 1,
                         "TLS (listeners): cannot read certificate file /nonexistent/server.pem: "
                         "No such file or directory");
    expect_startup_error(mismatch, 1, "does not match certificate file");
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", pu_free_port());
    expect_startup_error(up_ca, 1, "TLS (upstream): cannot read CA file /nonexistent/ca.pem");
    expect_startup_error(bad_url, 2, "tls:// is not for --upstream, got 'tls://127.0.0.1:1'");
}

TEST_MAIN(TEST_CASE(tls_both_sides), TEST_CASE(tls_auth_clients_modes),
          TEST_CASE(tls_upstream_certificate_errors), TEST_CASE(tls_sighup_reloads_certificates),
          TEST_CASE(tls_deadline_and_garbage), TEST_CASE(tls_clients_see_certificate_errors),
          TEST_CASE(tls_startup_errors))
