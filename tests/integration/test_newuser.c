/* What a new user hit trying lockproxy (issue 12, "Found when tried as a
 * new user"): LOCK.INFO on one's own write lock, raw script errors on a
 * name of another type, error texts that named commands that do not
 * exist or said too little, and start-up flag errors. */
#include <sys/wait.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"

#define RUN_MS 5000

static long long info_field(redisContext *c, const char *name, const char *field)
{
    redisReply *r = pu_cmd(c, "LOCK.INFO %s", name);
    long long v = -100;
    size_t i;

    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    for (i = 0; i + 1 < r->elements; i += 2) {
        if (strcmp(r->element[i]->str, field) == 0)
            v = r->element[i + 1]->integer;
    }
    freeReplyObject(r);
    return v;
}

static void scenario_lockinfo_kinds(struct pu_env *e)
{
    redisContext *c = pu_client(e);

    PU_OK(c, "WLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "locked"), 1);
    ASSERT_EQ(info_field(c, "w", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "w", "watchdog"), 1);
    PU_OK(c, "WLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "hold_count"), 2);
    PU_INT(c, 0, "WUNLOCK %s", "w");
    PU_INT(c, 1, "WUNLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "hold_count"), 0);
    ASSERT_EQ(info_field(c, "w", "watchdog"), 0);
    PU_OK(c, "RLOCK %s", "r");
    ASSERT_EQ(info_field(c, "r", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "r", "watchdog"), 1);
    PU_OK(c, "WLOCK %s LEASE 60000", "wl");
    ASSERT_EQ(info_field(c, "wl", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "wl", "watchdog"), 0);
    redisFree(c);
}

TEST(lockinfo_counts_write_holds)
{
    pu_each_backend(scenario_lockinfo_kinds, NULL);
}

/* A clean WRONGTYPE naming what the command works on, never a script's
 * sha and line. */
static void expect_clean_wrongtype(redisContext *c, const char *object, const char *fmt,
                                   const char *name)
{
    redisReply *r = pu_cmd(c, fmt, name);
    char want[128];

    snprintf(want, sizeof(want), "WRONGTYPE the name '%s' holds another kind of value, not a %s",
             name, object);
    if (r->type != REDIS_REPLY_ERROR || strcmp(r->str, want) != 0 || strstr(r->str, "script"))
        TEST_FAIL("%s on %s: got %s, want -%s", fmt, name,
                  r->type == REDIS_REPLY_ERROR ? r->str : "?", want);
    freeReplyObject(r);
}

static void scenario_script_errors(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;

    freeReplyObject(pu_cmd(rc, "SET %s %s", "str", "hello"));
    freeReplyObject(pu_cmd(rc, "RPUSH %s %s", "list", "x"));
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s 3", "sem");
    expect_clean_wrongtype(c, "lock", "LOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "TRYLOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "UNLOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "LOCK.INFO %s", "sem");
    expect_clean_wrongtype(c, "lock", "LOCK.INFO %s", "list");
    expect_clean_wrongtype(c, "read-write lock", "RLOCK %s", "str");
    expect_clean_wrongtype(c, "read-write lock", "WLOCK %s", "sem");
    expect_clean_wrongtype(c, "fair lock", "FAIRLOCK %s", "str");
    /* Errors the scripts word themselves stay as they are. */
    PU_ERR(c, "WRONGTYPE the name holds a string, not a lock", "FORCEUNLOCK %s", "str");
    PU_ERR(c, "WRONGTYPE the name holds a list", "SEM.ACQUIRE %s", "list");
    /* Nothing was changed, and the connection still works. */
    r = pu_cmd(rc, "GET %s", "str");
    PU_CHECK(r, PU_K_STR, 0, "hello");
    freeReplyObject(r);
    PU_OK(c, "LOCK %s", "fine");
    redisFree(rc);
    redisFree(c);
}

TEST(script_errors_mapped)
{
    pu_each_backend(scenario_script_errors, NULL);
}

static void scenario_error_texts(struct pu_env *e)
{
    redisContext *c = pu_client(e);

    PU_ERR(c, "NOTINIT semaphore 'nos' has no permits set (use SEM.TRYSETPERMITS first)",
           "SEM.ACQUIRE %s", "nos");
    PU_ERR(c, "NOTINIT semaphore 'nos' has no permits set (use PSEM.TRYSETPERMITS first)",
           "PSEM.ACQUIRE %s", "nos");
    PU_ERR(c, "ERR TRYLOCK takes no WAIT: it never waits (use LOCK name WAIT ms)",
           "TRYLOCK %s WAIT 10", "g");
    PU_ERR(c, "ERR SEM.TRYACQUIRE takes no WAIT: it never waits (use SEM.ACQUIRE name WAIT ms)",
           "SEM.TRYACQUIRE %s WAIT 10", "g");
    PU_ERR(c, "ERR UNLOCK takes no LEASE option", "UNLOCK %s LEASE 10", "g");
    PU_ERR(c, "ERR RLOCK takes no FENCED option", "RLOCK %s FENCED", "g");
    PU_ERR(c, "ERR syntax error near 'SOON'", "LOCK %s SOON 5", "g");
    redisFree(c);
}

TEST(error_texts_name_real_commands)
{
    pu_each_backend(scenario_error_texts, NULL);
}

static void expect_flag_error(const char *flag, const char *value, const char *want)
{
    const char *argv[] = {pu_proxy_bin(), flag, value, NULL};
    char out[4096];
    int st = pu_run_capture(argv, out, sizeof(out), RUN_MS);

    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(out, want))
        TEST_FAIL("%s %s: want exit 2 and '%s', got status 0x%x: %s", flag, value ? value : "",
                  want, st, out);
}

TEST(flag_errors_say_what_is_wrong)
{
    expect_flag_error("--bogus", NULL, "unknown option '--bogus'");
    expect_flag_error("--bogus", "1", "unknown option '--bogus'");
    expect_flag_error("--listen", NULL, "option '--listen' needs a value");
    expect_flag_error("stray", NULL, "unexpected argument 'stray'");
    expect_flag_error("--upstream", "rediss://", "no HOST:PORT (expected rediss://");
    expect_flag_error("--upstream", "rediss://redis.internal",
                      "no :PORT after the host (expected rediss://[user:password@]HOST:PORT[/db])");
    expect_flag_error("--upstream", "rediss://h:99999",
                      "the port must be a number from 1 to 65535");
    expect_flag_error("--upstream", "redis-sentinel://h:1", "no /NAME");
    expect_flag_error("--upstream", "http://h:1", "unknown scheme");
    expect_flag_error("--listen", "redis://h:1", "redis:// is not for --listen");
}

TEST_MAIN(TEST_CASE(lockinfo_counts_write_holds), TEST_CASE(script_errors_mapped),
          TEST_CASE(error_texts_name_real_commands), TEST_CASE(flag_errors_say_what_is_wrong))
