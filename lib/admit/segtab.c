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
    if (nf_keymap_put(&t->index, a, b, (uint32_t)t->n) != NF_OK)
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

/* ------------------------------------------------------------ checkpoint */

static const char *nf_segtab_name(uint64_t id)
{
    const char *n = id != 0 && id <= UINT32_MAX ? nf_intern_name((uint32_t)id) : NULL;
    return n != NULL ? n : "";
}

void nf_segtab_save(const nf_segtab_t *t, nf_wbuf_t *b)
{
    nf_wbuf_u64(b, t->n);
    nf_wbuf_u64(b, t->size);
    for (size_t k = 0; k < t->index.cap; k++) {
        const struct nf_keymap_slot *e = &t->index.slot[k];
        unsigned char kind = e->b != 0;
        if (!e->used)
            continue;
        nf_wbuf_put(b, &kind, 1);
        if (kind == 0) {
            nf_wbuf_str(b, nf_segtab_name(e->a));
        } else {
            nf_wbuf_str(b, nf_segtab_name(e->a >> 32));
            nf_wbuf_str(b, nf_segtab_name(e->a & UINT32_MAX));
            nf_wbuf_u64(b, e->b);
        }
        nf_wbuf_put(b, nf_segtab_at(t, e->v), t->size);
    }
}

/* One record's key, interned back to this process's ids (commit only:
 * a check must not intern names). NF_ERR_PARSE, or NF_ERR_NO_MEMORY when
 * a name cannot be interned. */
static nf_status_t nf_segtab_key_load(nf_rbuf_t *r, int commit, uint64_t *a, uint64_t *bb)
{
    char n1[256], n2[256];
    unsigned char kind;
    if (nf_rbuf_get(r, &kind, 1) != NF_OK || kind > 1 || nf_rbuf_str(r, n1, sizeof(n1)) != NF_OK)
        return NF_ERR_PARSE;
    if (kind == 0) {
        *bb = 0;
        *a = commit ? nf_intern(n1) : 1;
        return n1[0] == '\0' ? NF_ERR_PARSE : *a == 0 ? NF_ERR_NO_MEMORY : NF_OK;
    }
    if (nf_rbuf_str(r, n2, sizeof(n2)) != NF_OK || nf_rbuf_u64(r, bb) != NF_OK || *bb == 0)
        return NF_ERR_PARSE;
    uint64_t prev = commit && n1[0] ? nf_intern(n1) : 0;
    uint64_t next = commit && n2[0] ? nf_intern(n2) : 0;
    *a = prev << 32 | next;
    return NF_OK;
}

nf_status_t nf_segtab_load(nf_segtab_t *t, nf_rbuf_t *r, int commit,
                           void (*fix)(void *rec, uint32_t id))
{
    uint64_t n, size, a, b;
    nf_status_t st;
    if (nf_rbuf_u64(r, &n) != NF_OK || nf_rbuf_u64(r, &size) != NF_OK || size != t->size ||
        n > t->max || n > (r->n - r->at) / (size + 2))
        return NF_ERR_PARSE;
    if (commit) {
        nf_segtab_free(t);
        if (n > 0 && (t->v = malloc(n * t->size)) == NULL)
            return NF_ERR_NO_MEMORY;
        t->cap = n;
    }
    for (uint64_t k = 0; k < n; k++) {
        unsigned char rec[256];
        if (t->size > sizeof(rec))
            return NF_ERR_CAPACITY;
        if ((st = nf_segtab_key_load(r, commit, &a, &b)) != NF_OK ||
            (st = nf_rbuf_get(r, rec, t->size)) != NF_OK)
            return st;
        if (!commit)
            continue;
        uint32_t at = nf_keymap_get(&t->index, a, b); /* a key twice: the last wins */
        if (at == UINT32_MAX && (st = nf_keymap_put(&t->index, a, b, (uint32_t)t->n)) != NF_OK)
            return st;
        void *dst = nf_segtab_at(t, at == UINT32_MAX ? t->n++ : at);
        memcpy(dst, rec, t->size);
        if (fix != NULL)
            fix(dst, b == 0 ? (uint32_t)a : 0);
    }
    return NF_OK;
}
