/* Leveled stderr logging; see log.h. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/compiler.h"

static enum log_level log_level_cur = LOG_LVL_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level)
{
    log_level_cur = level;
}

int log_parse_level(const char *s, enum log_level *out)
{
    size_t i;

    for (i = 0; i < LP_ARRAY_SIZE(level_names); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

int log_enabled(enum log_level level)
{
    return level <= log_level_cur;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    char line[1024], ts[32];
    struct timespec now;
    struct tm tm;
    va_list ap;
    int n;

    if (level > log_level_cur)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof(line), "%s.%03ldZ %d %s: ", ts, now.tv_nsec / 1000000L, (int)getpid(),
                 level_names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

void lp_bug(const char *file, int line, const char *expr)
{
    fprintf(stderr, "lockproxy: BUG at %s:%d: %s\n", file, line, expr);
    abort();
}
