/*
 * PMPI interposition: the MPI_* entry points libnfcoll defines, so that an
 * unmodified program uses it by relinking (-lnfcoll before -lmpi) or with
 * LD_PRELOAD=libnfcoll.so. The shim holds no arithmetic: it asks admission
 * and calls PMPI_* only. With no policy, MPI_Allreduce is one branch in
 * front of PMPI_Allreduce.
 *
 * MPI_Comm_free is not wrapped: libnfcoll's state hangs off a communicator
 * attribute whose delete callback frees it, which also covers
 * MPI_Comm_disconnect and frees issued from Fortran.
 */
#include "config.h"

#include "nf_core.h"

/* Set while libnfcoll runs a call on this thread: an MPI_Allreduce reached
 * from inside (a tool stacked under us) goes straight to PMPI. */
static __thread int nf_inside;
static int nf_shim_on; /* a policy, stats or a trace were asked for */

static void nf_shim_after_init(void)
{
    const nf_settings_t *s = nf_settings_load();
    /* Without a policy, stats or a trace there is nothing to set up: stay invisible. */
    if (s->policy == NULL && s->stats == NULL && s->trace == NULL)
        return;
    nf_inside = 1;
    nf_init();
    nf_shim_on = 1;
    if (nf_admission_active())
        nf_comm_get(MPI_COMM_WORLD); /* compares policy hashes across ranks now */
    nf_inside = 0;
}

NF_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        nf_shim_after_init();
    return rc;
}

NF_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        nf_shim_after_init();
    return rc;
}

NF_EXPORT int MPI_Finalize(void)
{
    const char *dest = nf_shim_on ? nf_admission_stats_dest() : NULL;
    if (dest != NULL) {
        nf_inside = 1;
        nf_stats_report(MPI_COMM_WORLD, dest);
        nf_inside = 0;
    }
    return PMPI_Finalize();
}

NF_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (!nf_shim_on || nf_inside)
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    nf_inside = 1;
    int rc = NF_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    if (rc == MPI_ERR_COUNT || rc == MPI_ERR_BUFFER || rc == MPI_ERR_COMM) {
        /* Bad arguments: let MPI report them through the error handler. */
        rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    nf_inside = 0;
    return rc;
}
