/* Owner fields and shared owners (issue 18, items 3 and 4), against a real
 * redis-server:
 * - the owner fields of connections and of OWNER tokens never collide,
 *   whatever the ACL user is called: a user named like a connection id
 *   ("395"), like another user's token, or with ':' in its name cannot
 *   reach another owner's hold (read, write or plain) through the
 *   ":write" suffix of read-write locks;
 * - a connection that shares an OWNER token and closes gives back only
 *   its own holds: the other connections of that owner keep theirs (count
 *   and renewal), for every kind that takes OWNER (LOCK, FENCED,
 *   FAIRLOCK, RLOCK, WLOCK); a hold one of them finds lost is LOCKLOST
 *   for the others too. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define WATCHDOG_MS 1000 /* --lock-watchdog-timeout: renewals every 333 ms */

/* ---- item 3: owner fields never collide ------------------------------------ */

static long long client_id(redisContext *c)
{
    redisReply *r = pu_cmd(c, "CLIENT ID");
    long long id;

    ASSERT_TRUE(r->type == REDIS_REPLY_INTEGER);
    id = r->integer;
    freeReplyObject(r);
    return id;
}

/* Rewrites the config with the victim users and `extra`, and reloads. */
static void write_users(struct pu_env *e, redisContext *c, const char *conf, const char *extra,
                        long long reloads)
{
    ou_write_file(conf,
                  "requirepass defpw\n"
                  "user victim on >vp ~*\n"
                  "user worker on >wp ~*\n"
                  "%s",
                  extra);
    if (reloads == 0)
        return;
    kill(e->proxy.pid, SIGHUP);
    PU_EVENTUALLY(pu_info_int(c, "config_reloads") == reloads, 5000);
}

/* `owner` (a field of victim's write lock on name) is untouched by
 * attacker's read and write unlocks with token tok, and by its plain
 * UNLOCK. */
static void expect_write_lock_kept(redisContext *rc, redisContext *attacker, const char *name,
                                   const char *tok, const char *wfield)
{
    char d[256];
    redisReply *r;

    ASSERT_EQ(pu_hget_int(rc, name, wfield), 1);
    r = pu_cmd(attacker, "RUNLOCK %s OWNER %s", name, tok);
    if (!pu_is_err(r, "NOTOWNER"))
        TEST_FAIL("RUNLOCK %s OWNER %s by another user: got %s, want -NOTOWNER", name, tok,
                  pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
    PU_ERR(attacker, "NOTOWNER", "WUNLOCK %s OWNER %s", name, tok);
    PU_NIL(attacker, "WLOCK %s OWNER %s WAIT 0", name, tok);
    PU_NIL(attacker, "RLOCK %s OWNER %s WAIT 0", name, tok);
    ASSERT_EQ(pu_hget_int(rc, name, wfield), 1);
    r = pu_cmd(rc, "HGET %s mode", name);
    ASSERT_TRUE(r->type == REDIS_REPLY_STRING && strcmp(r->str, "write") == 0);
    freeReplyObject(r);
}

TEST(owners_numeric_user_is_not_a_connection)
{
    char conf[PU_PATH_MAX], users[512], uuid[64], wfield[PU_OWNER_MAX];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *victim, *attacker, *rc;
    long long id;

    ou_path(conf, sizeof(conf), "owners-numeric.conf");
    write_users(&e, NULL, conf, "", 0);
    ou_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    victim = ou_client_auth(&e, "victim", "vp");
    id = client_id(victim);
    pu_proxy_uuid(victim, uuid, sizeof(uuid));

    /* A user named after the victim's connection id. */
    snprintf(users, sizeof(users), "user %lld on >np ~*\n", id);
    write_users(&e, victim, conf, users, 1);
    snprintf(users, sizeof(users), "%lld", id);
    attacker = ou_client_auth(&e, users, "np");

    PU_OK(victim, "WLOCK %s", "rwx");
    snprintf(wfield, sizeof(wfield), "%s:%lld:write", uuid, id);
    expect_write_lock_kept(rc, attacker, "rwx", "write", wfield);
    PU_ERR(attacker, "WRONGTYPE", "UNLOCK %s OWNER %s", "rwx", "write");
    PU_INT(victim, 1, "WUNLOCK %s", "rwx");
    ASSERT_TRUE(!pu_exists(rc, "rwx"));

    /* The attacker's own token locks work, and stay its own. */
    PU_OK(attacker, "WLOCK %s OWNER %s", "rwy", "write");
    PU_NIL(victim, "WLOCK %s WAIT 0", "rwy");
    PU_ERR(victim, "NOTOWNER", "WUNLOCK %s", "rwy");
    PU_INT(attacker, 1, "WUNLOCK %s OWNER %s", "rwy", "write");
    redisFree(attacker);
    redisFree(victim);
    redisFree(rc);
    pu_env_stop(&e);
}

TEST(owners_user_named_like_a_token)
{
    char conf[PU_PATH_MAX], uuid[64], wfield[PU_OWNER_MAX + 8];
    const char *extra[] = {"--config", conf, NULL};
    struct pu_env e = {0};
    redisContext *def, *tokuser, *colon, *worker, *rc;

    ou_path(conf, sizeof(conf), "owners-tokens.conf");
    write_users(&e, NULL, conf, "user tok on >tp ~*\nuser worker:job on >cp ~*\n", 0);
    ou_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    def = ou_client_auth(&e, NULL, "defpw");
    tokuser = ou_client_auth(&e, "tok", "tp");
    colon = ou_client_auth(&e, "worker:job", "cp");
    worker = ou_client_auth(&e, "worker", "wp");
    pu_proxy_uuid(def, uuid, sizeof(uuid));

    /* The user "default"'s token "tok" against the user "tok"'s token "write". */
    PU_OK(def, "WLOCK %s OWNER %s", "rw1", "tok");
    snprintf(wfield, sizeof(wfield), "%s:tok:write", uuid);
    expect_write_lock_kept(rc, tokuser, "rw1", "write", wfield);
    PU_INT(def, 1, "WUNLOCK %s OWNER %s", "rw1", "tok");
    ASSERT_TRUE(!pu_exists(rc, "rw1"));

    /* A user with ':' in its name ("worker:job", token "write") against
     * the user "worker"'s token "job". */
    PU_OK(worker, "WLOCK %s OWNER %s", "rw2", "job");
    {
        struct pu_lockinfo li;

        pu_lockinfo(worker, &li, "LOCK.INFO %s OWNER %s", "rw2", "job");
        snprintf(wfield, sizeof(wfield), "%s:write", li.owner);
    }
    expect_write_lock_kept(rc, colon, "rw2", "write", wfield);
    PU_INT(worker, 1, "WUNLOCK %s OWNER %s", "rw2", "job");

    /* Same token, plain locks: four owners. */
    PU_OK(def, "LOCK %s OWNER %s", "p", "write");
    PU_NIL(tokuser, "LOCK %s OWNER %s WAIT 0", "p", "write");
    PU_NIL(colon, "LOCK %s OWNER %s WAIT 0", "p", "write");
    PU_NIL(worker, "LOCK %s OWNER %s WAIT 0", "p", "write");
    PU_ERR(worker, "NOTOWNER", "UNLOCK %s OWNER %s", "p", "write");
    PU_INT(def, 1, "UNLOCK %s OWNER %s", "p", "write");
    redisFree(worker);
    redisFree(colon);
    redisFree(tokuser);
    redisFree(def);
    redisFree(rc);
    pu_env_stop(&e);
}

/* ---- item 4: a shared OWNER token ------------------------------------------- */

struct kind {
    const char *lock;   /* acquire command */
    const char *unlock; /* release command */
    const char *other;  /* what a third connection tries (excluded while held) */
    bool fenced;        /* the acquire answers a fencing token */
};

static const struct kind kinds[] = {
    {"LOCK", "UNLOCK", "LOCK", false},
    {"LOCK %s FENCED", "UNLOCK", "LOCK", true},
    {"FAIRLOCK", "FAIRUNLOCK", "FAIRLOCK", false},
    {"RLOCK", "RUNLOCK", "WLOCK", false},
    {"WLOCK", "WUNLOCK", "WLOCK", false},
};

static void acquire(redisContext *c, const struct kind *k, const char *name)
{
    char d[256];
    redisReply *r = k->fenced ? pu_cmd(c, "LOCK %s FENCED OWNER %s", name, "t")
                              : pu_cmd(c, "%s %s OWNER %s", k->lock, name, "t");

    if (k->fenced ? r->type != REDIS_REPLY_INTEGER
                  : r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
        TEST_FAIL("%s %s OWNER t: got %s", k->lock, name, pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
}

static void other_refused(redisContext *c3, const struct kind *k, const char *name)
{
    char d[256];
    redisReply *r = pu_cmd(c3, "%s %s WAIT 0", k->other, name);

    if (r->type != REDIS_REPLY_NIL)
        TEST_FAIL("%s: another owner's %s %s WAIT 0 got %s while a connection of the shared "
                  "owner still holds it",
                  k->lock, k->other, name, pu_describe(r, d, sizeof(d)));
    freeReplyObject(r);
}

/* c1 and c2 take name as OWNER t; `closing` (c1 or c2) closes; the other
 * keeps one hold, renewed past several leases. */
static void shared_case(struct pu_env *e, const struct kind *k, const char *name, bool first_closes)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e), *c3 = pu_client(e);
    redisContext *keeper = first_closes ? c2 : c1;

    fprintf(stderr, "-- %s, %s closes\n", k->lock, first_closes ? "the first taker" : "the second");
    acquire(c1, k, name);
    acquire(c2, k, name);
    if (first_closes)
        redisFree(c1);
    else
        redisFree(c2);
    pu_sleep_ms(200);
    other_refused(c3, k, name);
    pu_sleep_ms(5 * WATCHDOG_MS / 2); /* renewal goes on for the keeper */
    other_refused(c3, k, name);
    PU_INT(keeper, 1, "%s %s OWNER %s", k->unlock, name, "t");
    PU_ERR(keeper, "NOTOWNER", "%s %s OWNER %s", k->unlock, name, "t");
    redisFree(keeper);
    redisFree(c3);
}

TEST(owners_shared_token_disconnect)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1000", NULL};
    struct pu_env e = {0};
    redisContext *rc;
    char name[64];

    ou_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        snprintf(name, sizeof(name), "kA%zu", i);
        shared_case(&e, &kinds[i], name, true);
        PU_EVENTUALLY(!pu_exists(rc, name), 2000);
        snprintf(name, sizeof(name), "kB%zu", i);
        shared_case(&e, &kinds[i], name, false);
        PU_EVENTUALLY(!pu_exists(rc, name), 2000);
    }
    redisFree(rc);
    pu_env_stop(&e);
}

/* LOCK.LIST name: the hold_count of each entry, in *counts (up to n);
 * returns the number of entries. */
static size_t list_counts(redisContext *c, const char *name, long long *counts, size_t n)
{
    redisReply *r = pu_cmd(c, "LOCK.LIST %s", name);
    size_t i, k;

    ASSERT_TRUE(r->type == REDIS_REPLY_ARRAY);
    for (i = 0; i < r->elements && i < n; i++) {
        const redisReply *e = r->element[i];

        counts[i] = -1;
        for (k = 0; k + 1 < e->elements; k += 2) {
            if (strcmp(e->element[k]->str, "hold_count") == 0)
                counts[i] = e->element[k + 1]->integer;
        }
    }
    n = r->elements;
    freeReplyObject(r);
    return n;
}

/* Both connections of the owner close: everything goes back. */
TEST(owners_shared_token_all_close)
{
    static const char *const extra[] = {"--lock-watchdog-timeout", "1000", NULL};
    struct pu_env e = {0};
    redisContext *c1, *c2, *c3, *rc;
    char uuid[64], field[PU_OWNER_MAX];

    ou_env_start(&e, "epoll", extra);
    rc = pu_redis_client(&e);
    c1 = pu_client(&e);
    c2 = pu_client(&e);
    c3 = pu_client(&e);
    pu_proxy_uuid(c3, uuid, sizeof(uuid));
    snprintf(field, sizeof(field), "%s:t", uuid);
    PU_OK(c1, "LOCK %s OWNER %s", "kC", "t");
    PU_OK(c1, "LOCK %s OWNER %s", "kC", "t");
    PU_OK(c2, "LOCK %s OWNER %s", "kC", "t");
    {
        long long counts[4];

        /* One entry per connection, each with its own part. */
        ASSERT_EQ(list_counts(c3, "kC", counts, 4), 2);
        ASSERT_EQ(counts[0] + counts[1], 3);
        ASSERT_TRUE(counts[0] == 1 || counts[1] == 1);
        PU_INT(c2, 0, "UNLOCK %s OWNER %s", "kC", "t"); /* c2's own part first */
        ASSERT_EQ(list_counts(c3, "kC", counts, 4), 1);
        ASSERT_EQ(counts[0], 2);
        PU_OK(c2, "LOCK %s OWNER %s", "kC", "t");
    }
    redisFree(c1);
    PU_EVENTUALLY(pu_hget_int(rc, "kC", field) == 1, 2000); /* c1's two holds went back */
    PU_NIL(c3, "LOCK %s WAIT 0", "kC");
    redisFree(c2);
    PU_EVENTUALLY(!pu_exists(rc, "kC"), 2000);
    PU_OK(c3, "LOCK %s WAIT 0", "kC");
    redisFree(c3);
    redisFree(rc);
    pu_env_stop(&e);
}

/* A connection that sends UNLOCK and closes before its reply: its close
 * gives back its part, and the UNLOCK (counted in that part) takes
 * nothing from the others'. */
TEST(owners_shared_token_unlock_then_close)
{
    struct pu_env e = {0};
    redisContext *c1, *c2, *c3, *rc;
    long long counts[4];
    char uuid[64], field[PU_OWNER_MAX];

    ou_env_start(&e, "epoll", NULL);
    rc = pu_redis_client(&e);
    c1 = pu_client(&e);
    c2 = pu_client(&e);
    c3 = pu_client(&e);
    pu_proxy_uuid(c3, uuid, sizeof(uuid));
    snprintf(field, sizeof(field), "%s:t", uuid);
    PU_OK(c1, "LOCK %s OWNER %s", "kE", "t");
    PU_OK(c2, "LOCK %s OWNER %s", "kE", "t");
    PU_OK(c2, "LOCK %s OWNER %s", "kE", "t");
    pu_send(c1, "UNLOCK %s OWNER %s", "kE", "t");
    redisFree(c1); /* closes without reading the reply */
    PU_EVENTUALLY(list_counts(c3, "kE", counts, 4) == 1 && pu_hget_int(rc, "kE", field) == 2, 2000);
    pu_sleep_ms(200);
    ASSERT_EQ(list_counts(c3, "kE", counts, 4), 1);
    ASSERT_EQ(counts[0], 2); /* c2's two */
    ASSERT_EQ(pu_hget_int(rc, "kE", field), 2);
    PU_INT(c2, 0, "UNLOCK %s OWNER %s", "kE", "t");
    PU_INT(c2, 1, "UNLOCK %s OWNER %s", "kE", "t");
    redisFree(c3);
    redisFree(c2);
    redisFree(rc);
    pu_env_stop(&e);
}

/* A shared owner's hold found lost by one connection's UNLOCK is lost for
 * the others too: their UNLOCK answers LOCKLOST, not NOTOWNER. */
TEST(owners_shared_token_lost)
{
    struct pu_env e = {0};
    redisContext *c1, *c2, *c3, *rc;

    ou_env_start(&e, "epoll", NULL);
    rc = pu_redis_client(&e);
    c1 = pu_client(&e);
    c2 = pu_client(&e);
    c3 = pu_client(&e);
    PU_OK(c1, "LOCK %s LEASE %d OWNER %s", "kD", 60000, "t");
    PU_OK(c2, "LOCK %s LEASE %d OWNER %s", "kD", 60000, "t");
    freeReplyObject(pu_cmd(rc, "DEL %s", "kD")); /* the lease is gone, nobody told */
    PU_OK(c3, "LOCK %s WAIT 0", "kD");
    PU_ERR(c1, "LOCKLOST", "UNLOCK %s OWNER %s", "kD", "t");
    PU_ERR(c2, "LOCKLOST", "UNLOCK %s OWNER %s", "kD", "t");
    PU_INT(c3, 1, "UNLOCK %s", "kD");
    redisFree(c3);
    redisFree(c2);
    redisFree(c1);
    redisFree(rc);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(owners_numeric_user_is_not_a_connection),
          TEST_CASE(owners_user_named_like_a_token), TEST_CASE(owners_shared_token_disconnect),
          TEST_CASE(owners_shared_token_all_close), TEST_CASE(owners_shared_token_lost),
          TEST_CASE(owners_shared_token_unlock_then_close))
