/* Growable contiguous byte buffer with a read cursor.
 *
 * Invariants: 0 <= off <= len <= cap. Bytes [off, len) are unread; writers
 * append at len. The buffer owns data (malloc'd). Pointers into data are
 * invalidated by any append or compaction, so a buffer handed to the kernel
 * for a send must not be appended to until the send completes (the event loop
 * double-buffers for that reason). */
#ifndef LP_COMMON_BUF_H
#define LP_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct buf {
    char *data; /* owned: storage, NULL until the first append */
    size_t len; /* end of written bytes */
    size_t cap; /* allocated bytes */
    size_t off; /* read cursor */
};

static inline void buf_init(struct buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->off = 0;
}

/* Unread byte count. */
static inline size_t buf_size(const struct buf *b)
{
    return b->len - b->off;
}

/* First unread byte (valid while buf_size() > 0). */
static inline char *buf_head(const struct buf *b)
{
    return b->data + b->off;
}

/* Frees storage; the buffer is empty and reusable afterwards. */
void buf_deinit(struct buf *b);

/* Drops all bytes but keeps the storage. */
void buf_reset(struct buf *b);

/* Makes room for n more bytes at the tail. Returns 0 or -ENOMEM. */
int buf_reserve(struct buf *b, size_t n);

/* Appends n bytes. Returns 0 or -ENOMEM (nothing appended). */
int buf_append(struct buf *b, const void *p, size_t n);

/* Appends a NUL-terminated string. Returns 0 or -ENOMEM. */
int buf_append_str(struct buf *b, const char *s);

/* printf-style append. Returns 0, -ENOMEM, or -EINVAL on a format error. */
int buf_appendf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Marks n unread bytes as read; resets to empty when everything is read. */
void buf_consume(struct buf *b, size_t n);

/* Exchanges the contents of two buffers (used for double buffering). */
void buf_swap(struct buf *a, struct buf *b);

/* Releases storage above keep bytes when the buffer is empty (idle trimming).
 * Storage of the initial size (256 bytes) goes to a per-thread stack of a
 * few spares (common/spares.h) that the next buf_reserve() on a buffer
 * without storage takes, so an output buffer drained and refilled for every
 * reply costs no malloc/free. */
void buf_trim(struct buf *b, size_t keep);

#ifdef __cplusplus
}
#endif

#endif
