/* Introspection operators and clients use: CLIENT SETINFO / INFO / LIST /
 * KILL in Redis's formats (with auth, a user sees only its own
 * connections unless it may access every name), and the INFO fields that
 * redis-cli --stat reads. */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

/* The value of field in a CLIENT INFO / LIST line (copied into out). */
static bool line_field(const char *line, const char *field, char *out, size_t n)
{
    char key[64];
    const char *p;
    size_t len;

    snprintf(key, sizeof(key), " %s=", field);
    p = strncmp(line, key + 1, strlen(key) - 1) == 0 ? line - 1 : strstr(line, key);
    if (!p)
        return false;
    p += strlen(key);
    len = strcspn(p, " \n");
    snprintf(out, n, "%.*s", (int)len, p);
    return true;
}

static void expect_field(const char *line, const char *field, const char *want)
{
    char v[256];

    if (!line_field(line, field, v, sizeof(v)) || strcmp(v, want) != 0)
        TEST_FAIL("%s: want '%s' in line: %s", field, want, line);
}

static char *client_info(redisContext *c)
{
    redisReply *r = pu_cmd(c, "CLIENT INFO");
    char *s;

    ASSERT_EQ(r->type, REDIS_REPLY_STRING);
    s = strdup(r->str);
    freeReplyObject(r);
    return s;
}

static long long client_id(redisContext *c)
{
    redisReply *r = pu_cmd(c, "CLIENT ID");
    long long id = r->integer;

    freeReplyObject(r);
    return id;
}

/* The CLIENT LIST line of id (copied), or NULL. */
static char *list_line(redisContext *c, long long id)
{
    redisReply *r = pu_cmd(c, "CLIENT LIST");
    char key[48], *found = NULL;
    const char *p;

    ASSERT_EQ(r->type, REDIS_REPLY_STRING);
    snprintf(key, sizeof(key), "id=%lld ", id);
    for (p = r->str; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, strlen(key)) == 0) {
            found = strndup(p, strcspn(p, "\n"));
            break;
        }
    }
    freeReplyObject(r);
    return found;
}

static void scenario_client_info(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e);
    long long ida = client_id(a), idb = client_id(b);
    char port[16], *line;

    PU_OK(a, "CLIENT SETINFO LIB-NAME %s", "redis-py");
    PU_OK(a, "CLIENT SETINFO LIB-VER %s", "5.0.1");
    PU_OK(a, "CLIENT SETNAME %s", "orders-1");
    PU_ERR(a, "ERR lib-name cannot contain spaces", "CLIENT SETINFO LIB-NAME %s", "a b");
    PU_ERR(a, "ERR Client names cannot contain spaces", "CLIENT SETNAME %s", "a b");
    PU_ERR(a, "ERR Unrecognized option", "CLIENT SETINFO %s %s", "FOO", "x");
    line = client_info(a);
    snprintf(port, sizeof(port), "%lld", ida);
    expect_field(line, "id", port);
    expect_field(line, "name", "orders-1");
    expect_field(line, "lib-name", "redis-py");
    expect_field(line, "lib-ver", "5.0.1");
    expect_field(line, "db", "0");
    expect_field(line, "user", "default");
    expect_field(line, "cmd", "client");
    snprintf(port, sizeof(port), "127.0.0.1:%d", e->proxy.port);
    expect_field(line, "laddr", port);
    ASSERT_TRUE(strstr(line, " addr=127.0.0.1:") != NULL);
    free(line);

    /* b holds a lock, a waits for it: LIST shows both, and what they do. */
    PU_OK(b, "LOCK %s", "l");
    pu_send(a, "LOCK %s WAIT 10000", "l");
    PU_EVENTUALLY((line = list_line(b, ida)) && strstr(line, "flags=b") ? (free(line), 1)
                                                                        : (free(line), 0),
                  5000);
    line = list_line(b, idb);
    ASSERT_TRUE(line != NULL);
    expect_field(line, "cmd", "client");
    expect_field(line, "holds", "1");
    free(line);
    line = list_line(b, ida);
    expect_field(line, "cmd", "lock");
    expect_field(line, "waits", "1");
    free(line);
    ASSERT_EQ(pu_info_int(b, "blocked_clients"), 1);
    ASSERT_EQ(pu_info_int(b, "connected_clients"), 2);
    PU_INT(b, 1, "UNLOCK %s", "l");
    {
        redisReply *r = pu_recv(a);

        PU_CHECK(r, PU_K_STATUS, 0, "OK");
        freeReplyObject(r);
    }
    ASSERT_EQ(pu_info_int(b, "blocked_clients"), 0);
    ASSERT_TRUE(pu_info_int(b, "used_memory") > 0);
    /* In MULTI: flags=x, multi= the commands queued. */
    PU_OK(a, "MULTI");
    PU_STR(a, "QUEUED", "PING");
    line = list_line(b, ida);
    expect_field(line, "flags", "x");
    expect_field(line, "multi", "1");
    free(line);
    PU_OK(a, "DISCARD");
    line = list_line(b, ida);
    expect_field(line, "flags", "N");
    expect_field(line, "multi", "-1");
    free(line);
    /* LIST TYPE: every connection is a normal one. */
    PU_STR(b, "", "CLIENT LIST TYPE %s", "pubsub");
    PU_ERR(b, "ERR Unknown client type", "CLIENT LIST TYPE %s", "bogus");
    PU_ERR(b, "ERR Invalid client ID", "CLIENT LIST ID %s", "x");
    /* LIST ID filters. */
    {
        redisReply *r = pu_cmd(b, "CLIENT LIST ID %lld", idb);

        ASSERT_TRUE(r->type == REDIS_REPLY_STRING && strchr(r->str, '\n') == r->str + r->len - 1);
        freeReplyObject(r);
    }
    redisFree(a);
    redisFree(b);
}

TEST(client_setinfo_info_list)
{
    pu_each_backend(scenario_client_info, NULL);
}

static void scenario_client_kill(struct pu_env *e)
{
    redisContext *a = pu_client(e), *b = pu_client(e), *c = pu_client(e);
    long long ida = client_id(a);
    char *line, addr[128];
    bool closed = false;
    redisReply *r;

    PU_OK(a, "LOCK %s", "k");
    PU_INT(b, 1, "CLIENT KILL ID %lld", ida);
    /* a is gone, and its lock with it. */
    r = pu_poll_reply(a, 100, &closed);
    if (r)
        freeReplyObject(r);
    PU_EVENTUALLY(!(line = list_line(b, ida)) || (free(line), 0), 5000);
    PU_OK(b, "TRYLOCK %s", "k");
    PU_INT(b, 0, "CLIENT KILL ID %lld", ida);
    /* The old form, by address. */
    line = client_info(c);
    ASSERT_TRUE(line_field(line, "addr", addr, sizeof(addr)));
    free(line);
    PU_OK(b, "CLIENT KILL %s", addr);
    PU_ERR(b, "ERR No such client", "CLIENT KILL %s", addr);
    /* SKIPME yes by default: the caller survives a filter that matches it. */
    PU_INT(b, 0, "CLIENT KILL USER %s", "nobody");
    PU_INT(b, 0, "CLIENT KILL USER %s", "default");
    PU_STR(b, "PONG", "PING");
    PU_ERR(b, "ERR syntax error", "CLIENT KILL ID %d BOGUS", 1);
    redisFree(a);
    redisFree(b);
    redisFree(c);
}

TEST(client_kill_releases)
{
    pu_each_backend(scenario_client_kill, NULL);
}

static redisContext *login(struct pu_env *e, const char *user, const char *pass)
{
    redisContext *c = pu_client(e);

    PU_OK(c, "AUTH %s %s", user, pass);
    return c;
}

static void scenario_client_auth(struct pu_env *e)
{
    redisContext *alice = login(e, "alice", "pa"), *bob = login(e, "bob", "pb");
    redisContext *ops = login(e, "ops", "po");
    long long ida = client_id(alice), idb = client_id(bob);
    char *line;

    /* alice sees herself only; ops sees everyone. */
    ASSERT_TRUE((line = list_line(alice, ida)) != NULL);
    free(line);
    ASSERT_TRUE(list_line(alice, idb) == NULL);
    ASSERT_TRUE((line = list_line(ops, idb)) != NULL);
    expect_field(line, "user", "bob");
    free(line);
    PU_INT(alice, 0, "CLIENT KILL ID %lld", idb);
    PU_STR(bob, "PONG", "PING");
    PU_INT(ops, 1, "CLIENT KILL ID %lld", idb);
    redisFree(alice);
    redisFree(bob);
    redisFree(ops);
}

TEST(client_list_respects_users)
{
    static const char *const extra[] = {"--user", "alice on >pa ~a:*",  "--user", "bob on >pb ~b:*",
                                        "--user", "ops on >po allkeys", NULL};

    struct pu_env e = {0};

    ou_env_start(&e, "epoll", extra);
    scenario_client_auth(&e);
    pu_env_stop(&e);
}

/* redis-cli --stat reads INFO: keys, used_memory, connected_clients,
 * blocked_clients, total_commands_processed, total_connections_received.
 * It used to print --9223372036854775808B for the memory. */
static void scenario_cli_stat(struct pu_env *e)
{
    char port[16], out[4096];
    const char *argv[] = {
        "/usr/bin/stdbuf", "-o0", "/usr/bin/redis-cli", "-p", port, "--stat", "-i", "0.2", NULL};
    const char *row;

    if (access(argv[0], X_OK) != 0 || access(argv[2], X_OK) != 0)
        TEST_SKIP("stdbuf or redis-cli missing");
    snprintf(port, sizeof(port), "%d", e->proxy.port);
    pu_run_capture(argv, out, sizeof(out), 1500);
    if (strstr(out, "-9223372036854775808") || !strstr(out, "keys       mem"))
        TEST_FAIL("redis-cli --stat: %s", out);
    /* The first data row: keys, memory (with a unit), clients, blocked. */
    row = strstr(out, "\n0 ");
    if (!row)
        TEST_FAIL("no data row: %s", out);
    {
        char mem[32];
        int clients = -1, blocked = -1;

        if (sscanf(row + 1, "0 %31s %d %d", mem, &clients, &blocked) != 3 || clients < 1 ||
            blocked != 0 || !strchr("BKMG", mem[strlen(mem) - 1]) || mem[0] == '-')
            TEST_FAIL("bad data row: %s", row + 1);
    }
}

TEST(info_feeds_redis_cli_stat)
{
    pu_each_backend(scenario_cli_stat, NULL);
}

TEST_MAIN(TEST_CASE(client_setinfo_info_list), TEST_CASE(client_kill_releases),
          TEST_CASE(client_list_respects_users), TEST_CASE(info_feeds_redis_cli_stat))
