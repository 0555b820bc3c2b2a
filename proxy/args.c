/* Argument checks and error replies shared by the command modules; see
 * args.h. Nothing here keeps state: every function writes at most one
 * reply into the request's output buffer. */
#include "proxy/args.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/compiler.h"
#include "common/util.h"
#include "engine/scripts.h"
#include "pool/pool.h"
#include "pool/reply.h"
#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/cmds/lock.h"
#include "proxy/reply.h"
#include "proxy/request.h"
#include "proxy/server.h"

bool px_args_is(const struct px_arg *a, const char *lit)
{
    return util_eq_nocase(a->p, a->len, lit);
}

int px_args_check_name(struct px_req *req, const char *what)
{
    if (req->argv[1].len > 0 && req->argv[1].len <= PX_NAME_MAX)
        return 0;
    px_reply_error(px_req_out(req), "ERR %s must be 1-%u bytes", what, PX_NAME_MAX);
    return -EINVAL;
}

void px_args_reply_bad(struct px_req *req, const char *what, const char *must,
                       const struct px_arg *a)
{
    px_reply_error(px_req_out(req), "ERR %s must be %s, got '%.*s'", what, must,
                   (int)LP_MIN(a->len, 32u), a->p);
}

int px_args_parse_count(struct px_req *req, int i, const char *what, int64_t min, int64_t *out)
{
    const struct px_arg *a = &req->argv[i];
    const char *must = min > 0    ? "a positive integer"
                       : min == 0 ? "a non-negative integer"
                                  : "an integer";
    int rc = util_parse_i64(a->p, a->len, out);
    bool negative = a->len > 0 && a->p[0] == '-';
    char range[48];

    if (rc == 0 && *out >= min && *out <= (int64_t)PX_ARGS_MAX_COUNT &&
        *out >= -(int64_t)PX_ARGS_MAX_COUNT)
        return 0;
    if ((rc == 0 && *out > (int64_t)PX_ARGS_MAX_COUNT) || (rc == -ERANGE && !negative)) {
        snprintf(range, sizeof(range), "at most %u", PX_ARGS_MAX_COUNT);
        must = range;
    } else if ((rc == 0 && *out >= min) || (rc == -ERANGE && min < 0)) {
        snprintf(range, sizeof(range), "at least -%u", PX_ARGS_MAX_COUNT);
        must = range;
    }
    px_args_reply_bad(req, what, must, a);
    return -EINVAL;
}

int px_args_parse_ms(struct px_req *req, int i, const char *what, int64_t min, int64_t *out)
{
    const struct px_arg *a = &req->argv[i];
    int rc = util_parse_i64(a->p, a->len, out);
    bool negative = a->len > 0 && a->p[0] == '-';
    char range[48];

    if ((rc == 0 && *out > (int64_t)PX_ARGS_MAX_MS) || (rc == -ERANGE && !negative)) {
        snprintf(range, sizeof(range), "at most %llu ms", (unsigned long long)PX_ARGS_MAX_MS);
        px_args_reply_bad(req, what, range, a);
        return -EINVAL;
    }
    if (rc < 0 || *out < min) {
        px_args_reply_bad(req, what,
                          min > 0 ? "a positive integer (ms)" : "a non-negative integer (ms)", a);
        return -EINVAL;
    }
    return 0;
}

int px_args_parse_lease(struct px_req *req, int i, int64_t *out)
{
    const struct px_arg *a = &req->argv[i];

    if (px_args_parse_ms(req, i, "LEASE", 0, out) < 0)
        return -EINVAL;
    if (*out >= (int64_t)PX_LEASE_MIN_MS)
        return 0;
    px_reply_error(px_req_out(req),
                   "ERR LEASE must be at least %u ms, got '%.*s': a grant is used only with more "
                   "than lease/100 + 2 ms of its lease left when Redis answers, which a shorter "
                   "lease cannot vouch for",
                   PX_LEASE_MIN_MS, (int)LP_MIN(a->len, 32u), a->p);
    return -EINVAL;
}

void px_args_reply_syntax(struct px_req *req, const struct px_arg *a)
{
    px_reply_error(px_req_out(req), "ERR syntax error near '%.*s'", (int)LP_MIN(a->len, 32u), a->p);
}

void px_args_reply_option(struct px_req *req, const struct px_arg *a)
{
    static const char *const keywords[] = {"LEASE", "WAIT", "FENCED", "OWNER", "KEEP"};
    const char *cmd = req->cmd ? req->cmd->name : "";
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(keywords) && !px_args_is(a, keywords[i]); i++)
        ;
    if (i == LP_ARRAY_SIZE(keywords) || !cmd[0])
        return px_args_reply_syntax(req, a);
    if (strcmp(keywords[i], "WAIT") == 0 && strstr(cmd, "TRY")) {
        px_reply_error(px_req_out(req),
                       "ERR %s takes no WAIT: it never waits (use %.*s%s name "
                       "WAIT ms)",
                       cmd, (int)(strstr(cmd, "TRY") - cmd), cmd, strstr(cmd, "TRY") + 3);
        return;
    }
    px_reply_error(px_req_out(req), "ERR %s takes no %s option", cmd, keywords[i]);
}

void px_args_reply_no_value(struct px_req *req, const char *opt, size_t len)
{
    px_reply_error(px_req_out(req), "ERR option '%.*s' needs a value", (int)LP_MIN(len, 32u), opt);
}

void px_args_reply_upstream(struct px_req *req, int err)
{
    struct px_server *srv = req->cl->srv;
    struct pool_stats st;

    srv->stats.upstream_errs++;
    if (err == -ENOTCONN) {
        pool_get_stats(srv->pool, &st);
        px_reply_error(px_req_out(req), "UPSTREAM Redis is unavailable (%s)",
                       st.last_error && st.last_error[0] ? st.last_error : "not connected");
    } else if (err == -ETIMEDOUT) {
        px_reply_error(px_req_out(req), "UPSTREAM Redis did not answer in time; outcome unknown");
    } else {
        px_reply_error(px_req_out(req), "UPSTREAM connection to Redis lost (%s); outcome unknown",
                       strerror(-err));
    }
}

/* What a command works on, for errors: by its name's family. */
static const char *object_of(const struct px_req *req)
{
    static const struct {
        const char *prefix; /* upper-case command name prefix */
        const char *object; /* what the family's name holds */
    } families[] = {
        {"PSEM.", "permit-expirable semaphore"},
        {"SEM.", "semaphore"},
        {"LATCH.", "count-down latch"},
        {"RLOCK", "read-write lock"},
        {"WLOCK", "read-write lock"},
        {"RUNLOCK", "read-write lock"},
        {"WUNLOCK", "read-write lock"},
        {"FAIR", "fair lock"},
    };
    const char *name = req->cmd ? req->cmd->name : "";
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(families); i++) {
        if (strncmp(name, families[i].prefix, strlen(families[i].prefix)) == 0)
            return families[i].object;
    }
    return "lock";
}

/* Redis's own WRONGTYPE, raised by a redis.call() inside a script on a key
 * of another type, ends with " script: <sha>, on @user_script:<line>.":
 * clients get the object's words instead (as FORCEUNLOCK's TYPE check
 * words it), and never a script's internals. Errors the scripts raise
 * themselves (redis.error_reply) carry no such suffix. */
#define REDIS_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

void px_args_reply_redis_error(struct px_req *req, const struct pool_reply *r)
{
    const char *script = r->str ? strstr(r->str, " script: ") : NULL;
    size_t n = script ? (size_t)(script - r->str) : r->len;

    if (r->str && strncmp(r->str, REDIS_WRONGTYPE, strlen(REDIS_WRONGTYPE)) == 0) {
        px_reply_error(px_req_out(req),
                       "WRONGTYPE the name '%.*s' holds another kind of value, "
                       "not a %s",
                       (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p, object_of(req));
        return;
    }
    px_reply_error(px_req_out(req), "%.*s", (int)LP_MIN(n, 400u), r->str);
}

int px_name_check(struct px_req *req, const char *what, enum px_name_rule rule)
{
    const struct px_arg *name = &req->argv[1];

    if (px_args_check_name(req, what) < 0)
        return -EINVAL;
    if (px_name_slot_ok(req->cl->srv->engine, name->p, name->len, rule))
        return 0;
    if (rule == PX_NAME_BRACED)
        px_reply_error(px_req_out(req),
                       "ERR name '%.*s' cannot be used with Redis Cluster: a latch's channel "
                       "adds braces around the name, so a name with '{' or '}' hashes to "
                       "another slot (CROSSSLOT); use a name without braces",
                       (int)LP_MIN(name->len, 200u), name->p);
    else
        px_reply_error(px_req_out(req),
                       "ERR name '%.*s' cannot be used with Redis Cluster: its channel and "
                       "side keys would hash to another slot than the name (CROSSSLOT); use "
                       "a name without '{' and '}', or one with a non-empty hash tag such "
                       "as '{tag}rest'",
                       (int)LP_MIN(name->len, 200u), name->p);
    return -EINVAL;
}
