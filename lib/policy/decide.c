/* SPDX-License-Identifier: BSD-3-Clause */
/* The routing decision (nf_decide.h): the steps of admission that depend
 * only on what a call looks like, shared by admission and nfcoll_replay. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_decide.h"
#include "nf_fallback.h"
#include "nf_kernels.h"
#include "nf_route.h"

int nf_decide_float_sum(nf_dtype_t dt, nf_opkind_t op, uint64_t bytes, uint64_t count)
{
    return (dt == NF_DT_FLOAT || dt == NF_DT_REAL) && op == NF_OP_SUM && count > 0 &&
           bytes == count * sizeof(float);
}

const char *nf_decide_profile_name(const char *name, uint64_t m, char *buf, size_t len)
{
    if (name != NULL)
        return name;
    snprintf(buf, len, "buffer:%llu", (unsigned long long)(m * sizeof(float)));
    return buf;
}

const char *nf_decide_why_name(nf_decide_why_t w)
{
    static const char *const names[NF_WHY_COUNT] = {
        [NF_WHY_RULE] = "rule", [NF_WHY_PROFILE] = "profile", [NF_WHY_NO_ENTRY] = "no-entry",
        [NF_WHY_STALE] = "stale-entry", [NF_WHY_CALIBRATE] = "calibrate"};
    return (unsigned)w < NF_WHY_COUNT ? names[w] : "unknown";
}

/* An entry measured on another element count is ignored: its cosines are
 * those of another tensor (a model changed since calibration), and a
 * region's count is what every rank binds alike. The entry's ef_decay
 * applies where the rule names none (explicit keys win). */
static nf_route_t nf_decide_auto(const nf_decide_ctx_t *x, nf_policy_action_t *a,
                          const char *name, uint64_t m, nf_decide_reason_t *why)
{
    char buf[40];
    nf_decide_reason_t r = {NF_WHY_RULE, NULL, 0};
    nf_route_t route = a->route;
    if (a->route_auto) {
        r.pe = nf_profile_find(x->prof, nf_decide_profile_name(name, m, buf, sizeof(buf)));
        r.why = r.pe == NULL ? NF_WHY_NO_ENTRY : r.pe->elements != m ? NF_WHY_STALE
                                                                     : NF_WHY_PROFILE;
        route = r.why == NF_WHY_PROFILE ? r.pe->route : NF_ROUTE_FP32;
        /* not in a calibration run: it measures afresh, not at an older
         * profile's decays */
        if (r.why == NF_WHY_PROFILE && !x->calibrate && a->ef_decay < 0 && r.pe->ef_decay >= 0)
            a->ef_decay = r.pe->ef_decay, r.pe_decay = 1;
    }
    if (why != NULL)
        *why = r;
    return route;
}

static void nf_decide_query(const nf_decide_call_t *c, nf_policy_query_t *q)
{
    *q = (nf_policy_query_t){.region = NULL, .comm_name = c->comm_name,
                             .comm_size = c->comm_size, .datatype = c->dt, .op = c->op,
                             .bytes = c->bytes, .call = c->call};
}

static void nf_decide_whole(const nf_decide_ctx_t *x, const nf_decide_call_t *c,
                     nf_policy_action_t *out)
{
    nf_policy_query_t q;
    nf_decide_query(c, &q);
    nf_policy_match(x->pol, &q, out);
}

static nf_status_t nf_decide_grow(nf_decide_t *d, size_t n)
{
    if (n <= d->cap)
        return NF_OK;
    size_t cap = n > 2 * d->cap ? n : 2 * d->cap;
    nf_decide_seg_t *v = realloc(d->seg, cap * sizeof(*v));
    if (v == NULL)
        return NF_ERR_NO_MEMORY;
    d->seg = v, d->cap = cap;
    return NF_OK;
}

static void nf_decide_add(nf_decide_t *d, uint64_t off, uint64_t m, const char *name)
{
    nf_decide_seg_t *g = &d->seg[d->nseg++];
    memset(g, 0, sizeof(*g));
    g->off = off, g->m = m, g->name = name;
}

/* A part that is not inside the buffer, or overlaps the one before
 * (misaligned, a layout for another model), is left out: its floats are
 * a gap's. */
static void nf_decide_part(nf_decide_t *d, uint64_t *at, uint64_t off, uint64_t m,
                           const char *name, uint64_t count)
{
    if (off < *at || m == 0 || off + m > count)
        return;
    if (off > *at)
        nf_decide_add(d, *at, off - *at, NULL);
    nf_decide_add(d, off, m, name);
    *at = off + m;
}

/* The segments: parts, gaps between them (none when nothing cuts the
 * call). NF_OK or NF_ERR_NO_MEMORY. */
static nf_status_t nf_decide_segments(const nf_decide_ctx_t *x, const nf_decide_call_t *c,
                                      nf_decide_t *d)
{
    const nf_layout_entry_t *e = NULL;
    size_t k = c->nparts;
    uint64_t at = 0;
    d->nseg = 0;
    if (k == 0 && (k = nf_layout_find(x->layout, c->bytes, &e)) == 0)
        return NF_OK;
    if (nf_decide_grow(d, 2 * k + 1) != NF_OK)
        return NF_ERR_NO_MEMORY;
    for (size_t i = 0; i < k; i++) {
        if (e == NULL)
            nf_decide_part(d, &at, c->parts[i].off, c->parts[i].m, c->parts[i].name, c->count);
        else
            nf_decide_part(d, &at, e[i].off, e[i].count, e[i].name, c->count);
    }
    if (at < c->count)
        nf_decide_add(d, at, c->count - at, NULL);
    return NF_OK;
}

static nf_status_t nf_decide_cut(const nf_decide_ctx_t *x, const nf_decide_call_t *c, nf_decide_t *d)
{
    nf_policy_query_t q;
    int any = 0;
    d->cut = NF_CUT_NONE, d->nseg = 0;
    if (!nf_decide_float_sum(c->dt, c->op, c->bytes, c->count) ||
        d->whole.segment == NF_POLICY_SEGMENT_BUFFER)
        return NF_OK;
    if (nf_decide_segments(x, c, d) != NF_OK) {
        d->nseg = 0;
        return NF_ERR_NO_MEMORY;
    }
    if (d->nseg == 0)
        return NF_OK;
    nf_decide_query(c, &q);
    for (size_t s = 0; s < d->nseg; s++) { /* each segment, as a call of its own */
        nf_decide_seg_t *g = &d->seg[s];
        q.region = g->name;
        q.bytes = g->m * sizeof(float);
        nf_policy_match(x->pol, &q, &g->act);
        g->route = nf_decide_auto(x, &g->act, g->name, g->m, &g->why);
        if (g->why.why == NF_WHY_STALE && d->stale == NULL) /* the first, with its own size */
            d->stale = g->why.pe, d->stale_m = g->m;
        if (x->calibrate)
            g->why = (nf_decide_reason_t){NF_WHY_CALIBRATE, NULL, 0};
        any |= g->route != NF_ROUTE_PMPI;
    }
    d->cut = any ? NF_CUT_FUSED : NF_CUT_ALL_PMPI;
    return NF_OK;
}

static nf_route_t nf_decide_route(nf_route_t whole, nf_decide_cut_t cut, int calibrate, int comm_ok)
{
    nf_route_t want = calibrate || cut == NF_CUT_FUSED   ? NF_ROUTE_FP32
                      : cut == NF_CUT_ALL_PMPI ? NF_ROUTE_PMPI
                                               : whole;
    return comm_ok ? want : NF_ROUTE_PMPI;
}

nf_route_t nf_decide_want(const nf_decide_t *d, int comm_ok)
{
    return nf_decide_route(d->whole.route, d->cut, d->calibrate, comm_ok);
}

nf_status_t nf_decide(const nf_decide_ctx_t *x, const nf_decide_call_t *c, int comm_ok,
                      nf_decide_t *d)
{
    nf_status_t rc;
    d->stale = NULL, d->stale_m = 0;
    nf_decide_whole(x, c, &d->whole);
    d->calibrate = x->calibrate && nf_decide_float_sum(c->dt, c->op, c->bytes, c->count);
    d->why = (nf_decide_reason_t){d->calibrate ? NF_WHY_CALIBRATE : NF_WHY_RULE, NULL, 0};
    rc = nf_decide_cut(x, c, d);
    d->route = nf_decide_want(d, comm_ok);
    if (d->route != NF_ROUTE_PMPI && d->cut != NF_CUT_FUSED && !d->calibrate) {
        d->route = nf_decide_auto(x, &d->whole, NULL, c->count, &d->why);
        if (d->why.why == NF_WHY_STALE && d->stale == NULL)
            d->stale = d->why.pe, d->stale_m = c->count;
    }
    return rc;
}

nf_route_t nf_decide_runs(const nf_decide_ctx_t *x, const nf_decide_call_t *c, int seg,
                          nf_route_t route)
{
    nf_call_facts_t f = {.seg = seg, .float_dt = c->dt == NF_DT_FLOAT || c->dt == NF_DT_REAL,
                         .sum = c->op == NF_OP_SUM, .empty = c->count == 0,
                         .lanes_fit = nf_count_planes((unsigned)c->comm_size) <= x->count_bits};
    int why;
    f.float_dt = f.float_dt && c->bytes == c->count * sizeof(float);
    if (seg && x->calibrate) /* a calibration run reduces every segment exactly */
        route = NF_ROUTE_FP32;
    return nf_fallback_route(route, &f, &why);
}

void nf_decide_free(nf_decide_t *d)
{
    free(d->seg);
    d->seg = NULL, d->nseg = d->cap = 0;
}

double nf_decide_shadow_decay(const nf_settings_t *s)
{
    return s->ef_decay_set ? s->ef_decay : NF_PROFILE_DECAY_CUT;
}

void nf_decide_params(const nf_policy_action_t *a, const nf_decide_reason_t *r, nf_route_t route,
                      const nf_settings_t *s, nf_decide_params_t *p)
{
    int calib = r->why == NF_WHY_CALIBRATE; /* the low-bit shadows */
    int lowbit = calib || nf_route_lowbit(route);
    int ef = a->ef >= 0 && !calib ? a->ef : s->ef; /* the shadows run the settings' */
    p->ef_decay = NAN, p->decay_by = NULL;
    if (lowbit && !ef) {
        p->decay_by = "ef-off";
    } else if (lowbit && a->ef_decay >= 0.0) {
        p->ef_decay = a->ef_decay;
        p->decay_by = r->pe_decay ? "profile" : "rule";
    } else if (lowbit) {
        p->ef_decay = calib ? nf_decide_shadow_decay(s) : s->ef_decay;
        p->decay_by = calib && !s->ef_decay_set ? "calibrate" : "settings";
    }
    p->scale_block = -1, p->block_by = NULL;
    if (calib || route == NF_ROUTE_BINARY) {
        p->scale_block = a->scale_block >= 0 ? a->scale_block : (long)s->scale_block;
        p->block_by = a->scale_block >= 0 ? "rule" : "settings";
    }
    p->block = -1, p->int_block_by = NULL;
    if (calib || nf_route_intk(route) != 0) { /* the rule's, else the default: no setting */
        p->block = a->block > 0 ? a->block : (long)NF_INT_BLOCK_DEFAULT;
        p->int_block_by = a->block > 0 ? "rule" : "default";
    }
}
