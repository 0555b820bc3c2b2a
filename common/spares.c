/* Per-thread spare block stacks; see spares.h. */
#include "common/spares.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_key_t spares_key; /* value: the thread's list of stacks */
static pthread_once_t spares_once = PTHREAD_ONCE_INIT;
static int spares_key_err;
static _Thread_local struct spares *spares_list; /* stacks this thread used */

static void spares_release(void *arg)
{
    struct spares *s;

    for (s = arg; s; s = s->next) {
        while (s->n > 0)
            free(s->blk[--s->n]);
    }
}

static void spares_key_create(void)
{
    spares_key_err = pthread_key_create(&spares_key, spares_release);
}

/* Puts s on the thread's list, whose head the key's destructor gets. */
static bool spares_register(struct spares *s)
{
    (void)pthread_once(&spares_once, spares_key_create);
    if (spares_key_err != 0 || pthread_setspecific(spares_key, s) != 0)
        return false;
    s->next = spares_list;
    spares_list = s;
    s->registered = true;
    s->lim = s->max && s->max < SPARES_MAX ? s->max : SPARES_MAX;
    return true;
}

/* The first put of a stack (lim 0: registers it), or a full stack. */
bool spares__put_slow(struct spares *s, void *p)
{
    if (s->registered || !spares_register(s) || s->n >= s->lim)
        return false;
    s->blk[s->n++] = p;
    return true;
}
