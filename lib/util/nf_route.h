/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The routes described once (route.c): for each nf_route_t of nfcoll.h,
 * its name, whether it is low-bit (a code summed in count lanes, with
 * scales and error feedback: health, warm-up, calibration's shadow and the
 * count lanes' capacity apply to it), whether it keeps an error-feedback
 * residual, the bits per element a rank writes toward the reducer (scales
 * aside: for a low-bit route its bit lines per 512 elements), and for the
 * integer routes the bits of their code. Every layer asks this table rather than listing routes;
 * a new route is a row here, its kernels and its exchange (HACKING,
 * "Adding a route"). No MPI.
 */
#ifndef NF_ROUTE_H
#define NF_ROUTE_H

#include "nfcoll.h"

typedef struct nf_route_info {
    const char *name; /* nf_route_name, the policy's `route =` */
    int lowbit;       /* binary, ternary and the integer routes */
    int residual;     /* keeps an error-feedback residual (when ef is on) */
    int float_only;   /* takes 4-byte float sums only (others: pmpi) */
    unsigned bits;    /* upstream bits per element */
    unsigned intk;    /* integer routes: bits of the code (its scale is a block's
                         max agreed before packing); 0 for the others */
} nf_route_info_t;

extern const nf_route_info_t nf_routes[NF_ROUTE_COUNT];

/* The row of r; NULL for a value no route has. */
static inline const nf_route_info_t *nf_route_info(nf_route_t r)
{
    return (unsigned)r < NF_ROUTE_COUNT ? &nf_routes[r] : NULL;
}

static inline int nf_route_lowbit(nf_route_t r)
{
    return (unsigned)r < NF_ROUTE_COUNT && nf_routes[r].lowbit;
}

static inline int nf_route_residual(nf_route_t r)
{
    return (unsigned)r < NF_ROUTE_COUNT && nf_routes[r].residual;
}

/* Bits of an integer route's code, 0 for any other route. */
static inline unsigned nf_route_intk(nf_route_t r)
{
    return (unsigned)r < NF_ROUTE_COUNT ? nf_routes[r].intk : 0;
}

#endif
