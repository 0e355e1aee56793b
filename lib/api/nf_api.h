/* SPDX-License-Identifier: BSD-3-Clause */
/* The API layer's own entry points (init.c, api.c), for the shim. */
#ifndef NF_API_H
#define NF_API_H

#include "nf_run.h"

/* Idempotent, thread-safe; needs MPI initialized. NF_OK or a reason. */
nf_status_t nf_init(void);

/* Run fn at MPI_Finalize (the MPI_COMM_SELF attribute's deletion), before
 * the state is freed: for a module above this one (the progress thread). */
void nf_init_at_finalize(void (*fn)(void));

/* MPI_SUCCESS, or the MPI error code of a bad argument (count < 0,
 * MPI_COMM_NULL, aliased buffers, a NULL buffer of a datatype the float
 * routes take: nf_run_float). */
int nf_api_check(const nf_run_args_t *a);

/* One allreduce with valid arguments, on `route` (-1: admission decides).
 * Returns an MPI error code after invoking the communicator's error
 * handler for a failure. */
int nf_api_allreduce(const nf_run_args_t *a, int route);

/* The state a blocking call on a->comm runs with, made there when the
 * communicator has none (collective on it: nf_comm_get); the caller then
 * drains the engine (nf_engine_drain), which sets it up. NULL when
 * libnfcoll is not engaged for the call (it is PMPI's, untouched). */
nf_status_t nf_api_resolve(const nf_run_args_t *a, int route, nf_comm_t **c);
/* The same for a nonblocking call, never collective: the state comm
 * already has, or NULL; *wanted says whether libnfcoll would take the call
 * (so NULL with *wanted set is a communicator not set up yet). */
nf_status_t nf_api_lookup(const nf_run_args_t *a, int route, int *wanted, nf_comm_t **c);
/* Whether admission decides calls at all (libnfcoll initialized and, where
 * MPI_Init agreed, engaged there): local, no MPI call. */
int nf_api_engaged(void);

/* Run one call with resolved state c (NULL: pmpi), route -1 for
 * admission; PMPI calls on a->comm, which may be the progress thread's
 * duplicate of c's. The status, not raised on the user's handler. */
nf_status_t nf_api_exec(nf_comm_t *c, const nf_run_args_t *a, int route);

/* Hand code to comm's error handler (MPI_COMM_WORLD's for
 * MPI_COMM_NULL) and return it. */
int nf_api_raise(MPI_Comm comm, int code);

#endif
