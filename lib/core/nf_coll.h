/* SPDX-License-Identifier: BSD-3-Clause */
/* The allreduce protocol over the node-shared segment (coll.c): moves lines
 * between ranks, the kernels do the arithmetic. docs/design.md, "Protocol". */
#ifndef NF_COLL_H
#define NF_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "nf_comm.h"
#include "nf_fallback.h"
#include "nf_route.h"


/* What the run does with a segment's residual before the call. */
typedef enum nf_seg_resid {
    NF_RESID_USE = 0,  /* use it as it is */
    NF_RESID_RESTART,  /* start it over at zero (health: the first call back
                          after a cool-down) */
    NF_RESID_CLAIM     /* the segment runs fp32 (a health cool-down) but keeps
                          its residual for the calls after it: a residual
                          loaded for an unbound buffer is adopted now, in the
                          order the uninterrupted run used it (run.c) */
} nf_seg_resid_t;

/* One part of a call that shares one route and one scale (binary with
 * scale_block: one per block of it). A call without bound regions is one
 * segment; a fused buffer is one per region and gap. */
typedef struct nf_seg {
    size_t off, m;        /* elements, from the call's first */
    nf_route_t route;     /* NF_ROUTE_FP32, NF_ROUTE_BF16 or a low-bit route */
    nf_residual_t *res;   /* error feedback state (low-bit), NULL when off */
    double gamma;         /* ternary gate factor */
    int ef;               /* error feedback for this segment: 1/0 (run.c) */
    double ef_decay;      /* the residual's factor when the next call adds it, in
                             [0, 1] (run.c: < 0 inherits NFCOLL_EF_DECAY) */
    long scale_block;     /* binary: elements per scale, a multiple of 512; 0: one
                             scale per segment (run.c: < 0 inherits NFCOLL_SCALE_BLOCK) */
    long block;           /* integer routes: elements per scale block, a power of
                             two from NF_INT_BLOCK_MIN to NF_INT_BLOCK_MAX; 0: the
                             default, NF_INT_BLOCK_DEFAULT */
    const char *name;     /* bound region (its interned name), or NULL (a gap, or no
                             regions) */
    uint32_t id;          /* that region's interned id (nf_intern.h), 0 with no name:
                             what per-region state is keyed by */
    uint64_t tag;         /* what else ranks must agree on: the region's name hash
                             (ids are per process) */
    nf_seg_resid_t resid; /* in: what the run does with its residual first */
    nf_route_t ran;       /* out (run.c): the route it ran on, fallbacks included */
    int fallback;         /* out (run.c): why ran is not route (an nf_fallback_t:
                             nonfinite, layout, capacity, resource), else
                             NF_FALLBACK_NONE */
    double ef_ratio;      /* out, health on: mean |e| / mean |x| over the segment,
                             the ranks' mean (NAN when not measured) */
    /* set by nf_coll_run: */
    int nonfinite;        /* some rank had a NaN or Inf: this segment ran fp32 */
    size_t line0;         /* low-bit: first line in the slots */
    unsigned sc0, nsc;    /* low-bit: its scales in the exchange, one per block
                             (integer routes: one, NaN when some block is not
                             finite) */
    size_t bm0;           /* integer routes: its first block max in the
                             agreement before packing */
} nf_seg_t;

typedef struct nf_call {
    const float *x;       /* input (recvbuf when MPI_IN_PLACE) */
    float *r;             /* output */
    size_t m;             /* elements */
    nf_seg_t *seg;        /* in offset order, covering [0, m) */
    size_t nseg;
    int mismatch;         /* out: ranks' layouts differed: the whole call ran fp32 */
    int capacity;         /* out: the segment could not grow: the whole call ran fp32 */
    int fp32_stuck;       /* out: the fp32 chunk could not grow: ran in the chunks the
                             segment has (exact, slower) */
    int health;           /* measure each low-bit segment's ef_ratio and agree on loss */
    double loss;          /* this rank's reported loss for the exchange, NAN if none */
    double loss_mean;     /* out: the mean of the ranks' reported losses, NAN if none */
} nf_call_t;

/*
 * Run a call, every segment on its route, in one exchange of what ranks
 * must agree on (count, layout), one of the low-bit segments' scales, one
 * counting pass over all their lines, and one fp32 pass over the fp32 ones.
 * NF_OK; MPI_ERR_COUNT (as a status) on every rank when the ranks' counts
 * differ; or the MPI error of a failed exchange.
 */
nf_status_t nf_coll_run(nf_comm_t *c, nf_call_t *call);
/* A call failed on some rank, and every rank knows it (the engine's
 * agreement): forget the verdicts' history, which a rank whose exchange
 * failed may not have kept as the others did, so that the next areas
 * agree (docs/design.md, "Protocol"). */
void nf_coll_forget(nf_comm_t *c);

#endif
