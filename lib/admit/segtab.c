/* Per-communicator records of segments (nf_segtab.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nf_segtab.h"

void nf_seg_key(const nf_seg_t *seg, size_t n, size_t i, uint64_t *a, uint64_t *b)
{
    const nf_seg_t *g = &seg[i];
    if (g->id != 0) {
        *a = g->id, *b = 0;
        return;
    }
    uint64_t prev = i > 0 ? seg[i - 1].id : 0, next = i + 1 < n ? seg[i + 1].id : 0;
    *a = prev << 32 | next;
    *b = (uint64_t)g->m * sizeof(float) + 1;
}

const char *nf_seg_name(uint32_t id, size_t bytes, char *buf, size_t len)
{
    const char *name = id != 0 ? nf_intern_name(id) : NULL;
    if (name == NULL) {
        snprintf(buf, len, "buffer:%zu", bytes);
        name = buf;
    }
    return name;
}

void *nf_segtab_get(nf_segtab_t *t, const nf_seg_t *seg, size_t n, size_t i, int make)
{
    uint64_t a, b;
    nf_seg_key(seg, n, i, &a, &b);
    uint32_t at = nf_keymap_get(&t->index, a, b);
    if (at != UINT32_MAX)
        return nf_segtab_at(t, at);
    if (!make || t->n >= t->max)
        return NULL;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        unsigned char *v = realloc(t->v, cap * t->size);
        if (v == NULL)
            return NULL;
        t->v = v, t->cap = cap;
    }
    if (nf_keymap_put(&t->index, a, b, (uint32_t)t->n) != 0)
        return NULL;
    void *r = nf_segtab_at(t, t->n++);
    memset(r, 0, t->size);
    return r;
}

void nf_segtab_free(nf_segtab_t *t)
{
    free(t->v);
    nf_keymap_free(&t->index);
    t->v = NULL, t->n = t->cap = 0;
}
