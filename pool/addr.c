/* Upstream endpoints and name resolution off the loop thread; see addr.h.
 *
 * A lookup (struct pool__lookup) is shared by the endpoint and one
 * detached resolver thread and reference counted between them: the
 * thread drops its reference after publishing the result (done, with
 * release ordering), the endpoint drops its own once it has read the
 * result (acquire) or when it is deinitialised first. Whoever drops the
 * last reference frees it, so neither side ever waits for the other and a
 * pool can be destroyed while a slow DNS query is still running.
 *
 * Rejected: getaddrinfo_a() (glibc's own threads, and a request that
 * cannot be freed until gai_cancel() says it may, which it may refuse);
 * a resolver thread per pool with a queue (more code for a rare event: a
 * name is looked up at start, then only after a connect to it failed). */
#include "pool/addr.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pool__lookup {
    atomic_int refs;            /* endpoint + thread while it runs */
    atomic_bool done;           /* the thread published the result */
    int port;                   /* port to resolve with */
    int err;                    /* result: 0 or -errno */
    struct sockaddr_storage ss; /* result address when err == 0 */
    socklen_t sslen;            /* its length */
    char msg[160];              /* error text when err < 0 */
    char host[];                /* owned: the name, NUL-terminated */
};

/* getaddrinfo() has its own error space; map it to -errno. Any "no such
 * name" flavour becomes -EHOSTUNREACH. */
static int gai_errno(int rc, int saved_errno)
{
    if (rc == EAI_SYSTEM)
        return -saved_errno;
    if (rc == EAI_MEMORY)
        return -ENOMEM;
    if (rc == EAI_AGAIN)
        return -EAGAIN;
    return -EHOSTUNREACH;
}

/* One getaddrinfo(); the first address is used. */
static int run_gai(const char *host, int port, int flags, struct sockaddr_storage *ss,
                   socklen_t *sslen, char *err, size_t errlen)
{
    struct addrinfo hints, *res;
    char portstr[16];
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | flags;
    snprintf(portstr, sizeof(portstr), "%d", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0) {
        int saved = errno;

        snprintf(err, errlen, "resolve %s: %s", host,
                 rc == EAI_SYSTEM ? strerror(saved) : gai_strerror(rc));
        return gai_errno(rc, saved);
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static bool is_ip_literal(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void lookup_unref(struct pool__lookup *lk)
{
    if (atomic_fetch_sub_explicit(&lk->refs, 1, memory_order_acq_rel) == 1)
        free(lk);
}

static void *lookup_thread(void *arg)
{
    struct pool__lookup *lk = arg;

    lk->err = run_gai(lk->host, lk->port, 0, &lk->ss, &lk->sslen, lk->msg, sizeof(lk->msg));
    atomic_store_explicit(&lk->done, true, memory_order_release);
    lookup_unref(lk);
    return NULL;
}

/* Starts a lookup thread for a->host. Returns -EINPROGRESS or -errno. */
static int lookup_start(struct pool__addr *a, char *err, size_t errlen)
{
    size_t n = strlen(a->host);
    struct pool__lookup *lk = calloc(1, sizeof(*lk) + n + 1);
    pthread_attr_t attr;
    pthread_t tid;
    int rc;

    if (!lk)
        return -ENOMEM;
    memcpy(lk->host, a->host, n + 1);
    lk->port = a->port;
    atomic_init(&lk->refs, 2);
    atomic_init(&lk->done, false);
    rc = pthread_attr_init(&attr);
    if (rc == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&tid, &attr, lookup_thread, lk);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        free(lk);
        snprintf(err, errlen, "resolve %s: cannot start a resolver thread: %s", a->host,
                 strerror(rc));
        return -rc;
    }
    a->lookup = lk;
    return -EINPROGRESS;
}

/* Takes the result of a finished lookup. */
static int lookup_finish(struct pool__addr *a, char *err, size_t errlen)
{
    struct pool__lookup *lk = a->lookup;
    int rc = lk->err;

    a->lookup = NULL;
    if (rc == 0) {
        memcpy(&a->ss, &lk->ss, lk->sslen);
        a->sslen = lk->sslen;
    } else {
        snprintf(err, errlen, "%s", lk->msg);
    }
    lookup_unref(lk);
    return rc;
}

static int resolve_unix(struct pool__addr *a, char *err, size_t errlen)
{
    struct sockaddr_un sun;
    size_t n = strlen(a->unix_path);

    if (n >= sizeof(sun.sun_path)) {
        snprintf(err, errlen, "resolve: unix socket path too long");
        return -ENAMETOOLONG;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, a->unix_path, n + 1);
    memcpy(&a->ss, &sun, sizeof(sun));
    a->sslen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    return 0;
}

int pool__addr_resolve(struct pool__addr *a, char *err, size_t errlen)
{
    if (a->sslen)
        return 0;
    if (a->unix_path)
        return resolve_unix(a, err, errlen);
    if (a->numeric)
        return run_gai(a->host, a->port, AI_NUMERICHOST, &a->ss, &a->sslen, err, errlen);
    if (!a->lookup)
        return lookup_start(a, err, errlen);
    if (!atomic_load_explicit(&a->lookup->done, memory_order_acquire))
        return -EINPROGRESS;
    return lookup_finish(a, err, errlen);
}

int pool__addr_resolve_now(struct pool__addr *a, char *err, size_t errlen)
{
    if (a->sslen)
        return 0;
    if (a->unix_path)
        return resolve_unix(a, err, errlen);
    return run_gai(a->host, a->port, a->numeric ? AI_NUMERICHOST : 0, &a->ss, &a->sslen, err,
                   errlen);
}

void pool__addr_forget(struct pool__addr *a)
{
    if (a->host && !a->numeric)
        a->sslen = 0;
}

int pool__addr_init(struct pool__addr *a, const char *host, int port, const char *unix_path)
{
    memset(a, 0, sizeof(*a));
    if (unix_path) {
        a->unix_path = strdup(unix_path);
        if (!a->unix_path)
            return -ENOMEM;
        snprintf(a->where, sizeof(a->where), "%s", unix_path);
        return 0;
    }
    if (!host || strlen(host) >= POOL__HOST_MAX || port <= 0 || port > 65535)
        return -EINVAL;
    a->host = strdup(host);
    if (!a->host)
        return -ENOMEM;
    a->port = port;
    a->numeric = is_ip_literal(host);
    if (strchr(host, ':'))
        snprintf(a->where, sizeof(a->where), "[%s]:%d", host, port);
    else
        snprintf(a->where, sizeof(a->where), "%s:%d", host, port);
    return 0;
}

void pool__addr_deinit(struct pool__addr *a)
{
    if (a->lookup)
        lookup_unref(a->lookup);
    a->lookup = NULL;
    free(a->host);
    free(a->unix_path);
    a->host = NULL;
    a->unix_path = NULL;
    a->sslen = 0;
}

bool pool__addr_is(const struct pool__addr *a, const char *host, size_t hostlen, int port)
{
    return a->host && a->port == port && strlen(a->host) == hostlen &&
           memcmp(a->host, host, hostlen) == 0;
}

static int parse_port(const char *s, size_t n, int *port)
{
    int v = 0;
    size_t i;

    if (n == 0 || n > 5)
        return -EINVAL;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v <= 0 || v > 65535)
        return -EINVAL;
    *port = v;
    return 0;
}

int pool__addr_split(const char *s, size_t n, char *host, size_t hostsize, int *port)
{
    const char *colon, *h = s;
    size_t hlen;

    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);

        if (!close || (size_t)(close - s) + 1 >= n || close[1] != ':')
            return -EINVAL;
        h = s + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = memrchr(s, ':', n);
        if (!colon)
            return -EINVAL;
        hlen = (size_t)(colon - s); /* MOVED writes IPv6 bare: the port follows the last ':' */
    }
    if (hlen >= hostsize || memchr(h, '\0', hlen))
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    return parse_port(colon + 1, n - (size_t)(colon + 1 - s), port);
}
