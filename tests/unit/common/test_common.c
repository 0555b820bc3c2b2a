/* Unit tests for common/: the intrusive hash map, the byte buffer, and the
 * parsing/formatting helpers. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/compiler.h"
#include "common/hmap.h"
#include "common/spares.h"
#include "common/util.h"
#include "harness.h"

struct item {
    struct hmap_node node;
    char key[32];
    size_t len;
};

static struct item *find(struct hmap *m, const char *key, size_t len)
{
    struct hmap_node *n;

    for (n = hmap_first(m, hash_bytes(key, len)); n; n = hmap_next(n)) {
        struct item *it = LP_CONTAINER_OF(n, struct item, node);

        if (it->len == len && memcmp(it->key, key, len) == 0)
            return it;
    }
    return NULL;
}

TEST(hmap_insert_find_remove)
{
    enum { N = 20000 };
    struct item *items = calloc(N, sizeof(*items));
    struct hmap m;
    int i;

    ASSERT_OK(hmap_init(&m, 4));
    for (i = 0; i < N; i++) {
        items[i].len = (size_t)snprintf(items[i].key, sizeof(items[i].key), "lock:%d", i);
        ASSERT_OK(hmap_insert(&m, &items[i].node, hash_bytes(items[i].key, items[i].len)));
    }
    ASSERT_EQ(m.count, N);
    ASSERT_TRUE(m.nbuckets >= N);
    for (i = 0; i < N; i++)
        ASSERT_TRUE(find(&m, items[i].key, items[i].len) == &items[i]);
    ASSERT_NULL(find(&m, "lock:-1", 7));
    for (i = 0; i < N; i += 2)
        hmap_remove(&m, &items[i].node);
    ASSERT_EQ(m.count, N / 2);
    for (i = 0; i < N; i++)
        ASSERT_TRUE((find(&m, items[i].key, items[i].len) != NULL) == (i % 2 == 1));
    hmap_deinit(&m);
    free(items);
}

/* A map that was large shrinks when asked, once sparse, keeping every
 * node findable; a dense one keeps its size. */
TEST(hmap_shrinks_when_sparse)
{
    enum { N = 20000, KEEP = 100 };
    struct item *items = calloc(N, sizeof(*items));
    struct hmap m;
    size_t big;
    int i;

    ASSERT_OK(hmap_init(&m, 4));
    for (i = 0; i < N; i++) {
        items[i].len = (size_t)snprintf(items[i].key, sizeof(items[i].key), "lock:%d", i);
        ASSERT_OK(hmap_insert(&m, &items[i].node, hash_bytes(items[i].key, items[i].len)));
    }
    big = m.nbuckets;
    ASSERT_TRUE(!hmap_shrink(&m));
    ASSERT_EQ(m.nbuckets, big);
    for (i = KEEP; i < N; i++)
        hmap_remove(&m, &items[i].node);
    ASSERT_TRUE(hmap_shrink(&m));
    ASSERT_TRUE(m.nbuckets < big / 16 && m.nbuckets >= KEEP);
    for (i = 0; i < N; i++)
        ASSERT_TRUE((find(&m, items[i].key, items[i].len) != NULL) == (i < KEEP));
    ASSERT_TRUE(!hmap_shrink(&m));
    hmap_deinit(&m);
    free(items);
}

TEST(hash_spreads_and_uses_every_byte)
{
    char a[40], b[40];
    size_t len;

    for (len = 0; len < sizeof(a); len++) {
        memset(a, 'x', sizeof(a));
        memcpy(b, a, sizeof(b));
        if (len > 0) {
            b[len - 1] = 'y';
            ASSERT_NE(hash_bytes(a, len), hash_bytes(b, len));
        }
        ASSERT_NE(hash_bytes(a, len), hash_bytes(a, len + 1));
        ASSERT_EQ(hash_bytes(a, len), hash_bytes(a, len));
    }
    ASSERT_NE(hash_bytes("ab", 2), hash_bytes("ba", 2));
}

/* Each byte counts, wherever it is: the tail of under 8 bytes is read with
 * overlapping loads, which must still cover every byte. */
TEST(hash_uses_every_byte_position)
{
    char a[24], b[24];
    size_t len, i;

    memset(a, 'x', sizeof(a));
    for (len = 1; len <= sizeof(a); len++) {
        for (i = 0; i < len; i++) {
            memcpy(b, a, sizeof(b));
            b[i] = 'y';
            ASSERT_NE(hash_bytes(a, len), hash_bytes(b, len));
        }
    }
}

TEST(number_formatting)
{
    char out[24];

    ASSERT_EQ(util_u64_to_str(0, out), 1);
    ASSERT_TRUE(memcmp(out, "0", 1) == 0);
    ASSERT_EQ(util_u64_to_str(UINT64_MAX, out), 20);
    ASSERT_TRUE(memcmp(out, "18446744073709551615", 20) == 0);
    ASSERT_EQ(util_i64_to_str(INT64_MIN, out), 20);
    ASSERT_TRUE(memcmp(out, "-9223372036854775808", 20) == 0);
    ASSERT_EQ(util_i64_to_str(-2, out), 2);
    ASSERT_TRUE(memcmp(out, "-2", 2) == 0);
    {
        uint64_t v, p10;
        char want[24];
        int d;

        /* every digit count, at and around each power of ten */
        for (p10 = 1, d = 0; d < 20; d++, p10 *= 10) {
            for (v = p10 > 2 ? p10 - 2 : 0; v <= p10 + 2; v++) {
                ASSERT_EQ(util_u64_to_str(v, out),
                          (size_t)snprintf(want, sizeof(want), "%" PRIu64, v));
                ASSERT_TRUE(memcmp(out, want, strlen(want)) == 0);
            }
        }
        for (v = 0; v < 100000; v += 7) {
            ASSERT_EQ(util_u64_to_str(v, out), (size_t)snprintf(want, sizeof(want), "%" PRIu64, v));
            ASSERT_TRUE(memcmp(out, want, strlen(want)) == 0);
        }
    }
}

TEST(number_parsing)
{
    int64_t v;

    ASSERT_OK(util_parse_i64("9223372036854775807", 19, &v));
    ASSERT_EQ(v, INT64_MAX);
    ASSERT_OK(util_parse_i64("-9223372036854775808", 20, &v));
    ASSERT_EQ(v, INT64_MIN);
    ASSERT_EQ(util_parse_i64("9223372036854775808", 19, &v), -ERANGE);
    ASSERT_EQ(util_parse_i64("", 0, &v), -EINVAL);
    ASSERT_EQ(util_parse_i64("-", 1, &v), -EINVAL);
    ASSERT_EQ(util_parse_i64("12a", 3, &v), -EINVAL);
    ASSERT_EQ(util_parse_i64("+1", 2, &v), -EINVAL);
    ASSERT_TRUE(util_eq_nocase("LoCk", 4, "LOCK"));
    ASSERT_TRUE(!util_eq_nocase("LOC", 3, "LOCK"));
    ASSERT_TRUE(!util_eq_nocase("@", 1, "`"));
}

TEST(buf_append_consume)
{
    struct buf b;
    char big[5000];

    buf_init(&b);
    memset(big, 'z', sizeof(big));
    ASSERT_OK(buf_append(&b, "hello ", 6));
    ASSERT_OK(buf_appendf(&b, "%d-%s", 42, "x"));
    ASSERT_EQ(buf_size(&b), 10);
    ASSERT_TRUE(memcmp(buf_head(&b), "hello 42-x", 10) == 0);
    buf_consume(&b, 6);
    ASSERT_TRUE(memcmp(buf_head(&b), "42-x", 4) == 0);
    ASSERT_OK(buf_append(&b, big, sizeof(big)));
    ASSERT_EQ(buf_size(&b), 4 + sizeof(big));
    buf_consume(&b, buf_size(&b));
    ASSERT_EQ(buf_size(&b), 0);
    buf_trim(&b, 0);
    ASSERT_NULL(b.data);
    buf_deinit(&b);
}

/* A trimmed small buffer's storage is reused by the next buffer that needs
 * storage (and is big enough); a large one is freed; a buffer with unread
 * bytes keeps its storage. */
TEST(buf_trim_reuses_small_storage)
{
    struct buf a, b, c;
    char *small;

    buf_init(&a);
    buf_init(&b);
    buf_init(&c);
    ASSERT_OK(buf_append(&a, "reply", 5));
    small = a.data;
    buf_trim(&a, 0);
    ASSERT_NOTNULL(a.data); /* unread bytes: kept */
    buf_consume(&a, 5);
    buf_trim(&a, 0);
    ASSERT_NULL(a.data);
    ASSERT_EQ(a.cap, 0);
    ASSERT_OK(buf_append(&b, "next", 4));
    ASSERT_TRUE(b.data == small);
    ASSERT_TRUE(memcmp(buf_head(&b), "next", 4) == 0);
    ASSERT_OK(buf_reserve(&c, 100000)); /* too big for a spare: its own storage */
    buf_trim(&c, 0);
    ASSERT_NULL(c.data);
    buf_consume(&b, 4);
    buf_trim(&b, 0);
    ASSERT_OK(buf_reserve(&c, 100000)); /* a spare too small is not taken */
    ASSERT_TRUE(c.data != small);
    ASSERT_OK(buf_append(&a, "x", 1));
    ASSERT_TRUE(a.data == small);
    buf_deinit(&a);
    buf_deinit(&b);
    buf_deinit(&c);
}

/* A stack keeps up to max blocks, newest first out; the blocks a thread
 * left are freed at its exit (valgrind/ASan runs see a leak otherwise). */
static _Thread_local struct spares t_spares = {.max = 2};

static void *spares_thread(void *arg)
{
    (void)arg;
    ASSERT_TRUE(spares_put(&t_spares, malloc(16)));
    ASSERT_TRUE(spares_put(&t_spares, malloc(16)));
    return NULL;
}

TEST(spares_keep_and_release)
{
    void *a = malloc(16), *b = malloc(16), *c = malloc(16);
    pthread_t th;

    ASSERT_NULL(spares_get(&t_spares));
    ASSERT_TRUE(spares_put(&t_spares, a));
    ASSERT_TRUE(spares_put(&t_spares, b));
    ASSERT_TRUE(!spares_put(&t_spares, c)); /* full: the caller frees */
    free(c);
    ASSERT_TRUE(spares_get(&t_spares) == b);
    ASSERT_TRUE(spares_get(&t_spares) == a);
    ASSERT_NULL(spares_get(&t_spares));
    free(a);
    free(b);
    ASSERT_EQ(pthread_create(&th, NULL, spares_thread, NULL), 0);
    ASSERT_EQ(pthread_join(th, NULL), 0);
}

TEST_MAIN(TEST_CASE(hmap_insert_find_remove), TEST_CASE(hmap_shrinks_when_sparse),
          TEST_CASE(hash_spreads_and_uses_every_byte), TEST_CASE(hash_uses_every_byte_position),
          TEST_CASE(number_formatting), TEST_CASE(number_parsing), TEST_CASE(buf_append_consume),
          TEST_CASE(buf_trim_reuses_small_storage), TEST_CASE(spares_keep_and_release))
