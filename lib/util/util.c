/* SPDX-License-Identifier: BSD-3-Clause */
/* FNV-1a hashing and locale-free parsing (nf_util.h). No MPI calls. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_util.h"

#define NF_FNV_PRIME 0x100000001b3ull

uint64_t nf_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * NF_FNV_PRIME;
    return h;
}

uint64_t nf_hash_str(uint64_t h, const char *s)
{
    return nf_hash_bytes(h, s, strlen(s));
}

uint64_t nf_hash_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];

    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return nf_hash_bytes(h, b, sizeof(b));
}

int nf_strcaseeq(const char *a, const char *b)
{
    for (; nf_ascii_lower((unsigned char)*a) == nf_ascii_lower((unsigned char)*b); a++, b++)
        if (*a == '\0')
            return 1;
    return 0;
}

nf_status_t nf_parse_bool(const char *s, int *out)
{
    static const char *const on[] = {"on", "1", "yes", "true"};
    static const char *const off[] = {"off", "0", "no", "false"};

    if (s == NULL)
        return NF_ERR_INVALID;
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (nf_strcaseeq(s, on[i])) {
            *out = 1;
            return NF_OK;
        }
        if (nf_strcaseeq(s, off[i])) {
            *out = 0;
            return NF_OK;
        }
    }
    return NF_ERR_INVALID;
}

/* strtol also takes leading spaces and, in some locales, more forms than
 * the C locale's: count the digits ourselves. */
nf_status_t nf_parse_long(const char *s, long lo, long hi, long *out)
{
    unsigned long mag = 0, lim = LONG_MAX;
    int neg;
    long v;

    if (s == NULL)
        return NF_ERR_INVALID;
    neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (neg)
        lim = (unsigned long)LONG_MAX + 1;
    if (!nf_ascii_isdigit((unsigned char)*s))
        return NF_ERR_INVALID;
    for (; nf_ascii_isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (mag > (lim - d) / 10)
            return NF_ERR_CAPACITY;
        mag = mag * 10 + d;
    }
    if (*s != '\0')
        return NF_ERR_INVALID;
    v = !neg ? (long)mag : mag == lim ? LONG_MIN : -(long)mag;
    if (v < lo || v > hi)
        return NF_ERR_INVALID;
    *out = v;
    return NF_OK;
}

/* [+-]digits[.digits][(e|E)[+-]digits], at least one mantissa digit. */
static int nf_decimal_syntax(const char *s)
{
    size_t digits = 0;

    if (*s == '+' || *s == '-')
        s++;
    for (; nf_ascii_isdigit((unsigned char)*s); s++)
        digits++;
    if (*s == '.')
        for (s++; nf_ascii_isdigit((unsigned char)*s); s++)
            digits++;
    if (digits == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!nf_ascii_isdigit((unsigned char)*s))
            return 0;
        while (nf_ascii_isdigit((unsigned char)*s))
            s++;
    }
    return *s == '\0';
}

/* The syntax is checked first, so strtod sees only what it reads alike in
 * every locale once LC_NUMERIC is "C" for this thread. */
char *nf_format_fixed4(char *buf, size_t len, double v)
{
    snprintf(buf, len, "%.4f", v);
    for (char *p = buf; *p != '\0'; p++) /* a locale's decimal point is one byte here */
        if (*p != '-' && (*p < '0' || *p > '9') && !(*p >= 'a' && *p <= 'z'))
            *p = '.';
    return buf;
}

nf_status_t nf_parse_double(const char *s, double *out)
{
    locale_t c, old;
    char *end;
    double d;
    int err;

    if (s == NULL || !nf_decimal_syntax(s))
        return NF_ERR_INVALID;
    c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (c == (locale_t)0)
        return NF_ERR_NO_MEMORY;
    old = uselocale(c);
    errno = 0;
    d = strtod(s, &end);
    err = errno;
    uselocale(old);
    freelocale(c);
    if (*end != '\0' || err != 0 || !isfinite(d))
        return NF_ERR_INVALID;
    *out = d;
    return NF_OK;
}

nf_status_t nf_parse_size(const char *s, uint64_t *out)
{
    static const char units[] = "kmgt";
    uint64_t v = 0;
    unsigned shift = 0;

    if (s == NULL || !nf_ascii_isdigit((unsigned char)*s))
        return NF_ERR_INVALID;
    for (; nf_ascii_isdigit((unsigned char)*s); s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return NF_ERR_CAPACITY;
        v = v * 10 + d;
    }
    const char *u = *s != '\0' ? strchr(units, nf_ascii_lower((unsigned char)*s)) : NULL;
    if (u != NULL) {
        shift = 10u * (unsigned)(u - units + 1);
        s++;
        s += *s == 'i' || *s == 'I';
    }
    s += *s == 'b' || *s == 'B';
    if (*s != '\0')
        return NF_ERR_INVALID;
    if (shift > 0 && v > UINT64_MAX >> shift)
        return NF_ERR_CAPACITY;
    *out = v << shift;
    return NF_OK;
}

/* ------------------------------------------------------ byte buffers */

void nf_wbuf_put(nf_wbuf_t *b, const void *p, size_t n)
{
    if (b->bad || n == 0)
        return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->bad = 1;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void nf_wbuf_u64(nf_wbuf_t *b, uint64_t v)
{
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(v >> (8 * i));
    nf_wbuf_put(b, le, sizeof(le));
}

void nf_wbuf_str(nf_wbuf_t *b, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    unsigned char len = (unsigned char)(n < 255 ? n : 255);
    nf_wbuf_put(b, &len, 1);
    nf_wbuf_put(b, s, len);
}

nf_status_t nf_rbuf_get(nf_rbuf_t *r, void *p, size_t n)
{
    if (n > r->n - r->at)
        return NF_ERR_PARSE;
    memcpy(p, r->p + r->at, n);
    r->at += n;
    return NF_OK;
}

nf_status_t nf_rbuf_u64(nf_rbuf_t *r, uint64_t *v)
{
    unsigned char le[8];
    nf_status_t st = nf_rbuf_get(r, le, sizeof(le));
    if (st != NF_OK)
        return st;
    *v = 0;
    for (int i = 7; i >= 0; i--)
        *v = *v << 8 | le[i];
    return NF_OK;
}

nf_status_t nf_rbuf_str(nf_rbuf_t *r, char *s, size_t len)
{
    unsigned char n;
    nf_status_t st;
    if (len < 256)
        return NF_ERR_INVALID;
    if ((st = nf_rbuf_get(r, &n, 1)) != NF_OK || (st = nf_rbuf_get(r, s, n)) != NF_OK)
        return st;
    s[n] = '\0';
    return NF_OK;
}
