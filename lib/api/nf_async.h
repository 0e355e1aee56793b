/* Nonblocking calls and the progress thread (async.c). docs/design.md,
 * "Nonblocking calls". */
#ifndef NF_ASYNC_H
#define NF_ASYNC_H

#include <mpi.h>

#include "nf_run.h"

/* Start one nonblocking allreduce with valid arguments on `route` (-1:
 * admission decides) and set *request. Collective on a->comm the first
 * time it runs there (agreement, duplicate). Returns an MPI error code,
 * raised on a->comm's handler, for a failure at issue; the call's own
 * failure is the request's. */
int nf_async_iallreduce(const nf_run_args_t *a, int route, MPI_Request *request);

/* Sleep until the progress thread has completed every queued call among
 * reqs[0..n) (MPI_Wait and MPI_Waitall through the shim, before PMPI's
 * wait, which would busy-poll against the thread for its core). Returns at
 * once when none of them is queued: other requests, calls run at issue. */
void nf_async_wait(const MPI_Request *reqs, int n);

/* Run what is queued, stop the progress thread and join it. Before
 * PMPI_Finalize (and again, doing nothing, at the MPI_COMM_SELF attribute's
 * deletion). */
void nf_async_finalize(void);

#endif
