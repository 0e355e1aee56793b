/*
 * Fused calls (plan.c): a float-sum call whose buffer holds bound regions
 * (or regions of the policy's layout file) is cut into segments, one per
 * region part and one per unbound gap, each matched by the policy as a call
 * of its own. docs/design.md, "Regions".
 */
#ifndef NF_PLAN_H
#define NF_PLAN_H

#include <stdint.h>

#include "nf_coll.h"
#include "nf_decide.h"
#include "nf_health.h"
#include "nf_policy.h"
#include "nf_region.h"

/* What a cut and its match depend on, besides what never changes in a run
 * (the policy, layout and profile): a plan kept for one key is reused by
 * the next call with the same key. */
typedef struct nf_plan_key {
    const void *x;        /* the call's buffer */
    size_t m;             /* its elements */
    unsigned gen;         /* nf_region_generation() */
    const void *entry;    /* admission's decision for the call (datatype, op,
                             size class, the action of the whole call) */
} nf_plan_key_t;

/* A call's segments, their names and the actions that chose their routes.
 * Owned by a communicator's admission state; valid until its next call. */
typedef struct nf_plan {
    size_t n, cap;
    nf_seg_t *seg;
    nf_seg_t *tmpl;                     /* the kept plan's segments as matched */
    nf_seg_note_t *note;                /* admission's notes of the segments */
    nf_policy_action_t *act;
    nf_region_part_t *parts;            /* scratch for the cut: bound regions */
    nf_decide_part_t *dparts;           /* the same, for nf_decide_cut */
    size_t parts_cap;
    nf_decide_t dec;                    /* scratch: the decision of a new plan */
    nf_plan_key_t key;                  /* of the kept plan */
    int kept, result;
} nf_plan_t;

/* The bound regions in [x, x + m), in p->parts and p->dparts: their
 * number, or a negative nf_status_t (NF_ERR_NO_MEMORY). */
long nf_plan_parts(nf_plan_t *p, const float *x, size_t m);

/* Take d's segments (nf_decide_cut) as the plan's: a part of p->parts
 * keeps its interned id, a layout entry's name is interned. The number of
 * segments, or a negative nf_status_t (NF_ERR_NO_MEMORY). */
long nf_plan_take(nf_plan_t *p, const nf_decide_t *d, size_t nparts);

/* Keep the plan now in p (segments as matched, and the caller's result
 * for it) for calls with this key. */
void nf_plan_keep(nf_plan_t *p, const nf_plan_key_t *key, int result);
/* 1 when the kept plan has this key: p's segments are reset to it and
 * *result is the kept result; 0 otherwise. */
int nf_plan_cached(nf_plan_t *p, const nf_plan_key_t *key, int *result);
void nf_plan_forget(nf_plan_t *p);

void nf_plan_free(nf_plan_t *p);

#endif
