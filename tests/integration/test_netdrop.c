/* Partitions made in the kernel (iptables DROP on loopback), where the
 * userspace relay of test_partition.c cannot reach: packets the proxy
 * sent into a partition sit in its socket's send queue, and the kernel
 * retransmits them until they get through. A request the proxy gave up on
 * (answered "outcome unknown", given back) must not run in Redis at the
 * heal and take the name afresh behind the give-back.
 *
 * Needs iptables and the right to change the rules (root); skipped
 * otherwise. The rules match only the proxy's own upstream connections
 * (their source ports), so a new connection, and every other test on the
 * machine, goes through; each rule is deleted at the end of its run. */
#include <sys/wait.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define MAX_PORTS 16

struct drop {
    int rport;            /* Redis's port */
    int ports[MAX_PORTS]; /* the proxy's connections' source ports */
    unsigned nports;      /* rules in place */
};

/* iptables -w <op> OUTPUT ... for one source port; the exit status. */
static int iptables_rule(const char *op, int sport, int dport)
{
    char cmd[256];
    int rc;

    snprintf(cmd, sizeof(cmd),
             "iptables -w %s OUTPUT -o lo -p tcp -s 127.0.0.1 --sport %d --dport %d -j DROP "
             ">/dev/null 2>&1",
             op, sport, dport);
    rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static void drop_heal(struct drop *d)
{
    while (d->nports > 0) {
        d->nports--;
        iptables_rule("-D", d->ports[d->nports], d->rport);
    }
}

/* Drops what the proxy's current upstream connections send to Redis (all
 * connections but rc's own, as CLIENT LIST names them). */
static void drop_proxy_conns(struct drop *d, redisContext *rc, int rport)
{
    redisReply *r = pu_cmd(rc, "CLIENT LIST");
    const char *line;

    ASSERT_TRUE(r->type == REDIS_REPLY_STRING);
    d->rport = rport;
    d->nports = 0;
    for (line = r->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *addr = strstr(line, " addr=127.0.0.1:");
        const char *end = strchr(line, '\n');
        int port;

        if (!addr || (end && addr > end) || d->nports == MAX_PORTS)
            continue;
        if (strstr(line, "cmd=client|list") && (!end || strstr(line, "cmd=client|list") < end))
            continue; /* this connection */
        port = atoi(addr + strlen(" addr=127.0.0.1:"));
        if (iptables_rule("-I", port, rport) != 0) {
            freeReplyObject(r);
            drop_heal(d);
            TEST_SKIP("iptables is missing or may not change rules here");
        }
        d->ports[d->nports++] = port;
    }
    freeReplyObject(r);
    ASSERT_TRUE(d->nports >= 2); /* the command connections, at least */
}

/* After the heal, for as long as the kernel's next retransmissions take:
 * the ms at which key's existence stopped being want, or -1 if it never
 * did. */
static int heal_changes_key(struct drop *d, redisContext *rc, const char *key, bool want)
{
    int waited;

    drop_heal(d);
    for (waited = 0; waited < 4000; waited += 50) {
        if (pu_exists(rc, key) != want)
            return waited;
        pu_sleep_ms(50);
    }
    return -1;
}

/* A LOCK caught in the partition is answered "outcome unknown" after
 * --upstream-timeout and given back; the proxy reconnects at once (a new
 * source port). At the heal the kernel would deliver the first LOCK,
 * retransmitted from the timed-out socket's send queue, and Redis would
 * grant the name to an owner nobody was told of, long after the give-back:
 * the name held for a whole watchdog lease. The timed-out connection is
 * closed with a reset instead, its unsent requests discarded. */
static void scenario_unsent_discarded(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e);
    struct drop d;
    redisReply *r;
    char desc[256];
    int waited;

    PU_OK(a, "LOCK %s", "nd:warm"); /* the pool is up */
    PU_INT(a, 1, "UNLOCK %s", "nd:warm");
    drop_proxy_conns(&d, rc, e->redis.port);
    r = pu_cmd(a, "LOCK %s", "nd:k");
    if (r->type == REDIS_REPLY_STATUS) { /* Redis answered: the rules drop nothing here */
        freeReplyObject(r);
        drop_heal(&d);
        TEST_SKIP("iptables DROP rules take no effect on loopback here");
    }
    if (!pu_is_err(r, "UPSTREAM")) {
        drop_heal(&d);
        TEST_FAIL("LOCK into the partition: expected -UPSTREAM, got %s",
                  pu_describe(r, desc, sizeof(desc)));
    }
    freeReplyObject(r);
    pu_sleep_ms(1000); /* the give-back ran on a new connection */
    waited = heal_changes_key(&d, rc, "nd:k", false);
    if (waited >= 0)
        TEST_FAIL("the LOCK given up on ran in Redis %d ms after the heal: the name is held "
                  "for an owner nobody was told of",
                  waited);
    PU_OK(b, "LOCK %s WAIT 1000", "nd:k");
    PU_INT(b, 1, "UNLOCK %s", "nd:k");
    redisFree(a);
    redisFree(b);
    redisFree(rc);
}

TEST(netdrop_unsent_requests_discarded)
{
    static const char *const extra[] = {"--upstream-timeout", "500", NULL};

    ou_each_backend_debug(scenario_unsent_discarded, "info", extra);
}

/* A's UNLOCK caught in the partition is carried out by the proxy (its
 * lease still vouched for: answered :1 at once, the release sent again on
 * a new connection); A then takes the name afresh. At the heal the kernel
 * would deliver the first UNLOCK from the timed-out socket's queue, and it
 * would release A's new hold: A told it holds the lock while Redis has
 * nothing and B can take it (an untold overlap). */
static void scenario_stale_unlock(struct pu_env *e)
{
    redisContext *rc = pu_redis_client(e), *a = pu_client(e), *b = pu_client(e);
    struct drop d;
    redisReply *r;
    char desc[256];
    int waited;

    PU_OK(a, "LOCK %s", "nd:u");
    drop_proxy_conns(&d, rc, e->redis.port);
    r = pu_cmd(a, "UNLOCK %s", "nd:u");
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        drop_heal(&d);
        TEST_FAIL("UNLOCK into the partition: expected :1 (carried out by the proxy), got %s",
                  pu_describe(r, desc, sizeof(desc)));
    }
    freeReplyObject(r);
    PU_EVENTUALLY(!pu_exists(rc, "nd:u"), 3000); /* released on a new connection */
    PU_OK(a, "LOCK %s WAIT 3000", "nd:u");
    waited = heal_changes_key(&d, rc, "nd:u", true);
    if (waited >= 0)
        TEST_FAIL("the UNLOCK carried out in the partition ran again %d ms after the heal "
                  "and released A's new hold",
                  waited);
    PU_NIL(b, "LOCK %s WAIT 0", "nd:u");
    PU_INT(a, 1, "UNLOCK %s", "nd:u");
    redisFree(a);
    redisFree(b);
    redisFree(rc);
}

TEST(netdrop_stale_unlock_never_releases_a_new_hold)
{
    static const char *const extra[] = {"--upstream-timeout", "500", NULL};

    ou_each_backend_debug(scenario_stale_unlock, "info", extra);
}

TEST_MAIN(TEST_CASE(netdrop_unsent_requests_discarded),
          TEST_CASE(netdrop_stale_unlock_never_releases_a_new_hold))
