/* Helpers for the client-limit and deadline tests; see limits_util.h. */
#include "limits_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

#define FLOOD_BATCH    65536
#define FLOOD_CHECK_MS 100
#define IP_CMD_MS      10000

/* ---- flooding ------------------------------------------------------------- */

void lu_small_asan_quarantine(void)
{
#ifdef __SANITIZE_ADDRESS__
    const char *cur = getenv("ASAN_OPTIONS");
    char opts[1024];

    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=4", cur ? cur : "",
             cur && cur[0] ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
}

long lu_rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        TEST_FAIL("cannot read %s: %s", path, strerror(errno));
    while (kb < 0 && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    }
    fclose(f);
    if (kb < 0)
        TEST_FAIL("no VmRSS in %s", path);
    return kb;
}

/* A buffer of copies of req, at most FLOOD_BATCH bytes; its length in *n. */
static char *flood_batch(const char *req, size_t *n)
{
    size_t len = strlen(req), k = FLOOD_BATCH / len;
    char *b = malloc(k * len);

    ASSERT_NOTNULL(b);
    for (size_t i = 0; i < k; i++)
        memcpy(b + i * len, req, len);
    *n = k * len;
    return b;
}

/* The other client is served, and the proxy's RSS is sampled. */
static void flood_check(struct lu_flood *f, redisContext *other, pid_t proxy)
{
    redisReply *r = pu_cmd(other, "PING");
    long rss = lu_rss_kb(proxy);

    PU_CHECK(r, PU_K_STATUS, 0, "PONG");
    freeReplyObject(r);
    f->served++;
    if (rss > f->peak_rss_kb)
        f->peak_rss_kb = rss;
}

/* One non-blocking send; false once the proxy closed the connection. */
static bool flood_send(struct lu_flood *f, int fd, const char *b, size_t n, size_t *off)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    ssize_t w = send(fd, b + *off, n - *off, MSG_DONTWAIT | MSG_NOSIGNAL);

    if (w > 0) {
        f->sent += (size_t)w;
        *off = (*off + (size_t)w) % n;
        return true;
    }
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
        return false;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        TEST_FAIL("flood send: %s", strerror(errno));
    if (poll(&pfd, 1, 20) > 0 && (pfd.revents & (POLLERR | POLLHUP)))
        return false;
    return true;
}

void lu_flood(struct lu_flood *f, int fd, const char *req, int ms, redisContext *other, pid_t proxy)
{
    long long end = pu_now_ms() + ms, next = 0;
    size_t n, off = 0;
    char *b = flood_batch(req, &n);

    memset(f, 0, sizeof(*f));
    while (pu_now_ms() < end) {
        if (pu_now_ms() >= next) {
            flood_check(f, other, proxy);
            next = pu_now_ms() + FLOOD_CHECK_MS;
        }
        if (!flood_send(f, fd, b, n, &off)) {
            f->closed = true;
            break;
        }
    }
    flood_check(f, other, proxy);
    free(b);
}

/* ---- exact reads -------------------------------------------------------------- */

/* Reads exactly n bytes by the deadline; false on EOF, error or timeout. */
static bool read_exact(int fd, char *buf, size_t n, long long deadline)
{
    size_t got = 0;

    while (got < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        long long left = deadline - pu_now_ms();
        ssize_t r;

        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return false;
        r = recv(fd, buf + got, n - got, 0);
        if (r <= 0 && !(r < 0 && errno == EINTR))
            return false;
        if (r > 0)
            got += (size_t)r;
    }
    return true;
}

/* Reads one "$<len>\r\n<bytes>\r\n" into buf (NUL-terminated). */
static bool read_bulk(int fd, char *buf, size_t n, long long deadline)
{
    char hdr[32];
    size_t i = 0;
    long len;

    do {
        if (i + 1 >= sizeof(hdr) || !read_exact(fd, hdr + i, 1, deadline))
            return false;
    } while (hdr[i++] != '\n');
    hdr[i] = '\0';
    if (hdr[0] != '$')
        return false;
    len = strtol(hdr + 1, NULL, 10);
    if (len < 0 || (size_t)len + 3 > n || !read_exact(fd, buf, (size_t)len + 2, deadline))
        return false;
    buf[len] = '\0';
    return true;
}

int lu_read_infos(int fd, int n, int ms)
{
    long long deadline = pu_now_ms() + ms;
    static char buf[65536];
    int i;

    for (i = 0; i < n; i++) {
        if (!read_bulk(fd, buf, sizeof(buf), deadline) || !strstr(buf, "lockproxy_version:"))
            break;
    }
    return i;
}

bool lu_read_reply_is(int fd, const char *expect, int ms)
{
    char buf[256];
    size_t n = strlen(expect);

    if (n >= sizeof(buf) || !read_exact(fd, buf, n, pu_now_ms() + ms))
        return false;
    return memcmp(buf, expect, n) == 0;
}

/* ---- a private network namespace ------------------------------------------------- */

static struct lu_netns *netns_live; /* removed by the exit handler */

/* Path of iproute2's ip, or NULL. */
static const char *ip_path(void)
{
    static const char *const paths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};

    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    }
    return NULL;
}

/* Runs `ip args...` in the calling thread's namespace; true on exit 0. */
static bool run_ip(const char *const *args, char *out, size_t n)
{
    const char *argv[16] = {ip_path()};
    int i, st;

    if (!argv[0]) {
        snprintf(out, n, "no ip binary");
        return false;
    }
    for (i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    argv[i + 1] = NULL;
    st = pu_run_capture(argv, out, n, IP_CMD_MS);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void must_ip(const char *const *args)
{
    char out[512];

    if (!run_ip(args, out, sizeof(out)))
        TEST_FAIL("ip %s %s %s: %s", args[0], args[1], args[2] ? args[2] : "", out);
}

static void enter(int fd)
{
    if (setns(fd, CLONE_NEWNET) < 0)
        TEST_FAIL("setns: %s", strerror(errno));
}

static void netns_at_exit(void)
{
    if (netns_live)
        lu_netns_destroy(netns_live);
}

/* A /30 of 10.213.0.0/16 picked by pid, so parallel runs do not collide. */
static void netns_names(struct lu_netns *n)
{
    unsigned pid = (unsigned)getpid(), k = pid % (256 * 64);

    snprintf(n->host_if, sizeof(n->host_if), "lpkh%u", pid % 10000000u);
    snprintf(n->ns_if, sizeof(n->ns_if), "lpkn%u", pid % 10000000u);
    snprintf(n->host_ip, sizeof(n->host_ip), "10.213.%u.%u", k / 64, (k % 64) * 4 + 1);
    snprintf(n->ns_ip, sizeof(n->ns_ip), "10.213.%u.%u", k / 64, (k % 64) * 4 + 2);
}

/* The veth pair, its addresses, and the links up on both sides. */
static void netns_link(struct lu_netns *n)
{
    char nspath[64], host_cidr[24], ns_cidr[24], out[512];
    const char *add[] = {"link", "add",    n->host_if, "type", "veth", "peer",
                         "name", n->ns_if, "netns",    nspath, NULL};

    snprintf(nspath, sizeof(nspath), "/proc/%d/fd/%d", (int)getpid(), n->ns_fd);
    snprintf(host_cidr, sizeof(host_cidr), "%s/30", n->host_ip);
    snprintf(ns_cidr, sizeof(ns_cidr), "%s/30", n->ns_ip);
    if (!run_ip(add, out, sizeof(out)))
        TEST_SKIP("cannot create a veth pair: %s", out);
    netns_live = n;
    must_ip((const char *[]){"addr", "add", host_cidr, "dev", n->host_if, NULL});
    must_ip((const char *[]){"link", "set", n->host_if, "up", NULL});
    enter(n->ns_fd);
    must_ip((const char *[]){"link", "set", "lo", "up", NULL});
    must_ip((const char *[]){"addr", "add", ns_cidr, "dev", n->ns_if, NULL});
    must_ip((const char *[]){"link", "set", n->ns_if, "up", NULL});
    enter(n->home_fd);
}

void lu_netns_create(struct lu_netns *n)
{
    static bool registered;
    char out[256];

    memset(n, 0, sizeof(*n));
    n->ns_fd = n->home_fd = -1;
    netns_names(n);
    if (!run_ip((const char *[]){"-V", NULL}, out, sizeof(out)))
        TEST_SKIP("no usable `ip` command (iproute2)");
    n->home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (n->home_fd < 0)
        TEST_SKIP("no /proc/self/ns/net: %s", strerror(errno));
    if (unshare(CLONE_NEWNET) < 0)
        TEST_SKIP("cannot create a network namespace (%s): needs root", strerror(errno));
    n->ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    enter(n->home_fd);
    if (n->ns_fd < 0)
        TEST_FAIL("open the new namespace: %s", strerror(errno));
    if (!registered) {
        atexit(netns_at_exit);
        registered = true;
    }
    netns_link(n);
}

int lu_netns_connect(struct lu_netns *n, const char *ip, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd;

    enter(n->ns_fd);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    enter(n->home_fd);
    if (fd < 0)
        TEST_FAIL("socket in the namespace: %s", strerror(errno));
    inet_pton(AF_INET, ip, &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        TEST_FAIL("connect from the namespace to %s:%d: %s", ip, port, strerror(errno));
    return fd;
}

void lu_netns_cut(struct lu_netns *n)
{
    enter(n->ns_fd);
    must_ip((const char *[]){"link", "set", n->ns_if, "down", NULL});
    enter(n->home_fd);
}

void lu_netns_destroy(struct lu_netns *n)
{
    char out[256];

    if (netns_live == n) {
        (void)run_ip((const char *[]){"link", "del", n->host_if, NULL}, out, sizeof(out));
        netns_live = NULL;
    }
    if (n->ns_fd >= 0)
        close(n->ns_fd);
    if (n->home_fd >= 0)
        close(n->home_fd);
    n->ns_fd = n->home_fd = -1;
}
