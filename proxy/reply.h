/* RESP2 reply encoding into a byte buffer. Every function returns 0 or
 * -ENOMEM; on -ENOMEM the buffer may hold a partial reply and the caller
 * closes the connection. */
#ifndef LP_PROXY_REPLY_H
#define LP_PROXY_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

int px_reply_status(struct buf *b, const char *s);
/* "-<text>\r\n"; CR/LF in text are replaced by spaces. */
int px_reply_error(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int px_reply_int(struct buf *b, int64_t v);
int px_reply_bulk(struct buf *b, const char *p, size_t n);
int px_reply_cstr(struct buf *b, const char *s);
int px_reply_nil(struct buf *b);
int px_reply_array(struct buf *b, size_t n);

#ifdef __cplusplus
}
#endif

#endif
