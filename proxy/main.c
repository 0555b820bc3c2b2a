/* lockproxy: entry point. Builds the options (defaults, --config file,
 * flags), installs signal handlers (SIGINT and SIGTERM stop the server in
 * order, SIGHUP reloads the configuration; handlers only set flags, the
 * loop acts on them; SIGPIPE is ignored), runs. Exit codes: 0 after a
 * clean stop, 1 when the server fails, 2 for bad flags or a bad config
 * file (the message names the flag, or the file, line and key). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "proxy/config.h"
#include "proxy/opts.h"
#include "proxy/server.h"

static struct px_server *volatile the_server;
static volatile sig_atomic_t stop_early; /* SIGTERM/SIGINT before the server existed */

static void on_stop_signal(int sig)
{
    struct px_server *srv = the_server;

    (void)sig;
    if (srv)
        px_server_stop(srv);
    else
        stop_early = 1;
}

static void on_reload_signal(int sig)
{
    struct px_server *srv = the_server;

    (void)sig;
    if (srv)
        px_server_request_reload(srv);
}

static void install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_reload_signal;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

int main(int argc, char **argv)
{
    struct px_opts opts;
    struct px_server *srv;
    char msg[512];
    int rc;

    install_signals();
    rc = px_config_load(&opts, argc, argv, msg, sizeof(msg));
    if (rc != 0) {
        if (rc > 0)
            px_opts_usage(stdout, px_opts_wants_help(argc, argv) == 1);
        else
            fprintf(stderr, "lockproxy: %s\n", msg);
        px_opts_deinit(&opts);
        return rc > 0 ? 0 : 2;
    }
    log_set_level(opts.log_level);
    if (opts.config[0])
        log_msg(LOG_LVL_INFO, "configuration read from %s", opts.config);
    rc = px_server_create(&srv, &opts);
    px_opts_deinit(&opts);
    if (rc < 0)
        return 1;
    the_server = srv;
    if (stop_early)
        px_server_stop(srv);
    rc = px_server_run(srv);
    the_server = NULL;
    px_server_destroy(srv);
    return rc < 0 ? 1 : 0;
}
