/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process context: everything libnfcoll keeps per process, in one place,
 * with an explicit state. The API layer fills in the configuration at init
 * (settings, kernels, the policy's hash); the layers below read it and never
 * reach up for it. docs/design.md, "Process context".
 */
#ifndef NF_CTX_H
#define NF_CTX_H

#include <mpi.h>
#include <stdint.h>

#include "nfcoll.h"
#include "nf_kernels.h"
#include "nf_settings.h"

typedef enum nf_state {
    NF_STATE_UNINIT = 0, /* nf_ctx_init has not run (or finalize has) */
    NF_STATE_READY,      /* routes usable */
    NF_STATE_FAILED,     /* this rank could not initialize: every call pmpi */
    NF_STATE_DISABLED    /* some rank could not (agreed): every call pmpi */
} nf_state_t;

/* What the API layer decides once and passes down. */
typedef struct nf_config {
    const nf_settings_t *settings;
    const nf_kernels_t *kernels;
    uint64_t policy_hash; /* what ranks compare: 0 without a policy */
    int policy_cxl_node;  /* the policy's cxl_node, -1 when unset */
    int threads;          /* this rank can run progress threads (NFCOLL_PROGRESS,
                             and MPI gave MPI_THREAD_MULTIPLE) */
} nf_config_t;

#define NF_ENGAGED_UNKNOWN (-1)

typedef struct nf_ctx {
    nf_state_t state;
    nf_status_t init_status;   /* why FAILED */
    nf_config_t cfg;
    const nf_kernels_t *k;     /* == cfg.kernels, one load on the hot path */
    int comm_keyval;           /* caches nf_comm_t on communicators */
    MPI_Datatype line_type;    /* one 64-byte line */
    /* Agreed across MPI_COMM_WORLD at MPI_Init by the shim: */
    int intercept;             /* MPI_Allreduce goes through libnfcoll */
    int engaged;               /* calls are decided by admission: 1, 0, or
                                  NF_ENGAGED_UNKNOWN (MPI_Init did not come
                                  through the shim: decided per communicator,
                                  where a policy mismatch is caught) */
    int report_stats;          /* every rank takes part in the report */
} nf_ctx_t;

extern nf_ctx_t nf_ctx;

/* Set up MPI objects (keyvals, line type) and placement's configuration.
 * Sets state READY or FAILED; returns the status. Not thread-safe: the API
 * layer serialises it. */
nf_status_t nf_ctx_init(const nf_config_t *cfg);
/* Free every communicator's state and the MPI objects; state UNINIT. */
void nf_ctx_finalize(void);

static inline int nf_ctx_ready(void) { return nf_ctx.state == NF_STATE_READY; }

/* A failed MPI call (docs/design.md, "Errors"). Its status is NF_ERR_MPI;
 * its error code, whatever int the MPI returned (MPICH's carry class and
 * ring bits and can be any positive int), and whether MPI has raised it
 * already are kept apart, in this thread's record of its last MPI failure,
 * for the API to return. Calls on libnfcoll's private communicators return
 * their errors (MPI_ERRORS_RETURN) and the API raises them once on the
 * user's communicator; a call on the user's own communicator has had its
 * handler run by MPI already: it is "raised" and the API does not run the
 * handler again. nf_mpi_status* are the only makers of NF_ERR_MPI, so the
 * record belongs to the NF_ERR_MPI the thread returns: the function that
 * sees a failure returns it, and nothing on the way up makes another MPI
 * call whose failure it drops. */
typedef struct nf_mpi_err {
    int code;   /* MPI_SUCCESS: no failure recorded */
    int raised; /* the user's handler has run */
} nf_mpi_err_t;
extern __thread nf_mpi_err_t nf_mpi_err;

/* NF_OK for MPI_SUCCESS; else NF_ERR_MPI, rc recorded (raised or not). */
static inline nf_status_t nf_mpi_status(int rc)
{
    if (rc == MPI_SUCCESS)
        return NF_OK;
    nf_mpi_err = (nf_mpi_err_t){.code = rc, .raised = 0};
    return NF_ERR_MPI;
}
static inline nf_status_t nf_mpi_status_raised(int rc)
{
    if (rc == MPI_SUCCESS)
        return NF_OK;
    nf_mpi_err = (nf_mpi_err_t){.code = rc, .raised = 1};
    return NF_ERR_MPI;
}
/* A status from a call on the user's communicator: its handler has run. */
static inline nf_status_t nf_status_mark_raised(nf_status_t st)
{
    if (st == NF_ERR_MPI)
        nf_mpi_err.raised = 1;
    return st;
}
static inline int nf_status_raised(nf_status_t st)
{
    return st == NF_ERR_MPI && nf_mpi_err.raised;
}
/* The MPI error code an API entry point returns for a status: an MPI
 * failure's own code, unchanged; the others mapped to MPI error classes. */
int nf_status_to_mpi(nf_status_t st);

#endif
