/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nfcoll_replay's record of why each region ran where it ran
 * (replay_why.c): per region, the last reason the decision function gave,
 * written as the stats' "admission" object writes its decision fields. No
 * MPI.
 */
#ifndef NF_REPLAY_WHY_H
#define NF_REPLAY_WHY_H

#include <stddef.h>
#include <stdio.h>

#include "nf_decide.h"
#include "nf_policy.h"
#include "nf_profile.h"

typedef struct replay_why {
    char *region;
    nf_route_t route;
    nf_decide_reason_t why;
    nf_policy_action_t act;
} replay_why_t;

typedef struct replay_whys {
    replay_why_t *v;           /* regions, in the order first seen */
    size_t n, cap, hint;
} replay_whys_t;

/* Segment g of decision d (a region: g->name set). Exits without memory. */
void replay_whys_note(replay_whys_t *t, const nf_decide_t *d, const nf_decide_seg_t *g);
/* The JSON object, with prof's file:line of each entry and pol's admit_cosine. */
void replay_whys_json(FILE *fp, const replay_whys_t *t, const nf_profile_t *prof,
                      const nf_policy_t *pol);
void replay_whys_free(replay_whys_t *t);

#endif
