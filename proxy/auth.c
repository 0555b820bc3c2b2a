/* Client authentication: user table, rule parsing, glob matching, the
 * per-command admission check and logins; see auth.h for the model. */
#include "proxy/auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "proxy/client.h"
#include "proxy/client_cmd.h"
#include "proxy/cmd.h"
#include "proxy/reply.h"
#include "proxy/request.h"
#include "proxy/server.h"
#include "sched/loop.h"

struct px_auth {
    unsigned refs;           /* references (opts copies, reload in progress) */
    unsigned nusers;         /* users in the table */
    unsigned cap;            /* slots in users */
    struct px_user **users;  /* owned: explicit users, in definition order */
    char *requirepass;       /* owned: shared password, NULL for none */
    struct px_user req_user; /* "default" made from requirepass */
    char *req_pass[1];       /* req_user.pass storage (borrows requirepass) */
};

/* ---- users ---------------------------------------------------------------- */

static void strv_free(char **v, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void user_free(struct px_user *u)
{
    free(u->name);
    strv_free(u->pass, u->npass);
    strv_free(u->pat, u->npat);
    free(u);
}

/* Appends a copy of s to *v (n entries). Returns 0 or -ENOMEM. */
static int strv_add(char ***v, unsigned *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof(**v));
    char *copy = strdup(s);

    if (nv)
        *v = nv;
    if (!nv || !copy) {
        free(copy);
        return -ENOMEM;
    }
    nv[(*n)++] = copy;
    return 0;
}

/* Removes every entry equal to s. */
static void strv_del(char **v, unsigned *n, const char *s)
{
    unsigned i = 0;

    while (i < *n) {
        if (strcmp(v[i], s) == 0) {
            free(v[i]);
            v[i] = v[--*n];
        } else {
            i++;
        }
    }
}

static void strv_clear(char ***v, unsigned *n)
{
    strv_free(*v, *n);
    *v = NULL;
    *n = 0;
}

/* Rules that mean "everything" in Redis and are therefore no-ops here
 * (lockproxy has no per-command or per-channel permissions). */
static bool rule_is_noop(const char *r)
{
    static const char *const noops[] = {"+@all", "allcommands", "&*", "allchannels",
                                        "resetchannels"};
    size_t i;

    for (i = 0; i < sizeof(noops) / sizeof(noops[0]); i++) {
        if (strcmp(r, noops[i]) == 0)
            return true;
    }
    return false;
}

/* Applies a keyword rule (no prefix character). Returns 0 or -EINVAL. */
static int user_rule_word(struct px_user *u, const char *r)
{
    if (strcmp(r, "on") == 0) {
        u->on = true;
    } else if (strcmp(r, "off") == 0) {
        u->on = false;
    } else if (strcmp(r, "nopass") == 0) {
        strv_clear(&u->pass, &u->npass);
        u->nopass = true;
    } else if (strcmp(r, "resetpass") == 0) {
        strv_clear(&u->pass, &u->npass);
        u->nopass = false;
    } else if (strcmp(r, "allkeys") == 0) {
        u->allkeys = true;
    } else if (strcmp(r, "resetkeys") == 0) {
        strv_clear(&u->pat, &u->npat);
        u->allkeys = false;
    } else if (strcmp(r, "reset") == 0) {
        user_rule_word(u, "resetpass");
        user_rule_word(u, "resetkeys");
        u->on = false;
    } else if (!rule_is_noop(r)) {
        return -EINVAL;
    }
    return 0;
}

/* Applies one rule. Returns 0, -EINVAL (why says which) or -ENOMEM. */
static int user_rule(struct px_user *u, const char *r, char *why, size_t n)
{
    int rc = 0;

    if (r[0] == '>' && r[1]) {
        rc = strv_add(&u->pass, &u->npass, r + 1);
        u->nopass = false;
    } else if (r[0] == '<' && r[1]) {
        strv_del(u->pass, &u->npass, r + 1);
    } else if (r[0] == '~' && r[1]) {
        if (strcmp(r, "~*") == 0)
            u->allkeys = true;
        else
            rc = strv_add(&u->pat, &u->npat, r + 1);
    } else if (user_rule_word(u, r) < 0) {
        snprintf(why, n,
                 "user '%s': unknown rule '%.64s' (use on, off, >password, nopass, "
                 "~pattern, allkeys, resetkeys, resetpass, reset)",
                 u->name, r);
        return -EINVAL;
    }
    return rc;
}

static bool name_is_valid(const char *s)
{
    size_t i, len = strlen(s);

    if (len == 0 || len > PX_USER_NAME_MAX)
        return false;
    for (i = 0; i < len; i++) {
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return false;
    }
    return true;
}

/* Builds a user from {NAME, rules...}. Returns 0 and *out, or -errno. */
static int user_parse(int argc, const char *const *argv, struct px_user **out, char *why, size_t n)
{
    struct px_user *u;
    int i, rc = -ENOMEM;

    if (argc < 1 || !name_is_valid(argv[0])) {
        snprintf(why, n, "user needs a name (1-%u printable characters) and rules",
                 PX_USER_NAME_MAX);
        return -EINVAL;
    }
    u = calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    u->name = strdup(argv[0]);
    if (!u->name)
        goto err_free;
    for (i = 1; i < argc; i++) {
        rc = user_rule(u, argv[i], why, n);
        if (rc < 0)
            goto err_free;
    }
    *out = u;
    return 0;
err_free:
    user_free(u);
    return rc;
}

/* ---- the table ------------------------------------------------------------ */

struct px_auth *px_auth_create(void)
{
    struct px_auth *a = calloc(1, sizeof(*a));

    if (!a)
        return NULL;
    a->refs = 1;
    a->req_user.name = PX_AUTH_DEFAULT_USER;
    a->req_user.on = true;
    a->req_user.allkeys = true;
    a->req_user.pass = a->req_pass;
    return a;
}

struct px_auth *px_auth_get(struct px_auth *a)
{
    a->refs++;
    return a;
}

void px_auth_put(struct px_auth *a)
{
    unsigned i;

    if (!a || --a->refs > 0)
        return;
    for (i = 0; i < a->nusers; i++)
        user_free(a->users[i]);
    free(a->users);
    free(a->requirepass);
    free(a);
}

int px_auth_set_requirepass(struct px_auth *a, const char *password)
{
    char *copy = NULL;

    if (password[0] && !(copy = strdup(password)))
        return -ENOMEM;
    free(a->requirepass);
    a->requirepass = copy;
    a->req_pass[0] = copy;
    a->req_user.npass = copy ? 1 : 0;
    return 0;
}

static int user_index(const struct px_auth *a, const char *name, size_t len)
{
    unsigned i;

    for (i = 0; i < a->nusers; i++) {
        if (strlen(a->users[i]->name) == len && memcmp(a->users[i]->name, name, len) == 0)
            return (int)i;
    }
    return -1;
}

int px_auth_set_user(struct px_auth *a, int argc, const char *const *argv, char *why, size_t n)
{
    struct px_user *u;
    int rc = user_parse(argc, argv, &u, why, n), i;

    if (rc < 0)
        return rc;
    i = user_index(a, u->name, strlen(u->name));
    if (i >= 0) { /* a later definition replaces an earlier one */
        user_free(a->users[i]);
        a->users[i] = u;
        return 0;
    }
    if (a->nusers == a->cap) {
        unsigned cap = a->cap ? a->cap * 2 : 4;
        struct px_user **nu = realloc(a->users, cap * sizeof(*nu));

        if (!nu) {
            user_free(u);
            return -ENOMEM;
        }
        a->users = nu;
        a->cap = cap;
    }
    a->users[a->nusers++] = u;
    return 0;
}

bool px_auth_required(const struct px_auth *a)
{
    return a && (a->nusers > 0 || a->requirepass);
}

const struct px_user *px_auth_find(const struct px_auth *a, const char *name, size_t len)
{
    int i;

    if (!a)
        return NULL;
    i = user_index(a, name, len);
    if (i >= 0)
        return a->users[i];
    if (a->requirepass && len == strlen(PX_AUTH_DEFAULT_USER) &&
        memcmp(name, PX_AUTH_DEFAULT_USER, len) == 0)
        return &a->req_user;
    return NULL;
}

/* Compares in time that depends on the lengths only, not on where the
 * bytes differ. */
static bool secret_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char diff = alen != blen;
    size_t i;

    for (i = 0; i < alen; i++)
        diff |= (unsigned char)(a[i] ^ b[blen ? i % blen : 0]);
    return diff == 0;
}

const struct px_user *px_auth_check(const struct px_auth *a, const char *name, size_t nlen,
                                    const char *pass, size_t plen)
{
    const struct px_user *u = px_auth_find(a, name, nlen);
    bool ok = false;
    unsigned i;

    if (!u || !u->on)
        return NULL;
    for (i = 0; i < u->npass; i++)
        ok |= secret_equal(pass, plen, u->pass[i], strlen(u->pass[i]));
    return ok || u->nopass ? u : NULL;
}

/* ---- glob patterns --------------------------------------------------------- */

/* Matches c against the class at p ("[...]", p[0] == '['). Returns the
 * pattern bytes the class spans; an unterminated class ends the pattern. */
static size_t class_match(const char *p, size_t plen, unsigned char c, bool *hit)
{
    size_t i = 1;
    bool neg = false, found = false;

    if (i < plen && p[i] == '^') {
        neg = true;
        i++;
    }
    for (; i < plen && p[i] != ']'; i++) {
        unsigned char lo = (unsigned char)p[i], hi;

        if (p[i] == '\\' && i + 1 < plen) {
            found |= (unsigned char)p[++i] == c;
        } else if (i + 2 < plen && p[i + 1] == '-') {
            hi = (unsigned char)p[i + 2];
            found |= lo <= hi ? (c >= lo && c <= hi) : (c >= hi && c <= lo);
            i += 2;
        } else {
            found |= lo == c;
        }
    }
    *hit = found != neg;
    return i < plen ? i + 1 : i;
}

/* Matches c against the single-character token at p (not '*'). Returns
 * the pattern bytes the token spans. */
static size_t token_match(const char *p, size_t plen, unsigned char c, bool *hit)
{
    if (p[0] == '?') {
        *hit = true;
        return 1;
    }
    if (p[0] == '[')
        return class_match(p, plen, c, hit);
    if (p[0] == '\\' && plen >= 2) {
        *hit = (unsigned char)p[1] == c;
        return 2;
    }
    *hit = (unsigned char)p[0] == c;
    return 1;
}

/* Every token but '*' matches exactly one character, so backtracking to
 * the last '*' only is enough: O(plen * slen), no recursion. */
bool px_glob_match(const char *pat, size_t plen, const char *s, size_t slen)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0, k;
    bool hit = false;

    while (si < slen) {
        if (pi < plen && pat[pi] == '*') {
            star_p = ++pi;
            star_s = si;
            continue;
        }
        k = pi < plen ? token_match(pat + pi, plen - pi, (unsigned char)s[si], &hit) : 0;
        if (k > 0 && hit) {
            pi += k;
            si++;
            continue;
        }
        if (star_p == SIZE_MAX)
            return false;
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && pat[pi] == '*')
        pi++;
    return pi == plen;
}

bool px_user_may_access(const struct px_user *u, const char *name, size_t len)
{
    unsigned i;

    if (u->allkeys)
        return true;
    for (i = 0; i < u->npat; i++) {
        if (px_glob_match(u->pat[i], strlen(u->pat[i]), name, len))
            return true;
    }
    return false;
}

/* ---- connections ------------------------------------------------------------- */

/* Request limits: tight until the client is authenticated. */
static void client_apply_limits(struct px_client *cl)
{
    const struct px_opts *o = &cl->srv->opts;
    bool open = cl->authed || !px_auth_required(o->auth);

    cl->parser.max_args = open ? o->max_args : PX_PREAUTH_MAX_ARGS;
    cl->parser.max_bytes = open ? o->max_request_bytes : PX_PREAUTH_MAX_BYTES;
    cl->parser.close_over_limit = !open; /* as Redis: an unknown peer gets no second chance */
}

void px_auth_client_init(struct px_client *cl)
{
    cl->user = NULL;
    cl->authed = !px_auth_required(cl->srv->opts.auth);
    client_apply_limits(cl);
}

static bool preauth_allowed(const struct px_cmd *c)
{
    return c && (strcmp(c->name, "AUTH") == 0 || strcmp(c->name, "HELLO") == 0 ||
                 strcmp(c->name, "PING") == 0 || strcmp(c->name, "QUIT") == 0);
}

bool px_auth_admit(struct px_req *req)
{
    struct px_client *cl = req->cl;
    const struct px_cmd *c = req->cmd;
    const struct px_arg *name;

    if (!px_auth_required(cl->srv->opts.auth))
        return true;
    if (!cl->authed || !cl->user) {
        if (preauth_allowed(c))
            return true;
        px_reply_error(px_req_out(req), "NOAUTH Authentication required.");
        return false;
    }
    if (!c || c->name_arg <= 0 || c->name_arg >= req->argc)
        return true;
    name = &req->argv[c->name_arg];
    if (px_user_may_access(cl->user, name->p, name->len))
        return true;
    px_reply_error(px_req_out(req), "NOPERM user '%s' has no permissions to access the '%.*s' lock",
                   cl->user->name, (int)(name->len < 200 ? name->len : 200), name->p);
    return false;
}

/* Counts a failed login and logs it, at most once per PX_AUTH_LOG_EVERY_MS
 * at WARN (a password-guessing peer must not flood the log). */
static void auth_failed(struct px_client *cl, const char *user, size_t ulen)
{
    struct px_server *srv = cl->srv;
    uint64_t now = sched_loop_now_ms(srv->loop);
    char addr[PX_CLIENT_ADDR_MAX];

    srv->stats.auth_failures++;
    px_client_addr(cl, false, addr, sizeof(addr));
    if (now - srv->auth_log_ms < PX_AUTH_LOG_EVERY_MS && srv->auth_log_ms != 0) {
        srv->auth_log_quiet++;
        log_msg(LOG_LVL_DEBUG, "auth: client %llu from %s failed AUTH as '%.*s'",
                (unsigned long long)cl->id, addr, (int)(ulen < 64 ? ulen : 64), user);
        return;
    }
    log_msg(LOG_LVL_WARN,
            "auth: client %llu from %s failed AUTH as '%.*s' (%llu more failures since the "
            "last report)",
            (unsigned long long)cl->id, addr, (int)(ulen < 64 ? ulen : 64), user,
            (unsigned long long)srv->auth_log_quiet);
    srv->auth_log_ms = now;
    srv->auth_log_quiet = 0;
}

int px_auth_login(struct px_client *cl, const char *user, size_t ulen, const char *pass,
                  size_t plen)
{
    const struct px_auth *a = cl->srv->opts.auth;
    const struct px_user *u;

    if (!user) {
        user = PX_AUTH_DEFAULT_USER;
        ulen = strlen(user);
    }
    if (!px_auth_required(a)) { /* no auth: "default" is a nopass user, as in Redis */
        if (ulen == strlen(PX_AUTH_DEFAULT_USER) && memcmp(user, PX_AUTH_DEFAULT_USER, ulen) == 0)
            return 0;
        auth_failed(cl, user, ulen);
        return -EPERM;
    }
    u = px_auth_check(a, user, ulen, pass, plen);
    if (!u) {
        auth_failed(cl, user, ulen);
        return -EPERM;
    }
    cl->user = u;
    cl->authed = true;
    client_apply_limits(cl);
    return 0;
}

/* Re-binds one client; returns false when it must be closed. */
static bool client_rebind(struct px_client *cl, const struct px_auth *a)
{
    const char *name;

    if (!px_auth_required(a)) {
        cl->user = NULL;
        cl->authed = true; /* now "default" with no password, as at connect */
        return true;
    }
    if (!cl->authed)
        return true; /* still has to AUTH */
    name = cl->user ? cl->user->name : PX_AUTH_DEFAULT_USER;
    cl->user = px_auth_find(a, name, strlen(name));
    return cl->user && cl->user->on;
}

unsigned px_auth_rebind(struct px_server *srv)
{
    struct list *n, *t;
    unsigned closed = 0;

    list_for_each_safe(n, t, &srv->clients)
    {
        struct px_client *cl = list_entry(n, struct px_client, client_node);

        if (cl->closing)
            continue;
        if (client_rebind(cl, srv->opts.auth)) {
            client_apply_limits(cl);
            continue;
        }
        cl->user = NULL;
        cl->authed = false;
        px_client_close(cl);
        closed++;
    }
    return closed;
}
