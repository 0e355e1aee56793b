/* SPDX-License-Identifier: BSD-3-Clause */
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

/* A call's segments, their names and the actions that chose their routes:
 * the segments of one kept decision (admission.c), as matched in tmpl, and
 * the ones a call runs in seg (the run, health and calibration write into
 * them; valid until the communicator's next call). */
typedef struct nf_plan {
    size_t n, cap;
    nf_seg_t *seg;
    nf_seg_t *tmpl;                     /* the segments as matched */
    nf_seg_note_t *note;                /* admission's notes of the segments */
    nf_policy_action_t *act;
    nf_region_part_t *parts;            /* scratch for the cut: bound regions */
    nf_decide_part_t *dparts;           /* the same, for nf_decide */
    size_t parts_cap;
} nf_plan_t;

/* The bound regions in [x, x + m), in p->parts and p->dparts: their
 * number, or a negative nf_status_t (NF_ERR_NO_MEMORY). */
long nf_plan_parts(nf_plan_t *p, const float *x, size_t m);

/* Take d's segments (nf_decide) as the plan's: a part of p->parts keeps
 * its interned id, a layout entry's name is interned. The number of
 * segments, or a negative nf_status_t (NF_ERR_NO_MEMORY: p->n is 0). */
long nf_plan_take(nf_plan_t *p, const nf_decide_t *d, size_t nparts);

/* Start a call on the plan: its segments as matched. */
void nf_plan_start(nf_plan_t *p);

void nf_plan_free(nf_plan_t *p);

#endif
