/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * LD_PRELOAD for the Python tests' failures (tests/python_api.sh,
 * tests/python_ddp.sh): PMPI_Allreduce, PMPI_Allgather and PMPI_Sendrecv
 * stand-ins, as in tests/mpi/test_errcode.c, that fail with a made-up code
 * once armed by nft_fail_next() (ctypes) and otherwise call MPI's own
 * (arming the allgather arms the sendrecv too: the verdict's exchange is a
 * PMPI_Sendrecv between two one-rank nodes, a PMPI_Allgather among more). The tests arm
 * them on every rank alike, so no rank waits for another.
 * Test code only: libnfcoll has no such hook.
 */
#define _GNU_SOURCE 1
#include <mpi.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../mpi/nf_standin.h"

#define NFT_CODE 0x7ffffffe /* near INT_MAX, as large as MPICH's codes */

static atomic_int armed_allreduce, armed_allgather;

/* The build hides symbols by default: these must interpose. */
NFT_EXPORT int nft_fail_next(int allreduce, int allgather);
NFT_EXPORT int PMPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm comm);
NFT_EXPORT int PMPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc,
                              MPI_Datatype rt, MPI_Comm comm);
NFT_EXPORT int PMPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb,
                             int rc, MPI_Datatype rt, int src, int rtag, MPI_Comm comm,
                             MPI_Status *status);

/* Arm the next PMPI_Allreduce and/or verdict exchange (PMPI_Allgather or
 * PMPI_Sendrecv, whichever thread makes it) to fail; returns the code they will return. */
int nft_fail_next(int allreduce, int allgather)
{
    atomic_store(&armed_allreduce, allreduce != 0);
    atomic_store(&armed_allgather, allgather != 0);
    return NFT_CODE;
}

int PMPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    if (atomic_exchange(&armed_allreduce, 0))
        return NFT_CODE;
    return NFT_NEXT(PMPI_Allreduce)(sb, rb, n, t, op, comm);
}

int PMPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                   MPI_Comm comm)
{
    if (atomic_exchange(&armed_allgather, 0))
        return NFT_CODE;
    return NFT_NEXT(PMPI_Allgather)(sb, sc, st, rb, rc, rt, comm);
}

int PMPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb, int rc,
                  MPI_Datatype rt, int src, int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (atomic_exchange(&armed_allgather, 0))
        return NFT_CODE;
    return NFT_NEXT(PMPI_Sendrecv)(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status);
}
