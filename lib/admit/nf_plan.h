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
#include "nf_policy.h"
#include "nf_region.h"

/* A call's segments, their names and the actions that chose their routes.
 * Owned by a communicator's admission state; valid until its next call. */
typedef struct nf_plan {
    size_t n, cap;
    nf_seg_t *seg;
    nf_policy_action_t *act;
    char (*name)[NF_REGION_NAME_MAX];   /* "" for a gap */
    nf_region_part_t *parts;            /* scratch for the cut */
    size_t parts_cap;
} nf_plan_t;

/* Cut [x, x + m) by the bound regions. 0 when no region lies in it (the
 * call is not fused), the number of segments otherwise; -1 without memory
 * (the caller runs the call whole). */
long nf_plan_cut(nf_plan_t *p, const float *x, size_t m);

/* Cut a call of m elements by layout entries (offsets in elements). */
long nf_plan_cut_layout(nf_plan_t *p, size_t m, const nf_region_part_t *parts, size_t nparts);

/* Match every segment: the query q is the call's, with bytes and region
 * set per segment. */
void nf_plan_match(nf_plan_t *p, const nf_policy_t *pol, const nf_policy_query_t *q);

/* 1 when every segment's route is pmpi (the call then runs whole on pmpi). */
int nf_plan_all_pmpi(const nf_plan_t *p);

void nf_plan_free(nf_plan_t *p);

#endif
