/* The pool's RESP2 reply reader: received bytes in, struct pool_reply
 * trees out (reply.h: hiredis's redisReply under the pool's own name, so
 * the tests compare the two readers record by record). The contract is in
 * resp.h.
 *
 * Design. Bytes are appended to one input buffer; pool__resp_next() builds
 * the first reply in one pass and, if the reply is not complete yet, frees
 * what it built and waits for more bytes (a lock reply arrives whole). With
 * more than READER_SCAN_FIRST bytes waiting (a large reply, perhaps split
 * over reads) it first scans for a complete reply without allocating, so
 * a reply arriving in many pieces is not built again for each. Integer, nil and array records, and
 * the element table of an array of up to READER_SMALL elements, come from per-thread spares
 * (common/spares.h) that pool__resp_free() refills; strings are
 * NUL-terminated, as hiredis's.
 *
 * Limits, as the pool had them with hiredis 0.14 and 1.x: arrays of at
 * most POOL__RESP_MAX_ELEMENTS elements (checked from the header: an
 * 11-byte reply cannot make the pool allocate gigabytes) and
 * POOL__RESP_MAX_DEPTH levels (the scan and the free recurse per level).
 * Errors are sticky and named in errstr, as hiredis's are.
 *
 * Rejected: hiredis's reader. It copies input into its own buffer, walks a
 * task stack with a callback per element and allocates every record, about
 * 500 instructions per lock reply where this reader takes ~100. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spares.h"
#include "pool/resp.h"

#define READER_SMALL      4u          /* element table size kept as a spare */
#define READER_IDLE       16384u      /* input storage kept while no bytes wait */
#define READER_SCAN_FIRST 1024u       /* more input than this is scanned before a build */
#define READER_MAX_LEN    (1ll << 40) /* a bulk length past this is not RESP */

static _Thread_local struct spares reader_records; /* blocks of sizeof(struct pool_reply) */
static _Thread_local struct spares reader_tables;  /* blocks of READER_SMALL pointers */

struct pool__resp_reader *pool__resp_reader_create(void)
{
    struct pool__resp_reader *rd = calloc(1, sizeof(*rd));

    if (rd)
        buf_init(&rd->in);
    return rd;
}

void pool__resp_reader_free(struct pool__resp_reader *rd)
{
    if (!rd)
        return;
    buf_deinit(&rd->in);
    free(rd);
}

static int reader_fail(struct pool__resp_reader *rd, int err, const char *what)
{
    rd->err = err;
    snprintf(rd->errstr, sizeof(rd->errstr), "%s", what);
    return -1;
}

int pool__resp_feed(struct pool__resp_reader *rd, const char *p, size_t n)
{
    if (rd->err)
        return -EPROTO;
    if (buf_append(&rd->in, p, n) < 0) {
        reader_fail(rd, POOL__RESP_ERR_OOM, "Out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* The '\r' of the first "\r\n" at or after p, or NULL if none yet. */
static const char *reader_eol(const char *p, const char *end)
{
    const char *q;

    while ((q = memchr(p, '\r', (size_t)(end - p))) != NULL) {
        if (q + 1 >= end)
            return NULL;
        if (q[1] == '\n')
            return q;
        p = q + 1;
    }
    return NULL;
}

/* The number of a ':', '$' or '*' line starting at p (after the type
 * byte), as Redis writes them: 1 with *v and *eol (its '\r'), 0 when the
 * line is not complete yet, -1 when it is not a number. One pass over the
 * digits finds both the value and the line end. */
static int reader_num(const char *p, const char *end, long long *v, const char **eol)
{
    const char *d = p + (p < end && *p == '-');
    const char *q = d;
    unsigned long long x = 0;

    for (; q < end && (unsigned char)(*q - '0') < 10; q++) {
        if (q - d >= 19)
            return -1;
        x = x * 10 + (unsigned long long)(*q - '0');
    }
    if (q + 1 >= end)
        return q < end && *q != '\r' ? -1 : 0;
    if (q == d || q[0] != '\r' || q[1] != '\n' || x > (unsigned long long)INT64_MAX + (d != p))
        return -1;
    *v = d != p ? (long long)(0 - x) : (long long)x;
    *eol = q;
    return 1;
}

static struct pool_reply *reader_record(int type)
{
    struct pool_reply *r = spares_get(&reader_records);

    if (!r && !(r = malloc(sizeof(*r))))
        return NULL;
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

/* A string record holding a copy of [p, p + n) and a NUL. */
static struct pool_reply *reader_string(int type, const char *p, size_t n)
{
    struct pool_reply *r = reader_record(type);

    if (r && !(r->str = malloc(n + 1))) {
        pool__resp_free(r);
        return NULL;
    }
    if (r) {
        memcpy(r->str, p, n);
        r->str[n] = '\0';
        r->len = n;
    }
    return r;
}

static struct pool_reply *reader_array(size_t n)
{
    struct pool_reply *r = reader_record(POOL_REPLY_ARRAY);
    size_t cap = n <= READER_SMALL ? READER_SMALL : n;

    if (!r || n == 0)
        return r;
    r->element = cap == READER_SMALL ? spares_get(&reader_tables) : NULL;
    if (!r->element && !(r->element = malloc(cap * sizeof(*r->element)))) {
        pool__resp_free(r);
        return NULL;
    }
    memset(r->element, 0, cap * sizeof(*r->element));
    r->elements = n;
    return r;
}

/* Reads one reply at *pp (and its elements, at depth levels of arrays
 * below the top): 1 with *pp past it (and *out built when out is not
 * NULL; on 0 or -1 a partial *out is left for the caller to free), 0 when
 * more bytes are needed, -1 on a protocol error or no memory (rd failed). */
static int reader_parse(struct pool__resp_reader *rd, const char **pp, const char *end,
                        unsigned depth, struct pool_reply **out)
{
    const char *p = *pp, *eol;
    long long v;
    size_t i;
    int rc;

    if (p >= end)
        return 0;
    switch (*p) {
    case '+':
    case '-':
        if (!(eol = reader_eol(p + 1, end)))
            return 0;
        if (out && !(*out = reader_string(*p == '+' ? POOL_REPLY_STATUS : POOL_REPLY_ERROR, p + 1,
                                          (size_t)(eol - p - 1))))
            return reader_fail(rd, POOL__RESP_ERR_OOM, "Out of memory");
        *pp = eol + 2;
        return 1;
    case ':':
        if ((rc = reader_num(p + 1, end, &v, &eol)) <= 0)
            return rc < 0 ? reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "Bad integer value") : 0;
        if (out && !(*out = reader_record(POOL_REPLY_INTEGER)))
            return reader_fail(rd, POOL__RESP_ERR_OOM, "Out of memory");
        if (out)
            (*out)->integer = v;
        *pp = eol + 2;
        return 1;
    case '$':
        if ((rc = reader_num(p + 1, end, &v, &eol)) <= 0 || v < -1 || v > READER_MAX_LEN)
            return rc == 0 ? 0 : reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "Bad bulk string length");
        if (v >= 0 && (end - (eol + 2) < v + 2))
            return 0;
        if (v >= 0 && (eol[2 + v] != '\r' || eol[3 + v] != '\n'))
            return reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "Bad bulk string terminator");
        if (out && !(*out = v < 0 ? reader_record(POOL_REPLY_NIL)
                                  : reader_string(POOL_REPLY_STRING, eol + 2, (size_t)v)))
            return reader_fail(rd, POOL__RESP_ERR_OOM, "Out of memory");
        *pp = v < 0 ? eol + 2 : eol + 4 + v;
        return 1;
    case '*':
        if ((rc = reader_num(p + 1, end, &v, &eol)) <= 0 || v < -1)
            return rc == 0 ? 0 : reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "Bad multi-bulk length");
        if (v > (long long)POOL__RESP_MAX_ELEMENTS)
            return reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "array reply with too many elements");
        if (v >= 0 && depth + 1 > POOL__RESP_MAX_DEPTH)
            return reader_fail(rd, POOL__RESP_ERR_PROTOCOL, "array reply nested too deeply");
        if (out && !(*out = v < 0 ? reader_record(POOL_REPLY_NIL) : reader_array((size_t)v)))
            return reader_fail(rd, POOL__RESP_ERR_OOM, "Out of memory");
        p = eol + 2;
        for (i = 0; v > 0 && i < (size_t)v; i++) {
            rc = reader_parse(rd, &p, end, depth + 1, out ? &(*out)->element[i] : NULL);
            if (rc <= 0)
                return rc;
        }
        *pp = p;
        return 1;
    default:
        snprintf(rd->errstr, sizeof(rd->errstr), "Protocol error, got \"%c\" as reply type byte",
                 *p);
        rd->err = POOL__RESP_ERR_PROTOCOL;
        return -1;
    }
}

int pool__resp_next(struct pool__resp_reader *rd, struct pool_reply **out)
{
    const char *start, *end, *p;
    struct pool_reply *r = NULL;
    int rc;

    *out = NULL;
    if (rd->err)
        return -EPROTO;
    if (buf_size(&rd->in) == 0)
        return 0; /* and in.data may be NULL: no pointer arithmetic on it */
    start = p = buf_head(&rd->in);
    end = start + buf_size(&rd->in);
    /* Much input may hold a large reply still arriving: check it is whole
     * before building it. A small one (every lock reply) is built at once. */
    if (buf_size(&rd->in) > READER_SCAN_FIRST && (rc = reader_parse(rd, &p, end, 0, NULL)) <= 0)
        return rc == 0 ? 0 : -EPROTO;
    p = start;
    rc = reader_parse(rd, &p, end, 0, &r);
    if (rc <= 0) {
        pool__resp_free(r);
        return rc == 0 ? 0 : -EPROTO;
    }
    buf_consume(&rd->in, (size_t)(p - start));
    if (buf_size(&rd->in) == 0)
        buf_trim(&rd->in, READER_IDLE);
    *out = r;
    return 1;
}

const char *pool__resp_reader_error(const struct pool__resp_reader *rd)
{
    return rd->errstr;
}

void pool__resp_free(struct pool_reply *r)
{
    size_t i;

    if (!r)
        return;
    if (r->element) {
        for (i = 0; i < r->elements; i++)
            pool__resp_free(r->element[i]);
        if (r->elements > READER_SMALL || !spares_put(&reader_tables, r->element))
            free(r->element);
    }
    if (r->str)
        free(r->str); /* free(NULL) is not free with every allocator */
    if (!spares_put(&reader_records, r))
        free(r);
}
