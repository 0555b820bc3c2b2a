/* Growable byte buffer: see buf.h for the invariants. */
#include "common/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Spare storage (buf_trim): a few small blocks, per thread. */
#define BUF_SPARE_CAP 4096u
#define BUF_SPARES    8u

struct buf_spares {
    char *data[BUF_SPARES]; /* owned: empty blocks */
    size_t cap[BUF_SPARES]; /* their sizes */
    unsigned n;             /* blocks waiting */
};

static _Thread_local struct buf_spares spares;
static pthread_key_t spares_key; /* its destructor frees a thread's spares */
static pthread_once_t spares_once = PTHREAD_ONCE_INIT;

static void buf_spares_free(void *arg)
{
    struct buf_spares *s = arg;

    while (s->n > 0)
        free(s->data[--s->n]);
}

static void buf_spares_key_create(void)
{
    (void)pthread_key_create(&spares_key, buf_spares_free);
}

/* Keeps the storage of b (empty, small) as a spare; false if there is no
 * room. The first spare of a thread registers its cleanup at thread exit. */
static bool buf_keep_spare(struct buf *b)
{
    static _Thread_local bool registered;

    if (b->cap > BUF_SPARE_CAP || spares.n == BUF_SPARES)
        return false;
    if (!registered) {
        (void)pthread_once(&spares_once, buf_spares_key_create);
        if (pthread_setspecific(spares_key, &spares) != 0)
            return false;
        registered = true;
    }
    spares.data[spares.n] = b->data;
    spares.cap[spares.n++] = b->cap;
    buf_init(b);
    return true;
}

/* Gives b (no storage) a spare block of at least need bytes, if one waits. */
static bool buf_take_spare(struct buf *b, size_t need)
{
    unsigned i = spares.n;

    if (i == 0 || spares.cap[i - 1] < need)
        return false;
    spares.n--;
    b->data = spares.data[i - 1];
    b->cap = spares.cap[i - 1];
    return true;
}

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
    if (!b->data && buf_take_spare(b, need))
        return 0;
    cap = b->cap ? b->cap : 256;
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
    if (!buf_keep_spare(b))
        buf_deinit(b);
}
