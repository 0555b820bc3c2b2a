/* Test certificates; see tls_certs.h. */
#include "tls_certs.h"

#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define DAY (24L * 3600L)

enum tc_kind {
    TC_CA = 0,     /* a self-signed CA */
    TC_SERVER = 1, /* serverAuth, with SANs */
    TC_CLIENT = 2, /* clientAuth */
};

struct tc_spec {
    const char *cn;    /* subject common name */
    enum tc_kind kind; /* extensions */
    const char *san;   /* subjectAltName value, or NULL */
    long from_s, to_s; /* validity, seconds from now */
};

static int tc_fail(const char *what)
{
    fprintf(stderr, "tls_certs: %s failed\n", what);
    ERR_print_errors_fp(stderr);
    return -1;
}

static int tc_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!ext)
        return -1;
    ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : -1;
}

static int tc_exts(X509 *x, X509 *issuer, const struct tc_spec *s)
{
    int rc = tc_ext(x, x, NID_subject_key_identifier, "hash");

    if (s->kind == TC_CA) {
        rc = rc || tc_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") ||
             tc_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
        return rc ? -1 : 0;
    }
    rc = rc || tc_ext(x, issuer, NID_authority_key_identifier, "keyid") ||
         tc_ext(x, x, NID_basic_constraints, "CA:FALSE") ||
         tc_ext(x, x, NID_key_usage, "critical,digitalSignature") ||
         tc_ext(x, x, NID_ext_key_usage, s->kind == TC_SERVER ? "serverAuth" : "clientAuth");
    if (!rc && s->san)
        rc = tc_ext(x, x, NID_subject_alt_name, s->san);
    return rc ? -1 : 0;
}

/* A certificate for key, signed by ca_key (itself when ca is NULL). */
static X509 *tc_cert(const struct tc_spec *s, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key)
{
    static long serial = 1000;
    X509 *x = X509_new();
    X509_NAME *name;

    if (!x)
        return NULL;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), s->from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), s->to_s);
    X509_set_pubkey(x, key);
    name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"lockproxy tests",
                               -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)s->cn, -1, -1, 0);
    X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name);
    if (tc_exts(x, ca ? ca : x, s) < 0 || X509_sign(x, ca ? ca_key : key, EVP_sha256()) == 0) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int tc_write(const struct tc_pair *p, X509 *x, EVP_PKEY *key)
{
    FILE *f = fopen(p->cert, "w");
    int ok;

    if (!f)
        return -1;
    ok = PEM_write_X509(f, x);
    fclose(f);
    f = fopen(p->key, "w");
    if (!f || !ok)
        return f ? (fclose(f), -1) : -1;
    ok = PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    return ok ? 0 : -1;
}

/* Makes key and certificate, signs with ca and ca_key (NULL: self-signed), writes
 * them to p, and hands them back in *xo and *ko when asked. */
static int tc_issue(const struct tc_spec *s, X509 *ca, EVP_PKEY *ca_key, const struct tc_pair *p,
                    X509 **xo, EVP_PKEY **ko)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key ? tc_cert(s, key, ca, ca_key) : NULL;
    int rc = x ? tc_write(p, x, key) : -1;

    if (rc == 0 && xo) {
        *xo = x;
        *ko = key;
        return 0;
    }
    X509_free(x);
    EVP_PKEY_free(key);
    return rc < 0 ? tc_fail(s->cn) : 0;
}

static void tc_name(struct tc_pair *p, const char *dir, const char *base)
{
    snprintf(p->cert, sizeof(p->cert), "%s/%s.pem", dir, base);
    snprintf(p->key, sizeof(p->key), "%s/%s.key", dir, base);
}

/* The CA's certificate and key, read back from its files. */
static int tc_load_ca(const struct tc_pair *p, X509 **x, EVP_PKEY **k)
{
    FILE *f = fopen(p->cert, "r");

    *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    f = fopen(p->key, "r");
    *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    if (*x && *k)
        return 0;
    X509_free(*x);
    EVP_PKEY_free(*k);
    return tc_fail("reading the CA");
}

#define SAN_LOCAL "DNS:localhost,IP:127.0.0.1,IP:::1"

static int tc_make_leaves(struct tc_certs *c, X509 *ca, EVP_PKEY *cak, X509 *oca, EVP_PKEY *ocak)
{
    const struct tc_spec server = {"localhost", TC_SERVER, SAN_LOCAL, -DAY, 365 * DAY};
    const struct tc_spec client = {"app-client", TC_CLIENT, NULL, -DAY, 365 * DAY};
    const struct tc_spec expired = {"localhost", TC_SERVER, SAN_LOCAL, -10 * DAY, -DAY};
    const struct tc_spec wrong = {"wrong.example", TC_SERVER, "DNS:wrong.example", -DAY, 365 * DAY};
    const struct tc_spec cexp = {"app-client", TC_CLIENT, NULL, -10 * DAY, -DAY};

    if (tc_issue(&server, ca, cak, &c->server, NULL, NULL) < 0 ||
        tc_issue(&client, ca, cak, &c->client, NULL, NULL) < 0 ||
        tc_issue(&expired, ca, cak, &c->expired, NULL, NULL) < 0 ||
        tc_issue(&wrong, ca, cak, &c->wrong_host, NULL, NULL) < 0 ||
        tc_issue(&cexp, ca, cak, &c->client_expired, NULL, NULL) < 0 ||
        tc_issue(&server, oca, ocak, &c->other_server, NULL, NULL) < 0 ||
        tc_issue(&client, oca, ocak, &c->other_client, NULL, NULL) < 0)
        return -1;
    return 0;
}

int tc_make(const char *dir, struct tc_certs *c)
{
    const struct tc_spec ca = {"lockproxy test CA", TC_CA, NULL, -DAY, 3650 * DAY};
    const struct tc_spec oca = {"unrelated CA", TC_CA, NULL, -DAY, 3650 * DAY};
    X509 *cax = NULL, *ocax = NULL;
    EVP_PKEY *cak = NULL, *ocak = NULL;
    int rc = -1;

    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    tc_name(&c->ca, dir, "ca");
    tc_name(&c->server, dir, "server");
    tc_name(&c->client, dir, "client");
    tc_name(&c->expired, dir, "expired");
    tc_name(&c->wrong_host, dir, "wrong-host");
    tc_name(&c->client_expired, dir, "client-expired");
    tc_name(&c->other_ca, dir, "other-ca");
    tc_name(&c->other_server, dir, "other-server");
    tc_name(&c->other_client, dir, "other-client");
    if (tc_issue(&ca, NULL, NULL, &c->ca, &cax, &cak) == 0 &&
        tc_issue(&oca, NULL, NULL, &c->other_ca, &ocax, &ocak) == 0)
        rc = tc_make_leaves(c, cax, cak, ocax, ocak);
    X509_free(cax);
    X509_free(ocax);
    EVP_PKEY_free(cak);
    EVP_PKEY_free(ocak);
    return rc;
}

int tc_make_server(const struct tc_certs *c, const char *cn, const struct tc_pair *pair)
{
    const struct tc_spec s = {cn, TC_SERVER, SAN_LOCAL, -DAY, 365 * DAY};
    X509 *ca;
    EVP_PKEY *cak;
    int rc;

    if (tc_load_ca(&c->ca, &ca, &cak) < 0)
        return -1;
    rc = tc_issue(&s, ca, cak, pair, NULL, NULL);
    X509_free(ca);
    EVP_PKEY_free(cak);
    return rc;
}

int tc_copy(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[4096];
    size_t n;
    int rc = in && out ? 0 : -1;

    while (rc == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    }
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}
