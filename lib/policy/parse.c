/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Admission policy parser (libinih underneath), its diagnostics with
 * file:line, and the policy hash. No MPI calls.
 *
 * libinih does the key/value split; everything that needs a line number or
 * must not depend on inih's build options or run-time globals (line length,
 * multi-line values, inline comments, section name truncation, NUL bytes) is
 * handled by our reader, which hands inih one cleaned line at a time. inih
 * calls the reader once per line and runs the handler before asking for the
 * next, so the reader's line count is the handler's line number.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "nf_file.h"
#include "nf_kernels.h"
#include "nf_log.h"
#include "nf_policy_int.h"
#include "nf_route.h"
#include "nf_settings.h"
#include "nf_util.h"

#define NF_RULE_KEYS "region|comm|comm_size|datatype|op|bytes|calls|route|ef|ef_decay|gamma|segment|" \
    "warmup|scale_block|block"
#define NF_DEFAULT_KEYS "route|ef|ef_decay|gamma|segment|warmup|scale_block|block"

/* "pmpi|fp32|...|auto": the route table's names (nf_route.h), then auto,
 * for messages. Returns buf. */
static const char *nf_route_list(char *buf, size_t len)
{
    size_t o = 0;
    for (int r = 0; r < NF_ROUTE_COUNT && o < len; r++)
        o += (size_t)snprintf(buf + o, len - o, "%s|", nf_route_name((nf_route_t)r));
    if (o < len)
        snprintf(buf + o, len - o, "auto");
    return buf;
}

/* "sum|prod|...|user" from the one table of ops, for messages. */
#define NF_X_OP_NAME(e, s, h) "|" s
static const char nf_op_list[] = NF_OPS(NF_X_OP_NAME);
#undef NF_X_OP_NAME

/* ---------------------------------------------------------- diagnostics */

typedef struct nf_parser {
    nf_policy_t *pol;
    const char *name;             /* file name for messages */
    nf_policy_diag_fn fn;
    void *arg;
    const char *pos, *end;        /* input not yet read */
    int line;
    int stop;                     /* a structural error: read no further */
    int errors;                   /* NF_POLICY_ERROR count */
    int nonempty;                 /* saw a section or key */
    int section;                  /* S_* below */
    nf_rule_t *rule;              /* rule or default being filled, or NULL */
    int policy_line, default_line, version;
} nf_parser_t;

enum { S_NONE, S_POLICY, S_RULE, S_DEFAULT };

void nf_pol_default_diag(const nf_policy_diag_t *d, void *arg)
{
    char where[32] = "";

    (void)arg;
    if (d->line > 0)
        snprintf(where, sizeof(where), ":%d", d->line);
    if (d->severity == NF_POLICY_ERROR)
        nf_log_error("%s%s: %s", d->file, where, d->message);
    else
        nf_log_warn("%s%s: %s", d->file, where, d->message);
}

static void nf_diag(nf_parser_t *ps, nf_policy_severity_t sev, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void nf_diag(nf_parser_t *ps, nf_policy_severity_t sev, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    nf_policy_diag_t d = {sev, ps->name, line, msg};

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (sev == NF_POLICY_ERROR)
        ps->errors++;
    (ps->fn != NULL ? ps->fn : nf_pol_default_diag)(&d, ps->arg);
}

/* A bad key or value in a rule: say so, and drop the rule (or [default]). */
static void nf_rule_bad(nf_parser_t *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void nf_rule_bad(nf_parser_t *ps, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    nf_rule_t *r = ps->rule;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ps->section == S_DEFAULT)
        nf_diag(ps, NF_POLICY_DISABLED, ps->line, "%s; [default] disabled (route pmpi)", msg);
    else
        nf_diag(ps, NF_POLICY_DISABLED, ps->line, "%s; rule '%s' disabled", msg, r->name);
    r->disabled = 1;
}

/* ------------------------------------------------------ value parsing */

static char *nf_trim(char *s)
{
    char *e;
    while (nf_ascii_isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && nf_ascii_isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Unsigned decimal with an optional binary suffix (K, KB, KiB, M, ... T). */
nf_status_t nf_pol_parse_u64(const char *s, int suffix, uint64_t *v)
{
    uint64_t x = 0, mul = 1;

    if (!nf_ascii_isdigit((unsigned char)*s))
        return NF_ERR_INVALID;
    for (; nf_ascii_isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return NF_ERR_CAPACITY;
        x = x * 10 + d;
    }
    if (suffix && *s != '\0') {
        const char *u = strchr("kmgt", nf_ascii_lower((unsigned char)*s));
        if (u != NULL && *u != '\0') {
            for (int i = 0; i <= u - "kmgt"; i++)
                mul *= 1024;
            s++;
            if (*s == 'i' || *s == 'I')
                s++;
        }
        if (*s == 'B' || *s == 'b')
            s++;
    }
    if (*s != '\0')
        return NF_ERR_INVALID;
    if (x > UINT64_MAX / mul)
        return NF_ERR_CAPACITY;
    *v = x * mul;
    return NF_OK;
}

nf_status_t nf_policy_parse_size(const char *text, uint64_t *bytes)
{
    char buf[64];
    uint64_t v;

    if (text == NULL || strlen(text) >= sizeof(buf))
        return NF_ERR_INVALID;
    strcpy(buf, text);
    if (nf_pol_parse_u64(nf_trim(buf), 1, &v) != NF_OK)
        return NF_ERR_INVALID;
    *bytes = v;
    return NF_OK;
}

/* Split a comma list in place. Returns the count, NF_ERR_PARSE for an
 * empty item, NF_ERR_CAPACITY for too many (negative nf_status_t). */
static int nf_split(char *s, char **items)
{
    int n = 0;
    for (;;) {
        char *c = strchr(s, ',');
        if (c != NULL)
            *c = '\0';
        if (n == NF_POL_MAX_LIST)
            return NF_ERR_CAPACITY;
        items[n] = nf_trim(s);
        if (items[n][0] == '\0')
            return NF_ERR_PARSE;
        n++;
        if (c == NULL)
            return n;
        s = c + 1;
    }
}

static int nf_split_checked(nf_parser_t *ps, const char *key, char *s, char **items)
{
    int n = nf_split(s, items);
    if (n == NF_ERR_PARSE)
        nf_rule_bad(ps, "empty item in the list for '%s'", key);
    else if (n == NF_ERR_CAPACITY)
        nf_rule_bad(ps, "too many values for '%s' (at most %d)", key, NF_POL_MAX_LIST);
    return n;
}

static nf_status_t nf_parse_range(nf_parser_t *ps, const char *key, char *item, int suffix,
                                  uint64_t min, uint64_t max, nf_range_t *r)
{
    static const char *const what[2] = {
        "an integer N, or a range LO-HI, LO- or -HI",
        "a size such as 4096, 64K or 1M, or a range LO-HI, LO- or -HI"};
    char *dash = strchr(item, '-'), *lo = item, *hi = item;
    nf_status_t rc = NF_OK;

    r->lo = min;
    r->hi = max;
    if (dash != NULL) {
        *dash = '\0';
        lo = nf_trim(item);
        hi = nf_trim(dash + 1);
        if (*lo == '\0' && *hi == '\0')
            rc = NF_ERR_INVALID;
    }
    if (rc == NF_OK && *lo != '\0')
        rc = nf_pol_parse_u64(lo, suffix, &r->lo);
    if (rc == NF_OK && *hi != '\0' && hi != lo)
        rc = nf_pol_parse_u64(hi, suffix, &r->hi);
    if (rc == NF_OK && dash == NULL)
        r->hi = r->lo;
    if (dash != NULL)
        *dash = '-';
    if (rc == NF_ERR_CAPACITY || (rc == NF_OK && (r->lo > max || r->hi > max || r->lo < min))) {
        nf_rule_bad(ps, "%s value '%s' out of range (%" PRIu64 "..%" PRIu64 ")", key, item, min, max);
        return NF_ERR_PARSE;
    }
    if (rc != NF_OK) {
        nf_rule_bad(ps, "bad %s '%s' (expected %s)", key, item, what[suffix]);
        return NF_ERR_PARSE;
    }
    if (r->lo > r->hi) {
        nf_rule_bad(ps, "empty %s range '%s' (low end above high end)", key, item);
        return NF_ERR_PARSE;
    }
    return NF_OK;
}

/* The list parsers below say what is wrong (nf_rule_bad; nf_split_checked
 * for the list itself) and return NF_ERR_PARSE, or NF_ERR_NO_MEMORY. */
static nf_status_t nf_parse_ranges(nf_parser_t *ps, const char *key, char *value, int suffix,
                                   uint64_t min, uint64_t max, nf_ranges_t *out)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        nf_range_t *r = &out->r[i];
        if (nf_parse_range(ps, key, items[i], suffix, min, max, r) != NF_OK)
            return NF_ERR_PARSE;
        for (int j = 0; j < i; j++) {
            if (r->lo <= out->r[j].hi && out->r[j].lo <= r->hi) {
                nf_rule_bad(ps, "overlapping %s ranges '%s' and '%s'", key, items[j], items[i]);
                return NF_ERR_PARSE;
            }
        }
    }
    out->n = n > 0 ? n : 0;
    return n > 0 ? NF_OK : NF_ERR_PARSE;
}

static nf_status_t nf_parse_globs(nf_parser_t *ps, const char *key, char *value, nf_globs_t *out)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        if (!nf_pol_glob_valid(items[i])) {
            nf_rule_bad(ps, "unterminated '[' in %s pattern '%s'", key, items[i]);
            return NF_ERR_PARSE;
        }
    }
    for (int i = 0; i < n; i++) {
        out->g[i] = strdup(items[i]);
        if (out->g[i] == NULL) {
            nf_rule_bad(ps, "out of memory");
            return NF_ERR_NO_MEMORY;
        }
        out->n = i + 1;
    }
    return n > 0 ? NF_OK : NF_ERR_PARSE;
}

static nf_status_t nf_parse_names(nf_parser_t *ps, const char *key, char *value,
                                  int (*lookup)(const char *), const char *expected,
                                  uint64_t *mask)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        int k = lookup(items[i]);
        if (k < 0) {
            nf_rule_bad(ps, "unknown %s '%s' (expected %s)", key, items[i], expected);
            return NF_ERR_PARSE;
        }
        *mask |= NF_BIT(k);
    }
    return n > 0 ? NF_OK : NF_ERR_PARSE;
}

/* ef: a bool (nf_parse_bool's spellings) or inherit (-1). */
static nf_status_t nf_parse_ef(const char *v, int *out)
{
    if (nf_strcaseeq(v, "inherit")) {
        *out = -1;
        return NF_OK;
    }
    return nf_parse_bool(v, out);
}

/* ------------------------------------------------------- rule keys */

static void nf_rule_init(nf_rule_t *r)
{
    memset(r, 0, sizeof(*r));
    r->route = NF_ROUTE_PMPI;
    r->ef = -1;
    r->ef_decay = -1.0;
    r->scale_block = -1;
    r->block = 0;
    r->gamma = -1.0;
}

static void nf_rule_clear(nf_rule_t *r)
{
    free(r->name);
    for (int k = 0; k < K_NKEYS; k++)
        free(r->text[k]);
    for (int i = 0; i < r->region.n; i++)
        free(r->region.g[i]);
    for (int i = 0; i < r->comm.n; i++)
        free(r->comm.g[i]);
}

static int nf_key_lookup(const char *name)
{
    if (nf_strcaseeq(name, "comm_name"))
        return K_COMM;
    if (nf_strcaseeq(name, "call"))
        return K_CALLS;
    for (int k = 0; k < K_NKEYS; k++)
        if (nf_strcaseeq(name, nf_pol_key_names[k]))
            return k;
    return NF_NAME_UNKNOWN;
}

static void nf_rule_value(nf_parser_t *ps, nf_rule_t *r, int k, char *v)
{
    const char *key = nf_pol_key_names[k];

    switch (k) {
    case K_REGION: nf_parse_globs(ps, key, v, &r->region); break;
    case K_COMM: nf_parse_globs(ps, key, v, &r->comm); break;
    case K_COMM_SIZE: nf_parse_ranges(ps, key, v, 0, 1, INT_MAX, &r->comm_size); break;
    case K_BYTES: nf_parse_ranges(ps, key, v, 1, 0, UINT64_MAX, &r->bytes); break;
    case K_CALLS: nf_parse_ranges(ps, key, v, 0, 0, UINT64_MAX, &r->calls); break;
    case K_DATATYPE:
        nf_parse_names(ps, key, v, nf_dtype_parse, "float|double|int|... as MPI_<NAME> in lower case",
                       &r->datatypes);
        break;
    case K_OP:
        nf_parse_names(ps, key, v, nf_opkind_parse, nf_op_list + 1, &r->ops);
        break;
    case K_ROUTE: {
        char names[128];
        for (char *c = v; *c != '\0'; c++)
            *c = (char)nf_ascii_lower((unsigned char)*c);
        r->route_auto = strcmp(v, "auto") == 0;
        if (r->route_auto)
            r->route = NF_ROUTE_FP32;  /* what a segment the profile lacks takes */
        else if (nf_route_parse(v, &r->route) != NF_OK)
            nf_rule_bad(ps, "unknown route '%s' (expected %s)", v, nf_route_list(names, sizeof(names)));
        break;
    }
    case K_EF:
        if (nf_parse_ef(v, &r->ef) != NF_OK)
            nf_rule_bad(ps, "bad ef '%s' (expected on|off|inherit)", v);
        break;
    case K_EF_DECAY:
        if (nf_parse_double(v, &r->ef_decay) != NF_OK || !(r->ef_decay >= 0 && r->ef_decay <= 1)) {
            r->ef_decay = -1.0;
            nf_rule_bad(ps, "bad ef_decay '%s' (expected a number from 0 to 1, such as 0.5)", v);
        }
        break;
    case K_GAMMA:
        if (nf_parse_double(v, &r->gamma) != NF_OK || r->gamma < 0)
            nf_rule_bad(ps, "bad gamma '%s' (expected a number >= 0, such as 0.7)", v);
        break;
    case K_SEGMENT:
        if (nf_strcaseeq(v, "region"))
            r->segment = NF_POLICY_SEGMENT_REGION;
        else if (nf_strcaseeq(v, "buffer"))
            r->segment = NF_POLICY_SEGMENT_BUFFER;
        else
            nf_rule_bad(ps, "bad segment '%s' (expected region|buffer)", v);
        break;
    case K_WARMUP:
        if (nf_pol_parse_u64(v, 0, &r->warmup) != NF_OK || r->warmup > NF_POLICY_WARMUP_MAX)
            nf_rule_bad(ps, "bad warmup '%s' (expected a number of calls from 0 to %u)", v,
                        NF_POLICY_WARMUP_MAX);
        break;
    case K_SCALE_BLOCK:
        if (nf_parse_long(v, 0, NF_SCALE_BLOCK_MAX, &r->scale_block) != NF_OK ||
            r->scale_block % NF_SCALE_BLOCK_UNIT != 0) {
            r->scale_block = -1;
            nf_rule_bad(ps, "bad scale_block '%s' (expected 0 or a multiple of 512 up to 2^30, "
                        "such as 512)", v);
        }
        break;
    case K_BLOCK:
        if (nf_parse_long(v, NF_INT_BLOCK_MIN, NF_INT_BLOCK_MAX, &r->block) != NF_OK ||
            (r->block & (r->block - 1)) != 0) {
            r->block = 0;
            nf_rule_bad(ps, "bad block '%s' (expected a power of two from %u to %u)", v,
                        NF_INT_BLOCK_MIN, NF_INT_BLOCK_MAX);
        }
        break;
    }
}

static void nf_rule_key(nf_parser_t *ps, const char *name, const char *value)
{
    nf_rule_t *r = ps->rule;
    int k = nf_key_lookup(name);
    char *v;

    if (k < 0) {
        nf_rule_bad(ps, "unknown key '%s' (expected %s)", name,
                    ps->section == S_DEFAULT ? NF_DEFAULT_KEYS : NF_RULE_KEYS);
        return;
    }
    if (ps->section == S_DEFAULT && k < K_NMATCH) {
        nf_rule_bad(ps, "key '%s' cannot be used in [default] (expected " NF_DEFAULT_KEYS ")", name);
        return;
    }
    if (r->set & (1u << k)) {
        nf_rule_bad(ps, "duplicate key '%s' (first set at line %d)", name, r->key_line[k]);
        return;
    }
    r->set |= 1u << k;
    r->key_line[k] = ps->line;
    if (*value == '\0') {
        nf_rule_bad(ps, "empty value for '%s'", name);
        return;
    }
    r->text[k] = strdup(value);
    v = strdup(value);
    if (r->text[k] == NULL || v == NULL) {
        free(v);
        nf_rule_bad(ps, "out of memory");
        return;
    }
    nf_rule_value(ps, r, k, v);
    free(v);
}

/* ------------------------------------------------------- [policy] keys */

/* A path in the policy is relative to the policy file's directory: a job
 * started elsewhere finds the same layout and profile. A policy named
 * without a directory leaves the path as written. */
static char *nf_resolve_path(const char *policy_file, const char *path)
{
    const char *slash = strrchr(policy_file, '/');
    size_t dir, n;
    char *out;

    if (path[0] == '/' || slash == NULL)
        return strdup(path);
    dir = (size_t)(slash - policy_file) + 1;
    n = strlen(path);
    out = malloc(dir + n + 1);
    if (out != NULL) {
        memcpy(out, policy_file, dir);
        memcpy(out + dir, path, n + 1);
    }
    return out;
}

/* One [policy] key: its name, where its value goes in nf_policy_t, and the
 * handler that parses and checks it (lo and hi bound a number; expect is
 * the message's "(expected ...)" text). A new key is one row of
 * nf_pol_keys[] and, when no handler fits, one handler (HACKING, "Adding a
 * policy key"). */
typedef struct nf_pol_key nf_pol_key_t;
struct nf_pol_key {
    const char *name;
    void (*set)(nf_parser_t *ps, const nf_pol_key_t *k, const char *value);
    size_t off;         /* offsetof(nf_policy_t, field) */
    double lo, hi;      /* numbers: the accepted range (set_number: lo excluded when open) */
    int open;           /* set_number: lo is excluded */
    const char *expect; /* the "(expected ...)" part of the message */
};

static void *nf_pol_slot(nf_parser_t *ps, const nf_pol_key_t *k)
{
    return (char *)ps->pol + k->off;
}

static void nf_pol_ignored(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    nf_diag(ps, NF_POLICY_DISABLED, ps->line, "bad %s '%s' (expected %s); setting ignored", k->name,
            value, k->expect);
}

/* Text kept as written (stats, trace) or a path resolved against the
 * policy file's directory (regions, calibrate, profile). */
static void nf_pol_text(nf_parser_t *ps, const nf_pol_key_t *k, const char *value, int is_path)
{
    char **slot = nf_pol_slot(ps, k);
    char *v;

    if (*value == '\0') {
        nf_diag(ps, NF_POLICY_DISABLED, ps->line, "empty value for '%s'; setting ignored", k->name);
        return;
    }
    v = is_path ? nf_resolve_path(ps->pol->file, value) : strdup(value);
    if (v == NULL) {
        nf_diag(ps, NF_POLICY_DISABLED, ps->line, "out of memory; '%s' ignored", k->name);
        return;
    }
    free(*slot);
    *slot = v;
}

static void nf_pol_set_text(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    nf_pol_text(ps, k, value, 0);
}

static void nf_pol_set_path(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    nf_pol_text(ps, k, value, 1);
}

static void nf_pol_set_version(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    uint64_t v;
    (void)k;
    if (nf_pol_parse_u64(value, 0, &v) != NF_OK || v < NF_POLICY_VERSION_MIN || v > NF_POLICY_VERSION) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "unsupported policy version '%s' (expected version = " NF_POLICY_VERSIONS ")", value);
        ps->version = -1;
    } else if (ps->version == 0) {
        ps->version = (int)v;
    }
}

/* auto (-1) or a NUMA node number. */
static void nf_pol_set_node(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    int *slot = nf_pol_slot(ps, k);
    uint64_t v;
    if (nf_strcaseeq(value, "auto"))
        *slot = -1;
    else if (nf_pol_parse_u64(value, 0, &v) == NF_OK && v <= INT_MAX)
        *slot = (int)v;
    else
        nf_pol_ignored(ps, k, value);
}

/* An unsigned integer in [lo, hi]. */
static void nf_pol_set_count(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    unsigned *slot = nf_pol_slot(ps, k);
    uint64_t v;
    if (nf_pol_parse_u64(value, 0, &v) == NF_OK && (double)v >= k->lo && (double)v <= k->hi)
        *slot = (unsigned)v;
    else
        nf_pol_ignored(ps, k, value);
}

/* A number in [lo, hi] ((lo, hi] when open); -0 is kept as 0, so that it
 * hashes as the 0 it decides as. */
static void nf_pol_set_number(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    double *slot = nf_pol_slot(ps, k);
    double x;
    if (nf_parse_double(value, &x) == NF_OK && (k->open ? x > k->lo : x >= k->lo) && x <= k->hi)
        *slot = x == 0 ? 0.0 : x;
    else
        nf_pol_ignored(ps, k, value);
}

static void nf_pol_set_bool(nf_parser_t *ps, const nf_pol_key_t *k, const char *value)
{
    int *slot = nf_pol_slot(ps, k);
    int b;
    if (nf_parse_bool(value, &b) == NF_OK)
        *slot = b;
    else
        nf_pol_ignored(ps, k, value);
}

#define NF_PK(f) offsetof(nf_policy_t, f)
#define NF_PK_COUNT_MSG "an integer from 1 to 1000000"
#define NF_PK_POSITIVE_MSG "a number > 0, such as 2.0"
/* In the order the unknown-key message lists them. */
static const nf_pol_key_t nf_pol_keys[] = {
    {"version", nf_pol_set_version, 0, 0, 0, 0, NULL},
    {"cxl_node", nf_pol_set_node, NF_PK(cxl_node), 0, 0, 0, "auto or a NUMA node number"},
    {"stats", nf_pol_set_text, NF_PK(stats), 0, 0, 0, NULL},
    {"trace", nf_pol_set_text, NF_PK(trace), 0, 0, 0, NULL},
    {"regions", nf_pol_set_path, NF_PK(regions), 0, 0, 0, NULL},
    {"calibrate", nf_pol_set_path, NF_PK(calibrate), 0, 0, 0, NULL},
    {"calibrate_calls", nf_pol_set_count, NF_PK(calibrate_calls), 1, UINT_MAX, 0,
     "an integer from 1 to 4294967295"},
    {"admit_cosine", nf_pol_set_number, NF_PK(admit_cosine), -1.0, 1.0, 0,
     "a number from -1 to 1, such as 0.5"},
    {"profile", nf_pol_set_path, NF_PK(profile), 0, 0, 0, NULL},
    {"health", nf_pol_set_bool, NF_PK(health.on), 0, 0, 0, "on|off"},
    {"cooldown", nf_pol_set_count, NF_PK(health.cooldown), 1, 1000000, 0, NF_PK_COUNT_MSG},
    {"cooldown_max", nf_pol_set_count, NF_PK(health.cooldown_max), 1, 1000000, 0, NF_PK_COUNT_MSG},
    {"loss_spike", nf_pol_set_number, NF_PK(health.loss_spike), 0.0, 1e9, 1, NF_PK_POSITIVE_MSG},
    {"loss_window", nf_pol_set_count, NF_PK(health.loss_window), 1, 1000000, 0, NF_PK_COUNT_MSG},
    {"ef_growth", nf_pol_set_number, NF_PK(health.ef_growth), 0.0, 1e9, 1, NF_PK_POSITIVE_MSG},
};
#undef NF_PK
_Static_assert(UINT_MAX == 4294967295u, "calibrate_calls' message names UINT_MAX");

/* "version|cxl_node|...", from the table, for the unknown-key message. */
static const char *nf_pol_key_list(void)
{
    static char list[512];
    if (list[0] == '\0') {
        size_t o = 0;
        for (size_t i = 0; i < sizeof(nf_pol_keys) / sizeof(nf_pol_keys[0]); i++)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? "|" : "",
                                  nf_pol_keys[i].name);
    }
    return list;
}

static void nf_setting_key(nf_parser_t *ps, const char *name, const char *value)
{
    for (size_t i = 0; i < sizeof(nf_pol_keys) / sizeof(nf_pol_keys[0]); i++) {
        if (nf_strcaseeq(name, nf_pol_keys[i].name)) {
            nf_pol_keys[i].set(ps, &nf_pol_keys[i], value);
            return;
        }
    }
    nf_diag(ps, NF_POLICY_DISABLED, ps->line, "unknown key '%s' in [policy] (expected %s); ignored",
            name, nf_pol_key_list());
}

/* inih's handler: never stops inih; we keep our own error state. */
static int nf_on_key(void *user, const char *section, const char *name, const char *value)
{
    nf_parser_t *ps = user;

    (void)section;
    ps->nonempty = 1;
    if (ps->section == S_NONE) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "key '%s' outside any section (expected [policy], [rule NAME] or [default] first)", name);
        ps->stop = 1;
    } else if (ps->section == S_POLICY) {
        nf_setting_key(ps, name, value);
    } else {
        nf_rule_key(ps, name, value);
    }
    return 1;
}

/* ------------------------------------------------------- sections */

static void nf_section_end(nf_parser_t *ps)
{
    nf_rule_t *r = ps->rule;
    char names[128];

    if (r != NULL && !r->disabled && ps->section == S_RULE && !(r->set & (1u << K_ROUTE))) {
        nf_diag(ps, NF_POLICY_DISABLED, r->line,
                "rule '%s' has no route (expected route = %s); rule '%s' disabled",
                r->name, nf_route_list(names, sizeof(names)), r->name);
        r->disabled = 1;
    }
    ps->rule = NULL;
    ps->section = S_NONE;
}

static int nf_valid_name(const char *s)
{
    if (*s == '\0' || strlen(s) >= NF_POL_MAX_NAME)
        return 0;
    for (; *s != '\0'; s++)
        if (!nf_ascii_isalnum((unsigned char)*s) && strchr("_.-:@+", *s) == NULL)
            return 0;
    return 1;
}

static nf_rule_t *nf_rule_new(nf_parser_t *ps, const char *name)
{
    nf_policy_t *p = ps->pol;
    nf_rule_t *r;

    if (p->nrules == NF_POL_MAX_RULES) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line, "too many rules (at most %d)", NF_POL_MAX_RULES);
        return NULL;
    }
    if (p->nrules == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        nf_rule_t *n = realloc(p->rules, (size_t)cap * sizeof(*n));
        if (n == NULL)
            return NULL;
        p->rules = n;
        p->cap = cap;
    }
    r = &p->rules[p->nrules];
    nf_rule_init(r);
    r->name = strdup(name);
    if (r->name == NULL)
        return NULL;
    p->nrules++;
    r->line = ps->line;
    return r;
}

static void nf_section_rule(nf_parser_t *ps, const char *name)
{
    nf_policy_t *p = ps->pol;

    if (!nf_valid_name(name)) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "bad rule name '%s' (expected [rule NAME], NAME of letters, digits and _.-:@+, "
                "at most %d characters)", name, NF_POL_MAX_NAME - 1);
        ps->stop = 1;
        return;
    }
    ps->rule = nf_rule_new(ps, name);
    if (ps->rule == NULL) {
        if (ps->errors == 0)
            nf_diag(ps, NF_POLICY_ERROR, ps->line, "out of memory");
        ps->stop = 1;
        return;
    }
    ps->section = S_RULE;
    for (int i = 0; i < p->nrules - 1; i++) {
        if (strcmp(p->rules[i].name, name) == 0) {
            nf_rule_bad(ps, "duplicate rule name '%s' (first at line %d)", name, p->rules[i].line);
            break;
        }
    }
}

/* A "[...]" line (already trimmed, comment removed). */
static void nf_section(nf_parser_t *ps, char *line)
{
    char *close = strchr(line, ']'), *body, *arg;
    size_t n;

    nf_section_end(ps);
    ps->nonempty = 1;
    if (close == NULL || close[1] != '\0') {
        nf_diag(ps, NF_POLICY_ERROR, ps->line, close == NULL
                ? "bad section header '%s' (missing ']')"
                : "bad section header '%s' (text after ']')", line);
        ps->stop = 1;
        return;
    }
    *close = '\0';
    body = nf_trim(line + 1);
    n = strcspn(body, " \t");
    arg = nf_trim(body + n);
    body[n] = '\0';
    if (nf_strcaseeq(body, "rule") && *arg != '\0') {
        nf_section_rule(ps, arg);
    } else if ((nf_strcaseeq(body, "policy") || nf_strcaseeq(body, "default")) && *arg == '\0') {
        int is_policy = nf_strcaseeq(body, "policy");
        int *seen = is_policy ? &ps->policy_line : &ps->default_line;
        if (*seen != 0) {
            nf_diag(ps, NF_POLICY_ERROR, ps->line, "duplicate [%s] section (first at line %d)", body, *seen);
            ps->stop = 1;
            return;
        }
        *seen = ps->line;
        ps->section = is_policy ? S_POLICY : S_DEFAULT;
        if (ps->section == S_DEFAULT) {
            ps->rule = &ps->pol->dflt;
            ps->rule->line = ps->line;
        }
    } else {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "bad section header '[%s%s%s]' (expected [policy], [rule NAME] or [default])",
                body, *arg ? " " : "", arg);
        ps->stop = 1;
    }
}

/* ------------------------------------------------------- the reader */

/* Cut a ';' or '#' comment that starts the line or follows whitespace. */
static void nf_cut_comment(char *s)
{
    for (char *c = s; *c != '\0'; c++) {
        if ((*c == ';' || *c == '#') && (c == s || nf_ascii_isspace((unsigned char)c[-1]))) {
            *c = '\0';
            return;
        }
    }
}

/* Classify one raw line; returns what inih should see, or NULL to stop. */
static const char *nf_clean_line(nf_parser_t *ps, char *raw, size_t len, int max)
{
    char *s;

    raw[len] = '\0';
    s = raw;
    if (ps->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3;
    nf_cut_comment(s);
    s = nf_trim(s);
    if (strlen(s) > (size_t)max) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "line too long (%zu characters; at most %d)", strlen(s), max);
        return NULL;
    }
    if (*s == '[') {
        nf_section(ps, s);
        return ps->stop ? NULL : "";
    }
    if (*s != '\0' && strpbrk(s, "=:") == NULL) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line,
                "expected 'key = value', '[section]' or a comment, found '%.40s%s'",
                s, strlen(s) > 40 ? "..." : "");
        return NULL;
    }
    return s;
}

/* Control characters or NUL anywhere: not a text file; say where the first is. */
static int nf_find_binary(nf_parser_t *ps, const char *text, size_t len)
{
    int line = 1;
    size_t col = 1;

    for (size_t i = 0; i < len; i++, col++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            line++;
            col = 0;
        } else if ((c < 0x20 && !nf_ascii_isspace(c)) || c == 0x7f) {
            nf_diag(ps, NF_POLICY_ERROR, line,
                    "binary data (byte 0x%02x at column %zu); not a policy file?", c, col);
            return 1;
        }
    }
    return 0;
}

/* ini_reader over our in-memory text: one cleaned line per call. */
static char *nf_reader(char *str, int num, void *stream)
{
    nf_parser_t *ps = stream;
    const char *nl, *line;
    size_t len;
    char *raw;

    if (ps->stop || ps->pos >= ps->end || num < 2)
        return NULL;
    nl = memchr(ps->pos, '\n', (size_t)(ps->end - ps->pos));
    len = (size_t)((nl != NULL ? nl : ps->end) - ps->pos);
    ps->line++;
    raw = malloc(len + 1);
    if (raw == NULL) {
        nf_diag(ps, NF_POLICY_ERROR, ps->line, "out of memory");
        ps->stop = 1;
        return NULL;
    }
    memcpy(raw, ps->pos, len);
    ps->pos += len + (nl != NULL);
    line = nf_clean_line(ps, raw, len, num - 1);
    if (line == NULL) {
        ps->stop = 1;
        free(raw);
        return NULL;
    }
    strcpy(str, line);              /* fits: checked against num - 1 */
    free(raw);
    return str;
}

/* ------------------------------------------------------- after parsing */

/* FNV-1a over a canonical form of the rules. Strings go in with their
 * length, so that two names cannot run together into the same bytes. */
static uint64_t nf_hash_name(uint64_t h, const char *s)
{
    return nf_hash_str(nf_hash_u64(h, strlen(s)), s);
}

static uint64_t nf_hash_rule(uint64_t h, const nf_rule_t *r)
{
    const nf_globs_t *g[2] = {&r->region, &r->comm};
    const nf_ranges_t *rg[3] = {&r->comm_size, &r->bytes, &r->calls};
    uint64_t gbits;

    h = nf_hash_name(h, r->name != NULL ? r->name : "");
    for (int i = 0; i < 2; i++) {
        h = nf_hash_u64(h, (uint64_t)g[i]->n);
        for (int j = 0; j < g[i]->n; j++)
            h = nf_hash_name(h, g[i]->g[j]);
    }
    for (int i = 0; i < 3; i++) {
        h = nf_hash_u64(h, (uint64_t)rg[i]->n);
        for (int j = 0; j < rg[i]->n; j++)
            h = nf_hash_u64(nf_hash_u64(h, rg[i]->r[j].lo), rg[i]->r[j].hi);
    }
    h = nf_hash_u64(nf_hash_u64(h, r->datatypes), r->ops);
    h = nf_hash_u64(nf_hash_u64(h, (uint64_t)r->route), (uint64_t)r->route_auto);
    h = nf_hash_u64(h, (uint64_t)(int64_t)r->ef);
    memcpy(&gbits, &r->gamma, sizeof(gbits));
    if (r->gamma < 0)
        gbits = UINT64_MAX;             /* every "inherit" hashes alike */
    h = nf_hash_u64(nf_hash_u64(h, gbits), (uint64_t)r->segment);
    if (r->ef_decay >= 0) {             /* inherit adds nothing: older hashes stand */
        memcpy(&gbits, &r->ef_decay, sizeof(gbits));
        h = nf_hash_u64(nf_hash_u64(h, K_EF_DECAY), gbits);
    }
    if (r->warmup > 0)                  /* as ef_decay: older hashes stand */
        h = nf_hash_u64(nf_hash_u64(h, K_WARMUP), r->warmup);
    if (r->scale_block >= 0)            /* likewise */
        h = nf_hash_u64(nf_hash_u64(h, K_SCALE_BLOCK), (uint64_t)r->scale_block);
    if (r->block > 0)                   /* likewise */
        h = nf_hash_u64(nf_hash_u64(h, K_BLOCK), (uint64_t)r->block);
    return h;
}

static uint64_t nf_hash_policy(const nf_policy_t *p)
{
    uint64_t h = NF_HASH_INIT, abits;

    /* The version a file says decides nothing (version 2 only allows keys
     * that enter the hash themselves): hashes of version 1 files stand. */
    h = nf_hash_u64(h, NF_POLICY_VERSION_MIN);
    for (int i = 0; i < p->nrules; i++)
        if (!p->rules[i].disabled)
            h = nf_hash_rule(nf_hash_u64(h, 1), &p->rules[i]);
    h = nf_hash_u64(h, (uint64_t)p->has_default);
    if (p->has_default)
        h = nf_hash_rule(h, &p->dflt);
    /* Calibration settings change behaviour alike on every rank; the files
     * the paths name are hashed by whoever loads them. */
    memcpy(&abits, &p->admit_cosine, sizeof(abits));
    h = nf_hash_u64(nf_hash_u64(h, p->calibrate_calls), abits);
    /* Health decides routes alike on every rank: all of it. */
    const nf_policy_health_t *hp = &p->health;
    uint64_t sb, eb;
    memcpy(&sb, &hp->loss_spike, sizeof(sb));
    memcpy(&eb, &hp->ef_growth, sizeof(eb));
    h = nf_hash_u64(nf_hash_u64(nf_hash_u64(h, (uint64_t)hp->on), hp->cooldown), hp->cooldown_max);
    h = nf_hash_u64(nf_hash_u64(nf_hash_u64(h, hp->loss_window), sb), eb);
    return h != 0 ? h : 1;
}

/* Keys newer than version 1, and the version that brought each. */
static const struct {
    nf_key_t key;
    int version;
} nf_key_since[] = {
    {K_EF_DECAY, 2},
    {K_WARMUP, 3},
    {K_SCALE_BLOCK, 3},
    {K_BLOCK, NF_POLICY_VERSION_INT},
};

/* A rule or [default] of an older version than its route's: the integer
 * routes (the table's rows with a code, nf_route_intk) came with version
 * 4; a library without them would drop the rule and run the next. */
static void nf_route_version(nf_parser_t *ps, nf_rule_t *r)
{
    if (r->disabled || !(r->set & (1u << K_ROUTE)) || r->route_auto || nf_route_intk(r->route) == 0 ||
        ps->version >= NF_POLICY_VERSION_INT)
        return;
    if (r == &ps->pol->dflt)
        nf_diag(ps, NF_POLICY_DISABLED, r->key_line[K_ROUTE],
                "route %s needs version = %d in [policy] (this file says %d); [default] disabled (route pmpi)",
                nf_route_name(r->route), NF_POLICY_VERSION_INT, ps->version);
    else
        nf_diag(ps, NF_POLICY_DISABLED, r->key_line[K_ROUTE],
                "route %s needs version = %d in [policy] (this file says %d); rule '%s' disabled",
                nf_route_name(r->route), NF_POLICY_VERSION_INT, ps->version, r->name);
    r->disabled = 1;
}

/* Keys newer than the file's version disable their rule, and so does a
 * route newer than it (nf_route_version): the version is known only at the
 * end ([policy] may come last). */
static void nf_since_version(nf_parser_t *ps, nf_rule_t *r)
{
    for (size_t i = 0; i < sizeof(nf_key_since) / sizeof(nf_key_since[0]) && !r->disabled; i++) {
        nf_key_t k = nf_key_since[i].key;
        int v = nf_key_since[i].version;
        if (!(r->set & (1u << k)) || ps->version >= v)
            continue;
        if (r == &ps->pol->dflt)
            nf_diag(ps, NF_POLICY_DISABLED, r->key_line[k],
                    "%s needs version = %d in [policy] (this file says %d); [default] disabled (route pmpi)",
                    nf_pol_key_names[k], v, ps->version);
        else
            nf_diag(ps, NF_POLICY_DISABLED, r->key_line[k],
                    "%s needs version = %d in [policy] (this file says %d); rule '%s' disabled",
                    nf_pol_key_names[k], v, ps->version, r->name);
        r->disabled = 1;
    }
    nf_route_version(ps, r);
}

/* End of input: file-level checks. Returns NF_OK or NF_ERR_PARSE. */
static nf_status_t nf_finish(nf_parser_t *ps)
{
    nf_policy_t *p = ps->pol;

    if (!ps->stop)
        nf_section_end(ps);
    if (ps->errors == 0 && !ps->nonempty)
        nf_diag(ps, NF_POLICY_ERROR, 1,
                "empty policy file (expected a [policy] section with version = " NF_POLICY_VERSIONS ")");
    else if (ps->errors == 0 && ps->policy_line == 0)
        nf_diag(ps, NF_POLICY_ERROR, 1,
                "no [policy] section (expected [policy] with version = " NF_POLICY_VERSIONS ")");
    else if (ps->errors == 0 && ps->version == 0)
        nf_diag(ps, NF_POLICY_ERROR, ps->policy_line,
                "[policy] has no version (expected version = " NF_POLICY_VERSIONS ")");
    if (ps->errors != 0)
        return NF_ERR_PARSE;
    nf_since_version(ps, &p->dflt);
    for (int i = 0; i < p->nrules; i++)
        nf_since_version(ps, &p->rules[i]);
    for (int i = 0; i < p->nrules; i++)
        p->ndisabled += p->rules[i].disabled;
    nf_pol_lint(p, ps->fn != NULL ? ps->fn : nf_pol_default_diag, ps->arg);
    p->has_default = ps->default_line != 0 && !p->dflt.disabled;
    p->hash = nf_hash_policy(p);
    if (nf_pol_index(p) != NF_OK) {
        nf_diag(ps, NF_POLICY_ERROR, 0, "out of memory");
        return NF_ERR_NO_MEMORY;
    }
    return NF_OK;
}

/* ------------------------------------------------------- public: load */

nf_status_t nf_policy_parse(const char *text, size_t len, const char *name,
                            nf_policy_diag_fn fn, void *arg, nf_policy_t **out)
{
    nf_parser_t ps = {0};
    nf_policy_t *p;
    nf_status_t rc;

    if ((text == NULL && len > 0) || out == NULL)
        return NF_ERR_INVALID;
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->file = strdup(name != NULL ? name : "<policy>")) == NULL) {
        free(p);
        return NF_ERR_NO_MEMORY;
    }
    p->cxl_node = -1;
    p->calibrate_calls = NF_POLICY_CALIBRATE_CALLS;
    p->admit_cosine = NF_POLICY_ADMIT_COSINE;
    p->health = nf_policy_health_defaults;
    nf_rule_init(&p->dflt);
    ps.pol = p;
    ps.name = p->file;
    ps.fn = fn;
    ps.arg = arg;
    ps.pos = text;
    ps.end = text + len;
    if (nf_find_binary(&ps, text, len)) {
        rc = NF_ERR_PARSE;
    } else {
        ini_parse_stream(nf_reader, &ps, nf_on_key, &ps);
        rc = nf_finish(&ps);
    }
    if (rc != NF_OK) {
        nf_policy_free(p);
        return rc;
    }
    *out = p;
    return NF_OK;
}

nf_status_t nf_policy_load(const char *path, nf_policy_diag_fn fn, void *arg, nf_policy_t **out)
{
    nf_parser_t ps = {.name = path, .fn = fn, .arg = arg};
    char *text, why[512];
    size_t len;
    nf_status_t rc;

    if (path == NULL || out == NULL)
        return NF_ERR_INVALID;
    rc = nf_file_read_all(path, NF_POL_MAX_FILE, &text, &len, why, sizeof(why));
    if (rc != NF_OK) {
        nf_diag(&ps, NF_POLICY_ERROR, 0, "%s", why);
        return rc == NF_ERR_CAPACITY ? NF_ERR_PARSE : rc;
    }
    rc = nf_policy_parse(text, len, path, fn, arg, out);
    free(text);
    return rc;
}

void nf_policy_free(nf_policy_t *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->nrules; i++)
        nf_rule_clear(&p->rules[i]);
    nf_rule_clear(&p->dflt);
    free(p->rules);
    free(p->bounds);
    free(p->stats);
    free(p->trace);
    free(p->regions);
    free(p->calibrate);
    free(p->profile);
    free(p->file);
    free(p);
}

/* ------------------------------------------------------- accessors */

uint64_t nf_policy_hash(const nf_policy_t *p) { return p != NULL ? p->hash : 0; }
int nf_policy_rule_count(const nf_policy_t *p) { return p != NULL ? p->nrules : 0; }
int nf_policy_disabled_count(const nf_policy_t *p) { return p != NULL ? p->ndisabled : 0; }
int nf_policy_cxl_node(const nf_policy_t *p) { return p != NULL ? p->cxl_node : -1; }
const char *nf_policy_stats(const nf_policy_t *p) { return p != NULL ? p->stats : NULL; }
const char *nf_policy_trace(const nf_policy_t *p) { return p != NULL ? p->trace : NULL; }
const char *nf_policy_regions(const nf_policy_t *p) { return p != NULL ? p->regions : NULL; }
const char *nf_policy_calibrate(const nf_policy_t *p) { return p != NULL ? p->calibrate : NULL; }
const char *nf_policy_profile(const nf_policy_t *p) { return p != NULL ? p->profile : NULL; }

unsigned nf_policy_calibrate_calls(const nf_policy_t *p)
{
    return p != NULL ? p->calibrate_calls : NF_POLICY_CALIBRATE_CALLS;
}

const nf_policy_health_t nf_policy_health_defaults = {
    .on = 0, .cooldown = 50, .cooldown_max = 800, .loss_spike = 2.0, .loss_window = 20,
    .ef_growth = 4.0,
};

const nf_policy_health_t *nf_policy_health(const nf_policy_t *p)
{
    return p != NULL ? &p->health : &nf_policy_health_defaults;
}

double nf_policy_admit_cosine(const nf_policy_t *p)
{
    return p != NULL ? p->admit_cosine : NF_POLICY_ADMIT_COSINE;
}
const char *nf_policy_file(const nf_policy_t *p) { return p != NULL ? p->file : NULL; }
