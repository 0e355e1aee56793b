/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fortran entry points. Open MPI's Fortran bindings call PMPI_* directly, so
 * the C shim never sees a Fortran program's MPI_INIT, MPI_ALLREDUCE,
 * MPI_COMM_DUP or MPI_FINALIZE. These are the same routines under the names Fortran calls:
 * mpif.h and `use mpi` in the four manglings a compiler may use (MPI_X,
 * mpi_x, mpi_x_, mpi_x__), and `use mpi_f08` as Open MPI 4.x builds it
 * (mpi_x_f08_, whose ierror is optional: NULL when absent). Each converts
 * what Fortran passes as Open MPI's own bindings do (handles through
 * PMPI_*_f2c, the MPI_IN_PLACE and MPI_BOTTOM sentinels) and takes the
 * shim's steps (nf_shim.h), so it behaves as the C entry point would.
 * Nothing here needs the Fortran MPI libraries: a C program linked with
 * libnfcoll never calls these.
 *
 * MPICH (docs/design.md, "MPI families"): its mpif.h and `use mpi` names are
 * the same four, so these take them over too, with MPICH's sentinels and
 * integer handles; its mpi_f08 MPI_Init and MPI_Finalize (mpi_x_f08_, calling
 * PMPI_*) are these; its mpi_f08 MPI_Allreduce (mpi_allreduce_f08ts_,
 * descriptors) converts its own sentinels and calls the C MPI_Allreduce,
 * which is the shim's.
 *
 * Not wrapped: Open MPI's other names for the same code (MPI_Allreduce_f,
 * MPI_Allreduce_f08, ompi_allreduce_f), which no Fortran program calls and
 * the last of which is also what PMPI_ALLREDUCE reaches from mpi_f08; the
 * mpi_f08 entries of releases that name them otherwise (buffers passed as
 * descriptors): their calls reach MPI untouched.
 */
#include "config.h"

#include <stddef.h>

#include "nf_ctx.h"
#include "nf_export.h"
#include "nf_shim.h"

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM are variables in common blocks:
 * their address is the sentinel. Open MPI names the blocks with its Fortran
 * compiler's mangling (gfortran: mpi_fortran_in_place_) and defines them in
 * libmpi; a Fortran program's own copy of the block takes over by symbol
 * interposition, and these references resolve to that same copy, preloaded
 * or linked. Weak: an unresolved one is NULL, and an MPI that has none still
 * links. MPICH's mpif.h and `use mpi` put both in one block, MPIPRIV1:
 * MPI_BOTTOM first, MPI_IN_PLACE next (an INTEGER each). */
#define NF_F_WEAK __attribute__((weak, visibility("default")))
extern int MPI_FORTRAN_IN_PLACE NF_F_WEAK, mpi_fortran_in_place NF_F_WEAK,
    mpi_fortran_in_place_ NF_F_WEAK, mpi_fortran_in_place__ NF_F_WEAK;
extern int MPI_FORTRAN_BOTTOM NF_F_WEAK, mpi_fortran_bottom NF_F_WEAK,
    mpi_fortran_bottom_ NF_F_WEAK, mpi_fortran_bottom__ NF_F_WEAK;
struct nf_f_mpich_priv1 {
    int bottom, in_place;
};
extern struct nf_f_mpich_priv1 MPIPRIV1 NF_F_WEAK, mpipriv1 NF_F_WEAK, mpipriv1_ NF_F_WEAK,
    mpipriv1__ NF_F_WEAK;

/* The MPICH block holding P, if any (the one the program's mangling names). */
static inline const struct nf_f_mpich_priv1 *nf_f_mpich(const void *p)
{
    const struct nf_f_mpich_priv1 *const blocks[] = {&mpipriv1_, &MPIPRIV1, &mpipriv1, &mpipriv1__};
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
        if (blocks[i] != NULL && (p == &blocks[i]->bottom || p == &blocks[i]->in_place))
            return blocks[i];
    return NULL;
}

static inline int nf_f_in_place(const void *p)
{
    if (p == NULL)
        return 0;
    if (p == &mpi_fortran_in_place_ || p == &MPI_FORTRAN_IN_PLACE || p == &mpi_fortran_in_place ||
        p == &mpi_fortran_in_place__)
        return 1;
    const struct nf_f_mpich_priv1 *b = nf_f_mpich(p);
    return b != NULL && p == &b->in_place;
}

static inline void *nf_f_bottom(void *p)
{
    if (p == NULL)
        return p;
    if (p == &mpi_fortran_bottom_ || p == &MPI_FORTRAN_BOTTOM || p == &mpi_fortran_bottom ||
        p == &mpi_fortran_bottom__)
        return MPI_BOTTOM;
    const struct nf_f_mpich_priv1 *b = nf_f_mpich(p);
    return b != NULL && p == &b->bottom ? MPI_BOTTOM : p;
}

static void nf_f_init(MPI_Fint *ierr)
{
    int argc = 0; /* what Open MPI's MPI_INIT passes */
    char **argv = NULL;
    int rc = nf_shim_init(&argc, &argv, MPI_THREAD_SINGLE, NULL); /* as C's MPI_Init */
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

static void nf_f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int argc = 0, got = 0;
    char **argv = NULL;
    int rc = nf_shim_init(&argc, &argv, (int)*required, &got); /* as C's MPI_Init_thread */
    if (rc == MPI_SUCCESS)
        *provided = (MPI_Fint)got;
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

static void nf_f_finalize(MPI_Fint *ierr)
{
    nf_shim_before_finalize();
    int rc = PMPI_Finalize();
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* Not engaged: what the MPI's own MPI_ALLREDUCE does. A Fortran handle that
 * names nothing converts to NULL in Open MPI; MPICH's handles are the
 * integers themselves, and 0 is none of them. Either way the zero handle
 * goes to MPI, which reports it its own way. */
static void nf_f_allreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                           MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    MPI_Datatype dt = PMPI_Type_f2c(*datatype);
    MPI_Op o = PMPI_Op_f2c(*op);
    const void *s = nf_f_in_place(sendbuf) ? MPI_IN_PLACE : nf_f_bottom(sendbuf);
    void *r = nf_f_bottom(recvbuf);
    int rc;
    if (__builtin_expect(!nf_ctx.intercept, 1) || c == (MPI_Comm)0 || dt == (MPI_Datatype)0 ||
        o == (MPI_Op)0)
        rc = PMPI_Allreduce(s, r, (int)*count, dt, o, c);
    else
        rc = nf_shim_allreduce(s, r, (int)*count, dt, o, c);
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* MPI_IALLREDUCE as MPI_ALLREDUCE; the request handle converted back. */
static void nf_f_iallreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                            MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    MPI_Datatype dt = PMPI_Type_f2c(*datatype);
    MPI_Op o = PMPI_Op_f2c(*op);
    const void *s = nf_f_in_place(sendbuf) ? MPI_IN_PLACE : nf_f_bottom(sendbuf);
    void *r = nf_f_bottom(recvbuf);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    if (__builtin_expect(!nf_ctx.intercept, 1) || c == (MPI_Comm)0 || dt == (MPI_Datatype)0 ||
        o == (MPI_Op)0) /* as nf_f_allreduce: handles are ints under MPICH */
        rc = PMPI_Iallreduce(s, r, (int)*count, dt, o, c, &req);
    else
        rc = nf_shim_iallreduce(s, r, (int)*count, dt, o, c, &req);
    if (rc == MPI_SUCCESS)
        *request = PMPI_Request_c2f(req);
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* The constructors a Fortran program makes its communicators with, so that
 * each is set up inside them as from C (shim.c, "communicator
 * constructors"): the C entry points, which are the shim's. */
static void nf_f_comm_dup(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm nc = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(PMPI_Comm_f2c(*comm), &nc);
    if (rc == MPI_SUCCESS)
        *newcomm = PMPI_Comm_c2f(nc);
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

static void nf_f_comm_split(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                            MPI_Fint *ierr)
{
    MPI_Comm nc = MPI_COMM_NULL;
    int rc = MPI_Comm_split(PMPI_Comm_f2c(*comm), (int)*color, (int)*key, &nc);
    if (rc == MPI_SUCCESS)
        *newcomm = PMPI_Comm_c2f(nc);
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

static void nf_f_comm_split_type(MPI_Fint *comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info,
                                 MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm nc = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(PMPI_Comm_f2c(*comm), (int)*type, (int)*key,
                                 PMPI_Info_f2c(*info), &nc);
    if (rc == MPI_SUCCESS)
        *newcomm = PMPI_Comm_c2f(nc);
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* The level MPI_INIT_THREAD reported (MPI_Query_thread, shim.c). */
static void nf_f_query_thread(MPI_Fint *provided, MPI_Fint *ierr)
{
    int level = MPI_THREAD_SINGLE;
    int rc = nf_shim_query_thread(&level);
    if (rc == MPI_SUCCESS)
        *provided = (MPI_Fint)level;
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* Every name an entry point is called by is an alias of its one body. */
#define NF_F_ALIAS(name, body, params) NF_EXPORT void name params __attribute__((alias(#body)));
#define NF_F_NAMES(UPPER, lower, body, params)                                                \
    NF_F_ALIAS(UPPER, body, params)                                                          \
    NF_F_ALIAS(lower, body, params)                                                          \
    NF_F_ALIAS(lower##_, body, params)                                                       \
    NF_F_ALIAS(lower##__, body, params)                                                      \
    NF_F_ALIAS(lower##_f08_, body, params)

NF_F_NAMES(MPI_INIT, mpi_init, nf_f_init, (MPI_Fint * ierr))
NF_F_NAMES(MPI_INIT_THREAD, mpi_init_thread, nf_f_init_thread,
           (MPI_Fint * required, MPI_Fint *provided, MPI_Fint *ierr))
NF_F_NAMES(MPI_FINALIZE, mpi_finalize, nf_f_finalize, (MPI_Fint * ierr))
NF_F_NAMES(MPI_QUERY_THREAD, mpi_query_thread, nf_f_query_thread,
           (MPI_Fint * provided, MPI_Fint *ierr))
NF_F_NAMES(MPI_ALLREDUCE, mpi_allreduce, nf_f_allreduce,
           (void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,
            MPI_Fint *comm, MPI_Fint *ierr))
NF_F_NAMES(MPI_IALLREDUCE, mpi_iallreduce, nf_f_iallreduce,
           (void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op,
            MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr))
NF_F_NAMES(MPI_COMM_DUP, mpi_comm_dup, nf_f_comm_dup,
           (MPI_Fint * comm, MPI_Fint *newcomm, MPI_Fint *ierr))
NF_F_NAMES(MPI_COMM_SPLIT, mpi_comm_split, nf_f_comm_split,
           (MPI_Fint * comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm, MPI_Fint *ierr))
NF_F_NAMES(MPI_COMM_SPLIT_TYPE, mpi_comm_split_type, nf_f_comm_split_type,
           (MPI_Fint * comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info, MPI_Fint *newcomm,
            MPI_Fint *ierr))
