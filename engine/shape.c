/* Shape checks of lock-script replies (see shape.h). */
#include "engine/shape.h"

bool px_shape_ints(const struct pool_reply *r, size_t min, size_t max, long long *out, size_t *n)
{
    size_t i;

    if (r->type != POOL_REPLY_ARRAY || r->elements < min || r->elements > max ||
        r->elements > PX_SHAPE_MAX_INTS)
        return false;
    for (i = 0; i < r->elements; i++) {
        if (r->element[i]->type != POOL_REPLY_INTEGER)
            return false;
        out[i] = r->element[i]->integer;
    }
    *n = r->elements;
    return true;
}

bool px_shape_acquire(const struct pool_reply *r, struct px_shape_acq *out)
{
    long long v[3];
    size_t n;

    if (r->type == POOL_REPLY_INTEGER) {
        out->granted = r->integer <= -3;
        out->count = out->granted ? -(r->integer + 2) : 0;
        out->pttl = out->granted ? 0 : r->integer;
        out->token = -1;
        return true;
    }
    if (!px_shape_ints(r, 2, 3, v, &n))
        return false;
    out->granted = v[0] == 1;
    out->count = out->granted ? v[1] : 0;
    out->pttl = out->granted ? 0 : v[1];
    out->token = out->granted && n == 3 ? v[2] : -1;
    if (out->granted && (out->count < 1 || (n == 3 && out->token < 0)))
        return false;
    return true;
}

bool px_shape_batch(const struct pool_reply *r, size_t n)
{
    return r->type == POOL_REPLY_ARRAY && r->elements == n;
}

bool px_shape_held(const struct pool_reply *r, size_t i)
{
    const struct pool_reply *e = r->element[i];

    return e->type == POOL_REPLY_INTEGER && e->integer == 1;
}
