/* Client limits: a client that pipelines without reading its replies is
 * paused (its unsent replies stop at the soft limit, the proxy's memory
 * stays bounded, nothing is lost once it reads) or closed past the hard
 * limit (and its locks are released); a deep pipeline behind a blocked
 * LOCK stays bounded; other clients are served meanwhile. Both io
 * backends. The idle and pre-AUTH deadlines, the HTTP probes with idle
 * connections open and TCP keepalive are in test_deadlines.c. */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "limits_util.h"
#include "ops_util.h"
#include "proxy_util.h"

#define FLOOD_MS     4000
#define RSS_BOUND_KB (64 * 1024) /* generous: the proxy idles at a few MB */
#define INFO_REQ     "*1\r\n$4\r\nINFO\r\n"
#define KEPT_INFOS   3000
#define CLOSE_MS     15000

/* ---- no reading: bounded memory, replies kept --------------------------- */

static void scenario_info_flood(struct pu_env *e)
{
    redisContext *other = pu_client(e);
    struct lu_flood f;
    int fd = pu_raw_connect(e->proxy.port);

    lu_flood(&f, fd, INFO_REQ, FLOOD_MS, other, e->proxy.pid);
    fprintf(stderr,
            "INFO flood: %zu bytes sent in %d ms, %d other requests served, peak "
            "RSS %ld kB\n",
            f.sent, FLOOD_MS, f.served, f.peak_rss_kb);
    if (f.closed)
        TEST_FAIL("the flooding client was closed under the default limits");
    ASSERT_TRUE(f.peak_rss_kb > 0 && f.peak_rss_kb < RSS_BOUND_KB);
    ASSERT_TRUE(f.served > 0);
    ASSERT_EQ(pu_info_int(other, "clients_output_paused"), 1);
    ASSERT_TRUE(pu_info_int(other, "client_output_pauses") >= 1);
    close(fd);
    PU_EVENTUALLY(pu_info_int(other, "clients_output_paused") == 0, 5000);
    PU_OK(other, "LOCK %s", "after-flood");
    PU_INT(other, 1, "UNLOCK %s", "after-flood");
    redisFree(other);
}

TEST(limits_info_flood_bounded)
{
    lu_small_asan_quarantine();
    pu_each_backend(scenario_info_flood, NULL);
}

/* Replies held back by the soft limit all arrive, in order, once read. */
static void scenario_replies_kept(struct pu_env *e)
{
    redisContext *other = pu_client(e);
    char *batch = malloc(KEPT_INFOS * (sizeof(INFO_REQ) - 1) + 64);
    size_t len = 0;
    int fd = pu_raw_connect(e->proxy.port);

    ASSERT_NOTNULL(batch);
    for (int i = 0; i < KEPT_INFOS; i++) {
        memcpy(batch + len, INFO_REQ, sizeof(INFO_REQ) - 1);
        len += sizeof(INFO_REQ) - 1;
    }
    len += (size_t)sprintf(batch + len, "*2\r\n$4\r\nECHO\r\n$4\r\nlast\r\n");
    ASSERT_TRUE(pu_raw_send(fd, batch, len));
    PU_EVENTUALLY(pu_info_int(other, "clients_output_paused") == 1, 10000);
    ASSERT_EQ(lu_read_infos(fd, KEPT_INFOS, 20000), KEPT_INFOS);
    ASSERT_TRUE(lu_read_reply_is(fd, "$4\r\nlast\r\n", 5000));
    ASSERT_TRUE(pu_raw_send(fd, "*1\r\n$4\r\nPING\r\n", 14));
    ASSERT_TRUE(lu_read_reply_is(fd, "+PONG\r\n", 5000));
    ASSERT_EQ(pu_info_int(other, "clients_output_paused"), 0);
    ASSERT_EQ(pu_info_int(other, "client_output_buffer_limit_disconnections"), 0);
    close(fd);
    free(batch);
    redisFree(other);
}

TEST(limits_replies_kept_in_order)
{
    pu_each_backend(scenario_replies_kept, NULL);
}

/* ---- past the hard limit: closed, its locks released -------------------- */

static void scenario_hard_close(struct pu_env *e)
{
    redisContext *other = pu_client(e);
    struct lu_flood f;
    char line[64];
    int fd = pu_raw_connect(e->proxy.port);

    /* The slow reader holds a lock first. */
    ASSERT_TRUE(pu_raw_send(fd, "*2\r\n$4\r\nLOCK\r\n$4\r\nslow\r\n", 24));
    pu_raw_read_line(fd, line, sizeof(line), 5000);
    ASSERT_STREQ(line, "+OK\r\n");
    PU_NIL(other, "TRYLOCK %s", "slow");
    lu_flood(&f, fd, INFO_REQ, CLOSE_MS, other, e->proxy.pid);
    fprintf(stderr,
            "INFO flood with the soft limit off: closed %d after %zu bytes, peak RSS "
            "%ld kB\n",
            f.closed, f.sent, f.peak_rss_kb);
    if (!f.closed)
        TEST_FAIL("a client past --client-output-hard-limit was not closed in %d ms", CLOSE_MS);
    ASSERT_TRUE(f.peak_rss_kb > 0 && f.peak_rss_kb < RSS_BOUND_KB);
    close(fd);
    /* Closing it released its lock, as any disconnect does. */
    PU_OK(other, "LOCK %s WAIT %d", "slow", 10000);
    PU_INT(other, 1, "UNLOCK %s", "slow");
    ASSERT_EQ(pu_info_int(other, "client_output_buffer_limit_disconnections"), 1);
    ASSERT_TRUE(ou_file_contains(e->proxy.log_path, "client-output-hard-limit"));
    redisFree(other);
}

TEST(limits_hard_limit_closes_and_releases)
{
    lu_small_asan_quarantine();
    static const char *const extra[] = {"--client-output-soft-limit", "0",
                                        "--client-output-hard-limit", "1048576", NULL};

    pu_each_backend(scenario_hard_close, extra);
}

/* ---- lock pipelines ------------------------------------------------------- */

/* Pipelined LOCK/UNLOCK pairs, never read, then a deep pipeline queued
 * behind a LOCK that waits: memory stays bounded both times. */
static void scenario_lock_flood(struct pu_env *e)
{
    static const char pair[] = "*2\r\n$4\r\nLOCK\r\n$2\r\nlu\r\n*2\r\n$6\r\nUNLOCK\r\n$2\r\nlu\r\n";
    redisContext *other = pu_client(e), *holder = pu_client(e);
    struct lu_flood f;
    char line[64];
    int fd = pu_raw_connect(e->proxy.port), fd2;

    lu_flood(&f, fd, pair, FLOOD_MS, other, e->proxy.pid);
    fprintf(stderr, "LOCK/UNLOCK flood: %zu bytes, %d served, peak RSS %ld kB\n", f.sent, f.served,
            f.peak_rss_kb);
    ASSERT_TRUE(!f.closed && f.served > 0);
    ASSERT_TRUE(f.peak_rss_kb > 0 && f.peak_rss_kb < RSS_BOUND_KB);
    close(fd);

    /* Behind a LOCK that waits, requests queue up to --max-pipeline. */
    PU_OK(holder, "LOCK %s", "deep");
    fd2 = pu_raw_connect(e->proxy.port);
    ASSERT_TRUE(pu_raw_send(fd2, "*2\r\n$4\r\nLOCK\r\n$4\r\ndeep\r\n", 24));
    lu_flood(&f, fd2, "*2\r\n$9\r\nLOCK.INFO\r\n$2\r\nli\r\n", FLOOD_MS, other, e->proxy.pid);
    fprintf(stderr, "behind a waiting LOCK: %zu bytes, peak RSS %ld kB\n", f.sent, f.peak_rss_kb);
    ASSERT_TRUE(!f.closed && f.served > 0);
    ASSERT_TRUE(f.peak_rss_kb > 0 && f.peak_rss_kb < RSS_BOUND_KB);
    /* The waiter still gets the lock when it is released. */
    PU_INT(holder, 1, "UNLOCK %s", "deep");
    pu_raw_read_line(fd2, line, sizeof(line), 10000); /* LOCK.INFO replies follow */
    if (strncmp(line, "+OK\r\n", 5) != 0)
        TEST_FAIL("the waiting LOCK got: %.20s", line);
    close(fd2);
    PU_OK(other, "LOCK %s WAIT %d", "deep", 10000);
    redisFree(holder);
    redisFree(other);
}

TEST(limits_lock_pipelines_bounded)
{
    lu_small_asan_quarantine();
    pu_each_backend(scenario_lock_flood, NULL);
}

/* ---- client memory: a global bound, and memory given back -------------- */

#define ECHO_BYTES 60000
#define MEM_BOUND  (8 * 1024 * 1024) /* --max-client-memory of the bound scenario */
#define MEM_CONNS  6
#define MEM_ECHOES 60
#define SLACK_KB   (32 * 1024) /* RSS the allocator may keep around a bound */

static char *echo_payload(void)
{
    char *p = malloc(ECHO_BYTES + 1);

    ASSERT_NOTNULL(p);
    memset(p, 'm', ECHO_BYTES);
    p[ECHO_BYTES] = '\0';
    return p;
}

/* Opens n connections, each sends MULTI and echoes ECHO <60 KB>; counts
 * the +QUEUED and -OOM replies (anything else fails the test). */
static void multi_burst(struct pu_env *e, redisContext **c, int n, int echoes, int *queued,
                        int *oom)
{
    char *payload = echo_payload();

    *queued = *oom = 0;
    for (int i = 0; i < n; i++) {
        c[i] = pu_client(e);
        PU_OK(c[i], "MULTI");
        for (int j = 0; j < echoes; j++)
            pu_send(c[i], "ECHO %s", payload);
    }
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < echoes; j++) {
            redisReply *r = pu_recv(c[i]);
            char d[256];

            if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "QUEUED") == 0)
                (*queued)++;
            else if (pu_is_err(r, "OOM") && strstr(r->str, "--max-client-memory"))
                (*oom)++;
            else
                TEST_FAIL("ECHO inside MULTI answered %s", pu_describe(r, d, sizeof(d)));
            freeReplyObject(r);
        }
    }
    free(payload);
}

/* Transactions that would hold more than --max-client-memory are refused
 * with -OOM naming the flag (and abort at EXEC); what is held stays under
 * the bound, and INFO shows it. */
static void scenario_client_memory_bound(struct pu_env *e)
{
    redisContext *c[MEM_CONNS], *other = pu_client(e);
    long base_kb = lu_rss_kb(e->proxy.pid), peak_kb;
    long long held;
    int queued, oom;

    ASSERT_EQ(pu_info_int(other, "max_client_memory"), MEM_BOUND);
    multi_burst(e, c, MEM_CONNS, MEM_ECHOES, &queued, &oom);
    peak_kb = lu_rss_kb(e->proxy.pid);
    held = pu_info_int(other, "client_memory");
    fprintf(stderr,
            "MULTI burst under an 8 MiB bound: %d queued, %d refused, client_memory %lld, "
            "RSS %ld -> %ld kB\n",
            queued, oom, held, base_kb, peak_kb);
    ASSERT_TRUE(oom > 0);
    ASSERT_TRUE(queued > 0 && (long long)queued * ECHO_BYTES <= MEM_BOUND);
    ASSERT_TRUE(held >= (long long)queued * ECHO_BYTES && held <= MEM_BOUND);
    ASSERT_TRUE(peak_kb < base_kb + MEM_BOUND / 1024 + SLACK_KB);
    ASSERT_TRUE(pu_info_int(other, "client_memory_refusals") >= oom);
    /* The last connection was refused: its EXEC aborts; the others run. */
    PU_ERR(c[MEM_CONNS - 1], "EXECABORT", "EXEC");
    for (int i = 0; i < MEM_CONNS; i++)
        redisFree(c[i]);
    PU_EVENTUALLY(pu_info_int(other, "client_memory") < 64 * 1024, 5000);
    /* Under the bound again: a transaction queues. */
    PU_OK(other, "MULTI");
    PU_STR(other, "QUEUED", "ECHO %s", "x");
    redisReply *r = pu_cmd(other, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    freeReplyObject(r);
    redisFree(other);
}

TEST(limits_client_memory_bounded)
{
    static const char *const extra[] = {"--max-client-memory", "8388608", NULL};

    lu_small_asan_quarantine();
    pu_each_backend(scenario_client_memory_bound, extra);
}

/* After a burst of big transactions closes, the proxy's resident memory
 * falls back within a few seconds, without any further traffic. */
static void scenario_memory_returned(struct pu_env *e)
{
    redisContext *c[6], *other = pu_client(e);
    char alloc[32] = "";
    long base_kb, peak_kb;
    int queued, oom;

    pu_info_str(other, "mem_allocator", alloc, sizeof(alloc));
    PU_STR(other, "PONG", "PING");
    base_kb = lu_rss_kb(e->proxy.pid);
    multi_burst(e, c, 6, 100, &queued, &oom);
    peak_kb = lu_rss_kb(e->proxy.pid);
    ASSERT_EQ(oom, 0);
    for (int i = 0; i < 6; i++)
        redisFree(c[i]);
    fprintf(stderr, "6 x 100 queued ECHO 60 KB: RSS %ld -> %ld kB\n", base_kb, peak_kb);
    ASSERT_TRUE(peak_kb > base_kb + 24 * 1024); /* the burst did take memory */
    if (strcmp(alloc, "jemalloc") != 0) {
        fprintf(stderr, "allocator %s: not checking that memory is given back\n", alloc);
    } else {
        long long dl = pu_now_ms() + 5000;
        long now_kb;

        while ((now_kb = lu_rss_kb(e->proxy.pid)) > base_kb + 16 * 1024 && pu_now_ms() < dl)
            pu_sleep_ms(100);
        fprintf(stderr, "RSS after the connections closed: %ld kB\n", now_kb);
        if (now_kb > base_kb + 16 * 1024)
            TEST_FAIL("RSS %ld kB 5 s after the burst closed (before it: %ld kB)", now_kb, base_kb);
    }
    ASSERT_EQ(pu_info_int(other, "client_memory") < 64 * 1024, 1);
    redisFree(other);
}

TEST(limits_client_memory_given_back)
{
    lu_small_asan_quarantine();
    pu_each_backend(scenario_memory_returned, NULL);
}

/* --max-client-memory and --latency-monitor-threshold follow a reload,
 * both ways. */
TEST(limits_client_memory_reloadable)
{
    char conf[PU_PATH_MAX];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *c;
    char *payload = echo_payload();

    ou_path(conf, sizeof(conf), "mem.conf");
    ou_write_file(conf, "max-client-memory 100000\nlatency-monitor-threshold 50\n");
    ou_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    ASSERT_EQ(pu_info_int(c, "max_client_memory"), 100000);
    ASSERT_EQ(pu_info_int(c, "latency_monitor_threshold_ms"), 50);
    PU_OK(c, "MULTI");
    PU_STR(c, "QUEUED", "ECHO %s", payload);
    PU_ERR(c, "OOM", "ECHO %s", payload);
    PU_ERR(c, "EXECABORT", "EXEC");
    ou_write_file(conf, "max-client-memory 0\nlatency-monitor-threshold 0\n");
    kill(e.proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(c, "max_client_memory") == 0, 5000);
    ASSERT_EQ(pu_info_int(c, "latency_monitor_threshold_ms"), 0);
    PU_OK(c, "MULTI");
    for (int i = 0; i < 3; i++)
        PU_STR(c, "QUEUED", "ECHO %s", payload);
    redisReply *r = pu_cmd(c, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    freeReplyObject(r);
    ou_write_file(conf, "max-client-memory 100000\nlatency-monitor-threshold 50\n");
    kill(e.proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(c, "max_client_memory") == 100000, 5000);
    ASSERT_EQ(pu_info_int(c, "latency_monitor_threshold_ms"), 50);
    free(payload);
    redisFree(c);
    pu_env_stop(&e);
}

/* Idle connections: IDLE_CONNS connections that each answered one PING
 * add less than IDLE_MAX_BYTES of proxy RSS apiece, on either backend
 * (BENCHMARKS.md, "Idle memory": 641 B io_uring, 636 B epoll at 10,000;
 * the bound has room for allocator and page noise, not for another size
 * class of the client struct or a receive buffer per connection).
 * Under AddressSanitizer (redzones, quarantine) the figure is printed
 * only. */
#define IDLE_CONNS     3000
#define IDLE_MAX_BYTES 800

static void scenario_idle_memory(struct pu_env *e)
{
    static int fds[IDLE_CONNS];
    redisContext *c = pu_client(e);
    long base_kb, open_kb, per;

    PU_STR(c, "PONG", "PING");
    pu_sleep_ms(200);
    base_kb = lu_rss_kb(e->proxy.pid);
    for (int i = 0; i < IDLE_CONNS; i++) {
        fds[i] = pu_raw_connect(e->proxy.port);
        ASSERT_EQ(write(fds[i], "PING\r\n", 6), 6);
        ASSERT_TRUE(lu_read_reply_is(fds[i], "+PONG\r\n", 5000));
    }
    pu_sleep_ms(200);
    open_kb = lu_rss_kb(e->proxy.pid);
    per = (open_kb - base_kb) * 1024 / IDLE_CONNS;
    fprintf(stderr, "%s: %d idle connections: RSS %ld -> %ld kB, %ld B each\n", e->backend,
            IDLE_CONNS, base_kb, open_kb, per);
    ASSERT_EQ(pu_info_int(c, "connected_clients"), IDLE_CONNS + 1);
    for (int i = 0; i < IDLE_CONNS; i++)
        close(fds[i]);
#ifndef __SANITIZE_ADDRESS__
    if (per >= IDLE_MAX_BYTES)
        TEST_FAIL("%s: %ld bytes of RSS per idle connection, bound %d", e->backend, per,
                  IDLE_MAX_BYTES);
#endif
    redisFree(c);
}

TEST(limits_idle_connection_memory)
{
    pu_raise_nofile(IDLE_CONNS + 256);
    pu_each_backend(scenario_idle_memory, NULL);
}

/* Mass release: a connection holding MASS_HOLDS locks closes; while the
 * proxy releases them, another connection's PING and TRYLOCK are answered
 * within MASS_MAX_MS each (the release goes in bounded steps, one per
 * loop pass, instead of one pass over every hold), and every lock is
 * gone from Redis within seconds. */
#define MASS_HOLDS 50000
#define MASS_BATCH 1000
#ifdef __SANITIZE_ADDRESS__
#define MASS_MAX_MS 1000 /* everything runs slower; the stall it catches grows too */
#else
#define MASS_MAX_MS 500
#endif

/* n TRYLOCKs on c (mass:0, mass:1, ...), pipelined MASS_BATCH at a time. */
static void mass_take(redisContext *c, int n)
{
    for (int i = 0; i < n; i += MASS_BATCH) {
        for (int j = i; j < i + MASS_BATCH; j++)
            ASSERT_EQ(redisAppendCommand(c, "TRYLOCK mass:%d", j), REDIS_OK);
        for (int j = i; j < i + MASS_BATCH; j++) {
            redisReply *r = NULL;

            ASSERT_EQ(redisGetReply(c, (void **)&r), REDIS_OK);
            ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
            freeReplyObject(r);
        }
    }
}

/* One round of the other connection: PING, then TRYLOCK and UNLOCK of a
 * lock of its own; returns how long it took (ms). */
static long long mass_other_round(redisContext *b)
{
    long long t = pu_now_ms();

    PU_STR(b, "PONG", "PING");
    PU_OK(b, "TRYLOCK other LEASE 5000");
    PU_INT(b, 1, "UNLOCK other");
    return pu_now_ms() - t;
}

static void scenario_mass_release(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e), *rc = pu_redis_client(e);
    long long start, dl, worst = 0, calm = 0, t, base = pu_dbsize(rc);
    int served = 0;

    pu_set_timeout(a, 30000);
    start = pu_now_ms();
    mass_take(a, MASS_HOLDS);
    fprintf(stderr, "%s: %d TRYLOCKs taken in %lld ms\n", e->backend, MASS_HOLDS,
            pu_now_ms() - start);
    ASSERT_EQ(pu_dbsize(rc), base + MASS_HOLDS);
    /* The same rounds with nothing being released: what the machine's
     * load alone costs them (the bound allows twice that). */
    for (dl = pu_now_ms() + 1000; pu_now_ms() < dl; pu_sleep_ms(5)) {
        t = mass_other_round(b);
        calm = t > calm ? t : calm;
    }
    redisFree(a);
    start = pu_now_ms();
    for (dl = start + 30000; pu_dbsize(rc) > base && pu_now_ms() < dl; pu_sleep_ms(5)) {
        t = mass_other_round(b);
        worst = t > worst ? t : worst;
        served++;
    }
    fprintf(stderr,
            "%s: %d holds released in %lld ms; %d rounds of PING+TRYLOCK+UNLOCK meanwhile, "
            "slowest %lld ms (%lld ms before the close)\n",
            e->backend, MASS_HOLDS, pu_now_ms() - start, served, worst, calm);
    ASSERT_EQ(pu_dbsize(rc), base);
    if (worst > MASS_MAX_MS + 2 * calm)
        TEST_FAIL("%s: a round took %lld ms during the release (bound %d ms + 2 x %lld)",
                  e->backend, worst, MASS_MAX_MS, calm);
    PU_OK(b, "TRYLOCK mass:0 LEASE 1000");
    redisFree(rc);
    redisFree(b);
}

TEST(limits_mass_release_serves_others)
{
    pu_each_backend(scenario_mass_release, NULL);
}

/* Held locks: HELD_N holds (short names, the connection's owner) add less
 * than HELD_MAX_BYTES of proxy RSS apiece (BENCHMARKS.md: 243 B at
 * 200,000; 298-312 B at this count, where fixed costs weigh more; 464-518
 * B while the hold block was 384 B with a copy of the owner and the
 * settle job in it, 593 B before the metrics' record per hold went), and
 * once they are released most of it goes back to the system:
 * under HELD_KEPT_PCT % of what they added stays (10-25 % measured; what
 * stays is mostly jemalloc's unpurged pages under PX_CLIMEM_DIRTY_MAX).
 * Printed only under AddressSanitizer. */
#define HELD_N         30000
#define HELD_MAX_BYTES 370
#define HELD_KEPT_PCT  40

static void scenario_held_memory(struct pu_env *e)
{
    redisContext *a = pu_client(e), *rc = pu_redis_client(e);
    long base_kb, held_kb, after_kb, per;
    long long dl;

    PU_STR(a, "PONG", "PING");
    pu_sleep_ms(200);
    base_kb = lu_rss_kb(e->proxy.pid);
    mass_take(a, HELD_N);
    pu_sleep_ms(200);
    held_kb = lu_rss_kb(e->proxy.pid);
    per = (held_kb - base_kb) * 1024 / HELD_N;
    redisFree(a);
    for (dl = pu_now_ms() + 20000; pu_dbsize(rc) > 0 && pu_now_ms() < dl;)
        pu_sleep_ms(50);
    ASSERT_EQ(pu_dbsize(rc), 0);
    dl = pu_now_ms() + 4000; /* the housekeeping timer runs every second */
    while ((after_kb = lu_rss_kb(e->proxy.pid)) - base_kb >
               (held_kb - base_kb) * HELD_KEPT_PCT / 100 &&
           pu_now_ms() < dl)
        pu_sleep_ms(100);
    fprintf(stderr, "%s: %d holds: RSS %ld -> %ld kB (%ld B each), %ld kB once released\n",
            e->backend, HELD_N, base_kb, held_kb, per, after_kb);
#ifndef __SANITIZE_ADDRESS__
    if (per >= HELD_MAX_BYTES)
        TEST_FAIL("%s: %ld bytes of RSS per held lock, bound %d", e->backend, per, HELD_MAX_BYTES);
    if ((after_kb - base_kb) * 100 > (held_kb - base_kb) * HELD_KEPT_PCT)
        TEST_FAIL("%s: %ld of the %ld kB the holds took still resident after their release",
                  e->backend, after_kb - base_kb, held_kb - base_kb);
#endif
    redisFree(rc);
}

TEST(limits_held_lock_memory)
{
    lu_small_asan_quarantine();
    pu_each_backend(scenario_held_memory, NULL);
}

TEST_MAIN(TEST_CASE(limits_info_flood_bounded), TEST_CASE(limits_replies_kept_in_order),
          TEST_CASE(limits_hard_limit_closes_and_releases),
          TEST_CASE(limits_lock_pipelines_bounded), TEST_CASE(limits_client_memory_bounded),
          TEST_CASE(limits_client_memory_given_back), TEST_CASE(limits_client_memory_reloadable),
          TEST_CASE(limits_idle_connection_memory), TEST_CASE(limits_mass_release_serves_others),
          TEST_CASE(limits_held_lock_memory))
