/* A raw RESP client for the protocol tests: sends commands as multibulk
 * arrays and reads whole reply frames (RESP2 or RESP3, pushes included)
 * as their exact bytes, so a test asserts the bytes on the wire. hiredis
 * 0.14 (Debian 12) cannot parse RESP3, hence this. */
#ifndef LP_TESTS_INTEGRATION_RESP3_UTIL_H
#define LP_TESTS_INTEGRATION_RESP3_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#define R3_BUF_MAX 65536

struct r3_conn {
    int fd;                 /* connected socket */
    size_t len;             /* bytes in buf */
    char buf[R3_BUF_MAX];   /* received, not yet returned */
    char frame[R3_BUF_MAX]; /* the last frame r3_next returned, NUL-terminated */
};

/* Connects to 127.0.0.1:port; fails the test on error. Free with r3_close. */
struct r3_conn *r3_open(int port);
void r3_close(struct r3_conn *c);

/* Sends one command, its arguments NULL-terminated, as a multibulk array. */
void r3_send(struct r3_conn *c, const char *arg, ...) __attribute__((sentinel));

/* Length of the complete frame at p (n bytes), or 0 if it is incomplete. */
size_t r3_frame_len(const char *p, size_t n);

/* The next whole frame within ms (in c->frame, returned), or NULL. */
const char *r3_next(struct r3_conn *c, int ms);

/* Fails the test unless the next frame (within 5 s) is exactly want. */
void r3_expect_at(const char *file, int line, struct r3_conn *c, const char *want);
#define R3_EXPECT(c, want) r3_expect_at(__FILE__, __LINE__, (c), (want))

/* Fails the test unless the next frame starts with prefix; returns it. */
const char *r3_expect_prefix_at(const char *file, int line, struct r3_conn *c, const char *prefix);
#define R3_EXPECT_PREFIX(c, p) r3_expect_prefix_at(__FILE__, __LINE__, (c), (p))

#endif
