/* Script batching (pool/batch.c): lock and unlock scripts that meet on an
 * upstream connection run several to one Redis script call, and every
 * client still gets its own reply as if each had run alone: order,
 * per-request errors, NOSCRIPT after SCRIPT FLUSH, exclusion, and
 * --script-batch 1 turning it off. Both io backends, a real Redis. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"

#define NAMES 200

/* One write of NAMES TRYLOCKs and NAMES UNLOCKs of distinct names: the
 * proxy reads them in one go, so its scripts meet on the connections. */
static void pipeline_pairs(redisContext *c, const char *prefix)
{
    int i;

    for (i = 0; i < NAMES; i++)
        redisAppendCommand(c, "TRYLOCK %s%d", prefix, i);
    for (i = 0; i < NAMES; i++)
        redisAppendCommand(c, "UNLOCK %s%d", prefix, i);
    for (i = 0; i < NAMES; i++)
        PU_RECV(c, PU_K_STATUS, 0, "OK");
    for (i = 0; i < NAMES; i++)
        PU_RECV(c, PU_K_INT, 1, NULL);
}

static void scenario_batches(struct pu_env *e)
{
    redisContext *c = pu_client(e), *other = pu_client(e), *rc = pu_redis_client(e);
    long long calls0 = pu_cmdstat_calls(rc, "evalsha");

    pipeline_pairs(c, "b");
    /* Fewer script calls than requests: they went in batches. */
    ASSERT_TRUE(pu_info_int(c, "upstream_script_batches") > 0);
    ASSERT_TRUE(pu_info_int(c, "upstream_batched_scripts") > 0);
    ASSERT_TRUE(pu_cmdstat_calls(rc, "evalsha") - calls0 < 2 * NAMES);
    ASSERT_EQ(pu_dbsize(rc), 0);

    /* Held by another owner, a string key, and free names, in one batch:
     * each gets its own answer, the error only where it belongs. */
    PU_OK(other, "LOCK %s", "held");
    PU_OK(rc, "SET %s %s", "str", "x");
    redisAppendCommand(c, "TRYLOCK %s", "f1");
    redisAppendCommand(c, "TRYLOCK %s", "held");
    redisAppendCommand(c, "TRYLOCK %s", "str");
    redisAppendCommand(c, "TRYLOCK %s", "f2");
    redisAppendCommand(c, "UNLOCK %s", "held");
    redisAppendCommand(c, "UNLOCK %s", "f1");
    redisAppendCommand(c, "UNLOCK %s", "f2");
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_RECV(c, PU_K_NIL, 0, NULL);
    PU_RECV(c, PU_K_ERR, 0, "WRONGTYPE");
    PU_RECV(c, PU_K_STATUS, 0, "OK");
    PU_RECV(c, PU_K_ERR, 0, "NOTOWNER");
    PU_RECV(c, PU_K_INT, 1, NULL);
    PU_RECV(c, PU_K_INT, 1, NULL);
    ASSERT_TRUE(pu_exists(rc, "held"));
    PU_INT(other, 1, "UNLOCK %s", "held");

    /* Scripts flushed under the proxy: a batch is re-sent once as EVAL. */
    PU_OK(rc, "SCRIPT FLUSH");
    pipeline_pairs(c, "f");
    ASSERT_TRUE(pu_info_int(c, "upstream_noscript_retries") > 0);
    pipeline_pairs(c, "g");
    ASSERT_EQ(pu_dbsize(rc), 1); /* "str" */
    redisFree(rc);
    redisFree(other);
    redisFree(c);
}

TEST(batched_scripts_answer_each_request)
{
    pu_each_backend(scenario_batches, NULL);
}

static void scenario_off(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    long long calls0 = pu_cmdstat_calls(rc, "evalsha");

    pipeline_pairs(c, "o");
    ASSERT_EQ(pu_info_int(c, "upstream_script_batches"), 0);
    ASSERT_EQ(pu_cmdstat_calls(rc, "evalsha") - calls0, 2 * NAMES);
    redisFree(rc);
    redisFree(c);
}

TEST(script_batch_1_sends_each_alone)
{
    static const char *const extra[] = {"--script-batch", "1", NULL};

    pu_each_backend(scenario_off, extra);
}

TEST_MAIN(TEST_CASE(batched_scripts_answer_each_request),
          TEST_CASE(script_batch_1_sends_each_alone))
