/* The texts of the scripts pass-through clients loaded, by SHA1 (fwd.h):
 * a hash map for lookup and a list in order of use for eviction. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/list.h"
#include "common/util.h"
#include "proxy/fwd.h"

#include <openssl/evp.h>

#define SHA_HEX 40

struct fwd_script {
    struct hmap_node node; /* in sc->map, by sha */
    struct list lru;       /* in sc->lru, most recently used first */
    char sha[SHA_HEX + 1]; /* lower-case hex */
    size_t len;            /* text bytes */
    char text[];           /* the script, NUL-terminated */
};

struct px_fwd_scripts {
    struct hmap map;    /* struct fwd_script by sha */
    struct list lru;    /* struct fwd_script, by lru */
    uint64_t n;         /* texts kept */
    uint64_t bytes;     /* their footprint (struct and text) */
    uint64_t evictions; /* dropped to stay within the bound */
};

struct px_fwd_scripts *px_fwd_scripts_create(void)
{
    struct px_fwd_scripts *sc = calloc(1, sizeof(*sc));

    if (!sc || hmap_init(&sc->map, 64) < 0) {
        free(sc);
        return NULL;
    }
    list_init(&sc->lru);
    return sc;
}

static void script_drop(struct px_fwd_scripts *sc, struct fwd_script *s)
{
    hmap_remove(&sc->map, &s->node);
    list_del_init(&s->lru);
    sc->n--;
    sc->bytes -= sizeof(*s) + s->len + 1;
    free(s);
}

void px_fwd_script_flush(struct px_fwd_scripts *sc)
{
    struct list *n;

    while ((n = list_first(&sc->lru)))
        script_drop(sc, list_entry(n, struct fwd_script, lru));
}

void px_fwd_scripts_destroy(struct px_fwd_scripts *sc)
{
    if (!sc)
        return;
    px_fwd_script_flush(sc);
    hmap_deinit(&sc->map);
    free(sc);
}

/* Lower-case hex sha of shalen bytes into out; false if it is not one. */
static bool sha_norm(const char *sha, size_t shalen, char *out)
{
    size_t i;

    if (shalen != SHA_HEX)
        return false;
    for (i = 0; i < SHA_HEX; i++) {
        if (!isxdigit((unsigned char)sha[i]))
            return false;
        out[i] = (char)tolower((unsigned char)sha[i]);
    }
    out[SHA_HEX] = '\0';
    return true;
}

static struct fwd_script *script_lookup(struct px_fwd_scripts *sc, const char *sha)
{
    struct hmap_node *n;

    for (n = hmap_first(&sc->map, hash_bytes(sha, SHA_HEX)); n; n = hmap_next(n)) {
        struct fwd_script *s = LP_CONTAINER_OF(n, struct fwd_script, node);

        if (memcmp(s->sha, sha, SHA_HEX) == 0)
            return s;
    }
    return NULL;
}

const char *px_fwd_script_find(struct px_fwd_scripts *sc, const char *sha, size_t shalen,
                               size_t *len)
{
    char key[SHA_HEX + 1];
    struct fwd_script *s;

    if (!sha_norm(sha, shalen, key) || !(s = script_lookup(sc, key)))
        return NULL;
    list_del_init(&s->lru);
    list_add_head(&sc->lru, &s->lru);
    *len = s->len;
    return s->text;
}

/* SHA1 of text as Redis names scripts: 40 lower-case hex digits. */
static int sha1_hex(const char *text, size_t len, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0, i;

    if (!EVP_Digest(text, len, md, &mdlen, EVP_sha1(), NULL) || mdlen != SHA_HEX / 2)
        return -ENOMEM;
    for (i = 0; i < mdlen; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int px_fwd_script_keep(struct px_fwd_scripts *sc, const char *sha, const char *text, size_t len,
                       size_t max_bytes)
{
    char key[SHA_HEX + 1];
    struct fwd_script *s;
    size_t need = sizeof(*s) + len + 1;
    struct list *last;

    if (sha ? !sha_norm(sha, strlen(sha), key) : sha1_hex(text, len, key) < 0)
        return -EINVAL;
    if ((s = script_lookup(sc, key))) {
        list_del_init(&s->lru);
        list_add_head(&sc->lru, &s->lru);
        return 0;
    }
    if (need > max_bytes)
        return -E2BIG;
    while (sc->bytes + need > max_bytes && !list_empty(&sc->lru)) {
        last = sc->lru.prev;
        script_drop(sc, list_entry(last, struct fwd_script, lru));
        sc->evictions++;
    }
    s = malloc(need);
    if (!s)
        return -ENOMEM;
    memcpy(s->sha, key, sizeof(key));
    s->len = len;
    memcpy(s->text, text, len);
    s->text[len] = '\0';
    list_add_head(&sc->lru, &s->lru);
    hmap_insert(&sc->map, &s->node, hash_bytes(key, SHA_HEX));
    sc->n++;
    sc->bytes += need;
    return 0;
}

void px_fwd_scripts_stats(const struct px_fwd_scripts *sc, struct px_fwd_stats *st)
{
    st->scripts = sc->n;
    st->script_bytes = sc->bytes;
    st->script_evictions = sc->evictions;
}
