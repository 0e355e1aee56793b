/* SPDX-License-Identifier: BSD-3-Clause */
/* The route runner (run.c): runs one call on a route admission already
 * chose, on an already-resolved communicator, with the fallbacks only this
 * layer can see (the call does not fit the route, capacity, NaN/Inf). */
#ifndef NF_RUN_H
#define NF_RUN_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>

#include "nf_coll.h"
#include "nf_comm.h"

typedef struct nf_run_args {
    const void *sendbuf;
    void *recvbuf;
    int count;
    MPI_Datatype datatype;
    MPI_Op op;
    MPI_Comm comm;       /* the user's communicator (PMPI calls) */
    int64_t bytes;       /* count * type size when the caller knows it, else -1 */
    int health;          /* measure the health signals (nf_call_t) */
    double loss;         /* this rank's reported loss, NAN if none */
    double *loss_mean;   /* out when not NULL: the ranks' mean loss, NAN if none */
    nf_status_t *after;  /* out when not NULL: this rank's own error in a call that
                            completed on every rank (a residual NFCOLL_CXL=require
                            refused), kept apart from the call's status so that
                            what every rank records of the call stays alike; NULL:
                            returned as the call's status */
} nf_run_args_t;

/* The arguments of one MPI_Allreduce-shaped call: no known byte count, no
 * health, no loss, outputs none. The one initializer every entry point
 * uses. */
#define NF_RUN_ARGS(sendbuf, recvbuf, count, datatype, op, comm)                            \
    ((nf_run_args_t){.sendbuf = (sendbuf), .recvbuf = (recvbuf), .count = (count),          \
                     .datatype = (datatype), .op = (op), .comm = (comm), .bytes = -1,       \
                     .health = 0, .loss = NAN, .loss_mean = NULL, .after = NULL})

/* Run a on route; ef < 0 and gamma < 0 inherit the settings (ef_decay
 * always does). c may be NULL (no state for this communicator): the call
 * goes to PMPI. Calls the route cannot take go to PMPI and are counted as
 * a fallback by reason. */
nf_status_t nf_run(nf_comm_t *c, const nf_run_args_t *a, nf_route_t route, int ef, double gamma);

/* Run a call cut into segments covering [0, count), each on its own route
 * (a pmpi segment of a fused call runs fp32; one segment covering the call
 * is nf_run). Segments' ef, gamma and ef_decay < 0 inherit the settings.
 * The same fallbacks as nf_run apply to the whole call. seg is written to (residuals,
 * what ran). */
nf_status_t nf_run_plan(nf_comm_t *c, const nf_run_args_t *a, nf_seg_t *seg, size_t nseg);

/* Calibration's shadow run of a fitting call (float sum, ready comm,
 * m > 0) into r, with the residuals of the caller's table shadow (NULL:
 * without error feedback) and no stats. Segments' routes are used as
 * given; each seg's `ran` says whether it ran on its route or on a
 * fallback's fp32. */
nf_status_t nf_run_shadow(nf_comm_t *c, nf_residual_table_t *shadow, const float *x, float *r,
                          size_t m, nf_seg_t *seg, size_t nseg);

/* 1 if fp32 and the low-bit routes take dt: a 4-byte float, MPI_FLOAT or
 * Fortran's MPI_REAL or MPI_REAL4. */
int nf_run_float(MPI_Datatype dt);


/* PMPI_Allreduce, counted under pmpi. */
nf_status_t nf_run_pmpi(const nf_run_args_t *a, int comm_size);

/* Count a under pmpi, for a call the caller hands to PMPI itself
 * (PMPI_Iallreduce). */
void nf_run_pmpi_count(const nf_run_args_t *a, int comm_size);

/* A communicator's size for the traffic model without libnfcoll state (1
 * for an intercommunicator or a bad handle). */
int nf_run_size(MPI_Comm comm);

#endif
