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
#include "nf_export.h"

/* Set while libnfcoll runs a call on this thread: an MPI_Allreduce reached
 * from inside (a tool stacked under us) goes straight to PMPI. */
static __thread int nf_inside;
static int nf_shim_on;    /* some rank asked for a policy, a trace, stats or require */
static int nf_shim_stats; /* some rank asked for stats: all take part in the report */

/* Whether any rank asked for anything (NFCOLL_POLICY, NFCOLL_TRACE,
 * NFCOLL_STATS, NFCOLL_CXL=require). Agreed, so that a setting or file
 * present on some ranks only cannot make them take different paths. */
static int nf_shim_wanted(const nf_settings_t *s)
{
    int want = s->policy != NULL || s->trace != NULL || s->stats != NULL ||
               s->cxl == NF_CXL_REQUIRE, any = 0;
    if (PMPI_Allreduce(&want, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 0;
    return any;
}

/* After PMPI_Init: two small allreduces on MPI_COMM_WORLD, then nothing
 * until the first MPI_Allreduce. Without any NFCOLL_* request anywhere,
 * libnfcoll stays invisible (no topology load, no output). */
static void nf_shim_after_init(void)
{
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    nf_log_set_rank(rank);
    const nf_settings_t *s = nf_settings_load();
    if (!nf_shim_wanted(s))
        return;
    nf_inside = 1;
    nf_status_t st = nf_init();
    int mine[3] = {st != NF_OK, s->cxl == NF_CXL_REQUIRE,
                   nf_admission_stats_dest() != NULL}, all[3] = {1, 0, 0};
    PMPI_Allreduce(mine, all, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all[0] && all[1]) {
        if (rank == 0)
            nf_log_error("NFCOLL_CXL=require could not be met on every rank (see above); "
                         "aborting");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    nf_g.disabled = all[0]; /* one rank without libnfcoll means none uses it */
    nf_admission_engage();
    nf_shim_stats = all[2];
    nf_shim_on = 1;
    if (!nf_g.disabled && nf_admission_engaged())
        nf_comm_get(MPI_COMM_WORLD); /* policies are compared across ranks now */
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
    if (nf_shim_on && nf_shim_stats) { /* collective: every rank agreed at init */
        nf_inside = 1;
        nf_stats_report(MPI_COMM_WORLD, nf_admission_stats_dest());
        nf_inside = 0;
    }
    return PMPI_Finalize();
}

/* Outside the fast path so that MPI_Allreduce without libnfcoll engaged is
 * a load, a test and a jump to PMPI_Allreduce (no frame, no TLS lookup). */
static __attribute__((noinline)) int nf_shim_allreduce(const void *sendbuf, void *recvbuf,
                                                       int count, MPI_Datatype datatype,
                                                       MPI_Op op, MPI_Comm comm)
{
    if (nf_inside)
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

NF_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (__builtin_expect(!nf_shim_on, 1))
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return nf_shim_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
