/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI handles to the small enums of nf_types.h, from that one table
 * (handles.c): what admission, the policy and the trace match on. */
#ifndef NF_HANDLES_H
#define NF_HANDLES_H

#include <mpi.h>

#include "nf_types.h"

/* NF_DT_DERIVED for a derived datatype, NF_DT_OTHER for a predefined one
 * the table does not name. */
nf_dtype_t nf_dtype_of(MPI_Datatype dt);
/* NF_OP_USER for a user-defined op. */
nf_opkind_t nf_opkind_of(MPI_Op op);

#endif
