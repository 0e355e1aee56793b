/* Error-feedback residuals, one per (communicator, buffer address, count).
 * Placed like the aggregation buffer (they are what CXL memory is for).
 * Lookups are linear with a last-hit shortcut: a training step touches a
 * handful of gradient buckets in the same order every step. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "nf_core.h"
#include "nf_placement.h"

static nf_status_t nf_residual_alloc(nf_residual_t *r, const void *key, size_t count)
{
    size_t bytes = count * sizeof(float);
    float *e = nf_place_alloc(bytes, &r->resident_frac);
    if (e == NULL)
        return NF_ERR_NO_MEMORY;
    r->key = key;
    r->count = count;
    r->e = e;
    r->bytes = bytes;
    return NF_OK;
}

static nf_residual_t *nf_residual_slot(nf_residual_table_t *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        nf_residual_t *v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    return &t->v[t->n];
}

float *nf_residual_get(nf_residual_table_t *t, const void *key, size_t count)
{
    if (t->last < t->n && t->v[t->last].key == key && t->v[t->last].count == count)
        return t->v[t->last].e;
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_t *r = &t->v[i];
        if (r->key != key)
            continue;
        if (r->count != count) { /* the buffer changed shape: start over */
            nf_place_free(r->e, r->bytes);
            if (nf_residual_alloc(r, key, count) != NF_OK) {
                *r = t->v[--t->n];
                return NULL;
            }
        }
        t->last = i;
        return r->e;
    }
    nf_residual_t *r = nf_residual_slot(t);
    if (r == NULL || nf_residual_alloc(r, key, count) != NF_OK)
        return NULL;
    t->last = t->n++;
    return r->e;
}

void nf_residual_table_free(nf_residual_table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        nf_place_free(t->v[i].e, t->v[i].bytes);
    free(t->v);
    memset(t, 0, sizeof(*t));
}
