/* RESP2 reply encoding; see reply.h. */
#include "proxy/reply.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int px_reply_status(struct buf *b, const char *s)
{
    return buf_appendf(b, "+%s\r\n", s);
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
    return buf_appendf(b, ":%lld\r\n", (long long)v);
}

int px_reply_bulk(struct buf *b, const char *p, size_t n)
{
    int rc = buf_appendf(b, "$%zu\r\n", n);

    if (rc == 0)
        rc = buf_append(b, p, n);
    if (rc == 0)
        rc = buf_append(b, "\r\n", 2);
    return rc;
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
    return buf_appendf(b, "*%zu\r\n", n);
}
