/* Argument checks and error replies shared by the command modules; see
 * args.h. Nothing here keeps state: every function writes at most one
 * reply into the request's output buffer. */
#include "proxy/args.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "common/compiler.h"
#include "common/util.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/locks/lock.h"
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
    char range[48];

    if (rc == 0 && *out >= min && *out <= (int64_t)PX_ARGS_MAX_COUNT &&
        *out >= -(int64_t)PX_ARGS_MAX_COUNT)
        return 0;
    if (rc == 0 && *out > (int64_t)PX_ARGS_MAX_COUNT) {
        snprintf(range, sizeof(range), "at most %u", PX_ARGS_MAX_COUNT);
        must = range;
    } else if (rc == 0 && *out >= min) {
        snprintf(range, sizeof(range), "at least -%u", PX_ARGS_MAX_COUNT);
        must = range;
    }
    px_args_reply_bad(req, what, must, a);
    return -EINVAL;
}

int px_args_parse_ms(struct px_req *req, int i, const char *what, int64_t min, int64_t *out)
{
    const struct px_arg *a = &req->argv[i];

    if (util_parse_i64(a->p, a->len, out) < 0 || *out < min) {
        px_args_reply_bad(req, what,
                          min > 0 ? "a positive integer (ms)" : "a non-negative integer (ms)", a);
        return -EINVAL;
    }
    return 0;
}

void px_args_reply_syntax(struct px_req *req, const struct px_arg *a)
{
    px_reply_error(px_req_out(req), "ERR syntax error near '%.*s'", (int)LP_MIN(a->len, 32u), a->p);
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

void px_args_reply_redis_error(struct px_req *req, const struct redisReply *r)
{
    px_reply_error(px_req_out(req), "%.*s", (int)LP_MIN(r->len, 400u), r->str);
}
