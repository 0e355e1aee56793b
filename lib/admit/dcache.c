/* SPDX-License-Identifier: BSD-3-Clause */
/* The decision cache (nf_dcache.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_dcache.h"
#include "nf_util.h"

static uint64_t nf_dkey_hash(const nf_dkey_t *k)
{
    uint64_t h = nf_hash_u64((uint64_t)(uintptr_t)k->x, k->size);
    return nf_hash_u64(h, ((uint64_t)k->gen << 24) | ((uint64_t)k->dt << 16) |
                              ((uint64_t)k->op << 8) | (uint64_t)k->fsum);
}

static int nf_dkey_eq(const nf_dkey_t *a, const nf_dkey_t *b)
{
    return a->x == b->x && a->size == b->size && a->gen == b->gen && a->dt == b->dt &&
           a->op == b->op && a->fsum == b->fsum;
}

static void nf_drec_free(nf_drec_t *r)
{
    nf_decide_free(&r->d);
    nf_plan_free(&r->plan);
    memset(r, 0, sizeof(*r));
}

unsigned nf_dcache_set_of(const nf_dkey_t *k)
{
    return (unsigned)((nf_dkey_hash(k) >> 32) & (NF_DCACHE_SETS - 1));
}

static nf_drec_t *nf_dcache_set(nf_dcache_t *c, const nf_dkey_t *k)
{
    return &c->rec[nf_dcache_set_of(k) * NF_DCACHE_WAYS];
}

nf_drec_t *nf_dcache_find(nf_dcache_t *c, const nf_dkey_t *k)
{
    nf_drec_t *set = nf_dcache_set(c, k);
    for (unsigned w = 0; w < NF_DCACHE_WAYS; w++)
        if (set[w].fill != 0 && nf_dkey_eq(&set[w].key, k))
            return &set[w];
    return NULL;
}

nf_drec_t *nf_dcache_take(nf_dcache_t *c, const nf_dkey_t *k, int keep)
{
    nf_drec_t *v = &c->scratch;
    if (keep) {
        nf_drec_t *set = nf_dcache_set(c, k);
        v = &set[0];
        for (unsigned w = 1; w < NF_DCACHE_WAYS && v->fill != 0; w++)
            if (set[w].fill < v->fill)
                v = &set[w];
        nf_drec_free(v);
    }
    v->key = *k, v->fill = ++c->fills, v->plan.n = 0;
    return v;
}

/* Whether r holds memory that grows with its call's segments. */
static int nf_drec_big(const nf_drec_t *r)
{
    return r->plan.cap > 0 || r->plan.parts_cap > 0 || r->d.cap > 0;
}

void nf_dcache_bound(nf_dcache_t *c, const nf_drec_t *r)
{
    unsigned n = 0;
    nf_drec_t *oldest = NULL;
    if (r == &c->scratch || !nf_drec_big(r))
        return;
    for (unsigned i = 0; i < NF_DCACHE_SETS * NF_DCACHE_WAYS; i++) {
        nf_drec_t *o = &c->rec[i];
        if (o->fill == 0 || !nf_drec_big(o) || o == r)
            continue;
        n++;
        if (oldest == NULL || o->fill < oldest->fill)
            oldest = o;
    }
    if (n >= NF_DCACHE_CUTS)
        nf_drec_free(oldest);
}

nf_drec_t *nf_dcache_drop(nf_dcache_t *c, nf_drec_t *r)
{
    if (r == &c->scratch)
        return r;
    nf_drec_t keep = *r;
    memset(r, 0, sizeof(*r)); /* its memory moves with it */
    nf_drec_free(&c->scratch);
    c->scratch = keep;
    return &c->scratch;
}

void nf_dcache_free(nf_dcache_t *c)
{
    for (unsigned i = 0; i < NF_DCACHE_SETS * NF_DCACHE_WAYS; i++)
        nf_drec_free(&c->rec[i]);
    nf_drec_free(&c->scratch);
}
