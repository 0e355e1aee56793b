/* Error-feedback residuals, one per (communicator, buffer address, count).
 * Placed like the aggregation buffer (they are what CXL memory is for).
 * Forms and double buffering: see nf_residual.h. Lookups are linear with a
 * last-hit shortcut: a training step touches a handful of gradient buckets
 * in the same order every step. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_placement.h"
#include "nf_residual.h"
#include "nf_stats.h"
#include "nf_util.h"

static void nf_residual_release(nf_residual_t *r)
{
    nf_place_free(r->buf[0], r->bytes);
    nf_place_free(r->buf[1], r->bytes);
    r->buf[0] = r->buf[1] = NULL;
}

static nf_status_t nf_residual_alloc(nf_residual_t *r, size_t count)
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
    r->count = count;
    r->cur = 0;
    r->form = NF_RES_Y; /* zero y with a = 0 is the zero residual */
    r->aprev = r->tprev = 0.0f;
    r->resident_frac = (frac0 + frac1) / 2;
    nf_stats_placed(NF_PLACED_RESIDUAL, 2 * bytes, r->resident_frac);
    return NF_OK;
}

/* Y form to E form: e = y - a where y's sign bit is clear, y + a where set,
 * the update the binary route would have stored; TY form: y - b above the
 * gate, y + b below minus it, else y, the ternary route's. Exact, in place. */
float *nf_residual_e(nf_residual_t *r)
{
    float *b = r->buf[r->cur], a = r->aprev, t = r->tprev;
    if (r->form == NF_RES_Y) {
        for (size_t j = 0; j < r->count; j++)
            b[j] = signbit(b[j]) ? b[j] + a : b[j] - a;
    } else if (r->form == NF_RES_TY) {
        for (size_t j = 0; j < r->count; j++)
            b[j] = b[j] > t ? b[j] - a : b[j] < -t ? b[j] + a : b[j];
    }
    r->form = NF_RES_E;
    return b;
}

static int nf_residual_is(const nf_residual_t *r, const nf_res_key_t *key, uint64_t hash)
{
    if (key->name == NULL)
        return r->name[0] == '\0' && r->addr == key->addr;
    return r->hash == hash && strcmp(r->name, key->name) == 0;
}

static nf_residual_t *nf_residual_new(nf_residual_table_t *t, const nf_res_key_t *key,
                                      uint64_t hash, size_t count)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        nf_residual_t **v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    nf_residual_t *r = calloc(1, sizeof(*r));
    if (r == NULL || nf_residual_alloc(r, count) != NF_OK) {
        free(r);
        return NULL;
    }
    r->addr = key->name == NULL ? key->addr : NULL;
    if (key->name != NULL)
        snprintf(r->name, sizeof(r->name), "%s", key->name);
    r->hash = hash;
    t->last = t->n;
    t->v[t->n++] = r;
    return r;
}

nf_residual_t *nf_residual_get(nf_residual_table_t *t, const nf_res_key_t *key, size_t count)
{
    uint64_t hash = key->name != NULL ? nf_hash_str(NF_HASH_INIT, key->name) : 0;
    if (t->last < t->n && nf_residual_is(t->v[t->last], key, hash) &&
        t->v[t->last]->count == count)
        return t->v[t->last];
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_t *r = t->v[i];
        if (!nf_residual_is(r, key, hash))
            continue;
        if (r->count != count) { /* the buffer changed shape: start over */
            nf_residual_release(r);
            if (nf_residual_alloc(r, count) != NF_OK) {
                free(r);
                t->v[i] = t->v[--t->n];
                return NULL;
            }
        }
        t->last = i;
        return r;
    }
    return nf_residual_new(t, key, hash, count);
}

void nf_residual_table_free(nf_residual_table_t *t)
{
    for (size_t i = 0; i < t->n; i++) {
        nf_residual_release(t->v[i]);
        free(t->v[i]);
    }
    free(t->v);
    memset(t, 0, sizeof(*t));
}
