/* Client requests: the px_req object and the request parser.
 *
 * Clients send arrays of bulk strings ("*2\r\n$4\r\nLOCK\r\n$1\r\na\r\n")
 * or inline commands (a line split on blanks with Redis's quoting rules, as
 * typed into telnet or nc). The parser reads the caller's input in place,
 * one request at a time, and builds each request straight into a px_req:
 * each argument is copied once, into the request's arena (inline storage
 * for small requests), because requests outlive the read buffer (they wait
 * behind barriers and for Redis).
 *
 * Limits are enforced from the headers, as bytes arrive: a request may have
 * at most max_args arguments and max_bytes bytes on the wire (headers
 * included). A well-formed request over a limit is skipped without being
 * buffered (its remaining bytes are counted and discarded as they arrive)
 * and comes out as an already answered px_req holding the error reply, so
 * the connection goes on; with close_over_limit (before AUTH) it is a
 * protocol error instead, as in Redis. Malformed framing is a protocol
 * error (px_parser_error() words it as Redis does); the stream cannot be
 * resynchronised after one.
 *
 * Memory: between requests the parser holds nothing but its own fields. A
 * partial request keeps the px_req being built (or, for an inline command
 * split across reads, the line so far), so an idle connection holds no
 * parser memory. */
#ifndef LP_PROXY_REQUEST_H
#define LP_PROXY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/list.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_cmd;

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
    bool answered;             /* argc == 0 and reply holds its answer (a skipped request) */
    bool in_exec;              /* one of an EXEC's commands: never waits (multi.h) */
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

/* Where the parser is in the input stream. */
enum px_parse_state {
    PX_PARSE_START = 0, /* between requests: '*' starts a multibulk, anything else a line */
    PX_PARSE_COUNT,     /* in "*<count>\r\n" */
    PX_PARSE_BULK_TYPE, /* expecting the '$' of the next argument */
    PX_PARSE_BULK_LEN,  /* in "$<len>\r\n" */
    PX_PARSE_BULK_BODY, /* reading (or skipping) an argument's bytes */
    PX_PARSE_BULK_END,  /* the "\r\n" after an argument */
    PX_PARSE_INLINE,    /* an inline command split across reads (in line) */
    PX_PARSE_FAILED,    /* a protocol error was reported: sticky */
};

struct px_parser {
    struct px_req *req; /* owned: the request being built, or NULL (between requests, skipping) */
    char *line;         /* owned: the partial inline line (PX_PARSE_INLINE), else NULL */
    size_t max_bytes;   /* largest request on the wire, and longest inline line */
    unsigned max_args;  /* most arguments per request */
    bool close_over_limit; /* a request over a limit is a protocol error (before AUTH) */
    uint8_t state;         /* enum px_parse_state */
    uint8_t err;           /* why it failed, or why the current request is skipped */
    uint8_t hflags;        /* header line being read: sign, leading zero, bad char, CR seen */
    uint32_t hlen;         /* header chars after the type byte, or bytes in line */
    uint32_t args_left;    /* arguments still to read in this request, the current one included */
    uint64_t num;          /* header value so far, or argument bytes still to read */
    size_t req_bytes;      /* this request's bytes on the wire so far */
};

/* Limits may be changed at any time by assigning the fields (AUTH, reload):
 * they apply from the next header read. */
void px_parser_init(struct px_parser *p, unsigned max_args, size_t max_bytes);
void px_parser_deinit(struct px_parser *p);

/* Parses from *data (*len bytes, borrowed for the call only): consumes input
 * and returns 1 with the next request in *out (the caller owns it; a skipped
 * request is answered: see px_req.answered), 0 once every byte was consumed
 * (a partial request is kept), -EPROTO on malformed input or a limit with
 * close_over_limit, -ENOMEM. After an error every call fails again;
 * px_parser_error() says why. *data and *len are advanced past what was
 * consumed. */
int px_parser_next(struct px_parser *p, const char **data, size_t *len, struct px_req **out);

/* Why the parser failed, worded as Redis words it without its "Protocol
 * error: " prefix (e.g. "invalid bulk length"). Valid until the next call. */
const char *px_parser_error(const struct px_parser *p);

/* True while a request is partly read (the parser may hold memory). */
bool px_parser_busy(const struct px_parser *p);

/* A request with argc arguments and no bytes (for synthetic replies); NULL
 * on -ENOMEM. */
struct px_req *px_req_create(int argc);
void px_req_free(struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
