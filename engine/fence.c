/* Fencing-token floors; see fence.h.
 *
 * The table: PX_FENCE_SETS sets, each PX_FENCE_WAYS entries (hash, top)
 * and a floor. An entry with top 0 is free (a token worth remembering is
 * at least 1). Invariant, for every name n ever noted: the entry of n's
 * hash in n's set has top >= every token noted for n, or there is no such
 * entry and the set's floor is. Eviction keeps it: the evicted top goes
 * into the floor; a new entry starts at max(token, floor before). */
#include "engine/fence.h"

#include <errno.h>
#include <stdlib.h>

#include "common/hmap.h"
#include "engine/engine.h"

struct px_fence_entry {
    uint64_t hash; /* hash_bytes of the name */
    uint64_t top;  /* highest token noted for it; 0: free entry */
};

struct px_fence_set {
    struct px_fence_entry way[PX_FENCE_WAYS];
    uint64_t floor; /* highest top evicted from this set */
};

struct px_fence {
    struct px_fence_set set[PX_FENCE_SETS];
};

static struct px_fence_set *set_of(struct px_fence *f, uint64_t hash)
{
    return &f->set[hash & (PX_FENCE_SETS - 1)];
}

static struct px_fence_entry *entry_of(struct px_fence_set *s, uint64_t hash)
{
    for (unsigned i = 0; i < PX_FENCE_WAYS; i++) {
        if (s->way[i].top != 0 && s->way[i].hash == hash)
            return &s->way[i];
    }
    return NULL;
}

int px_fence_floor(struct lk_engine *eng, const char *name, size_t nlen, uint64_t *floor)
{
    uint64_t hash = hash_bytes(name, nlen);
    struct px_fence_set *s;
    struct px_fence_entry *e;

    if (!eng->fence) {
        eng->fence = calloc(1, sizeof(*eng->fence));
        if (!eng->fence)
            return -ENOMEM;
    }
    s = set_of(eng->fence, hash);
    e = entry_of(s, hash);
    *floor = e ? e->top : s->floor;
    return 0;
}

/* The free entry of s, else the one with the lowest top (evicted: its
 * top raises the set's floor). */
static struct px_fence_entry *entry_take(struct px_fence_set *s)
{
    struct px_fence_entry *low = &s->way[0];

    for (unsigned i = 0; i < PX_FENCE_WAYS; i++) {
        if (s->way[i].top == 0)
            return &s->way[i];
        if (s->way[i].top < low->top)
            low = &s->way[i];
    }
    if (low->top > s->floor)
        s->floor = low->top;
    return low;
}

void px_fence_note(struct lk_engine *eng, const char *name, size_t nlen, int64_t token)
{
    uint64_t hash = hash_bytes(name, nlen), before;
    struct px_fence_set *s;
    struct px_fence_entry *e;

    if (!eng->fence || token <= 0)
        return; /* no floor was asked for: not a fenced acquire of ours */
    s = set_of(eng->fence, hash);
    e = entry_of(s, hash);
    if (e) {
        if ((uint64_t)token > e->top)
            e->top = (uint64_t)token;
        return;
    }
    before = s->floor;
    e = entry_take(s);
    e->hash = hash;
    e->top = (uint64_t)token > before ? (uint64_t)token : before;
}

void px_fence_free(struct lk_engine *eng)
{
    free(eng->fence);
    eng->fence = NULL;
}
