/* MULTI/EXEC/DISCARD with Redis's semantics: +QUEUED and nothing run
 * before EXEC, EXEC's array of replies in order, EXECABORT with nothing
 * run after an error while queueing, DISCARD, the errors of EXEC/DISCARD
 * without MULTI and of a nested MULTI, commands that would block run as
 * their one-attempt form, runtime errors as elements of the array, the
 * queue bounded by --max-pipeline (and a request over --max-args marking
 * it), a transaction pipelined among other commands, and a connection
 * closed in the middle of one. */
#include <string.h>

#include "harness.h"
#include "proxy_util.h"

#define EXECABORT "EXECABORT Transaction discarded because of previous errors."

static void expect_queued(redisContext *c, const char *fmt, const char *arg)
{
    PU_STR(c, "QUEUED", fmt, arg);
}

/* The bug this started from: MULTI was refused but the TRYLOCK after it
 * ran at once. Now nothing runs before EXEC, and EXEC answers in order. */
TEST(multi_exec_runs_at_exec)
{
    struct pu_env e = {0};
    redisContext *c, *rc;
    redisReply *r;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_OK(c, "MULTI");
    expect_queued(c, "TRYLOCK %s", "ma");
    expect_queued(c, "LOCK.INFO %s", "ma");
    expect_queued(c, "ECHO %s", "hi");
    ASSERT_TRUE(!pu_exists(rc, "ma"));
    r = pu_cmd(c, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    PU_CHECK(r->element[0], PU_K_STATUS, 0, "OK");
    ASSERT_TRUE(r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements == 12);
    PU_CHECK(r->element[1]->element[3], PU_K_INT, 1, NULL); /* hold_count */
    PU_CHECK(r->element[2], PU_K_STR, 0, "hi");
    freeReplyObject(r);
    ASSERT_TRUE(pu_exists(rc, "ma"));
    /* Held by this connection, as if sent outside MULTI. */
    PU_INT(c, 1, "UNLOCK %s", "ma");
    ASSERT_TRUE(!pu_exists(rc, "ma"));
    /* An empty transaction. */
    PU_OK(c, "MULTI");
    r = pu_cmd(c, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 0);
    freeReplyObject(r);
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

/* An unknown command or a wrong arity while queueing: EXECABORT, and
 * none of the transaction ran. Runtime errors (an option a command does
 * not take) are elements of EXEC's array, as in Redis. */
TEST(multi_execabort)
{
    struct pu_env e = {0};
    redisContext *c, *rc;
    redisReply *r;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_OK(c, "MULTI");
    expect_queued(c, "TRYLOCK %s", "mb");
    PU_ERR(c, "ERR unknown command 'NOSUCH'", "NOSUCH %s", "x");
    expect_queued(c, "TRYLOCK %s", "mc");
    PU_ERR(c, EXECABORT, "EXEC");
    ASSERT_TRUE(!pu_exists(rc, "mb") && !pu_exists(rc, "mc"));
    PU_ERR(c, "ERR EXEC without MULTI", "EXEC");

    PU_OK(c, "MULTI");
    expect_queued(c, "TRYLOCK %s", "mb");
    PU_ERR(c, "ERR wrong number of arguments for 'UNLOCK' command", "UNLOCK");
    PU_ERR(c, EXECABORT, "EXEC");
    ASSERT_TRUE(!pu_exists(rc, "mb"));

    PU_OK(c, "MULTI");
    expect_queued(c, "TRYLOCK %s WAIT 10", "mb"); /* TRYLOCK takes no WAIT: a runtime error */
    expect_queued(c, "TRYLOCK %s", "mc");
    r = pu_cmd(c, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    PU_CHECK(r->element[0], PU_K_ERR, 0, "ERR");
    PU_CHECK(r->element[1], PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    ASSERT_TRUE(!pu_exists(rc, "mb") && pu_exists(rc, "mc"));
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

TEST(multi_discard_and_errors)
{
    struct pu_env e = {0};
    redisContext *c, *rc;
    redisReply *r;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    rc = pu_redis_client(&e);
    PU_ERR(c, "ERR DISCARD without MULTI", "DISCARD");
    PU_ERR(c, "ERR EXEC without MULTI", "EXEC");
    PU_OK(c, "MULTI");
    PU_ERR(c, "ERR MULTI calls can not be nested", "MULTI");
    expect_queued(c, "TRYLOCK %s", "md");
    PU_OK(c, "DISCARD");
    ASSERT_TRUE(!pu_exists(rc, "md"));
    PU_ERR(c, "ERR DISCARD without MULTI", "DISCARD");
    PU_OK(c, "TRYLOCK %s", "md"); /* out of the transaction: runs at once */
    ASSERT_TRUE(pu_exists(rc, "md"));
    /* WATCH is refused (outside and inside MULTI, without marking it);
     * UNWATCH is a no-op. */
    PU_ERR(c, "ERR WATCH is not supported", "WATCH %s", "md");
    PU_OK(c, "UNWATCH");
    PU_OK(c, "MULTI");
    PU_ERR(c, "ERR WATCH is not supported", "WATCH %s", "md");
    expect_queued(c, "UNWATCH%s", "");
    r = pu_cmd(c, "EXEC");
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    PU_CHECK(r->element[0], PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    /* Commands that change the connection cannot be queued. */
    PU_OK(c, "MULTI");
    PU_ERR(c, "ERR Command not allowed inside a transaction", "HELLO %d", 2);
    PU_ERR(c, EXECABORT, "EXEC");
    redisFree(rc);
    redisFree(c);
    pu_env_stop(&e);
}

/* LOCK, FAIRLOCK, SEM.ACQUIRE and LATCH.AWAIT queued in a transaction do
 * not wait at EXEC: one attempt each (nil when taken), as Redis runs BLPOP
 * inside MULTI; a free lock is still taken. */
TEST(multi_blocking_runs_once)
{
    struct pu_env e = {0};
    redisContext *c, *other;
    redisReply *r;
    long long t0;

    pu_env_start(&e, "epoll", NULL);
    c = pu_client(&e);
    other = pu_client(&e);
    PU_OK(other, "LOCK %s", "mbusy");
    PU_OK(other, "FAIRLOCK %s", "mfair");
    PU_INT(other, 1, "SEM.TRYSETPERMITS %s %d", "msem", 0);
    PU_INT(other, 1, "LATCH.TRYSETCOUNT %s %d", "mlatch", 1);
    PU_OK(c, "MULTI");
    expect_queued(c, "LOCK %s", "mbusy");
    expect_queued(c, "LOCK %s WAIT 60000", "mbusy");
    expect_queued(c, "FAIRLOCK %s", "mfair");
    expect_queued(c, "SEM.ACQUIRE %s", "msem");
    expect_queued(c, "LATCH.AWAIT %s", "mlatch");
    expect_queued(c, "LOCK %s", "mfree");
    t0 = pu_now_ms();
    r = pu_cmd(c, "EXEC"); /* a wait would run past the 10 s command timeout */
    ASSERT_TRUE(pu_now_ms() - t0 < 9000);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 6);
    for (int i = 0; i < 5; i++)
        PU_CHECK(r->element[i], PU_K_NIL, 0, NULL);
    PU_CHECK(r->element[5], PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    PU_INT(c, 1, "UNLOCK %s", "mfree");
    /* The connection is not left behind a barrier: it still answers. */
    PU_STR(c, "PONG", "PING");
    redisFree(other);
    redisFree(c);
    pu_env_stop(&e);
}

/* A transaction pipelined among other commands, twice in one write, and
 * --max-pipeline bounding what one transaction may queue. */
TEST(multi_pipelined_and_bounded)
{
    static const char *const extra[] = {"--max-pipeline", "8", "--max-args", "16", NULL};
    const char *argv[20];
    struct pu_env e = {0};
    redisContext *c;
    redisReply *r;

    pu_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    for (int k = 0; k < 2; k++) {
        pu_send(c, "PING");
        pu_send(c, "MULTI");
        pu_send(c, "TRYLOCK %s", k ? "mp1" : "mp0");
        pu_send(c, "ECHO %s", "in");
        pu_send(c, "EXEC");
        pu_send(c, "ECHO %s", "after");
    }
    for (int k = 0; k < 2; k++) {
        PU_CHECK((r = pu_recv(c)), PU_K_STATUS, 0, "PONG");
        freeReplyObject(r);
        PU_CHECK((r = pu_recv(c)), PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
        PU_CHECK((r = pu_recv(c)), PU_K_STATUS, 0, "QUEUED");
        freeReplyObject(r);
        PU_CHECK((r = pu_recv(c)), PU_K_STATUS, 0, "QUEUED");
        freeReplyObject(r);
        r = pu_recv(c);
        ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        PU_CHECK(r->element[0], PU_K_STATUS, 0, "OK");
        PU_CHECK(r->element[1], PU_K_STR, 0, "in");
        freeReplyObject(r);
        PU_CHECK((r = pu_recv(c)), PU_K_STR, 0, "after");
        freeReplyObject(r);
    }
    PU_OK(c, "MULTI");
    for (int i = 0; i < 8; i++)
        expect_queued(c, "ECHO %s", "x");
    PU_ERR(c, "ERR transaction has more than 8 commands queued (--max-pipeline)", "ECHO %s", "x");
    PU_ERR(c, EXECABORT, "EXEC");
    /* A request over --max-args, skipped by the parser, marks it too. */
    PU_OK(c, "MULTI");
    argv[0] = "ECHO";
    for (int i = 1; i < 20; i++)
        argv[i] = "x";
    redisAppendCommandArgv(c, 20, argv, NULL);
    PU_CHECK((r = pu_recv(c)), PU_K_ERR, 0, "ERR request has more than 16 arguments");
    freeReplyObject(r);
    expect_queued(c, "TRYLOCK %s", "mlimit");
    PU_ERR(c, EXECABORT, "EXEC");
    /* Closing in the middle of a transaction frees it (and runs nothing). */
    PU_OK(c, "MULTI");
    expect_queued(c, "TRYLOCK %s", "mgone");
    redisFree(c);
    c = pu_client(&e);
    PU_OK(c, "TRYLOCK %s", "mgone");
    redisFree(c);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(multi_exec_runs_at_exec), TEST_CASE(multi_execabort),
          TEST_CASE(multi_discard_and_errors), TEST_CASE(multi_blocking_runs_once),
          TEST_CASE(multi_pipelined_and_bounded))
