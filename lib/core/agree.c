/* SPDX-License-Identifier: BSD-3-Clause */
/* Agreement across ranks (nf_agree.h). */
#include "config.h"

#include "nf_agree.h"
#include "nf_ctx.h"

nf_status_t nf_agree_status(MPI_Comm comm, nf_status_t mine)
{
    int bad = mine != NF_OK, any = 1;
    nf_status_t st = nf_mpi_status(PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm));
    if (st != NF_OK)
        return st;
    return any == 0 ? NF_OK : (mine != NF_OK ? mine : NF_ERR_NO_MEMORY);
}

nf_status_t nf_agree_any(MPI_Comm comm, unsigned mine, unsigned *any)
{
    return nf_mpi_status(PMPI_Allreduce(&mine, any, 1, MPI_UNSIGNED, MPI_BOR, comm));
}

/* One allreduce: a hash and its complement under MAX tell whether every
 * rank holds the same value (max(h) == h and max(~h) == ~h only if all
 * equal h); flags that must hold everywhere travel negated. */
nf_status_t nf_agree_comm(MPI_Comm comm, const nf_agree_comm_in_t *in,
                          nf_agree_comm_out_t *out)
{
    uint64_t v[6] = {in->policy_hash, ~in->policy_hash, in->name_hash, ~in->name_hash,
                     !in->lanes_fit, !in->alloc_ok};
    uint64_t w[6];
    nf_status_t st = nf_mpi_status(PMPI_Allreduce(v, w, 6, MPI_UINT64_T, MPI_MAX, comm));
    if (st != NF_OK)
        return st;
    out->same_policy = w[0] == in->policy_hash && ~w[1] == in->policy_hash;
    out->same_name = w[2] == in->name_hash && ~w[3] == in->name_hash;
    out->lanes_fit = w[4] == 0;
    out->alloc_ok = w[5] == 0;
    return NF_OK;
}

/* One MAX allreduce: the severity above the rank's complement (the highest
 * severity, then the lowest rank), and the value with its complement. */
nf_status_t nf_agree_worst(MPI_Comm comm, int rank, unsigned severity, uint64_t value,
                           nf_agree_worst_t *out)
{
    uint64_t v[3] = {(uint64_t)severity << 32 | (UINT32_MAX - (uint32_t)rank), value, ~value};
    uint64_t w[3];
    nf_status_t st = nf_mpi_status(PMPI_Allreduce(v, w, 3, MPI_UINT64_T, MPI_MAX, comm));
    if (st != NF_OK)
        return st;
    out->severity = (unsigned)(w[0] >> 32);
    out->rank = out->severity > 0 ? (int)(UINT32_MAX - (uint32_t)w[0]) : -1;
    out->max = w[1];
    out->same = w[1] == value && ~w[2] == value;
    return NF_OK;
}

nf_status_t nf_agree_code(MPI_Comm comm, int mine, int *code)
{
    int v = mine > 0 ? mine : mine != MPI_SUCCESS ? MPI_ERR_OTHER : MPI_SUCCESS;
    return nf_mpi_status(PMPI_Allreduce(&v, code, 1, MPI_INT, MPI_MAX, comm));
}
