/* Unit tests for the client request parser (RESP2 multibulk and inline
 * commands, Redis's protocol errors, limits) and the reply encoder.
 *
 * The parser cases are a table: input bytes -> the requests, skipped
 * requests and error they give, rendered as one string. Every case is run
 * whole, cut in two at every split point, and one byte at a time, and must
 * render the same each time. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy/reply.h"
#include "proxy/request.h"

/* Limits of a table case. */
struct limits {
    unsigned max_args;
    size_t max_bytes;
    bool close_over_limit;
};

/* Initializers, not const objects: C wants constants in the static tables
 * (gcc takes a const object there, clang does not). */
#define LIM_DFLT       \
    {                  \
        8, 1024, false \
    }
#define LIM_SMALL    \
    {                \
        3, 64, false \
    }
#define LIM_PREAUTH \
    {               \
        3, 64, true \
    }
#define LIM_TINY    \
    {               \
        8, 8, false \
    }

struct pcase {
    const char *in; /* input */
    size_t len;     /* its bytes (0: strlen) */
    struct limits lim;
    const char *want; /* "[arg|arg]" per request, "{reply}" per skipped one, "!error", "..." busy */
};

static void put_byte(char *out, size_t cap, size_t *n, unsigned char c)
{
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '|' || c == '[' || c == ']')
        *n += (size_t)snprintf(out + *n, cap - *n, "\\x%02x", c);
    else if (*n + 1 < cap)
        out[(*n)++] = (char)c;
    out[*n] = '\0';
}

static void put_str(char *out, size_t cap, size_t *n, const char *s)
{
    *n += (size_t)snprintf(out + *n, cap - *n, "%s", s);
}

/* Renders one request into out. */
static void render_req(char *out, size_t cap, size_t *n, struct px_req *req)
{
    if (req->answered) {
        ASSERT_EQ(req->argc, 0);
        put_str(out, cap, n, "{");
        /* "-<text>\r\n" */
        ASSERT_TRUE(buf_size(&req->reply) > 3 && buf_head(&req->reply)[0] == '-');
        for (size_t i = 1; i < buf_size(&req->reply) - 2; i++)
            put_byte(out, cap, n, (unsigned char)buf_head(&req->reply)[i]);
        put_str(out, cap, n, "}");
        return;
    }
    ASSERT_TRUE(req->argc > 0);
    put_str(out, cap, n, "[");
    for (int a = 0; a < req->argc; a++) {
        if (a)
            put_str(out, cap, n, "|");
        ASSERT_EQ(req->argv[a].p[req->argv[a].len], '\0');
        for (size_t i = 0; i < req->argv[a].len; i++)
            put_byte(out, cap, n, (unsigned char)req->argv[a].p[i]);
    }
    put_str(out, cap, n, "]");
}

/* Parses in[0..len) fed in pieces that end at cuts[0..ncuts) and len, and
 * renders what comes out. */
static void run_cuts(const struct pcase *c, size_t len, const size_t *cuts, size_t ncuts, char *out,
                     size_t cap)
{
    struct px_parser p;
    size_t n = 0, from = 0;
    bool failed = false;

    out[0] = '\0';
    px_parser_init(&p, c->lim.max_args, c->lim.max_bytes);
    p.close_over_limit = c->lim.close_over_limit;
    for (size_t k = 0; k <= ncuts && !failed; k++) {
        size_t to = k < ncuts ? cuts[k] : len;
        const char *data = c->in + from;
        size_t left = to - from;
        struct px_req *req;
        int rc;

        while ((rc = px_parser_next(&p, &data, &left, &req)) == 1) {
            render_req(out, cap, &n, req);
            px_req_free(req);
        }
        if (rc < 0) {
            ASSERT_EQ(rc, -EPROTO);
            ASSERT_NULL(req);
            ASSERT_TRUE(!px_parser_busy(&p));
            put_str(out, cap, &n, "!");
            put_str(out, cap, &n, px_parser_error(&p));
            failed = true;
            /* sticky: the next call fails the same way */
            data = "*1\r\n$4\r\nPING\r\n";
            left = strlen(data);
            ASSERT_EQ(px_parser_next(&p, &data, &left, &req), -EPROTO);
        } else {
            ASSERT_EQ(left, 0); /* everything was consumed */
        }
        from = to;
    }
    if (!failed && px_parser_busy(&p))
        put_str(out, cap, &n, "...");
    if (!px_parser_busy(&p)) /* between requests nothing is held */
        ASSERT_TRUE(p.req == NULL && p.line == NULL);
    px_parser_deinit(&p);
}

static void check_case(const struct pcase *c)
{
    size_t len = c->len ? c->len : strlen(c->in);
    char got[4096], again[4096];
    size_t cuts[2];

    run_cuts(c, len, NULL, 0, got, sizeof(got));
    if (strcmp(got, c->want) != 0)
        TEST_FAIL("input \"%.60s\": got %s, want %s", c->in, got, c->want);
    for (size_t k = 1; k < len; k++) {
        cuts[0] = k;
        run_cuts(c, len, cuts, 1, again, sizeof(again));
        if (strcmp(again, got) != 0)
            TEST_FAIL("input \"%.60s\" cut at %zu: got %s, whole: %s", c->in, k, again, got);
    }
    if (len < 2000) {
        size_t *each = calloc(len, sizeof(*each));

        ASSERT_NOTNULL(each);
        for (size_t k = 1; k < len; k++)
            each[k - 1] = k;
        run_cuts(c, len, each, len ? len - 1 : 0, again, sizeof(again));
        free(each);
        if (strcmp(again, got) != 0)
            TEST_FAIL("input \"%.60s\" byte by byte: got %s, whole: %s", c->in, again, got);
    }
}

static void check_table(const struct pcase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_case(&cases[i]);
}

#define PING       "*1\r\n$4\r\nPING\r\n"
#define OVER_ARGS  "{ERR request has more than 3 arguments (--max-args)}"
#define OVER_BYTES "{ERR request is larger than 64 bytes (--max-request-bytes)}"
#define X40        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

TEST(multibulk)
{
    static const struct pcase cases[] = {
        {"*2\r\n$4\r\nLOCK\r\n$3\r\nabc\r\n", 0, LIM_DFLT, "[LOCK|abc]"},
        {PING "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n" PING, 0, LIM_DFLT, "[PING][ECHO|hi][PING]"},
        {"*1\r\n$0\r\n\r\n", 0, LIM_DFLT, "[]"},
        {"*3\r\n$3\r\na\0\r\r\n$2\r\n\r\n\r\n$1\r\n|\r\n", 28, LIM_DFLT,
         "[a\\x00\\x0d|\\x0d\\x0a|\\x7c]"},
        /* Redis ignores empty and negative multibulks */
        {"*0\r\n*-1\r\n*-5\r\n" PING, 0, LIM_DFLT, "[PING]"},
        /* partial requests */
        {"*2\r\n$4\r\nLO", 0, LIM_DFLT, "..."},
        {PING "*1", 0, LIM_DFLT, "[PING]..."},
        {"*1\r\n$4\r\nPING\r", 0, LIM_DFLT, "..."},
        /* a number may be 20 chars long (string2ll) */
        {"*-1000000000000000000\r\n" PING, 0, LIM_DFLT, "[PING]"},
    };

    check_table(cases, LP_ARRAY_SIZE(cases));
}

TEST(multibulk_errors)
{
    static const struct pcase cases[] = {
        {"*x\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*-\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*-0\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*01\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*+1\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"* 1\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*1\rX", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*1\n\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*2147483648\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*99999999999\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*99999999999999999999999\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*-10000000000000000000\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*00000000000000000001\r\n", 0, LIM_DFLT, "!invalid multibulk length"},
        {"*1\r\n:5\r\n", 0, LIM_DFLT, "!expected '$', got ':'"},
        {"*1\r\n*1\r\n", 0, LIM_DFLT, "!expected '$', got '*'"},
        {"*1\r\n\r\n", 0, LIM_DFLT, "!expected '$', got '\\x0d'"},
        {"*1\r\n$-1\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$x\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$01\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$536870913\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$1\r\nab\r\n", 0, LIM_DFLT, "!invalid bulk length"},
        {"*1\r\n$1\r\na\n\n", 0, LIM_DFLT, "!invalid bulk length"},
        {PING "*x\r\n", 0, LIM_DFLT, "[PING]!invalid multibulk length"},
        /* a header line over max_bytes, whatever it holds, however it arrives
         * (found by fuzz_request: whole, it was judged by its value) */
        {"*2147483648\r\n", 0, LIM_TINY, "!too big mbulk count string"},
        {"*1\r\n$100000000\r\n", 0, LIM_TINY, "!too big bulk count string"},
        {"*1234567\r\n", 0, LIM_TINY, "..."},
        {"*" X40 "111111111111111111111111", 0, LIM_SMALL, "!too big mbulk count string"},
        {"*1\r\n$" X40 "xxxxxxxxxxxxxxxxxxxxxxxx", 0, LIM_SMALL, "!too big bulk count string"},
        {"*" X40 "11111111111111111111111\r\n", 0, LIM_SMALL, "!invalid multibulk length"},
    };

    check_table(cases, LP_ARRAY_SIZE(cases));
}

/* Requests over a limit are skipped from their header on and answered;
 * before AUTH they close the stream, with Redis's words. */
TEST(limits)
{
    static const struct pcase cases[] = {
        {"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n" PING, 0, LIM_SMALL,
         OVER_ARGS "[PING]"},
        {"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", 0, LIM_SMALL, "[a|b|c]"},
        {"*1000000\r\n$1\r\na\r\n", 0, LIM_SMALL, "..."},
        {"*2147483647\r\n", 0, LIM_SMALL, "..."},
        {"*2\r\n$4\r\nECHO\r\n$100\r\n" X40 X40 "xxxxxxxxxxxxxxxxxxxx\r\n" PING, 0, LIM_SMALL,
         OVER_BYTES "[PING]"},
        /* 64 bytes exactly, then 65 */
        {"*2\r\n$4\r\nECHO\r\n$43\r\n" X40 "xxx\r\n", 0, LIM_SMALL, "[ECHO|" X40 "xxx]"},
        {"*2\r\n$4\r\nECHO\r\n$44\r\n" X40 "xxxx\r\n" PING, 0, LIM_SMALL, OVER_BYTES "[PING]"},
        /* the total counts, not only one argument */
        {"*3\r\n$20\r\nxxxxxxxxxxxxxxxxxxxx\r\n$20\r\nxxxxxxxxxxxxxxxxxxxx\r\n$1\r\na\r\n" PING, 0,
         LIM_SMALL, OVER_BYTES "[PING]"},
        /* a declared length over the limit: skipped from its header, never buffered */
        {"*2\r\n$4\r\nECHO\r\n$536870912\r\n", 0, LIM_SMALL, "..."},
        /* bad framing inside a skipped request still fails */
        {"*4\r\n$1\r\na\r\n:1\r\n", 0, LIM_SMALL, "!expected '$', got ':'"},
        {"*2\r\n$4\r\nECHO\r\n$100\r\n" X40 X40 "xxxxxxxxxxxxxxxxxxxxxx\r\n", 0, LIM_SMALL,
         "!invalid bulk length"},
        {"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n", 0, LIM_PREAUTH,
         "!unauthenticated multibulk length"},
        {"*2\r\n$4\r\nAUTH\r\n$100\r\n", 0, LIM_PREAUTH, "!unauthenticated bulk length"},
        {"*1\r\n$4\r\nAUTH\r\n", 0, LIM_PREAUTH, "[AUTH]"},
        {"a b c d\r\n" PING, 0, LIM_SMALL, OVER_ARGS "[PING]"},
        {"a b c d\r\n", 0, LIM_PREAUTH, "!unauthenticated multibulk length"},
    };

    check_table(cases, LP_ARRAY_SIZE(cases));
}

TEST(inline_commands)
{
    static const struct pcase cases[] = {
        {"PING\r\n", 0, LIM_DFLT, "[PING]"},
        {"PING\n", 0, LIM_DFLT, "[PING]"},
        {"  LOCK \t a  \r\n", 0, LIM_DFLT, "[LOCK|a]"},
        {"\r\n\n  \r\n" PING, 0, LIM_DFLT, "[PING]"},
        {"ECHO \"a b\"\r\nECHO 'c d'\n", 0, LIM_DFLT, "[ECHO|a b][ECHO|c d]"},
        {"ECHO \"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n", 0, LIM_DFLT,
         "[ECHO|AJ\\x0a\\x0d\\x09\\x08\\x07\\x5c\"q]"},
        {"ECHO \"\\xZZ\\x4\"\n", 0, LIM_DFLT, "[ECHO|xZZx4]"},
        {"ECHO 'it\\'s \\n'\n", 0, LIM_DFLT, "[ECHO|it's \\x5cn]"},
        {"ECHO a\"b c\"d\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO a\"b c\"\n", 0, LIM_DFLT, "[ECHO|ab c]"},
        {"ECHO \"\" ''\n", 0, LIM_DFLT, "[ECHO||]"},
        {"ECHO \"abc\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO 'abc\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO \"a\"b\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO 'a'b\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO \"a\\\"\n", 0, LIM_DFLT, "!unbalanced quotes in request"},
        {"ECHO \"a\"\tb\n", 0, LIM_DFLT, "[ECHO|a|b]"},
        /* a NUL ends the line, as in Redis */
        {"ECHO a\0b c\nPING\n", 16, LIM_DFLT, "[ECHO|a][PING]"},
        /* \v and \f separate at the start of an argument only */
        {"ECHO\va\fb\n", 0, LIM_DFLT, "[ECHO\\x0ba\\x0cb]"},
        {"\vECHO a\n", 0, LIM_DFLT, "[ECHO|a]"},
        {"PING", 0, LIM_DFLT, "..."},
        {"PING\r", 0, LIM_DFLT, "..."},
        {"PING\n*1\r\n$4\r\nECHO\r\n"
         "ECHO x\n",
         0, LIM_DFLT, "[PING][ECHO][ECHO|x]"},
        /* line length: 64 bytes (the line end not counted), then 65 */
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxx\r\n", 0, LIM_SMALL, "[" X40 "xxxxxxxxxxxxxxxxxxxxxxxx]"},
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxx", 0, LIM_SMALL, "..."},
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxx\r", 0, LIM_SMALL, "..."},
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxxx\n", 0, LIM_SMALL, "!too big inline request"},
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxxx", 0, LIM_SMALL, "!too big inline request"},
        {X40 "xxxxxxxxxxxxxxxxxxxxxxxx\r\r\n", 0, LIM_SMALL, "!too big inline request"},
    };

    check_table(cases, LP_ARRAY_SIZE(cases));
}

/* Feeds s and expects exactly one request, consuming all of s. */
static struct px_req *parse_one(struct px_parser *p, const char *s, size_t len)
{
    struct px_req *req = NULL;

    ASSERT_EQ(px_parser_next(p, &s, &len, &req), 1);
    ASSERT_NOTNULL(req);
    ASSERT_EQ(len, 0);
    return req;
}

TEST(parse_binary_safe_and_large)
{
    static char big[300000], frame[300100];
    struct px_parser p;
    struct px_req *req;
    int n;

    px_parser_init(&p, 8, 400000);
    memset(big, 'x', sizeof(big));
    big[10] = '\0';
    big[11] = '\r';
    n = snprintf(frame, sizeof(frame), "*2\r\n$4\r\nECHO\r\n$%zu\r\n", sizeof(big));
    memcpy(frame + n, big, sizeof(big));
    memcpy(frame + n + sizeof(big), "\r\n", 2);
    req = parse_one(&p, frame, (size_t)n + sizeof(big) + 2);
    ASSERT_EQ(req->argv[1].len, sizeof(big));
    ASSERT_TRUE(memcmp(req->argv[1].p, big, sizeof(big)) == 0);
    ASSERT_STREQ(req->argv[0].p, "ECHO");
    px_req_free(req);
    px_parser_deinit(&p);
}

/* Memory: a partial request holds its px_req, a skipped one nothing (its
 * bytes are only counted), a finished one nothing. */
TEST(memory_while_parsing)
{
    struct px_parser p;
    struct px_req *req;
    const char *s;
    size_t len;

    px_parser_init(&p, 8, 1024);
    s = "*2\r\n$4\r\nLOCK\r\n$3\r\nab";
    len = strlen(s);
    ASSERT_EQ(px_parser_next(&p, &s, &len, &req), 0);
    ASSERT_NOTNULL(p.req);
    ASSERT_TRUE(px_parser_busy(&p));
    s = "c\r\n";
    req = parse_one(&p, s, 3);
    ASSERT_STREQ(req->argv[1].p, "abc");
    px_req_free(req);
    ASSERT_TRUE(p.req == NULL && !px_parser_busy(&p));

    s = "*2\r\n$4\r\nECHO\r\n$500000000\r\nxxxx";
    len = strlen(s);
    ASSERT_EQ(px_parser_next(&p, &s, &len, &req), 0);
    ASSERT_NULL(p.req);
    ASSERT_TRUE(px_parser_busy(&p));
    px_parser_deinit(&p); /* mid-request: frees what it holds (ASan checks) */

    px_parser_init(&p, 8, 1024);
    s = "ECHO \"partial";
    len = strlen(s);
    ASSERT_EQ(px_parser_next(&p, &s, &len, &req), 0);
    ASSERT_NOTNULL(p.line);
    req = parse_one(&p, " line\"\r\n", 8);
    ASSERT_STREQ(req->argv[1].p, "partial line");
    px_req_free(req);
    ASSERT_NULL(p.line);
    px_parser_deinit(&p);
}

/* Limits changed between requests (AUTH, reload) apply to the next one. */
TEST(limits_change_between_requests)
{
    static const char two[] =
        "*1\r\n$4\r\nAUTH\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n";
    struct px_parser p;
    struct px_req *req;
    const char *s = two;
    size_t len = sizeof(two) - 1;

    px_parser_init(&p, 3, 64);
    p.close_over_limit = true;
    ASSERT_EQ(px_parser_next(&p, &s, &len, &req), 1);
    px_req_free(req);
    p.max_args = 8;
    p.close_over_limit = false;
    ASSERT_EQ(px_parser_next(&p, &s, &len, &req), 1);
    ASSERT_EQ(req->argc, 4);
    px_req_free(req);
    px_parser_deinit(&p);
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

/* RESP3 types, and the RESP2 form each degrades to. */
TEST(reply_encoding_resp3)
{
    static const char want3[] = "%2\r\n_\r\n,1.5\r\n,-inf\r\n#t\r\n#f\r\n>3\r\n";
    static const char want2[] = "*4\r\n$-1\r\n$3\r\n1.5\r\n$4\r\n-inf\r\n:1\r\n:0\r\n*3\r\n";
    static const char *const want[2] = {want2, want3};
    struct buf b;
    int proto;

    for (proto = 2; proto <= 3; proto++) {
        buf_init(&b);
        ASSERT_OK(px_reply_map(&b, proto, 2));
        ASSERT_OK(px_reply_null(&b, proto));
        ASSERT_OK(px_reply_double(&b, proto, 1.5));
        ASSERT_OK(px_reply_double(&b, proto, -INFINITY));
        ASSERT_OK(px_reply_bool(&b, proto, true));
        ASSERT_OK(px_reply_bool(&b, proto, false));
        ASSERT_OK(px_reply_push(&b, proto, 3));
        ASSERT_EQ(buf_size(&b), strlen(want[proto - 2]));
        ASSERT_TRUE(memcmp(b.data, want[proto - 2], buf_size(&b)) == 0);
        buf_deinit(&b);
    }
}

TEST_MAIN(TEST_CASE(multibulk), TEST_CASE(multibulk_errors), TEST_CASE(limits),
          TEST_CASE(inline_commands), TEST_CASE(parse_binary_safe_and_large),
          TEST_CASE(memory_while_parsing), TEST_CASE(limits_change_between_requests),
          TEST_CASE(reply_encoding), TEST_CASE(reply_encoding_resp3))
