/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The routes described once (route.c): for each nf_route_t of nfcoll.h,
 * its name, whether it is low-bit (a sign format with a scale, count lanes
 * and error feedback: health, warm-up, calibration's shadow and the count
 * lanes' capacity apply to it), whether it keeps an error-feedback
 * residual, and the bits per element a rank writes toward the reducer
 * (scales aside). Every layer asks this table rather than listing routes;
 * a new route is a row here, its kernels and its exchange (HACKING,
 * "Adding a route"). No MPI.
 */
#ifndef NF_ROUTE_H
#define NF_ROUTE_H

#include "nfcoll.h"

typedef struct nf_route_info {
    const char *name; /* nf_route_name, the policy's `route =` */
    int lowbit;       /* binary and ternary */
    int residual;     /* keeps an error-feedback residual (when ef is on) */
    int float_only;   /* takes 4-byte float sums only (others: pmpi) */
    unsigned bits;    /* upstream bits per element */
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

#endif
