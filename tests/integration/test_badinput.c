/* Hostile input (issue 18), against a real redis-server:
 * - a table-driven sweep: every command with a numeric argument, each
 *   numeric argument given 0, 1, -1, 2^31, 2^53, 2^63-1, 2^64, 1e3, abc,
 *   the empty string and 10^14 (the largest LEASE or WAIT). Each must answer within a few seconds
 * with a clear error of the proxy's own (no raw Redis or script error, no UPSTREAM blaming Redis
 * for an argument) or a reply of the right type; after an error Redis's keyspace (every key's type,
 * value and TTL) is what it was, and an argument error sent Redis nothing; a reply costs Redis a
 * bounded number of commands (INFO stats total_commands_processed); a LEASE that was accepted put
 * an expiry on the key, no longer than the lease;
 * - LEASE below the floor is refused up front for every command taking it;
 * - grants that keep arriving late (every reply delayed past the lease by
 *   a relay between the proxy and Redis) are retried with a bounded
 *   exponential back-off, not in a hot loop.
 * Both io backends for the sweep. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

#define PROBE_MS      3000 /* longest a probe may take to answer */
#define MAX_FAILS     400  /* failures listed before giving up listing */
#define OK_CMDS_BOUND 30   /* Redis commands one successful probe may cost */
#define TTL_SLACK_MS  2000 /* PTTL drift allowed between two dumps */

/* ---- the keyspace, as Redis has it ----------------------------------------- */

/* Every key with its type, DUMP of its value and PTTL, sorted by key:
 * {key, type, dump, pttl, key, ...}. */
static const char dump_script[] =
    "local ks = redis.call('keys', '*') table.sort(ks) local out = {} "
    "for _, k in ipairs(ks) do out[#out + 1] = k "
    "out[#out + 1] = redis.call('type', k)['ok'] "
    "out[#out + 1] = redis.call('dump', k) "
    "out[#out + 1] = redis.call('pttl', k) end return out";

static redisReply *dump_keys(redisContext *rc)
{
    redisReply *r = pu_cmd(rc, "EVAL %s 0", dump_script);

    if (r->type != REDIS_REPLY_ARRAY)
        TEST_FAIL("keyspace dump failed: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    return r;
}

static bool same_str(const redisReply *a, const redisReply *b)
{
    return a->type == b->type && a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* NULL when a and b hold the same keys, types and values, and TTLs that
 * are both absent or both within TTL_SLACK_MS; else the first key that
 * differs (or "(key count)"). */
static const char *dump_diff(const redisReply *a, const redisReply *b)
{
    if (a->elements != b->elements)
        return "(key count)";
    for (size_t i = 0; i + 3 < a->elements; i += 4) {
        long long ta = a->element[i + 3]->integer, tb = b->element[i + 3]->integer;

        if (!same_str(a->element[i], b->element[i]))
            return a->element[i]->str;
        if (!same_str(a->element[i + 1], b->element[i + 1]) ||
            !same_str(a->element[i + 2], b->element[i + 2]) || (ta < 0) != (tb < 0) ||
            llabs(ta - tb) > TTL_SLACK_MS)
            return a->element[i]->str;
    }
    return NULL;
}

static long long redis_cmds(redisContext *rc)
{
    return pu_info_int(rc, "total_commands_processed");
}

/* ---- the table ---------------------------------------------------------------- */

/* The values every numeric argument gets (the last: the largest ms value
 * accepted, which must work end to end). */
static const char *const values[] = {
    "0",
    "1",
    "-1",
    "2147483648",
    "9007199254740992",
    "9223372036854775807",
    "18446744073709551616",
    "1e3",
    "abc",
    "",
    "100000000000000",
};
#define NVALUES (sizeof(values) / sizeof(values[0]))

/* What a reply that is not an error must be. */
enum want {
    WANT_OK = 1,  /* +OK */
    WANT_OKNIL,   /* +OK or nil */
    WANT_INT,     /* an integer */
    WANT_BULK,    /* a bulk string (a permit id) */
    WANT_BULKNIL, /* a bulk string or nil */
    WANT_ANY,     /* anything but an error */
};

/* One command: argv with "$n" (a fresh name per probe), "$m" (a second
 * one) and "$v" (the value); setup run first (hiredis format, %s the
 * name) or NULL; what an error about the value must mention; the reply
 * when it is not an error; lease: the value is a LEASE whose key is $n. */
struct row {
    const char *argv[8];
    const char *setup;
    const char *names; /* a word every argument error must contain, or NULL */
    enum want want;
    bool lease;
};

static const struct row rows[] = {
    {{"LOCK", "$n", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"LOCK", "$n", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"LOCK", "$n", "LEASE", "$v", "FENCED"}, NULL, "LEASE", WANT_INT, true},
    {{"LOCK", "$n", "LEASE", "60000", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"TRYLOCK", "$n", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"RLOCK", "$n", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"RLOCK", "$n", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"WLOCK", "$n", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"WLOCK", "$n", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"FAIRLOCK", "$n", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"FAIRLOCK", "$n", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"MULTILOCK", "$n", "$m", "LEASE", "$v"}, NULL, "LEASE", WANT_OK, true},
    {{"MULTILOCK", "$n", "$m", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"SEM.TRYSETPERMITS", "$n", "$v"}, NULL, "permits", WANT_INT, false},
    {{"SEM.ADDPERMITS", "$n", "$v"}, "SEM.TRYSETPERMITS %s 5", "permits", WANT_INT, false},
    {{"SEM.ACQUIRE", "$n", "$v", "WAIT", "0"},
     "SEM.TRYSETPERMITS %s 5",
     "permits",
     WANT_OKNIL,
     false},
    {{"SEM.ACQUIRE", "$n", "1", "WAIT", "$v"}, "SEM.TRYSETPERMITS %s 5", "WAIT", WANT_OK, false},
    {{"SEM.TRYACQUIRE", "$n", "$v"}, "SEM.TRYSETPERMITS %s 5", "permits", WANT_OKNIL, false},
    {{"SEM.RELEASE", "$n", "$v"}, "SEM.TRYSETPERMITS %s 5", "permits", WANT_INT, false},
    {{"PSEM.TRYSETPERMITS", "$n", "$v"}, NULL, "permits", WANT_INT, false},
    {{"PSEM.ACQUIRE", "$n", "LEASE", "$v", "WAIT", "0"},
     "PSEM.TRYSETPERMITS %s 5",
     "LEASE",
     WANT_BULK,
     false},
    {{"PSEM.ACQUIRE", "$n", "WAIT", "$v"}, "PSEM.TRYSETPERMITS %s 5", "WAIT", WANT_BULK, false},
    {{"PSEM.TRYACQUIRE", "$n", "LEASE", "$v"},
     "PSEM.TRYSETPERMITS %s 5",
     "LEASE",
     WANT_BULKNIL,
     false},
    {{"LATCH.TRYSETCOUNT", "$n", "$v"}, NULL, "count", WANT_INT, false},
    {{"LATCH.AWAIT", "$n", "WAIT", "$v"}, NULL, "WAIT", WANT_OK, false},
    {{"HELLO", "$v"}, NULL, NULL, WANT_ANY, false},
    {{"SELECT", "$v"}, NULL, NULL, WANT_OK, false},
    {{"CLIENT", "KILL", "ID", "$v"}, NULL, NULL, WANT_ANY, false},
    {{"CLIENT", "LIST", "ID", "$v"}, NULL, NULL, WANT_ANY, false},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Texts that only a raw Redis or script error carries, or that blame
 * Redis for what was the caller's argument. */
static const char *const raw_markers[] = {
    "invalid expire time", "value is not an integer",
    "not a valid float",   "script:",
    "user_script",         "UPSTREAM",
    "out of memory",
};

/* Error codes a clear error may start with. */
static const char *const codes[] = {"ERR ", "NOPROTO ", "NOTINIT ", "WRONGTYPE "};

/* ---- one probe -------------------------------------------------------------------- */

struct sweep {
    struct pu_env *e;
    redisContext *c;  /* the probing connection (replaced if a probe hangs) */
    redisContext *rc; /* Redis, directly */
    int fails;
    int probes;
    long long max_ok_cmds; /* most Redis commands one answered probe cost */
    bool verbose;          /* LP_BADINPUT_VERBOSE: print every probe's reply */
};

static void fail(struct sweep *s, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct sweep *s, const char *cmd, const char *fmt, ...)
{
    va_list ap;

    if (s->fails++ >= MAX_FAILS)
        return;
    fprintf(stderr, "FAIL %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Builds the probe's argv into argv/lens; returns argc. cmd: a printable
 * form for messages. */
static int build_argv(const struct row *row, const char *name, const char *name2, const char *v,
                      const char **argv, size_t *lens, char *cmd, size_t cn)
{
    int argc = 0;
    size_t off = 0;

    for (; argc < 8 && row->argv[argc]; argc++) {
        const char *a = row->argv[argc];

        if (strcmp(a, "$n") == 0)
            a = name;
        else if (strcmp(a, "$m") == 0)
            a = name2;
        else if (strcmp(a, "$v") == 0)
            a = v;
        argv[argc] = a;
        lens[argc] = strlen(a);
        off += (size_t)snprintf(cmd + off, off < cn ? cn - off : 0, "%s'%s'", argc ? " " : "", a);
    }
    return argc;
}

static bool clear_error(const redisReply *r, const char *names)
{
    bool coded = false;

    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        coded = coded || strncmp(r->str, codes[i], strlen(codes[i])) == 0;
    if (!coded)
        return false;
    for (size_t i = 0; i < sizeof(raw_markers) / sizeof(raw_markers[0]); i++) {
        if (strstr(r->str, raw_markers[i]))
            return false;
    }
    return !names || strstr(r->str, names) != NULL;
}

static bool right_reply(const redisReply *r, enum want w)
{
    switch (w) {
    case WANT_OK:
        return r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    case WANT_OKNIL:
        return r->type == REDIS_REPLY_NIL || right_reply(r, WANT_OK);
    case WANT_INT:
        return r->type == REDIS_REPLY_INTEGER;
    case WANT_BULK:
        return r->type == REDIS_REPLY_STRING;
    case WANT_BULKNIL:
        return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL;
    case WANT_ANY:
        return true;
    }
    return false;
}

/* After an accepted LEASE: the key expires, within the lease. */
static void check_lease(struct sweep *s, const char *cmd, const char *key, const char *v)
{
    long long pttl = pu_pttl(s->rc, key), lease = atoll(v);

    if (pttl <= 0 || pttl > lease)
        fail(s, cmd, "accepted, but '%s' has PTTL %lld (lease %s)", key, pttl, v);
}

/* Sends argv on c (binary safe: "" is an argument) without reading. */
static void send_argv(redisContext *c, int argc, const char **argv, const size_t *lens,
                      const char *cmd)
{
    int done = 0;

    if (redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK)
        TEST_FAIL("%s: cannot send: %s", cmd, c->errstr);
    while (!done) {
        if (redisBufferWrite(c, &done) != REDIS_OK)
            TEST_FAIL("%s: cannot send: %s", cmd, c->errstr);
    }
}

static void probe(struct sweep *s, size_t ri, size_t vi)
{
    const struct row *row = &rows[ri];
    const char *v = values[vi];
    const char *argv[8];
    size_t lens[8];
    char name[32], name2[32], cmd[256], d[256];
    redisReply *before, *after, *r, *setup;
    long long c0, c1;
    const char *diff;
    int argc;

    snprintf(name, sizeof(name), "bi%zu_%zu", ri, vi);
    snprintf(name2, sizeof(name2), "bj%zu_%zu", ri, vi);
    argc = build_argv(row, name, name2, v, argv, lens, cmd, sizeof(cmd));
    if (row->setup) {
        setup = pu_cmd(s->c, row->setup, name);
        freeReplyObject(setup);
    }
    s->probes++;
    before = dump_keys(s->rc);
    c0 = redis_cmds(s->rc);
    send_argv(s->c, argc, argv, lens, cmd);
    r = pu_try_recv(s->c, PROBE_MS);
    if (!r) {
        c1 = redis_cmds(s->rc);
        fail(s, cmd, "no answer within %d ms (Redis ran %lld commands meanwhile)", PROBE_MS,
             c1 - c0);
        redisFree(s->c); /* its request may never end */
        s->c = pu_client(s->e);
        freeReplyObject(before);
        return;
    }
    pu_sleep_ms(20);            /* anything the request set off in the background */
    c1 = redis_cmds(s->rc) - 1; /* less the first INFO */
    after = dump_keys(s->rc);
    if (s->verbose)
        fprintf(stderr, "%s -> %s (%lld Redis commands)\n", cmd, pu_describe(r, d, sizeof(d)),
                c1 - c0);
    if (r->type != REDIS_REPLY_ERROR && c1 - c0 > s->max_ok_cmds)
        s->max_ok_cmds = c1 - c0;
    if (r->type == REDIS_REPLY_ERROR) {
        if (!clear_error(r, row->names))
            fail(s, cmd, "unclear error: %s", pu_describe(r, d, sizeof(d)));
        if ((diff = dump_diff(before, after)))
            fail(s, cmd, "answered %s, but the keyspace changed (at '%s')",
                 pu_describe(r, d, sizeof(d)), diff);
        if (strncmp(r->str, "ERR ", 4) == 0 && c1 - c0 > 1)
            fail(s, cmd, "argument error %s, but Redis ran %lld commands",
                 pu_describe(r, d, sizeof(d)), c1 - c0);
    } else {
        if (!right_reply(r, row->want))
            fail(s, cmd, "wrong reply %s", pu_describe(r, d, sizeof(d)));
        if (c1 - c0 > OK_CMDS_BOUND)
            fail(s, cmd, "answered %s, but Redis ran %lld commands", pu_describe(r, d, sizeof(d)),
                 c1 - c0);
        if (row->lease) {
            check_lease(s, cmd, name, v);
            if (strcmp(row->argv[0], "MULTILOCK") == 0)
                check_lease(s, cmd, name2, v);
        }
    }
    if (strcmp(row->argv[0], "HELLO") == 0 && r->type != REDIS_REPLY_ERROR) {
        redisFree(s->c); /* a protocol switch: start afresh */
        s->c = pu_client(s->e);
    }
    freeReplyObject(r);
    freeReplyObject(before);
    freeReplyObject(after);
}

static void scenario_sweep(struct pu_env *e)
{
    const char *verbose = getenv("LP_BADINPUT_VERBOSE");
    struct sweep s = {e, pu_client(e), pu_redis_client(e), 0, 0, 0, verbose && verbose[0]};

    for (size_t ri = 0; ri < NROWS; ri++) {
        for (size_t vi = 0; vi < NVALUES; vi++)
            probe(&s, ri, vi);
    }
    pu_proxy_assert_alive(&e->proxy);
    fprintf(stderr, "%d probes, %d failures; an answered probe cost Redis at most %lld commands\n",
            s.probes, s.fails, s.max_ok_cmds);
    redisFree(s.c);
    redisFree(s.rc);
    if (s.fails)
        TEST_FAIL("%d of %d probes failed (listed above)", s.fails, s.probes);
}

TEST(badinput_numeric_sweep)
{
    /* No watchdog renewal, unsubscribe or pub/sub keepalive PING (every
     * --upstream-timeout) within the run: Redis's command count is the
     * probes' alone. */
    static const char *const extra[] = {"--lock-watchdog-timeout",
                                        "600000",
                                        "--subscription-linger",
                                        "3600000",
                                        "--upstream-timeout",
                                        "60000",
                                        NULL};

    pu_each_backend(scenario_sweep, extra);
}

/* ---- the LEASE floor ------------------------------------------------------------ */

/* Every command that takes LEASE refuses one below the floor, and takes
 * the floor itself. */
static void scenario_lease_floor(struct pu_env *e)
{
    static const char *const cmds[] = {
        "LOCK %s LEASE %s",           "LOCK %s LEASE %s FENCED",  "TRYLOCK %s LEASE %s",
        "RLOCK %s LEASE %s",          "WLOCK %s LEASE %s",        "FAIRLOCK %s LEASE %s",
        "MULTILOCK %s lf-x LEASE %s", "PSEM.ACQUIRE %s LEASE %s", "PSEM.TRYACQUIRE %s LEASE %s",
    };
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char name[32];
    redisReply *r;

    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        snprintf(name, sizeof(name), "lf%zu", i);
        if (strncmp(cmds[i], "PSEM", 4) == 0)
            PU_INT(c, 1, "PSEM.TRYSETPERMITS %s 5", name);
        PU_ERR(c,
               "ERR LEASE must be at least 10 ms, got '1': a grant is used only with more than "
               "lease/100 + 2 ms of its lease left when Redis answers",
               cmds[i], name, "1");
        PU_ERR(c, "ERR LEASE must be at least 10 ms, got '9'", cmds[i], name, "9");
        ASSERT_EQ(pu_dbsize(rc), strncmp(cmds[i], "PSEM", 4) == 0 ? 1 : 0);
        r = pu_cmd(c, cmds[i], name, "10"); /* the floor itself: granted (or late) */
        if (r->type == REDIS_REPLY_ERROR && !pu_is_err(r, "UPSTREAM Redis answered too late"))
            TEST_FAIL("%s LEASE 10: %s", cmds[i], r->str);
        freeReplyObject(r);
        if (strncmp(cmds[i], "PSEM", 4) != 0)
            PU_EVENTUALLY(!pu_exists(rc, name), 2000); /* the 10 ms lease ran out */
        PU_OK(rc, "FLUSHALL");
    }
    redisFree(rc);
    redisFree(c);
}

TEST(badinput_lease_floor)
{
    pu_each_backend(scenario_lease_floor, NULL);
}

/* ---- back-off after late grants ------------------------------------------------ */

/* A TCP relay between the proxy and Redis that delays every reply (Redis
 * to proxy) by at least delay_ms: each chunk read is written delay_ms
 * after it was read. Threads only; they never fail the test. */
struct relay {
    int lfd;           /* listening socket */
    int port;          /* its port */
    int upstream_port; /* Redis */
    int delay_ms;
};

struct pump {
    int src, dst;
    int delay_ms;
};

static void *pump_run(void *arg)
{
    struct pump *p = arg;
    char buf[65536];
    ssize_t n;

    while ((n = read(p->src, buf, sizeof(buf))) > 0) {
        long long due = pu_now_ms() + p->delay_ms;
        ssize_t off = 0;

        while (pu_now_ms() < due)
            pu_sleep_ms((int)(due - pu_now_ms()));
        while (off < n) {
            ssize_t w = write(p->dst, buf + off, (size_t)(n - off));

            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    shutdown(p->dst, SHUT_RDWR);
    shutdown(p->src, SHUT_RDWR);
    free(p);
    return NULL;
}

static void pump_start(int src, int dst, int delay_ms)
{
    struct pump *p = malloc(sizeof(*p));
    pthread_t t;

    if (!p)
        return;
    *p = (struct pump){src, dst, delay_ms};
    if (pthread_create(&t, NULL, pump_run, p) != 0)
        free(p);
    else
        pthread_detach(t);
}

static void *relay_accept(void *arg)
{
    struct relay *r = arg;
    int cfd, ufd, one = 1;
    struct sockaddr_in a;

    while ((cfd = accept(r->lfd, NULL, NULL)) >= 0) {
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)r->upstream_port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ufd = socket(AF_INET, SOCK_STREAM, 0);
        if (ufd < 0 || connect(ufd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            if (ufd >= 0)
                close(ufd);
            close(cfd);
            continue;
        }
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pump_start(cfd, ufd, 0);
        pump_start(ufd, cfd, r->delay_ms);
    }
    return NULL;
}

static void relay_start(struct relay *r, int upstream_port, int delay_ms)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    pthread_t t;
    int one = 1;

    r->upstream_port = upstream_port;
    r->delay_ms = delay_ms;
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(r->lfd, 64) < 0 || getsockname(r->lfd, (struct sockaddr *)&a, &alen) < 0)
        TEST_FAIL("relay: cannot listen: %s", strerror(errno));
    r->port = ntohs(a.sin_port);
    if (pthread_create(&t, NULL, relay_accept, r) != 0)
        TEST_FAIL("relay: no thread");
    pthread_detach(t);
}

#define RELAY_DELAY_MS 60   /* every reply is at least this late */
#define LATE_LEASE     "20" /* so every grant is late (20 - 20/100 - 2 < 60) */
#define LATE_WAIT_MS   3000

/* Every grant comes RELAY_DELAY_MS after its request, past a 20 ms lease:
 * the waiting LOCK must back off between attempts (20, 40, 80 ... ms, at
 * most 1 s: about 8 attempts in 3 s) instead of retrying at once (one per
 * round trip: about 45), then answer that Redis answered too late. */
static void scenario_late_backoff(const char *backend)
{
    struct relay *relay = calloc(1, sizeof(*relay)); /* its threads outlive the scenario */
    struct pu_env e;
    redisContext *c, *rc;
    redisReply *r;
    long long t0, took, late, scripts0, scripts;
    char d[256];
    int i = 0;

    if (!relay)
        TEST_FAIL("out of memory");
    memset(&e, 0, sizeof(e));
    e.backend = backend;
    pu_redis_start(&e.redis);
    relay_start(relay, e.redis.port, RELAY_DELAY_MS);
    snprintf(e.proxy.upstream, sizeof(e.proxy.upstream), "redis://127.0.0.1:%d", relay->port);
    e.proxy.extra[i++] = "--io";
    e.proxy.extra[i++] = backend;
    e.proxy.extra[i++] = "--log-level";
    e.proxy.extra[i++] = "warn";
    e.proxy.extra[i] = NULL;
    pu_proxy_start(&e.proxy);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_OK(c, "LOCK %s LEASE %d WAIT %d", "warm", 60000, 5000); /* scripts loaded, relay warm */
    scripts0 = pu_cmdstat_calls(rc, "evalsha");
    t0 = pu_now_ms();
    r = pu_cmd(c, "LOCK %s LEASE %s WAIT %d", "bo", LATE_LEASE, LATE_WAIT_MS);
    took = pu_now_ms() - t0;
    late = pu_info_int(c, "late_grants_refused");
    pu_sleep_ms(300); /* the last give-back */
    scripts = pu_cmdstat_calls(rc, "evalsha") - scripts0;
    fprintf(stderr, "%s: answered after %lld ms, %lld late grants, %lld scripts: %s\n", backend,
            took, late, scripts, pu_describe(r, d, sizeof(d)));
    if (!pu_is_err(r, "UPSTREAM Redis answered too late"))
        TEST_FAIL("expected -UPSTREAM Redis answered too late, got %s", d);
    freeReplyObject(r);
    ASSERT_TRUE(took >= LATE_WAIT_MS - 100 && took < LATE_WAIT_MS + 1500);
    ASSERT_TRUE(late >= 4);  /* it did retry... */
    ASSERT_TRUE(late <= 12); /* ...with back-off, not once per round trip */
    ASSERT_TRUE(scripts <= 3 * late + 4);
    PU_EVENTUALLY(!pu_exists(rc, "bo"), 3000); /* every late grant given back */
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

TEST(badinput_late_grant_backoff)
{
    const char *only = getenv("LP_IT_BACKENDS");

    if (!only || !only[0] || strstr(only, "epoll"))
        scenario_late_backoff("epoll");
    if ((!only || !only[0] || strstr(only, "uring")) && pu_uring_available())
        scenario_late_backoff("uring");
}

TEST_MAIN(TEST_CASE(badinput_numeric_sweep), TEST_CASE(badinput_lease_floor),
          TEST_CASE(badinput_late_grant_backoff))
