/* Inline commands split as Redis splits them (sdssplitargs); see split.h. */
#include "proxy/split.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proxy/request.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(char c)
{
    if (c <= '9')
        return c - '0';
    return (c | 0x20) - 'a' + 10;
}

static char unescape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'b':
        return '\b';
    case 'a':
        return '\a';
    default:
        return c;
    }
}

static void split_put(struct px_split *sp, char c)
{
    if (sp->req)
        sp->req->arena[sp->req->arena_len++] = c;
    sp->bytes++;
}

/* Reads one argument starting at line[*i] (not a blank), as sdssplitargs
 * does. Returns 0 or -EPROTO on unbalanced quotes. */
static int split_arg(struct px_split *sp, const char *line, size_t len, size_t *i)
{
#define AT(k) ((k) < len ? line[k] : '\0')
    bool inq = false, insq = false, done = false;

    while (!done) {
        char c = AT(*i);

        if (inq) {
            if (c == '\\' && AT(*i + 1) == 'x' && is_hex(AT(*i + 2)) && is_hex(AT(*i + 3))) {
                split_put(sp, (char)(hex_val(AT(*i + 2)) * 16 + hex_val(AT(*i + 3))));
                *i += 3;
            } else if (c == '\\' && AT(*i + 1)) {
                (*i)++;
                split_put(sp, unescape(AT(*i)));
            } else if (c == '"') {
                if (AT(*i + 1) && !is_blank(AT(*i + 1)))
                    return -EPROTO; /* a closing quote must end the argument */
                done = true;
            } else if (!c) {
                return -EPROTO;
            } else {
                split_put(sp, c);
            }
        } else if (insq) {
            if (c == '\\' && AT(*i + 1) == '\'') {
                (*i)++;
                split_put(sp, '\'');
            } else if (c == '\'') {
                if (AT(*i + 1) && !is_blank(AT(*i + 1)))
                    return -EPROTO;
                done = true;
            } else if (!c) {
                return -EPROTO;
            } else {
                split_put(sp, c);
            }
        } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0') {
            done = true;
        } else if (c == '"') {
            inq = true;
        } else if (c == '\'') {
            insq = true;
        } else {
            split_put(sp, c);
        }
        if (AT(*i))
            (*i)++;
    }
    return 0;
#undef AT
}

int px_split_line(struct px_split *sp, const char *line, size_t len)
{
    const char *nul = memchr(line, '\0', len);
    size_t i = 0;

    if (nul)
        len = (size_t)(nul - line);
    for (;;) {
        size_t start = sp->req ? sp->req->arena_len : 0;

        while (i < len && is_blank(line[i]))
            i++;
        if (i >= len)
            return 0;
        if (split_arg(sp, line, len, &i) < 0)
            return -EPROTO;
        split_put(sp, '\0');
        if (sp->req) {
            sp->req->argv[sp->argc].p = sp->req->arena + start;
            sp->req->argv[sp->argc].len = sp->req->arena_len - start - 1;
        }
        sp->argc++;
    }
}
