/* SPDX-License-Identifier: BSD-3-Clause */
/* The runner's fallbacks as far as a call tells (nf_fallback.h). */
#include "config.h"

#include "nf_fallback.h"
#include "nf_route.h"

nf_route_t nf_fallback_route(nf_route_t route, const nf_call_facts_t *f, int *why)
{
    *why = NF_FALLBACK_NONE;
    if (f->seg && route == NF_ROUTE_PMPI)
        return NF_ROUTE_FP32; /* inside a fused call: exact */
    if (route == NF_ROUTE_PMPI)
        return route;
    if (!f->seg && (!f->float_dt || !f->sum)) {
        *why = !f->float_dt ? NF_FALLBACK_DATATYPE : NF_FALLBACK_OP;
        return NF_ROUTE_PMPI;
    }
    if (!f->seg && f->empty)
        return route;
    if (nf_route_lowbit(route) && !f->lanes_fit) {
        *why = NF_FALLBACK_CAPACITY;
        return NF_ROUTE_FP32;
    }
    return route;
}
