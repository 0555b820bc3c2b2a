/* CLIENT subcommands and connection addresses; see client_cmd.h.
 *
 * CLIENT LIST and CLIENT INFO write Redis's line format ("id=... addr=...
 * laddr=... fd=... name=... age=... idle=... flags=... db=0 ... cmd=...
 * user=... lib-name=... lib-ver=...") so that tools that parse Redis's
 * (redis-cli, client libraries, dashboards) read them as they are. Fields
 * Redis has and the proxy does not (query buffers, watch, multi) are
 * written with the value a plain idle Redis connection would show; two
 * fields of the proxy's own close each line: holds= (locks and permits
 * the connection holds) and waits= (commands of it waiting). */
#include "proxy/client_cmd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "proxy/args.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- addresses ----------------------------------------------------------- */

const char *px_client_addr(const struct px_client *cl, bool local, char *out, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char ip[INET6_ADDRSTRLEN];
    int rc;

    snprintf(out, n, "?");
    if (cl->conn.fd < 0)
        return out;
    rc = local ? getsockname(cl->conn.fd, (struct sockaddr *)&ss, &len)
               : getpeername(cl->conn.fd, (struct sockaddr *)&ss, &len);
    if (rc < 0)
        return out;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(out, n, "%s:%u", ip, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(out, n, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else if (ss.ss_family == AF_UNIX) {
        /* The peer of a Unix socket has no name: Redis shows the listening
         * socket's path (the local name), with port 0. */
        struct sockaddr_un un;
        socklen_t ul = sizeof(un);

        if (getsockname(cl->conn.fd, (struct sockaddr *)&un, &ul) == 0 &&
            ul > offsetof(struct sockaddr_un, sun_path))
            snprintf(out, n, "%.*s:0", (int)(ul - offsetof(struct sockaddr_un, sun_path)),
                     un.sun_path);
    }
    return out;
}

bool px_client_may_see(const struct px_client *viewer, const struct px_client *cl)
{
    if (!px_auth_required(viewer->srv->opts.auth))
        return true;
    if (!viewer->user)
        return false;
    if (viewer->user->allkeys || viewer == cl)
        return true;
    return cl->user && strcmp(cl->user->name, viewer->user->name) == 0;
}

/* ---- one line ----------------------------------------------------------- */

/* Counts a list's entries (short lists: a connection's holds and waits). */
static unsigned list_count(const struct list *l)
{
    const struct list *n;
    unsigned c = 0;

    for (n = l->next; n != l; n = n->next)
        c++;
    return c;
}

/* Redis's flags: b blocked (a waiting command), x in MULTI, N none. */
static const char *client_flags(const struct px_client *cl)
{
    if (cl->barrier)
        return cl->multi.active ? "xb" : "b";
    return cl->multi.active ? "x" : "N";
}

/* The last command, lower case as Redis shows it ("NULL": none yet). */
static void client_last_cmd(const struct px_client *cl, char *out, size_t n)
{
    size_t i;

    if (!cl->last_cmd) {
        snprintf(out, n, "NULL");
        return;
    }
    for (i = 0; i + 1 < n && cl->last_cmd->name[i]; i++)
        out[i] = (char)tolower((unsigned char)cl->last_cmd->name[i]);
    out[i] = '\0';
}

/* Appends cl's line (without the newline) to b. */
static void client_line(const struct px_client *cl, struct buf *b)
{
    uint64_t now = sched_loop_now_ms(cl->srv->loop);
    char addr[PX_CLIENT_ADDR_MAX], laddr[PX_CLIENT_ADDR_MAX], cmd[40];
    size_t unsent = buf_size(&cl->conn.out) + buf_size(&cl->conn.sending);

    client_last_cmd(cl, cmd, sizeof(cmd));
    buf_appendf(b,
                "id=%llu addr=%s laddr=%s fd=%d name=%s age=%llu idle=%llu flags=%s db=0 sub=0 "
                "psub=0 ssub=0 multi=%d watch=0 qbuf=%zu qbuf-free=0 argv-mem=0 multi-mem=0 "
                "rbs=0 rbp=0 obl=0 oll=0 omem=%zu tot-mem=%zu events=r cmd=%s user=%s redir=-1 "
                "resp=%d lib-name=%s lib-ver=%s holds=%u waits=%u",
                (unsigned long long)cl->id, px_client_addr(cl, false, addr, sizeof(addr)),
                px_client_addr(cl, true, laddr, sizeof(laddr)), cl->conn.fd, px_client_name(cl),
                (unsigned long long)(now - cl->accept_ms) / 1000,
                (unsigned long long)(now - cl->active_ms) / 1000, client_flags(cl),
                cl->multi.active ? (int)cl->multi.n : -1, buf_size(&cl->in), unsent,
                buf_size(&cl->in) + unsent, cmd, cl->user ? cl->user->name : PX_AUTH_DEFAULT_USER,
                cl->proto, px_client_lib_name(cl), px_client_lib_ver(cl),
                list_count(&cl->caller.locks.holds) + list_count(&cl->caller.locks.shares) +
                    list_count(&cl->caller.locks.claims),
                list_count(&cl->caller.locks.waits));
}

/* ---- subcommands ---------------------------------------------------------- */

#define LIST_IDS_MAX 64 /* most IDs one CLIENT LIST ID takes */

/* What CLIENT LIST selects. */
struct list_filter {
    int64_t ids[LIST_IDS_MAX]; /* ID filter */
    int nids;                  /* IDs in ids, 0: any */
    bool none;                 /* TYPE master|replica|pubsub: no connection is one */
};

/* Parses "[TYPE type] [ID id ...]" (argv[2..]). Returns 0, or -EINVAL
 * after replying. */
static int list_parse(struct px_req *req, struct list_filter *f)
{
    int i;

    for (i = 2; i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];

        if (px_args_is(a, "TYPE") && i + 1 < req->argc) {
            const struct px_arg *t = &req->argv[++i];

            if (!px_args_is(t, "normal") && !px_args_is(t, "master") && !px_args_is(t, "replica") &&
                !px_args_is(t, "pubsub")) {
                px_reply_error(px_req_out(req), "ERR Unknown client type '%.*s'",
                               (int)LP_MIN(t->len, 32u), t->p);
                return -EINVAL;
            }
            f->none = !px_args_is(t, "normal");
            continue;
        }
        if (!px_args_is(a, "ID") || i + 1 >= req->argc) {
            px_args_reply_syntax(req, a);
            return -EINVAL;
        }
        for (i++; i < req->argc; i++) { /* ID takes the rest, as in Redis */
            if (f->nids == LIST_IDS_MAX ||
                util_parse_i64(req->argv[i].p, req->argv[i].len, &f->ids[f->nids]) < 0 ||
                f->ids[f->nids] <= 0) {
                px_reply_error(px_req_out(req), "ERR Invalid client ID");
                return -EINVAL;
            }
            f->nids++;
        }
    }
    return 0;
}

static bool list_wants(const struct list_filter *f, const struct px_client *o)
{
    int i;

    if (f->none)
        return false;
    for (i = 0; i < f->nids; i++) {
        if ((uint64_t)f->ids[i] == o->id)
            return true;
    }
    return f->nids == 0;
}

/* CLIENT LIST [TYPE type] [ID id ...]: one line per visible client. */
static void client_list(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct list_filter f = {.nids = 0};
    struct buf text;
    struct list *n;

    if (list_parse(req, &f) < 0)
        return;
    buf_init(&text);
    for (n = cl->srv->clients.next; n != &cl->srv->clients; n = n->next) {
        const struct px_client *o = list_entry(n, struct px_client, client_node);

        if (!list_wants(&f, o) || !px_client_may_see(cl, o))
            continue;
        client_line(o, &text);
        buf_append(&text, "\n", 1);
    }
    px_reply_bulk(px_req_out(req), text.data ? text.data : "", buf_size(&text));
    buf_deinit(&text);
}

static void client_info(struct px_req *req)
{
    struct buf text;

    buf_init(&text);
    client_line(req->cl, &text);
    buf_append(&text, "\n", 1);
    px_reply_bulk(px_req_out(req), text.data, buf_size(&text));
    buf_deinit(&text);
}

/* True when a has no blank, control or non-ASCII byte (Redis's rule for
 * names shown in a LIST line). */
static bool printable(const struct px_arg *a)
{
    size_t i;

    for (i = 0; i < a->len; i++) {
        if (a->p[i] < '!' || a->p[i] > '~')
            return false;
    }
    return true;
}

/* CLIENT SETINFO LIB-NAME|LIB-VER value: Redis refuses spaces, newlines
 * and other special characters (they would break the LIST line). */
static void client_setinfo(struct px_req *req)
{
    const struct px_arg *opt = &req->argv[2], *v = &req->argv[3];
    bool lib_name = px_args_is(opt, "LIB-NAME");
    struct px_client_extra *id;

    if (!lib_name && !px_args_is(opt, "LIB-VER")) {
        px_reply_error(px_req_out(req), "ERR Unrecognized option '%.*s'",
                       (int)LP_MIN(opt->len, 32u), opt->p);
    } else if (!printable(v)) {
        px_reply_error(px_req_out(req),
                       "ERR %s cannot contain spaces, newlines or special characters.",
                       lib_name ? "lib-name" : "lib-ver");
    } else if (!(id = px_client_extra(req->cl))) {
        px_reply_error(px_req_out(req), "OOM out of memory");
    } else {
        snprintf(lib_name ? id->lib_name : id->lib_ver, PX_CLIENT_LIB_MAX, "%.*s", (int)v->len,
                 v->p);
        px_reply_status(px_req_out(req), "OK");
    }
}

/* What CLIENT KILL matches. */
struct kill_filter {
    int64_t id;                 /* ID, or 0 */
    const struct px_arg *addr;  /* ADDR (or the old form's address), or NULL */
    const struct px_arg *laddr; /* LADDR, or NULL */
    const struct px_arg *user;  /* USER, or NULL */
    bool skipme;                /* SKIPME yes (the default of the new form) */
};

static bool kill_matches(const struct kill_filter *f, struct px_client *self, struct px_client *o)
{
    char a[PX_CLIENT_ADDR_MAX];
    const char *uname = o->user ? o->user->name : PX_AUTH_DEFAULT_USER;

    if (o->closing || (f->skipme && o == self) || !px_client_may_see(self, o))
        return false;
    if (f->id && (uint64_t)f->id != o->id)
        return false;
    if (f->addr &&
        !util_eq_nocase(f->addr->p, f->addr->len, px_client_addr(o, false, a, sizeof(a))))
        return false;
    if (f->laddr &&
        !util_eq_nocase(f->laddr->p, f->laddr->len, px_client_addr(o, true, a, sizeof(a))))
        return false;
    return !f->user ||
           (strlen(uname) == f->user->len && memcmp(uname, f->user->p, f->user->len) == 0);
}

/* Parses the new form's filters (argv[2..]). Returns 0 or -EINVAL after
 * replying. */
static int kill_parse(struct px_req *req, struct kill_filter *f)
{
    int i;

    f->skipme = true;
    for (i = 2; i + 1 < req->argc; i += 2) {
        const struct px_arg *k = &req->argv[i], *v = &req->argv[i + 1];

        if (px_args_is(k, "ID")) {
            if (util_parse_i64(v->p, v->len, &f->id) < 0 || f->id <= 0) {
                px_reply_error(px_req_out(req), "ERR client-id should be greater than 0");
                return -EINVAL;
            }
        } else if (px_args_is(k, "ADDR")) {
            f->addr = v;
        } else if (px_args_is(k, "LADDR")) {
            f->laddr = v;
        } else if (px_args_is(k, "USER")) {
            f->user = v;
        } else if (px_args_is(k, "SKIPME") && (px_args_is(v, "yes") || px_args_is(v, "no"))) {
            f->skipme = px_args_is(v, "yes");
        } else if (!px_args_is(k, "TYPE") || !px_args_is(v, "normal")) {
            px_reply_error(px_req_out(req), "ERR syntax error");
            return -EINVAL;
        }
    }
    if (i < req->argc) {
        px_reply_error(px_req_out(req), "ERR syntax error");
        return -EINVAL;
    }
    return 0;
}

/* CLIENT KILL addr (old form: OK or an error) | CLIENT KILL <filter value>
 * ... (the number killed). A killed connection's locks go as for any
 * disconnect (--on-disconnect); the caller itself is closed after its
 * reply. */
static void client_kill(struct px_req *req)
{
    struct px_client *self = req->cl;
    struct kill_filter f = {0};
    struct list *n, *t;
    bool old = req->argc == 3;
    long long killed = 0;

    if (old)
        f.addr = &req->argv[2];
    else if (kill_parse(req, &f) < 0)
        return;
    list_for_each_safe(n, t, &self->srv->clients)
    {
        struct px_client *o = list_entry(n, struct px_client, client_node);

        if (!kill_matches(&f, self, o))
            continue;
        killed++;
        if (o == self)
            self->quit = true;
        else
            px_client_close(o);
    }
    if (!old)
        px_reply_int(px_req_out(req), killed);
    else if (killed)
        px_reply_status(px_req_out(req), "OK");
    else
        px_reply_error(px_req_out(req), "ERR No such client");
}

void px_client_cmd(struct px_req *req)
{
    struct px_client *cl = req->cl;
    const struct px_arg *sub = &req->argv[1];
    struct buf *b = px_req_out(req);

    if (px_args_is(sub, "ID") && req->argc == 2) {
        px_reply_int(b, (int64_t)cl->id);
    } else if (px_args_is(sub, "GETNAME") && req->argc == 2) {
        if (px_client_name(cl)[0])
            px_reply_cstr(b, px_client_name(cl));
        else
            px_reply_null(b, cl->proto);
    } else if (px_args_is(sub, "SETNAME") && req->argc == 3) {
        if (!printable(&req->argv[2])) {
            px_reply_error(b, "ERR Client names cannot contain spaces, newlines or special "
                              "characters.");
        } else if (!px_client_extra(cl)) {
            px_reply_error(b, "OOM out of memory");
        } else {
            snprintf(cl->extra->name, sizeof(cl->extra->name), "%.*s", (int)req->argv[2].len,
                     req->argv[2].p);
            px_reply_status(b, "OK");
        }
    } else if (px_args_is(sub, "SETINFO") && req->argc == 4) {
        client_setinfo(req);
    } else if (px_args_is(sub, "INFO") && req->argc == 2) {
        client_info(req);
    } else if (px_args_is(sub, "LIST")) {
        client_list(req);
    } else if (px_args_is(sub, "KILL") && req->argc >= 3) {
        client_kill(req);
    } else if (px_args_is(sub, "TRACKING") || px_args_is(sub, "CACHING") ||
               px_args_is(sub, "PAUSE") || px_args_is(sub, "REPLY")) {
        /* Client-side caching needs invalidations of the client's own
         * upstream connection; the proxy's are shared (fwd.h). */
        px_reply_error(b,
                       "ERR lockproxy does not support 'CLIENT %.*s': its upstream connections "
                       "are shared by every client",
                       (int)LP_MIN(sub->len, 16u), sub->p);
    } else {
        px_reply_error(b, "ERR unknown CLIENT subcommand or wrong arguments, try ID, SETNAME, "
                          "GETNAME, SETINFO, INFO, LIST, KILL");
    }
    px_req_done(req);
}
