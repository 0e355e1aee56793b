/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A communicator's decision cache (dcache.c), without MPI: decisions
 * (nf_decide_t, with the cut's segments as a plan) kept under one packed
 * key, in 16 sets of 4 (a full set replaces its oldest), at most
 * NF_DCACHE_CUTS of them holding segments. Admission fills it on a miss
 * and reads it on a hit, never writing a kept decision.
 * docs/design.md, "Decision cache".
 */
#ifndef NF_DCACHE_H
#define NF_DCACHE_H

#include <stdint.h>

#include "nf_decide.h"
#include "nf_plan.h"
#include "nf_types.h"

#define NF_DCACHE_SETS 16 /* a power of two */
#define NF_DCACHE_WAYS 4
#define NF_DCACHE_CUTS 8  /* decisions that keep a cut's segments (DDP's buckets) */

/* What nf_decide can tell apart of a call. */
typedef struct nf_dkey {
    const void *x;       /* the buffer bound regions cut; NULL otherwise */
    uint64_t size;       /* bytes, or their size class */
    unsigned gen;        /* nf_region_generation() with x, else 0 */
    nf_dtype_t dt;
    nf_opkind_t op;
    int fsum;            /* a sum of 4-byte floats (nf_decide_float_sum) */
} nf_dkey_t;

/* One decision, as nf_decide made it, with its cut as segments to run. */
typedef struct nf_drec {
    nf_dkey_t key;
    uint64_t fill;       /* 0: empty; else the decision's number (its age) */
    int split;           /* ranks that cut it differently may disagree on pmpi */
    nf_decide_t d;
    nf_plan_t plan;      /* d's segments (d.cut != NF_CUT_NONE); plan.n 0
                            without memory for them: the call runs whole, fp32 */
} nf_drec_t;

typedef struct nf_dcache {
    uint64_t fills;      /* decisions made */
    nf_drec_t scratch;   /* a decision not kept */
    nf_drec_t rec[NF_DCACHE_SETS * NF_DCACHE_WAYS];
} nf_dcache_t;

/* The set k's decisions go to (0 .. NF_DCACHE_SETS - 1). */
unsigned nf_dcache_set_of(const nf_dkey_t *k);
/* The kept decision for k, or NULL. */
nf_drec_t *nf_dcache_find(nf_dcache_t *c, const nf_dkey_t *k);
/* The record a new decision for k goes to: its set's empty or oldest way,
 * freed, with k and a new fill; keep 0: the scratch record (its memory
 * reused), which no find returns. */
nf_drec_t *nf_dcache_take(nf_dcache_t *c, const nf_dkey_t *k, int keep);
/* After r was filled: when it holds segments, at most NF_DCACHE_CUTS kept
 * decisions do (the oldest other is freed). */
void nf_dcache_bound(nf_dcache_t *c, const nf_drec_t *r);
/* r's decision runs its call but is not kept (it could not be made whole):
 * moved to the scratch record, which is returned. */
nf_drec_t *nf_dcache_drop(nf_dcache_t *c, nf_drec_t *r);
void nf_dcache_free(nf_dcache_t *c);

#endif
