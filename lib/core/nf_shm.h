/* SPDX-License-Identifier: BSD-3-Clause */
/* The node-shared segment the aggregation buffer lives in (shm.c). */
#ifndef NF_SHM_H
#define NF_SHM_H

#include <mpi.h>
#include <stddef.h>

#include "nfcoll.h"

typedef struct nf_shm {
    void *base;
    size_t bytes;
    double resident_frac; /* pages verified on the placement node */
} nf_shm_t;

/* Collective over node, once per segment (never per call): local rank 0
 * creates the object under a random name (O_EXCL; a name someone else
 * holds is skipped, never unlinked), the others open it, rank 0 unlinks
 * the name once all have it, and only then binds and first-touches the
 * memory. Every rank of node returns the same status; the rank that hit a
 * system error logs it with its errno. */
nf_status_t nf_shm_create(nf_shm_t *shm, size_t bytes, MPI_Comm node);
void nf_shm_destroy(nf_shm_t *shm);

#endif
