/* Per-thread stacks of spare heap blocks of one size: a hot path that frees
 * and allocates one record per request (a request, a reply record, an
 * output buffer's storage) keeps a few freed blocks for the next
 * allocation instead of going through malloc and free each time.
 *
 * A stack is a _Thread_local struct spares of its user, zero-initialised,
 * holding blocks of one size the user chooses. spares_put() keeps a block
 * (false when the stack is full: the caller frees it); spares_get() takes
 * the newest (cache-warm) one or returns NULL. Blocks are plain malloc
 * blocks, so a user may also free() one it got. At a thread's exit every
 * stack it used is emptied (a pthread key destructor), so threads that
 * come and go (tests, the resolver) leak nothing. */
#ifndef LP_COMMON_SPARES_H
#define LP_COMMON_SPARES_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARES_MAX 64u

struct spares {
    void *blk[SPARES_MAX]; /* owned: spare blocks, newest last */
    unsigned n;            /* blocks waiting */
    unsigned max;          /* kept at most (0: SPARES_MAX) */
    unsigned lim;          /* max once registered, 0 before */
    bool registered;       /* on this thread's list for the exit cleanup */
    struct spares *next;   /* this thread's list of used stacks */
};

static inline void *spares_get(struct spares *s)
{
    return s->n > 0 ? s->blk[--s->n] : NULL;
}

bool spares__put_slow(struct spares *s, void *p);

/* Keeps p (non-NULL) on s. False when s is full or the exit cleanup could
 * not be registered: then the caller frees p. */
static inline bool spares_put(struct spares *s, void *p)
{
    if (s->n >= s->lim)
        return spares__put_slow(s, p);
    s->blk[s->n++] = p;
    return true;
}

#ifdef __cplusplus
}
#endif

#endif
