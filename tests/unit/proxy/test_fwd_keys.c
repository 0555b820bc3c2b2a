/* Unit tests for the pass-through command table (proxy/fwd_keys.c): every
 * name is found in any case (the table is sorted the way it is searched:
 * EVALSHA was once missed because '_' sorts between upper and lower case),
 * arity, and the key positions of each key-spec kind. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy/fwd_keys.h"
#include "proxy/request.h"

/* A request parsed from a NULL-terminated argument list. */
static struct px_req *req_of(const char *arg, ...)
{
    char wire[1024];
    const char *a, *data = wire, *args[32];
    size_t n = 0, len = 0, left;
    struct px_parser p;
    struct px_req *req = NULL;
    va_list ap;

    va_start(ap, arg);
    for (a = arg; a; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    len += (size_t)snprintf(wire + len, sizeof(wire) - len, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(wire + len, sizeof(wire) - len, "$%zu\r\n%s\r\n", strlen(args[i]),
                                args[i]);
    px_parser_init(&p, 64, 4096);
    left = len;
    ASSERT_EQ(px_parser_next(&p, &data, &left, &req), 1);
    px_parser_deinit(&p);
    return req;
}

/* The keys of req under its table entry, as "i,j,k" argv indexes. */
static int keys_of(struct px_req *req, char *out, size_t n, const char **why)
{
    const struct px_fwd_spec *s = px_fwd_lookup(req->argv[0].p, req->argv[0].len);
    struct px_fwd_keyset ks;
    size_t len = 0;
    int r, i, rc;

    ASSERT_NOTNULL(s);
    out[0] = '\0';
    rc = px_fwd_keys(s, req, &ks, why);
    for (r = 0; rc == 0 && r < ks.n; r++) {
        for (i = ks.first[r]; i <= ks.last[r]; i += ks.step[r])
            len += (size_t)snprintf(out + len, n - len, "%s%d", len ? "," : "", i);
    }
    return rc;
}

static void expect_keys(struct px_req *req, const char *want)
{
    const char *why = NULL;
    char got[128];

    ASSERT_EQ(keys_of(req, got, sizeof(got), &why), 0);
    ASSERT_STREQ(got, want);
    px_req_free(req);
}

static void expect_bad(struct px_req *req, const char *why_prefix)
{
    const char *why = NULL;
    char got[128];

    ASSERT_EQ(keys_of(req, got, sizeof(got), &why), -EINVAL);
    ASSERT_TRUE(why && strncmp(why, why_prefix, strlen(why_prefix)) == 0);
    px_req_free(req);
}

TEST(fwd_lookup_every_name_any_case)
{
    static const char *const names[] = {
        "GET",         "get",        "EVAL",    "EVALSHA",        "evalsha",
        "EVALSHA_RO",  "EVAL_RO",    "FCALL",   "FCALL_RO",       "BITFIELD",
        "BITFIELD_RO", "SORT",       "SORT_RO", "RESTORE-ASKING", "ZRANGE",
        "ZRANGESTORE", "XREADGROUP", "HGETALL", "BLPOP",          "MONITOR",
        "READONLY",
    };
    size_t i;

    px_fwd_keys_init();
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct px_fwd_spec *s = px_fwd_lookup(names[i], strlen(names[i]));

        if (!s)
            TEST_FAIL("'%s' not found", names[i]);
        ASSERT_TRUE(strcasecmp(s->name, names[i]) == 0);
    }
    ASSERT_NULL(px_fwd_lookup("GE", 2));
    ASSERT_NULL(px_fwd_lookup("GETT", 4));
    ASSERT_NULL(px_fwd_lookup("LOCK", 4)); /* the proxy's own: never forwarded */
    ASSERT_NULL(px_fwd_lookup("", 0));
}

TEST(fwd_arity)
{
    px_fwd_keys_init();
    ASSERT_TRUE(px_fwd_arity_ok(px_fwd_lookup("GET", 3), 2));
    ASSERT_TRUE(!px_fwd_arity_ok(px_fwd_lookup("GET", 3), 3));
    ASSERT_TRUE(!px_fwd_arity_ok(px_fwd_lookup("SET", 3), 2));
    ASSERT_TRUE(px_fwd_arity_ok(px_fwd_lookup("SET", 3), 5));
}

TEST(fwd_key_positions)
{
    px_fwd_keys_init();
    expect_keys(req_of("GET", "a", NULL), "1");
    expect_keys(req_of("MGET", "a", "b", "c", NULL), "1,2,3");
    expect_keys(req_of("MSET", "a", "1", "b", "2", NULL), "1,3");
    expect_keys(req_of("RENAME", "a", "b", NULL), "1,2");
    expect_keys(req_of("BITOP", "AND", "d", "a", "b", NULL), "2,3,4");
    expect_keys(req_of("EVAL", "return 1", "2", "a", "b", "arg", NULL), "3,4");
    expect_keys(req_of("EVALSHA", "x", "0", NULL), "");
    expect_keys(req_of("FCALL", "f", "1", "a", "arg", NULL), "3");
    expect_keys(req_of("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2", NULL), "1,3,4");
    expect_keys(req_of("ZUNION", "2", "a", "b", NULL), "2,3");
    expect_keys(req_of("LMPOP", "2", "a", "b", "LEFT", NULL), "2,3");
    expect_keys(req_of("XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0", NULL), "4,5");
    expect_keys(req_of("XGROUP", "CREATE", "s", "g", "$", NULL), "2");
    expect_keys(req_of("XINFO", "HELP", NULL), "");
    expect_keys(req_of("OBJECT", "ENCODING", "k", NULL), "2");
    expect_keys(req_of("TIME", NULL), "");
}

TEST(fwd_bad_numkeys_and_streams)
{
    px_fwd_keys_init();
    expect_bad(req_of("EVAL", "return 1", "3", "a", NULL), "ERR Number of keys");
    expect_bad(req_of("EVAL", "return 1", "-1", "a", NULL), "ERR numkeys should be");
    expect_bad(req_of("EVAL", "return 1", "x", NULL), "ERR numkeys should be");
    expect_bad(req_of("ZUNION", "0", "a", NULL), "ERR numkeys should be greater than 0");
    expect_bad(req_of("ZUNIONSTORE", "d", "0", "a", NULL), "ERR numkeys should be greater than 0");
    expect_bad(req_of("XREAD", "STREAMS", "a", "b", "0", NULL), "ERR Unbalanced");
    expect_bad(req_of("XREAD", "COUNT", "1", "a", NULL), "ERR Unbalanced");
}

TEST_MAIN(TEST_CASE(fwd_lookup_every_name_any_case), TEST_CASE(fwd_arity),
          TEST_CASE(fwd_key_positions), TEST_CASE(fwd_bad_numkeys_and_streams))
