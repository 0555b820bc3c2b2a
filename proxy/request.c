/* Client requests and the RESP2 request parser; see request.h. */
#include "proxy/request.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "common/compiler.h"

struct px_req *px_req_create(int argc)
{
    struct px_req *req = malloc(sizeof(*req));

    if (!req)
        return NULL;
    memset(req, 0, offsetof(struct px_req, argv_inl));
    list_init(&req->node);
    buf_init(&req->reply);
    req->argc = argc;
    req->argv = req->argv_inl;
    if ((size_t)argc > LP_ARRAY_SIZE(req->argv_inl)) {
        req->argv = calloc((size_t)argc, sizeof(*req->argv));
        if (!req->argv) {
            free(req);
            return NULL;
        }
    }
    req->arena = req->arena_inl;
    req->arena_cap = sizeof(req->arena_inl);
    return req;
}

void px_req_free(struct px_req *req)
{
    if (req->argv != req->argv_inl)
        free(req->argv);
    if (req->arena != req->arena_inl)
        free(req->arena);
    buf_deinit(&req->reply);
    free(req);
}

static int arena_grow(struct px_req *req, size_t need)
{
    size_t cap = req->arena_cap;
    char *na;

    while (cap < need)
        cap *= 2;
    if (cap == req->arena_cap)
        return 0;
    na = req->arena == req->arena_inl ? malloc(cap) : realloc(req->arena, cap);
    if (!na)
        return -ENOMEM;
    if (req->arena == req->arena_inl)
        memcpy(na, req->arena_inl, req->arena_len);
    req->arena = na;
    req->arena_cap = cap;
    return 0;
}

/* Appends an argument's bytes to the arena; argv keeps offsets until the
 * request is complete (the arena may move while growing). */
static int req_add_arg(struct px_req *req, int idx, const char *p, size_t n)
{
    if (arena_grow(req, req->arena_len + n + 1) < 0)
        return -ENOMEM;
    memcpy(req->arena + req->arena_len, p, n);
    req->arena[req->arena_len + n] = '\0';
    req->argv[idx].p = (const char *)(uintptr_t)req->arena_len;
    req->argv[idx].len = n;
    req->arena_len += n + 1;
    return 0;
}

/* Turns arena offsets into pointers once the request is complete. */
static void req_fix_args(struct px_req *req)
{
    int i;

    for (i = 0; i < req->argc; i++)
        req->argv[i].p = req->arena + (uintptr_t)req->argv[i].p;
}

/* ---- hiredis object functions --------------------------------------------- */

static void *reject(const redisReadTask *task, const char *why)
{
    struct px_parser *p = task->privdata;

    p->err = why;
    return NULL;
}

static void *obj_create_array(const redisReadTask *task, int n)
{
    struct px_parser *p = task->privdata;
    struct px_req *req;

    if (task->parent)
        return reject(task, "nested arrays are not allowed in requests");
    if ((unsigned)n > p->max_args)
        return reject(task, "too many arguments in request");
    req = px_req_create(n);
    return req ? req : reject(task, "out of memory");
}

static void *obj_create_string(const redisReadTask *task, char *str, size_t len)
{
    struct px_parser *p = task->privdata;

    if (!task->parent || task->type != REDIS_REPLY_STRING)
        return reject(task, "expected an array of bulk strings");
    if (len > p->max_bytes)
        return reject(task, "argument too large");
    if (req_add_arg(task->parent->obj, task->idx, str, len) < 0)
        return reject(task, "out of memory");
    return task->parent->obj;
}

static void *obj_create_integer(const redisReadTask *task, long long v)
{
    (void)v;
    return reject(task, "expected an array of bulk strings");
}

static void *obj_create_nil(const redisReadTask *task)
{
    return reject(task, "invalid bulk or multibulk length");
}

static void obj_free(void *obj)
{
    px_req_free(obj);
}

static redisReplyObjectFunctions req_functions = {
    obj_create_string, obj_create_array, obj_create_integer, obj_create_nil, obj_free,
};

/* ---- parser ------------------------------------------------------------------- */

void px_reader_pool_deinit(struct px_reader_pool *rp)
{
    while (rp->n > 0)
        redisReaderFree(rp->free[--rp->n]);
}

void px_parser_init(struct px_parser *p, struct px_reader_pool *rp, unsigned max_args,
                    size_t max_bytes)
{
    p->pool = rp;
    p->reader = NULL;
    p->err = NULL;
    p->max_args = max_args;
    p->max_bytes = max_bytes;
}

/* A reader that parsed everything it was fed (pos == len) and is not inside
 * a frame can serve any parser: hiredis appends new input after pos and
 * never reads before it. Between frames, ridx is -1, or 0 with a task that
 * has not read its type byte yet (a lookup that found no input). */
static bool reader_is_empty(const redisReader *r)
{
    bool between = r->ridx < 0 || (r->ridx == 0 && r->rstack[0].type < 0);

    return r->err == 0 && between && r->pos == r->len && !r->reply;
}

static void reader_give_back(struct px_parser *p)
{
    struct px_reader_pool *rp = p->pool;
    redisReader *r = p->reader;

    p->reader = NULL;
    if (reader_is_empty(r) && rp->n < PX_READER_POOL_MAX) {
        r->ridx = -1; /* the next frame's first task then takes the next owner's privdata */
        rp->free[rp->n++] = r;
    } else {
        redisReaderFree(r);
    }
}

static int reader_take(struct px_parser *p)
{
    struct px_reader_pool *rp = p->pool;

    if (rp->n > 0)
        p->reader = rp->free[--rp->n];
    else if (!(p->reader = redisReaderCreateWithFunctions(&req_functions)))
        return -ENOMEM;
    p->reader->privdata = p;
    return 0;
}

void px_parser_deinit(struct px_parser *p)
{
    if (p->reader)
        reader_give_back(p);
}

int px_parser_feed(struct px_parser *p, const char *data, size_t len)
{
    if (!p->reader && reader_take(p) < 0)
        return -ENOMEM;
    return redisReaderFeed(p->reader, data, len) == REDIS_OK ? 0 : -ENOMEM;
}

size_t px_parser_pending(const struct px_parser *p)
{
    return p->reader ? p->reader->len - p->reader->pos : 0;
}

/* hiredis waits for a whole bulk before calling us, so a declared length
 * over the limit is read from the pending header itself: while a bulk is
 * incomplete, the current task is a string and buf + pos points at the
 * length digits (its type byte is consumed; redisReader's fields are
 * public). The client learns at once instead of after sending max_bytes. */
static bool bulk_header_too_large(const struct px_parser *p)
{
    const redisReader *r = p->reader;
    const char *s = r->buf + r->pos;
    size_t n = px_parser_pending(p), i;
    uint64_t len = 0;

    if (r->ridx < 0 || r->rstack[r->ridx].type != REDIS_REPLY_STRING)
        return false;
    for (i = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        len = len * 10 + (uint64_t)(s[i] - '0');
        if (len > p->max_bytes)
            return true;
    }
    return false;
}

int px_parser_next(struct px_parser *p, struct px_req **out)
{
    void *obj = NULL;

    *out = NULL;
    if (!p->reader)
        return 0;
    if (redisReaderGetReply(p->reader, &obj) != REDIS_OK)
        return -EPROTO;
    if (!obj) {
        if (px_parser_pending(p) > p->max_bytes || bulk_header_too_large(p)) {
            p->err = "request too large";
            return -EPROTO;
        }
        if (reader_is_empty(p->reader))
            reader_give_back(p);
        return 0;
    }
    req_fix_args(obj);
    *out = obj;
    return 1;
}

const char *px_parser_error(const struct px_parser *p)
{
    if (p->err)
        return p->err;
    return p->reader && p->reader->err ? p->reader->errstr : "unknown";
}
