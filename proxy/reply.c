/* RESP2 and RESP3 reply encoding; see reply.h. */
#include "proxy/reply.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

/* Appends <type><v>\r\n without printf (every reply has one). */
static int reply_num(struct buf *b, char type, int64_t v)
{
    char tmp[24];
    size_t n;

    tmp[0] = type;
    n = 1 + util_i64_to_str(v, tmp + 1);
    tmp[n++] = '\r';
    tmp[n++] = '\n';
    return buf_append(b, tmp, n);
}

int px_reply_status(struct buf *b, const char *s)
{
    size_t n = strlen(s);
    int rc = buf_reserve(b, n + 3);

    if (rc < 0)
        return rc;
    b->data[b->len] = '+';
    memcpy(b->data + b->len + 1, s, n);
    memcpy(b->data + b->len + 1 + n, "\r\n", 2);
    b->len += n + 3;
    return 0;
}

int px_reply_error(struct buf *b, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    size_t i, n;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    n = strlen(text);
    for (i = 0; i < n; i++) {
        if (text[i] == '\r' || text[i] == '\n')
            text[i] = ' ';
    }
    return buf_appendf(b, "-%s\r\n", text);
}

int px_reply_int(struct buf *b, int64_t v)
{
    return reply_num(b, ':', v);
}

int px_reply_bulk(struct buf *b, const char *p, size_t n)
{
    int rc = buf_reserve(b, n + 26);

    if (rc < 0)
        return rc;
    reply_num(b, '$', (int64_t)n);
    memcpy(b->data + b->len, p, n);
    memcpy(b->data + b->len + n, "\r\n", 2);
    b->len += n + 2;
    return 0;
}

int px_reply_cstr(struct buf *b, const char *s)
{
    return px_reply_bulk(b, s, strlen(s));
}

int px_reply_nil(struct buf *b)
{
    return buf_append(b, "$-1\r\n", 5);
}

int px_reply_array(struct buf *b, size_t n)
{
    return reply_num(b, '*', (int64_t)n);
}

int px_reply_map(struct buf *b, int proto, size_t npairs)
{
    if (proto == PX_PROTO_RESP3)
        return reply_num(b, '%', (int64_t)npairs);
    return reply_num(b, '*', (int64_t)(2 * npairs));
}

int px_reply_null(struct buf *b, int proto)
{
    if (proto == PX_PROTO_RESP3)
        return buf_append(b, "_\r\n", 3);
    return px_reply_nil(b);
}

int px_reply_double(struct buf *b, int proto, double v)
{
    char tmp[40];
    int n;

    if (isinf(v))
        n = snprintf(tmp, sizeof(tmp), "%s", v > 0 ? "inf" : "-inf");
    else
        n = snprintf(tmp, sizeof(tmp), "%.17g", v);
    if (proto == PX_PROTO_RESP3)
        return buf_appendf(b, ",%s\r\n", tmp);
    return px_reply_bulk(b, tmp, (size_t)n);
}

int px_reply_bool(struct buf *b, int proto, bool v)
{
    if (proto == PX_PROTO_RESP3)
        return buf_append(b, v ? "#t\r\n" : "#f\r\n", 4);
    return px_reply_int(b, v ? 1 : 0);
}

int px_reply_push(struct buf *b, int proto, size_t n)
{
    return reply_num(b, proto == PX_PROTO_RESP3 ? '>' : '*', (int64_t)n);
}
