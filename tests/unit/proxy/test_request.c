/* Unit tests for the client request parser (RESP2 with limits) and the
 * reply encoder. */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "proxy/reply.h"
#include "proxy/request.h"

static struct px_reader_pool readers;
static struct px_parser parser;

static void setup(unsigned max_args, size_t max_bytes)
{
    px_parser_init(&parser, &readers, max_args, max_bytes);
}

static void teardown(void)
{
    px_parser_deinit(&parser);
    px_reader_pool_deinit(&readers);
}

/* Feeds s and expects exactly one request with the given argv. */
static struct px_req *parse_one(const char *s)
{
    struct px_req *req = NULL;

    ASSERT_OK(px_parser_feed(&parser, s, strlen(s)));
    ASSERT_EQ(px_parser_next(&parser, &req), 1);
    ASSERT_NOTNULL(req);
    return req;
}

static void expect_reject(const char *s, const char *why)
{
    struct px_req *req = NULL;

    setup(8, 1024);
    ASSERT_OK(px_parser_feed(&parser, s, strlen(s)));
    ASSERT_EQ(px_parser_next(&parser, &req), -EPROTO);
    ASSERT_NULL(req);
    if (why && !strstr(px_parser_error(&parser), why))
        TEST_FAIL("error '%s' does not mention '%s'", px_parser_error(&parser), why);
    teardown();
}

TEST(parse_simple)
{
    struct px_req *req;

    setup(8, 1024);
    req = parse_one("*2\r\n$4\r\nLOCK\r\n$3\r\nabc\r\n");
    ASSERT_EQ(req->argc, 2);
    ASSERT_EQ(req->argv[0].len, 4);
    ASSERT_TRUE(memcmp(req->argv[0].p, "LOCK", 4) == 0);
    ASSERT_STREQ(req->argv[1].p, "abc");
    px_req_free(req);
    teardown();
}

TEST(parse_binary_safe_and_large)
{
    char big[3000], frame[3100];
    struct px_req *req = NULL;
    int n;

    setup(8, 4096);
    memset(big, 'x', sizeof(big));
    big[10] = '\0';
    big[11] = '\r';
    n = snprintf(frame, sizeof(frame), "*2\r\n$4\r\nECHO\r\n$%zu\r\n", sizeof(big));
    ASSERT_OK(px_parser_feed(&parser, frame, (size_t)n));
    ASSERT_OK(px_parser_feed(&parser, big, sizeof(big)));
    ASSERT_OK(px_parser_feed(&parser, "\r\n", 2));
    ASSERT_EQ(px_parser_next(&parser, &req), 1);
    ASSERT_EQ(req->argv[1].len, sizeof(big));
    ASSERT_TRUE(memcmp(req->argv[1].p, big, sizeof(big)) == 0);
    px_req_free(req);
    teardown();
}

TEST(parse_split_and_pipelined)
{
    const char *s = "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$4\r\nQUIT\r\n";
    struct px_req *req = NULL;
    size_t i;
    int got = 0, rc;

    setup(8, 1024);
    for (i = 0; s[i]; i++) {
        ASSERT_OK(px_parser_feed(&parser, &s[i], 1));
        while ((rc = px_parser_next(&parser, &req)) == 1) {
            got++;
            px_req_free(req);
        }
        ASSERT_EQ(rc, 0);
    }
    ASSERT_EQ(got, 3);
    teardown();
}

TEST(parse_empty_frame)
{
    struct px_req *req;

    setup(8, 1024);
    req = parse_one("*0\r\n");
    ASSERT_EQ(req->argc, 0);
    px_req_free(req);
    teardown();
}

TEST(reject_malformed)
{
    expect_reject("*2\r\n$4\r\nLOCK\r\n*1\r\n$1\r\na\r\n", "nested");
    expect_reject("*1\r\n:5\r\n", "bulk");
    expect_reject("*1\r\n$-1\r\n", "invalid");
    expect_reject("*-5\r\n", NULL);
    expect_reject("*-1\r\n", "invalid");
    expect_reject("+PING\r\n", "array");
    expect_reject("$4\r\nPING\r\n", "array");
    expect_reject("PING\r\n", NULL);
    expect_reject("*x\r\n", NULL);
    expect_reject("*99999999999\r\n", NULL);
}

TEST(reject_limits)
{
    char frame[2048];
    struct px_req *req = NULL;
    int i, n;

    expect_reject("*9\r\n", "too many arguments");
    expect_reject("*2\r\n$4\r\nECHO\r\n$99999999999\r\n", "too large");
    expect_reject("*2\r\n$4\r\nECHO\r\n$1025", "too large");
    setup(8, 1024);
    n = snprintf(frame, sizeof(frame), "*1\r\n$1500\r\n");
    for (i = 0; i < 1500; i++)
        frame[n + i] = 'a';
    ASSERT_OK(px_parser_feed(&parser, frame, (size_t)n + 1500));
    ASSERT_EQ(px_parser_next(&parser, &req), -EPROTO);
    ASSERT_TRUE(strstr(px_parser_error(&parser), "too large") != NULL);
    teardown();
}

/* Readers are lent only while input is pending: a parser that parsed all
 * it got holds none, and a reader given back serves another parser
 * (its buffer still holds consumed bytes) without mixing their streams. */
TEST(reader_lent_while_pending)
{
    static const char lock[] = "*2\r\n$4\r\nLOCK\r\n$3\r\nabc\r\n";
    struct px_parser other;
    struct px_req *req = NULL;

    setup(8, 1024);
    px_parser_init(&other, &readers, 8, 1024);
    px_req_free(parse_one(lock));
    ASSERT_EQ(px_parser_next(&parser, &req), 0);
    ASSERT_NULL(parser.reader);
    ASSERT_EQ(readers.n, 1);
    ASSERT_OK(px_parser_feed(&other, lock, 10)); /* a partial frame keeps its reader */
    ASSERT_EQ(px_parser_next(&other, &req), 0);
    ASSERT_NOTNULL(other.reader);
    ASSERT_EQ(readers.n, 0);
    px_req_free(parse_one("*1\r\n$4\r\nPING\r\n")); /* a fresh reader for parser */
    ASSERT_OK(px_parser_feed(&other, lock + 10, sizeof(lock) - 11));
    ASSERT_EQ(px_parser_next(&other, &req), 1);
    ASSERT_STREQ(req->argv[1].p, "abc");
    px_req_free(req);
    ASSERT_EQ(px_parser_next(&other, &req), 0);
    ASSERT_EQ(px_parser_pending(&other), 0);
    ASSERT_EQ(px_parser_next(&parser, &req), 0); /* parser's reader back too */
    ASSERT_EQ(readers.n, 2);
    other.max_args = 1; /* a rejection lands on the parser now using the reader */
    ASSERT_OK(px_parser_feed(&other, lock, sizeof(lock) - 1));
    ASSERT_EQ(px_parser_next(&other, &req), -EPROTO);
    ASSERT_NOTNULL(other.err);
    ASSERT_NULL(parser.err);
    px_parser_deinit(&other);
    teardown();
}

TEST(reply_encoding)
{
    struct buf b;

    buf_init(&b);
    ASSERT_OK(px_reply_status(&b, "OK"));
    ASSERT_OK(px_reply_int(&b, -42));
    ASSERT_OK(px_reply_bulk(&b, "a\0b", 3));
    ASSERT_OK(px_reply_nil(&b));
    ASSERT_OK(px_reply_array(&b, 2));
    ASSERT_OK(px_reply_error(&b, "ERR bad\r\nthing %d", 7));
    ASSERT_EQ(buf_size(&b), strlen("+OK\r\n:-42\r\n$3\r\n") + 3 +
                                strlen("\r\n$-1\r\n*2\r\n-ERR bad  thing 7\r\n"));
    ASSERT_TRUE(memcmp(b.data, "+OK\r\n:-42\r\n$3\r\na\0b\r\n$-1\r\n*2\r\n-ERR bad  thing 7\r\n",
                       buf_size(&b)) == 0);
    buf_deinit(&b);
}

TEST_MAIN(TEST_CASE(parse_simple), TEST_CASE(parse_binary_safe_and_large),
          TEST_CASE(parse_split_and_pipelined), TEST_CASE(parse_empty_frame),
          TEST_CASE(reject_malformed), TEST_CASE(reject_limits),
          TEST_CASE(reader_lent_while_pending), TEST_CASE(reply_encoding))
