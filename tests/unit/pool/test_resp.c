/* Unit tests for pool/resp.c: RESP command formatting (exact bytes,
 * binary-safe arguments, split and raw-tail variants, appending to a
 * partly consumed buffer) and the pool's reply reader (partial feeds,
 * every reply type, protocol errors), compared with hiredis's reader. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "common/buf.h"
#include "common/compiler.h"
#include "harness.h"
#include "pool/resp.h"

static void assert_buf(const struct buf *b, const char *want, size_t n)
{
    ASSERT_EQ(buf_size(b), n);
    ASSERT_TRUE(memcmp(buf_head(b), want, n) == 0);
}

/* Parses exactly one reply from the bytes of b (which must hold exactly
 * one complete reply). */
static struct pool_reply *parse_one(const struct buf *b)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *r = NULL, *more = NULL;

    ASSERT_NOTNULL(rd);
    ASSERT_OK(pool__resp_feed(rd, buf_head(b), buf_size(b)));
    ASSERT_EQ(pool__resp_next(rd, &r), 1);
    ASSERT_NOTNULL(r);
    ASSERT_EQ(pool__resp_next(rd, &more), 0);
    ASSERT_NULL(more);
    pool__resp_reader_free(rd);
    return r;
}

TEST(resp_format_simple)
{
    static const char want[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
    const char *argv[] = {"SET", "k", "value"};
    struct buf b;

    buf_init(&b);
    ASSERT_OK(pool__resp_command(&b, 3, argv, NULL));
    assert_buf(&b, want, sizeof(want) - 1);
    buf_deinit(&b);
}

TEST(resp_format_binary)
{
    static const char want[] = "*4\r\n$4\r\nECHO\r\n$5\r\na\0\r\nb\r\n$0\r\n\r\n$2\r\n\r\n\r\n";
    const char *argv[] = {"ECHO", "a\0\r\nb", "", "\r\n"};
    const size_t lens[] = {4, 5, 0, 2};
    struct buf b;
    struct pool_reply *r;

    buf_init(&b);
    ASSERT_OK(pool__resp_command(&b, 4, argv, lens));
    assert_buf(&b, want, sizeof(want) - 1);
    r = parse_one(&b);
    ASSERT_EQ(r->type, POOL_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 4);
    ASSERT_EQ(r->element[1]->len, 5);
    ASSERT_TRUE(memcmp(r->element[1]->str, "a\0\r\nb", 5) == 0);
    ASSERT_EQ(r->element[2]->len, 0);
    ASSERT_EQ(r->element[3]->len, 2);
    pool__resp_free(r);
    buf_deinit(&b);
}

TEST(resp_format_large)
{
    enum { BIG = 100000, MANY = 1000 };
    static char big[BIG];
    static const char *argv[MANY];
    static size_t lens[MANY];
    struct buf b;
    struct pool_reply *r;
    size_t i;

    for (i = 0; i < BIG; i++)
        big[i] = (char)(i * 7);
    argv[0] = "RPUSH";
    for (i = 1; i < MANY; i++)
        argv[i] = i == 500 ? big : "x";
    for (i = 0; i < MANY; i++)
        lens[i] = i == 500 ? BIG : strlen(argv[i]);
    buf_init(&b);
    ASSERT_OK(pool__resp_command(&b, MANY, argv, lens));
    ASSERT_EQ(buf_size(&b), 1 + 4 + 2 + pool__resp_args_size(MANY, argv, lens));
    r = parse_one(&b);
    ASSERT_EQ(r->elements, MANY);
    ASSERT_EQ(r->element[500]->len, BIG);
    ASSERT_TRUE(memcmp(r->element[500]->str, big, BIG) == 0);
    ASSERT_EQ(r->element[999]->len, 1);
    pool__resp_free(r);
    buf_deinit(&b);
}

/* pre ++ argv formats like one flat argv; a raw tail captured from the
 * output reproduces the same arguments behind a different prefix. */
TEST(resp_format_split_and_raw)
{
    const char *flat[] = {"EVALSHA", "abc",    "2",
                          "k1",      "k\0002", /* k, NUL, 2 (\000: three octal digits) */
                          "arg"};
    const size_t flens[] = {7, 3, 1, 2, 3, 3};
    const char *pre[] = {"EVALSHA", "abc"};
    const char *pre2[] = {"EVAL", "return 1"};
    const size_t lens[] = {1, 2, 3, 3};
    struct buf a, b, c, d;
    size_t tail_len = pool__resp_args_size(4, flat + 2, lens);

    buf_init(&a);
    buf_init(&b);
    buf_init(&c);
    buf_init(&d);
    ASSERT_OK(pool__resp_command(&a, 6, flat, flens));
    ASSERT_OK(pool__resp_command_split(&b, 2, pre, NULL, 4, flat + 2, lens));
    assert_buf(&b, buf_head(&a), buf_size(&a));
    ASSERT_OK(pool__resp_command_raw(&c, 2, pre2, NULL, 4, b.data + b.len - tail_len, tail_len));
    {
        const char *want[] = {"EVAL", "return 1", "2",
                              "k1",   "k\0002", /* k, NUL, 2 (\000: three octal digits) */
                              "arg"};
        const size_t wl[] = {4, 8, 1, 2, 3, 3};

        ASSERT_OK(pool__resp_command(&d, 6, want, wl));
    }
    assert_buf(&c, buf_head(&d), buf_size(&d));
    buf_deinit(&a);
    buf_deinit(&b);
    buf_deinit(&c);
    buf_deinit(&d);
}

/* An EVALSHA with its "EVALSHA <sha>" bulks encoded beforehand formats
 * like the flat command, behind unread bytes too. */
TEST(resp_format_evalsha)
{
    static const char pre[] = "$7\r\nEVALSHA\r\n$3\r\nabc\r\n";
    const char *flat[] = {"EVALSHA", "abc", "12", "k1", "arg"};
    const size_t flens[] = {7, 3, 2, 2, 3};
    struct buf a, b;

    buf_init(&a);
    buf_init(&b);
    ASSERT_OK(pool__resp_command(&a, 5, flat, flens));
    ASSERT_OK(buf_append(&b, "x", 1));
    buf_consume(&b, 1);
    ASSERT_OK(
        pool__resp_evalsha(&b, pre, sizeof(pre) - 1, "12", 2, 2, flat + 3, flens + 3,
                           pool__resp_bulk_size(2) + pool__resp_args_size(2, flat + 3, flens + 3)));
    assert_buf(&b, buf_head(&a), buf_size(&a));
    buf_deinit(&a);
    buf_deinit(&b);
}

/* Formatting appends behind unread bytes, also when the buffer compacts. */
TEST(resp_format_appends)
{
    const char *argv[] = {"PING"};
    struct buf b;
    int i;

    buf_init(&b);
    ASSERT_OK(buf_append(&b, "xyz", 3));
    buf_consume(&b, 2);
    for (i = 0; i < 100; i++)
        ASSERT_OK(pool__resp_command(&b, 1, argv, NULL));
    ASSERT_EQ(buf_size(&b), 1 + 100 * 14);
    ASSERT_TRUE(memcmp(buf_head(&b), "z*1\r\n$4\r\nPING\r\n*1", 17) == 0);
    ASSERT_OK(pool__resp_array(&b, 2));
    ASSERT_OK(pool__resp_bulk(&b, "a\0b", 3));
    ASSERT_TRUE(memcmp(b.data + b.len - 13, "*2\r\n$3\r\na\0b\r\n", 13) == 0);
    buf_deinit(&b);
}

TEST(resp_u64_and_sizes)
{
    char s[24];

    ASSERT_EQ(pool__resp_u64(s, 0), 1);
    ASSERT_STREQ(s, "0");
    ASSERT_EQ(pool__resp_u64(s, 10), 2);
    ASSERT_STREQ(s, "10");
    ASSERT_EQ(pool__resp_u64(s, UINT64_MAX), 20);
    ASSERT_STREQ(s, "18446744073709551615");
    ASSERT_EQ(pool__resp_bulk_size(0), 6);
    ASSERT_EQ(pool__resp_bulk_size(9), 15);
    ASSERT_EQ(pool__resp_bulk_size(10), 17);
}

/* Every reply type, fed one byte at a time. */
TEST(resp_reader_partial_feeds)
{
    static const char in[] = "+OK\r\n:-42\r\n$-1\r\n*-1\r\n$0\r\n\r\n*0\r\n"
                             "*2\r\n$3\r\nf\0o\r\n*1\r\n:1\r\n-ERR bad thing\r\n";
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *got[16];
    size_t i, n = 0;
    struct pool_reply *r;

    for (i = 0; i < sizeof(in) - 1; i++) {
        ASSERT_OK(pool__resp_feed(rd, in + i, 1));
        while (pool__resp_next(rd, &r) == 1)
            got[n++] = r;
    }
    ASSERT_EQ(n, 8);
    ASSERT_EQ(got[0]->type, POOL_REPLY_STATUS);
    ASSERT_TRUE(pool__resp_str_is(got[0], "ok"));
    ASSERT_EQ(got[1]->type, POOL_REPLY_INTEGER);
    ASSERT_EQ(got[1]->integer, -42);
    ASSERT_EQ(got[2]->type, POOL_REPLY_NIL);
    ASSERT_EQ(got[3]->type, POOL_REPLY_NIL);
    ASSERT_EQ(got[4]->type, POOL_REPLY_STRING);
    ASSERT_EQ(got[4]->len, 0);
    ASSERT_EQ(got[5]->type, POOL_REPLY_ARRAY);
    ASSERT_EQ(got[5]->elements, 0);
    ASSERT_EQ(got[6]->elements, 2);
    ASSERT_EQ(got[6]->element[0]->len, 3);
    ASSERT_TRUE(memcmp(got[6]->element[0]->str, "f\0o", 3) == 0);
    ASSERT_EQ(got[6]->element[1]->element[0]->integer, 1);
    ASSERT_TRUE(pool__resp_is_error(got[7], "ERR"));
    ASSERT_TRUE(!pool__resp_is_error(got[7], "NOSCRIPT"));
    for (i = 0; i < n; i++)
        pool__resp_free(got[i]);
    pool__resp_reader_free(rd);
}

/* pool__resp_free() recycles records and small element tables: the same
 * replies parsed again come back in the same memory, with fresh contents
 * (no element of a recycled table left over), and large arrays, strings
 * and nested arrays free cleanly (valgrind/ASan runs check the rest). */
TEST(resp_reader_recycles_records)
{
    static const char in[] =
        "*2\r\n:7\r\n$-1\r\n*6\r\n:1\r\n:2\r\n+x\r\n*1\r\n$2\r\nab\r\n:5\r\n:6\r\n";
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *a, *b, *a2;

    ASSERT_OK(pool__resp_feed(rd, in, sizeof(in) - 1));
    ASSERT_EQ(pool__resp_next(rd, &a), 1);
    ASSERT_EQ(pool__resp_next(rd, &b), 1);
    ASSERT_EQ(a->elements, 2);
    ASSERT_EQ(a->element[0]->integer, 7);
    ASSERT_EQ(a->element[1]->type, POOL_REPLY_NIL);
    ASSERT_EQ(b->elements, 6);
    ASSERT_TRUE(pool__resp_str_is(b->element[2], "x"));
    ASSERT_EQ(b->element[3]->element[0]->len, 2);
    ASSERT_EQ(b->element[5]->integer, 6);
    pool__resp_free(b);
    pool__resp_free(a);
    ASSERT_OK(pool__resp_feed(rd, "*1\r\n:9\r\n", 8));
    ASSERT_EQ(pool__resp_next(rd, &a2), 1);
    ASSERT_TRUE(a2 == a); /* the record freed last is taken first */
    ASSERT_EQ(a2->type, POOL_REPLY_ARRAY);
    ASSERT_EQ(a2->elements, 1);
    ASSERT_EQ(a2->element[0]->integer, 9);
    ASSERT_EQ(a2->integer, 0);
    pool__resp_free(a2);
    pool__resp_free(NULL);
    pool__resp_reader_free(rd);
}

/* The pool's reader against hiredis's on random valid RESP2 streams (every
 * reply type, binary strings with CR and LF inside, integer extremes,
 * nested and empty arrays), the pool's fed in random chunks: the same
 * replies in the same order. */
static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(uint64_t n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng % n;
}

static void gen_reply(struct buf *b, int depth)
{
    static const long long ints[] = {0, 1, -1, 42, 1700000000123ll, INT64_MAX, INT64_MIN};
    char s[40];
    size_t i, n;

    switch (rnd(depth < 3 ? 8 : 6)) {
    case 0:
        ASSERT_OK(buf_append_str(b, rnd(2) ? "+OK\r\n" : "-ERR some thing\r\n"));
        break;
    case 1:
        ASSERT_OK(buf_appendf(b, ":%lld\r\n", ints[rnd(LP_ARRAY_SIZE(ints))]));
        break;
    case 2:
        ASSERT_OK(buf_append_str(b, "$-1\r\n"));
        break;
    case 3:
    case 4:
        n = rnd(sizeof(s));
        for (i = 0; i < n; i++)
            s[i] = "ab\r\n\0z"[rnd(6)];
        ASSERT_OK(buf_appendf(b, "$%zu\r\n", n));
        ASSERT_OK(buf_append(b, s, n));
        ASSERT_OK(buf_append_str(b, "\r\n"));
        break;
    case 5:
        ASSERT_OK(buf_appendf(b, ":%llu\r\n", (unsigned long long)rnd(1000000)));
        break;
    case 6:
        ASSERT_OK(buf_append_str(b, rnd(4) ? "*0\r\n" : "*-1\r\n"));
        break;
    default:
        n = 1 + rnd(5);
        ASSERT_OK(buf_appendf(b, "*%zu\r\n", n));
        for (i = 0; i < n; i++)
            gen_reply(b, depth + 1);
        break;
    }
}

/* a from the pool's reader, b from hiredis's: the same reply. */
static void assert_same_reply(const struct pool_reply *a, const redisReply *b)
{
    size_t i;

    ASSERT_EQ((int)a->type, b->type);
    switch (a->type) {
    case POOL_REPLY_INTEGER:
        ASSERT_EQ(a->integer, b->integer);
        break;
    case POOL_REPLY_ARRAY:
        ASSERT_EQ(a->elements, b->elements);
        for (i = 0; i < a->elements; i++)
            assert_same_reply(a->element[i], b->element[i]);
        break;
    case POOL_REPLY_STRING:
    case POOL_REPLY_STATUS:
    case POOL_REPLY_ERROR:
        ASSERT_EQ(a->len, b->len);
        ASSERT_TRUE(memcmp(a->str, b->str, a->len) == 0 && a->str[a->len] == '\0');
        break;
    default:
        break;
    }
}

TEST(resp_reader_matches_hiredis)
{
    int round;

    for (round = 0; round < 300; round++) {
        struct pool__resp_reader *rd = pool__resp_reader_create();
        redisReader *ref = redisReaderCreate();
        struct pool_reply *got[64];
        void *want;
        size_t off = 0, n, ngot = 0, i;
        struct buf b;
        struct pool_reply *r;

        buf_init(&b);
        n = 1 + (size_t)rnd(LP_ARRAY_SIZE(got));
        for (i = 0; i < n; i++)
            gen_reply(&b, 0);
        while (off < buf_size(&b)) {
            n = 1 + (size_t)rnd(round % 2 ? 7 : 2000); /* LP_MIN evaluates twice */
            n = LP_MIN(buf_size(&b) - off, n);
            ASSERT_OK(pool__resp_feed(rd, buf_head(&b) + off, n));
            off += n;
            while (pool__resp_next(rd, &r) == 1)
                got[ngot++] = r;
        }
        ASSERT_EQ(redisReaderFeed(ref, buf_head(&b), buf_size(&b)), REDIS_OK);
        for (i = 0; i < ngot; i++) {
            ASSERT_EQ(redisReaderGetReply(ref, &want), REDIS_OK);
            ASSERT_NOTNULL(want);
            assert_same_reply(got[i], want);
            freeReplyObject(want);
            pool__resp_free(got[i]);
        }
        ASSERT_EQ(redisReaderGetReply(ref, &want), REDIS_OK);
        ASSERT_NULL(want); /* hiredis saw no more replies either */
        redisReaderFree(ref);
        pool__resp_reader_free(rd);
        buf_deinit(&b);
    }
}

TEST(resp_reader_many_in_one_feed)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct buf b;
    struct pool_reply *r;
    int i, n = 0;

    buf_init(&b);
    for (i = 0; i < 1000; i++)
        ASSERT_OK(buf_appendf(&b, ":%d\r\n", i));
    ASSERT_OK(pool__resp_feed(rd, buf_head(&b), buf_size(&b)));
    while (pool__resp_next(rd, &r) == 1) {
        ASSERT_EQ(r->integer, n);
        n++;
        pool__resp_free(r);
    }
    ASSERT_EQ(n, 1000);
    buf_deinit(&b);
    pool__resp_reader_free(rd);
}

/* A protocol error is reported and sticky. */
TEST(resp_reader_protocol_error)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *r;

    ASSERT_OK(pool__resp_feed(rd, "+OK\r\n?what\r\n", 12));
    ASSERT_EQ(pool__resp_next(rd, &r), 1);
    pool__resp_free(r);
    ASSERT_EQ(pool__resp_next(rd, &r), -EPROTO);
    ASSERT_NULL(r);
    ASSERT_EQ(pool__resp_feed(rd, "+OK\r\n", 5), -EPROTO);
    ASSERT_EQ(pool__resp_next(rd, &r), -EPROTO);
    pool__resp_reader_free(rd);
}

/* Feeds "*1\r\n" depth times then ":1\r\n"; returns what the reader says. */
static int feed_nested(struct pool__resp_reader *rd, int depth, struct pool_reply **r)
{
    struct buf b;
    int i, rc;

    buf_init(&b);
    for (i = 0; i < depth; i++)
        ASSERT_OK(buf_append_str(&b, "*1\r\n"));
    ASSERT_OK(buf_append_str(&b, ":1\r\n"));
    ASSERT_OK(pool__resp_feed(rd, buf_head(&b), buf_size(&b)));
    rc = pool__resp_next(rd, r);
    buf_deinit(&b);
    return rc;
}

/* Array replies are capped alike with hiredis 0.14 and 1.x: 7 levels and
 * 65536 elements at most. An 11-byte header cannot make the pool allocate
 * gigabytes (1.x allows 2^32 - 1 elements), nor a deep reply overflow the
 * stack when it is freed (1.x nests without limit). */
TEST(resp_reader_caps_arrays)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    const struct pool_reply *e;
    struct pool_reply *r;
    struct buf b;
    int i;

    ASSERT_EQ(feed_nested(rd, 7, &r), 1);
    for (e = r, i = 0; i < 7; i++, e = e->element[0])
        ASSERT_TRUE(e->type == POOL_REPLY_ARRAY && e->elements == 1);
    ASSERT_TRUE(e->type == POOL_REPLY_INTEGER && e->integer == 1);
    pool__resp_free(r);
    pool__resp_reader_free(rd);

    rd = pool__resp_reader_create();
    ASSERT_EQ(feed_nested(rd, 9, &r), -EPROTO);
    ASSERT_TRUE(strstr(rd->errstr, "nested") != NULL);
    pool__resp_reader_free(rd);

    rd = pool__resp_reader_create();
    buf_init(&b);
    ASSERT_OK(buf_append_str(&b, "*65536\r\n"));
    for (i = 0; i < 65536; i++)
        ASSERT_OK(buf_append_str(&b, ":1\r\n"));
    ASSERT_OK(pool__resp_feed(rd, buf_head(&b), buf_size(&b)));
    ASSERT_EQ(pool__resp_next(rd, &r), 1);
    ASSERT_EQ(r->elements, 65536);
    pool__resp_free(r);
    buf_deinit(&b);
    ASSERT_OK(pool__resp_feed(rd, "*65537\r\n", 8)); /* refused from its header */
    ASSERT_EQ(pool__resp_next(rd, &r), -EPROTO);
    ASSERT_TRUE(strstr(rd->errstr, "too many elements") != NULL);
    pool__resp_reader_free(rd);

    rd = pool__resp_reader_create();
    ASSERT_OK(pool__resp_feed(rd, "*4294967295\r\n", 13));
    ASSERT_EQ(pool__resp_next(rd, &r), -EPROTO);
    pool__resp_reader_free(rd);
}

TEST(resp_reply_predicates)
{
    struct pool_reply err = {
        .type = POOL_REPLY_ERROR, .len = 20, .str = (char *)"NOSCRIPT No matching"};
    struct pool_reply st = {.type = POOL_REPLY_STATUS, .len = 8, .str = (char *)"NOSCRIPT"};
    struct pool_reply str = {.type = POOL_REPLY_STRING, .len = 7, .str = (char *)"MeSsAgE"};
    struct pool_reply num = {.type = POOL_REPLY_INTEGER, .integer = 7};

    err.len = strlen(err.str);
    ASSERT_TRUE(pool__resp_is_error(&err, "NOSCRIPT"));
    ASSERT_TRUE(!pool__resp_is_error(&err, "NOSCRIPTX No"));
    ASSERT_TRUE(!pool__resp_is_error(&st, "NOSCRIPT"));
    ASSERT_TRUE(pool__resp_str_is(&str, "message"));
    ASSERT_TRUE(!pool__resp_str_is(&str, "messages"));
    ASSERT_TRUE(!pool__resp_str_is(&str, "messag"));
    ASSERT_TRUE(!pool__resp_str_is(&num, "7"));
}

TEST_MAIN(TEST_CASE(resp_format_simple), TEST_CASE(resp_format_binary),
          TEST_CASE(resp_format_large), TEST_CASE(resp_format_split_and_raw),
          TEST_CASE(resp_format_evalsha), TEST_CASE(resp_format_appends),
          TEST_CASE(resp_u64_and_sizes), TEST_CASE(resp_reader_partial_feeds),
          TEST_CASE(resp_reader_many_in_one_feed), TEST_CASE(resp_reader_recycles_records),
          TEST_CASE(resp_reader_matches_hiredis), TEST_CASE(resp_reader_protocol_error),
          TEST_CASE(resp_reader_caps_arrays), TEST_CASE(resp_reply_predicates))
