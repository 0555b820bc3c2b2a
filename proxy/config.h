/* Configuration files and reloads.
 *
 * Format (like redis.conf): one "key value..." per line; keys are the flag
 * names without "--" (listen, upstream, pool-size, ...), plus repeatable
 * "user NAME rules..." lines. A line whose first non-blank character is
 * '#' is a comment ('#' elsewhere is data, so passwords may hold it).
 * Values may be quoted: "double quotes" take \n \r \t \\ \" and \xHH
 * escapes, 'single quotes' only \'. A later line for the same key wins.
 *
 * Precedence: defaults, then the --config file, then the other flags, so
 * the command line overrides the file. A reload (SIGHUP) repeats the same
 * three steps and applies what can change at run time; see
 * px_config_reload. */
#ifndef LP_PROXY_CONFIG_H
#define LP_PROXY_CONFIG_H

#include <stddef.h>

#include "proxy/opts.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

#define PX_CONFIG_MAX_ARGS 256 /* most values on one line (user rules) */

/* Splits line in place into at most max arguments (quotes and escapes as
 * above). Returns the count, or -EINVAL for unbalanced quotes, a closing
 * quote not followed by a blank, a \x00 escape, or more than max. */
int px_config_split(char *line, char **argv, int max);

/* Applies the text of a config file (name is used in messages) on top of
 * o. Returns 0, or -EINVAL / -ENOMEM with "name:line: ..." in msg. */
int px_config_parse_text(struct px_opts *o, const char *name, const char *text, size_t len,
                         char *msg, size_t n);

/* Reads and applies the file at path. Returns 0, or -errno with a
 * message naming the file (and line and key) in msg. */
int px_config_parse_file(struct px_opts *o, const char *path, char *msg, size_t n);

/* Builds the options: defaults, the --config file named in argv, then the
 * flags; remembers argc/argv for reloads. Returns 0 to run, 1 when --help
 * or --version was asked for (nothing printed), or -errno with a message
 * in msg. On error, o still needs px_opts_deinit(). */
int px_config_load(struct px_opts *o, int argc, char **argv, char *msg, size_t n);

/* SIGHUP: re-reads the configuration and applies the settings that may
 * change at run time (log-level, requirepass and users, max-clients,
 * on-disconnect, subscription-linger, max-request-bytes, max-args,
 * max-pipeline, the client output limits, timeout, auth-timeout,
 * tcp-keepalive, and the TLS settings: the certificate, key and CA files
 * are read again, for new connections); logs a warning for changed
 * settings that need a restart. A bad file (config or certificate) keeps
 * the running configuration and logs an error. Runs on the loop thread. */
void px_config_reload(struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
