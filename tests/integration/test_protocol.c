/* RESP front end of lockproxy: pipelining and reply order (also behind a
 * blocked LOCK), fragmented input, binary-safe names, inline commands,
 * malformed input (Redis's protocol errors), requests over the limits,
 * argument errors, the Redis-compatible utility commands and INFO, and many
 * idle connections. Both io backends. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"
#include "sync_util.h"

#define IDLE_CONNS 2000

/* Case-insensitive substring test. */
static bool mentions(const char *hay, const char *needle)
{
    size_t n = strlen(needle);

    for (; *hay; hay++) {
        if (strncasecmp(hay, needle, n) == 0)
            return true;
    }
    return false;
}

static void scenario_pipeline(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);
    redisReply *r;
    char num[16];

    /* PING and ECHO queued behind a blocked LOCK are answered after it. */
    PU_OK(c1, "LOCK %s LEASE %d", "pa", 10000);
    pu_send(c2, "LOCK %s", "pa");
    pu_send(c2, "PING");
    pu_send(c2, "ECHO %s", "x");
    ASSERT_NULL(pu_try_recv(c2, 300));
    PU_INT(c1, 1, "UNLOCK %s", "pa");
    su_expect_ok_within(c2, 5000);
    r = pu_recv(c2);
    PU_CHECK(r, PU_K_STATUS, 0, "PONG");
    freeReplyObject(r);
    r = pu_recv(c2);
    PU_CHECK(r, PU_K_STR, 0, "x");
    freeReplyObject(r);
    PU_INT(c2, 1, "UNLOCK %s", "pa");

    /* 600 mixed commands in one write, answered in order. */
    for (int i = 0; i < 200; i++) {
        redisAppendCommand(c2, "LOCK p%d", i);
        redisAppendCommand(c2, "ECHO %d", i);
        redisAppendCommand(c2, "UNLOCK p%d", i);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(num, sizeof(num), "%d", i);
        r = pu_recv(c2);
        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
        r = pu_recv(c2);
        PU_CHECK(r, PU_K_STR, 0, num);
        freeReplyObject(r);
        r = pu_recv(c2);
        PU_CHECK(r, PU_K_INT, 1, NULL);
        freeReplyObject(r);
    }
    for (int i = 0; i < 1000; i++)
        redisAppendCommand(c1, "PING");
    for (int i = 0; i < 1000; i++) {
        r = pu_recv(c1);
        PU_CHECK(r, PU_K_STATUS, 0, "PONG");
        freeReplyObject(r);
    }
    redisFree(c2);
    redisFree(c1);
}

/* A request that arrives one byte at a time, and names with CR, LF, NUL. */
static void scenario_fragments_binary(struct pu_env *e)
{
    static const char req[] = "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
    static const char name[] = "bin\r\nname\0x";
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char buf[256];
    int fd = pu_raw_connect(e->proxy.port);
    redisReply *r;

    for (size_t i = 0; i < sizeof(req) - 1; i++) {
        ASSERT_TRUE(pu_raw_send(fd, req + i, 1));
        usleep(1000);
    }
    pu_raw_read_line(fd, buf, sizeof(buf), 3000);
    if (!strstr(buf, "PONG"))
        pu_raw_read_line(fd, buf + strlen(buf), sizeof(buf) - strlen(buf), 3000);
    ASSERT_STREQ(buf, "$5\r\nhello\r\n+PONG\r\n");
    close(fd);

    PU_OK(c, "LOCK %b", name, sizeof(name) - 1);
    r = pu_cmd(rc, "EXISTS %b", name, sizeof(name) - 1);
    PU_CHECK(r, PU_K_INT, 1, NULL);
    freeReplyObject(r);
    PU_INT(c, 1, "UNLOCK %b", name, sizeof(name) - 1);
    r = pu_cmd(rc, "EXISTS %b", name, sizeof(name) - 1);
    PU_CHECK(r, PU_K_INT, 0, NULL);
    freeReplyObject(r);
    redisFree(rc);
    redisFree(c);
}

/* What the proxy must do with a bad input. */
enum bad_expect {
    BAD_ERR = 1,     /* an error reply (the connection stays open) */
    BAD_PROTO_CLOSE, /* "-ERR Protocol error: ..." and the connection closed */
};

struct bad_input {
    const char *what;
    const char *bytes;
    size_t flood; /* then this many 'x' bytes (no line end) */
    enum bad_expect expect;
    const char *reply; /* the reply's first line starts with this */
};

/* Malformed framing gets Redis's words; an inline line is a command. */
static const struct bad_input bad_inputs[] = {
    {"garbage bytes", "\x01\x02\xff\xfe\x80 junk\r\n", 0, BAD_ERR, "-ERR unknown command"},
    {"inline text", "FOOBAR some inline text\r\n", 0, BAD_ERR, "-ERR unknown command 'FOOBAR'"},
    {"multibulk over INT_MAX", "*3000000000\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: invalid multibulk length\r\n"},
    {"non-numeric multibulk", "*abc\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: invalid multibulk length\r\n"},
    {"negative bulk", "*1\r\n$-3\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: invalid bulk length\r\n"},
    {"nested array", "*1\r\n*1\r\n$4\r\nPING\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: expected '$', got '*'\r\n"},
    {"integer instead of bulk", "*1\r\n:4\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: expected '$', got ':'\r\n"},
    {"bulk over proto-max-bulk-len", "*2\r\n$4\r\nLOCK\r\n$99999999999\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: invalid bulk length\r\n"},
    {"bulk longer than declared", "*1\r\n$2\r\nabc\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: invalid bulk length\r\n"},
    {"unbalanced quotes", "ECHO \"abc\r\n", 0, BAD_PROTO_CLOSE,
     "-ERR Protocol error: unbalanced quotes in request\r\n"},
    {"4 MiB unterminated line", "", 4u << 20, BAD_PROTO_CLOSE,
     "-ERR Protocol error: too big inline request\r\n"},
    {"4 MiB count header", "*", 4u << 20, BAD_PROTO_CLOSE,
     "-ERR Protocol error: too big mbulk count string\r\n"},
};

/* Sends b->bytes and then b->flood filler bytes; false if the peer closed
 * or reset the connection first. */
static bool send_bad(int fd, const struct bad_input *b)
{
    char *fill;
    bool ok;

    if (!pu_raw_send(fd, b->bytes, strlen(b->bytes)))
        return false;
    if (b->flood == 0)
        return true;
    fill = malloc(b->flood);
    ASSERT_NOTNULL(fill);
    memset(fill, 'x', b->flood);
    ok = pu_raw_send(fd, fill, b->flood);
    free(fill);
    return ok;
}

/* Sends one bad input on a fresh connection; returns NULL if the proxy
 * reacted as required, else what went wrong (static storage). */
static const char *try_bad_input(struct pu_env *e, const struct bad_input *b)
{
    static char why[256];
    int fd = pu_raw_connect(e->proxy.port);
    char buf[512];
    bool closed;

    why[0] = '\0';
    send_bad(fd, b);
    pu_raw_read_line(fd, buf, sizeof(buf), 3000);
    closed = pu_raw_wait_closed(fd, b->expect == BAD_PROTO_CLOSE ? 3000 : 100);
    close(fd);
    if (strncmp(buf, b->reply, strlen(b->reply)) != 0)
        snprintf(why, sizeof(why), "expected \"%.60s\", got \"%.60s\" (closed: %d)", b->reply, buf,
                 closed);
    else if (b->expect == BAD_PROTO_CLOSE && !closed)
        snprintf(why, sizeof(why), "connection not closed after the protocol error");
    else if (b->expect == BAD_ERR && closed)
        snprintf(why, sizeof(why), "connection closed after a plain error");
    return why[0] ? why : NULL;
}

static void scenario_malformed(struct pu_env *e)
{
    redisContext *c = pu_client(e);
    int failed = 0;

    for (size_t i = 0; i < sizeof(bad_inputs) / sizeof(bad_inputs[0]); i++) {
        const char *why = try_bad_input(e, &bad_inputs[i]);

        fprintf(stderr, "   malformed: %-30s %s\n", bad_inputs[i].what, why ? why : "ok");
        failed += why != NULL;
        pu_proxy_assert_alive(&e->proxy);
        PU_STR(c, "PONG", "PING");
    }
    ASSERT_EQ(failed, 0);
    PU_OK(c, "LOCK %s", "after-garbage");
    PU_INT(c, 1, "UNLOCK %s", "after-garbage");
    redisFree(c);
}

/* Sends s on fd and expects exactly want back (the reply bytes in order). */
static void raw_expect(int fd, const char *s, size_t len, const char *want)
{
    char buf[1024];

    if (s)
        ASSERT_TRUE(pu_raw_send(fd, s, len ? len : strlen(s)));
    pu_raw_read_until(fd, buf, sizeof(buf), 5000, want);
    if (strcmp(buf, want) != 0)
        TEST_FAIL("sent \"%.60s\": got \"%s\", want \"%s\"", s ? s : "", buf, want);
}

/* Inline commands, as telnet and nc send them, with Redis's quoting. */
static void scenario_inline(struct pu_env *e)
{
    static const char typed[] = "ECHO \"typed \\x41\"\r\n";
    redisContext *rc = pu_redis_client(e);
    int fd = pu_raw_connect(e->proxy.port);

    raw_expect(fd, "PING\r\n", 0, "+PONG\r\n");
    raw_expect(fd, "ping\n", 0, "+PONG\r\n");
    raw_expect(fd, "\r\n\n  \nECHO \"hello world\" 'x'\n", 0,
               "-ERR wrong number of arguments for 'ECHO' command\r\n");
    raw_expect(fd, "ECHO \"a\\tb\\\"c\"\n", 0, "$5\r\na\tb\"c\r\n");
    raw_expect(fd, "ECHO 'it\\'s'\n", 0, "$4\r\nit's\r\n");
    raw_expect(fd, "LOCK inl LEASE 60000\r\n", 0, "+OK\r\n");
    ASSERT_TRUE(pu_exists(rc, "inl"));
    /* inline and multibulk mixed in one write */
    raw_expect(fd, "PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nmb\r\nUNLOCK inl\n", 0,
               "+PONG\r\n$2\r\nmb\r\n:1\r\n");
    ASSERT_TRUE(!pu_exists(rc, "inl"));
    /* typed one key at a time */
    for (size_t i = 0; i < sizeof(typed) - 1; i++) {
        ASSERT_TRUE(pu_raw_send(fd, typed + i, 1));
        pu_sleep_ms(1);
    }
    raw_expect(fd, NULL, 0, "$7\r\ntyped A\r\n");
    close(fd);
    redisFree(rc);
}

/* A well-formed request over --max-args or --max-request-bytes is answered
 * with an error and skipped; the connection, its pipeline and its locks
 * stay. Before the skipped request's reply come the replies owed. */
static void scenario_over_limits(struct pu_env *e)
{
    static const char nine[] = "*9\r\n$4\r\nLOCK\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
                               "$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n";
    static const char args_err[] = "-ERR request has more than 8 arguments (--max-args)\r\n";
    static const char bytes_err[] =
        "-ERR request is larger than 4096 bytes (--max-request-bytes)\r\n";
    redisContext *c1 = pu_client(e), *rc = pu_redis_client(e);
    size_t big_len = (4u << 20) + 64, n;
    char *big = malloc(big_len), want[256];
    int fd = pu_raw_connect(e->proxy.port);

    ASSERT_NOTNULL(big);
    raw_expect(fd, "LOCK kept\r\n", 0, "+OK\r\n");
    raw_expect(fd, nine, sizeof(nine) - 1, args_err);
    raw_expect(fd, "PING\r\n", 0, "+PONG\r\n");
    raw_expect(fd, "ECHO a b c d e f g h i\r\n", 0, args_err);

    /* 4 MiB argument: refused from its header, skipped as it streams in */
    n = (size_t)snprintf(big, big_len, "*2\r\n$4\r\nECHO\r\n$%u\r\n", 4u << 20);
    memset(big + n, 'x', 4u << 20);
    n += 4u << 20;
    n += (size_t)snprintf(big + n, big_len - n, "\r\nPING\r\n");
    strcpy(want, bytes_err);
    strcat(want, "+PONG\r\n");
    raw_expect(fd, big, n, want);
    ASSERT_EQ(pu_info_int(c1, "locks_held"), 1);
    ASSERT_TRUE(pu_exists(rc, "kept"));

    /* behind a waiting LOCK, in order */
    PU_OK(c1, "LOCK %s LEASE %d", "busy", 10000);
    ASSERT_TRUE(pu_raw_send(fd, "LOCK busy\r\n", 11));
    ASSERT_TRUE(pu_raw_send(fd, nine, sizeof(nine) - 1));
    ASSERT_TRUE(pu_raw_send(fd, "*2\r\n$4\r\nECHO\r\n$5000\r\n", 21));
    memset(big, 'y', 5000);
    memcpy(big + 5000, "\r\nPING\r\n", 8);
    ASSERT_TRUE(pu_raw_send(fd, big, 5008));
    pu_sleep_ms(200);
    PU_INT(c1, 1, "UNLOCK %s", "busy");
    snprintf(want, sizeof(want), "+OK\r\n%s%s+PONG\r\n", args_err, bytes_err);
    raw_expect(fd, NULL, 0, want);
    raw_expect(fd, "UNLOCK busy\r\nUNLOCK kept\r\n", 0, ":1\r\n:1\r\n");
    ASSERT_TRUE(!pu_exists(rc, "kept"));
    close(fd);
    free(big);
    redisFree(rc);
    redisFree(c1);
}

/* A protocol error is answered after every reply owed, even those of
 * requests waiting behind a blocked LOCK, and then the connection closes
 * (and its locks go). */
static void scenario_protocol_error_order(struct pu_env *e)
{
    static const char reqs[] = "*2\r\n$4\r\nLOCK\r\n$2\r\nbo\r\n*1\r\n$4\r\nPING\r\n"
                               "*1\r\n$x\r\n";
    redisContext *c1 = pu_client(e), *rc = pu_redis_client(e);
    const char *pong, *err;
    char buf[512];
    int fd = pu_raw_connect(e->proxy.port);

    PU_OK(c1, "LOCK %s LEASE %d", "bo", 10000);
    ASSERT_TRUE(pu_raw_send(fd, reqs, sizeof(reqs) - 1));
    pu_sleep_ms(200);
    PU_INT(c1, 1, "UNLOCK %s", "bo");
    pu_raw_read_until(fd, buf, sizeof(buf), 5000, NULL); /* until the proxy closes */
    pong = strstr(buf, "+PONG\r\n");
    err = strstr(buf, "-ERR Protocol error");
    if (!pong || !err || err < pong)
        TEST_FAIL("replies out of order: \"%s\"", buf);
    ASSERT_STREQ(buf, "+OK\r\n+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
    close(fd);
    PU_EVENTUALLY(!pu_exists(rc, "bo"), 5000); /* released with the connection */
    redisFree(rc);
    redisFree(c1);
}

/* Expects an ERR reply that names arg (case-insensitive). */
static void expect_arg_error(redisContext *c, const char *arg, const char *fmt, const char *s1,
                             const char *s2)
{
    redisReply *r = pu_cmd(c, fmt, s1, s2);
    char got[320];

    if (!pu_is_err(r, "ERR") || (arg && !mentions(r->str, arg)))
        TEST_FAIL("\"%s\" (%s, %s): expected -ERR naming %s, got %s", fmt, s1, s2,
                  arg ? arg : "(anything)", pu_describe(r, got, sizeof(got)));
    freeReplyObject(r);
}

static void scenario_bad_args(struct pu_env *e)
{
    static const char *const no_args[] = {"LOCK", "TRYLOCK", "UNLOCK", "FORCEUNLOCK", "LOCK.INFO"};
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    char long_tok[80], max_tok[80];

    memset(long_tok, 'a', 65);
    long_tok[65] = '\0';
    memset(max_tok, 'b', 64);
    max_tok[64] = '\0';
    PU_ERR(c, "ERR unknown command", "FOOBAR %s", "x");
    PU_ERR(c, "ERR unknown command", "GETX %s", "x"); /* GET is forwarded (fwd.h) */
    for (size_t i = 0; i < sizeof(no_args) / sizeof(no_args[0]); i++)
        PU_ERR(c, "ERR", no_args[i]);
    expect_arg_error(c, NULL, "FORCEUNLOCK %s %s", "a", "b");
    expect_arg_error(c, "LEASE", "LOCK %s LEASE %s", "a", "abc");
    expect_arg_error(c, "LEASE", "LOCK %s LEASE %s", "a", "-5");
    expect_arg_error(c, "LEASE", "LOCK %s LEASE %s", "a", "99999999999999999999999");
    expect_arg_error(c, "LEASE", "LOCK %s %s", "a", "LEASE");
    expect_arg_error(c, "WAIT", "LOCK %s WAIT %s", "a", "x");
    expect_arg_error(c, "WAIT", "LOCK %s WAIT %s", "a", "-1");
    expect_arg_error(c, "BOGUS", "LOCK %s BOGUS %s", "a", "1");
    expect_arg_error(c, "WAIT", "TRYLOCK %s WAIT %s", "a", "10");
    expect_arg_error(c, "LEASE", "TRYLOCK %s LEASE %s", "a", "1.5");
    expect_arg_error(c, "OWNER", "LOCK %s OWNER %s", "a", "12345");
    expect_arg_error(c, "OWNER", "LOCK %s OWNER %s", "a", "");
    expect_arg_error(c, "OWNER", "LOCK %s OWNER %s", "a", "bad!tok");
    expect_arg_error(c, "OWNER", "LOCK %s OWNER %s", "a", "a:b");
    expect_arg_error(c, "OWNER", "LOCK %s OWNER %s", "a", long_tok);
    expect_arg_error(c, "OWNER", "UNLOCK %s %s", "a", "OWNER");
    expect_arg_error(c, "BOGUS", "LOCK.INFO %s %s", "a", "BOGUS");
    ASSERT_TRUE(!pu_exists(rc, "a"));
    ASSERT_EQ(pu_info_int(c, "locks_held"), 0);

    /* Edge values that are valid; commands are case-insensitive. */
    PU_OK(c, "LOCK %s OWNER %s", "a", max_tok);
    PU_INT(c, 1, "UNLOCK %s OWNER %s", "a", max_tok);
    PU_OK(c, "lock %s lease %d wait %d", "a", 1000, 0);
    PU_INT(c, 1, "unlock %s", "a");
    PU_STR(c, "PONG", "PING");
    redisFree(rc);
    redisFree(c);
}

static void check_info(struct pu_env *e, redisContext *c)
{
    static const char *const fields[] = {
        "io_backend",     "proxy_uuid",      "connected_clients", "locks_held", "lock_waiters",
        "upstream_state", "pubsub_channels", "watchdog_renewals", "leases_lost"};
    char val[128];
    redisReply *r;

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!pu_info_str(c, fields[i], val, sizeof(val)))
            TEST_FAIL("INFO has no %s field", fields[i]);
    }
    pu_info_str(c, "upstream_state", val, sizeof(val));
    ASSERT_STREQ(val, "up");
    ASSERT_TRUE(pu_info_int(c, "connected_clients") >= 1);
    r = pu_cmd(c, "INFO %s", "server");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = pu_cmd(c, "INFO %s", "all");
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING && strstr(r->str, "proxy_uuid:"));
    freeReplyObject(r);
    (void)e;
}

static void scenario_misc(struct pu_env *e)
{
    redisContext *c = pu_client(e), *c2 = pu_client(e);
    redisReply *r;
    char buf[128];
    int fd;

    PU_STR(c, "PONG", "PING");
    PU_STR(c, "hi there", "ECHO %s", "hi there");
    r = pu_cmd(c, "HELLO %d", 2);
    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    r = pu_cmd(c, "CLIENT ID");
    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER && r->integer >= 0);
    freeReplyObject(r);
    PU_OK(c, "CLIENT SETNAME %s", "worker-1");
    PU_STR(c, "worker-1", "CLIENT GETNAME");
    r = pu_cmd(c2, "CLIENT GETNAME");
    ASSERT_TRUE(r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && r->len == 0));
    freeReplyObject(r);
    PU_OK(c, "SELECT %d", 0);
    PU_ERR(c, "ERR", "SELECT %d", 1);
    r = pu_cmd(c, "COMMAND");
    freeReplyObject(r);
    PU_STR(c, "PONG", "PING");
    check_info(e, c);
    ASSERT_TRUE(pu_info_int(c, "connected_clients") >= 2);

    fd = pu_raw_connect(e->proxy.port);
    pu_raw_send(fd, "*1\r\n$4\r\nQUIT\r\n", 14);
    pu_raw_read_line(fd, buf, sizeof(buf), 3000);
    ASSERT_STREQ(buf, "+OK\r\n");
    ASSERT_TRUE(pu_raw_wait_closed(fd, 3000));
    close(fd);
    redisFree(c2);
    redisFree(c);
}

static void scenario_idle_conns(struct pu_env *e)
{
    redisContext **cs = calloc(IDLE_CONNS, sizeof(*cs)), *c;
    redisReply *r;

    ASSERT_NOTNULL(cs);
    for (int i = 0; i < IDLE_CONNS; i++) {
        cs[i] = pu_try_connect(e->proxy.port);
        if (!cs[i])
            TEST_FAIL("connection %d of %d refused", i, IDLE_CONNS);
    }
    for (int i = 0; i < IDLE_CONNS; i++)
        pu_send(cs[i], "PING");
    for (int i = 0; i < IDLE_CONNS; i++) {
        r = pu_recv(cs[i]);
        PU_CHECK(r, PU_K_STATUS, 0, "PONG");
        freeReplyObject(r);
    }
    c = pu_client(e);
    ASSERT_TRUE(pu_info_int(c, "connected_clients") >= IDLE_CONNS + 1);
    PU_OK(c, "LOCK %s", "busy");
    PU_INT(c, 1, "UNLOCK %s", "busy");
    for (int i = 0; i < IDLE_CONNS; i++)
        redisFree(cs[i]);
    free(cs);
    PU_EVENTUALLY(pu_info_int(c, "connected_clients") <= 1, 5000);
    redisFree(c);
}

TEST(pipelining_order)
{
    pu_each_backend(scenario_pipeline, NULL);
}

TEST(fragmented_and_binary)
{
    pu_each_backend(scenario_fragments_binary, NULL);
}

TEST(malformed_input)
{
    static const char *const extra[] = {"--max-request-bytes", "65536", NULL};

    pu_each_backend(scenario_malformed, extra);
}

TEST(inline_commands)
{
    pu_each_backend(scenario_inline, NULL);
}

TEST(over_limits_skip_and_keep_connection)
{
    static const char *const extra[] = {"--max-request-bytes", "4096", "--max-args", "8", NULL};

    pu_each_backend(scenario_over_limits, extra);
}

TEST(protocol_error_after_owed_replies)
{
    pu_each_backend(scenario_protocol_error_order, NULL);
}

TEST(unknown_command_and_bad_args)
{
    pu_each_backend(scenario_bad_args, NULL);
}

TEST(utility_commands_and_info)
{
    pu_each_backend(scenario_misc, NULL);
}

TEST(many_idle_connections)
{
    static const char *const extra[] = {"--max-clients", "10000", NULL};

    pu_raise_nofile(IDLE_CONNS + 512); /* per process: this one and the proxy */
    pu_each_backend(scenario_idle_conns, extra);
}

TEST_MAIN(TEST_CASE(pipelining_order), TEST_CASE(fragmented_and_binary), TEST_CASE(malformed_input),
          TEST_CASE(inline_commands), TEST_CASE(over_limits_skip_and_keep_connection),
          TEST_CASE(protocol_error_after_owed_replies), TEST_CASE(unknown_command_and_bad_args),
          TEST_CASE(utility_commands_and_info), TEST_CASE(many_idle_connections))
