/* Unit tests for pool/topo.c: CLUSTER SHARDS, CLUSTER SLOTS and SENTINEL
 * GET-MASTER-ADDR-BY-NAME replies,
 * written as RESP and parsed by the pool's reader into the struct pool_reply trees
 * the pool gets, then turned into a topology (nodes, roles, slot owners).
 * Shapes follow what Redis 7.0 sends (checked against a live cluster):
 * several ranges per shard, replicas, unknown endpoints ("?", ""), a shard
 * listing a failed old master after a failover, CLUSTER SLOTS with the 7.0
 * metadata element; a sentinel's answer (one master owning every slot),
 * its nil for an unknown name; and malformed replies. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "harness.h"
#include "pool/resp.h"
#include "pool/topo.h"

/* ---- a small RESP writer ------------------------------------------------------ */

static void w_arr(struct buf *b, size_t n)
{
    ASSERT_OK(buf_appendf(b, "*%zu\r\n", n));
}

static void w_str(struct buf *b, const char *s)
{
    ASSERT_OK(buf_appendf(b, "$%zu\r\n%s\r\n", strlen(s), s));
}

static void w_int(struct buf *b, long long v)
{
    ASSERT_OK(buf_appendf(b, ":%lld\r\n", v));
}

/* One SHARDS node map with the fields Redis 7.0 sends. */
static void w_shard_node(struct buf *b, const char *id, int port, const char *ip,
                         const char *endpoint, const char *role, const char *health)
{
    w_arr(b, 14);
    w_str(b, "id");
    w_str(b, id);
    w_str(b, "port");
    w_int(b, port);
    w_str(b, "ip");
    w_str(b, ip);
    w_str(b, "endpoint");
    w_str(b, endpoint);
    w_str(b, "role");
    w_str(b, role);
    w_str(b, "replication-offset");
    w_int(b, 72156);
    w_str(b, "health");
    w_str(b, health);
}

static struct pool_reply *parse(const struct buf *b)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *r = NULL;

    ASSERT_NOTNULL(rd);
    ASSERT_OK(pool__resp_feed(rd, buf_head(b), buf_size(b)));
    ASSERT_EQ(pool__resp_next(rd, &r), 1);
    pool__resp_reader_free(rd);
    return r;
}

static const char ID_A[] = "e10b7051d6bf2d5febd39a2be297bbaea6084111";
static const char ID_B[] = "796945618995b5468d1c3de9096a813e03c49b84";
static const char ID_C[] = "5b673fdc294f44480a27a4cc0bbd148a20086a63";
static const char ID_R[] = "3f25e036a830e6266b65b175e2622803b5ff18b1";

static int find(const struct pool__topo *t, const char *host, int port)
{
    size_t i;

    for (i = 0; i < t->nnodes; i++) {
        if (t->nodes[i].port == port && strcmp(t->nodes[i].host, host) == 0)
            return (int)i;
    }
    return -1;
}

/* Three shards: A 0-5460 (+ replica), B 5461-9929 and 9931-10922, C
 * 10923-16383 plus slot 9930 (a migrated slot); B announces "?" as its
 * endpoint (ip used), C nothing at all (the fallback host). */
static void w_three_shards(struct buf *b)
{
    w_arr(b, 3);
    w_arr(b, 4);
    w_str(b, "slots");
    w_arr(b, 2);
    w_int(b, 0);
    w_int(b, 5460);
    w_str(b, "nodes");
    w_arr(b, 2);
    w_shard_node(b, ID_A, 7001, "127.0.0.1", "127.0.0.1", "master", "online");
    w_shard_node(b, ID_R, 7004, "127.0.0.1", "127.0.0.1", "replica", "loading");
    w_arr(b, 4);
    w_str(b, "slots");
    w_arr(b, 4);
    w_int(b, 5461);
    w_int(b, 9929);
    w_int(b, 9931);
    w_int(b, 10922);
    w_str(b, "nodes");
    w_arr(b, 1);
    w_shard_node(b, ID_B, 7002, "10.0.0.2", "?", "master", "online");
    w_arr(b, 4);
    w_str(b, "slots");
    w_arr(b, 4);
    w_int(b, 9930);
    w_int(b, 9930);
    w_int(b, 10923);
    w_int(b, 16383);
    w_str(b, "nodes");
    w_arr(b, 1);
    w_shard_node(b, ID_C, 7003, "", "", "master", "online");
}

TEST(topo_shards)
{
    struct pool__topo t;
    struct buf b;
    struct pool_reply *r;
    int a, bb, c, rep;

    buf_init(&b);
    w_three_shards(&b);
    r = parse(&b);
    ASSERT_OK(pool__topo_parse_shards(&t, r, "seed.example", false));
    ASSERT_EQ(t.nnodes, 4);
    ASSERT_EQ(pool__topo_masters(&t), 3);
    a = find(&t, "127.0.0.1", 7001);
    bb = find(&t, "10.0.0.2", 7002);
    c = find(&t, "seed.example", 7003);
    rep = find(&t, "127.0.0.1", 7004);
    ASSERT_TRUE(a >= 0 && bb >= 0 && c >= 0 && rep >= 0);
    ASSERT_TRUE(t.nodes[a].master && t.nodes[bb].master && t.nodes[c].master);
    ASSERT_TRUE(!t.nodes[rep].master);
    ASSERT_STREQ(t.nodes[a].id, ID_A);
    ASSERT_STREQ(t.nodes[rep].health, "loading");
    ASSERT_EQ(t.nodes[a].nslots, 5461);
    ASSERT_EQ(t.nodes[bb].nslots, 10922 - 5461);
    ASSERT_EQ(t.nodes[c].nslots, 16383 - 10923 + 2);
    ASSERT_EQ(t.nodes[rep].nslots, 0);
    ASSERT_EQ(t.owner[0], a);
    ASSERT_EQ(t.owner[5460], a);
    ASSERT_EQ(t.owner[5461], bb);
    ASSERT_EQ(t.owner[9929], bb);
    ASSERT_EQ(t.owner[9930], c);
    ASSERT_EQ(t.owner[9931], bb);
    ASSERT_EQ(t.owner[16383], c);
    pool__topo_free(&t);
    pool__resp_free(r);
    buf_deinit(&b);
}

/* Right after a failover a shard may list the failed old master and the
 * promoted one: the healthy one owns the slots. A TLS-only node (no
 * "port") is skipped. A slot-less shard serves nothing. */
TEST(topo_shards_failover)
{
    struct pool__topo t;
    struct buf b;
    struct pool_reply *r;
    int old, neu;

    buf_init(&b);
    w_arr(&b, 2);
    w_arr(&b, 4);
    w_str(&b, "slots");
    w_arr(&b, 2);
    w_int(&b, 0);
    w_int(&b, 16383);
    w_str(&b, "nodes");
    w_arr(&b, 3);
    w_shard_node(&b, ID_A, 7001, "127.0.0.1", "127.0.0.1", "master", "failed");
    w_shard_node(&b, ID_R, 7004, "127.0.0.1", "127.0.0.1", "master", "online");
    w_arr(&b, 4); /* TLS only */
    w_str(&b, "id");
    w_str(&b, ID_B);
    w_str(&b, "tls-port");
    w_int(&b, 7443);
    w_arr(&b, 4);
    w_str(&b, "slots");
    w_arr(&b, 0);
    w_str(&b, "nodes");
    w_arr(&b, 1);
    w_shard_node(&b, ID_C, 7003, "127.0.0.1", "127.0.0.1", "master", "online");
    r = parse(&b);
    ASSERT_OK(pool__topo_parse_shards(&t, r, "x", false));
    old = find(&t, "127.0.0.1", 7001);
    neu = find(&t, "127.0.0.1", 7004);
    ASSERT_EQ(t.owner[0], neu);
    ASSERT_EQ(t.owner[16383], neu);
    ASSERT_EQ(t.nodes[old].nslots, 0);
    ASSERT_EQ(t.nodes[neu].nslots, POOL_SLOTS);
    ASSERT_EQ(pool__topo_masters(&t), 1);
    ASSERT_EQ(t.nnodes, 3);
    pool__topo_free(&t);
    pool__resp_free(r);
    buf_deinit(&b);
}

/* [start, end, [host, port, id, {meta}], [replica...]] as Redis 7.0 sends;
 * a master with two ranges; "" as host means the queried node. */
TEST(topo_slots)
{
    struct pool__topo t;
    struct buf b;
    struct pool_reply *r;
    int a, bb, rep;

    buf_init(&b);
    w_arr(&b, 3);
    w_arr(&b, 4);
    w_int(&b, 0);
    w_int(&b, 8191);
    w_arr(&b, 4);
    w_str(&b, "127.0.0.1");
    w_int(&b, 7001);
    w_str(&b, ID_A);
    w_arr(&b, 0);
    w_arr(&b, 4);
    w_str(&b, "127.0.0.1");
    w_int(&b, 7004);
    w_str(&b, ID_R);
    w_arr(&b, 0);
    w_arr(&b, 3);
    w_int(&b, 8192);
    w_int(&b, 16000);
    w_arr(&b, 3);
    w_str(&b, "");
    w_int(&b, 7002);
    w_str(&b, ID_B);
    w_arr(&b, 3);
    w_int(&b, 16001);
    w_int(&b, 16383);
    w_arr(&b, 2); /* old servers: no id */
    w_str(&b, "127.0.0.1");
    w_int(&b, 7001);
    r = parse(&b);
    ASSERT_OK(pool__topo_parse_slots(&t, r, "10.1.1.1"));
    a = find(&t, "127.0.0.1", 7001);
    bb = find(&t, "10.1.1.1", 7002);
    rep = find(&t, "127.0.0.1", 7004);
    ASSERT_TRUE(a >= 0 && bb >= 0 && rep >= 0);
    ASSERT_EQ(t.nnodes, 3);
    ASSERT_EQ(pool__topo_masters(&t), 2);
    ASSERT_TRUE(t.nodes[a].master && t.nodes[bb].master && !t.nodes[rep].master);
    ASSERT_STREQ(t.nodes[bb].id, ID_B);
    ASSERT_EQ(t.nodes[a].nslots, 8192 + 383);
    ASSERT_EQ(t.owner[8191], a);
    ASSERT_EQ(t.owner[8192], bb);
    ASSERT_EQ(t.owner[16383], a);
    pool__topo_free(&t);
    pool__resp_free(r);
    buf_deinit(&b);
}

/* A partial map: slots nobody serves have owner -1. */
TEST(topo_slots_uncovered)
{
    struct pool__topo t;
    struct buf b;
    struct pool_reply *r;

    buf_init(&b);
    w_arr(&b, 1);
    w_arr(&b, 3);
    w_int(&b, 100);
    w_int(&b, 199);
    w_arr(&b, 2);
    w_str(&b, "127.0.0.1");
    w_int(&b, 7001);
    r = parse(&b);
    ASSERT_OK(pool__topo_parse_slots(&t, r, "x"));
    ASSERT_EQ(t.owner[99], -1);
    ASSERT_EQ(t.owner[100], 0);
    ASSERT_EQ(t.owner[199], 0);
    ASSERT_EQ(t.owner[200], -1);
    ASSERT_EQ(t.nodes[0].nslots, 100);
    pool__topo_free(&t);
    pool__resp_free(r);
    buf_deinit(&b);
}

static void expect_bad(const char *what, const struct buf *b, bool shards)
{
    struct pool__topo t;
    struct pool_reply *r = parse(b);
    int rc =
        shards ? pool__topo_parse_shards(&t, r, "x", false) : pool__topo_parse_slots(&t, r, "x");

    if (rc != -EPROTO)
        TEST_FAIL("%s: parsed (%d)", what, rc);
    pool__topo_free(&t);
    pool__resp_free(r);
}

TEST(topo_malformed)
{
    struct buf b;

    buf_init(&b);
    w_str(&b, "not an array");
    expect_bad("string", &b, true);
    expect_bad("string", &b, false);
    buf_reset(&b);
    w_arr(&b, 1);
    w_arr(&b, 3);
    w_int(&b, 0);
    w_int(&b, 16384); /* slot out of range */
    w_arr(&b, 2);
    w_str(&b, "127.0.0.1");
    w_int(&b, 7001);
    expect_bad("slot 16384", &b, false);
    buf_reset(&b);
    w_arr(&b, 1);
    w_arr(&b, 3);
    w_int(&b, 10);
    w_int(&b, 5); /* start > end */
    w_arr(&b, 2);
    w_str(&b, "127.0.0.1");
    w_int(&b, 7001);
    expect_bad("reversed range", &b, false);
    buf_reset(&b);
    w_arr(&b, 1);
    w_arr(&b, 3); /* odd key/value list */
    w_str(&b, "slots");
    w_arr(&b, 0);
    w_str(&b, "nodes");
    expect_bad("odd shard map", &b, true);
    buf_reset(&b);
    w_arr(&b, 1);
    w_arr(&b, 2); /* no "nodes" */
    w_str(&b, "slots");
    w_arr(&b, 0);
    expect_bad("shard without nodes", &b, true);
    buf_reset(&b);
    w_arr(&b, 1);
    w_arr(&b, 3);
    w_int(&b, 0);
    w_int(&b, 1);
    w_arr(&b, 2);
    w_str(&b, "127.0.0.1");
    w_str(&b, "7001"); /* port as a string */
    expect_bad("string port", &b, false);
    buf_deinit(&b);
}

/* Parses b as a sentinel answer; returns the result, t filled. */
static int parse_sentinel(struct pool__topo *t, const struct buf *b)
{
    struct pool_reply *r = parse(b);
    int rc = pool__topo_parse_sentinel(t, r);

    pool__resp_free(r);
    return rc;
}

TEST(topo_sentinel)
{
    struct pool__topo t;
    struct buf b;
    int s;

    buf_init(&b);
    w_arr(&b, 2);
    w_str(&b, "10.0.0.7");
    w_str(&b, "6380");
    ASSERT_EQ(parse_sentinel(&t, &b), 0);
    ASSERT_EQ(t.nnodes, 1);
    ASSERT_STREQ(t.nodes[0].host, "10.0.0.7");
    ASSERT_EQ(t.nodes[0].port, 6380);
    ASSERT_TRUE(t.nodes[0].master);
    ASSERT_EQ(t.nodes[0].nslots, 16384);
    ASSERT_EQ(pool__topo_masters(&t), 1);
    for (s = 0; s < 16384; s++)
        ASSERT_EQ(t.owner[s], 0);
    pool__topo_free(&t);
    /* a name the sentinel does not monitor */
    buf_reset(&b);
    ASSERT_OK(buf_appendf(&b, "*-1\r\n"));
    ASSERT_EQ(parse_sentinel(&t, &b), -ENOENT);
    pool__topo_free(&t);
    buf_reset(&b);
    ASSERT_OK(buf_appendf(&b, "$-1\r\n"));
    ASSERT_EQ(parse_sentinel(&t, &b), -ENOENT);
    pool__topo_free(&t);
    buf_deinit(&b);
}

/* Anything but [host, "port"]: an error reply, one element, an integer
 * port, a port out of range, an empty host. */
TEST(topo_sentinel_malformed)
{
    static const char *const bad[] = {
        "-ERR unknown command 'SENTINEL'\r\n",
        "*1\r\n$9\r\n127.0.0.1\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n:6379\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$2\r\n6x\r\n",
        "*2\r\n$0\r\n\r\n$4\r\n6379\r\n",
        "*3\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n$1\r\nx\r\n",
    };
    struct pool__topo t;
    struct buf b;
    size_t i;

    buf_init(&b);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        buf_reset(&b);
        ASSERT_OK(buf_appendf(&b, "%s", bad[i]));
        if (parse_sentinel(&t, &b) != -EPROTO)
            TEST_FAIL("sentinel reply %zu was accepted", i);
        pool__topo_free(&t);
    }
    buf_deinit(&b);
}

/* One shard whose master has a plain and a TLS port (tls-cluster yes
 * with both), and one whose master is TLS only (--port 0). */
static void w_tls_shards(struct buf *b)
{
    int i;

    w_arr(b, 2);
    for (i = 0; i < 2; i++) {
        w_arr(b, 4);
        w_str(b, "slots");
        w_arr(b, 2);
        w_int(b, i == 0 ? 0 : 8192);
        w_int(b, i == 0 ? 8191 : 16383);
        w_str(b, "nodes");
        w_arr(b, 1);
        w_arr(b, i == 0 ? 12 : 10);
        w_str(b, "id");
        w_str(b, i == 0 ? ID_A : ID_B);
        if (i == 0) {
            w_str(b, "port");
            w_int(b, 7001);
        }
        w_str(b, "tls-port");
        w_int(b, i == 0 ? 8001 : 8002);
        w_str(b, "ip");
        w_str(b, "127.0.0.1");
        w_str(b, "endpoint");
        w_str(b, "127.0.0.1");
        w_str(b, "role");
        w_str(b, "master");
    }
}

/* A TLS pool (rediss-cluster://) connects to "tls-port"; a plain one to
 * "port", and cannot reach a TLS-only node. */
TEST(topo_shards_tls_ports)
{
    struct pool__topo t;
    struct buf b;
    struct pool_reply *r;

    buf_init(&b);
    w_tls_shards(&b);
    r = parse(&b);
    ASSERT_OK(pool__topo_parse_shards(&t, r, "x", true));
    ASSERT_EQ(pool__topo_masters(&t), 2);
    ASSERT_TRUE(find(&t, "127.0.0.1", 8001) >= 0 && find(&t, "127.0.0.1", 8002) >= 0);
    ASSERT_TRUE(find(&t, "127.0.0.1", 7001) < 0);
    pool__topo_free(&t);
    ASSERT_OK(pool__topo_parse_shards(&t, r, "x", false));
    ASSERT_EQ(pool__topo_masters(&t), 1);
    ASSERT_TRUE(find(&t, "127.0.0.1", 7001) >= 0 && find(&t, "127.0.0.1", 8002) < 0);
    pool__topo_free(&t);
    pool__resp_free(r);
    buf_deinit(&b);
}

TEST_MAIN(TEST_CASE(topo_shards), TEST_CASE(topo_shards_tls_ports), TEST_CASE(topo_shards_failover),
          TEST_CASE(topo_slots), TEST_CASE(topo_slots_uncovered), TEST_CASE(topo_malformed),
          TEST_CASE(topo_sentinel), TEST_CASE(topo_sentinel_malformed))
