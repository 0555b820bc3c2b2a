/* The fault relay's self-test (relay_util.h): a real redis-server behind
 * the relay, hiredis clients through it, and a direct connection to Redis
 * to see what reached it. Each mode must do what the partition tests rely
 * on: pass, pause and heal (nothing lost, order kept), partition with new
 * connections refused, drop, reset (RST on both sides), delay, the queue
 * bound, and EOF passed on both ways. */
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "relay_util.h"

struct fixture {
    struct pu_redis redis;
    struct relay *relay;
    redisContext *direct; /* straight to Redis */
};

static void fx_start(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    pu_redis_start(&f->redis);
    f->relay = relay_start(f->redis.port);
    if (!f->relay)
        TEST_FAIL("relay_start: %s", strerror(errno));
    ASSERT_TRUE(relay_port(f->relay) > 0);
    ASSERT_NE(relay_port(f->relay), f->redis.port);
    f->direct = pu_connect(f->redis.port);
}

static void fx_stop(struct fixture *f)
{
    redisFree(f->direct);
    relay_stop(f->relay);
    pu_redis_kill(&f->redis);
}

/* Clients of Redis connected now (the direct one included). */
static long long redis_clients(struct fixture *f)
{
    return pu_info_int(f->direct, "connected_clients");
}

static struct relay_stats stats(struct fixture *f)
{
    struct relay_stats st;

    relay_stats(f->relay, &st);
    return st;
}

/* Bytes both ways, and the counters that go with them. */
TEST(pass)
{
    struct fixture f;
    redisContext *c;
    struct relay_stats st;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_OK(c, "SET k v");
    PU_STR(f.direct, "v", "GET k");
    PU_STR(c, "v", "GET k");
    st = stats(&f);
    ASSERT_EQ(st.accepted, 1);
    ASSERT_EQ(st.active, 1);
    ASSERT_TRUE(st.bytes[RELAY_C2S] > 0);
    ASSERT_TRUE(st.bytes[RELAY_S2C] > 0);
    ASSERT_EQ(st.queued[RELAY_C2S] + st.queued[RELAY_S2C], 0);
    ASSERT_EQ(relay_set(f.relay, RELAY_C2S, RELAY_DELAY, -1), -EINVAL);
    ASSERT_EQ(relay_set(f.relay, (enum relay_dir)7, RELAY_PASS, 0), -EINVAL);
    redisFree(c);
    fx_stop(&f);
}

/* client -> server paused: Redis never sees the command until the heal,
 * then it runs and the reply arrives; nothing lost, order kept. */
TEST(pause_c2s_heal)
{
    struct fixture f;
    redisContext *c;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_OK(c, "SET n 0");
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_PAUSE, 0));
    for (int i = 0; i < 50; i++)
        pu_send(c, "INCR n");
    ASSERT_NULL(pu_try_recv(c, 500));
    PU_STR(f.direct, "0", "GET n");
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_PASS, 0));
    for (int i = 1; i <= 50; i++)
        PU_RECV(c, PU_K_INT, i, NULL);
    PU_STR(f.direct, "50", "GET n");
    redisFree(c);
    fx_stop(&f);
}

/* server -> client paused: the command runs in Redis, the reply waits. */
TEST(pause_s2c_heal)
{
    struct fixture f;
    redisContext *c;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_PAUSE, 0));
    pu_send(c, "SET k v");
    PU_EVENTUALLY(pu_exists(f.direct, "k"), 2000);
    ASSERT_NULL(pu_try_recv(c, 500));
    ASSERT_OK(relay_set(f.relay, RELAY_BOTH, RELAY_PASS, 0));
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_STR(c, "v", "GET k");
    redisFree(c);
    fx_stop(&f);
}

/* A partition: both ways paused; a connection opened during it gets no
 * answer (the kernel completes the handshake, like a SYN that got through
 * and then silence), and gets its answer after the heal; with refuse_new a
 * new connection is reset instead. An open one's close is not seen
 * during the partition, as over a real cut. */
TEST(partition_heal)
{
    struct fixture f;
    redisContext *c, *late, *refused;
    redisReply *rep;
    long long before;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    relay_partition(f.relay, false);
    pu_send(c, "SET p 1");
    late = pu_connect(relay_port(f.relay));
    pu_send(late, "SET q 1");
    ASSERT_NULL(pu_try_recv(c, 400));
    ASSERT_NULL(pu_try_recv(late, 100));
    ASSERT_TRUE(!pu_exists(f.direct, "p"));
    ASSERT_TRUE(!pu_exists(f.direct, "q"));

    relay_partition(f.relay, true);
    before = stats(&f).refused;
    refused = pu_try_connect(relay_port(f.relay));
    if (refused) { /* the connect may complete before the relay resets it */
        pu_set_timeout(refused, 2000);
        rep = redisCommand(refused, "PING");
        ASSERT_NULL(rep);
        ASSERT_TRUE(refused->err != 0);
        redisFree(refused);
    }
    PU_EVENTUALLY(stats(&f).refused == before + 1, 2000);

    relay_heal(f.relay, false);
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_RECV(late, PU_K_STATUS, 0, "OK");
    PU_STR(f.direct, "1", "GET p");
    PU_STR(f.direct, "1", "GET q");
    redisFree(late);
    redisFree(c);
    fx_stop(&f);
}

/* Drop one way, then the other: what is dropped never arrives; the
 * counters say how much. */
TEST(drop)
{
    struct fixture f;
    redisContext *c, *c2;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_DROP, 0));
    pu_send(c, "SET d1 v");
    PU_EVENTUALLY(stats(&f).dropped[RELAY_C2S] > 0, 2000);
    ASSERT_NULL(pu_try_recv(c, 300));
    ASSERT_TRUE(!pu_exists(f.direct, "d1"));
    redisFree(c); /* its stream is cut mid-way: a fresh connection */

    ASSERT_OK(relay_set(f.relay, RELAY_BOTH, RELAY_PASS, 0));
    c2 = pu_connect(relay_port(f.relay));
    PU_STR(c2, "PONG", "PING");
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_DROP, 0));
    pu_send(c2, "SET d2 v");
    PU_EVENTUALLY(pu_exists(f.direct, "d2"), 2000);
    PU_EVENTUALLY(stats(&f).dropped[RELAY_S2C] > 0, 2000);
    ASSERT_NULL(pu_try_recv(c2, 300));
    redisFree(c2);
    fx_stop(&f);
}

/* relay_reset_all: both sides see a reset at once (the client's next read
 * fails, Redis drops the client), during a partition too; a heal with
 * reset does the same and new connections work after. */
TEST(reset)
{
    struct fixture f;
    redisContext *c, *c2, *c3;
    redisReply *rep;
    bool closed;
    long long base;

    fx_start(&f);
    base = redis_clients(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    ASSERT_EQ(redis_clients(&f), base + 1);
    ASSERT_EQ(relay_reset_all(f.relay), 1);
    ASSERT_EQ(stats(&f).active, 0);
    ASSERT_EQ(stats(&f).resets, 1);
    rep = redisCommand(c, "PING");
    ASSERT_NULL(rep);
    ASSERT_TRUE(c->err == REDIS_ERR_IO || c->err == REDIS_ERR_EOF);
    fprintf(stderr, "client after reset: %s\n", c->errstr);
    PU_EVENTUALLY(redis_clients(&f) == base, 2000);
    redisFree(c);

    c2 = pu_connect(relay_port(f.relay));
    PU_STR(c2, "PONG", "PING");
    relay_partition(f.relay, false);
    pu_send(c2, "SET r 1");
    ASSERT_NULL(pu_try_recv(c2, 200));
    relay_heal(f.relay, true);
    ASSERT_NULL(pu_poll_reply(c2, 2000, &closed));
    ASSERT_TRUE(closed);
    ASSERT_TRUE(!pu_exists(f.direct, "r")); /* paused bytes died with the reset */
    PU_EVENTUALLY(redis_clients(&f) == base, 2000);
    redisFree(c2);

    c3 = pu_connect(relay_port(f.relay));
    PU_OK(c3, "SET r 2");
    PU_STR(f.direct, "2", "GET r");
    redisFree(c3);
    fx_stop(&f);
}

/* DELAY: a round trip takes at least the two delays; order is kept. */
TEST(delay)
{
    struct fixture f;
    redisContext *c;
    long long t0, dt;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_DELAY, 200));
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_DELAY, 150));
    t0 = pu_now_ms();
    PU_OK(c, "SET k 1");
    dt = pu_now_ms() - t0;
    fprintf(stderr, "round trip with 200+150 ms delay: %lld ms\n", dt);
    ASSERT_TRUE(dt >= 350);
    ASSERT_TRUE(dt < 1500);
    t0 = pu_now_ms();
    for (int i = 0; i < 20; i++)
        pu_send(c, "INCR k");
    for (int i = 2; i <= 21; i++)
        PU_RECV(c, PU_K_INT, i, NULL);
    dt = pu_now_ms() - t0;
    ASSERT_TRUE(dt >= 350);
    ASSERT_TRUE(dt < 2000); /* pipelined: the delays overlap, not 20 x 350 */
    ASSERT_OK(relay_set(f.relay, RELAY_BOTH, RELAY_PASS, 0));
    t0 = pu_now_ms();
    PU_STR(c, "PONG", "PING");
    ASSERT_TRUE(pu_now_ms() - t0 < 200);
    redisFree(c);
    fx_stop(&f);
}

/* The queue bound: replies far larger than RELAY_QUEUE_MAX while the
 * replies are paused; the relay holds at most the bound (the rest waits
 * in the kernel and in Redis), and after the heal every byte arrives
 * intact, in order. */
TEST(bounded_queue)
{
    enum { VAL = 1 << 20, GETS = 6 };
    struct fixture f;
    redisContext *c;
    char *val = malloc(VAL);
    struct relay_stats st;

    ASSERT_NOTNULL(val);
    for (int i = 0; i < VAL; i++)
        val[i] = (char)('a' + i % 26);
    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    freeReplyObject(pu_cmd(c, "SET big %b", val, (size_t)VAL));
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_DELAY, 60000));
    for (int i = 0; i < GETS; i++)
        pu_send(c, "GET big");
    pu_sleep_ms(800);
    st = stats(&f);
    fprintf(stderr, "queued while delayed: %lld bytes (peak %lld)\n", st.queued[RELAY_S2C],
            st.queued_peak[RELAY_S2C]);
    ASSERT_TRUE(st.queued[RELAY_S2C] > 0);
    ASSERT_LE(st.queued_peak[RELAY_S2C], RELAY_QUEUE_MAX + 16384);
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_PASS, 0)); /* queued chunks due at once */
    for (int i = 0; i < GETS; i++) {
        redisReply *r = pu_try_recv(c, 5000);

        ASSERT_NOTNULL(r);
        ASSERT_EQ(r->type, REDIS_REPLY_STRING);
        ASSERT_EQ(r->len, VAL);
        ASSERT_TRUE(memcmp(r->str, val, VAL) == 0);
        freeReplyObject(r);
    }
    redisFree(c);
    free(val);
    fx_stop(&f);
}

/* Many tiny writes under a long DELAY: the number of queued reads is
 * bounded too (each costs a header), the rest waits in the kernel, and
 * every byte still arrives, in order, once the delay is lifted. */
TEST(bounded_chunks)
{
    enum { PINGS = 2000 };
    struct fixture f;
    struct relay_stats st;
    long long deadline;
    static char all[PINGS * 7 + 1];
    size_t got = 0;
    int fd;

    fx_start(&f);
    fd = pu_raw_connect(relay_port(f.relay));
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_DELAY, 60000));
    for (int i = 0; i < PINGS; i++) {
        ASSERT_TRUE(pu_raw_send(fd, "PING\r\n", 6));
        usleep(300); /* one read each in the relay */
    }
    pu_sleep_ms(300);
    st = stats(&f);
    fprintf(stderr, "queued %lld bytes of %d in at most %lld reads\n", st.queued[RELAY_C2S],
            PINGS * 6, st.chunks_peak[RELAY_C2S]);
    ASSERT_TRUE(st.chunks_peak[RELAY_C2S] > RELAY_CHUNKS_MAX / 2); /* the sends were apart */
    ASSERT_LE(st.chunks_peak[RELAY_C2S], RELAY_CHUNKS_MAX);
    ASSERT_OK(relay_set(f.relay, RELAY_C2S, RELAY_PASS, 0));
    deadline = pu_now_ms() + 10000;
    while (got < (size_t)PINGS * 7 && pu_now_ms() < deadline) {
        size_t n = pu_raw_read_until(fd, all + got, sizeof(all) - got, 1000, NULL);

        if (n == 0)
            break;
        got += n;
    }
    for (size_t i = 0; i + 7 <= got; i += 7)
        ASSERT_TRUE(memcmp(all + i, "+PONG\r\n", 7) == 0);
    ASSERT_EQ(got, (long long)PINGS * 7);
    close(fd);
    fx_stop(&f);
}

/* EOF passes both ways: Redis closing the connection closes the client's,
 * a client's close is seen by Redis; the relay forgets both. */
TEST(eof_both_ways)
{
    struct fixture f;
    redisContext *c, *c2;
    bool closed;
    long long base;

    fx_start(&f);
    base = redis_clients(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    PU_INT(f.direct, 1, "CLIENT KILL TYPE normal SKIPME yes");
    ASSERT_NULL(pu_poll_reply(c, 2000, &closed));
    ASSERT_TRUE(closed);
    ASSERT_EQ(stats(&f).active, 1); /* half-closed until the client closes too */
    redisFree(c);
    PU_EVENTUALLY(stats(&f).active == 0, 2000);

    c2 = pu_connect(relay_port(f.relay));
    PU_STR(c2, "PONG", "PING");
    ASSERT_EQ(redis_clients(&f), base + 1);
    redisFree(c2);
    PU_EVENTUALLY(redis_clients(&f) == base, 2000);
    PU_EVENTUALLY(stats(&f).active == 0, 2000);
    ASSERT_EQ(stats(&f).resets, 0);
    fx_stop(&f);
}

/* The target down (killed): a new connection is reset at once and
 * counted as refused; the relayed one sees Redis's close; once the target
 * is back on its port, new connections work again. */
TEST(target_down)
{
    struct fixture f;
    redisContext *c, *c2, *c3;
    redisReply *rep;
    bool closed;
    long long before;

    fx_start(&f);
    c = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    redisFree(f.direct);
    f.direct = NULL;
    pu_redis_kill(&f.redis);
    ASSERT_NULL(pu_poll_reply(c, 2000, &closed));
    ASSERT_TRUE(closed);
    redisFree(c);
    before = stats(&f).refused;
    c2 = pu_try_connect(relay_port(f.relay));
    if (c2) { /* the kernel may complete the connect before the relay resets it */
        pu_set_timeout(c2, 2000);
        rep = redisCommand(c2, "PING");
        ASSERT_NULL(rep);
        redisFree(c2);
    }
    PU_EVENTUALLY(stats(&f).refused == before + 1, 2000);
    pu_redis_restart(&f.redis);
    f.direct = pu_connect(f.redis.port);
    c3 = pu_connect(relay_port(f.relay));
    PU_STR(c3, "PONG", "PING");
    redisFree(c3);
    fx_stop(&f);
}

/* Stop with connections open and bytes queued (ASan checks the frees). */
TEST(stop_with_open_connections)
{
    struct fixture f;
    redisContext *c[4];
    bool closed;

    fx_start(&f);
    for (int i = 0; i < 4; i++) {
        c[i] = pu_connect(relay_port(f.relay));
        PU_STR(c[i], "PONG", "PING");
    }
    ASSERT_OK(relay_set(f.relay, RELAY_S2C, RELAY_DELAY, 10000));
    for (int i = 0; i < 4; i++)
        pu_send(c[i], "PING");
    PU_EVENTUALLY(stats(&f).queued[RELAY_S2C] > 0, 2000);
    relay_stop(f.relay);
    f.relay = NULL;
    for (int i = 0; i < 4; i++) {
        ASSERT_NULL(pu_poll_reply(c[i], 2000, &closed));
        ASSERT_TRUE(closed);
        redisFree(c[i]);
    }
    fx_stop(&f);
}

/* A child forked (without exec) while connections are open holds none of
 * the relay's sockets: a reset in the parent still reaches both sides, and
 * a client's close still reaches Redis, while the child lives. */
TEST(fork_child_holds_no_socket)
{
    struct fixture f;
    redisContext *c, *c2;
    redisReply *rep;
    long long base;
    pid_t pid;
    int st;

    fx_start(&f);
    base = redis_clients(&f);
    c = pu_connect(relay_port(f.relay));
    c2 = pu_connect(relay_port(f.relay));
    PU_STR(c, "PONG", "PING");
    PU_STR(c2, "PONG", "PING");
    pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) { /* the test's own client sockets are not the relay's business */
        close(c->fd);
        close(c2->fd);
        sleep(5);
        _exit(0);
    }
    redisFree(c2);
    PU_EVENTUALLY(redis_clients(&f) == base + 1, 2000);
    ASSERT_EQ(relay_reset_all(f.relay), 1);
    PU_EVENTUALLY(redis_clients(&f) == base, 2000);
    rep = redisCommand(c, "PING");
    ASSERT_NULL(rep);
    kill(pid, SIGKILL);
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    redisFree(c);
    fx_stop(&f);
}

TEST_MAIN(TEST_CASE(pass), TEST_CASE(pause_c2s_heal), TEST_CASE(pause_s2c_heal),
          TEST_CASE(partition_heal), TEST_CASE(drop), TEST_CASE(reset), TEST_CASE(delay),
          TEST_CASE(bounded_queue), TEST_CASE(bounded_chunks), TEST_CASE(eof_both_ways),
          TEST_CASE(stop_with_open_connections), TEST_CASE(fork_child_holds_no_socket),
          TEST_CASE(target_down))
