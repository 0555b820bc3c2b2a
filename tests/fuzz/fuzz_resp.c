/* libFuzzer target: the pool's upstream reply path without a live Redis.
 *
 * Input: byte 0 seeds the chunking; the rest is what Redis sends. The bytes
 * go through pool/reader.c as the pool uses them (pool__resp_feed in chunks,
 * pool__resp_next until it needs more or fails), whole and in
 * pseudo-random chunks, and every reply is then handed to the pool's
 * pub/sub interpretation (pool__pubsub_reply) while three channels have
 * listeners, which stop, restart or stop each other on some messages (the
 * re-entrancy pubsub.c promises). Lock-script replies are interpreted by
 * the engine (proxy/), not reachable here: see README.md.
 *
 * Checked, besides ASan and UBSan: chunking does not change the replies or
 * where the stream fails; replies are well formed (a string has its bytes
 * and a NUL after them, an array its elements, within the pool's caps); a
 * failure is sticky. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool-int.h"
#include "pool/pool.h"
#include "pool/resp.h"
#include "sched/loop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                              \
        }                                                                         \
    } while (0)

#define NCHAN 3

static struct pool *pool;
static struct pool_sub subs[NCHAN];
static const char *const chans[NCHAN] = {"ch0", "ch1", "redisson_lock__channel:{a}"};
static unsigned events;

static void on_sub(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len);

static unsigned sub_index(const struct pool_sub *s)
{
    return (unsigned)(s - subs);
}

static void sub_start(unsigned i)
{
    int rc = pool_sub_start(pool, &subs[i], chans[i], strlen(chans[i]), on_sub);

    CHECK(rc == 0 || rc == -EEXIST);
}

/* Listeners act on the first byte of a message: 's' stops this
 * subscription, 'r' restarts it, 'o' stops the next one. */
static void on_sub(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    unsigned i = sub_index(s);

    CHECK(i < NCHAN && s->chan != NULL);
    events++;
    if (ev != POOL_SUB_MESSAGE)
        return;
    CHECK(msg != NULL || len == 0);
    if (len == 0)
        return;
    if (msg[0] == 's') {
        pool_sub_stop(pool, s);
    } else if (msg[0] == 'r') {
        pool_sub_stop(pool, s);
        sub_start(i);
    } else if (msg[0] == 'o') {
        pool_sub_stop(pool, &subs[(i + 1) % NCHAN]);
    }
}

static void setup(void)
{
    struct sched_loop_opts lo = {SCHED_IO_EPOLL, 16, 4};
    struct sched_loop *loop;
    struct pool_opts po;

    if (pool)
        return;
    log_set_level(LOG_LVL_ERROR); /* error replies are logged at warn: one line per input */
    CHECK(sched_loop_create(&loop, &lo) == 0);
    pool_opts_default(&po);
    po.port = 1; /* never started: no connection is made */
    CHECK(pool_create(&pool, loop, &po, NULL, 0) == 0);
}

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Checks r's shape and appends a canonical form of it to out. */
static void render(struct buf *out, const struct pool_reply *r, unsigned depth)
{
    char head[64];

    snprintf(head, sizeof(head), "%d:%lld:%zu:%zu:", r->type, r->integer, r->len, r->elements);
    buf_append_str(out, head);
    switch (r->type) {
    case POOL_REPLY_STRING:
    case POOL_REPLY_STATUS:
    case POOL_REPLY_ERROR:
        CHECK(r->str != NULL && r->str[r->len] == '\0');
        buf_append(out, r->str, r->len);
        break;
    case POOL_REPLY_ARRAY:
        CHECK(depth <= POOL__RESP_MAX_DEPTH);
        CHECK(r->elements <= POOL__RESP_MAX_ELEMENTS);
        CHECK(r->elements == 0 || r->element != NULL);
        for (size_t i = 0; i < r->elements; i++) {
            CHECK(r->element[i] != NULL);
            render(out, r->element[i], depth + 1);
        }
        break;
    default:
        break;
    }
}

/* Parses in[0..len) in chunks (whole when seed is 0); renders the replies
 * and delivers each to the pub/sub interpretation when deliver is set. */
static void run(const uint8_t *in, size_t len, uint32_t seed, bool deliver, struct buf *out)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    size_t off = 0;
    bool failed = false;

    CHECK(rd);
    while (off < len && !failed) {
        size_t n = len - off;
        char *chunk;
        struct pool_reply *r;
        int rc;

        if (seed) {
            size_t most = 1 + next_rand(&seed) % 32;

            n = LP_MIN(n, most);
        }
        chunk = malloc(n);

        CHECK(chunk);
        memcpy(chunk, in + off, n);
        rc = pool__resp_feed(rd, chunk, n);
        free(chunk);
        off += n;
        CHECK(rc == 0 || rc == -EPROTO);
        while (rc == 0 && (rc = pool__resp_next(rd, &r)) == 1) {
            render(out, r, 1);
            buf_append(out, "|", 1);
            if (deliver)
                pool__pubsub_reply(pool->single, r);
            CHECK(pool__resp_is_error(r, "") == (r->type == POOL_REPLY_ERROR));
            (void)pool__resp_str_is(r, "message");
            pool__resp_free(r);
            rc = 0;
        }
        if (rc < 0) {
            CHECK(rc == -EPROTO && rd->err != 0 && rd->errstr[0] != '\0');
            CHECK(pool__resp_next(rd, &r) == -EPROTO); /* sticky */
            CHECK(pool__resp_feed(rd, "+OK\r\n", 5) == -EPROTO);
            buf_append(out, "E", 1);
            failed = true;
        }
    }
    pool__resp_reader_free(rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf whole, chunked;
    uint32_t seed;

    if (size < 1)
        return 0;
    setup();
    seed = (uint32_t)data[0] * 2654435761u + 1;
    data++;
    size--;
    for (unsigned i = 0; i < NCHAN; i++)
        sub_start(i);
    buf_init(&whole);
    buf_init(&chunked);
    run(data, size, 0, true, &whole);
    run(data, size, seed, false, &chunked);
    CHECK(buf_size(&whole) == buf_size(&chunked));
    CHECK(buf_size(&whole) == 0 ||
          memcmp(buf_head(&whole), buf_head(&chunked), buf_size(&whole)) == 0);
    buf_deinit(&whole);
    buf_deinit(&chunked);
    for (unsigned i = 0; i < NCHAN; i++)
        pool_sub_stop(pool, &subs[i]);
    return 0;
}
