/* RESP command formatting into struct buf, and reply predicates (the reader
 * is reader.c).
 *
 * Every command is sized exactly first (one buf_reserve), then written with
 * plain stores: one allocation check per command and no partial commands
 * on failure. */
#include "pool/resp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *pool__resp_put_bulk_at(char *p, const void *s, size_t n)
{
    p = put_len_at(p, '$', n);
    if (n)
        memcpy(p, s, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *pool__resp_put_args_at(char *p, int argc, const char *const *argv, const size_t *lens)
{
    int i;

    for (i = 0; i < argc; i++)
        p = pool__resp_put_bulk_at(p, argv[i], arg_len(argv, lens, i));
    return p;
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

bool pool__resp_is_error(const struct pool_reply *r, const char *prefix)
{
    size_t n = strlen(prefix);

    return r->type == POOL_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

bool pool__resp_str_is(const struct pool_reply *r, const char *lit)
{
    if (r->type != POOL_REPLY_STRING && r->type != POOL_REPLY_STATUS)
        return false;
    return util_eq_nocase(r->str, r->len, lit) != 0;
}
