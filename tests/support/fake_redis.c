/* A model of one Redis master: keyspace and the Lua scripting engine
 * (fake_redis.h). Small and linear on purpose: a simulated run has a few
 * dozen keys, and clarity beats speed here. Semantics follow Redis 7 for
 * the commands listed in cmd_table (what engine/lua calls); replies
 * are converted to and from Lua as Redis's script_lua.c does. */
#include "tests/support/fake_redis.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum fr_type { FR_STR, FR_HASH, FR_ZSET, FR_SET, FR_LIST };

/* An element: a hash field and value, a zset member and score, a set
 * member, a list element (f only). */
struct fr_el {
    char *f;
    size_t flen;
    char *v;
    size_t vlen;
    double score;
};

struct fr_key {
    char *name;
    size_t nlen;
    enum fr_type type;
    uint64_t expire_ms; /* 0: none */
    char *s;            /* FR_STR value */
    size_t slen;
    struct fr_el *el; /* collections */
    size_t n, cap;
};

struct fr_db {
    struct fr_key *k;
    size_t n, cap;
};

#define FR_MAX_ARGS     128
#define FR_MAX_EXPIRIES 256

/* A key that expired, and when (its deadline). */
struct fr_expiry {
    char name[64];
    uint64_t at;
};

struct fake_redis {
    lua_State *L;
    struct fr_db *db;
    uint64_t now; /* time of the script running */
    fr_publish_fn *pub;
    void *pub_arg;
    char err[256];                         /* the failing command's error */
    struct fr_expiry exp[FR_MAX_EXPIRIES]; /* ring of the last expiries */
    size_t nexp;                           /* expiries recorded (ring index = nexp % max) */
};

static const char WRONGTYPE[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* ---- memory ------------------------------------------------------------------ */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p) {
        fprintf(stderr, "fake_redis: out of memory\n");
        abort();
    }
    return p;
}

static char *xdup(const char *p, size_t n)
{
    char *d = xmalloc(n + 1);

    memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

static void el_free(struct fr_el *e)
{
    free(e->f);
    free(e->v);
}

static void key_clear(struct fr_key *k)
{
    size_t i;

    for (i = 0; i < k->n; i++)
        el_free(&k->el[i]);
    free(k->el);
    free(k->s);
    free(k->name);
}

void fr_db_free(struct fr_db *db)
{
    size_t i;

    if (!db)
        return;
    for (i = 0; i < db->n; i++)
        key_clear(&db->k[i]);
    free(db->k);
    free(db);
}

static struct fr_db *db_new(void)
{
    struct fr_db *db = xmalloc(sizeof(*db));

    memset(db, 0, sizeof(*db));
    return db;
}

struct fr_db *fr_db_copy(const struct fr_db *src)
{
    struct fr_db *db = db_new();
    size_t i, j;

    db->cap = db->n = src->n;
    db->k = xmalloc(sizeof(*db->k) * (src->n ? src->n : 1));
    for (i = 0; i < src->n; i++) {
        const struct fr_key *s = &src->k[i];
        struct fr_key *d = &db->k[i];

        *d = *s;
        d->name = xdup(s->name, s->nlen);
        d->s = s->s ? xdup(s->s, s->slen) : NULL;
        d->cap = s->n;
        d->el = s->n ? xmalloc(sizeof(*d->el) * s->n) : NULL;
        for (j = 0; j < s->n; j++) {
            d->el[j] = s->el[j];
            d->el[j].f = xdup(s->el[j].f, s->el[j].flen);
            d->el[j].v = s->el[j].v ? xdup(s->el[j].v, s->el[j].vlen) : NULL;
        }
    }
    return db;
}

/* ---- keyspace ----------------------------------------------------------------- */

static void note_expiry(struct fake_redis *r, const struct fr_key *k)
{
    struct fr_expiry *e = &r->exp[r->nexp++ % FR_MAX_EXPIRIES];

    snprintf(e->name, sizeof(e->name), "%.*s", (int)k->nlen, k->name);
    e->at = k->expire_ms;
}

static void key_del_at(struct fr_db *db, size_t i)
{
    key_clear(&db->k[i]);
    memmove(&db->k[i], &db->k[i + 1], (db->n - i - 1) * sizeof(db->k[0]));
    db->n--;
}

/* The live key, or NULL (an expired one is deleted on the way, lazily). */
static struct fr_key *key_find(struct fake_redis *r, const char *name, size_t len)
{
    struct fr_db *db = r->db;
    size_t i;

    for (i = 0; i < db->n; i++) {
        struct fr_key *k = &db->k[i];

        if (k->nlen != len || memcmp(k->name, name, len) != 0)
            continue;
        if (k->expire_ms != 0 && k->expire_ms <= r->now) {
            note_expiry(r, k);
            key_del_at(db, i);
            return NULL;
        }
        return k;
    }
    return NULL;
}

static bool key_del(struct fake_redis *r, const char *name, size_t len)
{
    struct fr_key *k = key_find(r, name, len);

    if (!k)
        return false;
    key_del_at(r->db, (size_t)(k - r->db->k));
    return true;
}

static struct fr_key *key_add(struct fake_redis *r, const char *name, size_t len, enum fr_type t)
{
    struct fr_db *db = r->db;
    struct fr_key *k;

    if (db->n == db->cap) {
        db->cap = db->cap ? db->cap * 2 : 16;
        db->k = realloc(db->k, db->cap * sizeof(*db->k));
        if (!db->k)
            abort();
    }
    k = &db->k[db->n++];
    memset(k, 0, sizeof(*k));
    k->name = xdup(name, len);
    k->nlen = len;
    k->type = t;
    return k;
}

/* The key of type t, created when absent (create) ; NULL with r->err set
 * on WRONGTYPE, or NULL without error when absent and !create. */
static struct fr_key *key_typed(struct fake_redis *r, const char *name, size_t len, enum fr_type t,
                                bool create)
{
    struct fr_key *k = key_find(r, name, len);

    r->err[0] = '\0';
    if (k && k->type != t) {
        snprintf(r->err, sizeof(r->err), "%s", WRONGTYPE);
        return NULL;
    }
    if (!k && create)
        k = key_add(r, name, len, t);
    return k;
}

static struct fr_el *el_find(struct fr_key *k, const char *f, size_t flen)
{
    size_t i;

    for (i = 0; i < k->n; i++)
        if (k->el[i].flen == flen && memcmp(k->el[i].f, f, flen) == 0)
            return &k->el[i];
    return NULL;
}

static struct fr_el *el_add(struct fr_key *k, const char *f, size_t flen)
{
    struct fr_el *e;

    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 4;
        k->el = realloc(k->el, k->cap * sizeof(*k->el));
        if (!k->el)
            abort();
    }
    e = &k->el[k->n++];
    memset(e, 0, sizeof(*e));
    e->f = xdup(f, flen);
    e->flen = flen;
    return e;
}

static void el_del(struct fr_key *k, struct fr_el *e)
{
    size_t i = (size_t)(e - k->el);

    el_free(e);
    memmove(&k->el[i], &k->el[i + 1], (k->n - i - 1) * sizeof(k->el[0]));
    k->n--;
}

static void el_set_v(struct fr_el *e, const char *v, size_t vlen)
{
    free(e->v);
    e->v = xdup(v, vlen);
    e->vlen = vlen;
}

/* A collection left empty is deleted, as in Redis. */
static void key_drop_if_empty(struct fake_redis *r, struct fr_key *k)
{
    if (k && k->type != FR_STR && k->n == 0)
        key_del_at(r->db, (size_t)(k - r->db->k));
}

/* ---- numbers ------------------------------------------------------------------- */

static bool parse_ll(const char *p, size_t n, long long *out)
{
    char buf[32], *end;

    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    errno = 0;
    *out = strtoll(buf, &end, 10);
    return errno == 0 && *end == '\0';
}

/* A score bound: "-inf", "+inf", "(x" (exclusive) or x. */
static bool parse_score(const char *p, size_t n, double *out, bool *excl)
{
    char buf[64], *end;

    *excl = false;
    if (n > 0 && p[0] == '(') {
        *excl = true;
        p++;
        n--;
    }
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (strcmp(buf, "-inf") == 0 || strcmp(buf, "+inf") == 0 || strcmp(buf, "inf") == 0) {
        *out = buf[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    *out = strtod(buf, &end);
    return *end == '\0' && !isnan(*out);
}

static int fmt_score(char *out, size_t cap, double d)
{
    if (d == floor(d) && fabs(d) < 1e17)
        return snprintf(out, cap, "%lld", (long long)d);
    return snprintf(out, cap, "%.17g", d);
}

/* ---- replies onto the Lua stack --------------------------------------------- */

static int push_int(lua_State *L, long long v)
{
    lua_pushnumber(L, (lua_Number)v);
    return 1;
}

static int push_bulk(lua_State *L, const char *p, size_t n)
{
    lua_pushlstring(L, p, n);
    return 1;
}

static int push_nil(lua_State *L)
{
    lua_pushboolean(L, 0);
    return 1;
}

static int push_status(lua_State *L, const char *s)
{
    lua_newtable(L);
    lua_pushstring(L, s);
    lua_setfield(L, -2, "ok");
    return 1;
}

static int fail(struct fake_redis *r, const char *msg)
{
    snprintf(r->err, sizeof(r->err), "%s", msg);
    return -1;
}

/* The error of a key_typed() that returned NULL, or "absent". */
#define TYPED_OR(r, k, absent)                  \
    do {                                        \
        if (!(k))                               \
            return (r)->err[0] ? -1 : (absent); \
    } while (0)

struct args {
    int n;
    const char *p[FR_MAX_ARGS];
    size_t l[FR_MAX_ARGS];
};

#define ARG_IS(a, i, s) ((a)->l[i] == strlen(s) && strncasecmp((a)->p[i], s, (a)->l[i]) == 0)

/* ---- commands ---------------------------------------------------------------- */

static int c_del(struct fake_redis *r, lua_State *L, const struct args *a)
{
    long long n = 0;
    int i;

    for (i = 1; i < a->n; i++)
        n += key_del(r, a->p[i], a->l[i]);
    return push_int(L, n);
}

static int c_exists(struct fake_redis *r, lua_State *L, const struct args *a)
{
    long long n = 0;
    int i;

    for (i = 1; i < a->n; i++)
        n += key_find(r, a->p[i], a->l[i]) != NULL;
    return push_int(L, n);
}

static int c_type(struct fake_redis *r, lua_State *L, const struct args *a)
{
    static const char *const names[] = {"string", "hash", "zset", "set", "list"};
    struct fr_key *k = key_find(r, a->p[1], a->l[1]);

    return push_status(L, k ? names[k->type] : "none");
}

static int c_pexpire(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_find(r, a->p[1], a->l[1]);
    long long ms;

    if (!parse_ll(a->p[2], a->l[2], &ms))
        return fail(r, "ERR value is not an integer or out of range");
    if (!k)
        return push_int(L, 0);
    if (ms <= 0)
        key_del_at(r->db, (size_t)(k - r->db->k));
    else
        k->expire_ms = r->now + (uint64_t)ms;
    return push_int(L, 1);
}

static int c_pttl(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_find(r, a->p[1], a->l[1]);

    if (!k)
        return push_int(L, -2);
    return push_int(L, k->expire_ms ? (long long)(k->expire_ms - r->now) : -1);
}

static int c_get(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_STR, false);

    TYPED_OR(r, k, push_nil(L));
    return push_bulk(L, k->s, k->slen);
}

/* SET key value [PX ms] [NX] */
static int c_set(struct fake_redis *r, lua_State *L, const struct args *a)
{
    long long px = 0;
    bool nx = false;
    struct fr_key *k;
    int i;

    for (i = 3; i < a->n; i++) {
        if (ARG_IS(a, i, "px") && i + 1 < a->n) {
            if (!parse_ll(a->p[i + 1], a->l[i + 1], &px) || px <= 0)
                return fail(r, "ERR invalid expire time in 'set' command");
            i++;
        } else if (ARG_IS(a, i, "nx")) {
            nx = true;
        } else {
            return fail(r, "ERR syntax error (fake_redis: SET option not modelled)");
        }
    }
    k = key_find(r, a->p[1], a->l[1]);
    if (k && nx)
        return push_nil(L);
    if (k)
        key_del_at(r->db, (size_t)(k - r->db->k));
    k = key_add(r, a->p[1], a->l[1], FR_STR);
    k->s = xdup(a->p[2], a->l[2]);
    k->slen = a->l[2];
    k->expire_ms = px ? r->now + (uint64_t)px : 0;
    return push_status(L, "OK");
}

static int incr_by(struct fake_redis *r, lua_State *L, const struct args *a, long long by)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_STR, false);
    long long v = 0;
    char buf[32];
    int n;

    if (!k && r->err[0])
        return -1;
    if (k && !parse_ll(k->s, k->slen, &v))
        return fail(r, "ERR value is not an integer or out of range");
    if (!k)
        k = key_add(r, a->p[1], a->l[1], FR_STR);
    v += by;
    n = snprintf(buf, sizeof(buf), "%lld", v);
    free(k->s);
    k->s = xdup(buf, (size_t)n);
    k->slen = (size_t)n;
    return push_int(L, v);
}

static int c_incr(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return incr_by(r, L, a, 1);
}

static int c_decr(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return incr_by(r, L, a, -1);
}

static int c_incrby(struct fake_redis *r, lua_State *L, const struct args *a)
{
    long long by;

    if (!parse_ll(a->p[2], a->l[2], &by))
        return fail(r, "ERR value is not an integer or out of range");
    return incr_by(r, L, a, by);
}

static int c_decrby(struct fake_redis *r, lua_State *L, const struct args *a)
{
    long long by;

    if (!parse_ll(a->p[2], a->l[2], &by))
        return fail(r, "ERR value is not an integer or out of range");
    return incr_by(r, L, a, -by);
}

static int c_hget(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_HASH, false);
    struct fr_el *e;

    TYPED_OR(r, k, push_nil(L));
    e = el_find(k, a->p[2], a->l[2]);
    return e ? push_bulk(L, e->v, e->vlen) : push_nil(L);
}

static int c_hset(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k;
    long long added = 0;
    int i;

    if (a->n < 4 || (a->n - 2) % 2 != 0)
        return fail(r, "ERR wrong number of arguments for 'hset' command");
    k = key_typed(r, a->p[1], a->l[1], FR_HASH, true);
    TYPED_OR(r, k, -1);
    for (i = 2; i + 1 < a->n; i += 2) {
        struct fr_el *e = el_find(k, a->p[i], a->l[i]);

        if (!e) {
            e = el_add(k, a->p[i], a->l[i]);
            added++;
        }
        el_set_v(e, a->p[i + 1], a->l[i + 1]);
    }
    return push_int(L, added);
}

static int c_hexists(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_HASH, false);

    TYPED_OR(r, k, push_int(L, 0));
    return push_int(L, el_find(k, a->p[2], a->l[2]) != NULL);
}

static int c_hdel(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_HASH, false);
    long long n = 0;
    int i;

    TYPED_OR(r, k, push_int(L, 0));
    for (i = 2; i < a->n; i++) {
        struct fr_el *e = el_find(k, a->p[i], a->l[i]);

        if (e) {
            el_del(k, e);
            n++;
        }
    }
    key_drop_if_empty(r, k);
    return push_int(L, n);
}

static int c_hincrby(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k;
    struct fr_el *e;
    long long by, v = 0;
    char buf[32];
    int n;

    if (!parse_ll(a->p[3], a->l[3], &by))
        return fail(r, "ERR value is not an integer or out of range");
    k = key_typed(r, a->p[1], a->l[1], FR_HASH, true);
    TYPED_OR(r, k, -1);
    e = el_find(k, a->p[2], a->l[2]);
    if (e && !parse_ll(e->v, e->vlen, &v))
        return fail(r, "ERR hash value is not an integer");
    if (!e)
        e = el_add(k, a->p[2], a->l[2]);
    v += by;
    n = snprintf(buf, sizeof(buf), "%lld", v);
    el_set_v(e, buf, (size_t)n);
    return push_int(L, v);
}

static int c_hlen(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_HASH, false);

    TYPED_OR(r, k, push_int(L, 0));
    return push_int(L, (long long)k->n);
}

static int c_hmget(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_HASH, false);
    int i;

    if (!k && r->err[0])
        return -1;
    lua_newtable(L);
    for (i = 2; i < a->n; i++) {
        struct fr_el *e = k ? el_find(k, a->p[i], a->l[i]) : NULL;

        if (e)
            push_bulk(L, e->v, e->vlen);
        else
            push_nil(L);
        lua_rawseti(L, -2, i - 1);
    }
    return 1;
}

/* HKEYS (what 0), HVALS (1), HGETALL (2); SMEMBERS, LRANGE 0 -1 as HKEYS. */
static int list_elems(struct fake_redis *r, lua_State *L, const struct args *a, enum fr_type t,
                      int what)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], t, false);
    int i = 1;
    size_t j;

    if (!k && r->err[0])
        return -1;
    lua_newtable(L);
    for (j = 0; k && j < k->n; j++) {
        if (what != 1) {
            push_bulk(L, k->el[j].f, k->el[j].flen);
            lua_rawseti(L, -2, i++);
        }
        if (what != 0) {
            push_bulk(L, k->el[j].v, k->el[j].vlen);
            lua_rawseti(L, -2, i++);
        }
    }
    return 1;
}

static int c_hkeys(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return list_elems(r, L, a, FR_HASH, 0);
}

static int c_hvals(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return list_elems(r, L, a, FR_HASH, 1);
}

static int c_hgetall(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return list_elems(r, L, a, FR_HASH, 2);
}

static int el_cmp_score(const void *pa, const void *pb)
{
    const struct fr_el *x = pa, *y = pb;
    size_t n = x->flen < y->flen ? x->flen : y->flen;
    int c;

    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    c = memcmp(x->f, y->f, n);
    return c ? c : (x->flen < y->flen ? -1 : x->flen > y->flen);
}

static void zsort(struct fr_key *k)
{
    if (k->n > 1)
        qsort(k->el, k->n, sizeof(k->el[0]), el_cmp_score);
}

/* ZADD key score member [score member ...] (no flags: the scripts use none) */
static int c_zadd(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k;
    long long added = 0;
    int i;

    if (a->n < 4 || (a->n - 2) % 2 != 0)
        return fail(r, "ERR syntax error (fake_redis: ZADD flags not modelled)");
    for (i = 2; i < a->n; i += 2) {
        double d;
        bool excl;

        if (!parse_score(a->p[i], a->l[i], &d, &excl) || excl)
            return fail(r, "ERR value is not a valid float");
    }
    k = key_typed(r, a->p[1], a->l[1], FR_ZSET, true);
    TYPED_OR(r, k, -1);
    for (i = 2; i + 1 < a->n; i += 2) {
        struct fr_el *e = el_find(k, a->p[i + 1], a->l[i + 1]);
        bool excl;

        if (!e) {
            e = el_add(k, a->p[i + 1], a->l[i + 1]);
            added++;
        }
        parse_score(a->p[i], a->l[i], &e->score, &excl);
    }
    zsort(k);
    return push_int(L, added);
}

static int c_zscore(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_ZSET, false);
    struct fr_el *e;
    char buf[64];

    TYPED_OR(r, k, push_nil(L));
    e = el_find(k, a->p[2], a->l[2]);
    if (!e)
        return push_nil(L);
    return push_bulk(L, buf, (size_t)fmt_score(buf, sizeof(buf), e->score));
}

/* ZREM, SREM: remove members. */
static int rem_members(struct fake_redis *r, lua_State *L, const struct args *a, enum fr_type t)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], t, false);
    long long n = 0;
    int i;

    TYPED_OR(r, k, push_int(L, 0));
    for (i = 2; i < a->n; i++) {
        struct fr_el *e = el_find(k, a->p[i], a->l[i]);

        if (e) {
            el_del(k, e);
            n++;
        }
    }
    key_drop_if_empty(r, k);
    return push_int(L, n);
}

static int c_zrem(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return rem_members(r, L, a, FR_ZSET);
}

static int c_srem(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return rem_members(r, L, a, FR_SET);
}

static int c_zincrby(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k;
    struct fr_el *e;
    double by;
    bool excl;
    char buf[64];

    if (!parse_score(a->p[2], a->l[2], &by, &excl) || excl)
        return fail(r, "ERR value is not a valid float");
    k = key_typed(r, a->p[1], a->l[1], FR_ZSET, true);
    TYPED_OR(r, k, -1);
    e = el_find(k, a->p[3], a->l[3]);
    if (!e)
        e = el_add(k, a->p[3], a->l[3]);
    e->score += by;
    by = e->score;
    zsort(k);
    return push_bulk(L, buf, (size_t)fmt_score(buf, sizeof(buf), by));
}

/* Redis's start/stop range normalisation; false when empty. */
static bool range(long long start, long long stop, size_t n, size_t *from, size_t *to)
{
    long long len = (long long)n;

    if (start < 0)
        start += len;
    if (stop < 0)
        stop += len;
    if (start < 0)
        start = 0;
    if (stop >= len)
        stop = len - 1;
    if (start > stop || start >= len)
        return false;
    *from = (size_t)start;
    *to = (size_t)stop;
    return true;
}

/* ZRANGE key start stop [WITHSCORES], LRANGE key start stop. */
static int range_cmd(struct fake_redis *r, lua_State *L, const struct args *a, enum fr_type t)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], t, false);
    bool scores = t == FR_ZSET && a->n > 4 && ARG_IS(a, 4, "withscores");
    long long start, stop;
    size_t from, to, j;
    char buf[64];
    int i = 1;

    if (!parse_ll(a->p[2], a->l[2], &start) || !parse_ll(a->p[3], a->l[3], &stop))
        return fail(r, "ERR value is not an integer or out of range");
    if (!k && r->err[0])
        return -1;
    lua_newtable(L);
    if (!k || !range(start, stop, k->n, &from, &to))
        return 1;
    for (j = from; j <= to; j++) {
        push_bulk(L, k->el[j].f, k->el[j].flen);
        lua_rawseti(L, -2, i++);
        if (scores) {
            push_bulk(L, buf, (size_t)fmt_score(buf, sizeof(buf), k->el[j].score));
            lua_rawseti(L, -2, i++);
        }
    }
    return 1;
}

static int c_zrange(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return range_cmd(r, L, a, FR_ZSET);
}

static int c_lrange(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return range_cmd(r, L, a, FR_LIST);
}

static bool score_in(double s, double min, bool minx, double max, bool maxx)
{
    return (minx ? s > min : s >= min) && (maxx ? s < max : s <= max);
}

static int c_zremrangebyscore(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_ZSET, false);
    double min, max;
    bool minx, maxx;
    long long n = 0;
    size_t j = 0;

    if (!parse_score(a->p[2], a->l[2], &min, &minx) || !parse_score(a->p[3], a->l[3], &max, &maxx))
        return fail(r, "ERR min or max is not a float");
    TYPED_OR(r, k, push_int(L, 0));
    while (j < k->n) {
        if (score_in(k->el[j].score, min, minx, max, maxx)) {
            el_del(k, &k->el[j]);
            n++;
        } else {
            j++;
        }
    }
    key_drop_if_empty(r, k);
    return push_int(L, n);
}

static int c_sadd(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_SET, true);
    long long n = 0;
    int i;

    TYPED_OR(r, k, -1);
    for (i = 2; i < a->n; i++) {
        if (!el_find(k, a->p[i], a->l[i])) {
            el_add(k, a->p[i], a->l[i]);
            n++;
        }
    }
    return push_int(L, n);
}

static int c_smembers(struct fake_redis *r, lua_State *L, const struct args *a)
{
    return list_elems(r, L, a, FR_SET, 0);
}

/* SRANDMEMBER key [count]: deterministic here (the first members), which
 * Redis's randomness allows. */
static int c_srandmember(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_SET, false);
    long long count;
    size_t j;

    if (a->n < 3) {
        TYPED_OR(r, k, push_nil(L));
        return push_bulk(L, k->el[0].f, k->el[0].flen);
    }
    if (!parse_ll(a->p[2], a->l[2], &count) || count < 0)
        return fail(r, "ERR fake_redis: SRANDMEMBER count < 0 not modelled");
    if (!k && r->err[0])
        return -1;
    lua_newtable(L);
    for (j = 0; k && j < k->n && (long long)j < count; j++) {
        push_bulk(L, k->el[j].f, k->el[j].flen);
        lua_rawseti(L, -2, (int)j + 1);
    }
    return 1;
}

static int c_rpush(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_LIST, true);
    int i;

    TYPED_OR(r, k, -1);
    for (i = 2; i < a->n; i++)
        el_add(k, a->p[i], a->l[i]);
    return push_int(L, (long long)k->n);
}

static int c_lindex(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_LIST, false);
    long long i;

    if (!parse_ll(a->p[2], a->l[2], &i))
        return fail(r, "ERR value is not an integer or out of range");
    TYPED_OR(r, k, push_nil(L));
    if (i < 0)
        i += (long long)k->n;
    if (i < 0 || i >= (long long)k->n)
        return push_nil(L);
    return push_bulk(L, k->el[i].f, k->el[i].flen);
}

static int c_lrem(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_LIST, false);
    long long count, n = 0;
    size_t j;

    if (!parse_ll(a->p[2], a->l[2], &count))
        return fail(r, "ERR value is not an integer or out of range");
    TYPED_OR(r, k, push_int(L, 0));
    if (count >= 0) {
        j = 0;
        while (j < k->n && (count == 0 || n < count)) {
            if (k->el[j].flen == a->l[3] && memcmp(k->el[j].f, a->p[3], a->l[3]) == 0) {
                el_del(k, &k->el[j]);
                n++;
            } else {
                j++;
            }
        }
    } else {
        j = k->n;
        while (j > 0 && n < -count) {
            j--;
            if (k->el[j].flen == a->l[3] && memcmp(k->el[j].f, a->p[3], a->l[3]) == 0) {
                el_del(k, &k->el[j]);
                n++;
            }
        }
    }
    key_drop_if_empty(r, k);
    return push_int(L, n);
}

static int c_lpop(struct fake_redis *r, lua_State *L, const struct args *a)
{
    struct fr_key *k = key_typed(r, a->p[1], a->l[1], FR_LIST, false);

    if (a->n > 2)
        return fail(r, "ERR fake_redis: LPOP count not modelled");
    TYPED_OR(r, k, push_nil(L));
    push_bulk(L, k->el[0].f, k->el[0].flen);
    el_del(k, &k->el[0]);
    key_drop_if_empty(r, k);
    return 1;
}

static int c_publish(struct fake_redis *r, lua_State *L, const struct args *a)
{
    if (r->pub)
        r->pub(r->pub_arg, a->p[1], a->l[1], a->p[2], a->l[2]);
    return push_int(L, 0);
}

struct cmd {
    const char *name;
    int arity; /* >0 exact, <0 at least -arity (the name counted) */
    int (*fn)(struct fake_redis *r, lua_State *L, const struct args *a);
};

static const struct cmd cmd_table[] = {
    {"del", -2, c_del},
    {"exists", -2, c_exists},
    {"type", 2, c_type},
    {"pexpire", 3, c_pexpire},
    {"pttl", 2, c_pttl},
    {"get", 2, c_get},
    {"set", -3, c_set},
    {"incr", 2, c_incr},
    {"decr", 2, c_decr},
    {"incrby", 3, c_incrby},
    {"decrby", 3, c_decrby},
    {"hget", 3, c_hget},
    {"hset", -4, c_hset},
    {"hexists", 3, c_hexists},
    {"hdel", -3, c_hdel},
    {"hincrby", 4, c_hincrby},
    {"hlen", 2, c_hlen},
    {"hmget", -3, c_hmget},
    {"hkeys", 2, c_hkeys},
    {"hvals", 2, c_hvals},
    {"hgetall", 2, c_hgetall},
    {"zadd", -4, c_zadd},
    {"zscore", 3, c_zscore},
    {"zrem", -3, c_zrem},
    {"zincrby", 4, c_zincrby},
    {"zrange", -4, c_zrange},
    {"zremrangebyscore", 4, c_zremrangebyscore},
    {"sadd", -3, c_sadd},
    {"srem", -3, c_srem},
    {"smembers", 2, c_smembers},
    {"srandmember", -2, c_srandmember},
    {"rpush", -3, c_rpush},
    {"lindex", 3, c_lindex},
    {"lrem", 4, c_lrem},
    {"lpop", -2, c_lpop},
    {"lrange", 4, c_lrange},
    {"publish", 3, c_publish},
    {"spublish", 3, c_publish},
};

/* ---- the Lua side ----------------------------------------------------------- */

static struct fake_redis *lua_self(lua_State *L)
{
    struct fake_redis *r;

    lua_getfield(L, LUA_REGISTRYINDEX, "fake_redis");
    r = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return r;
}

static void push_error_table(lua_State *L, const char *msg)
{
    lua_newtable(L);
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "err");
}

/* redis.call (raise) and redis.pcall (return the error table). */
static int redis_call_impl(lua_State *L, bool raise)
{
    struct fake_redis *r = lua_self(L);
    struct args a;
    size_t i;
    int j, top = lua_gettop(L), rc = -1;

    if (top < 1 || top > FR_MAX_ARGS) {
        snprintf(r->err, sizeof(r->err),
                 "ERR Please specify at least one argument for this redis lib call");
        goto err;
    }
    a.n = top;
    for (j = 1; j <= top; j++) {
        if (lua_type(L, j) != LUA_TSTRING && lua_type(L, j) != LUA_TNUMBER) {
            snprintf(r->err, sizeof(r->err),
                     "ERR Lua redis lib command arguments must be strings or integers");
            goto err;
        }
        a.p[j - 1] = lua_tolstring(L, j, &a.l[j - 1]);
    }
    for (i = 0; i < sizeof(cmd_table) / sizeof(cmd_table[0]); i++) {
        const struct cmd *c = &cmd_table[i];

        if (!ARG_IS(&a, 0, c->name))
            continue;
        if ((c->arity > 0 && a.n != c->arity) || (c->arity < 0 && a.n < -c->arity)) {
            snprintf(r->err, sizeof(r->err), "ERR wrong number of arguments for '%s' command",
                     c->name);
            goto err;
        }
        r->err[0] = '\0';
        rc = c->fn(r, L, &a);
        if (rc < 0)
            goto err;
        return rc;
    }
    snprintf(r->err, sizeof(r->err), "ERR fake_redis: command '%.*s' not modelled", (int)a.l[0],
             a.p[0]);
err:
    push_error_table(L, r->err);
    if (raise)
        return lua_error(L);
    return 1;
}

static int l_call(lua_State *L)
{
    return redis_call_impl(L, true);
}

static int l_pcall(lua_State *L)
{
    return redis_call_impl(L, false);
}

static int l_error_reply(lua_State *L)
{
    push_error_table(L, luaL_checkstring(L, 1));
    return 1;
}

static int l_status_reply(lua_State *L)
{
    return push_status(L, luaL_checkstring(L, 1));
}

int fr_create(struct fake_redis **out, fr_publish_fn *pub, void *pub_arg)
{
    struct fake_redis *r = calloc(1, sizeof(*r));

    if (!r)
        return -ENOMEM;
    r->L = luaL_newstate();
    if (!r->L) {
        free(r);
        return -ENOMEM;
    }
    /* What Redis opens: base, table, string, math (no io, os, debug). */
    lua_pushcfunction(r->L, luaopen_base);
    lua_call(r->L, 0, 0);
    lua_pushcfunction(r->L, luaopen_table);
    lua_call(r->L, 0, 0);
    lua_pushcfunction(r->L, luaopen_string);
    lua_call(r->L, 0, 0);
    lua_pushcfunction(r->L, luaopen_math);
    lua_call(r->L, 0, 0);
    lua_pushlightuserdata(r->L, r);
    lua_setfield(r->L, LUA_REGISTRYINDEX, "fake_redis");
    lua_newtable(r->L);
    lua_pushcfunction(r->L, l_call);
    lua_setfield(r->L, -2, "call");
    lua_pushcfunction(r->L, l_pcall);
    lua_setfield(r->L, -2, "pcall");
    lua_pushcfunction(r->L, l_error_reply);
    lua_setfield(r->L, -2, "error_reply");
    lua_pushcfunction(r->L, l_status_reply);
    lua_setfield(r->L, -2, "status_reply");
    lua_setglobal(r->L, "redis");
    r->db = db_new();
    r->pub = pub;
    r->pub_arg = pub_arg;
    *out = r;
    return 0;
}

void fr_set_publish(struct fake_redis *r, fr_publish_fn *pub, void *pub_arg)
{
    r->pub = pub;
    r->pub_arg = pub_arg;
}

void fr_destroy(struct fake_redis *r)
{
    if (!r)
        return;
    lua_close(r->L);
    fr_db_free(r->db);
    free(r);
}

int fr_load(struct fake_redis *r, const char *name, const char *text)
{
    if (luaL_loadbuffer(r->L, text, strlen(text), name) != 0) {
        fprintf(stderr, "fake_redis: script %s does not compile: %s\n", name,
                lua_tostring(r->L, -1));
        lua_pop(r->L, 1);
        return -EINVAL;
    }
    return luaL_ref(r->L, LUA_REGISTRYINDEX);
}

void fr_reply_free(struct pool_reply *rep)
{
    size_t i;

    if (!rep)
        return;
    for (i = 0; i < rep->elements; i++)
        fr_reply_free(rep->element[i]);
    free(rep->element);
    free(rep->str);
    free(rep);
}

static struct pool_reply *reply_new(int type)
{
    struct pool_reply *rep = calloc(1, sizeof(*rep));

    if (!rep)
        abort();
    rep->type = type;
    return rep;
}

static struct pool_reply *reply_str(int type, const char *p, size_t n)
{
    struct pool_reply *rep = reply_new(type);

    rep->str = xdup(p, n);
    rep->len = n;
    return rep;
}

/* Lua value at idx -> reply, as Redis's luaReplyToRedisReply. */
static struct pool_reply *lua_to_reply(lua_State *L, int idx)
{
    struct pool_reply *rep;
    size_t n, cap = 0;

    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        rep = reply_new(POOL_REPLY_INTEGER);
        rep->integer = (long long)lua_tonumber(L, idx);
        return rep;
    case LUA_TSTRING: {
        const char *s = lua_tolstring(L, idx, &n);

        return reply_str(POOL_REPLY_STRING, s, n);
    }
    case LUA_TBOOLEAN:
        if (!lua_toboolean(L, idx))
            return reply_new(POOL_REPLY_NIL);
        rep = reply_new(POOL_REPLY_INTEGER);
        rep->integer = 1;
        return rep;
    case LUA_TTABLE:
        break;
    default:
        return reply_new(POOL_REPLY_NIL);
    }
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    lua_getfield(L, idx, "err");
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *s = lua_tolstring(L, -1, &n);

        rep = reply_str(POOL_REPLY_ERROR, s, n);
        lua_pop(L, 1);
        return rep;
    }
    lua_pop(L, 1);
    lua_getfield(L, idx, "ok");
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *s = lua_tolstring(L, -1, &n);

        rep = reply_str(POOL_REPLY_STATUS, s, n);
        lua_pop(L, 1);
        return rep;
    }
    lua_pop(L, 1);
    rep = reply_new(POOL_REPLY_ARRAY);
    for (n = 0;; n++) {
        lua_rawgeti(L, idx, (int)n + 1);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            rep->element = realloc(rep->element, cap * sizeof(*rep->element));
            if (!rep->element)
                abort();
        }
        rep->element[n] = lua_to_reply(L, -1);
        rep->elements = n + 1;
        lua_pop(L, 1);
    }
    return rep;
}

static void set_array(lua_State *L, const char *name, int n, const char *const *argv,
                      const size_t *lens)
{
    int i;

    lua_createtable(L, n, 0);
    for (i = 0; i < n; i++) {
        lua_pushlstring(L, argv[i], lens[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, name);
}

struct pool_reply *fr_eval(struct fake_redis *r, int id, uint64_t now_ms, int numkeys, int argc,
                           const char *const *argv, const size_t *lens)
{
    lua_State *L = r->L;
    struct pool_reply *rep;
    char msg[512];

    r->now = now_ms;
    set_array(L, "KEYS", numkeys, argv, lens);
    set_array(L, "ARGV", argc - numkeys, argv + numkeys, lens + numkeys);
    lua_rawgeti(L, LUA_REGISTRYINDEX, id);
    if (lua_pcall(L, 0, 1, 0) != 0) {
        const char *e = NULL;

        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            e = lua_tostring(L, -1);
            snprintf(msg, sizeof(msg), "ERR Error running script: %s", e ? e : "?");
            lua_pop(L, 1);
        } else {
            e = lua_tostring(L, -1);
            snprintf(msg, sizeof(msg), "ERR Error running script: %s", e ? e : "?");
        }
        lua_pop(L, 1);
        return reply_str(POOL_REPLY_ERROR, msg, strlen(msg));
    }
    rep = lua_to_reply(L, -1);
    lua_pop(L, 1);
    return rep;
}

struct fr_db *fr_db(struct fake_redis *r)
{
    return r->db;
}

void fr_set_db(struct fake_redis *r, struct fr_db *db)
{
    fr_db_free(r->db);
    r->db = db;
}

void fr_flush(struct fake_redis *r)
{
    fr_set_db(r, db_new());
}

/* Drops every expired key (as an active expiry cycle would). */
static void expire_all(struct fake_redis *r, uint64_t now_ms)
{
    size_t i = 0;

    r->now = now_ms;
    while (i < r->db->n) {
        struct fr_key *k = &r->db->k[i];

        if (k->expire_ms != 0 && k->expire_ms <= now_ms) {
            note_expiry(r, k);
            key_del_at(r->db, i);
        } else {
            i++;
        }
    }
}

size_t fr_db_size(struct fake_redis *r, uint64_t now_ms)
{
    expire_all(r, now_ms);
    return r->db->n;
}

bool fr_hget_int(struct fake_redis *r, uint64_t now_ms, const char *key, const char *field,
                 long long *out)
{
    struct fr_key *k;
    struct fr_el *e;

    r->now = now_ms;
    k = key_find(r, key, strlen(key));
    if (!k || k->type != FR_HASH)
        return false;
    e = el_find(k, field, strlen(field));
    return e && parse_ll(e->v, e->vlen, out);
}

long long fr_pttl(struct fake_redis *r, uint64_t now_ms, const char *key)
{
    struct fr_key *k;

    r->now = now_ms;
    k = key_find(r, key, strlen(key));
    if (!k)
        return -2;
    return k->expire_ms ? (long long)(k->expire_ms - now_ms) : -1;
}

void fr_dump(struct fake_redis *r, uint64_t now_ms)
{
    static const char *const names[] = {"string", "hash", "zset", "set", "list"};
    size_t i, j;

    expire_all(r, now_ms);
    for (i = 0; i < r->db->n; i++) {
        const struct fr_key *k = &r->db->k[i];

        fprintf(stderr, "    %s %s pttl=%lld", names[k->type], k->name,
                k->expire_ms ? (long long)(k->expire_ms - now_ms) : -1LL);
        if (k->type == FR_STR)
            fprintf(stderr, " = %s", k->s);
        for (j = 0; j < k->n; j++)
            fprintf(stderr, " [%s%s%s]", k->el[j].f, k->el[j].v ? "=" : "",
                    k->el[j].v ? k->el[j].v : "");
        fprintf(stderr, "\n");
    }
}

const char *fr_key_name(struct fake_redis *r, size_t i, size_t *count)
{
    *count = r->db->n;
    return i < r->db->n ? r->db->k[i].name : NULL;
}

bool fr_expired_since(struct fake_redis *r, const char *key, uint64_t since_ms)
{
    size_t i, n = r->nexp < FR_MAX_EXPIRIES ? r->nexp : FR_MAX_EXPIRIES;

    for (i = 0; i < n; i++)
        if (r->exp[i].at >= since_ms && strcmp(r->exp[i].name, key) == 0)
            return true;
    return false;
}

void fr_forget_expiries(struct fake_redis *r)
{
    r->nexp = 0;
}
