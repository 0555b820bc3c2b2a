/* Growable byte buffer: see buf.h for the invariants. */
#include "common/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spares.h"

/* Storage a buffer starts with; buf_trim() keeps drained blocks of this
 * size as per-thread spares for the next buffer that needs storage. */
#define BUF_MIN_CAP 256u

static _Thread_local struct spares spares = {.max = 8};

void buf_deinit(struct buf *b)
{
    free(b->data);
    buf_init(b);
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->off = 0;
}

/* Slides unread bytes to the front so the tail has room without growing. */
static void buf_compact(struct buf *b)
{
    size_t n = buf_size(b);

    if (b->off == 0)
        return;
    memmove(b->data, b->data + b->off, n);
    b->off = 0;
    b->len = n;
}

int buf_reserve(struct buf *b, size_t n)
{
    size_t need, cap;
    char *p;

    if (b->cap - b->len >= n)
        return 0;
    if (b->off > 0 && b->cap - buf_size(b) >= n && b->off >= buf_size(b)) {
        buf_compact(b);
        return 0;
    }
    need = b->len + n;
    if (!b->data && need <= BUF_MIN_CAP && (b->data = spares_get(&spares)) != NULL) {
        b->cap = BUF_MIN_CAP;
        return 0;
    }
    cap = b->cap ? b->cap : BUF_MIN_CAP;
    while (cap < need)
        cap *= 2;
    p = realloc(b->data, cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int rc;

    if (n == 0)
        return 0;
    rc = buf_reserve(b, n);
    if (rc < 0)
        return rc;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_appendf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    rc = buf_reserve(b, (size_t)n + 1);
    if (rc < 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void buf_consume(struct buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        buf_reset(b);
}

void buf_swap(struct buf *a, struct buf *b)
{
    struct buf t = *a;

    *a = *b;
    *b = t;
}

void buf_trim(struct buf *b, size_t keep)
{
    if (buf_size(b) != 0 || b->cap <= keep)
        return;
    if (b->cap == BUF_MIN_CAP && spares_put(&spares, b->data))
        buf_init(b);
    else
        buf_deinit(b);
}
