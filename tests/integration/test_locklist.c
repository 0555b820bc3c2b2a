/* LOCK.LIST: which connection holds or waits for which name, with its
 * owner, kind, count, age and lease left; filtered by a glob pattern and,
 * with auth, by the caller's name patterns. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* The entry of LOCK.LIST reply r whose name and state match, or NULL. */
static const redisReply *find_entry(const redisReply *r, const char *name, const char *state)
{
    size_t i, k;

    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    for (i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        bool n = false, s = false;

        ASSERT_EQ(e->type, REDIS_REPLY_ARRAY);
        ASSERT_EQ(e->elements, 24u);
        for (k = 0; k + 1 < e->elements; k += 2) {
            const redisReply *v = e->element[k + 1];

            if (strcmp(e->element[k]->str, "name") == 0)
                n = strcmp(v->str, name) == 0;
            if (strcmp(e->element[k]->str, "state") == 0)
                s = strcmp(v->str, state) == 0;
        }
        if (n && s)
            return e;
    }
    return NULL;
}

static const redisReply *field(const redisReply *e, const char *f)
{
    size_t k;

    for (k = 0; k + 1 < e->elements; k += 2) {
        if (strcmp(e->element[k]->str, f) == 0)
            return e->element[k + 1];
    }
    TEST_FAIL("no field %s", f);
    return NULL;
}

static void expect_str(const redisReply *e, const char *f, const char *want)
{
    const redisReply *v = field(e, f);

    if (v->type != REDIS_REPLY_STRING || strcmp(v->str, want) != 0)
        TEST_FAIL("%s: want '%s', got '%s'", f, want, v->type == REDIS_REPLY_STRING ? v->str : "?");
}

static long long int_of(const redisReply *e, const char *f)
{
    const redisReply *v = field(e, f);

    ASSERT_EQ(v->type, REDIS_REPLY_INTEGER);
    return v->integer;
}

static long long client_id(redisContext *c)
{
    redisReply *r = pu_cmd(c, "CLIENT ID");
    long long id = r->integer;

    freeReplyObject(r);
    return id;
}

static void scenario_list(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e), *c = pu_client(e);
    long long ida = client_id(a), idb = client_id(b);
    char owner[PU_OWNER_MAX], uuid[64], tok[PU_OWNER_MAX + 80];
    const redisReply *en;
    redisReply *r;

    pu_conn_owner(a, owner, sizeof(owner));
    pu_proxy_uuid(a, uuid, sizeof(uuid));
    PU_OK(a, "CLIENT SETNAME %s", "holder");
    PU_OK(a, "LOCK %s", "orders:1");
    PU_OK(a, "LOCK %s", "orders:1");
    PU_OK(a, "WLOCK %s", "rw");
    PU_OK(a, "LOCK %s LEASE 60000 OWNER %s", "leased", "tok-1");
    pu_send(b, "LOCK %s WAIT 10000", "orders:1");
    PU_EVENTUALLY(pu_info_int(c, "blocked_clients") == 1, 5000);
    pu_sleep_ms(20);

    r = pu_cmd(c, "LOCK.LIST");
    ASSERT_EQ(r->elements, 4u);
    en = find_entry(r, "orders:1", "held");
    ASSERT_TRUE(en != NULL);
    expect_str(en, "kind", "lock");
    expect_str(en, "owner", owner);
    expect_str(en, "client_name", "holder");
    expect_str(en, "user", "default");
    ASSERT_EQ(int_of(en, "client_id"), ida);
    ASSERT_EQ(int_of(en, "hold_count"), 2);
    ASSERT_EQ(int_of(en, "watchdog"), 1);
    ASSERT_TRUE(int_of(en, "ttl_ms") > 0 && int_of(en, "ttl_ms") <= 30000);
    ASSERT_TRUE(int_of(en, "age_ms") >= 20);
    ASSERT_TRUE(strncmp(field(en, "addr")->str, "127.0.0.1:", 10) == 0);
    en = find_entry(r, "orders:1", "waiting");
    ASSERT_TRUE(en != NULL);
    expect_str(en, "kind", "LOCK");
    ASSERT_EQ(int_of(en, "client_id"), idb);
    ASSERT_EQ(int_of(en, "hold_count"), 0);
    ASSERT_EQ(int_of(en, "ttl_ms"), -1);
    ASSERT_TRUE(int_of(en, "age_ms") >= 20);
    en = find_entry(r, "rw", "held");
    ASSERT_TRUE(en != NULL);
    expect_str(en, "kind", "write lock");
    en = find_entry(r, "leased", "held");
    ASSERT_TRUE(en != NULL);
    snprintf(tok, sizeof(tok), "%s:tok-1", uuid);
    expect_str(en, "owner", tok);
    ASSERT_EQ(int_of(en, "watchdog"), 0);
    ASSERT_TRUE(int_of(en, "ttl_ms") > 50000 && int_of(en, "ttl_ms") <= 60000);
    freeReplyObject(r);

    /* Patterns. */
    r = pu_cmd(c, "LOCK.LIST %s", "orders:*");
    ASSERT_EQ(r->elements, 2u);
    freeReplyObject(r);
    r = pu_cmd(c, "LOCK.LIST %s", "r?");
    ASSERT_EQ(r->elements, 1u);
    freeReplyObject(r);
    r = pu_cmd(c, "LOCK.LIST %s", "nothing*");
    ASSERT_EQ(r->elements, 0u);
    freeReplyObject(r);
    PU_ERR(c, "ERR wrong number of arguments", "LOCK.LIST %s %s", "a", "b");

    /* The holder goes: its entries go with it, the waiter holds. */
    redisFree(a);
    r = pu_recv(b);
    PU_CHECK(r, PU_K_STATUS, 0, "OK");
    freeReplyObject(r);
    r = pu_cmd(c, "LOCK.LIST");
    ASSERT_EQ(r->elements, 1u);
    en = find_entry(r, "orders:1", "held");
    ASSERT_TRUE(en != NULL);
    ASSERT_EQ(int_of(en, "client_id"), idb);
    freeReplyObject(r);
    redisFree(b);
    redisFree(c);
}

TEST(locklist_holds_and_waits)
{
    pu_each_backend(scenario_list, NULL);
}

TEST(locklist_respects_acl_patterns)
{
    static const char *const extra[] = {"--user", "alice on >pa ~a:*", "--user",
                                        "ops on >po allkeys", NULL};
    struct pu_env e = {0};
    redisContext *alice, *ops;
    redisReply *r;

    ou_env_start(&e, "epoll", extra);
    alice = pu_client(&e);
    ops = pu_client(&e);
    PU_OK(alice, "AUTH %s %s", "alice", "pa");
    PU_OK(ops, "AUTH %s %s", "ops", "po");
    PU_OK(alice, "LOCK %s", "a:1");
    PU_OK(ops, "LOCK %s", "b:1");
    PU_OK(ops, "LOCK %s", "a:2");
    r = pu_cmd(alice, "LOCK.LIST");
    ASSERT_EQ(r->elements, 2u); /* a:1 and ops's a:2; never b:1 */
    ASSERT_TRUE(find_entry(r, "a:1", "held") && find_entry(r, "a:2", "held"));
    freeReplyObject(r);
    r = pu_cmd(alice, "LOCK.LIST %s", "b*");
    ASSERT_EQ(r->elements, 0u);
    freeReplyObject(r);
    r = pu_cmd(ops, "LOCK.LIST");
    ASSERT_EQ(r->elements, 3u);
    expect_str(find_entry(r, "a:1", "held"), "user", "alice");
    freeReplyObject(r);
    redisFree(alice);
    redisFree(ops);
    pu_env_stop(&e);
}

/* In RESP3 (HELLO 3) each entry is a map. */
static void scenario_resp3(struct pu_env *e)
{
    static const char want[] = "*1\r\n%12\r\n$4\r\nname\r\n$2\r\nm3\r\n";
    int fd = pu_raw_connect(e->proxy.port);
    char buf[4096];

    ASSERT_TRUE(pu_raw_send(fd, "HELLO 3\r\n", 9));
    pu_raw_read_until(fd, buf, sizeof(buf), 3000, "modules");
    pu_raw_read_until(fd, buf, sizeof(buf), 300, NULL);
    ASSERT_TRUE(pu_raw_send(fd, "LOCK m3\r\n", 9));
    pu_raw_read_line(fd, buf, sizeof(buf), 3000);
    ASSERT_TRUE(strcmp(buf, "+OK\r\n") == 0);
    ASSERT_TRUE(pu_raw_send(fd, "LOCK.LIST m3\r\n", 14));
    pu_raw_read_until(fd, buf, sizeof(buf), 3000, "watchdog\r\n:1\r\n");
    if (strncmp(buf, want, sizeof(want) - 1) != 0)
        TEST_FAIL("want an array of one map, got: %.80s", buf);
    close(fd);
}

TEST(locklist_resp3_maps)
{
    pu_each_backend(scenario_resp3, NULL);
}

TEST_MAIN(TEST_CASE(locklist_holds_and_waits), TEST_CASE(locklist_resp3_maps),
          TEST_CASE(locklist_respects_acl_patterns))
