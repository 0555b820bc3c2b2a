/* Client requests and the request parser; see request.h.
 *
 * Design. One state machine (enum px_parse_state) reads a multibulk
 * request field by field, so any chunking of the input gives the same
 * result:
 *
 *   START --'*'--> COUNT --> BULK_TYPE --'$'--> BULK_LEN --> BULK_BODY
 *     ^  \                     ^                              |
 *     |   '--other--> (a line) |                              v
 *     |                        '------ more arguments ---- BULK_END
 *     '------------------------- last argument ---------------'
 *
 * Header lines ("*<n>\r\n", "$<n>\r\n") are not buffered: their digits are
 * checked and accumulated as they arrive with the rules of Redis's
 * string2ll (optional '-', no leading zero, at most 20 chars) and judged
 * at their "\r\n", like Redis; a header line longer than max_bytes is
 * "too big". An inline command whose line is complete in the input is
 * split in place; only a line split across reads is copied (into line).
 *
 * Invariants:
 *   - between requests (START) req and line are NULL and nothing is owed;
 *   - req != NULL only in COUNT..BULK_END of a request within the limits;
 *     while it is built, argv[i].p holds an arena offset (the arena may
 *     move as it grows) and becomes a pointer when the request completes;
 *   - err != ERR_NONE in BULK_* states means the request is over a limit
 *     and is being skipped (req is NULL): its bytes are only counted;
 *   - FAILED is final; req and line are freed on entry.
 *
 * The parser owns req and line until it hands a request out; px_req_free
 * frees a request whoever holds it. */
#include "proxy/request.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "common/spares.h"
#include "proxy/reply.h"
#include "proxy/split.h"

/* Redis's proto-max-bulk-len default: a longer bulk is invalid, not merely
 * over our limit. */
#define PROTO_MAX_BULK (512ull * 1024 * 1024)

/* string2ll accepts at most 20 characters. */
#define HDR_MAX_CHARS 20u

/* A header value stops growing here: past INT_MAX and PROTO_MAX_BULK, every
 * larger value is equally invalid. */
#define HDR_SAT (1ull << 40)

enum hdr_flag {
    HDR_NEG = 1u << 0,  /* a leading '-' */
    HDR_ZERO = 1u << 1, /* the first digit was '0' */
    HDR_BAD = 1u << 2,  /* not a number string2ll accepts */
    HDR_CR = 1u << 3,   /* the '\r' was read; '\n' must follow */
};

enum parse_err {
    ERR_NONE = 0,
    ERR_MBULK,      /* invalid multibulk length */
    ERR_BULK,       /* invalid bulk length */
    ERR_DOLLAR,     /* expected '$' (the byte is in num) */
    ERR_QUOTES,     /* unbalanced quotes */
    ERR_BIG_INLINE, /* inline line over max_bytes */
    ERR_BIG_MBULK,  /* "*..." header line over max_bytes */
    ERR_BIG_BULK,   /* "$..." header line over max_bytes */
    ERR_UNAUTH_MBULK,
    ERR_UNAUTH_BULK,
    ERR_NOMEM,
    ERR_OVER_ARGS,  /* skipping: more than max_args arguments */
    ERR_OVER_BYTES, /* skipping: more than max_bytes bytes */
};

/* ---- requests -------------------------------------------------------------- */

/* Freed request records kept for the next ones (one per request otherwise
 * goes through malloc and free). */
static _Thread_local struct spares req_spares;

struct px_req *px_req_create(int argc)
{
    struct px_req *req = spares_get(&req_spares);

    if (!req && !(req = malloc(sizeof(*req))))
        return NULL;
    memset(req, 0, offsetof(struct px_req, argv_inl));
    list_init(&req->node);
    buf_init(&req->reply);
    req->argc = argc;
    req->argv = req->argv_inl;
    if ((size_t)argc > LP_ARRAY_SIZE(req->argv_inl)) {
        req->argv = calloc((size_t)argc, sizeof(*req->argv));
        if (!req->argv) {
            px_req_free(req);
            return NULL;
        }
    }
    req->arena = req->arena_inl;
    req->arena_cap = sizeof(req->arena_inl);
    return req;
}

void px_req_free(struct px_req *req)
{
    if (req->argv != req->argv_inl)
        free(req->argv);
    if (req->arena != req->arena_inl)
        free(req->arena);
    if (req->reply.data)
        buf_deinit(&req->reply);
    if (!spares_put(&req_spares, req))
        free(req);
}

/* Makes room for need bytes in the arena. Returns 0 or -ENOMEM. */
static int arena_reserve(struct px_req *req, size_t need)
{
    size_t cap = req->arena_cap;
    char *na;

    if (need <= cap)
        return 0;
    while (cap < need)
        cap *= 2;
    na = req->arena == req->arena_inl ? malloc(cap) : realloc(req->arena, cap);
    if (!na)
        return -ENOMEM;
    if (req->arena == req->arena_inl)
        memcpy(na, req->arena_inl, req->arena_len);
    req->arena = na;
    req->arena_cap = cap;
    return 0;
}

/* Turns arena offsets into pointers once the request is complete. */
static void req_fix_args(struct px_req *req)
{
    int i;

    for (i = 0; i < req->argc; i++)
        req->argv[i].p = req->arena + (uintptr_t)req->argv[i].p;
}

/* ---- parser state ------------------------------------------------------------ */

void px_parser_init(struct px_parser *p, unsigned max_args, size_t max_bytes)
{
    memset(p, 0, sizeof(*p));
    p->state = PX_PARSE_START;
    p->max_args = max_args;
    p->max_bytes = max_bytes;
}

static void parser_drop(struct px_parser *p)
{
    if (p->req)
        px_req_free(p->req);
    p->req = NULL;
    free(p->line);
    p->line = NULL;
}

void px_parser_deinit(struct px_parser *p)
{
    parser_drop(p);
}

bool px_parser_busy(const struct px_parser *p)
{
    return p->state != PX_PARSE_START && p->state != PX_PARSE_FAILED;
}

static int parser_fail(struct px_parser *p, enum parse_err err)
{
    parser_drop(p);
    p->state = PX_PARSE_FAILED;
    p->err = err;
    return err == ERR_NOMEM ? -ENOMEM : -EPROTO;
}

const char *px_parser_error(const struct px_parser *p)
{
    static _Thread_local char msg[32];
    unsigned char c = (unsigned char)p->num;

    switch (p->err) {
    case ERR_MBULK:
        return "invalid multibulk length";
    case ERR_BULK:
        return "invalid bulk length";
    case ERR_DOLLAR:
        if (c >= 0x20 && c < 0x7f)
            snprintf(msg, sizeof(msg), "expected '$', got '%c'", c);
        else
            snprintf(msg, sizeof(msg), "expected '$', got '\\x%02x'", c);
        return msg;
    case ERR_QUOTES:
        return "unbalanced quotes in request";
    case ERR_BIG_INLINE:
        return "too big inline request";
    case ERR_BIG_MBULK:
        return "too big mbulk count string";
    case ERR_BIG_BULK:
        return "too big bulk count string";
    case ERR_UNAUTH_MBULK:
        return "unauthenticated multibulk length";
    case ERR_UNAUTH_BULK:
        return "unauthenticated bulk length";
    case ERR_NOMEM:
        return "out of memory";
    default:
        return "none";
    }
}

/* ---- header lines -------------------------------------------------------------- */

static void hdr_start(struct px_parser *p, uint8_t state)
{
    p->state = state;
    p->hflags = 0;
    p->hlen = 0;
    p->num = 0;
}

/* One character of a header number, after its type byte. */
static void hdr_char(struct px_parser *p, char c)
{
    bool first_digit = p->hlen == 0 || (p->hlen == 1 && (p->hflags & HDR_NEG));

    if (c == '-' && p->hlen == 0) {
        p->hflags |= HDR_NEG;
    } else if (c >= '0' && c <= '9') {
        if (first_digit && c == '0')
            p->hflags |= (p->hflags & HDR_NEG) ? HDR_BAD : HDR_ZERO;
        else if (p->hflags & HDR_ZERO)
            p->hflags |= HDR_BAD; /* a leading zero */
        p->num = LP_MIN(p->num * 10 + (uint64_t)(c - '0'), HDR_SAT);
    } else {
        p->hflags |= HDR_BAD;
    }
    if (++p->hlen > HDR_MAX_CHARS)
        p->hflags |= HDR_BAD;
}

/* Reads a header line up to its "\r\n". Returns 1 when it is complete (then
 * hdr_valid() tells whether it holds a number), 0 when more input is
 * needed, -1 when the line is longer than max_bytes. */
static int hdr_scan(struct px_parser *p, const char **s, const char *end)
{
    while (*s < end) {
        char c = *(*s)++;

        if (p->hflags & HDR_CR) {
            if (c != '\n')
                p->hflags |= HDR_BAD;
            p->req_bytes += p->hlen + 3; /* type byte and "\r\n" */
            return 1;
        }
        if (c == '\r')
            p->hflags |= HDR_CR;
        else
            hdr_char(p, c);
        if (p->hlen + 1 > p->max_bytes)
            return -1;
    }
    return 0;
}

static bool hdr_valid(const struct px_parser *p)
{
    bool neg = p->hflags & HDR_NEG;

    return !(p->hflags & HDR_BAD) && p->hlen > (neg ? 1u : 0u);
}

/* ---- multibulk requests ----------------------------------------------------------- */

/* A request over a limit: skip it (answered later) or, before AUTH, fail. */
static int over_limit(struct px_parser *p, enum parse_err why)
{
    if (p->close_over_limit)
        return parser_fail(p, why == ERR_OVER_ARGS ? ERR_UNAUTH_MBULK : ERR_UNAUTH_BULK);
    if (p->req)
        px_req_free(p->req);
    p->req = NULL;
    p->err = why;
    return 0;
}

static int on_count(struct px_parser *p)
{
    bool neg = p->hflags & HDR_NEG;
    uint64_t n = p->num;

    if (!hdr_valid(p) || (!neg && n > INT_MAX))
        return parser_fail(p, ERR_MBULK);
    if (neg || n == 0) { /* Redis ignores an empty or negative multibulk */
        p->state = PX_PARSE_START;
        return 0;
    }
    p->args_left = (uint32_t)n;
    p->err = ERR_NONE;
    hdr_start(p, PX_PARSE_BULK_TYPE);
    if (n > p->max_args)
        return over_limit(p, ERR_OVER_ARGS);
    p->req = px_req_create((int)p->args_left);
    return p->req ? 0 : parser_fail(p, ERR_NOMEM);
}

static int on_bulk_len(struct px_parser *p)
{
    struct px_req *req;
    uint64_t len = p->num;
    int i;

    if (!hdr_valid(p) || (p->hflags & HDR_NEG) || len > PROTO_MAX_BULK)
        return parser_fail(p, ERR_BULK);
    p->state = len ? PX_PARSE_BULK_BODY : PX_PARSE_BULK_END;
    p->hlen = 0; /* BULK_END counts its "\r\n" here */
    if (p->err == ERR_NONE && p->req_bytes + len + 2 > p->max_bytes) {
        int rc = over_limit(p, ERR_OVER_BYTES);

        if (rc < 0)
            return rc;
    }
    p->req_bytes += len + 2;
    if (p->err != ERR_NONE)
        return 0;
    req = p->req;
    if (arena_reserve(req, req->arena_len + len + 1) < 0)
        return parser_fail(p, ERR_NOMEM);
    i = req->argc - (int)p->args_left;
    req->argv[i].p = (const char *)(uintptr_t)req->arena_len;
    req->argv[i].len = len;
    return 0;
}

static void on_bulk_body(struct px_parser *p, const char **s, const char *end)
{
    size_t n = (size_t)LP_MIN(p->num, (uint64_t)(end - *s));
    struct px_req *req = p->req;

    if (req) {
        memcpy(req->arena + req->arena_len, *s, n);
        req->arena_len += n;
    }
    *s += n;
    p->num -= n;
    if (p->num == 0)
        p->state = PX_PARSE_BULK_END;
}

/* The skipped request's answer: an error naming the limit. */
static struct px_req *skipped_request(const struct px_parser *p)
{
    struct px_req *req = px_req_create(0);
    int rc;

    if (!req)
        return NULL;
    req->answered = true;
    if (p->err == ERR_OVER_ARGS)
        rc = px_reply_error(&req->reply, "ERR request has more than %u arguments (--max-args)",
                            p->max_args);
    else
        rc = px_reply_error(&req->reply,
                            "ERR request is larger than %zu bytes (--max-request-bytes)",
                            p->max_bytes);
    if (rc < 0) {
        px_req_free(req);
        return NULL;
    }
    return req;
}

/* An argument and its "\r\n" were read. Returns 1 with *out when that was
 * the request's last argument, else 0. */
static int arg_done(struct px_parser *p, struct px_req **out)
{
    if (p->req)
        p->req->arena[p->req->arena_len++] = '\0';
    if (--p->args_left > 0) {
        hdr_start(p, PX_PARSE_BULK_TYPE);
        return 0;
    }
    p->state = PX_PARSE_START;
    if (p->err != ERR_NONE) {
        *out = skipped_request(p);
        p->err = ERR_NONE;
        return *out ? 1 : parser_fail(p, ERR_NOMEM);
    }
    req_fix_args(p->req);
    *out = p->req;
    p->req = NULL;
    return 1;
}

/* One byte of the "\r\n" after an argument. Returns as arg_done(), or <0
 * on a bad terminator. */
static int on_bulk_end(struct px_parser *p, char c, struct px_req **out)
{
    if (c != "\r\n"[p->hlen])
        return parser_fail(p, ERR_BULK); /* the argument was longer than its header said */
    if (++p->hlen < 2)
        return 0;
    return arg_done(p, out);
}

/* ---- inline commands --------------------------------------------------------------- */

/* A complete inline line (without its line end). Returns 1 with *out, 0
 * for an empty line (ignored, as in Redis), <0 on failure. */
static int on_line(struct px_parser *p, const char *line, size_t len, struct px_req **out)
{
    struct px_split sp = {NULL, 0, 0};

    if (px_split_line(&sp, line, len) < 0)
        return parser_fail(p, ERR_QUOTES);
    if (sp.argc == 0)
        return 0;
    if ((unsigned)sp.argc > p->max_args) {
        if (over_limit(p, ERR_OVER_ARGS) < 0)
            return -EPROTO;
        *out = skipped_request(p);
        p->err = ERR_NONE;
        return *out ? 1 : parser_fail(p, ERR_NOMEM);
    }
    sp.req = px_req_create(sp.argc);
    if (!sp.req || arena_reserve(sp.req, sp.bytes) < 0) {
        if (sp.req)
            px_req_free(sp.req);
        return parser_fail(p, ERR_NOMEM);
    }
    sp.argc = 0;
    px_split_line(&sp, line, len);
    *out = sp.req;
    return 1;
}

/* Bytes of a partial line that count against max_bytes: a final '\r' may
 * be the start of its "\r\n". */
static size_t line_len_so_far(const char *line, size_t n)
{
    return n > 0 && line[n - 1] == '\r' ? n - 1 : n;
}

/* Appends a partial line to p->line. Returns 0 or <0 (too long, -ENOMEM). */
static int line_keep(struct px_parser *p, const char *s, size_t n)
{
    char *nl;

    if (p->hlen + n > p->max_bytes + 1 || (p->hlen + n > p->max_bytes && s[n - 1] != '\r'))
        return parser_fail(p, ERR_BIG_INLINE);
    nl = realloc(p->line, p->hlen + n);
    if (!nl)
        return parser_fail(p, ERR_NOMEM);
    memcpy(nl + p->hlen, s, n);
    p->line = nl;
    p->hlen += (uint32_t)n;
    p->state = PX_PARSE_INLINE;
    return 0;
}

/* Reads an inline line from *s: splits it in place when its '\n' is in the
 * input, else keeps what there is. Returns as on_line(). */
static int parse_inline(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    const char *nl = memchr(*s, '\n', (size_t)(end - *s));
    const char *line = *s;
    size_t n;
    int rc;

    if (!nl) {
        rc = line_keep(p, *s, (size_t)(end - *s));
        *s = end;
        return rc;
    }
    *s = nl + 1;
    n = (size_t)(nl - line);
    if (p->line) { /* the start came in earlier reads */
        if (n > 0 && line_keep(p, line, n) < 0)
            return -EPROTO;
        line = p->line;
        n = p->hlen;
    }
    n = line_len_so_far(line, n);
    if (n > p->max_bytes)
        rc = parser_fail(p, ERR_BIG_INLINE);
    else
        rc = on_line(p, line, n, out);
    free(p->line);
    p->line = NULL;
    if (p->state != PX_PARSE_FAILED)
        p->state = PX_PARSE_START;
    return rc;
}

/* ---- the loop ---------------------------------------------------------------------- */

/* The usual header, whole in the input: up to 18 digits (no sign, no
 * leading zero) then "\r\n". Returns the bytes after the type byte, with
 * the value in *v, or 0 to leave the header to the byte-wise reader. */
static size_t hdr_fast(const char *s, const char *end, uint64_t *v)
{
    size_t avail = (size_t)(end - s), max = avail >= 20 ? 18 : avail >= 2 ? avail - 2 : 0, i;
    uint64_t n = 0;

    for (i = 0; i < max && s[i] >= '0' && s[i] <= '9'; i++)
        n = n * 10 + (uint64_t)(s[i] - '0');
    if (i == 0 || i + 2 > avail || s[i] != '\r' || s[i + 1] != '\n' || (s[0] == '0' && i > 1))
        return 0;
    *v = n;
    return i + 2;
}

/* A header line (the type byte was read): whole in one go when it can be,
 * else byte by byte. Goes on to on_count() or on_bulk_len(). */
static int parse_header(struct px_parser *p, const char **s, const char *end)
{
    bool count = p->state == PX_PARSE_COUNT;
    size_t n = p->hlen == 0 && p->hflags == 0 ? hdr_fast(*s, end, &p->num) : 0;
    int rc;

    if (n > 0 && n - 1 > p->max_bytes)
        n = 0; /* too long for a line: the byte-wise reader says so */
    if (n > 0) {
        *s += n;
        p->hlen = (uint32_t)(n - 2);
        p->req_bytes += n + 1;
    } else {
        rc = hdr_scan(p, s, end);
        if (rc < 0)
            return parser_fail(p, count ? ERR_BIG_MBULK : ERR_BIG_BULK);
        if (rc == 0)
            return 0;
    }
    return count ? on_count(p) : on_bulk_len(p);
}

/* An argument's bytes; with its "\r\n" when all of it is in the input. */
static int parse_body(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    size_t len = (size_t)p->num;

    if (p->state == PX_PARSE_BULK_BODY && (size_t)(end - *s) >= len + 2 && (*s)[len] == '\r' &&
        (*s)[len + 1] == '\n') {
        if (p->req) {
            memcpy(p->req->arena + p->req->arena_len, *s, len);
            p->req->arena_len += len;
        }
        *s += len + 2;
        return arg_done(p, out);
    }
    on_bulk_body(p, s, end);
    return 0;
}

/* An argument from its '$': header, bytes and "\r\n" in one go when they
 * are all in the input. */
static int parse_bulk(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    int rc;

    if (**s != '$') {
        p->num = (unsigned char)**s;
        return parser_fail(p, ERR_DOLLAR);
    }
    (*s)++;
    hdr_start(p, PX_PARSE_BULK_LEN);
    if (*s == end)
        return 0;
    rc = parse_header(p, s, end);
    if (rc != 0 || p->state != PX_PARSE_BULK_BODY || *s == end)
        return rc;
    return parse_body(p, s, end, out);
}

/* Most arguments parse_whole() takes (more go the long way). */
#define WHOLE_MAX_ARGS 16

/* The usual case, a whole well-formed request within the limits in the
 * input, read in one pass with nothing kept in p, then copied into a
 * px_req sized at once. *s is at the '*'. Returns 1 with *out, 0 to leave
 * the request to the state machine (incomplete, unusual, over a limit or
 * malformed: it decides what that means), -ENOMEM. */
static int parse_whole(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    const char *q = *s + 1, *argp[WHOLE_MAX_ARGS];
    uint64_t argc, lens[WHOLE_MAX_ARGS];
    size_t n = hdr_fast(q, end, &argc), bytes = 0, i;
    struct px_req *req;

    if (n == 0 || argc == 0 || argc > WHOLE_MAX_ARGS || argc > p->max_args)
        return 0;
    q += n;
    for (i = 0; i < argc; i++) {
        if (q == end || *q != '$' || (n = hdr_fast(q + 1, end, &lens[i])) == 0)
            return 0;
        q += 1 + n;
        if (lens[i] > PROTO_MAX_BULK || (size_t)(end - q) < lens[i] + 2 || q[lens[i]] != '\r' ||
            q[lens[i] + 1] != '\n')
            return 0;
        argp[i] = q;
        bytes += lens[i] + 1;
        q += lens[i] + 2;
    }
    if ((size_t)(q - *s) > p->max_bytes)
        return 0;
    req = px_req_create((int)argc);
    if (!req || arena_reserve(req, bytes) < 0) {
        if (req)
            px_req_free(req);
        return parser_fail(p, ERR_NOMEM);
    }
    for (i = 0; i < argc; i++) {
        char *dst = req->arena + req->arena_len;

        memcpy(dst, argp[i], lens[i]);
        dst[lens[i]] = '\0';
        req->argv[i].p = dst;
        req->argv[i].len = lens[i];
        req->arena_len += lens[i] + 1;
    }
    *s = q;
    *out = req;
    return 1;
}

static int parse_start(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    int rc;

    if (**s != '*') {
        p->hlen = 0;
        return parse_inline(p, s, end, out);
    }
    rc = parse_whole(p, s, end, out);
    if (rc != 0)
        return rc;
    (*s)++;
    p->req_bytes = 0;
    hdr_start(p, PX_PARSE_COUNT);
    return *s == end ? 0 : parse_header(p, s, end);
}

static int parse_step(struct px_parser *p, const char **s, const char *end, struct px_req **out)
{
    switch (p->state) {
    case PX_PARSE_START:
        return parse_start(p, s, end, out);
    case PX_PARSE_COUNT:
    case PX_PARSE_BULK_LEN:
        return parse_header(p, s, end);
    case PX_PARSE_BULK_TYPE:
        return parse_bulk(p, s, end, out);
    case PX_PARSE_BULK_BODY:
        return parse_body(p, s, end, out);
    case PX_PARSE_BULK_END:
        return on_bulk_end(p, *(*s)++, out);
    case PX_PARSE_INLINE:
        return parse_inline(p, s, end, out);
    default:
        return -EPROTO;
    }
}

int px_parser_next(struct px_parser *p, const char **data, size_t *len, struct px_req **out)
{
    const char *s = *data, *end = s + *len;
    int rc = 0;

    *out = NULL;
    if (p->state == PX_PARSE_FAILED)
        return p->err == ERR_NOMEM ? -ENOMEM : -EPROTO;
    while (rc == 0 && s < end)
        rc = parse_step(p, &s, end, out);
    *data = s;
    *len = (size_t)(end - s);
    return rc;
}
