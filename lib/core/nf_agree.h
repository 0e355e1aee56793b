/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every decision ranks must take identically is agreed here, and only here,
 * so it can be audited on its own: each function is collective over the
 * communicator it is given and returns the same result on every rank.
 * docs/design.md, "Agreement".
 */
#ifndef NF_AGREE_H
#define NF_AGREE_H

#include <mpi.h>
#include <stdint.h>

#include "nfcoll.h"

/* The worst status over comm: NF_OK only if every rank passed NF_OK; a
 * rank that passed NF_OK while another failed gets NF_ERR_NO_MEMORY (or the
 * MPI error of the agreement itself). */
nf_status_t nf_agree_status(MPI_Comm comm, nf_status_t mine);

/* Bitwise OR of each rank's flags. */
nf_status_t nf_agree_any(MPI_Comm comm, unsigned mine, unsigned *any);

/* What a communicator's ranks must hold alike before libnfcoll's routes
 * run on it. */
typedef struct nf_agree_comm_in {
    uint64_t policy_hash; /* from the process context */
    uint64_t name_hash;   /* the communicator's name (rules match on it) */
    int lanes_fit;        /* the size fits NFCOLL_COUNT_BITS (per process) */
    int alloc_ok;         /* this rank's small allocations worked */
} nf_agree_comm_in_t;

typedef struct nf_agree_comm_out {
    int same_policy, same_name, lanes_fit, alloc_ok; /* over all ranks */
} nf_agree_comm_out_t;

nf_status_t nf_agree_comm(MPI_Comm comm, const nf_agree_comm_in_t *in,
                          nf_agree_comm_out_t *out);

/* The worst outcome over comm's ranks and one value they must share: each
 * rank gives a severity (0: fine) and a value; out gets the highest
 * severity, the lowest rank that gave it (-1 when all were fine), the
 * largest value, and whether every rank gave the same value. */
typedef struct nf_agree_worst {
    unsigned severity;
    int rank;
    uint64_t max;
    int same;
} nf_agree_worst_t;

nf_status_t nf_agree_worst(MPI_Comm comm, int rank, unsigned severity, uint64_t value,
                           nf_agree_worst_t *out);

/* An MPI error code for every rank: MPI_SUCCESS when every rank passed
 * MPI_SUCCESS, else the largest code a rank passed (codes are positive;
 * anything else counts as MPI_ERR_OTHER). */
nf_status_t nf_agree_code(MPI_Comm comm, int mine, int *code);

#endif
