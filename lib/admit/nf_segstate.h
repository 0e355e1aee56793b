/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A communicator's per-segment state (segstate.c): one record per segment,
 * owned by admission, holding what each feature keeps of the segment
 * across calls: warm-up's count (nf_warmup.h) and health's cool-down
 * (nf_health.h). Keyed by nf_seg_key (nf_segtab.h), at most
 * NF_SEGSTATE_PART_MAX segments per communicator with each part (beyond
 * it, further segments have none of that part: on every rank alike). docs/design.md, "Who owns which
 * state".
 */
#ifndef NF_SEGSTATE_H
#define NF_SEGSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_regstats.h" /* nf_health_signal_t */
#include "nf_segtab.h"
#include "nf_util.h"

#define NF_SEGSTATE_PART_MAX 4096                   /* segments with a part, per part */
#define NF_SEGSTATE_MAX (2 * NF_SEGSTATE_PART_MAX) /* records: the parts' union */

/* The parts a record holds. */
enum { NF_SEG_WARMUP = 1u, NF_SEG_HEALTH = 2u };

/* Health's part: a segment's cool-downs. */
typedef struct nf_hseg {
    uint32_t id;          /* the region, 0 for a gap or a whole buffer */
    size_t bytes;
    unsigned left;        /* calls of fp32 still to run */
    unsigned len;         /* length of the last cool-down */
    unsigned since;       /* calls since the last cool-down ended */
    int back;             /* a cool-down ended: the next low-bit call re-enters */
    nf_health_signal_t why;
} nf_hseg_t;

typedef struct nf_segrec {
    unsigned parts;       /* NF_SEG_* this record holds (first: nf_segtab_save_part) */
    uint64_t warm;        /* warm-up: the fp32 calls it has run */
    nf_hseg_t health;
} nf_segrec_t;

typedef struct nf_segstate {
    nf_segtab_t t;        /* nf_segrec_t */
    size_t n[2];          /* records holding NF_SEG_WARMUP, NF_SEG_HEALTH */
} nf_segstate_t;

nf_segstate_t *nf_segstate_new(void);
void nf_segstate_free(nf_segstate_t *s);

/* seg[i]'s record if it holds part; with make, made or given the part
 * (zero-filled) when it has not. NULL when it has none (or
 * NF_SEGSTATE_PART_MAX records hold the part, or out of memory). */
nf_segrec_t *nf_segstate_get(nf_segstate_t *s, const nf_seg_t *seg, size_t n, size_t i,
                             unsigned part, int make);
static inline size_t nf_segstate_count(const nf_segstate_t *s) { return s->t.n; }
static inline nf_segrec_t *nf_segstate_at(nf_segstate_t *s, size_t k)
{
    return nf_segtab_at(&s->t, k);
}

/* One part in a residual checkpoint, in nf_segtab_save's format (the
 * part's records, the part's bytes; at most NF_SEGSTATE_PART_MAX, as when
 * each part had a table of its own), and back: commit 0 checks only (s
 * may be NULL), commit 1 (after a check passed) replaces the part.
 * NF_ERR_PARSE, NF_ERR_NO_MEMORY. */
void nf_segstate_save(const nf_segstate_t *s, unsigned part, nf_wbuf_t *b);
nf_status_t nf_segstate_load(nf_segstate_t *s, unsigned part, nf_rbuf_t *r, int commit);

#endif
