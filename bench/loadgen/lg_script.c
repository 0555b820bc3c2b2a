/* The Redisson scripts of a run: their EVALSHA names, SCRIPT LOAD for the
 * direct targets, and the NOSCRIPT fallback.
 *
 * Every script is named by its SHA-1, computed here (lg_sha1.c), as Redis
 * names it. The direct targets SCRIPT LOAD each script once before the run
 * and check that Redis answers the same name. twemproxy refuses SCRIPT
 * (twemproxy#68), so the twemproxy target loads nothing: its clients send
 * EVALSHA, and a NOSCRIPT answer (the script is not in that Redis's cache
 * yet, or was flushed) makes the client send the same request once as EVAL
 * with the script's text, which runs it and caches it; later EVALSHAs
 * succeed. That is what a client behind twemproxy has to do, and it also
 * covers a SCRIPT FLUSH during a direct run. The fallbacks are counted.
 * With --cluster the scripts are loaded on every master. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/loadgen/lg_cluster.h"
#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_sha1.h"
#include "bench/loadgen/lg_stats.h"
#include "common/buf.h"

/* The fixed head of every EVALSHA request the bench formats, after the
 * array header: the command name and the 40-digit name's length. */
static const char evalsha_head[] = "$7\r\nEVALSHA\r\n$40\r\n";

/* SCRIPT LOAD s on ep and checks the name Redis gives it. */
static int load_on(struct lg_run *r, const struct lg_endpoint *ep, const struct lg_script *s)
{
    char *err = r->res->error;
    size_t cap = sizeof(r->res->error);
    char got[41];
    int rc = lg_redis_script_load(ep, s->lua, got, err, cap);

    if (rc < 0)
        return rc;
    if (strcmp(got, s->sha) != 0) {
        snprintf(err, cap, "SCRIPT LOAD named a script %s, the bench computed %s", got, s->sha);
        return -EPROTO;
    }
    return 0;
}

int lg_scripts_prepare(struct lg_run *r)
{
    bool load = r->target == LG_TGT_DIRECT || r->target == LG_TGT_DIRECT_SHARED ||
                r->target == LG_TGT_PASSTHROUGH;
    int rc = 0;

    for (unsigned i = 0; i < LG_NSCRIPTS && rc == 0; i++) {
        struct lg_script *s = &r->scripts[i];

        if (!s->lua)
            continue;
        lg_sha1_hex(s->lua, strlen(s->lua), s->sha);
        if (!load)
            continue;
        if (!r->cluster) {
            rc = load_on(r, r->target == LG_TGT_PASSTHROUGH ? r->cmd_ep : &r->o->redis, s);
            continue;
        }
        for (unsigned m = 0; m < r->cluster->nmasters && rc == 0; m++)
            rc = load_on(r, &r->cluster->masters[m], s);
    }
    return rc;
}

static const struct lg_script *script_of(const struct lg_run *r, const char *sha)
{
    for (unsigned i = 0; i < LG_NSCRIPTS; i++) {
        if (r->scripts[i].lua && memcmp(r->scripts[i].sha, sha, 40) == 0)
            return &r->scripts[i];
    }
    return NULL;
}

int lg_scripts_resend_eval(struct lg_client *c)
{
    const char *p = c->inflight, *end = p ? p + c->inflight_len : NULL;
    const size_t hlen = sizeof(evalsha_head) - 1;
    const struct lg_script *s;
    const char *crlf;
    struct buf b;
    int rc;

    if (!p || p[0] != '*')
        return -EINVAL;
    crlf = memchr(p, '\r', c->inflight_len);
    if (!crlf || (size_t)(end - crlf) < 2 + hlen + 40 + 2 ||
        memcmp(crlf + 2, evalsha_head, hlen) != 0)
        return -EINVAL;
    s = script_of(c->run, crlf + 2 + hlen);
    if (!s)
        return -EINVAL;
    buf_init(&b);
    rc = buf_appendf(&b, "%.*s\r\n$4\r\nEVAL\r\n$%zu\r\n%s\r\n", (int)(crlf - p), p, strlen(s->lua),
                     s->lua);
    if (rc == 0)
        rc = buf_append(&b, crlf + 2 + hlen + 42, (size_t)(end - (crlf + 2 + hlen + 42)));
    if (rc == 0 && sched_conn_write(&c->conn, b.data, b.len) < 0)
        rc = -EPIPE;
    buf_deinit(&b);
    if (rc == 0)
        c->run->cnt.noscripts++;
    return rc;
}
