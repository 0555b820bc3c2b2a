/* A minimal HTTP/1.1 server for /metrics, /healthz and /livez; see
 * http.h.
 *
 * DESIGN
 *
 * Scope: scrapers and probes send one small GET and read one answer, so
 * each connection serves exactly one request: read the head, answer with
 * Content-Length and "Connection: close", flush, close. No keep-alive, no
 * request bodies, no chunked encoding, no TLS (put a sidecar or the
 * network policy in front if the figures are sensitive).
 *
 * States of a connection (enum http_state): READING (head incomplete; the
 * timer is the request deadline) -> ANSWERING (answer queued, closing with
 * a flush; the timer now bounds the flush, for a peer that never reads)
 * -> released (on_release frees it). READING or ANSWERING -> DROPPED when
 * evicted for a newcomer (closed at once, no answer; it no longer counts
 * against the limit but stays in conns until released). Every path out of
 * READING goes through respond() or a hard close, so an answer is written
 * at most once.
 *
 * Limits, so a bad or hostile peer costs little: a head larger than
 * HTTP_MAX_HEAD gets 431, a head not complete within HTTP_HEAD_MS gets
 * 408, an answer the peer has not read within HTTP_FLUSH_MS is dropped,
 * anything that is not "METHOD /path HTTP/1.x" gets 400, methods other
 * than GET and HEAD get 405. Bytes after the head are ignored. At most
 * HTTP_MAX_CONNS connections are open: a new one beyond that closes the
 * oldest that has not sent its request yet (else the oldest), never the
 * new one, so probes are answered at once however many idle connections
 * are open (refusing the newcomer would fail a kubelet's probe and get the
 * sidecar restarted).
 *
 * Everything runs on the proxy's event loop (sched_listener, sched_conn,
 * a wheel timer per connection): rendering /metrics reads the live
 * counters without any locking, and a slow scraper never blocks clients
 * (the answer is queued at once; the loop sends it as the peer reads).
 *
 * Rejected: a thread with a blocking server (would need locks around
 * every counter); an HTTP library (a new dependency for ~300 lines). */
#include "proxy/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/list.h"
#include "common/log.h"
#include "pool/pool.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define HTTP_MAX_HEAD  4096u /* request line and headers */
#define HTTP_MAX_CONNS 64u   /* open HTTP connections at once */
#define HTTP_HEAD_MS   2000u /* to send the request head (probes send it at once) */
#define HTTP_FLUSH_MS  5000u /* to read the answer */

#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define TEXT_TYPE "text/plain; charset=utf-8"

struct px_http {
    struct px_server *srv;          /* borrowed */
    struct sched_listener listener; /* the --metrics socket */
    bool listening;                 /* listener started and not stopped */
    struct list conns;              /* struct http_conn, by node, in accept order */
    unsigned nconns;                /* connections in conns (until released) */
    unsigned ndropped;              /* of those, DROPPED ones */
};

enum http_state {
    HTTP_READING = 0,   /* waiting for the request head */
    HTTP_ANSWERING = 1, /* answer queued; closing once it is sent */
    HTTP_DROPPED = 2,   /* evicted for a newer connection; closing */
};

struct http_conn {
    struct sched_conn conn;   /* the socket (first member: 8-aligned) */
    struct px_http *http;     /* borrowed: owner */
    struct list node;         /* in http->conns */
    struct sched_timer timer; /* request deadline, then flush deadline */
    enum http_state state;    /* see the enum */
    bool head_only;           /* HEAD request: no body */
    size_t len;               /* bytes in head */
    char head[HTTP_MAX_HEAD]; /* request head received so far */
};

/* ---- answers ------------------------------------------------------------------ */

static const char *reason(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Internal Server Error";
    }
}

/* Queues the answer and closes the connection once it is sent. */
static void respond(struct http_conn *hc, int code, const char *type, const char *body, size_t blen)
{
    struct buf *o = sched_conn_wbuf(&hc->conn);
    struct px_server *srv = hc->http->srv;

    hc->state = HTTP_ANSWERING;
    buf_appendf(o,
                "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                code, reason(code), type, blen, code == 405 ? "Allow: GET, HEAD\r\n" : "");
    if (!hc->head_only)
        buf_append(o, body, blen);
    sched_conn_mark_dirty(&hc->conn);
    sched_loop_timer_in(srv->loop, &hc->timer, HTTP_FLUSH_MS);
    sched_conn_close(&hc->conn, true);
}

static void respond_text(struct http_conn *hc, int code, const char *text)
{
    respond(hc, code, TEXT_TYPE, text, strlen(text));
}

static void serve_metrics(struct http_conn *hc)
{
    struct buf body;

    buf_init(&body);
    px_metrics_write(hc->http->srv, &body);
    respond(hc, 200, PROM_TYPE, body.data ? buf_head(&body) : "", buf_size(&body));
    buf_deinit(&body);
}

/* Routes a request for path (query string already cut). */
static void route(struct http_conn *hc, const char *path)
{
    struct px_server *srv = hc->http->srv;

    if (strcmp(path, "/metrics") == 0)
        serve_metrics(hc);
    else if (strcmp(path, "/healthz") == 0 && pool_is_ready(srv->pool))
        respond_text(hc, 200, "ok\n");
    else if (strcmp(path, "/healthz") == 0)
        respond_text(hc, 503, "upstream unavailable\n");
    else if (strcmp(path, "/livez") == 0)
        respond_text(hc, 200, "ok\n");
    else
        respond_text(hc, 404, "not found: try /metrics, /healthz or /livez\n");
}

/* ---- requests ------------------------------------------------------------------ */

/* Parses "METHOD SP target SP HTTP/1.x" in line (NUL-terminated, CR
 * stripped) and answers it. */
static void handle_request_line(struct http_conn *hc, char *line)
{
    char *method = line, *target, *version, *query;

    target = strchr(method, ' ');
    if (!target)
        return respond_text(hc, 400, "bad request line\n");
    *target++ = '\0';
    version = strchr(target, ' ');
    if (!version || target[0] != '/' || strncmp(version + 1, "HTTP/1.", 7) != 0)
        return respond_text(hc, 400, "bad request line\n");
    *version = '\0';
    query = strchr(target, '?');
    if (query)
        *query = '\0';
    hc->head_only = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "GET") != 0 && !hc->head_only)
        return respond_text(hc, 405, "only GET and HEAD\n");
    route(hc, target);
}

/* Answers once the head (up to an empty line) is complete. */
static void try_request(struct http_conn *hc)
{
    char *nl;

    if (!memmem(hc->head, hc->len, "\r\n\r\n", 4) && !memmem(hc->head, hc->len, "\n\n", 2)) {
        if (hc->len == sizeof(hc->head))
            respond_text(hc, 431, "request head too large\n");
        return;
    }
    nl = memchr(hc->head, '\n', hc->len);
    *nl = '\0';
    if (nl > hc->head && nl[-1] == '\r')
        nl[-1] = '\0';
    handle_request_line(hc, hc->head);
}

static void http_on_data(struct sched_conn *c, const char *data, size_t len)
{
    struct http_conn *hc = LP_CONTAINER_OF(c, struct http_conn, conn);
    size_t room = sizeof(hc->head) - hc->len;

    if (hc->state != HTTP_READING)
        return;
    if (memchr(data, '\0', len)) {
        respond_text(hc, 400, "NUL byte in request\n");
        return;
    }
    memcpy(hc->head + hc->len, data, len < room ? len : room);
    hc->len += len < room ? len : room;
    try_request(hc);
}

/* ---- connections ------------------------------------------------------------------ */

static void http_on_hangup(struct sched_conn *c, int err)
{
    (void)err;
    sched_conn_close(c, false);
}

static void http_on_release(struct sched_conn *c)
{
    struct http_conn *hc = LP_CONTAINER_OF(c, struct http_conn, conn);
    struct px_http *http = hc->http;

    sched_loop_timer_del(http->srv->loop, &hc->timer);
    list_del_init(&hc->node);
    http->nconns--;
    if (hc->state == HTTP_DROPPED)
        http->ndropped--;
    free(hc);
}

static const struct sched_conn_ops http_ops = {
    .on_data = http_on_data,
    .on_hangup = http_on_hangup,
    .on_connect = NULL,
    .on_drain = NULL,
    .on_release = http_on_release,
};

static void http_on_timer(struct sched_timer *t)
{
    struct http_conn *hc = LP_CONTAINER_OF(t, struct http_conn, timer);

    if (hc->state != HTTP_READING)
        sched_conn_close(&hc->conn, false); /* the peer does not read the answer */
    else
        respond_text(hc, 408, "request timeout\n");
}

/* Drops the oldest connection still waiting for its request, else the
 * oldest answering one (conns is in accept order). */
static void http_evict(struct px_http *http)
{
    struct http_conn *victim = NULL;
    struct list *n;

    for (n = http->conns.next; n != &http->conns; n = n->next) {
        struct http_conn *hc = list_entry(n, struct http_conn, node);

        if (hc->state == HTTP_READING) {
            victim = hc;
            break;
        }
        if (hc->state == HTTP_ANSWERING && !victim)
            victim = hc;
    }
    if (!victim)
        return;
    victim->state = HTTP_DROPPED;
    http->ndropped++;
    sched_loop_timer_del(http->srv->loop, &victim->timer);
    sched_conn_close(&victim->conn, false);
}

static void http_on_accept(struct sched_listener *ls, int fd)
{
    struct px_http *http = LP_CONTAINER_OF(ls, struct px_http, listener);
    struct http_conn *hc;

    if (http->nconns - http->ndropped >= HTTP_MAX_CONNS)
        http_evict(http);
    if (!(hc = malloc(sizeof(*hc)))) {
        close(fd);
        return;
    }
    memset(hc, 0, offsetof(struct http_conn, head));
    hc->http = http;
    list_init(&hc->node);
    sched_timer_init(&hc->timer, http_on_timer);
    if (sched_conn_attach(http->srv->loop, &hc->conn, fd, &http_ops) < 0) {
        free(hc);
        return;
    }
    list_add_tail(&http->conns, &hc->node);
    http->nconns++;
    sched_loop_timer_in(http->srv->loop, &hc->timer, HTTP_HEAD_MS);
}

/* ---- the endpoint ------------------------------------------------------------------- */

static void log_listening(const struct px_addr *a)
{
    if (a->path[0])
        log_msg(LOG_LVL_INFO, "metrics: serving /metrics, /healthz, /livez on unix://%s", a->path);
    else
        log_msg(LOG_LVL_INFO, "metrics: serving http://%s:%d/metrics (/healthz, /livez)", a->host,
                a->port);
}

int px_http_start(struct px_server *srv)
{
    const struct px_addr *a = &srv->opts.metrics;
    struct px_http *http;
    int fd, rc;

    if (a->port == 0 && !a->path[0])
        return 0;
    http = calloc(1, sizeof(*http));
    if (!http)
        return -ENOMEM;
    http->srv = srv;
    list_init(&http->conns);
    fd = px_server_listen_fd(a, srv->opts.unix_perm);
    if (fd < 0) {
        free(http);
        return fd;
    }
    rc = sched_listener_start(srv->loop, &http->listener, fd, http_on_accept);
    if (rc < 0) {
        log_msg(LOG_LVL_ERROR, "metrics: cannot accept: %s", strerror(-rc));
        free(http);
        return rc;
    }
    http->listening = true;
    srv->http = http;
    log_listening(a);
    return 0;
}

void px_http_stop(struct px_server *srv)
{
    struct px_http *http = srv->http;
    struct list *n, *t;

    if (!http)
        return;
    if (http->listening)
        sched_listener_stop(&http->listener);
    http->listening = false;
    list_for_each_safe(n, t, &http->conns)
    {
        struct http_conn *hc = list_entry(n, struct http_conn, node);

        sched_loop_timer_del(srv->loop, &hc->timer);
        sched_conn_close(&hc->conn, false);
    }
}

bool px_http_is_idle(const struct px_server *srv)
{
    return !srv->http || srv->http->nconns == 0;
}

void px_http_destroy(struct px_server *srv)
{
    struct px_http *http = srv->http;

    if (!http)
        return;
    LP_BUG_ON(http->nconns > 0);
    free(http);
    srv->http = NULL;
}
