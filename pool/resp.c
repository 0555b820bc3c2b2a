/* RESP command formatting into struct buf, and the hiredis reader glue.
 *
 * Every command is sized exactly first (one buf_reserve), then written with
 * plain stores: one allocation check per command and no partial commands
 * on failure. */
#include "pool/resp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "common/spares.h"
#include "common/util.h"

size_t pool__resp_u64(char *out, unsigned long long v)
{
    size_t n = util_u64_to_str(v, out);

    out[n] = '\0';
    return n;
}

/* Digits of v in decimal, for sizing a command before writing it. */
static size_t dec_len(size_t v)
{
    size_t n = 1;

    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Length of argument i: explicit (binary-safe) or strlen. */
static size_t arg_len(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

size_t pool__resp_bulk_size(size_t n)
{
    return 1 + dec_len(n) + 2 + n + 2;
}

size_t pool__resp_args_size(int argc, const char *const *argv, const size_t *lens)
{
    size_t total = 0;
    int i;

    for (i = 0; i < argc; i++)
        total += pool__resp_bulk_size(arg_len(argv, lens, i));
    return total;
}

/* Writes "<c><n>\r\n" at p, returns the end. Lengths below 100 (every
 * argument of a lock script) are written in place, without a call. */
static char *put_len_at(char *p, char c, size_t n)
{
    *p++ = c;
    if (n < 10) {
        *p++ = (char)('0' + n);
    } else if (n < 100) {
        *p++ = (char)('0' + n / 10);
        *p++ = (char)('0' + n % 10);
    } else {
        p += util_u64_to_str(n, p);
    }
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Writes "<c><n>\r\n" into reserved space. */
static void put_len(struct buf *b, char c, size_t n)
{
    b->len = (size_t)(put_len_at(b->data + b->len, c, n) - b->data);
}

/* Writes one bulk into reserved space. */
static void put_bulk(struct buf *b, const void *s, size_t n)
{
    char *p = put_len_at(b->data + b->len, '$', n);

    if (n)
        memcpy(p, s, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    b->len = (size_t)(p - b->data);
}

static void put_args(struct buf *b, int argc, const char *const *argv, const size_t *lens)
{
    int i;

    for (i = 0; i < argc; i++)
        put_bulk(b, argv[i], arg_len(argv, lens, i));
}

int pool__resp_array(struct buf *b, size_t n)
{
    int rc = buf_reserve(b, 1 + dec_len(n) + 2);

    if (rc < 0)
        return rc;
    put_len(b, '*', n);
    return 0;
}

int pool__resp_bulk(struct buf *b, const void *p, size_t n)
{
    int rc = buf_reserve(b, pool__resp_bulk_size(n));

    if (rc < 0)
        return rc;
    put_bulk(b, p, n);
    return 0;
}

/* The workhorse: exact size, one reserve, then plain stores. Callers pass
 * constant prefixes (EVALSHA sha numkeys) separately from the caller's
 * arguments so neither has to be copied into one array. */
int pool__resp_command_split(struct buf *b, int npre, const char *const *pre, const size_t *prelens,
                             int argc, const char *const *argv, const size_t *lens)
{
    size_t n = (size_t)npre + (size_t)argc;
    size_t need = 1 + dec_len(n) + 2;
    int rc;

    need += pool__resp_args_size(npre, pre, prelens);
    need += pool__resp_args_size(argc, argv, lens);
    rc = buf_reserve(b, need);
    if (rc < 0)
        return rc;
    put_len(b, '*', n);
    put_args(b, npre, pre, prelens);
    put_args(b, argc, argv, lens);
    return 0;
}

/* The hot path of every lock operation: the prefix is one memcpy, the
 * arguments are sized once (by the caller). */
int pool__resp_evalsha(struct buf *b, const char *pre, size_t prelen, const char *nk, size_t nklen,
                       int argc, const char *const *argv, const size_t *lens, size_t tail_size)
{
    size_t n = (size_t)argc + 3;
    int rc = buf_reserve(b, 1 + dec_len(n) + 2 + prelen + tail_size);

    if (rc < 0)
        return rc;
    put_len(b, '*', n);
    memcpy(b->data + b->len, pre, prelen);
    b->len += prelen;
    put_bulk(b, nk, nklen);
    put_args(b, argc, argv, lens);
    return 0;
}

int pool__resp_command(struct buf *b, int argc, const char *const *argv, const size_t *lens)
{
    return pool__resp_command_split(b, 0, NULL, NULL, argc, argv, lens);
}

int pool__resp_command_raw(struct buf *b, int npre, const char *const *pre, const size_t *prelens,
                           size_t nraw, const char *raw, size_t rawlen)
{
    size_t n = (size_t)npre + nraw;
    size_t need = 1 + dec_len(n) + 2 + rawlen;
    int rc;

    need += pool__resp_args_size(npre, pre, prelens);
    rc = buf_reserve(b, need);
    if (rc < 0)
        return rc;
    put_len(b, '*', n);
    put_args(b, npre, pre, prelens);
    if (rawlen)
        memcpy(b->data + b->len, raw, rawlen);
    b->len += rawlen;
    return 0;
}

/* hiredis allocates an array's element table from its header (1.x allows
 * 2^32 - 1 elements: an 11-byte reply could ask for 32 GiB) and frees
 * replies recursively (1.x nests without limit: a deep reply could overflow
 * the stack when freed). The pool's replies are small and shallow (at most
 * a renew batch of 100 elements, two levels), so the default createArray
 * is wrapped to refuse more than POOL__RESP_MAX_ELEMENTS elements or
 * POOL__RESP_MAX_DEPTH levels, with hiredis 0.14 and 1.x alike (only the
 * callback's element type differs). The object functions and r->fn are
 * hiredis's public interface for custom reply objects. */
#if HIREDIS_MAJOR >= 1
typedef size_t resp_nelem;
#else
typedef int resp_nelem;
#endif

static redisReplyObjectFunctions capped_functions;
static const char *refused; /* why the last createArray refused, for pool__resp_next */

/* Reply records. Integer, nil and array replies (the lock scripts' answers)
 * take their redisReply, and an array of up to RESP_SMALL elements its
 * element table, from per-thread spares (common/spares.h) that
 * pool__resp_free() fills:
 * no calloc/free per reply in the steady state. Every record is still a
 * heap block shaped as hiredis's own (strings are hiredis's createString),
 * so freeReplyObject() stays correct for any reply; it just does not
 * recycle. */
#define RESP_SMALL 4u /* element table size kept as a spare */

static _Thread_local struct spares resp_records; /* blocks of sizeof(redisReply) */
static _Thread_local struct spares resp_tables;  /* blocks of RESP_SMALL pointers */

static redisReply *resp_record(int type)
{
    redisReply *r;

    r = spares_get(&resp_records);
    if (!r && !(r = malloc(sizeof(*r))))
        return NULL;
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

/* Links r into its parent array, as hiredis's own functions do. */
static void *resp_link(const redisReadTask *task, redisReply *r)
{
    if (r && task->parent)
        ((redisReply *)task->parent->obj)->element[task->idx] = r;
    return r;
}

static void *resp_create_integer(const redisReadTask *task, long long v)
{
    redisReply *r = resp_record(REDIS_REPLY_INTEGER);

    if (r)
        r->integer = v;
    return resp_link(task, r);
}

static void *resp_create_nil(const redisReadTask *task)
{
    return resp_link(task, resp_record(REDIS_REPLY_NIL));
}

static void *resp_create_array(const redisReadTask *task, resp_nelem n)
{
    redisReply *r;
    size_t cap = (size_t)n <= RESP_SMALL ? RESP_SMALL : (size_t)n;

    if (!(r = resp_record(task->type)))
        return NULL;
    if (n > 0) {
        r->element = cap == RESP_SMALL ? spares_get(&resp_tables) : NULL;
        if (!r->element)
            r->element = malloc(cap * sizeof(*r->element));
        if (!r->element) {
            pool__resp_free(r);
            return NULL;
        }
        memset(r->element, 0, cap * sizeof(*r->element));
    }
    r->elements = (size_t)n;
    return resp_link(task, r);
}

static void *capped_create_array(const redisReadTask *task, resp_nelem n)
{
    const redisReadTask *t;
    unsigned depth = 1;

    for (t = task->parent; t; t = t->parent)
        depth++;
    if ((size_t)n > POOL__RESP_MAX_ELEMENTS) {
        refused = "array reply with too many elements";
        return NULL;
    }
    if (depth > POOL__RESP_MAX_DEPTH) {
        refused = "array reply nested too deeply";
        return NULL;
    }
    return resp_create_array(task, n);
}

static void resp_free_object(void *reply)
{
    pool__resp_free(reply);
}

void pool__resp_free(redisReply *r)
{
    size_t i;

    if (!r)
        return;
    if (r->element) {
        for (i = 0; i < r->elements; i++)
            pool__resp_free(r->element[i]);
        if (r->elements > RESP_SMALL || !spares_put(&resp_tables, r->element))
            free(r->element);
    }
    if (r->str)
        free(r->str); /* free(NULL) is not free with every allocator */
    if (!spares_put(&resp_records, r))
        free(r);
}

/* The default reader (redisReply trees; at most 16 KiB of idle buffer, so
 * a burst does not pin memory) with the capped createArray and recycled
 * records. */
redisReader *pool__resp_reader_create(void)
{
    redisReader *r = redisReaderCreate();

    if (!r)
        return NULL;
    if (!capped_functions.createString) {
        capped_functions = *r->fn;
        capped_functions.createArray = capped_create_array;
        capped_functions.createInteger = resp_create_integer;
        capped_functions.createNil = resp_create_nil;
        capped_functions.freeObject = resp_free_object;
    }
    r->fn = &capped_functions;
    return r;
}

/* hiredis copies the bytes into its own buffer; the caller's buffer may
 * be reused at once. */
int pool__resp_feed(redisReader *r, const char *p, size_t n)
{
    if (redisReaderFeed(r, p, n) == REDIS_OK)
        return 0;
    return r->err == REDIS_ERR_OOM ? -ENOMEM : -EPROTO;
}

/* hiredis reports "need more bytes" as REDIS_OK with a NULL reply; split
 * that out so callers can loop on rv == 1. A refused array fails the
 * reader as out of memory: its error text then says what happened. */
int pool__resp_next(redisReader *r, redisReply **out)
{
    void *reply = NULL;

    *out = NULL;
    refused = NULL;
    if (redisReaderGetReply(r, &reply) != REDIS_OK) {
        if (refused && r->err == REDIS_ERR_OOM) {
            r->err = REDIS_ERR_PROTOCOL;
            snprintf(r->errstr, sizeof(r->errstr), "%s", refused);
        }
        return -EPROTO;
    }
    if (!reply)
        return 0;
    *out = reply;
    return 1;
}

bool pool__resp_is_error(const redisReply *r, const char *prefix)
{
    size_t n = strlen(prefix);

    return r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

bool pool__resp_str_is(const redisReply *r, const char *lit)
{
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)
        return false;
    return util_eq_nocase(r->str, r->len, lit) != 0;
}
