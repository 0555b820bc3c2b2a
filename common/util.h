/* Small parsing and identity helpers: strict integer parsing for protocol
 * arguments and flags, random UUIDs for owner identities. */
#ifndef LP_COMMON_UTIL_H
#define LP_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a whole decimal int64 from s[0..n) (optional leading '-', no
 * spaces, no '+'). Returns 0 or -EINVAL (not a number) or -ERANGE. */
int util_parse_i64(const char *s, size_t n, int64_t *out);

/* Writes v in decimal to out (at least 20 bytes), no NUL. Returns the
 * length. */
size_t util_u64_to_str(uint64_t v, char *out);

/* Same for a signed value (at least 21 bytes). */
size_t util_i64_to_str(int64_t v, char *out);

/* Writes a random RFC 4122 version-4 UUID: 36 lowercase chars + NUL.
 * Returns 0 or -errno from getrandom(). */
int util_uuid4(char out[37]);

/* Case-insensitive comparison of s[0..n) with the NUL-terminated lit. */
int util_eq_nocase(const char *s, size_t n, const char *lit);

#ifdef __cplusplus
}
#endif

#endif
