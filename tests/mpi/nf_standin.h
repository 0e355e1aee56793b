/* SPDX-License-Identifier: BSD-3-Clause */
/* What the PMPI stand-ins of the tests share (tests/mpi/test_errcode.c,
 * test_iallreduce.c, test_wire.c; tests/python/fail_pmpi.c): a program or
 * preload that defines PMPI_Xxx itself, so that libnfcoll's calls reach it
 * first, and passes them on to MPI's own. */
#ifndef NF_STANDIN_H
#define NF_STANDIN_H

#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>

/* Exported: the tests build with -fvisibility=hidden, and MPICH's mpi.h,
 * unlike Open MPI's, does not declare PMPI_* with default visibility. */
#define NFT_EXPORT __attribute__((visibility("default")))

/* MPI's own fn (the definition after this object's), looked up once;
 * abort without it. A GNU statement expression, typed as fn itself. */
#define NFT_NEXT(fn)                                                                    \
    ({                                                                                  \
        static __typeof__(&fn) nft_next_;                                               \
        if (nft_next_ == NULL && (nft_next_ = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn)) == NULL) \
            abort();                                                                    \
        nft_next_;                                                                      \
    })

#endif
