/* SPDX-License-Identifier: BSD-3-Clause */
/* NFCOLL_TRACE (trace.c): one buffered line per admitted call and rank,
 * carrying what the policy matched on, so a trace can be replayed against
 * another policy. Format in nfcoll-policy(5). */
#ifndef NF_TRACE_H
#define NF_TRACE_H

#include "nf_decide.h"
#include "nf_policy.h"

/* path with "%r" replaced by the rank, else path.RANK: one file per rank,
 * created safely (nf_file.h). A file that cannot be created warns once. */
void nf_trace_open(const char *path, int rank);
int nf_trace_on(void);
/* Why a record ran where it ran: admission's reason for its route, the
 * health signal of a cool-down ("reentry" on the first call back), the
 * runner's fallback (an nf_fallback_t, NF_FALLBACK_NONE for none). */
typedef struct nf_trace_why {
    nf_decide_reason_t reason;
    const char *health;
    int fallback;
} nf_trace_why_t;

/* One record: a call, or one segment of a fused call (region NULL for a
 * gap or an unfused call; offset and elements within the call); route is
 * what admission decided, ran what the call ran on (fallbacks included). */
void nf_trace_record(int rank, const nf_policy_query_t *q, nf_route_t route,
                     const nf_policy_action_t *a, const char *region, uint64_t offset,
                     uint64_t elements, nf_route_t ran, const nf_trace_why_t *why);
void nf_trace_close(void);

#endif
