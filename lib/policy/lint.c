/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Policy linter and explainer: what a loaded policy does with its rules,
 * said in words. Warnings about rules that can never apply (at load), and
 * nf_policy_explain's account of one decision (for nfcoll_policy). Neither
 * is on the hot path.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nf_policy_int.h"
#include "nf_route.h"

/* ------------------------------------------------------- shadowed rules */

static int nf_glob_has_meta(const char *p)
{
    return strpbrk(p, "*?[\\") != NULL;
}

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
                 (!nf_glob_has_meta(b->g[i]) && nf_pol_glob_match(a->g[j], b->g[i]));
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

typedef struct nf_lint { const nf_policy_t *p; nf_policy_diag_fn fn; void *arg; } nf_lint_t;

static void nf_lint_warn(const nf_lint_t *l, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void nf_lint_warn(const nf_lint_t *l, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    nf_policy_diag_t d = {NF_POLICY_WARNING, l->p->file, line, msg};

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->fn(&d, l->arg);
}

/* The first enabled rule before rules[j] that matches every call it does. */
static const nf_rule_t *nf_shadowing_rule(const nf_policy_t *p, int j)
{
    for (int i = 0; i < j; i++)
        if (!p->rules[i].disabled && nf_rule_covers(&p->rules[i], &p->rules[j]))
            return &p->rules[i];
    return NULL;
}

/* Rules and [default] alike: without a profile, auto is fp32 everywhere. */
static void nf_lint_auto(const nf_lint_t *l, const nf_rule_t *r)
{
    if (r->route_auto && l->p->profile == NULL)
        nf_lint_warn(l, r->key_line[K_ROUTE], "route = auto without a profile: every segment takes fp32");
}

/* "binary, ternary and int4": the names of the table's routes that have
 * a property (nf_route_residual, nf_route_lowbit), for a message. */
static const char *nf_lint_routes(int (*has)(nf_route_t), char *buf, size_t len)
{
    int n = 0, k = 0;
    size_t o = 0;

    buf[0] = '\0';
    for (int r = 0; r < NF_ROUTE_COUNT; r++)
        n += has((nf_route_t)r) != 0;
    for (int r = 0; r < NF_ROUTE_COUNT && o < len; r++)
        if (has((nf_route_t)r))
            o += (size_t)snprintf(buf + o, len - o, "%s%s", k++ == 0 ? "" : k == n ? " and " : ", ",
                                  nf_route_name((nf_route_t)r));
    return buf;
}

/* Rules and [default] alike: ef_decay scales a residual, which only the
 * routes the table says keep one keep, and only with error feedback on. */
static void nf_lint_decay(const nf_lint_t *l, const nf_rule_t *r)
{
    char names[128];

    if (r->ef_decay < 0)
        return;
    if (r->ef == 0)
        nf_lint_warn(l, r->key_line[K_EF_DECAY], "ef_decay has no effect with ef = off");
    else if (!nf_route_residual(r->route) && !r->route_auto)
        nf_lint_warn(l, r->key_line[K_EF_DECAY], "ef_decay has no effect on route %s (only %s keep a residual)",
                     nf_route_name(r->route), nf_lint_routes(nf_route_residual, names, sizeof(names)));
}

/* Rules and [default] alike: a warm-up delays a low-bit route. */
static void nf_lint_warmup(const nf_lint_t *l, const nf_rule_t *r)
{
    char names[128];

    if (r->warmup > 0 && !nf_route_lowbit(r->route) && !r->route_auto)
        nf_lint_warn(l, r->key_line[K_WARMUP], "warmup has no effect on route %s (only %s warm up on fp32)",
                     nf_route_name(r->route), nf_lint_routes(nf_route_lowbit, names, sizeof(names)));
}

/* Rules and [default] alike: only binary has scales that scale_block cuts
 * into blocks, and only the integer routes have the scale block `block`
 * sets (auto may pick any of them). */
static void nf_lint_block(const nf_lint_t *l, const nf_rule_t *r)
{
    if (r->scale_block >= 0 && r->route != NF_ROUTE_BINARY && !r->route_auto)
        nf_lint_warn(l, r->key_line[K_SCALE_BLOCK], nf_route_intk(r->route)
                         ? "scale_block has no effect on route %s (an integer route's scale block is set by block)"
                         : "scale_block has no effect on route %s (only binary has one scale per block)",
                     nf_route_name(r->route));
    if (r->block > 0 && !nf_route_intk(r->route) && !r->route_auto)
        nf_lint_warn(l, r->key_line[K_BLOCK], "block has no effect on route %s (only the integer routes have one)",
                     nf_route_name(r->route));
}

static void nf_lint_rule(const nf_lint_t *l, int j)
{
    const nf_rule_t *b = &l->p->rules[j], *a;

    nf_lint_auto(l, b);
    /* auto may pick ternary, where gamma applies */
    if (b->gamma >= 0 && b->route != NF_ROUTE_TERNARY && !b->route_auto)
        nf_lint_warn(l, b->key_line[K_GAMMA], "gamma has no effect on route %s (only ternary uses it)",
                     nf_route_name(b->route));
    nf_lint_decay(l, b);
    nf_lint_warmup(l, b);
    nf_lint_block(l, b);
    if (nf_routes[b->route].float_only && b->route != NF_ROUTE_FP32 &&
        ((b->datatypes != 0 && !(b->datatypes & (NF_BIT(NF_DT_FLOAT) | NF_BIT(NF_DT_REAL)))) ||
         (b->ops != 0 && !(b->ops & NF_BIT(NF_OP_SUM)))))
        nf_lint_warn(l, b->line,
                     "rule '%s' never runs %s: low-bit and bf16 routes take only float sums "
                     "(its calls go pmpi)",
                     b->name, nf_route_name(b->route));
    a = nf_shadowing_rule(l->p, j);
    if (a != NULL)
        nf_lint_warn(l, b->line, "rule '%s' is never used: rule '%s' (line %d) matches every call it matches",
                     b->name, a->name, a->line);
}

void nf_pol_lint(const nf_policy_t *p, nf_policy_diag_fn fn, void *arg)
{
    nf_lint_t l = {p, fn, arg};

    for (int j = 0; j < p->nrules; j++)
        if (!p->rules[j].disabled)
            nf_lint_rule(&l, j);
    if (!p->dflt.disabled) {
        nf_lint_auto(&l, &p->dflt);
        nf_lint_decay(&l, &p->dflt);
        nf_lint_warmup(&l, &p->dflt);
        nf_lint_block(&l, &p->dflt);
    }
}

/* ------------------------------------------------------------- explain */

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
    int ok = nf_pol_match_rule(r, q), any = 0;

    nf_bprintf(b, "rule %s (%s:%d): ", r->name, p->file, r->line);
    if (r->disabled) {
        nf_bprintf(b, "skipped (disabled by an error)\n");
        return 0;
    }
    nf_bprintf(b, "%s", ok ? "match" : "no match");
    for (int k = 0; k < K_NMATCH; k++) {
        if (!(r->set & (1u << k)))
            continue;
        int m = nf_pol_match_key(r, k, q);
        nf_bprintf(b, "%s %s ", any++ ? ";" : ":", nf_pol_key_names[k]);
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

    nf_bprintf(b, "=> route %s (ef %s, ef_decay ", a->route_auto ? "auto" : nf_route_name(a->route),
               a->ef < 0 ? "inherit" : a->ef ? "on" : "off");
    if (a->ef_decay < 0)
        nf_bprintf(b, "inherit, gamma ");
    else
        nf_bprintf(b, "%g, gamma ", a->ef_decay);
    if (a->gamma < 0)
        nf_bprintf(b, "inherit");
    else
        nf_bprintf(b, "%g", a->gamma);
    nf_bprintf(b, ", segment %s", seg[a->segment]);
    if (a->warmup > 0)
        nf_bprintf(b, ", warmup %llu", (unsigned long long)a->warmup);
    if (a->scale_block >= 0) /* version 3: shown when set */
        nf_bprintf(b, ", scale_block %ld", a->scale_block);
    if (a->block > 0) /* version 4: likewise */
        nf_bprintf(b, ", block %ld", a->block);
    nf_bprintf(b, ") from ");
    if (a->line > 0 && a->index < 0)
        nf_bprintf(b, "[default] (%s:%d)\n", a->file, a->line);
    else if (a->line > 0)
        nf_bprintf(b, "rule %s (%s:%d)\n", a->rule, a->file, a->line);
    else
        nf_bprintf(b, "the built-in default\n");
    if (a->route_auto)
        nf_bprintf(b, "   auto: each segment takes the profile's route; %s where the profile has none\n",
                   nf_route_name(a->route));
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
