/* SHA-1 of a script body, as Redis names scripts for EVALSHA: the bench
 * needs the name of a script before any SCRIPT LOAD (twemproxy refuses
 * SCRIPT, so a client behind it sends EVALSHA and falls back to EVAL). */
#ifndef LP_BENCH_LOADGEN_LG_SHA1_H
#define LP_BENCH_LOADGEN_LG_SHA1_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the SHA-1 of data[0..len) as 40 lower-case hex digits and a NUL. */
void lg_sha1_hex(const void *data, size_t len, char out[41]);

#ifdef __cplusplus
}
#endif

#endif
