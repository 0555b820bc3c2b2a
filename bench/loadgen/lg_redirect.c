/* --cluster: a direct client's request answered with a cluster redirect.
 *
 *   MOVED slot host:port  the slot has a new owner: update the slot map,
 *                         move the client's connection there, send the
 *                         request again;
 *   ASK slot host:port    the slot is migrating and this key is already on
 *                         the target: move there without touching the map
 *                         and send ASKING, then the request (the next
 *                         request then gets MOVED back until the migration
 *                         ends);
 *   TRYAGAIN              a multi-key request (the unlock: the lock and
 *                         its channel name) during a migration: send it
 *                         again after AGAIN_MS.
 *
 * A client has one connection, so moving it means: close the old one
 * (LG_MV_CLOSING, state LG_CS_MOVE), and once it is released reconnect the
 * same struct sched_conn to the new master (LG_MV_CONNECTING), greet it,
 * and re-send the request in flight (c->inflight) in the state it had
 * (c->resume). The request was refused by the old master, so it never ran
 * twice. The client keeps whatever it holds meanwhile, so the exclusion
 * check is unaffected. Its pub/sub connection stays where it was: after a
 * migration the shard unsubscribes it ("sunsubscribe", ignored), and its
 * waits end by their PTTL instead of a message, which is slower but
 * correct. The connection counts (lg_run.c) see one connection
 * throughout: its intermediate release is not reported. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_cluster.h"
#include "bench/loadgen/lg_run.h"
#include "common/compiler.h"

#define AGAIN_MS 10u

static bool starts_with(const redisReply *rep, const char *word)
{
    size_t n = strlen(word);

    return rep->len > n && memcmp(rep->str, word, n) == 0 && rep->str[n] == ' ';
}

/* "MOVED|ASK <slot> <host>:<port>": the slot and the master's index. */
static int parse_target(struct lg_run *r, const redisReply *rep, unsigned *slot, unsigned *idx)
{
    char host[256], port[8];
    const char *sp = strchr(rep->str, ' ');
    const char *addr = sp ? strchr(sp + 1, ' ') : NULL;
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    size_t hlen;

    if (!colon || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port))
        return -EPROTO;
    hlen = (size_t)(colon - (addr + 1));
    if (hlen >= sizeof(host))
        return -EPROTO;
    memcpy(host, addr + 1, hlen);
    host[hlen] = '\0';
    snprintf(port, sizeof(port), "%s", colon + 1);
    *slot = (unsigned)strtoul(sp + 1, NULL, 10);
    return lg_cluster_node(r, host, port, idx);
}

/* Closes c's connection; lg_redirect_released() reconnects it to idx. */
static void start_move(struct lg_client *c, unsigned idx, bool ask)
{
    c->master = idx;
    c->ask_next = ask;
    c->resume = c->state;
    c->state = LG_CS_MOVE;
    c->moving = LG_MV_CLOSING;
    sched_conn_close(&c->conn, false);
}

bool lg_redirect_reply(struct lg_client *c, const redisReply *rep)
{
    struct lg_run *r = c->run;
    bool moved = starts_with(rep, "MOVED"), ask = starts_with(rep, "ASK");
    unsigned slot, idx;

    if (c->state != LG_CS_ACQ && c->state != LG_CS_RETRY && c->state != LG_CS_REL)
        return false;
    if (strncmp(rep->str, "TRYAGAIN", 8) == 0) {
        r->res->redirects++;
        c->resume = c->state;
        c->state = LG_CS_AGAIN;
        sched_loop_timer_in(r->loop, &c->timer, AGAIN_MS);
        return true;
    }
    if ((!moved && !ask) || parse_target(r, rep, &slot, &idx) < 0 || idx == c->master)
        return false;
    r->res->redirects++;
    if (moved)
        lg_cluster_set_owner(r, slot, idx);
    start_move(c, idx, ask);
    return true;
}

void lg_redirect_again(struct lg_client *c)
{
    c->state = c->resume;
    lg_client_send(c, c->inflight, c->inflight_len);
}

bool lg_redirect_released(struct lg_client *c)
{
    struct lg_run *r = c->run;
    const struct lg_addr *a = &r->cluster->addrs[c->master];
    int rc;

    if (c->moving != LG_MV_CLOSING || c->state != LG_CS_MOVE || r->phase == LG_PH_CLOSE)
        return false;
    c->moving = LG_MV_CONNECTING;
    redisReaderFree(c->rd);
    c->rd = redisReaderCreate();
    rc = c->rd ? sched_conn_connect(r->loop, &c->conn, (const struct sockaddr *)&a->ss, a->len,
                                    &lg_client_ops)
               : -ENOMEM;
    if (rc == 0)
        return true;
    c->moving = LG_MV_NONE;
    lg_run_error(r, "redirect", strerror(-rc), strlen(strerror(-rc)));
    c->state = LG_CS_DEAD;
    if (c->sub_ref)
        lg_sub_leave(c);
    if (c->depth > 0)
        lg_run_released(c, c->key);
    c->depth = 0;
    lg_run_client_idle(c);
    return false;
}

void lg_redirect_connect_failed(struct lg_client *c, int err)
{
    char why[96];

    c->moving = LG_MV_NONE;
    snprintf(why, sizeof(why), "redirect: connect to %.60s: %s",
             c->run->cluster->masters[c->master].name, strerror(-err));
    c->state = LG_CS_ACQ; /* not GREET: the connect window is not involved */
    lg_client_die(c, why);
}

void lg_redirect_greeted(struct lg_client *c, const char *err)
{
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
    char why[200];

    c->moving = LG_MV_NONE;
    if (err) {
        snprintf(why, sizeof(why), "redirect: greeting %.60s: %.80s",
                 c->run->cluster->masters[c->master].name, err);
        lg_client_die(c, why);
        return;
    }
    c->state = c->resume;
    if (c->ask_next) {
        c->ask_next = false;
        c->asking = true;
        if (sched_conn_write(&c->conn, asking, sizeof(asking) - 1) < 0)
            lg_run_error(c->run, "write failed", NULL, 0);
    }
    lg_client_send(c, c->inflight, c->inflight_len);
}
