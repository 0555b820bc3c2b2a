/* Configuration files and reloads; see config.h for the format and the
 * precedence rules. */
#include "proxy/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/protect.h"
#include "proxy/server.h"
#include "proxy/tls.h"

#define CONFIG_MAX_BYTES (4u * 1024 * 1024) /* a bigger file is a mistake */

/* ---- splitting a line ------------------------------------------------------- */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* Decodes the escape at r ('\\' then at least one byte) inside double
 * quotes. Returns the byte, or -EINVAL for \x00 or a bad \x escape;
 * *used is the input length. */
static int unescape_double(const char *r, size_t *used)
{
    static const char from[] = "nrtab", to[] = "\n\r\t\a\b";
    const char *k = strchr(from, r[1]);
    int hi, lo;

    *used = 2;
    if (r[1] == 'x') {
        hi = hex_digit(r[2]);
        lo = hi < 0 ? -1 : hex_digit(r[3]);
        *used = 4;
        return lo < 0 || (hi | lo) == 0 ? -EINVAL : hi * 16 + lo;
    }
    return k ? to[k - from] : (unsigned char)r[1];
}

/* Copies the quoted token at *rp to *wp, unescaping. Returns 0 or -EINVAL. */
static int split_quoted(char **rp, char **wp)
{
    char q = **rp, *r = *rp + 1, *w = *wp;
    size_t used;
    int c;

    while (*r != q) {
        if (*r == '\0')
            return -EINVAL;
        if (*r == '\\' && q == '"' && r[1]) {
            c = unescape_double(r, &used);
            if (c < 0)
                return -EINVAL;
            *w++ = (char)c;
            r += used;
        } else if (*r == '\\' && q == '\'' && r[1] == '\'') {
            *w++ = '\'';
            r += 2;
        } else {
            *w++ = *r++;
        }
    }
    r++;
    if (*r && !is_blank(*r))
        return -EINVAL;
    *rp = r;
    *wp = w;
    return 0;
}

int px_config_split(char *line, char **argv, int max)
{
    char *r = line, *w, end;
    int argc = 0;

    for (;;) {
        while (is_blank(*r))
            r++;
        if (*r == '\0')
            return argc;
        if (argc == max)
            return -EINVAL;
        argv[argc++] = w = r;
        if (*r == '"' || *r == '\'') {
            if (split_quoted(&r, &w) < 0)
                return -EINVAL;
        } else {
            while (*r && !is_blank(*r))
                *w++ = *r++;
        }
        end = *r;
        *w = '\0';
        if (end)
            r++;
    }
}

/* ---- files -------------------------------------------------------------------- */

/* Applies one line. Returns 0, or -errno with "name:lineno: ..." in msg. */
static int parse_line(struct px_opts *o, const char *name, unsigned lineno, char *line, char *msg,
                      size_t n)
{
    char *argv[PX_CONFIG_MAX_ARGS + 1], why[256] = "";
    int argc, rc;

    while (is_blank(*line))
        line++;
    if (*line == '\0' || *line == '#')
        return 0;
    argc = px_config_split(line, argv, PX_CONFIG_MAX_ARGS + 1);
    if (argc < 0 || argc > PX_CONFIG_MAX_ARGS) {
        snprintf(msg, n, "%s:%u: key '%.*s': unbalanced quotes or too many values", name, lineno,
                 (int)strcspn(line, " \t\r\n\v\f"), line);
        return -EINVAL;
    }
    if (strcmp(argv[0], "config") == 0) {
        snprintf(msg, n, "%s:%u: 'config' is only valid on the command line", name, lineno);
        return -EINVAL;
    }
    rc = px_opts_set(o, argv[0], argc - 1, (const char *const *)argv + 1, why, sizeof(why));
    if (rc == -ENOENT && px_opts_key_suggest(argv[0]))
        snprintf(msg, n, "%s:%u: unknown key '%.64s' (did you mean '%s'?)", name, lineno, argv[0],
                 px_opts_key_suggest(argv[0]));
    else if (rc == -ENOENT)
        snprintf(msg, n, "%s:%u: unknown key '%.64s'", name, lineno, argv[0]);
    else if (rc < 0)
        snprintf(msg, n, "%s:%u: key '%s': %s", name, lineno, argv[0], why);
    return rc == -ENOENT ? -EINVAL : rc;
}

int px_config_parse_text(struct px_opts *o, const char *name, const char *text, size_t len,
                         char *msg, size_t n)
{
    char *copy = malloc(len + 1), *line, *next;
    unsigned lineno = 1;
    int rc = 0;

    o->layer = 1;
    if (!copy) {
        snprintf(msg, n, "%s: out of memory", name);
        return -ENOMEM;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    for (line = copy; rc == 0 && line; line = next, lineno++) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        rc = parse_line(o, name, lineno, line, msg, n);
    }
    free(copy);
    return rc;
}

/* Reads the whole file into a new buffer. Returns 0 or -errno. */
static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    long size;
    int rc = -errno;

    if (!f)
        return rc;
    rc = -EIO;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto out;
    rc = -EFBIG;
    if ((unsigned long)size > CONFIG_MAX_BYTES)
        goto out;
    rc = -ENOMEM;
    buf = malloc((size_t)size + 1);
    if (!buf)
        goto out;
    rc = -EIO;
    if (fread(buf, 1, (size_t)size, f) != (size_t)size)
        goto out;
    *out = buf;
    *len = (size_t)size;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

int px_config_parse_file(struct px_opts *o, const char *path, char *msg, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len);

    if (rc < 0) {
        snprintf(msg, n, "cannot read config file %s: %s", path, strerror(-rc));
        return rc;
    }
    rc = px_config_parse_text(o, path, text, len, msg, n);
    free(text);
    return rc;
}

/* The --config argument of argv, or NULL. */
static const char *find_config(int argc, char **argv)
{
    const char *path = NULL;
    int i;

    for (i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--config=", 9) == 0)
            path = argv[i] + 9;
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            path = argv[++i];
    }
    return path;
}

int px_config_load(struct px_opts *o, int argc, char **argv, char *msg, size_t n)
{
    const char *path = find_config(argc, argv);
    int rc;

    px_opts_default(o);
    o->argc = argc;
    o->argv = argv;
    if (px_opts_wants_help(argc, argv))
        return 1;
    if (path && path[0]) {
        rc = px_config_parse_file(o, path, msg, n);
        if (rc < 0)
            return rc;
    }
    rc = px_opts_parse_env(o, msg, n);
    if (rc != 0)
        return rc;
    rc = px_opts_parse_flags(o, argc, argv, msg, n);
    if (rc != 0)
        return rc;
    return px_opts_check(o, msg, n);
}

/* ---- reload ------------------------------------------------------------------ */

/* Logs every changed setting that only a restart applies. */
static void warn_restart_only(const struct px_opts *cur, const struct px_opts *nw)
{
    const char *names[32];
    size_t i, n = px_opts_diff_restart(cur, nw, names, sizeof(names) / sizeof(names[0]));

    for (i = 0; i < n; i++)
        log_msg(LOG_LVL_WARN, "config reload: '%s' changed; it takes effect after a restart",
                names[i]);
}

/* The TLS settings of nw, whose contexts are built already. */
static void reload_apply_tls(struct px_opts *o, const struct px_opts *nw)
{
    memcpy(o->tls_cert_file, nw->tls_cert_file, sizeof(o->tls_cert_file));
    memcpy(o->tls_key_file, nw->tls_key_file, sizeof(o->tls_key_file));
    memcpy(o->tls_ca_cert_file, nw->tls_ca_cert_file, sizeof(o->tls_ca_cert_file));
    o->tls_auth_clients = nw->tls_auth_clients;
    o->tls_handshake_timeout_ms = nw->tls_handshake_timeout_ms;
    memcpy(o->up_tls_cert_file, nw->up_tls_cert_file, sizeof(o->up_tls_cert_file));
    memcpy(o->up_tls_key_file, nw->up_tls_key_file, sizeof(o->up_tls_key_file));
    memcpy(o->up_tls_ca_cert_file, nw->up_tls_ca_cert_file, sizeof(o->up_tls_ca_cert_file));
    memcpy(o->up_tls_server_name, nw->up_tls_server_name, sizeof(o->up_tls_server_name));
}

/* Installs the run-time settings of nw (takes its auth reference). */
static void reload_apply(struct px_server *srv, struct px_opts *nw)
{
    struct px_opts *o = &srv->opts;
    struct px_auth *old = o->auth;
    bool open_changed = o->protected_mode != nw->protected_mode ||
                        px_auth_required(old) != px_auth_required(nw->auth) ||
                        o->tls_auth_clients != nw->tls_auth_clients;
    unsigned closed;

    log_set_level(nw->log_level);
    o->log_level = nw->log_level;
    o->protected_mode = nw->protected_mode; /* new connections */
    o->on_disc = nw->on_disc;
    o->linger_ms = nw->linger_ms;
    o->max_request_bytes = nw->max_request_bytes;
    o->max_args = nw->max_args;
    o->max_pipeline = nw->max_pipeline;
    o->out_soft = nw->out_soft;
    o->out_hard = nw->out_hard;
    o->max_client_memory = nw->max_client_memory;
    o->latency_threshold_ms = nw->latency_threshold_ms;
    sched_loop_set_latency_threshold(srv->loop, nw->latency_threshold_ms);
    o->timeout_s = nw->timeout_s;
    o->auth_timeout_s = nw->auth_timeout_s;
    o->keepalive_s = nw->keepalive_s;
    o->passthrough = nw->passthrough; /* the next forwarded command */
    o->sync_replicas = nw->sync_replicas;
    o->sync_timeout_ms = nw->sync_timeout_ms;
    if (nw->max_clients > o->max_clients)
        px_server_fit_nofile(nw->max_clients);
    o->max_clients = nw->max_clients;
    px_server_engine_config(srv);
    reload_apply_tls(o, nw);
    o->auth = nw->auth;
    nw->auth = NULL;
    closed = px_auth_rebind(srv);
    px_auth_put(old);
    px_client_reconfigure(srv);
    if (open_changed)
        px_protect_check_listeners(srv); /* who may connect now, as at start-up */
    if (closed > 0)
        log_msg(LOG_LVL_WARN,
                "config reload: closed %u connections whose user was removed or "
                "disabled",
                closed);
}

void px_config_reload(struct px_server *srv)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    struct px_opts nw;
    struct px_tls tls;
    char msg[512] = "";
    int rc = px_config_load(&nw, srv->opts.argc, srv->opts.argv, msg, sizeof(msg));

    /* The certificate files are read again whether or not their names
     * changed (a rotation replaces the files), for the running listeners
     * and upstream: a bad file refuses the whole reload. */
    if (rc == 0)
        rc = px_tls_build(srv, &nw, srv->tls.cur.server != NULL, srv->opts.upstream.tls, &tls, msg,
                          sizeof(msg));
    if (rc != 0) {
        srv->stats.reload_errors++;
        log_msg(LOG_LVL_ERROR, "config reload failed: %s; keeping the running configuration",
                rc < 0 ? msg : "--help on the command line");
        px_opts_deinit(&nw);
        return;
    }
    warn_restart_only(&srv->opts, &nw);
    reload_apply(srv, &nw);
    px_tls_install(srv, &tls);
    px_opts_deinit(&nw);
    srv->stats.reloads++;
    log_msg(LOG_LVL_INFO, "config reloaded from %s: log-level %s, auth %s, max-clients %u",
            srv->opts.config[0] ? srv->opts.config : "(command line only)",
            levels[srv->opts.log_level], px_auth_required(srv->opts.auth) ? "on" : "off",
            srv->opts.max_clients);
}
