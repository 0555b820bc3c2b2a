/* Parsing and identity helpers; see util.h. */
#include "common/util.h"

#include <sys/random.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int util_parse_i64(const char *s, size_t n, int64_t *out)
{
    uint64_t v = 0, limit = (uint64_t)INT64_MAX;
    size_t i = 0;
    int neg = 0;

    if (n > 0 && s[0] == '-') {
        neg = 1;
        limit += 1;
        i = 1;
    }
    if (i == n)
        return -EINVAL;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';

        if (d > 9)
            return -EINVAL;
        if (v > (limit - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* Hot: RESP lengths and leases on every request. Small values (almost
 * every RESP length) take a branch or two; others count their digits
 * first and are written backwards in place, without a reversal pass. */
/* "00" .. "99": two digits per division (a lease of 30000 ms takes two
 * divisions by 100 instead of ten by 10). */
static const char util_digit_pairs[201] = "0001020304050607080910111213141516171819"
                                          "2021222324252627282930313233343536373839"
                                          "4041424344454647484950515253545556575859"
                                          "6061626364656667686970717273747576777879"
                                          "8081828384858687888990919293949596979899";

size_t util_u64_to_str(uint64_t v, char *out)
{
    size_t n = 1;
    uint64_t t;
    char *p;

    if (v < 10) {
        out[0] = (char)('0' + v);
        return 1;
    }
    for (t = v; t >= 100; t /= 100)
        n += 2;
    n += t >= 10;
    for (p = out + n; v >= 100; v /= 100) {
        p -= 2;
        memcpy(p, util_digit_pairs + 2 * (v % 100), 2);
    }
    if (v >= 10)
        memcpy(p - 2, util_digit_pairs + 2 * v, 2);
    else
        p[-1] = (char)('0' + v);
    return n;
}

size_t util_i64_to_str(int64_t v, char *out)
{
    if (v >= 0)
        return util_u64_to_str((uint64_t)v, out);
    out[0] = '-';
    return 1 + util_u64_to_str((uint64_t)0 - (uint64_t)v, out + 1);
}

int util_uuid4(char out[37])
{
    unsigned char r[16];
    ssize_t n = getrandom(r, sizeof(r), 0);

    if (n != (ssize_t)sizeof(r))
        return n < 0 ? -errno : -EIO;
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
    return 0;
}

int util_eq_nocase(const char *s, size_t n, const char *lit)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (lit[i] == '\0')
            return 0;
        if (tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
            return 0;
    }
    return lit[n] == '\0';
}
