/* Unit tests for client authentication: glob patterns on lock names, user
 * rule parsing, password checks and the requirepass "default" user. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "proxy/auth.h"

static bool glob(const char *pat, const char *s)
{
    return px_glob_match(pat, strlen(pat), s, strlen(s));
}

static bool access_ok(const struct px_user *u, const char *name)
{
    return px_user_may_access(u, name, strlen(name));
}

static const struct px_user *check(const struct px_auth *a, const char *user, const char *pass)
{
    return px_auth_check(a, user, strlen(user), pass, strlen(pass));
}

/* Adds a user from a NULL-terminated rule list; returns the result. */
static int add_user(struct px_auth *a, const char *const *argv)
{
    char why[256];
    int argc = 0;

    while (argv[argc])
        argc++;
    return px_auth_set_user(a, argc, argv, why, sizeof(why));
}

TEST(glob_literals_and_wildcards)
{
    ASSERT_TRUE(glob("*", ""));
    ASSERT_TRUE(glob("*", "anything"));
    ASSERT_TRUE(glob("orders", "orders"));
    ASSERT_TRUE(!glob("orders", "order"));
    ASSERT_TRUE(!glob("orders", "orders1"));
    ASSERT_TRUE(glob("orders:*", "orders:"));
    ASSERT_TRUE(glob("orders:*", "orders:42"));
    ASSERT_TRUE(!glob("orders:*", "order:42"));
    ASSERT_TRUE(glob("*:lock", "a:b:lock"));
    ASSERT_TRUE(glob("a*b*c", "aXXbYYc"));
    ASSERT_TRUE(glob("a*b*c", "abc"));
    ASSERT_TRUE(!glob("a*b*c", "acb"));
    ASSERT_TRUE(glob("a**", "a"));
    ASSERT_TRUE(glob("h?llo", "hello"));
    ASSERT_TRUE(!glob("h?llo", "hllo"));
    ASSERT_TRUE(!glob("", "x"));
    ASSERT_TRUE(glob("", ""));
}

TEST(glob_classes_and_escapes)
{
    ASSERT_TRUE(glob("inv[0-9]", "inv7"));
    ASSERT_TRUE(!glob("inv[0-9]", "invx"));
    ASSERT_TRUE(glob("inv[9-0]", "inv3")); /* reversed range, as Redis */
    ASSERT_TRUE(glob("h[ae]llo", "hallo"));
    ASSERT_TRUE(!glob("h[ae]llo", "hillo"));
    ASSERT_TRUE(glob("h[^e]llo", "hallo"));
    ASSERT_TRUE(!glob("h[^e]llo", "hello"));
    ASSERT_TRUE(glob("a\\*b", "a*b"));
    ASSERT_TRUE(!glob("a\\*b", "axb"));
    ASSERT_TRUE(glob("a[\\]]b", "a]b"));
    ASSERT_TRUE(glob("*[0-9]", "lock-12"));
    ASSERT_TRUE(!glob("*[0-9]", "lock-1x"));
    /* Pathological backtracking stays linear-ish and correct. */
    ASSERT_TRUE(!glob("a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

TEST(user_rules)
{
    const char *alice[] = {"alice", "on", ">pw1", ">pw2", "~orders:*", "~inv[0-9]", NULL};
    const char *bob[] = {"bob", ">pw", "~*", NULL}; /* not "on": off, as in Redis */
    const char *carol[] = {"carol", "on", "nopass", "allkeys", NULL};
    const char *dave[] = {"dave", "on", ">x", "~a*", "reset", "on", ">y", "+@all", "&*", NULL};
    struct px_auth *a = px_auth_create();
    const struct px_user *u;

    ASSERT_NOTNULL(a);
    ASSERT_TRUE(!px_auth_required(a));
    ASSERT_OK(add_user(a, alice));
    ASSERT_OK(add_user(a, bob));
    ASSERT_OK(add_user(a, carol));
    ASSERT_OK(add_user(a, dave));
    ASSERT_TRUE(px_auth_required(a));
    u = check(a, "alice", "pw2");
    ASSERT_NOTNULL(u);
    ASSERT_STREQ(u->name, "alice");
    ASSERT_TRUE(check(a, "alice", "pw1") == u);
    ASSERT_NULL(check(a, "alice", "pw"));
    ASSERT_NULL(check(a, "alice", "pw22"));
    ASSERT_TRUE(access_ok(u, "orders:1"));
    ASSERT_TRUE(access_ok(u, "inv3"));
    ASSERT_TRUE(!access_ok(u, "invoices"));
    ASSERT_NULL(check(a, "bob", "pw"));
    ASSERT_NOTNULL(px_auth_find(a, "bob", 3));
    u = check(a, "carol", "whatever");
    ASSERT_NOTNULL(u);
    ASSERT_TRUE(access_ok(u, "anything"));
    u = check(a, "dave", "y");
    ASSERT_NOTNULL(u);
    ASSERT_NULL(check(a, "dave", "x"));
    ASSERT_TRUE(!access_ok(u, "abc")); /* reset dropped the pattern */
    ASSERT_NULL(check(a, "nobody", "x"));
    px_auth_put(a);
}

TEST(user_rules_rejected)
{
    const char *bad_rule[] = {"eve", "on", "+get", NULL};
    const char *no_name[] = {"", "on", NULL};
    const char *space_name[] = {"e ve", "on", NULL};
    const char *bare_gt[] = {"eve", ">", NULL};
    struct px_auth *a = px_auth_create();
    char why[256];

    ASSERT_EQ(add_user(a, bad_rule), -EINVAL);
    ASSERT_EQ(px_auth_set_user(a, 3, bad_rule, why, sizeof(why)), -EINVAL);
    ASSERT_TRUE(strstr(why, "'+get'") != NULL);
    ASSERT_EQ(add_user(a, no_name), -EINVAL);
    ASSERT_EQ(add_user(a, space_name), -EINVAL);
    ASSERT_EQ(add_user(a, bare_gt), -EINVAL);
    ASSERT_EQ(px_auth_set_user(a, 0, bad_rule, why, sizeof(why)), -EINVAL);
    ASSERT_TRUE(!px_auth_required(a));
    px_auth_put(a);
}

TEST(user_redefinition_replaces)
{
    const char *v1[] = {"app", "on", ">old", "~a*", NULL};
    const char *v2[] = {"app", "on", ">new", "~b*", NULL};
    struct px_auth *a = px_auth_create();

    ASSERT_OK(add_user(a, v1));
    ASSERT_OK(add_user(a, v2));
    ASSERT_NULL(check(a, "app", "old"));
    ASSERT_NOTNULL(check(a, "app", "new"));
    ASSERT_TRUE(access_ok(check(a, "app", "new"), "b1"));
    ASSERT_TRUE(!access_ok(check(a, "app", "new"), "a1"));
    px_auth_put(a);
}

TEST(requirepass_default_user)
{
    const char *def[] = {"default", "on", ">other", "~only:*", NULL};
    struct px_auth *a = px_auth_create();
    const struct px_user *u;

    ASSERT_OK(px_auth_set_requirepass(a, "s3cret"));
    ASSERT_TRUE(px_auth_required(a));
    u = check(a, PX_AUTH_DEFAULT_USER, "s3cret");
    ASSERT_NOTNULL(u);
    ASSERT_TRUE(access_ok(u, "any"));
    ASSERT_NULL(check(a, PX_AUTH_DEFAULT_USER, "s3cre"));
    /* An explicit default user wins over requirepass. */
    ASSERT_OK(add_user(a, def));
    ASSERT_NULL(check(a, PX_AUTH_DEFAULT_USER, "s3cret"));
    u = check(a, PX_AUTH_DEFAULT_USER, "other");
    ASSERT_NOTNULL(u);
    ASSERT_TRUE(!access_ok(u, "any"));
    ASSERT_OK(px_auth_set_requirepass(a, ""));
    ASSERT_TRUE(px_auth_required(a)); /* users remain */
    px_auth_put(a);
    a = px_auth_create();
    ASSERT_OK(px_auth_set_requirepass(a, "x"));
    ASSERT_OK(px_auth_set_requirepass(a, ""));
    ASSERT_TRUE(!px_auth_required(a));
    ASSERT_NULL(px_auth_find(a, "default", 7));
    ASSERT_TRUE(!px_auth_required(NULL));
    px_auth_put(a);
    px_auth_put(NULL);
}

TEST(auth_refcount)
{
    struct px_auth *a = px_auth_create();

    ASSERT_TRUE(px_auth_get(a) == a);
    ASSERT_OK(px_auth_set_requirepass(a, "p"));
    px_auth_put(a);
    ASSERT_NOTNULL(check(a, "default", "p")); /* still alive: one reference left */
    px_auth_put(a);
}

TEST_MAIN(TEST_CASE(glob_literals_and_wildcards), TEST_CASE(glob_classes_and_escapes),
          TEST_CASE(user_rules), TEST_CASE(user_rules_rejected),
          TEST_CASE(user_redefinition_replaces), TEST_CASE(requirepass_default_user),
          TEST_CASE(auth_refcount))
