/* rediss-cluster://: a Redis Cluster that speaks TLS only (three masters,
 * redis-server --port 0 --tls-port P --tls-cluster yes), created with
 * redis-cli --tls --cluster create. The proxy finds the nodes from one
 * seed over TLS (CLUSTER SLOTS then names the TLS ports), verifies every
 * node's certificate against the CA, routes each name to its slot's
 * master, and wakes waiters through the owning shard's pub/sub. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "tls_util.h"

#define NODES      3
#define SERVER_BIN "/usr/bin/redis-server"
#define CLI_BIN    "/usr/bin/redis-cli"

struct tnode {
    pid_t pid;             /* the server */
    int port;              /* its --tls-port (the bus is port + 10000) */
    char dir[PU_PATH_MAX]; /* its --dir (nodes.conf) */
    char log[PU_PATH_MAX]; /* its output */
};

/* True when 127.0.0.1:port can be bound now. */
static bool port_free(int port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    bool ok;

    if (fd < 0)
        return false;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

/* A port below the ephemeral range whose cluster bus port (+10000) is
 * free too (as cluster_util.c picks them). */
static int bus_port(void)
{
    int i, p;

    for (i = 0; i < 1000; i++) {
        p = 10000 + (int)(random() % 11000);
        if (port_free(p) && port_free(p + 10000))
            return p;
    }
    TEST_FAIL("no port with a free bus port");
    return -1;
}

static void node_start_try(struct tnode *n, int tries)
{
    const struct tc_certs *c = tu_certs();
    const struct tu_opts o = {.ca = c->ca.cert};
    char port[16], err[256] = "";
    long long deadline;

    n->port = bus_port();
    snprintf(port, sizeof(port), "%d", n->port);
    snprintf(n->dir, sizeof(n->dir), "%s/tls-cluster-%d", pu_tmpdir(), n->port);
    mkdir(n->dir, 0700);
    snprintf(n->log, sizeof(n->log), "%s/tls-cluster-%d.log", pu_tmpdir(), n->port);
    {
        const char *argv[] = {SERVER_BIN, "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
                              "--tls-cluster", "yes", "--tls-replication", "yes", "--tls-cert-file",
                              c->server.cert, "--tls-key-file", c->server.key, "--tls-ca-cert-file",
                              c->ca.cert,
                              /* the bus always asks its peers for a client
                               * certificate: the server one is not one */
                              "--tls-client-cert-file", c->client.cert, "--tls-client-key-file",
                              c->client.key, "--tls-auth-clients", "no", "--cluster-enabled", "yes",
                              "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
                              "2000", "--save", "", "--appendonly", "no", "--dir", n->dir, NULL};

        n->pid = pu_spawn(argv, n->log);
    }
    deadline = pu_now_ms() + 10000;
    while (!tu_ping(n->port, &o, err, sizeof(err))) {
        if (tu_file_has(n->log, "TLS") && tu_file_has(n->log, "not supported"))
            TEST_SKIP("redis-server was built without TLS");
        if (tu_file_has(n->log, "Address already in use") && tries < 5) {
            pu_kill(n->pid); /* taken meanwhile: another port */
            return node_start_try(n, tries + 1);
        }
        if (pu_now_ms() > deadline)
            TEST_FAIL("TLS cluster node on %d not ready: %s", n->port, err);
        pu_sleep_ms(20);
    }
}

static void node_start(struct tnode *n)
{
    node_start_try(n, 0);
}

/* cluster_state:ok on node n (over TLS). */
static bool node_ok(const struct tnode *n)
{
    const struct tu_opts o = {.ca = tu_certs()->ca.cert};
    char err[256];
    struct tu_conn *c = tu_connect(n->port, &o, err, sizeof(err));
    redisReply *r;
    bool ok = false;

    if (!c)
        return false;
    r = tu_cmd(c, "CLUSTER INFO");
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
         strstr(r->str, "cluster_known_nodes:3");
    if (r)
        freeReplyObject(r);
    tu_close(c);
    return ok;
}

static void cluster_create(struct tnode *nodes)
{
    char addr[NODES][32], out[8192];
    const char *argv[16];
    int i, k = 0, st;

    argv[k++] = CLI_BIN;
    argv[k++] = "--tls";
    argv[k++] = "--cacert";
    argv[k++] = tu_certs()->ca.cert;
    argv[k++] = "--cluster";
    argv[k++] = "create";
    for (i = 0; i < NODES; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", nodes[i].port);
        argv[k++] = addr[i];
    }
    argv[k++] = "--cluster-replicas";
    argv[k++] = "0";
    argv[k++] = "--cluster-yes";
    argv[k] = NULL;
    st = pu_run_capture(argv, out, sizeof(out), 60000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("redis-cli --cluster create over TLS failed (0x%x): %s", st, out);
    for (i = 0; i < NODES; i++)
        PU_EVENTUALLY(node_ok(&nodes[i]), 20000);
}

TEST(rediss_cluster_upstream)
{
    struct tnode nodes[NODES];
    struct pu_proxy p = {0};
    const char *ca = tu_certs()->ca.cert;
    redisContext *a, *b;
    redisReply *r;
    char name[32];
    int i;

    if (access(SERVER_BIN, X_OK) != 0 || access(CLI_BIN, X_OK) != 0)
        TEST_SKIP("redis-server or redis-cli missing");
    for (i = 0; i < NODES; i++)
        node_start(&nodes[i]);
    cluster_create(nodes);

    snprintf(p.upstream, sizeof(p.upstream), "rediss-cluster://127.0.0.1:%d", nodes[1].port);
    p.extra[0] = "--upstream-tls-ca-cert-file";
    p.extra[1] = ca;
    pu_proxy_start(&p);
    a = pu_connect(p.port);
    b = pu_connect(p.port);
    PU_EVENTUALLY(pu_info_int(a, "upstream_conns_ready") >= 2 * NODES, 15000);
    /* Names spread over every master's slots. */
    for (i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "tlsc-%d", i);
        PU_OK(a, "LOCK %s", name);
        PU_INT(a, 1, "UNLOCK %s", name);
    }
    /* A waiter is woken by the release, through the shard's pub/sub. */
    PU_OK(a, "LOCK %s", "tlsc-wait");
    pu_send(b, "LOCK %s WAIT 10000", "tlsc-wait");
    PU_EVENTUALLY(pu_info_int(a, "blocked_clients") == 1, 5000);
    PU_INT(a, 1, "UNLOCK %s", "tlsc-wait");
    r = pu_recv(b);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    PU_INT(b, 1, "UNLOCK %s", "tlsc-wait");
    /* Semaphores too (a string key, another script family). */
    PU_INT(a, 1, "SEM.TRYSETPERMITS %s 1", "tlsc-sem");
    PU_OK(a, "SEM.ACQUIRE %s", "tlsc-sem");
    PU_INT(a, 1, "SEM.RELEASE %s", "tlsc-sem");
    redisFree(a);
    redisFree(b);
    pu_proxy_stop(&p);
    for (i = 0; i < NODES; i++)
        pu_kill(nodes[i].pid);
}

/* Without the CA the nodes' certificates do not verify: the proxy says so
 * instead of serving. */
TEST(rediss_cluster_unverified_refused)
{
    struct tnode node;
    struct pu_proxy p = {0};
    redisContext *c;
    redisReply *r;

    if (access(SERVER_BIN, X_OK) != 0)
        TEST_SKIP("redis-server missing");
    node_start(&node);
    snprintf(p.upstream, sizeof(p.upstream), "rediss-cluster://127.0.0.1:%d", node.port);
    pu_proxy_start(&p);
    c = pu_connect(p.port);
    r = pu_cmd(c, "LOCK %s WAIT 0", "x");
    if (r->type != REDIS_REPLY_ERROR || !strstr(r->str, "UPSTREAM") ||
        !strstr(r->str, "certificate"))
        TEST_FAIL("want an UPSTREAM certificate error, got %s",
                  r->type == REDIS_REPLY_ERROR ? r->str : "another reply");
    freeReplyObject(r);
    redisFree(c);
    pu_proxy_stop(&p);
    pu_kill(node.pid);
}

TEST_MAIN(TEST_CASE(rediss_cluster_upstream), TEST_CASE(rediss_cluster_unverified_refused))
