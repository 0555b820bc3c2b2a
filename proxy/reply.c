/* RESP2 reply encoding; see reply.h. */
#include "proxy/reply.h"

#include <errno.h>
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
