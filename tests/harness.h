/* Minimal test harness (libuv task.h style).
 *
 * A test file defines cases with TEST(name) and lists them at the bottom:
 *
 *     TEST(wheel_fires_in_order) { ... ASSERT_EQ(a, b); ... }
 *     TEST_MAIN(TEST_CASE(wheel_fires_in_order), ...)
 *
 * The executable runs one case named on the command line, or all of them.
 * CMake scans TEST(...) lines and registers one ctest per case, each in its
 * own process. A case that cannot run here (no io_uring, no redis-server)
 * calls TEST_SKIP(), which exits with 77 (ctest's SKIP_RETURN_CODE). */
#ifndef LP_TESTS_HARNESS_H
#define LP_TESTS_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_SKIP_CODE 77

#define TEST(name) static void test_##name(void)

struct test_case {
    const char *name;
    void (*fn)(void);
};

#define TEST_CASE(name)                                                                            \
    {                                                                                              \
#name, test_##name                                                                         \
    }

#define TEST_FAIL(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(1);                                                                                   \
    } while (0)

#define TEST_SKIP(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "SKIP: ");                                                                 \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(TEST_SKIP_CODE);                                                                      \
    } while (0)

#define ASSERT_TRUE(c)                                                                             \
    do {                                                                                           \
        if (!(c))                                                                                  \
            TEST_FAIL("assertion failed: %s", #c);                                                 \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                              \
        if (a_ != b_)                                                                              \
            TEST_FAIL("%s == %s: %" PRId64 " != %" PRId64, #a, #b, a_, b_);                        \
    } while (0)

#define ASSERT_NE(a, b)                                                                            \
    do {                                                                                           \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                              \
        if (a_ == b_)                                                                              \
            TEST_FAIL("%s != %s: both %" PRId64, #a, #b, a_);                                      \
    } while (0)

#define ASSERT_LE(a, b)                                                                            \
    do {                                                                                           \
        int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                                              \
        if (a_ > b_)                                                                               \
            TEST_FAIL("%s <= %s: %" PRId64 " > %" PRId64, #a, #b, a_, b_);                         \
    } while (0)

#define ASSERT_OK(rc)                                                                              \
    do {                                                                                           \
        int64_t r_ = (int64_t)(rc);                                                                \
        if (r_ < 0)                                                                                \
            TEST_FAIL("%s failed: %" PRId64 " (%s)", #rc, r_, strerror((int)-r_));                 \
    } while (0)

#define ASSERT_NULL(p)    ASSERT_TRUE((p) == NULL)
#define ASSERT_NOTNULL(p) ASSERT_TRUE((p) != NULL)

#define ASSERT_STREQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            TEST_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",                    \
                      b_ ? b_ : "(null)");                                                         \
    } while (0)

static inline int test_main(const struct test_case *cases, size_t n, int argc, char **argv)
{
    size_t i;
    int ran = 0;

    for (i = 0; i < n; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        fprintf(stderr, "== %s\n", cases[i].name);
        cases[i].fn();
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test case named %s\n", argc > 1 ? argv[1] : "(any)");
        return 2;
    }
    return 0;
}

#define TEST_MAIN(...)                                                                             \
    int main(int argc, char **argv)                                                                \
    {                                                                                              \
        static const struct test_case cases_[] = {__VA_ARGS__};                                    \
        return test_main(cases_, sizeof(cases_) / sizeof(cases_[0]), argc, argv);                  \
    }

#endif
