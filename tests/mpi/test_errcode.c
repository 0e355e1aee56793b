/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI error codes through the API unchanged (docs/design.md, "Errors"),
 * whatever their size: MPICH-family MPIs return large codes with class and
 * ring bits. This program defines PMPI_Allgather, PMPI_Sendrecv and
 * PMPI_Allreduce itself, so libnfcoll's calls reach them first; armed, they
 * fail with a made-up large code on every rank alike (no rank waits), else
 * they call MPI's own. Run on 2 ranks as two pretend nodes
 * (NFCOLL_RANKS_PER_NODE=1), so an fp32 call's first exchange is the
 * verdict on libnfcoll's private communicator (a PMPI_Sendrecv between two
 * one-rank nodes, a PMPI_Allgather among more).
 *  - fp32 route: the private communicator's failure is raised once on the
 *    user's communicator (our handler sees the code) and returned;
 *  - pmpi route: PMPI_Allreduce on the user's communicator failed, and MPI
 *    runs the handler there itself (this stand-in does not): libnfcoll
 *    returns the code and runs no handler again.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "nfcoll.h"
#include "nf_standin.h"
#include "nf_testutil.h"

#define CODE_PRIVATE 0x7f000001 /* MPICH-like: above every old offset */
#define CODE_USER 0x7ffffffe    /* near INT_MAX */

static int armed_allgather, armed_allreduce; /* allgather: the verdict's exchange */
static int seen_code, seen_calls;

NFT_EXPORT int PMPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc,
                              MPI_Datatype rt, MPI_Comm comm)
{
    if (armed_allgather) {
        armed_allgather = 0;
        return CODE_PRIVATE;
    }
    return NFT_NEXT(PMPI_Allgather)(sb, sc, st, rb, rc, rt, comm);
}

NFT_EXPORT int PMPI_Sendrecv(const void *sb, int sc, MPI_Datatype st, int dest, int stag, void *rb,
                             int rc, MPI_Datatype rt, int src, int rtag, MPI_Comm comm,
                             MPI_Status *status)
{
    if (armed_allgather) {
        armed_allgather = 0;
        return CODE_PRIVATE;
    }
    return NFT_NEXT(PMPI_Sendrecv)(sb, sc, st, dest, stag, rb, rc, rt, src, rtag, comm, status);
}

NFT_EXPORT int PMPI_Allreduce(const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm comm)
{
    if (armed_allreduce) {
        armed_allreduce = 0;
        return CODE_USER;
    }
    return NFT_NEXT(PMPI_Allreduce)(sb, rb, n, t, op, comm);
}

static void handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    seen_code = *code;
    seen_calls++;
}

int main(int argc, char **argv)
{
    float x[64], r[64];
    int bad = 0, rc;
    MPI_Errhandler eh;

    MPI_Init(&argc, &argv);
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    for (int i = 0; i < 64; i++)
        x[i] = (float)i;
    /* Warm up: libnfcoll's state for the communicator, nothing armed. */
    rc = NF_Allreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32);
    bad |= nft_check(rc == MPI_SUCCESS && seen_calls == 0, "warm-up", "rc %d, handler %d", rc,
                     seen_calls);

    armed_allreduce = 1;
    rc = NF_Allreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_PMPI);
    bad |= nft_check(rc == CODE_USER, "pmpi route", "returned %d (%#x), want %#x", rc,
                     (unsigned)rc, CODE_USER);
    bad |= nft_check(seen_calls == 0, "pmpi route", "handler ran %d times (MPI ran it already)",
                     seen_calls);

    armed_allgather = 1;
    rc = NF_Allreduce_route(x, r, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, NF_ROUTE_FP32);
    bad |= nft_check(armed_allgather == 0, "fp32 route", "no verdict exchange (one node?)");
    bad |= nft_check(rc == CODE_PRIVATE, "fp32 route", "returned %d (%#x), want %#x", rc,
                     (unsigned)rc, CODE_PRIVATE);
    bad |= nft_check(seen_calls == 1 && seen_code == CODE_PRIVATE, "fp32 route",
                     "handler ran %d times, last with %d (%#x); want once with %#x", seen_calls,
                     seen_code, (unsigned)seen_code, CODE_PRIVATE);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);
    if (!bad && nft_rank() == 0)
        printf("PASS error codes 0x7f000001 (private communicator) and 0x7ffffffe (user's) "
               "came back unchanged, the handler ran once\n");
    MPI_Finalize();
    return bad;
}
