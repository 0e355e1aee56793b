/* SPDX-License-Identifier: BSD-3-Clause */
/* The steps of the PMPI shim (shim.c), for its C MPI_* entry points and the
 * Fortran ones (fortran.c): both ways in take the same checks, the same
 * re-entry guard and the same route. */
#ifndef NF_SHIM_H
#define NF_SHIM_H

#include <mpi.h>

/* MPI_Init (provided NULL) and MPI_Init_thread: PMPI_Init or
 * PMPI_Init_thread, asking for MPI_THREAD_MULTIPLE when the progress
 * thread may run (*provided: the level asked for, capped by MPI's), then
 * nf_shim_after_init. Returns PMPI's code. */
int nf_shim_init(int *argc, char ***argv, int required, int *provided);

/* After a successful PMPI_Init or PMPI_Init_thread: the ranks agree whether
 * libnfcoll engages (sets nf_ctx.intercept). Collective on MPI_COMM_WORLD. */
void nf_shim_after_init(void);

/* Before PMPI_Finalize: the stats report, when the ranks agreed on one. */
void nf_shim_before_finalize(void);
/* MPI_Query_thread's answer: the level MPI_Init_thread reported to the
 * program when libnfcoll asked MPI for more, else PMPI's. */
int nf_shim_query_thread(int *provided);

/* An MPI_Allreduce once nf_ctx.intercept is set, with C handles and C's
 * MPI_IN_PLACE and MPI_BOTTOM: bad arguments and re-entry go to
 * PMPI_Allreduce, the rest to admission. Returns an MPI error code. */
int nf_shim_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm);

/* An MPI_Iallreduce once nf_ctx.intercept is set, as nf_shim_allreduce:
 * bad arguments and re-entry go to PMPI_Iallreduce. */
int nf_shim_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Request *request);

#endif
