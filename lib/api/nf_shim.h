/* The steps of the PMPI shim (shim.c), for its C MPI_* entry points and the
 * Fortran ones (fortran.c): both ways in take the same checks, the same
 * re-entry guard and the same route. */
#ifndef NF_SHIM_H
#define NF_SHIM_H

#include <mpi.h>

/* After a successful PMPI_Init or PMPI_Init_thread: the ranks agree whether
 * libnfcoll engages (sets nf_ctx.intercept). Collective on MPI_COMM_WORLD. */
void nf_shim_after_init(void);

/* Before PMPI_Finalize: the stats report, when the ranks agreed on one. */
void nf_shim_before_finalize(void);

/* An MPI_Allreduce once nf_ctx.intercept is set, with C handles and C's
 * MPI_IN_PLACE and MPI_BOTTOM: bad arguments and re-entry go to
 * PMPI_Allreduce, the rest to admission. Returns an MPI error code. */
int nf_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm);

#endif
