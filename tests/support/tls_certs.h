/* Throw-away certificates for the TLS tests, made with OpenSSL's API (an
 * expired certificate cannot be made with Debian's openssl 3.0 command
 * without a CA database): a CA, server and client certificates signed by
 * it, an expired server certificate, one for the wrong host name, an
 * expired client certificate, and a second, unrelated CA with a server and
 * a client certificate of its own. EC P-256 keys, SHA-256 signatures. */
#ifndef LP_TESTS_TLS_CERTS_H
#define LP_TESTS_TLS_CERTS_H

#include <stddef.h>

#define TC_PATH_MAX 300

/* A certificate file and its key file. */
struct tc_pair {
    char cert[TC_PATH_MAX];
    char key[TC_PATH_MAX];
};

struct tc_certs {
    char dir[TC_PATH_MAX];         /* where the files are */
    struct tc_pair ca;             /* the test CA */
    struct tc_pair server;         /* localhost and 127.0.0.1, by ca */
    struct tc_pair client;         /* client certificate (clientAuth), by ca */
    struct tc_pair expired;        /* server certificate, expired yesterday, by ca */
    struct tc_pair wrong_host;     /* server certificate for wrong.example only, by ca */
    struct tc_pair client_expired; /* client certificate, expired, by ca */
    struct tc_pair other_ca;       /* an unrelated CA */
    struct tc_pair other_server;   /* localhost and 127.0.0.1, by other_ca */
    struct tc_pair other_client;   /* client certificate, by other_ca */
};

/* Makes every file in dir (which must exist). Returns 0, or -1 with the
 * reason printed to stderr. */
int tc_make(const char *dir, struct tc_certs *out);

/* Makes a server certificate signed by the test CA whose subject common
 * name is cn (SANs localhost and 127.0.0.1), written to pair's paths
 * (overwriting: a rotation). Returns 0 or -1. */
int tc_make_server(const struct tc_certs *certs, const char *cn, const struct tc_pair *pair);

/* Copies file from to to (overwriting). Returns 0 or -1. */
int tc_copy(const char *from, const char *to);

#endif
