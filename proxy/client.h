/* Client connections and their requests.
 *
 * A client parses requests (request.c: RESP2 multibulk or inline, limits
 * enforced while parsing) into px_req objects and
 * runs them in arrival order. Requests are dispatched as they arrive, so a
 * pipeline of TRYLOCK/UNLOCK goes upstream in one batch; a request that may
 * block (LOCK with a wait) is a barrier: later requests are dispatched only
 * when it completes, so they observe its effect, as in Redis. Replies are
 * always written in request order: a request that completes while an older
 * one is still running keeps its reply until the older one is written.
 *
 * Limits: a client takes no new request, and its socket is not read, while
 * --max-pipeline requests are outstanding or more than
 * --client-output-soft-limit bytes of its replies are unsent; replies of
 * requests already running may still arrive, and past
 * --client-output-hard-limit the client is closed. A deadline timer closes
 * it if it does not authenticate in time (--auth-timeout) or stays idle
 * (--timeout; holding or waiting for a lock is not idle).
 *
 * Lifetime: the client is freed when its connection is released AND no
 * upstream callback is outstanding (upstream_refs == 0); a request handed
 * to the pool keeps a reference on its client. */
#ifndef LP_PROXY_CLIENT_H
#define LP_PROXY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/list.h"
#include "engine/engine.h"
#include "proxy/request.h"
#include "proxy/tx.h"
#include "sched/conn-t.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_cmd;
struct px_csubs;
struct px_server;
struct px_user;
struct sched_tls_ctx;

/* Whether a client's input is read, and if not, what resumes it. */
enum px_client_input {
    PX_INPUT_READING = 0, /* requests are taken and the socket is read */
    PX_INPUT_FULL = 1,    /* --max-pipeline requests outstanding: resumes as they finish */
    PX_INPUT_OUTPUT = 2,  /* unsent replies over the soft limit: resumes once they are sent */
    PX_INPUT_DONE = 3,    /* QUIT, a protocol error, or closing: never reads again */
};

/* What few clients use: the names a client gives itself (CLIENT SETNAME,
 * HELLO SETNAME, CLIENT SETINFO) and pushes held back (push.h). Allocated
 * on first use, so an idle connection does not pay its 224 bytes. */
struct px_client_extra {
    char name[64];     /* CLIENT SETNAME */
    char lib_name[64]; /* CLIENT SETINFO LIB-NAME (client_cmd.c) */
    char lib_ver[64];  /* CLIENT SETINFO LIB-VER */
    struct buf pushes; /* owned: pushes kept until whole replies end the output */
};

struct px_client {
    struct sched_conn conn;        /* the socket (first member: 8-aligned) */
    struct px_server *srv;         /* borrowed */
    uint64_t id;                   /* CLIENT ID, also the owner id */
    struct list client_node;       /* in srv->clients */
    struct px_client_extra *extra; /* owned: see the struct; NULL until first used */
    struct px_parser parser;       /* owned: request parser */
    struct buf in;                 /* owned: input not taken yet when reading stopped mid-read */
    const char *rd;                /* borrowed: unparsed rest of the read being handled */
    size_t rdlen;                  /* bytes at rd */
    struct list queued;            /* struct px_req not yet dispatched (FIFO) */
    struct list running;           /* struct px_req dispatched, in order */
    unsigned nreqs;                /* queued + running */
    unsigned preauth;              /* requests taken before AUTH since the last read */
    struct px_req *barrier;        /* running blocking request, or NULL */
    struct lk_caller caller;       /* the engine's record of it: id, closing, its locks */
    unsigned upstream_refs;        /* pool callbacks outstanding */
    bool closing;                  /* connection is going away */
    bool conn_released;            /* sched on_release delivered */
    bool quit;                     /* close after the replies are sent */
    bool flush_on_close;           /* peer sent EOF: send the replies already made */
    const struct px_cmd *last_cmd; /* borrowed: static; the last command dispatched, or NULL */
    int proto;                     /* RESP version of its replies: 2, or 3 after HELLO 3 */
    unsigned exec_unsent;          /* elements of an EXEC reply not written yet (multi.h) */
    enum px_client_input input;    /* whether the input is read, see the enum */
    bool processing;               /* client_process() is on the stack: it takes what is due */
    bool authed;                   /* AUTH passed, or no auth was configured at connect */
    bool sub_lease_lost;           /* SUBSCRIBEd to lockproxy:lease-lost (push.h) */
    struct px_multi multi;         /* MULTI ... EXEC state (multi.h) */
    const struct px_user *user;    /* borrowed from srv->opts.auth: logged-in user, or NULL */
    struct px_csubs *subs;         /* owned: pass-through subscriptions (subs.h), or NULL */
    uint64_t barrier_ms;           /* when the current barrier request was dispatched */
    struct px_req *mark_req;       /* borrowed: request whose reply starts at conn.out[mark] */
    size_t mark;                   /* conn.out write offset where mark_req's reply starts */
    struct sched_timer timer;      /* deadline: AUTH (--auth-timeout), then idle (--timeout) */
    uint64_t accept_ms;            /* loop time of the accept */
    uint64_t active_ms;            /* last input, or output progress the deadline saw */
    uint64_t seen_out;             /* conn.bytes_out when the deadline last looked */
    size_t mem;                    /* its part of srv->client_mem (climem.h) */
};

/* Adopts an accepted socket; with tls (a server context), the client
 * speaks TLS. Returns 0 or -errno (fd closed). */
int px_client_accept(struct px_server *srv, int fd, struct sched_tls_ctx *tls);

/* Where a command writes its reply: the socket's output when req is the
 * oldest running request, else the request's own buffer. */
struct buf *px_req_out(struct px_req *req);

/* Marks req done after its reply was written to px_req_out(); writes out
 * every finished reply in order and dispatches what was waiting. May free
 * req and, if the client is closing, the client. */
void px_req_done(struct px_req *req);

/* After output was added outside a reply (a pub/sub message): recounts
 * cl's memory and, past --client-output-hard-limit, closes it as a reply
 * would. Returns false when cl is closing. */
bool px_client_output_ok(struct px_client *cl);

/* cl's names: "" where it set none. */
const char *px_client_name(const struct px_client *cl);
const char *px_client_lib_name(const struct px_client *cl);
const char *px_client_lib_ver(const struct px_client *cl);

/* cl's rarely used part, allocated on the first call; NULL if out of
 * memory. */
struct px_client_extra *px_client_extra(struct px_client *cl);

/* Reference for an upstream callback; put may free a closing client. */
void px_client_get(struct px_client *cl);
void px_client_put(struct px_client *cl);

/* The engine's hooks on a connection (struct lk_front): a reference
 * through its caller record, and the open connection of an id (NULL:
 * none, or closing). */
void px_client_caller_get(struct lk_caller *c);
void px_client_caller_put(struct lk_caller *c);
struct lk_caller *px_client_caller_find(struct lk_engine *eng, uint64_t id);

/* Starts closing (on error or hang-up): cancels waits, applies the
 * on-disconnect policy to held locks. Idempotent. */
void px_client_close(struct px_client *cl);

/* After a reload: every client's deadline and reading follow the new
 * limits (--timeout, --auth-timeout, the output limits, --max-pipeline). */
void px_client_reconfigure(struct px_server *srv);

/* Closes every client (shutdown). */
void px_client_close_all(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
