/* Unit tests for pool/addr.c: "host:port" splitting (IPv4, names,
 * bracketed and bare IPv6 as MOVED writes it, the empty host of a
 * redirect, bad input), instant resolution of IP literals and paths, a
 * host name resolved off the calling thread (-EINPROGRESS, then the
 * address), forgetting a name's address, and dropping an endpoint while its
 * lookup still runs. */
#include <netinet/in.h>
#include <sys/socket.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "harness.h"
#include "pool/addr.h"

static void split_ok(const char *s, const char *host, int port)
{
    char h[POOL__HOST_MAX];
    int p = 0;

    if (pool__addr_split(s, strlen(s), h, sizeof(h), &p) != 0)
        TEST_FAIL("split %s failed", s);
    ASSERT_STREQ(h, host);
    ASSERT_EQ(p, port);
}

static void split_bad(const char *s)
{
    char h[POOL__HOST_MAX];
    int p = 0;

    if (pool__addr_split(s, strlen(s), h, sizeof(h), &p) != -EINVAL)
        TEST_FAIL("split %s should fail", s);
}

TEST(addr_split)
{
    char tiny[4];
    int p;

    split_ok("127.0.0.1:7000", "127.0.0.1", 7000);
    split_ok("redis-0.redis:6379", "redis-0.redis", 6379);
    split_ok("[::1]:7001", "::1", 7001);
    split_ok("::1:7001", "::1", 7001);
    split_ok(":7002", "", 7002);
    split_ok("h:65535", "h", 65535);
    split_bad("nocolon");
    split_bad("h:");
    split_bad("h:0");
    split_bad("h:65536");
    split_bad("h:12a");
    split_bad("[::1:7001");
    split_bad("[::1]7001");
    ASSERT_EQ(pool__addr_split("longhost:1", 10, tiny, sizeof(tiny), &p), -EINVAL);
}

TEST(addr_literal_resolves_at_once)
{
    struct pool__addr a;
    char err[160];

    ASSERT_OK(pool__addr_init(&a, "127.0.0.1", 7000, NULL));
    ASSERT_TRUE(a.numeric);
    ASSERT_STREQ(a.where, "127.0.0.1:7000");
    ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), 0);
    ASSERT_EQ(a.ss.ss_family, AF_INET);
    ASSERT_EQ(ntohs(((struct sockaddr_in *)&a.ss)->sin_port), 7000);
    pool__addr_forget(&a); /* a literal keeps its address */
    ASSERT_TRUE(a.sslen > 0);
    pool__addr_deinit(&a);
    ASSERT_OK(pool__addr_init(&a, "::1", 7001, NULL));
    ASSERT_STREQ(a.where, "[::1]:7001");
    ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), 0);
    ASSERT_EQ(a.ss.ss_family, AF_INET6);
    pool__addr_deinit(&a);
    ASSERT_OK(pool__addr_init(&a, NULL, 0, "/tmp/x.sock"));
    ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), 0);
    ASSERT_EQ(a.ss.ss_family, AF_UNIX);
    pool__addr_deinit(&a);
    ASSERT_EQ(pool__addr_init(&a, "h", 0, NULL), -EINVAL);
}

/* Polls until the lookup is done (bounded). */
static int resolve_wait(struct pool__addr *a, char *err, size_t errlen, bool *went_async)
{
    uint64_t end = clock_mono_ms() + 10000;
    int rc;

    while ((rc = pool__addr_resolve(a, err, errlen)) == -EINPROGRESS) {
        *went_async = true;
        if (clock_mono_ms() > end)
            TEST_FAIL("lookup of %s did not finish", a->host);
        usleep(1000);
    }
    return rc;
}

TEST(addr_name_resolves_off_thread)
{
    struct pool__addr a;
    bool async = false;
    char err[160];

    ASSERT_OK(pool__addr_init(&a, "localhost", 6379, NULL));
    ASSERT_TRUE(!a.numeric);
    ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), -EINPROGRESS);
    ASSERT_EQ(resolve_wait(&a, err, sizeof(err), &async), 0);
    ASSERT_TRUE(a.sslen > 0);
    ASSERT_TRUE(a.ss.ss_family == AF_INET || a.ss.ss_family == AF_INET6);
    /* cached, then forgotten: the next resolve looks it up again */
    ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), 0);
    pool__addr_forget(&a);
    ASSERT_EQ(a.sslen, 0);
    async = false;
    ASSERT_EQ(resolve_wait(&a, err, sizeof(err), &async), 0);
    ASSERT_TRUE(async);
    pool__addr_deinit(&a);
}

/* The endpoint goes while its thread still runs: the thread frees the
 * lookup (ASan/LSan check both sides). */
TEST(addr_deinit_during_lookup)
{
    struct pool__addr a;
    char err[160];
    int i;

    for (i = 0; i < 20; i++) {
        ASSERT_OK(pool__addr_init(&a, "localhost", 6379, NULL));
        ASSERT_EQ(pool__addr_resolve(&a, err, sizeof(err)), -EINPROGRESS);
        pool__addr_deinit(&a);
    }
    usleep(200000); /* let the threads finish before exit (leak check) */
}

TEST(addr_resolve_now_blocks)
{
    struct pool__addr a;
    char err[160];

    ASSERT_OK(pool__addr_init(&a, "localhost", 6379, NULL));
    ASSERT_EQ(pool__addr_resolve_now(&a, err, sizeof(err)), 0);
    ASSERT_TRUE(a.sslen > 0);
    pool__addr_deinit(&a);
}

TEST_MAIN(TEST_CASE(addr_split), TEST_CASE(addr_literal_resolves_at_once),
          TEST_CASE(addr_name_resolves_off_thread), TEST_CASE(addr_deinit_during_lookup),
          TEST_CASE(addr_resolve_now_blocks))
