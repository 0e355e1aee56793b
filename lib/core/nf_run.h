/* The route runner (run.c): runs one call on a route admission already
 * chose, on an already-resolved communicator, with the fallbacks only this
 * layer can see (the call does not fit the route, capacity, NaN/Inf). */
#ifndef NF_RUN_H
#define NF_RUN_H

#include <mpi.h>
#include <stdint.h>

#include "nf_comm.h"

typedef struct nf_run_args {
    const void *sendbuf;
    void *recvbuf;
    int count;
    MPI_Datatype datatype;
    MPI_Op op;
    MPI_Comm comm;       /* the user's communicator (PMPI calls) */
    int64_t bytes;       /* count * type size when the caller knows it, else -1 */
} nf_run_args_t;

/* Run a on route; ef < 0 and gamma < 0 inherit the settings. c may be NULL
 * (no state for this communicator): the call goes to PMPI. Calls the route
 * cannot take go to PMPI and are counted as a fallback by reason. */
nf_status_t nf_run(nf_comm_t *c, const nf_run_args_t *a, nf_route_t route, int ef, double gamma);

/* 1 if fp32 and the low-bit routes take dt: a 4-byte float, MPI_FLOAT or
 * Fortran's MPI_REAL or MPI_REAL4. */
int nf_run_float(MPI_Datatype dt);

/* PMPI_Allreduce, counted under pmpi. */
nf_status_t nf_run_pmpi(const nf_run_args_t *a, int comm_size);

#endif
