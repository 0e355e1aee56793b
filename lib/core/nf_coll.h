/* The allreduce protocol over the node-shared segment (coll.c): moves lines
 * between ranks, the kernels do the arithmetic. docs/design.md, "Protocol". */
#ifndef NF_COLL_H
#define NF_COLL_H

#include <stddef.h>

#include "nf_comm.h"

typedef struct nf_call {
    const float *x;  /* input (recvbuf when MPI_IN_PLACE) */
    float *r;        /* output */
    size_t m;        /* elements */
    nf_residual_t *res; /* error feedback state, NULL when EF is off */
    double gamma;    /* ternary gate factor */
} nf_call_t;

/* NF_OK; NF_ERR_UNSUPPORTED when some rank had a NaN or Inf (every rank
 * sees it in the same call: the caller runs fp32, the residual is as it
 * was); or the MPI error of a failed exchange. */
nf_status_t nf_coll_binary(nf_comm_t *c, const nf_call_t *call);
nf_status_t nf_coll_ternary(nf_comm_t *c, const nf_call_t *call);
nf_status_t nf_coll_fp32(nf_comm_t *c, const nf_call_t *call);

#endif
