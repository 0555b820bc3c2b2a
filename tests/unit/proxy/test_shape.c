/* Unit tests for the shape checks of lock-script replies (engine/
 * shape.h): what a handler may read as a grant, a contended answer, a
 * semaphore pair, LOCK.INFO's triple and a watchdog batch. */
#include <stdbool.h>
#include <string.h>

#include "engine/shape.h"
#include "harness.h"
#include "pool/resp.h"

/* Parses one reply from wire; the caller frees it. */
static struct pool_reply *parse(const char *wire)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *r = NULL;

    ASSERT_TRUE(rd != NULL);
    ASSERT_EQ(pool__resp_feed(rd, wire, strlen(wire)), 0);
    ASSERT_EQ(pool__resp_next(rd, &r), 1);
    pool__resp_reader_free(rd);
    return r;
}

static bool acquire(const char *wire, struct px_shape_acq *a)
{
    struct pool_reply *r = parse(wire);
    bool ok = px_shape_acquire(r, a);

    pool__resp_free(r);
    return ok;
}

TEST(acquire_answers)
{
    struct px_shape_acq a;

    ASSERT_TRUE(acquire("*2\r\n:1\r\n:2\r\n", &a));
    ASSERT_TRUE(a.granted);
    ASSERT_EQ(a.count, 2);
    ASSERT_EQ(a.token, -1);
    ASSERT_TRUE(acquire("*3\r\n:1\r\n:1\r\n:42\r\n", &a));
    ASSERT_EQ(a.token, 42);
    ASSERT_TRUE(acquire("*2\r\n:0\r\n:1500\r\n", &a));
    ASSERT_TRUE(!a.granted);
    ASSERT_EQ(a.pttl, 1500);
    /* The plain lock's one integer: -2 - count granted, else pttl. */
    ASSERT_TRUE(acquire(":-3\r\n", &a));
    ASSERT_TRUE(a.granted);
    ASSERT_EQ(a.count, 1);
    ASSERT_EQ(a.token, -1);
    ASSERT_TRUE(acquire(":-9223372036854775808\r\n", &a));
    ASSERT_TRUE(a.granted && a.count == 9223372036854775806LL);
    ASSERT_TRUE(acquire(":1500\r\n", &a));
    ASSERT_TRUE(!a.granted);
    ASSERT_EQ(a.pttl, 1500);
    ASSERT_TRUE(acquire(":-1\r\n", &a));
    ASSERT_TRUE(!a.granted);
    ASSERT_EQ(a.pttl, -1);
}

/* An unlock's answers (nil, 0 still held, 1 released, 2 handed off) that
 * reach an acquire's handler by mistake are never a grant. */
TEST(acquire_unlock_answers_never_grant)
{
    struct px_shape_acq a;

    ASSERT_TRUE(!acquire("$-1\r\n", &a));
    ASSERT_TRUE(acquire(":0\r\n", &a) && !a.granted);
    ASSERT_TRUE(acquire(":1\r\n", &a) && !a.granted);
    ASSERT_TRUE(acquire(":2\r\n", &a) && !a.granted);
}

/* Shapes no script of ours answers: never a grant. */
TEST(acquire_refused)
{
    struct px_shape_acq a;

    ASSERT_TRUE(!acquire("*2\r\n:1\r\n:0\r\n", &a));            /* a grant of nothing */
    ASSERT_TRUE(!acquire("*3\r\n:1\r\n:1\r\n:-1\r\n", &a));     /* negative token */
    ASSERT_TRUE(!acquire("*3\r\n:1\r\n:1\r\n$1\r\n7\r\n", &a)); /* token as a string */
    ASSERT_TRUE(!acquire("*1\r\n:1\r\n", &a));
    ASSERT_TRUE(!acquire("*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n", &a));
    ASSERT_TRUE(!acquire("*2\r\n$1\r\n1\r\n:1\r\n", &a));
    ASSERT_TRUE(!acquire("*2\r\n*1\r\n:1\r\n:1\r\n", &a));
}

/* LOCK.INFO's {locked, count, pttl}: a nested or string element was read
 * as an integer before the shape checks. */
TEST(info_triple)
{
    struct pool_reply *ok = parse("*3\r\n:1\r\n:2\r\n:-2\r\n");
    struct pool_reply *bad = parse("*3\r\n:1\r\n*0\r\n:5\r\n");
    long long v[3];
    size_t n = 0;

    ASSERT_TRUE(px_shape_ints(ok, 3, 3, v, &n));
    ASSERT_EQ(n, 3u);
    ASSERT_EQ(v[2], -2);
    ASSERT_TRUE(!px_shape_ints(bad, 3, 3, v, &n));
    pool__resp_free(ok);
    pool__resp_free(bad);
}

TEST(watchdog_batch)
{
    struct pool_reply *r = parse("*3\r\n:1\r\n:0\r\n$-1\r\n");

    ASSERT_TRUE(px_shape_batch(r, 3));
    ASSERT_TRUE(!px_shape_batch(r, 2));
    ASSERT_TRUE(px_shape_held(r, 0));
    ASSERT_TRUE(!px_shape_held(r, 1));
    ASSERT_TRUE(!px_shape_held(r, 2));
    pool__resp_free(r);
}

TEST_MAIN(TEST_CASE(acquire_answers), TEST_CASE(acquire_refused),
          TEST_CASE(acquire_unlock_answers_never_grant), TEST_CASE(info_triple),
          TEST_CASE(watchdog_batch))
