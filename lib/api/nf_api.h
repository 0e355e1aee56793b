/* The API layer's own entry points (init.c, api.c), for the shim. */
#ifndef NF_API_H
#define NF_API_H

#include "nf_run.h"

/* Idempotent, thread-safe; needs MPI initialized. NF_OK or a reason. */
nf_status_t nf_init(void);

/* MPI_SUCCESS, or the MPI error code of a bad argument (count < 0,
 * MPI_COMM_NULL, aliased buffers, a NULL buffer of a datatype the float
 * routes take: nf_run_float). */
int nf_api_check(const nf_run_args_t *a);

/* One allreduce with valid arguments, on `route` (-1: admission decides).
 * Returns an MPI error code after invoking the communicator's error
 * handler for a failure. */
int nf_api_allreduce(const nf_run_args_t *a, int route);

#endif
