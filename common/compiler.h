/* Compiler helpers shared by every module: container_of, branch hints,
 * always-on invariant checks. Nothing here hides control flow other than
 * LP_BUG_ON, which aborts the process on a broken memory-safety invariant. */
#ifndef LP_COMMON_COMPILER_H
#define LP_COMMON_COMPILER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LP_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define LP_LIKELY(x)                       __builtin_expect(!!(x), 1)
#define LP_UNLIKELY(x)                     __builtin_expect(!!(x), 0)
#define LP_ARRAY_SIZE(a)                   (sizeof(a) / sizeof((a)[0]))
#define LP_MIN(a, b)                       ((a) < (b) ? (a) : (b))
#define LP_MAX(a, b)                       ((a) > (b) ? (a) : (b))

/* Report a violated invariant and abort; never returns. */
void lp_bug(const char *file, int line, const char *expr) __attribute__((noreturn));

/* Always on: for invariants whose violation would corrupt memory. */
#define LP_BUG_ON(cond)                        \
    do {                                       \
        if (LP_UNLIKELY(cond))                 \
            lp_bug(__FILE__, __LINE__, #cond); \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
