/* A userspace TCP fault relay for tests (this kernel has no netem).
 *
 * The relay listens on a free loopback port and connects every accepted
 * connection to 127.0.0.1:<target>. Put it between the proxy and Redis
 * (the proxy's --upstream points at relay_port()) and fault the link per
 * direction: RELAY_C2S is what the relay's clients send (the proxy's
 * commands), RELAY_S2C what the target sends back (Redis's replies).
 *
 * Modes, per direction, for every relayed connection (new ones included):
 * - RELAY_PASS:  forward at once;
 * - RELAY_PAUSE: stop reading and stop writing; bytes already read stay
 *   queued, the rest waits in the kernel's socket buffers and the sender
 *   eventually blocks. Nothing is lost: back to PASS, the bytes flow on,
 *   as over a healed TCP partition. EOF and resets are not seen either;
 * - RELAY_DELAY: forward each read chunk delay_ms after it was read (order
 *   kept). Setting PASS or a shorter DELAY makes queued chunks due no later
 *   than the new setting (PASS: at once);
 * - RELAY_DROP:  read and discard (what was queued is discarded too). The
 *   stream is cut at an arbitrary byte, so use a fresh connection after.
 * relay_partition() pauses both directions (optionally refusing new
 * connections with a reset); relay_heal() passes again, optionally first
 * resetting every relayed connection (a partition that ends in RST).
 * relay_reset_all() closes every relayed connection with RST on both sides
 * (SO_LINGER 0).
 *
 * Design: one thread per relay, one poll() loop over the listen socket, a
 * wake pipe and both sockets of every relayed connection; no busy loop (a
 * socket is polled only for what the current modes let happen, the
 * timeout is the next DELAY chunk's due time). Each direction of a
 * connection has a FIFO of chunks bounded by RELAY_QUEUE_MAX bytes and
 * RELAY_CHUNKS_MAX reads; at a bound the relay stops reading that side. At most RELAY_MAX_CONNS
 * connections; more are reset at once. The thread holds the relay's mutex
 * except while it sleeps in poll(), so an API call sees and changes a
 * consistent state, and a mode change applies to every byte after the call
 * returns. relay_reset_all() returns once the sockets are closed.
 *
 * Forks: every socket is close-on-exec, and a pthread_atfork handler closes
 * the relay's sockets in a forked child (the torture suite forks clients
 * that do not exec), so a close in the relay really ends the connection.
 * A child must not call the relay API (it has no relay thread).
 *
 * The functions return -errno (or NULL with errno set) and never fail the
 * test, so a worker thread may call them. */
#ifndef LP_TESTS_INTEGRATION_RELAY_UTIL_H
#define LP_TESTS_INTEGRATION_RELAY_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#define RELAY_MAX_CONNS  128
#define RELAY_QUEUE_MAX  (256 * 1024) /* bytes queued per direction of a connection */
#define RELAY_CHUNKS_MAX 1024         /* reads queued per direction (tiny reads under DELAY) */

enum relay_dir {
    RELAY_C2S = 0, /* client -> target (proxy -> Redis) */
    RELAY_S2C = 1, /* target -> client (Redis -> proxy) */
    RELAY_BOTH = 2,
};

enum relay_mode {
    RELAY_PASS = 0,
    RELAY_PAUSE,
    RELAY_DELAY,
    RELAY_DROP,
};

struct relay_stats {
    long long accepted;       /* connections relayed */
    long long refused;        /* connections reset at accept (refusing, full, target down) */
    long long active;         /* connections open now */
    long long resets;         /* connections closed by relay_reset_all or an error */
    long long bytes[2];       /* bytes forwarded, per direction */
    long long dropped[2];     /* bytes discarded by RELAY_DROP, per direction */
    long long queued[2];      /* bytes queued now, per direction, all connections */
    long long queued_peak[2]; /* most ever queued by one connection, per direction */
    long long chunks_peak[2]; /* most reads ever queued by one connection, per direction */
};

struct relay;

/* Starts a relay to 127.0.0.1:target_port on a free loopback port, every
 * direction in RELAY_PASS. NULL (errno set) on error. */
struct relay *relay_start(int target_port);

/* The port the relay listens on (127.0.0.1). */
int relay_port(const struct relay *r);

/* Sets dir's mode (delay_ms is used by RELAY_DELAY only, 0..60000).
 * -EINVAL on a bad argument. */
int relay_set(struct relay *r, enum relay_dir dir, enum relay_mode mode, int delay_ms);

/* Resets new connections at accept (on) or relays them again (off). */
void relay_refuse(struct relay *r, bool on);

/* Pauses both directions; refuse_new: also reset new connections. */
void relay_partition(struct relay *r, bool refuse_new);

/* Passes both directions and accepts again; with_reset: first closes every
 * relayed connection with RST, as relay_reset_all. */
void relay_heal(struct relay *r, bool with_reset);

/* Closes every relayed connection with RST on both sides; returns how many
 * (once they are closed). */
int relay_reset_all(struct relay *r);

/* A snapshot of the counters. */
void relay_stats(struct relay *r, struct relay_stats *out);

/* Stops the thread, closes every socket (relayed connections with a plain
 * close) and frees r. NULL is a no-op. */
void relay_stop(struct relay *r);

const char *relay_mode_name(enum relay_mode m);

#endif
