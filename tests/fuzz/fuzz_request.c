/* libFuzzer target: the client request parser (proxy/request.c).
 *
 * Input: byte 0 picks the limits (max_args, max_bytes, close_over_limit),
 * byte 1 seeds the chunking; the rest is what a client sends. The stream is
 * parsed whole, in pseudo-random chunks and (when short) one byte at a
 * time, each chunk copied into its own allocation of exactly its size so
 * ASan sees any read past it. Checked, besides ASan and UBSan:
 *   - every chunking gives the same requests, skipped requests and error;
 *   - a request has 1..max_args arguments, each NUL-terminated, their bytes
 *     within max_bytes; a skipped request has no argument and an error
 *     reply naming a limit, and appears only when over-limit requests are
 *     skipped;
 *   - the parser consumes all it is given, or fails; a failure is sticky,
 *     and the parser then holds nothing;
 *   - a request re-encoded by the pool's formatter parses back the same. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/compiler.h"
#include "pool/resp.h"
#include "proxy/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                              \
        }                                                                         \
    } while (0)

struct limits {
    unsigned max_args;
    size_t max_bytes;
    bool close_over_limit;
};

static struct limits limits_of(uint8_t b)
{
    static const unsigned args[] = {1, 3, 8, 64};
    static const size_t bytes[] = {8, 64, 1024, 65536};

    return (struct limits){args[b & 3], bytes[(b >> 2) & 3], (b >> 4) & 1};
}

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

enum chunking { WHOLE, RANDOM, BYTES };

static void check_req(const struct limits *lim, const struct px_req *req)
{
    size_t total = 0;

    if (req->answered) {
        CHECK(!lim->close_over_limit);
        CHECK(req->argc == 0);
        CHECK(buf_size(&req->reply) > 14 &&
              memcmp(buf_head(&req->reply), "-ERR request ", 13) == 0);
        return;
    }
    CHECK(req->argc >= 1 && (unsigned)req->argc <= lim->max_args);
    CHECK(buf_size(&req->reply) == 0 && !req->cmd && !req->op);
    for (int i = 0; i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];

        CHECK(a->p >= req->arena && a->p + a->len < req->arena + req->arena_len);
        CHECK(a->p[a->len] == '\0');
        total += a->len;
    }
    CHECK(req->arena_len <= req->arena_cap);
    CHECK(total <= lim->max_bytes);
}

/* What a run gave, in a form two runs can be compared by. */
static void render(struct buf *out, const struct px_req *req)
{
    char head[32];

    if (req->answered) {
        buf_append(out, "S", 1);
        buf_append(out, buf_head(&req->reply), buf_size(&req->reply));
        return;
    }
    snprintf(head, sizeof(head), "R%d:", req->argc);
    buf_append_str(out, head);
    for (int i = 0; i < req->argc; i++) {
        snprintf(head, sizeof(head), "%zu:", req->argv[i].len);
        buf_append_str(out, head);
        buf_append(out, req->argv[i].p, req->argv[i].len);
    }
}

/* The request, formatted by the pool and parsed again, is the same. */
static void check_round_trip(const struct px_req *req)
{
    const char *argv[64];
    size_t lens[64];
    struct px_parser p;
    struct px_req *again;
    struct buf b;
    const char *d;
    size_t left;

    if (req->answered)
        return;
    for (int i = 0; i < req->argc; i++) {
        argv[i] = req->argv[i].p;
        lens[i] = req->argv[i].len;
    }
    buf_init(&b);
    CHECK(pool__resp_command(&b, req->argc, argv, lens) == 0);
    px_parser_init(&p, (unsigned)req->argc, buf_size(&b));
    d = buf_head(&b);
    left = buf_size(&b);
    CHECK(px_parser_next(&p, &d, &left, &again) == 1 && left == 0);
    CHECK(again->argc == req->argc);
    for (int i = 0; i < req->argc; i++)
        CHECK(again->argv[i].len == req->argv[i].len &&
              memcmp(again->argv[i].p, req->argv[i].p, req->argv[i].len) == 0);
    px_req_free(again);
    px_parser_deinit(&p);
    buf_deinit(&b);
}

/* Feeds one chunk; returns false once the parser failed. */
static bool feed(struct px_parser *p, const struct limits *lim, const uint8_t *in, size_t n,
                 bool round_trip, struct buf *out)
{
    char *chunk = malloc(n);
    const char *d = chunk;
    size_t left = n;
    bool ok = true;

    CHECK(chunk);
    memcpy(chunk, in, n);
    for (;;) {
        struct px_req *req;
        int rc = px_parser_next(p, &d, &left, &req);

        CHECK(d >= chunk && left <= n && d + left == chunk + n);
        if (rc == 1) {
            check_req(lim, req);
            render(out, req);
            if (round_trip)
                check_round_trip(req);
            px_req_free(req);
            continue;
        }
        if (rc == 0) {
            CHECK(left == 0);
            break;
        }
        CHECK(rc == -EPROTO && !req);
        CHECK(!px_parser_busy(p) && !p->req && !p->line);
        buf_append(out, "E", 1);
        buf_append_str(out, px_parser_error(p));
        d = "*1\r\n$4\r\nPING\r\n";
        left = strlen(d);
        CHECK(px_parser_next(p, &d, &left, &req) == -EPROTO && !req); /* sticky */
        ok = false;
        break;
    }
    free(chunk);
    return ok;
}

/* 1..24 bytes mostly, now and then up to 4096. */
static size_t chunk_size(uint32_t r)
{
    return 1 + (r % 97 == 0 ? (r >> 8) % 4096 : r % 24);
}

static bool same(const struct buf *a, const struct buf *b)
{
    return buf_size(a) == buf_size(b) &&
           (buf_size(a) == 0 || memcmp(buf_head(a), buf_head(b), buf_size(a)) == 0);
}

static void run(const uint8_t *in, size_t len, const struct limits *lim, enum chunking how,
                uint32_t seed, struct buf *out)
{
    struct px_parser p;
    size_t off = 0;

    px_parser_init(&p, lim->max_args, lim->max_bytes);
    p.close_over_limit = lim->close_over_limit;
    while (off < len) {
        size_t n = len - off;

        size_t most = chunk_size(next_rand(&seed));

        if (how == BYTES)
            n = 1;
        else if (how == RANDOM)
            n = LP_MIN(n, most);
        if (!feed(&p, lim, in + off, n, how == WHOLE, out))
            break;
        off += n;
    }
    if (off >= len && px_parser_busy(&p))
        buf_append(out, "B", 1);
    px_parser_deinit(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf whole, other;
    struct limits lim;
    uint32_t seed;

    if (size < 2)
        return 0;
    lim = limits_of(data[0]);
    seed = (uint32_t)data[1] * 2654435761u + 1;
    data += 2;
    size -= 2;
    buf_init(&whole);
    buf_init(&other);
    run(data, size, &lim, WHOLE, seed, &whole);
    run(data, size, &lim, RANDOM, seed, &other);
    CHECK(same(&whole, &other));
    if (size <= 512) {
        buf_reset(&other);
        run(data, size, &lim, BYTES, seed, &other);
        CHECK(same(&whole, &other));
    }
    buf_deinit(&whole);
    buf_deinit(&other);
    return 0;
}
