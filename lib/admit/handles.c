/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI handles to nf_types.h enums. A handle that is not a compile-time
 * constant (Open MPI's are addresses of globals) cannot index an array, so
 * the table is searched; admission caches the result per communicator. */
#include "config.h"

#include <stddef.h>

#include "nf_handles.h"

#define NF_NO_HANDLE MPI_DATATYPE_NULL
#define NF_X_DT(e, s, h) {h, NF_DT_##e},
static const struct { MPI_Datatype h; nf_dtype_t dt; } nf_dt_handles[] = {
    NF_DATATYPES(NF_X_DT) NF_DATATYPE_ALIASES(NF_X_DT)};
#undef NF_X_DT
#undef NF_NO_HANDLE

#define NF_NO_HANDLE MPI_OP_NULL
#define NF_X_OP(e, s, h) {h, NF_OP_##e},
static const struct { MPI_Op h; nf_opkind_t op; } nf_op_handles[] = {NF_OPS(NF_X_OP)};
#undef NF_X_OP
#undef NF_NO_HANDLE

nf_dtype_t nf_dtype_of(MPI_Datatype dt)
{
    if (dt == MPI_DATATYPE_NULL)
        return NF_DT_OTHER;
    for (size_t i = 0; i < sizeof(nf_dt_handles) / sizeof(nf_dt_handles[0]); i++)
        if (nf_dt_handles[i].h == dt)
            return nf_dt_handles[i].dt;
    int ni, na, nd, combiner;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
        combiner != MPI_COMBINER_NAMED)
        return NF_DT_DERIVED;
    return NF_DT_OTHER;
}

nf_opkind_t nf_opkind_of(MPI_Op op)
{
    if (op == MPI_OP_NULL)
        return NF_OP_USER;
    for (size_t i = 0; i < sizeof(nf_op_handles) / sizeof(nf_op_handles[0]); i++)
        if (nf_op_handles[i].h == op)
            return nf_op_handles[i].op;
    return NF_OP_USER;
}
