/* Leveled logging to stderr: one line per event, with a UTC timestamp, the
 * level and the process id. Nothing on the request path logs above DEBUG. */
#ifndef LP_COMMON_LOG_H
#define LP_COMMON_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum log_level {
    LOG_LVL_ERROR = 0,
    LOG_LVL_WARN = 1,
    LOG_LVL_INFO = 2,
    LOG_LVL_DEBUG = 3,
};

/* Sets the most verbose level written (default LOG_LVL_INFO). */
void log_set_level(enum log_level level);

/* Parses "error", "warn", "info", "debug". Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

/* True when lines at this level are written (to skip building arguments). */
int log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif

#endif
