/* SPDX-License-Identifier: BSD-3-Clause */
/* Cutting fused calls into segments (nf_plan.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_intern.h"
#include "nf_plan.h"

static nf_status_t nf_plan_grow(nf_plan_t *p, size_t n)
{
    if (n <= p->cap)
        return NF_OK;
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
    nf_seg_note_t *note = realloc(p->note, cap * sizeof(*note));
    if (note != NULL)
        p->note = note;
    if (seg == NULL || tmpl == NULL || act == NULL || note == NULL)
        return NF_ERR_NO_MEMORY;
    p->cap = cap;
    return NF_OK;
}

long nf_plan_parts(nf_plan_t *p, const float *x, size_t m)
{
    size_t n = nf_region_parts(x, m, p->parts, p->parts_cap);
    if (n > p->parts_cap) {
        nf_region_part_t *v = realloc(p->parts, n * sizeof(*v));
        if (v == NULL)
            return NF_ERR_NO_MEMORY;
        p->parts = v;
        nf_decide_part_t *w = realloc(p->dparts, n * sizeof(*w));
        if (w == NULL)
            return NF_ERR_NO_MEMORY;
        p->dparts = w, p->parts_cap = n;
        n = nf_region_parts(x, m, p->parts, p->parts_cap);
        if (n > p->parts_cap) /* bound meanwhile: the next call sees it */
            n = p->parts_cap;
    }
    for (size_t i = 0; i < n; i++)
        p->dparts[i] = (nf_decide_part_t){p->parts[i].off, p->parts[i].m, p->parts[i].name};
    return (long)n;
}

long nf_plan_take(nf_plan_t *p, const nf_decide_t *d, size_t nparts)
{
    size_t j = 0;
    p->n = 0;
    if (nf_plan_grow(p, d->nseg) != NF_OK)
        return NF_ERR_NO_MEMORY;
    for (size_t i = 0; i < d->nseg; i++) {
        const nf_decide_seg_t *t = &d->seg[i];
        nf_seg_t *g = &p->tmpl[i];
        memset(g, 0, sizeof(*g));
        g->off = (size_t)t->off, g->m = (size_t)t->m;
        g->route = t->route, g->ef = t->act.ef, g->gamma = t->act.gamma;
        g->ef_decay = t->act.ef_decay, g->fallback = NF_FALLBACK_NONE;
        g->scale_block = t->act.scale_block, g->block = t->act.block;
        p->act[i] = t->act;
        p->note[i].why = t->why;
        if (t->name == NULL)
            continue;
        while (j < nparts && (p->parts[j].off != g->off || p->parts[j].name != t->name))
            j++;
        if (j < nparts) { /* a bound region: its interned name, no copy */
            g->name = p->parts[j].name, g->id = p->parts[j].id, g->tag = p->parts[j].hash;
            continue;
        }
        uint32_t id = nf_intern(t->name); /* a layout entry */
        if (id == 0)
            return NF_ERR_NO_MEMORY;
        g->name = nf_intern_name(id), g->id = id, g->tag = nf_intern_hash(id);
    }
    p->n = d->nseg;
    return (long)p->n;
}

void nf_plan_start(nf_plan_t *p)
{
    if (p->n > 0)
        memcpy(p->seg, p->tmpl, p->n * sizeof(*p->seg));
}

void nf_plan_free(nf_plan_t *p)
{
    free(p->seg);
    free(p->tmpl);
    free(p->act);
    free(p->note);
    free(p->parts);
    free(p->dparts);
    memset(p, 0, sizeof(*p));
}
