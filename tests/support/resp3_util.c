/* Raw RESP client for the protocol tests; see resp3_util.h. */
#include "resp3_util.h"

#include <sys/socket.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

struct r3_conn *r3_open(int port)
{
    struct r3_conn *c = calloc(1, sizeof(*c));

    ASSERT_NOTNULL(c);
    c->fd = pu_raw_connect(port);
    return c;
}

void r3_close(struct r3_conn *c)
{
    close(c->fd);
    free(c);
}

void r3_send(struct r3_conn *c, const char *arg, ...)
{
    char out[4096];
    const char *args[32];
    size_t n = 0, len;
    int argc = 0;
    va_list ap;

    va_start(ap, arg);
    for (; arg && argc < 32; arg = va_arg(ap, const char *))
        args[argc++] = arg;
    va_end(ap);
    len = (size_t)snprintf(out, sizeof(out), "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        n = strlen(args[i]);
        ASSERT_TRUE(len + n + 32 < sizeof(out));
        len += (size_t)snprintf(out + len, sizeof(out) - len, "$%zu\r\n%s\r\n", n, args[i]);
    }
    ASSERT_TRUE(pu_raw_send(c->fd, out, len));
}

/* End of the line starting at p (just past its CRLF), or NULL. */
static const char *line_end(const char *p, const char *end)
{
    const char *q = memchr(p, '\n', (size_t)(end - p));

    return q ? q + 1 : NULL;
}

static const char *frame_end(const char *p, const char *end)
{
    const char *e;
    long long v, i, k;

    if (p >= end || !(e = line_end(p, end)))
        return NULL;
    v = strtoll(p + 1, NULL, 10);
    switch (p[0]) {
    case '$':
    case '=':
    case '!':
        if (v < 0)
            return e;
        return end - e >= v + 2 ? e + v + 2 : NULL;
    case '*':
    case '>':
    case '~':
    case '%':
    case '|':
        k = p[0] == '%' || p[0] == '|' ? 2 * v : v;
        for (i = 0; i < k && e; i++)
            e = frame_end(e, end);
        if (e && p[0] == '|') /* an attribute precedes the reply it describes */
            e = frame_end(e, end);
        return e;
    default:
        return e;
    }
}

size_t r3_frame_len(const char *p, size_t n)
{
    const char *e = frame_end(p, p + n);

    return e ? (size_t)(e - p) : 0;
}

const char *r3_next(struct r3_conn *c, int ms)
{
    long long deadline = pu_now_ms() + ms;
    size_t n;

    while ((n = r3_frame_len(c->buf, c->len)) == 0) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        long long left = deadline - pu_now_ms();
        ssize_t r;

        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return NULL;
        r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (r <= 0)
            return NULL;
        c->len += (size_t)r;
    }
    memcpy(c->frame, c->buf, n);
    c->frame[n] = '\0';
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
    return c->frame;
}

void r3_expect_at(const char *file, int line, struct r3_conn *c, const char *want)
{
    const char *got = r3_next(c, 5000);

    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "%s:%d: want \"%s\"\n  got \"%s\"\n", file, line, want,
                got ? got : "(nothing)");
        TEST_FAIL("unexpected reply");
    }
}

const char *r3_expect_prefix_at(const char *file, int line, struct r3_conn *c, const char *prefix)
{
    const char *got = r3_next(c, 5000);

    if (!got || strncmp(got, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "%s:%d: want a reply starting \"%s\"\n  got \"%s\"\n", file, line, prefix,
                got ? got : "(nothing)");
        TEST_FAIL("unexpected reply");
    }
    return got;
}
