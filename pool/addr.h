/* Upstream endpoints (module-private to pool/): a host and port (or a unix
 * socket path), its resolved address, and name resolution that never blocks
 * the event loop.
 *
 * An IP literal or a unix path resolves at once, in the caller. A host name
 * is looked up by a short-lived resolver thread (getaddrinfo): the loop
 * polls pool__addr_resolve(), which returns -EINPROGRESS until the thread
 * has finished, then the result. Only pool__addr_resolve_now() blocks; the
 * pool calls it once, in pool_start(), so that a bad name fails there. */
#ifndef LP_POOL_ADDR_H
#define LP_POOL_ADDR_H

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pool__lookup;

/* Longest host name kept (DNS names are at most 253 bytes). */
#define POOL__HOST_MAX 256

struct pool__addr {
    char *host;                     /* owned: host name or IP literal, NULL for a unix path */
    char *unix_path;                /* owned: unix socket path, or NULL */
    int port;                       /* TCP port (host only) */
    bool numeric;                   /* host is an IP literal: resolving never blocks */
    struct sockaddr_storage ss;     /* resolved address */
    socklen_t sslen;                /* 0 until resolved */
    struct pool__lookup *lookup;    /* shared with the resolver thread while one runs */
    char where[POOL__HOST_MAX + 8]; /* "host:port" ("[v6]:port") or the path */
};

/* Sets a up for host:port or, when unix_path is set, for a unix socket.
 * Copies the strings. Returns 0 or -ENOMEM / -EINVAL. */
int pool__addr_init(struct pool__addr *a, const char *host, int port, const char *unix_path);

/* Frees the strings; a lookup still running finishes and frees itself. */
void pool__addr_deinit(struct pool__addr *a);

/* True when a is host:port (host compared exactly, as announced). */
bool pool__addr_is(const struct pool__addr *a, const char *host, size_t hostlen, int port);

/* Resolves a unless already resolved. Returns 0 (a->ss is valid),
 * -EINPROGRESS (a lookup runs in a thread: call again later), or -errno
 * with a message in err (-EHOSTUNREACH: the name does not resolve). Never
 * blocks. */
int pool__addr_resolve(struct pool__addr *a, char *err, size_t errlen);

/* As pool__addr_resolve(), but a host name is looked up in the calling
 * thread (blocking): for start-up only. */
int pool__addr_resolve_now(struct pool__addr *a, char *err, size_t errlen);

/* Drops the cached address of a host name, so that the next resolve looks
 * it up again (after a failed connect: the name may have moved). IP
 * literals and paths keep theirs. */
void pool__addr_forget(struct pool__addr *a);

/* Splits "host:port", "[v6]:port" or "v6:port" (n bytes of s) into host (NUL-
 * terminated, at most hostsize - 1 bytes) and port. An empty host is
 * allowed (Redis sends ":port" for "the address you used"). Returns 0 or
 * -EINVAL. */
int pool__addr_split(const char *s, size_t n, char *host, size_t hostsize, int *port);

#ifdef __cplusplus
}
#endif

#endif
