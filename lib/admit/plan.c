/* Cutting fused calls into segments (nf_plan.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_plan.h"

static int nf_plan_grow(nf_plan_t *p, size_t n)
{
    if (n <= p->cap)
        return 0;
    size_t cap = n > 2 * p->cap ? n : 2 * p->cap;
    nf_seg_t *seg = realloc(p->seg, cap * sizeof(*seg));
    if (seg != NULL)
        p->seg = seg;
    nf_seg_t *tmpl = realloc(p->tmpl, cap * sizeof(*tmpl));
    if (tmpl != NULL)
        p->tmpl = tmpl;
    nf_policy_action_t *act = realloc(p->act, cap * sizeof(*act));
    if (act != NULL)
        p->act = act;
    if (seg == NULL || tmpl == NULL || act == NULL)
        return -1;
    p->cap = cap;
    return 0;
}

static void nf_plan_add(nf_plan_t *p, size_t off, size_t m, const nf_region_part_t *part)
{
    nf_seg_t *g = &p->seg[p->n];
    memset(g, 0, sizeof(*g));
    g->off = off, g->m = m;
    if (part != NULL) /* the interned name: no copy */
        g->name = part->name, g->id = part->id, g->tag = part->hash;
    p->n++;
}

long nf_plan_cut_layout(nf_plan_t *p, size_t m, const nf_region_part_t *parts, size_t nparts)
{
    size_t at = 0;
    p->n = 0;
    if (nparts == 0)
        return 0;
    if (nf_plan_grow(p, 2 * nparts + 1) != 0)
        return -1;
    for (size_t i = 0; i < nparts; i++) {
        const nf_region_part_t *r = &parts[i];
        if (r->off < at || r->m == 0 || r->off + r->m > m)
            continue; /* not a part of this buffer (misaligned, overlapping) */
        if (r->off > at)
            nf_plan_add(p, at, r->off - at, NULL);
        nf_plan_add(p, r->off, r->m, r);
        at = r->off + r->m;
    }
    if (at < m)
        nf_plan_add(p, at, m - at, NULL);
    return (long)p->n;
}

long nf_plan_cut(nf_plan_t *p, const float *x, size_t m)
{
    size_t n = nf_region_parts(x, m, p->parts, p->parts_cap);
    if (n > p->parts_cap) {
        nf_region_part_t *v = realloc(p->parts, n * sizeof(*v));
        if (v == NULL)
            return -1;
        p->parts = v, p->parts_cap = n;
        n = nf_region_parts(x, m, p->parts, p->parts_cap);
        if (n > p->parts_cap) /* bound meanwhile: the next call sees it */
            n = p->parts_cap;
    }
    return nf_plan_cut_layout(p, m, p->parts, n);
}

void nf_plan_match(nf_plan_t *p, const nf_policy_t *pol, const nf_policy_query_t *q)
{
    for (size_t s = 0; s < p->n; s++) {
        nf_policy_query_t sq = *q;
        nf_seg_t *g = &p->seg[s];
        sq.region = g->name;
        sq.bytes = (uint64_t)g->m * sizeof(float);
        nf_policy_match(pol, &sq, &p->act[s]);
        g->route = p->act[s].route;
        g->ef = p->act[s].ef;
        g->gamma = p->act[s].gamma;
        g->ef_decay = p->act[s].ef_decay;
    }
}

int nf_plan_all_pmpi(const nf_plan_t *p)
{
    for (size_t s = 0; s < p->n; s++)
        if (p->seg[s].route != NF_ROUTE_PMPI)
            return 0;
    return 1;
}

void nf_plan_keep(nf_plan_t *p, const nf_plan_key_t *key, int result)
{
    p->key = *key;
    p->result = result;
    p->kept = 1;
    if (p->n > 0)
        memcpy(p->tmpl, p->seg, p->n * sizeof(*p->seg));
}

int nf_plan_cached(nf_plan_t *p, const nf_plan_key_t *key, int *result)
{
    if (!p->kept || p->key.x != key->x || p->key.m != key->m || p->key.gen != key->gen ||
        p->key.entry != key->entry)
        return 0;
    /* The run, health and calibration write into the segments: start
     * each call from the matched ones. */
    if (p->n > 0)
        memcpy(p->seg, p->tmpl, p->n * sizeof(*p->seg));
    *result = p->result;
    return 1;
}

void nf_plan_forget(nf_plan_t *p) { p->kept = 0; }

void nf_plan_free(nf_plan_t *p)
{
    free(p->seg);
    free(p->tmpl);
    free(p->act);
    free(p->parts);
    memset(p, 0, sizeof(*p));
}
