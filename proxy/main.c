/* lockproxy: entry point. Parses flags, installs signal handlers (SIGINT
 * and SIGTERM stop the server in order; SIGPIPE is ignored), runs. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "proxy/opts.h"
#include "proxy/server.h"

static struct px_server *the_server;

static void on_stop_signal(int sig)
{
    (void)sig;
    if (the_server)
        px_server_stop(the_server);
}

static void install_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

int main(int argc, char **argv)
{
    struct px_opts opts;
    int rc;

    px_opts_default(&opts);
    rc = px_opts_parse(&opts, argc, argv, stdout, stderr);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_set_level(opts.log_level);
    install_signals();
    if (px_server_create(&the_server, &opts) < 0)
        return 1;
    rc = px_server_run(the_server);
    px_server_destroy(the_server);
    the_server = NULL;
    return rc < 0 ? 1 : 0;
}
