/* RESP glue for the pool: commands are formatted as arrays of bulk strings
 * straight into a connection's output buffer (no intermediate copy), and
 * upstream replies are parsed by the pool's own reader (reader.c) into
 * the pool's reply type (reply.h).
 *
 * Formatting is all-or-nothing: every command function reserves the exact
 * size first, so on -ENOMEM nothing was appended and the output stream is
 * never left holding half a command. */
#ifndef LP_POOL_RESP_H
#define LP_POOL_RESP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes "$<n>\r\n<n bytes>\r\n" takes. */
size_t pool__resp_bulk_size(size_t n);

/* Bytes the bulks of argv take (lens NULL: NUL-terminated strings). */
size_t pool__resp_args_size(int argc, const char *const *argv, const size_t *lens);

/* Appends "*<n>\r\n". Returns 0 or -ENOMEM (nothing appended). */
int pool__resp_array(struct buf *b, size_t n);

/* Appends one bulk string (binary-safe). Returns 0 or -ENOMEM. */
int pool__resp_bulk(struct buf *b, const void *p, size_t n);

/* Appends a whole command: argc >= 1 bulks (lens NULL: NUL-terminated).
 * Returns 0 or -ENOMEM (nothing appended). */
int pool__resp_command(struct buf *b, int argc, const char *const *argv, const size_t *lens);

/* Appends one command made of pre[0..npre) followed by argv[0..argc)
 * (either lens array may be NULL). Returns 0 or -ENOMEM. */
int pool__resp_command_split(struct buf *b, int npre, const char *const *pre, const size_t *prelens,
                             int argc, const char *const *argv, const size_t *lens);

/* Appends an EVALSHA: "*<argc + 3>", the script's "EVALSHA <sha>" bulks
 * already encoded in pre[0..prelen), the numkeys bulk nk, then argv.
 * tail_size is the caller's pool__resp_bulk_size(nklen) +
 * pool__resp_args_size(argc, argv, lens) (it sizes the kept tail with it
 * too). Returns 0 or -ENOMEM (nothing appended). */
int pool__resp_evalsha(struct buf *b, const char *pre, size_t prelen, const char *nk, size_t nklen,
                       int argc, const char *const *argv, const size_t *lens, size_t tail_size);

/* Appends one command made of pre[0..npre) followed by nraw arguments that
 * are already formatted as bulks in raw[0..rawlen) (a tail captured from an
 * earlier command). Returns 0 or -ENOMEM. */
int pool__resp_command_raw(struct buf *b, int npre, const char *const *pre, const size_t *prelens,
                           size_t nraw, const char *raw, size_t rawlen);

/* Decimal text of v into out (at least 21 bytes, NUL-terminated). Returns
 * the length. */
size_t pool__resp_u64(char *out, unsigned long long v);

/* The largest and deepest array reply the pool accepts (its own replies
 * have at most a renew batch of elements, two levels deep); more fails the
 * reader with a protocol error, as hiredis 0.14 does past 7 levels. */
#define POOL__RESP_MAX_ELEMENTS 65536u
#define POOL__RESP_MAX_DEPTH    7u

/* Why a reader failed (the values of hiredis's REDIS_ERR_PROTOCOL and
 * REDIS_ERR_OOM). */
#define POOL__RESP_ERR_PROTOCOL 4
#define POOL__RESP_ERR_OOM      5

/* The reply reader (reader.c): RESP2 replies as struct pool_reply trees,
 * arrays capped as above. */
struct pool__resp_reader {
    struct buf in;    /* owned: received bytes not yet taken as replies */
    int err;          /* 0, or POOL__RESP_ERR_PROTOCOL / POOL__RESP_ERR_OOM once failed */
    char errstr[128]; /* why it failed */
};

/* A new reader, or NULL on allocation failure. */
struct pool__resp_reader *pool__resp_reader_create(void);

/* Frees rd (NULL: nothing). */
void pool__resp_reader_free(struct pool__resp_reader *rd);

/* Feeds received bytes (copied). Returns 0, or -EPROTO once the reader has
 * failed (sticky), -ENOMEM. */
int pool__resp_feed(struct pool__resp_reader *rd, const char *p, size_t n);

/* Takes the next complete reply: returns 1 and *out (owned by the caller,
 * pool__resp_free), 0 when more bytes are needed, or -EPROTO on a protocol
 * error (the reader stays failed; the connection must be dropped). */
int pool__resp_next(struct pool__resp_reader *rd, struct pool_reply **out);

/* What made rd fail. */
const char *pool__resp_reader_error(const struct pool__resp_reader *rd);

/* Frees a reply of pool__resp_next() (NULL: nothing), keeping its records
 * for the next replies of this thread. */
void pool__resp_free(struct pool_reply *r);

/* Write one bulk, or argc bulks, at p (sized by the caller with
 * pool__resp_bulk_size / pool__resp_args_size); return the end. */
char *pool__resp_put_bulk_at(char *p, const void *s, size_t n);
char *pool__resp_put_args_at(char *p, int argc, const char *const *argv, const size_t *lens);

/* True for an error reply whose text starts with prefix ("NOSCRIPT"). */
bool pool__resp_is_error(const struct pool_reply *r, const char *prefix);

/* True for a string/status reply equal to lit, ignoring case. */
bool pool__resp_str_is(const struct pool_reply *r, const char *lit);

#ifdef __cplusplus
}
#endif

#endif
