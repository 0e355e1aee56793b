/*
 * Admission policy: parser (libinih underneath) and matcher. No MPI calls.
 *
 * libinih does the key/value split; everything that needs a line number or
 * must not depend on inih's build options or run-time globals (line length,
 * multi-line values, inline comments, section name truncation, NUL bytes) is
 * handled by our reader, which hands inih one cleaned line at a time. inih
 * calls the reader once per line and runs the handler before asking for the
 * next, so the reader's line count is the handler's line number.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "nf_log.h"
#include "nf_policy.h"
#include "nf_util.h"

#define NF_POL_MAX_LIST 16           /* values per key */
#define NF_POL_MAX_FILE (1u << 20)   /* bytes */
#define NF_POL_MAX_NAME 64           /* rule name length */
#define NF_POL_MAX_RULES 1024        /* keeps load-time checks quadratic but small */

#define NF_BIT(i) (UINT64_C(1) << (i))

typedef struct { uint64_t lo, hi; } nf_range_t;
typedef struct { int n; nf_range_t r[NF_POL_MAX_LIST]; } nf_ranges_t;
typedef struct { int n; char *g[NF_POL_MAX_LIST]; } nf_globs_t;

/* Keys, in the order the hash and explain visit them. Match keys first. */
typedef enum nf_key {
    K_REGION, K_COMM, K_COMM_SIZE, K_DATATYPE, K_OP, K_BYTES, K_CALLS,
    K_NMATCH,
    K_ROUTE = K_NMATCH, K_EF, K_GAMMA, K_SEGMENT,
    K_NKEYS
} nf_key_t;

static const char *const nf_key_names[K_NKEYS] = {
    "region", "comm", "comm_size", "datatype", "op", "bytes", "calls",
    "route", "ef", "gamma", "segment",
};
#define NF_RULE_KEYS "region|comm|comm_size|datatype|op|bytes|calls|route|ef|gamma|segment"
#define NF_DEFAULT_KEYS "route|ef|gamma|segment"
#define NF_POLICY_KEYS "version|cxl_node|stats|trace"
#define NF_ROUTES "pmpi|fp32|binary|ternary"

_Static_assert(NF_POLICY_F_REGION == 1u << K_REGION && NF_POLICY_F_CALLS == 1u << K_CALLS &&
               NF_POLICY_F_BYTES == 1u << K_BYTES && NF_POLICY_F_OP == 1u << K_OP,
               "NF_POLICY_F_* follow nf_key_t");
_Static_assert(NF_DT_N <= 64 && NF_OP_N <= 64, "a rule holds datatypes and ops as 64-bit masks");

/* "sum|prod|...|user" from the one table of ops, for messages. */
#define NF_X_OP_NAME(e, s, h) "|" s
static const char nf_op_list[] = NF_OPS(NF_X_OP_NAME);
#undef NF_X_OP_NAME

typedef struct nf_rule {
    char *name;
    int line;
    int disabled;
    unsigned set;                 /* bit per nf_key_t seen */
    int key_line[K_NKEYS];
    char *text[K_NKEYS];          /* values as written, for explain */
    nf_globs_t region, comm;
    nf_ranges_t comm_size, bytes, calls;
    uint64_t datatypes, ops;      /* bit per nf_dtype_t / nf_opkind_t */
    nf_route_t route;
    int ef;
    double gamma;
    nf_policy_segment_t segment;
} nf_rule_t;

struct nf_policy {
    char *file;
    nf_rule_t *rules;
    int nrules, cap, ndisabled;
    nf_rule_t dflt;
    int has_default;              /* a [default] section exists and is enabled */
    int cxl_node;
    char *stats, *trace;
    uint64_t hash;
};

/* ---------------------------------------------------------------- globs */

/* Bracket expression after '['; sets *end past ']' or to NULL if unterminated. */
static int nf_glob_class(const char *p, unsigned char c, const char **end)
{
    int neg = 0, hit = 0;
    const char *first;

    if (*p == '!' || *p == '^') {
        neg = 1;
        p++;
    }
    first = p;
    while (*p != ']' || p == first) {
        unsigned char lo, hi;
        if (*p == '\0') {
            *end = NULL;
            return 0;
        }
        lo = (unsigned char)*p++;
        if (lo == '\\' && *p != '\0')
            lo = (unsigned char)*p++;
        hi = lo;
        if (p[0] == '-' && p[1] != '\0' && p[1] != ']') {
            p++;
            hi = (unsigned char)*p++;
            if (hi == '\\' && *p != '\0')
                hi = (unsigned char)*p++;
        }
        if (lo <= c && c <= hi)
            hit = 1;
    }
    *end = p + 1;
    return hit != neg;
}

/* One pattern element against one character; *next is the following element. */
static int nf_glob_one(const char *p, unsigned char c, const char **next)
{
    if (*p == '?') {
        *next = p + 1;
        return 1;
    }
    if (*p == '[') {
        int m = nf_glob_class(p + 1, c, next);
        if (*next != NULL)
            return m;
        *next = p + 1;                  /* unterminated: a literal '[' */
        return c == '[';
    }
    if (*p == '\\' && p[1] != '\0')
        p++;
    *next = p + 1;
    return (unsigned char)*p == c;
}

/* fnmatch(3) without flags, but locale-free, allocation-free and linear in
 * backtracking (one pending '*'), so a hostile pattern cannot blow up. */
static int nf_glob_match(const char *p, const char *s)
{
    const char *star_p = NULL, *star_s = NULL, *next;

    while (*s != '\0') {
        if (*p == '*') {
            while (*p == '*')
                p++;
            if (*p == '\0')
                return 1;
            star_p = p;
            star_s = s;
            continue;
        }
        if (*p != '\0' && nf_glob_one(p, (unsigned char)*s, &next)) {
            p = next;
            s++;
            continue;
        }
        if (star_p == NULL)
            return 0;
        p = star_p;
        s = ++star_s;
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

static int nf_glob_has_meta(const char *p)
{
    return strpbrk(p, "*?[\\") != NULL;
}

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

static void nf_default_diag(const nf_policy_diag_t *d, void *arg)
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
    (ps->fn != NULL ? ps->fn : nf_default_diag)(&d, ps->arg);
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
static int nf_parse_u64(const char *s, int suffix, uint64_t *v)
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
    if (nf_parse_u64(nf_trim(buf), 1, &v) != NF_OK)
        return NF_ERR_INVALID;
    *bytes = v;
    return NF_OK;
}

/* Split a comma list in place. Returns the count, -1 for an empty item,
 * -2 for too many. */
static int nf_split(char *s, char **items)
{
    int n = 0;
    for (;;) {
        char *c = strchr(s, ',');
        if (c != NULL)
            *c = '\0';
        if (n == NF_POL_MAX_LIST)
            return -2;
        items[n] = nf_trim(s);
        if (items[n][0] == '\0')
            return -1;
        n++;
        if (c == NULL)
            return n;
        s = c + 1;
    }
}

static int nf_split_checked(nf_parser_t *ps, const char *key, char *s, char **items)
{
    int n = nf_split(s, items);
    if (n == -1)
        nf_rule_bad(ps, "empty item in the list for '%s'", key);
    else if (n == -2)
        nf_rule_bad(ps, "too many values for '%s' (at most %d)", key, NF_POL_MAX_LIST);
    return n;
}

static int nf_parse_range(nf_parser_t *ps, const char *key, char *item, int suffix,
                          uint64_t min, uint64_t max, nf_range_t *r)
{
    static const char *const what[2] = {
        "an integer N, or a range LO-HI, LO- or -HI",
        "a size such as 4096, 64K or 1M, or a range LO-HI, LO- or -HI"};
    char *dash = strchr(item, '-'), *lo = item, *hi = item;
    int rc = NF_OK;

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
        rc = nf_parse_u64(lo, suffix, &r->lo);
    if (rc == NF_OK && *hi != '\0' && hi != lo)
        rc = nf_parse_u64(hi, suffix, &r->hi);
    if (rc == NF_OK && dash == NULL)
        r->hi = r->lo;
    if (dash != NULL)
        *dash = '-';
    if (rc == NF_ERR_CAPACITY || (rc == NF_OK && (r->lo > max || r->hi > max || r->lo < min))) {
        nf_rule_bad(ps, "%s value '%s' out of range (%" PRIu64 "..%" PRIu64 ")", key, item, min, max);
        return -1;
    }
    if (rc != NF_OK) {
        nf_rule_bad(ps, "bad %s '%s' (expected %s)", key, item, what[suffix]);
        return -1;
    }
    if (r->lo > r->hi) {
        nf_rule_bad(ps, "empty %s range '%s' (low end above high end)", key, item);
        return -1;
    }
    return 0;
}

static int nf_parse_ranges(nf_parser_t *ps, const char *key, char *value, int suffix,
                           uint64_t min, uint64_t max, nf_ranges_t *out)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        nf_range_t *r = &out->r[i];
        if (nf_parse_range(ps, key, items[i], suffix, min, max, r) != 0)
            return -1;
        for (int j = 0; j < i; j++) {
            if (r->lo <= out->r[j].hi && out->r[j].lo <= r->hi) {
                nf_rule_bad(ps, "overlapping %s ranges '%s' and '%s'", key, items[j], items[i]);
                return -1;
            }
        }
    }
    out->n = n > 0 ? n : 0;
    return n > 0 ? 0 : -1;
}

static int nf_parse_globs(nf_parser_t *ps, const char *key, char *value, nf_globs_t *out)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        for (const char *p = items[i]; *p != '\0'; p++) {
            const char *end;
            if (*p == '\\' && p[1] != '\0') {
                p++;
            } else if (*p == '[') {
                nf_glob_class(p + 1, 0, &end);
                if (end == NULL) {
                    nf_rule_bad(ps, "unterminated '[' in %s pattern '%s'", key, items[i]);
                    return -1;
                }
                p = end - 1;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        out->g[i] = strdup(items[i]);
        if (out->g[i] == NULL) {
            nf_rule_bad(ps, "out of memory");
            return -1;
        }
        out->n = i + 1;
    }
    return n > 0 ? 0 : -1;
}

static int nf_parse_names(nf_parser_t *ps, const char *key, char *value,
                          int (*lookup)(const char *), const char *expected, uint64_t *mask)
{
    char *items[NF_POL_MAX_LIST];
    int n = nf_split_checked(ps, key, value, items);

    for (int i = 0; i < n; i++) {
        int k = lookup(items[i]);
        if (k < 0) {
            nf_rule_bad(ps, "unknown %s '%s' (expected %s)", key, items[i], expected);
            return -1;
        }
        *mask |= NF_BIT(k);
    }
    return n > 0 ? 0 : -1;
}

/* ef: a bool (nf_parse_bool's spellings) or inherit (-1). */
static int nf_parse_ef(const char *v, int *out)
{
    if (nf_strcaseeq(v, "inherit")) {
        *out = -1;
        return 0;
    }
    return nf_parse_bool(v, out);
}

/* ------------------------------------------------------- rule keys */

static void nf_rule_init(nf_rule_t *r)
{
    memset(r, 0, sizeof(*r));
    r->route = NF_ROUTE_PMPI;
    r->ef = -1;
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
        if (nf_strcaseeq(name, nf_key_names[k]))
            return k;
    return -1;
}

static void nf_rule_value(nf_parser_t *ps, nf_rule_t *r, int k, char *v)
{
    const char *key = nf_key_names[k];

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
        for (char *c = v; *c != '\0'; c++)
            *c = (char)nf_ascii_lower((unsigned char)*c);
        if (nf_route_parse(v, &r->route) != NF_OK)
            nf_rule_bad(ps, "unknown route '%s' (expected " NF_ROUTES ")", v);
        break;
    }
    case K_EF:
        if (nf_parse_ef(v, &r->ef) != 0)
            nf_rule_bad(ps, "bad ef '%s' (expected on|off|inherit)", v);
        break;
    case K_GAMMA:
        if (nf_parse_double(v, &r->gamma) != 0 || r->gamma < 0)
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

static void nf_setting_key(nf_parser_t *ps, const char *name, const char *value)
{
    nf_policy_t *p = ps->pol;
    uint64_t v;

    if (nf_strcaseeq(name, "version")) {
        if (nf_parse_u64(value, 0, &v) != NF_OK || v != NF_POLICY_VERSION) {
            nf_diag(ps, NF_POLICY_ERROR, ps->line,
                    "unsupported policy version '%s' (expected version = %d)", value, NF_POLICY_VERSION);
            ps->version = -1;
        } else if (ps->version == 0) {
            ps->version = (int)v;
        }
    } else if (nf_strcaseeq(name, "cxl_node")) {
        if (nf_strcaseeq(value, "auto"))
            p->cxl_node = -1;
        else if (nf_parse_u64(value, 0, &v) == NF_OK && v <= INT_MAX)
            p->cxl_node = (int)v;
        else
            nf_diag(ps, NF_POLICY_DISABLED, ps->line,
                    "bad cxl_node '%s' (expected auto or a NUMA node number); setting ignored", value);
    } else if (nf_strcaseeq(name, "stats") || nf_strcaseeq(name, "trace")) {
        char **slot = nf_ascii_lower((unsigned char)name[0]) == 's' ? &p->stats : &p->trace;
        if (*value == '\0') {
            nf_diag(ps, NF_POLICY_DISABLED, ps->line, "empty value for '%s'; setting ignored", name);
            return;
        }
        free(*slot);
        *slot = strdup(value);
    } else {
        nf_diag(ps, NF_POLICY_DISABLED, ps->line,
                "unknown key '%s' in [policy] (expected " NF_POLICY_KEYS "); ignored", name);
    }
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

    if (r != NULL && !r->disabled && ps->section == S_RULE && !(r->set & (1u << K_ROUTE))) {
        nf_diag(ps, NF_POLICY_DISABLED, r->line,
                "rule '%s' has no route (expected route = " NF_ROUTES "); rule '%s' disabled",
                r->name, r->name);
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

static int nf_ranges_cover(const nf_ranges_t *a, const nf_ranges_t *b)
{
    if (a->n == 0)
        return 1;
    if (b->n == 0)
        return 0;
    for (int i = 0; i < b->n; i++) {
        int in = 0;
        for (int j = 0; j < a->n && !in; j++)
            in = a->r[j].lo <= b->r[i].lo && b->r[i].hi <= a->r[j].hi;
        if (!in)
            return 0;
    }
    return 1;
}

/* Conservative: true only when every name b's patterns accept, a's accept. */
static int nf_globs_cover(const nf_globs_t *a, const nf_globs_t *b)
{
    if (a->n == 0)
        return 1;
    if (b->n == 0)
        return 0;
    for (int i = 0; i < b->n; i++) {
        int in = 0;
        for (int j = 0; j < a->n && !in; j++)
            in = strcmp(a->g[j], "*") == 0 || strcmp(a->g[j], b->g[i]) == 0 ||
                 (!nf_glob_has_meta(b->g[i]) && nf_glob_match(a->g[j], b->g[i]));
        if (!in)
            return 0;
    }
    return 1;
}

static int nf_mask_cover(uint64_t a, uint64_t b)
{
    return a == 0 || (b != 0 && (b & ~a) == 0);
}

static int nf_rule_covers(const nf_rule_t *a, const nf_rule_t *b)
{
    return nf_globs_cover(&a->region, &b->region) && nf_globs_cover(&a->comm, &b->comm) &&
           nf_ranges_cover(&a->comm_size, &b->comm_size) &&
           nf_mask_cover(a->datatypes, b->datatypes) && nf_mask_cover(a->ops, b->ops) &&
           nf_ranges_cover(&a->bytes, &b->bytes) && nf_ranges_cover(&a->calls, &b->calls);
}

static void nf_check_rules(nf_parser_t *ps)
{
    nf_policy_t *p = ps->pol;

    for (int j = 0; j < p->nrules; j++) {
        nf_rule_t *b = &p->rules[j];
        if (b->disabled) {
            p->ndisabled++;
            continue;
        }
        if (b->gamma >= 0 && b->route != NF_ROUTE_TERNARY)
            nf_diag(ps, NF_POLICY_WARNING, b->key_line[K_GAMMA],
                    "gamma has no effect on route %s (only ternary uses it)", nf_route_name(b->route));
        if ((b->route == NF_ROUTE_BINARY || b->route == NF_ROUTE_TERNARY) &&
            ((b->datatypes != 0 && !(b->datatypes & NF_BIT(NF_DT_FLOAT))) ||
             (b->ops != 0 && !(b->ops & NF_BIT(NF_OP_SUM)))))
            nf_diag(ps, NF_POLICY_WARNING, b->line,
                    "rule '%s' never runs %s: low-bit routes take only float sums (its calls go pmpi)",
                    b->name, nf_route_name(b->route));
        for (int i = 0; i < j; i++) {
            nf_rule_t *a = &p->rules[i];
            if (!a->disabled && nf_rule_covers(a, b)) {
                nf_diag(ps, NF_POLICY_WARNING, b->line,
                        "rule '%s' is never used: rule '%s' (line %d) matches every call it matches",
                        b->name, a->name, a->line);
                break;
            }
        }
    }
}

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
    h = nf_hash_u64(nf_hash_u64(h, (uint64_t)r->route), (uint64_t)(int64_t)r->ef);
    memcpy(&gbits, &r->gamma, sizeof(gbits));
    if (r->gamma < 0)
        gbits = UINT64_MAX;             /* every "inherit" hashes alike */
    return nf_hash_u64(nf_hash_u64(h, gbits), (uint64_t)r->segment);
}

static uint64_t nf_hash_policy(const nf_policy_t *p)
{
    uint64_t h = NF_HASH_INIT;

    h = nf_hash_u64(h, NF_POLICY_VERSION);
    for (int i = 0; i < p->nrules; i++)
        if (!p->rules[i].disabled)
            h = nf_hash_rule(nf_hash_u64(h, 1), &p->rules[i]);
    h = nf_hash_u64(h, (uint64_t)p->has_default);
    if (p->has_default)
        h = nf_hash_rule(h, &p->dflt);
    return h != 0 ? h : 1;
}

/* End of input: file-level checks. Returns NF_OK or NF_ERR_PARSE. */
static nf_status_t nf_finish(nf_parser_t *ps)
{
    nf_policy_t *p = ps->pol;

    if (!ps->stop)
        nf_section_end(ps);
    if (ps->errors == 0 && !ps->nonempty)
        nf_diag(ps, NF_POLICY_ERROR, 1,
                "empty policy file (expected a [policy] section with version = %d)", NF_POLICY_VERSION);
    else if (ps->errors == 0 && ps->policy_line == 0)
        nf_diag(ps, NF_POLICY_ERROR, 1,
                "no [policy] section (expected [policy] with version = %d)", NF_POLICY_VERSION);
    else if (ps->errors == 0 && ps->version == 0)
        nf_diag(ps, NF_POLICY_ERROR, ps->policy_line,
                "[policy] has no version (expected version = %d)", NF_POLICY_VERSION);
    if (ps->errors != 0)
        return NF_ERR_PARSE;
    nf_check_rules(ps);
    p->has_default = ps->default_line != 0 && !p->dflt.disabled;
    p->hash = nf_hash_policy(p);
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
    FILE *f;
    char *buf;
    size_t n;
    nf_status_t rc;

    if (path == NULL || out == NULL)
        return NF_ERR_INVALID;
    f = fopen(path, "r");
    if (f == NULL) {
        nf_diag(&ps, NF_POLICY_ERROR, 0, "cannot open policy file: %s", strerror(errno));
        return NF_ERR_IO;
    }
    buf = malloc(NF_POL_MAX_FILE + 1);
    if (buf == NULL) {
        fclose(f);
        return NF_ERR_NO_MEMORY;
    }
    n = fread(buf, 1, NF_POL_MAX_FILE + 1, f);
    if (ferror(f)) {
        nf_diag(&ps, NF_POLICY_ERROR, 0, "cannot read policy file: %s", strerror(errno));
        rc = NF_ERR_IO;
    } else if (n > NF_POL_MAX_FILE) {
        nf_diag(&ps, NF_POLICY_ERROR, 0, "policy file larger than %u bytes", NF_POL_MAX_FILE);
        rc = NF_ERR_PARSE;
    } else {
        rc = nf_policy_parse(buf, n, path, fn, arg, out);
    }
    free(buf);
    fclose(f);
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
    free(p->stats);
    free(p->trace);
    free(p->file);
    free(p);
}

/* ------------------------------------------------------- matching */

static int nf_match_globs(const nf_globs_t *g, const char *s)
{
    if (s == NULL)
        return 0;
    for (int i = 0; i < g->n; i++)
        if (nf_glob_match(g->g[i], s))
            return 1;
    return 0;
}

static int nf_match_ranges(const nf_ranges_t *r, uint64_t v)
{
    for (int i = 0; i < r->n; i++)
        if (r->r[i].lo <= v && v <= r->r[i].hi)
            return 1;
    return 0;
}

/* Out-of-range enums (a caller's "unknown") match no datatype or op test;
 * shifting by them would be undefined. */
static int nf_match_mask(uint64_t mask, unsigned v, unsigned n)
{
    return v < n && (mask & NF_BIT(v)) != 0;
}

static int nf_match_key(const nf_rule_t *r, int k, const nf_policy_query_t *q)
{
    switch (k) {
    case K_REGION: return nf_match_globs(&r->region, q->region);
    case K_COMM: return nf_match_globs(&r->comm, q->comm_name);
    case K_COMM_SIZE: return q->comm_size > 0 && nf_match_ranges(&r->comm_size, (uint64_t)q->comm_size);
    case K_DATATYPE: return nf_match_mask(r->datatypes, (unsigned)q->datatype, NF_DT_N);
    case K_OP: return nf_match_mask(r->ops, (unsigned)q->op, NF_OP_N);
    case K_BYTES: return nf_match_ranges(&r->bytes, q->bytes);
    case K_CALLS: return nf_match_ranges(&r->calls, q->call);
    }
    return 0;
}

static int nf_match_rule(const nf_rule_t *r, const nf_policy_query_t *q)
{
    /* Cheapest tests first: numbers, then names, then patterns. */
    static const unsigned char order[K_NMATCH] = {K_CALLS, K_BYTES, K_COMM_SIZE, K_DATATYPE,
                                                  K_OP, K_COMM, K_REGION};
    for (int i = 0; i < K_NMATCH; i++)
        if ((r->set & (1u << order[i])) && !nf_match_key(r, order[i], q))
            return 0;
    return 1;
}

static void nf_action_from(const nf_policy_t *p, const nf_rule_t *r, int index, const char *name,
                           nf_policy_action_t *out)
{
    out->route = r->route;
    out->ef = r->ef;
    out->gamma = r->gamma;
    out->segment = r->segment;
    out->rule = name;
    out->index = index;
    out->file = p->file;
    out->line = r->line;
}

static void nf_action_builtin(nf_policy_action_t *out)
{
    static const nf_policy_action_t builtin = {
        NF_ROUTE_PMPI, -1, -1.0, NF_POLICY_SEGMENT_INHERIT, "built-in", -1, "", 0};
    *out = builtin;
}

static void nf_action_default(const nf_policy_t *p, nf_policy_action_t *out)
{
    if (p->has_default)
        nf_action_from(p, &p->dflt, -1, "default", out);
    else
        nf_action_builtin(out);
}

void nf_policy_match(const nf_policy_t *p, const nf_policy_query_t *q, nf_policy_action_t *out)
{
    if (p == NULL || q == NULL) {
        nf_action_builtin(out);
        return;
    }
    for (int i = 0; i < p->nrules; i++) {
        const nf_rule_t *r = &p->rules[i];
        if (!r->disabled && nf_match_rule(r, q)) {
            nf_action_from(p, r, i, r->name, out);
            return;
        }
    }
    nf_action_default(p, out);
}

/* ------------------------------------------------------- explain */

typedef struct nf_buf { char *s; size_t len, used; } nf_buf_t;

static void nf_bprintf(nf_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void nf_bprintf(nf_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    size_t room = b->used < b->len ? b->len - b->used : 0;

    va_start(ap, fmt);
    n = vsnprintf(room ? b->s + b->used : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->used += (size_t)n;
}

static void nf_explain_value(nf_buf_t *b, int k, const nf_policy_query_t *q)
{
    const char *s = NULL;

    switch (k) {
    case K_REGION: s = q->region; break;
    case K_COMM: s = q->comm_name; break;
    case K_DATATYPE: s = (unsigned)q->datatype < NF_DT_N ? nf_dtype_name(q->datatype) : NULL; break;
    case K_OP: s = (unsigned)q->op < NF_OP_N ? nf_opkind_name(q->op) : NULL; break;
    case K_COMM_SIZE: nf_bprintf(b, "%d", q->comm_size); return;
    case K_BYTES: nf_bprintf(b, "%" PRIu64, q->bytes); return;
    case K_CALLS: nf_bprintf(b, "%" PRIu64, q->call); return;
    }
    if (s != NULL)
        nf_bprintf(b, "'%s'", s);
    else
        nf_bprintf(b, "(none)");
}

/* "rule NAME (file:line): match|no match: key VALUE in|not in SPEC; ..." */
static int nf_explain_rule(nf_buf_t *b, const nf_policy_t *p, const nf_rule_t *r,
                           const nf_policy_query_t *q)
{
    int ok = nf_match_rule(r, q), any = 0;

    nf_bprintf(b, "rule %s (%s:%d): ", r->name, p->file, r->line);
    if (r->disabled) {
        nf_bprintf(b, "skipped (disabled by an error)\n");
        return 0;
    }
    nf_bprintf(b, "%s", ok ? "match" : "no match");
    for (int k = 0; k < K_NMATCH; k++) {
        if (!(r->set & (1u << k)))
            continue;
        int m = nf_match_key(r, k, q);
        nf_bprintf(b, "%s %s ", any++ ? ";" : ":", nf_key_names[k]);
        nf_explain_value(b, k, q);
        nf_bprintf(b, " %s %s", m ? "in" : "NOT in", r->text[k]);
    }
    if (!any)
        nf_bprintf(b, " (no conditions: matches every call)");
    nf_bprintf(b, "\n");
    return ok;
}

static void nf_explain_action(nf_buf_t *b, const nf_policy_action_t *a)
{
    static const char *const seg[] = {"inherit", "region", "buffer"};

    nf_bprintf(b, "=> route %s (ef %s, gamma ", nf_route_name(a->route),
               a->ef < 0 ? "inherit" : a->ef ? "on" : "off");
    if (a->gamma < 0)
        nf_bprintf(b, "inherit");
    else
        nf_bprintf(b, "%g", a->gamma);
    nf_bprintf(b, ", segment %s) from ", seg[a->segment]);
    if (a->line > 0 && a->index < 0)
        nf_bprintf(b, "[default] (%s:%d)\n", a->file, a->line);
    else if (a->line > 0)
        nf_bprintf(b, "rule %s (%s:%d)\n", a->rule, a->file, a->line);
    else
        nf_bprintf(b, "the built-in default\n");
}

size_t nf_policy_explain(const nf_policy_t *p, const nf_policy_query_t *q,
                         nf_policy_action_t *out, char *buf, size_t len)
{
    nf_buf_t b = {buf, len, 0};
    int i;

    if (len > 0)
        buf[0] = '\0';
    nf_policy_match(p, q, out);
    if (p == NULL || q == NULL) {
        nf_bprintf(&b, "no policy loaded: every call takes pmpi\n");
        nf_explain_action(&b, out);
        return b.used;
    }
    for (i = 0; i < p->nrules; i++)
        if (nf_explain_rule(&b, p, &p->rules[i], q))
            break;
    if (i == p->nrules)
        nf_bprintf(&b, "no rule matched: %s\n",
                   p->has_default ? "[default] applies" : "no [default] section, built-in pmpi");
    nf_explain_action(&b, out);
    return b.used;
}

/* ------------------------------------------------------- accessors */

uint64_t nf_policy_hash(const nf_policy_t *p) { return p != NULL ? p->hash : 0; }
unsigned nf_policy_fields(const nf_policy_t *p)
{
    unsigned f = 0;
    for (int i = 0; p != NULL && i < p->nrules; i++)
        if (!p->rules[i].disabled)
            f |= p->rules[i].set & ((1u << K_NMATCH) - 1);
    return f;
}

int nf_policy_rule_count(const nf_policy_t *p) { return p != NULL ? p->nrules : 0; }
int nf_policy_disabled_count(const nf_policy_t *p) { return p != NULL ? p->ndisabled : 0; }
int nf_policy_cxl_node(const nf_policy_t *p) { return p != NULL ? p->cxl_node : -1; }
const char *nf_policy_stats(const nf_policy_t *p) { return p != NULL ? p->stats : NULL; }
const char *nf_policy_trace(const nf_policy_t *p) { return p != NULL ? p->trace : NULL; }
const char *nf_policy_file(const nf_policy_t *p) { return p != NULL ? p->file : NULL; }
