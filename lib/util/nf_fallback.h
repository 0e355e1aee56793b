/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The runner's fallbacks as far as a call tells (fallback.c): where a
 * route the decision gave runs, from what the call is, not from resources
 * or data. Defined once, for the runner (lib/core/run.c) and for
 * nfcoll_replay (nf_decide_runs). No MPI. docs/design.md, "Routes".
 */
#ifndef NF_FALLBACK_H
#define NF_FALLBACK_H

#include "nfcoll.h"

/* A fallback when a (segment of a) call ran as given. Not an nf_fallback_t
 * value: the public enum, its numbering and NF_FALLBACK_COUNT stay as they
 * are (the stats index their counters with them). */
enum { NF_FALLBACK_NONE = -1 };

/* What a call tells about where it can run. */
typedef struct nf_call_facts {
    int seg;       /* a segment of a fused call (the whole call is a float sum) */
    int float_dt;  /* a 4-byte float datatype (MPI_FLOAT, a 4-byte MPI_REAL) */
    int sum;       /* the op is MPI_SUM */
    int empty;     /* count 0: counted on its route, nothing moves */
    int lanes_fit; /* the communicator's count planes fit NFCOLL_COUNT_BITS */
} nf_call_facts_t;

/* Where route runs, and why not there (*why, an nf_fallback_t value, or
 * NF_FALLBACK_NONE): a whole call that is not a float sum runs pmpi
 * (datatype, then op); a pmpi segment of a fused call runs fp32 (exact, as
 * given: no fallback); an empty call runs as given; a low-bit route the
 * count lanes cannot hold runs fp32 (capacity). */
nf_route_t nf_fallback_route(nf_route_t route, const nf_call_facts_t *f, int *why);

#endif
