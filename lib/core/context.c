/* SPDX-License-Identifier: BSD-3-Clause */
/* The process context (nf_ctx.h) and the status <-> MPI error mapping. */
#include "config.h"

#include "nf_ctx.h"
#include "nf_log.h"
#include "nf_placement.h"

nf_ctx_t nf_ctx = {.state = NF_STATE_UNINIT, .init_status = NF_ERR_INVALID,
                   .engaged = NF_ENGAGED_UNKNOWN,
                   .comm_keyval = MPI_KEYVAL_INVALID, .line_type = MPI_DATATYPE_NULL};

static nf_status_t nf_ctx_mpi_objects(void)
{
    nf_status_t st = nf_mpi_status(PMPI_Type_contiguous(NF_LINE_BYTES, MPI_BYTE, &nf_ctx.line_type));
    if (st == NF_OK)
        st = nf_mpi_status(PMPI_Type_commit(&nf_ctx.line_type));
    if (st != NF_OK)
        nf_log_error("cannot create an MPI datatype; libnfcoll disabled");
    return st;
}

nf_status_t nf_ctx_init(const nf_config_t *cfg)
{
    nf_place_config_t pc;
    nf_ctx.cfg = *cfg;
    nf_ctx.k = cfg->kernels;
    nf_place_config_from(cfg->settings, cfg->policy_cxl_node, &pc);
    nf_place_configure(&pc);
    nf_status_t st = NF_OK;
    /* Placement is set up with the first buffer it places; only a required
     * CXL node must be there from the start (init fails without it). */
    if (pc.mode == NF_CXL_REQUIRE)
        st = nf_place_init();
    if (st == NF_OK)
        st = nf_ctx_mpi_objects();
    nf_ctx.init_status = st;
    nf_ctx.state = st == NF_OK ? NF_STATE_READY : NF_STATE_FAILED;
    return st;
}

void nf_ctx_finalize(void)
{
    if (nf_ctx.line_type != MPI_DATATYPE_NULL)
        PMPI_Type_free(&nf_ctx.line_type);
    nf_place_finalize();
    nf_ctx.state = NF_STATE_UNINIT;
    nf_ctx.intercept = nf_ctx.report_stats = 0;
    nf_ctx.engaged = NF_ENGAGED_UNKNOWN;
}

__thread nf_mpi_err_t nf_mpi_err;

int nf_status_to_mpi(nf_status_t st)
{
    if (st == NF_OK)
        return MPI_SUCCESS;
    switch (st) {
    case NF_ERR_INVALID:
    case NF_ERR_PARSE: return MPI_ERR_ARG;
    case NF_ERR_NO_MEMORY:
    case NF_ERR_CAPACITY: return MPI_ERR_NO_MEM; /* e.g. the CXL node is full */
    case NF_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case NF_ERR_MPI: return nf_mpi_err.code != MPI_SUCCESS ? nf_mpi_err.code : MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;
    }
}
