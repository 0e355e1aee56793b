/* SPDX-License-Identifier: BSD-3-Clause */
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

/* The record of key (a, b), made (zero-filled) when there is none. */
static void *nf_segtab_key_rec(nf_segtab_t *t, uint64_t a, uint64_t b, nf_status_t *st)
{
    uint32_t at = nf_keymap_get(&t->index, a, b); /* a key twice: the last wins */
    *st = NF_OK;
    if (at != UINT32_MAX)
        return nf_segtab_at(t, at);
    if (t->n >= t->max) {
        *st = NF_ERR_PARSE;
        return NULL;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        unsigned char *v = realloc(t->v, cap * t->size);
        if (v == NULL) {
            *st = NF_ERR_NO_MEMORY;
            return NULL;
        }
        t->v = v, t->cap = cap;
    }
    if ((*st = nf_keymap_put(&t->index, a, b, (uint32_t)t->n)) != NF_OK)
        return NULL;
    void *rec = nf_segtab_at(t, t->n++);
    memset(rec, 0, t->size);
    return rec;
}

void *nf_segtab_get(nf_segtab_t *t, const nf_seg_t *seg, size_t n, size_t i, int make)
{
    uint64_t a, b;
    nf_status_t st;
    nf_seg_key(seg, n, i, &a, &b);
    uint32_t at = nf_keymap_get(&t->index, a, b);
    if (at != UINT32_MAX)
        return nf_segtab_at(t, at);
    return make ? nf_segtab_key_rec(t, a, b, &st) : NULL;
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

/* Whether record rec holds part bit (0: the whole record, always). */
static int nf_segtab_has(const void *rec, unsigned bit)
{
    unsigned parts;
    if (bit == 0)
        return 1;
    memcpy(&parts, rec, sizeof(parts));
    return (parts & bit) != 0;
}

void nf_segtab_save_part(const nf_segtab_t *t, nf_wbuf_t *b, size_t off, size_t size,
                         unsigned bit)
{
    uint64_t n = 0;
    for (size_t k = 0; k < t->n; k++)
        n += (uint64_t)nf_segtab_has(nf_segtab_at(t, k), bit);
    nf_wbuf_u64(b, n);
    nf_wbuf_u64(b, size);
    for (size_t k = 0; k < t->index.cap; k++) {
        const struct nf_keymap_slot *e = &t->index.slot[k];
        unsigned char kind = e->b != 0;
        if (!e->used || !nf_segtab_has(nf_segtab_at(t, e->v), bit))
            continue;
        nf_wbuf_put(b, &kind, 1);
        if (kind == 0) {
            nf_wbuf_str(b, nf_segtab_name(e->a));
        } else {
            nf_wbuf_str(b, nf_segtab_name(e->a >> 32));
            nf_wbuf_str(b, nf_segtab_name(e->a & UINT32_MAX));
            nf_wbuf_u64(b, e->b);
        }
        nf_wbuf_put(b, (const unsigned char *)nf_segtab_at(t, e->v) + off, size);
    }
}

void nf_segtab_save(const nf_segtab_t *t, nf_wbuf_t *b)
{
    nf_segtab_save_part(t, b, 0, t->size, 0);
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

nf_status_t nf_segtab_load_part(nf_segtab_t *t, nf_rbuf_t *r, int commit, size_t off,
                                size_t size, unsigned bit, void (*fix)(void *part, uint32_t id))
{
    uint64_t n, fsize, a, b;
    nf_status_t st;
    if (nf_rbuf_u64(r, &n) != NF_OK || nf_rbuf_u64(r, &fsize) != NF_OK || fsize != size ||
        n > t->max || n > (r->n - r->at) / (size + 2))
        return NF_ERR_PARSE;
    if (commit && bit == 0)
        nf_segtab_free(t);
    for (size_t k = 0; commit && bit != 0 && k < t->n; k++) { /* the part starts over */
        unsigned char *rec = nf_segtab_at(t, k);
        unsigned parts;
        memcpy(&parts, rec, sizeof(parts));
        parts &= ~bit;
        memcpy(rec, &parts, sizeof(parts));
        memset(rec + off, 0, size);
    }
    for (uint64_t k = 0; k < n; k++) {
        unsigned char part[256];
        if (size > sizeof(part))
            return NF_ERR_CAPACITY;
        if ((st = nf_segtab_key_load(r, commit, &a, &b)) != NF_OK ||
            (st = nf_rbuf_get(r, part, size)) != NF_OK)
            return st;
        if (!commit)
            continue;
        unsigned char *rec = nf_segtab_key_rec(t, a, b, &st);
        if (rec == NULL)
            return st;
        memcpy(rec + off, part, size);
        if (bit != 0) {
            unsigned parts;
            memcpy(&parts, rec, sizeof(parts));
            parts |= bit;
            memcpy(rec, &parts, sizeof(parts));
        }
        if (fix != NULL)
            fix(rec + off, b == 0 ? (uint32_t)a : 0);
    }
    return NF_OK;
}

nf_status_t nf_segtab_load(nf_segtab_t *t, nf_rbuf_t *r, int commit,
                           void (*fix)(void *rec, uint32_t id))
{
    return nf_segtab_load_part(t, r, commit, 0, t->size, 0, fix);
}
