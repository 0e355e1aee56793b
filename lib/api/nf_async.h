/* SPDX-License-Identifier: BSD-3-Clause */
/* Nonblocking calls (async.c): issue, and the requests MPI holds for them;
 * the progress engine runs them (nf_engine.h). docs/design.md, "The
 * progress engine". */
#ifndef NF_ASYNC_H
#define NF_ASYNC_H

#include <mpi.h>

#include "nf_run.h"

/* Start one nonblocking allreduce with valid arguments on `route` (-1:
 * admission decides) and set *request. It never starts a collective on
 * a->comm and never waits for other ranks at issue (docs/design.md,
 * "Communicator setup"), except a forced route where some rank has no
 * progress thread, which runs at issue. Returns an MPI error code, raised on
 * a->comm's handler, for a failure at issue; the call's own failure is the
 * request's. */
int nf_async_iallreduce(const nf_run_args_t *a, int route, MPI_Request *request);

#endif
