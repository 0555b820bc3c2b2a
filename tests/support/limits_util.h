/* Helpers for the client-limit and deadline tests: a client that writes a
 * pipeline for a while without ever reading (while another client is
 * served and the proxy's resident memory is sampled), exact reads of
 * replies from raw sockets, the proxy's VmRSS, and a private network
 * namespace joined to this one by a veth pair. Built on proxy_util.h; same
 * process rules (main thread only; failures exit the test). */
#ifndef LP_TESTS_INTEGRATION_LIMITS_UTIL_H
#define LP_TESTS_INTEGRATION_LIMITS_UTIL_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

/* What lu_flood saw. */
struct lu_flood {
    size_t sent;      /* bytes the kernel took */
    int served;       /* PINGs answered on the other connection meanwhile */
    bool closed;      /* the proxy closed the flooding connection */
    long peak_rss_kb; /* largest VmRSS of the proxy sampled, kB */
};

/* Sends copies of req on fd for ms milliseconds (or until the proxy closes
 * it), never reading a reply. Every 100 ms it checks that other (a
 * connection to the same proxy) still gets PONG for a PING, and samples
 * the VmRSS of the process proxy. */
void lu_flood(struct lu_flood *f, int fd, const char *req, int ms, redisContext *other,
              pid_t proxy);

/* Under AddressSanitizer, makes the proxies started from now on keep only
 * a small quarantine of freed memory (ASan keeps 256 MB by default, which
 * would be measured as resident memory by the RSS bounds). No-op otherwise. */
void lu_small_asan_quarantine(void);

/* VmRSS of pid in kB (from /proc/<pid>/status); fails the test if absent. */
long lu_rss_kb(pid_t pid);

/* Reads n INFO replies (bulk strings holding "lockproxy_version") from fd
 * within ms; returns how many arrived whole before a mismatch or the
 * deadline. */
int lu_read_infos(int fd, int n, int ms);

/* True if the next bytes on fd within ms are exactly expect. */
bool lu_read_reply_is(int fd, const char *expect, int ms);

/* A network namespace of this process's own (anonymous: it dies with the
 * process), joined to the current one by a veth pair on a private /30:
 * host_ip here, ns_ip inside. */
struct lu_netns {
    int ns_fd;        /* the namespace, -1 when none */
    int home_fd;      /* the namespace this process started in */
    char host_if[16]; /* veth end here */
    char ns_if[16];   /* veth end inside */
    char host_ip[16]; /* address of host_if */
    char ns_ip[16];   /* address of ns_if */
};

/* Creates it; skips the test (exit 77) when namespaces or veth pairs
 * cannot be created here (not root, no `ip`). Removed at exit even when
 * the test fails. */
void lu_netns_create(struct lu_netns *n);

/* Connects a TCP socket from inside the namespace to ip:port (the socket
 * stays in the namespace). Returns the fd; fails the test on error. */
int lu_netns_connect(struct lu_netns *n, const char *ip, int port);

/* Takes the namespace's end of the link down: its peers stop hearing from
 * it, without a FIN or a reset (a host that vanished). */
void lu_netns_cut(struct lu_netns *n);

/* Deletes the veth pair and closes the namespace. Idempotent. */
void lu_netns_destroy(struct lu_netns *n);

#endif
