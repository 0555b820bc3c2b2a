/* A throw-away Redis Sentinel deployment for integration tests; see
 * sentinel_util.h. */
#include "sentinel_util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"

#define WAIT_MS 20000 /* any single wait: links up, sentinels acquainted, a failover */
#define POLL_US 20000

bool rsentinel_available(void)
{
    return predis_available();
}

const char *rsentinel_node_addr(const struct rsentinel *s, int i, char *buf, size_t size)
{
    snprintf(buf, size, "127.0.0.1:%d", s->node[i].port);
    return buf;
}

int rsentinel_by_port(const struct rsentinel *s, int port)
{
    int i;

    for (i = 0; i < RSENT_NODES; i++) {
        if (s->node[i].port == port)
            return i;
    }
    return -1;
}

static redisReply *vcmd_on(const struct predis *r, const char *fmt, va_list ap)
{
    redisContext *ctx = r->pid > 0 ? predis_connect(r) : NULL;
    redisReply *rep;

    if (!ctx)
        return NULL;
    rep = redisvCommand(ctx, fmt, ap);
    redisFree(ctx);
    return rep;
}

redisReply *rsentinel_cmd(const struct rsentinel *s, int i, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd_on(&s->node[i], fmt, ap);
    va_end(ap);
    return rep;
}

redisReply *rsentinel_scmd(const struct rsentinel *s, int k, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd_on(&s->sent[k], fmt, ap);
    va_end(ap);
    return rep;
}

long long rsentinel_int(const struct rsentinel *s, int i, const char *fmt, ...)
{
    redisReply *rep;
    long long v = -1;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd_on(&s->node[i], fmt, ap);
    va_end(ap);
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    return v;
}

static void expect_ok(redisReply *rep, const char *who, int i, const char *fmt)
{
    if (!rep || rep->type != REDIS_REPLY_STATUS)
        TEST_FAIL("%s %d: %s: %s", who, i, fmt, rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
}

void rsentinel_ok(const struct rsentinel *s, int i, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd_on(&s->node[i], fmt, ap);
    va_end(ap);
    expect_ok(rep, "node", i, fmt);
}

void rsentinel_sok(const struct rsentinel *s, int k, const char *fmt, ...)
{
    redisReply *rep;
    va_list ap;

    va_start(ap, fmt);
    rep = vcmd_on(&s->sent[k], fmt, ap);
    va_end(ap);
    expect_ok(rep, "sentinel", k, fmt);
}

/* ROLE of node i: "master", or "slave" with its link state. */
static bool role_is(const struct rsentinel *s, int i, const char *role, bool *linked)
{
    redisReply *rep = rsentinel_cmd(s, i, "ROLE");
    bool is = false;

    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
        rep->element[0]->type == REDIS_REPLY_STRING) {
        is = strcmp(rep->element[0]->str, role) == 0;
        if (is && linked && rep->elements >= 4 && rep->element[3]->type == REDIS_REPLY_STRING)
            *linked = strcmp(rep->element[3]->str, "connected") == 0;
    }
    if (rep)
        freeReplyObject(rep);
    return is;
}

bool rsentinel_is_master(const struct rsentinel *s, int i)
{
    return s->node[i].pid > 0 && role_is(s, i, "master", NULL);
}

int rsentinel_named_by(const struct rsentinel *s, int k)
{
    redisReply *rep = rsentinel_scmd(s, k, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", RSENT_NAME);
    int i = -1;

    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2)
        i = rsentinel_by_port(s, atoi(rep->element[1]->str));
    if (rep)
        freeReplyObject(rep);
    return i;
}

/* ---- start-up ------------------------------------------------------------------- */

static void start_node(struct rsentinel *s, int i)
{
    struct predis *r = &s->node[i];
    int k = 0;

    ASSERT_OK(predis_init(r));
    r->password = s->password;
    r->extra[k++] = "--repl-diskless-sync-delay"; /* a replica syncs at once, not 5 s later */
    r->extra[k++] = "0";
    if (i > 0) {
        r->extra[k++] = "--replicaof";
        r->extra[k++] = "127.0.0.1";
        r->extra[k++] = s->master_port;
    }
    if (s->password) {
        r->extra[k++] = "--masterauth";
        r->extra[k++] = s->password;
    }
    ASSERT_OK(predis_start(r));
    if (i == 0)
        snprintf(s->master_port, sizeof(s->master_port), "%d", r->port);
}

static bool replicas_linked(const struct rsentinel *s)
{
    bool linked = false;
    int i;

    for (i = 1; i < RSENT_NODES; i++) {
        if (!role_is(s, i, "slave", &linked) || !linked)
            return false;
    }
    return true;
}

/* The sentinel's config: what it monitors and how fast it gives up on a
 * master. Port, dir and bind come from predis's command line. */
static void write_conf(const struct rsentinel *s, int k)
{
    FILE *f = fopen(s->conf[k], "w");

    ASSERT_NOTNULL(f);
    fprintf(f, "sentinel monitor %s 127.0.0.1 %d 2\n", RSENT_NAME, s->node[0].port);
    fprintf(f, "sentinel down-after-milliseconds %s 1000\n", RSENT_NAME);
    fprintf(f, "sentinel failover-timeout %s 5000\n", RSENT_NAME);
    if (s->password)
        fprintf(f, "sentinel auth-pass %s %s\n", RSENT_NAME, s->password);
    if (s->sentinel_password)
        fprintf(f, "sentinel sentinel-pass %s\n", s->sentinel_password);
    ASSERT_TRUE(fclose(f) == 0);
}

static void start_sentinel(struct rsentinel *s, int k)
{
    struct predis *r = &s->sent[k];

    ASSERT_OK(predis_init(r));
    snprintf(s->conf[k], sizeof(s->conf[k]), "%s/sentinel.conf", r->dir);
    write_conf(s, k);
    r->conf = s->conf[k];
    r->password = s->sentinel_password;
    r->extra[0] = "--sentinel";
    ASSERT_OK(predis_start(r));
}

/* A field of SENTINEL MASTER's flat field/value array, as an integer. */
static long long master_field(const redisReply *rep, const char *field)
{
    size_t i;

    for (i = 0; i + 1 < rep->elements; i += 2) {
        if (strcmp(rep->element[i]->str, field) == 0)
            return atoll(rep->element[i + 1]->str);
    }
    return -1;
}

/* Sentinel k knows both replicas and both other sentinels. */
static bool acquainted(const struct rsentinel *s, int k)
{
    redisReply *rep = rsentinel_scmd(s, k, "SENTINEL MASTER %s", RSENT_NAME);
    bool ok = rep && rep->type == REDIS_REPLY_ARRAY &&
              master_field(rep, "num-slaves") == RSENT_NODES - 1 &&
              master_field(rep, "num-other-sentinels") == RSENT_SENTINELS - 1;

    if (rep)
        freeReplyObject(rep);
    return ok;
}

static void wait_for(bool (*cond)(const struct rsentinel *s), const struct rsentinel *s,
                     const char *what)
{
    uint64_t end = clock_mono_ms() + WAIT_MS;

    while (!cond(s)) {
        if (clock_mono_ms() > end)
            TEST_FAIL("sentinel fixture: %s within %d ms", what, WAIT_MS);
        usleep(POLL_US);
    }
}

static bool all_acquainted(const struct rsentinel *s)
{
    int k;

    for (k = 0; k < RSENT_SENTINELS; k++) {
        if (!acquainted(s, k))
            return false;
    }
    return true;
}

void rsentinel_start(struct rsentinel *s, const char *password, const char *sentinel_password)
{
    int i, k;
    size_t n = 0;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < RSENT_NODES; i++)
        s->node[i].pid = -1;
    for (k = 0; k < RSENT_SENTINELS; k++)
        s->sent[k].pid = -1;
    s->password = password;
    s->sentinel_password = sentinel_password;
    for (i = 0; i < RSENT_NODES; i++)
        start_node(s, i);
    wait_for(replicas_linked, s, "replicas linked to the master");
    for (k = 0; k < RSENT_SENTINELS; k++) {
        start_sentinel(s, k);
        n += (size_t)snprintf(s->list + n, sizeof(s->list) - n, "%s127.0.0.1:%d", k ? "," : "",
                              s->sent[k].port);
    }
    wait_for(all_acquainted, s, "sentinels know both replicas and each other");
}

void rsentinel_cleanup(struct rsentinel *s)
{
    int i;

    for (i = 0; i < RSENT_SENTINELS; i++)
        predis_cleanup(&s->sent[i]);
    for (i = 0; i < RSENT_NODES; i++)
        predis_cleanup(&s->node[i]);
}

/* ---- failover ------------------------------------------------------------------- */

/* The node every running sentinel names, if they agree, it is not `not`
 * and it reports ROLE master; else -1. */
static int agreed_master(const struct rsentinel *s, int not )
{
    int k, m = -1, running = 0;

    for (k = 0; k < RSENT_SENTINELS; k++) {
        int named;

        if (s->sent[k].pid <= 0)
            continue;
        running++;
        named = rsentinel_named_by(s, k);
        if (named < 0 || (m >= 0 && named != m))
            return -1;
        m = named;
    }
    if (running == 0 || m < 0 || m == not || !rsentinel_is_master(s, m))
        return -1;
    return m;
}

int rsentinel_try_wait_master(const struct rsentinel *s, int not, int ms)
{
    uint64_t end = clock_mono_ms() + (uint64_t)ms;
    int m;

    while ((m = agreed_master(s, not )) < 0 && clock_mono_ms() <= end)
        usleep(POLL_US);
    return m;
}

int rsentinel_try_failover(struct rsentinel *s, int ms)
{
    int old = rsentinel_wait_master(s, -1), k;
    redisReply *r;

    for (k = 0; k < RSENT_SENTINELS && s->sent[k].pid <= 0; k++)
        ;
    ASSERT_TRUE(k < RSENT_SENTINELS);
    r = rsentinel_scmd(s, k, "SENTINEL FAILOVER %s", RSENT_NAME);
    if (r)
        freeReplyObject(r);
    return rsentinel_try_wait_master(s, old, ms);
}

int rsentinel_wait_master(const struct rsentinel *s, int not )
{
    uint64_t end = clock_mono_ms() + WAIT_MS;
    int m;

    while ((m = agreed_master(s, not )) < 0) {
        if (clock_mono_ms() > end)
            TEST_FAIL("sentinels did not agree on a master (other than node %d) in %d ms", not,
                      WAIT_MS);
        usleep(POLL_US);
    }
    return m;
}

int rsentinel_failover(struct rsentinel *s)
{
    int old = rsentinel_wait_master(s, -1), k;

    for (k = 0; k < RSENT_SENTINELS && s->sent[k].pid <= 0; k++)
        ;
    ASSERT_TRUE(k < RSENT_SENTINELS);
    rsentinel_sok(s, k, "SENTINEL FAILOVER %s", RSENT_NAME);
    return rsentinel_wait_master(s, old);
}

int rsentinel_kill_master(struct rsentinel *s)
{
    int old = rsentinel_wait_master(s, -1);

    predis_kill(&s->node[old]);
    return rsentinel_wait_master(s, old);
}

void rsentinel_kill_node(struct rsentinel *s, int i)
{
    predis_kill(&s->node[i]);
}

void rsentinel_start_node(struct rsentinel *s, int i)
{
    ASSERT_OK(predis_start(&s->node[i]));
}

void rsentinel_signal_node(struct rsentinel *s, int i, int sig)
{
    predis_signal(&s->node[i], sig);
}

void rsentinel_kill_sentinel(struct rsentinel *s, int k)
{
    predis_kill(&s->sent[k]);
}

void rsentinel_start_sentinel(struct rsentinel *s, int k)
{
    ASSERT_OK(predis_start(&s->sent[k]));
}

void rsentinel_set_all(const struct rsentinel *s, const char *option, const char *value)
{
    int k;

    for (k = 0; k < RSENT_SENTINELS; k++) {
        if (s->sent[k].pid > 0)
            rsentinel_sok(s, k, "SENTINEL SET %s %s %s", RSENT_NAME, option, value);
    }
}
