/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Profile files: what a calibration run measured per segment, and the route
 * it chose (format in nf_profile.h and nfcoll-policy(5)). Written by the
 * calibration run, read by `route = auto`. No MPI calls.
 *
 * A profile is machine-written, so a bad line is an error and the profile
 * does not load: half a profile would give some segments fp32 for no
 * visible reason. Every bad line is reported, not just the first. Lookups
 * go through an open-addressed table of the segment names, built once.
 */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_policy_int.h"
#include "nf_profile.h"
#include "nf_route.h"
#include "nf_util.h"

#define NF_PROFILE_NAMES_V1 "segment elements calls cos_binary cos_ternary relerr_binary relerr_ternary route"
#define NF_PROFILE_NAMES_V2 NF_PROFILE_NAMES_V1 " lag_cosine ef_decay"
#define NF_PROFILE_NAMES NF_PROFILE_NAMES_V2 " cos_int4 cos_int3 cos_int2 relerr_int4 relerr_int3 relerr_int2"
#define NF_PROFILE_COLUMNS "# " NF_PROFILE_NAMES
#define NF_PROFILE_FIELDS_V1 8
#define NF_PROFILE_FIELDS_V2 10
#define NF_PROFILE_FIELDS 16

struct nf_profile {
    char *file;
    nf_profile_entry_t *e;  /* file order; segments owned */
    int *line;              /* of each entry */
    size_t n, cap;
    size_t *slot;           /* entry index + 1, 0 empty; nslots a power of two */
    size_t nslots;
    uint64_t hash;
};

typedef struct nf_pparse {
    nf_profile_t *p;
    nf_policy_diag_fn fn;
    void *arg;
    int line, errors;
    int version;            /* 1, 2 or 3, from the header */
} nf_pparse_t;

static void nf_prof_error(nf_pparse_t *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void nf_prof_error(nf_pparse_t *pp, const char *fmt, ...)
{
    char msg[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    nf_pol_diagf(pp->fn, pp->arg, NF_POLICY_ERROR, pp->p->file, pp->line, "%s", msg);
    pp->errors++;
}

/* ------------------------------------------------------------ one entry */

/* Columns 4 to 7: the cosines, then the relative errors; v2's 9 and 10:
 * the lag cosine and the decay, each '-' when there is none; v3's 11 to
 * 16: the integer routes' cosines, then their relative errors. */
static const struct { const char *name, *expected; double lo, hi; } nf_prof_num[12] = {
    {"cos_binary", "a number from -1 to 1", -1.0, 1.0},
    {"cos_ternary", "a number from -1 to 1", -1.0, 1.0},
    {"relerr_binary", "a number >= 0", 0.0, DBL_MAX},
    {"relerr_ternary", "a number >= 0", 0.0, DBL_MAX},
    {"lag_cosine", "a number from -1 to 1, or '-'", -1.0, 1.0},
    {"ef_decay", "a number from 0 to 1, or '-'", 0.0, 1.0},
    {"cos_int4", "a number from -1 to 1", -1.0, 1.0},
    {"cos_int3", "a number from -1 to 1", -1.0, 1.0},
    {"cos_int2", "a number from -1 to 1", -1.0, 1.0},
    {"relerr_int4", "a number >= 0", 0.0, DBL_MAX},
    {"relerr_int3", "a number >= 0", 0.0, DBL_MAX},
    {"relerr_int2", "a number >= 0", 0.0, DBL_MAX},
};

/* The checks of fields and lines say what is wrong (nf_prof_error) and
 * return NF_ERR_PARSE. */
static nf_status_t nf_prof_number(nf_pparse_t *pp, int col, const nf_pol_field_t *f, double *v)
{
    char buf[DBL_MAX_10_EXP + 16], show[48];   /* %.4f of any finite double fits */

    if (f->len < sizeof(buf)) {
        memcpy(buf, f->s, f->len);
        buf[f->len] = '\0';
        if (nf_parse_double(buf, v) == NF_OK && *v >= nf_prof_num[col].lo &&
            *v <= nf_prof_num[col].hi)
            return NF_OK;
    }
    nf_prof_error(pp, "bad %s '%s' (expected %s)", nf_prof_num[col].name, nf_pol_field_show(f, show, sizeof(show)),
                  nf_prof_num[col].expected);
    return NF_ERR_PARSE;
}

int nf_profile_route_ok(nf_route_t route)
{
    return route == NF_ROUTE_FP32 || nf_route_lowbit(route);
}

/* "binary|ternary|...|fp32": the routes a profile may name, the low-bit
 * ones in the table's order and then fp32, for the message. Returns buf. */
static const char *nf_prof_route_list(char *buf, size_t len)
{
    size_t o = 0;
    for (int r = 0; r < NF_ROUTE_COUNT && o < len; r++)
        if (r != NF_ROUTE_FP32 && nf_profile_route_ok((nf_route_t)r))
            o += (size_t)snprintf(buf + o, len - o, "%s|", nf_route_name((nf_route_t)r));
    if (o < len)
        snprintf(buf + o, len - o, "%s", nf_route_name(NF_ROUTE_FP32));
    return buf;
}

static nf_status_t nf_prof_route(nf_pparse_t *pp, const nf_pol_field_t *f, nf_route_t *route)
{
    char show[48], names[128];

    for (int r = 0; r < NF_ROUTE_COUNT; r++) {
        const char *name = nf_route_name((nf_route_t)r);
        if (nf_profile_route_ok((nf_route_t)r) && f->len == strlen(name) &&
            memcmp(f->s, name, f->len) == 0) {
            *route = (nf_route_t)r;
            return NF_OK;
        }
    }
    nf_prof_error(pp, "bad route '%s' (expected %s)", nf_pol_field_show(f, show, sizeof(show)),
                  nf_prof_route_list(names, sizeof(names)));
    return NF_ERR_PARSE;
}

/* Every field of an entry line into e (segment not yet copied); each bad
 * field is reported. NF_OK when all are good. */
static nf_status_t nf_prof_fields(nf_pparse_t *pp, const nf_pol_field_t *f, nf_profile_entry_t *e)
{
    static const char *const counts[2] = {"elements", "calls"};
    uint64_t *cv[2] = {&e->elements, &e->calls};
    double *dv[4] = {&e->cos_binary, &e->cos_ternary, &e->relerr_binary, &e->relerr_ternary};
    char why[256], show[48];
    int bad = 0;

    if (nf_pol_name_check(&f[0], "segment", why, sizeof(why)) != NF_OK) {
        nf_prof_error(pp, "%s", why);
        bad = 1;
    }
    for (int i = 0; i < 2; i++) {
        if (nf_pol_field_u64(&f[1 + i], cv[i]) != NF_OK) {
            nf_prof_error(pp, "bad %s '%s' (expected an unsigned decimal integer)", counts[i],
                          nf_pol_field_show(&f[1 + i], show, sizeof(show)));
            bad = 1;
        }
    }
    for (int i = 0; i < 4; i++)
        bad |= nf_prof_number(pp, i, &f[3 + i], dv[i]) != NF_OK;
    bad |= nf_prof_route(pp, &f[7], &e->route) != NF_OK;
    e->lag_cosine = NAN, e->ef_decay = -1.0;
    for (int i = 0; i < 3; i++)
        e->cos_int[i] = e->relerr_int[i] = NAN;
    if (pp->version >= 2) {
        if (!(f[8].len == 1 && f[8].s[0] == '-'))
            bad |= nf_prof_number(pp, 4, &f[8], &e->lag_cosine) != NF_OK;
        if (!(f[9].len == 1 && f[9].s[0] == '-'))
            bad |= nf_prof_number(pp, 5, &f[9], &e->ef_decay) != NF_OK;
    }
    if (pp->version >= 3) {
        for (int i = 0; i < 3; i++) /* in column order: the cosines, then the errors */
            bad |= nf_prof_number(pp, 6 + i, &f[10 + i], &e->cos_int[i]) != NF_OK;
        for (int i = 0; i < 3; i++)
            bad |= nf_prof_number(pp, 9 + i, &f[13 + i], &e->relerr_int[i]) != NF_OK;
    }
    return bad ? NF_ERR_PARSE : NF_OK;
}

/* One entry line: NF_OK also for a bad one (said why), NF_ERR_NO_MEMORY
 * the only error. */
static nf_status_t nf_prof_line(nf_pparse_t *pp, const char *s, size_t len)
{
    nf_profile_t *p = pp->p;
    nf_pol_field_t f[NF_PROFILE_FIELDS];
    nf_profile_entry_t e = {0};
    int want = pp->version >= 3   ? NF_PROFILE_FIELDS
               : pp->version == 2 ? NF_PROFILE_FIELDS_V2
                                  : NF_PROFILE_FIELDS_V1;
    int n = nf_pol_fields(s, len, f, NF_PROFILE_FIELDS);

    if (n != want) {
        nf_prof_error(pp, "expected %d fields (%s), found %d", want,
                      pp->version >= 3   ? NF_PROFILE_NAMES
                      : pp->version == 2 ? NF_PROFILE_NAMES_V2
                                         : NF_PROFILE_NAMES_V1, n);
        return NF_OK;
    }
    if (nf_prof_fields(pp, f, &e) != NF_OK)
        return NF_OK;                   /* keep the good ones: duplicates are still checked */
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        nf_profile_entry_t *ge = realloc(p->e, cap * sizeof(*ge));
        int *gl;
        if (ge == NULL)
            return NF_ERR_NO_MEMORY;
        p->e = ge;
        gl = realloc(p->line, cap * sizeof(*gl));
        if (gl == NULL)
            return NF_ERR_NO_MEMORY;
        p->line = gl;
        p->cap = cap;
    }
    e.segment = strndup(f[0].s, f[0].len);
    if (e.segment == NULL)
        return NF_ERR_NO_MEMORY;
    p->line[p->n] = pp->line;
    p->e[p->n++] = e;
    return NF_OK;
}

/* ------------------------------------------------------------ the table */

static size_t nf_prof_home(const nf_profile_t *p, const char *segment)
{
    return (size_t)nf_hash_str(NF_HASH_INIT, segment) & (p->nslots - 1);
}

/* Insert every entry in file order; a segment seen before is an error on
 * the later line. NF_OK or NF_ERR_NO_MEMORY. */
static nf_status_t nf_prof_index(nf_pparse_t *pp)
{
    nf_profile_t *p = pp->p;

    for (p->nslots = 16; p->nslots < 2 * p->n; p->nslots *= 2)
        ;
    p->slot = calloc(p->nslots, sizeof(*p->slot));
    if (p->slot == NULL)
        return NF_ERR_NO_MEMORY;
    for (size_t i = 0; i < p->n; i++) {
        size_t h = nf_prof_home(p, p->e[i].segment);
        while (p->slot[h] != 0 && strcmp(p->e[p->slot[h] - 1].segment, p->e[i].segment) != 0)
            h = (h + 1) & (p->nslots - 1);
        if (p->slot[h] != 0) {
            pp->line = p->line[i];
            nf_prof_error(pp, "duplicate segment '%s' (first at line %d)", p->e[i].segment,
                          p->line[p->slot[h] - 1]);
        } else {
            p->slot[h] = i + 1;
        }
    }
    return NF_OK;
}

const nf_profile_entry_t *nf_profile_find(const nf_profile_t *p, const char *segment)
{
    size_t h;

    if (p == NULL || segment == NULL)
        return NULL;
    for (h = nf_prof_home(p, segment); p->slot[h] != 0; h = (h + 1) & (p->nslots - 1))
        if (strcmp(p->e[p->slot[h] - 1].segment, segment) == 0)
            return &p->e[p->slot[h] - 1];
    return NULL;
}

/* ------------------------------------------------------------- the hash */

static int nf_prof_cmp(const void *a, const void *b)
{
    return strcmp((*(const nf_profile_entry_t *const *)a)->segment,
                  (*(const nf_profile_entry_t *const *)b)->segment);
}

static uint64_t nf_prof_hash_entry(uint64_t h, const nf_profile_entry_t *e)
{
    const double d[4] = {e->cos_binary, e->cos_ternary, e->relerr_binary, e->relerr_ternary};

    h = nf_hash_str(nf_hash_u64(h, strlen(e->segment)), e->segment);
    h = nf_hash_u64(nf_hash_u64(h, e->elements), e->calls);
    for (int i = 0; i < 4; i++) {
        double v = d[i] == 0 ? 0.0 : d[i];      /* -0.0000 is 0 */
        uint64_t bits;
        memcpy(&bits, &v, sizeof(bits));
        h = nf_hash_u64(h, bits);
    }
    h = nf_hash_u64(h, (uint64_t)e->route);
    if (!isnan(e->lag_cosine) || e->ef_decay >= 0) { /* none: a v1 entry's hash stands */
        const double v2[2] = {isnan(e->lag_cosine) ? 2.0 : e->lag_cosine + 0.0,
                              e->ef_decay < 0 ? -1.0 : e->ef_decay + 0.0};
        for (int i = 0; i < 2; i++) {
            uint64_t bits;
            memcpy(&bits, &v2[i], sizeof(bits));
            h = nf_hash_u64(h, bits);
        }
    }
    if (!isnan(e->cos_int[0])) { /* v3's columns (all or none); none: a v1 or v2 entry's hash stands */
        h = nf_hash_u64(h, 3); /* a mark: these six are not v2's two and more */
        for (int i = 0; i < 6; i++) {
            double v = (i < 3 ? e->cos_int[i] : e->relerr_int[i - 3]) + 0.0; /* -0.0000 is 0 */
            uint64_t bits;
            memcpy(&bits, &v, sizeof(bits));
            h = nf_hash_u64(h, bits);
        }
    }
    return h;
}

/* Over the entries sorted by segment: the order of lines does not count. */
static nf_status_t nf_prof_hash(nf_profile_t *p)
{
    const nf_profile_entry_t **by = malloc((p->n + 1) * sizeof(*by));
    uint64_t h = nf_hash_u64(NF_HASH_INIT, p->n);

    if (by == NULL)
        return NF_ERR_NO_MEMORY;
    for (size_t i = 0; i < p->n; i++)
        by[i] = &p->e[i];
    qsort(by, p->n, sizeof(*by), nf_prof_cmp);
    for (size_t i = 0; i < p->n; i++)
        h = nf_prof_hash_entry(h, by[i]);
    free(by);
    p->hash = h != 0 ? h : 1;
    return NF_OK;
}

/* ------------------------------------------------------------ parsing */

static nf_status_t nf_prof_header(nf_pparse_t *pp, nf_pol_lines_t *it)
{
    const char *s = "";
    size_t n = 0;
    nf_pol_field_t f = {NULL, 0};
    char show[48];

    if (nf_pol_next_line(it, &s, &n)) {
        if (n == strlen(NF_PROFILE_HEADER) && memcmp(s, NF_PROFILE_HEADER, n) == 0) {
            pp->version = 3;
            return NF_OK;
        }
        if (n == strlen(NF_PROFILE_HEADER_V2) && memcmp(s, NF_PROFILE_HEADER_V2, n) == 0) {
            pp->version = 2;
            return NF_OK;
        }
        if (n == strlen(NF_PROFILE_HEADER_V1) && memcmp(s, NF_PROFILE_HEADER_V1, n) == 0) {
            pp->version = 1;
            return NF_OK;
        }
    }
    pp->line = 1;
    f.s = s;
    f.len = n;
    if (it->line == 0)
        nf_prof_error(pp, "empty file: not a libnfcoll profile (expected '" NF_PROFILE_HEADER "' first)");
    else
        nf_prof_error(pp, "not a libnfcoll profile: the first line must be '" NF_PROFILE_HEADER
                      "', '" NF_PROFILE_HEADER_V2 "' or '" NF_PROFILE_HEADER_V1 "' (found '%s')",
                      nf_pol_field_show(&f, show, sizeof(show)));
    return NF_ERR_PARSE;
}

static nf_status_t nf_prof_read(nf_pparse_t *pp, const char *text, size_t len)
{
    nf_pol_lines_t it = {text, text + len, 0};
    const char *s;
    size_t n;

    if (nf_prof_header(pp, &it) != NF_OK)
        return NF_ERR_PARSE;
    while (nf_pol_next_line(&it, &s, &n)) {
        pp->line = it.line;
        if (!nf_pol_comment(s, n) && nf_prof_line(pp, s, n) != NF_OK)
            return NF_ERR_NO_MEMORY;
    }
    if (nf_prof_index(pp) != NF_OK)
        return NF_ERR_NO_MEMORY;
    return pp->errors ? NF_ERR_PARSE : nf_prof_hash(pp->p);
}

nf_status_t nf_profile_parse(const char *text, size_t len, const char *name, nf_policy_diag_fn fn, void *arg,
                             nf_profile_t **out)
{
    nf_pparse_t pp = {NULL, fn, arg, 0, 0, 0};
    nf_status_t rc;

    if ((text == NULL && len > 0) || out == NULL)
        return NF_ERR_INVALID;
    pp.p = calloc(1, sizeof(*pp.p));
    if (pp.p == NULL || (pp.p->file = strdup(name != NULL ? name : "<profile>")) == NULL) {
        free(pp.p);
        return NF_ERR_NO_MEMORY;
    }
    rc = nf_prof_read(&pp, text, len);
    if (rc == NF_ERR_NO_MEMORY)
        nf_pol_diagf(fn, arg, NF_POLICY_ERROR, pp.p->file, 0, "out of memory");
    if (rc != NF_OK) {
        nf_profile_free(pp.p);
        return rc;
    }
    *out = pp.p;
    return NF_OK;
}

nf_status_t nf_profile_load(const char *path, nf_policy_diag_fn fn, void *arg, nf_profile_t **out)
{
    char *text;
    size_t len;
    nf_status_t rc;

    if (path == NULL || out == NULL)
        return NF_ERR_INVALID;
    rc = nf_pol_read_file(path, "profile", fn, arg, &text, &len);
    if (rc != NF_OK)
        return rc;
    rc = nf_profile_parse(text, len, path, fn, arg, out);
    free(text);
    return rc;
}

uint64_t nf_profile_hash(const nf_profile_t *p) { return p != NULL ? p->hash : 0; }
size_t nf_profile_count(const nf_profile_t *p) { return p != NULL ? p->n : 0; }

const nf_profile_entry_t *nf_profile_entry(const nf_profile_t *p, size_t i)
{
    return p != NULL && i < p->n ? &p->e[i] : NULL;
}

const char *nf_profile_file(const nf_profile_t *p) { return p != NULL ? p->file : NULL; }

int nf_profile_line(const nf_profile_t *p, const nf_profile_entry_t *e)
{
    return p != NULL && e >= p->e && e < p->e + p->n ? p->line[e - p->e] : 0;
}

void nf_profile_free(nf_profile_t *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        free((char *)p->e[i].segment);
    free(p->e);
    free(p->line);
    free(p->slot);
    free(p->file);
    free(p);
}

/* ------------------------------------------------------------ calibration */

/* int4 where its cosine reaches admit, else fp32. Nothing cheaper: the
 * cheaper formats' cosines (binary, ternary, int3, int2) are measured and
 * written, but no signal calibration measures has been shown to pick one
 * safely, on the training check's models and on models it was not tuned
 * on, so they are evidence only (docs/design.md, "Calibration"). A rule
 * that names a route still wins: this is route = auto's choice. */
nf_route_t nf_profile_choose(const nf_profile_entry_t *e, double admit)
{
    return e != NULL && e->cos_int[0] >= admit ? NF_ROUTE_INT4 : NF_ROUTE_FP32;
}

double nf_profile_choose_decay(double lag_cosine, uint64_t calls)
{
    if (calls < NF_PROFILE_LAG_MIN || isnan(lag_cosine))
        return -1.0;
    return lag_cosine < 0 ? NF_PROFILE_DECAY_KEEP : NF_PROFILE_DECAY_CUT;
}

/* A v2 column that may be '-': a NaN (lag) or a negative number (decay). */
static int nf_prof_opt(FILE *m, double v, int none)
{
    return none ? fprintf(m, " -") : fprintf(m, " %.4f", v);
}

/* The profile's text, with '.' as the decimal point whatever LC_NUMERIC
 * says (the parser reads only '.'). Into a memory stream: every failure is
 * one of memory. */
static nf_status_t nf_prof_format(FILE *m, const nf_profile_entry_t *e, size_t n)
{
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0), old;
    int bad = 0;

    if (c == (locale_t)0)
        return NF_ERR_NO_MEMORY;
    old = uselocale(c);
    bad |= fprintf(m, NF_PROFILE_HEADER "\n" NF_PROFILE_COLUMNS "\n") < 0;
    for (size_t i = 0; i < n && !bad; i++) {
        bad |= fprintf(m, "%s %" PRIu64 " %" PRIu64 " %.4f %.4f %.4f %.4f %s",
                       e[i].segment != NULL ? e[i].segment : "", e[i].elements, e[i].calls, e[i].cos_binary,
                       e[i].cos_ternary, e[i].relerr_binary, e[i].relerr_ternary, nf_route_name(e[i].route)) < 0;
        bad |= nf_prof_opt(m, e[i].lag_cosine, isnan(e[i].lag_cosine)) < 0;
        bad |= nf_prof_opt(m, e[i].ef_decay, e[i].ef_decay < 0) < 0;
        bad |= fprintf(m, " %.4f %.4f %.4f %.4f %.4f %.4f", e[i].cos_int[0], e[i].cos_int[1],
                       e[i].cos_int[2], e[i].relerr_int[0], e[i].relerr_int[1],
                       e[i].relerr_int[2]) < 0;
        bad |= fputc('\n', m) == EOF;
    }
    uselocale(old);
    freelocale(c);
    return bad ? NF_ERR_NO_MEMORY : NF_OK;
}

nf_status_t nf_profile_write(FILE *fp, const nf_profile_entry_t *e, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m;
    nf_profile_t *check = NULL;
    nf_status_t rc;
    int err = ENOMEM;

    if (fp == NULL || (e == NULL && n > 0)) {
        errno = EINVAL;
        return NF_ERR_INVALID;
    }
    m = open_memstream(&text, &len);
    if (m == NULL)
        return NF_ERR_NO_MEMORY;
    if (nf_prof_format(m, e, n) != NF_OK || fclose(m) != 0) {
        free(text);
        errno = err;
        return NF_ERR_NO_MEMORY;
    }
    /* What the reader would refuse is not written at all; the parser says
     * why (through nf_log). */
    if (nf_profile_parse(text, len, "profile being written", NULL, NULL, &check) != NF_OK) {
        rc = NF_ERR_INVALID, err = EINVAL;
    } else if (fwrite(text, 1, len, fp) == len && fflush(fp) == 0) {
        rc = NF_OK;
    } else {
        rc = NF_ERR_IO, err = errno;
    }
    nf_profile_free(check);
    free(text);
    errno = err;
    return rc;
}
