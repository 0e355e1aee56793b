/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bound regions (region.c): names for address ranges of float gradients, so
 * that a fused buffer (a DDP bucket holding several layers) is cut into
 * segments, each matched by the policy and reduced on its own route with
 * its own scale and residual. Process-wide and local: binding is not
 * collective. docs/design.md, "Regions".
 */
#ifndef NF_REGION_H
#define NF_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "nfcoll.h"

#define NF_REGION_NAME_MAX 128 /* with the NUL */

/* NF_ERR_INVALID: bad name (1-127 printable non-space bytes), count 0, a
 * base not aligned to a float, a range overlapping a bound one, or a name
 * bound at another address (logged, naming it); NF_ERR_NO_MEMORY. The
 * name is interned (nf_intern.h). */
nf_status_t nf_region_bind(const void *base, size_t count, const char *name);
/* NF_ERR_INVALID when no region starts at base. */
nf_status_t nf_region_unbind(const void *base);

/* Changes with every bind and unbind: a cut taken at generation g holds
 * while the generation is g. 0 while nothing was ever bound. */
unsigned nf_region_generation(void);

/* Whether some bound region overlaps [x, x + m): O(log n). */
int nf_region_any(const float *x, size_t m);

/* A bound region's part inside a call's buffer. */
typedef struct nf_region_part {
    size_t off, m;                   /* elements, from the buffer's first */
    uint32_t id;                     /* the interned name (nf_intern.h) */
    const char *name;                /* nf_intern_name(id) */
    uint64_t hash;                   /* nf_intern_hash(id) */
} nf_region_part_t;

/* The bound regions overlapping [x, x + m) in address order, clipped to
 * it; at most max written, the number found returned. */
size_t nf_region_parts(const float *x, size_t m, nf_region_part_t *out, size_t max);

#endif
