/* Client requests: the px_req object and the RESP2 request parser.
 *
 * The parser is hiredis's reader with our own object functions, so each
 * request is built straight into a px_req (argv + a byte arena) and the
 * limits are enforced as items arrive: at most max_args arguments, only
 * bulk strings, no nesting, and (checked by the caller after each feed)
 * at most max_bytes of unparsed input.
 *
 * Readers are lent: a parser holds a reader only while it has unparsed
 * bytes (a partial request), and gives it back to its px_reader_pool as
 * soon as everything received was parsed. Most requests arrive whole, so
 * an idle connection holds none (hiredis's reader is about 600 bytes) and
 * busy connections share a few cache-warm ones. */
#ifndef LP_PROXY_REQUEST_H
#define LP_PROXY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_cmd;
struct redisReader;

struct px_arg {
    const char *p; /* borrowed: points into the owning request's arena (NUL-terminated) */
    size_t len;    /* bytes */
};

enum px_req_state {
    PX_REQ_QUEUED = 0,  /* parsed, waiting behind a barrier */
    PX_REQ_RUNNING = 1, /* dispatched, reply pending */
    PX_REQ_DONE = 2,    /* reply ready, waiting for older requests */
};

struct px_req {
    struct list node;          /* in client->queued or client->running */
    struct px_client *cl;      /* borrowed: the client outlives its requests */
    enum px_req_state state;   /* see enum */
    bool blocking;             /* barrier: later requests wait for this one */
    const struct px_cmd *cmd;  /* borrowed: looked up at parse time, NULL if unknown */
    int argc;                  /* arguments, argv[0] is the command */
    struct px_arg *argv;       /* owned: argc entries (argv_inl when small) */
    char *arena;               /* owned: argument bytes (arena_inl when small) */
    size_t arena_len;          /* bytes used in arena */
    size_t arena_cap;          /* bytes available in arena */
    struct buf reply;          /* owned: reply kept until older ones are written */
    void *op;                  /* owned by the command: its in-progress state */
    struct px_arg argv_inl[6]; /* storage for small argv */
    char arena_inl[160];       /* storage for small arguments */
};

#define PX_READER_POOL_MAX 64u /* idle readers kept for reuse */

/* Idle readers, all empty (no pending byte, no partial frame, no error). */
struct px_reader_pool {
    struct redisReader *free[PX_READER_POOL_MAX]; /* owned: n readers */
    unsigned n;                                   /* readers in free */
};

struct px_parser {
    struct px_reader_pool *pool; /* borrowed: where readers come from */
    struct redisReader *reader;  /* owned while input is pending, else NULL */
    const char *err;             /* why the last frame was rejected */
    unsigned max_args;           /* most arguments per request */
    size_t max_bytes;            /* largest argument / unparsed input */
};

/* Frees the pool's readers; parsers using it must be gone. */
void px_reader_pool_deinit(struct px_reader_pool *rp);

/* rp (zeroed, or used before) must outlive the parser. */
void px_parser_init(struct px_parser *p, struct px_reader_pool *rp, unsigned max_args,
                    size_t max_bytes);
void px_parser_deinit(struct px_parser *p);

/* Adds input bytes (copied). Returns 0 or -ENOMEM. */
int px_parser_feed(struct px_parser *p, const char *data, size_t len);

/* Next complete request: 1 and *out (caller owns it; argc may be 0 for an
 * empty frame), 0 when more input is needed, -EPROTO on a rejected frame
 * (px_parser_error() says why; the stream cannot continue). */
int px_parser_next(struct px_parser *p, struct px_req **out);

/* Reason for -EPROTO, or "request too large" when too many bytes are
 * buffered without completing a request (checked here). */
const char *px_parser_error(const struct px_parser *p);

/* Unparsed bytes buffered. */
size_t px_parser_pending(const struct px_parser *p);

/* A request with no arguments (for synthetic replies); NULL on -ENOMEM. */
struct px_req *px_req_create(int argc);
void px_req_free(struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
