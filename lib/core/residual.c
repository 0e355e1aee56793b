/* Error-feedback residuals, one per (communicator, buffer address, count).
 * Placed like the aggregation buffer (they are what CXL memory is for).
 * Forms and double buffering: see nf_residual.h. Lookups are linear with a
 * last-hit shortcut: a training step touches a handful of gradient buckets
 * in the same order every step. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nf_placement.h"
#include "nf_residual.h"
#include "nf_stats.h"

static void nf_residual_release(nf_residual_t *r)
{
    nf_place_free(r->buf[0], r->bytes);
    nf_place_free(r->buf[1], r->bytes);
    r->buf[0] = r->buf[1] = NULL;
}

static nf_status_t nf_residual_alloc(nf_residual_t *r, const void *key, size_t count)
{
    size_t bytes = count * sizeof(float);
    double frac0 = 1.0, frac1 = 1.0;
    r->buf[0] = nf_place_alloc(bytes, &frac0);
    r->buf[1] = r->buf[0] != NULL ? nf_place_alloc(bytes, &frac1) : NULL;
    r->bytes = bytes;
    if (r->buf[1] == NULL) {
        nf_residual_release(r);
        return NF_ERR_NO_MEMORY;
    }
    r->key = key;
    r->count = count;
    r->cur = 0;
    r->form = NF_RES_Y; /* zero y with a = 0 is the zero residual */
    r->aprev = 0.0f;
    r->resident_frac = (frac0 + frac1) / 2;
    nf_stats_placed(NF_PLACED_RESIDUAL, 2 * bytes, r->resident_frac);
    return NF_OK;
}

/* Y form to E form: e = y - a where y's sign bit is clear, y + a where set,
 * the update the binary route would have stored. Exact, in place. */
float *nf_residual_e(nf_residual_t *r)
{
    float *b = r->buf[r->cur];
    if (r->form == NF_RES_Y) {
        for (size_t j = 0; j < r->count; j++)
            b[j] = signbit(b[j]) ? b[j] + r->aprev : b[j] - r->aprev;
        r->form = NF_RES_E;
    }
    return b;
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

nf_residual_t *nf_residual_get(nf_residual_table_t *t, const void *key, size_t count)
{
    if (t->last < t->n && t->v[t->last].key == key && t->v[t->last].count == count)
        return &t->v[t->last];
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_t *r = &t->v[i];
        if (r->key != key)
            continue;
        if (r->count != count) { /* the buffer changed shape: start over */
            nf_residual_release(r);
            if (nf_residual_alloc(r, key, count) != NF_OK) {
                *r = t->v[--t->n];
                return NULL;
            }
        }
        t->last = i;
        return r;
    }
    nf_residual_t *r = nf_residual_slot(t);
    if (r == NULL || nf_residual_alloc(r, key, count) != NF_OK)
        return NULL;
    t->last = t->n++;
    return r;
}

void nf_residual_table_free(nf_residual_table_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        nf_residual_release(&t->v[i]);
    free(t->v);
    memset(t, 0, sizeof(*t));
}
