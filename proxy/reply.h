/* RESP reply encoding into a byte buffer. Every function returns 0 or
 * -ENOMEM; on -ENOMEM the buffer may hold a partial reply and the caller
 * closes the connection.
 *
 * The px_reply_* functions without a proto argument write types that RESP2
 * and RESP3 share. Those taking proto (the connection's protocol version,
 * 2 or 3: struct px_client.proto) write the RESP3 type when proto is 3 and
 * its RESP2 equivalent otherwise, as Redis does: a map is a flat array of
 * 2n elements, null is the nil bulk, a double a bulk string, a boolean
 * :1/:0, a push an array. */
#ifndef LP_PROXY_REPLY_H
#define LP_PROXY_REPLY_H

#include <stdbool.h>
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

#define PX_PROTO_RESP2 2
#define PX_PROTO_RESP3 3

/* Header of a map of npairs key/value pairs ("%n" / "*2n"); the caller
 * writes the 2n elements. */
int px_reply_map(struct buf *b, int proto, size_t npairs);
/* Null ("_" / "$-1"). */
int px_reply_null(struct buf *b, int proto);
/* Double (",<v>" / bulk "<v>"), printed as Redis prints doubles (%.17g,
 * "inf", "-inf"). */
int px_reply_double(struct buf *b, int proto, double v);
/* Boolean ("#t"/"#f" / ":1"/":0"). */
int px_reply_bool(struct buf *b, int proto, bool v);
/* Header of an out-of-band push of n elements (">n" / "*n"). */
int px_reply_push(struct buf *b, int proto, size_t n);

#ifdef __cplusplus
}
#endif

#endif
