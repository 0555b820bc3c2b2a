/* Inline commands ("LOCK orders WAIT 100" typed into telnet or nc) split
 * into arguments exactly as Redis splits them (sdssplitargs): blanks
 * separate arguments; "double quotes" take \n \r \t \b \a \\ \" and \xHH
 * escapes (any other escaped character stands for itself), 'single quotes'
 * only \'; a closing quote must be followed by a blank or the end of the
 * line, and a quote may open in the middle of an argument (a"b c" is one
 * argument, ab c). A NUL byte ends the line, as in Redis, which splits a C
 * string. */
#ifndef LP_PROXY_SPLIT_H
#define LP_PROXY_SPLIT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* What px_split_line() finds: with req NULL it only counts; with req set
 * (argv and arena sized by a counting pass) it also writes the arguments,
 * NUL-terminated, at req->arena_len on. */
struct px_split {
    struct px_req *req; /* borrowed: filled when not NULL */
    int argc;           /* arguments found so far */
    size_t bytes;       /* their bytes, each with a NUL */
};

/* Splits line[0..len) (without its line end). Returns 0, or -EPROTO on
 * unbalanced quotes (then sp holds what came before). */
int px_split_line(struct px_split *sp, const char *line, size_t len);

#ifdef __cplusplus
}
#endif

#endif
