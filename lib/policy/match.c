/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Policy matcher: the per-call hot path. No allocation, system call, I/O,
 * locale or string work beyond the glob patterns a rule names; a loaded
 * policy is only read, so threads may match concurrently.
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nf_policy_int.h"

const char *const nf_pol_key_names[K_NKEYS] = {
    "region", "comm", "comm_size", "datatype", "op", "bytes", "calls",
    "route", "ef", "ef_decay", "gamma", "segment", "warmup",
    "scale_block", "block",
};

_Static_assert(NF_POLICY_F_REGION == 1u << K_REGION && NF_POLICY_F_CALLS == 1u << K_CALLS &&
               NF_POLICY_F_BYTES == 1u << K_BYTES && NF_POLICY_F_OP == 1u << K_OP,
               "NF_POLICY_F_* follow nf_key_t");
_Static_assert(NF_DT_N <= 64 && NF_OP_N <= 64, "a rule holds datatypes and ops as 64-bit masks");

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

/* Linear in backtracking (one pending '*'), so a hostile pattern cannot
 * blow up. */
int nf_pol_glob_match(const char *p, const char *s)
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

int nf_pol_glob_valid(const char *p)
{
    for (; *p != '\0'; p++) {
        const char *end;
        if (*p == '\\' && p[1] != '\0') {
            p++;
        } else if (*p == '[') {
            nf_glob_class(p + 1, 0, &end);
            if (end == NULL)
                return 0;
            p = end - 1;
        }
    }
    return 1;
}

/* ------------------------------------------------------------- matching */

static int nf_match_globs(const nf_globs_t *g, const char *s)
{
    if (s == NULL)
        return 0;
    for (int i = 0; i < g->n; i++)
        if (nf_pol_glob_match(g->g[i], s))
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

int nf_pol_match_key(const nf_rule_t *r, int k, const nf_policy_query_t *q)
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

int nf_pol_match_rule(const nf_rule_t *r, const nf_policy_query_t *q)
{
    /* Cheapest tests first: numbers, then names, then patterns. */
    static const unsigned char order[K_NMATCH] = {K_CALLS, K_BYTES, K_COMM_SIZE, K_DATATYPE,
                                                  K_OP, K_COMM, K_REGION};
    for (int i = 0; i < K_NMATCH; i++)
        if ((r->set & (1u << order[i])) && !nf_pol_match_key(r, order[i], q))
            return 0;
    return 1;
}

static void nf_action_from(const nf_policy_t *p, const nf_rule_t *r, int index, const char *name,
                           nf_policy_action_t *out)
{
    out->route = r->route;
    out->route_auto = r->route_auto;
    out->ef = r->ef;
    out->ef_decay = r->ef_decay;
    out->scale_block = r->scale_block;
    out->block = r->block;
    out->gamma = r->gamma;
    out->segment = r->segment;
    out->warmup = r->warmup;
    out->rule = name;
    out->index = index;
    out->file = p->file;
    out->line = r->line;
}

static void nf_action_builtin(nf_policy_action_t *out)
{
    static const nf_policy_action_t builtin = {
        .route = NF_ROUTE_PMPI, .route_auto = 0, .ef = -1, .ef_decay = -1.0, .gamma = -1.0,
        .segment = NF_POLICY_SEGMENT_INHERIT, .warmup = 0, .rule = "built-in", .index = -1,
        .file = "", .line = 0, .scale_block = -1, .block = 0};
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
        if (!r->disabled && nf_pol_match_rule(r, q)) {
            nf_action_from(p, r, i, r->name, out);
            return;
        }
    }
    nf_action_default(p, out);
}

unsigned nf_policy_fields(const nf_policy_t *p)
{
    unsigned f = 0;
    for (int i = 0; p != NULL && i < p->nrules; i++)
        if (!p->rules[i].disabled)
            f |= p->rules[i].set & ((1u << K_NMATCH) - 1);
    return f;
}

/* ------------------------------------------------------- decision cache keys */

/* Where `v in [lo, hi]` can flip: at lo and at hi + 1 (none at 0 or past
 * UINT64_MAX). Returns how many were written. */
static unsigned nf_range_cuts(const nf_range_t *r, uint64_t *out)
{
    unsigned n = 0;

    if (r->lo > 0)
        out[n++] = r->lo;
    if (r->hi < UINT64_MAX)
        out[n++] = r->hi + 1;
    return n;
}

static int nf_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Every enabled rule's bytes cut points, sorted, duplicates dropped. */
static nf_status_t nf_index_bounds(nf_policy_t *p)
{
    size_t cap = 0, n = 0, u = 0;

    for (int i = 0; i < p->nrules; i++)
        if (!p->rules[i].disabled)
            cap += 2 * (size_t)p->rules[i].bytes.n;
    if (cap == 0)
        return NF_OK;
    p->bounds = malloc(cap * sizeof(*p->bounds));
    if (p->bounds == NULL)
        return NF_ERR_NO_MEMORY;
    for (int i = 0; i < p->nrules; i++)
        for (int j = 0; !p->rules[i].disabled && j < p->rules[i].bytes.n; j++)
            n += nf_range_cuts(&p->rules[i].bytes.r[j], p->bounds + n);
    qsort(p->bounds, n, sizeof(*p->bounds), nf_u64_cmp);
    for (size_t i = 0; i < n; i++)
        if (u == 0 || p->bounds[i] != p->bounds[u - 1])
            p->bounds[u++] = p->bounds[i];
    p->nbounds = (unsigned)u;
    return NF_OK;
}

/* From where on a calls test answers alike: past the last closed range's
 * end, or from an open range's start (it then holds for good). */
static uint64_t nf_ranges_settled(const nf_ranges_t *r)
{
    uint64_t s = 0;

    for (int i = 0; i < r->n; i++) {
        uint64_t end = r->r[i].hi == UINT64_MAX ? r->r[i].lo : r->r[i].hi + 1;
        if (end > s)
            s = end;
    }
    return s;
}

nf_status_t nf_pol_index(nf_policy_t *p)
{
    p->calls_settled = 0;
    for (int i = 0; i < p->nrules; i++) {
        uint64_t s = p->rules[i].disabled ? 0 : nf_ranges_settled(&p->rules[i].calls);
        if (s > p->calls_settled)
            p->calls_settled = s;
    }
    return nf_index_bounds(p);
}

/* Bounds at or below bytes: a binary search, no allocation. */
unsigned nf_policy_size_class(const nf_policy_t *p, uint64_t bytes)
{
    unsigned lo = 0, hi = p != NULL ? p->nbounds : 0;

    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        if (p->bounds[mid] <= bytes)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t nf_policy_size_class_low(const nf_policy_t *p, unsigned cls)
{
    if (p == NULL || cls == 0 || cls > p->nbounds)
        return 0;
    return p->bounds[cls - 1];
}

uint64_t nf_policy_calls_settled(const nf_policy_t *p)
{
    return p != NULL ? p->calls_settled : 0;
}
