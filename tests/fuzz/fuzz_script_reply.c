/* libFuzzer target: how the lock engine reads lock-script replies.
 *
 * Input: what Redis sends. It is parsed by pool/resp.c as the pool parses
 * it, and every reply is handed to each shape check the reply handlers of
 * the lock kinds read Redis's answers through (engine/shape.h: the
 * acquire answer of every lock kind, the semaphores' {status, value}
 * pairs, LOCK.INFO's triple, the watchdog's batches).
 *
 * Checked, besides ASan and UBSan: a check accepts a reply only when it
 * has exactly the shape the handler then reads (an array of integers of
 * the right length; a grant with a count of at least 1), and what it hands
 * back is what the reply says; a refused reply leaves nothing half read. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/compiler.h"
#include "engine/shape.h"
#include "pool/resp.h"
#include "proxy/cmds/sem-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* The reference: whether r is an array of min..max integers. */
static bool all_ints(const struct pool_reply *r, size_t min, size_t max)
{
    if (r->type != POOL_REPLY_ARRAY || r->elements < min || r->elements > max)
        return false;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != POOL_REPLY_INTEGER)
            return false;
    }
    return true;
}

static void check_ints(const struct pool_reply *r)
{
    static const size_t ranges[][2] = {{0, 0}, {1, 1}, {2, 2}, {2, 3}, {3, 3}, {0, 8}, {4, 9}};

    for (size_t k = 0; k < sizeof(ranges) / sizeof(ranges[0]); k++) {
        long long v[PX_SHAPE_MAX_INTS];
        size_t n = 99, max = ranges[k][1];
        bool ok = px_shape_ints(r, ranges[k][0], max, v, &n);

        CHECK(ok == all_ints(r, ranges[k][0], max < PX_SHAPE_MAX_INTS ? max : PX_SHAPE_MAX_INTS));
        if (!ok)
            continue;
        CHECK(n == r->elements);
        for (size_t i = 0; i < n; i++)
            CHECK(v[i] == r->element[i]->integer);
    }
}

static void check_acquire(const struct pool_reply *r)
{
    struct px_shape_acq a;
    bool ok = px_shape_acquire(r, &a);

    if (!ok)
        return;
    if (r->type == POOL_REPLY_INTEGER) { /* the plain lock's -2 - count, or pttl */
        CHECK(a.granted == (r->integer <= -3) && a.token == -1);
        if (a.granted)
            CHECK(a.count == -(r->integer + 2) && a.count >= 1);
        else
            CHECK(a.pttl == r->integer);
        return;
    }
    CHECK(all_ints(r, 2, 3));
    CHECK(a.granted == (r->element[0]->integer == 1));
    if (a.granted) {
        CHECK(a.count == r->element[1]->integer && a.count >= 1);
        CHECK(a.token == (r->elements == 3 ? r->element[2]->integer : -1));
        CHECK(r->elements == 2 || a.token >= 0);
    } else {
        CHECK(a.pttl == r->element[1]->integer && a.token == -1);
    }
}

static void check_pair_and_batch(const struct pool_reply *r)
{
    long long status = 7, value = 7;

    if (px__sem_pair_reply(r, &status, &value))
        CHECK(all_ints(r, 2, 2) && status == r->element[0]->integer &&
              value == r->element[1]->integer);
    else
        CHECK(!all_ints(r, 2, 2) && status == 7 && value == 7);
    for (size_t n = 0; n < 4; n++) {
        if (!px_shape_batch(r, n)) {
            CHECK(r->type != POOL_REPLY_ARRAY || r->elements != n);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            CHECK(px_shape_held(r, i) ==
                  (r->element[i]->type == POOL_REPLY_INTEGER && r->element[i]->integer == 1));
    }
}

static void check_reply(const struct pool_reply *r, unsigned depth)
{
    check_ints(r);
    check_acquire(r);
    check_pair_and_batch(r);
    if (r->type == POOL_REPLY_ARRAY && depth < 3) {
        for (size_t i = 0; i < r->elements; i++)
            check_reply(r->element[i], depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pool__resp_reader *rd = pool__resp_reader_create();
    struct pool_reply *r;
    int rc;

    CHECK(rd);
    rc = pool__resp_feed(rd, (const char *)data, size);
    while (rc == 0 && (rc = pool__resp_next(rd, &r)) == 1) {
        check_reply(r, 0);
        pool__resp_free(r);
        rc = 0;
    }
    CHECK(rc == 0 || rc == -EPROTO);
    pool__resp_reader_free(rd);
    return 0;
}
