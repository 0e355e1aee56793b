/* SPDX-License-Identifier: BSD-3-Clause */
/* A communicator's per-segment state (nf_segstate.h). */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nf_segstate.h"

nf_segstate_t *nf_segstate_new(void)
{
    nf_segstate_t *s = calloc(1, sizeof(*s));
    if (s != NULL)
        s->t.size = sizeof(nf_segrec_t), s->t.max = NF_SEGSTATE_MAX;
    return s;
}

void nf_segstate_free(nf_segstate_t *s)
{
    if (s == NULL)
        return;
    nf_segtab_free(&s->t);
    free(s);
}

static size_t *nf_segstate_n(nf_segstate_t *s, unsigned part)
{
    return &s->n[part == NF_SEG_WARMUP ? 0 : 1];
}

nf_segrec_t *nf_segstate_get(nf_segstate_t *s, const nf_seg_t *seg, size_t n, size_t i,
                             unsigned part, int make)
{
    nf_segrec_t *r = nf_segtab_get(&s->t, seg, n, i, 0);
    size_t *count = nf_segstate_n(s, part);
    if (r != NULL && (r->parts & part))
        return r;
    if (!make || *count >= NF_SEGSTATE_PART_MAX)
        return NULL;
    if (r == NULL && (r = nf_segtab_get(&s->t, seg, n, i, 1)) == NULL)
        return NULL;
    r->parts |= part;
    ++*count;
    return r;
}

/* Where each part sits in a record. */
static void nf_segstate_part(unsigned part, size_t *off, size_t *size)
{
    if (part == NF_SEG_WARMUP)
        *off = offsetof(nf_segrec_t, warm), *size = sizeof(uint64_t);
    else
        *off = offsetof(nf_segrec_t, health), *size = sizeof(nf_hseg_t);
}

void nf_segstate_save(const nf_segstate_t *s, unsigned part, nf_wbuf_t *b)
{
    size_t off, size;
    nf_segstate_part(part, &off, &size);
    nf_segtab_save_part(&s->t, b, off, size, part);
}

static void nf_segstate_fix_health(void *p, uint32_t id)
{
    ((nf_hseg_t *)p)->id = id; /* this process's id of the region */
}

nf_status_t nf_segstate_load(nf_segstate_t *s, unsigned part, nf_rbuf_t *r, int commit)
{
    size_t off, size;
    nf_segtab_t check = {.size = sizeof(nf_segrec_t), .max = NF_SEGSTATE_PART_MAX};
    nf_segstate_part(part, &off, &size);
    nf_status_t st = nf_segtab_load_part(commit ? &s->t : &check, r, commit, off, size, part,
                                         part == NF_SEG_HEALTH ? nf_segstate_fix_health : NULL);
    nf_segtab_free(&check);
    if (commit) { /* the records holding the part now */
        size_t *count = nf_segstate_n(s, part);
        *count = 0;
        for (size_t k = 0; k < s->t.n; k++)
            *count += (nf_segstate_at(s, k)->parts & part) != 0;
    }
    return st;
}
