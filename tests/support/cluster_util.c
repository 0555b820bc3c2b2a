/* A throw-away Redis Cluster for integration tests; see cluster_util.h. */
#include "cluster_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

#define WAIT_MS     20000 /* any single wait: cluster formed, owner agreed, failover */
#define POLL_US     20000
#define PORT_LO     10000 /* ports and their bus (+10000) stay below the ephemeral range */
#define PORT_SPAN   11000
#define START_TRIES 5

static const char *const cluster_args[] = {"--cluster-enabled",
                                           "yes",
                                           "--cluster-config-file",
                                           "nodes.conf",
                                           "--cluster-node-timeout",
                                           "1000",
                                           NULL};

bool rcluster_available(void)
{
    return predis_available() && access(RCLUSTER_CLI, X_OK) == 0;
}

/* True when 127.0.0.1:port can be bound now. */
static bool port_free(int port)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    bool ok;

    if (fd < 0)
        return false;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
    close(fd);
    return ok;
}

/* A port whose bus port is free too, not used by another node. */
static int pick_port(const struct rcluster *c, int upto)
{
    int tries, i;

    for (tries = 0; tries < 1000; tries++) {
        int p = PORT_LO + (int)(random() % PORT_SPAN);
        bool taken = false;

        for (i = 0; i < upto; i++)
            taken = taken || c->node[i].port == p;
        if (!taken && port_free(p) && port_free(p + 10000))
            return p;
    }
    TEST_FAIL("no free port pair for a cluster node");
}

static void start_node(struct rcluster *c, int i)
{
    struct predis *r = &c->node[i];
    int tries, rc = -1;
    size_t k;

    ASSERT_OK(predis_init(r));
    for (k = 0; cluster_args[k]; k++)
        r->extra[k] = cluster_args[k];
    for (tries = 0; tries < START_TRIES && rc < 0; tries++) {
        r->port = pick_port(c, i);
        rc = predis_start(r); /* -ECHILD: the port was taken meanwhile */
    }
    ASSERT_OK(rc);
}

const char *rcluster_addr(const struct rcluster *c, int i, char *buf, size_t size)
{
    snprintf(buf, size, "127.0.0.1:%d", c->node[i].port);
    return buf;
}

int rcluster_by_port(const struct rcluster *c, int port)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (c->node[i].port == port)
            return i;
    }
    return -1;
}

redisContext *rcluster_connect(const struct rcluster *c, int i)
{
    if (c->node[i].pid <= 0)
        return NULL;
    return predis_connect(&c->node[i]);
}

static redisReply *vcmd(const struct rcluster *c, int i, const char *fmt, va_list ap)
{
    redisContext *ctx = rcluster_connect(c, i);
    redisReply *rep;

    if (!ctx)
        return NULL;
    rep = redisvCommand(ctx, fmt, ap);
    redisFree(ctx);
    return rep;
}

redisReply *rcluster_cmd(const struct rcluster *c, int i, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd(c, i, fmt, ap);
    va_end(ap);
    return rep;
}

long long rcluster_int(const struct rcluster *c, int i, const char *fmt, ...)
{
    redisReply *rep;
    long long v = -1;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd(c, i, fmt, ap);
    va_end(ap);
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

void rcluster_ok(const struct rcluster *c, int i, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd(c, i, fmt, ap);
    va_end(ap);
    if (!rep || rep->type != REDIS_REPLY_STATUS)
        TEST_FAIL("node %d: %s: %s", i, fmt, rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
}

/* ---- creation ------------------------------------------------------------------ */

/* redis-cli --cluster create, bounded; output in node 0's dir (cli.log). */
static void cluster_create(const struct rcluster *c)
{
    char addrs[RCLUSTER_NODES][32], log[160];
    const char *argv[RCLUSTER_NODES + 8];
    uint64_t end = clock_mono_ms() + WAIT_MS;
    int n = 0, i, status = 0, fd;
    pid_t pid;

    argv[n++] = RCLUSTER_CLI;
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (i = 0; i < RCLUSTER_NODES; i++)
        argv[n++] = rcluster_addr(c, i, addrs[i], sizeof(addrs[i]));
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/cli.log", c->node[0].dir);
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(RCLUSTER_CLI, (char *const *)argv);
        _exit(127);
    }
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (clock_mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            TEST_FAIL("redis-cli --cluster create timed out (see %s)", log);
        }
        usleep(POLL_US);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        TEST_FAIL("redis-cli --cluster create failed (see %s)", log);
}

static bool state_ok(const struct rcluster *c, int i)
{
    redisReply *rep = rcluster_cmd(c, i, "CLUSTER INFO");
    bool ok = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");

    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* ROLE: "master", or "slave" with its master's port and link state. */
static bool role_is(const struct rcluster *c, int i, const char *role, int *master_port,
                    bool *connected)
{
    redisReply *rep = rcluster_cmd(c, i, "ROLE");
    bool is = false;

    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
        rep->element[0]->type == REDIS_REPLY_STRING) {
        is = strcmp(rep->element[0]->str, role) == 0;
        if (is && master_port && rep->elements >= 4) {
            *master_port = (int)rep->element[2]->integer;
            *connected = strcmp(rep->element[3]->str, "connected") == 0;
        }
    }
    if (rep)
        freeReplyObject(rep);
    return is;
}

bool rcluster_is_master(const struct rcluster *c, int i)
{
    return c->node[i].pid > 0 && role_is(c, i, "master", NULL, NULL);
}

/* Every running node: state ok; every replica: linked to its master. */
static bool all_settled(const struct rcluster *c)
{
    int i, port;
    bool up;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        if (!state_ok(c, i))
            return false;
        if (role_is(c, i, "slave", &port, &up) && !up)
            return false;
    }
    return true;
}

static void wait_settled(const struct rcluster *c)
{
    uint64_t end = clock_mono_ms() + WAIT_MS;

    while (!all_settled(c)) {
        if (clock_mono_ms() > end)
            TEST_FAIL("cluster did not settle in %d ms", WAIT_MS);
        usleep(POLL_US);
    }
}

static void read_ids(struct rcluster *c)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        redisReply *rep = rcluster_cmd(c, i, "CLUSTER MYID");

        ASSERT_TRUE(rep && rep->type == REDIS_REPLY_STRING && rep->len == 40);
        memcpy(c->id[i], rep->str, 41);
        freeReplyObject(rep);
    }
}

void rcluster_start(struct rcluster *c)
{
    int i;

    memset(c, 0, sizeof(*c));
    for (i = 0; i < RCLUSTER_NODES; i++)
        c->node[i].pid = -1;
    srandom((unsigned)(getpid() ^ clock_mono_ns()));
    for (i = 0; i < RCLUSTER_NODES; i++)
        start_node(c, i);
    read_ids(c);
    cluster_create(c);
    wait_settled(c);
}

void rcluster_cleanup(struct rcluster *c)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++)
        predis_cleanup(&c->node[i]);
}

/* ---- topology queries -------------------------------------------------------------- */

int rcluster_owner_seen_by(const struct rcluster *c, int i, int slot)
{
    redisReply *rep = rcluster_cmd(c, i, "CLUSTER SLOTS");
    int owner = -1;
    size_t k;

    for (k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
        const redisReply *e = rep->element[k];

        if (e->elements >= 3 && slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            owner = rcluster_by_port(c, (int)e->element[2]->element[1]->integer);
    }
    if (rep)
        freeReplyObject(rep);
    return owner;
}

int rcluster_owner(const struct rcluster *c, int slot)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (rcluster_is_master(c, i))
            return rcluster_owner_seen_by(c, i, slot);
    }
    return -1;
}

void rcluster_slot_counts(const struct rcluster *c, int counts[RCLUSTER_NODES])
{
    redisReply *rep = NULL;
    size_t k;
    int i;

    memset(counts, 0, sizeof(int) * RCLUSTER_NODES);
    for (i = 0; i < RCLUSTER_NODES && !rep; i++) {
        if (rcluster_is_master(c, i))
            rep = rcluster_cmd(c, i, "CLUSTER SLOTS");
    }
    ASSERT_TRUE(rep && rep->type == REDIS_REPLY_ARRAY);
    for (k = 0; k < rep->elements; k++) {
        const redisReply *e = rep->element[k];
        int owner = rcluster_by_port(c, (int)e->element[2]->element[1]->integer);

        ASSERT_TRUE(owner >= 0);
        counts[owner] += (int)(e->element[1]->integer - e->element[0]->integer + 1);
    }
    freeReplyObject(rep);
}

int rcluster_other_master(const struct rcluster *c, int not_idx)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (i != not_idx && rcluster_is_master(c, i))
            return i;
    }
    return -1;
}

int rcluster_replica_of(const struct rcluster *c, int m)
{
    int i, port = 0;
    bool up;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (i != m && c->node[i].pid > 0 && role_is(c, i, "slave", &port, &up) &&
            port == c->node[m].port)
            return i;
    }
    return -1;
}

int rcluster_slot_of(const struct rcluster *c, int m, int from)
{
    int s;

    for (s = from; s < 16384; s++) {
        if (rcluster_owner_seen_by(c, m, s) == m)
            return s;
    }
    return -1;
}

static bool owner_agreed(const struct rcluster *c, int slot, int owner)
{
    int i;

    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        if (rcluster_owner_seen_by(c, i, slot) != owner || !state_ok(c, i))
            return false;
    }
    return true;
}

void rcluster_wait_owner(const struct rcluster *c, int slot, int owner)
{
    uint64_t end = clock_mono_ms() + WAIT_MS;

    while (!owner_agreed(c, slot, owner)) {
        if (clock_mono_ms() > end)
            TEST_FAIL("nodes did not agree that node %d owns slot %d", owner, slot);
        usleep(POLL_US);
    }
}

/* ---- changes ------------------------------------------------------------------- */

void rcluster_migrate_begin(const struct rcluster *c, int slot, int from, int to)
{
    rcluster_ok(c, to, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->id[from]);
    rcluster_ok(c, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->id[to]);
}

void rcluster_migrate_key(const struct rcluster *c, int from, int to, const char *key)
{
    rcluster_ok(c, from, "MIGRATE 127.0.0.1 %d %s 0 5000", c->node[to].port, key);
}

void rcluster_migrate_finish(const struct rcluster *c, int slot, int from, int to)
{
    int i;

    rcluster_ok(c, to, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]);
    rcluster_ok(c, from, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]);
    for (i = 0; i < RCLUSTER_NODES; i++) {
        if (i != to && i != from && rcluster_is_master(c, i))
            rcluster_ok(c, i, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]);
    }
    rcluster_wait_owner(c, slot, to);
}

/* Moves every key of slot (GETKEYSINSLOT, MIGRATE one by one). */
static void migrate_all_keys(const struct rcluster *c, int slot, int from, int to)
{
    for (;;) {
        redisReply *rep = rcluster_cmd(c, from, "CLUSTER GETKEYSINSLOT %d 100", slot);
        size_t k, n;

        ASSERT_TRUE(rep && rep->type == REDIS_REPLY_ARRAY);
        n = rep->elements;
        for (k = 0; k < n; k++)
            rcluster_migrate_key(c, from, to, rep->element[k]->str);
        freeReplyObject(rep);
        if (n == 0)
            return;
    }
}

void rcluster_migrate(const struct rcluster *c, int slot, int to)
{
    int from = rcluster_owner(c, slot);

    ASSERT_TRUE(from >= 0 && from != to);
    rcluster_migrate_begin(c, slot, from, to);
    migrate_all_keys(c, slot, from, to);
    rcluster_migrate_finish(c, slot, from, to);
}

void rcluster_failover(const struct rcluster *c, int r)
{
    uint64_t end = clock_mono_ms() + WAIT_MS;
    int port, m, slot;
    bool up;

    ASSERT_TRUE(role_is(c, r, "slave", &port, &up));
    m = rcluster_by_port(c, port);
    slot = rcluster_slot_of(c, m, 0);
    rcluster_ok(c, r, "CLUSTER FAILOVER");
    while (!rcluster_is_master(c, r)) {
        if (clock_mono_ms() > end)
            TEST_FAIL("CLUSTER FAILOVER on node %d did not complete", r);
        usleep(POLL_US);
    }
    rcluster_wait_owner(c, slot, r);
    wait_settled(c);
}

int rcluster_kill_master(struct rcluster *c, int m)
{
    int r = rcluster_replica_of(c, m), slot = rcluster_slot_of(c, m, 0);

    ASSERT_TRUE(r >= 0 && slot >= 0);
    predis_kill(&c->node[m]);
    rcluster_wait_owner(c, slot, r);
    return r;
}

void rcluster_restart_replica(struct rcluster *c, int i)
{
    uint64_t end = clock_mono_ms() + WAIT_MS;
    int port = 0;
    bool up = false;

    ASSERT_OK(predis_start(&c->node[i]));
    while (!(role_is(c, i, "slave", &port, &up) && up)) {
        if (clock_mono_ms() > end)
            TEST_FAIL("node %d did not come back as a linked replica", i);
        usleep(POLL_US);
    }
    wait_settled(c);
}
