/* SHA-1 (FIPS 180-4), one-shot, for script names. Not for security: Redis
 * uses it only to name scripts. lg_run.c checks it against SCRIPT LOAD's
 * answer whenever the bench loads a script on Redis itself. */
#include "bench/loadgen/lg_sha1.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint32_t rol(uint32_t v, unsigned n)
{
    return (v << n) | (v >> (32 - n));
}

/* One 64-byte block into h[5]. */
static void sha1_block(uint32_t h[5], const unsigned char *p)
{
    uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

    for (unsigned i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (unsigned i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    for (unsigned i = 0; i < 80; i++) {
        uint32_t f, k, t;

        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdcu;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6u;
        }
        t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void lg_sha1_hex(const void *data, size_t len, char out[41])
{
    uint32_t h[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    const unsigned char *p = data;
    unsigned char tail[128];
    uint64_t bits = (uint64_t)len * 8u;
    size_t rest, tlen;

    for (; len >= 64; p += 64, len -= 64)
        sha1_block(h, p);
    rest = len;
    memset(tail, 0, sizeof(tail));
    memcpy(tail, p, rest);
    tail[rest] = 0x80;
    tlen = rest + 1 + 8 <= 64 ? 64 : 128;
    for (unsigned i = 0; i < 8; i++)
        tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha1_block(h, tail);
    if (tlen == 128)
        sha1_block(h, tail + 64);
    for (unsigned i = 0; i < 5; i++)
        snprintf(out + 8 * i, 9, "%08x", h[i]);
}
