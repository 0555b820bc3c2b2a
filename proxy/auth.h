/* Client authentication: a shared password (requirepass) and ACL-style
 * users whose glob patterns say which lock names they may touch.
 *
 * Model (a subset of Redis ACL): a user is "NAME [on|off] [>password...]
 * [nopass] [~pattern...] [allkeys]". Users start off, with no password and
 * no pattern, as in Redis. `requirepass P` is shorthand for a user
 * "default on >P ~*" unless a `user default ...` line says otherwise;
 * `AUTH password` logs in as "default". As soon as either is configured
 * every connection must AUTH before anything but AUTH, HELLO, PING and
 * QUIT, and a logged-in user may run a command that names a lock only if
 * the name matches one of its patterns.
 *
 * A px_auth is built while the configuration is parsed and never changes
 * afterwards; it is reference-counted so px_opts can be copied. A client
 * borrows its px_user from the server's current px_auth; a reload swaps
 * the px_auth and re-binds every client by user name (px_auth_rebind). */
#ifndef LP_PROXY_AUTH_H
#define LP_PROXY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;
struct px_client;
struct px_req;
struct px_auth;

#define PX_AUTH_DEFAULT_USER "default"
#define PX_USER_NAME_MAX     128u /* longest user name: printable, no space (owner fields hold it) */
/* Before AUTH a connection gets Redis-like tight limits, so an unknown peer
 * cannot make the proxy buffer much: small requests, few arguments, few
 * requests per read. */
#define PX_PREAUTH_MAX_BYTES 1024u
#define PX_PREAUTH_MAX_ARGS  10u
#define PX_PREAUTH_PIPELINE  8u
#define PX_AUTH_LOG_EVERY_MS 1000u /* at most one auth-failure line per second */

struct px_user {
    char *name;     /* owned: user name */
    bool on;        /* may log in */
    bool nopass;    /* any password is accepted */
    bool allkeys;   /* may access every lock name */
    unsigned npass; /* passwords in pass */
    char **pass;    /* owned: accepted passwords */
    unsigned npat;  /* patterns in pat */
    char **pat;     /* owned: glob patterns on lock names */
};

/* A new, empty configuration with one reference; NULL on -ENOMEM. */
struct px_auth *px_auth_create(void);

/* Takes one more reference; returns a. */
struct px_auth *px_auth_get(struct px_auth *a);

/* Drops a reference and frees a with the last one. NULL is a no-op. */
void px_auth_put(struct px_auth *a);

/* Sets the shared password ("" removes it). Returns 0 or -ENOMEM. */
int px_auth_set_requirepass(struct px_auth *a, const char *password);

/* Adds (or replaces, by name) a user from argv = {NAME, rules...}.
 * Returns 0, or -EINVAL with the reason in why, or -ENOMEM. */
int px_auth_set_user(struct px_auth *a, int argc, const char *const *argv, char *why, size_t n);

/* True when clients must AUTH (a requirepass or any user). a may be NULL. */
bool px_auth_required(const struct px_auth *a);

/* The user called name (the requirepass user for "default"), or NULL. */
const struct px_user *px_auth_find(const struct px_auth *a, const char *name, size_t len);

/* The enabled user whose password matches, or NULL. The comparison takes
 * the same time wherever the password differs. */
const struct px_user *px_auth_check(const struct px_auth *a, const char *name, size_t nlen,
                                    const char *pass, size_t plen);

/* True if u's patterns allow the lock name. */
bool px_user_may_access(const struct px_user *u, const char *name, size_t len);

/* Redis-style glob: '*', '?', "[a-z]", "[^abc]" and '\' escapes. */
bool px_glob_match(const char *pat, size_t plen, const char *s, size_t slen);

/* ---- per connection --------------------------------------------------- */

/* Sets a new connection's state and its request limits (tight until AUTH
 * when auth is required). Call after its parser is initialised. */
void px_auth_client_init(struct px_client *cl);

/* Admission check run before every command: false when req is refused
 * (NOAUTH before AUTH, NOPERM for a lock outside the user's patterns);
 * the error reply has then been written, the caller completes req. */
bool px_auth_admit(struct px_req *req);

/* Logs cl in as user (NULL: "default") with password. Returns 0, or
 * -EPERM (wrong password or disabled user: counted and logged, rate
 * limited). */
int px_auth_login(struct px_client *cl, const char *user, size_t ulen, const char *pass,
                  size_t plen);

/* After srv->opts.auth was replaced (reload): re-binds every logged-in
 * client to the user of the same name and closes those whose user is gone
 * or disabled. The previous px_auth (which the clients' users point into)
 * must stay alive until this returns. Returns how many connections were
 * closed. */
unsigned px_auth_rebind(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
